"""Plain-PyTorch oracles: what every paged kernel must compute, written to be read, not to be fast.

Each function here does the textbook computation with no paging tricks: it gathers a sequence's
keys and values position by position through the block table (``layouts.gather_sequence``), does
the arithmetic in fp32, and returns the result in the query's dtype. The Triton kernels (and
vLLM's) are checked against these.

Conventions, all taken from vLLM so that the oracle judges vLLM's kernels by vLLM's own rules:

* score ``s = scale * (q . k)``; with a soft cap ``c > 0`` the score becomes ``c * tanh(s / c)``
  (applied before masking and before ALiBi, as in v0.33.0 triton_unified_attention.py);
* ALiBi adds ``slope_h * (key_pos - query_pos)``. For a decode query (``query_pos = seq_len-1``)
  this is vLLM's ``slope * (token_idx - seq_len + 1)`` (v0.10.2 attention_kernels.cuh). The unified
  Triton kernel adds ``slope * (key_pos - context_len)`` instead, which differs by a constant per
  query row and therefore gives the same softmax;
* causal: query at absolute position ``p`` sees keys ``0..p``;
* sliding window ``window_size = (left, 0)``: the query also needs ``p - key_pos <= left``;
  ``left = -1`` disables it. vLLM's backends pass ``(sliding_window - 1, 0)`` and the kernel turns
  it into ``SLIDING_WINDOW = 1 + left`` with the test ``p - key_pos < SLIDING_WINDOW``.
"""

from __future__ import annotations

import torch

from reference.attention.layouts import block_size_of, gather_sequence, vector_width


def reshape_and_cache_oracle(key, value, key_cache, value_cache, slot_mapping) -> None:
    """Write each token's key/value into a classic-layout cache at its slot; negative slot = skip.

    Mutates ``key_cache`` and ``value_cache`` in place, one scalar position at a time.
    """
    block_size = key_cache.shape[3]
    x = vector_width(key_cache.dtype)
    for token, slot in enumerate(slot_mapping.tolist()):
        if slot < 0:
            continue  # a padding token: vLLM's kernels return early for it
        block, offset = divmod(slot, block_size)
        for d in range(key.shape[2]):
            key_cache[block, :, d // x, offset, d % x] = key[token, :, d]
            value_cache[block, :, d, offset] = value[token, :, d]


def reshape_and_cache_flash_oracle(key, value, key_cache, value_cache, slot_mapping) -> None:
    """Write each token's key/value into a flash-layout cache at its slot; negative slot = skip."""
    block_size = key_cache.shape[1]
    for token, slot in enumerate(slot_mapping.tolist()):
        if slot < 0:
            continue
        block, offset = divmod(slot, block_size)
        key_cache[block, offset] = key[token]
        value_cache[block, offset] = value[token]


def _attend(q, keys, values, query_pos: int, scale: float, slopes, window_left: int,
            softcap: float, num_kv_heads: int) -> torch.Tensor:
    """Attention of one query token ``q [heads, d]`` over ``keys/values [n, kv_heads, d]``."""
    num_heads = q.shape[0]
    group = num_heads // num_kv_heads
    # Each query head h reads KV head h // group (GQA; MQA when num_kv_heads == 1).
    k = keys.float().repeat_interleave(group, dim=1)  # [n, heads, d]
    v = values.float().repeat_interleave(group, dim=1)
    scores = scale * torch.einsum("hd,nhd->hn", q.float(), k)
    if softcap > 0:
        scores = softcap * torch.tanh(scores / softcap)
    positions = torch.arange(keys.shape[0])
    allowed = positions <= query_pos
    if window_left >= 0:
        allowed &= (query_pos - positions) <= window_left
    scores = scores.masked_fill(~allowed[None, :], float("-inf"))
    if slopes is not None:
        scores = scores + slopes.float()[:, None] * (positions - query_pos).float()[None, :]
    probs = torch.softmax(scores, dim=-1)
    return torch.einsum("hn,nhd->hd", probs, v)


def paged_decode_oracle(query, key_cache, value_cache, block_tables, seq_lens, scale: float,
                        alibi_slopes=None) -> torch.Tensor:
    """Decode attention over a classic-layout cache: one query token per sequence.

    ``query [num_seqs, num_heads, head_size]``; sequence ``i`` attends to its ``seq_lens[i]``
    cached positions (the query itself is the last of them). Returns ``[num_seqs, heads, d]``.
    """
    num_kv_heads = key_cache.shape[1]
    out = torch.empty_like(query)
    for i, n in enumerate(seq_lens.tolist()):
        keys, values = gather_sequence(key_cache, value_cache, block_tables[i], n, "classic")
        out[i] = _attend(query[i], keys, values, n - 1, scale, alibi_slopes, -1, 0.0,
                         num_kv_heads).to(query.dtype)
    return out


def varlen_oracle(query, key_cache, value_cache, block_tables, query_start_loc, seq_lens,
                  scale: float, alibi_slopes=None, window_size=(-1, -1),
                  softcap: float = 0.0) -> torch.Tensor:
    """Mixed prefill/decode attention over a flash-layout cache (chunked prefill).

    Sequence ``i`` owns query rows ``query_start_loc[i] .. query_start_loc[i+1]-1``; they are the
    *last* ``query_len`` of its ``seq_lens[i]`` positions (their keys/values are already in the
    cache). So query row ``j`` sits at absolute position ``seq_len - query_len + j`` and attends
    causally to the cached prefix and to the earlier rows of its own chunk.
    """
    num_kv_heads = key_cache.shape[2]
    out = torch.empty_like(query)
    starts = query_start_loc.tolist()
    for i, n in enumerate(seq_lens.tolist()):
        first, last = starts[i], starts[i + 1]
        keys, values = gather_sequence(key_cache, value_cache, block_tables[i], n, "flash")
        context = n - (last - first)
        for j, row in enumerate(range(first, last)):
            out[row] = _attend(query[row], keys, values, context + j, scale, alibi_slopes,
                               window_size[0], softcap, num_kv_heads).to(query.dtype)
    return out


def write_sequences_flash(keys_per_seq, values_per_seq, key_cache, value_cache,
                          block_tables) -> None:
    """Place whole sequences (``[n, kv_heads, d]`` each) into a flash cache via their tables."""
    block_size = block_size_of(key_cache, "flash")
    for i, (k, v) in enumerate(zip(keys_per_seq, values_per_seq)):
        for pos in range(k.shape[0]):
            block = int(block_tables[i, pos // block_size])
            key_cache[block, pos % block_size] = k[pos]
            value_cache[block, pos % block_size] = v[pos]


def write_sequences_classic(keys_per_seq, values_per_seq, key_cache, value_cache,
                            block_tables) -> None:
    """Place whole sequences (``[n, kv_heads, d]`` each) into a classic cache via their tables."""
    block_size = block_size_of(key_cache, "classic")
    x = key_cache.shape[4]
    for i, (k, v) in enumerate(zip(keys_per_seq, values_per_seq)):
        for pos in range(k.shape[0]):
            block, offset = int(block_tables[i, pos // block_size]), pos % block_size
            key_cache[block, :, :, offset, :] = k[pos].reshape(k.shape[1], -1, x)
            value_cache[block, :, :, offset] = v[pos]
