"""The "Bugs found in vLLM" pages (docs/hooks/bugs_page.py), on the committed folder and on planted ones."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from annotations.citations import PLAIN, Resolver
from annotations.model import range_hash, upstream_lines
from docs.hooks import bugs_page

REAL = Path(__file__).resolve().parents[2] / bugs_page.BUGS


def _folder(tmp_path: Path) -> Path:
    """A copy of the committed folder to plant things in."""
    folder = tmp_path / "bugs"
    shutil.copytree(REAL, folder)
    return folder


def test_every_trace_of_the_folder_gets_a_page_and_about_files_are_not_traces() -> None:
    """Catches: a trace of the folder without a page, or the about/ JSON files taken for traces."""
    names = sorted(p.name for p in REAL.glob("*.json"))
    bugs = bugs_page.load(REAL)
    assert [b.name for b in bugs] == names and len(names) >= 5
    assert all(b.readme for b in bugs), "every committed trace has a README paragraph"
    table = bugs_page.index_table(bugs)
    for bug in bugs:
        assert f"]({bug.stem}.md)" in table


def test_a_later_trace_gets_a_page_saying_what_is_not_recorded(tmp_path: Path) -> None:
    """Catches: a new trace in the folder breaking the build or getting a page that claims facts it lacks."""
    folder = _folder(tmp_path)
    trace = json.loads((REAL / "v0-fork-recursion.json").read_text())
    trace["ops"] = trace["ops"][:1]
    trace.pop("versions", None)
    (folder / "zz-new-trace.json").write_text(json.dumps(trace))
    bug = next(b for b in bugs_page.load(folder) if b.name == "zz-new-trace.json")
    text, missing = bugs_page.page_markdown(bug, ["0.10.2"])
    assert missing == []
    assert "has no paragraph on this trace yet" in text
    assert "Not measured yet" in text and text.count("Not recorded yet") == 2
    assert "python -m conformance replay conformance/known-upstream-bugs/zz-new-trace.json" in text


def test_releases_are_the_measured_ones_and_unmeasured_ones_are_said(tmp_path: Path) -> None:
    """Catches: a release claimed without a replay, or the release a trace was found at passed off as measured."""
    bugs = {b.name: b for b in bugs_page.load(REAL)}
    replays = json.loads((REAL / "about" / "replays.json").read_text())["traces"]
    for name, bug in bugs.items():
        assert set(bug.replays) == set(replays.get(name, {}))
        assert bug.reproduces_in() == sorted(r for r, e in replays.get(name, {}).items() if e["verdict"] == "reproduces")
    lookup = bugs["v0.9.2-sliding-window-lookup-past-hashes.json"]
    text = bugs_page.releases_markdown(lookup, bugs_page.measured_releases(list(bugs.values())))
    assert "0.9.2" not in lookup.replays
    assert "recorded for vLLM 0.9.2 (its `versions`), where it was found; that release was **not measured**" in text
    for release, entry in lookup.replays.items():
        assert re.search(rf"^\| {re.escape(release)} \| \*\*{entry['verdict']}\*\*", text, re.M)


def test_committed_replays_record_their_commands_and_verdicts() -> None:
    """Catches: a hand-edited replays.json entry without the command, output or a known verdict."""
    replays = json.loads((REAL / "about" / "replays.json").read_text())["traces"]
    for name, by_release in replays.items():
        assert (REAL / name).is_file(), name
        for release, entry in by_release.items():
            assert entry["command"].startswith("python -m conformance replay "), (name, release)
            assert entry["verdict"] in bugs_page.VERDICTS and entry["output"], (name, release)
            if entry["verdict"] == "reproduces":
                assert entry["exit"] == 1 and entry["output"].startswith("DIVERGED")


def test_lines_at_fault_are_stamped_plain_citations() -> None:
    """Catches: a line at fault written in a form the build does not check, or left unstamped."""
    facts = json.loads((REAL / "about" / "bugs.json").read_text())["traces"]
    for name, entry in facts.items():
        assert entry["at_fault"], name
        for item in entry["at_fault"]:
            match = PLAIN.fullmatch(item["cite"])
            assert match and re.fullmatch(r"[0-9a-f]{12}", match["hash"]), item["cite"]
            assert item["why"].strip()


def test_a_drifted_or_dead_line_at_fault_is_reported() -> None:
    """Catches: the build accepting a citation whose hash no longer matches its lines, or past the file's end."""
    data = b"a = 1\nb = 2\nc = 3\n"
    resolver = Resolver(lambda version, path: data)
    good = range_hash(upstream_lines(data), 2, 3)
    assert bugs_page.citation_problems(f"v9.9.9/x.py#L2-L3@{good}", resolver) == []
    (drift,) = bugs_page.citation_problems("v9.9.9/x.py#L2-L3@0123456789ab", resolver)
    assert "hash drift" in drift
    (dead,) = bugs_page.citation_problems(f"v9.9.9/x.py#L2-L9@{good}", resolver)
    assert "dead" in dead


def test_citations_become_links_and_missing_notes_are_named() -> None:
    """Catches: plain citations left as text on the page, or a note link to no note passing silently."""
    text = "see v0.10.2/vllm/core/scheduler.py#L578-L604@498dbbef96b9 and [n](v0.10.2/vllm/x.py#nope)"
    linked = bugs_page.linked(text)
    assert ('[`scheduler.py` L578-L604 @ v0.10.2](https://github.com/vllm-project/vllm/blob/v0.10.2/vllm/core/'
            'scheduler.py#L578-L604 "498dbbef96b9")') in linked
    out, missing = bugs_page.note_links(linked, "bugs/x.md", lambda version, path, note_id: False)
    assert missing == ["v0.10.2/vllm/x.py#nope"]
    out, missing = bugs_page.note_links(linked, "bugs/x.md", lambda version, path, note_id: True)
    assert missing == [] and "](../sources/v0.10.2/vllm/x.py.md#nope)" in out


def test_readme_paragraphs_keep_their_continuation_lines() -> None:
    """Catches: a README bullet cut at its first line, or the next paragraph glued onto it."""
    text = "intro\n\n- `a.json`: first line\n  second line.\n- `b.json`: other\n\nAfter the list.\n"
    assert bugs_page.readme_paragraphs(text) == {"a.json": "first line second line.", "b.json": "other"}


@pytest.mark.parametrize("name", sorted(p.name for p in REAL.glob("*.json")))
def test_each_trace_replays_into_the_explorer_with_its_divergence(name: str) -> None:
    """Catches: a bug trace the reference cannot replay (the build would stop), or its divergence not shown."""
    bug = next(b for b in bugs_page.load(REAL) if b.name == name)
    fragment = bugs_page.explorer_fragment(bug)
    data = json.loads(re.search(r'<script type="application/json" class="tx-data">(.*?)</script>', fragment, re.S)[1]
                      .replace("<\\/", "</"))
    assert len(data["steps"]) == len(bug.trace["ops"]) + 1
    if bug.trace.get("divergence"):
        assert data["divergence"]["message"] == bug.trace["divergence"]
