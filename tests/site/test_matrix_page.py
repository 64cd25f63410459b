"""The "vLLM release by release" page: the matrix table, per-release details, the change log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from docs.hooks.matrix_page import MatrixError, matrix_markdown, read_matrix
from reference.blocks.policies import V0_FIELD_HISTORY, V1_FIELD_HISTORY, V0Policy, V1Policy


def entry(version: str, statuses: dict, policy: str | None = "v0.33.0") -> dict:
    return {"release": version, "released": "2026-01-02", "date": "2026-12-01", "policy": policy,
            "device": "cpu", "duration_s": 3, "summary": {"passed": 1}, "installed": [f"vllm=={version}"],
            "properties": {n: {"status": s, "detail": f"detail {n} {version}"} for n, s in statuses.items()}}


def write(tmp_path: Path, releases: dict) -> Path:
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps({"releases": releases}))
    return path


def test_releases_down_properties_across_in_release_order(tmp_path: Path) -> None:
    """Catches: releases sorted as strings (0.9 after 0.33) or a property column missing for a release."""
    path = write(tmp_path, {
        "0.33.0": entry("0.33.0", {"v1.lifecycle": "passed", "kernel.x": "failed"}),
        "0.9.2": entry("0.9.2", {"v1.lifecycle": "not_applicable"}, policy=None),
    })
    releases = read_matrix(path)
    assert list(releases) == ["0.9.2", "0.33.0"]
    md = matrix_markdown(releases, [])
    header = next(line for line in md.splitlines() if line.startswith("| Release"))
    assert header.index("`kernel.x`") < header.index("`v1.lifecycle`")
    rows = [line for line in md.splitlines() if line.startswith("| [0.")]
    assert rows[0].startswith("| [0.9.2]") and rows[0].endswith("|   | ➖ |")
    assert rows[1].startswith("| [0.33.0]") and rows[1].endswith("| ❌ | ✅ |")
    assert "detail kernel.x 0.33.0" in md and "detail v1.lifecycle 0.33.0" not in md  # passes have no detail


def test_missing_matrix_says_how_to_make_one(tmp_path: Path) -> None:
    """Catches: a site build that fails (or shows an empty table silently) before any matrix run."""
    assert read_matrix(tmp_path / "absent.json") == {}
    assert "scripts/version-matrix" in matrix_markdown({}, [])


@pytest.mark.parametrize("bad", [
    {"nope": {}},
    {"releases": {"0.20.2": entry("0.20.1", {"a": "passed"})}},
    {"releases": {"0.20.2": entry("0.20.2", {"a": "sort of"})}},
])
def test_malformed_matrix_is_refused_naming_the_defect(tmp_path: Path, bad: dict) -> None:
    """Catches: a hand-edited or truncated matrix rendered as if it were a run."""
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(MatrixError, match="matrix.json"):
        read_matrix(path)


def test_every_change_names_a_real_field_and_release_with_upstream_lines() -> None:
    """Catches: a change log entry (V1 or V0) for a field that does not exist, or one without its
    citation, or one the page leaves out."""
    md = matrix_markdown({}, list(V1_FIELD_HISTORY), list(V0_FIELD_HISTORY))
    for kind, cls, history in (("V1Policy", V1Policy, V1_FIELD_HISTORY), ("V0Policy", V0Policy, V0_FIELD_HISTORY)):
        fields = {f for f in cls.__dataclass_fields__} - {"name"}
        for change in history:
            assert change.field in fields
            assert change.upstream.startswith("v" + change.first)
            assert f"| {change.first} | `{kind}.{change.field}`" in md
            for note in change.notes:
                version, _, rest = note.partition("/")
                path, _, note_id = rest.partition("#")
                annotation = Path(__file__).resolve().parents[2] / "annotations" / version / f"{path}.md"
                assert f"## `{note_id}` " in annotation.read_text(), note


def test_committed_matrix_renders() -> None:
    """Catches: a committed matrix.json that the page cannot read (the site build would fail)."""
    path = Path(__file__).resolve().parents[2] / "conformance" / "reports" / "matrix.json"
    releases = read_matrix(path)
    assert matrix_markdown(releases, list(V1_FIELD_HISTORY))


def test_v0_liveness_table_renders_the_committed_probe() -> None:
    """Catches: the releases page's V0 liveness table drifting from the probe's committed JSON
    (a number typed by hand, or a configuration left out)."""
    from docs.hooks.matrix_page import PROBE, liveness_markdown

    probe = json.loads((Path(__file__).resolve().parents[2] / PROBE).read_text())
    md = liveness_markdown(probe)
    for name, config in probe["configs"].items():
        run = config["run"]
        assert f"| {name} | " in md
        assert f"| {run['steps']} | {run['preempted']} | " in md
    assert all(c["run"]["blocks_copied"] == 0 and c["run"]["largest_group_added"] == 1
               for c in probe["configs"].values()), "the page's prose says nothing is forked or copied"
    assert all((c["run"]["blocks_swapped_out"] > 0) == any("swap" in s for s in c["settings"])
               for c in probe["configs"].values()), "the page's prose says only the swap setting swaps"
