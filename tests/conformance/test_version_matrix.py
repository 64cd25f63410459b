"""scripts/version-matrix: release names, disk and one-environment guards, merging into matrix.json."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "version-matrix"


@pytest.fixture
def vm(tmp_path, monkeypatch):
    loader = importlib.machinery.SourceFileLoader("version_matrix", str(SCRIPT))
    spec = importlib.util.spec_from_loader("version_matrix", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    monkeypatch.setattr(module, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(module, "MATRIX", tmp_path / "matrix.json")
    return module


def entry(release, statuses):
    return {"release": release, "summary": {}, "duration_s": 1,
            "properties": {n: {"status": s} for n, s in statuses.items()}}


def test_bad_release_names_are_refused_before_anything_is_built(vm, capsys):
    """Catches: a typo (or a pre-release) building a 10 GB environment for nothing."""
    for bad in ("0.20", "v0.20.2", "0.20.2rc1", "latest"):
        with pytest.raises(SystemExit):
            vm.main([bad])
        assert not (vm.CACHE / "envs").exists()


def test_a_second_matrix_environment_is_refused(vm):
    """Catches: two ~10 GB release environments on disk at once."""
    (vm.CACHE / "envs" / "matrix-vllm-0.9.2").mkdir(parents=True)
    with pytest.raises(SystemExit, match="another matrix environment"):
        vm.build("0.20.2")


def test_low_disk_refuses_to_build(vm, monkeypatch):
    """Catches: filling the disk with a release environment."""
    monkeypatch.setattr(vm, "free_gb", lambda path: 12.0)
    with pytest.raises(SystemExit, match="need 30 GB"):
        vm.build("0.20.2")
    assert not vm.env_dir("0.20.2").exists()


def test_remove_never_touches_pinned_environments(vm):
    """Catches: --remove deleting scripts/ensure-env's pinned vLLM environments."""
    pinned = vm.CACHE / "envs" / "vllm-0.33.0-abc"
    pinned.mkdir(parents=True)
    vm.env_dir("0.20.2").mkdir(parents=True)
    vm.main(["--remove", "0.20.2"])
    assert pinned.exists() and not vm.env_dir("0.20.2").exists()


def test_merge_orders_releases_numerically_and_partial_runs_keep_other_verdicts(vm):
    """Catches: 0.9.2 sorted after 0.33.0, or an --only rerun wiping the other properties."""
    vm.merge(entry("0.33.0", {"a": "passed"}))
    vm.merge(entry("0.9.2", {"a": "failed", "b": "passed"}))
    vm.merge(entry("0.9.2", {"a": "passed"}), partial=True)
    matrix = json.loads(vm.MATRIX.read_text())
    assert list(matrix["releases"]) == ["0.9.2", "0.33.0"]
    got = matrix["releases"]["0.9.2"]
    assert got["properties"] == {"a": {"status": "passed"}, "b": {"status": "passed"}}
    assert got["summary"] == {"passed": 2, "failed": 0, "not_applicable": 0}


def test_a_partial_rerun_keeps_the_commit_the_other_verdicts_were_measured_at(vm):
    """Catches: an --only rerun stamping the whole entry with its own commit, device or packages, so
    that the site's freshness check calls verdicts measured at an older harness current; a rerun
    record filled from the old run; an earlier rerun dropped whole, or kept whole, when a later one
    reruns some of its properties; a rerun of every property kept as a rerun."""
    def run(statuses, day, commit):
        return {**entry("0.9.2", statuses), "date": day, "project": {"commit": commit}, "device": f"cpu-{commit}",
                "installed": [f"vllm from {commit}"]}

    def got():
        return json.loads(vm.MATRIX.read_text())["releases"]["0.9.2"]

    vm.merge(run({"a": "failed", "b": "passed", "c": "passed"}, "2026-12-01", "old"))
    vm.merge(run({"a": "passed"}, "2026-12-05", "new"), partial=True)
    assert (got()["project"], got()["date"], got()["device"]) == ({"commit": "old"}, "2026-12-01", "cpu-old")
    assert got()["reruns"] == [{"date": "2026-12-05", "project": {"commit": "new"}, "device": "cpu-new",
                                "python": None, "settings": None, "policy": None, "v0_policy": None,
                                "installed": ["vllm from new"], "properties": ["a"]}]
    vm.merge(run({"a": "passed", "b": "passed"}, "2026-12-06", "newer"), partial=True)
    assert [(r["project"]["commit"], r["properties"]) for r in got()["reruns"]] == [("newer", ["a", "b"])]
    vm.merge(run({"b": "passed", "c": "passed"}, "2026-12-07", "newest"), partial=True)
    assert [(r["project"]["commit"], r["properties"]) for r in got()["reruns"]] == [
        ("newer", ["a"]), ("newest", ["b", "c"])]
    # a rerun of every property is a full run: no reruns, its own commit
    vm.merge(run({"a": "passed", "b": "passed", "c": "passed"}, "2026-12-08", "full"), partial=True)
    assert got()["project"] == {"commit": "full"} and "reruns" not in got()


