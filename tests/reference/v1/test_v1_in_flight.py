"""V1Policy.frees_behind_in_flight_tokens: a sliding window's pages that a step still in flight
reads are kept when allocate_slots releases out-of-window pages."""

import pytest

from conformance.changelog import v1_policy_at
from reference.blocks.errors import InvalidArgument
from reference.blocks.v1.manager import KVCacheManager
from reference.blocks.v1.specs import SlidingWindow


def prefilled(release: str) -> KVCacheManager:
    """Window 4, block size 2: a 20-token request with its first 8 tokens computed (4 blocks)."""
    manager = KVCacheManager([SlidingWindow(2, 4)], 12, 64, v1_policy_at(release))
    manager.add_request("a", list(range(20)))
    assert manager.allocate_slots("a", 8) is not None
    manager.mark_computed("a", 8)
    return manager


def released(manager: KVCacheManager) -> int:
    """How many of the request's table entries are the null block (released pages)."""
    null = manager.pool.null_block.block_id
    return sum(block == null for block in manager.block_ids("a")[0])


@pytest.mark.parametrize("in_flight, nulls", [(0, 2), (2, 1), (4, 0), (8, 0)])
def test_pages_a_step_in_flight_still_reads_are_kept_from_0_26_0(in_flight, nulls):
    """Catches: releasing at total_computed while tokens are in flight (with 8 computed and window
    4, tokens 0-4 lie outside the next token's window: 2 whole blocks; with 2 in flight the
    release is made at token 6, 3 tokens out, 1 block; with 4 or all 8 in flight, none), or
    subtracting the in-flight tokens twice (2 in flight would then keep both blocks)."""
    manager = prefilled("0.33.0")
    assert manager.allocate_slots("a", 2, num_in_flight_tokens=in_flight) is not None
    assert released(manager) == nulls


def test_releases_before_0_26_0_ignore_tokens_in_flight():
    """Catches: the lag applied to a release that releases at total_computed (0.25.1 frees both
    out-of-window blocks even with all 8 computed tokens in flight)."""
    manager = prefilled("0.25.1")
    assert manager.allocate_slots("a", 2, num_in_flight_tokens=8) is not None
    assert released(manager) == 2


def test_more_tokens_in_flight_than_computed_release_nothing():
    """Catches: such a count refused, or taken as releasing something (vLLM's scheduler keeps a
    preempted request's count while its computed tokens go back to 0, and allocate_slots then
    releases at position 0: 20 in flight against 8 computed releases no block)."""
    manager = prefilled("0.33.0")
    assert manager.allocate_slots("a", 2, num_in_flight_tokens=20) is not None
    assert released(manager) == 0


@pytest.mark.parametrize("in_flight", [-1, True, 1.0])
def test_a_count_that_is_not_a_count_is_refused_with_nothing_changed(in_flight):
    """Catches: a negative count accepted (it would release pages past the window's start) or a
    refusal made after pages were released."""
    manager = prefilled("0.33.0")
    table, free = manager.block_ids("a"), manager.pool.num_free_blocks
    with pytest.raises(InvalidArgument):
        manager.allocate_slots("a", 2, num_in_flight_tokens=in_flight)
    assert manager.block_ids("a") == table and manager.pool.num_free_blocks == free
