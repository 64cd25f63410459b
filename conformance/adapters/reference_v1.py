"""The reference V1 page manager behind the lockstep op vocabulary (semantics ``"v1"``).

The vocabulary is the scheduler's side of the V1 protocol, one JSON dict per call:

``{"op": "add_request", "req": "r1", "tokens": [...], "salt": null, "lora": null | "a" | "b"}``
    register a request (its prompt is hashed at once); returns None.
``{"op": "get_computed_blocks", "req": "r1"}``
    prefix-cache lookup; returns ``{"block_ids": [[...] per group], "num_computed_tokens": n}``
    and remembers the hit for the next ``allocate_slots`` of that request.
``{"op": "allocate_slots", "req": "r1", "num_new_tokens": n, "use_hit": bool,
"num_lookahead_tokens": k, "delay_cache_blocks": bool, "has_scheduled_reqs": bool,
"full_sequence_must_fit": bool, "num_in_flight_tokens": k}``
    returns the new block ids per group, or None when the pool is too small. On success the
    scheduler's bookkeeping follows: hit + ``num_new_tokens`` tokens become computed and the
    request is running. ``num_in_flight_tokens`` are the tokens of steps scheduled but not yet
    run when this call is made (the request's count, as vLLM's scheduler keeps it); those steps
    run before the next op.
``{"op": "append_tokens", "req": "r1", "tokens": [...]}``  a decode step's output tokens.
``{"op": "preempt", "req": "r1"}``  release everything; recompute later.
``{"op": "free", "req": "r1"}``  finished: release and forget.
``{"op": "reset_prefix_cache"}``  returns whether it happened.
``{"op": "evict_blocks", "block_ids": [...]}``  (vLLM 0.13.0 and later: ``V1Policy.evict_blocks_supported``).

Each op is handled by the adapter's ``_<kind>`` method, found through :class:`V1Ops` (the table
:func:`conformance.adapters.op_dispatch.dispatch_table` over :data:`conformance.trace_file.OP_FIELDS`
``["v1"]``; an op outside the vocabulary is refused as ``"invalid_argument"``, as by the V0 adapters).
Refusals are reported by the category of the :mod:`reference.blocks.errors` class. A hit is
usable only by the ``allocate_slots`` right after its lookup (any accepted state change in
between makes it stale): the scheduler never lets the cache change between the two calls.

This module never imports vLLM; the vLLM adapter reuses its LoRA table and snapshot format.
"""

from __future__ import annotations

from typing import Any

from conformance.adapters.op_dispatch import Ops, dispatch_table
from conformance.configs import V1Config
from conformance.lockstep import OpError
from reference.blocks.errors import BlockManagerError, InvalidArgument, UnknownRequest
from reference.blocks.v1.hashing import LoRAIdentity, hash_text
from reference.blocks.v1.manager import ComputedBlocks, KVCacheManager
from reference.blocks.v1.specs import FullAttention, GroupSpec, SlidingWindow

# The LoRA adapters a trace may name: name, integer id, path.
LORAS: dict[str, tuple[str, int, str]] = {"a": ("adapter-a", 1, "/loras/a"), "b": ("adapter-b", 2, "/loras/b")}


def group_specs(config: V1Config) -> list[GroupSpec]:
    """The reference group specs a lockstep config describes (a group has a window iff it is sliding)."""
    return [FullAttention(config.block_size) if g.window is None else SlidingWindow(config.block_size, g.window)
            for g in config.groups]


def lora_identity(name: str | None) -> LoRAIdentity | None:
    if name is None:
        return None
    if name not in LORAS:
        raise OpError("invalid_argument", f"unknown LoRA {name!r}")
    return LoRAIdentity(*LORAS[name])


class V1Ops(Ops):
    """What both V1 adapters share: the V1 vocabulary's dispatch (``self.ops = dispatch_table(self)``,
    then ``self.handler(op)``; each op kind is the adapter's ``_<kind>`` method)."""

    semantics = "v1"


