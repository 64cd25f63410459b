"""The GPU lane in one command (``bash conformance/gpu/run.sh``): build or load vLLM's CUDA ops,
check them against the reference on the GPU, run a quick decode-kernel sweep, print one summary
line and write one JSON report (``conformance/gpu/reports/gpu-lane.json``, rendered by the site's
Conformance and Performance pages).

Steps, each timed and recorded; a failing step is recorded and the next still runs:

* ``load_ops``: ``vllm._custom_ops`` when the installed vLLM has the CUDA paged attention (up to
  v0.10.2), else our launcher compiled from the pinned v0.10.2 ``csrc/`` for this GPU's
  architecture (``--mode``, ``--csrc``; the build is cached by content, see ``build.py``);
* ``conformance``: vLLM's CUDA ``paged_attention_v1/v2`` and ``reshape_and_cache(_flash)`` vs the
  reference Triton kernels vs the oracle, every configuration the launcher is built for
  (``cuda_checks.py``); every check runs and is recorded, pass or fail;
* ``triton_unified``: vLLM's Triton ``unified_attention`` vs the reference (only when vLLM imports);
* ``benchmark``: the quick sweep (``--bench-full``: all 60 points), skipped with a reason when the
  time left in ``--budget-s`` is below the sweep's own estimate.

Without a CUDA GPU the command refuses with exit status 2 and a message. Exit status 0 means every
check passed, 1 that at least one failed (the report says which).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from conformance.gpu import bench
from conformance.gpu.ops import MODES, load_ops
from conformance.gpu.plan import DEFAULT_MAX_KV_GIB, FULL, QUICK, estimate_seconds, plan

NO_GPU = 2
REPORT = Path("conformance/gpu/reports/gpu-lane.json")
DEFAULT_BUDGET_S = 480.0  # the device time a task is lent for this script: 8 minutes


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="conformance/gpu/run.sh", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--mode", choices=MODES, default="auto")
    parser.add_argument("--csrc", type=Path, help="unpacked vLLM v0.10.2 csrc/ to build from "
                        "(default: $PASTUDY_VLLM_CSRC, else the pinned sdist's, cached)")
    parser.add_argument("--cache", type=Path, help="build cache (default "
                        "${PASTUDY_CACHE:-~/.cache/pagedattention-study}/gpu-build)")
    parser.add_argument("--out", type=Path, default=REPORT)
    parser.add_argument("--seeds", type=int, default=1, help="random batches per configuration")
    parser.add_argument("--skip-bench", action="store_true")
    parser.add_argument("--bench-full", action="store_true",
                        help="the full 60-point sweep instead of the quick one")
    parser.add_argument("--bench-max-kv-gib", type=float, default=DEFAULT_MAX_KV_GIB,
                        help="benchmark: skip points whose KV cache is larger (default "
                             f"{DEFAULT_MAX_KV_GIB:g})")
    parser.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S,
                        help="skip the benchmark when its estimate does not fit in what is left "
                             f"of this many seconds (default {DEFAULT_BUDGET_S:g})")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds must be >= 1")
    if args.bench_max_kv_gib <= 0:
        parser.error("--bench-max-kv-gib must be > 0")
    if args.budget_s <= 0:
        parser.error("--budget-s must be > 0")
    return args


def gpu_available() -> bool:
    import torch

    return torch.cuda.is_available()


def load_step(args) -> dict:
    loaded = load_ops(args.mode, args.csrc, args.cache)
    return {"ops": loaded.ops, "source": loaded.source, "build": loaded.build}


def conformance(ops, args) -> list[dict]:
    from conformance.gpu import cuda_checks

    return cuda_checks.sweep(ops, seeds=args.seeds)


def triton_unified(args) -> list[dict]:
    """vLLM's Triton unified_attention on the GPU vs the reference (only when vLLM imports)."""
    try:
        import vllm  # noqa: F401 - imported only to learn whether it imports
    except Exception:  # noqa: BLE001 - any import failure means: skip, and say so
        return [{"check": "unified_attention", "skipped": "vLLM not importable", "ok": True}]
    import torch

    from conformance.adapters import vllm_kernels as vk
    from reference.attention import varlen
    from reference.attention.batch import make_batch
    results = []
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        b = make_batch([1, 17, 600, 1100], query_lens=[1, 17, 1, 300], layout="flash",
                       num_heads=8, num_kv_heads=2, head_size=128, block_size=16, dtype=dtype,
                       device="cuda")
        got = vk.unified_attention(b.query, b.key_cache, b.value_cache, b.block_tables,
                                   b.query_start_loc, b.seq_lens, b.scale)
        ours = varlen.varlen_paged_attention(b.query, b.key_cache, b.value_cache,
                                             b.block_tables, b.query_start_loc, b.seq_lens,
                                             b.scale)
        # vLLM's Triton kernels use TF32 for fp32 dots on GPUs: vLLM's own test tolerance.
        torch.testing.assert_close(got.float(), ours.float(), atol=1.5e-2, rtol=1e-2)
        results.append({"check": "unified_attention", "dtype": str(dtype), "ok": True,
                        "max_abs_diff_vs_reference": float((got.float() - ours.float())
                                                           .abs().max())})
    return results


def sweep_points(args) -> list:
    grid = FULL if args.bench_full else QUICK
    return [p for p, reason in plan(**grid, max_kv_gib=args.bench_max_kv_gib) if reason is None]


