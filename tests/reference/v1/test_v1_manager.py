"""The manager: hit cap, chunked prefill, sliding windows, watermark, and refusals that change nothing."""

from __future__ import annotations

import pytest
from v1_state_helpers import deep_state, full_manager, prefill, sliding_manager

from conformance.changelog import v1_policy_at
from reference.blocks.errors import DoubleFree, InvalidArgument, UnknownRequest
from reference.blocks.v1.manager import KVCacheManager
from reference.blocks.v1.request import RequestStatus
from reference.blocks.v1.specs import FullAttention, SlidingWindow

# The policies of the two pinned releases, computed by the change log.
V1_V0_10_2 = v1_policy_at("0.10.2")
V1_V0_33_0 = v1_policy_at("0.33.0")

POLICIES = [V1_V0_33_0, V1_V0_10_2]


@pytest.mark.parametrize("policy", POLICIES)
def test_hit_leaves_at_least_one_token_to_compute(policy):
    """Catches: a hit covering the whole prompt (no token left to produce logits) on a block-aligned prompt."""
    m = full_manager(policy)
    prefill(m, "a", list(range(8)))  # two full blocks of 4, both cached
    m.add_request("same", list(range(8)))
    m.add_request("longer", list(range(9)))
    assert m.get_computed_blocks("same").num_tokens == 4  # capped at 8 - 1 -> one whole block
    assert m.get_computed_blocks("longer").num_tokens == 8


@pytest.mark.parametrize("policy", POLICIES)
def test_hit_shares_blocks_and_counts_references(policy):
    """Catches: a hit that copies instead of sharing, or forgets to take a reference on the shared blocks."""
    m = full_manager(policy, block_size=16)
    common = [i for i in range(3) for _ in range(16)]
    prefill(m, "0", common + [3] * 7)
    assert m.block_ids("0") == ([1, 2, 3, 4],)
    assert prefill(m, "1", common + [3] * 5) == 48
    assert m.block_ids("1") == ([1, 2, 3, 5],)
    assert [m.pool.blocks[i].ref_cnt for i in (1, 2, 3, 4, 5)] == [2, 2, 2, 1, 1]


def test_upstream_test_prefill_free_order():
    """Catches: the free-queue order after freeing two requests differing from vLLM's test_prefill at either release."""
    expected = {"v0.33.0": [5, 4, 6, 7, 8, 9, 10, 3, 2, 1], "v0.10.2": [6, 7, 8, 9, 10, 4, 5, 3, 2, 1]}
    for policy in POLICIES:
        m = full_manager(policy, block_size=16)
        common = [i for i in range(3) for _ in range(16)]
        prefill(m, "0", common + [3] * 7)
        prefill(m, "1", common + [3] * 5)
        m.free("0")
        m.free("1")
        assert m.pool.free_queue.block_ids() == expected[policy.name]


@pytest.mark.parametrize("policy", POLICIES)
def test_chunked_prefill_caches_only_computed_full_blocks(policy):
    """Catches: caching blocks whose tokens are not computed yet (a later hit would read garbage KV)."""
    m = full_manager(policy)
    m.add_request("a", list(range(10)))
    m.allocate_slots("a", 6, num_lookahead_tokens=3)
    m.mark_computed("a", 6)
    hashed = [b.block_hash is not None for b in m.groups[0].blocks("a")]
    assert hashed == [True, False, False]  # 6 computed tokens: one full block; lookahead slots hold drafts
    m.allocate_slots("a", 4)
    m.mark_computed("a", 4)
    assert [b.block_hash is not None for b in m.groups[0].blocks("a")] == [True, True, False]


@pytest.mark.parametrize("policy", POLICIES)
def test_sliding_window_releases_blocks_behind_the_window(policy):
    """Catches: out-of-window pages kept allocated, released too early, or released without a null placeholder."""
    window, bs = 4, 2
    m = sliding_manager(policy, window, block_size=bs)
    m.add_request("a", list(range(12)))
    for chunk in (4, 4, 4):
        m.allocate_slots("a", chunk)
        m.mark_computed("a", chunk)
    # before the last chunk 8 tokens were computed: tokens before 8 - window + 1 = 5 are skipped,
    # i.e. the first 5 // 2 = 2 blocks were released (and 4 tokens later, 2 more at the next call)
    table = m.groups[0].blocks("a")
    assert [b.is_null for b in table] == [True, True, False, False, False, False]
    released = [b for b in m.pool.blocks[1:] if b.ref_cnt == 0]
    assert all(m.pool.free_queue.contains(b) for b in released)
    m.append_token_ids("a", [1])
    m.allocate_slots("a", 1)
    assert [b.is_null for b in m.groups[0].blocks("a")][:4] == [True, True, True, True]