class ReferenceV1System(V1Ops):
    """The reference KVCacheManager, driven by lockstep ops."""

    def __init__(self, config: V1Config, label: str = "reference") -> None:
        self.label = label
        self.config = config
        entropy = config.entropy_bytes
        self.manager = KVCacheManager(
            group_specs(config),
            config.num_blocks,
            config.max_model_len,
            config.policy,
            enable_caching=config.enable_caching,
            hash_fn=config.hash_fn,
            pythonhashseed=config.pythonhashseed,
            entropy=lambda n: entropy[:n],
            watermark=config.watermark,
            retention_interval=config.retention_interval,
            max_in_flight_tokens=config.max_in_flight_tokens,
        )
        self.pending_hits: dict[str, ComputedBlocks] = {}
        self.ops = dispatch_table(self)

    # -- ops ----------------------------------------------------------------------------------
    def apply(self, op: dict) -> Any:
        handler = self.handler(op)
        try:
            return handler(op)
        except BlockManagerError as err:
            raise OpError(err.category, str(err)) from None

    def _add_request(self, op: dict) -> None:
        self.manager.add_request(op["req"], op["tokens"], cache_salt=op.get("salt"), lora=lora_identity(op.get("lora")))

    def _get_computed_blocks(self, op: dict) -> dict:
        hit = self.manager.get_computed_blocks(op["req"])
        self.pending_hits[op["req"]] = hit
        return {"block_ids": [list(ids) for ids in hit.block_ids()], "num_computed_tokens": hit.num_tokens}

    def _append_tokens(self, op: dict) -> None:
        self.manager.append_token_ids(op["req"], op["tokens"])

    def _preempt(self, op: dict) -> None:
        self.manager.preempt(op["req"])

    def _free(self, op: dict) -> None:
        self.manager.free(op["req"])

    def _reset_prefix_cache(self, op: dict) -> bool:
        return self.manager.reset_prefix_cache()

    def _evict_blocks(self, op: dict) -> None:
        self.manager.evict_blocks(op["block_ids"])

    def _allocate_slots(self, op: dict) -> list[list[int]] | None:
        request_id = op["req"]
        if request_id not in self.manager.requests:
            raise UnknownRequest(f"unknown request {request_id!r}")
        hit = None
        if op.get("use_hit"):
            hit = self.pending_hits.get(request_id)
            if hit is None:
                raise InvalidArgument(f"no prefix-cache lookup for {request_id!r} to adopt")
        num_hit = hit.num_tokens if hit else 0
        blocks = self.manager.allocate_slots(
            request_id,
            op["num_new_tokens"],
            num_hit,
            hit,
            op.get("num_lookahead_tokens", 0),
            op.get("delay_cache_blocks", False),
            op.get("has_scheduled_reqs", True),
            op.get("full_sequence_must_fit", False),
            op.get("num_in_flight_tokens", 0),
        )
        self.pending_hits.pop(request_id, None)
        if blocks is None:
            return None
        self.manager.mark_computed(request_id, num_hit + op["num_new_tokens"])
        return [[b.block_id for b in group] for group in blocks]

    # -- observation --------------------------------------------------------------------------
    def snapshot(self) -> dict:
        m, pool = self.manager, self.manager.pool
        requests = {}
        for request_id, state in m.requests.items():
            requests[request_id] = {
                "tables": [[b.block_id for b in g.blocks(request_id)] for g in m.groups],
                "num_cached_blocks": [g.num_cached_block.get(request_id, 0) for g in m.groups],
                "num_computed_tokens": state.num_computed_tokens,
                "num_tokens": state.num_tokens,
                "block_hashes": [hash_text(h) for h in state.block_hashes],
                "status": state.status.value,
            }
        return {
            "none_hash": hash_text(m.none_hash),
            "free_queue": pool.free_queue.block_ids(),
            "num_free_blocks": pool.num_free_blocks,
            "usage": round(pool.usage, 9),
            "blocks": [[b.ref_cnt, hash_text(b.block_hash)] for b in pool.blocks],
            "cached": sorted([hash_text(key), list(holders)] for key, holders in pool.cached.items()),
            "requests": requests,
        }
