"""The V0 manager of vLLM 0.6.3.post1 to 0.6.4.post1: the three policy fields that change at 0.6.5."""

from __future__ import annotations

import dataclasses

import pytest

from conformance.adapters.reference_v0 import snapshot
from conformance.changelog import v0_policy_at
from reference.blocks.errors import InvalidArgument
from reference.blocks.policies import V0_V0_10_2
from reference.blocks.v0 import BlockSpaceManager, SeqView
from reference.blocks.v0.content_hash import PageHashing
from reference.blocks.v0.evictor import LRUEvictor, ScanLRUEvictor

V0_6_4 = v0_policy_at("0.6.4")


def test_the_change_log_gives_0_6_4_the_old_values_and_0_6_5_the_new():
    """Catches: a release before 0.6.5 driven with the heap evictor, the extra-hash slot or the
    hash tracker (each makes the 0.6.4 snapshots differ), or 0.6.5 left with the old values."""
    old = (V0_6_4.evictor_heap, V0_6_4.extra_hash_in_page_hash, V0_6_4.cached_tokens_tracker)
    assert old == (False, False, False)
    assert v0_policy_at("0.6.3.post1") == dataclasses.replace(V0_6_4, name="v0.6.3.post1")
    new = v0_policy_at("0.6.5")
    assert (new.evictor_heap, new.extra_hash_in_page_hash, new.cached_tokens_tracker) == (True, True, True)


def test_the_scan_evictor_takes_parking_order_over_access_time():
    """Catches: the pre-0.6.5 evictor modelled as true LRU (the heap's oldest page): it takes the
    first parked page unless a later one in the same run of no-newer pages ends a longer prefix."""
    scan, heap = ScanLRUEvictor(), LRUEvictor()
    for ev in (scan, heap):
        ev.add(1, 10, num_hashed_tokens=4, last_accessed=5)
        ev.add(2, 20, num_hashed_tokens=4, last_accessed=1)  # older, parked later
        ev.add(3, 30, num_hashed_tokens=8, last_accessed=9)  # newer: ends the run
    assert scan.evict() == (1, 10)
    assert heap.evict() == (2, 20)


def test_the_scan_evictor_switches_to_a_longer_prefix_within_the_run():
    """Catches: a scan that stops at the first page, or compares times with the first page
    instead of the current candidate."""
    ev = ScanLRUEvictor()
    ev.add(1, 10, num_hashed_tokens=2, last_accessed=3)
    ev.add(2, 20, num_hashed_tokens=6, last_accessed=3)   # same time, longer: candidate
    ev.add(3, 30, num_hashed_tokens=9, last_accessed=2)   # older than the candidate, longer still
    ev.add(4, 40, num_hashed_tokens=12, last_accessed=4)  # newer than the candidate: stop
    assert [ev.evict()[0] for _ in range(4)] == [3, 2, 1, 4]


def test_a_page_hash_has_no_extra_slot_before_0_6_5():
    """Catches: the 0.6.5 tuple (ending with the extra hash, None) used for 0.6.4, which changes
    every page hash even when no sequence has an extra hash."""
    old, new = PageHashing.of(V0_6_4), PageHashing.of(V0_V0_10_2)
    assert old.page_hash(True, None, [1, 2], None) == hash((True, None, 1, 2))
    assert new.page_hash(True, None, [1, 2], None) == hash((True, new.first_parent, 1, 2, None))


def manager(policy) -> BlockSpaceManager:
    return BlockSpaceManager(block_size=2, num_gpu_blocks=8, num_cpu_blocks=0, watermark=0.0,
                             enable_caching=True, policy=policy)


def test_a_gap_stops_the_computed_ids_for_good():
    """Catches: the pre-0.6.5 tracker re-examining pages after it once found one not computed
    (vLLM 0.6.4 keeps the gap until the sequence is freed), or the hash tracker's answer given."""
    tokens = [1, 2, 3, 4, 5, 6, 7]
    prefill, decode = SeqView(1, tokens), SeqView(1, tokens, len(tokens), False)
    old, new = manager(V0_6_4), manager(V0_V0_10_2)
    for m in (old, new):
        m.allocate([prefill])
        assert m.get_common_computed_block_ids([prefill]) == []  # nothing computed yet
        m.mark_blocks_as_computed()
    assert new.get_common_computed_block_ids([decode]) == [0, 1, 2]
    assert old.get_common_computed_block_ids([decode]) == []
    assert snapshot(old)["computed_tracker"] == {"1": {"computed_ids": [], "has_gap": True}}


def test_computed_ids_are_tracked_from_allocate_and_fork():
    """Catches: a pre-0.6.5 sequence tracked only from its first query (vLLM 0.6.4 adds it in
    allocate and fork), and get_num_cached_tokens answered by a manager that has none."""
    m = manager(V0_6_4)
    m.allocate([SeqView(1, [1, 2, 3])])
    m.fork(1, 2)
    assert snapshot(m)["computed_tracker"] == {"1": {"computed_ids": [], "has_gap": False},
                                               "2": {"computed_ids": [], "has_gap": False}}
    with pytest.raises(InvalidArgument):
        m.get_num_cached_tokens(SeqView(1, [1, 2, 3]))
    m.free(2)
    assert list(snapshot(m)["computed_tracker"]) == ["1"]
