"""Policies found by the release matrix: each field observably changes an outcome on its own."""

from __future__ import annotations

import dataclasses

import pytest

from tests.conformance.test_v1_conformance import cfg as v1_cfg
from tests.conformance.test_v1_conformance import run_ops
from reference.blocks.policies import V1_FIELD_HISTORY, V1_POLICIES, V1_V0_10_2, V1_V0_20_2, V1_V0_33_0, V1Policy


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
    """Catches: the v0.20.2 policy drifting from what its comment cites (fields copied wrongly)."""
    differs_from_10 = {f.name for f in dataclasses.fields(V1Policy)
                       if getattr(V1_V0_20_2, f.name) != getattr(V1_V0_10_2, f.name)} - {"name"}
    assert differs_from_10 == {"evict_blocks_supported", "cache_full_blocks_skips_null", "lora_extra_key",
                              "hybrid_groups_any_layout"}
    assert V1_POLICIES["v0.20.2"] is V1_V0_20_2


def test_history_values_match_the_pinned_policies():
    """Catches: a change log entry whose value contradicts the policy of a release after it."""
    def key(v):
        return [int(x) for x in v.split(".")]
    for change in V1_FIELD_HISTORY:
        later = [p for p in (V1_V0_20_2, V1_V0_33_0) if key(p.name[1:]) >= key(change.first)]
        later_changes = [c for c in V1_FIELD_HISTORY if c.field == change.field and key(c.first) > key(change.first)]
        for policy in later:
            if any(key(policy.name[1:]) >= key(c.first) for c in later_changes):
                continue
            assert getattr(policy, change.field) == change.value_from, (change.field, policy.name)
        earlier = [p for p in (V1_V0_10_2, V1_V0_20_2) if key(p.name[1:]) < key(change.first)]
        for policy in earlier:
            assert getattr(policy, change.field) != change.value_from, (change.field, policy.name)
