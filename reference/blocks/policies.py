"""Named behaviour policies: where two pinned vLLM releases manage V1 pages differently.

The reference implements one V1 page manager. Where vLLM v0.10.2 and v0.33.0 disagree about an
*observable* detail (which block is reused next, what bytes a hash has, which call is refused),
the difference is not hidden behind a version check scattered through the code: it is a field of
:class:`V1Policy`, and the caller picks a whole policy explicitly, usually one of the two
instances below. Each field's comment names the upstream file and lines that define the
behaviour, so a reader can check the claim against the pinned sources.

Differences that have no observable effect on block ids, order, reference counts, hashes or
return values (for example the internal shape of the prefix-cache map, or which argument
``remove_skipped_blocks`` receives when the request holds no blocks yet) are not fields.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


LORA_EXTRA_KEYS = ("int_id", "name", "tagged")


@dataclass(frozen=True)
class V1Policy:
    """One release's choices on the points where V1 page management changed."""

    name: str

    # Where a freed block whose reference count drops to zero goes when it carries no hash
    # (or prefix caching is off). True: to the *front* of the free queue, so it is reused
    # first (LIFO, "better GPU locality"); hashed blocks still go to the tail (LRU).
    # False: every freed block is appended to the tail in the given order.
    #   v0.33.0 vllm/v1/core/block_pool.py:816-849 (free_blocks: prepend_n / append_n)
    #   v0.10.2 vllm/v1/core/block_pool.py:252-267 (free_blocks: append_n of all)
    free_hashless_blocks_to_front: bool

    # The same choice made by the sliding-window manager alone (v0.23.0): when it releases
    # out-of-window blocks or frees a request, hashless blocks go to the front of the free queue
    # and hashed ones to the tail, while the full-attention manager still appends everything.
    # From v0.24.0 free_hashless_blocks_to_front makes every path do it.
    #   v0.23.0 vllm/v1/core/single_type_kv_cache_manager.py:497-501 (remove_skipped_blocks),
    #           751-765 (SlidingWindowManager.free); block_pool.py:419-440 (free_blocks(prepend))
    #   v0.22.1: absent (free_blocks has no prepend argument)
    sliding_window_frees_hashless_to_front: bool

    # Whether the null block's reference count moves. In v0.10.2 ``touch`` increments it for
    # the leading null blocks of a sliding-window hit and ``free_blocks`` decrements it when a
    # request holding null blocks is freed (it is never queued), so the count drifts, even
    # below zero. v0.33.0 skips the null block in both and trims leading nulls before freeing.
    #   v0.10.2 vllm/v1/core/block_pool.py:236-250 (touch), 252-267 (free_blocks)
    #   v0.33.0 vllm/v1/core/block_pool.py:792-810 (touch: `if block.is_null: continue`),
    #           816-831 (free_blocks skips null), single_type_kv_cache_manager.py:571-589
    null_block_ref_counted: bool

    # Whether a prefix hit's skipped head is touched. A sliding-window hit starts with null
    # entries for the blocks already outside the window. True (v0.10.2 .. v0.13.0): the manager
    # touches every hit block, those leading nulls included, so (where the null block is counted)
    # a hit raises its count. False (from v0.14.0): the per-group manager first slices the
    # skipped head off the hit (``num_skipped_tokens // block_size`` entries), touches the rest,
    # and pads the table with that many nulls untouched, so a hit leaves the null count alone
    # while a later free still counts each padded null down.
    #   v0.10.2 vllm/v1/core/kv_cache_manager.py:276 (touch of the whole hit)
    #   v0.13.0 vllm/v1/core/kv_cache_manager.py:293 (the same)
    #   v0.14.0 vllm/v1/core/single_type_kv_cache_manager.py:166-179 (slice, then touch)
    #   v0.20.2 vllm/v1/core/single_type_kv_cache_manager.py:204-218 (the same)
    hit_touches_skipped_nulls: bool

    # The seed of NONE_HASH (the parent hash of every first block) when PYTHONHASHSEED is unset.
    # A string: NONE_HASH = hash_fn(seed), the same in every process (v0.33.0 uses
    # "vllm-none-hash" for the sha256 family). None: NONE_HASH is 32 fresh random bytes used
    # *raw*, not hashed (v0.10.2). With PYTHONHASHSEED set, both use hash_fn(PYTHONHASHSEED).
    #   v0.33.0 vllm/v1/core/kv_cache_utils.py:104-158 (DEFAULT_NONE_HASH_SEED, init_none_hash)
    #   v0.10.2 vllm/v1/core/kv_cache_utils.py:76-93 (init_none_hash)
    none_hash_default_seed: str | None

    # How the cache salt enters a block hash. True ("tagged"): ("cache_salt", salt). False
    # ("bare"): the bare string. It follows the LoRA key (see ``lora_extra_key``) in both.
    #   v0.33.0 vllm/v1/core/kv_cache_utils.py:637-675; v0.31.0 kv_cache_utils.py:614-637
    #   v0.10.2 vllm/v1/core/kv_cache_utils.py:494-536
    tagged_extra_keys: bool

    # What a LoRA adapter contributes to a block hash's extra keys. "int_id": its integer id
    # (lora_int_id); "name": its name (lora_name); "tagged": ("lora", name, path).
    #   v0.10.2 vllm/v1/core/kv_cache_utils.py:494-506 (lora_int_id); v0.11.0 the same
    #   v0.11.1 vllm/v1/core/kv_cache_utils.py:450-462 (lora_name), through v0.30.0
    #   v0.31.0 vllm/v1/core/kv_cache_utils.py:567-584 (("lora", name, path))
    lora_extra_key: str

    # Whether allocate_slots accepts num_new_tokens == 0 when a prefix hit is being adopted
    # (num_new_computed_tokens > 0). v0.10.2 refuses every zero-token call.
    #   v0.33.0 vllm/v1/core/kv_cache_manager.py:480-490
    #   v0.10.2 vllm/v1/core/kv_cache_manager.py:237-238
    zero_token_hit_adoption: bool

    # Whether the manager has an admission watermark: int(watermark * num_blocks) blocks kept
    # free when a WAITING or PREEMPTED request is allocated while others are scheduled.
    #   v0.33.0 vllm/v1/core/kv_cache_manager.py:207-210, 518-525, 583-588
    #   v0.10.2: absent (KVCacheManager.__init__ has no watermark argument)
    watermark_supported: bool

    # Whether the pool can drop chosen blocks from the prefix cache (evict_blocks(ids)).
    #   v0.33.0 vllm/v1/core/block_pool.py:851-869; v0.10.2: absent
    evict_blocks_supported: bool

    # Whether BlockPool.cache_full_blocks skips the null block. False (v0.10.2): when a
    # sliding-window table is cached after a delay (delay_cache_blocks=True, then a later
    # allocation), the null blocks that replaced its out-of-window entries are given the
    # request's hashes and entered in the prefix-cache map like any block.
    #   v0.10.2 vllm/v1/core/block_pool.py:135-143 (no is_null check in the loop)
    #   v0.33.0 vllm/v1/core/block_pool.py:277-282 (`if blk.is_null ...: continue`)
    cache_full_blocks_skips_null: bool

    # Which layouts of several KV-cache groups the manager accepts with prefix caching on.
    # False (v0.10.2): the hybrid coordinator needs exactly one kind of full-attention group
    # and exactly one other kind, with the full-attention group ids not interleaved with the
    # others ([full, sw] and [sw, full, full] pass; [sw, sw] and [sw, full, sw] are refused at
    # construction). True: any layout (v0.33.0 accepts [sw, sw] and [sw, full, sw]).
    #   v0.10.2 vllm/v1/core/kv_cache_coordinator.py:300-322 (the two kinds), 338-348
    #   (interleaving); 422-435 (only the hybrid coordinator checks: one group, or caching off,
    #   is never refused). Lifted in v0.14.0: its verify_and_split_kv_cache_groups
    #   (kv_cache_coordinator.py:395) has neither check; v0.13.0 still has both (found by
    #   reading each release's wheel, after the lockstep machine hit the refusal at v0.10.2).
    hybrid_groups_any_layout: bool

    # Whether the unrestricted hybrid coordinator (v0.14.0 .. v0.28.0) still asserts at
    # construction that the groups hold at least two distinct specs, so several groups with one
    # spec ([sw, sw] of one window, [full, full]) are refused with prefix caching on. v0.29.0
    # dropped the assertion. (Where hybrid_groups_any_layout is false the stricter check decides.)
    #   v0.14.0 vllm/v1/core/kv_cache_coordinator.py:419-421; v0.28.0 kv_cache_coordinator.py:682-684
    #   v0.29.0: absent from kv_cache_coordinator.py
    hybrid_needs_distinct_specs: bool

    # Whether several KV-cache groups are checked for an accepted layout with prefix caching off
    # too. True (v0.9.2): the hybrid coordinator serves every manager of several groups, so its
    # layout checks (hybrid_groups_any_layout) run whether or not caching is on. False (from
    # v0.10.0): with caching off a coordinator without prefix caching takes any groups.
    #   v0.9.2 vllm/v1/core/kv_cache_coordinator.py:358-369 (unitary or hybrid, nothing else)
    #   v0.10.0 vllm/v1/core/kv_cache_coordinator.py:174, 391-393 (KVCacheCoordinatorNoPrefixCache)
    hybrid_layout_checked_without_caching: bool

    # Where a request's block hashes are computed. True (from v0.10.1): the Request computes
    # them itself when it is created and as its tokens grow (its block_hasher), so a lookup
    # sees a hash for every full block. False (before): the manager computes them on the
    # request's first prefix-cache lookup (only if it has none yet) and extends the list as
    # blocks are cached; tokens appended later get no hash until their block is cached, so a
    # preempted request re-admitted with such tokens finds a shorter hit. The list is kept across
    # preemption and dropped when the request finishes (free_block_hashes).
    #   v0.9.2 vllm/v1/core/kv_cache_manager.py:112-114, 158-163 (hash on first lookup)
    #   v0.9.2 vllm/v1/core/kv_cache_manager.py:367-373 (free_block_hashes)
    #   v0.9.2 vllm/v1/core/block_pool.py:147-177 (cache_full_blocks extends it)
    #   v0.10.1 vllm/v1/request.py:41, 120-121 (block_hasher)
    hashes_on_request: bool

    # The form of a block hash. True (before v0.10.2): a BlockHash(hash_value: int, token_ids,
    # extra_keys) keyed in the pool as (BlockHash, group id); the digest is int.from_bytes of the
    # pickle's SHA-256 ("sha256") or Python's builtin hash ("builtin"), and NONE_HASH is an int.
    # False (from v0.10.2): raw digest bytes, the group id appended as 4 bytes, and the hash
    # functions "sha256" and "sha256_cbor".
    #   v0.9.2 vllm/v1/core/kv_cache_utils.py:23-46 (BlockHash, BlockHashWithGroupId)
    #   v0.9.2 vllm/v1/core/kv_cache_utils.py:414-443 (hash_block_tokens)
    #   v0.9.2 vllm/v1/core/kv_cache_manager.py:82 (sha256 or hash)
    #   v0.10.2 vllm/v1/core/kv_cache_utils.py:79-93 (bytes NONE_HASH), 539 (hash_block_tokens)
    int_block_hashes: bool

    # When NONE_HASH is set. True (v0.9.2): once, when kv_cache_utils is imported, from
    # os.urandom or, with PYTHONHASHSEED set, sha256(PYTHONHASHSEED) whatever hash function the
    # manager uses (so "builtin" chains start from a SHA-256 seed). False (from v0.10.0):
    # init_none_hash(hash_fn) at manager construction, hash_fn(PYTHONHASHSEED).
    #   v0.9.2 vllm/v1/core/kv_cache_utils.py:59-60
    #   v0.10.0 vllm/v1/core/kv_cache_utils.py:61-73 (init_none_hash)
    none_hash_at_import: bool

    # What the pool's usage fraction divides by. True (from v0.10.2): the usable blocks, the null
    # block left out, so an idle pool reports 0. False (before): all blocks, so the null block
    # (never free) counts as used and an idle pool of N blocks reports 1/N.
    #   v0.10.2 vllm/v1/core/block_pool.py:307-318 ("Subtract 1 to account for null block")
    #   v0.9.2 vllm/v1/core/block_pool.py:331-337
    #   v0.10.1 vllm/v1/core/block_pool.py:295-301
    usage_excludes_null_block: bool

    # With prefix caching off, where freed blocks go when hashless blocks go to the front
    # (free_hashless_blocks_to_front). True: to the front like any hashless block (LIFO reuse).
    # False (v0.27.0 and v0.27.1 only): all to the tail, in the order given.
    #   v0.27.0 vllm/v1/core/block_pool.py:719-742 (`block.block_hash is None and self.enable_caching`)
    #   v0.26.0 vllm/v1/core/block_pool.py:719-740 (`if block.block_hash is None`)
    #   v0.28.0 vllm/v1/core/block_pool.py:719-743 (`block.block_hash is None or not self.enable_caching`)
    caching_off_frees_to_front: bool

    # Whether the manager takes one KV-cache group only. True (before v0.9.1): KVCacheManager
    # asserts a single group at construction, caching on or off; there is no coordinator.
    #   v0.8.5.post1 vllm/v1/core/kv_cache_manager.py:31-33; v0.9.0 vllm/v1/core/kv_cache_manager.py:65-67
    #   v0.9.1 vllm/v1/core/kv_cache_coordinator.py (a coordinator for one or several groups)
    single_kv_cache_group: bool

    # Whether the pool keys a hash together with its group id. False (before v0.9.1): the key,
    # and a cached block's hash, is the bare block hash.
    #   v0.8.5.post1 vllm/v1/core/block_pool.py:51-52; v0.9.0 vllm/v1/core/block_pool.py:58-59
    #   v0.9.1 vllm/v1/core/block_pool.py:60-61 (BlockHashWithGroupId)
    pool_key_has_group_id: bool

    # Whether the admission check counts null entries of a hit as blocks to revive. True (before
    # v0.9.1): every hit block with ref_cnt == 0 counts, the null block included (its count is
    # 0 unless hits hold it), so a sliding-window hit asks for one more free block per such null.
    #   v0.8.5.post1 vllm/v1/core/kv_cache_manager.py:226-234
    #   v0.9.0 vllm/v1/core/single_type_kv_cache_manager.py:85-86
    #   v0.9.1 vllm/v1/core/single_type_kv_cache_manager.py:81 (`and not blk.is_null`)
    admission_counts_null_blocks: bool

    # Whether a request's blocks are freed tail first when prefix caching is off too. False
    # (before v0.9.0): with caching off they are freed in table order.
    #   v0.8.5.post1 vllm/v1/core/kv_cache_manager.py:305-310
    #   v0.9.0 vllm/v1/core/single_type_kv_cache_manager.py:168 (always reversed)
    free_reversed_without_caching: bool

    # Whether lookahead slots past max_model_len are capped before the admission check. False
    # (before v0.9.0): the check asks for cdiv(computed + new + lookahead, block_size) blocks,
    # uncapped, and only the allocation itself is clamped to cdiv(max_model_len, block_size).
    #   v0.8.5.post1 vllm/v1/core/kv_cache_manager.py:218-234, 255-263
    #   v0.9.0 vllm/v1/core/kv_cache_manager.py:237-239 (min(..., self.max_model_len))
    lookahead_capped_at_admission: bool

    # Whether allocate_slots takes delay_cache_blocks (P/D: allocate now, cache later).
    #   v0.8.5.post1 vllm/v1/core/kv_cache_manager.py:164-170 (no such argument)
    #   v0.9.0 vllm/v1/core/kv_cache_manager.py:179
    delay_cache_blocks_supported: bool

    # Whether a request can carry a cache salt (mixed into its first block's hash).
    #   v0.8.5.post1 vllm/v1/core/kv_cache_utils.py:276-278, 380-384 (LoRA and multimodal keys only)
    #   v0.9.0 vllm/v1/core/kv_cache_utils.py:386-389
    cache_salt_supported: bool

    def __post_init__(self) -> None:
        if self.lora_extra_key not in LORA_EXTRA_KEYS:
            raise ValueError(f"lora_extra_key must be one of {LORA_EXTRA_KEYS}, not {self.lora_extra_key!r}")


