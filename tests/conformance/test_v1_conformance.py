"""Lockstep conformance of the reference V1 page manager with vLLM (semantics "v1").

In a vLLM environment: the two lockstep properties run a short budget, and every saved trace of
``conformance/traces/v1`` replays against the installed vLLM (traces for the other release are
skipped). In the dev environment (no vLLM): the same machine runs reference against reference,
every trace replays reference against reference (which still checks the expectations pinned from
vLLM's own tests), and each V1Policy field is shown to change an observable outcome.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest

from conformance.adapters.reference_v1 import ReferenceV1System
from conformance.changelog import v1_policy_at
from conformance.configs import V1Config
from conformance.lockstep import NotApplicable, OpError, replay, run_machine
from conformance.machines import v1
from reference.blocks.policies import V1Policy
from tests.conformance.pinned import unavailable

# Release policies, computed by the change log.
V1_V0_8_0 = v1_policy_at("0.8.0")
V1_V0_8_3 = v1_policy_at("0.8.3")
V1_V0_8_5 = v1_policy_at("0.8.5")
V1_V0_9_2 = v1_policy_at("0.9.2")
V1_V0_10_2 = v1_policy_at("0.10.2")
V1_V0_20_2 = v1_policy_at("0.20.2")
V1_V0_23_0 = v1_policy_at("0.23.0")
V1_V0_27_1 = v1_policy_at("0.27.1")
V1_V0_33_0 = v1_policy_at("0.33.0")

TRACES = sorted((Path(__file__).resolve().parents[2] / "conformance" / "traces" / "v1").glob("*.json"))
HAS_VLLM = importlib.util.find_spec("vllm") is not None


@pytest.fixture
def vllm_present():
    """Skips where vLLM is absent; fails inside a pinned vLLM environment (tests/conformance/pinned.py)."""
    if not HAS_VLLM:
        unavailable("vLLM is not importable in this environment", "v1.")


needs_vllm = pytest.mark.usefixtures("vllm_present")


def test_traces_exist():
    """Catches: the trace folder going missing, which would make the replay tests below vacuous."""
    assert len(TRACES) >= 6


# -- against the installed vLLM -----------------------------------------------------------------
@needs_vllm
@pytest.mark.parametrize("machine", [v1.V1LifecycleMachine, v1.V1SlidingWindowMachine], ids=lambda m: m.__name__)
def test_lockstep_with_vllm(machine):
    """Catches: any divergence from vLLM's KVCacheManager in outcomes, tables, free order, ref counts or hashes."""
    result = run_machine(machine, 20, 20)
    assert result.passed, f"{result.detail}\n{json.dumps(result.extra.get('trace'), indent=1)}"
    assert result.examples >= 20


@needs_vllm
@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_trace_replays_against_vllm(path):
    """Catches: a regression on a saved scenario, or vLLM no longer asserting what its own test asserted."""
    trace = json.loads(path.read_text())
    try:
        applied, difference = replay(trace)
    except NotApplicable as reason:
        pytest.skip(str(reason))
    assert difference is None, difference
    assert applied == len(trace["ops"])


# -- reference against reference (dev environment) --------------------------------------------
@pytest.mark.reference_only
@pytest.mark.parametrize("machine", [v1.V1ReferencePeerLifecycle, v1.V1ReferencePeerSlidingWindow],
                         ids=lambda m: m.__name__)
def test_machine_reference_against_reference(machine):
    """Catches: a harness bug (nondeterministic op, snapshot not JSON-able, rule crashing) without needing vLLM."""
    from hypothesis import settings

    result = run_machine(machine, settings.default.max_examples, settings.default.stateful_step_count)
    assert result.passed, result.detail
    assert result.examples > 0 and result.steps > 0


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_trace_expectations_hold_for_reference(path):
    """Catches: the reference disagreeing with what vLLM's own tests assert (block ids, free-queue order)."""
    trace = json.loads(path.read_text())
    trace["config"] = {**trace["config"], "peer": "reference"}
    applied, difference = replay(trace)
    assert difference is None, difference
    assert applied == len(trace["ops"])


def test_module_import_does_not_import_vllm():
    """Catches: the semantics module importing vLLM at import time, which breaks the dev environment."""
    import subprocess
    import sys

    code = "import sys, conformance.machines.v1, conformance.adapters.reference_v1; print('vllm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- every policy field changes an observable outcome --------------------------------------------
def run_ops(config: dict, policy: V1Policy, ops: list[dict]) -> list:
    """Outcomes of ``ops`` and the final snapshot, for one policy (in place of the config's)."""
    system = ReferenceV1System(dataclasses.replace(V1Config.from_json(config), policy=policy))
    outcomes = []
    for op in ops:
        try:
            outcomes.append({"result": system.apply(op)})
        except OpError as err:
            outcomes.append({"error": err.category})
    return [outcomes, system.snapshot()]


