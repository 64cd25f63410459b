"""The CPU-build lane outside its own process: not applicable with the reason, labelled as what it
is, and with comparisons that can fail. Runs in any environment with torch (no vLLM needed)."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import importlib.metadata

import pytest
import torch

from conformance.adapters import vllm_cpu_build as cpu
from conformance.kernels import cpu_build, cpu_checks
from conformance.lockstep import NotApplicable
from reference.attention import oracle
from reference.attention.batch import make_batch


def build_installed() -> bool:
    try:
        importlib.metadata.distribution(cpu.DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.parametrize("prop", cpu_build.PROPERTIES, ids=lambda p: p.name)
def test_not_applicable_exactly_where_the_build_is_absent(prop):
    """Catches: a CPU-build property that passes, fails or crashes where the build is absent (for
    instance by reaching for this environment's own vLLM ``_C``, a CUDA build); it must say that
    the build is missing and how the lane installs it. Where the build is installed (the lane's
    own process, which runs the properties themselves) it must load with all its ops."""
    if build_installed():
        assert set(cpu.load().ops) == set(cpu.OPS)
        return
    with pytest.raises(NotApplicable, match="vllm-cpu.*scripts/ensure-target"):
        prop.run(1, 0)


def test_the_lane_is_labelled_as_the_cpu_build_never_as_cuda():
    """Catches: the lane presented as vLLM's CUDA kernels (the reports, the page and the printed
    lines all take their words from these names and sentences)."""
    assert cpu_build.LANE == ("vLLM's CPU build of the paged_attention ops (`csrc/cpu`), same op "
                        "contract as the CUDA ops")
    for prop in cpu_build.PROPERTIES:
        assert prop.name.startswith("kernel.cpu.")
        assert "CPU build" in prop.checks and "csrc/cpu" in prop.checks
        assert "CUDA kernel" not in prop.checks


def test_partition_statistics_recombine_to_the_oracle():
    """Catches: a per-partition statistics helper that cannot judge v2's max_logits/exp_sums:
    its weights must sum to one and, applied to each partition's own attention output, give the
    oracle's output; a wrong partition boundary must change the maxima."""
    b = make_batch([1100, 300], num_heads=2, num_kv_heads=1, head_size=32, use_alibi=True, seed=4)
    args = (b.query, b.key_cache, b.value_cache, b.block_tables, b.seq_lens, b.scale,
            b.alibi_slopes)
    stats = cpu_checks.partition_statistics(*args)
    assert stats[1] is None
    maxima, weights = stats[0]
    assert maxima.shape == (2, 3)
    torch.testing.assert_close(weights.sum(dim=1), torch.ones(2))
    parts = []
    for start in range(0, 1100, 512):
        n = min(1100, start + 512) - start
        keys = [b.keys[0][start:start + n]]
        values = [b.values[0][start:start + n]]
        kc, vc = (torch.zeros_like(b.key_cache), torch.zeros_like(b.value_cache))
        table = b.block_tables[:1].clone()
        oracle.write_sequences_classic(keys, values, kc, vc, table)
        # ALiBi relative to the partition's own last token differs from the sequence's by a
        # constant per head, which the softmax inside one partition does not see.
        parts.append(oracle.paged_decode_oracle(b.query[:1], kc, vc, table,
                                                torch.tensor([n], dtype=torch.int32), b.scale,
                                                b.alibi_slopes)[0])
    combined = sum(w[:, None] * p for w, p in zip(weights.T, parts))
    want = oracle.paged_decode_oracle(*args)[0]
    torch.testing.assert_close(combined, want, atol=1e-5, rtol=1e-5)
    shifted, _ = cpu_checks.partition_statistics(*args, partition_size=496)[0]
    assert not torch.allclose(shifted[:, :3], maxima)


def test_the_fp16_bug_exception_is_narrow():
    """Catches: the known-bug exception swallowing more than the bug (other dtypes, v1, or
    sequences of one partition would then escape the full comparison)."""
    case = dict(lens=[513, 512, 0, 1025], dtype=torch.float16)
    assert cpu_checks.fp16_reduce_bug_rows(case, "v2") == [0, 3]
    assert cpu_checks.fp16_reduce_bug_rows(case, "v1") == []
    assert cpu_checks.fp16_reduce_bug_rows(dict(case, dtype=torch.bfloat16), "v2") == []