# The fields that tell releases before 0.10.2 (or 0.27.x) apart, as every other policy has them.
_AS_FROM_0_10_2 = dict(
    hybrid_layout_checked_without_caching=False,
    hashes_on_request=True,
    int_block_hashes=False,
    none_hash_at_import=False,
    usage_excludes_null_block=True,
    caching_off_frees_to_front=True,
    single_kv_cache_group=False,
    pool_key_has_group_id=True,
    admission_counts_null_blocks=False,
    free_reversed_without_caching=True,
    lookahead_capped_at_admission=True,
    delay_cache_blocks_supported=True,
    cache_salt_supported=True,
)

V1_V0_33_0 = V1Policy(
    name="v0.33.0",
    free_hashless_blocks_to_front=True,
    sliding_window_frees_hashless_to_front=True,
    null_block_ref_counted=False,
    hit_touches_skipped_nulls=False,
    none_hash_default_seed="vllm-none-hash",
    tagged_extra_keys=True,
    lora_extra_key="tagged",
    zero_token_hit_adoption=True,
    watermark_supported=True,
    evict_blocks_supported=True,
    cache_full_blocks_skips_null=True,
    hybrid_groups_any_layout=True,
    hybrid_needs_distinct_specs=False,
    **_AS_FROM_0_10_2,
)

