"""The installed vLLM's V1 ``KVCacheManager`` behind the lockstep op vocabulary.

The manager and its block pool are vLLM's own, built the way vLLM's unit tests build them
(tests/v1/core/test_prefix_caching.py: ``KVCacheConfig`` with ``FullAttentionSpec`` /
``SlidingWindowSpec`` groups of one-head float32 layers, requests made with
``get_request_block_hasher``). This adapter plays the scheduler: it creates ``Request``
objects, advances ``num_computed_tokens`` and ``status`` after a successful allocation, and
refuses the calls a scheduler would never make (the reference refuses the same ones, with the
same categories; vLLM itself trusts its caller and does not check).

vLLM is imported only when a system is built. Works with v0.33.0 and v0.10.2; the config's
``policy`` must name the installed release (see :func:`installed_policy_name`).
"""

from __future__ import annotations

import importlib.metadata
import os
from contextlib import contextmanager
from typing import Any
from unittest import mock

from conformance.adapters.reference_v1 import LORAS, config_entropy, hex_or_none
from conformance.lockstep import NotApplicable, OpError

SUPPORTED = {"0.33.0": "v0.33.0", "0.10.2": "v0.10.2"}


def installed_vllm_version() -> str | None:
    """The installed vLLM's version string, read from package metadata (vLLM is not imported)."""
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return None


def installed_policy_name() -> str:
    """The reference policy name matching the installed vLLM; NotApplicable when there is none."""
    version = installed_vllm_version()
    if version is None:
        raise NotApplicable("vLLM is not installed in this environment")
    base = version.split("+")[0]
    if base not in SUPPORTED:
        raise NotApplicable(f"vLLM {version} has no V1 reference policy (supported: {sorted(SUPPORTED)})")
    return SUPPORTED[base]


@contextmanager
def _seeded_environment(pythonhashseed: str | None, entropy: bytes):
    """PYTHONHASHSEED set (or unset) and ``os.urandom`` fixed while vLLM seeds NONE_HASH."""
    saved = os.environ.get("PYTHONHASHSEED")
    if pythonhashseed is None:
        os.environ.pop("PYTHONHASHSEED", None)
    else:
        os.environ["PYTHONHASHSEED"] = pythonhashseed
    try:
        with mock.patch("os.urandom", lambda n: entropy[:n]):
            yield
    finally:
        if saved is None:
            os.environ.pop("PYTHONHASHSEED", None)
        else:
            os.environ["PYTHONHASHSEED"] = saved


