"""The V1 manager at real sizes: 131,072-token requests (8,192 blocks of 16) in a 100,000-block
pool, and refusals at that size that change nothing. No test times anything."""

from __future__ import annotations

import pytest
from v1_state_helpers import deep_state, prefill

from conformance.changelog import v1_policy_at
from reference.blocks.errors import DoubleFree, UnknownBlock
from reference.blocks.v1.block import KVBlock
from reference.blocks.v1.free_queue import FreeBlockQueue
from reference.blocks.v1.manager import KVCacheManager
from reference.blocks.v1.specs import FullAttention

# The policies of the two pinned releases, computed by the change log.
V1_V0_10_2 = v1_policy_at("0.10.2")
V1_V0_33_0 = v1_policy_at("0.33.0")

BS = 16
POOL = 100_000
LONG = 8192 * BS

POLICIES = [V1_V0_33_0, V1_V0_10_2]


def long_manager(policy) -> KVCacheManager:
    return KVCacheManager([FullAttention(BS)], POOL, LONG + BS, policy, pythonhashseed="0")


@pytest.mark.parametrize("policy", POLICIES)
def test_free_of_a_131k_token_request_queues_its_blocks_tail_first(policy):
    """Catches: a free that loses blocks of a long table, or queues them in another order than
    tail first behind the blocks already free."""
    m = long_manager(policy)
    prefill(m, "long", list(range(LONG)))
    table = m.block_ids("long")[0]
    assert len(table) == 8192 and m.pool.num_free_blocks == POOL - 1 - 8192
    m.free("long")
    queue = m.pool.free_queue.block_ids()
    assert m.pool.num_free_blocks == POOL - 1 == len(queue)
    assert queue[-8192:] == table[::-1]  # hashed blocks go to the tail, last block first


@pytest.mark.parametrize("policy", POLICIES)
def test_refused_double_free_of_a_long_table_changes_nothing(policy):
    """Catches: a release that drops part of a long table's counts before finding a block freed
    twice (the manager would be left half-freed)."""
    m = long_manager(policy)
    prefill(m, "long", list(range(LONG)))
    blocks = list(m.groups[0].req_to_blocks["long"])
    before = deep_state(m)
    with pytest.raises(DoubleFree):
        m.pool.free_blocks(blocks + [blocks[5000]])
    assert deep_state(m) == before


def test_refused_append_of_a_long_run_leaves_the_queue_as_it_was():
    """Catches: a bulk insertion that links half of 8,192 blocks before meeting one already
    queued (or repeated), leaving the queue with blocks linked twice."""
    queued = [KVBlock(i) for i in range(POOL)]
    queue = FreeBlockQueue(queued)
    run = [KVBlock(POOL + i) for i in range(8192)]
    for bad in (run + [queued[7]], run[:4096] + [run[10]] + run[4096:]):
        with pytest.raises(UnknownBlock):
            queue.append_n(bad)
        with pytest.raises(UnknownBlock):
            queue.prepend_n(bad)
        assert len(queue) == POOL and queue.block_ids() == list(range(POOL))
        assert all(b.prev_free is None and b.next_free is None for b in run)
    queue.append_n(run)
    assert len(queue) == POOL + 8192 and queue.block_ids()[-1] == POOL + 8191
