"""The GPU-lane script, tested without a GPU: argument parsing, refusal, report writing with the
GPU steps mocked, and a preprocessing pass of the CUDA launcher against vLLM's and torch's headers.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conformance.gpu import build, csrc, evaluate, plan, run

REPO = Path(__file__).resolve().parents[2]


def csrc_dir() -> Path:
    """vLLM v0.10.2's csrc/: $PASTUDY_VLLM_CSRC, else unpacked (once, into the project's cache)
    from the pinned, sha256-verified sdist that ``upstream.fetch`` fetches and caches."""
    from upstream.fetch import UpstreamError

    try:
        return csrc.pinned_csrc()
    except (UpstreamError, OSError) as err:
        pytest.skip(f"the pinned vLLM 0.10.2 sdist cannot be fetched here: {err}")


def test_parse_args_defaults():
    """Catches: a default that writes the report somewhere the site does not read, runs the full
    sweep (over the device budget), or accepts a meaningless budget."""
    args = run.parse_args([])
    assert args.mode == "auto" and args.out == Path("conformance/gpu/reports/gpu-lane.json")
    assert not args.skip_bench and not args.bench_full and args.seeds == 1
    assert args.budget_s == 480 and args.csrc is None
    for bad in (["--budget-s", "0"], ["--seeds", "0"], ["--mode", "cpu"]):
        with pytest.raises(SystemExit) as exc:
            run.parse_args(bad)
        assert exc.value.code == 2


def test_refuses_clearly_without_gpu(tmp_path, capsys):
    """Catches: a script that, without a GPU, crashes deep inside torch or reports success."""
    out = tmp_path / "report.json"
    status = run.main(["--out", str(out)], has_gpu=lambda: False)
    assert status == run.NO_GPU
    assert "no CUDA GPU" in capsys.readouterr().err
    assert not out.exists()


def fake_steps(fail_conformance=False):
    def conformance(ops, args):
        if fail_conformance:
            raise AssertionError("paged_attention_v2 differs")
        return [{"check": "paged_attention_v1", "ops": ops, "ok": True}]
    return {"load_ops": lambda args: {"ops": "OPS", "source": "fake ops", "build": None},
            "conformance": conformance,
            "triton_unified": lambda args: [{"check": "unified_attention", "skipped": "x"}],
            "benchmark": lambda ops, args: fake_sweep_result()}


def fake_sweep_result():
    """A sweep result as ``measure.sweep`` returns it, for two points (one skipped)."""
    rows = [evaluate.point_row(plan.Point("float16", 32, 8192, None)),
            evaluate.point_row(plan.Point("float16", 256, 32768, None), "skipped: test")]
    rows[0].update(floor_us=100.0, agreement={"ok": True, "compared": {}}, kernels={
        name: {"us": 110.0, "pct_bandwidth": 90.9} for name in plan.KERNELS})
    rows[0]["ref_best_over_cuda_v2"] = evaluate.ratio_to_cuda_v2(rows[0])
    targets = evaluate.evaluate_targets(rows)
    return {"points": rows, "targets": targets, "table": evaluate.format_table(rows),
            "summary": evaluate.format_summary(targets), "device": "fake"}


def test_report_written_with_mocked_gpu_steps(tmp_path):
    """Catches: a report missing steps, losing the ops' origin, or exit status 0 on failure."""
    out = tmp_path / "sub" / "report.json"
    assert run.main(["--out", str(out)], steps=fake_steps(), has_gpu=lambda: True) == 0
    report = json.loads(out.read_text())
    assert report["passed"] is True
    assert set(report["steps"]) == {"load_ops", "conformance", "triton_unified", "benchmark"}
    assert report["steps"]["load_ops"]["result"] == {"source": "fake ops", "build": None}
    assert report["steps"]["conformance"]["result"][0]["ops"] == "OPS"

    assert run.main(["--out", str(out), "--skip-bench"], steps=fake_steps(True),
                    has_gpu=lambda: True) == 1
    report = json.loads(out.read_text())
    assert report["passed"] is False and report["steps"]["benchmark"] == {
        "ok": True, "skipped": "--skip-bench"}
    assert "paged_attention_v2 differs" in report["steps"]["conformance"]["error"]


def test_summary_line_says_what_each_step_did(tmp_path, capsys):
    """Catches: a summary line that hides a failed check, a skipped step or where the ops came
    from, or that differs from the report's own summary."""
    out = tmp_path / "report.json"
    steps = fake_steps()
    steps["conformance"] = lambda ops, args: [
        {"check": "paged_attention_v1", "ok": True},
        {"check": "paged_attention_v2", "ok": False, "error": "AssertionError: differs"}]
    steps["load_ops"] = lambda args: {"ops": "OPS", "source": "launcher", "build": {
        "key": "k", "folder": "f", "cached": False, "compile_seconds": 84.4}}
    assert run.main(["--out", str(out)], steps=steps, has_gpu=lambda: True) == 1
    line = capsys.readouterr().out.strip().splitlines()[-1]
    report = json.loads(out.read_text())
    assert line == f"{report['summary']}; report {out}"
    assert line.startswith("GPU lane FAILED on ")
    assert "launcher compiled in 84 s" in line and "CUDA conformance 1/2 passed" in line
    assert "Triton unified skipped (x)" in line
    assert "sweep 1 of 2 points run, 0 disagreements, target (a) 1/1, target (b) 1/1" in line
    assert report["steps"]["conformance"]["ok"] is False


