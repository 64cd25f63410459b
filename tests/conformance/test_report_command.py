"""The conformance command itself: what it reports, what it saves, what it refuses. Runs in the
dev env (no vLLM), with stand-in properties where a real run would need vLLM."""

import json

import pytest

from conformance import __main__ as cli
from conformance import report
from conformance.lockstep import NotApplicable
from conformance.properties import Property, Result, all_properties


def fake_registry(monkeypatch, *props):
    monkeypatch.setattr(report, "all_properties", lambda: {p.name: p for p in props})


def test_every_property_module_registers_stable_unique_names():
    """Catches: a property module that fails to import (its properties silently vanish from the
    report) or two modules registering one name."""
    names = set(all_properties())
    for expected in ("v1.lifecycle", "v1.sliding_window", "v0.lifecycle", "v0.prefix_caching",
                     "traces.corpus", "kernel.unified_attention", "kernel.paged_attention_2d",
                     "kernel.reshape_and_cache_flash", "kernel.cuda.paged_attention_v1"):
        assert expected in names


def test_report_lists_passed_failed_and_not_applicable_with_reasons(monkeypatch, tmp_path, capsys):
    """Catches: a report that drops properties it could not run, or hides why, or loses the
    shrunk trace of a failure (the user could not replay it)."""
    monkeypatch.setattr(report, "FAILURES", tmp_path / "failures")

    def not_here(examples, steps, progress=None):
        raise NotApplicable("this vLLM has no such thing")

    trace = {"semantics": "v1", "config": {}, "ops": [{"op": "free", "req": "r0"}]}
    fake_registry(
        monkeypatch,
        Property("demo.pass", "x", lambda e, s, progress=None: Result(True, e, e * s, "fine")),
        Property("demo.fail", "y", lambda e, s, progress=None: Result(False, 3, 7, "diverged", {"trace": trace})),
        Property("demo.na", "z", not_here),
    )
    out = report.run(None, 4, 5)
    by = {p["name"]: p for p in out["properties"]}
    assert by["demo.pass"]["status"] == "passed" and by["demo.pass"]["steps"] == 20
    assert by["demo.fail"]["status"] == "failed"
    assert json.loads(open(by["demo.fail"]["trace"]).read())["ops"] == trace["ops"]
    assert by["demo.na"]["status"] == "not_applicable" and "no such thing" in by["demo.na"]["detail"]
    assert out["summary"] == {"passed": 1, "failed": 1, "not_applicable": 1}
    assert "replay" in capsys.readouterr().out


def test_kernel_properties_get_their_own_example_count(monkeypatch):
    """Catches: kernel properties run with the state machines' 200 examples, which under the
    Triton interpreter would take most of CI's time."""
    seen = {}
    fake_registry(
        monkeypatch,
        Property("kernel.demo", "k", lambda e, s, progress=None: seen.setdefault("k", e) and Result(True, e)),
        Property("v1.demo", "m", lambda e, s, progress=None: seen.setdefault("m", e) and Result(True, e)),
    )
    report.run(None, 200, 50, kernel_examples=25)
    assert seen == {"k": 25, "m": 200}


def test_command_exit_status_and_json(monkeypatch, tmp_path):
    """Catches: a command that exits 0 when a property failed (CI would pass a divergence) or
    writes no JSON for the site's conformance page."""
    fake_registry(monkeypatch, Property("demo.fail", "y", lambda e, s, progress=None: Result(False, 1, 1, "bad")))
    path = tmp_path / "r.json"
    assert cli.main(["run", "--examples", "2", "--steps", "2", "--json", str(path)]) == 1
    assert json.loads(path.read_text())["properties"][0]["status"] == "failed"
    fake_registry(monkeypatch, Property("demo.pass", "y", lambda e, s, progress=None: Result(True, 1, 1)))
    assert cli.main(["run", "--examples", "2", "--steps", "2"]) == 0


def test_command_refuses_bad_arguments(monkeypatch):
    """Catches: zero or negative example counts accepted (a run that checks nothing and passes),
    or an unknown property name silently ignored."""
    with pytest.raises(SystemExit):
        cli.main(["run", "--examples", "0"])
    fake_registry(monkeypatch, Property("demo.pass", "y", lambda e, s, progress=None: Result(True)))
    with pytest.raises(SystemExit, match="unknown property"):
        cli.main(["run", "no.such.property"])


def test_replay_reports_unreadable_trace(tmp_path, capsys):
    """Catches: a corrupt trace file crashing the replay command with a traceback instead of
    naming the file."""
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli.main(["replay", str(bad)]) == 2
    assert "unreadable trace" in capsys.readouterr().out


