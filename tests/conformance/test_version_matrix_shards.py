"""scripts/version-matrix --shard / --merge and conformance/matrix.py: every release in exactly one
shard, merged shards equal to one sequential run, conflicting entries refused."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import itertools
import json
import random
import shutil
from pathlib import Path

import pytest

from conformance import matrix as cm

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "version-matrix"
RELEASES = ["0.6.3.post1", "0.6.4", "0.7.3", "0.9.2", "0.10.1.1", "0.10.2", "0.11.0", "0.20.2",
            "0.25.0", "0.33.0", "0.34.0"]


@pytest.fixture
def vm(tmp_path, monkeypatch):
    loader = importlib.machinery.SourceFileLoader("version_matrix_shards", str(SCRIPT))
    spec = importlib.util.spec_from_loader("version_matrix_shards", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    monkeypatch.setattr(module, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(module, "MATRIX", tmp_path / "matrix.json")
    return module


def canned(release: str, only: list[str] = ()) -> dict:
    """A run's entry as run_release returns it, a function of the release alone (a fake runner)."""
    names = list(only) or ["v1.lifecycle", "v0.lifecycle", "kernel.unified_attention"]
    status = {n: ("failed" if (sum(map(ord, release + n)) % 5 == 0) else "passed") for n in names}
    props = {n: {"status": s, "examples": 7, "steps": 3, "detail": f"{n} at {release}"} for n, s in status.items()}
    return {"release": release, "released": "2026-01-01", "date": "2026-12-02", "duration_s": 1.5,
            "project": {"commit": "a" * 40, "dirty": False, "changed": []},
            "installed": [f"vllm=={release}"], "properties": props, "summary": cm.summary(props)}


def fake_run(release: str, args) -> dict:
    return canned(release, args.only)


BASE = {"releases": {
    "0.9.2": {**canned("0.9.2"), "properties": {"v1.lifecycle": {"status": "failed"},
                                                  "v0.prefix_caching": {"status": "passed"}}},
    "0.5.0": {**canned("0.5.0"), "project": {"commit": "b" * 40}},
}}


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 11, 15])
def test_every_release_lands_in_exactly_one_shard_whatever_the_order(n):
    """Catches: an off-by-one shard index (one shard empty, one release run twice or never), or a
    plan that depends on the order releases were typed in (machines given the list in different
    orders would run overlapping shares)."""
    rng = random.Random(n)
    orders = [RELEASES, list(reversed(RELEASES)), rng.sample(RELEASES, len(RELEASES)), RELEASES + RELEASES[:3]]
    plans = [[cm.shard(order, k, n) for k in range(1, n + 1)] for order in orders]
    assert all(plan == plans[0] for plan in plans)
    shares = plans[0]
    assert sorted(itertools.chain(*shares), key=cm.release_key) == sorted(RELEASES, key=cm.release_key)
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


@pytest.mark.parametrize("bad", ["0/3", "4/3", "3", "1/0", "a/b", "-1/2"])
def test_bad_shard_is_refused(vm, bad):
    """Catches: --shard 0/3 or 4/3 silently running nothing (or everything)."""
    with pytest.raises(SystemExit):
        vm.main(["--shard", bad, *RELEASES], run=fake_run)
    assert not vm.MATRIX.exists()


def sequential_and_sharded(vm, tmp_path, n, extra=()):
    base = json.dumps(BASE)
    vm.MATRIX.write_text(base)
    vm.main([*RELEASES, *extra], run=fake_run)
    sequential = vm.MATRIX.read_text()
    vm.MATRIX.write_text(base)
    parts = []
    for k in range(1, n + 1):
        part = tmp_path / f"part-{k}.json"
        vm.main(["--shard", f"{k}/{n}", "--out", str(part), *reversed(RELEASES), *extra], run=fake_run)
        parts.append(part)
    assert vm.MATRIX.read_text() == base, "a shard wrote matrix.json instead of its own file"
    vm.main(["--merge", *map(str, parts)])
    return sequential, vm.MATRIX.read_text(), parts


@pytest.mark.parametrize("n", [1, 2, 3, 5, 11, 13])
def test_merged_shards_equal_one_sequential_run(vm, tmp_path, n):
    """Catches: merging that drops a shard's entries or the committed ones no shard ran (0.5.0),
    reorders releases, or files them differently from a sequential run of the same releases."""
    sequential, merged, parts = sequential_and_sharded(vm, tmp_path, n)
    assert merged == sequential
    assert list(json.loads(merged)["releases"]) == ["0.5.0", *sorted(RELEASES, key=cm.release_key)]
    shard_files = [json.loads(p.read_text()) for p in parts]
    assert sum(len(f["releases"]) for f in shard_files) == len(RELEASES)
    assert [f["shard"]["index"] for f in shard_files] == list(range(1, n + 1))


