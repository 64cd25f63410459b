"""The decode-kernel sweep's plan: which points run, what each must read, how long the sweep
should take. Plain Python (no torch): tested on any machine.

A point is one (dtype, batch, context, window) of decode steps, one query token per sequence,
every sequence of the point ``context`` tokens long, at a fixed attention shape (head size 128,
16-token blocks, 32 query heads sharing 8 KV heads). Decode attention is memory-bound: every
cached key and value a query may see is read once per step, so a point's **floor** is the time
to read those bytes (window-limited when a sliding window is on) at the bandwidth the GPU reaches
on a plain device-to-device copy, and a kernel's **% of bandwidth** is floor / its time.
``measure.py`` runs the plan on a GPU; ``evaluate.py`` judges the rows it returns.
"""

from __future__ import annotations

from dataclasses import dataclass

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
