"""One conformance example per kernel: run vLLM's kernel, the reference's Triton kernel and the
oracle on the same paged batch and demand agreement.

The Hypothesis strategies here draw the cases (random lengths biased to 1, block_size +- 1 and the
table's full capacity; block tables over unique, shuffled physical blocks; GQA/MQA; ALiBi,
sliding windows and soft caps where the kernel has them). Attention outputs must agree within the
per-dtype tolerance of ``reference.attention.tolerances``; cache writes must agree bit for bit.

Two facts about vLLM shape the cases (both measured, see the report):

* under the Triton interpreter ``tl.dot`` on bf16 multiplies raw bit patterns, so vLLM's
  dot-based attention kernels are compared in fp32 and fp16 on the CPU (bf16 on a GPU);
* some releases' ``kernel_unified_attention_2d`` and ``kernel_paged_attention_2d`` load the
  unwritten tail of a sequence's last block without a mask, so NaN there reaches the output
  (``KernelApi.unified_masks_tail`` / ``paged_2d_masks_tail``, defined in conformance/release_api.py
  with their releases in conformance/changelog.py, say which). Unowned slots are therefore poisoned with NaN where vLLM masks them and with a large
  finite value where it does not.
"""

from __future__ import annotations

import os

import torch
from hypothesis import assume
from hypothesis import strategies as st

from conformance.adapters import vllm_kernels as vk
from reference.attention import cache_write, decode, oracle, varlen
from reference.attention.batch import make_batch
from reference.attention.tolerances import assert_attention_close

MAX_LEN = 64
# Every head size vLLM's paged attention kernels are built for (the CUDA kernel's dispatch list);
# the Triton kernels pad to the next power of two, so the non-powers (80 ... 192) test the masks.
HEAD_SIZES = [32, 64, 80, 96, 112, 120, 128, 192, 256]
# A context long enough for many blocks and, at partition_size = 2 x block_size, many split-K
# partitions for decode v2; run once in every property run (forced_cases), because random draws
# stay short to keep the Triton interpreter affordable.
LONG_CONTEXT = 2053


class KernelDidNotRun(AssertionError):
    """vLLM's output buffer still holds its NaN poison: the kernel silently did nothing."""


def attention_dtypes() -> list[torch.dtype]:
    interpreted = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    return [torch.float32, torch.float16] + ([] if interpreted else [torch.bfloat16])


def masks_unwritten_slots(kernel: str) -> bool:
    """Whether the installed vLLM's ``kernel`` ("paged_attention_2d" or "unified_attention")
    masks its K/V loads past the context (``KernelApi`` fields, conformance/release_api.py)."""
    api = vk.kernels().api
    return {"paged_attention_2d": api.paged_2d_masks_tail, "unified_attention": api.unified_masks_tail}[kernel]


def poison_for(kernel: str) -> float:
    """NaN where vLLM masks loads past the context, a finite value where it reads them."""
    return float("nan") if masks_unwritten_slots(kernel) else 1000.0


def _buildable(case: dict) -> None:
    """Reject (Hypothesis ``assume``) a case the installed release's kernels cannot be built for
    (``KernelApi.min_block_size``): such a block size does not exist for that release."""
    if case["block_size"] < vk.kernels().api.min_block_size:
        assume(False)


def _require_ran(out: torch.Tensor, what: str) -> None:
    if torch.isnan(out).all():
        raise KernelDidNotRun(f"{what}: every output is still NaN; vLLM's kernel did not run")
    if torch.isnan(out).any():
        raise AssertionError(f"{what}: NaN in part of vLLM's output (an unmasked read?)")


@st.composite
def seq_lengths(draw, block_size: int, max_seqs: int = 3, allow_empty: bool = False) -> list[int]:
    """Context lengths biased to the block edges; 0 (a sequence with nothing cached yet) where
    the kernel accepts it. At least one sequence is non-empty."""
    edge = st.sampled_from([1, max(1, block_size - 1), block_size, block_size + 1, MAX_LEN])
    lens = draw(st.lists(st.one_of(edge, st.integers(1, MAX_LEN)), min_size=1, max_size=max_seqs))
    if allow_empty and draw(st.integers(0, 4)) == 0:
        lens.insert(draw(st.integers(0, len(lens))), 0)
    return lens


