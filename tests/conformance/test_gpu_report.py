"""The GPU lane's report on the site: read and checked (``conformance/gpu/report.py``), rendered
on the Conformance and Performance pages through their hooks, and "never run" without a report.
"""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from conformance.gpu import evaluate, plan, report, run


def sweep_result():
    rows = [evaluate.point_row(plan.Point("float16", 32, 8192, None))]
    rows[0].update(floor_us=100.0, agreement={"ok": True, "compared": {}}, kernels={
        name: {"us": 125.0, "pct_bandwidth": 80.0} for name in plan.KERNELS})
    rows[0]["ref_best_over_cuda_v2"] = evaluate.ratio_to_cuda_v2(rows[0])
    targets = evaluate.evaluate_targets(rows)
    return {"points": rows, "targets": targets, "table": evaluate.format_table(rows),
            "summary": evaluate.format_summary(targets), "copy_bandwidth_GBps": 4100.0}


def lane_report(tmp_path, conformance_fails=False, bench=True) -> Path:
    steps = {
        "load_ops": lambda args: {"ops": "OPS", "source": "launcher built from csrc",
                                  "build": {"key": "k", "folder": "f", "cached": True,
                                            "compile_seconds": 0.0}},
        "conformance": lambda ops, args: [
            {"check": "paged_attention_v1", "dtype": "torch.float16", "head_size": 128,
             "block_size": 16, "ok": True, "max_abs_err_vs_oracle": 0.00049,
             "max_abs_diff_vs_reference": 0.00024},
            {"check": "reshape_and_cache_flash", "dtype": "torch.bfloat16", "head_size": 64,
             "block_size": 32, "ok": not conformance_fails, "bit_exact": not conformance_fails,
             **({"error": "AssertionError: key_cache differs"} if conformance_fails else {})}],
        "triton_unified": lambda args: [{"check": "unified_attention", "ok": True,
                                         "skipped": "vLLM not importable"}],
        "benchmark": lambda ops, args: sweep_result(),
    }
    out = tmp_path / report.REPORT
    argv = ["--out", str(out)] + ([] if bench else ["--skip-bench"])
    run.main(argv, steps=steps, has_gpu=lambda: True)
    return out


def test_without_a_report_both_pages_say_never_run(tmp_path):
    """Catches: a site that shows GPU results (or an empty table that reads as "nothing
    failed") when the lane has never run, or that breaks without a report."""
    assert report.load(tmp_path) is None
    for text in (report.conformance_markdown(None), report.performance_markdown(None)):
        assert '!!! note "Never run"' in text and "bash conformance/gpu/run.sh" in text
        assert "|" not in text


def test_report_renders_checks_and_the_sweep(tmp_path):
    """Catches: a page that drops a failed check, hides the run's verdict or device, or shows a
    sweep table other than the one the run printed."""
    path = lane_report(tmp_path, conformance_fails=True)
    loaded = report.load(tmp_path)
    assert loaded == json.loads(path.read_text())
    page = report.conformance_markdown(loaded)
    assert page.startswith("### vLLM's CUDA kernels on a GPU")
    assert "**FAILED**." in page and loaded["summary"] in page
    assert "| `paged_attention_v1` | torch.float16 | 128 | 16 | **passed** | 0.00049 | 0.00024 |" \
        in page
    assert "**FAILED**: AssertionError: key_cache differs" in page
    assert "skipped: vLLM not importable" in page
    assert "launcher built from csrc" in page
    perf = report.performance_markdown(loaded)
    assert sweep_result()["table"] in perf and "4100 GB/s" in perf
    assert "Target (b)" in perf


def test_skipped_benchmark_is_said_not_shown(tmp_path):
    """Catches: a performance section that renders an old or empty table when the latest run
    skipped the benchmark."""
    lane_report(tmp_path, bench=False)
    perf = report.performance_markdown(report.load(tmp_path))
    assert "Not measured in the latest run" in perf and "--skip-bench" in perf
    assert "|" not in perf.split("*")[0]


@pytest.mark.parametrize("content, needle", [
    ("{", "not readable JSON"),
    ('{"report": "other"}', "not a GPU lane report"),
    ('{"report": "gpu-lane", "started": "x", "summary": "s", "passed": "yes", "steps": {}}',
     "'passed' is 'yes'"),
    ('{"report": "gpu-lane", "started": "x", "summary": "s", "passed": true, '
     '"steps": {"benchmark": {"ok": true, "result": {"table": 1}}}}', "lacks its table"),
    ('{"report": "gpu-lane", "started": "x", "summary": "s", "passed": true, '
     '"steps": {"bogus": {"ok": true}}}', "unknown step 'bogus'"),
])
def test_malformed_reports_are_refused_by_name(tmp_path, content, needle):
    """Catches: a hand-edited or truncated report rendered as if it were a run's results."""
    path = tmp_path / report.REPORT
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(report.ReportError, match="gpu-lane.json") as err:
        report.load(tmp_path)
    assert needle in str(err.value)


def page(src_uri):
    return SimpleNamespace(file=SimpleNamespace(src_uri=src_uri))


def test_site_hooks_render_the_report_or_never_run(tmp_path):
    """Catches: hooks that do not show the GPU lane at all, put it under the property anchors,
    or break the build without a report."""
    pytest.importorskip("mkdocs")
    from docs.hooks import conformance_page, performance_page

    config = SimpleNamespace(config_file_path=str(tmp_path / "mkdocs.yml"))
    conf = conformance_page.on_page_markdown("CONFORMANCE-STATUS", page("conformance.md"),
                                             config, None)
    assert conf.index("Never run") < conf.index("## Properties")
    perf = performance_page.on_page_markdown("PERFORMANCE-RESULTS", page("performance.md"),
                                             config, None)
    assert "GPU kernel benchmark" in perf and "Never run" in perf
    lane_report(tmp_path)
    conf = conformance_page.on_page_markdown("CONFORMANCE-STATUS", page("conformance.md"),
                                             config, None)
    assert conf.index("`paged_attention_v1`") < conf.index("## Properties")
    assert "Never run" not in conf
    perf = performance_page.on_page_markdown("PERFORMANCE-RESULTS", page("performance.md"),
                                             config, None)
    assert sweep_result()["table"] in perf
    (tmp_path / report.REPORT).write_text("{")
    with pytest.raises(Exception, match="not readable JSON"):
        conformance_page.on_page_markdown("CONFORMANCE-STATUS", page("conformance.md"), config,
                                          None)
    perf = performance_page.on_page_markdown("PERFORMANCE-RESULTS", page("performance.md"),
                                             config, None)
    assert "GPU lane report unreadable" in perf

