"""The change log: every fact about how vLLM releases differ, recorded once.

Five records describe what the machines need to know about one release:

* :class:`reference.blocks.policies.V1Policy` and :class:`~reference.blocks.policies.V0Policy`:
  behaviour (which block is reused next, what bytes a hash has, which call is refused);
* :class:`conformance.release_api.V1Api`, :class:`~conformance.release_api.V0Api`,
  :class:`~conformance.release_api.KernelApi`: how the adapters must call the release;
* :class:`conformance.release_api.Mechanisms`: which modelled mechanisms the release ships.

For each record this module holds the value of every field at the oldest release the log covers
(``INITIAL``) and, in release order, each later :class:`Change`: the first release with the new
value, what changed and why in our words, and the upstream lines (each citation names its release,
and ``python -m annotations check`` verifies their content hashes). The record of any release is
computed from the log (:func:`v1_policy_at`, :func:`v0_policy_at`, :func:`api_at`); nothing
else keeps a per-release value.

``first`` is the first release whose sources were read and show the value. Where the log cites the
exact release a change landed in, ``first`` is that release; for some API fields it is the first
release of those read (the latest patch of each minor series) that has it, so an unread release
before it may already have the new value. That never misleads a run: an installed version is
driven as the nearest *known* release at or before it (:mod:`conformance.versions`), and known
releases are the ones measured in their own environments (``conformance/reports/matrix.json``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from functools import cache

from conformance.release_api import KernelApi, Mechanisms, V0Api, V1Api
from reference.blocks.policies import V0Policy, V1Policy

_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:\.(\d+))?(?:\.post(\d+))?$")


def release_key(release: str) -> tuple[int, int, int, int, int]:
    """A sortable key for a published release: ``0.6.3.post1``, ``0.9.0.1``, ``0.33.0``."""
    match = _RELEASE.match(release)
    if match is None:
        raise ValueError(f"not a published vLLM release: {release!r} (expected e.g. 0.10.2, 0.9.0.1, 0.6.3.post1)")
    return tuple(int(g or 0) for g in match.groups())  # type: ignore[return-value]  # the pattern has five groups


@dataclass(frozen=True)
class Change:
    """One field of one record took a new value at a release, in our words, with the upstream lines."""

    field: str
    first: str
    value_from: object
    what: str
    why: str
    upstream: str
    # Annotation notes that discuss the behaviour: "v<version>/<upstream path>#<note id>".
    notes: tuple[str, ...] = ()


#: The oldest release the log covers: the earliest whose sources were read.
OLDEST = "0.6.3.post1"

# Each record's values at the oldest release that has the mechanism: V1 records at 0.8.0 (the
# first release with a V1 BlockPool; every 0.8.x release was read), V0 records at 0.6.3.post1,
# Triton kernel records at 0.8.0, mechanisms at 0.6.3.post1.
INITIAL: dict[type, dict[str, object]] = {
    V1Policy: dict(
        preallocate_tokens=64, lookahead_supported=False, none_hash_seed_inverted=False,
        builtin_hash_only=True, pool_has_null_block=False, sliding_window_managed=False,
        lookup_leaves_last_token=False,
        free_hashless_blocks_to_front=False, sliding_window_frees_hashless_to_front=False,
        null_block_ref_counted=True, hit_touches_skipped_nulls=True, none_hash_default_seed=None,
        tagged_extra_keys=False, lora_extra_key="int_id", zero_token_hit_adoption=False,
        watermark_supported=False, evict_blocks_supported=False, cache_full_blocks_skips_null=False,
        hybrid_groups_any_layout=False, hybrid_needs_distinct_specs=False,
        hybrid_layout_checked_without_caching=True, hashes_on_request=False, int_block_hashes=True,
        none_hash_at_import=True, usage_excludes_null_block=False, caching_off_frees_to_front=True,
        single_kv_cache_group=True, pool_key_has_group_id=False, admission_counts_null_blocks=True,
        free_reversed_without_caching=False, lookahead_capped_at_admission=False,
        delay_cache_blocks_supported=False, cache_salt_supported=False, retention_interval_supported=False,
        full_sequence_admission=False, frees_behind_in_flight_tokens=False),
    V0Policy: dict(str_none_parent_hash=False, evictor_heap=False, extra_hash_in_page_hash=False,
                   cached_tokens_tracker=False),
    V1Api: dict(
        hashing_module="vllm.utils", spec_use_mla=True, manager_hash_block_size_arg=False,
        manager_scheduler_block_size_arg=False, manager_watermark_arg=False, request_eos_argument=True,
        allocate_has_scheduled_reqs=False, evict_blocks_method=False, manager_hashes_blocks=True,
        none_hash_init_function=False, request_multimodal_args=True, manager_has_coordinator=False,
        kv_config_tensors_dict=True, request_pooling_and_salt_args=False,
        manager_takes_kv_cache_config=False, manager_hash_algo_arg=False, allocate_lookahead_arg=False,
        request_prompt_arg=True, full_hit_search_indexes_hashes=False),
    V0Api: dict(sequence_token_inputs=True, reset_prefix_cache=False, group_status_per_sequence=True,
                num_cached_tokens=False),
    KernelApi: dict(
        ops_package="vllm.attention.ops", paged_2d_masks_tail=False, unified_masks_tail=False,
        paged_2d_rocm_check_bound_at_import=False, unified_split_k_args=False, min_block_size=16,
        cache_write_head_major=True, paged_2d_max_seq_len_arg=False),
    Mechanisms: dict(v0_block_manager=True, v1_block_pool=False, triton_kernels=False),
}

V1_POLICY_LOG: tuple[Change, ...] = (
    Change(
        "builtin_hash_only", "0.8.3", False,
        "the manager takes caching_hash_algo (\"builtin\" or \"sha256\") and every chain starts at "
        "NONE_HASH, set when kv_cache_utils is imported; before, blocks were hashed with Python's "
        "builtin hash only, the first one from the parent hash('None').",
        "SHA-256 makes block-hash collisions practically impossible; the builtin hash of a tuple is "
        "64 bits and, for strings, changes with the process's hash seed.",
        "v0.8.3 vllm/v1/core/kv_cache_utils.py:45-46, 414-421, "
        "v0.8.3 vllm/v1/core/kv_cache_manager.py:41; before: "
        "v0.8.2 vllm/v1/core/kv_cache_utils.py:403-409, 412"),
    Change(
        "none_hash_seed_inverted", "0.8.3", True,
        "NONE_HASH's import-time statement tests PYTHONHASHSEED the wrong way round: with "
        "PYTHONHASHSEED set it is 32 random bytes, unset it is sha256(None), the same constant in "
        "every process.",
        "the comment above the statement says the opposite (random unless PYTHONHASHSEED is set); "
        "the condition was written `is not None`. 0.8.5 corrected it.",
        "v0.8.3 vllm/v1/core/kv_cache_utils.py:36-46; v0.8.4 vllm/v1/core/kv_cache_utils.py:45-46"),
    Change(
        "none_hash_seed_inverted", "0.8.5", False,
        "NONE_HASH is random when PYTHONHASHSEED is unset and sha256(PYTHONHASHSEED) when it is "
        "set, as the comment above it always said.",
        "the condition is corrected to `is None`.",
        "v0.8.5 vllm/v1/core/kv_cache_utils.py:45-46; before: v0.8.4 vllm/v1/core/kv_cache_utils.py:45-46"),
    Change(
        "pool_has_null_block", "0.8.3", True,
        "the block pool takes block 0 out of the free queue as the null block (the stand-in for "
        "released sliding-window entries): the first block handed out is block 1, and resetting "
        "the prefix cache needs every block but that one free.",
        "a sliding window's out-of-window table entries need a block to point at that holds nothing.",
        "v0.8.3 vllm/v1/core/block_pool.py:54-57, 250-251; before: "
        "v0.8.2 vllm/v1/core/block_pool.py:33-39, 241-242"),
    Change(
        "sliding_window_managed", "0.8.3", True,
        "a sliding-window group (SlidingWindowSpec) is managed as a window: pages that leave the "
        "window are released to the null block and prefix hits need only the window's last blocks; "
        "before, the manager stored its sliding_window argument and never read it, managing the "
        "pages as full attention.",
        "releasing pages a layer can no longer read lets a sliding-window model hold more requests.",
        "v0.8.3 vllm/v1/core/kv_cache_manager.py:205-207, v0.8.3 vllm/v1/kv_cache_interface.py:85-93; "
        "before: v0.8.2 vllm/v1/core/kv_cache_manager.py:25, 34"),
    Change(
        "lookup_leaves_last_token", "0.8.3", True,
        "the manager's lookup stops one token short of the request's end: a block-aligned prompt "
        "cached in full misses its last block. Before, the manager returned the whole hit and the "
        "scheduler dropped the last block itself.",
        "the last token must be computed to produce logits; the sliding-window search needs the "
        "bound inside the lookup, so the scheduler's own trim moved into the manager.",
        "v0.8.3 vllm/v1/core/kv_cache_manager.py:130-148; before: "
        "v0.8.2 vllm/v1/core/kv_cache_manager.py:116-127, v0.8.2 vllm/v1/core/sched/scheduler.py:290-301"),
    Change(
        "lookahead_supported", "0.8.4", True,
        "allocate_slots takes num_lookahead_tokens: slots for speculative tokens beyond the new "
        "ones, each whole block of them taking the place of one preallocated block.",
        "speculative decoding (EAGLE) needs KV slots for the draft tokens it proposes.",
        "v0.8.4 vllm/v1/core/kv_cache_manager.py:163-169, 218-220, 254-256; before: "
        "v0.8.3 vllm/v1/core/kv_cache_manager.py:162-167"),
    Change(
        "preallocate_tokens", "0.8.5", 0,
        "an allocation takes exactly the blocks it needs; before, one that needed any new block "
        "took cdiv(64, block_size) more (less one per whole block of lookahead slots from 0.8.4), "
        "as many as the free queue and the request's max_model_len allowed.",
        "preallocated blocks sat empty in running requests' tables, so the pool filled and requests "
        "were preempted sooner; the allocation overhead they saved was small.",
        "v0.8.5 vllm/v1/core/kv_cache_manager.py:255-262; before: "
        "v0.8.4 vllm/v1/core/kv_cache_manager.py:54-56, 254-264, "
        "v0.8.2 vllm/v1/core/kv_cache_manager.py:48-49, 216-223"),
    Change(
        "single_kv_cache_group", "0.9.1", False,
        "a KV-cache coordinator lets one manager serve several KV-cache groups (full attention "
        "beside sliding windows); before, the manager asserted exactly one group.",
        "hybrid models (sliding-window layers interleaved with full attention) need one page table "
        "per kind of layer, all fed from one block pool.",
        "v0.9.1 vllm/v1/core/kv_cache_coordinator.py:207-214, 352-363 (the hybrid coordinator; "
        "the factory gives one group the unitary coordinator, several the hybrid one); before: "
        "v0.9.0 vllm/v1/core/kv_cache_manager.py:65-67, "
        "v0.8.5.post1 vllm/v1/core/kv_cache_manager.py:31-33",
        ("v0.33.0/vllm/v1/core/kv_cache_coordinator.py#kv_cache_coordinator.factory",)),
    Change(
        "pool_key_has_group_id", "0.9.1", True,
        "the prefix-cache map keys a hash together with its KV-cache group id.",
        "with several groups sharing one pool, the same prefix is cached once per group, in "
        "different blocks; the key must tell them apart.",
        "v0.9.1 vllm/v1/core/block_pool.py:60-61; before: v0.9.0 vllm/v1/core/block_pool.py:58-59",
        ("v0.33.0/vllm/v1/core/kv_cache_utils.py#kv_cache_utils.group_id_packing",)),
    Change(
        "admission_counts_null_blocks", "0.9.1", False,
        "the admission check no longer counts null entries of a hit as blocks it must take from "
        "the free queue.",
        "the null block is never in the free queue, so counting it refused allocations the pool "
        "could serve. (Before, free_blocks counted the null block down for every null entry of a "
        "freed table, so its count drifted below 0 and a null entry was counted only while the "
        "count stood at exactly 0.)",
        "v0.9.1 vllm/v1/core/single_type_kv_cache_manager.py:81; before: "
        "v0.9.0 vllm/v1/core/single_type_kv_cache_manager.py:85-86, "
        "v0.9.0 vllm/v1/core/block_pool.py:266-267, v0.8.5.post1 vllm/v1/core/block_pool.py:235-236",
        ("v0.33.0/vllm/v1/core/single_type_kv_cache_manager.py#single_type_kv_cache_manager.base.get_num_blocks_to_allocate",)),
    Change(
        "free_reversed_without_caching", "0.9.0", True,
        "a request's blocks are freed tail first with prefix caching off too (before, in table "
        "order when caching was off).",
        "one free path for both settings; the order matters for eviction only with caching on.",
        "v0.9.0 vllm/v1/core/single_type_kv_cache_manager.py:168; before: "
        "v0.8.5.post1 vllm/v1/core/kv_cache_manager.py:305-310",
        ("v0.33.0/vllm/v1/core/single_type_kv_cache_manager.py#single_type_kv_cache_manager.base.free",)),
    Change(
        "lookahead_capped_at_admission", "0.9.0", True,
        "the slots asked for (computed + new + lookahead tokens) are capped at max_model_len before "
        "the admission check, not only when the blocks are taken.",
        "speculative slots past the model's length are never used; counting them refused "
        "allocations near the end of a request.",
        "v0.9.0 vllm/v1/core/kv_cache_manager.py:237-239; before: "
        "v0.8.5.post1 vllm/v1/core/kv_cache_manager.py:218-234",
        ("v0.33.0/vllm/v1/core/kv_cache_manager.py#kv_cache_manager.allocate_slots",)),
    Change(
        "delay_cache_blocks_supported", "0.9.0", True,
        "allocate_slots takes delay_cache_blocks: blocks are allocated now and cached when their "
        "KV arrives.",
        "with disaggregated prefill a request's KV is received from another instance; its blocks "
        "must not be offered as prefix hits before the transfer completes.",
        "v0.9.0 vllm/v1/core/kv_cache_manager.py:179; before: "
        "v0.8.5.post1 vllm/v1/core/kv_cache_manager.py:164-170",
        ("v0.33.0/vllm/v1/core/kv_cache_manager.py#kv_cache_manager.allocate_slots",)),
    Change(
        "cache_salt_supported", "0.9.0", True,
        "a request may carry a cache salt, mixed into the extra keys of its first block.",
        "tenants sharing a server must not learn from prefix hits which prompts others sent.",
        "v0.9.0 vllm/v1/core/kv_cache_utils.py:386-389; before: "
        "v0.8.5.post1 vllm/v1/core/kv_cache_utils.py:276-278",
        ("v0.33.0/vllm/v1/core/kv_cache_utils.py#kv_cache_utils.generate_block_hash_extra_keys",)),
    Change(
        "caching_off_frees_to_front", "0.27.0", False,
        "with prefix caching off, free_blocks appends every freed block to the tail of the free "
        "queue instead of putting it at the front with the other hashless blocks.",
        "the change's own comment says it appends for better GPU cache locality; the next "
        "release undid it.",
        "v0.27.0 vllm/v1/core/block_pool.py:719-742; before: "
        "v0.26.0 vllm/v1/core/block_pool.py:719-740",
        ("v0.33.0/vllm/v1/core/block_pool.py#block_pool.free_blocks",)),
    Change(
        "caching_off_frees_to_front", "0.28.0", True,
        "with prefix caching off, freed blocks go to the front of the free queue again (reused "
        "first, LIFO).",
        "reusing the most recently freed blocks first is what gives the locality the 0.27 change "
        "was after; appending them reused the oldest ones.",
        "v0.28.0 vllm/v1/core/block_pool.py:719-743 (`or not self.enable_caching`)",
        ("v0.33.0/vllm/v1/core/block_pool.py#block_pool.free_blocks",)),
    Change(
        "usage_excludes_null_block", "0.10.2", True,
        "the KV-cache usage fraction leaves the null block out: 1 - free / (blocks - 1), so an "
        "idle pool reports 0 instead of 1 / blocks.",
        "the null block is a placeholder that can never hold a request's tokens; counting it made "
        "an empty cache look slightly used.",
        "v0.10.2 vllm/v1/core/block_pool.py:307-318; before: "
        "v0.10.1 vllm/v1/core/block_pool.py:295-301, "
        "v0.9.2 vllm/v1/core/block_pool.py:331-337",
        ("v0.33.0/vllm/v1/core/block_pool.py#block_pool.num_free_and_usage",)),
    Change(
        "none_hash_at_import", "0.10.0", False,
        "NONE_HASH, the parent of every first block, is set by init_none_hash(hash_fn), from "
        "hash_fn(PYTHONHASHSEED), instead of once at import with sha256: at manager construction in "
        "0.10.0, by the engine core from 0.10.1 on.",
        "the seed should come from the hash function the cache actually uses, and a module-level "
        "random value fixed at import could not follow the configured hash.",
        "v0.10.0 vllm/v1/core/kv_cache_utils.py:61-73 (init_none_hash), "
        "v0.10.0 vllm/v1/core/kv_cache_manager.py:90 (called at construction), "
        "v0.10.1 vllm/v1/engine/core.py:153 (called by the engine core); before: "
        "v0.9.2 vllm/v1/core/kv_cache_utils.py:59-60 (NONE_HASH at import)",
        ("v0.33.0/vllm/v1/core/kv_cache_utils.py#kv_cache_utils.none_hash",)),
    Change(
        "hybrid_layout_checked_without_caching", "0.10.0", False,
        "with prefix caching off, several KV-cache groups are served by a coordinator without "
        "prefix caching, which accepts any layout; before, the hybrid coordinator (and its layout "
        "assertions) served them whether caching was on or not.",
        "the layout rules exist only to merge prefix-cache hits across groups; a model served "
        "without prefix caching need not satisfy them.",
        "v0.10.0 vllm/v1/core/kv_cache_coordinator.py:174, 391-393 (KVCacheCoordinatorNoPrefixCache); "
        "before: v0.9.2 vllm/v1/core/kv_cache_coordinator.py:358-369",
        ("v0.33.0/vllm/v1/core/kv_cache_coordinator.py#kv_cache_coordinator.no_prefix_cache",)),
    Change(
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
    Change(
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
    Change(
        "evict_blocks_supported", "0.13.0", True,
        "BlockPool and KVCacheManager gain evict_blocks(ids): chosen blocks leave the prefix cache "
        "(their hash is dropped; a block still in use stays allocated).",
        "a KV connector that loses blocks on its side must be able to stop vLLM from serving them "
        "as prefix hits.",
        "v0.13.0 vllm/v1/core/block_pool.py:400-417, vllm/v1/core/kv_cache_manager.py:336",
        ("v0.33.0/vllm/v1/core/block_pool.py#block_pool.evict_blocks",)),
    Change(
        "cache_full_blocks_skips_null", "0.14.0", True,
        "cache_full_blocks skips the null block, so a sliding-window table cached after a delay no "
        "longer gives the shared null block a hash and a prefix-cache entry.",
        "the null block stands for released out-of-window slots; caching it under a request's hash "
        "would let a later lookup hand out a block that holds nothing.",
        "v0.14.0 vllm/v1/core/block_pool.py:259 (`if blk.is_null: continue`); before: "
        "v0.13.0 block_pool.py:209-260 has no such check",
        ("v0.33.0/vllm/v1/core/block_pool.py#block_pool.cache_full_blocks",)),
    Change(
        "hybrid_groups_any_layout", "0.14.0", True,
        "with prefix caching and several KV-cache groups, the coordinator no longer refuses a "
        "layout with no full-attention group, two kinds of window, or full-attention groups "
        "interleaved with the others ([sw, full, sw]).",
        "models with several kinds of local attention (and interleaved layer groups) need a "
        "prefix-cache hit computed across all of them; the old coordinator merged exactly two "
        "hit lists, one full and one other, in a fixed order.",
        "v0.14.0 vllm/v1/core/kv_cache_coordinator.py:395 (verify_and_split_kv_cache_groups, "
        "neither check); before: v0.13.0 vllm/v1/core/kv_cache_coordinator.py:384-410, 427-439, "
        "v0.10.2 vllm/v1/core/kv_cache_coordinator.py:300-322, 338-348",
        ("v0.33.0/vllm/v1/core/kv_cache_coordinator.py#kv_cache_coordinator.hybrid.split_groups",)),
    Change(
        "hybrid_needs_distinct_specs", "0.14.0", True,
        "the hybrid coordinator that accepts any layout asserts that the groups hold at least two "
        "distinct specs, so several groups of one spec are refused with prefix caching on (the "
        "stricter check before 0.14.0 refused them too).",
        "the coordinator merges hit lengths across attention types; with a single spec there is "
        "only one type, and this release asserts instead of treating it as one attention group.",
        "v0.14.0 vllm/v1/core/kv_cache_coordinator.py:419-421",
        ("v0.33.0/vllm/v1/core/kv_cache_coordinator.py#kv_cache_coordinator.hybrid.split_groups",)),
    Change(
        "hybrid_needs_distinct_specs", "0.29.0", False,
        "several KV-cache groups of one spec are accepted with prefix caching on.",
        "the coordinator now only asserts that there is at least one attention group "
        "(v0.29.0 kv_cache_coordinator.py:703), so a single spec split over several groups is one "
        "attention group like any other.",
        "v0.29.0 vllm/v1/core/kv_cache_coordinator.py:703-705 (at least one attention group); "
        "before: v0.28.0 vllm/v1/core/kv_cache_coordinator.py:682-684",
        ("v0.33.0/vllm/v1/core/kv_cache_coordinator.py#kv_cache_coordinator.hybrid.split_groups",)),
    Change(
        "free_hashless_blocks_to_front", "0.24.0", True,
        "free_blocks puts freed blocks that carry no hash at the front of the free queue "
        "(prepend_n), hashed ones still at the tail, on every path (v0.23.0 did it only on the "
        "sliding-window manager's paths: sliding_window_frees_hashless_to_front).",
        "a block with no cached content is worth nothing to keep: reusing it first keeps hashed "
        "blocks (possible prefix hits) longest and reuses recently touched memory.",
        "v0.24.0 vllm/v1/core/block_pool.py:614-635 (free_blocks: prepend_n at 634); "
        "v0.23.0 vllm/v1/core/block_pool.py:419-440 and "
        "v0.23.0 vllm/v1/core/single_type_kv_cache_manager.py:497-501, 764",
        ("v0.33.0/vllm/v1/core/block_pool.py#block_pool.free_blocks",)),
    Change(
        "sliding_window_frees_hashless_to_front", "0.23.0", True,
        "every manager that skips tokens (the base class's out-of-window release, used by sliding "
        "window and chunked local attention) and the sliding-window manager's own free release "
        "blocks in two calls: hashed blocks to the tail of the free queue, hashless ones to the "
        "front (free_blocks(..., prepend=True)); full attention still appends everything.",
        "a released block with no hash can never be a prefix hit, so it is the best block to reuse "
        "next; a hashed one may still be hit and should be evicted last.",
        "v0.23.0 vllm/v1/core/single_type_kv_cache_manager.py:448-501, 751-765; "
        "before: v0.22.1 vllm/v1/core/block_pool.py:419-433 (free_blocks takes no prepend and "
        "appends every freed block); v0.22.1 vllm/v1/core/single_type_kv_cache_manager.py:352, 461 "
        "(free and remove_skipped_blocks each free their blocks in one free_blocks call)",
        ("v0.33.0/vllm/v1/core/block_pool.py#block_pool.free_blocks",)),
    Change(
        "watermark_supported", "0.24.0", True,
        "KVCacheManager takes watermark: int(watermark * num_blocks) blocks are kept free when a "
        "waiting or preempted request is admitted while others are scheduled.",
        "admitting a new request into the last free blocks forces preemptions on the next decode "
        "steps; a reserve avoids that thrash.",
        "v0.24.0 vllm/v1/core/kv_cache_manager.py:125, 162-163 (argument, block count), "
        "363-370, 385, 415-417 (where it applies)",
        ("v0.33.0/vllm/v1/core/kv_cache_manager.py#kv_cache_manager.init.watermark",)),
    Change(
        "none_hash_default_seed", "0.29.0", "vllm-none-hash",
        "without PYTHONHASHSEED, NONE_HASH is hash_fn(\"vllm-none-hash\") instead of 32 random raw "
        "bytes, so sha256-family block hashes are the same in every process (xxhash and xxhash_cbor "
        "keep a per-process random seed).",
        "prefix-cache hits across processes (and KV transfer between them) need hashes that do not "
        "depend on a per-process random seed.",
        "v0.29.0 vllm/v1/core/kv_cache_utils.py:109 (DEFAULT_NONE_HASH_SEED), 118-131 "
        "(resolve_none_hash_seed; the xxhash seed at 129-130), 147-159 (init_none_hash)",
        ("v0.33.0/vllm/v1/core/kv_cache_utils.py#kv_cache_utils.none_hash",)),
    Change(
        "retention_interval_supported", "0.29.0", True,
        "the KV-cache config carries prefix_cache_retention_interval: with a value other than None "
        "a sliding-window group registers only the blocks a later hit can use, the window's tail "
        "before the prompt's replay boundary and before the shared-prefix boundary the lookup "
        "found (and, with k > 0, at the end of every k-token segment); the engine fills it from "
        "CacheConfig, whose default is 0.",
        "a sliding-window hit needs only the window's last blocks before the hit, so caching every "
        "block fills the pool with entries no lookup can use.",
        "v0.29.0 vllm/v1/kv_cache_interface.py:1223 (the field), "
        "v0.29.0 vllm/v1/core/kv_cache_coordinator.py:158 (read), "
        "v0.29.0 vllm/v1/core/single_type_kv_cache_manager.py:432-482, 1010-1069 (cache_blocks, the mask); "
        "before: v0.28.0 vllm/v1/core/kv_cache_coordinator.py:154 (from 0.23.0 the interval came from "
        "VLLM_PREFIX_CACHE_RETENTION_INTERVAL, unset by default: dense; the machines do not set it)",
        ("v0.33.0/vllm/v1/core/single_type_kv_cache_manager.py#single_type_kv_cache_manager.swa.reachable_block_mask",)),
    Change(
        "full_sequence_admission", "0.26.0", True,
        "the manager takes max_in_flight_tokens (allocate_slots has taken full_sequence_must_fit "
        "since 0.21.0, with the cap counted from max_num_batched_tokens): with the flag, the blocks "
        "the request's whole current sequence needs, a sliding-window group counting at most "
        "cdiv(min(window - 1 + in-flight tokens, max_model_len), block_size) + 1, with the "
        "watermark, must be free, or the call returns None before releasing any page; the "
        "machines drive the check from here.",
        "admitting a request whose first chunk fits but whose whole prompt does not leads to "
        "preemptions later in its prefill; the cap keeps sliding-window requests, which recycle "
        "their blocks, from being refused for blocks they will never hold at once.",
        "v0.26.0 vllm/v1/core/kv_cache_manager.py:121, 135-136 (max_in_flight_tokens), "
        "v0.26.0 vllm/v1/kv_cache_interface.py:567-588 (the sliding window's cap); "
        "before: v0.25.0 vllm/v1/kv_cache_interface.py:546-566 (the cap counts "
        "max_num_batched_tokens), v0.20.2 vllm/v1/core/kv_cache_manager.py:225-263 "
        "(can_fit_full_sequence)",
        ("v0.33.0/vllm/v1/core/kv_cache_manager.py#kv_cache_manager.allocate_slots",)),
    Change(
        "frees_behind_in_flight_tokens", "0.26.0", True,
        "requests count the tokens of steps still in flight (num_in_flight_tokens), and "
        "allocate_slots releases a sliding window's out-of-window pages at total_computed minus "
        "them; before, it released them at total_computed, which already counts a chunk still in "
        "flight under asynchronous scheduling.",
        "a step still in flight reads the window of its own tokens, so pages it still reads must "
        "not be released and reused.",
        "v0.26.0 vllm/v1/core/kv_cache_manager.py:440-447 (the release), "
        "v0.26.0 vllm/v1/request.py:154-157 (the count); "
        "before: v0.25.1 vllm/v1/core/kv_cache_manager.py:404-408",
        ("v0.33.0/vllm/v1/core/kv_cache_manager.py#kv_cache_manager.allocate_slots.remove_skipped",)),
    Change(
        "lora_extra_key", "0.11.1", "name",
        "a LoRA adapter enters a block hash by its name instead of its integer id.",
        "integer ids are assigned per process and can name different adapters in different "
        "processes; the name identifies the adapter.",
        "v0.11.1 vllm/v1/core/kv_cache_utils.py:450-462 (_gen_lora_extra_hash_keys returns "
        "lora_name); v0.11.0 kv_cache_utils.py:502-514 returns lora_int_id",
        ("v0.33.0/vllm/v1/core/kv_cache_utils.py#kv_cache_utils.lora_extra_keys",)),
    Change(
        "lora_extra_key", "0.31.0", "tagged",
        "a LoRA adapter enters a block hash as (\"lora\", name, path).",
        "two adapters loaded under one name from different paths must not share cached blocks; "
        "the tag keeps the key apart from other extra keys.",
        "v0.31.0 vllm/v1/core/kv_cache_utils.py:567-584 (_gen_lora_extra_hash_keys)",
        ("v0.33.0/vllm/v1/core/kv_cache_utils.py#kv_cache_utils.lora_extra_keys",)),
    Change(
        "tagged_extra_keys", "0.31.0", True,
        "the cache salt enters a block hash as (\"cache_salt\", salt) instead of the bare string.",
        "a bare salt string could equal another extra key; the tag makes it unambiguous.",
        "v0.31.0 vllm/v1/core/kv_cache_utils.py:614-637 (generate_block_hash_extra_keys)",
        ("v0.33.0/vllm/v1/core/kv_cache_utils.py#kv_cache_utils.generate_block_hash_extra_keys",)),
    Change(
        "zero_token_hit_adoption", "0.31.0", True,
        "allocate_slots accepts num_new_tokens == 0 when a prefix hit is being adopted "
        "(num_new_computed_tokens > 0); earlier releases refuse every zero-token call without "
        "external tokens.",
        "a request whose whole prompt is a prefix hit still has to take ownership of the hit blocks.",
        "v0.31.0 vllm/v1/core/kv_cache_manager.py:471-479",
        ("v0.33.0/vllm/v1/core/kv_cache_manager.py#kv_cache_manager.allocate_slots.prepare",)),
    Change(
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
    Change(
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

V0_POLICY_LOG: tuple[Change, ...] = (
    Change(
        "evictor_heap", "0.6.5", True,
        "the LRU evictor pops a heap of (last access, -hashed tokens, block id, hash), skipping "
        "entries an update or a removal left stale; before, it scanned the parked pages in the "
        "order they were parked, walking on from the first while the next page was no newer, so a "
        "page accessed again after it was parked kept its early place and could be evicted first.",
        "the scan costs time linear in the parked pages and relies on the oldest pages coming first "
        "(its comment says they should); the heap finds the oldest page in logarithmic time.",
        "v0.6.5 vllm/core/evictor.py:91-118, 128-137; before: v0.6.4 vllm/core/evictor.py:84-114",
        ("v0.10.2/vllm/core/evictor.py#evictor.lru_evictor",)),
    Change(
        "extra_hash_in_page_hash", "0.6.5", True,
        "a page's hash tuple ends with an extra hash (a LoRA adapter's id, None without one), so "
        "every page hash changes, also for sequences without an adapter.",
        "prefix caching must not share pages between requests that run different LoRA adapters.",
        "v0.6.5 vllm/core/block/prefix_caching_block.py:868-891; before: "
        "v0.6.4 vllm/core/block/prefix_caching_block.py:822-842",
        ("v0.10.2/vllm/core/block/prefix_caching_block.py#prefix_caching_block.hash_block",)),
    Change(
        "cached_tokens_tracker", "0.6.5", True,
        "the manager tracks each sequence by the hashes of its full token pages and answers "
        "get_common_computed_block_ids (and the new get_num_cached_tokens) from the leading hashes "
        "the allocator holds as computed pages; before, it recorded the computed block ids found "
        "among the table's ids, added every computed page even after one that was not, and stopped "
        "looking for good once a page was missing.",
        "the scheduler asks how many of a sequence's tokens are cached before it schedules the "
        "sequence, when it has no block table yet; hashing the tokens answers that without one.",
        "v0.6.5 vllm/core/block/prefix_caching_block.py:894-1020, vllm/core/block_manager.py:319-327; before: "
        "v0.6.4 vllm/core/block/prefix_caching_block.py:537-555, 845-925",
        ("v0.10.2/vllm/core/block/prefix_caching_block.py#prefix_caching_block.computed_blocks_tracker",)),
    Change(
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

_FIRST_READ = "the first release read with this value (the latest patch of each minor series was read)"

V1_API_LOG: tuple[Change, ...] = (
    Change(
        "manager_takes_kv_cache_config", "0.8.3", True,
        "KVCacheManager(kv_cache_config, max_model_len, ...) takes a KVCacheConfig of one group "
        "instead of block_size, num_gpu_blocks and sliding_window.",
        "the spec of the group (full attention or sliding window) chooses the per-type manager.",
        "v0.8.3 vllm/v1/core/kv_cache_manager.py:22-34; before: v0.8.2 vllm/v1/core/kv_cache_manager.py:20-34"),
    Change(
        "manager_hash_algo_arg", "0.8.3", True,
        "KVCacheManager takes caching_hash_algo (the behaviour: V1Policy.builtin_hash_only).",
        "the block hash becomes configurable.",
        "v0.8.3 vllm/v1/core/kv_cache_manager.py:27, 41; before: v0.8.2 vllm/v1/core/kv_cache_manager.py:20-29"),
    Change(
        "manager_hash_algo_arg", "0.10.1", False,
        "KVCacheManager takes no caching_hash_algo: requests hash themselves (manager_hashes_blocks).",
        "the hash function is given to each request's block_hasher instead.",
        "v0.10.1 vllm/v1/request.py:41, 120-121; before: v0.9.2 vllm/v1/core/kv_cache_manager.py:112-114"),
    Change(
        "allocate_lookahead_arg", "0.8.4", True,
        "allocate_slots takes num_lookahead_tokens (the behaviour: V1Policy.lookahead_supported).",
        "speculative slots for draft tokens.",
        "v0.8.4 vllm/v1/core/kv_cache_manager.py:163-169; before: v0.8.3 vllm/v1/core/kv_cache_manager.py:162-167"),
    Change(
        "request_prompt_arg", "0.8.5", False,
        "Request no longer takes the prompt text (a required argument before).",
        "the engine core works on token ids; the text stays with the front end.",
        "v0.8.5 vllm/v1/request.py:20-32; before: v0.8.4 vllm/v1/request.py:20-33 (prompt at 23)"),
    Change(
        "manager_has_coordinator", "0.9.1", True,
        "KVCacheManager hands its groups to a KV-cache coordinator; the KVCacheBlocks that "
        "get_computed_blocks and allocate_slots take and return hold one block list per group "
        "(0.9.0's KVCacheBlocks wraps a single list; 0.8.x passes bare lists).",
        "the coordinator is what lets one manager serve several KV-cache groups.",
        "v0.9.1 vllm/v1/core/kv_cache_manager.py:11, 22-28, 94-101, 133-134, 182-191 (the "
        "coordinator; KVCacheBlocks.blocks is a tuple of lists); "
        "v0.9.1 vllm/v1/core/kv_cache_coordinator.py:13; before: "
        "v0.9.0 vllm/v1/core/kv_cache_manager.py:23-24, 65-67, "
        "v0.8.5.post1 vllm/v1/core/kv_cache_manager.py:31-33, 92-93, 164-170"),
    Change(
        "request_pooling_and_salt_args", "0.9.0", True,
        "Request takes cache_salt. The arguments around it moved release by release, and the V1 "
        "adapter reads them off the installed signature: arrival_time is required until 0.9.0, "
        "absent in 0.9.1 and optional from 0.9.2, which also adds a required pooling_params.",
        "cache salts reach the request through its constructor.",
        "v0.9.0 vllm/v1/request.py:29, 32; v0.9.1 vllm/v1/request.py:28-33; "
        "v0.9.2 vllm/v1/request.py:31, 34; before: v0.8.5.post1 vllm/v1/request.py:20-32"),
    Change(
        "full_hit_search_indexes_hashes", "0.9.0", True,
        "the full-attention hit search moves into FullAttentionManager.find_longest_cache_hit and "
        "reads block_hashes[i] for every block up to num_tokens - 1, so a lookup of a request whose "
        "hash list is shorter (tokens appended and never computed, which the manager hashes only as "
        "their blocks are cached) raises IndexError once every hashed block hits; 0.8.x walked the "
        "list itself.",
        "the search was rewritten per attention type for sliding windows; the full-attention loop "
        "took the window loop's indexed form.",
        "v0.9.0 vllm/v1/core/single_type_kv_cache_manager.py:234-243; "
        "before: v0.8.5.post1 vllm/v1/core/specialized_manager.py:74"),
    Change(
        "full_hit_search_indexes_hashes", "0.9.1", False,
        "the full-attention hit search zips the block range with the hash list again, stopping at "
        "the list's end.",
        "a request's hash list may be shorter than its full blocks until 0.10.1 (hashes_on_request).",
        "v0.9.1 vllm/v1/core/single_type_kv_cache_manager.py:263; "
        "before: v0.9.0 vllm/v1/core/single_type_kv_cache_manager.py:234-236 (and 0.9.0.1)"),
    Change(
        "kv_config_tensors_dict", "0.9.1", False,
        "KVCacheConfig takes kv_cache_tensors=[...] instead of tensors={...}.",
        "one tensor may back several layers (the groups of a hybrid model share tensors).",
        "v0.9.1 vllm/v1/kv_cache_interface.py:186; before: v0.9.0 vllm/v1/kv_cache_interface.py:186, "
        "v0.8.5.post1 vllm/v1/kv_cache_interface.py:142-166"),
    Change(
        "none_hash_init_function", "0.10.0", True,
        "kv_cache_utils.init_none_hash(hash_fn) sets NONE_HASH at manager construction instead of "
        "once at import.",
        "NONE_HASH must be computed with the hash function the manager uses.",
        "v0.10.0 vllm/v1/core/kv_cache_utils.py:61-73; before: v0.9.2 vllm/v1/core/kv_cache_utils.py:59-60"),
    Change(
        "manager_hashes_blocks", "0.10.1", False,
        "requests carry a block_hasher and their own block_hashes; KVCacheManager takes no "
        "caching_hash_algo and has no req_to_block_hashes or free_block_hashes.",
        "the behaviour side of the same change is V1Policy.hashes_on_request.",
        "v0.10.1 vllm/v1/request.py:41, 120-121; before: v0.9.2 vllm/v1/core/kv_cache_manager.py:112-114"),
    Change(
        "request_multimodal_args", "0.10.2", False,
        "Request no longer requires multimodal arguments (multi_modal_inputs, multi_modal_hashes and "
        "multi_modal_placeholders; 0.10.1 renamed the first multi_modal_kwargs): one optional "
        "mm_features list replaces them.",
        "the V1 adapter passes None for whichever of them the installed Request requires.",
        "v0.10.2 vllm/v1/request.py:34; before: v0.10.1 vllm/v1/request.py:29-31, "
        "v0.9.2 vllm/v1/request.py:23-39"),
    Change(
        "hashing_module", "0.11.1", "vllm.utils.hashing",
        "sha256 and sha256_cbor move from vllm.utils to vllm.utils.hashing.",
        "vllm/utils was split into modules; " + _FIRST_READ + ".",
        "v0.11.1 vllm/utils/hashing.py:14, 31 (sha256, sha256_cbor), "
        "v0.11.1 vllm/v1/core/kv_cache_utils.py:15; before: v0.11.0 vllm/utils/__init__.py:3329, 3346"),
    Change(
        "spec_use_mla", "0.11.0", False,
        "FullAttentionSpec and SlidingWindowSpec no longer take use_mla (MLA has its own spec).",
        "MLAAttentionSpec arrives and carries what use_mla switched.",
        "v0.11.0 vllm/v1/kv_cache_interface.py:58-61; before: v0.10.2 vllm/v1/kv_cache_interface.py:63"),
    Change(
        "manager_hash_block_size_arg", "0.12.0", True,
        "KVCacheManager requires hash_block_size (the block size the request hashes are computed at).",
        "groups of different block sizes share one hash list at a common block size; " + _FIRST_READ + ".",
        "v0.12.0 vllm/v1/core/kv_cache_manager.py:95-99 (hash_block_size at 99), "
        "v0.12.0 vllm/v1/core/kv_cache_coordinator.py:361-369 (group block sizes are multiples of it); "
        "before: v0.11.1 vllm/v1/core/kv_cache_manager.py:94-103"),
    Change(
        "evict_blocks_method", "0.13.0", True,
        "KVCacheManager.evict_blocks(ids) exists (the behaviour: V1Policy.evict_blocks_supported).",
        "KV connectors drop blocks they lost from the prefix cache.",
        "v0.13.0 vllm/v1/core/kv_cache_manager.py:336"),
    Change(
        "request_eos_argument", "0.17.0", False,
        "Request takes no eos_token_id; the EOS id comes from "
        "SamplingParams.update_from_generation_config({}, eos_token_id=...).",
        _FIRST_READ + "; Request.eos_token_id remains as a deprecated property reading "
        "sampling_params.eos_token_id.",
        "v0.17.0 vllm/v1/request.py:60-77, 180-189 (no eos_token_id argument; the deprecated "
        "property); "
        "v0.17.0 vllm/sampling_params.py:511-518; before: v0.16.0 vllm/v1/request.py:65, 84"),
    Change(
        "manager_scheduler_block_size_arg", "0.23.0", True,
        "KVCacheManager requires scheduler_block_size (passed on to the coordinator; the scheduler "
        "gives its own block size).",
        _FIRST_READ + ".",
        "v0.23.0 vllm/v1/core/kv_cache_manager.py:111-116, 151 (scheduler_block_size at 115); "
        "v0.23.0 vllm/v1/core/sched/scheduler.py:241; before: v0.22.1 vllm/v1/core/kv_cache_manager.py:111-124"),
    Change(
        "manager_watermark_arg", "0.24.0", True,
        "KVCacheManager takes watermark (the behaviour: V1Policy.watermark_supported).",
        "an admission reserve against preemption thrash.",
        "v0.24.0 vllm/v1/core/kv_cache_manager.py:125"),
    Change(
        "allocate_has_scheduled_reqs", "0.24.0", True,
        "allocate_slots takes has_scheduled_reqs (the watermark applies only while others are scheduled).",
        "the watermark must not starve a pool with nothing else running.",
        "v0.24.0 vllm/v1/core/kv_cache_manager.py:288"),
)

V0_API_LOG: tuple[Change, ...] = (
    Change(
        "group_status_per_sequence", "0.6.4", False,
        "SequenceGroup.get_seqs(status) returns every sequence or none, by the first sequence's "
        "status; before, a group of several filtered each sequence by its own status.",
        "a single-sequence group needs one comparison; the rule assumes a group's sequences share "
        "one status, which a group with a finished member beside running ones breaks.",
        "v0.6.4 vllm/sequence.py:781-788; before: v0.6.3.post1 vllm/sequence.py:841-851"),
    Change(
        "num_cached_tokens", "0.6.5", True,
        "SelfAttnBlockSpaceManager.get_num_cached_tokens(seq) exists (the behaviour: "
        "V0Policy.cached_tokens_tracker).",
        "the scheduler asks it for the cached prefix of a sequence before scheduling it.",
        "v0.6.5 vllm/core/block_manager.py:512-516; before: v0.6.4 vllm/core/block_manager.py:444-451 "
        "(the accessors before _can_swap: no get_num_cached_tokens)"),
    Change(
        "reset_prefix_cache", "0.7.0", True,
        "SelfAttnBlockSpaceManager.reset_prefix_cache() exists.",
        "0.7.0 is the release after 0.6.6.post1, whose vllm/core/block_manager.py has no such method.",
        "v0.7.0 vllm/core/block_manager.py:458-459; before: "
        "v0.6.6.post1 vllm/core/block_manager.py:455-458 (get_prefix_cache_hit_rate, then _can_swap)"),
    Change(
        "group_status_per_sequence", "0.7.0", True,
        "SequenceGroup.get_seqs(status) filters each sequence of a group of several by its own "
        "status instead of returning all or none by the first sequence's status.",
        "the block manager's own get_seqs calls must not see a finished member as running; "
        "0.7.0 is the release after 0.6.6.post1.",
        "v0.7.0 vllm/sequence.py:822-832; before: v0.6.6.post1 vllm/sequence.py:804-811"),
)

KERNEL_API_LOG: tuple[Change, ...] = (
    Change(
        "paged_2d_rocm_check_bound_at_import", "0.8.3", True,
        "chunked_prefill_paged_decode's module imports use_rocm_custom_paged_attention when it is "
        "loaded, and the function asks it whether to call the ROCm kernel instead.",
        "a ROCm-only paged attention kernel for decode arrived beside the Triton one.",
        "v0.8.3 vllm/attention/ops/chunked_prefill_paged_decode.py:13-14, 283-286; before: "
        "v0.8.2 vllm/attention/ops/chunked_prefill_paged_decode.py:9-13 (no such import)"),
    Change(
        "paged_2d_max_seq_len_arg", "0.8.3", True,
        "chunked_prefill_paged_decode takes max_seq_len (passed on to the prefill kernel and the ROCm check).",
        "the ROCm kernel sizes its partitions by the longest sequence.",
        "v0.8.3 vllm/attention/ops/chunked_prefill_paged_decode.py:207-225 (max_seq_len at 218); before: "
        "v0.8.2 vllm/attention/ops/chunked_prefill_paged_decode.py:204-221"),
    Change(
        "min_block_size", "0.9.0", 1,
        "under the Triton interpreter, the pinned Triton no longer asserts that both tl.dot operands "
        "have every dimension >= 16, so kernel_paged_attention_2d builds for block size 8 there (on a "
        "GPU the NVIDIA backend still asks 16 of a 16-bit dot's dimensions: all of them in Triton 3.4, "
        "the inner one, the block size in P @ V, in 3.8).",
        "vLLM 0.9.0 is the first release to pin torch 2.7.0, which brings Triton 3.3; 0.8.x pins "
        "torch 2.6.0, which brings Triton 3.2.",
        "v0.9.0 requirements/cuda.txt:9; before: v0.8.5.post1 requirements/cuda.txt:9, "
        "v0.8.5.post1 vllm/attention/ops/chunked_prefill_paged_decode.py:159"),
    Change(
        "paged_2d_rocm_check_bound_at_import", "0.10.1", False,
        "chunked_prefill_paged_decode imports the ROCm check at call time instead of at module load "
        "(the module-level import exists from 0.8.3 through 0.10.0; 0.8.0-0.8.2 lack it).",
        "the import moved into the function with the attention-sinks change, which passes the check sinks.",
        "v0.10.1 vllm/attention/ops/chunked_prefill_paged_decode.py:298-299; before: "
        "v0.10.0 vllm/attention/ops/chunked_prefill_paged_decode.py:14"),
    Change(
        "unified_masks_tail", "0.11.0", True,
        "the unified attention kernels mask their K/V loads past the context (tile_mask).",
        "the kernels walk tiles of TILE_SIZE tokens instead of whole blocks, and a tile may run past "
        "the context; unwritten slots may hold NaN, which would reach the output as 0 * NaN.",
        "v0.11.0 vllm/attention/ops/triton_unified_attention.py:212, 229, 242; before: "
        "v0.10.2 vllm/attention/ops/triton_unified_attention.py:186, 203-205, 216-218 (whole "
        "blocks, K/V loads masked by the head dimension only)"),
    Change(
        "cache_write_head_major", "0.11.0", False,
        "triton_reshape_and_cache_flash arrives and writes only the flash layout.",
        "a Triton cache write for platforms without the CUDA op; v0.10.2 has no such module.",
        "v0.11.0 vllm/attention/ops/triton_reshape_and_cache_flash.py:11, 90"),
    Change(
        "unified_split_k_args", "0.13.0", True,
        "unified_attention takes the split-K arguments (seq_threshold_3D, num_par_softmax_segments, "
        "softmax_segm_*).",
        _FIRST_READ + ".",
        "v0.13.0 vllm/attention/ops/triton_unified_attention.py:821, 838-842; "
        "before: v0.11.1 vllm/attention/ops/triton_unified_attention.py:735-757"),
    Change(
        "ops_package", "0.14.0", "vllm.v1.attention.ops",
        "the Triton attention ops move from vllm.attention.ops to vllm.v1.attention.ops.",
        _FIRST_READ + ".",
        "v0.14.0 vllm/v1/attention/ops/triton_unified_attention.py:862, "
        "v0.14.0 vllm/v1/attention/ops/chunked_prefill_paged_decode.py:247, "
        "v0.14.0 vllm/v1/attention/ops/triton_reshape_and_cache_flash.py:114; before: "
        "v0.13.0 vllm/attention/ops/triton_unified_attention.py:821, "
        "v0.13.0 vllm/attention/ops/chunked_prefill_paged_decode.py:223"),
    Change(
        "cache_write_head_major", "0.14.0", True,
        "triton_reshape_and_cache_flash also writes the classic head-major cache (a 5-D key "
        "cache, a 4-D value cache), chosen when key_cache has five dimensions "
        "(USE_HEAD_MAJOR_LAYOUT).",
        _FIRST_READ + ".",
        "v0.14.0 vllm/v1/attention/ops/triton_reshape_and_cache_flash.py:31, 52-70, 129-135; "
        "before: v0.13.0 vllm/attention/ops/triton_reshape_and_cache_flash.py:91-94, 102"),
    Change(
        "paged_2d_masks_tail", "0.25.0", True,
        "kernel_paged_attention_2d masks its K/V loads past the context in a sequence's last block.",
        _FIRST_READ + ".",
        "v0.25.0 vllm/v1/attention/ops/chunked_prefill_paged_decode.py:163, 189, 202; "
        "before: v0.24.0 vllm/v1/attention/ops/chunked_prefill_paged_decode.py:184, 197"),
)

MECHANISM_LOG: tuple[Change, ...] = (
    Change(
        "v1_block_pool", "0.8.0", True,
        "vllm/v1/core/block_pool.py (BlockPool) arrives: the V1 page manager the machines model.",
        "V1 was an opt-in alpha engine before; its pages were managed without a block pool.",
        "v0.8.0 vllm/v1/core/block_pool.py:16, v0.8.0 vllm/v1/core/kv_cache_manager.py:9, 51"),
    Change(
        "triton_kernels", "0.8.0", True,
        "the Triton kernels the kernel properties drive arrive: chunked_prefill_paged_decode "
        "(kernel_paged_attention_2d); unified attention follows in later releases.",
        "the V1 engine's Triton attention backend; v0.7.3 has no such module.",
        "v0.8.0 vllm/attention/ops/chunked_prefill_paged_decode.py:22, 204"),
    Change(
        "v0_block_manager", "0.11.0", False,
        "the V0 engine and its block manager (vllm/core/block_manager.py, vllm/core/block/*) are removed.",
        "V1 became the only engine.",
        "v0.11.0 sdist (sha256 f435a64c24e9c4178d657a76f8edd8548ddc444012f7d06a9f79ac3a6392bfae) "
        "has no vllm/core/; v0.10.2 vllm/core/block_manager.py:22"),
)

@dataclass(frozen=True)
class NotAField:
    """A difference between releases that is deliberately not a field: outside what the reference
    models (``kind="out of scope"``), or a change of representation with the same observable
    behaviour (``kind="representation"``). Each says why, with the upstream lines."""

    first: str
    kind: str
    what: str
    why: str
    upstream: str


NOT_FIELDS: tuple[NotAField, ...] = (
    NotAField(
        "0.34.0", "representation",
        "BlockHashToBlockMap holds block ids instead of blocks: one id per key, and every id of a key "
        "cached by several blocks, in insertion order, in a second map (_dup_ids).",
        "which block a lookup returns, what insert and pop do and what len counts are the same: both "
        "classes, driven by 3,000 random insert/pop sequences, answered alike at every step. The V1 "
        "adapter reads the map's shape from its values (conformance/adapters/installed_api.py).",
        "v0.34.0 vllm/v1/core/block_pool.py:56-104; before: v0.33.0 vllm/v1/core/block_pool.py:58-128"),
    NotAField(
        "0.34.0", "out of scope",
        "a request's prefix-cache lookup is bounded by its prefix_cache_hit_limit: 0 when its "
        "parameters set skip_reading_prefix_cache, prompt_logprob_start when it asks for prompt "
        "logprobs, else unbounded (0.33.0: skip_reading_prefix_cache alone, all or nothing).",
        "the machines' requests carry no sampling options, and for such a request both releases search "
        "the whole prefix; the difference needs prompt logprobs with skip_reading_prefix_cache=False.",
        "v0.34.0 vllm/v1/request.py:352-377, v0.34.0 vllm/v1/core/kv_cache_manager.py:253; "
        "before: v0.33.0 vllm/v1/request.py:314-325"),
    NotAField(
        "0.34.0", "out of scope",
        "free_blocks(blocks, evict_first=True) puts freed cached blocks at the front of the free queue "
        "(evicted first) instead of the tail.",
        "only the CPU offload manager passes it (v0.34.0 vllm/v1/simple_kv_offload/manager.py:1240-1243); "
        "the engine's GPU KV manager, the one the reference models, always frees with the default.",
        "v0.34.0 vllm/v1/core/block_pool.py:798-800, 826-828"),
    NotAField(
        "0.34.0", "out of scope",
        "a block refers to its pool weakly; freeing a block whose pool was garbage-collected skips it.",
        "the reference has one pool per manager and blocks never leave it.",
        "v0.34.0 vllm/v1/core/block_pool.py:819-822, v0.34.0 vllm/v1/core/kv_cache_utils.py:173-174"),
    NotAField(
        "0.34.0", "out of scope",
        "a request stores its token ids as 32-bit integers, so a token id of 2**31 or more is refused "
        "when the request is built.",
        "vocabularies are far below 2**31; the machines draw small ids and the hashes of ids that fit are "
        "unchanged (hash_block_tokens takes a tuple of the slice).",
        "v0.34.0 vllm/v1/request.py:138-141, v0.34.0 vllm/v1/core/kv_cache_utils.py:1020-1023"),
    NotAField(
        "0.34.0", "out of scope",
        "a request may arrive with block hashes the front end computed; the engine keeps them when their "
        "count matches the prompt and hashes the rest itself.",
        "a front-end concern: the hashes are the values the request would compute itself.",
        "v0.34.0 vllm/v1/core/kv_cache_utils.py:1037-1057, v0.34.0 vllm/v1/request.py:235-238"),
    NotAField(
        "0.34.0", "out of scope",
        "the HiSparse source manager reserves import pages in its admission count.",
        "reached only with HiSparse layouts, which the reference does not model.",
        "v0.34.0 vllm/v1/core/single_type_kv_cache_manager.py:2286-2302"),
)


LOGS: dict[type, tuple[Change, ...]] = {
    V1Policy: V1_POLICY_LOG, V0Policy: V0_POLICY_LOG, V1Api: V1_API_LOG, V0Api: V0_API_LOG,
    KernelApi: KERNEL_API_LOG, Mechanisms: MECHANISM_LOG,
}

def _values_at(record: type, release: str) -> dict[str, object]:
    key = release_key(release)
    values = dict(INITIAL[record])
    for change in LOGS[record]:
        if release_key(change.first) <= key:
            values[change.field] = change.value_from
    return values


@cache
def v1_policy_at(release: str) -> V1Policy:
    """The V1 policy of a release, computed from the log; named ``v<release>``."""
    return V1Policy(name=f"v{release}", **_values_at(V1Policy, release))  # type: ignore[arg-type]  # the log holds each field's typed value


@cache
def v0_policy_at(release: str) -> V0Policy:
    """The V0 policy of a release, computed from the log; named ``v<release>``."""
    return V0Policy(name=f"v{release}", **_values_at(V0Policy, release))  # type: ignore[arg-type]  # the log holds each field's typed value


def policy_named(name: str, record: type = V1Policy):
    """The policy a trace or config names, e.g. ``"v0.33.0"``: the log's values at that release."""
    if not isinstance(name, str) or not name.startswith("v"):
        raise KeyError(f"a policy is named v<release>, e.g. 'v0.33.0', not {name!r}")
    try:
        release_key(name[1:])
    except ValueError:
        raise KeyError(f"a policy is named v<release>, e.g. 'v0.33.0', not {name!r}") from None
    release = name[1:]
    if record is V1Policy:
        if api_at(release).v1 is None:
            raise KeyError(f"vLLM {release} has no V1 BlockPool, so there is no V1 policy {name!r}")
        return v1_policy_at(release)
    if api_at(release).v0 is None:
        raise KeyError(f"vLLM {release} has no V0 block manager, so there is no V0 policy {name!r}")
    return v0_policy_at(release)


