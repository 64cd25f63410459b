"""Pages as a sequence sees them, plus the two small ledgers every allocator keeps.

A :class:`Block` is a *view* of one physical page from one sequence's block table: the tokens the
sequence wrote there, a link to the previous page of the same sequence, and the physical id it
currently points at. Several views may point at the same physical id (after ``fork``, or when
prefix caching finds a page it already holds); the :class:`RefCounter` counts them. When a view
that shares its page is about to be written, the allocator moves it to a fresh page and records
the pair (old id, new id) in the :class:`CopyOnWriteLog`, so the worker can copy the page contents
before the write lands.

Blocks of the prefix-caching allocator (``hashing=True``) also know their content hash
(:mod:`.content_hash`), computed lazily once the page is full and then remembered, as vLLM does
(``v0.10.2 vllm/core/block/prefix_caching_block.py:893-925``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional, TypeGuard

from reference.blocks.errors import DoubleFree, UnknownBlock
from reference.blocks.v0.content_hash import V0_10_2_HASHING, PageHashing
from reference.blocks.v0.faults import NullBlockMisuse


class Block:
    """One sequence's view of one page."""

    def __init__(self, prev: Optional[Block], token_ids: Iterable[int], block_size: int,
                 block_id: Optional[int], hashing: bool = False,
                 extra_hash: Optional[int] = None, scheme: PageHashing = V0_10_2_HASHING) -> None:
        self.prev = prev
        self.scheme = scheme  # how the release hashes a full page
        self.token_ids: list[int] = list(token_ids)
        self.block_size = block_size
        self.block_id = block_id
        self.hashing = hashing
        # Only hashing blocks carry an extra hash (a naive block reports None, v0.10.2 naive_block.py:462).
        self.extra_hash = extra_hash if hashing else None
        self.computed = False
        self._hash: Optional[int] = None
        self._num_tokens_total: Optional[int] = None
        if hashing:
            self._update_num_tokens_total()

    def _update_num_tokens_total(self) -> None:
        # A hashing block keeps its count up to date on construction and on every append, never
        # recomputing it by walking the chain: vLLM's PrefixCachingBlock does the same
        # (v0.10.2 prefix_caching_block.py:797-812, :849), and a walk per block made freeing a sequence
        # quadratic (and recursive) in its length. Naive blocks, like vLLM's NaiveBlock, keep none.
        before = self.prev.num_tokens_total if self.prev is not None else 0
        self._num_tokens_total = before + len(self.token_ids)

    def extend(self, token_ids: list[int]) -> None:
        """Write ``token_ids`` after the block's tokens (the caller checked they fit)."""
        self.token_ids.extend(token_ids)
        if self.hashing:
            self._update_num_tokens_total()

    @property
    def num_empty_slots(self) -> int:
        return self.block_size - len(self.token_ids)

    @property
    def is_full(self) -> bool:
        return self.num_empty_slots == 0

    @property
    def num_tokens_total(self) -> int:
        """Tokens from the start of the sequence up to and including this page.

        As in vLLM, a hashing page's count is the previous page's count when this page was built
        or last written, plus this page's tokens; pages are written front to back, so it is exact.
        """
        if self._num_tokens_total is not None:
            return self._num_tokens_total
        total = 0  # a naive block: count along the chain (nothing on a hot path asks)
        block: Optional[Block] = self
        while block is not None:
            total += len(block.token_ids)
            block = block.prev
        return total

    @property
    def cached_content_hash(self) -> Optional[int]:
        """The hash if it is already computed, else None; never computes it (vLLM's
        ``_cached_content_hash``)."""
        return self._hash

    @property
    def content_hash(self) -> Optional[int]:
        """The chained hash of a full page, or None (not full, or a naive block).

        The previous page is asked only what vLLM's ``Block`` interface offers, its
        ``content_hash`` (``v0.10.2 prefix_caching_block.py:893-925``), so any object offering that
        interface can precede a page, as a ``MagicMock(spec=PrefixCachingBlock)`` does in vLLM's
        own tests. vLLM computes the hash recursively through the previous pages; the reference
        gives the same values with a loop over the run of its own full, not yet hashed pages
        before this one, so a chain of thousands of them cannot exhaust the interpreter's stack.
        Pages are hashed as they fill, so the run is usually empty.
        """
        if not self.hashing:
            return None
        if self._hash is not None:
            return self._hash
        if not self.is_full:
            return None
        pending: list[Block] = [self]  # this page and the unhashed run before it, nearest first
        while _unhashed_full_page(pending[-1].prev):
            pending.append(pending[-1].prev)
        before = pending[-1].prev
        known = before.content_hash if before is not None else None  # the Block interface only
        for block in reversed(pending):
            known = block._hash = self.scheme.page_hash(block.prev is None, known, block.token_ids,
                                                        block.extra_hash)
        return known


