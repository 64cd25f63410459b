"""The "vLLM release by release" page: the matrix table, per-release details, the change log."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from docs.hooks.matrix_page import (
    GROUPS,
    MatrixError,
    change_anchor,
    change_log,
    freshness,
    matrix_markdown,
    read_matrix,
)

ROOT = Path(__file__).resolve().parents[2]


def entry(version: str, statuses: dict, policy: str | None = "v0.33.0", **extra) -> dict:
    return {"release": version, "released": "2026-01-02", "date": "2026-12-01", "policy": policy,
            "device": "cpu", "duration_s": 3, "summary": {"passed": 1}, "installed": [f"vllm=={version}"],
            "properties": {n: {"status": s, "detail": f"detail {n} {version}"} for n, s in statuses.items()},
            **extra}


def write(tmp_path: Path, releases: dict) -> Path:
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps({"releases": releases}))
    return path


def rows(md: str) -> list[str]:
    return [line for line in md.splitlines() if line.startswith("| [0.")]


def marks(cell: str) -> list[str]:
    """The titles of the marks in a table cell, in order."""
    return re.findall(r"<title>([^<]*)</title>", cell)


ALL = {"v1.lifecycle": "passed", "v1.sliding_window": "failed", "v0.lifecycle": "not_applicable",
       "v0.prefix_caching": "not_applicable", "traces.corpus": "passed", "kernel.unified_attention": "passed",
       "kernel.cuda.reshape_and_cache": "not_applicable", "kernel.cuda.paged_attention_v1": "not_applicable",
       "kernel.cpu.copy_blocks": "not_applicable"}


def test_releases_in_order_with_groups_most_informative_first(tmp_path: Path) -> None:
    """Catches: releases sorted as strings (0.9 after 0.33), the CUDA kernels (never run on a CPU)
    before the block managers, the CPU build's kernels counted as Triton kernels, or a release's
    marks in another order than the legend says."""
    path = write(tmp_path, {"0.33.0": entry("0.33.0", ALL),
                            "0.9.2": entry("0.9.2", {"v1.lifecycle": "not_applicable"}, policy=None)})
    releases = read_matrix(path)
    assert list(releases) == ["0.9.2", "0.33.0"]
    md = matrix_markdown(releases, [])
    header = next(line for line in md.splitlines() if line.startswith("| Release"))
    assert header == "| Release | V1 | V0 | Corpus | Triton | CUDA | CPU | Run | Changed here |"
    old, new = rows(md)
    cells = [c.strip() for c in new.split(" | ")]
    assert marks(cells[1]) == ["v1.lifecycle: passed", "v1.sliding_window: failed"]
    assert marks(cells[3]) == ["traces.corpus: passed"] and marks(cells[4]) == ["kernel.unified_attention: passed"]
    assert old.startswith("| [0.9.2](#release-0-9-2)")
    assert "Within a cell, in order: V1 manager: `v1.lifecycle`, `v1.sliding_window`; V0 manager:" in md


def test_a_group_a_release_lacks_is_one_mark(tmp_path: Path) -> None:
    """Catches: a release without a V0 manager (or without CUDA) spelled out as a row of
    identical not-applicable marks, which at 50 releases buries the verdicts; or the not-applicable
    details repeated once per property."""
    md = matrix_markdown(read_matrix(write(tmp_path, {"0.33.0": entry("0.33.0", ALL)})), [])
    cells = [c.strip() for c in rows(md)[0].split(" | ")]
    assert marks(cells[2]) == ["not applicable: v0.lifecycle, v0.prefix_caching"]
    assert marks(cells[5]) == ["not applicable: kernel.cuda.paged_attention_v1, kernel.cuda.reshape_and_cache"]
    lacking = [line for line in md.splitlines() if "not applicable |" in line and line.startswith("| `")]
    assert len(lacking) == 5  # each property's detail differs here; shared details are one row
    same = {n: {"status": "not_applicable", "detail": "no V0 here"} for n in ("v0.lifecycle", "v0.prefix_caching")}
    md = matrix_markdown({"0.33.0": {**entry("0.33.0", {"v1.lifecycle": "passed"}), "properties": {
        "v1.lifecycle": {"status": "passed"}, **same}}}, [])
    assert "| `v0.lifecycle`, `v0.prefix_caching` | " in md and md.count("no V0 here") == 1


def test_marks_render_without_an_emoji_font() -> None:
    """Catches: verdicts shown as emoji (the browser test's Chromium draws ✅ ➖ ❌ as empty
    boxes), or a mark whose icon is not defined on the page (an invisible verdict)."""
    md = matrix_markdown({"0.33.0": entry("0.33.0", ALL, failure=None)}, change_log())
    assert not re.search("[\u2600-\u27bf\U0001f300-\U0001faff]", md)
    used = set(re.findall(r'<use href="#(rm-[\w-]+)"', md))
    defined = set(re.findall(r'<symbol id="(rm-[\w-]+)"', md))
    assert used and used <= defined
    assert all(re.search(rf'<symbol id="{u}" viewBox="0 0 24 24"><path d="M[^"]+"/></symbol>', md) for u in used)


def test_a_harness_error_is_not_drawn_as_a_divergence() -> None:
    """Catches: a harness error (the property could not run) drawn with the same mark as a
    divergence between vLLM and the reference."""
    e = entry("0.25.0", {"v1.lifecycle": "failed", "v1.sliding_window": "failed"})
    e["properties"]["v1.lifecycle"]["failure"] = "harness_error"
    cell = [c.strip() for c in rows(matrix_markdown({"0.25.0": e}, []))[0].split(" | ")][1]
    assert cell.count("#rm-alert-circle") == 1 and cell.count("#rm-close-circle") == 1


class Record:
    pass


@dataclasses.dataclass(frozen=True)
class Change:
    field: str
    first: str
    value_from: object = True
    what: str = "w"
    why: str = "y"
    upstream: str = "u"
    notes: tuple = ()


def test_each_row_links_the_changes_first_seen_there(tmp_path: Path) -> None:
    """Catches: a change filed under no release because its first release was not run (0.11.1,
    between the rows 0.10.2 and 0.11.2), under a release before it, or a link to a change the
    change log does not anchor."""
    releases = {v: entry(v, {"v1.lifecycle": "passed"}) for v in ("0.10.2", "0.11.2", "0.33.0")}
    changes = [(Record, Change("lora_extra_key", "0.11.1")), (Record, Change("watermark", "0.33.0")),
               (Record, Change("later", "0.40.0")), (Record, Change("early", "0.6.5"))]
    md = matrix_markdown(releases, changes)
    by_release = {row.split("]")[0][3:]: row.rsplit(" | ", 1)[1] for row in rows(md)}
    assert by_release["0.10.2"] == '<small><a href="#change-record-early-0-6-5">early</a> (0.6.5)</small> |'
    assert by_release["0.11.2"] == ('<small><a href="#change-record-lora-extra-key-0-11-1">lora_extra_key</a> '
                                    '(0.11.1)</small> |')
    assert by_release["0.33.0"] == '<small><a href="#change-record-watermark-0-33-0">watermark</a></small> |'
    for _, change in changes:
        assert f'<span id="{change_anchor(Record, change)}"></span>{change.first} |' in md


def test_an_unbuildable_release_says_why_in_its_row_and_details() -> None:
    """Catches: a release whose environment could not be built shown as an empty row (or not at
    all), without the package, the version asked for and what the index offered."""
    error = {"step": "pip install vllm==0.6.3.post1", "package": "vllm", "required": "vllm==0.6.3.post1",
             "by": None, "index_offers": ["0.6.3", "0.6.4"], "offers_seen": "this platform", "pip": "ERROR: x"}
    bad = {"release": "0.6.3.post1", "date": "2026-12-02", "build_error": error, "properties": {},
           "summary": {"passed": 0, "failed": 0, "not_applicable": 0}}
    md = matrix_markdown({"0.6.3.post1": bad, "0.33.0": entry("0.33.0", ALL)}, [])
    assert "#rm-package-variant-remove" in rows(md)[0] and "[not built](#release-0-6-3-post1)" in rows(md)[0]
    assert ("**Could not be built** at step `pip install vllm==0.6.3.post1`: the index has no "
            "`vllm==0.6.3.post1`; it offers 0.6.3, 0.6.4 (this platform)") in md


def test_left_out_and_removed_packages_are_shown_with_why() -> None:
    """Catches: verdicts of an environment that lacked a pinned package (or had torchcodec
    removed) shown as if the environment were complete."""
    e = entry("0.34.0", {"v1.lifecycle": "passed"}, environment={
        "left_out": [{"package": "flashinfer-python", "required": "flashinfer-python==0.7.3", "by": "vllm",
                      "index_nearest": ["0.7.2.post1", "0.7.4"], "offers_seen": "this platform",
                      "why_not_needed": "only GPU backends import it"}],
        "removed": [{"package": "torchcodec", "version": "0.14.0", "missing_libraries": ["libavutil.so.60"],
                     "why": "needs FFmpeg"}]})
    md = matrix_markdown({"0.34.0": e}, [])
    assert ("Left out `flashinfer-python==0.7.3` (required by vllm; the index offers 0.7.2.post1, 0.7.4 "
            "around it, this platform): only GPU backends import it") in md
    assert "Removed `torchcodec==0.14.0` (missing `libavutil.so.60`): needs FFmpeg" in md
    given = matrix_markdown({"0.33.0": entry("0.33.0", {"v1.lifecycle": "passed"},
                                             environment={"given": "/envs/x", "left_out": [], "removed": []})}, [])
    assert "environment given with `--env`" in given


@pytest.fixture
def history(tmp_path: Path):
    """A git repository: a harness commit, a docs commit, a matrix commit; returns (repo, git)."""
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    for path in ("conformance/x.py", "docs/a.md", "conformance/reports/matrix.json"):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(path)
        git("add", path)
        git("commit", "-qm", path)
    return repo, git


PATHS = ["reference", "conformance", ":(exclude)conformance/reports"]


def test_verdicts_older_than_the_last_harness_change_are_marked(history) -> None:
    """Catches: a verdict obtained before the harness changed shown as current, a later commit that
    touched only docs or the matrix itself making every verdict stale, or a guess where the run
    recorded no commit."""
    repo, git = history
    harness, docs, matrix_commit = git("rev-list", "--reverse", "HEAD").split()
    releases = {v: entry(v, {"a.b": "passed"}, project={"commit": c, "dirty": False})
                for v, c in (("0.1.0", harness), ("0.2.0", docs), ("0.3.0", matrix_commit))}
    releases["0.4.0"] = entry("0.4.0", {"a.b": "passed"})
    releases["0.5.0"] = entry("0.5.0", {"a.b": "passed"}, project={"commit": "f" * 40})
    releases["0.6.0"] = entry("0.6.0", {"a.b": "passed"},
                              project={"commit": docs, "dirty": True, "changed": ["conformance/x.py"]})
    got = {v: s for v, (s, _) in freshness(releases, repo, PATHS).items()}
    assert got == {"0.1.0": "current", "0.2.0": "current", "0.3.0": "current", "0.4.0": "unknown",
                   "0.5.0": "unknown", "0.6.0": "stale"}
    (repo / "conformance" / "x.py").write_text("changed")
    git("commit", "-qam", "harness change")
    got = freshness(releases, repo, PATHS)
    assert got["0.3.0"][0] == "stale" and "last at" in got["0.3.0"][1]


def test_a_row_is_as_fresh_as_its_least_fresh_rerun(history) -> None:
    """Catches: an --only rerun's verdicts, measured at their own commit, never checked (a rerun
    with uncommitted harness changes, or from an older checkout, shown as current)."""
    repo, git = history
    head = git("rev-parse", "HEAD").strip()
    rerun = {"project": {"commit": head, "dirty": True, "changed": ["conformance/x.py"]}, "properties": ["a.b"]}
    releases = {"0.1.0": entry("0.1.0", {"a.b": "passed"}, project={"commit": head, "dirty": False}, reruns=[rerun])}
    state, why = freshness(releases, repo, PATHS)["0.1.0"]
    assert state == "stale" and why.startswith("the rerun of a.b:")
    releases["0.1.0"]["reruns"] = [{**rerun, "project": {"commit": head, "dirty": False}}]
    assert freshness(releases, repo, PATHS)["0.1.0"][0] == "current"
    # a rerun recorded dirty only for files the paths exclude is clean
    releases["0.1.0"]["reruns"] = [{**rerun, "project": {"commit": head, "dirty": True,
                                                         "changed": ["conformance/reports/matrix.json"]}}]
    assert freshness(releases, repo, PATHS)["0.1.0"][0] == "current"
    # a rerun made before the last harness change is stale, however fresh the full run
    first = git("rev-list", "--reverse", "HEAD").split()[0]
    (repo / "conformance" / "x.py").write_text("changed again")
    git("commit", "-qam", "harness change")
    new_head = git("rev-parse", "HEAD").strip()
    releases["0.1.0"]["project"] = {"commit": new_head, "dirty": False}
    releases["0.1.0"]["reruns"] = [{**rerun, "project": {"commit": first, "dirty": False}}]
    assert freshness(releases, repo, PATHS)["0.1.0"][0] == "stale"


def test_without_git_freshness_is_unknown_not_guessed(tmp_path: Path, monkeypatch) -> None:
    """Catches: a site built where git is missing (or outside a checkout) claiming verdicts are current."""
    releases = {"0.1.0": entry("0.1.0", {"a.b": "passed"}, project={"commit": "a" * 40, "dirty": False})}
    assert freshness(releases, tmp_path, PATHS)["0.1.0"][0] == "unknown"
    monkeypatch.setenv("PATH", str(tmp_path))
    assert freshness(releases, ROOT, PATHS)["0.1.0"][0] == "unknown"
    assert freshness(releases, ROOT, None)["0.1.0"] == (
        "unknown", "the matrix does not name the paths its verdicts depend on")


def test_missing_matrix_says_how_to_make_one(tmp_path: Path) -> None:
    """Catches: a site build that fails (or shows an empty table silently) before any matrix run."""
    assert read_matrix(tmp_path / "absent.json") == {}
    assert "scripts/version-matrix" in matrix_markdown({}, [])


@pytest.mark.parametrize("bad", [
    {"nope": {}},
    {"releases": {"0.20.2": entry("0.20.1", {"a": "passed"})}},
    {"releases": {"0.20.2": entry("0.20.2", {"a": "sort of"})}},
    {"releases": {"0.20.2": entry("0.20.2", {})}},
])
def test_malformed_matrix_is_refused_naming_the_defect(tmp_path: Path, bad: dict) -> None:
    """Catches: a hand-edited or truncated matrix rendered as if it were a run (an entry with
    neither verdicts nor the reason it has none, among them)."""
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(MatrixError, match="matrix.json"):
        read_matrix(path)


def test_every_logged_change_names_a_real_field_and_is_on_the_page() -> None:
    """Catches: a change-log entry for a field its record does not have, one the page leaves out,
    or a note link to an annotation note that does not exist."""
    changes = change_log()
    assert changes
    md = matrix_markdown({}, changes)
    for record, change in changes:
        assert change.field in {f.name for f in dataclasses.fields(record)}
        assert f"</span>{change.first} | `{record.__name__}.{change.field}`" in md
        for note in change.notes:
            version, _, rest = note.partition("/")
            path, _, note_id = rest.partition("#")
            annotation = ROOT / "annotations" / version / f"{path}.md"
            assert f"## `{note_id}` " in annotation.read_text(), note


def test_committed_matrix_renders() -> None:
    """Catches: a committed matrix.json that the page cannot read (the site build would fail)."""
    releases = read_matrix(ROOT / "conformance" / "reports" / "matrix.json")
    md = matrix_markdown(releases, change_log())
    assert len(rows(md)) == len(releases)
    assert {t for t, _, _ in GROUPS} >= {"V1 manager", "Triton kernels"}


def test_v0_liveness_table_renders_every_release_and_configuration() -> None:
    """Catches: the releases page's V0 liveness table drifting from the committed per-release
    report (a number typed by hand, a release or a configuration left out, a configuration that
    did not run shown with figures, a build error shown as a measured row)."""
    from annotations.liveness import COLUMNS, read
    from docs.hooks.matrix_page import LIVENESS, liveness_markdown

    releases = read(ROOT / LIVENESS)["releases"]
    md = liveness_markdown(releases)
    lines = md.splitlines()
    for version, entry in releases.items():
        assert f"- {version}: `{entry['command']}`" in md
        if entry.get("build_error"):
            assert any(line.startswith(f"| {version} | not built |") for line in lines)
            continue
        for name, config in entry["configs"].items():
            row = next(line for line in lines[lines.index(next(x for x in lines if f"**{version}**" in x)):]
                       if line.split("|")[2].strip() == name)
            if "not_run" in config:
                assert "not run: " in row and not any(ch.isdigit() for ch in "".join(row.split("|")[3:-2]))
            else:
                assert [c.strip() for c in row.split("|")[3:3 + len(COLUMNS)]] == [
                    str(config["run"][k]) for k, _ in COLUMNS]


def test_every_measured_liveness_change_is_explained_on_the_page() -> None:
    """Catches: a release at which a V0 mechanism starts or stops being reached (measured by the
    probe) that the page's prose never names, so the table shows a change nobody explains in words
    or cites upstream for."""
    from annotations.liveness import changes, read
    from docs.hooks.matrix_page import LIVENESS

    text = (ROOT / "docs" / "releases.md").read_text()
    section = text[text.index("## V0 liveness"):text.index("V0-LIVENESS")]
    for change in changes(read(ROOT / LIVENESS)["releases"]):
        assert f"**{change.at}**" in section, f"the liveness prose does not explain {change}"


def test_liveness_changes_are_listed_oldest_release_first() -> None:
    """Catches: the list of measured changes ordered by configuration instead of by release
    (0.7.0's change shown before 0.6.5's), which reads as a history that goes backwards."""
    from docs.hooks.matrix_page import liveness_markdown

    run = {"steps": 5, "preempted": 1, "parallel_sample_requests": 0, "largest_group_added": 1,
           "largest_group_seen": 1, "forked_sequences": 0, "blocks_copied": 0, "blocks_swapped_out": 0,
           "unfinished_after": 0}
    failed = {**run, "error": "AssertionError"}

    def entry(release: str, a: dict, b: dict) -> dict:  # "a" breaks at 0.7.0, "b" only at 0.6.5
        return {"release": release, "command": "probe",
                "configs": {"a": {"settings": [], "run": a}, "b": {"settings": [], "run": b}}}

    md = liveness_markdown({"0.6.4": entry("0.6.4", run, run), "0.6.5": entry("0.6.5", run, failed),
                            "0.7.0": entry("0.7.0", failed, run)})
    listed = [line for line in md.splitlines() if line.startswith("- **")]
    assert [line.split("**")[1] for line in listed] == ["0.6.5", "0.7.0"]


def test_a_release_lists_the_differences_that_are_not_fields():
    """Catches: 0.34.0's out-of-scope differences (the per-request hit limit, evict_first frees, ...)
    recorded in the change log but never shown beside its verdicts, so a reader of the releases
    page takes "nothing changed at 0.34.0" for the whole story."""
    from docs.hooks.matrix_page import release_details

    entry = {"release": "0.34.0", "summary": {}, "properties": {}}
    text = "\n".join(release_details("0.34.0", entry, ("unknown", "no commit recorded"), []))
    assert "Not a field (out of scope)" in text and "prefix_cache_hit_limit" in text
    assert "Not a field (representation)" in text


def test_a_docstring_or_comment_edit_does_not_age_verdicts_but_code_does(history) -> None:
    """Catches: a docstring or comment fix in the reference or the harness marking every verdict
    stale (no verdict can change with it), and the converse, a real code change (a changed statement,
    a changed non-docstring string, a new non-Python file) hidden by the docstring rule."""
    repo, git = history
    source = repo / "conformance" / "y.py"
    source.write_text('"""A module."""\n\n\ndef f(x):\n    """Doubles."""\n    return 2 * x  # twice\n')
    git("add", "conformance/y.py")
    git("commit", "-qm", "code")
    ran_at = git("rev-parse", "HEAD")
    releases = {"0.1.0": entry("0.1.0", {"a.b": "passed"}, project={"commit": ran_at, "dirty": False})}
    assert freshness(releases, repo, PATHS)["0.1.0"][0] == "current"

    source.write_text('"""A module, reworded."""\n\n\ndef f(x):\n    """Twice x.\n\n    More."""\n'
                      '    # a new comment\n    return 2 * x  # still twice\n')
    git("commit", "-qam", "prose only")
    state, why = freshness(releases, repo, PATHS)["0.1.0"]
    assert state == "current" and ran_at[:10] in why

    for new_source in ('"""A module."""\n\n\ndef f(x):\n    """Doubles."""\n    return 3 * x\n',
                       '"""A module."""\n\n\ndef f(x):\n    """Doubles."""\n    return "x" * x\n'):
        source.write_text(new_source)
        git("commit", "-qam", "code change")
        assert freshness(releases, repo, PATHS)["0.1.0"][0] == "stale"
        git("reset", "-q", "--hard", "HEAD~1")
    assert freshness(releases, repo, PATHS)["0.1.0"][0] == "current"

    (repo / "conformance" / "data.json").write_text("{}")
    git("add", "conformance/data.json")
    git("commit", "-qm", "data")
    assert freshness(releases, repo, PATHS)["0.1.0"][0] == "stale"


def test_code_of_drops_only_docstrings() -> None:
    """Catches: a normalisation that also drops a string statement that is not a docstring, or keeps
    line positions (so moving code by a docstring's length would count as a change)."""
    from docs.hooks.code_changes import code_of

    assert code_of('"""doc"""\nx = 1\n') == code_of("\n\n\nx = 1  # c\n")
    assert code_of('def f():\n    """doc"""\n    return 1\n') == code_of("def f():\n    return 1\n")
    assert code_of('x = 1\n"""not a docstring"""\n') != code_of("x = 1\n")
    assert code_of("def f(:\n") is None


def test_a_release_shows_the_reruns_of_some_of_its_properties() -> None:
    """Catches: verdicts rerun at a later commit (an --only run) shown without saying which ones
    and at which commit, while the entry's freshness speaks for its other verdicts."""
    from docs.hooks.matrix_page import release_details

    rerun = entry("0.9.2", {"v0.lifecycle": "passed", "v0.prefix_caching": "passed"},
                  reruns=[{"date": "2026-12-05", "project": {"commit": "abcdef1234567"}, "properties": ["v0.lifecycle"]}])
    text = "\n".join(release_details("0.9.2", rerun, ("stale", "run at 0123456789"), []))
    assert "Rerun on 2026-12-05 at abcdef1234: `v0.lifecycle`" in text
    assert "Rerun" not in "\n".join(release_details("0.9.2", entry("0.9.2", {"a": "passed"}), ("stale", "x"), []))