def test_merged_only_reruns_keep_the_committed_verdicts_like_a_sequential_run(vm, tmp_path):
    """Catches: a sharded --only rerun that files only the rerun properties (the shard's own file
    starts empty), wiping 0.9.2's other verdicts at merge where a sequential rerun keeps them."""
    sequential, merged, _ = sequential_and_sharded(vm, tmp_path, 3, extra=["--only", "v1.lifecycle"])
    assert merged == sequential
    kept = json.loads(merged)["releases"]["0.9.2"]["properties"]
    assert kept["v0.prefix_caching"] == {"status": "passed"} and kept["v1.lifecycle"]["examples"] == 7


def two_parts(tmp_path, first: dict, second: dict) -> list[Path]:
    paths = []
    for i, entry in enumerate((first, second)):
        path = tmp_path / f"p{i}.json"
        path.write_text(json.dumps({"releases": {entry["release"]: entry}}))
        paths.append(path)
    return paths


def test_conflicting_verdicts_are_refused_and_nothing_is_written(vm, tmp_path):
    """Catches: two shards (or a stale file) with different verdicts for one release, where the
    later file silently wins."""
    vm.MATRIX.write_text(json.dumps(BASE))
    before = vm.MATRIX.read_text()
    other = canned("0.20.2")
    other["properties"]["v1.lifecycle"] = {**other["properties"]["v1.lifecycle"], "status": "not_applicable"}
    parts = two_parts(tmp_path, canned("0.20.2"), other)
    with pytest.raises(SystemExit, match=r"0\.20\.2: different verdicts \(v1\.lifecycle (passed|failed) vs not_applicable\)"):
        vm.main(["--merge", *map(str, parts)])
    assert vm.MATRIX.read_text() == before


def test_runs_at_different_commits_conflict_even_with_the_same_verdicts(vm, tmp_path):
    """Catches: merging verdicts obtained at two project commits as if they were one measurement."""
    vm.MATRIX.write_text(json.dumps(BASE))
    before = vm.MATRIX.read_text()
    later = {**canned("0.20.2"), "project": {"commit": "c" * 40, "dirty": False}}
    with pytest.raises(SystemExit, match="project commit"):
        vm.main(["--merge", *map(str, two_parts(tmp_path, canned("0.20.2"), later))])
    assert vm.MATRIX.read_text() == before


def test_the_same_entry_twice_is_not_a_conflict(tmp_path):
    """Catches: a merge that refuses a file given twice (or two identical reruns) as a conflict."""
    parts = two_parts(tmp_path, canned("0.20.2"), {**canned("0.20.2"), "date": "2026-12-03", "duration_s": 9})
    merged = cm.merge(parts, tmp_path / "absent.json")
    assert list(merged["releases"]) == ["0.20.2"]
    assert merged["releases"]["0.20.2"]["date"] == "2026-12-02"  # the first file's


@pytest.mark.parametrize("bad", [{"nope": 1}, {"releases": {"0.20.2": canned("0.20.1")}}, "not json"])
def test_a_file_that_is_not_a_shard_file_is_refused(vm, tmp_path, bad):
    """Catches: merging a truncated or foreign file (a conformance report, say) into the matrix."""
    path = tmp_path / "bad.json"
    path.write_text(bad if isinstance(bad, str) else json.dumps(bad))
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"releases": {"0.20.2": canned("0.20.2")}}))
    with pytest.raises(SystemExit, match="bad.json"):
        vm.main(["--merge", str(good), str(path)])
    assert not vm.MATRIX.exists()