def test_benchmark_skipped_when_its_estimate_exceeds_the_budget_left(tmp_path):
    """Catches: a run that starts the sweep although it cannot finish within the device time
    (the machine would be taken away mid-run and no report written), or that skips it silently."""
    now = [0.0]
    steps = fake_steps()
    checks = steps["conformance"]
    steps["conformance"] = lambda ops, args: (now.__setitem__(0, 475.0), checks(ops, args))[1]
    args = run.parse_args(["--out", str(tmp_path / "r.json")])
    report = run.collect(args, steps, clock=lambda: now[0])
    bench_step = report["steps"]["benchmark"]
    assert bench_step["ok"] and bench_step["skipped"].startswith("not started: its estimate")
    assert "exceeds the 5 s left of --budget-s 480" in bench_step["skipped"]
    assert "benchmark skipped (not started" in report["summary"]
    now[0] = 0.0
    report = run.collect(args, fake_steps(), clock=lambda: now[0])
    assert "result" in report["steps"]["benchmark"]


def test_check_csrc_names_what_is_missing(tmp_path):
    """Catches: starting a long build from a directory that is not vLLM's csrc/."""
    with pytest.raises(ValueError, match="cache_kernels.cu"):
        csrc.check_csrc(tmp_path)


def test_run_sh_forwards_arguments():
    """Catches: a wrapper script that is not executable or does not reach the Python entry point."""
    script = REPO / "conformance" / "gpu" / "run.sh"
    assert os.access(script, os.X_OK)
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHON": sys.executable})
    assert done.returncode == 0 and "--csrc" in done.stdout


# CUDA-library headers torch's CUDA headers include but that a bare nvcc toolkit may lack; for a
# preprocessing pass empty stand-ins are enough (no declaration from them is used by our code).
ABSENT_OK = ["cusparse.h", "cublas_v2.h", "cublasLt.h", "cusolverDn.h", "cusolver_common.h",
             "c10/cuda/impl/cuda_cmake_macros.h"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_launcher_preprocesses_against_vllm_and_torch_headers(tmp_path):
    """Catches: a launcher that includes the wrong vLLM paths or names kernels/macros that do not
    exist in the pinned v0.10.2 sources: nvcc -E must resolve every include."""
    source = csrc_dir()
    import torch
    from torch.utils.cpp_extension import include_paths
    stubs = tmp_path / "stubs"
    for name in ABSENT_OK:
        (stubs / name).parent.mkdir(parents=True, exist_ok=True)
        (stubs / name).touch()
    std = build.cxx_standard(torch.__version__)
    cmd = ["nvcc", "-E", "-x", "cu", f"-std={std}", "-DTORCH_EXTENSION_NAME=pastudy_kernels",
           f"-I{source}", *[f"-I{p}" for p in include_paths()],
           f"-I{sysconfig.get_paths()['include']}", f"-I{stubs}",
           str(build.LAUNCHER), "-o", str(tmp_path / "launcher.ii")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    text = (tmp_path / "launcher.ii").read_text(errors="replace")
    assert "paged_attention_v2_reduce_kernel" in text and "reshape_and_cache_flash" in text


def test_cuda_conformance_records_every_check_and_goes_on_after_a_failure(monkeypatch):
    """Catches: one mismatching kernel ending the conformance step (the checks after it would
    never run, and the report would show one error instead of which configurations fail), or a
    sweep that leaves out a dtype, head size, block size or op the launcher is built for."""
    from conformance.gpu import cuda_checks as cc

    def paged(ops, version, dtype, head_size, block_size, seed, use_alibi):
        if version == "v2" and head_size == 64:
            raise AssertionError("vLLM CUDA paged_attention_v2 differs")
        return {"check": f"paged_attention_{version}", "dtype": str(dtype)}

    def cache(ops, layout, dtype, head_size, block_size, seed):
        return {"check": f"reshape_and_cache_{layout}", "dtype": str(dtype)}

    monkeypatch.setattr(cc, "check_paged_attention", paged)
    monkeypatch.setattr(cc, "check_cache_write", cache)
    results = cc.sweep("OPS")
    assert len(results) == len(cc.configurations()) == 3 * 2 * 3 * 5 == 90
    failed = [r for r in results if not r["ok"]]
    assert len(failed) == 3 * 3 and all(r["check"] == "paged_attention_v2" for r in failed)
    assert failed[0]["error"] == "AssertionError: vLLM CUDA paged_attention_v2 differs"
    assert failed[0]["head_size"] == 64 and failed[0]["dtype"] == "torch.float16"
    assert {r["check"] for r in results} == {"paged_attention_v1", "paged_attention_v2",
                                             "reshape_and_cache_classic",
                                             "reshape_and_cache_flash", "reshape_and_cache_flash_hnd"}
    assert {kwargs["block_size"] for _, kwargs in cc.configurations()} == {8, 16, 32}
    assert len(cc.configurations(seeds=2)) == 180


def test_ops_without_vllm_or_sources_say_what_to_pass(monkeypatch):
    """Catches: a bare GPU machine (no vLLM, no cached sdist, no index) failing deep in a
    download with a network error instead of saying how to hand the lane the sources, and an
    unknown mode being accepted."""
    from conformance.gpu import ops

    monkeypatch.setattr(ops, "vllm_ops", lambda: None)

    def offline():
        raise OSError("no route to the index")

    monkeypatch.setattr(csrc, "pinned_csrc", offline)
    with pytest.raises(RuntimeError, match="pass --csrc PATH or set PASTUDY_VLLM_CSRC"):
        ops.load_ops("auto")
    with pytest.raises(RuntimeError, match="--mode vllm"):
        ops.load_ops("vllm")
    with pytest.raises(ValueError, match="mode 'cpu'"):
        ops.load_ops("cpu")