V1_V0_10_2 = V1Policy(
    name="v0.10.2",
    free_hashless_blocks_to_front=False,
    sliding_window_frees_hashless_to_front=False,
    null_block_ref_counted=True,
    hit_touches_skipped_nulls=True,
    none_hash_default_seed=None,
    tagged_extra_keys=False,
    lora_extra_key="int_id",
    zero_token_hit_adoption=False,
    watermark_supported=False,
    evict_blocks_supported=False,
    cache_full_blocks_skips_null=False,
    hybrid_groups_any_layout=False,
    hybrid_needs_distinct_specs=False,
    **_AS_FROM_0_10_2,
)

# vLLM 0.9.2: v0.10.2's choices on everything the two share, with the pre-0.10 hashing (int
# hashes that carry their tokens, computed by the manager on the first lookup, NONE_HASH set at
# import), the hybrid coordinator's layout checks applied with caching off too, and a usage
# fraction that counts the null block as used.
V1_V0_9_2 = replace(V1_V0_10_2, name="v0.9.2", hybrid_layout_checked_without_caching=True,
                    hashes_on_request=False, int_block_hashes=True, none_hash_at_import=True,
                    usage_excludes_null_block=False)

# vLLM 0.8.5 and 0.8.5.post1: v0.9.2's choices and, from before the coordinator, one KV-cache
# group keyed without a group id, null hit entries counted at admission, tables freed in order
# with caching off, lookahead uncapped at admission, no delayed caching and no cache salt.
V1_V0_8_5 = replace(V1_V0_9_2, name="v0.8.5", single_kv_cache_group=True, pool_key_has_group_id=False,
                    admission_counts_null_blocks=True, free_reversed_without_caching=False,
                    lookahead_capped_at_admission=False, delay_cache_blocks_supported=False,
                    cache_salt_supported=False)

