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

    # Whether the null block's reference count moves. In v0.10.2 ``touch`` increments it for
    # the leading null blocks of a sliding-window hit and ``free_blocks`` decrements it when a
    # request holding null blocks is freed (it is never queued), so the count drifts, even
    # below zero. v0.33.0 skips the null block in both and trims leading nulls before freeing.
    #   v0.10.2 vllm/v1/core/block_pool.py:236-250 (touch), 252-267 (free_blocks)
    #   v0.33.0 vllm/v1/core/block_pool.py:792-810 (touch: `if block.is_null: continue`),
    #           816-831 (free_blocks skips null), single_type_kv_cache_manager.py:571-589
    null_block_ref_counted: bool

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

    def __post_init__(self) -> None:
        if self.lora_extra_key not in LORA_EXTRA_KEYS:
            raise ValueError(f"lora_extra_key must be one of {LORA_EXTRA_KEYS}, not {self.lora_extra_key!r}")


V1_V0_33_0 = V1Policy(
    name="v0.33.0",
    free_hashless_blocks_to_front=True,
    null_block_ref_counted=False,
    none_hash_default_seed="vllm-none-hash",
    tagged_extra_keys=True,
    lora_extra_key="tagged",
    zero_token_hit_adoption=True,
    watermark_supported=True,
    evict_blocks_supported=True,
    cache_full_blocks_skips_null=True,
    hybrid_groups_any_layout=True,
)

V1_V0_10_2 = V1Policy(
    name="v0.10.2",
    free_hashless_blocks_to_front=False,
    null_block_ref_counted=True,
    none_hash_default_seed=None,
    tagged_extra_keys=False,
    lora_extra_key="int_id",
    zero_token_hit_adoption=False,
    watermark_supported=False,
    evict_blocks_supported=False,
    cache_full_blocks_skips_null=False,
    hybrid_groups_any_layout=False,
)

# vLLM 0.17.1 .. 0.22.1 (measured at v0.20.2): v0.10.2's choices except two.
#   evict_blocks_supported: BlockPool.evict_blocks exists from v0.13.0
#     (v0.13.0 vllm/v1/core/block_pool.py:400-417; v0.20.2 block_pool.py:424-441);
#   cache_full_blocks_skips_null: from v0.14.1 (v0.14.1 vllm/v1/core/block_pool.py:259;
#     v0.20.2 block_pool.py:262 `if blk.is_null: continue`).
#   lora_extra_key = "name": a LoRA adapter enters block hashes by name from v0.11.1
#     (v0.11.1 vllm/v1/core/kv_cache_utils.py:450-462; v0.20.2 the same function), found by
#     the v1.lifecycle machine at v0.20.2 (hashes differed under v0.10.2's "int_id").
# Still as v0.10.2: freed blocks all go to the tail (prepend_n arrives in v0.23.0), free_blocks
# counts the null block down (v0.20.2 block_pool.py free_blocks has no null skip) -- but a
# sliding-window hit does not touch its leading null blocks (they are sliced off as skipped,
# v0.20.2 vllm/v1/core/single_type_kv_cache_manager.py:204-218), a variant null_block_ref_counted cannot express, so
# v1.sliding_window fails at 0.20.2 (found with 300 examples; 100 missed it) -- a random raw NONE_HASH, bare extra keys, and every zero-token allocation refused
# (v0.20.2 vllm/v1/core/kv_cache_manager.py:349-353).
V1_V0_20_2 = V1Policy(
    name="v0.20.2",
    free_hashless_blocks_to_front=False,
    null_block_ref_counted=True,
    none_hash_default_seed=None,
    tagged_extra_keys=False,
    lora_extra_key="name",
    zero_token_hit_adoption=False,
    watermark_supported=False,
    evict_blocks_supported=True,
    cache_full_blocks_skips_null=True,
    hybrid_groups_any_layout=True,
)

