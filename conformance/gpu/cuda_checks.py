"""GPU-lane checks: vLLM's CUDA kernels (``vllm._custom_ops`` or our launcher) against the
reference Triton kernels and the oracle, on a real GPU.

``ops`` is any object with vLLM's ``_custom_ops`` signatures for ``paged_attention_v1``,
``paged_attention_v2``, ``reshape_and_cache`` and ``reshape_and_cache_flash`` -- the installed
vLLM's module, or the extension that ``conformance/gpu/build.py`` compiles from vLLM v0.10.2's
sources. Each check returns a small JSON-able dict and raises ``AssertionError`` on a mismatch.
"""

from __future__ import annotations

import torch

from reference.attention import cache_write, decode, oracle
from reference.attention.batch import make_batch
from reference.attention.layouts import new_classic_cache, new_flash_cache
from reference.attention.tolerances import assert_attention_close

#: Configurations the launcher is built for, and that the GPU lane sweeps.
HEAD_SIZES = (64, 128)
BLOCK_SIZES = (8, 16, 32)  # every block size vLLM 0.10.2's CUDA kernels are built for
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
PARTITION = 512


def lengths_for(block_size: int) -> list[int]:
    """Forced boundary lengths: 1, block edges, partition edges, and a long one."""
    return [1, block_size - 1, block_size, block_size + 1, PARTITION - 1, PARTITION,
            PARTITION + 1, 3 * PARTITION + 7]


def _scales(device):
    return torch.ones(1, dtype=torch.float32, device=device), \
        torch.ones(1, dtype=torch.float32, device=device)


