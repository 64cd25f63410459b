"""``python -m conformance explore``: any trace in the explorer, both sides of a divergence, clear errors.

Runs in the dev environment: no vLLM. A divergence is planted by pairing the reference with a
peer whose snapshot lies (a stand-in for a vLLM that hands out blocks in another order).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from hypothesis.stateful import rule

from conformance import __main__ as cli
from conformance import explore, report
from conformance.adapters.reference_v1 import ReferenceV1System
from conformance.configs import V1Config
from conformance.corpus import TRACES
from conformance.explorer.steps import view_v1
from conformance.lockstep import Divergence, LockstepMachine, replay_sides, save_trace
from conformance.machines import v1 as v1_machine
from conformance.properties import Property, Result

PREFILL = TRACES / "v1" / "upstream-test-prefill-v0.33.0.json"
CONFIG = {"policy": "v0.33.0", "block_size": 4, "num_blocks": 6, "groups": [{"kind": "full"}],
          "max_model_len": 64, "enable_caching": True, "hash_fn": "sha256", "pythonhashseed": "0",
          "peer": "reference"}
OPS = [
    {"op": "add_request", "req": "a", "tokens": list(range(8))},
    {"op": "get_computed_blocks", "req": "a"},
    {"op": "allocate_slots", "req": "a", "num_new_tokens": 8, "use_hit": True},
    {"op": "free", "req": "a"},
]


class SwappingPeer(ReferenceV1System):
    """The planted bug: once a request has been freed, the free queue's first two blocks are
    reported swapped."""

    def __init__(self, config: V1Config) -> None:
        super().__init__(config, label="vllm-stand-in")
        self.freed = False

    def apply(self, op: dict):
        if op["op"] == "free":
            self.freed = True
        return super().apply(op)

    def snapshot(self) -> dict:
        snap = super().snapshot()
        if self.freed:
            q = snap["free_queue"]
            snap["free_queue"] = [q[1], q[0], *q[2:]]
        return snap


@pytest.fixture
def planted(monkeypatch):
    monkeypatch.setattr(v1_machine, "make_systems",
                        lambda config: (ReferenceV1System(V1Config.of(config)), SwappingPeer(V1Config.of(config))))


def page_data(html: str) -> dict:
    payload = re.search(r'<script type="application/json" class="tx-data">(.*?)</script>', html, re.S)[1]
    return json.loads(payload.replace("<\\/", "</"))


def test_a_corpus_trace_becomes_one_self_contained_page_of_the_reference_states(tmp_path, capsys, monkeypatch) -> None:
    """Catches: a page that needs the site's files (blank when opened alone), states that are not
    the reference's after each op, or an explore that needs vLLM to replay the reference."""
    monkeypatch.setitem(sys.modules, "vllm", None)  # importing vLLM now fails
    assert cli.main(["explore", str(PREFILL), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == str(tmp_path / "index.html")
    html = Path(printed).read_text()
    assert "<script src" not in html and "<link" not in html  # nothing to fetch
    assert "function setup(tx)" in html and ".tx-ex-form" in html  # script and style inlined
    data = page_data(html)
    trace = json.loads(PREFILL.read_text())
    assert len(data["steps"]) == len(trace["ops"]) + 1
    system = ReferenceV1System(V1Config.from_json(trace["config"]))
    for k, op in enumerate(trace["ops"], 1):
        system.apply(op)
        assert data["steps"][k]["state"] == view_v1(system.snapshot()), k
    assert data["questions"] and data["divergence"] is None
    # each op links to its upstream lines at the trace's release and the installed reference file
    alloc = data["links"]["allocate_slots"]
    assert alloc["notes"][0]["href"].startswith("https://github.com/vllm-project/vllm/blob/v0.33.0/"
                                                "vllm/v1/core/kv_cache_manager.py#L")
    assert alloc["ref"]["href"].startswith("file://") and alloc["ref"]["href"].endswith("reference/blocks/v1/manager.py")


def test_a_saved_divergence_shows_both_sides_and_the_first_field_that_differs(planted, tmp_path, capsys) -> None:
    """Catches: a divergence page that shows only the reference, outlines the wrong field, or a
    failure file that does not keep the other side's state (it could not be shown without vLLM)."""
    done, diff, sides = replay_sides({"semantics": "v1", "config": CONFIG, "ops": OPS})
    assert done == 4 and "free_queue" in diff
    saved = save_trace(cli.diverged_trace({"semantics": "v1", "config": CONFIG, "ops": OPS}, done, diff, sides),
                       tmp_path, "planted")
    assert cli.main(["explore", str(saved), "--out", str(tmp_path / "page")]) == 0
    data = page_data((tmp_path / "page" / "index.html").read_text())
    div = data["divergence"]
    assert div["step"] == 4 and div["message"] == diff
    assert div["first"].startswith("/free_queue[0]") and div["place"]["box"] == "free"
    ours, theirs = div["sides"]
    assert ours["state"] == data["steps"][4]["state"]
    assert theirs["label"].startswith("vllm-stand-in")
    assert theirs["state"]["free"][:2] == ours["state"]["free"][1::-1]


def test_an_old_failure_file_without_sides_still_opens(tmp_path, capsys) -> None:
    """Catches: failure files saved before both sides were kept becoming unreadable."""
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"semantics": "v1", "config": CONFIG, "ops": OPS, "divergence": "state differs"}))
    assert cli.main(["explore", str(path), "--out", str(tmp_path / "p")]) == 0
    div = page_data((tmp_path / "p" / "index.html").read_text())["divergence"]
    assert div["message"] == "state differs" and div["sides"] is None and div["step"] == len(OPS)


