"""Whether a mutation will get every page it asks for, decided before it changes anything.

A refused allocation must leave every ledger as it was. Rather than copying the state and putting
it back (a cost that grows with the pool), the manager walks the mutation's page requests in the
order the mutation makes them against a :class:`PageBudget` - a count of the device's free pages
that nothing is taken from - and refuses with :class:`~reference.blocks.errors.OutOfBlocks` at
the first request the count cannot meet. The walk costs what the mutation itself costs (its pages
and their hashes), whatever the size of the pool.

Counting is exact because of how a pool spends pages. A device's free pages are its free-id queue
plus, with prefix caching, its parked (evictable) pages; a request is refused only when both are
empty. Each request costs one free page - a fresh id, an evicted parked page, or a parked page
taken back by a cache hit - except a cache hit on a page already in use, which costs none; a page
released to reference count zero gives one back. Which parked page an eviction picks never
changes a count: a hit on a parked page and a miss cost the same, and when no page is free no page
is parked, so a request then is a miss and is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, Union

from reference.blocks.errors import OutOfBlocks
from reference.blocks.v0.content_hash import PageHashing
from reference.blocks.v0.naive_allocator import NaiveAllocator
from reference.blocks.v0.prefix_caching_allocator import PrefixCachingAllocator


class PageBudget:
    """The free pages of one pool as a mutation would spend them, counted without spending any."""

    def __init__(self, pool: Union[NaiveAllocator, PrefixCachingAllocator]) -> None:
        self.pool = pool
        self.hashing = pool.hashing
        self.scheme: Optional[PageHashing] = pool.scheme if isinstance(pool, PrefixCachingAllocator) else None
        self.free = pool.get_num_free_blocks()
        # Hashes this mutation puts on pages in use. (A page it releases holds a hash of an earlier
        # position of the same sequence, never one the mutation asks for.)
        self.in_use: set[int] = set()

    def page_hash(self, is_first_block: bool, prev_block_hash: Optional[int], token_ids: Sequence[int],
                  extra_hash: Optional[int]) -> Optional[int]:
        """The hash the pool would give a full page (:meth:`.content_hash.PageHashing.page_hash`);
        only asked of a hashing pool."""
        assert self.scheme is not None, "only a prefix-caching pool hashes pages"
        return self.scheme.page_hash(is_first_block, prev_block_hash, token_ids, extra_hash)

    def take(self) -> None:
        """A page that must come from the free-id queue or the evictor."""
        if self.free == 0:
            raise OutOfBlocks("no free and no evictable block left on this device")
        self.free -= 1

    def shares(self, content_hash: Optional[int]) -> bool:
        """Would a full page with this hash share a page in use (a hit that costs nothing)?"""
        if content_hash is None:
            return False
        if content_hash in self.in_use:
            return True
        return isinstance(self.pool, PrefixCachingAllocator) and self.pool.page_in_use_for(content_hash) is not None

    def take_full(self, content_hash: Optional[int]) -> None:
        """A full page, allocated as immutable: shared if its hash is on a page in use, else taken."""
        if self.hashing and self.shares(content_hash):
            return
        self.take()
        if self.hashing and content_hash is not None:
            self.in_use.add(content_hash)

    def promote(self, content_hash: int) -> None:
        """A page of this mutation has filled up with ``content_hash``: where a page in use holds
        that hash already, the filled page's own page goes back to the pool."""
        if self.shares(content_hash):
            self.free += 1
        else:
            self.in_use.add(content_hash)

    def release(self, block_id: int) -> None:
        """The mutation drops its table's one reference to ``block_id`` (a page a sliding window
        leaves): the page comes back if nothing else refers to it."""
        if self.pool.refcounter.get(block_id) == 1:
            self.free += 1

    def is_shared(self, block_id: int) -> bool:
        """Would writing to ``block_id`` copy it first (more than one reference)?"""
        return self.pool.refcounter.get(block_id) > 1
