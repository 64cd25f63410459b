"""The block pool: null block, lazy eviction, free order per policy, reset and targeted eviction."""

from __future__ import annotations

import pytest

from conformance.changelog import v1_policy_at
from reference.blocks.errors import DoubleFree, InvalidArgument, OutOfBlocks, UnknownBlock
from reference.blocks.v1.block_pool import BlockPool
from reference.blocks.v1.hashing import sha256_pickle

# The policies of the two pinned releases, computed by the change log.
V1_V0_10_2 = v1_policy_at("0.10.2")
V1_V0_33_0 = v1_policy_at("0.33.0")


def cache(pool: BlockPool, blocks, group_id=0):
    hashes = [sha256_pickle(("h", b.block_id)) for b in blocks]
    pool.cache_full_blocks(hashes, blocks, 0, len(blocks), group_id)
    return hashes


@pytest.mark.parametrize("policy", [V1_V0_33_0, V1_V0_10_2])
def test_null_block_is_never_handed_out(policy):
    """Catches: block 0 (the null placeholder) being allocated to a request and overwritten."""
    pool = BlockPool(5, True, policy)
    assert pool.null_block.block_id == 0 and pool.null_block.is_null
    taken = pool.get_new_blocks(4)
    assert [b.block_id for b in taken] == [1, 2, 3, 4]
    with pytest.raises(OutOfBlocks):
        pool.get_new_blocks(1)
    pool.free_blocks(taken)
    assert 0 not in pool.free_queue.block_ids() and pool.num_free_blocks == 4


def test_free_order_per_policy():
    """Catches: hash-less freed blocks queued at the tail under v0.33.0 (or at the front under v0.10.2)."""
    orders = {}
    for policy in (V1_V0_33_0, V1_V0_10_2):
        pool = BlockPool(6, True, policy)
        blocks = pool.get_new_blocks(4)
        cache(pool, blocks[:2])
        pool.free_blocks(reversed(blocks))  # tail first: 4 (no hash), 3 (no hash), 2, 1
        orders[policy.name] = pool.free_queue.block_ids()
    assert orders["v0.33.0"] == [4, 3, 5, 2, 1]
    assert orders["v0.10.2"] == [5, 4, 3, 2, 1]


def test_caching_off_frees_everything_to_front_under_v0_33_0():
    """Catches: ignoring enable_caching in the front/tail choice (with caching off every block counts as hash-less)."""
    pool = BlockPool(4, False, V1_V0_33_0)
    blocks = pool.get_new_blocks(2)
    pool.free_blocks(reversed(blocks))
    assert pool.free_queue.block_ids() == [2, 1, 3]


@pytest.mark.parametrize("policy", [V1_V0_33_0, V1_V0_10_2])
def test_lazy_eviction_and_revival(policy):
    """Catches: dropping a hash on free (no revival) or keeping it after reuse (a stale hit on new content)."""
    pool = BlockPool(4, True, policy)
    blocks = pool.get_new_blocks(2)
    hashes = cache(pool, blocks)
    pool.free_blocks(reversed(blocks))
    assert pool.get_cached_block(hashes[0], [0]) == [blocks[0]]
    pool.touch([blocks[0]])  # revive: out of the queue, one reference
    assert blocks[0].ref_cnt == 1 and not pool.free_queue.contains(blocks[0])
    reused = pool.get_new_blocks(2)  # 3 (never used), then 2 (cached, evicted now)
    assert [b.block_id for b in reused] == [3, 2]
    assert blocks[1].block_hash is None and pool.get_cached_block(hashes[1], [0]) is None
    assert pool.get_cached_block(hashes[0], [0]) == [blocks[0]]


def test_null_block_refcount_per_policy():
    """Catches: the null block's reference count moving under v0.33.0, or not drifting as in v0.10.2."""
    for policy, expected in ((V1_V0_33_0, 0), (V1_V0_10_2, 1)):
        pool = BlockPool(3, True, policy)
        pool.touch([pool.null_block, pool.null_block])
        pool.free_blocks([pool.null_block])
        assert pool.null_block.ref_cnt == expected
        assert not pool.free_queue.contains(pool.null_block)


def test_reset_only_when_idle():
    """Catches: a reset that wipes hashes of blocks still in use, or that refuses on an idle pool."""
    pool = BlockPool(4, True, V1_V0_33_0)
    blocks = pool.get_new_blocks(2)
    cache(pool, blocks)
    assert pool.reset_prefix_cache() is False and blocks[0].block_hash is not None
    pool.free_blocks(blocks)
    assert pool.reset_prefix_cache() is True
    assert pool.cached == {} and all(b.block_hash is None for b in pool.blocks)


def test_evict_blocks_keeps_references():
    """Catches: evict_blocks freeing referenced blocks instead of only dropping their cache entries."""
    pool = BlockPool(4, True, V1_V0_33_0)
    blocks = pool.get_new_blocks(2)
    hashes = cache(pool, blocks)
    pool.evict_blocks([1, 0])
    assert blocks[0].block_hash is None and blocks[0].ref_cnt == 1
    assert pool.get_cached_block(hashes[0], [0]) is None and pool.get_cached_block(hashes[1], [0]) == [blocks[1]]
    with pytest.raises(InvalidArgument):
        BlockPool(4, True, V1_V0_10_2).evict_blocks([1])


def test_duplicate_hash_lookup_returns_first_cached():
    """Catches: a lookup returning the newest of two equal cached blocks instead of the first one cached."""
    pool = BlockPool(4, True, V1_V0_33_0)
    a, b = pool.get_new_blocks(2)
    digest = sha256_pickle("same")
    pool.cache_full_blocks([digest], [a], 0, 1, 0)
    pool.cache_full_blocks([digest], [b], 0, 1, 0)
    assert pool.get_cached_block(digest, [0]) == [a]
    pool.free_blocks([a])
    pool.get_new_blocks(2)  # 3, then a: a is evicted
    assert pool.get_cached_block(digest, [0]) == [b]


def test_pool_misuse_is_refused_without_change():
    """Catches: freeing a block more often than referenced, or allocating beyond the pool, corrupting counts."""
    pool = BlockPool(4, True, V1_V0_33_0)
    blocks = pool.get_new_blocks(1)
    before = ([b.ref_cnt for b in pool.blocks], pool.free_queue.block_ids())
    with pytest.raises(DoubleFree):
        pool.free_blocks([blocks[0], blocks[0]])
    with pytest.raises(OutOfBlocks):
        pool.get_new_blocks(3)
    with pytest.raises(UnknownBlock):
        pool.evict_blocks([9])
    with pytest.raises(InvalidArgument):
        BlockPool(0, True, V1_V0_33_0)
    assert ([b.ref_cnt for b in pool.blocks], pool.free_queue.block_ids()) == before