def test_a_machine_divergence_saves_both_sides(planted) -> None:
    """Catches: the runs' shrunk traces lacking the other side's outcome and snapshot."""

    class Machine(LockstepMachine):
        semantics_module = "conformance.machines.v1"

        @rule()
        def noop(self) -> None:  # a machine needs a rule; this test drives step() itself
            pass

    m = Machine()
    m.start(CONFIG)
    for op in OPS[:-1]:
        m.step(op)
    with pytest.raises(Divergence):
        m.step(OPS[-1])
    sides = m.record.last_divergence["sides"]
    assert [s["label"] for s in sides] == ["reference", "vllm-stand-in"]
    assert sides[0]["outcome"] == sides[1]["outcome"] == {"result": None}
    assert sides[0]["snapshot"]["free_queue"][:2] == sides[1]["snapshot"]["free_queue"][1::-1]


def test_replay_and_run_name_the_explore_command(planted, tmp_path, monkeypatch, capsys) -> None:
    """Catches: a divergence message that leaves the user to find the explorer by themselves, or a
    replay that finds a divergence and keeps no file to explore."""
    monkeypatch.setattr(report, "FAILURES", tmp_path / "failures")
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"semantics": "v1", "config": CONFIG, "ops": OPS}))
    assert cli.main(["replay", str(path)]) == 1
    out = capsys.readouterr().out
    saved = re.search(r"explore: python -m conformance explore (\S+)", out)[1]
    assert json.loads(Path(saved).read_text())["sides"][1]["label"] == "vllm-stand-in"
    trace = {"semantics": "v1", "config": {}, "ops": []}
    monkeypatch.setattr(report, "all_properties", lambda: {"demo.fail": Property(
        "demo.fail", "y", lambda e, s, progress=None: Result(False, 1, 1, "diverged", {"trace": trace}))})
    report.run(None, 1, 1, out=sys.stdout)
    assert re.search(r"explore: python -m conformance explore \S+demo\.fail-", capsys.readouterr().out)


@pytest.mark.parametrize("content, field", [
    ("not json at all", "is not JSON"),
    ("[]", "expected a JSON object with semantics, config and ops, got []"),
    (json.dumps({"semantics": "v1", "config": CONFIG}), "missing field 'ops'"),
    (json.dumps({"semantics": "v1", "config": CONFIG, "ops": [{"op": "free"}]}), "ops[0]: missing field 'req'"),
    (json.dumps({"semantics": "v1", "config": CONFIG, "ops": OPS, "sides": [3]}), "sides[0]: expected an object"),
    (json.dumps({"semantics": "v1", "config": CONFIG, "ops": OPS, "divergence": "x",
                 "sides": [{"label": "a", "snapshot": {}}, {"label": "b", "snapshot": {"x": 1}}]}),
     "sides: a saved snapshot is not a v1 snapshot"),
])
def test_bad_input_is_one_line_naming_the_file_and_the_field(tmp_path, capsys, content, field) -> None:
    """Catches: a traceback (or a blank page) for a file that is not a trace."""
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert cli.main(["explore", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith(f"explore: {path}") and field in err, err
    assert not (tmp_path / "out" / "index.html").exists()


def test_a_missing_file_is_one_line_too(tmp_path, capsys) -> None:
    """Catches: a traceback for a mistyped path."""
    assert cli.main(["explore", str(tmp_path / "nope.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"explore: {tmp_path / 'nope.json'}: cannot be read") and "\n" not in err


def test_a_trace_the_reference_crashes_on_ends_at_that_step(tmp_path, capsys, monkeypatch) -> None:
    """Catches: a hand-written trace that makes the reference raise turning into a traceback."""
    original = ReferenceV1System.apply

    def crashing(self, op):
        if op["op"] == "free":
            raise RuntimeError("planted")
        return original(self, op)

    monkeypatch.setattr(ReferenceV1System, "apply", crashing)
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"semantics": "v1", "config": CONFIG, "ops": OPS}))
    assert cli.main(["explore", str(path), "--out", str(tmp_path / "p")]) == 0
    html = (tmp_path / "p" / "index.html").read_text()
    data = page_data(html)
    assert len(data["steps"]) == len(OPS) + 1 and data["steps"][-1]["out"] == "raised RuntimeError: planted"
    assert "The reference stops at op 4" in html


def test_serve_answers_on_localhost_only(tmp_path, monkeypatch, capsys) -> None:
    """Catches: --serve binding every interface, or serving something other than the page."""
    started = []
    real = explore.server

    def capture(directory, port=0):
        httpd = real(directory, port)
        started.append(httpd)
        return httpd

    monkeypatch.setattr(explore, "server", capture)
    thread = threading.Thread(target=cli.main, args=(["explore", str(PREFILL), "--out", str(tmp_path), "--serve"],),
                              daemon=True)
    thread.start()
    for _ in range(200):
        if started:
            break
        time.sleep(0.05)
    assert started, "the server did not start"
    httpd = started[0]
    try:
        assert httpd.server_address[0] == "127.0.0.1"
        url = f"http://127.0.0.1:{httpd.server_address[1]}/index.html"
        with urllib.request.urlopen(url, timeout=10) as response:
            assert response.status == 200 and b'class="tx-data"' in response.read()
    finally:
        httpd.shutdown()
        thread.join(timeout=10)