# The releases between the pins, each the nearest measured policy with the fields that the
# release's sources show changed (V1_FIELD_HISTORY gives the first release and lines of each).
# vLLM 0.11.2 and 0.12.0: v0.10.2 with LoRA keyed by name (from v0.11.1).
V1_V0_12_0 = replace(V1_V0_10_2, name="v0.12.0", lora_extra_key="name")
# vLLM 0.13.0: evict_blocks appears.
V1_V0_13_0 = replace(V1_V0_12_0, name="v0.13.0", evict_blocks_supported=True)
# vLLM 0.24.0 .. 0.28.0: hashless freed blocks to the front; the admission watermark.
V1_V0_24_0 = replace(V1_V0_20_2, name="v0.24.0", free_hashless_blocks_to_front=True, watermark_supported=True)
# vLLM 0.29.0 and 0.30.0: the fixed NONE_HASH seed.
V1_V0_29_0 = replace(V1_V0_24_0, name="v0.29.0", none_hash_default_seed="vllm-none-hash")
# vLLM 0.31.0 and 0.32.0: tagged extra keys, zero-token hit adoption.
V1_V0_31_0 = replace(V1_V0_29_0, name="v0.31.0", tagged_extra_keys=True, lora_extra_key="tagged",
                     zero_token_hit_adoption=True)

# vLLM 0.32.0 (measured): v0.31.0's choices, but the null block's count does not move at a
# sliding-window prefix hit (v1.sliding_window diverged at /blocks[0][0] under v0.31.0: vLLM 0,
# reference 1). 0.20.2 shows the same at a hit but still decrements the null block's count when
# a request is freed, so neither value of the field reproduces 0.20.2 (its v1.sliding_window
# fails under both, 300 examples); where the 0.32.0 behaviour first appears is not bisected yet.
V1_V0_32_0 = replace(V1_V0_31_0, name="v0.32.0", null_block_ref_counted=False)

V1_POLICIES: dict[str, V1Policy] = {p.name: p for p in (
    V1_V0_33_0, V1_V0_32_0, V1_V0_31_0, V1_V0_29_0, V1_V0_24_0, V1_V0_20_2, V1_V0_13_0, V1_V0_12_0, V1_V0_10_2)}


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
        "free_hashless_blocks_to_front", "0.24.0", True,
        "free_blocks puts freed blocks that carry no hash at the front of the free queue "
        "(prepend_n), hashed ones still at the tail. (v0.23.0 did this only on the sliding-window "
        "manager's paths, through a prepend argument: a variant no policy models yet.)",
        "a block with no cached content is worth nothing to keep: reusing it first keeps hashed "
        "blocks (possible prefix hits) longest and reuses recently touched memory.",
        "v0.24.0 vllm/v1/core/block_pool.py:614-635 (free_blocks: prepend_n at 634); v0.23.0 "
        "block_pool.py:419-440 and single_type_kv_cache_manager.py:497-501, 764",
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
        "null_block_ref_counted", "0.32.0", False,
        "the null block's reference count no longer moves: a sliding-window prefix hit leaves it "
        "at 0 (measured at 0.32.0; v0.33.0 also skips it explicitly in touch and free_blocks).",
        "the null block is never pooled; counting it was meaningless and its count wandered with "
        "every sliding-window hit and free.",
        "v0.32.0: first measured by v1.sliding_window (the releases between 0.20.2 and 0.32.0 are not "
        "bisected yet, and the 0.32.0 lines responsible are not located yet); v0.33.0 "
        "vllm/v1/core/block_pool.py:792-810 (touch), 816-831 (free_blocks)",
        ("v0.33.0/vllm/v1/core/block_pool.py#block_pool.touch",
         "v0.33.0/vllm/v1/core/block_pool.py#block_pool.free_blocks")),
)


def v1_policy_for_version(version: str) -> V1Policy:
    """The policy that reproduces an installed vLLM release, e.g. ``"0.33.0"``."""
    key = version if version.startswith("v") else "v" + version
    try:
        return V1_POLICIES[key]
    except KeyError:
        raise KeyError(f"no V1 policy for vLLM {version!r}; known: {sorted(V1_POLICIES)}") from None


__all__ = ["V1Policy", "V1_V0_33_0", "V1_V0_31_0", "V1_V0_29_0", "V1_V0_24_0", "V1_V0_20_2", "V1_V0_13_0",
           "V1_V0_12_0", "V1_V0_10_2", "V1_POLICIES", "v1_policy_for_version", "FieldChange",
           "V1_FIELD_HISTORY", "LORA_EXTRA_KEYS"]