def cfg(**kw) -> dict:
    base = {"policy": "v0.33.0", "block_size": 2, "num_blocks": 12, "groups": [{"kind": "full"}],
            "max_model_len": 32, "enable_caching": True, "hash_fn": "sha256", "pythonhashseed": "0",
            "entropy": "5e" * 32, "watermark": 0.0}
    base.update(kw)
    return base


def add(req, tokens, salt=None, lora=None):
    return {"op": "add_request", "req": req, "tokens": tokens, "salt": salt, "lora": lora}


def alloc(req, n, hit=False):
    return {"op": "allocate_slots", "req": req, "num_new_tokens": n, "use_hit": hit}


SW = [{"kind": "sliding", "window": 3}]
# a's tokens 4 and 5 arrive after its first lookup and are never computed before it is
# preempted; b then caches the same five tokens. Re-admitted, a looks up again.
PREEMPTED_APPEND = [
    add("a", [1, 2, 3]), {"op": "get_computed_blocks", "req": "a"}, alloc("a", 3),
    {"op": "append_tokens", "req": "a", "tokens": [4, 5]}, {"op": "preempt", "req": "a"},
    add("b", [1, 2, 3, 4, 5]), alloc("b", 5),
    {"op": "get_computed_blocks", "req": "a"}]
FIELD_SCENARIOS = {
    "free_hashless_blocks_to_front": (cfg(), [add("a", [1, 2, 3]), alloc("a", 3), {"op": "free", "req": "a"}]),
    "null_block_ref_counted": (cfg(groups=SW), [
        add("a", [1, 2, 1, 2, 1, 2, 1]), alloc("a", 7),
        add("b", [1, 2, 1, 2, 1, 2, 1]), {"op": "get_computed_blocks", "req": "b"}, alloc("b", 1, True),
        {"op": "free", "req": "b"}]),
    "hit_touches_skipped_nulls": (cfg(groups=SW), [
        add("a", [1, 2, 1, 2, 1, 2, 1]), alloc("a", 7),
        add("b", [1, 2, 1, 2, 1, 2, 1]), {"op": "get_computed_blocks", "req": "b"}, alloc("b", 1, True)]),
    "sliding_window_frees_hashless_to_front": (cfg(groups=SW), [
        add("a", [1, 2, 3]), alloc("a", 3), {"op": "free", "req": "a"}]),
    "none_hash_default_seed": (cfg(pythonhashseed=None), [add("a", [1, 2])]),
    "tagged_extra_keys": (cfg(), [add("a", [1, 2, 3], salt="s", lora="a")]),
    "lora_extra_key": (cfg(), [add("a", [1, 2, 3], lora="a")]),
    "zero_token_hit_adoption": (cfg(), [
        add("a", [1, 2, 3]), alloc("a", 3), add("b", [1, 2, 3]),
        {"op": "get_computed_blocks", "req": "b"}, alloc("b", 0, True)]),
    "watermark_supported": (cfg(watermark=0.25), [add("a", [1] * 18), alloc("a", 18)]),
    "retention_interval_supported": (cfg(groups=SW, retention_interval=0), [add("a", [1, 2, 3, 4, 5]), alloc("a", 5)]),
    "full_sequence_admission": (cfg(), [add("a", [1, 2, 3, 4, 5]), {**alloc("a", 2), "full_sequence_must_fit": True}]),
    "frees_behind_in_flight_tokens": (cfg(groups=SW), [
        add("a", [1, 2, 3, 4, 5, 6, 7, 8]), alloc("a", 4), {**alloc("a", 4), "num_in_flight_tokens": 4}]),
    "evict_blocks_supported": (cfg(), [{"op": "evict_blocks", "block_ids": [1]}]),
    "cache_full_blocks_skips_null": (cfg(groups=SW), [
        add("a", [1, 2, 1, 2, 1, 2, 1]), {**alloc("a", 4), "delay_cache_blocks": True}, alloc("a", 3)]),
    "hybrid_groups_any_layout": (cfg(groups=SW + [{"kind": "full"}] + SW), [add("a", [1, 2, 3]), alloc("a", 3)]),
    "hybrid_needs_distinct_specs": (cfg(groups=SW + SW), [add("a", [1, 2, 3]), alloc("a", 3)]),
    "hybrid_layout_checked_without_caching": (cfg(groups=SW + [{"kind": "full"}] + SW, enable_caching=False),
                                              [add("a", [1, 2, 3]), alloc("a", 3)]),
    "hashes_on_request": (cfg(), PREEMPTED_APPEND),
    "int_block_hashes": (cfg(), [add("a", [1, 2, 3])]),
    "usage_excludes_null_block": (cfg(), []),
    "single_kv_cache_group": (cfg(groups=[{"kind": "full"}] + SW), [add("a", [1, 2, 3]), alloc("a", 3)]),
    "pool_key_has_group_id": (cfg(), [add("a", [1, 2, 3]), alloc("a", 3)]),
    "admission_counts_null_blocks": (cfg(groups=SW, num_blocks=5), [
        add("a", [1, 2, 3, 4, 5, 6]), alloc("a", 6),
        add("b", [1, 2, 3, 4, 5, 6]), {"op": "get_computed_blocks", "req": "b"}, alloc("b", 2, True)]),
    "free_reversed_without_caching": (cfg(enable_caching=False), [
        add("a", [1, 2, 3, 4]), alloc("a", 4), {"op": "free", "req": "a"}]),
    "lookahead_capped_at_admission": (cfg(max_model_len=6, num_blocks=4), [
        add("a", [1, 2, 3, 4, 5, 6]), {**alloc("a", 6), "num_lookahead_tokens": 1}]),
    "delay_cache_blocks_supported": (cfg(), [add("a", [1, 2, 3]), {**alloc("a", 3), "delay_cache_blocks": True}]),
    "cache_salt_supported": (cfg(), [add("a", [1, 2, 3], salt="s")]),
    "caching_off_frees_to_front": (cfg(enable_caching=False), [
        add("a", [1, 2, 3]), alloc("a", 3), add("b", [4, 5, 6]), alloc("b", 3), {"op": "free", "req": "a"}]),
    "none_hash_at_import": (cfg(hash_fn="builtin"), [add("a", [1, 2, 3]), {"op": "get_computed_blocks", "req": "a"}]),
    "preallocate_tokens": (cfg(), [add("a", [1, 2, 3]), alloc("a", 3)]),
    "lookahead_supported": (cfg(), [add("a", [1, 2, 3]), {**alloc("a", 3), "num_lookahead_tokens": 1}]),
    "none_hash_seed_inverted": (cfg(hash_fn="builtin"), []),
    "builtin_hash_only": (cfg(hash_fn="builtin"), [add("a", [1, 2, 3]), {"op": "get_computed_blocks", "req": "a"}]),
    "pool_has_null_block": (cfg(), [add("a", [1, 2, 3]), alloc("a", 3)]),
    "sliding_window_managed": (cfg(groups=SW), [add("a", [1, 2, 1, 2, 1, 2, 1]), alloc("a", 4), alloc("a", 3)]),
    "lookup_leaves_last_token": (cfg(), [
        add("a", [1, 2, 3, 4]), alloc("a", 4), add("b", [1, 2, 3, 4]), {"op": "get_computed_blocks", "req": "b"}]),
}


