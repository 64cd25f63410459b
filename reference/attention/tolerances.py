"""How close a kernel's output must be to the fp32 oracle, per dtype.

Paged kernels sum in a different order than the oracle and (for fp16/bf16) round probabilities
and outputs to the activation dtype, so outputs are compared with ``torch.testing.assert_close``
tolerances rather than bit for bit. The values follow vLLM's own kernel tests:

* fp32 and fp16 use vLLM's defaults (v0.33.0 tests/kernels/allclose_default.py:
  ``default_atol`` / ``default_rtol``);
* bf16 uses the absolute tolerance of vLLM's unified-attention test
  (v0.33.0 tests/kernels/attention/test_triton_unified_attention.py:787, ``atol=1.5e-2``) with
  the bf16 default relative tolerance: one bf16 ulp at magnitude 2 is 1.6e-2, and outputs of
  attention over N(0, 1) values reach that size.

Cache writes are copies and are compared bit for bit (``torch.equal``).
"""

from __future__ import annotations

import torch

#: dtype -> (atol, rtol) for attention outputs against the oracle.
ATTENTION_TOLERANCE = {
    torch.float32: (1e-5, 1.3e-6),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1.5e-2, 1.6e-2),
}


def assert_attention_close(actual: torch.Tensor, expected: torch.Tensor, what: str = "") -> None:
    """Assert two attention outputs agree within the tolerance of ``expected.dtype``."""
    atol, rtol = ATTENTION_TOLERANCE[expected.dtype]
    torch.testing.assert_close(actual.float(), expected.float(), atol=atol, rtol=rtol,
                               equal_nan=False, msg=lambda m: f"{what}: {m}" if what else m)
