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

from dataclasses import dataclass


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

    # How request-level extra keys enter a block hash. True ("tagged"): LoRA contributes
    # ("lora", name, path) and the cache salt ("cache_salt", salt). False ("bare"): LoRA
    # contributes its integer id and the salt the bare string. Order is LoRA, (mm), salt in both.
    #   v0.33.0 vllm/v1/core/kv_cache_utils.py:590-676
    #   v0.10.2 vllm/v1/core/kv_cache_utils.py:494-536
    tagged_extra_keys: bool

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


V1_V0_33_0 = V1Policy(
    name="v0.33.0",
    free_hashless_blocks_to_front=True,
    null_block_ref_counted=False,
    none_hash_default_seed="vllm-none-hash",
    tagged_extra_keys=True,
    zero_token_hit_adoption=True,
    watermark_supported=True,
    evict_blocks_supported=True,
    cache_full_blocks_skips_null=True,
)

V1_V0_10_2 = V1Policy(
    name="v0.10.2",
    free_hashless_blocks_to_front=False,
    null_block_ref_counted=True,
    none_hash_default_seed=None,
    tagged_extra_keys=False,
    zero_token_hit_adoption=False,
    watermark_supported=False,
    evict_blocks_supported=False,
    cache_full_blocks_skips_null=False,
)

V1_POLICIES: dict[str, V1Policy] = {p.name: p for p in (V1_V0_33_0, V1_V0_10_2)}


def v1_policy_for_version(version: str) -> V1Policy:
    """The policy that reproduces an installed vLLM release, e.g. ``"0.33.0"``."""
    key = version if version.startswith("v") else "v" + version
    try:
        return V1_POLICIES[key]
    except KeyError:
        raise KeyError(f"no V1 policy for vLLM {version!r}; known: {sorted(V1_POLICIES)}") from None


__all__ = ["V1Policy", "V1_V0_33_0", "V1_V0_10_2", "V1_POLICIES", "v1_policy_for_version"]
