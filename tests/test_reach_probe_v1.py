"""The V1 notes' reachability statuses agree with what vLLM 0.33.0 ran in the committed probe report.

Bug this catches: a ``- reach:`` status of a V1 block-manager note that the running scheduler
contradicts. ``annotations.reach_probe_v1`` drove the real 0.33.0 scheduler, KV-cache manager,
coordinators, single-type managers and block pool on CPU, with default settings, for six kinds of
model, and committed the executed lines of the five V1 core files per kind
(``annotations/reach-probe-0.33.0.json``). A note whose every route needs a setting (or that is
marked ``unreached``) but whose lines ran with default settings shows students a badge that calls
default code optional. The test reads the committed JSON and the notes; it needs no vLLM. After
changing a note's range or status, or the probe, rerun the probe (FORMAT.md, "Reachability").
"""

from __future__ import annotations

from annotations.model import parse_text
from annotations.reach_probe_v1 import CONFIGS, REPORT, VERSION, compare, load_report, stale_files

#: Contradictions the notes explain, each mapping (upstream file, note id) to the exact lines that
#: ran; the test still fails if the run spreads to other lines or notes.
#: ``block_pool.emit_block_removed_events``: with events off the function returns at its first test
#: (L655-L656) on every eviction of a cached block; the note says so and gives the loop's status.
KNOWN: dict[tuple[str, str], tuple[int, ...]] = {
    ("vllm/v1/core/block_pool.py", "block_pool.emit_block_removed_events"): (655, 656),
}


def test_probe_report_is_of_the_annotated_bytes_and_every_kind_of_model():
    """Catches: a report made from other vLLM sources than the notes describe (line numbers would
    not match), or one that lacks a kind of model the probe is meant to run."""
    report = load_report()
    assert report["vllm_version"] == VERSION
    assert set(report["configs"]) == set(CONFIGS)
    assert not stale_files(report)
    assert all(config["run"]["unfinished"] == 0 for config in report["configs"].values())


def test_no_reach_status_contradicts_the_probe():
    """Catches: a note none of whose routes holds with default settings, whose lines ran with them."""
    found = [f for f in compare(load_report()) if f.kind == "contradiction"]
    new = [str(f) for f in found if KNOWN.get((f.file, f.note)) != f.lines]
    assert not new, f"reach statuses contradicted by {REPORT.name}:\n" + "\n".join(new)


def test_no_default_note_went_unrun():
    """Catches: a note marked `default` none of whose working lines ran for any kind of model."""
    assert not [str(f) for f in compare(load_report()) if f.kind == "suspect"]


_TOY = """---
upstream: vllm/v1/core/toy.py
version: 0.33.0
commit: 4ba787ec9
sha256: ?
coverage: 0
title: toy
reach: default
---

## `toy.live` L1-L3 · ????????????

Runs.

## `toy.events` L4-L6 · ????????????

Only with events.

- reach: setting `enable_kv_cache_events=True`: [x](https://github.com/vllm-project/vllm/blob/v0.33.0/x.py#L1 "0")

## `toy.hybrid` L7-L9 · ????????????

Only for some models.

- reach: models with Mamba layers: [x](https://github.com/vllm-project/vllm/blob/v0.33.0/x.py#L1 "0")

## `toy.doc` L10-L12 · ????????????

A signature and its docstring.
"""


def _toy_report(ran: list[int], branches: list[list[int]] = (), imported: list[int] = ()) -> dict:
    upstream = "vllm/v1/core/toy.py"
    return {
        "sha256": {upstream: "?"},
        "branches": {upstream: list(branches)},
        "def_headers": {upstream: [10]},
        "working": {upstream: list(range(1, 10))},
        "imported": {upstream: list(imported)},
        "configs": {"full_attention": {"executed": {upstream: ran}}},
    }


def test_compare_flags_a_setting_note_that_ran_and_a_default_note_that_did_not():
    """Catches: a comparison that misses a `setting` note whose lines ran with default settings,
    calls a `models` note that ran a contradiction, or misses a `default` note that never ran."""
    toy = [parse_text("toy.md", _TOY)]
    found = {(f.kind, f.note, f.lines) for f in compare(_toy_report([2, 5, 8]), toy)}
    assert found == {("contradiction", "toy.events", (5,))}
    found = {(f.kind, f.note) for f in compare(_toy_report([]), toy)}
    assert found == {("suspect", "toy.live"), ("unseen", "toy.hybrid")}


def test_a_declined_guard_and_import_time_lines_are_not_work():
    """Catches: an `if` line whose body did not run, or a statement run at import, being counted
    as the note's code running; and a note of only a signature being called unrun."""
    toy = [parse_text("toy.md", _TOY)]
    assert not compare(_toy_report([2, 4, 8], [[4, 5, 6]]), toy)
    assert not [f for f in compare(_toy_report([8], imported=[2]), toy) if f.note == "toy.live"]
