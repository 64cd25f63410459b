"""The trace schema (conformance/trace_file.py) and the readers that go through it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conformance import __main__ as cli
from conformance import corpus
from conformance.configs import V0Config, V1Config
from conformance.trace_file import OP_FIELDS, TraceFileError, check_trace, load_trace

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = sorted([*(ROOT / "conformance" / "traces").glob("*/*.json"),
                    *(ROOT / "conformance" / "known-upstream-bugs").glob("*.json")])

V0_CONFIG = {"block_size": 4, "num_gpu_blocks": 8, "num_cpu_blocks": 0, "watermark": 0.0,
             "sliding_window": None, "enable_caching": True}
V0_OPS = [{"op": "add_group", "group": "g", "seqs": [1], "prompt": [1, 2, 3]}, {"op": "allocate", "group": "g"}]


def v0_trace(**changes) -> dict:
    return {"semantics": "v0", "config": dict(V0_CONFIG), "ops": [dict(op) for op in V0_OPS], **changes}


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_committed_trace_follows_the_schema(path):
    """Catches: a schema stricter than the traces the project keeps (the corpus or a known bug
    would stop loading), or a committed trace with a typo the replay would trip over."""
    trace = load_trace(path)
    assert trace["ops"] and trace["semantics"] in OP_FIELDS


def write(tmp_path: Path, content) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


MALFORMED = {
    "a list, not an object": ([], "expected a JSON object with semantics, config and ops, got []"),
    "not JSON": ("{not json", "is not JSON"),
    "no semantics": ({"config": V0_CONFIG, "ops": V0_OPS}, "missing field 'semantics'"),
    "unknown semantics": ({**v0_trace(), "semantics": "v2"}, "semantics: expected one of v0, v1"),
    "unknown op": (v0_trace(ops=[{"op": "allocate_everything", "group": "g"}]),
                   "ops[0].op: unknown v0 op \"allocate_everything\""),
    "a V1 op in a V0 trace": (v0_trace(ops=[{"op": "preempt", "req": "r"}]), "ops[0].op: unknown v0 op"),
    "wrong type in a step": (v0_trace(ops=[V0_OPS[0], {"op": "free", "seq": "1"}]),
                             "ops[1].seq: expected an integer, got \"1\""),
    "a bool where an integer goes": (v0_trace(ops=[{"op": "free", "seq": True}]), "ops[0].seq: expected an integer"),
    "missing op field": (v0_trace(ops=[{"op": "allocate"}]), "ops[0]: missing field 'group'"),
    "step not an object": (v0_trace(ops=[["allocate", "g"]]), "ops[0]: expected an object with an 'op' field"),
    "unknown field in a step": (v0_trace(ops=[{"op": "allocate", "group": "g", "gruop": "h"}]),
                                "ops[0].gruop: unknown field"),
    "config missing a field": ({**v0_trace(), "config": {k: v for k, v in V0_CONFIG.items() if k != "watermark"}},
                               "config: missing field 'watermark'"),
    "config of the wrong type": ({**v0_trace(), "config": {**V0_CONFIG, "block_size": "4"}},
                                 "config.block_size: expected an integer"),
    "unknown policy": ({**v0_trace(), "config": {**V0_CONFIG, "policy": "v9.9.9"}},
                       "config.policy: 'v9.9.9' is not a v0 policy"),
    "ops not a list": ({**v0_trace(), "ops": {"op": "num_free"}}, "ops: expected a list"),
    "expect not aligned": (v0_trace(expect=[None]), "expect: has 1 entries for 2 ops"),
    "expect outcome malformed": (v0_trace(expect=[None, {"outcome": {"value": 1}}]), "expect[1].outcome"),
    "unknown top-level field": (v0_trace(expects=[]), "expects: unknown field in a trace"),
    "the old self-pairing key": ({**v0_trace(), "config": {**V0_CONFIG, "against": "reference"}},
                                 "config.against: renamed to 'peer': write \"peer\": \"reference\" instead"),
    "V1 group without a window": ({"semantics": "v1", "ops": [],
                                   "config": {"policy": "v0.33.0", "block_size": 4, "num_blocks": 8,
                                              "max_model_len": 64, "groups": [{"kind": "sliding"}]}},
                                  "config.groups[0]: missing field 'window'"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_replay_names_the_file_and_the_field_of_a_malformed_trace(case, tmp_path, capsys):
    """Catches: `python -m conformance replay` on a malformed trace ending in a traceback (a file
    holding [] raised TypeError) or in a message without the field (a trace without `semantics`
    printed only "unreadable trace: 'semantics'")."""
    content, expected = MALFORMED[case]
    path = write(tmp_path, content)
    assert cli.main(["replay", str(path)]) == 2
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: unreadable trace: ") and expected in out, out
    assert "Traceback" not in out


def test_a_list_is_refused_as_not_a_trace(tmp_path):
    """Catches: `[]` getting past the loader (the replay then indexed a list with a string)."""
    with pytest.raises(TraceFileError, match="expected a JSON object with semantics, config and ops, got \\[\\]"):
        load_trace(write(tmp_path, []))


def test_a_missing_file_is_named(tmp_path):
    """Catches: a missing trace file escaping as a bare FileNotFoundError traceback."""
    with pytest.raises(TraceFileError, match="nowhere.json: cannot be read"):
        load_trace(tmp_path / "nowhere.json")


def test_a_valid_trace_is_returned_unchanged():
    """Catches: the checker rewriting or dropping what it checks (readers replay what it returns)."""
    trace = v0_trace(note="n", expect=[None, {"outcome": {"result": None}, "state": {"tables": {}}}])
    assert check_trace(json.loads(json.dumps(trace))) == trace


def test_the_schema_knows_exactly_the_ops_the_adapters_document():
    """Catches: an op added to an adapter's vocabulary but not to the schema (every trace using it
    would be refused on load), or one the schema accepts that no adapter implements."""
    from conformance.adapters import reference_v0, reference_v1

    v0_ops = (reference_v0.__doc__ or "").split("Ops (")[1].split("\n\nRefusals")[0]
    assert set(re.findall(r"``(\w+)``", v0_ops)) == set(OP_FIELDS["v0"])
    assert set(re.findall(r'"op": "(\w+)"', reference_v1.__doc__ or "")) == set(OP_FIELDS["v1"])


def test_the_reference_adapters_dispatch_exactly_the_ops_of_the_schema():
    """Catches: an op the schema accepts that a reference adapter's dispatch table lacks (a
    replay of a valid trace would be refused as an unknown op), or a table entry no trace may
    name."""
    from conformance.adapters.reference_v0 import ReferenceV0System
    from conformance.adapters.reference_v1 import ReferenceV1System

    v1_config = {"policy": "v0.33.0", "block_size": 4, "num_blocks": 8, "max_model_len": 64,
                 "groups": [{"kind": "full"}]}
    assert set(ReferenceV0System(V0Config.from_json(V0_CONFIG)).ops) == set(OP_FIELDS["v0"])
    assert set(ReferenceV1System(V1Config.from_json(v1_config)).ops) == set(OP_FIELDS["v1"])


def test_a_v1_config_writes_back_the_json_it_was_read_from():
    """Catches: a V1Config whose to_json() records a trace's config otherwise than the JSON it was
    read from (a field renamed, dropped, reordered or defaulted differently, a group reshaped, the
    policy written as an object rather than its name), so a recorded trace no longer replays as
    it was drawn; and a config that takes a policy name or a full-attention group with a window."""
    import dataclasses

    from conformance.configs import V1Group
    from conformance.trace_file import CONFIG_FIELDS

    raw = {"policy": "v0.33.0", "block_size": 4, "num_blocks": 9,
           "groups": [{"kind": "full"}, {"kind": "sliding", "window": 5}], "max_model_len": 64,
           "enable_caching": False, "hash_fn": "builtin", "pythonhashseed": "0", "entropy": "a1" * 32,
           "watermark": 0.25, "peer": "reference"}
    config = V1Config.from_json(raw)
    assert json.dumps(config.to_json()) == json.dumps(raw)
    assert list(dataclasses.replace(config, peer=None).to_json()) == list(raw)[:-1]
    required = {k: raw[k] for k in CONFIG_FIELDS["v1"].required}
    assert V1Config.from_json(required).to_json() == {**required, "enable_caching": True, "hash_fn": "sha256",
                                                      "pythonhashseed": None, "entropy": "5e" * 32, "watermark": 0.0}
    for path in COMMITTED:
        trace = json.loads(path.read_text())
        if trace["semantics"] == "v1":
            written = V1Config.from_json(trace["config"]).to_json()
            assert {k: written[k] for k in trace["config"]} == trace["config"], path
    with pytest.raises(TypeError):
        dataclasses.replace(config, policy="v0.33.0")
    with pytest.raises(ValueError):
        V1Group("full", 4)
    with pytest.raises(ValueError):
        V1Group("sliding")


def test_a_malformed_corpus_file_fails_the_corpus_property_as_a_harness_error(monkeypatch, tmp_path):
    """Catches: one malformed corpus trace crashing the whole conformance run with a traceback
    (or being skipped silently) instead of failing traces.corpus with the file and field named."""
    bad = write(tmp_path, v0_trace(ops=[{"op": "free"}]))
    monkeypatch.setattr(corpus, "corpus", lambda: [bad])
    monkeypatch.setattr(corpus, "installed_policy", lambda: None)
    monkeypatch.setattr(corpus, "installed_v0_policy", lambda: None)
    monkeypatch.setattr("conformance.versions.installed_vllm_version", lambda: "0.10.2")
    result = corpus.run_corpus()
    assert not result.passed and result.extra["failure"] == "harness_error"
    assert f"{bad}: ops[0]: missing field 'seq'" in result.detail


@pytest.mark.parametrize("machine", ["v0.V0ReferencePeerLifecycle", "v0.V0ReferencePeerPrefixCaching",
                                     "v1.V1ReferencePeerLifecycle", "v1.V1ReferencePeerSlidingWindow"])
def test_every_trace_a_machine_records_follows_the_schema(machine):
    """Catches: a schema that refuses what the state machines write (an op field, a config key
    such as ``peer``): the shrunk trace a failed run saves in traces/failures/ could
    not be replayed. Runs the reference-against-itself machines and checks each example's trace."""
    from hypothesis import settings
    from hypothesis.stateful import run_state_machine_as_test

    from conformance.lockstep import suppressed_health_checks
    from conformance.machines import v0, v1

    module, name = machine.split(".")
    base = getattr({"v0": v0, "v1": v1}[module], name)
    checked = []

    class Checked(base):  # type: ignore[misc, valid-type]  # a machine class chosen at run time
        def teardown(self):
            if self.trace:
                checked.append(check_trace(json.loads(json.dumps(self.trace)), f"{machine} example"))

    run_state_machine_as_test(Checked, settings=settings(max_examples=15, stateful_step_count=30, deadline=None,
                                                         database=None, suppress_health_check=suppressed_health_checks()))
    assert checked and any(t["ops"] for t in checked)
    assert all(t["config"].get("peer") == "reference" for t in checked)
