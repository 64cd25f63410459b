"""The notes' `- prop:` links name properties that run the notes' lines, as the committed probe
reports of both pinned releases recorded.

Bug this catches: a `- prop:` link whose property never runs the note's lines, so a student reads
"checked by this property" of code no property ever reached (three Triton kernel notes linked to a
V1 manager property that never loads the kernel). ``annotations.prop_probe`` ran each linked
property of each pinned release under a line tracer and committed the executed lines
(``annotations/prop-probe-<release>.json``); these tests read those reports and the notes, and need
no vLLM. A property that runs some of a note's lines but skips the branch the note is about passes
(the window's page drop, whose surrounding lines every windowed append runs, was found by reading).
After changing a link, a note's range, a machine or the probe's sizes, rerun the probe (FORMAT.md,
"Links").
"""

from __future__ import annotations

import pytest

from annotations.model import parse_text
from annotations.prop_probe import (
    EXAMPLES,
    EXPLAINED,
    RELEASES,
    STEPS,
    compare,
    linked_properties,
    load_report,
    stale_files,
    traced_files,
    unexplained,
)


@pytest.mark.parametrize("release", RELEASES)
def test_report_is_of_the_annotated_bytes_and_runs_every_linked_property(release):
    """Catches: a report made from other vLLM sources than the notes describe (line numbers would
    not match), one that misses a file or a property the notes now link, one made at other sizes
    than the probe's, or a property run that failed or did not apply (its lines then say nothing
    about the link)."""
    report = load_report(release)
    assert report["vllm_version"] == release
    assert not stale_files(report, release)
    assert sorted(report["sha256"]) == traced_files(release)
    assert sorted(report["runs"]) == linked_properties(release)
    assert all(run["status"] == "passed" for run in report["runs"].values()), report["runs"]
    assert (report["examples"], report["steps"]) == (EXAMPLES, STEPS)  # the probe's sizes now


@pytest.mark.parametrize("release", RELEASES)
def test_every_link_names_a_property_that_ran_the_notes_lines(release):
    """Catches: a `- prop:` link whose property ran none of the note's runtime lines."""
    found = unexplained(compare(load_report(release), release))
    assert not found, "links whose property never ran the note's lines:\n" + "\n".join(map(str, found))


def test_every_explained_finding_is_still_found():
    """Catches: an explanation kept after the link or the probe changed, which would hide the next
    finding on that note."""
    found = {(f.file, f.note, f.prop) for release in RELEASES for f in compare(load_report(release), release)}
    assert set(EXPLAINED) <= found


_TOY = """---
upstream: vllm/v1/core/toy.py
version: 9.9.9
commit: 4ba787ec9
sha256: ?
coverage: 0
title: toy
reach: default
---

## `toy.run` L1-L3 · ????????????

Runs under the first property.

- prop: demo.first

## `toy.guarded` L4-L6 · ????????????

An `if` whose body only the second property enters.

- prop: demo.first
- prop: demo.second

## `toy.constants` L7-L9 · ????????????

Statements that run at import.

- prop: demo.first
"""


def _toy_report(first: list[int], second: list[int]) -> dict:
    upstream = "vllm/v1/core/toy.py"
    return {
        "sha256": {upstream: "?"},
        "guards": {upstream: [[4, 4, 5, 6]]},
        "def_headers": {upstream: []},
        "working": {upstream: list(range(1, 10))},
        "imported": {upstream: [7, 8, 9]},
        "runs": {"demo.first": {"status": "passed", "executed": {upstream: first}},
                    "demo.second": {"status": "passed", "executed": {upstream: second}}},
    }


def test_compare_flags_a_link_whose_property_only_declined_the_notes_branch():
    """Catches: a comparison that counts an `if` header whose body did not run, or a nested
    function's `def` line, as the note's code running, misses a property that ran nothing of the
    note, calls import-time statements unrun, or reports a link the report has no run of as fine."""
    toy = [parse_text("toy.md", _TOY)]
    found = {(f.kind, f.note, f.prop) for f in compare(_toy_report([1, 2, 4], [4, 5]), "9.9.9", toy)}
    assert found == {("not-run", "toy.guarded", "demo.first")}
    found = {(f.kind, f.note, f.prop) for f in compare(_toy_report([], [5]), "9.9.9", toy)}
    assert found == {("not-run", "toy.run", "demo.first"), ("not-run", "toy.guarded", "demo.first")}
    report = _toy_report([2, 4, 5], [4, 5])
    report["def_headers"]["vllm/v1/core/toy.py"] = [2]  # a nested function's def line runs, its body does not
    assert ("not-run", "toy.run", "demo.first") in {(f.kind, f.note, f.prop) for f in compare(report, "9.9.9", toy)}
    report = _toy_report([1], [5])
    del report["runs"]["demo.second"]
    assert {(f.kind, f.prop) for f in compare(report, "9.9.9", toy)} >= {("not-probed", "demo.second")}
