"""A short decode benchmark: reference Triton v1/v2 vs vLLM CUDA v1/v2 vs the bandwidth floor.

Decode attention is memory-bound: every cached key and value of every sequence is read once per
step. The *floor* is the time to read those bytes at the bandwidth this GPU actually reaches on a
plain device-to-device copy; a kernel's ``x_floor`` is how many times slower than that it is.
"""

from __future__ import annotations

import torch

from reference.attention import decode
from reference.attention.batch import make_batch


def time_ms(fn, warmup: int = 3, iters: int = 20) -> float:
    """Median-free mean time of ``fn()`` in milliseconds, measured with CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def copy_bandwidth(num_bytes: int = 1 << 30) -> float:
    """Achieved device bandwidth in bytes/s (a copy reads and writes ``num_bytes`` each)."""
    src = torch.empty(num_bytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src))
    return 2 * num_bytes / (ms / 1e3)


def run(ops, num_seqs: int = 32, context: int = 2048, num_heads: int = 32,
        num_kv_heads: int = 8, head_size: int = 128, block_size: int = 16,
        dtype=torch.float16) -> dict:
    """Time the four decode kernels on one batch; ``ops`` may be None (reference only)."""
    b = make_batch([context] * num_seqs, layout="classic", num_heads=num_heads,
                   num_kv_heads=num_kv_heads, head_size=head_size, block_size=block_size,
                   dtype=dtype, poison=0.0, device="cuda")
    kv_bytes = 2 * num_seqs * context * num_kv_heads * head_size * b.query.element_size()
    floor_ms = kv_bytes / copy_bandwidth() * 1e3
    args = (b.query, b.key_cache, b.value_cache, b.block_tables, b.seq_lens, b.scale)
    timings = {"reference_triton_v1": time_ms(lambda: decode.paged_attention_v1(*args)),
               "reference_triton_v2": time_ms(lambda: decode.paged_attention_v2(*args))}
    if ops is not None:
        out = torch.empty_like(b.query)
        one = torch.ones(1, dtype=torch.float32, device="cuda")
        common = (b.query, b.key_cache, b.value_cache, num_kv_heads, b.scale, b.block_tables,
                  b.seq_lens, block_size, context, None, "auto", one, one)
        parts = -(-context // 512)
        exp_sums = torch.empty((num_seqs, num_heads, parts), dtype=torch.float32, device="cuda")
        max_logits = torch.empty_like(exp_sums)
        tmp = torch.empty((num_seqs, num_heads, parts, head_size), dtype=dtype, device="cuda")
        timings["vllm_cuda_v1"] = time_ms(lambda: ops.paged_attention_v1(out, *common))
        timings["vllm_cuda_v2"] = time_ms(
            lambda: ops.paged_attention_v2(out, exp_sums, max_logits, tmp, *common))
    return {
        "config": {"num_seqs": num_seqs, "context": context, "num_heads": num_heads,
                   "num_kv_heads": num_kv_heads, "head_size": head_size,
                   "block_size": block_size, "dtype": str(dtype)},
        "kv_bytes": kv_bytes, "floor_ms": floor_ms,
        "kernels": {name: {"ms": ms, "x_floor": ms / floor_ms,
                           "effective_GBps": kv_bytes / (ms / 1e3) / 1e9}
                    for name, ms in timings.items()},
    }
