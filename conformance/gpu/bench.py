"""The decode-attention kernel benchmark of the GPU lane: a sweep of batch sizes, contexts, dtypes
and sliding windows, timing the reference Triton kernels and vLLM's CUDA kernels next to the
bandwidth floor.

Decode attention is memory-bound: every cached key and value a query may see is read once per
step. The **floor** of a point is the time to read those bytes (window-limited when a sliding
window is on) at the bandwidth this GPU reaches on a plain 1 GiB device-to-device copy, measured
once per run. A kernel's **% of bandwidth** is floor / its time.

Kernels per point (head size 128, 16-token blocks, 32 query heads sharing 8 KV heads):

* ``reference_triton_v1`` and ``reference_triton_v2`` (``reference.attention.decode``: classic
  layout, no sliding window);
* ``reference_triton_varlen`` (``reference.attention.varlen``): the decode step written as varlen,
  one query row per sequence, over a flash-layout cache; the only reference kernel with a window;
* ``vllm_cuda_v1`` and ``vllm_cuda_v2`` (vLLM v0.10.2's ``paged_attention_v1/v2``, from
  ``vllm._custom_ops`` or our launcher): only when the ops are loaded, and only without a window
  (they have no sliding-window support).

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
the table's ``agree`` column says NO, the kernels are still timed, and the point meets neither
target. Caches, block tables (a random permutation of the pool's block ids) and queries are built
directly on the device; each point's tensors are freed before the next.

Timing: CUDA events; 3 warm-up calls (Triton compiles during phase 1/2, never in a timed call),
then 5 repetitions of N back-to-back calls, N chosen so that one repetition lasts >= 2 ms; the
figure is the median repetition divided by N. The reference wrappers' host-side argument checks
(which read every block table back to the host, a reference implementation's choice) run in the
agreement phase and are skipped in the timed calls (``validate=False``); the rest of each wrapper, including the
small device-to-host read of the lengths that v2 and varlen make on every call, is timed.

``python -m conformance.gpu.bench [--quick] [--max-kv-gib N] [--json PATH]`` runs it alone
(loading vLLM's ops as ``run.sh`` does, ``--mode``/``--csrc`` included; without them it times the
reference kernels alone and says so); ``conformance/gpu/run.sh`` runs the same sweep as its
``benchmark`` step (``--bench-quick``, ``--bench-max-kv-gib``). Without a CUDA GPU the standalone
command refuses (exit status 2); it exits 1 when kernels disagreed or a point failed.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

NO_GPU = 2

KERNELS = ("reference_triton_v1", "reference_triton_v2", "reference_triton_varlen",
           "vllm_cuda_v1", "vllm_cuda_v2")
REFERENCE_DECODE = ("reference_triton_v1", "reference_triton_v2")
REFERENCE_KERNELS = REFERENCE_DECODE + ("reference_triton_varlen",)
CLASSIC_KERNELS = ("reference_triton_v1", "reference_triton_v2", "vllm_cuda_v1", "vllm_cuda_v2")
LABELS = {"reference_triton_v1": "ref v1", "reference_triton_v2": "ref v2",
          "reference_triton_varlen": "ref varlen", "vllm_cuda_v1": "CUDA v1",
          "vllm_cuda_v2": "CUDA v2"}
WINDOW_BASELINE = "reference_triton_v1_window_blocks"

ELEMENT_SIZE = {"float16": 2, "bfloat16": 2, "float32": 4}
SHORT_DTYPE = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}

#: The full sweep (issue 7): every dtype x batch x context, each without and with a window.
FULL = {"dtypes": ("float16", "bfloat16"), "batches": (1, 8, 32, 128, 256),
        "contexts": (512, 2048, 8192, 32768), "windows": (None, 4096)}
#: ``--quick``: the corners of the full sweep.
QUICK = {"dtypes": ("float16", "bfloat16"), "batches": (1, 256), "contexts": (512, 32768),
         "windows": (None, 4096)}
DEFAULT_MAX_KV_GIB = 48.0

#: Target (a): best of reference v1/v2 within this factor of vLLM's CUDA v2 (points without window).
TARGET_RATIO = 1.10
#: Target (b): the best reference kernel reaches this fraction of the measured copy bandwidth ...
TARGET_BANDWIDTH_PCT = 80.0
#: ... at every "large" point: batch x context >= 32 x 8192.
LARGE_TOKENS = 32 * 8192
LARGE_DEFINITION = (f"large = batch x context >= 32 x 8192 = {LARGE_TOKENS:,} tokens "
                    "(with or without a window; a window lowers the bytes read and the floor)")

TIMING = {"method": "CUDA events", "warmup_calls": 3, "repetitions": 5, "min_repetition_ms": 2.0,
          "statistic": "median repetition / calls per repetition"}
COPY_BYTES = 1 << 30
CHUNK_BLOCKS = 8192  # blocks generated per step when filling a cache (256 MiB at the sweep's shape)


@dataclass(frozen=True)
class Shape:
    """The attention shape shared by every point of a sweep."""

    head_size: int = 128
    block_size: int = 16
    num_heads: int = 32
    num_kv_heads: int = 8


@dataclass(frozen=True)
class Point:
    """One row of the sweep."""

    dtype: str
    batch: int
    context: int
    window: int | None
    shape: Shape = Shape()

    @property
    def blocks_per_seq(self) -> int:
        return -(-self.context // self.shape.block_size)

    @property
    def kv_cache_bytes(self) -> int:
        """Bytes of one layout's K and V caches for the whole context (what is allocated)."""
        s = self.shape
        return (2 * self.batch * self.blocks_per_seq * s.block_size * s.num_kv_heads
                * s.head_size * ELEMENT_SIZE[self.dtype])

    @property
    def tokens_read(self) -> int:
        """Cached positions one query reads: the context, or the window when one is on."""
        return self.context if self.window is None else min(self.context, self.window)

    @property
    def kv_read_bytes(self) -> int:
        """Key and value bytes a decode step must read: every sequence's visible positions."""
        s = self.shape
        return (2 * self.batch * self.tokens_read * s.num_kv_heads * s.head_size
                * ELEMENT_SIZE[self.dtype])

    @property
    def large(self) -> bool:
        return self.batch * self.context >= LARGE_TOKENS

    def label(self) -> str:
        window = "none" if self.window is None else str(self.window)
        return (f"{SHORT_DTYPE[self.dtype]} batch={self.batch} context={self.context} "
                f"window={window}")