class VllmV1System:
    """vLLM's own KVCacheManager, one ``Request`` object per live request."""

    label = "vllm"

    def __init__(self, config: dict) -> None:
        policy_name = installed_policy_name()
        if config["policy"] != policy_name:
            raise NotApplicable(f"config is for vLLM {config['policy']}, installed is {policy_name}")
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
        self.new_api = policy_name == "v0.33.0"
        self.config = config
        self.block_size = config["block_size"]
        self.max_model_len = config["max_model_len"]
        self._import_vllm()
        self.hash_fn = self.hashing.sha256 if config.get("hash_fn", "sha256") == "sha256" else self.hashing.sha256_cbor
        with _seeded_environment(config.get("pythonhashseed"), config_entropy(config)):
            self.kv_utils.init_none_hash(self.hash_fn)
        self.none_hash = bytes(self.kv_utils.NONE_HASH)
        self.manager = self._build_manager()
        self.requests: dict[str, Any] = {}
        self.pending_hits: dict[str, tuple[Any, int, int]] = {}  # req -> (KVCacheBlocks, length, stamp)
        self.stamp = 0

    # -- construction -------------------------------------------------------------------------
    def _import_vllm(self) -> None:
        import torch

        import vllm.v1.core.kv_cache_utils as kv_utils
        from vllm.lora.request import LoRARequest
        from vllm.sampling_params import SamplingParams
        from vllm.v1.core.kv_cache_manager import KVCacheManager
        from vllm.v1.kv_cache_interface import (
            FullAttentionSpec,
            KVCacheConfig,
            KVCacheGroupSpec,
            SlidingWindowSpec,
        )
        from vllm.v1.request import Request, RequestStatus

        if self.new_api:
            import vllm.utils.hashing as hashing
        else:
            import vllm.utils as hashing
        self.torch, self.kv_utils, self.hashing = torch, kv_utils, hashing
        self.LoRARequest, self.SamplingParams, self.Request, self.RequestStatus = (
            LoRARequest, SamplingParams, Request, RequestStatus,
        )
        self.KVCacheManager, self.KVCacheConfig, self.KVCacheGroupSpec = KVCacheManager, KVCacheConfig, KVCacheGroupSpec
        self.FullAttentionSpec, self.SlidingWindowSpec = FullAttentionSpec, SlidingWindowSpec

    def _spec(self, group: dict):
        common = dict(block_size=self.block_size, num_kv_heads=1, head_size=1, dtype=self.torch.float32)
        if not self.new_api:
            common["use_mla"] = False
        if group["kind"] == "full":
            return self.FullAttentionSpec(**common)
        return self.SlidingWindowSpec(**common, sliding_window=group["window"])

    def _build_manager(self):
        groups = [self.KVCacheGroupSpec([f"layer{i}"], self._spec(g)) for i, g in enumerate(self.config["groups"])]
        kv_config = self.KVCacheConfig(num_blocks=self.config["num_blocks"], kv_cache_tensors=[], kv_cache_groups=groups)
        kwargs: dict[str, Any] = dict(max_model_len=self.max_model_len, enable_caching=self.config.get("enable_caching", True))
        if self.new_api:
            kwargs.update(scheduler_block_size=self.block_size, hash_block_size=self.block_size,
                          watermark=self.config.get("watermark", 0.0))
        elif self.config.get("watermark", 0.0):
            raise NotApplicable("vLLM 0.10.2 has no watermark")
        return self.KVCacheManager(kv_config, **kwargs)

    def _make_request(self, request_id: str, tokens: list[int], salt: str | None, lora: str | None):
        lora_request = None
        if lora is not None:
            name, int_id, path = LORAS[lora]
            lora_request = self.LoRARequest(lora_name=name, lora_int_id=int_id, lora_path=path)
        hasher = self.kv_utils.get_request_block_hasher(self.block_size, self.hash_fn)
        params = self.SamplingParams(max_tokens=17)
        if self.new_api:
            params.update_from_generation_config({}, eos_token_id=100)
            return self.Request(request_id=request_id, prompt_token_ids=tokens, sampling_params=params,
                                pooling_params=None, lora_request=lora_request, cache_salt=salt,
                                block_hasher=hasher)
        return self.Request(request_id=request_id, prompt_token_ids=tokens, sampling_params=params,
                            pooling_params=None, eos_token_id=100, lora_request=lora_request,
                            cache_salt=salt, block_hasher=hasher)

    # -- the scheduler's checks (the reference makes the same refusals) -----------------------
    def _request(self, request_id: str):
        if request_id not in self.requests:
            raise OpError("unknown_request", f"unknown request {request_id!r}")
        return self.requests[request_id]

    def _check_tokens(self, tokens: Any, already: int) -> list[int]:
        ok = isinstance(tokens, list) and tokens and all(
            isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in tokens)
        if not ok or already + len(tokens) > self.max_model_len:
            raise OpError("invalid_argument", f"bad token list {tokens!r}")
        return list(tokens)

    def _status(self, request) -> str:
        names = {self.RequestStatus.WAITING: "waiting", self.RequestStatus.RUNNING: "running",
                 self.RequestStatus.PREEMPTED: "preempted"}
        return names[request.status]

    # -- ops ----------------------------------------------------------------------------------
    def apply(self, op: dict) -> Any:
        kind = op["op"]
        if kind == "get_computed_blocks":
            request = self._request(op["req"])
            found = self.manager.get_computed_blocks(request)
            blocks, length = found[0], found[1]
            self.pending_hits[op["req"]] = (blocks, length, self.stamp)
            return {"block_ids": [list(ids) for ids in blocks.get_block_ids()], "num_computed_tokens": length}
        handler = getattr(self, "_op_" + kind, None)
        if handler is None:
            raise OpError("invalid_argument", f"unknown op {kind!r}")
        return handler(op)

    def _op_add_request(self, op: dict) -> None:
        request_id = op["req"]
        if not isinstance(request_id, str) or request_id in self.requests:
            raise OpError("invalid_argument", f"request id {request_id!r} is not new")
        tokens = self._check_tokens(op["tokens"], 0)
        if op.get("lora") is not None and op["lora"] not in LORAS:
            raise OpError("invalid_argument", f"unknown LoRA {op['lora']!r}")
        self.stamp += 1
        self.requests[request_id] = self._make_request(request_id, tokens, op.get("salt"), op.get("lora"))

    def _op_append_tokens(self, op: dict) -> None:
        request = self._request(op["req"])
        if request.status != self.RequestStatus.RUNNING or request.num_computed_tokens != request.num_tokens:
            raise OpError("invalid_argument", "request has uncomputed tokens or is not running")
        tokens = self._check_tokens(op["tokens"], request.num_tokens)
        self.stamp += 1
        request.append_output_token_ids(tokens)

    def _op_allocate_slots(self, op: dict) -> list[list[int]] | None:
        request_id = op["req"]
        request = self._request(request_id)
        n, lookahead = op["num_new_tokens"], op.get("num_lookahead_tokens", 0)
        for value in (n, lookahead):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise OpError("invalid_argument", f"bad count {value!r}")
        blocks, length = None, 0
        if op.get("use_hit"):
            if request_id not in self.pending_hits:
                raise OpError("invalid_argument", "no prefix-cache lookup to adopt")
            blocks, length, stamp = self.pending_hits[request_id]
            if stamp != self.stamp:
                raise OpError("invalid_argument", "stale prefix-cache lookup")
            holds = any(self.manager.get_block_ids(request_id))
            if any(blocks.blocks) and holds:
                raise OpError("invalid_argument", "request already holds blocks")
        if request.num_computed_tokens + length + n > request.num_tokens:
            raise OpError("invalid_argument", "allocating past the request's tokens")
        kwargs: dict[str, Any] = dict(num_lookahead_tokens=lookahead,
                                      delay_cache_blocks=op.get("delay_cache_blocks", False))
        if self.new_api:
            kwargs["has_scheduled_reqs"] = op.get("has_scheduled_reqs", True)
        try:
            new_blocks = self.manager.allocate_slots(request, n, length, blocks, **kwargs)
        except ValueError as err:  # vLLM's own refusal of a zero-token call, raised before any change
            raise OpError("invalid_argument", str(err)) from None
        self.stamp += 1
        self.pending_hits.pop(request_id, None)
        if new_blocks is None:
            return None
        request.num_computed_tokens += length + n
        request.status = self.RequestStatus.RUNNING
        return [list(ids) for ids in new_blocks.get_block_ids()]

    def _op_preempt(self, op: dict) -> None:
        request = self._request(op["req"])
        if request.status == self.RequestStatus.PREEMPTED:
            raise OpError("double_free", "request already preempted")
        if request.status != self.RequestStatus.RUNNING:
            raise OpError("invalid_argument", "request is not running")
        self.stamp += 1
        self.manager.free(request)
        request.num_computed_tokens = 0
        request.status = self.RequestStatus.PREEMPTED

    def _op_free(self, op: dict) -> None:
        request = self._request(op["req"])
        self.stamp += 1
        self.manager.free(request)
        del self.requests[op["req"]]

    def _op_reset_prefix_cache(self, op: dict) -> bool:
        self.stamp += 1
        return bool(self.manager.reset_prefix_cache())

    def _op_evict_blocks(self, op: dict) -> None:
        ids = op["block_ids"]
        if not self.new_api:
            raise OpError("invalid_argument", "evict_blocks does not exist in vLLM 0.10.2")
        if not all(isinstance(i, int) and 0 <= i < self.config["num_blocks"] for i in ids):
            raise OpError("invalid_argument", f"block ids {ids!r} outside the pool")
        self.stamp += 1
        self.manager.evict_blocks(set(ids))

    # -- observation --------------------------------------------------------------------------
    def _cached_entries(self) -> list[list]:
        table = self.manager.block_pool.cached_block_hash_to_block
        raw = table._cache if hasattr(table, "_cache") else table  # v0.33.0 wraps the dict
        entries = []
        for key, holders in raw.items():
            ids = list(holders) if isinstance(holders, dict) else [holders.block_id]
            if ids:
                entries.append([bytes(key).hex(), ids])
        return sorted(entries)

    def snapshot(self) -> dict:
        pool = self.manager.block_pool
        managers = self.manager.coordinator.single_type_managers
        requests = {}
        for request_id, request in self.requests.items():
            requests[request_id] = {
                "tables": [[b.block_id for b in (m.req_to_blocks.get(request_id) or [])] for m in managers],
                "num_cached_blocks": [m.num_cached_block.get(request_id, 0) for m in managers],
                "num_computed_tokens": request.num_computed_tokens,
                "num_tokens": request.num_tokens,
                "block_hashes": [bytes(h).hex() for h in request.block_hashes],
                "status": self._status(request),
            }
        return {
            "none_hash": self.none_hash.hex(),
            "free_queue": [b.block_id for b in pool.free_block_queue.get_all_free_blocks()],
            "num_free_blocks": pool.get_num_free_blocks(),
            "usage": round(pool.get_usage(), 9),
            "blocks": [[b.ref_cnt, hex_or_none(b.block_hash)] for b in pool.blocks],
            "cached": self._cached_entries(),
            "requests": requests,
        }
