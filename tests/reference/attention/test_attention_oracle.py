"""The oracles themselves, checked against dense attention on the unpaged sequences.

The Triton kernels are judged by the oracles, so an oracle bug would hide a kernel bug. Here each
oracle is compared with PyTorch's own ``scaled_dot_product_attention`` run on the contiguous
per-sequence keys/values the batch was built from -- no block tables involved at all.
"""

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from reference.attention import oracle
from reference.attention.batch import make_batch


def dense(q, k, v, context_len, scale, window_left=-1):
    """SDPA for query rows at positions context_len.. over keys 0..n-1 (heads may be grouped)."""
    group = q.shape[1] // k.shape[1]
    k = k.float().repeat_interleave(group, 1).transpose(0, 1)
    v = v.float().repeat_interleave(group, 1).transpose(0, 1)
    rows = torch.arange(q.shape[0])[:, None] + context_len
    cols = torch.arange(k.shape[1])[None, :]
    mask = cols <= rows
    if window_left >= 0:
        mask &= rows - cols <= window_left
    out = F.scaled_dot_product_attention(q.float().transpose(0, 1), k, v, attn_mask=mask,
                                         scale=scale)
    return out.transpose(0, 1)


@settings(max_examples=20, deadline=None)
@given(layout=st.sampled_from(["classic", "flash"]), block_size=st.sampled_from([8, 16]),
       lens=st.lists(st.integers(1, 40), min_size=1, max_size=3), window=st.sampled_from([-1, 5]),
       seed=st.integers(0, 1000), data=st.data())
def test_oracles_equal_dense_attention(layout, block_size, lens, window, seed, data):
    """Catches: an oracle that gathers the wrong positions through the block table, uses the wrong
    KV head for a query head, or puts chunk rows at the wrong absolute position."""
    qlens = [data.draw(st.integers(1, n)) for n in lens] if layout == "flash" else None
    batch = make_batch(lens, query_lens=qlens, layout=layout, num_heads=4, num_kv_heads=2,
                       head_size=32, block_size=block_size, seed=seed)
    if layout == "classic":
        got = oracle.paged_decode_oracle(batch.query, batch.key_cache, batch.value_cache,
                                         batch.block_tables, batch.seq_lens, batch.scale)
        window = -1
    else:
        got = oracle.varlen_oracle(batch.query, batch.key_cache, batch.value_cache,
                                   batch.block_tables, batch.query_start_loc, batch.seq_lens,
                                   batch.scale, window_size=(window, 0))
    starts = batch.query_start_loc.tolist()
    for i, n in enumerate(lens):
        rows = slice(starts[i], starts[i + 1])
        want = dense(batch.query[rows], batch.keys[i], batch.values[i],
                     n - (starts[i + 1] - starts[i]), batch.scale, window)
        torch.testing.assert_close(got[rows], want, atol=1e-5, rtol=1e-5)