# vLLM 0.14.1 .. 0.22.1 (measured at v0.20.2): v0.10.2's choices except these.
#   evict_blocks_supported: BlockPool.evict_blocks exists from v0.13.0
#     (v0.13.0 vllm/v1/core/block_pool.py:400-417; v0.20.2 block_pool.py:424-441);
#   cache_full_blocks_skips_null: from v0.14.0 (v0.14.0 vllm/v1/core/block_pool.py:259;
#     v0.20.2 block_pool.py:262 `if blk.is_null: continue`).
#   lora_extra_key = "name": a LoRA adapter enters block hashes by name from v0.11.1
#     (v0.11.1 vllm/v1/core/kv_cache_utils.py:450-462; v0.20.2 the same function), found by
#     the v1.lifecycle machine at v0.20.2 (hashes differed under v0.10.2's "int_id").
# Still as v0.10.2: freed blocks all go to the tail (prepend_n arrives in v0.23.0), the null
# block is counted (free_blocks counts each null entry of a freed table down:
# v0.20.2 vllm/v1/core/block_pool.py:408-422 has no null skip), a random raw NONE_HASH, bare extra keys,
# and every zero-token allocation refused (v0.20.2 vllm/v1/core/kv_cache_manager.py:349-353).
#   hit_touches_skipped_nulls = False: a sliding-window hit's skipped head is sliced off before
#     touch (from v0.14.0; v0.20.2 vllm/v1/core/single_type_kv_cache_manager.py:204-218), so a hit
#     leaves the null count alone and a free counts it down. Found by v1.sliding_window at 0.20.2:
#     under v0.10.2's touch of the whole hit it diverged at /blocks[0][0] (reference 1, vLLM 0);
#     with null_block_ref_counted = False instead it diverged at the free.
#   hybrid_groups_any_layout (from v0.14.0, above) but hybrid_needs_distinct_specs: several groups
#     of one spec are still refused (v0.20.2 vllm/v1/core/kv_cache_coordinator.py:460-462), found by
#     v1.sliding_window at 0.20.2 drawing [sw, sw] (a harness error until the field existed).
V1_V0_20_2 = V1Policy(
    name="v0.20.2",
    free_hashless_blocks_to_front=False,
    sliding_window_frees_hashless_to_front=False,
    null_block_ref_counted=True,
    hit_touches_skipped_nulls=False,
    none_hash_default_seed=None,
    tagged_extra_keys=False,
    lora_extra_key="name",
    zero_token_hit_adoption=False,
    watermark_supported=False,
    evict_blocks_supported=True,
    cache_full_blocks_skips_null=True,
    hybrid_groups_any_layout=True,
    hybrid_needs_distinct_specs=True,
    **_AS_FROM_0_10_2,
)

# The releases between the pins, each the nearest measured policy with the fields that the
# release's sources show changed (V1_FIELD_HISTORY gives the first release and lines of each).
# vLLM 0.11.2 and 0.12.0: v0.10.2 with LoRA keyed by name (from v0.11.1).
V1_V0_12_0 = replace(V1_V0_10_2, name="v0.12.0", lora_extra_key="name")
# vLLM 0.13.0: evict_blocks appears.
V1_V0_13_0 = replace(V1_V0_12_0, name="v0.13.0", evict_blocks_supported=True)
# vLLM 0.23.0: the sliding-window manager (only) frees hashless blocks to the front.
V1_V0_23_0 = replace(V1_V0_20_2, name="v0.23.0", sliding_window_frees_hashless_to_front=True)
# vLLM 0.24.0 .. 0.28.0: hashless freed blocks to the front on every path; the admission watermark.
V1_V0_24_0 = replace(V1_V0_23_0, name="v0.24.0", free_hashless_blocks_to_front=True, watermark_supported=True)
# vLLM 0.27.0 and 0.27.1: with prefix caching off, freed blocks all go to the tail (0.28.0 puts
# them back at the front). Found by v1.lifecycle at 0.27.1 under v0.24.0's choices.
V1_V0_27_1 = replace(V1_V0_24_0, name="v0.27.1", caching_off_frees_to_front=False)
# vLLM 0.29.0 and 0.30.0: the fixed NONE_HASH seed; several groups of one spec accepted.
V1_V0_29_0 = replace(V1_V0_24_0, name="v0.29.0", none_hash_default_seed="vllm-none-hash",
                     hybrid_needs_distinct_specs=False)
# vLLM 0.31.0 and 0.32.0: tagged extra keys, zero-token hit adoption.
V1_V0_31_0 = replace(V1_V0_29_0, name="v0.31.0", tagged_extra_keys=True, lora_extra_key="tagged",
                     zero_token_hit_adoption=True)

