"""Named behaviour policies: the points where vLLM releases manage pages differently.

The reference implements one V1 page manager and one V0 block manager. Where vLLM releases
disagree about an *observable* detail (which block is reused next, what bytes a hash has, which
call is refused), the difference is not hidden behind a version check scattered through the
code: it is a field of :class:`V1Policy` or :class:`V0Policy`, and the caller passes a whole
policy. Each field's comment says what each value does and names the upstream lines that do it.

Which value a field has at which release is not the reference's business: the change log
(``conformance/changelog.py``) records each field's value before, the first release of each new
value, why, and the upstream lines, and computes any release's policy from that.

Differences that have no observable effect on block ids, order, reference counts, hashes or
return values (for example the internal shape of the prefix-cache map, or which argument
``remove_skipped_blocks`` receives when the request holds no blocks yet) are not fields.
"""

from __future__ import annotations

from dataclasses import dataclass

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

    # The same choice made only where tokens are skipped (v0.23.0): when a manager that skips
    # tokens (sliding window, chunked local attention) releases out-of-window blocks, or the
    # sliding-window manager frees a request, hashless blocks go to the front of the free queue
    # and hashed ones to the tail, while the full-attention manager still appends everything.
    # From v0.24.0 free_hashless_blocks_to_front makes every path do it.
    #   v0.23.0 vllm/v1/core/single_type_kv_cache_manager.py:448-501 (remove_skipped_blocks),
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
    # A string: NONE_HASH = hash_fn(seed), the same in every process for the sha256 family
    # (v0.33.0 uses "vllm-none-hash"; its xxhash functions keep a per-process seed). None: NONE_HASH is 32 fresh random bytes used
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
    #   (v0.14.0 kv_cache_coordinator.py:395) has neither check; v0.13.0 still has both.
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
    # init_none_hash(hash_fn) sets hash_fn(PYTHONHASHSEED): at manager construction in v0.10.0,
    # by the engine core from v0.10.1 (the reference sets it when its manager is built).
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
    # v0.9.1): every hit block with ref_cnt == 0 counts, the null block included whenever its
    # count stands at exactly 0 (frees count it down, so it drifts below 0), so a sliding-window
    # hit may ask for one more free block per such null.
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

    # How many tokens' worth of extra blocks an allocation that needs new blocks takes beyond
    # them ("preallocation", to allocate less often). 0: exactly the blocks needed. N > 0
    # (v0.8.0 .. v0.8.4: 64): cdiv(N, block_size) more blocks, less one per whole block of
    # lookahead slots asked for, and no more than the free blocks left or the request's room up
    # to cdiv(max_model_len, block_size) blocks. The admission check still counts only the
    # blocks needed. Only an allocation that needs at least one new block preallocates.
    #   v0.8.4 vllm/v1/core/kv_cache_manager.py:54-56 (num_preallocate_blocks), 254-264
    #   v0.8.2 vllm/v1/core/kv_cache_manager.py:48-49, 216-223 (no lookahead to subtract)
    #   v0.8.5 vllm/v1/core/kv_cache_manager.py:255-262 (no preallocation)
    preallocate_tokens: int

    # Whether allocate_slots takes lookahead slots (num_lookahead_tokens). False (before
    # v0.8.4): it has no such argument; the reference refuses a lookahead request.
    #   v0.8.3 vllm/v1/core/kv_cache_manager.py:162-167; v0.8.4 kv_cache_manager.py:163-169
    lookahead_supported: bool

    # Whether NONE_HASH's import-time statement tests PYTHONHASHSEED the wrong way round. True
    # (v0.8.3, v0.8.4): with PYTHONHASHSEED set NONE_HASH is random (os.urandom), and unset it
    # is sha256(None), the same constant in every process. False: random when unset,
    # sha256(PYTHONHASHSEED) when set (v0.8.5 on; see none_hash_at_import).
    #   v0.8.4 vllm/v1/core/kv_cache_utils.py:45-46 (`is not None`)
    #   v0.8.5 vllm/v1/core/kv_cache_utils.py:45-46 (`is None`)
    none_hash_seed_inverted: bool

    # Whether blocks are hashed with Python's builtin hash only, from the parent hash('None').
    # True (before v0.8.3): there is no NONE_HASH and no caching_hash_algo: the first block's
    # parent is hash('None') (a string hash, so it varies with the process's own hash seed) and
    # every block hash is hash((parent, tokens, extra keys)). False: the manager is given
    # "builtin" or "sha256" and the chain starts at NONE_HASH.
    #   v0.8.2 vllm/v1/core/kv_cache_utils.py:403-409 (hash_block_tokens), 412 (no hash function)
    #   v0.8.3 vllm/v1/core/kv_cache_utils.py:45-46 (NONE_HASH), 414-421 (hash_function)
    builtin_hash_only: bool

    # Whether block 0 is taken out of the pool as the null block. False (before v0.8.3): every
    # block is an ordinary block, the free queue starts at block 0, and resetting the prefix
    # cache needs every block free.
    #   v0.8.2 vllm/v1/core/block_pool.py:33-39 (every block queued), 241-242 (`num_used_blocks > 0`)
    #   v0.8.3 vllm/v1/core/block_pool.py:54-57 (null_block = popleft()), 250-251
    pool_has_null_block: bool

    # Whether a sliding-window group's pages are managed as a window: out-of-window pages
    # released to the null block and hits searched right to left. False (before v0.8.3): there
    # is no SlidingWindowSpec; KVCacheManager takes a sliding_window argument and never reads
    # it, so a sliding-window model's pages are managed as full attention.
    #   v0.8.2 vllm/v1/core/kv_cache_manager.py:25, 34 (stored, unused)
    #   v0.8.3 vllm/v1/core/specialized_manager.py (SlidingWindowManager), kv_cache_manager.py:205-207
    sliding_window_managed: bool

    # Whether the lookup leaves the last token to compute. True (from v0.8.3): a hit covers at
    # most num_tokens - 1 tokens, so a block-aligned prompt cached in full misses its last block.
    # False (before): the manager returns every cached block, the whole prompt included; the
    # scheduler drops the last block itself (v0.8.2 vllm/v1/core/sched/scheduler.py:290-301).
    #   v0.8.2 vllm/v1/core/kv_cache_manager.py:116-127 (the whole chain)
    #   v0.8.3 vllm/v1/core/kv_cache_manager.py:130-148 (the last hash popped)
    lookup_leaves_last_token: bool

    # Whether a sliding-window group honours a prefix-cache retention interval (the KV-cache
    # config's prefix_cache_retention_interval). None keeps every full block cached (dense), for
    # any window longer than one token (a window of one needs no block before a hit, and the mask
    # keeps none).
    # 0 caches only the window's tail before each reachable boundary: the prompt's replay
    # boundary (num_prompt_tokens - 1) and the request's shared-prefix boundary (where its last
    # lookup found a longer hit in another group than the agreed one). k > 0 also caches the
    # window's tail at the end of every k-token segment. A mask over the blocks being cached
    # says which are registered; the others stay out of the prefix cache.
    #   v0.33.0 vllm/v1/core/single_type_kv_cache_manager.py:477-542 (cache_blocks), 1066-1146 (the mask)
    #   v0.33.0 vllm/v1/core/kv_cache_coordinator.py:65-89 (replay boundaries), 935-941 (uncached prefix)
    #   v0.33.0 vllm/v1/core/kv_cache_manager.py:318-328 (shared_prefix_boundary)
    # False (before 0.29.0): the KV-cache config has no such field. 0.23.0-0.28.x read the
    # interval from VLLM_PREFIX_CACHE_RETENTION_INTERVAL (unset by default: dense) and already
    # apply the mask; the reference applies it from 0.29.0 only, which differs from those
    # releases for a one-token window, which the machines never draw.
    retention_interval_supported: bool

    # Whether allocate_slots can refuse a request whose whole current sequence would not fit
    # (full_sequence_must_fit, which the scheduler sets when admitting a waiting or preempted
    # request): the blocks every group would need for min(num_tokens, max_model_len) tokens, a
    # sliding-window group counting at most cdiv(min(window - 1 + extra_retained_tokens +
    # max_in_flight_tokens, max_model_len), block_size) + 1 of them (extra_retained_tokens, from
    # 0.28.0, is 0 but with a multi-module MTP drafter, which the reference does not model), plus
    # the watermark, must be free; otherwise it returns None before releasing any out-of-window
    # page. max_in_flight_tokens is a manager argument, max_model_len when not given.
    #   v0.33.0 vllm/v1/core/kv_cache_manager.py:531-548 (the gate), 155-156 (the default)
    #   v0.33.0 vllm/v1/core/single_type_kv_cache_manager.py:215-227 (the cap), 2636-2650
    #   v0.33.0 vllm/v1/kv_cache_interface.py:918-944 (the sliding window's cap)
    # False (before 0.26.0): not driven; 0.21.0-0.25.x take the flag with a cap counted from
    # max_num_batched_tokens, 0.19.0-0.20.x have a can_fit_full_sequence method instead.
    full_sequence_admission: bool

    # Where allocate_slots releases a sliding window's out-of-window pages when some of the
    # request's computed tokens are still in flight (asynchronous scheduling schedules a prefill's
    # next chunk before the previous one has run; num_computed_tokens already counts it): True
    # releases only the pages before the window of total_computed - num_in_flight_tokens (at
    # least 0), since the step in flight still reads them; False releases them at
    # total_computed, in-flight tokens or not.
    #   v0.33.0 vllm/v1/core/kv_cache_manager.py:564-568 (the release), vllm/v1/request.py:170-173 (the count)
    # False (before 0.26.0): v0.25.1 vllm/v1/core/kv_cache_manager.py:404-408.
    frees_behind_in_flight_tokens: bool

    def __post_init__(self) -> None:
        if self.lora_extra_key not in LORA_EXTRA_KEYS:
            raise ValueError(f"lora_extra_key must be one of {LORA_EXTRA_KEYS}, not {self.lora_extra_key!r}")


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

    # How the LRU evictor picks the parked page to recycle. True (from v0.6.5): a heap of
    # (last_accessed, -num_hashed_tokens, block_id, hash), so the oldest page, then the longest
    # prefix, then the smallest id. False: a scan of the parked pages in the order they were
    # parked, from the first, walking on while the next page is no newer than the candidate and
    # switching to one with more hashed tokens; a page accessed after it was parked keeps its place.
    #   v0.6.5 vllm/core/evictor.py:91-118 (evict, add)
    #   v0.6.4 vllm/core/evictor.py:84-111 (evict, add)
    evictor_heap: bool

    # Whether a page's hash tuple ends with its extra hash (the LoRA id; None without one).
    # True (from v0.6.5): hash((is_first, parent, *tokens, extra_hash)). False:
    # hash((is_first, parent, *tokens)), so every hash differs even when no page has an extra hash.
    #   v0.6.5 vllm/core/block/prefix_caching_block.py:868-891 (hash_block_tokens)
    #   v0.6.4 vllm/core/block/prefix_caching_block.py:822-842 (hash_block_tokens)
    extra_hash_in_page_hash: bool

    # What the manager records per sequence to answer get_common_computed_block_ids. True (from
    # v0.6.5): the hashes of the sequence's full token pages; the cached prefix is the leading
    # hashes the allocator holds as computed pages, and get_num_cached_tokens exists. False: the
    # computed block ids found so far among the table's ids (all but the last), each call looking
    # only past them; every computed page is added, also after one that is not, and once a page was
    # missing ("a gap") nothing is added until the sequence is freed. Sequences are tracked from
    # allocate and fork, not from their first query.
    #   v0.6.5 vllm/core/block/prefix_caching_block.py:894-1020 (ComputedBlocksTracker)
    #   v0.6.4 vllm/core/block/prefix_caching_block.py:537-555, 845-925 (get_computed_block_ids, tracker)
    cached_tokens_tracker: bool

# The V0 behaviour of the release the V0 notes annotate (vLLM 0.10.2): the reference V0 manager's
# default. The change log computes the same policy for 0.10.2 (tests/conformance/test_changelog.py).
V0_V0_10_2 = V0Policy(name="v0.10.2", str_none_parent_hash=True, evictor_heap=True,
                      extra_hash_in_page_hash=True, cached_tokens_tracker=True)

__all__ = ["V1Policy", "V0Policy", "V0_V0_10_2", "LORA_EXTRA_KEYS"]
