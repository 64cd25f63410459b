"""Paged decode attention v1/v2 (classic layout): Triton against the oracle, plus metamorphic checks
that would catch a bug the oracle shared (they need no oracle at all)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from reference.attention import decode, oracle
from reference.attention.batch import make_batch
from reference.attention.tolerances import assert_attention_close

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def run_both(batch, partition_size=decode.PARTITION_SIZE):
    args = (batch.query, batch.key_cache, batch.value_cache, batch.block_tables, batch.seq_lens,
            batch.scale, batch.alibi_slopes)
    return (decode.paged_attention_v1(*args),
            decode.paged_attention_v2(*args, partition_size=partition_size))


def expected(batch):
    return oracle.paged_decode_oracle(batch.query, batch.key_cache, batch.value_cache,
                                      batch.block_tables, batch.seq_lens, batch.scale,
                                      batch.alibi_slopes)


@st.composite
def lengths(draw, block_size):
    """Context lengths biased to the edges: 1, block_size-1, block_size, block_size+1, random."""
    edge = st.sampled_from([1, max(1, block_size - 1), block_size, block_size + 1,
                            3 * block_size + 1])
    return draw(st.lists(st.one_of(edge, st.integers(1, 4 * block_size)), min_size=1, max_size=3))


@settings(max_examples=10, deadline=None)
@given(dtype=st.sampled_from(DTYPES), head_size=st.sampled_from([32, 64, 80, 128]),
       block_size=st.sampled_from([8, 16, 32]), kv_and_group=st.sampled_from([(1, 1), (2, 1),
       (1, 4), (2, 2)]), use_alibi=st.booleans(), part_blocks=st.sampled_from([1, 2]),
       seed=st.integers(0, 2**16), data=st.data())
def test_v1_v2_match_oracle(dtype, head_size, block_size, kv_and_group, use_alibi, part_blocks,
                            seed, data):
    """Catches: wrong block-table lookup, wrong classic-layout addressing, GQA head mapping, ALiBi
    sign/offset, a partition reduce that forgets to rescale by exp(m_i - M), and lost precision."""
    num_kv, group = kv_and_group
    lens = data.draw(lengths(block_size), label="seq_lens")
    batch = make_batch(lens, layout="classic", num_heads=num_kv * group, num_kv_heads=num_kv,
                       head_size=head_size, block_size=block_size, dtype=dtype, seed=seed,
                       use_alibi=use_alibi)
    v1, v2 = run_both(batch, partition_size=part_blocks * block_size)
    want = expected(batch)
    assert_attention_close(v1, want, "v1")
    assert_attention_close(v2, want, "v2")


@pytest.mark.parametrize("block_size", [8, 16, 32])
def test_boundary_lengths(block_size):
    """Catches: off-by-one at block edges (a last block that is exactly full, or holds one token)."""
    lens = [1, block_size - 1, block_size, block_size + 1, 2 * block_size]
    batch = make_batch(lens, layout="classic", block_size=block_size, head_size=32, seed=1)
    v1, v2 = run_both(batch, partition_size=block_size)
    assert_attention_close(v1, expected(batch), "v1")
    assert_attention_close(v2, expected(batch), "v2")


def test_v2_equals_v1_across_512_token_partitions():
    """Catches: partitions at vLLM's size 512 that drop or double-count the tokens next to a
    partition boundary (lengths 511, 512, 513, and two boundaries + 1)."""
    lens = [511, 512, 513, 1025]
    batch = make_batch(lens, layout="classic", num_heads=2, num_kv_heads=1, head_size=32,
                       block_size=32, seed=2, use_alibi=True)
    v1, v2 = run_both(batch)
    assert_attention_close(v2, v1, "v2 vs v1")
    assert_attention_close(v1, expected(batch), "v1")


def test_nan_poison_past_context_never_reaches_output():
    """Catches: loading the unwritten tail of the last block unmasked (0 * NaN = NaN), e.g. masking
    only the scores but not the value loads."""
    batch = make_batch([3, 9, 17], layout="classic", block_size=8, head_size=32, seed=3)
    assert torch.isnan(batch.value_cache).any()  # the poison is really there
    v1, v2 = run_both(batch, partition_size=8)
    assert not torch.isnan(v1).any() and not torch.isnan(v2).any()


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_values_all_ones_give_ones(version):
    """Catches: a normaliser that does not match the weights (missing alpha rescale of l or acc,
    or l summed over masked slots): with V = 1 every output must be exactly 1 whatever the scores."""
    batch = make_batch([1, 8, 23, 40], layout="classic", block_size=8, head_size=64, seed=4,
                       use_alibi=True, value_range=4.0)
    used = ~torch.isnan(batch.value_cache)
    batch.value_cache[used] = 1.0
    out = run_both(batch, partition_size=16)[0 if version == "v1" else 1]
    torch.testing.assert_close(out, torch.ones_like(out), atol=1e-6, rtol=0)


def test_permuting_physical_blocks_changes_nothing():
    """Catches: a kernel that reads blocks by logical index (ignoring the table) or mixes up which
    physical block holds which positions: moving blocks and the table with them is invisible."""
    batch = make_batch([5, 20, 33], layout="classic", block_size=8, head_size=32, seed=5)
    v1, v2 = run_both(batch, partition_size=16)
    perm = torch.randperm(batch.key_cache.shape[0], generator=torch.Generator().manual_seed(9))
    moved_k, moved_v = torch.empty_like(batch.key_cache), torch.empty_like(batch.value_cache)
    moved_k[perm], moved_v[perm] = batch.key_cache, batch.value_cache  # block b -> perm[b]
    batch.key_cache, batch.value_cache = moved_k, moved_v
    batch.block_tables = perm[batch.block_tables.long()].to(torch.int32)
    w1, w2 = run_both(batch, partition_size=16)
    assert torch.equal(v1, w1) and torch.equal(v2, w2)


@pytest.mark.parametrize("placement", [(4, 1), (0, 3)])
def test_seed_demo_uniform_softmax_gives_the_mean(placement):
    """Catches: any paging bug in the smallest readable case: keys all 0 make the softmax uniform,
    so 9 positions holding 1..9 across two blocks of 8 must average to exactly 5, wherever the two
    logical blocks are placed."""
    k_cache = torch.full((6, 1, 32 // 4, 8, 4), float("nan"))
    v_cache = torch.full((6, 1, 32, 8), float("nan"))
    table = torch.tensor([list(placement)], dtype=torch.int32)
    keys = [torch.zeros(9, 1, 32)]
    values = [torch.arange(1, 10, dtype=torch.float32)[:, None, None].expand(9, 1, 32)]
    oracle.write_sequences_classic(keys, values, k_cache, v_cache, table)
    query = torch.ones(1, 1, 32)
    for fn in (decode.paged_attention_v1, decode.paged_attention_v2):
        out = fn(query, k_cache, v_cache, table, torch.tensor([9]), 1.0)
        torch.testing.assert_close(out, torch.full_like(out, 5.0), atol=1e-6, rtol=0)


def test_gqa_reads_kv_head_of_its_group():
    """Catches: mapping query head h to KV head h % kv_heads instead of h // (heads / kv_heads)."""
    batch = make_batch([12], layout="classic", num_heads=4, num_kv_heads=2, head_size=32,
                       block_size=8, seed=6)
    for kv in range(2):
        live = ~torch.isnan(batch.value_cache[:, kv])
        batch.value_cache[:, kv][live] = float(kv + 1)
    out = run_both(batch)[0]
    torch.testing.assert_close(out[0, :, 0], torch.tensor([1.0, 1.0, 2.0, 2.0]), atol=1e-6, rtol=0)


def test_alibi_favours_the_newest_token():
    """Catches: an ALiBi bias with the wrong sign or anchor: with equal scores and a steep slope,
    the bias slope * (pos - seq_len + 1) puts almost all weight on the last position."""
    batch = make_batch([10], layout="classic", num_heads=1, num_kv_heads=1, head_size=32,
                       block_size=8, seed=7)
    live = ~torch.isnan(batch.key_cache)
    batch.key_cache[live] = 0.0
    batch.alibi_slopes = torch.tensor([50.0])
    out = run_both(batch)[0]
    torch.testing.assert_close(out[0, 0], batch.values[0][9, 0], atol=1e-5, rtol=0)
