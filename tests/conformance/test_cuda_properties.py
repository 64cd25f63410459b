"""What the CUDA kernel properties ask vLLM's compiled operators, without a GPU (the operators and
the checks are stood in for; only the property's own loop runs)."""

from __future__ import annotations

import pytest
import torch

from conformance.gpu import cuda_checks
from conformance.kernels import properties


@pytest.mark.reference_only
def test_the_flash_write_property_checks_both_stride_branches(monkeypatch):
    """Catches: `kernel.cuda.reshape_and_cache_flash` writing only token-major rows, where the
    kernel's head-major branch (v0.10.2 csrc/cache_kernels.cu L328-L353, linked from its note) is
    never taken, while the classic write keeps its one layout."""
    seen: list[str] = []
    monkeypatch.setattr(properties, "_cuda_ops", lambda op: object())
    monkeypatch.setattr(cuda_checks, "check_cache_write", lambda ops, layout, *rest: seen.append(layout))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "stand-in")
    assert properties._cuda_property("flash")(1).passed
    assert set(seen) == {"flash", "flash_hnd"} and seen.count("flash") == seen.count("flash_hnd")
    seen.clear()
    assert properties._cuda_property("classic")(1).passed
    assert set(seen) == {"classic"}