# vLLM 0.32.0: v0.31.0's choices. (An earlier matrix run modelled 0.32.0 as not counting the
# null block at all: under v0.31.0's choices as they then stood, with the whole hit touched, it
# diverged at a hit, and the one field that existed made the hit pass. The free-time count-down
# that 0.32.0's sources still do (v0.32.0 vllm/v1/core/block_pool.py:774-791, no null skip) was
# not drawn in that run; hit_touches_skipped_nulls = False is what 0.32.0's sources do.)
V1_V0_32_0 = replace(V1_V0_31_0, name="v0.32.0")

V1_POLICIES: dict[str, V1Policy] = {p.name: p for p in (
    V1_V0_33_0, V1_V0_32_0, V1_V0_31_0, V1_V0_29_0, V1_V0_27_1, V1_V0_24_0, V1_V0_23_0, V1_V0_20_2, V1_V0_13_0, V1_V0_12_0, V1_V0_10_2, V1_V0_9_2, V1_V0_8_5)}


@dataclass(frozen=True)
class FieldChange:
    """When one policy field's behaviour changed in vLLM, in our words, with the upstream lines.

    ``first`` is the first release (patch level, found by reading each release's sources and
    confirmed where a matrix run measured it) whose value is ``value_from``; every release
    before it in the V1 range has the other value.
    """

    field: str
    first: str
    value_from: object
    what: str
    why: str
    upstream: str
    # Annotation notes that discuss the behaviour: "v<version>/<upstream path>#<note id>".
    notes: tuple[str, ...] = ()


