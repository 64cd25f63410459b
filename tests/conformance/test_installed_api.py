"""Reading the installed vLLM's V1 code: the prefix-cache map's shape, read from its values."""

from __future__ import annotations

import types

import pytest

from conformance.adapters.installed_api import cached_block_ids, multimodal_request_args
from conformance.versions import HarnessError


def block(i: int):
    return types.SimpleNamespace(block_id=i)


class Map033:
    """0.11 .. 0.33's BlockHashToBlockMap: ``_cache`` maps a key to a block or {block_id: block}."""

    def __init__(self):
        self._cache = {b"k1": block(3), b"k2": {5: block(5), 2: block(2)}, b"k3": {}}


class Map034:
    """0.34's: ``_cache`` maps a key to one block id; ``_dup_ids`` keeps every id of a key cached
    by several blocks, in insertion order (v0.34.0 vllm/v1/core/block_pool.py:56-104)."""

    def __init__(self):
        self._blocks = [block(i) for i in range(8)]
        self._cache = {b"k1": 3, b"k2": 5}
        self._dup_ids = {b"k2": {5: None, 2: None}}


def test_a_map_holding_block_ids_snapshots_like_one_holding_blocks():
    """Catches: 0.34.0's id-valued map read as blocks ("'int' object has no attribute 'block_id'",
    which stopped every V1 machine), or its duplicates lost (only the first id of a key)."""
    assert cached_block_ids(Map034()) == cached_block_ids(Map033()) == [(b"k1", [3]), (b"k2", [5, 2])]


def test_a_plain_dict_before_0_11_is_read_too():
    """Catches: the pre-0.11 map (a plain dict of {block_id: block}) no longer read."""
    assert cached_block_ids({b"k": {4: block(4), 1: block(1)}}) == [(b"k", [4, 1])]


def test_an_unknown_shape_is_a_harness_error_naming_what_it_found():
    """Catches: a map of another shape silently snapshotted as empty (the machines would compare
    an empty prefix cache on both sides of nothing)."""
    odd = types.SimpleNamespace(_cache={b"k": "three"})
    with pytest.raises(HarnessError, match="holds a str"):
        cached_block_ids(odd)
    with pytest.raises(HarnessError, match="without a dict"):
        cached_block_ids(types.SimpleNamespace(_cache=[1, 2]))


class Request092:
    """0.9.2 and 0.10.0's Request: three required multimodal arguments (v0.9.2 vllm/v1/request.py:23-39)."""

    def __init__(self, request_id, prompt_token_ids, multi_modal_inputs, multi_modal_hashes,
                 multi_modal_placeholders, sampling_params, eos_token_id, lora_request=None):
        pass


class Request0101:
    """0.10.1's: the first renamed multi_modal_kwargs (v0.10.1 vllm/v1/request.py:29-31)."""

    def __init__(self, request_id, prompt_token_ids, multi_modal_kwargs, multi_modal_hashes,
                 multi_modal_placeholders, sampling_params, eos_token_id, block_hasher=None):
        pass


class Request0102:
    """0.10.2's: one optional mm_features list (v0.10.2 vllm/v1/request.py:34)."""

    def __init__(self, request_id, prompt_token_ids, sampling_params, eos_token_id, mm_features=None):
        pass


def test_the_multimodal_arguments_a_request_requires_are_read_by_name():
    """Catches: the adapter passing 0.9.2's multi_modal_inputs to 0.10.1's Request, which requires
    multi_modal_kwargs instead (a TypeError on every request), or passing any to 0.10.2's."""
    assert multimodal_request_args(Request092) == (
        "multi_modal_hashes", "multi_modal_inputs", "multi_modal_placeholders")
    assert multimodal_request_args(Request0101) == (
        "multi_modal_hashes", "multi_modal_kwargs", "multi_modal_placeholders")
    assert multimodal_request_args(Request0102) == ()


def test_kernel_api_is_read_from_the_installed_modules():
    """Catches: a source build that moved its Triton ops or added the split-K arguments driven with
    the change log's values for the release it is driven as (wrong package, missing arguments)."""
    import dataclasses

    from conformance.adapters.installed_api import detect_kernels, differences_seen
    from conformance.changelog import api_at

    logged = api_at("0.10.2").kernels
    unified = types.ModuleType("vllm.v1.attention.ops.triton_unified_attention")
    unified.unified_attention = lambda q, k, v, seq_threshold_3D=None: None
    paged2d = types.ModuleType("vllm.v1.attention.ops.chunked_prefill_paged_decode")
    got = detect_kernels(logged, unified, paged2d, None)
    assert got == dataclasses.replace(logged, ops_package="vllm.v1.attention.ops", unified_split_k_args=True)
    assert differences_seen()["KernelApi.ops_package"] == {"change_log": "vllm.attention.ops",
                                                           "installed_code": "vllm.v1.attention.ops"}
