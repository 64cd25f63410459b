"""Running vLLM's own attention kernels on this machine, with the narrowest possible shims.

vLLM's Triton kernels are ordinary ``@triton.jit`` functions and run on CPU tensors under the
Triton interpreter (``TRITON_INTERPRET=1``). Three things stand in the way on a machine without a
GPU, and each gets one narrow, temporary shim here:

1. ``vllm/triton_utils/importing.py`` looks for an active Triton driver when vLLM is imported;
   finding none, it swaps ``@triton.jit`` for a placeholder whose kernels silently do nothing.
   With ``TRITON_INTERPRET=1`` *and* ``CUDA_VISIBLE_DEVICES=""`` set before the import (and
   before Triton itself is first imported), the real decorator is kept. :func:`prepare` sets
   both, or refuses when Triton is already loaded without them, and :func:`kernels` refuses to
   hand out a kernel that is not an interpreted one.
2. ``chunked_prefill_paged_decode`` imports ``vllm.platforms.rocm`` at call time to ask whether a
   ROCm-only kernel should be used (and, from 0.34.0, whether the GPU is RDNA); importing that
   module queries the CUDA device and fails. :func:`_no_rocm_query` installs, for the duration of
   one call, a stand-in module whose functions -- exactly the names the installed function imports
   from it, read from its source -- answer "no", the answer a non-ROCm platform gives. Before 0.10 the module
   binds that function when it is imported, and the function asks the CUDA device for its
   architecture; :func:`_no_bound_rocm_query` gives the same answer there for one call.
3. ``triton_reshape_and_cache_flash`` (v0.33.0) asks ``torch.cuda.get_device_capability`` to size
   its tiles. :func:`_answer_capability` answers ``(9, 0)`` for the duration of one call.

Every wrapper poisons its output with NaN first, so a kernel that did not run is caught by the
caller (see ``conformance.kernels.checks``). Importing this module imports neither vLLM nor torch's
CUDA; vLLM is imported on first use.
"""

from __future__ import annotations

import contextlib
import os
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass

import torch

from conformance.adapters.installed_api import detect_kernels
from conformance.lockstep import NotApplicable
from conformance.release_api import KernelApi
from conformance.versions import HarnessError


def prepare() -> None:
    """Set the two environment variables vLLM's Triton kernels need on a CPU-only machine.

    Both must be in place before the first import of Triton (its own library functions are
    decorated when ``triton.language`` loads) and of vLLM. Call this first; it refuses, with a
    clear message, when it is already too late.
    """
    if torch.cuda.is_available():
        return
    if os.environ.get("TRITON_INTERPRET") != "1":
        if "triton" in sys.modules:
            raise RuntimeError(
                "Triton was imported before TRITON_INTERPRET=1 was set, so its kernels cannot run "
                "on this GPU-less machine: set TRITON_INTERPRET=1 (and CUDA_VISIBLE_DEVICES='') "
                "in the environment, or call conformance.adapters.vllm_kernels.prepare() first")
        os.environ["TRITON_INTERPRET"] = "1"
    if "vllm" not in sys.modules:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""


def installed_version() -> str:
    """The installed vLLM's release (see :func:`conformance.versions.installed_vllm_version`).

    Raises NotApplicable when vLLM is not installed.
    """
    from conformance.versions import installed_vllm_version

    version = installed_vllm_version()
    if version is None:
        raise NotApplicable("vLLM is not installed in this environment")
    return version


@dataclass
class VllmKernels:
    """vLLM's kernel entry points that exist in the installed version (None where absent)."""

    version: str
    api: KernelApi  # where the kernels live and how they behave (conformance.versions)
    unified_attention: Callable | None
    chunked_prefill_paged_decode: Callable | None
    reshape_and_cache_flash: Callable | None
    jit_objects: dict  # name -> the @triton.jit object, to prove it is a real kernel


_CACHE: dict[str, VllmKernels] = {}


def _import(name: str):
    """The module, None where the release has no such module; HarnessError if importing fails."""
    import importlib
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name is not None and name.startswith(err.name):
            return None  # the release has no such module
        raise HarnessError(f"importing {name} failed: {type(err).__name__}: {err}") from err
    except Exception as err:  # e.g. a dependency newer than the release breaks vLLM's import
        raise HarnessError(f"importing {name} failed: {type(err).__name__}: {err}") from err