def test_project_state_names_the_commit_and_changes_to_the_harness(tmp_path):
    """Catches: an entry that records no commit, or calls a run clean while reference/ has
    uncommitted edits (or dirty because the matrix it writes changed)."""
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("git not installed")
    repo = tmp_path / "repo"
    for path in ("reference/a.py", "conformance/b.py", "conformance/reports/matrix.json", "docs/c.md",
                 "conformance/explorer/page.py", "conformance/matrix.py"):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("x\n")

    def git(*args):
        return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "one")
    state = cm.project_state(repo)
    assert state == {"commit": git("rev-parse", "HEAD"), "dirty": False, "changed": []}
    (repo / "conformance/reports/matrix.json").write_text("y\n")
    (repo / "docs/c.md").write_text("y\n")
    (repo / "conformance/explorer/page.py").write_text("y\n")
    (repo / "conformance/matrix.py").write_text("y\n")  # files entries only: no verdict depends on it
    assert cm.project_state(repo)["dirty"] is False
    (repo / "reference/a.py").write_text("y\n")
    assert cm.project_state(repo)["changed"] == ["reference/a.py"]
    assert cm.project_state(tmp_path / "not-a-repo")["commit"] is None


def test_merging_refuses_entries_with_different_reruns():
    """Catches: two shard files whose --only reruns of one release ran at different commits merged,
    one rerun silently dropped."""
    a = {"release": "0.9.2", "project": {"commit": "c"}, "properties": {"x": {"status": "passed"}},
         "reruns": [{"project": {"commit": "r1"}, "properties": ["x"]}]}
    b = {**a, "reruns": [{"project": {"commit": "r2"}, "properties": ["x"]}]}
    assert cm.conflict(a, a) is None
    assert "reruns" in cm.conflict(a, b)


def test_the_committed_matrix_names_the_current_harness_paths():
    """Catches: a matrix that stores older harness paths than the code's, so the site judges its
    verdicts' freshness against other files than the ones that decide them."""
    committed = json.loads((Path(__file__).resolve().parents[2] / "conformance/reports/matrix.json").read_text())
    assert committed["harness_paths"] == list(cm.HARNESS_PATHS)


def test_hotfix_releases_are_accepted(vm):
    """Catches: the release-name check refusing published hotfix releases such as 0.10.1.1 and
    0.9.0.1 (four numbers), so a user who pinned one could never get a verdict."""
    vm.main(["0.10.1.1", "0.9.0.1", "0.10.1"], run=fake_run)
    assert list(json.loads(vm.MATRIX.read_text())["releases"]) == ["0.9.0.1", "0.10.1", "0.10.1.1"]


def test_the_ci_workflow_runs_every_shard_and_merges_their_files(vm, tmp_path, monkeypatch):
    """Catches: the workflow's shard count changed in one place only (a share of the releases
    never runs), a shard uploading a file the merge does not pick up, a merge that starts before
    every shard finished, or a shard command the script does not accept."""
    import re
    import shlex

    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load((SCRIPT.parents[1] / ".github" / "workflows" / "release-matrix.yml").read_text())
    shards = workflow["jobs"]["shard"]["strategy"]["matrix"]["shard"]
    n = int(workflow["env"]["SHARDS"])
    assert shards == list(range(1, n + 1))
    steps = workflow["jobs"]["shard"]["steps"]
    run_step = next(s for s in steps if "scripts/version-matrix" in s.get("run", ""))
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    merge_job = workflow["jobs"]["merge"]
    assert merge_job["needs"] == "shard"
    download = next(s for s in merge_job["steps"] if s.get("uses", "").startswith("actions/download-artifact"))
    merge_run = next(s["run"] for s in merge_job["steps"] if "--merge" in s.get("run", ""))
    releases = RELEASES[:7]
    files = []
    for k in shards:
        def value(expr: str, k=k) -> str:
            return {"matrix.shard": str(k), "env.SHARDS": str(n)}[expr.strip()]

        command = re.sub(r"\$\{\{([^}]*)\}\}", lambda m: value(m[1]), run_step["run"])
        command = command.replace("$RELEASES", " ".join(releases)).replace('"$EXAMPLES"', "100")
        argv = shlex.split(command)
        assert argv[0] == "scripts/version-matrix"
        monkeypatch.chdir(tmp_path)
        vm.main(argv[1:], run=fake_run)
        uploaded = re.sub(r"\$\{\{([^}]*)\}\}", lambda m: value(m[1]), upload["with"]["path"])
        assert (tmp_path / uploaded).exists()
        assert re.fullmatch(download["with"]["pattern"].replace("*", ".*"),
                            re.sub(r"\$\{\{([^}]*)\}\}", lambda m: value(m[1]), upload["with"]["name"]))
        files.append(tmp_path / uploaded)
    assert "shards/matrix-shard-*.json" in merge_run and download["with"]["path"] == "shards"
    vm.main(["--merge", *map(str, files)])
    assert sorted(json.loads(vm.MATRIX.read_text())["releases"], key=cm.release_key) == sorted(
        releases, key=cm.release_key)