@st.composite
def attention_case(draw, layout: str) -> dict:
    num_kv, group = draw(st.sampled_from([(1, 1), (2, 1), (1, 4), (2, 2)]))
    block_size = draw(st.sampled_from([8, 16, 32]))
    lens = draw(seq_lengths(block_size, allow_empty=layout == "flash"))
    case = dict(
        lens=lens, block_size=block_size, num_kv_heads=num_kv, num_heads=num_kv * group,
        head_size=draw(st.sampled_from(HEAD_SIZES)),
        dtype=draw(st.sampled_from(attention_dtypes())), use_alibi=draw(st.booleans()),
        seed=draw(st.integers(0, 2**20)),
    )
    if layout == "flash":
        case["query_lens"] = [0 if n == 0 else draw(st.sampled_from([1, n, draw(st.integers(1, n))]))
                              for n in lens]
        case["window_left"] = draw(st.sampled_from([-1, -1, 0, 5, 20]))
        case["softcap"] = draw(st.sampled_from([0.0, 0.0, 2.0]))
        case["segments"] = draw(st.sampled_from([None, 4])) \
            if all(q == 1 for q in case["query_lens"]) else None
    return case


flash_attention_case = attention_case("flash")
classic_attention_case = attention_case("classic")


def forced_cases(strategy_name: str) -> list[dict]:
    """Cases every run of a property checks before its random draws: one long context (with a
    non-power-of-two head and, for the varlen kernel, an empty sequence beside it)."""
    long = dict(block_size=16, num_kv_heads=2, num_heads=4, head_size=96, dtype=torch.float32,
                use_alibi=False, seed=7)
    if strategy_name == "classic_attention_case":
        return [dict(long, lens=[LONG_CONTEXT, 17])]
    if strategy_name == "flash_attention_case":
        return [dict(long, lens=[LONG_CONTEXT, 0, 17], query_lens=[1, 0, 17], window_left=-1,
                     softcap=0.0, segments=None)]
    return []


def _batch(case: dict, layout: str, poison: float):
    return make_batch(case["lens"], query_lens=case.get("query_lens"), layout=layout,
                      num_heads=case["num_heads"], num_kv_heads=case["num_kv_heads"],
                      head_size=case["head_size"], block_size=case["block_size"],
                      dtype=case["dtype"], seed=case["seed"], use_alibi=case["use_alibi"],
                      extra_table_columns=0, poison=poison)


def check_paged_attention_2d(case: dict) -> None:
    """vLLM's kernel_paged_attention_2d vs reference decode v1 and v2 vs the oracle."""
    version = vk.kernels().version
    _buildable(case)
    b = _batch(case, "classic", poison_for("paged_attention_2d"))
    args = (b.query, b.key_cache, b.value_cache, b.block_tables, b.seq_lens, b.scale,
            b.alibi_slopes)
    got = vk.paged_attention_2d(*args)
    _require_ran(got, "kernel_paged_attention_2d")
    want = oracle.paged_decode_oracle(*args)
    assert_attention_close(got, want, f"vLLM {version} paged_attention_2d vs oracle")
    ours = decode.paged_attention_v1(*args)
    assert_attention_close(got, ours, "vLLM paged_attention_2d vs reference v1")
    assert_attention_close(decode.paged_attention_v2(*args, partition_size=2 * b.block_size),
                           ours, "reference v2 vs v1")


