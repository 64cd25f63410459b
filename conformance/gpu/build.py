"""Compile our launcher (``launcher.cu``) against an unpacked vLLM v0.10.2 ``csrc/`` directory.

The borrowed GPU machine has torch, nvcc and ninja but no vLLM and no package registry, so the
kernels are built from the pinned sources carried along (the sdist's ``csrc/``, obtained on the
workstation by the annotations fetcher). Only the configurations in ``cuda_checks`` are
instantiated, for the local GPU's architecture only, which keeps the build to a minute or two.
"""

from __future__ import annotations

import os
from pathlib import Path

LAUNCHER = Path(__file__).with_name("launcher.cu")
REQUIRED = ("attention/attention_kernels.cuh", "cache_kernels.cu", "cuda_compat.h")


def check_csrc(csrc: Path) -> Path:
    """Return ``csrc`` if it looks like vLLM's kernel sources, else raise ValueError saying why."""
    csrc = Path(csrc)
    missing = [p for p in REQUIRED if not (csrc / p).is_file()]
    if missing:
        raise ValueError(f"--csrc {csrc}: not an unpacked vLLM csrc/ directory "
                         f"(missing {', '.join(missing)})")
    return csrc


def nvcc_flags() -> list[str]:
    """Device-code flags: optimised, C++17, and the fast-math vLLM's own build uses."""
    return ["-O3", "-std=c++17", "--use_fast_math", "-U__CUDA_NO_HALF_OPERATORS__",
            "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
            "-U__CUDA_NO_HALF2_OPERATORS__"]


def build(csrc: Path, build_dir: Path, verbose: bool = False):
    """Compile and import the extension; returns the module (ops with vLLM's signatures)."""
    import torch
    from torch.utils.cpp_extension import load

    csrc = check_csrc(csrc)
    major, minor = torch.cuda.get_device_capability()
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", f"{major}.{minor}")
    build_dir.mkdir(parents=True, exist_ok=True)
    return load(name="pastudy_vllm_kernels", sources=[str(LAUNCHER)],
                extra_include_paths=[str(csrc)], extra_cuda_cflags=nvcc_flags(),
                extra_cflags=["-O3", "-std=c++17"], build_directory=str(build_dir),
                verbose=verbose)
