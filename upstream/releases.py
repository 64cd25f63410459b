"""The two pinned vLLM releases: the one home of both strings in the project's code.

Every reader takes them from here: the annotation checker and probe, the conformance machines and
the GPU lane, the benchmarks, the docs hooks, ``tests/conformance/pinned.py`` and ``scripts/test``
(``python -m upstream.releases`` prints both, oldest first). Data named by a release keeps its
name, and ``tests/test_pinned_releases.py`` ties it to these two: the environment locks
``requirements/vllm-<release>.txt`` and the annotation folders ``annotations/v<release>/``.

This module imports nothing, so any room (and a shell script) can read it.
"""

from __future__ import annotations

#: The last release with the V0 engine: its V0 block manager, its V1 manager as it then was, and
#: the CUDA paged-attention kernel sources (``csrc/``) that the notes annotate and the GPU lane builds.
V0_RELEASE = "0.10.2"
#: The V1 KV-cache manager and Triton kernels that the notes annotate.
V1_RELEASE = "0.33.0"
#: Both, oldest first.
PINNED = (V0_RELEASE, V1_RELEASE)


def policy_name(release: str) -> str:
    """How the reference names a release's policy: ``v0.33.0``."""
    return f"v{release}"


def lock_name(release: str) -> str:
    """The environment of a pinned release, ``requirements/<name>.txt``: ``vllm-0.33.0``."""
    return f"vllm-{release}"


if __name__ == "__main__":  # scripts/test: `read -r v0 v1 < <(python3 -m upstream.releases)`
    print(*PINNED)