@pytest.mark.parametrize("policy", POLICIES)
def test_sliding_window_hit_needs_only_the_window(policy):
    """Catches: a sliding-window hit demanding the whole prefix, or one missing its leading null entries."""
    window, bs = 5, 2
    m = sliding_manager(policy, window, block_size=bs)
    tokens = list(range(11))
    prefill(m, "a", tokens)
    m.free("a")
    # evict the first two cached blocks by allocating into the free queue's front
    m.add_request("filler", [7] * 4)
    m.allocate_slots("filler", 4)
    m.add_request("b", tokens)
    hit = m.get_computed_blocks("b")
    needed = -(-(window - 1) // bs)
    assert hit.num_tokens == 10
    ids = [b.block_id for b in hit.blocks[0]]
    assert all(i == 0 for i in ids[: 5 - needed]) and all(i != 0 for i in ids[5 - needed:])


def test_watermark_applies_to_admissions_only():
    """Catches: a watermark that blocks running requests, or that ignores has_scheduled_reqs / preempted status."""
    m = KVCacheManager([FullAttention(4)], 11, 256, V1_V0_33_0, watermark=0.2)  # 2 blocks kept free
    assert m.watermark_blocks == 2
    m.add_request("a", list(range(36)))  # 9 blocks, 10 free, 10 - 9 < 2
    assert m.allocate_slots("a", 36) is None
    assert m.allocate_slots("a", 36, has_scheduled_reqs=False) is not None
    m.mark_computed("a", 36)
    m.preempt("a")
    assert m.requests["a"].status is RequestStatus.PREEMPTED
    assert m.allocate_slots("a", 33) is None  # preempted counts as an admission: 9 + 2 > 10
    assert m.allocate_slots("a", 28) is not None  # 7 + 2 <= 10
    m.mark_computed("a", 28)
    assert m.allocate_slots("a", 8) is not None  # running: no watermark, 1 block left after
    with pytest.raises(InvalidArgument):
        KVCacheManager([FullAttention(4)], 11, 256, V1_V0_10_2, watermark=0.2)


@pytest.mark.parametrize("policy", POLICIES)
def test_pool_exhaustion_returns_none_and_keeps_state(policy):
    """Catches: a failed allocation that leaks part of the blocks or adopts the hit anyway."""
    m = full_manager(policy, num_blocks=4)
    prefill(m, "a", list(range(9)))
    m.add_request("b", list(range(9)) + [5] * 8)
    hit = m.get_computed_blocks("b")
    before = deep_state(m)
    assert m.allocate_slots("b", 17 - hit.num_tokens, hit.num_tokens, hit) is None
    after = deep_state(m)
    assert after.pop("stamp") == before.pop("stamp") + 1
    assert after == before


def test_zero_token_adoption_per_policy():
    """Catches: zero-token hit adoption accepted under v0.10.2 or refused under v0.33.0."""
    for policy, allowed in ((V1_V0_33_0, True), (V1_V0_10_2, False)):
        m = full_manager(policy)
        prefill(m, "a", list(range(9)))
        m.add_request("b", list(range(9)))
        hit = m.get_computed_blocks("b")
        if allowed:
            assert m.allocate_slots("b", 0, hit.num_tokens, hit) == ([],)
            assert m.block_ids("b") == ([1, 2],) and m.requests["b"].num_computed_tokens == 0
        else:
            with pytest.raises(InvalidArgument):
                m.allocate_slots("b", 0, hit.num_tokens, hit)


def misuse_cases():
    return [
        ("unknown request", UnknownRequest, lambda m: m.allocate_slots("nobody", 1)),
        ("double preempt", DoubleFree, lambda m: m.preempt("p")),
        ("preempt waiting", InvalidArgument, lambda m: m.preempt("w")),
        ("append to freed", UnknownRequest, lambda m: m.append_token_ids("gone", [1])),
        ("free twice", UnknownRequest, lambda m: m.free("gone")),
        ("append before computed", InvalidArgument, lambda m: m.append_token_ids("w", [1])),
        ("negative tokens", InvalidArgument, lambda m: m.allocate_slots("w", -1)),
        ("zero tokens", InvalidArgument, lambda m: m.allocate_slots("w", 0)),
        ("past the prompt", InvalidArgument, lambda m: m.allocate_slots("w", 99)),
        ("bad token", InvalidArgument, lambda m: m.add_request("x", [1, -2])),
        ("duplicate id", InvalidArgument, lambda m: m.add_request("w", [1])),
        ("too long", InvalidArgument, lambda m: m.add_request("x", [1] * 300)),
        ("stale hit", InvalidArgument, lambda m: m.allocate_slots("w", 1, m.stale.num_tokens, m.stale)),
        ("hit mismatch", InvalidArgument, lambda m: m.allocate_slots("w", 1, 3, m.get_computed_blocks("w"))),
        ("evict outside", InvalidArgument, lambda m: m.evict_blocks([99])),
    ]


@pytest.mark.parametrize("name,error,call", misuse_cases(), ids=[c[0] for c in misuse_cases()])
def test_misuse_raises_and_changes_nothing(name, error, call):
    """Catches: a refused call that mutates state before raising (a half-applied allocation or release)."""
    m = full_manager(V1_V0_33_0)
    prefill(m, "p", list(range(9)))
    m.preempt("p")
    prefill(m, "gone", list(range(5)))
    m.free("gone")
    m.add_request("w", list(range(9)))
    m.stale = m.get_computed_blocks("w")
    m.add_request("later", [3])  # makes the hit above stale
    before = deep_state(m)
    with pytest.raises(error):
        call(m)
    assert deep_state(m) == before


def test_constructor_rejects_bad_sizes():
    """Catches: accepting configurations vLLM cannot represent (mixed block sizes, empty pools, no groups)."""
    for kwargs in (
        dict(groups=[FullAttention(4), SlidingWindow(2, 4)], num_blocks=8),
        dict(groups=[FullAttention(4)], num_blocks=0),
        dict(groups=[], num_blocks=8),
    ):
        with pytest.raises(InvalidArgument):
            KVCacheManager(kwargs["groups"], kwargs["num_blocks"], 64, V1_V0_33_0)
    with pytest.raises(InvalidArgument):
        SlidingWindow(4, 0)


def test_a_policy_that_is_not_a_v1_policy_is_refused_by_name():
    """Catches: a wrong ``policy`` argument (say a vLLM version string) surfacing as an
    AttributeError deep in the hashing set-up instead of a clear InvalidArgument."""
    with pytest.raises(InvalidArgument, match="V1Policy"):
        KVCacheManager([FullAttention(4)], 11, 256, "0.33.0")