V1_FIELD_HISTORY: tuple[FieldChange, ...] = (
    FieldChange(
        "single_kv_cache_group", "0.9.1", False,
        "a KV-cache coordinator lets one manager serve several KV-cache groups (full attention "
        "beside sliding windows); before, the manager asserted exactly one group.",
        "hybrid models (sliding-window layers interleaved with full attention) need one page table "
        "per kind of layer, all fed from one block pool.",
        "v0.9.1 vllm/v1/core/kv_cache_coordinator.py; before: "
        "v0.9.0 vllm/v1/core/kv_cache_manager.py:65-67, "
        "v0.8.5.post1 vllm/v1/core/kv_cache_manager.py:31-33",
        ("v0.33.0/vllm/v1/core/kv_cache_coordinator.py#kv_cache_coordinator.factory",)),
    FieldChange(
        "pool_key_has_group_id", "0.9.1", True,
        "the prefix-cache map keys a hash together with its KV-cache group id.",
        "with several groups sharing one pool, the same prefix is cached once per group, in "
        "different blocks; the key must tell them apart.",
        "v0.9.1 vllm/v1/core/block_pool.py:60-61; before: v0.9.0 vllm/v1/core/block_pool.py:58-59",
        ("v0.33.0/vllm/v1/core/kv_cache_utils.py#kv_cache_utils.group_id_packing",)),
    FieldChange(
        "admission_counts_null_blocks", "0.9.1", False,
        "the admission check no longer counts null entries of a hit as blocks it must take from "
        "the free queue.",
        "the null block is never in the free queue, so counting it refused allocations the pool "
        "could serve.",
        "v0.9.1 vllm/v1/core/single_type_kv_cache_manager.py:81; before: "
        "v0.9.0 vllm/v1/core/single_type_kv_cache_manager.py:85-86",
        ("v0.33.0/vllm/v1/core/single_type_kv_cache_manager.py#single_type_kv_cache_manager.base.get_num_blocks_to_allocate",)),
    FieldChange(
        "free_reversed_without_caching", "0.9.0", True,
        "a request's blocks are freed tail first with prefix caching off too (before, in table "
        "order when caching was off).",
        "one free path for both settings; the order matters for eviction only with caching on.",
        "v0.9.0 vllm/v1/core/single_type_kv_cache_manager.py:168; before: "
        "v0.8.5.post1 vllm/v1/core/kv_cache_manager.py:305-310",
        ("v0.33.0/vllm/v1/core/single_type_kv_cache_manager.py#single_type_kv_cache_manager.base.free",)),
    FieldChange(
        "lookahead_capped_at_admission", "0.9.0", True,
        "the slots asked for (computed + new + lookahead tokens) are capped at max_model_len before "
        "the admission check, not only when the blocks are taken.",
        "speculative slots past the model's length are never used; counting them refused "
        "allocations near the end of a request.",
        "v0.9.0 vllm/v1/core/kv_cache_manager.py:237-239; before: "
        "v0.8.5.post1 vllm/v1/core/kv_cache_manager.py:218-234",
        ("v0.33.0/vllm/v1/core/kv_cache_manager.py#kv_cache_manager.allocate_slots",)),
    FieldChange(
        "delay_cache_blocks_supported", "0.9.0", True,
        "allocate_slots takes delay_cache_blocks: blocks are allocated now and cached when their "
        "KV arrives.",
        "with disaggregated prefill a request's KV is received from another instance; its blocks "
        "must not be offered as prefix hits before the transfer completes.",
        "v0.9.0 vllm/v1/core/kv_cache_manager.py:179; before: "
        "v0.8.5.post1 vllm/v1/core/kv_cache_manager.py:164-170",
        ("v0.33.0/vllm/v1/core/kv_cache_manager.py#kv_cache_manager.allocate_slots",)),
    FieldChange(
        "cache_salt_supported", "0.9.0", True,
        "a request may carry a cache salt, mixed into the extra keys of its first block.",
        "tenants sharing a server must not learn from prefix hits which prompts others sent.",
        "v0.9.0 vllm/v1/core/kv_cache_utils.py:386-389; before: "
        "v0.8.5.post1 vllm/v1/core/kv_cache_utils.py:276-278",
        ("v0.33.0/vllm/v1/core/kv_cache_utils.py#kv_cache_utils.generate_block_hash_extra_keys",)),
    FieldChange(
        "caching_off_frees_to_front", "0.27.0", False,
        "with prefix caching off, free_blocks appends every freed block to the tail of the free "
        "queue instead of putting it at the front with the other hashless blocks.",
        "the change's own comment says it appends for better GPU cache locality; the next "
        "release undid it.",
        "v0.27.0 vllm/v1/core/block_pool.py:719-742; before: "
        "v0.26.0 vllm/v1/core/block_pool.py:719-740",
        ("v0.33.0/vllm/v1/core/block_pool.py#block_pool.free_blocks",)),
    FieldChange(
        "caching_off_frees_to_front", "0.28.0", True,
        "with prefix caching off, freed blocks go to the front of the free queue again (reused "
        "first, LIFO).",
        "reusing the most recently freed blocks first is what gives the locality the 0.27 change "
        "was after; appending them reused the oldest ones.",
        "v0.28.0 vllm/v1/core/block_pool.py:719-743 (`or not self.enable_caching`)",
        ("v0.33.0/vllm/v1/core/block_pool.py#block_pool.free_blocks",)),
    FieldChange(
        "usage_excludes_null_block", "0.10.2", True,
        "the KV-cache usage fraction leaves the null block out: 1 - free / (blocks - 1), so an "
        "idle pool reports 0 instead of 1 / blocks.",
        "the null block is a placeholder that can never hold a request's tokens; counting it made "
        "an empty cache look slightly used.",
        "v0.10.2 vllm/v1/core/block_pool.py:307-318; before: "
        "v0.10.1 vllm/v1/core/block_pool.py:295-301, "
        "v0.9.2 vllm/v1/core/block_pool.py:331-337",
        ("v0.33.0/vllm/v1/core/block_pool.py#block_pool.num_free_and_usage",)),
    FieldChange(
        "none_hash_at_import", "0.10.0", False,
        "NONE_HASH, the parent of every first block, is set by init_none_hash(hash_fn) when the "
        "manager is built, from hash_fn(PYTHONHASHSEED), instead of once at import with sha256.",
        "the seed should come from the hash function the cache actually uses, and a module-level "
        "random value fixed at import could not follow the configured hash.",
        "v0.10.0 vllm/v1/core/kv_cache_utils.py:61-73 (init_none_hash); before: "
        "v0.9.2 vllm/v1/core/kv_cache_utils.py:59-60 (NONE_HASH at import)",
        ("v0.33.0/vllm/v1/core/kv_cache_utils.py#kv_cache_utils.none_hash",)),
    FieldChange(
        "hybrid_layout_checked_without_caching", "0.10.0", False,
        "with prefix caching off, several KV-cache groups are served by a coordinator without "
        "prefix caching, which accepts any layout; before, the hybrid coordinator (and its layout "
        "assertions) served them whether caching was on or not.",
        "the layout rules exist only to merge prefix-cache hits across groups; a model served "
        "without prefix caching need not satisfy them.",
        "v0.10.0 vllm/v1/core/kv_cache_coordinator.py:174, 391-393 (KVCacheCoordinatorNoPrefixCache); "
        "before: v0.9.2 vllm/v1/core/kv_cache_coordinator.py:358-369",
        ("v0.33.0/vllm/v1/core/kv_cache_coordinator.py#kv_cache_coordinator.no_prefix_cache",)),
    FieldChange(
        "hashes_on_request", "0.10.1", True,
        "a request's block hashes are computed by the request itself, when it is created and as "
        "tokens are appended (its block_hasher), instead of by the manager on the request's "
        "first prefix-cache lookup and then only as blocks are cached.",
        "one hash list per request, always complete, serves every consumer (the manager, KV "
        "connectors, the scheduler) and no longer depends on when the manager last looked: a "
        "preempted request whose appended tokens were never cached now finds their blocks too.",
        "v0.10.1 vllm/v1/request.py:41, 120-121 (block_hasher); before: "
        "v0.9.2 vllm/v1/core/kv_cache_manager.py:112-114, 158-163, 367-373, "
        "v0.9.2 vllm/v1/core/block_pool.py:147-177",
        ("v0.33.0/vllm/v1/core/kv_cache_utils.py#kv_cache_utils.request_block_hasher",)),
    FieldChange(
        "int_block_hashes", "0.10.2", False,
        "a block hash is the raw digest bytes (the group id appended as 4 bytes in the pool key) "
        "instead of a BlockHash(int digest, token ids, extra keys) tuple keyed with its group id; "
        "Python's builtin hash is no longer offered.",
        "a tuple carrying every token id costs memory per cached block; with SHA-256 a collision "
        "guard is not needed, and bytes keys are compact and the same in every process.",
        "v0.10.2 vllm/v1/core/kv_cache_utils.py:79-93, 539, "
        "v0.10.2 vllm/config/cache.py:27 (sha256 and sha256_cbor); before: "
        "v0.10.1 vllm/v1/core/kv_cache_utils.py:24-47 (BlockHash, BlockHashWithGroupId), "
        "v0.10.1 vllm/config/cache.py:27 (builtin, the default, sha256, sha256_cbor_64bit), "
        "v0.9.2 vllm/v1/core/kv_cache_utils.py:23-46",
        ("v0.33.0/vllm/v1/core/kv_cache_utils.py#kv_cache_utils.hash_types",)),
    FieldChange(
        "evict_blocks_supported", "0.13.0", True,
        "BlockPool and KVCacheManager gain evict_blocks(ids): chosen blocks leave the prefix cache "
        "(their hash is dropped; a block still in use stays allocated).",
        "a KV connector that loses blocks on its side must be able to stop vLLM from serving them "
        "as prefix hits.",
        "v0.13.0 vllm/v1/core/block_pool.py:400-417, vllm/v1/core/kv_cache_manager.py:336",
        ("v0.33.0/vllm/v1/core/block_pool.py#block_pool.evict_blocks",)),
    FieldChange(
        "cache_full_blocks_skips_null", "0.14.0", True,
        "cache_full_blocks skips the null block, so a sliding-window table cached after a delay no "
        "longer gives the shared null block a hash and a prefix-cache entry.",
        "the null block stands for released out-of-window slots; caching it under a request's hash "
        "would let a later lookup hand out a block that holds nothing.",
        "v0.14.0 vllm/v1/core/block_pool.py:259 (`if blk.is_null: continue`); before: "
        "v0.13.0 block_pool.py:209-260 has no such check",
        ("v0.33.0/vllm/v1/core/block_pool.py#block_pool.cache_full_blocks",)),
    FieldChange(
        "hybrid_groups_any_layout", "0.14.0", True,
        "with prefix caching and several KV-cache groups, the coordinator no longer refuses a "
        "layout with no full-attention group, two kinds of window, or full-attention groups "
        "interleaved with the others ([sw, full, sw]).",
        "models with several kinds of local attention (and interleaved layer groups) need a "
        "prefix-cache hit computed across all of them; the old coordinator merged exactly two "
        "hit lists, one full and one other, in a fixed order.",
        "v0.14.0 vllm/v1/core/kv_cache_coordinator.py:395 (verify_and_split_kv_cache_groups, "
        "neither check); before: v0.13.0 and v0.10.2 kv_cache_coordinator.py:300-322, 338-348",
        ("v0.33.0/vllm/v1/core/kv_cache_coordinator.py#kv_cache_coordinator.hybrid.split_groups",)),
    FieldChange(
        "hybrid_needs_distinct_specs", "0.14.0", True,
        "the hybrid coordinator that accepts any layout asserts that the groups hold at least two "
        "distinct specs, so several groups of one spec are refused with prefix caching on (the "
        "stricter check before 0.14.0 refused them too).",
        "the coordinator merges hit lengths across attention types; with a single spec there is "
        "only one type, and this release asserts instead of treating it as one attention group.",
        "v0.14.0 vllm/v1/core/kv_cache_coordinator.py:419-421",
        ("v0.33.0/vllm/v1/core/kv_cache_coordinator.py#kv_cache_coordinator.hybrid.split_groups",)),
    FieldChange(
        "hybrid_needs_distinct_specs", "0.29.0", False,
        "several KV-cache groups of one spec are accepted with prefix caching on.",
        "the coordinator now only asserts that there is at least one attention group "
        "(kv_cache_coordinator.py:703), so a single spec split over several groups is one "
        "attention group like any other.",
        "v0.29.0 vllm/v1/core/kv_cache_coordinator.py:703-705 (at least one attention group); "
        "before: v0.28.0 vllm/v1/core/kv_cache_coordinator.py:682-684",
        ("v0.33.0/vllm/v1/core/kv_cache_coordinator.py#kv_cache_coordinator.hybrid.split_groups",)),
    FieldChange(
        "free_hashless_blocks_to_front", "0.24.0", True,
        "free_blocks puts freed blocks that carry no hash at the front of the free queue "
        "(prepend_n), hashed ones still at the tail, on every path (v0.23.0 did it only on the "
        "sliding-window manager's paths: sliding_window_frees_hashless_to_front).",
        "a block with no cached content is worth nothing to keep: reusing it first keeps hashed "
        "blocks (possible prefix hits) longest and reuses recently touched memory.",
        "v0.24.0 vllm/v1/core/block_pool.py:614-635 (free_blocks: prepend_n at 634); v0.23.0 "
        "block_pool.py:419-440 and single_type_kv_cache_manager.py:497-501, 764",
        ("v0.33.0/vllm/v1/core/block_pool.py#block_pool.free_blocks",)),
    FieldChange(
        "sliding_window_frees_hashless_to_front", "0.23.0", True,
        "the sliding-window manager frees out-of-window blocks and finished requests' blocks in two "
        "calls: hashed blocks to the tail of the free queue, hashless ones to the front "
        "(free_blocks(..., prepend=True)); full attention still appends everything.",
        "a released block with no hash can never be a prefix hit, so it is the best block to reuse "
        "next; a hashed one may still be hit and should be evicted last.",
        "v0.23.0 vllm/v1/core/single_type_kv_cache_manager.py:497-501, 751-765; "
        "before: v0.22.1 vllm/v1/core/block_pool.py has no prepend",
        ("v0.33.0/vllm/v1/core/block_pool.py#block_pool.free_blocks",)),
    FieldChange(
        "watermark_supported", "0.24.0", True,
        "KVCacheManager takes watermark: int(watermark * num_blocks) blocks are kept free when a "
        "waiting or preempted request is admitted while others are scheduled.",
        "admitting a new request into the last free blocks forces preemptions on the next decode "
        "steps; a reserve avoids that thrash.",
        "v0.24.0 vllm/v1/core/kv_cache_manager.py:125, 162-163, 288",
        ("v0.33.0/vllm/v1/core/kv_cache_manager.py#kv_cache_manager.init.watermark",)),
    FieldChange(
        "none_hash_default_seed", "0.29.0", "vllm-none-hash",
        "without PYTHONHASHSEED, NONE_HASH is hash_fn(\"vllm-none-hash\") instead of 32 random raw "
        "bytes, so block hashes are the same in every process.",
        "prefix-cache hits across processes (and KV transfer between them) need hashes that do not "
        "depend on a per-process random seed.",
        "v0.29.0 vllm/v1/core/kv_cache_utils.py:109 (DEFAULT_NONE_HASH_SEED), 131-147 (init_none_hash)",
        ("v0.33.0/vllm/v1/core/kv_cache_utils.py#kv_cache_utils.none_hash",)),
    FieldChange(
        "lora_extra_key", "0.11.1", "name",
        "a LoRA adapter enters a block hash by its name instead of its integer id.",
        "integer ids are assigned per process and can name different adapters in different "
        "processes; the name identifies the adapter.",
        "v0.11.1 vllm/v1/core/kv_cache_utils.py:450-462 (_gen_lora_extra_hash_keys returns "
        "lora_name); v0.11.0 kv_cache_utils.py:502-514 returns lora_int_id",
        ("v0.33.0/vllm/v1/core/kv_cache_utils.py#kv_cache_utils.lora_extra_keys",)),
    FieldChange(
        "lora_extra_key", "0.31.0", "tagged",
        "a LoRA adapter enters a block hash as (\"lora\", name, path).",
        "two adapters loaded under one name from different paths must not share cached blocks; "
        "the tag keeps the key apart from other extra keys.",
        "v0.31.0 vllm/v1/core/kv_cache_utils.py:567-584 (_gen_lora_extra_hash_keys)",
        ("v0.33.0/vllm/v1/core/kv_cache_utils.py#kv_cache_utils.lora_extra_keys",)),
    FieldChange(
        "tagged_extra_keys", "0.31.0", True,
        "the cache salt enters a block hash as (\"cache_salt\", salt) instead of the bare string.",
        "a bare salt string could equal another extra key; the tag makes it unambiguous.",
        "v0.31.0 vllm/v1/core/kv_cache_utils.py:614-637 (generate_block_hash_extra_keys)",
        ("v0.33.0/vllm/v1/core/kv_cache_utils.py#kv_cache_utils.generate_block_hash_extra_keys",)),
    FieldChange(
        "zero_token_hit_adoption", "0.31.0", True,
        "allocate_slots accepts num_new_tokens == 0 when a prefix hit is being adopted "
        "(num_new_computed_tokens > 0); earlier releases refuse every zero-token call without "
        "external tokens.",
        "a request whose whole prompt is a prefix hit still has to take ownership of the hit blocks.",
        "v0.31.0 vllm/v1/core/kv_cache_manager.py:471-479",
        ("v0.33.0/vllm/v1/core/kv_cache_manager.py#kv_cache_manager.allocate_slots.prepare",)),
    FieldChange(
        "hit_touches_skipped_nulls", "0.14.0", False,
        "a sliding-window prefix hit no longer touches its skipped head: the per-group manager "
        "slices the leading entries outside the window off the hit, touches the rest and pads the "
        "table with untouched nulls, so a hit leaves the null block's count alone (a later free "
        "still counts each null entry down).",
        "the skipped entries are nulls that the request will never read; touching them only moved "
        "a count that nothing reads.",
        "v0.14.0 vllm/v1/core/single_type_kv_cache_manager.py:166-179; before: "
        "v0.13.0 vllm/v1/core/kv_cache_manager.py:293 touches the whole hit",
        ("v0.33.0/vllm/v1/core/block_pool.py#block_pool.touch",)),
    FieldChange(
        "null_block_ref_counted", "0.33.0", False,
        "the null block's reference count no longer moves: touch and free_blocks skip it, and a "
        "freed table's leading nulls are trimmed before it is freed.",
        "the null block is never pooled; counting it was meaningless and its count drifted below "
        "zero with every freed sliding-window table.",
        "v0.33.0 vllm/v1/core/block_pool.py:792-810 (touch), 816-831 (free_blocks); "
        "before: v0.32.0 vllm/v1/core/block_pool.py:774-791 counts every freed entry down",
        ("v0.33.0/vllm/v1/core/block_pool.py#block_pool.touch",
         "v0.33.0/vllm/v1/core/block_pool.py#block_pool.free_blocks")),
)


