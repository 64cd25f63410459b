"""V1Policy.retention_interval_supported: which blocks a sliding-window group registers under a
prefix-cache retention interval, and the shared-prefix boundary a hybrid lookup pins."""

import pytest

from conformance.changelog import v1_policy_at
from reference.blocks.errors import InvalidArgument
from reference.blocks.v1.manager import KVCacheManager
from reference.blocks.v1.single_type import retained_window_blocks
from reference.blocks.v1.specs import FullAttention, SlidingWindow

V1_V0_10_2 = v1_policy_at("0.10.2")
V1_V0_33_0 = v1_policy_at("0.33.0")

FULL, SW = FullAttention(4), SlidingWindow(4, 8)  # a window of 8 needs the 2 blocks before a hit


def kept(mask: list[bool] | None, start: int = 0) -> list[int] | None:
    return None if mask is None else [start + i for i, keep in enumerate(mask) if keep]


@pytest.mark.parametrize("interval, boundaries, expected", [
    (None, [19], None),  # dense: every block
    (0, [19], [2, 3]),  # only the 2 blocks before token 16 (19 rounded down to a block)
    (0, [19, 12], [1, 2, 3]),  # and those before a shared-prefix boundary at 12
    (8, [19], None),  # the 2 blocks a hit needs cover each 8-token segment
    (16, [19], [2, 3]),  # the last 2 blocks of the one 16-token segment, and the replay tail
    (16, [7], [0, 2, 3]),  # a replay tail that the segment does not cover
])
def test_retained_blocks_follow_the_interval_and_the_boundaries(interval, boundaries, expected):
    """Catches: a mask that keeps the blocks after a boundary instead of before it, forgets a
    boundary, does not round a boundary down to a block, or keeps a segment's head instead of its
    tail (each leaves out exactly the blocks a later sliding-window hit needs)."""
    assert kept(retained_window_blocks(0, 5, SW, interval, boundaries)) == expected


def test_the_mask_covers_only_the_blocks_being_cached():
    """Catches: a mask indexed from block 0 rather than from the first block not yet cached (a
    request cached in chunks would register the wrong blocks on its second call)."""
    assert kept(retained_window_blocks(3, 5, SW, 0, [19]), start=3) == [3]
    assert kept(retained_window_blocks(0, 2, SW, 0, [19])) == []


def test_a_window_of_one_token_keeps_nothing_even_when_dense():
    """Catches: a dense shortcut that keeps every block whatever the window: with a window of one
    token a hit needs no block before it, so the mask vLLM computes keeps none."""
    assert kept(retained_window_blocks(0, 3, SlidingWindow(4, 1), None, [11])) == []


def _serve_then_look_up(interval: int | None, extra: int = 4):
    """A 20-token prompt served and freed, then a request of ``extra`` more tokens sharing its
    first 20 tokens (the example of the note on kv_cache_coordinator.hybrid.find_longest_cache_hit)."""
    manager = KVCacheManager([FULL, SW], 32, 64, V1_V0_33_0, retention_interval=interval)
    first = list(range(20))
    manager.add_request("a", first)
    assert manager.allocate_slots("a", 20) is not None
    manager.free("a")
    manager.add_request("b", first + list(range(90, 90 + extra)))
    return manager, manager.get_computed_blocks("b")


def test_a_hybrid_hit_under_sparse_retention_pins_the_shared_prefix():
    """Catches: sparse retention caching the sliding window's whole prompt (the hit would stay at
    20 tokens, as under dense retention), or a lookup that does not record where the longer
    full-attention hit ended (the request would then not cache the window's tail there)."""
    manager, hit = _serve_then_look_up(None)
    assert (hit.num_tokens, hit.block_ids()) == (20, ([1, 2, 3, 4, 5], [0, 0, 0, 9, 10]))
    assert manager.requests["b"].shared_prefix_boundary == 0
    manager, hit = _serve_then_look_up(0)
    assert (hit.num_tokens, hit.block_ids()) == (16, ([1, 2, 3, 4], [0, 0, 8, 9]))
    assert manager.requests["b"].shared_prefix_boundary == 20


@pytest.mark.parametrize("pinned", [True, False])
def test_the_pinned_boundary_is_cached_when_the_request_computes_it(pinned):
    """Catches: the shared-prefix boundary ignored when caching (under retention 0 a 32-token
    second request caches only its own replay tail, blocks 5 and 6, so a third request sharing the
    20-token prefix hits 16 tokens again instead of 20)."""
    manager, hit = _serve_then_look_up(0, extra=12)
    if not pinned:
        manager.requests["b"].shared_prefix_boundary = 0
    assert manager.allocate_slots("b", 32 - 16, 16, hit) is not None
    manager.add_request("c", list(range(20)) + [70, 71, 72, 73, 74])
    assert manager.get_computed_blocks("c").num_tokens == (20 if pinned else 16)


@pytest.mark.parametrize("groups, interval, policy, message", [
    ([FULL, SW], 0, V1_V0_10_2, "has no prefix-cache retention interval"),
    ([FULL], 4, V1_V0_33_0, "no group has a sliding window"),
    ([FULL, SW], 6, V1_V0_33_0, "multiple of the block size"),
    ([FULL, SW], -4, V1_V0_33_0, "multiple of the block size"),
])
def test_intervals_vllm_refuses_are_refused(groups, interval, policy, message):
    """Catches: an interval accepted that vLLM's coordinator refuses at construction (a release
    without the setting, a non-zero interval on a model without a sliding window, an interval that
    is not a non-negative multiple of the block size), so a config could never start on vLLM."""
    with pytest.raises(InvalidArgument, match=message):
        KVCacheManager(groups, 32, 64, policy, retention_interval=interval)


def test_intervals_vllm_accepts_are_accepted():
    """Catches: a refusal rule that is too wide (0 on a full-attention model, which vLLM accepts)."""
    KVCacheManager([FULL], 32, 64, V1_V0_33_0, retention_interval=0)
    KVCacheManager([FULL, SW], 32, 64, V1_V0_33_0, retention_interval=8)