def kernels() -> VllmKernels:
    """Import vLLM's kernel modules (once) and check that their kernels are real."""
    if "k" in _CACHE:
        return _CACHE["k"]
    from conformance.versions import installed_kernels

    target, api = installed_kernels()
    version = target.installed
    prepare()
    names = ("triton_unified_attention", "chunked_prefill_paged_decode", "triton_reshape_and_cache_flash")
    # The logged package first, then the other one: a source build may have moved the ops.
    for package in dict.fromkeys((api.ops_package, "vllm.v1.attention.ops", "vllm.attention.ops")):
        unified, paged2d, cache = (_import(f"{package}.{m}") for m in names)
        if (unified, paged2d, cache) != (None, None, None):
            break
    api = detect_kernels(api, unified, paged2d, cache)
    jit = {}
    if unified is not None:
        jit["unified"] = getattr(unified, "kernel_unified_attention", None) or \
            unified.kernel_unified_attention_2d
    if paged2d is not None:
        jit["paged2d"] = paged2d.kernel_paged_attention_2d
    if cache is not None and hasattr(cache, "reshape_and_cache_kernel_flash"):
        jit["cache"] = cache.reshape_and_cache_kernel_flash
    for name, obj in jit.items():
        kind = type(obj).__name__
        if kind not in ("InterpretedFunction", "JITFunction"):
            raise RuntimeError(
                f"vLLM's {name} kernel is a {kind}, not a Triton kernel: vLLM was imported "
                "without TRITON_INTERPRET=1 and CUDA_VISIBLE_DEVICES='' on a machine with no GPU, "
                "so its @triton.jit was replaced by a placeholder")
    found = VllmKernels(
        version=version,
        api=api,
        unified_attention=getattr(unified, "unified_attention", None),
        chunked_prefill_paged_decode=getattr(paged2d, "chunked_prefill_paged_decode", None),
        reshape_and_cache_flash=getattr(cache, "triton_reshape_and_cache_flash", None),
        jit_objects=jit,
    )
    _CACHE["k"] = found
    return found


@contextlib.contextmanager
def _no_rocm_query(k: VllmKernels):
    """While active, ``import vllm.platforms.rocm`` yields a stand-in whose every query that the
    installed ``chunked_prefill_paged_decode`` imports from it answers "no" (:func:`rocm_queries`)."""
    name = "vllm.platforms.rocm"
    if name in sys.modules or torch.cuda.is_available():
        yield
        return
    stand_in = types.ModuleType(name)
    for query in rocm_queries(k.chunked_prefill_paged_decode):
        setattr(stand_in, query, lambda *args, **kwargs: False)
    sys.modules[name] = stand_in
    try:
        yield
    finally:
        if sys.modules.get(name) is stand_in:
            del sys.modules[name]


def rocm_queries(function) -> list[str]:
    """The names ``function`` imports from ``vllm.platforms.rocm``, read from its source.

    Each must be a yes/no question about the platform (``use_*``, ``on_*``, ``is_*``), which a
    non-ROCm platform answers "no"; anything else is a :class:`HarnessError` naming it, so a new
    kind of import is looked at instead of answered blindly.
    """
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError) as err:
        raise HarnessError(f"cannot read the source of {function.__name__} to see what it imports from "
                           f"vllm.platforms.rocm: {err}") from None
    names = sorted({alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and node.module == "vllm.platforms.rocm" for alias in node.names})
    odd = [n for n in names if not n.startswith(("use_", "on_", "is_"))]
    if odd:
        raise HarnessError(f"{function.__name__} imports {', '.join(odd)} from vllm.platforms.rocm, which is not "
                           "a yes/no platform query this harness knows how to answer on a CPU")
    return names or ["use_rocm_custom_paged_attention"]


@contextlib.contextmanager
def _no_bound_rocm_query(k: VllmKernels):
    """The same answer where the module bound the ROCm check at import
    (``KernelApi.paged_2d_rocm_check_bound_at_import``): that check asks the CUDA device for its
    architecture name and fails on a machine without one."""
    if not k.api.paged_2d_rocm_check_bound_at_import or torch.cuda.is_available():
        yield
        return
    module = sys.modules[k.chunked_prefill_paged_decode.__module__]
    original = module.use_rocm_custom_paged_attention
    module.use_rocm_custom_paged_attention = lambda *args, **kwargs: False
    try:
        yield
    finally:
        module.use_rocm_custom_paged_attention = original


@contextlib.contextmanager
def _answer_capability(capability=(9, 0)):
    """While active on a GPU-less machine, ``torch.cuda.get_device_capability`` returns a value."""
    if torch.cuda.is_available():
        yield
        return
    original = torch.cuda.get_device_capability
    torch.cuda.get_device_capability = lambda *args, **kwargs: capability
    try:
        yield
    finally:
        torch.cuda.get_device_capability = original