def test_replay_reports_an_unmapped_exception_as_a_divergence(monkeypatch, tmp_path, capsys):
    """Catches: a system raising something its adapter does not map (vLLM 0.10.2's IndexError
    after freeing a swapped sequence) crashing the replay command with a traceback, instead of
    naming the op, as the state machines do, and exiting 1."""
    from conformance.machines import v0

    class Steady:
        label = "steady"

        def apply(self, op):
            return None

        def snapshot(self):
            return {}

    class Crashing(Steady):
        label = "crashing"

        def apply(self, op):
            if op["op"] == "hit_rate":
                raise IndexError("list index out of range")

    monkeypatch.setattr(v0, "make_systems", lambda config: (Steady(), Crashing()))
    monkeypatch.setattr(report, "FAILURES", tmp_path / "failures")  # the replay saves the divergence
    trace = tmp_path / "t.json"
    config = {"block_size": 1, "num_gpu_blocks": 1, "num_cpu_blocks": 0, "watermark": 0.0, "enable_caching": True}
    trace.write_text(json.dumps({"semantics": "v0", "config": config, "ops": [{"op": "num_free"}, {"op": "hit_rate"}]}))
    assert cli.main(["replay", str(trace)]) == 1
    out = capsys.readouterr().out
    assert "DIVERGED after 2 of 2 ops" in out and "raised IndexError" in out


def test_required_property_that_is_not_applicable_fails_the_run(monkeypatch, tmp_path):
    """Catches: a pinned vLLM environment where vLLM fails to import (or a harness that no longer
    finds a mechanism) turning every property into "not applicable" and the run into exit 0."""
    monkeypatch.setattr(report, "FAILURES", tmp_path / "failures")

    def broken_import(examples, steps, progress=None):
        raise NotApplicable("vLLM 0.10.2 is installed but does not import (ImportError: boom)")

    fake_registry(monkeypatch, Property("demo.pass", "x", lambda e, s, progress=None: Result(True, e, e * s)),
                  Property("demo.na", "z", broken_import), Property("demo.other", "w", broken_import))
    out = report.run(None, 2, 2, required=["demo.na"])
    by = {p["name"]: p for p in out["properties"]}
    assert by["demo.na"]["status"] == "failed" and by["demo.na"]["required"] is True
    assert "required, but not applicable here" in by["demo.na"]["detail"] and "boom" in by["demo.na"]["detail"]
    assert by["demo.other"]["status"] == "not_applicable" and by["demo.other"]["required"] is False
    assert out["summary"] == {"passed": 1, "failed": 1, "not_applicable": 1}
    assert out["settings"]["required"] == ["demo.na"]
    # The command exits non-zero; without --require the same run is lenient (a user's own env).
    monkeypatch.setattr(cli, "_cpu_environment", lambda gpu: None)
    assert cli.main(["run", "--examples", "1", "--steps", "1", "--require", "demo.na"]) == 1
    assert cli.main(["run", "--examples", "1", "--steps", "1"]) == 0


def test_require_refuses_unknown_or_unselected_names(monkeypatch):
    """Catches: a typo in --require that silently requires nothing, or a required property left
    out of the selection (it would never run, so never fail)."""
    fake_registry(monkeypatch, Property("demo.pass", "x", lambda e, s, progress=None: Result(True, e)))
    with pytest.raises(SystemExit, match="unknown property demo.typo"):
        report.run(None, 1, 1, required=["demo.typo"])
    fake_registry(monkeypatch, Property("demo.a", "x", lambda e, s, progress=None: Result(True, e)),
                  Property("demo.b", "y", lambda e, s, progress=None: Result(True, e)))
    with pytest.raises(SystemExit, match="required but not selected: demo.b"):
        report.run(["demo.a"], 1, 1, required=["demo.b"])


def test_progress_past_the_asked_examples_is_not_a_fraction_above_one(monkeypatch, capsys):
    """Catches: a progress line that reads "220/200 examples" when Hypothesis starts examples it
    later discards (a user reads it as a run past its end, or a wrong count)."""
    def many(n, steps, progress=None):
        for done in range(1, n + n // 4 + 1):
            progress(done)
        return Result(True, n, n * steps, "fine")

    fake_registry(monkeypatch, Property("demo.many", "x", many))
    report.run(None, examples=20, steps=1, kernel_examples=1)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[1/1] demo.many: ")]
    assert "[1/1] demo.many: 20/20 examples" in "\n".join(lines)
    assert any("24 examples started (20 to keep" in ln for ln in lines)
    assert not any("22/20" in ln or "24/20" in ln for ln in lines)
