"""The LRU evictor: unreferenced cached pages, waiting to be either reused or recycled.

With prefix caching a page whose last reference goes away is not returned to the free list at
once: its contents may be asked for again. It is parked here instead, and when the pool runs dry
the allocator *evicts* one parked page - forgets its hash - and hands it out.

Which one? The least recently used (smallest ``last_accessed``); among equally old ones, the page
ending the *longest* prefix (largest ``num_hashed_tokens``), because a long prefix is less likely
to be shared than the short prefixes it extends; then the smallest page id, then the smallest
hash, simply because those are the next fields of the heap tuple. This is vLLM v0.10.2's
``LRUEvictor`` (``v0.10.2 vllm/core/evictor.py:74-150``), reproduced with the same heap discipline:

* entries are pushed, never updated in place; ``update`` only changes the table, so the old heap
  entry of an updated page no longer matches and is skipped when popped (a quirk kept on purpose);
* ``remove`` drops a page from the table only; its heap entry becomes stale and is skipped later -
  unless the page is parked again with the *same* access time, in which case the stale entry looks
  valid again (vLLM behaves the same way, see :mod:`.prefix_caching_allocator`);
* when the heap holds more than 50 entries per parked page it is rebuilt from the table.

Releases before 0.6.5 had no heap (policy field ``V0Policy.evictor_heap``): :class:`ScanLRUEvictor`
walks the table in the order pages were parked, which is LRU only when pages are parked in access
order (``v0.6.4 vllm/core/evictor.py:84-105``).
"""

from __future__ import annotations

import heapq

from reference.blocks.errors import OutOfBlocks, UnknownBlock
from reference.blocks.v0.faults import UpstreamInvariantBroken

CLEANUP_THRESHOLD = 50  # v0.10.2 evictor.py:85


class ParkedPages:
    """What both evictors keep: ``table`` maps a parked page's id -> [content hash, hashed tokens,
    last access], in the order the pages were parked."""

    def __init__(self) -> None:
        self.table: dict[int, list] = {}

    def __contains__(self, block_id: int) -> bool:
        return block_id in self.table

    @property
    def num_blocks(self) -> int:
        return len(self.table)

    def add(self, block_id: int, content_hash: int, num_hashed_tokens: int,
            last_accessed: float) -> None:
        self.table[block_id] = [content_hash, num_hashed_tokens, last_accessed]

    def update(self, block_id: int, last_accessed: float) -> None:
        if block_id not in self.table:
            raise UnknownBlock(f"block {block_id} is not parked in the evictor")
        self.table[block_id][2] = last_accessed

    def remove(self, block_id: int) -> None:
        if block_id not in self.table:
            raise UnknownBlock(f"block {block_id} is not parked in the evictor")
        del self.table[block_id]


class LRUEvictor(ParkedPages):
    """The parked pages and a heap of (last access, -hashed tokens, id, hash) entries over them."""

    def __init__(self) -> None:
        super().__init__()
        self.heap: list[tuple] = []

    def add(self, block_id: int, content_hash: int, num_hashed_tokens: int,
            last_accessed: float) -> None:
        super().add(block_id, content_hash, num_hashed_tokens, last_accessed)
        heapq.heappush(self.heap, (last_accessed, -num_hashed_tokens, block_id, content_hash))
        if len(self.heap) > CLEANUP_THRESHOLD * len(self.table):
            self.heap = [(la, -n, b, h) for b, (h, n, la) in self.table.items()]
            heapq.heapify(self.heap)

    def evict(self) -> tuple[int, int]:
        """Pop the page to recycle; return (block id, the hash it held)."""
        if not self.table:
            raise OutOfBlocks("no parked page to evict")
        while self.heap:
            last_accessed, _, block_id, content_hash = heapq.heappop(self.heap)
            entry = self.table.get(block_id)
            if entry is not None and entry[2] == last_accessed:
                del self.table[block_id]
                return block_id, content_hash
        # vLLM raises ValueError here after having popped the stale entries (v0.10.2 evictor.py:111).
        raise UpstreamInvariantBroken("every heap entry of the evictor is stale")


class ScanLRUEvictor(ParkedPages):
    """Parked pages in the order they were parked: ``table`` maps id -> [hash, hashed tokens, last access].

    ``evict`` starts from the first parked page and walks on while the next page is *no newer*
    than the current candidate, switching to a page that ends a longer prefix; it stops at the
    first newer page. An ``update`` changes a page's time but not its place, so a page accessed
    after it was parked can still be taken before an older one parked later: the order is the
    parking order first, access times only break runs of pages no newer than the candidate
    (``v0.6.4 vllm/core/evictor.py:84-105``; ``update`` at ``:113-114``).
    """

    def evict(self) -> tuple[int, int]:
        """Take the page to recycle; return (block id, the hash it held)."""
        if not self.table:
            raise OutOfBlocks("no parked page to evict")
        pages = iter(self.table.items())
        chosen, (_, best_hashed, best_accessed) = next(pages)
        for block_id, (_, num_hashed, last_accessed) in pages:
            if best_accessed < last_accessed:
                break
            if best_hashed < num_hashed:
                chosen, best_hashed, best_accessed = block_id, num_hashed, last_accessed
        content_hash = self.table.pop(chosen)[0]
        return chosen, content_hash


def make_evictor(heap: bool) -> LRUEvictor | ScanLRUEvictor:
    """The evictor of a policy (``V0Policy.evictor_heap``)."""
    return LRUEvictor() if heap else ScanLRUEvictor()