def test_every_policy_field_has_a_scenario():
    """Catches: a V1Policy field added without a scenario proving it matters (a dead or untested switch)."""
    fields = {f.name for f in dataclasses.fields(V1Policy)} - {"name"}
    assert fields == set(FIELD_SCENARIOS)


@pytest.mark.parametrize("field", sorted(FIELD_SCENARIOS))
def test_policy_field_changes_an_observable_outcome(field):
    """Catches: a policy field that no op sequence of the machine's vocabulary can observe."""
    config, ops = FIELD_SCENARIOS[field]
    # A field that only shows where another is set flips from a release that sets that other one.
    base = {"hit_touches_skipped_nulls": V1_V0_20_2,
            "sliding_window_frees_hashless_to_front": V1_V0_23_0,
            "hybrid_layout_checked_without_caching": V1_V0_10_2,  # needs the restricted layouts
            "none_hash_at_import": V1_V0_9_2,  # needs int hashes
            "none_hash_seed_inverted": V1_V0_9_2,  # needs the import-time NONE_HASH
            "builtin_hash_only": V1_V0_9_2,  # needs int hashes (the builtin hash)
            "admission_counts_null_blocks": V1_V0_9_2,  # needs a counted null block
            "free_reversed_without_caching": V1_V0_10_2}.get(field, V1_V0_33_0)  # appends at the tail
    # A field that v0.10.2 shares with v0.33.0 flips to the value of the release that differs.
    flip_to = {"hybrid_needs_distinct_specs": V1_V0_20_2, "hybrid_layout_checked_without_caching": V1_V0_9_2,
               "hashes_on_request": V1_V0_9_2, "int_block_hashes": V1_V0_9_2,
               "usage_excludes_null_block": V1_V0_9_2, "caching_off_frees_to_front": V1_V0_27_1,
               "none_hash_seed_inverted": V1_V0_8_3,
               **{f: V1_V0_8_0 for f in ("preallocate_tokens", "lookahead_supported", "builtin_hash_only",
                                        "pool_has_null_block", "sliding_window_managed",
                                        "lookup_leaves_last_token")},
               **{f: V1_V0_8_5 for f in ("single_kv_cache_group", "pool_key_has_group_id",
                                        "admission_counts_null_blocks", "free_reversed_without_caching",
                                        "lookahead_capped_at_admission", "delay_cache_blocks_supported",
                                        "cache_salt_supported")}}.get(field, V1_V0_10_2)
    flipped = dataclasses.replace(base, **{field: getattr(flip_to, field)})
    refused_at_construction = {"watermark_supported": "watermark",  # v0.10.2 has no watermark
                               "retention_interval_supported": "retention interval",  # nor this setting
                               "hybrid_groups_any_layout": "refuses these groups",  # nor [sw, full, sw]
                               "hybrid_layout_checked_without_caching": "refuses these groups",  # 0.9.2
                               "single_kv_cache_group": "one KV-cache group only",  # 0.8.5
                               "hybrid_needs_distinct_specs": "refuses these groups"}  # 0.14-0.28: [sw, sw]
    if field in refused_at_construction:
        with pytest.raises(Exception, match=refused_at_construction[field]):
            run_ops(config, flipped, ops)
        assert "error" not in run_ops(config, base, ops)[0][-1]
        return
    assert run_ops(config, base, ops) != run_ops(config, flipped, ops)