def benchmark(ops, args) -> dict:
    """The decode-kernel sweep (``bench.run``); prints its table, returns the JSON-able result."""
    return bench.run(ops, quick=not args.bench_full, max_kv_gib=args.bench_max_kv_gib)


DEFAULT_STEPS = {"load_ops": load_step, "conformance": conformance,
                 "triton_unified": triton_unified, "benchmark": benchmark}


def failed_checks(results) -> list[dict]:
    return [r for r in results or [] if isinstance(r, dict) and r.get("ok") is False]


def collect(args, steps: dict[str, Callable], clock: Callable[[], float] = time.time) -> dict:
    """Run every step, recording results and errors; never raises for a failing check."""
    began = clock()
    report = {"report": "gpu-lane", "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "python": platform.python_version(), "mode": args.mode, "steps": {},
              "passed": True, "budget_s": args.budget_s}
    try:
        import torch

        report["torch"] = torch.__version__
        report["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            report["device"] = torch.cuda.get_device_name()
    except ImportError:
        pass

    def step(name, *call_args):
        started = clock()
        try:
            value = steps[name](*call_args)
        except Exception as err:  # noqa: BLE001 - recorded in the report
            report["passed"] = False
            report["steps"][name] = {"ok": False, "seconds": round(clock() - started, 1),
                                     "error": f"{type(err).__name__}: {err}",
                                     "traceback": traceback.format_exc(limit=6)}
            return None
        failures = failed_checks(value) if isinstance(value, list) else []
        report["steps"][name] = {"ok": not failures, "seconds": round(clock() - started, 1),
                                 "result": value}
        if failures:
            report["passed"] = False
        return value

    loaded = step("load_ops", args)
    ops = None
    if loaded is not None:
        ops = loaded["ops"]
        report["steps"]["load_ops"]["result"] = {"source": loaded["source"],
                                                 "build": loaded["build"]}
        step("conformance", ops, args)
    step("triton_unified", args)
    if args.skip_bench:
        report["steps"]["benchmark"] = {"ok": True, "skipped": "--skip-bench"}
    else:
        left = args.budget_s - (clock() - began)
        estimate = estimate_seconds(sweep_points(args), with_cuda=ops is not None)
        if estimate > left:
            report["steps"]["benchmark"] = {
                "ok": True, "skipped": f"not started: its estimate {estimate:.0f} s exceeds the "
                                       f"{max(left, 0):.0f} s left of --budget-s {args.budget_s:g}"}
        else:
            step("benchmark", ops, args)
    report["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    report["total_seconds"] = round(clock() - began, 1)
    report["summary"] = summary_line(report)
    return report


def summary_line(report: dict) -> str:
    """The one line the script ends with: verdict, device, time, and each step in a few words."""
    steps = report["steps"]
    parts = []
    load = steps.get("load_ops", {})
    if load.get("ok"):
        build = (load.get("result") or {}).get("build")
        parts.append("ops: " + ("vllm._custom_ops" if build is None else
                                "cached launcher build" if build["cached"] else
                                f"launcher compiled in {build['compile_seconds']:.0f} s"))
    else:
        parts.append(f"ops NOT loaded ({load.get('error', 'not run')})")
    for name, label in (("conformance", "CUDA conformance"), ("triton_unified", "Triton unified")):
        s = steps.get(name)
        if s is None:
            continue
        if not s["ok"] and "error" in s:
            parts.append(f"{label} ERROR ({s['error'][:120]})")
            continue
        checks = [r for r in s["result"] if not r.get("skipped")]
        if not checks:
            parts.append(f"{label} skipped ({s['result'][0]['skipped']})" if s["result"]
                         else f"{label}: nothing to check")
            continue
        parts.append(f"{label} {len(checks) - len(failed_checks(checks))}/{len(checks)} passed")
    bench_step = steps.get("benchmark", {})
    if "skipped" in bench_step:
        parts.append(f"benchmark skipped ({bench_step['skipped']})")
    elif not bench_step.get("ok"):
        parts.append(f"benchmark ERROR ({bench_step.get('error', '?')[:120]})")
    else:
        result = bench_step["result"]
        a = result["targets"]["within_10pct_of_cuda_v2"]
        b = result["targets"]["bandwidth_80pct_at_large"]
        ran = [r for r in result["points"] if not r["skipped"]]
        target_a = ("not evaluated" if "not_evaluated" in a else f"{a['met']}/{a['evaluated']}")
        parts.append(f"sweep {len(ran)} of {len(result['points'])} points run, "
                     f"{len(result['targets']['disagreements'])} "
                     f"disagreements, target (a) {target_a}, target (b) {b['met']}/"
                     f"{b['evaluated']}")
    verdict = "PASSED" if report["passed"] else "FAILED"
    return (f"GPU lane {verdict} on {report.get('device', 'no GPU')} in "
            f"{report.get('total_seconds', 0):.0f} s: " + "; ".join(parts))


def write_report(report: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1, default=str) + "\n")
    return path


def main(argv=None, *, steps: dict | None = None, has_gpu: Callable[[], bool] = gpu_available,
         ) -> int:
    args = parse_args(argv)
    if not has_gpu():
        print("conformance/gpu/run.sh: refusing to run: no CUDA GPU is visible to torch "
              "(torch.cuda.is_available() is False). Run this on a GPU machine.", file=sys.stderr)
        return NO_GPU
    report = collect(args, steps or DEFAULT_STEPS)
    path = write_report(report, args.out)
    print(f"{report['summary']}; report {path}", flush=True)
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
