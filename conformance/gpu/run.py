"""The GPU lane in one command: conformance of vLLM's CUDA and Triton kernels on a GPU, plus a
decode-kernel benchmark sweep, written to one JSON report.

Two situations are handled:

* **vLLM installed** (``--mode vllm``): the kernels come from ``vllm._custom_ops`` (the CUDA paged
  attention v1/v2 exist up to v0.10.2; the cache writes in both pinned versions), and vLLM's
  Triton ``unified_attention`` is compared with the reference varlen kernel as well.
* **bare GPU machine** (``--mode build``): no vLLM, no registry. The kernels are compiled from an
  unpacked v0.10.2 ``csrc/`` carried along (``--csrc``) through our launcher (``build.py``).

``--mode auto`` (default) picks ``vllm`` when ``vllm._custom_ops`` has the paged-attention ops and
``build`` otherwise. Without a CUDA GPU the command refuses with exit status 2 and a message.
Exit status 0 means every check passed, 1 that at least one failed (the report says which).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Callable

from conformance.gpu import bench  # imports nothing heavy (torch only when it runs)

NO_GPU = 2


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="conformance/gpu/run.sh", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--mode", choices=("auto", "vllm", "build"), default="auto")
    parser.add_argument("--csrc", type=Path, help="unpacked vLLM v0.10.2 csrc/ (build mode)")
    parser.add_argument("--out", type=Path, default=Path("reports/gpu-lane.json"))
    parser.add_argument("--build-dir", type=Path, default=Path("build/gpu-lane"))
    parser.add_argument("--seeds", type=int, default=1, help="random batches per configuration")
    parser.add_argument("--skip-bench", action="store_true")
    parser.add_argument("--bench-quick", action="store_true",
                        help="benchmark only the sweep's corners (about a minute on an H200)")
    parser.add_argument("--bench-max-kv-gib", type=float, default=bench.DEFAULT_MAX_KV_GIB,
                        help="benchmark: skip points whose KV cache is larger (default "
                             f"{bench.DEFAULT_MAX_KV_GIB:g})")
    args = parser.parse_args(argv)
    if args.mode == "build" and args.csrc is None:
        parser.error("--mode build needs --csrc PATH (an unpacked vLLM v0.10.2 csrc/)")
    if args.seeds < 1:
        parser.error("--seeds must be >= 1")
    if args.bench_max_kv_gib <= 0:
        parser.error("--bench-max-kv-gib must be > 0")
    return args


def gpu_available() -> bool:
    import torch
    return torch.cuda.is_available()


def vllm_ops():
    """``vllm._custom_ops`` when it has the CUDA paged-attention ops, else None."""
    try:
        from vllm import _custom_ops as ops
    except Exception:  # noqa: BLE001 - any import failure means "not usable here"
        return None
    return ops if hasattr(ops, "paged_attention_v1") else None


def load_ops(args) -> tuple[object, str]:
    """The ops to test and where they came from."""
    ops = vllm_ops() if args.mode in ("auto", "vllm") else None
    if ops is not None:
        import vllm
        return ops, f"vllm {vllm.__version__} _custom_ops"
    if args.mode == "vllm":
        raise RuntimeError("--mode vllm: vllm._custom_ops with paged_attention_v1 is not available")
    if args.csrc is None:
        raise RuntimeError("no usable vLLM installed: pass --csrc PATH to build the kernels")
    from conformance.gpu import build
    started = time.time()
    module = build.build(args.csrc, args.build_dir)
    return module, f"launcher built from {args.csrc} in {time.time() - started:.0f}s"


def conformance(ops, args) -> list[dict]:
    from conformance.gpu import cuda_checks
    return cuda_checks.sweep(ops, seeds=args.seeds)


def triton_unified(args) -> list[dict]:
    """vLLM's Triton unified_attention on the GPU vs the reference (only when vLLM imports)."""
    try:
        import vllm  # noqa: F401
    except Exception:  # noqa: BLE001
        return [{"check": "unified_attention", "skipped": "vLLM not importable"}]
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
        results.append({"check": "unified_attention", "dtype": str(dtype),
                        "max_abs_diff_vs_reference": float((got.float() - ours.float())
                                                           .abs().max())})
    return results


def benchmark(ops, args) -> dict:
    """The decode-kernel sweep (``bench.py``); prints its table, returns the JSON-able result."""
    return bench.run(ops, quick=args.bench_quick, max_kv_gib=args.bench_max_kv_gib)


DEFAULT_STEPS = {"load_ops": load_ops, "conformance": conformance,
                 "triton_unified": triton_unified, "benchmark": benchmark}


def collect(args, steps: dict[str, Callable]) -> dict:
    """Run every step, recording results and errors; never raises for a failing check."""
    report = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "python": platform.python_version(),
              "mode": args.mode, "steps": {}, "passed": True}
    try:
        import torch
        report["torch"] = torch.__version__
        if torch.cuda.is_available():
            report["device"] = torch.cuda.get_device_name()
    except ImportError:
        pass

    def step(name, *call_args):
        started = time.time()
        try:
            value = steps[name](*call_args)
            report["steps"][name] = {"ok": True, "seconds": round(time.time() - started, 1),
                                     "result": value}
            return value
        except Exception as err:  # noqa: BLE001 - recorded in the report
            report["passed"] = False
            report["steps"][name] = {"ok": False, "seconds": round(time.time() - started, 1),
                                     "error": f"{type(err).__name__}: {err}",
                                     "traceback": traceback.format_exc(limit=6)}
            return None

    loaded = step("load_ops", args)
    ops = None
    if loaded is not None:
        ops, source = loaded
        report["steps"]["load_ops"]["result"] = source
        step("conformance", ops, args)
    step("triton_unified", args)
    if not args.skip_bench:
        step("benchmark", ops, args)
    report["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    return report


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
    status = "PASSED" if report["passed"] else "FAILED"
    print(f"GPU lane {status}; report written to {path}")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
