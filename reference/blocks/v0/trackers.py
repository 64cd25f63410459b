"""Two per-sequence ledgers the V0 manager keeps next to the block tables.

:class:`ComputedBlocksTracker` (vLLM 0.6.5 and later) answers "how many leading tokens of this sequence are already in
the prefix cache?". It hashes the sequence's *tokens* (not its table) page by page, incrementally,
with the same chained hash the allocator uses, then asks the allocator how long a prefix of those
hashes names computed cached pages. While a sequence is still in prefill the first answer is kept,
so a chunked prefill does not see its cached count move under it
(``v0.10.2 vllm/core/block/prefix_caching_block.py:956-1090``).

:class:`ComputedBlockIdsTracker` is what releases before 0.6.5 kept instead (policy field
``V0Policy.cached_tokens_tracker``): per sequence, the computed pages found so far among its table's
ids, and whether a page was missing. Each manager call looks only at the pages added since, and
once one was missing it stops looking until the sequence is freed
(``v0.6.4 vllm/core/block/prefix_caching_block.py:845-925``).

:class:`LastAccessTracker` remembers, per sequence, the scheduler's last access time; it is
written to the pages only when the sequence is freed - the moment the pages may enter the evictor
and their age starts to matter (``:1093-1128``).
"""

from __future__ import annotations

from typing import Optional

from reference.blocks.errors import InvalidArgument, UnknownRequest
from reference.blocks.v0.content_hash import V0_10_2_HASHING, PageHashing
from reference.blocks.v0.device_allocator import DeviceAllocator
from reference.blocks.v0.sequence_view import SeqView


