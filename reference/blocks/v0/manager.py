"""The V0 block space manager: block tables for every sequence, over a CPU/GPU page pool.

This is the public entry point, a re-implementation of vLLM v0.10.2's
``SelfAttnBlockSpaceManager`` (``vllm/core/block_manager.py``). vLLM hands it ``Sequence`` and
``SequenceGroup`` objects; the reference takes :class:`SeqView` values instead - and, where vLLM
filters a group's sequences by status (waiting, running, swapped), the caller passes the already
filtered list. Every method returns what vLLM returns for the same call: the same page ids in the
same order, the same copy-on-write and swap pairs, the same ``AllocStatus``.

Refusals: misuse raises a :class:`~reference.blocks.errors.BlockManagerError` and leaves every
ledger as it was. vLLM itself is not that careful (it leaks pages when an allocation runs dry half
way, and its prefix-cache hit-rate counter keeps the queries of the failed call); callers that
follow the scheduler's protocol - ask ``can_*`` first - never see the difference
(``conformance/known-upstream-bugs/reference-rolls-back-failed-allocate.json`` shows it).
Two vLLM leniencies are kept because callers rely on them: ``free`` of an unknown sequence and
``fork`` of an unknown parent silently do nothing (``v0.10.2 block_manager.py:257-259``, ``:340-342``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

from reference.blocks.errors import InvalidArgument, UnknownRequest
from reference.blocks.policies import V0_V0_10_2, V0Policy
from reference.blocks.v0.block import NullBlock
from reference.blocks.v0.block_table import BlockTable, num_required_blocks
from reference.blocks.v0.content_hash import PageHashing
from reference.blocks.v0.device_allocator import DeviceAllocator
from reference.blocks.v0.page_budget import PageBudget
from reference.blocks.v0.sequence_view import SeqView
from reference.blocks.v0.status import AllocStatus, Device
from reference.blocks.v0.trackers import ComputedBlockIdsTracker, ComputedBlocksTracker, LastAccessTracker


class BlockSpaceManager:
    """Pages for sequences: allocate, grow, share, copy on write, swap, free."""

    def __init__(self, block_size: int, num_gpu_blocks: int, num_cpu_blocks: int,
                 watermark: float = 0.01, sliding_window: Optional[int] = None,
                 enable_caching: bool = False, policy: V0Policy = V0_V0_10_2) -> None:
        if block_size <= 0:
            raise InvalidArgument(f"block_size must be positive, got {block_size}")
        if watermark < 0:
            raise InvalidArgument(f"watermark must not be negative, got {watermark}")
        if sliding_window is not None and sliding_window <= 0:
            raise InvalidArgument(f"sliding_window must be positive, got {sliding_window}")
        self.block_size = block_size
        self.num_total_gpu_blocks = num_gpu_blocks
        self.num_total_cpu_blocks = num_cpu_blocks
        self.sliding_window = sliding_window
        # window // block_size + 1 pages cover the window; one more because the newest page may
        # be nearly empty, stretching the window over one extra page at the front (:76-86).
        self.max_block_sliding_window = (None if sliding_window is None
                                         else sliding_window // block_size + 2)
        self.watermark = watermark
        self.watermark_blocks = int(watermark * num_gpu_blocks)
        self.enable_caching = enable_caching
        self.policy = policy
        self.allocator = DeviceAllocator(num_gpu_blocks, num_cpu_blocks, block_size, enable_caching, policy)
        self.block_tables: dict[int, BlockTable] = {}
        self.computed_tracker: ComputedBlocksTracker | ComputedBlockIdsTracker = (
            ComputedBlocksTracker(self.allocator, block_size, enable_caching, PageHashing.of(policy))
            if policy.cached_tokens_tracker else ComputedBlockIdsTracker(self.allocator, enable_caching))
        self.access_tracker = LastAccessTracker(self.allocator)

    # -- helpers ----------------------------------------------------------------------------------
    def _table(self, seq_id: int) -> BlockTable:
        try:
            return self.block_tables[seq_id]
        except KeyError:
            raise UnknownRequest(f"sequence {seq_id} has no block table") from None

    def _refuse_if_short(self, worst_case_blocks: int, device: Device, plan: Callable[[PageBudget], None]) -> None:
        """Refuse (OutOfBlocks) a mutation that would run out of pages part way, before it starts.

        When the device surely has enough free pages nothing is counted (the common case, kept
        cheap: it runs on every append); otherwise ``plan`` walks the mutation's page requests on
        a :class:`PageBudget`, which raises at the first one the pool could not meet. Nothing is
        copied: the walk costs what the mutation costs, whatever the size of the pool.
        """
        if self.allocator.get_num_free_blocks(device) >= worst_case_blocks:
            return
        plan(PageBudget(self.allocator.pool(device)))

    # -- admission --------------------------------------------------------------------------------
    def can_allocate(self, seq: SeqView, num_lookahead_slots: int = 0) -> AllocStatus:
        """Could the group whose first waiting sequence is ``seq`` be given pages?"""
        if num_lookahead_slots < 0:
            raise InvalidArgument("num_lookahead_slots must not be negative")
        required = num_required_blocks(seq.token_ids, self.block_size, num_lookahead_slots)
        if self.max_block_sliding_window is not None:
            required = min(required, self.max_block_sliding_window)
        free = self.allocator.get_num_free_blocks(Device.GPU)
        if self.num_total_gpu_blocks - required < self.watermark_blocks:
            return AllocStatus.NEVER
        if free - required >= self.watermark_blocks:
            return AllocStatus.OK
        return AllocStatus.LATER

    def allocate(self, seqs: list[SeqView]) -> None:
        """Allocate the first waiting sequence's prompt; the others share it by fork."""
        if not seqs:
            raise InvalidArgument("a sequence group needs at least one waiting sequence")
        ids = [s.seq_id for s in seqs]
        if len(set(ids)) != len(ids) or set(ids) & self.block_tables.keys():
            raise InvalidArgument("block table already exists")
        if len(seqs) > 1 and not seqs[0].token_ids:
            raise InvalidArgument("cannot share an empty prompt between sequences")
        first = seqs[0]
        table = BlockTable(self.block_size, self.allocator,
                           max_block_sliding_window=self.max_block_sliding_window)
        if first.token_ids:
            self._refuse_if_short(num_required_blocks(first.token_ids, self.block_size), Device.GPU,
                                  lambda budget: table.plan_allocate(budget, first.token_ids, first.extra_hash))
            table.allocate(list(first.token_ids), extra_hash=first.extra_hash)
        self.block_tables[first.seq_id] = table
        self.computed_tracker.add_seq(first.seq_id)
        self.access_tracker.add_seq(first.seq_id)
        for seq in seqs[1:]:
            self.block_tables[seq.seq_id] = table.fork()
            self.computed_tracker.add_seq(seq.seq_id)
            self.access_tracker.add_seq(seq.seq_id)

    # -- growth -----------------------------------------------------------------------------------
    def can_append_slots(self, seqs: list[SeqView], num_lookahead_slots: int) -> bool:
        """Worst case: every page an append touches needs a new page (CoW or growth)."""
        touched = 0
        for seq in seqs:
            table = self._table(seq.seq_id)
            touched += table.num_blocks_touched_by_append_slots(
                table.unseen_token_ids(seq.token_ids), num_lookahead_slots)
        return touched <= self.allocator.get_num_free_blocks(Device.GPU)

    def append_slots(self, seq: SeqView, num_lookahead_slots: int) -> list[tuple[int, int]]:
        """Write the sequence's unseen tokens; return the copy-on-write pairs this caused."""
        table = self._table(seq.seq_id)
        if not table.is_allocated:
            raise InvalidArgument(f"sequence {seq.seq_id} has no pages to append to")
        if num_lookahead_slots < 0:
            raise InvalidArgument("num_lookahead_slots must not be negative")
        unseen = table.unseen_token_ids(seq.token_ids)
        # Every touched page may need a fresh one (growth or copy-on-write); a sliding window
        # may also take the shared null page on its first drop.
        worst = table.num_blocks_touched_by_append_slots(unseen, num_lookahead_slots) + (
            self.max_block_sliding_window is not None)
        self._refuse_if_short(worst, Device.GPU, lambda budget: table.plan_append_token_ids(
            budget, unseen, num_lookahead_slots, seq.num_computed_tokens, seq.extra_hash))
        table.append_token_ids(unseen, num_lookahead_slots, seq.num_computed_tokens, seq.extra_hash)
        return self.allocator.clear_copy_on_writes()

    def fork(self, parent_id: int, child_id: int) -> None:
        """Let ``child_id`` share every page of ``parent_id``; no-op if the parent is unknown."""
        if parent_id not in self.block_tables:
            return
        if child_id in self.block_tables:
            raise InvalidArgument(f"sequence {child_id} already has a block table")
        self.block_tables[child_id] = self.block_tables[parent_id].fork()
        self.computed_tracker.add_seq(child_id)
        self.access_tracker.add_seq(child_id)

    def free(self, seq_id: int) -> None:
        """Release a sequence's pages; no-op if it has none (already freed or never scheduled)."""
        if seq_id not in self.block_tables:
            return
        if not self.computed_tracker.is_tracked(seq_id):
            # vLLM asserts here after half the work (v0.10.2 prefix_caching_block.py:1086); we refuse first.
            raise UnknownRequest(f"sequence {seq_id} was never asked for its cached tokens")
        table = self.block_tables[seq_id]
        self.access_tracker.write_to_blocks(seq_id, table.physical_block_ids)
        self.access_tracker.remove_seq(seq_id)
        self.computed_tracker.remove_seq(seq_id)
        table.free()
        del self.block_tables[seq_id]

    # -- swapping ---------------------------------------------------------------------------------
    def _can_swap(self, seqs: list[SeqView], device: Device, num_lookahead_slots: int = 0) -> AllocStatus:
        touched = 0
        blocks = []
        for seq in seqs:
            table = self._table(seq.seq_id)
            touched += table.num_blocks_touched_by_append_slots(
                table.unseen_token_ids(seq.token_ids), num_lookahead_slots)
            blocks.extend(table.blocks)
        touched += self.allocator.get_num_full_blocks_touched(blocks, device)
        watermark = self.watermark_blocks if device is Device.GPU else 0
        if self.allocator.get_num_total_blocks(device) < touched:
            return AllocStatus.NEVER
        if self.allocator.get_num_free_blocks(device) - touched >= watermark:
            return AllocStatus.OK
        return AllocStatus.LATER

    def can_swap_in(self, seqs: list[SeqView], num_lookahead_slots: int) -> AllocStatus:
        return self._can_swap(seqs, Device.GPU, num_lookahead_slots)

    def can_swap_out(self, seqs: list[SeqView]) -> bool:
        return self._can_swap(seqs, Device.CPU) is AllocStatus.OK

    def _swap(self, seqs: list[SeqView], src: Device, dst: Device) -> list[tuple[int, int]]:
        tables = [self._table(s.seq_id) for s in seqs]
        pairs: list[tuple[int, int]] = []
        self._refuse_if_short(sum(len(t.blocks) for t in tables), dst, lambda budget: _plan_swaps(tables, budget))
        for table in tables:
            if not table.blocks:
                continue
            mapping = table.swap(src, dst)
            relative = {self.allocator.get_physical_block_id(src, s):
                        self.allocator.get_physical_block_id(dst, d) for s, d in mapping.items()}
            pairs.extend(relative.items())
        return pairs

    def swap_in(self, seqs: list[SeqView]) -> list[tuple[int, int]]:
        """Bring swapped sequences back to the GPU; return (cpu id, gpu id) pairs, device-relative."""
        return self._swap(seqs, Device.CPU, Device.GPU)

    def swap_out(self, seqs: list[SeqView]) -> list[tuple[int, int]]:
        """Move running sequences to the CPU; return (gpu id, cpu id) pairs, device-relative."""
        return self._swap(seqs, Device.GPU, Device.CPU)

    # -- prefix caching ---------------------------------------------------------------------------
    def access_all_blocks_in_seq(self, seq_id: int, now: float) -> None:
        if self.enable_caching:
            self.access_tracker.update_last_access(seq_id, now)

    def mark_blocks_as_computed(self) -> None:
        self.allocator.mark_blocks_as_computed([])

    def get_num_cached_tokens(self, seq: SeqView) -> int:
        if not isinstance(self.computed_tracker, ComputedBlocksTracker):
            raise InvalidArgument("this policy's manager keeps computed block ids, not cached-token "
                                  "counts (V0Policy.cached_tokens_tracker)")
        return self.computed_tracker.get_num_cached_tokens(seq)

    def remove_seq_from_computed_blocks_tracker(self, seq_id: int) -> None:
        self.computed_tracker.remove_seq(seq_id)

    def get_common_computed_block_ids(self, seqs: list[SeqView]) -> list[int]:
        """Pages every sequence of the group may skip in prefill: the common cached prefix."""
        per_seq = []
        for seq in seqs:
            table = self._table(seq.seq_id)
            per_seq.append(self.computed_tracker.computed_block_ids(seq, table.physical_block_ids))
        return self.allocator.get_common_computed_block_ids(per_seq)

    def get_prefix_cache_hit_rate(self, device: Device) -> float:
        return self.allocator.get_prefix_cache_hit_rate(device)

    def reset_prefix_cache(self, device: Optional[Device] = None) -> bool:
        return self.allocator.reset_prefix_cache(device)

    # -- queries ----------------------------------------------------------------------------------
    def get_block_table(self, seq_id: int) -> list[int]:
        """The sequence's page ids: the table's own id list, not a copy, as vLLM returns it
        (``v0.10.2 block_manager.py:285-287``), because the scheduler asks for it every step. It changes
        as the table does; a caller that keeps it, or edits it, must copy it first."""
        return self._table(seq_id).physical_block_ids

    def get_num_free_gpu_blocks(self) -> int:
        return self.allocator.get_num_free_blocks(Device.GPU)

    def get_num_free_cpu_blocks(self) -> int:
        return self.allocator.get_num_free_blocks(Device.CPU)


def _plan_swaps(tables: list[BlockTable], budget: PageBudget) -> None:
    """The destination pages of swapping ``tables`` in order; the walk ends where the swap would
    refuse a table holding the null page (before taking anything for it)."""
    for table in tables:
        if any(isinstance(b, NullBlock) for b in table.blocks):
            return
        table.plan_swap(budget)