@dataclass(frozen=True)
class V0Policy:
    """One release's choices on the points where the V0 block manager changed (0.6 .. 0.10)."""

    name: str

    # The parent hash of a sequence's first page, which is also the marker "the previous page
    # has no hash yet". True: the string hash hash('None') (from v0.7.2). A page whose previous
    # page has no hash then gets none either only if that previous hash *equals the marker*; a
    # previous page that is not full (hash None) is hashed on with None as its parent.
    # False (up to v0.7.1): None itself, so the first page hashes (True, None, *tokens, extra)
    # and any page after an unhashed one has no hash.
    #   v0.10.2 vllm/core/block/prefix_caching_block.py:893-925 (content_hash), 971-977 (tracker)
    #   v0.7.1 vllm/core/block/prefix_caching_block.py:891-904 (content_hash), 996-1012 (tracker)
    str_none_parent_hash: bool


V0_V0_10_2 = V0Policy(name="v0.10.2", str_none_parent_hash=True)
# vLLM 0.6.6.post1 (measured): v0.prefix_caching diverged on the first page's hash under
# v0.10.2's choices (its first page hashes with a None parent).
V0_V0_6_6_POST1 = V0Policy(name="v0.6.6.post1", str_none_parent_hash=False)

V0_POLICIES: dict[str, V0Policy] = {p.name: p for p in (V0_V0_10_2, V0_V0_6_6_POST1)}

