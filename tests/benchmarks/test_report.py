"""benchmarks.report: the one reader and writer of the committed benchmark reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.report import BlockManagerReport, CapacityReport, ReportError, ScalingReport

REPO = Path(__file__).resolve().parents[2]
RESULTS = sorted((REPO / "benchmarks" / "results").glob("*.json"))
CAPACITY = REPO / "docs" / "assets" / "capacity" / "capacity.json"


def kind_of(path: Path):
    return ScalingReport if path.name.startswith("scaling-") else BlockManagerReport


@pytest.mark.parametrize("path", RESULTS + [CAPACITY], ids=lambda p: p.name)
def test_every_committed_report_reads_and_writes_back_unchanged(path, tmp_path):
    """Catches: the reader dropping or renaming a field the committed files hold (or the writer
    writing another shape), so that rewriting a report loses figures or the page misreads it."""
    kind = CapacityReport if path == CAPACITY else kind_of(path)
    report = kind.read(path)
    assert report.to_json() == json.loads(path.read_text())
    out = tmp_path / path.name
    report.write(out)
    assert kind.read(out) == report and json.loads(out.read_text()) == json.loads(path.read_text())


def test_the_committed_results_are_all_there():
    """Catches: a results file renamed or removed without the page's list following it."""
    assert {p.name for p in RESULTS} >= {"block_manager-vllm-0.33.0.json", "block_manager_v0-vllm-0.10.2.json",
                                          "scaling-vllm-0.33.0.json", "scaling-vllm-0.10.2.json"}


@pytest.mark.parametrize("kind, edit, field", [
    (BlockManagerReport, lambda d: d["traces"][0].update(cpu_seconds={"reference": ["slow"]}),
     "trace '.*'.cpu_seconds.reference entry"),
    (BlockManagerReport, lambda d: d["traces"][0].update(op_calls={"free": 1.5}), r"op_calls\[free\]"),
    (BlockManagerReport, lambda d: d["traces"][1].update(num_calls=d["traces"][1].pop("num_ops")), "both"),
    (ScalingReport, lambda d: d["contexts"][0]["ops"]["free"].update(reference_us="x"), "free.reference_us"),
    (ScalingReport, lambda d: d.update(block_size=None), "'block_size'"),
    (ScalingReport, lambda d: d["contexts"][0].update(peak_bytes={"vllm": 1.5}), r"peak_bytes\[vllm\]"),
    (CapacityReport, lambda d: d["outcomes"][0].update(max_concurrency="27"), r"outcomes\[0\].max_concurrency"),
    (CapacityReport, lambda d: d.pop("kv_slots"), "'kv_slots'"),
])
def test_a_defect_is_named_with_its_file_and_field(tmp_path, kind, edit, field):
    """Catches: a malformed report read as if it were sound (a string taken for a figure), or a
    message that does not say which file and which field is wrong."""
    source = {BlockManagerReport: REPO / "benchmarks/results/block_manager-vllm-0.33.0.json",
              ScalingReport: REPO / "benchmarks/results/scaling-vllm-0.33.0.json", CapacityReport: CAPACITY}[kind]
    data = json.loads(source.read_text())
    edit(data)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ReportError, match=field) as err:
        kind.read(path)
    assert str(err.value).startswith("broken.json: not a ")


def test_a_file_of_another_kind_is_refused(tmp_path):
    """Catches: a scaling report read as a block-manager report (or the reverse) and rendered empty."""
    with pytest.raises(ReportError, match="lists no traces"):
        BlockManagerReport.read(REPO / "benchmarks/results/scaling-vllm-0.33.0.json")
    with pytest.raises(ReportError, match="lists no contexts"):
        ScalingReport.read(REPO / "benchmarks/results/block_manager-vllm-0.33.0.json")
