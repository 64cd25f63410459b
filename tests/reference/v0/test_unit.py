"""Focused checks of the V0 reference manager against behaviours pinned from vLLM v0.10.2."""

from __future__ import annotations

import copy

import pytest

from conformance.adapters.reference_v0 import pool_snapshot, snapshot
from reference.blocks.errors import BlockManagerError, DoubleFree, InvalidArgument, OutOfBlocks, UnknownRequest
from reference.blocks.v0 import AllocStatus, BlockSpaceManager, Device, SeqView
from reference.blocks.v0.content_hash import NONE_HASH
from reference.blocks.v0.evictor import LRUEvictor
from reference.blocks.v0.naive_allocator import NaiveAllocator


def test_seed_example_five_tokens_need_two_blocks_and_growth_keeps_prefix():
    """Catches: wrong page count for a partial tail, or growth that moves/reallocates the prefix."""
    m = BlockSpaceManager(block_size=4, num_gpu_blocks=8, num_cpu_blocks=0, watermark=0.0)
    m.allocate([SeqView(1, [10, 11, 12, 13, 14])])
    table = m.block_tables[1]
    assert m.get_block_table(1) == [0, 1]
    assert len(table.blocks) * 4 == 8 and table.blocks[-1].token_ids == [14]
    assert table.blocks[-1].num_empty_slots == 3
    m.allocate([SeqView(2, [1, 2, 3, 4])])
    assert m.get_block_table(2) == [2]
    assert m.append_slots(SeqView(2, [1, 2, 3, 4, 5], 4, False), 0) == []
    assert m.get_block_table(2) == [2, 3]


def test_lifo_reuse_of_freed_ids():
    """Catches: freed ids appended on the right (FIFO) instead of reused newest-first."""
    alloc = NaiveAllocator(range(4), block_size=2)
    a, b, c = (alloc.allocate_id() for _ in range(3))
    assert (a, b, c) == (0, 1, 2)
    alloc.free_id(a)
    alloc.free_id(c)
    assert list(alloc.free_ids) == [2, 0, 3]
    assert alloc.allocate_id() == 2


def test_double_free_is_refused_and_counts_unchanged():
    """Catches: a second free that drives a ref count negative or re-queues the id."""
    alloc = NaiveAllocator(range(3), block_size=2)
    block_id = alloc.allocate_id()
    alloc.free_id(block_id)
    before = pool_snapshot(alloc)
    with pytest.raises(DoubleFree):
        alloc.free_id(block_id)
    assert pool_snapshot(alloc) == before


def test_evictor_order_oldest_then_longest_prefix_then_id():
    """Catches: evicting by insertion order, or preferring short prefixes on an access-time tie."""
    ev = LRUEvictor()
    ev.add(5, 50, num_hashed_tokens=4, last_accessed=2)
    ev.add(3, 30, num_hashed_tokens=8, last_accessed=1)
    ev.add(7, 70, num_hashed_tokens=4, last_accessed=1)
    ev.add(6, 60, num_hashed_tokens=4, last_accessed=1)
    assert [ev.evict()[0] for _ in range(4)] == [3, 6, 7, 5]


def test_evictor_update_leaves_the_old_heap_entry_stale():
    """Catches: an update that re-pushes (vLLM only edits the table, so the page is not evictable)."""
    ev = LRUEvictor()
    ev.add(1, 10, 4, 0)
    ev.update(1, 5)
    with pytest.raises(BlockManagerError):
        ev.evict()


def test_fork_then_append_copies_on_write():
    """Catches: appending into a block shared after fork instead of copying it first."""
    m = BlockSpaceManager(4, 8, 4)
    m.allocate([SeqView(1, [1, 2, 3, 4, 5])])
    m.fork(1, 2)
    assert snapshot(m)["gpu"]["refcounts"] == {"0": 2, "1": 2}
    assert m.append_slots(SeqView(2, [1, 2, 3, 4, 5, 7], 5, False), 0) == [(1, 2)]
    assert m.get_block_table(2) == [0, 2] and m.get_block_table(1) == [0, 1]
    assert m.block_tables[1].blocks[1].token_ids == [5]


def test_swap_out_and_in_return_device_relative_pairs():
    """Catches: absolute CPU ids in the mapping, or a swap that forgets to release source pages."""
    m = BlockSpaceManager(2, 4, 4, watermark=0.0)
    seq = SeqView(1, [1, 2, 3])
    m.allocate([seq])
    assert m.can_swap_out([seq])
    assert m.swap_out([seq]) == [(0, 0), (1, 1)]
    assert m.get_block_table(1) == [4, 5] and m.get_num_free_gpu_blocks() == 4
    assert m.can_swap_in([seq], 0) is AllocStatus.OK
    assert m.swap_in([seq]) == [(0, 1), (1, 0)]  # LIFO: GPU id 1 was freed last
    assert m.get_num_free_cpu_blocks() == 4


@pytest.mark.parametrize("watermark,prompt_len,expected", [
    (0.0, 16, AllocStatus.OK), (0.5, 16, AllocStatus.OK), (0.5, 20, AllocStatus.NEVER),
])
def test_can_allocate_watermark(watermark, prompt_len, expected):
    """Catches: watermark compared against free instead of total blocks for NEVER."""
    m = BlockSpaceManager(4, 8, 0, watermark=watermark)
    assert m.can_allocate(SeqView(1, list(range(prompt_len)))) is expected