def check_unified_attention(case: dict) -> None:
    """vLLM's unified_attention vs the reference varlen kernel vs the oracle."""
    version = vk.kernels().version
    _buildable(case)
    b = _batch(case, "flash", poison_for("unified_attention"))
    window = case["window_left"]
    got = vk.unified_attention(b.query, b.key_cache, b.value_cache, b.block_tables,
                               b.query_start_loc, b.seq_lens, b.scale, b.alibi_slopes,
                               window_left=window, softcap=case["softcap"],
                               segments=case["segments"] if vk.kernels().api.unified_split_k_args
                               else None)
    _require_ran(got, "unified_attention")
    args = (b.query, b.key_cache, b.value_cache, b.block_tables, b.query_start_loc, b.seq_lens,
            b.scale)
    options = dict(alibi_slopes=b.alibi_slopes, window_size=(window, 0) if window >= 0 else
                   (-1, -1), softcap=case["softcap"])
    assert_attention_close(got, oracle.varlen_oracle(*args, **options),
                           f"vLLM {version} unified_attention vs oracle")
    assert_attention_close(got, varlen.varlen_paged_attention(*args, **options),
                           "vLLM unified_attention vs reference varlen")


@st.composite
def cache_write_case(draw) -> dict:
    block_size = draw(st.sampled_from([8, 16, 32]))
    num_blocks = draw(st.integers(1, 4))
    num_tokens = draw(st.integers(1, min(12, num_blocks * block_size)))
    slots = draw(st.lists(st.integers(0, num_blocks * block_size - 1), min_size=num_tokens,
                          max_size=num_tokens, unique=True))
    skips = draw(st.lists(st.booleans(), min_size=num_tokens, max_size=num_tokens))
    return dict(layout=draw(st.sampled_from(["flash", "classic"])), block_size=block_size,
                num_blocks=num_blocks, heads=draw(st.integers(1, 3)),
                head_size=draw(st.sampled_from(HEAD_SIZES)),
                dtype=draw(st.sampled_from([torch.float32, torch.float16, torch.bfloat16])),
                slots=[-1 if s else v for v, s in zip(slots, skips)],
                seed=draw(st.integers(0, 2**20)))


cache_write_cases = cache_write_case()


def check_reshape_and_cache_flash(case: dict) -> None:
    """vLLM's Triton cache write vs the reference Triton write vs the oracle, bit for bit."""
    from reference.attention.layouts import new_classic_cache, new_flash_cache

    if case["layout"] == "classic" and not vk.kernels().api.cache_write_head_major:
        assume(False)  # this release's writer has no head-major path (KernelApi.cache_write_head_major)
    gen = torch.Generator().manual_seed(case["seed"])
    shape = (len(case["slots"]), case["heads"], case["head_size"])
    key = torch.randn(shape, generator=gen).to(case["dtype"])
    value = torch.randn(shape, generator=gen).to(case["dtype"])
    slots = torch.tensor(case["slots"], dtype=torch.int64)
    make = new_flash_cache if case["layout"] == "flash" else new_classic_cache
    caches = [make(case["num_blocks"], case["heads"], case["head_size"], case["block_size"],
                   case["dtype"]) for _ in range(3)]
    vk.reshape_and_cache_flash(key, value, *caches[0], slots)
    if case["layout"] == "flash":
        cache_write.reshape_and_cache_flash(key, value, *caches[1], slots)
        oracle.reshape_and_cache_flash_oracle(key, value, *caches[2], slots)
    else:
        cache_write.reshape_and_cache(key, value, *caches[1], slots)
        oracle.reshape_and_cache_oracle(key, value, *caches[2], slots)
    bits = torch.int32 if case["dtype"] == torch.float32 else torch.int16
    written = [s for s in case["slots"] if s >= 0]
    if written and torch.isnan(caches[0][0]).all():
        raise KernelDidNotRun("reshape_and_cache_flash: the cache is still all NaN")
    for name, i in (("key_cache", 0), ("value_cache", 1)):
        vllm_bits, ours, truth = (c[i].contiguous().view(bits) for c in caches)
        if not torch.equal(vllm_bits, truth):
            raise AssertionError(f"vLLM {name} differs from the oracle ({case['layout']} layout)")
        if not torch.equal(ours, truth):
            raise AssertionError(f"reference {name} differs from the oracle ({case['layout']})")
