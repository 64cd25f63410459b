"""Small runs of the kernel conformance properties against the installed vLLM (CPU lane).

Run inside a vLLM environment; skipped with a reason where vLLM is not importable (failed inside
the test command's pinned vLLM environments, tests/conformance/pinned.py). Triton must
run interpreted on this GPU-less machine, and both variables must be set before Triton or vLLM is
first imported, hence the lines above the imports.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import importlib.util

import pytest
import torch

from tests.conformance.pinned import PINNED, unavailable

if importlib.util.find_spec("vllm") is None:
    if PINNED:
        raise RuntimeError(f"inside the pinned vLLM {PINNED} environment, but vLLM is not installed")
    pytest.skip("vLLM is not installed in this environment (run in a vLLM env)",
                allow_module_level=True)

from conformance.adapters import vllm_kernels as vk
from conformance.kernels import checks, properties
from conformance.lockstep import NotApplicable
from conformance.properties import all_properties

BY_NAME = {p.name: p for p in properties.PROPERTIES}


@pytest.mark.parametrize("name", ["kernel.unified_attention", "kernel.paged_attention_2d",
                                  "kernel.reshape_and_cache_flash"])
def test_cpu_lane_property_passes(name):
    """Catches: any divergence between vLLM's Triton kernels and the reference kernels/oracle on a
    handful of random paged batches (the CI command runs more)."""
    try:
        result = BY_NAME[name].run(6, 0)
    except NotApplicable as reason:
        unavailable(str(reason), name)
    assert result.passed, result.detail
    strategy = {"kernel.unified_attention": "flash_attention_case",
                "kernel.paged_attention_2d": "classic_attention_case"}.get(name, "")
    assert result.examples == 6 + len(checks.forced_cases(strategy))


def test_vllm_kernels_really_run():
    """Catches: vLLM imported without the interpreter settings, whose @triton.jit becomes a
    placeholder that leaves outputs untouched: the output must not keep its NaN poison."""
    kernels = vk.kernels()
    assert {type(k).__name__ for k in kernels.jit_objects.values()} == {"InterpretedFunction"}
    from reference.attention.batch import make_batch
    b = make_batch([5, 9], layout="classic", block_size=8, head_size=32, poison=0.0)
    out = vk.paged_attention_2d(b.query, b.key_cache, b.value_cache, b.block_tables, b.seq_lens,
                                b.scale)
    assert not torch.isnan(out).any()


def test_nan_in_unwritten_slots_by_version():
    """Catches: a wrong claim in our notes about vLLM's masking of the unwritten tail of the last
    block: v0.33.0 masks those loads (no NaN), v0.10.2 reads them (NaN reaches the output)."""
    from conformance.kernels.checks import masks_unwritten_slots
    from reference.attention.batch import make_batch
    b = make_batch([5, 9], layout="classic", block_size=8, head_size=32)
    out = vk.paged_attention_2d(b.query, b.key_cache, b.value_cache, b.block_tables, b.seq_lens,
                                b.scale)
    assert torch.isnan(out).any() != masks_unwritten_slots("paged_attention_2d")


def test_property_names_are_registered_and_stable():
    """Catches: renaming a property that notes and reports cite, or registering one twice."""
    names = set(all_properties())
    assert set(BY_NAME) <= names
    assert {"kernel.cuda.paged_attention_v1", "kernel.cuda.paged_attention_v2",
            "kernel.cuda.reshape_and_cache", "kernel.cuda.reshape_and_cache_flash"} <= names


def test_gpu_properties_not_applicable_without_gpu():
    """Catches: a GPU property that silently 'passes' on a machine without a GPU."""
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(NotApplicable, match="GPU"):
        BY_NAME["kernel.cuda.paged_attention_v1"].run(1, 0)
