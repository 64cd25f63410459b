"""The arithmetic behind the worked problems, computed rather than typed.

Every number the worked-problems page derives comes from a function here, and the tests in
``tests/site/test_worked_problems.py`` check these functions: the pair counts, the window ratios
and the prefix saving (tokens, bytes, linear and attention FLOPs) against brute-force counts, the
block run against the reference's classic cache shapes, the rest against their definitions (bytes
really are 1024 to a KiB, every page really fits), so a slip in one of these formulas fails a test
before it reaches the prose.

Units: sizes are in bytes; ``KiB``/``MiB``/``GiB`` are powers of 1024, ``kB``/``GB`` powers of
1000. The model is LLaMA-13B as in the PagedAttention paper: 40 layers, 40 attention heads of
dimension 128 (hidden size 5120), 16-bit KV cache, about 13 billion parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

KIB, MIB, GIB = 1024, 1024**2, 1024**3


@dataclass(frozen=True)
class Model:
    """The shape of a decoder-only transformer as far as its KV cache is concerned."""

    name: str
    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int
    parameters: float  # for the 2·P FLOPs-per-token rule

    @property
    def hidden(self) -> int:
        return self.kv_heads * self.head_dim


LLAMA_13B = Model("LLaMA-13B", layers=40, kv_heads=40, head_dim=128, dtype_bytes=2, parameters=13e9)


def kv_bytes_per_token(m: Model) -> int:
    """Key and value vectors of one token in every layer and head: ``2 · L · H · D · bytes``."""
    return 2 * m.layers * m.kv_heads * m.head_dim * m.dtype_bytes


def kv_bytes_per_page(m: Model, block_size: int) -> int:
    """One KV block (page) of ``block_size`` tokens across all layers."""
    return block_size * kv_bytes_per_token(m)


def pages_that_fit(capacity_bytes: int, page_bytes: int) -> int:
    """Whole pages that fit in ``capacity_bytes`` (a partial page is useless)."""
    if page_bytes <= 0:
        raise ValueError(f"page size must be positive, got {page_bytes}")
    return capacity_bytes // page_bytes


def weight_bytes(m: Model) -> int:
    """The model's weights stored at the KV cache's element size (16-bit for LLaMA-13B)."""
    return int(m.parameters) * m.dtype_bytes


def parameters_in(capacity_bytes: int, dtype_bytes: int) -> float:
    """How many parameters of ``dtype_bytes`` bytes each ``capacity_bytes`` holds."""
    return capacity_bytes / dtype_bytes


# --- sliding window ---------------------------------------------------------------------------


def full_causal_pairs(n: int) -> int:
    """Query-key pairs of causal attention over ``n`` tokens: query ``i`` sees keys ``0..i``."""
    return n * (n + 1) // 2


def window_causal_pairs(n: int, w: int) -> int:
    """Pairs when query ``i`` sees only the last ``w`` keys (itself included): ``min(i + 1, w)``.

    The first ``w`` queries still see a growing triangle; every later query sees exactly ``w``.
    """
    if w <= 0:
        raise ValueError(f"window must be positive, got {w}")
    if n <= w:
        return full_causal_pairs(n)
    return full_causal_pairs(w) + (n - w) * w


def naive_window_ratio(n: int, w: int) -> float:
    """The textbook ratio ``N·N / (N·W) = N / W`` (ignores causality on both sides)."""
    return n / w


def causal_window_ratio(n: int, w: int) -> float:
    """Causal full attention over causal sliding-window attention, counting pairs exactly."""
    return full_causal_pairs(n) / window_causal_pairs(n, w)


# --- prefix caching ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PrefixSaving:
    """What sharing a common prompt prefix across requests saves."""

    requests: int
    prefix_tokens: int
    block_size: int
    shared_tokens: int  # the part of the prefix that lies in full blocks, hence cacheable
    saved_tokens: int  # tokens whose KV is neither stored again nor recomputed
    saved_kv_bytes: int
    saved_linear_flops: float  # 2·P per token
    saved_attention_flops: float  # QK^T and PV over the shared prefix


def prefix_caching_saving(m: Model, requests: int, prefix_tokens: int, block_size: int) -> PrefixSaving:
    """Saving when ``requests`` requests share a ``prefix_tokens``-token prompt prefix.

    Prefix caching works on full blocks only: a block's hash covers exactly ``block_size`` tokens,
    so the tail of the prefix that does not fill a block is recomputed by every request. The first
    request computes the shared blocks; the other ``requests - 1`` reuse them.
    """
    shared = (prefix_tokens // block_size) * block_size
    saved_tokens = (requests - 1) * shared
    # Attention FLOPs while prefilling the shared tokens: token at position p (1-based) attends to
    # p keys; per layer that is 2·hidden FLOPs for QK^T and 2·hidden for PV, per key.
    attention_pairs = full_causal_pairs(shared)
    per_request_attention = 4 * m.hidden * m.layers * attention_pairs
    return PrefixSaving(
        requests=requests,
        prefix_tokens=prefix_tokens,
        block_size=block_size,
        shared_tokens=shared,
        saved_tokens=saved_tokens,
        saved_kv_bytes=saved_tokens * kv_bytes_per_token(m),
        saved_linear_flops=2 * m.parameters * saved_tokens,
        saved_attention_flops=float((requests - 1) * per_request_attention),
    )


def seconds_at(flops: float, flops_per_second: float) -> float:
    """Time to do ``flops`` at a sustained ``flops_per_second``."""
    if flops_per_second <= 0:
        raise ValueError(f"throughput must be positive, got {flops_per_second}")
    return flops / flops_per_second


# --- page-table overhead ----------------------------------------------------------------------


@dataclass(frozen=True)
class LookupOverhead:
    """Bytes of block-table reads per byte of KV read, under one assumption about reuse."""

    assumption: str
    table_bytes: float  # block-table bytes read per block_size tokens
    kv_bytes: float  # KV bytes read for the same tokens, in the same scope

    @property
    def ratio(self) -> float:
        return self.table_bytes / self.kv_bytes


def lookup_overheads(m: Model, block_size: int, entry_bytes: int = 4) -> list[LookupOverhead]:
    """The block-table read overhead of decode attention, from pessimistic to optimistic.

    The V0 CUDA kernel runs one thread block per (head, sequence) and reads the table entry of a
    block once in its key loop and once in its value loop. Whether those reads reach memory
    depends on caching, so we give the ratio for each scope of reuse.
    """
    head_kv = 2 * m.head_dim * m.dtype_bytes * block_size  # K and V of one head, one block
    layer_kv = head_kv * m.kv_heads
    step_kv = layer_kv * m.layers
    return [
        LookupOverhead("read in the key loop and again in the value loop, per head (no reuse)",
                       2 * entry_bytes, head_kv),
        LookupOverhead("read once per head per layer", entry_bytes, head_kv),
        LookupOverhead("read once per layer, shared by all heads through the cache", entry_bytes, layer_kv),
        LookupOverhead("read once per decode step for all layers", entry_bytes, step_kv),
    ]


def entry_per_token_ratio(m: Model, entry_bytes: int = 4) -> float:
    """One block-table entry against one token's whole KV: the often-quoted overhead, which counts
    one read for all layers and heads and forgets that an entry serves a whole block."""
    return entry_bytes / kv_bytes_per_token(m)


def block_run_bytes(m: Model, block_size: int) -> int:
    """Bytes one head's keys (or values) of one block take in the classic cache layout, where they
    are contiguous: ``head_dim · bytes · block_size``."""
    return m.head_dim * m.dtype_bytes * block_size
