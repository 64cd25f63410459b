"""The narrow shims that let vLLM's Triton kernels run on a CPU, per release (KernelApi fields)."""

from __future__ import annotations

import dataclasses
import sys
import types

import pytest

from conformance.adapters import vllm_kernels as vk
from conformance.changelog import api_at

KERNELS_0_9, KERNELS_0_10 = api_at("0.9.2").kernels, api_at("0.10.2").kernels


def fake_release(api, monkeypatch):
    module = types.ModuleType("fake_chunked_prefill_paged_decode")

    def asks_the_gpu(*args, **kwargs):
        raise RuntimeError("Found no NVIDIA driver on your system")

    module.use_rocm_custom_paged_attention = asks_the_gpu

    def chunked_prefill_paged_decode():
        return module.use_rocm_custom_paged_attention()

    chunked_prefill_paged_decode.__module__ = module.__name__
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module, types.SimpleNamespace(api=api, chunked_prefill_paged_decode=chunked_prefill_paged_decode)


def test_rocm_check_bound_at_import_answers_no_for_one_call(monkeypatch):
    """Catches: 0.9.2's paged_attention_2d failing with 'Found no NVIDIA driver' (its module binds
    the ROCm check, which queries the GPU, at import), or the stand-in left in place afterwards."""
    module, k = fake_release(KERNELS_0_9, monkeypatch)
    original = module.use_rocm_custom_paged_attention
    with vk._no_bound_rocm_query(k):
        assert k.chunked_prefill_paged_decode() is False
    assert module.use_rocm_custom_paged_attention is original


def test_releases_that_import_the_check_at_call_time_are_left_alone(monkeypatch):
    """Catches: the shim patching a module attribute that the release does not use."""
    module, k = fake_release(KERNELS_0_10, monkeypatch)
    original = module.use_rocm_custom_paged_attention
    with vk._no_bound_rocm_query(k):
        assert module.use_rocm_custom_paged_attention is original
    assert dataclasses.replace(KERNELS_0_10, paged_2d_rocm_check_bound_at_import=True) == KERNELS_0_9


def test_block_sizes_a_release_cannot_build_are_not_drawn(monkeypatch):
    """Catches: vLLM 0.8.5.post1's kernel_paged_attention_2d reported as a harness error on block
    size 8, which its Triton (3.2: tl.dot dimensions >= 16) cannot compile; the case does not
    exist for that release and is rejected instead (KernelApi.min_block_size)."""
    from hypothesis.errors import UnsatisfiedAssumption

    from conformance.changelog import api_at
    from conformance.kernels import checks

    assert api_at("0.8.5.post1").kernels.min_block_size == 16
    assert api_at("0.9.2").kernels.min_block_size == 1
    fake = types.SimpleNamespace(api=api_at("0.8.5.post1").kernels)
    monkeypatch.setattr(checks.vk, "kernels", lambda: fake)
    checks._buildable({"block_size": 16})
    with pytest.raises(UnsatisfiedAssumption):
        checks._buildable({"block_size": 8})


def test_classic_layout_cache_writes_are_not_drawn_where_the_writer_lacks_it(monkeypatch):
    """Catches: the classic 5-D cache handed to a Triton reshape_and_cache_flash without a
    head-major path (0.11-0.13), which writes out of bounds (the interpreter segfaulted the whole
    conformance run at 0.13.0) instead of the case being absent for that release."""
    from hypothesis.errors import UnsatisfiedAssumption

    from conformance.changelog import api_at
    from conformance.kernels import checks

    assert not api_at("0.13.0").kernels.cache_write_head_major
    assert api_at("0.14.1").kernels.cache_write_head_major
    fake = types.SimpleNamespace(api=api_at("0.13.0").kernels)
    monkeypatch.setattr(checks.vk, "kernels", lambda: fake)
    case = {"layout": "classic", "slots": [0], "heads": 1, "head_size": 8, "block_size": 8, "num_blocks": 2,
            "dtype": None, "seed": 0}
    with pytest.raises(UnsatisfiedAssumption):
        checks.check_reshape_and_cache_flash(case)


def test_the_rocm_stand_in_answers_every_query_the_installed_function_imports():
    """Catches: vLLM 0.34.0's chunked_prefill_paged_decode, which also imports ``on_rdna`` from
    vllm.platforms.rocm, failing with "cannot import name 'on_rdna'" because the stand-in only
    knew the one name older releases import; and a non-query name answered "no" blindly."""
    def decode():
        from vllm.platforms.rocm import on_rdna, use_rocm_custom_paged_attention  # noqa: F401 - the import is what is tested

    def odd():
        from vllm.platforms.rocm import RocmPlatform  # noqa: F401 - the import is what is tested

    assert vk.rocm_queries(decode) == ["on_rdna", "use_rocm_custom_paged_attention"]
    with pytest.raises(vk.HarnessError, match="RocmPlatform"):
        vk.rocm_queries(odd)