def test_a_rerun_onto_an_unbuilt_release_is_a_full_run(vm):
    """Catches: an --only run filed onto an entry whose environment could not be built, which kept
    the build error (the row said "not built" beside a verdict)."""
    vm.merge({"release": "0.9.2", "build_error": "no wheel", "properties": {}, "project": {"commit": "old"}})
    vm.merge({**entry("0.9.2", {"a": "passed"}), "project": {"commit": "new"}}, partial=True)
    got = json.loads(vm.MATRIX.read_text())["releases"]["0.9.2"]
    assert "build_error" not in got and got["project"] == {"commit": "new"}


def test_env_must_hold_the_named_release(vm, monkeypatch, tmp_path):
    """Catches: --env pointing at another release's environment and its verdicts filed under the wrong release."""
    monkeypatch.setattr(vm, "probe_installed", lambda python, environ: "0.10.2")
    with pytest.raises(SystemExit, match="does not have vLLM 0.33.0"):
        vm.main(["--env", str(tmp_path), "0.33.0"])
    assert not vm.MATRIX.exists()
    with pytest.raises(SystemExit):
        vm.main(["--env", str(tmp_path), "0.33.0", "0.10.2"])


FAKE_CONFORMANCE = r'''#!/usr/bin/env python3
import json, os, signal, sys
args = sys.argv[3:]  # after "-m conformance"
if args[0] == "list":
    print("a.fine   compares a\nb.crash  compares b\nc.fine   compares c")
    sys.exit(0)
names = [a for a in args[1:] if "." in a and not a.endswith(".json")]
if not names or "b.crash" in names:
    os.kill(os.getpid(), signal.SIGSEGV)
out = args[args.index("--json") + 1]
json.dump({"device": "cpu", "python": "3", "settings": {}, "duration_s": 1.0,
           "properties": [{"name": n, "status": "passed", "examples": 3, "steps": 4, "detail": "ok"} for n in names]},
          open(out, "w"))
'''


def test_a_property_that_kills_the_process_is_isolated(vm, tmp_path):
    """Catches: one property crashing the conformance process (vLLM 0.13.0's Triton cache write
    segfaulted under the interpreter) losing every other property's verdict and stopping the sweep."""
    fake = tmp_path / "fake-python"
    fake.write_text(FAKE_CONFORMANCE)
    fake.chmod(0o755)
    out = tmp_path / "report.json"
    options = [str(fake), "-m", "conformance", "run", "--examples", "200", "--json", str(out)]
    import os
    report = vm.run_isolated(str(fake), dict(os.environ), options, [], out)
    by_name = {p["name"]: p for p in report["properties"]}
    assert by_name["a.fine"]["status"] == by_name["c.fine"]["status"] == "passed"
    crashed = by_name["b.crash"]
    assert crashed["status"] == "failed" and crashed["failure"] == "harness_error"
    assert "signal 11" in crashed["detail"]
    assert report["summary"] == {"passed": 2, "failed": 1, "not_applicable": 0}


def test_isolation_runs_only_the_properties_asked_for(vm, tmp_path):
    """Catches: the per-property rerun after a crash guessing the property names from the command
    line (any option value with a dot in it, such as a path, would pass for a property name) or
    running properties that --only left out."""
    fake = tmp_path / "fake-python"
    fake.write_text(FAKE_CONFORMANCE)
    fake.chmod(0o755)
    out = tmp_path / "report.json"
    options = [str(fake), "-m", "conformance", "run", "--examples", "200", "--json", str(out)]
    import os
    report = vm.run_isolated(str(fake), dict(os.environ), options, ["c.fine", "b.crash"], out)
    assert [p["name"] for p in report["properties"]] == ["c.fine", "b.crash"]
    assert report["summary"] == {"passed": 1, "failed": 1, "not_applicable": 0}


def test_a_package_installed_from_a_wheel_file_is_recorded_by_name_and_version(vm):
    """Catches: vLLM 0.34.0, installed --no-deps from its downloaded wheel because the index lacks a
    pinned requirement, recorded as 'vllm @ file:///...' and so missing from the entry's installed
    vllm/torch/triton lines."""
    line = ("vllm @ file:///c/envs/matrix-vllm-0.34.0/vllm-wheel/vllm-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl"
            "#sha256=79ca4b")
    assert vm.from_wheel_file(line) == "vllm==0.34.0 (wheel sha256 79ca4b)"
    assert vm.from_wheel_file("torch==2.14.0") == "torch==2.14.0"
