"""The conformance status page: report selection, anchors for every property, clear failures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from docs.hooks.conformance_page import ReportError, latest_reports, property_results, read_report, status_markdown

REGISTERED = {"v1.lifecycle": "Block ids match.", "v0.fork": "Forks share pages.", "kernel.decode": "Outputs agree."}


def write_report(folder: Path, name: str, version: str | None, device: str, started: str, statuses: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    report = {
        "vllm_version": version, "device": device, "started": started, "duration_s": 1.5,
        "properties": [{"name": n, "checks": REGISTERED.get(n, ""), "status": s, "examples": 3, "steps": 4,
                        "duration_s": 0.1, "detail": f"detail of {n}"} for n, s in statuses.items()],
    }
    path = folder / name
    path.write_text(json.dumps(report))
    return path


def test_every_registered_property_gets_an_anchor_without_reports(tmp_path: Path) -> None:
    """Catches: notes' prop: links breaking until a conformance report exists."""
    md = status_markdown(latest_reports(tmp_path / "none"), REGISTERED)
    assert "No report yet" in md
    assert sorted(re.findall(r'<div class="conf-prop" id="([^"]+)"', md)) == sorted(REGISTERED)


def test_only_the_newest_report_per_version_and_device_is_shown(tmp_path: Path) -> None:
    """Catches: an old failing run shadowing a newer passing one (or both shown as current)."""
    write_report(tmp_path, "a.json", "0.33.0", "cpu", "2026-01-01T00:00:00+00:00", {"v1.lifecycle": "failed"})
    write_report(tmp_path, "b.json", "0.33.0", "cpu", "2026-02-01T00:00:00+00:00", {"v1.lifecycle": "passed"})
    write_report(tmp_path, "c.json", "0.10.2", "cpu", "2026-01-15T00:00:00+00:00", {"v0.fork": "not_applicable"})
    reports = latest_reports(tmp_path)
    assert [(r.vllm_version, r.source) for r in reports] == [("0.33.0", "b.json"), ("0.10.2", "c.json")]
    md = status_markdown(reports, REGISTERED)
    assert "failed" not in md.split("## Properties")[0].replace("0 failed", "")
    assert "detail of v0.fork" in md


def test_properties_only_in_reports_are_still_anchored(tmp_path: Path) -> None:
    """Catches: a report row linking to an anchor the page does not render."""
    write_report(tmp_path, "a.json", "0.33.0", "cpu", "2026-01-01T00:00:00+00:00", {"old.name": "passed"})
    md = status_markdown(latest_reports(tmp_path), REGISTERED)
    anchors = set(re.findall(r'<div class="conf-prop" id="([^"]+)"', md))
    links = set(re.findall(r"\]\(#([^)]+)\)", md))
    assert links <= anchors and "old.name" in anchors
    assert "No longer registered" in md


@pytest.mark.parametrize("content, problem", [
    ("{not json", "not readable JSON"),
    (json.dumps({"device": "cpu", "started": "x"}), "not a conformance report"),
    (json.dumps({"device": "cpu", "started": "x", "properties": [{"name": "a", "status": "maybe"}]}), "unknown status"),
])
def test_malformed_reports_fail_naming_the_file(tmp_path: Path, content: str, problem: str) -> None:
    """Catches: a broken report rendered as an empty or misleading status page."""
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ReportError, match=problem) as err:
        read_report(path)
    assert "bad.json" in str(err.value)


def test_pipes_in_details_do_not_break_the_table(tmp_path: Path) -> None:
    """Catches: a '|' in a failure detail splitting a Markdown table row."""
    path = write_report(tmp_path, "a.json", "0.33.0", "cpu", "2026-01-01T00:00:00+00:00", {"v1.lifecycle": "failed"})
    data = json.loads(path.read_text())
    data["properties"][0]["detail"] = "ids [1|2] vs [2|1]"
    path.write_text(json.dumps(data))
    md = status_markdown(latest_reports(tmp_path), REGISTERED)
    row = next(line for line in md.splitlines() if "ids [1" in line)
    assert row.count(" | ") == 2 and "\\|" in row


