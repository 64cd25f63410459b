"""Where the GPU lane's vLLM CUDA ops come from: the installed vLLM, or our launcher built from
the pinned v0.10.2 sources. The one place both ``run.py`` and ``bench.py`` load them from.

``ops`` is any object with vLLM's ``_custom_ops`` signatures for ``paged_attention_v1/v2`` and
``reshape_and_cache(_flash)``. Modes: ``vllm`` (``vllm._custom_ops``; the CUDA paged attention
exists up to v0.10.2), ``build`` (compile ``launcher.cu``, cached by content, see ``build.py``),
``auto`` (``vllm`` when it has the ops, else ``build``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MODES = ("auto", "vllm", "build")


@dataclass
class LoadedOps:
    """The ops and a sentence on their origin (for the report)."""

    ops: object
    source: str
    build: dict | None = None  # the build's key, folder, compile seconds, cached or not


def vllm_ops():
    """``vllm._custom_ops`` when it imports and has the CUDA paged-attention ops, else None."""
    try:
        from vllm import _custom_ops as ops
    except Exception:  # noqa: BLE001 - any import failure means "not usable here"
        return None
    return ops if hasattr(ops, "paged_attention_v1") else None


def device_arch() -> str:
    """The visible GPU's compute capability as ``"9.0"``."""
    import torch

    major, minor = torch.cuda.get_device_capability()
    return f"{major}.{minor}"


def load_ops(mode: str = "auto", csrc: Path | None = None, cache: Path | None = None,
             arch: str | None = None) -> LoadedOps:
    """The ops for ``mode``; raises RuntimeError saying why when they cannot be had."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
    if mode in ("auto", "vllm"):
        ops = vllm_ops()
        if ops is not None:
            import vllm

            return LoadedOps(ops, f"vllm {vllm.__version__} _custom_ops")
        if mode == "vllm":
            raise RuntimeError("--mode vllm: vllm._custom_ops with paged_attention_v1 is not "
                               "available")
    from conformance.gpu import build
    from conformance.gpu.csrc import check_csrc, pinned_csrc

    if csrc is not None:
        source = check_csrc(csrc)
    else:
        try:
            source = pinned_csrc()
        except Exception as err:  # no cached sdist and no index (a bare GPU box)
            raise RuntimeError(f"the pinned vLLM v0.10.2 csrc/ is not available here ({err}): "
                               "pass --csrc PATH or set PASTUDY_VLLM_CSRC") from err
    built = build.build(source, arch or device_arch(), cache)
    how = "cached build" if built.cached else f"compiled in {built.seconds:.0f} s"
    return LoadedOps(built.module, f"launcher built from {source} ({how})",
                     {"key": built.key, "folder": str(built.folder), "cached": built.cached,
                      "compile_seconds": round(built.seconds, 1)})
