"""The decode-attention kernel benchmark on its own: ``python -m conformance.gpu.bench``.

``[--quick] [--max-kv-gib N] [--json PATH] [--mode auto|vllm|build] [--csrc PATH]``. It loads
vLLM's CUDA ops as ``run.sh`` does (``ops.py``); when it cannot, it times the reference kernels
alone and says so. Without a CUDA GPU it refuses (exit status 2); it exits 1 when kernels
disagreed or a point failed. ``conformance/gpu/run.sh`` runs the same sweep (:func:`run`) as its
``benchmark`` step.

The sweep's parts: ``plan.py`` (which points, the floor, the cost estimate; plain Python),
``evaluate.py`` (targets, table, summary; plain Python), ``measure.py`` (the device work).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from conformance.gpu.ops import MODES, load_ops
from conformance.gpu.plan import DEFAULT_MAX_KV_GIB, FULL, QUICK, plan

NO_GPU = 2


def run(ops, quick: bool = False, max_kv_gib: float = DEFAULT_MAX_KV_GIB,
        ops_source: str | None = None, **kwargs) -> dict:
    """The sweep as the GPU lane runs it (``ops`` None: the reference kernels alone)."""
    from conformance.gpu import measure

    grid = QUICK if quick else FULL
    planned = plan(**grid, max_kv_gib=max_kv_gib)
    settings = {"quick": quick, "max_kv_gib": max_kv_gib,
                **{k: list(v) for k, v in grid.items()}}
    if ops is not None and ops_source is None:
        ops_source = getattr(ops, "__name__", type(ops).__name__)
    return measure.sweep(planned, ops, ops_source=ops_source, settings=settings, **kwargs)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m conformance.gpu.bench",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="the corners only: batches 1 and 256, contexts 512 and 32768")
    parser.add_argument("--max-kv-gib", type=float, default=DEFAULT_MAX_KV_GIB,
                        help="skip points whose KV cache (one layout) is larger (default 48)")
    parser.add_argument("--json", type=Path, help="also write the result here")
    parser.add_argument("--mode", choices=MODES, default="auto",
                        help="where vLLM's CUDA ops come from, as in run.sh")
    parser.add_argument("--csrc", type=Path, help="unpacked vLLM v0.10.2 csrc/ to build the ops "
                        "(default: $PASTUDY_VLLM_CSRC, else the pinned sdist's)")
    args = parser.parse_args(argv)
    if args.max_kv_gib <= 0:
        parser.error("--max-kv-gib must be > 0")
    return args


def gpu_available() -> bool:
    import torch

    return torch.cuda.is_available()


def main(argv=None, *, has_gpu: Callable[[], bool] = gpu_available) -> int:
    args = parse_args(argv)
    if not has_gpu():
        print("conformance/gpu/bench.py: refusing to run: no CUDA GPU is visible to torch "
              "(torch.cuda.is_available() is False). Run this on a GPU machine.", file=sys.stderr)
        return NO_GPU
    from conformance.gpu.measure import error_text

    try:
        loaded = load_ops(args.mode, args.csrc)
        ops, source = loaded.ops, loaded.source
    except Exception as err:  # noqa: BLE001 - fall back to the reference alone, and say so
        ops, source = None, None
        print(f"vLLM's CUDA ops not loaded ({error_text(err)}): timing the reference kernels "
              "alone", flush=True)
    result = run(ops, quick=args.quick, max_kv_gib=args.max_kv_gib, ops_source=source)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1, default=str) + "\n")
        print(f"result written to {args.json}")
    failed = [r for r in result["points"] if (r["skipped"] or "").startswith("failed")]
    return 1 if result["targets"]["disagreements"] or failed else 0


if __name__ == "__main__":
    sys.exit(main())
