"""The installed vLLM's API, read from its own code: signatures, attributes, module contents.

The change log gives the API of the release the installed vLLM is driven as
(:func:`conformance.versions.installed_v1`). A source build or a newer release may differ from
it although its behaviour did not change; every field of :class:`~conformance.release_api.V1Api`,
:class:`~conformance.release_api.V0Api` and :class:`~conformance.release_api.KernelApi` that can
be read off the installed code is read here, and where the code says otherwise than the
log, the code wins and the difference is recorded (:func:`differences_seen`, reported by
``python -m conformance run``). Importing this module imports no vLLM; :func:`detect` does.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
from typing import Any

from conformance.release_api import KernelApi, V0Api, V1Api
from conformance.versions import HarnessError

_SEEN: dict[str, tuple[object, object]] = {}


def _parameters(function) -> set[str]:
    try:
        return set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return set()


def _required(function) -> set[str]:
    try:
        return {n for n, p in inspect.signature(function).parameters.items()
                if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    except (TypeError, ValueError):
        return set()


def multimodal_request_args(request_cls) -> tuple[str, ...]:
    """The multimodal parameters ``Request.__init__`` requires (the caller passes None for each).

    Their names moved: ``multi_modal_inputs`` (0.9.2, 0.10.0), ``multi_modal_kwargs`` (0.10.1,
    v0.10.1 vllm/v1/request.py:29-31); 0.10.2 requires none of them.
    """
    return tuple(sorted(n for n in _required(request_cls.__init__) if n.startswith("multi_modal_")))


def request_filler_args(request_cls) -> dict[str, Any]:
    """The arguments a text-only ``Request`` needs besides its id, tokens, sampling parameters,
    LoRA and salt, read from the installed signature: None for each required multimodal argument,
    ``prompt=None`` where the prompt text is required (before 0.8.5, v0.8.4 vllm/v1/request.py:23),
    ``pooling_params=None`` where it is a parameter (0.9.2 on), ``arrival_time=0.0`` where it is
    required (0.8.5.post1 and 0.9.0 require it, v0.9.0 vllm/v1/request.py:29; 0.9.1 has none,
    v0.9.1 vllm/v1/request.py:30-31; 0.9.2 on give it a default)."""
    filler: dict[str, Any] = dict.fromkeys(multimodal_request_args(request_cls), None)
    if "prompt" in _required(request_cls.__init__):
        filler["prompt"] = None
    if "pooling_params" in _parameters(request_cls.__init__):
        filler["pooling_params"] = None
    if "arrival_time" in _required(request_cls.__init__):
        filler["arrival_time"] = 0.0
    return filler


def _field_names(cls) -> set[str]:
    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls)}
    return _parameters(cls)  # msgspec / plain classes: the constructor's parameters


def _hashing_module(logged: str, needed: bool = True) -> str:
    """The module holding the block hash functions; ``needed`` False (0.8.0-0.8.2, which hash with
    the builtin hash only and have no ``sha256``) keeps the logged name when none has them."""
    for name in (logged, "vllm.utils.hashing", "vllm.utils"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "sha256"):
            return name
    if not needed:
        return logged
    raise HarnessError("neither vllm.utils.hashing nor vllm.utils has sha256 (the block hash functions)")


def detect(logged: V1Api) -> V1Api:
    """The V1 API of the installed code; ``logged`` supplies what the code does not show."""
    from vllm.v1.core import kv_cache_manager, kv_cache_utils
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig
    from vllm.v1.request import Request

    init, allocate, request = (_parameters(f) for f in (KVCacheManager.__init__, KVCacheManager.allocate_slots,
                                                          Request.__init__))
    if not init or not allocate or not request:
        raise HarnessError("could not read the signatures of KVCacheManager.__init__, "
                           "KVCacheManager.allocate_slots or Request.__init__")
    config_fields = _field_names(KVCacheConfig)
    has_coordinator = importlib.util.find_spec("vllm.v1.core.kv_cache_coordinator") is not None or \
        hasattr(kv_cache_manager, "get_kv_cache_coordinator")
    builtin_only = "caching_hash_algo" not in init and hasattr(KVCacheManager, "free_block_hashes")
    detected = dataclasses.replace(
        logged,
        hashing_module=_hashing_module(logged.hashing_module, needed=not builtin_only),
        spec_use_mla="use_mla" in _field_names(FullAttentionSpec),
        manager_hash_block_size_arg="hash_block_size" in init,
        manager_scheduler_block_size_arg="scheduler_block_size" in init,
        manager_watermark_arg="watermark" in init,
        request_eos_argument="eos_token_id" in request,
        allocate_has_scheduled_reqs="has_scheduled_reqs" in allocate,
        evict_blocks_method=hasattr(KVCacheManager, "evict_blocks"),
        # Before 0.10.1 the manager keeps the hashes and the scheduler drops them with
        # free_block_hashes; 0.8.0-0.8.2 have that without caching_hash_algo.
        manager_hashes_blocks=hasattr(KVCacheManager, "free_block_hashes"),
        manager_hash_algo_arg="caching_hash_algo" in init,
        manager_takes_kv_cache_config="kv_cache_config" in init,
        allocate_lookahead_arg="num_lookahead_tokens" in allocate,
        request_prompt_arg="prompt" in _required(Request.__init__),
        none_hash_init_function=hasattr(kv_cache_utils, "init_none_hash"),
        request_multimodal_args=bool(multimodal_request_args(Request)),
        manager_has_coordinator=has_coordinator,
        kv_config_tensors_dict="tensors" in config_fields and "kv_cache_tensors" not in config_fields,
        request_pooling_and_salt_args="cache_salt" in request,
    )
    return _noted(logged, detected)


def _noted(logged, detected):
    """``detected``, after recording each field where it differs from ``logged``."""
    for field in dataclasses.fields(type(logged)):
        was, now = getattr(logged, field.name), getattr(detected, field.name)
        if was != now:
            _SEEN[f"{type(logged).__name__}.{field.name}"] = (was, now)
    return detected


def detect_v0(logged: V0Api) -> V0Api:
    """The V0 API of the installed code (``group_status_per_sequence`` is the log's: it is a
    behaviour of ``SequenceGroup.get_seqs``, not visible in a signature)."""
    import vllm.inputs
    from vllm.core.block_manager import SelfAttnBlockSpaceManager

    return _noted(logged, dataclasses.replace(
        logged,
        sequence_token_inputs=hasattr(vllm.inputs, "token_inputs"),
        reset_prefix_cache=hasattr(SelfAttnBlockSpaceManager, "reset_prefix_cache"),
        num_cached_tokens=hasattr(SelfAttnBlockSpaceManager, "get_num_cached_tokens"),
    ))


def detect_kernels(logged: KernelApi, unified, paged2d, cache) -> KernelApi:
    """The Triton kernel API of the installed modules (None where absent). Whether the kernels mask
    their tail loads and the smallest buildable block size are the log's: they are not visible
    without running the kernels."""
    changes: dict[str, Any] = {}
    if unified is not None and hasattr(unified, "unified_attention"):
        changes["unified_split_k_args"] = "seq_threshold_3D" in _parameters(unified.unified_attention)
    if paged2d is not None:
        changes["paged_2d_rocm_check_bound_at_import"] = hasattr(paged2d, "use_rocm_custom_paged_attention")
    if paged2d is not None and hasattr(paged2d, "chunked_prefill_paged_decode"):
        changes["paged_2d_max_seq_len_arg"] = "max_seq_len" in _parameters(paged2d.chunked_prefill_paged_decode)
    if cache is not None:
        try:
            changes["cache_write_head_major"] = "USE_HEAD_MAJOR_LAYOUT" in inspect.getsource(cache)
        except (OSError, TypeError):
            pass
    package = next((m.__name__.rsplit(".", 1)[0] for m in (unified, paged2d, cache) if m is not None), None)
    if package is not None:
        changes["ops_package"] = package
    return _noted(logged, dataclasses.replace(logged, **changes))


def differences_seen() -> dict[str, dict[str, Any]]:
    """Fields (``Record.field``) where the installed code differed from the change log, in this process."""
    return {name: {"change_log": was, "installed_code": now} for name, (was, now) in sorted(_SEEN.items())}


def cached_block_ids(table) -> list[tuple[Any, list[int]]]:
    """(key, block ids) for every entry of a ``BlockPool.cached_block_hash_to_block`` map.

    The map's shape is read from the values it holds, not from the version: a plain dict of
    ``{key: {block_id: block}}`` (before 0.11), a ``BlockHashToBlockMap`` wrapping ``_cache`` whose
    values are a block or a ``{block_id: block}`` dict (0.11 .. 0.33), or one whose ``_cache`` maps
    a key to one block id with every id of a key cached by several blocks, in insertion order, in
    ``_dup_ids`` (0.34). Anything else is a :class:`HarnessError` naming what was found.
    """
    raw = getattr(table, "_cache", table)
    if not isinstance(raw, dict):
        raise HarnessError(f"BlockPool.cached_block_hash_to_block is a {type(table).__name__} without a dict "
                           "(looked for the map itself or its _cache)")
    duplicates = getattr(table, "_dup_ids", None)
    entries = []
    for key, value in raw.items():
        if isinstance(value, int) and not isinstance(value, bool):
            ids = list(duplicates[key]) if duplicates and key in duplicates else [value]
        elif isinstance(value, dict):
            ids = list(value)
        elif hasattr(value, "block_id"):
            ids = [value.block_id]
        else:
            raise HarnessError(f"a prefix-cache map entry holds a {type(value).__name__}; expected a block, "
                               "a block id, or a dict of block ids")
        if ids:
            entries.append((key, ids))
    return entries