def plan(dtypes=FULL["dtypes"], batches=FULL["batches"], contexts=FULL["contexts"],
         windows=FULL["windows"], *, max_kv_gib: float = DEFAULT_MAX_KV_GIB,
         shape: Shape = Shape()) -> list[tuple[Point, str | None]]:
    """Every point of the sweep with the reason it is skipped (None when it runs).

    A window row exists only where the context is longer than the window (otherwise it is the
    row without a window again). A point whose KV cache (one layout, K and V) exceeds
    ``max_kv_gib`` GiB is kept in the plan, marked skipped, so the table can say so.
    """
    planned = []
    for dtype in dtypes:
        for batch in batches:
            for context in contexts:
                for window in windows:
                    if window is not None and context <= window:
                        continue
                    if window is not None and (context - window) % shape.block_size:
                        raise ValueError(f"window {window} with context {context}: the window "
                                         "must start on a block boundary")
                    point = Point(dtype, batch, context, window, shape)
                    gib = point.kv_cache_bytes / 2**30
                    reason = (f"skipped: KV cache {gib:.1f} GiB > --max-kv-gib {max_kv_gib:g}"
                              if gib > max_kv_gib else None)
                    planned.append((point, reason))
    return planned


def floor_us(kv_read_bytes: int, bandwidth_bytes_per_s: float) -> float:
    """Time to read ``kv_read_bytes`` at the measured copy bandwidth, in microseconds."""
    return kv_read_bytes / bandwidth_bytes_per_s * 1e6


def pct_of_bandwidth(floor: float, kernel_us: float) -> float:
    """A kernel's achieved share of the measured bandwidth: floor / kernel time, in percent."""
    return 100.0 * floor / kernel_us