V0_FIELD_HISTORY: tuple[FieldChange, ...] = (
    FieldChange(
        "str_none_parent_hash", "0.7.2", True,
        "the first page of a sequence hashes with hash('None') as its parent instead of None, and "
        "that string hash (not None) marks a previous page without a hash.",
        "from Python 3.12 hash(None) is a fixed constant, so a None parent made every first-page "
        "hash predictable (easier to aim collisions at); a string hash is randomised per process "
        "(unless PYTHONHASHSEED is set), as hash(None) was before 3.12.",
        "v0.7.2 vllm/core/block/prefix_caching_block.py:74 (_none_hash); before: "
        "v0.7.1 vllm/core/block/prefix_caching_block.py:891-904",
        ("v0.10.2/vllm/core/block/prefix_caching_block.py#prefix_caching_block.content_hash",)),
)


def v1_policy_for_version(version: str) -> V1Policy:
    """The policy that reproduces an installed vLLM release, e.g. ``"0.33.0"``."""
    key = version if version.startswith("v") else "v" + version
    try:
        return V1_POLICIES[key]
    except KeyError:
        raise KeyError(f"no V1 policy for vLLM {version!r}; known: {sorted(V1_POLICIES)}") from None


__all__ = ["V1Policy", "V1_V0_33_0", "V1_V0_32_0", "V1_V0_31_0", "V1_V0_29_0", "V1_V0_24_0", "V1_V0_23_0", "V1_V0_20_2", "V1_V0_13_0",
           "V1_V0_12_0", "V1_V0_10_2", "V1_V0_9_2", "V1_V0_8_5", "V1_V0_27_1", "V1_POLICIES", "v1_policy_for_version", "FieldChange",
           "V1_FIELD_HISTORY", "LORA_EXTRA_KEYS", "V0Policy", "V0_V0_10_2", "V0_V0_6_6_POST1",
           "V0_POLICIES", "V0_FIELD_HISTORY"]
