"""Varlen (chunked-prefill) paged attention over the flash layout: Triton against the oracle, and
metamorphic checks that need no oracle."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from reference.attention import oracle, varlen
from reference.attention.batch import make_batch
from reference.attention.tolerances import assert_attention_close

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def call(fn, batch, **options):
    return fn(batch.query, batch.key_cache, batch.value_cache, batch.block_tables,
              batch.query_start_loc, batch.seq_lens, batch.scale,
              alibi_slopes=batch.alibi_slopes, **options)


@st.composite
def sequences(draw, block_size):
    """(seq_len, query_len) pairs mixing decodes, whole prompts and prompt chunks with a prefix,
    with lengths biased to 1, block_size +- 1 and the maximum."""
    edge = st.sampled_from([1, max(1, block_size - 1), block_size, block_size + 1, 40])
    pairs = []
    for _ in range(draw(st.integers(1, 3))):
        seq_len = draw(st.one_of(edge, st.integers(1, 40)))
        kind = draw(st.sampled_from(["decode", "prompt", "chunk"]))
        query_len = {"decode": 1, "prompt": seq_len,
                     "chunk": draw(st.integers(1, seq_len))}[kind]
        pairs.append((seq_len, query_len))
    return pairs


@settings(max_examples=10, deadline=None)
@given(dtype=st.sampled_from(DTYPES), head_size=st.sampled_from([32, 64, 96]),
       block_size=st.sampled_from([8, 16, 32]),
       kv_and_group=st.sampled_from([(1, 1), (2, 1), (1, 4), (2, 2)]),
       use_alibi=st.booleans(), window=st.sampled_from([-1, 0, 3, 17]),
       softcap=st.sampled_from([0.0, 0.0, 1.5]), seed=st.integers(0, 2**16), data=st.data())
def test_varlen_matches_oracle(dtype, head_size, block_size, kv_and_group, use_alibi, window,
                               softcap, seed, data):
    """Catches: wrong causal offset of chunk rows (context_len), window off-by-one, soft cap
    applied after masking/ALiBi, tiles spanning blocks read from the wrong block, GQA mapping."""
    num_kv, group = kv_and_group
    pairs = data.draw(sequences(block_size), label="(seq_len, query_len)")
    batch = make_batch([s for s, _ in pairs], query_lens=[q for _, q in pairs], layout="flash",
                       num_heads=num_kv * group, num_kv_heads=num_kv, head_size=head_size,
                       block_size=block_size, dtype=dtype, seed=seed, use_alibi=use_alibi,
                       value_range=2.0)
    options = dict(window_size=(window, 0) if window >= 0 else (-1, -1), softcap=softcap)
    got = call(varlen.varlen_paged_attention, batch, **options)
    assert_attention_close(got, call(oracle.varlen_oracle, batch, **options))


@pytest.mark.parametrize("placement", [(4, 1), (0, 2)])
def test_seed_demo_uniform_softmax_gives_three(placement):
    """Catches: any paging bug in the smallest readable case: blocks of 4, five positions with
    keys 0 (uniform softmax) and values 1..5, logical blocks 0 and 1 at physical blocks 4 and 1
    (then elsewhere): the decode query must read exactly the mean, 3."""
    k_cache = torch.full((5, 4, 1, 32), float("nan"))
    v_cache = torch.full((5, 4, 1, 32), float("nan"))
    table = torch.tensor([list(placement)], dtype=torch.int32)
    values = torch.arange(1, 6, dtype=torch.float32)[:, None, None].expand(5, 1, 32)
    oracle.write_sequences_flash([torch.zeros(5, 1, 32)], [values], k_cache, v_cache, table)
    args = (torch.ones(1, 1, 32), k_cache, v_cache, table, torch.tensor([0, 1]),
            torch.tensor([5]), 1.0)
    for fn in (varlen.varlen_paged_attention, oracle.varlen_oracle):
        out = fn(*args)
        torch.testing.assert_close(out, torch.full_like(out, 3.0), atol=1e-6, rtol=0)


def test_chunk_rows_attend_causally_to_prefix_and_chunk():
    """Catches: chunk rows that see the future of their own chunk, or that ignore the cached
    prefix: row j of a chunk after a prefix of c tokens averages values 1..c+j+1 (keys all 0)."""
    prefix, chunk = 6, 5
    batch = make_batch([prefix + chunk], query_lens=[chunk], layout="flash", num_heads=1,
                       num_kv_heads=1, head_size=32, block_size=4, seed=1)
    live = ~torch.isnan(batch.key_cache)
    batch.key_cache[live] = 0.0
    oracle.write_sequences_flash(
        [torch.zeros(prefix + chunk, 1, 32)],
        [torch.arange(1, prefix + chunk + 1.0)[:, None, None].expand(-1, 1, 32)],
        batch.key_cache, batch.value_cache, batch.block_tables)
    out = call(varlen.varlen_paged_attention, batch)
    means = torch.tensor([(prefix + j + 2) / 2 for j in range(chunk)])
    torch.testing.assert_close(out[:, 0, 0], means, atol=1e-5, rtol=0)


def test_sliding_window_follows_vllm_convention():
    """Catches: an off-by-one in the window: window_size=(left, 0) must let the query at position
    p see keys p-left..p (left+1 keys), the convention vLLM's kernel implements with
    SLIDING_WINDOW = 1 + left. Keys 0 make the output the mean of the last left+1 values."""
    n = 20
    batch = make_batch([n], layout="flash", num_heads=1, num_kv_heads=1, head_size=32,
                       block_size=8, seed=2)
    oracle.write_sequences_flash([torch.zeros(n, 1, 32)],
                                 [torch.arange(1, n + 1.0)[:, None, None].expand(-1, 1, 32)],
                                 batch.key_cache, batch.value_cache, batch.block_tables)
    for left in (0, 1, 4, 19, 30):
        out = call(varlen.varlen_paged_attention, batch, window_size=(left, 0))
        seen = torch.arange(max(1, n - left), n + 1.0)
        torch.testing.assert_close(out[0, 0, 0], seen.mean(), atol=1e-5, rtol=0)


def test_nan_poison_and_permutation():
    """Catches: unmasked loads of unwritten slots (NaN leaks) and reads that ignore the block table
    (moving physical blocks together with the table must not change a single bit)."""
    batch = make_batch([3, 17, 30], query_lens=[3, 1, 12], layout="flash", block_size=8,
                       head_size=32, seed=3)
    before = call(varlen.varlen_paged_attention, batch)
    assert not torch.isnan(before).any()
    perm = torch.randperm(batch.key_cache.shape[0], generator=torch.Generator().manual_seed(4))
    moved_k, moved_v = torch.empty_like(batch.key_cache), torch.empty_like(batch.value_cache)
    moved_k[perm], moved_v[perm] = batch.key_cache, batch.value_cache
    batch.key_cache, batch.value_cache = moved_k, moved_v
    batch.block_tables = perm[batch.block_tables.long()].to(torch.int32)
    assert torch.equal(call(varlen.varlen_paged_attention, batch), before)


def test_values_all_ones_give_ones():
    """Catches: weights and normaliser that disagree (missing rescale, masked keys counted in l,
    a soft cap or ALiBi applied to only one of them): V = 1 must give exactly 1 everywhere."""
    batch = make_batch([1, 9, 33], query_lens=[1, 9, 16], layout="flash", block_size=16,
                       head_size=64, seed=5, use_alibi=True, value_range=3.0)
    live = ~torch.isnan(batch.value_cache)
    batch.value_cache[live] = 1.0
    out = call(varlen.varlen_paged_attention, batch, window_size=(5, 0), softcap=2.0)
    torch.testing.assert_close(out, torch.ones_like(out), atol=1e-6, rtol=0)


@pytest.mark.parametrize("window", [-1, 3])
def test_empty_sequence_in_a_varlen_batch(window):
    """Catches: a varlen kernel that refuses, or reads or writes rows for, an empty batch entry
    (seq_len 0, query_len 0: vLLM pads batches with them), and a non-power-of-two head (80)
    whose padded lanes leak into the output."""
    b = make_batch([0, 5, 0], query_lens=[0, 5, 0], layout="flash", num_heads=2, num_kv_heads=1,
                   head_size=80, block_size=16, dtype=torch.float32, seed=3)
    options = dict(window_size=(window, 0) if window >= 0 else (-1, -1))
    got = call(varlen.varlen_paged_attention, b, **options)
    assert got.shape[0] == 5 and not torch.isnan(got).any()
    assert_attention_close(got, call(oracle.varlen_oracle, b, **options), "empty entries")


def test_all_empty_batch_is_refused():
    """Catches: a batch with no tokens at all accepted and answered with an empty tensor, hiding a
    caller's bookkeeping bug."""
    b = make_batch([0, 5], query_lens=[0, 5], layout="flash", num_heads=2, num_kv_heads=1,
                   head_size=64, block_size=16, dtype=torch.float32, seed=3)
    with pytest.raises(ValueError, match="every sequence is empty"):
        varlen.varlen_paged_attention(b.query[:0], b.key_cache, b.value_cache, b.block_tables,
                                      torch.zeros(3, dtype=torch.int32), torch.zeros(2, dtype=torch.int32),
                                      b.scale)