def check_paged_attention(ops, version: str, dtype, head_size: int, block_size: int,
                          seed: int = 0, use_alibi: bool = False) -> dict:
    """vLLM CUDA paged attention v1 or v2 vs reference Triton v1/v2 vs the oracle."""
    lens = lengths_for(block_size)
    b = make_batch(lens, layout="classic", num_heads=8, num_kv_heads=2, head_size=head_size,
                   block_size=block_size, dtype=dtype, seed=seed, use_alibi=use_alibi,
                   device="cuda")
    args = (b.query, b.key_cache, b.value_cache, b.block_tables, b.seq_lens, b.scale,
            b.alibi_slopes)
    k_scale, v_scale = _scales("cuda")
    out = torch.full_like(b.query, float("nan"))
    max_len = max(lens)
    common = (b.query, b.key_cache, b.value_cache, b.key_cache.shape[1], b.scale,
              b.block_tables, b.seq_lens, block_size, max_len, b.alibi_slopes, "auto",
              k_scale, v_scale)
    if version == "v1":
        ops.paged_attention_v1(out, *common)
        ours = decode.paged_attention_v1(*args)
    else:
        parts = -(-max_len // PARTITION)
        shape = (len(lens), b.query.shape[1], parts)
        exp_sums = torch.empty(shape, dtype=torch.float32, device="cuda")
        max_logits = torch.empty_like(exp_sums)
        tmp = torch.empty((*shape, head_size), dtype=dtype, device="cuda")
        ops.paged_attention_v2(out, exp_sums, max_logits, tmp, *common)
        ours = decode.paged_attention_v2(*args)
    torch.cuda.synchronize()
    if torch.isnan(out).any():
        raise AssertionError(f"CUDA paged_attention_{version}: NaN left in the output")
    want = oracle.paged_decode_oracle(*args)
    what = f"paged_attention_{version} {dtype} head={head_size} block={block_size}"
    assert_attention_close(out, want, f"vLLM CUDA {what} vs oracle")
    assert_attention_close(ours, want, f"reference Triton {what} vs oracle")
    return {"check": f"paged_attention_{version}", "dtype": str(dtype), "head_size": head_size,
            "block_size": block_size, "alibi": use_alibi,
            "max_abs_err_vs_oracle": float((out.float() - want.float()).abs().max()),
            "max_abs_diff_vs_reference": float((out.float() - ours.float()).abs().max())}


def new_flash_hnd_cache(num_blocks: int, num_kv_heads: int, head_size: int, block_size: int,
                        dtype: torch.dtype, device: str = "cuda") -> tuple[torch.Tensor, torch.Tensor]:
    """A flash-layout cache pair whose memory is head-major: the ``[num_blocks, block_size, heads,
    head_size]`` view of contiguous ``[num_blocks, heads, block_size, head_size]`` tensors, so the
    head stride is ``block_size · head_size``, not ``head_size``, and vLLM's
    ``reshape_and_cache_flash_kernel`` takes its per-head branch (v0.10.2 cache_kernels.cu:328-353)."""
    shape = (num_blocks, num_kv_heads, block_size, head_size)
    key_cache, value_cache = (torch.full(shape, float("nan"), dtype=dtype, device=device).permute(0, 2, 1, 3)
                              for _ in range(2))
    return key_cache, value_cache


def check_cache_write(ops, layout: str, dtype, head_size: int, block_size: int,
                      seed: int = 0) -> dict:
    """vLLM CUDA reshape_and_cache(_flash) vs the reference Triton write vs the oracle, bitwise.
    ``layout``: "classic", "flash" (token-major) or "flash_hnd" (the flash view of head-major memory)."""
    gen = torch.Generator().manual_seed(seed)
    num_blocks, heads = 6, 2
    slots = torch.randperm(num_blocks * block_size, generator=gen)[:40]
    slots[::7] = -1
    key = torch.randn(len(slots), heads, head_size, generator=gen).to(dtype).cuda()
    value = torch.randn(len(slots), heads, head_size, generator=gen).to(dtype).cuda()
    slots = slots.cuda()
    make = {"classic": new_classic_cache, "flash": new_flash_cache, "flash_hnd": new_flash_hnd_cache}[layout]
    caches = [make(num_blocks, heads, head_size, block_size, dtype, device="cuda")
              for _ in range(3)]
    k_scale, v_scale = _scales("cuda")
    if layout == "classic":
        ops.reshape_and_cache(key, value, *caches[0], slots, "auto", k_scale, v_scale)
        cache_write.reshape_and_cache(key, value, *caches[1], slots)
        oracle.reshape_and_cache_oracle(key, value, *caches[2], slots)
    else:
        ops.reshape_and_cache_flash(key, value, *caches[0], slots, "auto", k_scale, v_scale)
        cache_write.reshape_and_cache_flash(key, value, *caches[1], slots)
        oracle.reshape_and_cache_flash_oracle(key, value, *caches[2], slots)
    torch.cuda.synchronize()
    bits = torch.int32 if dtype == torch.float32 else torch.int16
    for i, name in ((0, "key_cache"), (1, "value_cache")):
        vllm_c, ours, truth = (c[i].view(bits) for c in caches)
        if not torch.equal(vllm_c, truth):
            raise AssertionError(f"vLLM CUDA {layout} write: {name} differs from the oracle")
        if not torch.equal(ours, truth):
            raise AssertionError(f"reference Triton {layout} write: {name} differs (GPU)")
    return {"check": f"reshape_and_cache_{layout}", "dtype": str(dtype), "head_size": head_size,
            "block_size": block_size, "bit_exact": True}


def configurations(seeds: int = 1) -> list[tuple[str, dict]]:
    """Every check of the sweep as (function name, keyword arguments): v1, v2 and both cache
    writes at every dtype, head size and block size the launcher is built for."""
    planned = []
    for dtype in DTYPES:
        for head_size in HEAD_SIZES:
            for block_size in BLOCK_SIZES:
                for seed in range(seeds):
                    for version in ("v1", "v2"):
                        planned.append(("check_paged_attention", {
                            "version": version, "dtype": dtype, "head_size": head_size,
                            "block_size": block_size, "seed": seed,
                            "use_alibi": seed % 2 == 1 or version == "v2"}))
                    for layout in ("classic", "flash", "flash_hnd"):
                        planned.append(("check_cache_write", {
                            "layout": layout, "dtype": dtype, "head_size": head_size,
                            "block_size": block_size, "seed": seed}))
    return planned


def sweep(ops, seeds: int = 1) -> list[dict]:
    """Run every configuration; a failing check is recorded (``ok`` False, the error) and the
    next one still runs."""
    checks = {"check_paged_attention": check_paged_attention,
              "check_cache_write": check_cache_write}
    results = []
    for name, kwargs in configurations(seeds):
        try:
            results.append({**checks[name](ops, **kwargs), "ok": True})
        except Exception as err:  # noqa: BLE001 - a mismatch or a launch error, recorded
            check = (f"paged_attention_{kwargs['version']}" if "version" in kwargs
                     else f"reshape_and_cache_{kwargs['layout']}")
            fields = {k: str(v) if k == "dtype" else v for k, v in kwargs.items()}
            results.append({"check": check, **fields, "ok": False,
                            "error": f"{type(err).__name__}: {str(err)[:500]}"})
    return results
