"""The decode-kernel sweep's measurement on a device: inputs and caches built on the GPU, the
agreement check of every kernel's output, CUDA-event timing, and the sweep loop.

Kernels per point (``plan.KERNELS``): ``reference_triton_v1``/``v2`` (``reference.attention.
decode``, classic layout, no window), ``reference_triton_varlen`` (``reference.attention.varlen``
over a flash-layout cache: the only reference kernel with a window), and vLLM v0.10.2's CUDA
``paged_attention_v1/v2`` (from ``vllm._custom_ops`` or our launcher, see ``ops.py``), only when
loaded and only without a window.

Each point runs in three phases, so that at most one KV cache is resident at a time:

1. a classic-layout cache is filled and every classic kernel runs once through its public
   (argument-checking) entry point; with a window, reference v1 runs instead over the window's
   blocks only (the window is block-aligned here), as the baseline the varlen kernel must match;
2. a flash-layout cache with *the same values* is filled (both are generated chunk by chunk from
   the same seeds), the varlen kernel runs once, every output is compared with reference v1 at the
   dtype's tolerance (``reference.attention.tolerances``) and the result is recorded in the row,
   then the varlen kernel is timed;
3. the classic cache is filled again and the classic kernels are timed.

A disagreement does not stop the sweep: the row records which kernel differed and by how much,
and the point meets neither target (``evaluate.py``). Timing: CUDA events; 3 warm-up calls
(Triton compiles during phase 1/2, never in a timed call), then 5 repetitions of N back-to-back
calls, N chosen so that one repetition lasts >= 2 ms; the figure is the median repetition divided
by N. The reference wrappers' host-side argument checks run in the agreement phase and are skipped
in the timed calls (``validate=False``).

``device``, ``timer`` and ``bandwidth`` of :func:`sweep` exist so that the tests can drive it on
the CPU (under the Triton interpreter) with a stub timer.
"""

from __future__ import annotations

import functools
import gc
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict

from conformance.gpu.evaluate import (
    evaluate_targets,
    format_summary,
    format_table,
    point_row,
    progress_text,
    ratio_to_cuda_v2,
)
from conformance.gpu.plan import (
    CLASSIC_KERNELS,
    COPY_BYTES,
    KERNELS,
    TIMING,
    WINDOW_BASELINE,
    Point,
    estimate_seconds,
    floor_us,
    pct_of_bandwidth,
)

CHUNK_BLOCKS = 8192  # blocks generated per step when filling a cache (256 MiB at the sweep's shape)

# Device work: inputs, caches, the agreement check, timing.


