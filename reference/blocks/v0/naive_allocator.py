"""The page allocator without prefix caching.

Free page ids wait in a double-ended queue, initially in ascending order. Allocation takes from
the *left*; a page whose reference count drops to zero goes back on the *left* too. The newest
freed page is therefore the next one handed out (LIFO reuse): its memory is the most likely to
still be warm, and the order is what vLLM v0.10.2 produces (``vllm/core/block/naive_block.py``:
``popleft`` at :138, ``appendleft`` at :152), so block ids agree call for call.

The same class serves as the id-and-refcount ledger inside the prefix-caching allocator, which is
why it exposes id-level helpers (:meth:`allocate_id`, :meth:`free_id`) next to the block-level API.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Optional

from reference.blocks.errors import InvalidArgument, OutOfBlocks
from reference.blocks.v0.block import Block, CopyOnWriteLog, RefCounter


def chain_of(last_block: Block) -> list[Block]:
    """All blocks of a sequence, first to last, found by following ``prev`` links."""
    chain: list[Block] = []
    block: Optional[Block] = last_block
    while block is not None:
        chain.append(block)
        block = block.prev
    chain.reverse()
    return chain


class NaiveAllocator:
    """Pages of one device, shared by reference counting, copied on write."""

    hashing = False

    def __init__(self, block_ids: Iterable[int], block_size: int) -> None:
        ids = list(block_ids)
        if block_size <= 0:
            raise InvalidArgument(f"block_size must be positive, got {block_size}")
        if len(set(ids)) != len(ids):
            raise InvalidArgument("block ids must be distinct")
        self.block_size = block_size
        self.free_ids: deque[int] = deque(ids)
        self.all_ids = frozenset(ids)
        self._sorted_ids = sorted(ids)
        self.refcounter = RefCounter(ids)
        self.cows = CopyOnWriteLog()

    # -- ids ---------------------------------------------------------------------------------
    def allocate_id(self) -> int:
        if not self.free_ids:
            raise OutOfBlocks("no free block left on this device")
        block_id = self.free_ids.popleft()
        self.refcounter.incr(block_id)
        return block_id

    def free_id(self, block_id: int) -> None:
        if self.refcounter.decr(block_id) == 0:
            self.free_ids.appendleft(block_id)

    # -- blocks ------------------------------------------------------------------------------
    def allocate_mutable_block(self, prev: Optional[Block], extra_hash: Optional[int] = None) -> Block:
        return Block(prev, [], self.block_size, self.allocate_id())

    def allocate_immutable_block(self, prev: Optional[Block], token_ids: list[int],
                                 extra_hash: Optional[int] = None) -> Block:
        block = self.allocate_mutable_block(prev)
        self.append_token_ids(block, token_ids)
        return block

    def allocate_immutable_blocks(self, prev: Optional[Block], chunks: list[list[int]],
                                  extra_hash: Optional[int] = None) -> list[Block]:
        # vLLM takes every id first, then builds the blocks (v0.10.2 naive_block.py:88-110).
        if len(chunks) > len(self.free_ids):
            raise OutOfBlocks(f"{len(chunks)} blocks needed, {len(self.free_ids)} free")
        ids = [self.allocate_id() for _ in chunks]
        blocks = []
        for block_id, chunk in zip(ids, chunks):
            prev = Block(prev, chunk, self.block_size, block_id)
            blocks.append(prev)
        return blocks

    def append_token_ids(self, block: Block, token_ids: list[int]) -> None:
        """Write tokens into a block, moving it to a private page first if it is shared."""
        if len(token_ids) > block.num_empty_slots:
            raise InvalidArgument(f"{len(token_ids)} tokens do not fit in {block.num_empty_slots} slots")
        block.extend(token_ids)
        if block.block_id is not None:
            block.block_id = self.cow_if_shared(block)

    def cow_if_shared(self, block: Block) -> int:
        """The id to write to: the block's own if unshared, else a fresh copy (``:225-248``)."""
        src = block.block_id
        assert src is not None
        if self.refcounter.get(src) <= 1:
            return src
        self.free(block)
        dst = self.allocate_id()
        self.cows.record(src, dst)
        return dst

    def free(self, block: Block) -> None:
        block_id = block.block_id
        if block_id is None:
            raise InvalidArgument("the block holds no page")
        self.free_id(block_id)
        block.block_id = None

    def fork(self, last_block: Block) -> list[Block]:
        """New views of every page of a sequence, each page's count raised by one."""
        chain = chain_of(last_block)
        for block in chain:
            if block.block_id is None or self.refcounter.get(block.block_id) == 0:
                raise InvalidArgument("cannot fork a sequence whose pages are freed")
        forked: list[Block] = []
        prev: Optional[Block] = None
        for block in chain:
            self.refcounter.incr(block.block_id)  # type: ignore[arg-type]  # checked above: an id
            prev = Block(prev, block.token_ids, self.block_size, block.block_id)
            forked.append(prev)
        return forked

    # -- queries -----------------------------------------------------------------------------
    def get_num_free_blocks(self) -> int:
        return len(self.free_ids)

    def get_num_total_blocks(self) -> int:
        return len(self.all_ids)

    def get_physical_block_id(self, absolute_id: int) -> int:
        """The id counted from this device's first page (``v0.10.2 naive_block.py:204-215``)."""
        return self._sorted_ids.index(absolute_id)

    def get_num_full_blocks_touched(self, blocks: list[Block]) -> int:
        # vLLM dedups by block *object*; views of a shared page are distinct objects.
        return len({id(b) for b in blocks if b.is_full})

    # -- swapping ----------------------------------------------------------------------------
    def swap_out(self, blocks: list[Block]) -> None:
        for block in blocks:
            self.free(block)

    def swap_in(self, blocks: list[Block]) -> None:
        for block in blocks:
            if block.is_full:
                tmp = self.allocate_immutable_block(block.prev, block.token_ids)
            else:
                tmp = self.allocate_mutable_block(block.prev)
                self.append_token_ids(tmp, block.token_ids)
            block.block_id = tmp.block_id

    # -- prefix caching hooks: all no-ops here (v0.10.2 naive_block.py:259-342) -------------------------
    def mark_blocks_as_accessed(self, block_ids: list[int], now: float) -> None:
        pass

    def mark_blocks_as_computed(self, block_ids: list[int]) -> None:
        pass

    def get_common_computed_block_ids(self, per_seq_ids: list[list[int]]) -> list[int]:
        return []

    def get_prefix_cache_hit_rate(self) -> float:
        return -1

    def reset_prefix_cache(self) -> bool:
        return True

    def find_cached_blocks_prefix(self, block_hashes: list[int]) -> list[int]:
        return []

    def num_cached_blocks_prefix(self, block_hashes: list[int]) -> int:
        return 0