def test_can_allocate_later_when_pool_is_busy():
    """Catches: reporting NEVER (or OK) for a group that fits once pages are freed."""
    m = BlockSpaceManager(4, 4, 0, watermark=0.0)
    m.allocate([SeqView(1, list(range(12)))])
    assert m.can_allocate(SeqView(2, list(range(8)))) is AllocStatus.LATER
    m.free(1)
    assert m.can_allocate(SeqView(2, list(range(8)))) is AllocStatus.OK


def test_sliding_window_caps_need_and_takes_the_null_block_lazily():
    """Catches: a missing window cap, an eager null block, or dropped pages not returned."""
    m = BlockSpaceManager(2, 8, 0, watermark=0.0, sliding_window=2)
    assert m.max_block_sliding_window == 3
    assert m.can_allocate(SeqView(1, list(range(40)))) is AllocStatus.OK  # capped at 3 pages
    m.allocate([SeqView(1, [1, 2, 3, 4, 5, 6, 7, 8])])
    assert snapshot(m)["null_block"] is None
    m.append_slots(SeqView(1, [1, 2, 3, 4, 5, 6, 7, 8, 9], 8, False), 0)
    null = snapshot(m)["null_block"]
    assert null == 4
    assert m.get_block_table(1) == [null, 1, 2, 3, 0]  # page 0 dropped, then reused (LIFO)
    assert m.get_num_free_gpu_blocks() == 8 - 5


def test_prefix_hit_shares_full_blocks_and_hash_matches_python_formula():
    """Catches: a hash that differs from hash((first, prev, *tokens, extra)) or a missed cache hit."""
    m = BlockSpaceManager(2, 8, 0, watermark=0.0, enable_caching=True)
    m.allocate([SeqView(1, [5, 6, 7, 8, 9])])
    h0 = hash((True, NONE_HASH, 5, 6, None))
    h1 = hash((False, h0, 7, 8, None))
    assert m.block_tables[1].blocks[0].content_hash == h0
    assert m.block_tables[1].blocks[1].content_hash == h1
    m.allocate([SeqView(2, [5, 6, 7, 8, 1])])
    assert m.get_block_table(2)[:2] == m.get_block_table(1)[:2]
    assert m.get_block_table(2)[2] != m.get_block_table(1)[2]


def test_freed_cached_blocks_are_parked_and_reset_empties_the_evictor():
    """Catches: cached pages returned to the free list on free, or a reset that keeps hashes."""
    m = BlockSpaceManager(2, 4, 0, watermark=0.0, enable_caching=True)
    seq = SeqView(1, [1, 2, 3, 4])
    m.get_num_cached_tokens(seq)
    m.allocate([seq])
    m.free(1)
    snap = snapshot(m)["gpu"]
    assert [p[0] for p in snap["evictor"]["parked"]] == [0, 1] and snap["free"] == [2, 3]
    assert m.get_num_free_gpu_blocks() == 4
    assert m.reset_prefix_cache() is True
    snap = snapshot(m)["gpu"]
    assert snap["cached"] == [] and snap["evictor"]["parked"] == [] and sorted(snap["free"]) == [0, 1, 2, 3]


@pytest.mark.parametrize("action,error", [
    (lambda m: m.append_slots(SeqView(9, [1]), 0), UnknownRequest),
    (lambda m: m.allocate([SeqView(1, [1])]), InvalidArgument),
    (lambda m: m.allocate([SeqView(7, list(range(40)))]), OutOfBlocks),
    (lambda m: m.swap_out([SeqView(1, [1, 2, 3, 4, 5]), SeqView(2, [1, 2, 3, 4, 5, 6, 7, 8, 9])]), OutOfBlocks),
    (lambda m: m.append_slots(SeqView(2, list(range(9)) + [0] * 30, 9, False), 0), OutOfBlocks),
    (lambda m: m.get_block_table(3), UnknownRequest),
    (lambda m: m.can_allocate(SeqView(4, [1]), -1), InvalidArgument),
])
def test_misuse_raises_and_leaves_state_unchanged(action, error):
    """Catches: a refused call that leaks pages, half-grows a table or half-swaps a group."""
    m = BlockSpaceManager(4, 6, 3, watermark=0.0)
    m.allocate([SeqView(1, [1, 2, 3, 4, 5])])
    m.allocate([SeqView(2, list(range(9)))])
    before = copy.deepcopy(snapshot(m))
    with pytest.raises(error):
        action(m)
    assert snapshot(m) == before


def test_free_of_unknown_sequence_is_a_no_op_like_vllm():
    """Catches: free of a never-allocated sequence raising or touching pages (vLLM returns)."""
    m = BlockSpaceManager(4, 4, 0)
    before = snapshot(m)
    m.free(42)
    m.fork(42, 43)
    assert snapshot(m) == before


def test_invalid_sizes_are_refused():
    """Catches: a manager built with a zero block size or negative watermark."""
    with pytest.raises(InvalidArgument):
        BlockSpaceManager(0, 4, 0)
    with pytest.raises(InvalidArgument):
        BlockSpaceManager(4, 4, 0, watermark=-0.1)


def test_mark_accessed_and_computed_are_no_ops_without_caching():
    """Catches: the naive path recording access times or computed marks (vLLM ignores them)."""
    m = BlockSpaceManager(2, 4, 0)
    m.allocate([SeqView(1, [1, 2, 3])])
    before = snapshot(m)
    m.access_all_blocks_in_seq(1, 5.0)
    m.mark_blocks_as_computed()
    assert snapshot(m) == before
    assert m.get_common_computed_block_ids([SeqView(1, [1, 2, 3])]) == []
    assert m.get_prefix_cache_hit_rate(Device.GPU) == -1
