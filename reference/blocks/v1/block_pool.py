"""The block pool: every page, the free queue, and the prefix-cache map.

The pool owns ``num_blocks`` blocks. Block 0 is taken out at construction to serve as the null
block; the rest start in the free queue in id order, so the first allocation gets ids 1, 2, ...
(Before vLLM 0.8.3 there is no null block, :attr:`V1Policy.pool_has_null_block`: every block
starts in the free queue and the first allocation gets ids 0, 1, ...)

Three structures must always agree:

* a block's ``ref_cnt`` is the number of block-table entries pointing at it (the null block
  excepted, see :attr:`V1Policy.null_block_ref_counted`);
* the free queue holds exactly the non-null blocks with ``ref_cnt == 0``;
* the prefix-cache map goes from a group-keyed hash to the blocks carrying that hash, in
  insertion order (duplicates arise because a full block is never de-duplicated against an
  equal one: block tables are append-only, so a block id, once given, never changes).

Prefix caching is *lazy*: freeing a hashed block leaves its hash and map entry in place, so a
later request can revive it by ``touch``. Only when :meth:`get_new_blocks` pops such a block
from the free queue for reuse is its hash dropped -- an *eviction*. The free queue order is
therefore the eviction order, and where freed blocks enter it is a policy
(:attr:`V1Policy.free_hashless_blocks_to_front`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from reference.blocks.errors import DoubleFree, InvalidArgument, OutOfBlocks, UnknownBlock
from reference.blocks.policies import V1Policy
from reference.blocks.v1.block import KVBlock
from reference.blocks.v1.free_queue import FreeBlockQueue
from reference.blocks.v1.hashing import group_key_function


class BlockPool:
    """All blocks of one KV cache, their free queue and the prefix-cache map."""

    def __init__(self, num_blocks: int, enable_caching: bool, policy: V1Policy) -> None:
        if not isinstance(num_blocks, int) or num_blocks < 1:
            raise InvalidArgument(f"num_blocks must be a positive int, got {num_blocks!r}")
        self.num_blocks = num_blocks
        self.enable_caching = enable_caching
        self.policy = policy
        self.group_key = group_key_function(policy)  # (block hash, group id) -> pool key
        self.blocks = [KVBlock(block_id=i) for i in range(num_blocks)]
        self.free_queue = FreeBlockQueue(self.blocks)
        self.null_block: KVBlock | None = None
        if policy.pool_has_null_block:
            self.null_block = self.free_queue.popleft()
            self.null_block.is_null = True
        # group-keyed hash -> {block_id: block}, both levels in insertion order
        self.cached: dict[Any, dict[int, KVBlock]] = {}

    def null(self) -> KVBlock:
        """The null block (the stand-in for released window entries); only a pool with one has it."""
        if self.null_block is None:
            raise InvalidArgument(f"vLLM {self.policy.name}'s pool has no null block")
        return self.null_block

    # -- prefix-cache lookups -----------------------------------------------------------------
    def get_cached_block(self, block_hash: bytes, group_ids: Sequence[int]) -> list[KVBlock] | None:
        """The first cached block for ``block_hash`` in each group, or None if any group misses."""
        found = []
        for group_id in group_ids:
            blocks = self.cached.get(self.group_key(block_hash, group_id))
            if not blocks:
                return None
            found.append(next(iter(blocks.values())))
        return found

    def cached_prefix(self, block_hashes: Iterable[Any], group_ids: Sequence[int]) -> list[list[KVBlock]]:
        """Per group, the first cached block of each hash in turn, up to the first hash a group misses.

        Hashes are chained, so a miss ends every longer prefix too. This is
        :meth:`get_cached_block` hash after hash, walked here in one loop (a long hit is thousands
        of hashes); with one group no per-hash list is built.
        """
        key, cached = self.group_key, self.cached
        hit: list[list[KVBlock]] = [[] for _ in group_ids]
        if len(group_ids) == 1:
            group_id, run = group_ids[0], hit[0]
            for block_hash in block_hashes:
                holders = cached.get(key(block_hash, group_id))
                if not holders:
                    break
                run.append(next(iter(holders.values())))
            return hit
        for block_hash in block_hashes:
            found = self.get_cached_block(block_hash, group_ids)
            if found is None:
                break
            for blocks, block in zip(hit, found):
                blocks.append(block)
        return hit

    def cache_full_blocks(
        self,
        block_hashes: Sequence[bytes],
        blocks: Sequence[KVBlock],
        num_cached_blocks: int,
        num_full_blocks: int,
        group_id: int,
        mask: Sequence[bool] | None = None,
    ) -> None:
        """Register ``blocks[num_cached_blocks:num_full_blocks]`` under the request's hashes.

        Null blocks in the range (slots a sliding window already released) are skipped, unless
        the policy caches them like any block (``cache_full_blocks_skips_null``), and so are the
        blocks ``mask`` (one flag per block of the range) leaves out.
        """
        for index in range(num_cached_blocks, num_full_blocks):
            block = blocks[index]
            if block.is_null and self.policy.cache_full_blocks_skips_null:
                continue
            if mask is not None and not mask[index - num_cached_blocks]:
                continue
            key = self.group_key(block_hashes[index], group_id)
            if block.block_hash == key:
                continue
            assert block.block_hash is None, f"{block} is already cached under another hash"
            block.block_hash = key
            self.cached.setdefault(key, {})[block.block_id] = block

    # -- allocation and release ---------------------------------------------------------------
    def get_new_blocks(self, num_blocks: int) -> list[KVBlock]:
        """Pop ``num_blocks`` blocks from the front of the free queue, evicting their cache entries."""
        if num_blocks < 0:
            raise InvalidArgument(f"cannot allocate {num_blocks} blocks")
        if num_blocks > self.num_free_blocks:
            raise OutOfBlocks(f"asked for {num_blocks} blocks, {self.num_free_blocks} are free")
        taken = self.free_queue.popleft_n(num_blocks)
        for block in taken:
            if block.block_hash is not None:  # only a hashed block can be a cache entry to evict
                self._evict(block)
            block.ref_cnt += 1
        return taken

    def touch(self, blocks: Iterable[KVBlock]) -> None:
        """Take one more reference on each block, pulling free ones out of the queue.

        The free ones (``ref_cnt == 0``: queued) are collected and unlinked together afterwards.
        """
        revived = []
        for block in blocks:
            if block.is_null:
                if self.policy.null_block_ref_counted:
                    block.ref_cnt += 1
                continue
            if block.ref_cnt == 0:
                revived.append(block)
            block.ref_cnt += 1
        if revived:
            self.free_queue.remove_n(revived)

    def free_blocks(self, ordered_blocks: Iterable[KVBlock], hashless_to_front: bool | None = None) -> None:
        """Drop one reference from each block; those reaching zero join the free queue.

        ``ordered_blocks`` is in eviction priority (first = evicted first), which is why
        requests free their tables tail first. One pass does the work, as vLLM's does. A block
        freed more often than it is referenced is noticed in that pass; then every count it
        dropped is put back and :class:`DoubleFree` is raised, so a refused release changes
        nothing (the free queue is only touched once the pass succeeded).
        """
        ordered = ordered_blocks if isinstance(ordered_blocks, list) else list(ordered_blocks)
        if hashless_to_front is None:  # the caller's path makes no choice of its own
            hashless_to_front = self.policy.free_hashless_blocks_to_front
        if not self.enable_caching and not self.policy.caching_off_frees_to_front:
            hashless_to_front = False  # 0.27.x: everything to the tail when caching is off
        all_to_front = hashless_to_front and not self.enable_caching
        null_counted = self.policy.null_block_ref_counted
        released_first: list[KVBlock] = []
        released_last: list[KVBlock] = []
        overdrawn = None
        for block in ordered:
            if block.is_null:
                if null_counted:
                    block.ref_cnt -= 1
                continue
            count = block.ref_cnt
            block.ref_cnt = count - 1
            if count == 1:
                if all_to_front or (hashless_to_front and block.block_hash is None):
                    released_first.append(block)
                else:
                    released_last.append(block)
            elif count < 1 and overdrawn is None:
                overdrawn = block
        if overdrawn is not None:
            for block in ordered:
                if not block.is_null or null_counted:
                    block.ref_cnt += 1
            raise DoubleFree(f"block {overdrawn.block_id} is freed more often than it is referenced")
        # Each released block had a reference until now, so it is neither queued nor repeated.
        if released_first:
            self.free_queue.prepend_released(released_first)
        if released_last:
            self.free_queue.append_released(released_last)

    # -- cache maintenance --------------------------------------------------------------------
    def evict_blocks(self, block_ids: Iterable[int]) -> None:
        """Drop the prefix-cache entries of the given blocks (referenced blocks stay allocated)."""
        if not self.policy.evict_blocks_supported:
            raise InvalidArgument(f"evict_blocks does not exist in vLLM {self.policy.name}")
        ids = list(block_ids)
        for block_id in ids:
            if not isinstance(block_id, int) or not 0 <= block_id < self.num_blocks:
                raise UnknownBlock(f"block id {block_id!r} is outside the pool of {self.num_blocks}")
        for block_id in ids:
            self._evict(self.blocks[block_id])

    def reset_prefix_cache(self) -> bool:
        """Forget every hash, but only when no block is in use; return whether it happened."""
        if self.num_free_blocks != self.num_blocks - (self.null_block is not None):
            return False
        self.cached = {}
        for block in self.blocks:
            block.block_hash = None
        return True

    # -- accounting ---------------------------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        return len(self.free_queue)

    @property
    def usage(self) -> float:
        """Fraction of the usable (non-null) blocks in use (of all blocks, the null one counted as
        used, where the policy says so: ``usage_excludes_null_block``)."""
        if not self.policy.usage_excludes_null_block:
            return 1.0 - self.num_free_blocks / self.num_blocks
        usable = self.num_blocks - 1
        return 0 if not usable else 1.0 - self.num_free_blocks / usable

    def _evict(self, block: KVBlock) -> None:
        key = block.block_hash
        if key is None:
            return
        holders = self.cached.get(key)
        if holders is not None:
            holders.pop(block.block_id, None)
            if not holders:
                del self.cached[key]
        block.block_hash = None
