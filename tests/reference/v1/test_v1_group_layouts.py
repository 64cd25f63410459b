"""V1Policy.hybrid_groups_any_layout: which layouts of several KV-cache groups a release accepts."""

import pytest

from conformance.changelog import v1_policy_at
from reference.blocks.errors import InvalidArgument
from reference.blocks.v1.manager import KVCacheManager
from reference.blocks.v1.specs import FullAttention, SlidingWindow, hybrid_layout_problem

# The policies of the two pinned releases, computed by the change log.
V1_V0_10_2 = v1_policy_at("0.10.2")
V1_V0_33_0 = v1_policy_at("0.33.0")

FULL, SW = FullAttention(4), SlidingWindow(4, 6)


@pytest.mark.parametrize("layout", [[SW, SW], [SW, FULL, SW], [FULL, SW, FULL], [FULL, SW, SlidingWindow(4, 9)]],
                         ids=["no-full", "interleaved", "interleaved-full", "two-window-kinds"])
def test_v0_10_2_refuses_what_its_hybrid_coordinator_refuses_and_v0_33_0_accepts(layout):
    """Catches: the reference accepting, under the v0.10.2 policy, a layout that vLLM 0.10.2's
    HybridKVCacheCoordinator refuses at construction (so the lockstep machine could never start
    there), or refusing under v0.33.0 a layout that release accepts: the field flips the outcome."""
    with pytest.raises(InvalidArgument, match="v0.10.2 refuses these groups"):
        KVCacheManager(layout, 64, 32, V1_V0_10_2)
    manager = KVCacheManager(layout, 64, 32, V1_V0_33_0)
    assert len(manager.groups) == len(layout)


@pytest.mark.parametrize("layout", [[SW], [FULL, SW], [SW, FULL], [FULL, FULL, SW], [SW, SW, FULL]])
def test_layouts_both_releases_accept(layout):
    """Catches: a refusal rule that is too wide (one group, or full groups all on one side)."""
    for policy in (V1_V0_10_2, V1_V0_33_0):
        KVCacheManager(layout, 64, 32, policy)


def test_without_caching_no_layout_is_refused():
    """Catches: the check applied without prefix caching, where vLLM 0.10.2 uses the coordinator
    without it (kv_cache_coordinator.py:422-427)."""
    assert hybrid_layout_problem([SW, FULL, SW], enable_caching=False, any_layout=False) is None
    KVCacheManager([SW, FULL, SW], 64, 32, V1_V0_10_2, enable_caching=False)