def test_a_preempted_request_finds_only_the_blocks_hashed_before_its_tokens_arrived_before_0_10_1():
    """Catches: pre-0.10.1 hashing modelled as the request's own (every full block hashed as tokens
    arrive). There the manager hashes a request at its first lookup and then only as blocks are
    cached, so tokens appended and never computed before a preemption get no hash, and the
    re-admitted request misses the blocks another request cached for them (v0.9.2
    kv_cache_manager.py:158-163, block_pool.py:147-177)."""
    def hit(policy):
        outcomes, _ = run_ops(cfg(), policy, PREEMPTED_APPEND)
        return outcomes[-1]["result"]["num_computed_tokens"]
    assert hit(V1_V0_10_2) == 4  # both full blocks of a's five tokens are found
    assert hit(V1_V0_9_2) == 2  # only the block hashed at a's first lookup


def test_builtin_hash_chains_start_from_a_sha256_seed_in_0_9_2():
    """Catches: NONE_HASH under PYTHONHASHSEED derived with the configured hash function in
    0.9.2, where the import-time statement always uses sha256 (kv_cache_utils.py:59-60), or an int
    NONE_HASH where 0.10.2 has bytes."""
    from reference.blocks.v1.hashing import sha256_pickle_int

    _, snap = run_ops(cfg(hash_fn="builtin"), V1_V0_9_2, [])
    assert snap["none_hash"] == repr(sha256_pickle_int("0"))
    _, snap = run_ops(cfg(), V1_V0_10_2, [])
    assert len(bytes.fromhex(snap["none_hash"])) == 32


@pytest.mark.reference_only
def test_the_sliding_window_machine_puts_prompt_chunks_in_flight(monkeypatch):
    """Catches: the in-flight draw never made (the machines would not check the lag of
    asynchronous scheduling) or made where asynchronous scheduling cannot put tokens in flight: on
    an allocation that adopts a prefix hit, or with more tokens than the request's previous chunk."""
    from hypothesis import HealthCheck, settings

    import conformance.lockstep as lockstep

    monkeypatch.setattr(lockstep, "machine_settings", lambda examples, steps: settings(
        max_examples=examples, stateful_step_count=steps, derandomize=True, deadline=None, database=None,
        suppress_health_check=list(HealthCheck)))
    drawn, last_chunk = [], {}
    apply = ReferenceV1System.apply

    def spy(self, op):
        key = (id(self), op.get("req"))
        if op.get("num_in_flight_tokens"):
            drawn.append((op["num_in_flight_tokens"], last_chunk.get(key, 0), op["use_hit"]))
        out = apply(self, op)
        if op["op"] == "allocate_slots" and out is not None:
            last_chunk[key] = op["num_new_tokens"]
        return out

    monkeypatch.setattr(ReferenceV1System, "apply", spy)
    assert run_machine(v1.V1ReferencePeerSlidingWindow, 200, 50).passed
    assert drawn
    assert all(count <= previous and not use_hit for count, previous, use_hit in drawn)
