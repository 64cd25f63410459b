"""The V0 manager at real sizes: 1,024- and 8,192-block sequences (16k and 131k tokens) in a
100,000-block pool. Each test runs in well under a few seconds; none times anything."""

from __future__ import annotations

import pytest

from conformance.adapters.reference_v0 import snapshot
from reference.blocks.errors import OutOfBlocks
from reference.blocks.v0 import BlockSpaceManager, SeqView
from reference.blocks.v0.block import Block
from reference.blocks.v0.content_hash import NONE_HASH, hash_block_tokens

BS = 16
POOL = 100_000


def admitted(m: BlockSpaceManager, seq_id: int, tokens: list[int]) -> SeqView:
    """Allocate ``tokens`` for a new sequence and ask for its cached tokens, as the scheduler does."""
    view = SeqView(seq_id, tokens)
    m.allocate([view])
    m.get_num_cached_tokens(view)
    return view


@pytest.mark.parametrize("caching", [True, False])
@pytest.mark.parametrize("num_blocks", [1024, 8192])
def test_free_of_a_long_sequence_releases_every_page(caching, num_blocks):
    """Catches: a recursive walk of the block chain on free (RecursionError from ~1,000 pages, with
    the manager left half-freed), and pages of a long sequence not all returned."""
    m = BlockSpaceManager(BS, POOL, 1_000, enable_caching=caching)
    tokens = list(range(num_blocks * BS))
    admitted(m, 1, tokens)
    assert m.get_num_free_gpu_blocks() == POOL - num_blocks
    m.free(1)
    assert m.get_num_free_gpu_blocks() == POOL
    assert 1 not in m.block_tables
    if caching:  # the full pages are parked for reuse, not lost
        assert m.allocator.gpu.evictor.num_blocks == num_blocks


def test_parked_pages_know_how_many_tokens_end_at_them():
    """Catches: a cached token count per page that is wrong for long chains (it orders eviction:
    among equally old pages the one ending the longest prefix goes first)."""
    m = BlockSpaceManager(BS, POOL, 0, enable_caching=True)
    tokens = list(range(1024 * BS + 5))
    admitted(m, 1, tokens)
    for step in range(40):  # decode across page boundaries, then free
        tokens.append(step)
        m.append_slots(SeqView(1, tokens, len(tokens) - 1, False), 0)
    table = list(m.get_block_table(1))
    m.free(1)
    parked = m.allocator.gpu.evictor.table
    full_pages = len(tokens) // BS
    assert {b: parked[b][1] for b in table[:full_pages]} == {b: (i + 1) * BS for i, b in enumerate(table[:full_pages])}


def test_hash_of_a_long_unhashed_chain_is_computed_without_recursion():
    """Catches: a content hash computed by recursing through 5,000 pages whose hashes are not known
    yet (RecursionError), or a loop that gives other values than the chained definition."""
    chain: list[Block] = []
    prev = None
    for i in range(5_000):
        prev = Block(prev, [i] * BS, BS, None, hashing=True, extra_hash=7)
        chain.append(prev)
    got = chain[-1].content_hash
    expected = None
    for i in range(5_000):
        expected = hash_block_tokens(i == 0, NONE_HASH if i == 0 else expected, [i] * BS, 7)
    assert got == expected
    assert chain[2_500].content_hash is not None  # every page on the way was remembered


def test_a_view_uses_the_callers_token_list_as_it_is():
    """Catches: a sequence view that copies the whole context, making every decode step cost
    O(context) for the caller (vLLM's Sequence appends to its list)."""
    tokens = list(range(8192 * BS))
    view = SeqView(1, tokens, len(tokens), False)
    assert view.token_ids is tokens


def test_decode_on_a_131k_token_sequence_reads_the_growing_list():
    """Catches: a manager that keeps the view's token list (it must read it only during the call),
    or decode steps on a 8,192-page sequence that lose or duplicate pages."""
    m = BlockSpaceManager(BS, POOL, 0, enable_caching=True)
    tokens = list(range(8192 * BS - 3))
    admitted(m, 1, tokens)
    for step in range(64):
        tokens.append(step)
        view = SeqView(1, tokens, len(tokens) - 1, False)
        assert m.append_slots(view, 0) == []
        assert m.get_num_cached_tokens(view) <= len(tokens)
    table = m.get_block_table(1)
    assert len(table) == -(-len(tokens) // BS) and len(set(table)) == len(table)
    assert table is m.get_block_table(1)  # the table's own list, as vLLM returns it


@pytest.mark.parametrize("caching", [True, False])
def test_refused_allocation_of_a_long_sequence_changes_nothing(caching):
    """Catches: an 8,192-page allocation that runs the pool dry part way and leaves pages taken,
    hashes registered or a half-built table behind."""
    m = BlockSpaceManager(BS, 12_000, 0, watermark=0.0, enable_caching=caching)
    admitted(m, 1, list(range(8192 * BS)))
    before = snapshot(m)
    with pytest.raises(OutOfBlocks):
        m.allocate([SeqView(2, [t + 1 for t in range(8192 * BS)])])
    assert snapshot(m) == before
    m.free(1)
    assert m.get_num_free_gpu_blocks() == 12_000


def test_fork_and_swap_of_a_long_sequence():
    """Catches: chain walks in fork and swap that recurse or lose pages at 4,096 pages."""
    m = BlockSpaceManager(BS, 20_000, 10_000, watermark=0.0, enable_caching=True)
    tokens = list(range(4096 * BS + 1))
    view = admitted(m, 1, tokens)
    m.fork(1, 2)
    assert m.get_block_table(2) == m.get_block_table(1)
    pairs = m.swap_out([view])
    assert len(pairs) == 4097 and m.get_num_free_cpu_blocks() == 10_000 - 4097
    back = m.swap_in([view])
    assert len(back) == 4097 and m.get_num_free_cpu_blocks() == 10_000
