"""The installed vLLM's V1 ``KVCacheManager`` behind the lockstep op vocabulary.

The manager and its block pool are vLLM's own, built the way vLLM's unit tests build them
(tests/v1/core/test_prefix_caching.py: ``KVCacheConfig`` with ``FullAttentionSpec`` /
``SlidingWindowSpec`` groups of one-head float32 layers, requests made with
``get_request_block_hasher``). This adapter plays the scheduler: it creates ``Request``
objects, advances ``num_computed_tokens`` and ``status`` after a successful allocation, and
refuses the calls a scheduler would never make (the reference refuses the same ones, with the
same categories; vLLM itself trusts its caller and does not check). Ops are dispatched as the
reference's are (:class:`~conformance.adapters.reference_v1.V1Ops`: each op kind is a ``_<kind>``
method).

vLLM is imported only when a system is built. How to call the installed release (constructor
arguments, request construction, which methods exist) is read from the installed code where it
can be (:mod:`conformance.adapters.installed_api`) and otherwise from the change log's record of the
release it is driven as (:class:`~conformance.release_api.V1Api`); the config's ``policy`` must
name that release's policy.

Public API (used by the machines and the benchmarks): :meth:`VllmV1System.make_request`,
:meth:`VllmV1System.advance_after_allocation`, :meth:`VllmV1System.advance_after_preemption`,
:meth:`VllmV1System.apply`, :meth:`VllmV1System.snapshot`.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
from contextlib import contextmanager, nullcontext
from typing import Any
from unittest import mock

from conformance.adapters.installed_api import cached_block_ids, detect, request_filler_args
from conformance.adapters.op_dispatch import dispatch_table
from conformance.adapters.reference_v1 import LORAS, V1Ops
from conformance.adapters.vllm_v1_single_group import SingleGroupManager
from conformance.configs import V1Config, V1Group
from conformance.lockstep import NotApplicable, OpError
from conformance.versions import HarnessError, installed_v1
from reference.blocks.v1.hashing import hash_text


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


class VllmV1System(V1Ops):
    """vLLM's own KVCacheManager, one ``Request`` object per live request."""

    label = "vllm"

    def __init__(self, config: V1Config) -> None:
        target, logged = installed_v1()
        if config.policy.name != f"v{target.release}":
            raise NotApplicable(f"config is for vLLM {config.policy.name}, installed is {target.label}")
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
        self.version = target.installed
        self.api = detect(logged)  # the installed code's API; the change log fills what it cannot show
        self.config = config
        self.block_size = config.block_size
        self.max_model_len = config.max_model_len
        self._import_vllm()
        self.hash_fn_name = config.hash_fn
        seed = (config.pythonhashseed, config.entropy_bytes)
        # 0.10.0's manager seeds NONE_HASH itself, in its constructor (init_none_hash(caching_hash_fn),
        # v0.10.0 vllm/v1/core/kv_cache_manager.py:87-90), so it is built in the seeded environment.
        manager_seeds = self.api.manager_hashes_blocks and self.api.none_hash_init_function
        if self.api.manager_hashes_blocks:
            self.hash_fn = None  # the manager picks it from caching_hash_algo
            if not manager_seeds:
                self._set_import_time_none_hash(*seed)
        else:
            self.hash_fn = self._hash_function(self.hash_fn_name)
            with _seeded_environment(*seed):
                self.kv_utils.init_none_hash(self.hash_fn)
        with _seeded_environment(*seed) if manager_seeds else nullcontext():
            self.manager = self._build_manager()
        # Before 0.8.3 there is no NONE_HASH: hash_block_tokens starts every chain at hash('None')
        # (v0.8.2 vllm/v1/core/kv_cache_utils.py:403-404).
        self.none_hash = getattr(self.kv_utils, "NONE_HASH", None)
        if self.none_hash is None and not self.api.manager_hash_algo_arg:
            self.none_hash = hash("None")
        self.requests: dict[str, Any] = {}
        self.pending_hits: dict[str, tuple[Any, int, int]] = {}  # req -> (KVCacheBlocks, length, stamp)
        self.stamp = 0
        self.ops = dispatch_table(self)

    # -- construction -------------------------------------------------------------------------
    def _import_vllm(self) -> None:
        import torch
        import vllm.v1.core.kv_cache_utils as kv_utils
        from vllm.lora.request import LoRARequest
        from vllm.sampling_params import SamplingParams
        from vllm.v1 import kv_cache_interface
        from vllm.v1.core.kv_cache_manager import KVCacheManager
        from vllm.v1.request import Request, RequestStatus

        hashing = importlib.import_module(self.api.hashing_module)
        self.torch, self.kv_utils, self.hashing = torch, kv_utils, hashing
        self.LoRARequest, self.SamplingParams, self.Request, self.RequestStatus = (
            LoRARequest, SamplingParams, Request, RequestStatus,
        )
        self.KVCacheManager = KVCacheManager
        # 0.8.0-0.8.2 have no KVCacheGroupSpec (0.8.0, 0.8.1) or SlidingWindowSpec; their manager
        # takes no KVCacheConfig (V1Api.manager_takes_kv_cache_config).
        self.KVCacheConfig = kv_cache_interface.KVCacheConfig
        self.KVCacheGroupSpec: Any = getattr(kv_cache_interface, "KVCacheGroupSpec", None)
        self.FullAttentionSpec = kv_cache_interface.FullAttentionSpec
        self.SlidingWindowSpec: Any = getattr(kv_cache_interface, "SlidingWindowSpec", None)
        self._request_parameters = set(inspect.signature(Request.__init__).parameters)

    def _hash_function(self, name: str):
        """vLLM's block hash function of that name, as the request's block hasher is given it.

        ``builtin`` is Python's ``hash`` (offered before 0.10.2, v0.10.1 vllm/config/cache.py:27);
        the others are functions of the installed hashing module (ints before 0.10.2, bytes after).
        """
        if name == "builtin":
            return hash
        function = getattr(self.hashing, name, None)
        if function is None:
            raise NotApplicable(f"vLLM {self.version} has no {name} block hash in {self.api.hashing_module}")
        return function

    def _set_import_time_none_hash(self, pythonhashseed: str | None, entropy: bytes) -> None:
        """NONE_HASH as kv_cache_utils' own import-time statement computes it, for this config.

        Before 0.10.0 there is no init_none_hash: the module sets NONE_HASH once, at import, from
        ``os.urandom(32)`` or vLLM's ``sha256`` of PYTHONHASHSEED
        (v0.9.2 vllm/v1/core/kv_cache_utils.py:59-60; 0.8.3 and 0.8.4 test the variable the other
        way round, v0.8.4 vllm/v1/core/kv_cache_utils.py:45-46). That statement, read from the installed
        module's source, is evaluated again here in the module's namespace with the config's
        PYTHONHASHSEED and entropy; ``hash_block_tokens`` reads the module global at each call.
        Before 0.8.3 the module has no NONE_HASH and nothing is set.
        """
        if not hasattr(self.kv_utils, "NONE_HASH"):
            return
        expression = _none_hash_expression(self.kv_utils)
        with _seeded_environment(pythonhashseed, entropy):
            self.kv_utils.NONE_HASH = eval(expression, vars(self.kv_utils))  # vLLM's own statement

    def _spec(self, group: V1Group):
        common = dict(block_size=self.block_size, num_kv_heads=1, head_size=1, dtype=self.torch.float32)
        if self.api.spec_use_mla:
            common["use_mla"] = False
        if group.kind == "full":
            return self.FullAttentionSpec(**common)
        return self.SlidingWindowSpec(**common, sliding_window=group.window)

    def _build_manager(self):
        if not self.api.manager_takes_kv_cache_config:
            return SingleGroupManager(self._build_flat_manager(), self.version)
        groups = [self.KVCacheGroupSpec([f"layer{i}"], self._spec(g)) for i, g in enumerate(self.config.groups)]
        tensors = {"tensors": {}} if self.api.kv_config_tensors_dict else {"kv_cache_tensors": []}
        has_field = "prefix_cache_retention_interval" in inspect.signature(self.KVCacheConfig).parameters
        if self.config.retention_interval is not None:  # else the config class's own default, None
            if not has_field:
                raise NotApplicable(f"vLLM {self.version}'s KVCacheConfig has no prefix_cache_retention_interval")
            tensors["prefix_cache_retention_interval"] = self.config.retention_interval
        elif not has_field and os.environ.get("VLLM_PREFIX_CACHE_RETENTION_INTERVAL") is not None:
            # 0.23.0-0.28.x read the interval from the environment, where the reference stays dense
            raise NotApplicable("VLLM_PREFIX_CACHE_RETENTION_INTERVAL is set: unset it, the machines set the "
                                "retention interval through the config")
        kv_config = self.KVCacheConfig(num_blocks=self.config.num_blocks, kv_cache_groups=groups, **tensors)
        kwargs: dict[str, Any] = dict(max_model_len=self.max_model_len, enable_caching=self.config.enable_caching)
        if self.api.manager_hash_block_size_arg:
            kwargs["hash_block_size"] = self.block_size
        if self.api.manager_scheduler_block_size_arg:
            kwargs["scheduler_block_size"] = self.block_size
        if self.api.manager_hash_algo_arg:
            if self.hash_fn_name not in ("builtin", "sha256"):
                raise NotApplicable(f"vLLM {self.version} has no {self.hash_fn_name} block hash")
            kwargs["caching_hash_algo"] = self.hash_fn_name
        elif self.api.manager_hashes_blocks and self.hash_fn_name != "builtin":
            raise NotApplicable(f"vLLM {self.version} hashes blocks with Python's builtin hash only")
        if self.config.max_in_flight_tokens is not None:
            if "max_in_flight_tokens" not in inspect.signature(self.KVCacheManager).parameters:
                raise NotApplicable(f"vLLM {self.version}'s KVCacheManager has no max_in_flight_tokens")
            kwargs["max_in_flight_tokens"] = self.config.max_in_flight_tokens
        if self.api.manager_watermark_arg:
            kwargs["watermark"] = self.config.watermark
        elif self.config.watermark:
            raise NotApplicable(f"vLLM {self.version}'s KVCacheManager has no watermark")
        manager = self.KVCacheManager(kv_config, **kwargs)
        if not self.api.manager_has_coordinator:
            return SingleGroupManager(manager, self.version)
        return manager

    def _build_flat_manager(self):
        """0.8.0-0.8.2: ``KVCacheManager(block_size, num_gpu_blocks, max_model_len, sliding_window,
        enable_caching)``, one group, hashed with the builtin hash
        (v0.8.2 vllm/v1/core/kv_cache_manager.py:20-34); the scheduler passes the model's sliding
        window (v0.8.2 vllm/v1/core/sched/scheduler.py:58-64)."""
        groups = self.config.groups
        if len(groups) != 1:
            raise NotApplicable(f"vLLM {self.version}'s KVCacheManager takes one KV-cache group only")
        if self.hash_fn_name != "builtin":
            raise NotApplicable(f"vLLM {self.version} hashes blocks with Python's builtin hash only")
        if self.config.watermark:
            raise NotApplicable(f"vLLM {self.version}'s KVCacheManager has no watermark")
        return self.KVCacheManager(block_size=self.block_size, num_gpu_blocks=self.config.num_blocks,
                                   max_model_len=self.max_model_len, sliding_window=groups[0].window,
                                   enable_caching=self.config.enable_caching)

    # -- the public API shared with the benchmarks ---------------------------------------------
    def make_request(self, request_id: str, tokens: list[int], salt: str | None = None, lora: str | None = None):
        """A new WAITING ``vllm.v1.request.Request`` built as the installed release wants it.

        ``lora`` names one of :data:`conformance.adapters.reference_v1.LORAS`. The request is not
        registered with this system (the ``add_request`` op does that).
        """
        lora_request = None
        if lora is not None:
            name, int_id, path = LORAS[lora]
            lora_request = self.LoRARequest(lora_name=name, lora_int_id=int_id, lora_path=path)
        params = self.SamplingParams(max_tokens=17)
        kwargs: dict[str, Any] = dict(request_id=request_id, prompt_token_ids=tokens, sampling_params=params,
                                      lora_request=lora_request)
        kwargs.update(request_filler_args(self.Request))
        if "cache_salt" in self._request_parameters:
            kwargs["cache_salt"] = salt
        elif salt is not None:
            raise NotApplicable(f"vLLM {self.version}'s requests carry no cache salt")
        if not self.api.manager_hashes_blocks:
            kwargs["block_hasher"] = self.kv_utils.get_request_block_hasher(self.block_size, self.hash_fn)
        if self.api.request_eos_argument:
            kwargs["eos_token_id"] = 100
        else:
            params.update_from_generation_config({}, eos_token_id=100)
        return self.Request(**kwargs)

    def advance_after_allocation(self, request, num_new_tokens: int) -> None:
        """The scheduler's bookkeeping after ``allocate_slots`` succeeded for ``request``.

        ``num_new_tokens`` counts every token the allocation made computed: the adopted prefix-hit
        tokens plus the newly scheduled ones. The request becomes RUNNING.
        """
        request.num_computed_tokens += num_new_tokens
        request.status = self.RequestStatus.RUNNING

    def advance_after_preemption(self, request) -> None:
        """The scheduler's bookkeeping after ``manager.free(request)`` preempted a running request."""
        request.num_computed_tokens = 0
        request.status = self.RequestStatus.PREEMPTED

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
        return self.handler(op)(op)

    def _get_computed_blocks(self, op: dict) -> dict:
        request = self._request(op["req"])
        found = self.manager.get_computed_blocks(request)
        blocks, length = found[0], found[1]
        if len(found) > 2:  # the scheduler keeps the shared-prefix boundary on the request (0.26.0 on)
            request.shared_prefix_boundary = found[2]
        self.pending_hits[op["req"]] = (blocks, length, self.stamp)
        return {"block_ids": [list(ids) for ids in blocks.get_block_ids()], "num_computed_tokens": length}

    def _add_request(self, op: dict) -> None:
        request_id = op["req"]
        if not isinstance(request_id, str) or request_id in self.requests:
            raise OpError("invalid_argument", f"request id {request_id!r} is not new")
        tokens = self._check_tokens(op["tokens"], 0)
        if op.get("lora") is not None and op["lora"] not in LORAS:
            raise OpError("invalid_argument", f"unknown LoRA {op['lora']!r}")
        self.stamp += 1
        self.requests[request_id] = self.make_request(request_id, tokens, op.get("salt"), op.get("lora"))

    def _append_tokens(self, op: dict) -> None:
        request = self._request(op["req"])
        if request.status != self.RequestStatus.RUNNING or request.num_computed_tokens != request.num_tokens:
            raise OpError("invalid_argument", "request has uncomputed tokens or is not running")
        tokens = self._check_tokens(op["tokens"], request.num_tokens)
        self.stamp += 1
        request.append_output_token_ids(tokens)

    def _allocate_slots(self, op: dict) -> list[list[int]] | None:
        request_id = op["req"]
        request = self._request(request_id)
        n, lookahead = op["num_new_tokens"], op.get("num_lookahead_tokens", 0)
        in_flight = op.get("num_in_flight_tokens", 0)
        for value in (n, lookahead, in_flight):
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
        if lookahead and not self.api.allocate_lookahead_arg:
            raise OpError("invalid_argument", f"vLLM {self.version}'s allocate_slots has no lookahead slots")
        kwargs: dict[str, Any] = dict(num_lookahead_tokens=lookahead,
                                      delay_cache_blocks=op.get("delay_cache_blocks", False))
        if self.api.allocate_has_scheduled_reqs:
            kwargs["has_scheduled_reqs"] = op.get("has_scheduled_reqs", True)
        if op.get("full_sequence_must_fit"):
            if not self.config.policy.full_sequence_admission:
                raise OpError("invalid_argument", f"vLLM {self.version}'s allocate_slots is not driven with full_sequence_must_fit")
            kwargs["full_sequence_must_fit"] = True
        # The scheduler counts a step's tokens as computed before it runs; a release that reads
        # the count (from 0.26.0) sees it, an older one has no such attribute and ignores it.
        # The machines play each step to its end before the next op, so it is 0 again after.
        request.num_in_flight_tokens = in_flight
        try:
            new_blocks = self.manager.allocate_slots(request, n, length, blocks, **kwargs)
        except ValueError as err:  # vLLM's own refusal of a zero-token call, raised before any change
            raise OpError("invalid_argument", str(err)) from None
        finally:
            request.num_in_flight_tokens = 0
        self.stamp += 1
        self.pending_hits.pop(request_id, None)
        if new_blocks is None:
            return None
        self.advance_after_allocation(request, length + n)
        return [list(ids) for ids in new_blocks.get_block_ids()]

    def _preempt(self, op: dict) -> None:
        request = self._request(op["req"])
        if request.status == self.RequestStatus.PREEMPTED:
            raise OpError("double_free", "request already preempted")
        if request.status != self.RequestStatus.RUNNING:
            raise OpError("invalid_argument", "request is not running")
        self.stamp += 1
        self.manager.free(request)
        self.advance_after_preemption(request)

    def _free(self, op: dict) -> None:
        request = self._request(op["req"])
        self.stamp += 1
        self.manager.free(request)
        if self.api.manager_hashes_blocks:  # the scheduler's _free_blocks does both (v0.9.2 vllm/v1/core/sched/scheduler.py:992-996)
            self.manager.free_block_hashes(request)
        del self.requests[op["req"]]

    def _reset_prefix_cache(self, op: dict) -> bool:
        self.stamp += 1
        return bool(self.manager.reset_prefix_cache())

    def _evict_blocks(self, op: dict) -> None:
        ids = op["block_ids"]
        if not self.api.evict_blocks_method:
            raise OpError("invalid_argument", f"evict_blocks does not exist in vLLM {self.version}")
        if not all(isinstance(i, int) and 0 <= i < self.config.num_blocks for i in ids):
            raise OpError("invalid_argument", f"block ids {ids!r} outside the pool")
        self.stamp += 1
        self.manager.evict_blocks(set(ids))

    # -- observation --------------------------------------------------------------------------
    def _cached_entries(self) -> list[list]:
        table = self.manager.block_pool.cached_block_hash_to_block
        return sorted([hash_text(key), ids] for key, ids in cached_block_ids(table))

    def _block_hashes(self, request) -> list:
        """The request's block hashes: on the request, or (before 0.10.1) the manager's list."""
        if self.api.manager_hashes_blocks:
            return self.manager.req_to_block_hashes.get(request.request_id, [])
        return request.block_hashes

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
                "block_hashes": [hash_text(h) for h in self._block_hashes(request)],
                "status": self._status(request),
            }
        return {
            "none_hash": hash_text(self.none_hash),
            "free_queue": [b.block_id for b in pool.free_block_queue.get_all_free_blocks()],
            "num_free_blocks": pool.get_num_free_blocks(),
            "usage": round(pool.get_usage(), 9),
            "blocks": [[b.ref_cnt, hash_text(b.block_hash)] for b in pool.blocks],
            "cached": self._cached_entries(),
            "requests": requests,
        }


def _none_hash_expression(kv_utils):
    """The compiled right-hand side of ``NONE_HASH = ...`` at the top level of ``kv_utils``' source."""
    try:
        tree = ast.parse(inspect.getsource(kv_utils))
    except (OSError, TypeError, SyntaxError) as err:
        raise HarnessError(f"cannot read {kv_utils.__name__}'s source to re-seed NONE_HASH: {err}") from None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "NONE_HASH" for t in node.targets):
            return compile(ast.Expression(node.value), kv_utils.__file__, "eval")
    raise HarnessError(f"{kv_utils.__name__} has NONE_HASH but no top-level `NONE_HASH = ...` statement to re-seed it")
