"""The V0 notes' reachability statuses agree with what vLLM 0.10.2 ran in the committed probe report.

Bug this catches: a ``- reach:`` status that the running engine contradicts. ``annotations.reach_probe``
drove the real 0.10.2 V0 scheduler and block manager on CPU and committed the executed lines of
``vllm/core/block_manager.py``, ``vllm/core/block/*.py`` and ``vllm/core/evictor.py`` per
configuration (``annotations/reach-probe-0.10.2.json``). A note marked ``unreached`` whose lines
ran, or marked ``setting X`` whose lines ran in a configuration without X (the default V0
configuration, say), shows students a badge that calls live code dead or optional. The test reads
the committed JSON and the notes; it needs no vLLM. After changing a note's range or status, or the
probe, rerun the probe (FORMAT.md, "Reachability").
"""

from __future__ import annotations

from annotations.model import parse_text
from annotations.reach_probe import REPORT, VERSION, compare, load_report, setting_atoms, stale_files

#: Contradictions already reported to the lead, pending a change of the note's range or status; each
#: entry maps (upstream file, note id) to the exact lines that ran, and still fails if it spreads to
#: other lines or notes. Empty: the two reported in reach-probe.md (block_manager.init.sliding_window_cap
#: L75/L78, block_manager.allocate.cross L193-L199) were fixed by moving those lines out of the notes.
KNOWN: dict[tuple[str, str], tuple[int, ...]] = {}


def test_probe_report_is_of_the_annotated_bytes():
    """Catches: a report made from other vLLM sources than the notes describe (line numbers would not match)."""
    report = load_report()
    assert report["vllm_version"] == VERSION
    assert report["configs"]["default"]["settings"] == ["`VLLM_USE_V1=0`"]
    assert not stale_files(report)


def test_no_reach_status_contradicts_the_probe():
    """Catches: an `unreached` note whose lines ran, or a `setting X` note whose lines ran without X."""
    found = [f for f in compare(load_report()) if f.kind == "contradiction"]
    new = [str(f) for f in found if KNOWN.get((f.file, f.note)) != f.lines]
    assert not new, f"reach statuses contradicted by {REPORT.name}:\n" + "\n".join(new)


_TOY = """---
upstream: vllm/core/toy.py
version: 0.10.2
commit: 26b999c71
sha256: ?
coverage: 0
title: toy
reach: setting `VLLM_USE_V1=0` (or a configuration V1 rejects)
---

## `toy.live` L1-L3 · ????????????

Runs.

## `toy.dead` L4-L6 · ????????????

Never runs.

- reach: unreached: nothing calls it

## `toy.window` L7-L9 · ????????????

The window branch.

- reach: setting `VLLM_USE_V1=0` and a sliding-window model
"""


def _toy_report(ran: list[int], guards: list[list[int]] = ()) -> dict:
    upstream = "vllm/core/toy.py"
    return {
        "sha256": {upstream: "?"},
        "guards": {upstream: list(guards)},
        "def_headers": {upstream: []},
        "imported": {},
        "configs": {"default": {"settings": ["`VLLM_USE_V1=0`"], "executed": {upstream: ran}}},
    }


def test_compare_flags_unreached_and_setting_notes_that_ran():
    """Catches: a comparison that misses an `unreached` or `setting` note whose lines ran, or calls a live note suspect."""
    toy = [parse_text("toy.md", _TOY)]
    found = {(f.kind, f.note, f.lines) for f in compare(_toy_report([2, 5, 8]), toy)}
    assert found == {("contradiction", "toy.dead", (5,)), ("contradiction", "toy.window", (8,))}
    assert {(f.kind, f.note) for f in compare(_toy_report([]), toy)} == {("suspect", "toy.live")}


def test_a_declined_branch_test_is_not_entering_the_branch():
    """Catches: an `if` line whose body did not run being counted as running the branch it guards."""
    toy = [parse_text("toy.md", _TOY)]
    assert not [f for f in compare(_toy_report([2, 7], [[7, 7, 8, 9]]), toy) if f.kind == "contradiction"]
    assert [f.note for f in compare(_toy_report([2, 7, 8], [[7, 7, 8, 9]]), toy)] == ["toy.window"]


def test_setting_conditions_drop_remarks_and_split_on_and():
    """Catches: a remark in parentheses, or an 'and' inside one, being read as a setting of its own."""
    assert setting_atoms("`VLLM_USE_V1=0` (or a configuration V1 rejects, see serving) and a sliding-window model") == [
        "`VLLM_USE_V1=0`", "a sliding-window model"]
    assert setting_atoms('`enable_prefix_caching=True` and `preemption_mode="swap"` (V1 rejects the latter, and so on)') == [
        "`enable_prefix_caching=True`", '`preemption_mode="swap"`']


def test_a_note_of_several_routes_is_contradicted_only_when_no_route_holds():
    """Catches: the probe reading only a note's first route, so a note reached by a second setting
    (or by some models by default) is reported as running without its setting, or a note none of
    whose routes the run had is let through."""
    two_settings = _TOY.replace("- reach: setting `VLLM_USE_V1=0` and a sliding-window model",
                                "- reach: setting `VLLM_USE_V1=0` and a sliding-window model\n"
                                "- reach: setting `VLLM_USE_V1=0` and `swap=1`")
    toy = [parse_text("toy.md", two_settings)]
    report = _toy_report([2, 8])
    assert [f.why for f in compare(report, toy)] == ["ran without a sliding-window model or `swap=1`"]
    report["configs"]["default"]["settings"].append("`swap=1`")
    assert not compare(report, toy)
    with_models = _TOY.replace("- reach: setting `VLLM_USE_V1=0` and a sliding-window model",
                               "- reach: setting `VLLM_USE_V1=0` and a sliding-window model\n"
                               "- reach: models with windows: [x](https://github.com/vllm-project/vllm/blob/v0.10.2/x.py#L1 \"0\")")
    assert not compare(_toy_report([2, 8]), [parse_text("toy.md", with_models)])


def test_a_models_route_naming_a_kind_the_probe_runs_is_homed_and_checked_there():
    """Catches: a note reached by default only for encoder-decoder models being called suspect
    because the plain V0 configuration did not run it, or let through when it runs in a
    configuration without encoder-decoder inputs."""
    cross = _TOY.replace("- reach: setting `VLLM_USE_V1=0` and a sliding-window model",
                         "- reach: models with a V0-only encoder-decoder architecture (BART): [x](https://github.com/vllm-project/vllm/blob/v0.10.2/x.py#L1 \"0\")\n"
                         "- reach: setting `VLLM_USE_V1=0` and an encoder-decoder model that V1 also serves")
    toy = [parse_text("toy.md", cross)]
    report = _toy_report([2])
    report["configs"]["encoder_decoder"] = {"settings": ["`VLLM_USE_V1=0`", "an encoder-decoder model"],
                                            "executed": {"vllm/core/toy.py": [2, 8]}}
    assert not compare(report, toy)
    report["configs"]["default"]["executed"]["vllm/core/toy.py"] = [2, 8]
    assert [(f.kind, f.config, f.note) for f in compare(report, toy)] == [("contradiction", "default", "toy.window")]
