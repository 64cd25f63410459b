"""The classic ("V0") KV-cache page manager of vLLM v0.10.2, re-implemented from scratch.

vLLM's first engine kept one *block table* per sequence: a list of physical page ids, each page
holding ``block_size`` token positions. Pages are handed out by an allocator per device (GPU pages
first, CPU pages after them), shared between sequences by reference counting (``fork``), copied on
the first write to a shared page (copy-on-write), moved between devices when a sequence group is
preempted (swap out / swap in), and - with prefix caching - found again by a content hash so that
identical prompt prefixes are computed once.

Modules, one concept each:

* :mod:`.status` - ``AllocStatus`` (OK / LATER / NEVER) and ``Device``;
* :mod:`.content_hash` - the chained block hash and its "no previous block" sentinel;
* :mod:`.block` - the block object, the null block, the reference counter and copy-on-write log;
* :mod:`.evictor` - the LRU evictor of unreferenced cached pages;
* :mod:`.naive_allocator` - the allocator without prefix caching;
* :mod:`.prefix_caching_allocator` - the allocator with prefix caching;
* :mod:`.hit_rate` - the block-granular prefix-cache hit-rate metric;
* :mod:`.device_allocator` - the CPU/GPU pair with disjoint id ranges and swapping;
* :mod:`.block_table` - one sequence's table of pages;
* :mod:`.page_budget` - whether a mutation will get every page it asks for, before it starts;
* :mod:`.trackers` - per-sequence computed-block hashes and last-access times;
* :mod:`.sequence_view` - the plain description of a sequence the manager is given;
* :mod:`.manager` - :class:`BlockSpaceManager`, the public entry point.
"""

from reference.blocks.v0.manager import BlockSpaceManager
from reference.blocks.v0.sequence_view import SeqView
from reference.blocks.v0.status import AllocStatus, Device

__all__ = ["AllocStatus", "BlockSpaceManager", "Device", "SeqView"]
