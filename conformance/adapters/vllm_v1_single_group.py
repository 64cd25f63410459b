"""vLLM 0.8.x's V1 ``KVCacheManager`` seen through the coordinator-era API the V1 adapter drives.

Before 0.9.1 the V1 manager serves exactly one KV-cache group and has no coordinator: its block
table, cached-block count and hash list live on the manager itself, ``get_computed_blocks``
returns a plain list of blocks, and ``allocate_slots(request, num_tokens, new_computed_blocks,
num_lookahead_tokens)`` takes that list (the hit length is ``len(list) * block_size``) and
returns a list or None (v0.8.5.post1 vllm/v1/core/kv_cache_manager.py:92-170). This module wraps
such a manager so that :class:`conformance.adapters.vllm_v1.VllmV1System` calls it like a later
release: hits and results become one-group ``blocks`` tuples, and the snapshot reads the one
group's table through ``coordinator.single_type_managers[0]``. Nothing here decides behaviour;
every call goes to vLLM's own manager.
"""

from __future__ import annotations

from typing import Any

from conformance.lockstep import NotApplicable


class OneGroupBlocks:
    """A one-group stand-in for ``KVCacheBlocks``: ``blocks`` is a 1-tuple of a block list."""

    def __init__(self, blocks: list) -> None:
        self.blocks = (list(blocks),)

    def get_block_ids(self) -> tuple[list[int], ...]:
        return ([b.block_id for b in self.blocks[0]],)


class _GroupView:
    """The manager's own per-request tables, shaped like a single-type manager's."""

    def __init__(self, manager: Any) -> None:
        self.req_to_blocks = manager.req_to_blocks
        self.num_cached_block = manager.num_cached_block


class _CoordinatorView:
    def __init__(self, manager: Any) -> None:
        self.single_type_managers = [_GroupView(manager)]


class SingleGroupManager:
    """A 0.8.x ``KVCacheManager`` with the 0.9.1+ calls the V1 adapter makes."""

    def __init__(self, manager: Any, version: str) -> None:
        self.manager = manager
        self.version = version
        self.block_pool = manager.block_pool
        self.req_to_block_hashes = manager.req_to_block_hashes
        self.coordinator = _CoordinatorView(manager)

    def get_computed_blocks(self, request) -> tuple[OneGroupBlocks, int]:
        blocks, length = self.manager.get_computed_blocks(request)
        return OneGroupBlocks(blocks), length

    def allocate_slots(self, request, num_new_tokens: int, num_new_computed_tokens: int = 0,
                       new_computed_blocks: OneGroupBlocks | None = None, num_lookahead_tokens: int = 0,
                       delay_cache_blocks: bool = False) -> OneGroupBlocks | None:
        if delay_cache_blocks:
            raise NotApplicable(f"vLLM {self.version}'s allocate_slots has no delay_cache_blocks")
        hit = new_computed_blocks.blocks[0] if new_computed_blocks is not None else None
        new = self.manager.allocate_slots(request, num_new_tokens, hit, num_lookahead_tokens=num_lookahead_tokens)
        return None if new is None else OneGroupBlocks(new)

    def get_block_ids(self, request_id: str) -> tuple[list[int], ...]:
        # .get: the manager's defaultdict must not grow an entry for a lookup
        return ([b.block_id for b in self.manager.req_to_blocks.get(request_id, [])],)

    def free(self, request) -> None:
        self.manager.free(request)

    def free_block_hashes(self, request) -> None:
        self.manager.free_block_hashes(request)

    def reset_prefix_cache(self) -> bool:
        return self.manager.reset_prefix_cache()