def estimate_seconds(points: list[Point], bandwidth: float = 4.0e12, compile_s: float = 2.0,
                     with_cuda: bool = True) -> float:
    """A rough wall-time estimate of a sweep on a GPU with ``bandwidth`` bytes/s.

    Counts the Triton compilations (per dtype: v1 once, v2's two kernels per distinct number of
    partitions, varlen per window setting), three cache fills per point without a window and two
    with one, and per kernel 4 untimed calls plus 5 repetitions of at least 2 ms, assuming each
    kernel takes 1.5x the floor plus 30 us of launch and host work.
    """
    total = 5.0  # CUDA start-up, the copy-bandwidth measurement, the first imports
    for dtype in {p.dtype for p in points}:
        mine = [p for p in points if p.dtype == dtype]
        parts = {-(-p.context // 512) for p in mine if p.window is None}
        windows = {p.window is None for p in mine}
        total += compile_s * (1 + 2 * len(parts) + len(windows))
    for p in points:
        fills = 2 if p.window is not None else 3
        total += 0.1 + fills * 3 * p.kv_cache_bytes / bandwidth
        kernels = 1 if p.window is not None else (5 if with_cuda else 3)
        t = 1.5 * p.kv_read_bytes / bandwidth + 30e-6
        total += kernels * (4 * t + 5 * max(t, TIMING["min_repetition_ms"] / 1e3))
    return total


# --------------------------------------------------------------------------------------------
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
    timed = timer(lambda: dst.copy_(src))
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
    fn = lambda: varlen.varlen_paged_attention(  # noqa: E731
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


def _error(err: BaseException) -> str:
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
            return outputs, f"window baseline: {_error(err)}"
        return outputs, None
    for name, (fn, out) in classic_calls(point, inputs, key_cache, value_cache, ops,
                                         device).items():
        try:
            fn()
            outputs[name] = out.clone()
        except Exception as err:  # noqa: BLE001 - recorded in the row
            kernels[name] = {"error": _error(err)}
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
        kernels["reference_triton_varlen"] = {"error": _error(err)}
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


def point_row(point: Point, skipped: str | None = None) -> dict:
    return {"dtype": point.dtype, "batch": point.batch, "context": point.context,
            "window": point.window, "kv_cache_bytes": point.kv_cache_bytes,
            "kv_read_bytes": point.kv_read_bytes, "large": point.large, "skipped": skipped,
            "floor_us": None, "kernels": {}, "agreement": None, "ref_best_over_cuda_v2": None}


# --------------------------------------------------------------------------------------------
# Targets, table, summary: plain Python over the rows.


def _us(row: dict, name: str) -> float | None:
    return row["kernels"].get(name, {}).get("us")


def ratio_to_cuda_v2(row: dict) -> float | None:
    """min(reference v1, reference v2) / vLLM CUDA v2, when all three were timed."""
    cuda = _us(row, "vllm_cuda_v2")
    ours = [t for t in (_us(row, n) for n in REFERENCE_DECODE) if t is not None]
    if cuda is None or len(ours) < len(REFERENCE_DECODE):
        return None
    return min(ours) / cuda


def _agrees(row: dict) -> bool:
    return bool(row.get("agreement") and row["agreement"].get("ok"))


def _where(row: dict) -> dict:
    return {k: row[k] for k in ("dtype", "batch", "context", "window")}


def evaluate_targets(rows: list[dict], ops_loaded: bool = True) -> dict:
    """Target (a): best(ref v1, v2) <= 1.10 x CUDA v2 at each point without a window.
    Target (b): best reference kernel >= 80 % of the copy bandwidth at each large point.
    A point whose kernels disagreed does not meet either target."""
    a_rows = [r for r in rows if not r["skipped"] and r["window"] is None]
    a = {"definition": f"min(reference_triton_v1, reference_triton_v2) <= {TARGET_RATIO:.2f} x "
                       "vllm_cuda_v2, at every point without a window",
         "evaluated": 0, "met": 0, "not_met": []}
    if not ops_loaded:
        a["not_evaluated"] = "vLLM's CUDA ops were not loaded"
    else:
        for r in a_rows:
            ratio = r.get("ref_best_over_cuda_v2")
            if ratio is None:
                a["not_met"].append({**_where(r), "ratio": None,
                                     "reason": "a kernel has no timing (error or not run)"})
                a["evaluated"] += 1
                continue
            a["evaluated"] += 1
            cuda = _us(r, "vllm_cuda_v2")
            best = min(_us(r, n) for n in REFERENCE_DECODE)
            if not _agrees(r):
                a["not_met"].append({**_where(r), "ratio": ratio,
                                     "reason": "outputs disagree"})
            elif best <= TARGET_RATIO * cuda:
                a["met"] += 1
            else:
                a["not_met"].append({**_where(r), "ratio": ratio,
                                     "reason": f"{ratio:.2f}x CUDA v2"})
    b = {"definition": LARGE_DEFINITION,
         "target": f"best reference kernel >= {TARGET_BANDWIDTH_PCT:g}% of the measured copy "
                   "bandwidth", "evaluated": 0, "met": 0, "points": []}
    for r in rows:
        if r["skipped"] or r["batch"] * r["context"] < LARGE_TOKENS:
            continue
        timed = {n: r["kernels"][n]["pct_bandwidth"] for n in REFERENCE_KERNELS
                 if "pct_bandwidth" in r["kernels"].get(n, {})}
        best = max(timed, key=timed.get) if timed else None
        pct = timed[best] if best else None
        meets = pct is not None and pct >= TARGET_BANDWIDTH_PCT and _agrees(r)
        b["points"].append({**_where(r), "best_kernel": best, "pct_bandwidth": pct,
                            "agree": _agrees(r), "meets": meets})
        b["evaluated"] += 1
        b["met"] += meets
    skipped = [{**_where(r), "reason": r["skipped"]} for r in rows if r["skipped"]]
    disagreements = [_where(r) for r in rows if not r["skipped"] and not _agrees(r)]
    return {"within_10pct_of_cuda_v2": a, "bandwidth_80pct_at_large": b, "skipped": skipped,
            "disagreements": disagreements}


def _cell(row: dict, name: str) -> str:
    cell = row["kernels"].get(name, {})
    if "na" in cell:
        return "n/a (no window support)" if cell["na"] == "no window support" else "not loaded"
    if "error" in cell:
        return "error"
    if "us" not in cell:
        return "-"
    return f"{cell['us']:.1f} ({cell['pct_bandwidth']:.0f}%)"


def _agree_cell(row: dict) -> str:
    agreement = row.get("agreement") or {}
    if agreement.get("ok"):
        return "yes"
    bad = [f"{LABELS.get(n, n)} {c['max_abs_diff']:.2g}"
           for n, c in agreement.get("compared", {}).items() if not c["ok"]]
    return "NO: " + (", ".join(bad) or agreement.get("error", "?"))


def _size(num_bytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if num_bytes >= scale:
            return f"{num_bytes / scale:.1f} {unit}"
    return f"{num_bytes} B"


TABLE_HEADER = ["dtype", "batch", "context", "window", "KV read", "floor µs",
                *[f"{LABELS[k]} µs (% bw)" for k in KERNELS], "best ref v1/v2 ÷ CUDA v2",
                "agree"]


def format_table(rows: list[dict]) -> str:
    """A Markdown table, one row per point (skipped points included, with the reason)."""
    lines = []
    for r in rows:
        head = [SHORT_DTYPE[r["dtype"]], str(r["batch"]), str(r["context"]),
                "none" if r["window"] is None else str(r["window"]), _size(r["kv_read_bytes"])]
        if r["skipped"]:
            lines.append(head + [r["skipped"]] + ["-"] * (len(KERNELS) + 2))
            continue
        ratio = r.get("ref_best_over_cuda_v2")
        floor = "-" if r["floor_us"] is None else f"{r['floor_us']:.1f}"
        lines.append(head + [floor, *[_cell(r, k) for k in KERNELS],
                             "-" if ratio is None else f"{ratio:.2f}", _agree_cell(r)])
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h)
              for i, h in enumerate(TABLE_HEADER)]

    def fmt(cells):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    out = [fmt(TABLE_HEADER), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    return "\n".join(out + [fmt(line) for line in lines])


def _name(where: dict) -> str:
    window = "none" if where["window"] is None else where["window"]
    return (f"{SHORT_DTYPE[where['dtype']]} batch={where['batch']} context={where['context']} "
            f"window={window}")


def format_summary(targets: dict) -> str:
    a, b = targets["within_10pct_of_cuda_v2"], targets["bandwidth_80pct_at_large"]
    lines = [f"Target (a), reference Triton decode within 10% of vLLM CUDA v2: {a['definition']}."]
    if "not_evaluated" in a:
        lines.append(f"  not evaluated: {a['not_evaluated']}")
    else:
        lines.append(f"  {a['met']} of {a['evaluated']} points meet it.")
        for miss in a["not_met"]:
            lines.append(f"  not met: {_name(miss)}: {miss['reason']}")
    lines.append(f"Target (b), {b['target']}; {b['definition']}.")
    for p in b["points"]:
        pct = "-" if p["pct_bandwidth"] is None else f"{p['pct_bandwidth']:.0f}%"
        verdict = "meets" if p["meets"] else ("NOT met (outputs disagree)" if not p["agree"]
                                               else "NOT met")
        lines.append(f"  {_name(p)}: {pct} ({LABELS.get(p['best_kernel'], '-')}) {verdict}")
    lines.append(f"  {b['met']} of {b['evaluated']} large points meet it.")
    for s in targets["skipped"]:
        lines.append(f"Not run: {_name(s)}: {s['reason']}")
    if targets["disagreements"]:
        lines.append(f"DISAGREEMENTS at {len(targets['disagreements'])} points (see the agree "
                     "column): their times may not be of the same work.")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# The sweep and its entry points.


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
                row = point_row(point, f"failed: {_error(err)}")
            _release(device)
        row["seconds"] = round(time.time() - point_started, 2)
        rows.append(row)
        log(f"[{i}/{len(planned)}] {point.label()}: {_progress(row)} "
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


def _progress(row: dict) -> str:
    if row["skipped"]:
        return row["skipped"]
    parts = [f"floor {row['floor_us']:.1f} us"]
    parts += [f"{LABELS[k]} {c['us']:.1f} us" for k, c in row["kernels"].items() if "us" in c]
    parts += [f"{LABELS[k]} ERROR {c['error']}" for k, c in row["kernels"].items()
              if "error" in c]
    parts.append("agree" if _agrees(row) else "DISAGREE")
    return ", ".join(parts)


def run(ops, quick: bool = False, max_kv_gib: float = DEFAULT_MAX_KV_GIB,
        ops_source: str | None = None, **kwargs) -> dict:
    """The sweep as the GPU lane runs it (``ops`` None: the reference kernels alone)."""
    grid = QUICK if quick else FULL
    planned = plan(**grid, max_kv_gib=max_kv_gib)
    settings = {"quick": quick, "max_kv_gib": max_kv_gib,
                **{k: list(v) for k, v in grid.items()}}
    if ops is not None and ops_source is None:
        ops_source = getattr(ops, "__name__", type(ops).__name__)
    return sweep(planned, ops, ops_source=ops_source, settings=settings, **kwargs)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m conformance.gpu.bench",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="the corners only: batches 1 and 256, contexts 512 and 32768")
    parser.add_argument("--max-kv-gib", type=float, default=DEFAULT_MAX_KV_GIB,
                        help="skip points whose KV cache (one layout) is larger (default 48)")
    parser.add_argument("--json", type=Path, help="also write the result here")
    parser.add_argument("--mode", choices=("auto", "vllm", "build"), default="auto",
                        help="where vLLM's CUDA ops come from, as in run.sh")
    parser.add_argument("--csrc", type=Path, help="unpacked vLLM v0.10.2 csrc/ to build the ops")
    parser.add_argument("--build-dir", type=Path, default=Path("build/gpu-lane"))
    args = parser.parse_args(argv)
    if args.max_kv_gib <= 0:
        parser.error("--max-kv-gib must be > 0")
    return args


def _gpu_available() -> bool:
    import torch

    return torch.cuda.is_available()


def main(argv=None, *, has_gpu: Callable[[], bool] = _gpu_available) -> int:
    args = parse_args(argv)
    if not has_gpu():
        print("conformance/gpu/bench.py: refusing to run: no CUDA GPU is visible to torch "
              "(torch.cuda.is_available() is False). Run this on a GPU machine.", file=sys.stderr)
        return NO_GPU
    from conformance.gpu import run as lane

    try:
        ops, source = lane.load_ops(args)
    except Exception as err:  # noqa: BLE001 - fall back to the reference alone, and say so
        ops, source = None, None
        print(f"vLLM's CUDA ops not loaded ({_error(err)}): timing the reference kernels alone",
              flush=True)
    result = run(ops, quick=args.quick, max_kv_gib=args.max_kv_gib, ops_source=source)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1, default=str) + "\n")
        print(f"result written to {args.json}")
    failed = [r for r in result["points"] if (r["skipped"] or "").startswith("failed")]
    return 1 if result["targets"]["disagreements"] or failed else 0


if __name__ == "__main__":
    sys.exit(main())
