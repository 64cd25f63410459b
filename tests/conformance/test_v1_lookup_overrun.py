"""Lookups the V1 machine does not draw because vLLM's own hit search indexes past the hash list."""

from __future__ import annotations

import json
from pathlib import Path

from conformance.changelog import api_at
from conformance.configs import V1Config
from conformance.machines.v1 import V1ReferencePeerLifecycle

#: Shrunk by v1.lifecycle against vLLM 0.9.0: r1 holds five tokens (two full blocks of two) but
#: one block hash, and its lookup raised IndexError in vLLM's FullAttentionManager.
TRACE = Path(__file__).parent / "data" / "v0.9.0-full-lookup-past-hashes.json"


def _machine_before_last_lookup(policy: str) -> V1ReferencePeerLifecycle:
    trace = json.loads(TRACE.read_text())
    machine = V1ReferencePeerLifecycle()
    machine.config = V1Config.from_json({**trace["config"], "policy": policy, "peer": "reference"})
    machine.start(machine.config)
    for op in trace["ops"][:-1]:
        machine.step(op)
    assert trace["ops"][-1] == {"op": "get_computed_blocks", "req": "r1"}
    return machine


def test_full_attention_lookup_past_the_hashes_is_not_drawn_at_0_9_0_only():
    """Catches: the machine drawing, at vLLM 0.9.0 and 0.9.0.1, a full-attention lookup of a
    request with fewer block hashes than full blocks, where vLLM's hit search reads
    block_hashes[i] for every block (v0.9.0 single_type_kv_cache_manager.py:234-236) and raises
    IndexError, a harness 'divergence' on every run; and the exclusion spreading to the releases
    whose search stops at the list's end (0.8.x, 0.9.1 and later)."""
    assert [api_at(r).v1.full_hit_search_indexes_hashes for r in ("0.8.5", "0.9.0", "0.9.0.1", "0.9.1", "0.9.2")] \
        == [False, True, True, False, False]
    assert _machine_before_last_lookup("v0.9.0").lookup_overruns_hashes("r1")
    assert _machine_before_last_lookup("v0.9.0.1").lookup_overruns_hashes("r1")
    assert not _machine_before_last_lookup("v0.9.1").lookup_overruns_hashes("r1")
    assert not _machine_before_last_lookup("v0.9.2").lookup_overruns_hashes("r1")