def test_a_run_driven_as_another_release_says_so_on_the_page(tmp_path: Path) -> None:
    """Catches: a dev build's verdicts shown as if that version had been measured, without the
    "driven as" sentence the command printed."""
    path = write_report(tmp_path, "d.json", "0.33.1.dev12", "cpu", "2026-03-01T00:00:00+00:00", {"v1.lifecycle": "passed"})
    raw = json.loads(path.read_text())
    raw.update(exact_release=False, driven_as="0.33.0",
               target_note="0.33.1.dev12 is not in the measured matrix: driven as 0.33.0")
    path.write_text(json.dumps(raw))
    md = status_markdown(latest_reports(tmp_path), REGISTERED)
    assert "vLLM 0.33.1.dev12 (0.33.1.dev12 is not in the measured matrix: driven as 0.33.0)" in md
    raw.update(exact_release=True, driven_as="0.33.1.dev12", target_note=None)
    path.write_text(json.dumps(raw))
    assert "driven as" not in status_markdown(latest_reports(tmp_path), REGISTERED)


def test_verdict_marks_are_svg_not_emoji(tmp_path: Path) -> None:
    """Catches: verdicts drawn as emoji, which the browser test's Debian Chromium (no emoji font)
    shows as empty boxes."""
    write_report(tmp_path, "e.json", "0.33.0", "cpu", "2026-03-01T00:00:00+00:00",
                 {"v1.lifecycle": "passed", "v0.fork": "failed", "kernel.decode": "not_applicable"})
    md = status_markdown(latest_reports(tmp_path), REGISTERED)
    assert not any(ch in md for ch in "\u2705\u274c\u2796") and md.count('<svg class="rm"') >= 3


def test_a_notes_property_link_says_what_its_release_report_found(tmp_path: Path) -> None:
    """Catches: a note's `prop` link that reads as "checked" where the release's report never ran
    the property (the CUDA kernels' properties without a GPU), or shows another release's result
    or an old run's."""
    write_report(tmp_path, "old.json", "0.10.2", "cpu", "2026-01-01T00:00:00+00:00", {"v0.fork": "failed"})
    write_report(tmp_path, "new.json", "0.10.2", "cpu", "2026-02-01T00:00:00+00:00",
                 {"v0.fork": "passed", "kernel.decode": "not_applicable"})
    write_report(tmp_path, "v1.json", "0.33.0", "cpu", "2026-03-01T00:00:00+00:00", {"v0.fork": "failed"})
    results = property_results(tmp_path, "0.10.2")
    assert results == {"v0.fork": "passed against vLLM 0.10.2 (3 examples, cpu)",
                       "kernel.decode": "not run against vLLM 0.10.2: detail of kernel.decode"}
    assert property_results(tmp_path, "0.9.9") == {}
    # a newer run on another device is the newest; a lane's report (the CPU build's) never is
    write_report(tmp_path, "gpu.json", "0.10.2", "cuda", "2026-03-01T00:00:00+00:00", {"v0.fork": "failed"})
    lane = write_report(tmp_path, "lane.json", "0.10.2", "cpu", "2026-04-01T00:00:00+00:00", {"v0.fork": "passed"})
    raw = json.loads(lane.read_text())
    for entry in raw["properties"]:
        entry["lane"] = "cpu-build"
    lane.write_text(json.dumps(raw))
    assert property_results(tmp_path, "0.10.2") == {"v0.fork": "FAILED against vLLM 0.10.2"}


def test_a_result_from_before_the_last_harness_change_says_so(tmp_path: Path, monkeypatch) -> None:
    """Catches: a link that shows a verdict measured before the machines or the reference last
    changed as if it spoke for them now (the stale case of the release matrix)."""
    from docs.hooks import matrix_page

    write_report(tmp_path, "r.json", "0.10.2", "cpu", "2026-02-01T00:00:00+00:00", {"v0.fork": "passed"})
    for state, tail in (("current", ""), ("stale", "; stale: the reason"), ("unknown", "; unknown: the reason")):
        monkeypatch.setattr(matrix_page, "freshness", lambda releases, root, paths, state=state: {
            v: (state, "the reason") for v in releases})
        assert property_results(tmp_path, "0.10.2", tmp_path) == {
            "v0.fork": "passed against vLLM 0.10.2 (3 examples, cpu)" + tail}