def _ones(device) -> torch.Tensor:
    return torch.ones(1, dtype=torch.float32, device=device)


def unified_attention(query, key_cache, value_cache, block_tables, query_start_loc, seq_lens,
                      scale, alibi_slopes=None, window_left=-1, softcap=0.0,
                      segments: int | None = None) -> torch.Tensor:
    """vLLM's ``unified_attention`` on a flash-layout cache; returns a fresh output tensor.

    ``segments`` asks for the split-K ("3D") path with that many segments per sequence, which
    vLLM takes for decode-only batches; only releases whose ``KernelApi.unified_split_k_args``
    is set take it (older ones pick their 3D path on their own).
    """
    k = kernels()
    if k.unified_attention is None:
        raise NotApplicable(f"vLLM {k.version} has no Triton unified_attention")
    out = torch.full_like(query, float("nan"))
    starts = query_start_loc.tolist()
    max_q = max(b - a for a, b in zip(starts, starts[1:]))
    kwargs = dict(
        q=query, k=key_cache, v=value_cache, out=out, cu_seqlens_q=query_start_loc,
        max_seqlen_q=max_q, seqused_k=seq_lens, max_seqlen_k=int(seq_lens.max()),
        softmax_scale=scale, causal=True,
        window_size=(window_left, 0) if window_left >= 0 else (-1, -1),
        block_table=block_tables, softcap=softcap, q_descale=None,
        k_descale=_ones(query.device), v_descale=_ones(query.device), alibi_slopes=alibi_slopes,
    )
    if segments is not None:
        if not k.api.unified_split_k_args:
            raise ValueError(f"vLLM {k.version}'s unified_attention takes no split-K arguments")
        num_tokens, num_heads, head_size = query.shape
        padded = 1 << (head_size - 1).bit_length()
        kwargs.update(
            seq_threshold_3D=1 << 20, num_par_softmax_segments=segments,
            softmax_segm_output=torch.empty((num_tokens, num_heads, segments, padded),
                                            dtype=torch.float32, device=query.device),
            softmax_segm_max=torch.empty((num_tokens, num_heads, segments),
                                         dtype=torch.float32, device=query.device),
            softmax_segm_expsum=torch.empty((num_tokens, num_heads, segments),
                                            dtype=torch.float32, device=query.device),
        )
    k.unified_attention(**kwargs)
    return out


def paged_attention_2d(query, key_cache, value_cache, block_tables, seq_lens, scale,
                       alibi_slopes=None) -> torch.Tensor:
    """vLLM's ``kernel_paged_attention_2d`` (classic layout) through ``chunked_prefill_paged_decode``.

    Decode-only: one query token per sequence, so vLLM's prefill half (``context_attention_fwd``)
    is skipped and every sequence goes through the 2D paged kernel.
    """
    k = kernels()
    if k.chunked_prefill_paged_decode is None:
        raise NotApplicable(f"vLLM {k.version} has no chunked_prefill_paged_decode")
    num_seqs, _, head_size = query.shape
    num_kv_heads = key_cache.shape[1]
    out = torch.full_like(query, float("nan"))
    new_kv = torch.zeros((num_seqs, num_kv_heads, head_size), dtype=query.dtype,
                         device=query.device)  # the step's own K/V: already in the cache
    # 0.8.0-0.8.2 take no max_seq_len (KernelApi.paged_2d_max_seq_len_arg)
    longest = {"max_seq_len": int(seq_lens.max())} if k.api.paged_2d_max_seq_len_arg else {}
    with _no_rocm_query(k), _no_bound_rocm_query(k):
        k.chunked_prefill_paged_decode(
            query=query, key=new_kv, value=new_kv.clone(), output=out, kv_cache_dtype="auto",
            key_cache=key_cache, value_cache=value_cache, block_table=block_tables,
            query_start_loc=torch.arange(num_seqs + 1, dtype=torch.int32, device=query.device),
            seq_lens=seq_lens, max_query_len=1, **longest,
            k_scale=_ones(query.device), v_scale=_ones(query.device),
            alibi_slopes=alibi_slopes, sliding_window=None, sm_scale=scale,
        )
    return out


def reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping) -> None:
    """vLLM's Triton cache write (v0.33.0); writes the caches in place.

    It accepts both the flash layout and, through its head-major path, the classic 5-D layout.
    """
    k = kernels()
    if k.reshape_and_cache_flash is None:
        raise NotApplicable(f"vLLM {k.version} has no Triton reshape_and_cache_flash")
    with _answer_capability():
        k.reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping, "auto",
                                  _ones(key.device), _ones(key.device))
