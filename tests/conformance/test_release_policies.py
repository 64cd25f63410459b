"""Policies found by the release matrix: each field observably changes an outcome on its own."""

from __future__ import annotations

import dataclasses

import pytest

from conformance.adapters.reference_v0 import ReferenceV0System
from conformance.changelog import v0_policy_at, v1_policy_at
from conformance.configs import V0Config
from reference.blocks.policies import V0Policy, V1Policy
from tests.conformance.test_v1_conformance import cfg as v1_cfg
from tests.conformance.test_v1_conformance import run_ops

V1_V0_10_2, V1_V0_20_2, V1_V0_32_0, V1_V0_33_0 = (v1_policy_at(r) for r in ("0.10.2", "0.20.2", "0.32.0", "0.33.0"))
V0_V0_6_6_POST1, V0_V0_10_2 = v0_policy_at("0.6.6.post1"), v0_policy_at("0.10.2")


def cfg(**kw) -> dict:
    return v1_cfg(**{"policy": "v0.20.2", **kw})


LORA_REQUEST = [{"op": "add_request", "req": "a", "tokens": [1, 2, 3], "salt": None, "lora": "a"}]


def test_lora_key_by_name_differs_from_int_id_and_from_tagged():
    """Catches: v0.11.1+'s LoRA-by-name hash key modelled as v0.10.2's integer id (the divergence
    v1.lifecycle found at vLLM 0.20.2), or the three spellings collapsing into two."""
    hashes = {}
    for key in ("int_id", "name", "tagged"):
        policy = dataclasses.replace(V1_V0_20_2, lora_extra_key=key)
        hashes[key] = run_ops(cfg(), policy, LORA_REQUEST)[1]["requests"]["a"]["block_hashes"]
    assert len({tuple(h) for h in hashes.values()}) == 3


def test_lora_key_is_validated():
    """Catches: a misspelt lora_extra_key silently hashing like one of the others."""
    with pytest.raises(ValueError, match="lora_extra_key"):
        dataclasses.replace(V1_V0_20_2, lora_extra_key="id")


def test_v0_20_2_policy_differs_from_both_pins_where_the_sources_say():
    """Catches: the change log giving 0.20.2 other fields than its sources show against 0.10.2."""
    differs_from_10 = {f.name for f in dataclasses.fields(V1Policy)
                       if getattr(V1_V0_20_2, f.name) != getattr(V1_V0_10_2, f.name)} - {"name"}
    assert differs_from_10 == {"evict_blocks_supported", "cache_full_blocks_skips_null", "lora_extra_key",
                              "hybrid_groups_any_layout", "hit_touches_skipped_nulls", "hybrid_needs_distinct_specs"}


SW_HIT = [
    {"op": "add_request", "req": "a", "tokens": [1, 2, 1, 2, 1, 2, 1], "salt": None, "lora": None},
    {"op": "allocate_slots", "req": "a", "num_new_tokens": 7, "use_hit": False},
    {"op": "add_request", "req": "b", "tokens": [1, 2, 1, 2, 1, 2, 1], "salt": None, "lora": None},
    {"op": "get_computed_blocks", "req": "b"},
    {"op": "allocate_slots", "req": "b", "num_new_tokens": 1, "use_hit": True},
]


def test_null_block_count_at_a_sliding_window_hit_and_free_per_release():
    """Catches: 0.14.0-0.32.0's null-block bookkeeping (a hit leaves the count alone, a free counts
    each null entry down) modelled as v0.10.2's (the hit touches its skipped nulls) or as
    v0.33.0's (never counted): the divergence v1.sliding_window found at 0.20.2."""
    config = cfg(groups=[{"kind": "sliding", "window": 3}])
    free_b = [{"op": "free", "req": "b"}]

    def null_counts(policy):
        after_hit = run_ops(config, policy, SW_HIT)[1]["blocks"][0][0]
        after_free = run_ops(config, policy, SW_HIT + free_b)[1]["blocks"][0][0]
        return after_hit, after_free

    hit_10, free_10 = null_counts(V1_V0_10_2)
    hit_20, free_20 = null_counts(V1_V0_20_2)
    assert null_counts(V1_V0_33_0) == (0, 0)
    assert hit_20 == 0 and free_20 < 0           # untouched at the hit, counted down at the free
    assert hit_10 > 0 and free_10 == hit_10 - 2  # b's two skipped nulls: touched, then freed
    assert null_counts(V1_V0_32_0) == (hit_20, free_20)


def v0_first_page_hash(policy: V0Policy) -> str:
    system = ReferenceV0System(V0Config(policy=policy, block_size=2, num_gpu_blocks=4, num_cpu_blocks=0,
                                        watermark=0.0, sliding_window=None, enable_caching=True))
    system.apply({"op": "add_group", "group": "g", "seqs": [1], "prompt": [1, 2, 3]})
    system.apply({"op": "num_cached_tokens", "seq": 1})
    return system.snapshot()["computed_tracker"]["1"]["hashes"][0]


def test_v0_first_page_parent_hash_per_release():
    """Catches: vLLM 0.6.6.post1's first-page hash (parent None, before 0.7.2) computed with
    v0.10.2's hash('None') parent: the divergence v0.prefix_caching found at 0.6.6.post1."""
    assert v0_first_page_hash(V0_V0_6_6_POST1) != v0_first_page_hash(V0_V0_10_2)
    assert v0_first_page_hash(V0_V0_6_6_POST1) == format(hash((True, None, 1, 2, None)) & (2**64 - 1), "016x")
