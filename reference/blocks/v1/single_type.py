"""Per-group block tables: full attention and sliding window.

Each KV-cache group keeps, per request, a *block table*: the list of blocks holding the
request's tokens in order (token ``t`` lives in entry ``t // block_size``). The table only ever
grows at the tail, except that a sliding-window group overwrites entries that fell out of the
window with the null block. This module holds those tables and the group-specific rules:

* how many tokens fall outside the window (and whose pages can be released);
* how to look for the longest prefix-cache hit (:func:`full_attention_hit`,
  :func:`sliding_window_hit`);
* how many new blocks an allocation needs, counting hit blocks that are currently free
  (reviving them takes them out of the free pool just like a fresh allocation would).
* which full blocks a sliding-window group registers in the prefix cache under a retention
  interval (:func:`retained_window_blocks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice

from reference.blocks.v1.block import KVBlock
from reference.blocks.v1.block_pool import BlockPool
from reference.blocks.v1.specs import FullAttention, GroupSpec, SlidingWindow


def cdiv(a: int, b: int) -> int:
    """Ceiling division: how many size-``b`` blocks hold ``a`` tokens."""
    return -(-a // b)


def full_attention_hit(
    block_hashes: Sequence[bytes], max_length: int, group_ids: list[int], pool: BlockPool, block_size: int
) -> tuple[list[list[KVBlock]], int]:
    """Longest run of cached blocks from the start, at most ``max_length`` tokens.

    A full-attention hit must be a contiguous prefix, so the first miss ends the search; a later
    block may still be cached (its chained hash survives an earlier block's eviction), but nothing
    after a miss can extend the hit.
    """
    hit = pool.cached_prefix(islice(block_hashes, max_length // block_size), group_ids)
    return hit, len(hit[0]) * block_size


def sliding_window_hit(
    block_hashes: Sequence[bytes], max_length: int, group_ids: list[int], pool: BlockPool, spec: SlidingWindow
) -> tuple[list[list[KVBlock]], int]:
    """Longest prefix whose last ``window - 1`` tokens are cached, at most ``max_length`` tokens.

    A sliding-window layer computing the next token reads only the previous ``window - 1``
    tokens, so a hit of length ``L`` needs just the ``cdiv(window - 1, block_size)`` blocks
    ending at ``L``; the earlier entries are null blocks. The search goes right to left and
    stops at the first run of that many consecutive cached blocks. If none exists, the run of
    cached blocks at the very start (shorter than the window) is still a hit.
    """
    block_size = spec.block_size
    needed = cdiv(spec.window - 1, block_size)
    # Only hashed blocks can be found. (Before vLLM 0.10.1 a request's hash list can end before
    # its last full block; vLLM 0.9.2 then raises IndexError here, see the V1 machine's
    # lookup_overruns_hashes.)
    max_blocks = min(max_length // block_size, len(block_hashes))
    hit: list[list[KVBlock]] = [[pool.null()] * max_blocks for _ in group_ids]
    run = 0
    found = False
    for index in range(max_blocks - 1, -1, -1):
        cached = pool.get_cached_block(block_hashes[index], group_ids)
        if cached is None:
            run = 0
            continue
        for blocks, block in zip(hit, cached):
            blocks[index] = block
        run += 1
        if run >= needed:
            for blocks in hit:
                del blocks[index + run :]
            found = True
            break
    if not found:
        for blocks in hit:
            del blocks[run:]
    return hit, len(hit[0]) * block_size


def retained_window_blocks(
    start: int, end: int, spec: SlidingWindow, retention_interval: int | None, boundaries: Sequence[int]
) -> list[bool] | None:
    """Which of the full blocks ``start .. end - 1`` a sliding-window group registers (None: all).

    A sliding-window hit of length ``L`` uses only the ``need = cdiv(window - 1, block_size)``
    blocks that end at ``L``, and ``L`` is a multiple of the block size. ``retention_interval``
    None (dense) keeps the tail before every block boundary, that is every block (for a window
    longer than one token; a one-token window needs no block before a hit). ``0`` keeps only
    the ``need`` blocks that end at each reachable boundary rounded down to a block: the prompt's
    replay boundary and the request's shared-prefix boundary. ``k > 0`` (a multiple of the block
    size) also keeps the last ``need`` blocks of every ``k``-token segment; once ``need`` covers a
    whole segment every block is kept.
    """
    block_size = spec.block_size
    need = cdiv(spec.window - 1, block_size)
    mask = [False] * (end - start)
    segment = block_size if retention_interval is None else (retention_interval or None)
    if segment is not None:
        per_segment = segment // block_size
        if need >= per_segment:
            return None
        for index in range(start, end):
            if index % per_segment >= per_segment - need:
                mask[index - start] = True
    if retention_interval is not None:
        for boundary in boundaries:
            last = boundary // block_size  # the blocks before the boundary, rounded down to a block
            for index in range(max(start, last - need), min(end, last)):
                mask[index - start] = True
    return mask


class GroupManager:
    """The block tables of one KV-cache group."""

    def __init__(self, spec: GroupSpec, pool: BlockPool, group_id: int, enable_caching: bool,
                 admission_cap: int | None = None) -> None:
        self.spec = spec
        self.pool = pool
        self.group_id = group_id
        self.block_size = spec.block_size
        self.enable_caching = enable_caching
        self.is_sliding = isinstance(spec, SlidingWindow)  # full attention never releases pages
        self.req_to_blocks: dict[str, list[KVBlock]] = {}
        # How many leading table entries are registered in the prefix cache (or are nulls that
        # need none). Absent until a request first adopts a hit or caches a block.
        self.num_cached_block: dict[str, int] = {}
        # The most blocks the whole-sequence admission check counts for one request (a sliding
        # window recycles its blocks; None: no cap).
        self.admission_cap = admission_cap

    # -- attention-type rules -----------------------------------------------------------------
    def num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """Tokens before the attention window of the next token to compute."""
        if isinstance(self.spec, SlidingWindow):
            return max(0, num_computed_tokens - self.spec.window + 1)
        return 0

    def find_hit(
        self, block_hashes: Sequence[bytes], max_length: int, group_ids: list[int]
    ) -> tuple[list[list[KVBlock]], int]:
        """The longest hit for the groups ``group_ids`` that share this group's spec."""
        if isinstance(self.spec, FullAttention):
            return full_attention_hit(block_hashes, max_length, group_ids, self.pool, self.block_size)
        return sliding_window_hit(block_hashes, max_length, group_ids, self.pool, self.spec)

    def _hashless_to_front(self) -> bool:
        """Do the blocks this group frees go hashless-first? (policy: every path, or the
        sliding-window manager's own paths only, as in v0.23.0)"""
        policy = self.pool.policy
        return policy.free_hashless_blocks_to_front or (self.is_sliding and policy.sliding_window_frees_hashless_to_front)

    # -- table maintenance --------------------------------------------------------------------
    def blocks(self, request_id: str) -> list[KVBlock]:
        return self.req_to_blocks.get(request_id, [])

    def remove_skipped_blocks(self, request_id: str, num_computed_tokens: int) -> None:
        """Release the pages that left the window, replacing their entries by the null block.

        Walks backwards from the last skipped entry and stops at the first null: everything
        before it was released by an earlier call. The released blocks are freed in that
        backwards order.
        """
        if not self.is_sliding:
            return
        skipped = self.num_skipped_tokens(num_computed_tokens)
        if skipped <= 0:
            return
        table = self.req_to_blocks.get(request_id, [])
        last = min(skipped // self.block_size, len(table))
        released: list[KVBlock] = []
        for index in range(last - 1, -1, -1):
            if table[index] is self.pool.null_block:
                break
            released.append(table[index])
            table[index] = self.pool.null()
        if released:
            self.pool.free_blocks(released, self._hashless_to_front())

    def num_blocks_to_allocate(
        self, request_id: str, num_tokens: int, new_computed: Sequence[KVBlock], num_computed_tokens: int,
        capped: bool = False,
    ) -> int:
        """Free blocks an allocation up to ``num_tokens`` slots would consume.

        Hit blocks that currently sit in the free queue count too: adopting them removes them
        from the free pool. Hit entries inside the skipped prefix are not adopted (they become
        nulls), so they are not counted. ``capped`` (the whole-sequence admission check) counts
        at most ``admission_cap`` blocks for the sequence.
        """
        required = cdiv(num_tokens, self.block_size)
        if capped and self.admission_cap is not None:
            required = min(required, self.admission_cap)
        held = len(self.req_to_blocks.get(request_id, ()))
        if request_id in self.num_cached_block:
            return max(required - held, 0)
        skipped_blocks = self.num_skipped_tokens(num_computed_tokens) // self.block_size
        new_blocks = max(required - max(skipped_blocks, len(new_computed) + held), 0)
        first_adopted = max(0, skipped_blocks - held)
        if self.pool.policy.admission_counts_null_blocks:  # before 0.9.1: every hit entry, nulls too
            return new_blocks + sum(b.ref_cnt == 0 for b in new_computed)
        revived = sum(b.ref_cnt == 0 and not b.is_null for b in new_computed[first_adopted:])
        return new_blocks + revived

    def add_computed_blocks(self, request_id: str, new_computed: Sequence[KVBlock], num_computed_tokens: int) -> None:
        """Adopt a prefix-cache hit as the start of an empty table, taking a reference on each block."""
        table = self.req_to_blocks.setdefault(request_id, [])
        assert not table, "a hit can only start an empty block table"
        skipped_blocks = self.num_skipped_tokens(num_computed_tokens) // self.block_size
        head, kept = list(new_computed[:skipped_blocks]), list(new_computed[skipped_blocks:])
        assert all(b.is_null for b in head), "skipped hit entries are always null blocks"
        if self.enable_caching:
            # Whether the skipped head is touched too is a policy choice (hit_touches_skipped_nulls);
            # the pool then counts or ignores the null block as the policy says.
            self.pool.touch(head + kept if self.pool.policy.hit_touches_skipped_nulls else kept)
        nulls = [self.pool.null()] * len(head) if head else []  # a pool without a null block has no window
        table.extend(nulls + kept)
        self.num_cached_block[request_id] = len(table)

    def allocate_new_blocks(self, request_id: str, num_tokens: int, preallocate: int = 0,
                            max_blocks: int | None = None) -> list[KVBlock]:
        """Grow the table to hold ``num_tokens`` tokens; return the blocks added.

        When blocks are missing, ``preallocate`` more are taken (vLLM before 0.8.5), as many as
        the free queue holds and the table has room for up to ``max_blocks`` entries.
        """
        table = self.req_to_blocks.setdefault(request_id, [])
        missing = cdiv(num_tokens, self.block_size) - len(table)
        if missing <= 0:
            return []
        if preallocate:
            room = missing + preallocate if max_blocks is None else max_blocks - len(table)
            missing = min(missing + preallocate, self.pool.num_free_blocks, room)
        fresh = self.pool.get_new_blocks(missing)
        table.extend(fresh)
        return fresh

    def cache_blocks(self, request_id: str, block_hashes: Sequence[bytes], num_tokens: int,
                     retention_interval: int | None = None, boundaries: Sequence[int] = ()) -> None:
        """Register the full blocks among the first ``num_tokens`` tokens in the prefix cache.

        Every one, except in a sliding-window group under a release that honours a retention
        interval (``retention_interval_supported``): then only those
        :func:`retained_window_blocks` keeps for the interval and the reachable ``boundaries``.
        Either way the blocks up to ``num_tokens`` count as cached and are not looked at again.
        """
        if not self.enable_caching:
            return
        num_cached = self.num_cached_block.get(request_id, 0)
        num_full = min(num_tokens, len(block_hashes) * self.block_size) // self.block_size
        if num_cached >= num_full:
            return
        mask = None
        if isinstance(self.spec, SlidingWindow) and self.pool.policy.retention_interval_supported:
            mask = retained_window_blocks(num_cached, num_full, self.spec, retention_interval, boundaries)
        self.pool.cache_full_blocks(block_hashes, self.req_to_blocks[request_id], num_cached, num_full,
                                    self.group_id, mask)
        self.num_cached_block[request_id] = num_full

    def free(self, request_id: str) -> None:
        """Drop the request's table, freeing its blocks tail first (so tails are evicted first;
        before vLLM 0.9.0, in table order when caching is off: ``free_reversed_without_caching``)."""
        table = self.req_to_blocks.pop(request_id, [])
        self.num_cached_block.pop(request_id, None)
        in_order = not self.enable_caching and not self.pool.policy.free_reversed_without_caching
        self.pool.free_blocks(table if in_order else reversed(table), self._hashless_to_front())
