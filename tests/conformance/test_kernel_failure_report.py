"""A kernel property's failure: one shrunk case, the largest difference, divergence vs harness error."""

from __future__ import annotations

import types

import pytest
import torch
from hypothesis import strategies as st

from conformance.adapters import vllm_kernels as vk
from conformance.kernels import checks, properties
from reference.attention.tolerances import assert_attention_close


@pytest.fixture
def fake_vllm(monkeypatch):
    monkeypatch.setattr(vk, "prepare", lambda: None)
    monkeypatch.setattr(vk, "installed_version", lambda: "0.0.0")
    monkeypatch.setattr(vk, "kernels", lambda: types.SimpleNamespace(version="0.0.0"))
    monkeypatch.setattr(checks, "forced_cases", lambda name: [])
    monkeypatch.setattr(checks, "fake_cases", st.fixed_dictionaries(
        {"lens": st.lists(st.integers(1, 64), min_size=1, max_size=3), "block_size": st.sampled_from([8, 16]),
         "seed": st.integers(0, 9)}), raising=False)


def run_with(monkeypatch, check):
    monkeypatch.setattr(checks, "fake_check", check, raising=False)
    return properties._run_hypothesis("fake_cases", "fake_check", 50, None)


def test_divergence_reports_one_shrunk_case_and_the_largest_difference(fake_vllm, monkeypatch):
    """Catches: 'ExceptionGroup: Hypothesis found 2 distinct failures' with no case, or a case
    that is not the shrunk one."""
    def check(case):
        got = torch.zeros(4)
        want = torch.zeros(4)
        if max(case["lens"]) > 20:
            want[2] = 1.0
        if case["block_size"] == 16:
            raise ValueError("a second, different failure")
        assert_attention_close(got, want, "vLLM vs oracle")

    result = run_with(monkeypatch, check)
    assert not result.passed
    assert "ExceptionGroup" not in result.detail
    assert result.detail.startswith("divergence on the shrunk case (lens=[21], block_size=8, seed=0)") or \
        result.detail.startswith("harness error on the shrunk case (lens=[1], block_size=16, seed=0)")
    if result.extra["failure"] == "divergence":
        assert "Greatest absolute difference: 1.0 at index (2,)" in result.detail


def test_a_kernel_that_cannot_be_driven_is_a_harness_error(fake_vllm, monkeypatch):
    """Catches: a harness that cannot call a release's kernel reported as vLLM disagreeing."""
    def check(case):
        raise TypeError("chunked_prefill_paged_decode() got an unexpected keyword argument 'x'")

    result = run_with(monkeypatch, check)
    assert result.extra["failure"] == "harness_error"
    assert result.detail.startswith("harness error on the shrunk case (lens=[1], block_size=8, seed=0): TypeError")


def test_a_kernel_that_did_not_run_is_a_harness_error(fake_vllm, monkeypatch):
    """Catches: an all-NaN output (the kernel never ran) counted as a divergence."""
    def check(case):
        raise checks.KernelDidNotRun("every output is still NaN")

    assert run_with(monkeypatch, check).extra["failure"] == "harness_error"


def test_a_vllm_that_fails_to_import_is_a_harness_error_not_a_crash(monkeypatch):
    """Catches: one property's import error (a too-new dependency breaking vLLM's import) ending
    the whole conformance command with no report."""
    import importlib

    def broken(name):
        raise ValueError("'aimv2' is already used by a Transformers config")

    monkeypatch.setattr(importlib, "import_module", broken)
    from conformance.versions import HarnessError

    with pytest.raises(HarnessError, match="importing vllm.x failed: ValueError"):
        vk._import("vllm.x")

    def failing(examples, steps=0, progress=None):
        vk._import("vllm.x")

    result = properties.harness_guarded(failing)(3)
    assert not result.passed and result.extra["failure"] == "harness_error" and "aimv2" in result.detail
