"""V1Policy.full_sequence_admission: the whole-sequence admission check of allocate_slots and the
sliding window's cap on it."""

import pytest

from conformance.changelog import v1_policy_at
from reference.blocks.errors import InvalidArgument
from reference.blocks.v1.manager import KVCacheManager
from reference.blocks.v1.specs import FullAttention, SlidingWindow

V1_V0_10_2 = v1_policy_at("0.10.2")
V1_V0_33_0 = v1_policy_at("0.33.0")


def test_a_request_whose_whole_prompt_does_not_fit_is_refused_even_if_its_chunk_fits():
    """Catches: the check counting only the chunk being scheduled (a 20-token prompt would be
    admitted into a 6-block pool of 2-token blocks and preempted later in its prefill)."""
    manager = KVCacheManager([FullAttention(2)], 7, 64, V1_V0_33_0)  # 6 usable blocks and the null block
    manager.add_request("a", list(range(20)))
    assert manager.allocate_slots("a", 4, full_sequence_must_fit=True) is None
    assert manager.block_ids("a") == ([],)
    assert manager.allocate_slots("a", 4) is not None


@pytest.mark.parametrize("in_flight, admitted", [(1, True), (None, False)])
def test_a_sliding_window_counts_at_most_its_window_and_the_tokens_in_flight(in_flight, admitted):
    """Catches: the cap left out (a sliding-window request is refused for blocks it never holds at
    once) or applied without the in-flight tokens (with none given, max_model_len, it never binds).
    Window 4, block size 2, one token in flight: at most cdiv(3 + 1, 2) + 1 = 3 blocks."""
    manager = KVCacheManager([SlidingWindow(2, 4)], 5, 64, V1_V0_33_0, max_in_flight_tokens=in_flight)
    manager.add_request("a", list(range(20)))
    blocks = manager.allocate_slots("a", 2, full_sequence_must_fit=True)
    assert (blocks is not None) == admitted


@pytest.mark.parametrize("in_flight, free, admitted", [(1, 3, True), (1, 2, False), (2, 4, True), (2, 3, False)])
def test_the_cap_is_exactly_the_window_less_one_plus_the_tokens_in_flight_and_one_block(in_flight, free, admitted):
    """Catches: a cap off by one either way (the window instead of window - 1, window - 2, or no
    extra block for a window that starts inside a block): window 4, block size 2 counts
    cdiv(4 - 1 + 1, 2) + 1 = 3 blocks with one token in flight and cdiv(4 - 1 + 2, 2) + 1 = 4 with
    two, so the 20-token request is admitted with exactly that many free blocks and refused with
    one fewer."""
    manager = KVCacheManager([SlidingWindow(2, 4)], 1 + free, 64, V1_V0_33_0, max_in_flight_tokens=in_flight)
    manager.add_request("a", list(range(20)))
    assert (manager.allocate_slots("a", 2, full_sequence_must_fit=True) is not None) == admitted


def test_a_refused_request_keeps_its_out_of_window_pages():
    """Catches: the check made after the out-of-window pages are released (vLLM returns first, so
    a refused request still holds them and the pool's free count does not move; a call without the
    flag releases them)."""
    def running():
        manager = KVCacheManager([SlidingWindow(2, 2)], 5, 64, V1_V0_33_0, max_in_flight_tokens=64)
        manager.add_request("a", list(range(40)))
        assert manager.allocate_slots("a", 6) is not None
        manager.mark_computed("a", 6)
        return manager

    manager = running()
    held, free = manager.block_ids("a"), manager.pool.num_free_blocks
    assert 0 not in held[0]  # blocks 0 and 1 have left the window but are not released yet
    assert manager.allocate_slots("a", 2, full_sequence_must_fit=True) is None
    assert (manager.block_ids("a"), manager.pool.num_free_blocks) == (held, free)
    manager = running()
    manager.allocate_slots("a", 2)
    assert manager.block_ids("a")[0][:2] == [0, 0]


def test_the_check_and_its_argument_exist_only_where_driven():
    """Catches: a release before 0.26.0 accepting the flag or max_in_flight_tokens (0.10.2's
    allocate_slots and manager take neither; 0.25.0's allocate_slots takes the flag but counts the
    cap from max_num_batched_tokens and its manager takes no max_in_flight_tokens, so the machines
    do not drive it there)."""
    for policy in (V1_V0_10_2, v1_policy_at("0.25.0")):
        manager = KVCacheManager([FullAttention(2)], 7, 64, policy)
        manager.add_request("a", [1, 2, 3])
        with pytest.raises(InvalidArgument, match="full_sequence_must_fit"):
            manager.allocate_slots("a", 3, full_sequence_must_fit=True)
        with pytest.raises(InvalidArgument, match="max_in_flight_tokens"):
            KVCacheManager([FullAttention(2)], 7, 64, policy, max_in_flight_tokens=8)
    KVCacheManager([FullAttention(2)], 7, 64, v1_policy_at("0.26.0"), max_in_flight_tokens=8)