@dataclass(frozen=True)
class ReleaseApi:
    """Everything the adapters read about one release, computed from the log."""

    release: str
    mechanisms: Mechanisms
    v1: V1Api | None  # None: no V1 BlockPool
    v0: V0Api | None  # None: no V0 block manager
    kernels: KernelApi | None  # None: no Triton kernels


@cache
def api_at(release: str) -> ReleaseApi:
    """The adapters' view of a release, from the log."""
    mech = Mechanisms(**_values_at(Mechanisms, release))  # type: ignore[arg-type]  # the log holds each field's typed value
    return ReleaseApi(
        release=release, mechanisms=mech,
        v1=V1Api(**_values_at(V1Api, release)) if mech.v1_block_pool else None,  # type: ignore[arg-type]  # the log holds each field's typed value
        v0=V0Api(**_values_at(V0Api, release)) if mech.v0_block_manager else None,  # type: ignore[arg-type]  # the log holds each field's typed value
        kernels=KernelApi(**_values_at(KernelApi, release)) if mech.triton_kernels else None,  # type: ignore[arg-type]  # the log holds each field's typed value
    )


def changes_at(release: str) -> list[tuple[type, Change]]:
    """Every logged change whose first release is ``release`` (for the releases page)."""
    return [(record, c) for record, log in LOGS.items() for c in log if c.first == release]


