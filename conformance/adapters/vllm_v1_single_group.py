"""vLLM's V1 ``KVCacheManager`` before 0.9.1, seen through the coordinator-era API the V1 adapter drives.

Before 0.9.1 the V1 manager serves exactly one KV-cache group and has no coordinator. It comes in
two shapes, told apart by ``allocate_slots``' signature:

* 0.8.x: the block table, cached-block count and hash list live on the manager itself,
  ``get_computed_blocks`` returns a plain list of blocks, and ``allocate_slots(request,
  num_tokens, new_computed_blocks, num_lookahead_tokens)`` takes that list (the hit length is
  ``len(list) * block_size``) and returns a list or None
  (v0.8.5.post1 vllm/v1/core/kv_cache_manager.py:92-170; before 0.8.4 without
  ``num_lookahead_tokens``, v0.8.3 vllm/v1/core/kv_cache_manager.py:162-167);
* 0.9.0: the table lives on ``manager.single_type_manager``, and ``get_computed_blocks`` and
  ``allocate_slots(request, num_new_tokens, num_new_computed_tokens, new_computed_blocks, ...,
  delay_cache_blocks)`` take and return a one-group ``KVCacheBlocks`` whose ``blocks`` is a flat
  list (v0.9.0 vllm/v1/core/kv_cache_manager.py:20-48, 118-179).

This module wraps such a manager so that :class:`conformance.adapters.vllm_v1.VllmV1System` calls
it like a later release: hits and results become one-group ``blocks`` tuples, and the snapshot
reads the one group's table through ``coordinator.single_type_managers[0]``. Nothing here decides
behaviour; every call goes to vLLM's own manager.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from conformance.lockstep import NotApplicable


class OneGroupBlocks:
    """A one-group stand-in for ``KVCacheBlocks``: ``blocks`` is a 1-tuple of a block list."""

    def __init__(self, blocks: list) -> None:
        self.blocks = (list(blocks),)

    def get_block_ids(self) -> tuple[list[int], ...]:
        return ([b.block_id for b in self.blocks[0]],)


class _GroupView:
    """The per-request tables (the manager's own before 0.9.0), shaped like a single-type manager's."""

    def __init__(self, manager: Any) -> None:
        owner = getattr(manager, "single_type_manager", manager)
        self.req_to_blocks = owner.req_to_blocks
        self.num_cached_block = owner.num_cached_block


class _CoordinatorView:
    def __init__(self, manager: Any) -> None:
        self.single_type_managers = [_GroupView(manager)]


class SingleGroupManager:
    """A pre-0.9.1 ``KVCacheManager`` (0.8.x or 0.9.0 shape) with the 0.9.1+ calls the V1 adapter makes."""

    def __init__(self, manager: Any, version: str) -> None:
        self.manager = manager
        self.version = version
        self.block_pool = manager.block_pool
        self.req_to_block_hashes = manager.req_to_block_hashes
        self.coordinator = _CoordinatorView(manager)
        self._tables = self.coordinator.single_type_managers[0].req_to_blocks
        # 0.9.0's allocate_slots takes the hit length and KVCacheBlocks; 0.8.x's a plain list
        self._takes_blocks = "num_new_computed_tokens" in inspect.signature(manager.allocate_slots).parameters
        if self._takes_blocks:
            self._blocks_type = importlib.import_module(type(manager).__module__).KVCacheBlocks

    @staticmethod
    def _as_list(blocks) -> list:
        return list(getattr(blocks, "blocks", blocks))  # 0.9.0's KVCacheBlocks or 0.8.x's list

    def get_computed_blocks(self, request) -> tuple[OneGroupBlocks, int]:
        blocks, length = self.manager.get_computed_blocks(request)
        return OneGroupBlocks(self._as_list(blocks)), length

    def allocate_slots(self, request, num_new_tokens: int, num_new_computed_tokens: int = 0,
                       new_computed_blocks: OneGroupBlocks | None = None, num_lookahead_tokens: int = 0,
                       delay_cache_blocks: bool = False) -> OneGroupBlocks | None:
        hit = new_computed_blocks.blocks[0] if new_computed_blocks is not None else None
        if self._takes_blocks:
            new = self.manager.allocate_slots(
                request, num_new_tokens, num_new_computed_tokens, None if hit is None else self._blocks_type(list(hit)),
                num_lookahead_tokens=num_lookahead_tokens, delay_cache_blocks=delay_cache_blocks)
        else:
            if delay_cache_blocks:
                raise NotApplicable(f"vLLM {self.version}'s allocate_slots has no delay_cache_blocks")
            # 0.8.0-0.8.3 take no num_lookahead_tokens (the V1 adapter refuses lookahead there)
            lookahead = {"num_lookahead_tokens": num_lookahead_tokens} if num_lookahead_tokens else {}
            new = self.manager.allocate_slots(request, num_new_tokens, hit, **lookahead)
        return None if new is None else OneGroupBlocks(self._as_list(new))

    def get_block_ids(self, request_id: str) -> tuple[list[int], ...]:
        # .get: the manager's defaultdict must not grow an entry for a lookup
        return ([b.block_id for b in self._tables.get(request_id, [])],)

    def free(self, request) -> None:
        self.manager.free(request)

    def free_block_hashes(self, request) -> None:
        self.manager.free_block_hashes(request)

    def reset_prefix_cache(self) -> bool:
        return self.manager.reset_prefix_cache()
