"""V0 liveness per release: the report's reader and writer (annotations/liveness.py), the version
tolerance of the reach probe that can be tested without vLLM, and the version-matrix hook."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
from pathlib import Path

import pytest

from annotations import liveness
from annotations import reach_probe as rp

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "version-matrix"


def run(**over) -> dict:
    base = {"steps": 10, "preempted": 2, "parallel_sample_requests": 3, "largest_group_added": 1,
            "largest_group_seen": 1, "forked_sequences": 0, "blocks_copied": 0, "blocks_swapped_out": 0,
            "unfinished_after": 0}
    return {**base, **over}


def entry(release: str, **configs) -> dict:
    return {"release": release, "vllm_version": release, "date": "2026-12-02", "command": "probe",
            "project": {"commit": "a" * 40, "dirty": False}, "files_sha256": "f" * 64, "sha256": {},
            "configs": {name: ({"settings": [name], "not_run": c} if isinstance(c, str) else {"settings": [name], "run": c})
                        for name, c in configs.items()}}


@pytest.mark.parametrize("defect, message", [
    (lambda e: e.update(release="0.6.4"), "not an entry for release"),
    (lambda e: e["configs"]["default"].update(not_run="why"), "exactly one of run"),
    (lambda e: e["configs"]["default"].pop("run"), "exactly one of run"),
    (lambda e: e["configs"]["default"]["run"].pop("blocks_copied"), "blocks_copied"),
    (lambda e: e["configs"]["default"]["run"].update(preempted=True), "preempted"),
    (lambda e: e.update(configs={}), "no reason why"),
])
def test_read_refuses_a_malformed_entry(tmp_path, defect, message):
    """Catches: a liveness file the page would render with invented or missing numbers: an entry
    filed under another release, a configuration with both figures and a reason it did not run (or
    neither), a run without one of the shown figures, a boolean where a count belongs, or a
    release with no configurations and no build error."""
    good = entry("0.6.3.post1", default=run())
    defect(good)
    path = tmp_path / "v0-liveness.json"
    path.write_text(json.dumps({"releases": {"0.6.3.post1": good}}))
    with pytest.raises(liveness.LivenessError, match=message):
        liveness.read(path)


def test_file_entry_replaces_a_release_and_orders_releases_numerically(tmp_path):
    """Catches: releases ordered as strings (0.10.2 before 0.6.3.post1, so every "change" is
    reported backwards), a second run of a release added beside the first instead of replacing it,
    or filing an entry the reader would refuse."""
    path = tmp_path / "v0-liveness.json"
    for release in ("0.10.2", "0.6.3.post1", "0.6.4"):
        liveness.file_entry(entry(release, default=run()), path)
    liveness.file_entry(entry("0.6.4", default=run(preempted=9)), path)
    releases = liveness.read(path)["releases"]
    assert list(releases) == ["0.6.3.post1", "0.6.4", "0.10.2"]
    assert releases["0.6.4"]["configs"]["default"]["run"]["preempted"] == 9
    with pytest.raises(liveness.LivenessError):
        liveness.file_entry({"release": "0.7.0", "configs": {"default": {"settings": []}}}, path)


def test_make_entry_refuses_a_summary_of_another_release():
    """Catches: a probe run in the wrong environment (another vLLM installed) filed under the
    release that was asked for."""
    summary = {"vllm_version": "0.6.6.post1", "files_sha256": "f" * 64, "sha256": {},
               "configs": entry("0.6.6.post1", default=run())["configs"]}
    with pytest.raises(liveness.LivenessError, match="not 0.7.0"):
        liveness.make_entry(summary, release="0.7.0", command="c", project={}, date="d")
    assert liveness.make_entry(summary, release="0.6.6.post1", command="c", project={}, date="d")["configs"]


def test_changes_compare_consecutive_releases_that_ran_the_configuration():
    """Catches: a change attributed to the wrong release (compared with a release that did not run
    the configuration, or with a build error), a flip missed, or a figure that moved without
    changing a mechanism reported as a change."""
    forked = run(largest_group_seen=3, forked_sequences=24, blocks_copied=14, blocks_swapped_out=531)
    releases = {
        "0.6.3.post1": entry("0.6.3.post1", default=forked, encoder_decoder=run(error="AssertionError")),
        "0.6.4": {"release": "0.6.4", "build_error": {"step": "pip"}},
        "0.6.6.post1": entry("0.6.6.post1", default=run(preempted=7), encoder_decoder="the engine could not be built"),
        "0.7.0": entry("0.7.0", default=run(preempted=8), encoder_decoder=run()),
    }
    found = {(c.config, c.fact, c.before, c.at, c.now) for c in liveness.changes(releases)}
    assert found == {
        ("default", "runs a group of several sequences", "0.6.3.post1", "0.6.6.post1", False),
        ("default", "forks sequences", "0.6.3.post1", "0.6.6.post1", False),
        ("default", "copies blocks (copy-on-write)", "0.6.3.post1", "0.6.6.post1", False),
        ("default", "swaps blocks out", "0.6.3.post1", "0.6.6.post1", False),
        ("encoder_decoder", "finishes every request without error", "0.6.3.post1", "0.7.0", True),
    }


def test_the_committed_0_10_2_entry_matches_the_pinned_probe_report():
    """Catches: the per-release table's 0.10.2 row and the pinned reach-probe report (against
    which the notes' reach statuses are checked) telling two stories, e.g. after the probe's
    workload changed and only one of them was rerun."""
    pinned = rp.load_report()
    committed = liveness.read()["releases"][rp.VERSION]
    assert committed["vllm_version"] == pinned["vllm_version"]
    for name, config in pinned["configs"].items():
        assert committed["configs"][name]["run"] == config["run"], name
    assert all(committed["sha256"][f] == h for f, h in pinned["sha256"].items() if f in committed["sha256"])


def test_every_committed_release_is_a_v0_release_measured_in_its_own_environment():
    """Catches: an entry made in the wrong environment (the version the probe saw differs from the
    release it is filed under), or a configuration that neither ran nor says why."""
    for version, e in liveness.read()["releases"].items():
        if e.get("build_error"):
            continue
        assert e["vllm_version"] == version
        assert set(e["configs"]) == set(rp.CONFIGS), version


# --------------------------------------------------------------------------- version tolerance


def test_required_supplies_only_parameters_without_a_default():
    """Catches: the probe passing 0.6.4's required ``task`` (or 0.6.3's ``max_num_batched_tokens``)
    to a release whose config does not take it, or not passing it where it is required (the
    engine of that release could not be built at all)."""
    class Old:  # SchedulerConfig of 0.6.4: task and max_num_batched_tokens are required
        def __init__(self, task, max_num_batched_tokens, max_num_seqs, max_model_len, preemption_mode=None):
            pass

    class New:  # 0.10.2's dataclass: everything has a default
        def __init__(self, max_num_seqs=128, max_model_len=None, max_num_batched_tokens=None):
            pass

    fallbacks = {"task": "generate", "max_num_batched_tokens": None}
    assert rp._required(Old, **fallbacks) == fallbacks
    assert rp._required(New, **fallbacks) == {}


def test_accepted_drops_arguments_a_release_does_not_take():
    """Catches: ``prompt_adapter_request`` (a required parameter of ``_add_processed_request`` up to
    0.9.2, gone in 0.10.2) passed where it does not exist (TypeError on every request), or left
    out where it is required."""
    def old(request_id, processed_inputs, params, arrival_time, lora_request, prompt_adapter_request):
        pass

    def new(request_id, processed_inputs, params, arrival_time, lora_request=None):
        pass

    extra = {"lora_request": None, "prompt_adapter_request": None}
    assert rp._accepted(old, **extra) == extra
    assert rp._accepted(new, **extra) == {"lora_request": None}


def test_reset_prefix_cache_is_recorded_as_absent_before_0_7_0():
    """Catches: the probe dying with AttributeError in every configuration of 0.6.x (LLMEngine
    has no reset_prefix_cache before 0.7.0), or recording a made-up True/False there."""
    class Engine:
        pass

    class Later:
        def reset_prefix_cache(self):
            return False

    assert "not in this release" in rp._reset_prefix_cache(Engine())
    assert rp._reset_prefix_cache(Later()) is False


# --------------------------------------------------------------------------- version-matrix hook


@pytest.fixture
def vm(tmp_path, monkeypatch):
    loader = importlib.machinery.SourceFileLoader("version_matrix_liveness", str(SCRIPT))
    spec = importlib.util.spec_from_loader("version_matrix_liveness", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    monkeypatch.setattr(module, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(module, "MATRIX", tmp_path / "matrix.json")
    monkeypatch.setattr(liveness, "REPORT", tmp_path / "v0-liveness.json")
    return module


def test_the_probe_runs_only_where_the_v0_block_manager_exists(vm, tmp_path):
    """Catches: the hook skipping a V0 release (its liveness never measured) or launching the
    probe in a V1-only release (a failed run for every release from 0.11.0)."""
    env = tmp_path / "env"
    core = env / "lib" / "python3.11" / "site-packages" / "vllm" / "core"
    core.mkdir(parents=True)
    assert not vm.has_v0_block_manager(env)
    assert vm.run_liveness("0.11.0", env, vm.MATRIX) is None
    (core / "block_manager.py").write_text("")
    assert vm.has_v0_block_manager(env)


def test_liveness_goes_beside_the_file_the_run_writes(vm, tmp_path):
    """Catches: shards on several machines all writing the committed liveness report (their
    results would overwrite each other), or a plain run not filing it there."""
    assert vm.liveness_file(vm.MATRIX) == liveness.REPORT
    assert vm.liveness_file(tmp_path / "matrix-shard-2-of-3.json") == tmp_path / "matrix-shard-2-of-3.v0-liveness.json"


def test_liveness_only_files_a_build_error_and_writes_no_matrix(vm, monkeypatch):
    """Catches: --liveness-only writing matrix.json (another sweep owns it), dropping a release
    whose environment cannot be built without saying why, or combining with --shard."""
    error = {"step": "pip install vllm==0.6.4", "pip": "ResolutionImpossible: pyairports"}

    def unbuildable(release):
        raise vm.BuildFailed(error)

    monkeypatch.setattr(vm, "build", unbuildable)
    assert vm.main(["--liveness-only", "0.6.4"]) == 0
    assert not vm.MATRIX.exists()
    filed = liveness.read(liveness.REPORT)["releases"]["0.6.4"]
    assert filed["build_error"] == error and "configs" not in filed
    with pytest.raises(SystemExit):
        vm.main(["--liveness-only", "--shard", "1/2", "0.6.4"])


def test_merge_files_each_shards_liveness_and_refuses_two_stories(vm, tmp_path):
    """Catches: V0 liveness measured by shards on other machines lost at --merge (only matrix.json
    merged), or two shards' different results for one release silently resolved by file order."""
    shards = []
    for k, release in ((1, "0.6.4"), (2, "0.7.0")):
        shard = tmp_path / f"matrix-shard-{k}-of-2.json"
        shard.write_text(json.dumps({"releases": {}}))
        liveness.file_entry(entry(release, default=run()), vm.liveness_file(shard))
        shards.append(shard)
    assert vm.main(["--merge", *map(str, shards)]) == 0
    assert list(liveness.read(liveness.REPORT)["releases"]) == ["0.6.4", "0.7.0"]
    liveness.file_entry(entry("0.6.4", default=run(preempted=5)), vm.liveness_file(shards[1]))
    with pytest.raises(SystemExit, match="different V0 liveness for vLLM 0.6.4"):
        vm.main(["--merge", *map(str, shards)])