def cuda_timer(fn: Callable[[], object], *, warmup: int = TIMING["warmup_calls"],
               reps: int = TIMING["repetitions"], min_rep_ms: float = TIMING["min_repetition_ms"],
               max_calls: int = 10_000) -> dict:
    """Time ``fn`` with CUDA events: warm-up calls, then the median of ``reps`` repetitions of N
    back-to-back calls (N makes one repetition last >= ``min_rep_ms``). Microseconds per call."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    one_ms = max(start.elapsed_time(end), 1e-4)
    calls = min(max_calls, max(1, math.ceil(min_rep_ms / one_ms)))
    per_call = []
    for _ in range(reps):
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) * 1e3 / calls)
    return {"us": statistics.median(per_call), "reps_us": [round(t, 3) for t in per_call],
            "calls_per_rep": calls}


def copy_bandwidth(device, timer, num_bytes: int = COPY_BYTES) -> float:
    """Bytes per second moved by a device-to-device copy (it reads and writes ``num_bytes``)."""
    import torch

    src = torch.empty(num_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    timed = timer(functools.partial(dst.copy_, src))  # bound now: src and dst are deleted below
    del src, dst
    return 2 * num_bytes / (timed["us"] * 1e-6)


def _release(device) -> None:
    import torch

    gc.collect()
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _seed_generator(device, seed: int):
    import torch

    return torch.Generator(device=device).manual_seed(seed)


def make_inputs(point: Point, device, seed: int) -> dict:
    """Query, block tables (a random permutation of the pool's block ids) and lengths, built on
    ``device``. Every sequence owns ``blocks_per_seq`` distinct blocks; the pool has no others."""
    import torch

    s = point.shape
    dtype = getattr(torch, point.dtype)
    gen = _seed_generator(device, seed)
    num_blocks = point.batch * point.blocks_per_seq
    tables = torch.randperm(num_blocks, generator=gen, device=device).to(torch.int32)
    query = torch.rand((point.batch, s.num_heads, s.head_size), generator=gen, device=device,
                       dtype=dtype).mul_(2).sub_(1)
    return {"query": query, "block_tables": tables.view(point.batch, point.blocks_per_seq),
            "seq_lens": torch.full((point.batch,), point.context, dtype=torch.int32,
                                   device=device),
            "query_start_loc": torch.arange(point.batch + 1, dtype=torch.int32, device=device),
            "num_blocks": num_blocks, "scale": s.head_size ** -0.5}


def make_cache(point: Point, layout: str, device, seed: int):
    """A ``layout`` ("classic" or "flash") cache pair of uniform values in [-1, 1).

    The values are generated per chunk of blocks, in the flash order [blocks, block_size,
    kv_heads, head_size], from seeds that depend only on ``seed`` and the chunk, then written in
    the requested layout; so a classic and a flash cache made with the same seed hold the same
    key and value at every (block, offset, head, dim) without ever being resident together.
    """
    import torch

    from reference.attention.layouts import classic_cache_shapes, flash_cache_shape, vector_width

    s = point.shape
    dtype = getattr(torch, point.dtype)
    num_blocks = point.batch * point.blocks_per_seq
    if layout == "classic":
        k_shape, v_shape = classic_cache_shapes(num_blocks, s.num_kv_heads, s.head_size,
                                                s.block_size, dtype)
    else:
        k_shape = v_shape = flash_cache_shape(num_blocks, s.num_kv_heads, s.head_size,
                                              s.block_size)
    key_cache = torch.empty(k_shape, dtype=dtype, device=device)
    value_cache = torch.empty(v_shape, dtype=dtype, device=device)
    x = vector_width(dtype)
    for chunk, first in enumerate(range(0, num_blocks, CHUNK_BLOCKS)):
        n = min(CHUNK_BLOCKS, num_blocks - first)
        for which, cache in ((0, key_cache), (1, value_cache)):
            gen = _seed_generator(device, seed * 1_000_003 + 2 * chunk + which)
            vals = torch.rand((n, s.block_size, s.num_kv_heads, s.head_size), generator=gen,
                              device=device, dtype=dtype).mul_(2).sub_(1)
            if layout == "flash":
                cache[first:first + n].copy_(vals)
            elif which == 0:  # [n, bs, kvh, hs] -> [n, kvh, hs // x, bs, x]
                cache[first:first + n].copy_(
                    vals.view(n, s.block_size, s.num_kv_heads, s.head_size // x, x)
                    .permute(0, 2, 3, 1, 4))
            else:  # [n, bs, kvh, hs] -> [n, kvh, hs, bs]
                cache[first:first + n].copy_(vals.permute(0, 2, 3, 1))
            del vals
    return key_cache, value_cache


def classic_calls(point: Point, inputs: dict, key_cache, value_cache, ops, device,
                  validate: bool = True) -> dict:
    """name -> fn() that runs that classic-layout kernel once into a preallocated output.

    ``validate=False`` (the timed calls) skips the reference wrappers' host-side input checks,
    which copy the block table to the host and would otherwise be timed with the kernel; vLLM's
    CUDA ops have no such checks. The same inputs were checked on the first, untimed call."""
    import torch

    from reference.attention import decode

    q, tables, lens, scale = (inputs["query"], inputs["block_tables"], inputs["seq_lens"],
                              inputs["scale"])
    outs = {name: torch.full_like(q, float("nan")) for name in CLASSIC_KERNELS}
    args = (q, key_cache, value_cache, tables, lens, scale)
    calls = {
        "reference_triton_v1": lambda: decode.paged_attention_v1(
            *args, out=outs["reference_triton_v1"], validate=validate),
        "reference_triton_v2": lambda: decode.paged_attention_v2(
            *args, out=outs["reference_triton_v2"], validate=validate),
    }
    if ops is not None:
        s = point.shape
        one = torch.ones(1, dtype=torch.float32, device=device)
        # vllm._custom_ops argument order: out, [exp_sums, max_logits, tmp_out,] query, key_cache,
        # value_cache, num_kv_heads, scale, block_tables, seq_lens, block_size, max_seq_len,
        # alibi_slopes, kv_cache_dtype, k_scale, v_scale.
        common = (q, key_cache, value_cache, s.num_kv_heads, scale, tables, lens, s.block_size,
                  point.context, None, "auto", one, one)
        parts = -(-point.context // 512)
        exp_sums = torch.empty((point.batch, s.num_heads, parts), dtype=torch.float32,
                               device=device)
        max_logits = torch.empty_like(exp_sums)
        tmp = torch.empty((point.batch, s.num_heads, parts, s.head_size), dtype=q.dtype,
                          device=device)
        calls["vllm_cuda_v1"] = lambda: ops.paged_attention_v1(outs["vllm_cuda_v1"], *common)
        calls["vllm_cuda_v2"] = lambda: ops.paged_attention_v2(
            outs["vllm_cuda_v2"], exp_sums, max_logits, tmp, *common)
    return {name: (fn, outs[name]) for name, fn in calls.items()}


def varlen_call(point: Point, inputs: dict, key_cache, value_cache, validate: bool = True):
    import torch

    from reference.attention import varlen

    out = torch.full_like(inputs["query"], float("nan"))
    window = (-1, -1) if point.window is None else (point.window - 1, 0)
    fn = lambda: varlen.varlen_paged_attention(  # noqa: E731 - a timed callable, built in one expression
        inputs["query"], key_cache, value_cache, inputs["block_tables"],
        inputs["query_start_loc"], inputs["seq_lens"], inputs["scale"], window_size=window,
        out=out, validate=validate)
    return fn, out


def window_baseline(point: Point, inputs: dict, key_cache, value_cache):
    """Reference v1 over the window's blocks only: the same attention as the windowed varlen call
    (the window starts on a block boundary and there is no ALiBi, so positions do not matter)."""
    import torch

    from reference.attention import decode

    skip = (point.context - point.window) // point.shape.block_size
    tables = inputs["block_tables"][:, skip:].contiguous()
    lens = torch.full_like(inputs["seq_lens"], point.window)
    return decode.paged_attention_v1(inputs["query"], key_cache, value_cache, tables, lens,
                                     inputs["scale"])


def compare_outputs(outputs: dict, baseline: str, dtype: str) -> dict:
    """Every output against ``outputs[baseline]`` at the dtype's attention tolerance."""
    import torch

    from reference.attention.tolerances import ATTENTION_TOLERANCE

    atol, rtol = ATTENTION_TOLERANCE[getattr(torch, dtype)]
    base = outputs[baseline].float()
    record = {"baseline": baseline, "atol": atol, "rtol": rtol,
              "max_abs_baseline": float(base.abs().nan_to_num(float("inf")).max()),
              "compared": {}, "ok": not bool(torch.isnan(base).any())}
    if not record["ok"]:
        record["error"] = f"{baseline}: NaN in the output"
    for name, out in outputs.items():
        if name == baseline:
            continue
        o = out.float()
        close = torch.isclose(o, base, rtol=rtol, atol=atol)
        ok = bool(close.all())
        diff = (o - base).abs().nan_to_num(float("inf"))
        record["compared"][name] = {"max_abs_diff": float(diff.max()), "ok": ok,
                                    "mismatched_elements": int((~close).sum())}
        record["ok"] = record["ok"] and ok
    return record


def error_text(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:300]


def _phase_classic_outputs(point: Point, inputs: dict, ops, device, seed: int,
                           kernels: dict) -> tuple[dict, str | None]:
    """Phase 1: one checked call of each classic kernel (with a window: the baseline only)."""
    key_cache, value_cache = make_cache(point, "classic", device, seed)
    outputs = {}
    if point.window is not None:
        try:
            outputs[WINDOW_BASELINE] = window_baseline(point, inputs, key_cache, value_cache)
        except Exception as err:  # noqa: BLE001 - recorded in the row
            return outputs, f"window baseline: {error_text(err)}"
        return outputs, None
    for name, (fn, out) in classic_calls(point, inputs, key_cache, value_cache, ops,
                                         device).items():
        try:
            fn()
            outputs[name] = out.clone()
        except Exception as err:  # noqa: BLE001 - recorded in the row
            kernels[name] = {"error": error_text(err)}
    return outputs, None


def _phase_varlen(point: Point, inputs: dict, device, seed: int, kernels: dict, timer,
                  outputs: dict, problem: str | None) -> dict:
    """Phase 2: the varlen kernel's output, the agreement of all outputs, the varlen timing."""
    key_cache, value_cache = make_cache(point, "flash", device, seed)
    fn, out = varlen_call(point, inputs, key_cache, value_cache)
    try:
        fn()
        outputs["reference_triton_varlen"] = out.clone()
    except Exception as err:  # noqa: BLE001 - recorded in the row
        kernels["reference_triton_varlen"] = {"error": error_text(err)}
    if problem is None and len(outputs) < 2:
        problem = "fewer than two kernels produced an output"
    if problem is not None:
        agreement = {"ok": False, "error": problem, "compared": {}}
    else:
        baseline = WINDOW_BASELINE if point.window is not None else "reference_triton_v1"
        if baseline not in outputs:  # reference v1 failed: compare the rest with the first
            baseline = next(iter(outputs))
        agreement = compare_outputs(outputs, baseline, point.dtype)
    outputs.clear()
    if "reference_triton_varlen" not in kernels:
        unchecked, _ = varlen_call(point, inputs, key_cache, value_cache, validate=False)
        kernels["reference_triton_varlen"] = timer(unchecked)
    return agreement


def _phase_classic_timing(point: Point, inputs: dict, ops, device, seed: int, kernels: dict,
                          timer) -> None:
    """Phase 3: time the classic kernels that ran cleanly in phase 1."""
    key_cache, value_cache = make_cache(point, "classic", device, seed)
    calls = classic_calls(point, inputs, key_cache, value_cache, ops, device, validate=False)
    for name in CLASSIC_KERNELS:
        if name in calls and name not in kernels:
            kernels[name] = timer(calls[name][0])


def run_point(point: Point, ops, *, device, timer, bandwidth: float, seed: int) -> dict:
    """Check, then time, every kernel of one point; returns its row (JSON-able).

    Each phase is its own function, so that its cache is freed when it returns."""
    row = point_row(point)
    row["floor_us"] = floor_us(point.kv_read_bytes, bandwidth)
    kernels = row["kernels"]
    for name in KERNELS:
        if point.window is not None and name != "reference_triton_varlen":
            kernels[name] = {"na": "no window support"}
        elif name.startswith("vllm") and ops is None:
            kernels[name] = {"na": "vLLM ops not loaded"}
    inputs = make_inputs(point, device, seed)
    outputs, problem = _phase_classic_outputs(point, inputs, ops, device, seed, kernels)
    _release(device)
    row["agreement"] = _phase_varlen(point, inputs, device, seed, kernels, timer, outputs,
                                     problem)
    del outputs
    _release(device)
    if point.window is None:
        _phase_classic_timing(point, inputs, ops, device, seed, kernels, timer)
    del inputs
    _release(device)
    row["kernels"] = {name: kernels[name] for name in KERNELS if name in kernels}
    for cell in row["kernels"].values():
        if "us" in cell:
            cell["pct_bandwidth"] = pct_of_bandwidth(row["floor_us"], cell["us"])
    row["ref_best_over_cuda_v2"] = ratio_to_cuda_v2(row)
    return row


# The sweep.


def sweep(planned: list[tuple[Point, str | None]], ops, *, device="cuda", timer=None,
          bandwidth: float | None = None, copy_bytes: int = COPY_BYTES, seed: int = 0,
          ops_source: str | None = None, log: Callable[[str], None] | None = None,
          settings: dict | None = None) -> dict:
    """Run the planned points and return the JSON-able result (table and summary included).

    ``device``, ``timer`` and ``bandwidth`` exist so that the tests can drive the sweep on the CPU
    (under the Triton interpreter) with a stub timer; on a GPU they default to CUDA events and a
    measured copy bandwidth.
    """
    import torch

    log = log or (lambda line: print(line, flush=True))
    timer = timer or cuda_timer
    started = time.time()
    runnable = [p for p, reason in planned if reason is None]
    estimate = estimate_seconds(runnable, with_cuda=ops is not None)
    log(f"kernel benchmark: {len(planned)} points ({len(planned) - len(runnable)} skipped), "
        f"rough estimate {estimate:.0f} s; vLLM CUDA ops: {ops_source or 'not loaded'}")
    if bandwidth is None:
        bandwidth = copy_bandwidth(device, timer, copy_bytes)
    log(f"measured copy bandwidth: {bandwidth / 1e9:.0f} GB/s")
    rows = []
    for i, (point, reason) in enumerate(planned, 1):
        point_started = time.time()
        if reason is not None:
            row = point_row(point, reason)
        else:
            try:
                row = run_point(point, ops, device=device, timer=timer, bandwidth=bandwidth,
                                seed=seed + i)
            except Exception as err:  # noqa: BLE001 - out of memory, or a broken point
                row = point_row(point, f"failed: {error_text(err)}")
            _release(device)
        row["seconds"] = round(time.time() - point_started, 2)
        rows.append(row)
        log(f"[{i}/{len(planned)}] {point.label()}: {progress_text(row)} "
            f"({row['seconds']:.1f} s; {time.time() - started:.0f} s so far)")
    targets = evaluate_targets(rows, ops_loaded=ops is not None)
    result = {
        "benchmark": "paged decode attention sweep (issue 7)",
        "settings": settings or {}, "shape": asdict(planned[0][0].shape) if planned else {},
        "device": torch.cuda.get_device_name() if str(device).startswith("cuda") else str(device),
        "ops": ops_source, "timing": TIMING, "copy_bytes": copy_bytes,
        "copy_bandwidth_GBps": bandwidth / 1e9, "estimated_seconds": round(estimate, 1),
        "points": rows, "targets": targets, "table": format_table(rows),
        "summary": format_summary(targets),
    }
    result["elapsed_seconds"] = round(time.time() - started, 1)
    log(result["table"])
    log(result["summary"])
    log(f"kernel benchmark finished in {result['elapsed_seconds']:.0f} s "
        f"(estimate was {estimate:.0f} s)")
    return result