def _unhashed_full_page(block: object) -> TypeGuard[Block]:
    """Is ``block`` one of the reference's own hashing pages, full, whose hash is not known yet?
    (Anything else before a page - a null block, another ``Block`` implementation - is asked for
    its ``content_hash``.)"""
    return (type(block) is Block and block.hashing and block.is_full
            and block.cached_content_hash is None)


class NullBlock(Block):
    """The shared placeholder that replaces pages a sliding window no longer needs.

    It wraps one ordinary page taken from the GPU pool the first time a sliding-window sequence
    grows (``v0.10.2 cpu_gpu_block_allocator.py:119-123``); every dropped position of every sequence then
    points at that one page, which is never freed.
    """

    def __init__(self, proxy: Block) -> None:
        self._proxy = proxy

    @property
    def block_id(self) -> Optional[int]:  # type: ignore[override]  # read-only: never written
        return self._proxy.block_id

    @property
    def token_ids(self) -> list[int]:  # type: ignore[override]  # read-only: never written
        return self._proxy.token_ids

    @property
    def prev(self) -> Optional[Block]:  # type: ignore[override]  # read-only: never written
        return self._proxy.prev

    @property
    def block_size(self) -> int:  # type: ignore[override]  # read-only: never written
        return self._proxy.block_size

    @property
    def hashing(self) -> bool:  # type: ignore[override]  # read-only: never written
        return self._proxy.hashing

    @property
    def extra_hash(self) -> Optional[int]:  # type: ignore[override]  # read-only: never written
        return None

    @property
    def num_tokens_total(self) -> int:
        raise NullBlockMisuse("the null block has no position in any sequence")

    @property
    def content_hash(self) -> Optional[int]:
        return self._proxy.content_hash


class RefCounter:
    """How many block views point at each physical page id of one allocator."""

    def __init__(self, block_ids: Iterable[int]) -> None:
        self._counts: dict[int, int] = {block_id: 0 for block_id in block_ids}

    def _unknown(self, block_id: int) -> UnknownBlock:
        return UnknownBlock(f"block id {block_id} does not belong to this allocator")

    def incr(self, block_id: int) -> int:
        try:
            self._counts[block_id] += 1
        except KeyError:
            raise self._unknown(block_id) from None
        return self._counts[block_id]

    def decr(self, block_id: int) -> int:
        count = self.get(block_id)
        if count == 0:
            raise DoubleFree(f"block id {block_id} is already free")
        self._counts[block_id] = count - 1
        return count - 1

    def get(self, block_id: int) -> int:
        try:
            return self._counts[block_id]
        except KeyError:
            raise self._unknown(block_id) from None

    def nonzero(self) -> dict[int, int]:
        """The ids in use and their counts, in id order."""
        return {b: c for b, c in sorted(self._counts.items()) if c}


class CopyOnWriteLog:
    """The (source id, destination id) copies made since the caller last collected them."""

    def __init__(self) -> None:
        self._pairs: list[tuple[int, int]] = []

    def record(self, src_block_id: int, dst_block_id: int) -> None:
        self._pairs.append((src_block_id, dst_block_id))

    def pending(self) -> list[tuple[int, int]]:
        return list(self._pairs)

    def collect(self) -> list[tuple[int, int]]:
        """Return the recorded copies and start a new log (``v0.10.2 common.py:139-154``)."""
        pairs, self._pairs = self._pairs, []
        return pairs
