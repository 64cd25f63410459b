"""One sequence's block table: the list of pages holding its tokens, in order.

Position ``p`` of the sequence lives in page ``table[p // block_size]`` at offset
``p % block_size``. The table only grows at the end (the KV cache is append-only), so the
table remembers how many positions are filled (``num_full_slots``) and everything beyond that in
the sequence is "unseen" and still to be written.

Allocation splits the prompt into full pages - *immutable*, hashable, shareable - and at most one
partly filled *mutable* tail. Appending fills the tail, then asks for fresh pages. With a sliding
window, pages that fell out of the window are released and replaced by the shared null page, so a
long sequence holds only about ``window / block_size + 2`` real pages
(``v0.10.2 vllm/core/block/block_table.py:116-174``).

The table keeps the pages' physical ids in a second list beside the block views, updated by every
method that changes a page, because the scheduler asks for the ids of every running sequence on
every step; reading them must not mean walking the views. vLLM keeps the same mirror
(``BlockList``, ``v0.10.2 vllm/core/block/common.py:232-294``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from reference.blocks.errors import InvalidArgument
from reference.blocks.v0.block import Block, NullBlock
from reference.blocks.v0.device_allocator import DeviceAllocator
from reference.blocks.v0.page_budget import PageBudget
from reference.blocks.v0.status import Device


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def chunks(token_ids: list[int], size: int) -> list[list[int]]:
    return [token_ids[i:i + size] for i in range(0, len(token_ids), size)]


def num_required_blocks(token_ids: Sequence[int], block_size: int, num_lookahead_slots: int = 0) -> int:
    """Pages needed for a fresh sequence, assuming no page can be shared."""
    return cdiv(len(token_ids) + num_lookahead_slots, block_size)


class BlockTable:
    """The pages of one sequence."""

    def __init__(self, block_size: int, allocator: DeviceAllocator,
                 blocks: Optional[list[Block]] = None,
                 max_block_sliding_window: Optional[int] = None) -> None:
        self.block_size = block_size
        self.allocator = allocator
        self.blocks: list[Block] = list(blocks or [])
        self.physical_block_ids: list[int] = [b.block_id for b in self.blocks]  # type: ignore[misc]  # a table's pages hold ids
        self.max_block_sliding_window = max_block_sliding_window
        self.num_full_slots = sum(len(b.token_ids) for b in self.blocks)

    @property
    def is_allocated(self) -> bool:
        return bool(self.blocks)

    @property
    def num_empty_slots(self) -> int:
        return len(self.blocks) * self.block_size - self.num_full_slots

    def unseen_token_ids(self, sequence_token_ids: Sequence[int]) -> list[int]:
        return list(sequence_token_ids[self.num_full_slots:])

    def allocate(self, token_ids: list[int], device: Device = Device.GPU,
                 extra_hash: Optional[int] = None) -> None:
        """Give a fresh table pages for ``token_ids``: full pages first, then the tail."""
        if self.is_allocated:
            raise InvalidArgument("block table is already allocated")
        if not token_ids:
            raise InvalidArgument("cannot allocate a block table for no tokens")
        parts = chunks(list(token_ids), self.block_size)
        full = [c for c in parts if len(c) == self.block_size]
        tail = [c for c in parts if len(c) != self.block_size]
        blocks: list[Block] = []
        prev: Optional[Block] = None
        if full:
            blocks.extend(self.allocator.allocate_immutable_blocks(None, full, device, extra_hash))
            prev = blocks[-1]
        if tail:
            block = self.allocator.allocate_mutable_block(prev, device, extra_hash)
            self.allocator.append_token_ids(block, tail[0])
            blocks.append(block)
        self.blocks = blocks
        self.physical_block_ids = [b.block_id for b in blocks]  # type: ignore[misc]  # pages hold ids
        self.num_full_slots = len(token_ids)

    def append_token_ids(self, token_ids: list[int], num_lookahead_slots: int = 0,
                         num_computed_slots: Optional[int] = None,
                         extra_hash: Optional[int] = None) -> None:
        """Write new tokens (plus room for lookahead slots), dropping out-of-window pages."""
        if not self.is_allocated:
            raise InvalidArgument("no blocks have been allocated")
        if self.max_block_sliding_window is not None:
            null_block = self.allocator.allocate_or_get_null_block()
            if num_computed_slots is None:
                raise InvalidArgument("sliding window needs the number of computed slots")
            end = num_computed_slots // self.block_size - self.max_block_sliding_window
            for idx in range(0, end):
                if self.blocks[idx] is not null_block:
                    self.allocator.free(self.blocks[idx])
                    self.blocks[idx] = null_block
                    self.physical_block_ids[idx] = null_block.block_id  # type: ignore[assignment]  # it holds an id
        self.ensure_num_empty_slots(len(token_ids) + num_lookahead_slots, extra_hash)
        index = self.num_full_slots // self.block_size
        for part in self.chunks_for_append(token_ids):
            block = self.blocks[index]
            self.allocator.append_token_ids(block, part)
            # The write may have moved the view: copy-on-write, or a full page found in the cache.
            self.physical_block_ids[index] = block.block_id  # type: ignore[assignment]  # written: holds an id
            index += 1
        self.num_full_slots += len(token_ids)

    def ensure_num_empty_slots(self, num_empty_slots: int, extra_hash: Optional[int] = None) -> None:
        if self.num_empty_slots >= num_empty_slots:
            return
        for _ in range(cdiv(num_empty_slots - self.num_empty_slots, self.block_size)):
            block = self.allocator.allocate_mutable_block(self.blocks[-1], Device.GPU, extra_hash)
            self.blocks.append(block)
            self.physical_block_ids.append(block.block_id)  # type: ignore[arg-type]  # new: holds an id

    def fork(self) -> BlockTable:
        """A second table sharing every page of this one (counts go up by one each)."""
        if not self.is_allocated:
            raise InvalidArgument("cannot fork an unallocated block table")
        if any(isinstance(b, NullBlock) for b in self.blocks):
            # vLLM walks prev links through pages it already released; undefined, so refused.
            from reference.blocks.v0.faults import NullBlockMisuse
            raise NullBlockMisuse("cannot fork a table whose front pages were dropped")
        return BlockTable(self.block_size, self.allocator, self.allocator.fork(self.blocks[-1]),
                          self.max_block_sliding_window)

    def free(self) -> None:
        for block in self.blocks:
            self.allocator.free(block)
        self.blocks = []
        self.physical_block_ids = []

    def swap(self, src: Device, dst: Device) -> dict[int, int]:
        """Move every page to the other device; return {old absolute id: new absolute id}."""
        mapping = self.allocator.swap(self.blocks, src, dst)
        self.physical_block_ids = [b.block_id for b in self.blocks]  # type: ignore[misc]  # pages hold ids
        return mapping

    # -- the same mutations, counted on a PageBudget before they are made (page_budget.py) -------
    # Each walks its mutation's page requests in the mutation's order; the budget raises
    # OutOfBlocks at the first one the pool could not meet. Refusals of other kinds are left to
    # the mutation itself.
    def plan_allocate(self, budget: PageBudget, token_ids: Sequence[int], extra_hash: Optional[int] = None) -> None:
        """The pages :meth:`allocate` takes: each full page (shared where its hash is in use), the tail."""
        prev_hash: Optional[int] = None
        for i, part in enumerate(chunks(list(token_ids), self.block_size)):
            if len(part) == self.block_size and budget.hashing:
                prev_hash = budget.page_hash(i == 0, prev_hash, part, extra_hash)
                budget.take_full(prev_hash)
            else:
                budget.take()

    def plan_append_token_ids(self, budget: PageBudget, token_ids: list[int], num_lookahead_slots: int = 0,
                              num_computed_slots: Optional[int] = None, extra_hash: Optional[int] = None) -> None:
        """The pages :meth:`append_token_ids` takes and gives back: the null page on first use,
        the pages that leave the window, new pages, a copy of each shared page written to, and the
        page of each filled page whose content is already held."""
        null_block = self.allocator.null_block
        if self.max_block_sliding_window is not None:
            if null_block is None:
                budget.take()
            if num_computed_slots is None:
                return
            end = num_computed_slots // self.block_size - self.max_block_sliding_window
            for block in self.blocks[:max(end, 0)]:
                if block is not null_block and block.block_id is not None:
                    budget.release(block.block_id)
        needed = len(token_ids) + num_lookahead_slots
        if self.num_empty_slots < needed:
            for _ in range(cdiv(needed - self.num_empty_slots, self.block_size)):
                budget.take()
        index = self.num_full_slots // self.block_size
        prev: Optional[Block] = self.blocks[index].prev if index < len(self.blocks) else self.blocks[-1]
        prev_hash = None if prev is None else prev.content_hash
        for j, part in enumerate(self.chunks_for_append(token_ids)):
            existing = self.blocks[index + j] if index + j < len(self.blocks) else None
            written = len(part) + (len(existing.token_ids) if existing is not None else 0)
            if existing is not None and existing.block_id is not None and budget.is_shared(existing.block_id):
                budget.take()  # copy on write
            if budget.hashing and written == self.block_size:
                block_extra = existing.extra_hash if existing is not None else extra_hash
                tokens = (existing.token_ids if existing is not None else []) + part
                prev_hash = budget.page_hash(prev is None and j == 0, prev_hash, tokens, block_extra)
                if prev_hash is not None:
                    budget.promote(prev_hash)
            else:
                prev_hash = None

    def plan_swap(self, budget: PageBudget) -> None:
        """The pages :meth:`swap` takes on the destination (the budget's pool): one per page, but
        a full page whose hash is in use there is shared."""
        for block in self.blocks:
            if block.is_full and budget.hashing:
                prev = block.prev
                budget.take_full(budget.page_hash(prev is None, None if prev is None else prev.content_hash,
                                                  block.token_ids, block.extra_hash))
            else:
                budget.take()

    def num_blocks_touched_by_append_slots(self, token_ids: Sequence[int], num_lookahead_slots: int) -> int:
        """Worst-case number of pages an append writes to (each may need a new page)."""
        n = len(token_ids) + num_lookahead_slots
        first_chunk = self.block_size - self.num_full_slots % self.block_size
        return 1 + cdiv(n - first_chunk, self.block_size)

    def chunks_for_append(self, token_ids: list[int]) -> list[list[int]]:
        if not token_ids:
            return []
        first_chunk = self.block_size - self.num_full_slots % self.block_size
        return [token_ids[:first_chunk]] + chunks(token_ids[first_chunk:], self.block_size)