def check_log() -> list[str]:
    """Problems with the log itself: unknown fields, missing initial values, changes out of order
    or that change nothing. Empty when the log is well formed (a test asserts it)."""
    problems = []
    for record, log in LOGS.items():
        names = {f.name for f in fields(record)} - {"name"}
        if set(INITIAL[record]) != names:
            problems.append(f"{record.__name__}: INITIAL lacks {sorted(names - set(INITIAL[record]))}, "
                            f"has unknown {sorted(set(INITIAL[record]) - names)}")
        last: dict[str, tuple[tuple, object]] = {}
        for change in log:
            if change.field not in names:
                problems.append(f"{record.__name__}: change of unknown field {change.field!r}")
                continue
            key = release_key(change.first)
            before_key, before = last.get(change.field, ((0, 0, 0, 0, 0), INITIAL[record][change.field]))
            if key <= before_key:
                problems.append(f"{record.__name__}.{change.field}: change at {change.first} is not after the previous one")
            if change.value_from == before:
                problems.append(f"{record.__name__}.{change.field}: change at {change.first} keeps the value {before!r}")
            last[change.field] = (key, change.value_from)
    return problems


# The names the releases page and older readers use.
V1_FIELD_HISTORY = V1_POLICY_LOG
V0_FIELD_HISTORY = V0_POLICY_LOG
FieldChange = Change

__all__ = [
    "Change", "FieldChange", "NotAField", "NOT_FIELDS", "INITIAL", "OLDEST", "V1_POLICY_LOG", "V0_POLICY_LOG", "V1_API_LOG", "V0_API_LOG",
    "KERNEL_API_LOG", "MECHANISM_LOG", "LOGS", "ReleaseApi", "api_at", "changes_at",
    "check_log", "policy_named", "release_key", "v0_policy_at", "v1_policy_at", "V1_FIELD_HISTORY",
    "V0_FIELD_HISTORY",
]