def test_an_unbuildable_release_is_filed_with_its_reason_but_never_over_verdicts(vm):
    """Catches: a release whose environment could not be built missing from the matrix (no reason
    anywhere), counted as measured (no driven_as: None), or a failed rebuild (the index changed)
    wiping the verdicts of an earlier measured run."""
    error = {"step": "pip install vllm==0.6.3.post1", "package": "vllm", "required": "vllm==0.6.3.post1"}
    vm.MATRIX.write_text(json.dumps(BASE))

    def unbuildable(release, args):
        return {**vm.unbuildable_entry(release, error), "released": None, "project": {"commit": "a" * 40}}

    vm.upload_date = lambda release: None
    vm.main(["0.6.3.post1", "0.9.2"], run=unbuildable)
    releases = json.loads(vm.MATRIX.read_text())["releases"]
    assert releases["0.6.3.post1"]["build_error"] == error and releases["0.6.3.post1"]["driven_as"] is None
    assert releases["0.6.3.post1"]["properties"] == {}
    assert releases["0.9.2"] == BASE["releases"]["0.9.2"]


def test_missing_lists_published_releases_without_a_measured_entry(vm, capsys, monkeypatch):
    """Catches: --missing skipping a published hotfix (0.10.1.1) or post release, listing a
    release that was measured, or treating an unbuildable entry, one driven as another release or
    one with a harness error (0.8.1 before its stand-in) as measured (those still need a run), or
    listing pre-releases and yanked releases."""
    files = [{"filename": n, "yanked": n.startswith("vllm-0.7.0-")} for n in (
        "vllm-0.6.2.tar.gz", "vllm-0.6.3.post1-cp38-abi3-manylinux1_x86_64.whl", "vllm-0.6.3.post1.tar.gz",
        "vllm-0.7.0-cp38-abi3-manylinux1_x86_64.whl", "vllm-0.8.1.tar.gz", "vllm-0.9.0.1-cp38-abi3-manylinux1_x86_64.whl",
        "vllm-0.9.2.tar.gz", "vllm-0.10.1.1-cp38-abi3-manylinux1_x86_64.whl", "vllm-0.11.0rc1.tar.gz",
        "vllm-0.20.2.tar.gz", "vllm-0.25.0.tar.gz", "vllm-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl")]
    monkeypatch.setattr(vm, "index_files", lambda: files)
    vm.MATRIX.write_text(json.dumps({"releases": {
        "0.9.2": canned("0.9.2"),
        "0.8.1": {**canned("0.8.1"), "properties": {"v1.lifecycle": {"status": "failed", "failure": "harness_error"}}},
        "0.20.2": {**canned("0.20.2"), "properties": {}, "build_error": {"step": "x"}},
        "0.25.0": {**canned("0.25.0"), "driven_as": "0.25.1"},
    }}))
    vm.main(["--missing"])
    assert capsys.readouterr().out.split() == ["0.6.3.post1", "0.8.1", "0.9.0.1", "0.10.1.1", "0.20.2", "0.25.0", "0.34.0"]
    vm.main(["--missing", "0.10.0"])
    assert capsys.readouterr().out.split() == ["0.10.1.1", "0.20.2", "0.25.0", "0.34.0"]


def test_a_merge_missing_a_shard_or_a_release_says_so(vm, tmp_path, capsys):
    """Catches: a merge given three of four shard files (or a shard whose run stopped half way)
    reporting success as if every release had been run."""
    parts = []
    for k in (1, 2, 4):
        part = tmp_path / f"part-{k}.json"
        vm.main(["--shard", f"{k}/4", "--out", str(part), *RELEASES], run=fake_run)
        parts.append(part)
    broken = json.loads(parts[0].read_text())
    dropped = broken["shard"]["releases"][-1]
    del broken["releases"][dropped]
    parts[0].write_text(json.dumps(broken))
    capsys.readouterr()
    vm.main(["--merge", *map(str, parts)])
    err = capsys.readouterr().err
    assert "no file for shard 3/4" in err and f"shard 1/4 has no entry for {dropped}" in err
    assert cm.coverage(parts[1:2]) == ["no file for shard 1/4, 3/4, 4/4"]
    whole = []
    for k in (1, 2):
        part = tmp_path / f"whole-{k}.json"
        vm.main(["--shard", f"{k}/2", "--out", str(part), *RELEASES], run=fake_run)
        whole.append(part)
    assert cm.coverage(whole) == []
