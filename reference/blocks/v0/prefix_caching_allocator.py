"""The page allocator with prefix caching (vLLM v0.10.2 ``PrefixCachingBlockAllocator``).

Two kinds of page coexist:

* *mutable* pages - the partly written tail of a sequence. They have no hash yet and are managed
  exactly like naive pages, by an inner :class:`NaiveAllocator` that owns the free-id queue and the
  (shared) reference counts;
* *immutable* pages - full pages, known by their content hash in ``cached`` (hash -> id). When the
  last reference to one goes away it is *parked* in the evictor (:mod:`.evictor`) rather than freed, so a
  later request with the same prefix can take it back (a cache hit) without recomputing it.

A new page is taken from the free-id queue first and only then by evicting a parked page
(``_allocate_block_id``, ``v0.10.2 prefix_caching_block.py:297-310``). A mutable page that fills up is
*promoted*: its hash is registered, or - if another page already holds that content - the view
is moved onto the existing page and its own page goes back to the free queue (``:487-528``).

Per page the allocator also tracks whether it is *active* (referenced), when it was last
accessed and whether it is *computed* (its KV values exist). New full pages become computed only
when the scheduler calls :meth:`mark_blocks_as_computed` after the batch; only computed pages count
as cached prefix for :meth:`find_cached_blocks_prefix`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from os.path import commonprefix
from typing import Optional, cast

from reference.blocks.errors import InvalidArgument, OutOfBlocks, UnknownBlock
from reference.blocks.policies import V0_V0_10_2, V0Policy
from reference.blocks.v0.block import Block, CopyOnWriteLog
from reference.blocks.v0.content_hash import PageHashing, hash_hex
from reference.blocks.v0.evictor import make_evictor
from reference.blocks.v0.faults import UpstreamInvariantBroken
from reference.blocks.v0.hit_rate import HitRateMetric
from reference.blocks.v0.naive_allocator import NaiveAllocator, chain_of

NEVER_ACCESSED = -1  # v0.10.2 prefix_caching_block.py:25


class PageStatus:
    """Whether a page is referenced, when it was last accessed, whether it is computed."""

    __slots__ = ("active", "last_accessed", "computed")

    def __init__(self) -> None:
        self.active = False
        self.last_accessed: float = NEVER_ACCESSED
        self.computed = False

    def enable(self, computed: bool) -> None:
        if self.active:
            raise UpstreamInvariantBroken("page is already tracked as active")
        self.active, self.last_accessed, self.computed = True, NEVER_ACCESSED, computed

    def disable(self) -> None:
        if not self.active:
            raise UpstreamInvariantBroken("page is not tracked as active")
        self.active, self.last_accessed, self.computed = False, NEVER_ACCESSED, False


class PrefixCachingAllocator:
    """Pages of one device, reused by content hash."""

    hashing = True

    def __init__(self, block_ids: Iterable[int], block_size: int,
                 policy: V0Policy = V0_V0_10_2) -> None:
        ids = list(block_ids)
        self.block_size = block_size
        self.scheme = PageHashing.of(policy)  # how a full page is hashed
        self.evictor_heap = policy.evictor_heap
        self.hashless = NaiveAllocator(ids, block_size)
        self.refcounter = self.hashless.refcounter  # shared, so promotion can move a page
        self.cached: dict[int, int] = {}
        self.touched: set[int] = set()
        self.status: dict[int, PageStatus] = {b: PageStatus() for b in ids}
        self.evictor = make_evictor(self.evictor_heap)
        self.cows = CopyOnWriteLog()
        self.metric = HitRateMetric()

    @property
    def all_ids(self) -> frozenset:
        return self.hashless.all_ids

    # -- taking and returning page ids ------------------------------------------------------------
    def _allocate_block_id(self) -> int:
        if self.hashless.free_ids:
            block_id = self.hashless.allocate_id()
            self.status[block_id].enable(computed=False)
            return block_id
        evicted = self._allocate_evicted_id()
        if evicted is not None:
            return evicted
        raise OutOfBlocks("no free and no evictable block left on this device")

    def _allocate_evicted_id(self) -> Optional[int]:
        if self.evictor.num_blocks == 0:
            return None
        block_id, content_hash = self.evictor.evict()
        # vLLM asserts this (v0.10.2 prefix_caching_block.py:335-338); a stale heap entry can break it.
        if self.cached.get(content_hash) != block_id or self.refcounter.get(block_id) != 0:
            raise UpstreamInvariantBroken(
                f"evictor returned block {block_id} with hash {hash_hex(content_hash)} "
                "that is not the cached holder of that hash")
        del self.cached[content_hash]
        self.refcounter.incr(block_id)
        self.status[block_id].enable(computed=False)
        return block_id

    def _incr_cached(self, block: Block) -> None:
        block.computed = True
        block_id = block.block_id
        assert block_id is not None
        if self.refcounter.incr(block_id) == 1:
            if block_id in self.evictor:
                self.evictor.remove(block_id)
            self.status[block_id].enable(computed=True)

    def _decr_cached(self, block: Block) -> None:
        block_id = block.block_id
        assert block_id is not None
        if self.refcounter.decr(block_id) > 0:
            block.block_id = None
            return
        if block.content_hash not in self.cached:
            raise UpstreamInvariantBroken(f"full block {block_id} is not in the cache")
        self.evictor.add(block_id, block.content_hash, block.num_tokens_total,
                         self.status[block_id].last_accessed)
        self.status[block_id].disable()
        block.block_id = None

    def _decr_hashless(self, block: Block) -> None:
        block_id = block.block_id
        assert block_id is not None
        if self.refcounter.get(block_id) == 1:
            self.status[block_id].disable()
        self.hashless.free(block)

    def free(self, block: Block) -> None:
        if block.block_id is None:
            raise InvalidArgument("the block holds no page")
        if self.refcounter.get(block.block_id) == 0:
            raise UnknownBlock(f"block {block.block_id} is already free")
        if block.content_hash is not None:
            self._decr_cached(block)
        else:
            self._decr_hashless(block)

    # -- allocation -------------------------------------------------------------------------------
    def allocate_mutable_block(self, prev: Optional[Block], extra_hash: Optional[int] = None) -> Block:
        block_id = self._allocate_block_id()
        return Block(prev, [], self.block_size, block_id, hashing=True, extra_hash=extra_hash,
                     scheme=self.scheme)

    def allocate_immutable_block(self, prev: Optional[Block], token_ids: list[int],
                                 extra_hash: Optional[int] = None) -> Block:
        block = Block(prev, token_ids, self.block_size, None, hashing=True, extra_hash=extra_hash,
                      scheme=self.scheme)
        if block.content_hash is None:
            raise InvalidArgument("an immutable block needs a full page of tokens")
        cached_id = self.cached.get(block.content_hash)
        if cached_id is not None:
            self.metric.query(hit=True)
            block.block_id = cached_id
            self._incr_cached(block)
            return block
        self.metric.query(hit=False)
        block = self.allocate_mutable_block(prev, extra_hash)
        self.append_token_ids(block, token_ids)
        return block

    def allocate_immutable_blocks(self, prev: Optional[Block], chunks: list[list[int]],
                                  extra_hash: Optional[int] = None) -> list[Block]:
        blocks = []
        for chunk in chunks:
            prev = self.allocate_immutable_block(prev, chunk, extra_hash)
            blocks.append(prev)
        return blocks

    def append_token_ids(self, block: Block, token_ids: list[int]) -> None:
        """Write into a mutable block: copy-on-write if shared, then promote it if now full."""
        if block.content_hash is not None or block.computed:
            raise InvalidArgument("cannot append to an immutable block")
        if not token_ids:
            return
        if len(token_ids) > block.num_empty_slots:
            raise InvalidArgument(f"{len(token_ids)} tokens do not fit in {block.num_empty_slots} slots")
        block.extend(token_ids)
        if block.block_id is not None:
            block.block_id = self._cow_if_shared(block)
        if block.content_hash is not None:
            block.block_id = self.promote(block)

    def _cow_if_shared(self, block: Block) -> int:
        src = block.block_id
        assert src is not None
        if self.refcounter.get(src) <= 1:
            return src
        # vLLM frees the *inner naive* view, whose hash is always None: the hashless path.
        self._decr_hashless(block)
        dst = self._allocate_block_id()
        self.cows.record(src, dst)
        return dst

    def promote(self, block: Block) -> int:
        """Register a freshly filled page's hash, or move the view onto the page that has it."""
        assert block.content_hash is not None and block.block_id is not None
        if block.content_hash not in self.cached:
            self.cached[block.content_hash] = block.block_id
            self.touched.add(block.block_id)
            return block.block_id
        self._decr_hashless(block)
        block.block_id = self.cached[block.content_hash]
        self._incr_cached(block)
        return block.block_id

    def fork(self, last_block: Block) -> list[Block]:
        chain = chain_of(last_block)
        for block in chain:
            if block.block_id is None or self.refcounter.get(block.block_id) == 0:
                raise InvalidArgument("cannot fork a sequence whose pages are freed")
        forked: list[Block] = []
        prev: Optional[Block] = None
        for block in chain:
            self.refcounter.incr(block.block_id)  # type: ignore[arg-type]  # checked above: an id
            prev = Block(prev, block.token_ids, self.block_size, block.block_id,
                         hashing=True, extra_hash=block.extra_hash, scheme=self.scheme)
            forked.append(prev)
        return forked

    # -- queries ----------------------------------------------------------------------------------
    def get_num_free_blocks(self) -> int:
        return self.hashless.get_num_free_blocks() + self.evictor.num_blocks

    def get_num_total_blocks(self) -> int:
        return self.hashless.get_num_total_blocks()

    def get_physical_block_id(self, absolute_id: int) -> int:
        return self.hashless.get_physical_block_id(absolute_id)

    def get_prefix_cache_hit_rate(self) -> float:
        return self.metric.hit_rate()

    def page_in_use_for(self, content_hash: int) -> Optional[int]:
        """The page holding ``content_hash`` if one does and is referenced (not parked), else None."""
        block_id = self.cached.get(content_hash)
        return block_id if block_id is not None and self.refcounter.get(block_id) > 0 else None

    def is_block_computed(self, block_id: int) -> bool:
        status = self.status[block_id]
        return status.computed if status.active else block_id in self.evictor

    def find_cached_blocks_prefix(self, block_hashes: list[int]) -> list[int]:
        """The leading hashes that name computed cached pages, found by binary search.

        The search assumes cached hashes form a prefix; when they do not, the probes decide, which
        is why this uses the very same ``bisect_left`` as vLLM (``:685-730``).
        """
        def not_cached(h: int) -> bool:
            block_id = self.cached.get(h)
            return block_id is None or not self.is_block_computed(block_id)

        return block_hashes[:bisect_left(block_hashes, True, key=not_cached)]

    def num_cached_blocks_prefix(self, block_hashes: list[int]) -> int:
        """``len(find_cached_blocks_prefix(block_hashes))``, found by the same search, without
        copying the prefix out: the scheduler asks for this count every step, and the copy
        would cost time growing with the context."""
        def not_cached(h: int) -> bool:
            block_id = self.cached.get(h)
            return block_id is None or not self.is_block_computed(block_id)

        return bisect_left(block_hashes, True, key=not_cached)

    def get_num_full_blocks_touched(self, blocks: list[Block]) -> int:
        """Full pages a swap would need a fresh page for: uncached, or cached but parked."""
        count = 0
        for block in blocks:
            if not block.is_full:
                continue
            h = block.content_hash
            if h not in self.cached or self.cached[h] in self.evictor:
                count += 1
        return count

    def get_common_computed_block_ids(self, per_seq_ids: list[list[int]]) -> list[int]:
        """The computed prefix shared by all sequences of a group (``:603-622``)."""
        if len(per_seq_ids) == 1:
            return per_seq_ids[0]  # as vLLM: the caller's own (fresh) list, not a copy of it
        # vLLM uses os.path.commonprefix, which returns '' for no lists; we return [] instead.
        nonempty = [ids for ids in per_seq_ids if ids]
        return cast(list[int], commonprefix(nonempty)) if nonempty else []  # a list slice: already a new list

    # -- access and computed marks ----------------------------------------------------------------
    def mark_blocks_as_accessed(self, block_ids: list[int], now: float) -> None:
        for block_id in block_ids:
            if block_id not in self.status:
                raise UnknownBlock(f"block {block_id} does not belong to this device")
        for block_id in block_ids:
            if self.status[block_id].active:
                self.status[block_id].last_accessed = now
            elif block_id in self.evictor:
                self.evictor.update(block_id, now)
            else:
                raise UnknownBlock(f"block {block_id} is neither in use nor parked")

    def mark_blocks_as_computed(self, block_ids: list[int]) -> None:
        """Mark every page promoted since the last call as computed; ``block_ids`` is unused."""
        for block_id in self.touched:
            self.status[block_id].computed = True
        self.touched.clear()

    # -- swapping ---------------------------------------------------------------------------------
    def swap_out(self, blocks: list[Block]) -> None:
        for block in blocks:
            self.free(block)

    def swap_in(self, blocks: list[Block]) -> None:
        for block in blocks:
            if block.is_full:
                tmp = self.allocate_immutable_block(block.prev, block.token_ids, block.extra_hash)
            else:
                tmp = self.allocate_mutable_block(block.prev, block.extra_hash)
                self.append_token_ids(tmp, block.token_ids)
            block.block_id = tmp.block_id

    # -- reset ------------------------------------------------------------------------------------
    def reset_prefix_cache(self) -> bool:
        """Forget every cached page, if none is in use (``:445-481``); True on success."""
        if self.get_num_total_blocks() - self.get_num_free_blocks() > 0:
            return False
        while (block_id := self._allocate_evicted_id()) is not None:
            self.hashless.free_id(block_id)
        self.evictor = make_evictor(self.evictor_heap)
        self.status = {b: PageStatus() for b in self.status}
        self.metric = HitRateMetric()
        return True