class ComputedBlocksTracker:
    def __init__(self, allocator: DeviceAllocator, block_size: int, enable_caching: bool,
                 scheme: PageHashing = V0_10_2_HASHING) -> None:
        self.allocator = allocator
        self.block_size = block_size
        self.enable_caching = enable_caching
        self.scheme = scheme  # the allocator's: the same chain of hashes
        self.seq_hashes: dict[int, list[int]] = {}
        self.seq_num_cached: dict[int, int] = {}

    def _update_hashes(self, seq: SeqView) -> None:
        hashes = self.seq_hashes.get(seq.seq_id, [])
        if len(seq.token_ids) < len(hashes) * self.block_size:
            raise InvalidArgument(f"sequence {seq.seq_id} is shorter than the pages already hashed")
        first_parent = self.scheme.first_parent
        prev = first_parent if not hashes else hashes[-1]
        for i in range(len(hashes), len(seq.token_ids) // self.block_size):
            page = seq.token_ids[i * self.block_size:(i + 1) * self.block_size]
            prev = self.scheme.block_hash(prev == first_parent, prev, page, seq.extra_hash)
            hashes.append(prev)
        self.seq_hashes[seq.seq_id] = hashes

    def get_num_cached_tokens(self, seq: SeqView) -> int:
        if not self.enable_caching:
            return 0
        self._update_hashes(seq)
        previous = self.seq_num_cached.get(seq.seq_id)
        if previous is not None and seq.is_prefill:
            return previous
        # vLLM takes len() of the found prefix (v0.10.2 prefix_caching_block.py:1076-1077); the count alone is the same.
        cached = self.allocator.num_cached_blocks_prefix(self.seq_hashes[seq.seq_id])
        self.seq_num_cached[seq.seq_id] = cached * self.block_size
        return cached * self.block_size

    def computed_block_ids(self, seq: SeqView, block_ids: list[int]) -> list[int]:
        """The leading ``block_ids`` whose pages are cached: as many as the sequence has cached tokens."""
        return block_ids[:self.get_num_cached_tokens(seq) // self.block_size]

    def add_seq(self, seq_id: int) -> None:
        """Nothing to record: a sequence is tracked from its first :meth:`get_num_cached_tokens`."""

    def is_tracked(self, seq_id: int) -> bool:
        return not self.enable_caching or (seq_id in self.seq_hashes and seq_id in self.seq_num_cached)

    def remove_seq(self, seq_id: int) -> None:
        if not self.enable_caching:
            return
        if not self.is_tracked(seq_id):
            raise UnknownRequest(f"sequence {seq_id} has no cached-token record")
        del self.seq_hashes[seq_id]
        del self.seq_num_cached[seq_id]


class ComputedBlockIdsTracker:
    """Per sequence: the computed pages found among its block ids, and whether one was missing."""

    def __init__(self, allocator: DeviceAllocator, enable_caching: bool) -> None:
        self.allocator = allocator
        self.enable_caching = enable_caching
        self.seq_blocks: dict[int, tuple[list[int], bool]] = {}  # seq id -> (computed ids, has_gap)

    def add_seq(self, seq_id: int) -> None:
        if seq_id in self.seq_blocks:
            raise InvalidArgument(f"sequence {seq_id} is already tracked")
        self.seq_blocks[seq_id] = ([], False)

    def is_tracked(self, seq_id: int) -> bool:
        return seq_id in self.seq_blocks

    def remove_seq(self, seq_id: int) -> None:
        if seq_id not in self.seq_blocks:
            raise UnknownRequest(f"sequence {seq_id} is not tracked")
        del self.seq_blocks[seq_id]

    def computed_block_ids(self, seq: SeqView, block_ids: list[int]) -> list[int]:
        """The computed ids among ``block_ids`` but the last, looking only past those found before.

        Every computed page after the recorded ones is added, also after a page that is not
        computed: the list then skips that page, and ``has_gap`` stops all further looking
        (``v0.6.4 vllm/core/block/prefix_caching_block.py:537-555, 881-925``). Without prefix caching no page
        counts as computed (``v0.6.4 vllm/core/block/naive_block.py:265-270``).
        """
        if seq.seq_id not in self.seq_blocks:
            raise UnknownRequest(f"sequence {seq.seq_id} is not tracked")
        found, has_gap = self.seq_blocks[seq.seq_id]
        if has_gap:
            return found
        num_cur_blocks = len(block_ids) - 1  # the last page is never offered as computed
        if num_cur_blocks < 0:
            raise InvalidArgument(f"sequence {seq.seq_id} has no pages")
        if len(found) >= num_cur_blocks:
            if len(found) != num_cur_blocks:
                raise InvalidArgument(f"sequence {seq.seq_id} has fewer pages than it had computed")
            return found
        if self.enable_caching:
            found = found + [b for b in block_ids[len(found):num_cur_blocks] if self.allocator.is_block_computed(b)]
        else:
            found = []
        self.seq_blocks[seq.seq_id] = (found, len(found) < num_cur_blocks)
        return found


class LastAccessTracker:
    def __init__(self, allocator: DeviceAllocator) -> None:
        self.allocator = allocator
        self.last_access: dict[int, Optional[float]] = {}

    def add_seq(self, seq_id: int) -> None:
        if seq_id in self.last_access:
            raise InvalidArgument(f"sequence {seq_id} is already tracked")
        self.last_access[seq_id] = None

    def remove_seq(self, seq_id: int) -> None:
        if seq_id not in self.last_access:
            raise UnknownRequest(f"sequence {seq_id} is not tracked")
        del self.last_access[seq_id]

    def update_last_access(self, seq_id: int, now: float) -> None:
        if seq_id not in self.last_access:
            raise UnknownRequest(f"sequence {seq_id} is not tracked")
        self.last_access[seq_id] = now

    def write_to_blocks(self, seq_id: int, block_ids: list[int]) -> None:
        """Stamp the sequence's pages with its last access time, if it has one."""
        if seq_id not in self.last_access:
            raise UnknownRequest(f"sequence {seq_id} is not tracked")
        now = self.last_access[seq_id]
        if now is not None:
            self.allocator.mark_blocks_as_accessed(block_ids, now)
