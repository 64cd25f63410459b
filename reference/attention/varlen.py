"""Varlen paged attention over the flash layout: prefill chunks and decodes in one launch.

With chunked prefill a scheduler step mixes sequences in different phases: some contribute a
chunk of prompt tokens (a *prefill chunk*, possibly continuing a prompt whose beginning is
already cached), others a single decode token. All new tokens' keys and values are written to the
cache first; then one attention launch handles every query row. The queries are packed back to
back -- sequence ``i`` owns rows ``query_start_loc[i] .. query_start_loc[i+1]-1`` -- which is the
*varlen* (variable-length) packing.

The rows of sequence ``i`` are the last ``query_len`` of its ``seq_len`` positions, so row ``j``
sits at absolute position ``context_len + j`` with ``context_len = seq_len - query_len``. It sees
the whole cached prefix and, causally, the rows before it in its own chunk -- all read from the
paged cache, since the chunk's own keys were written there already.

This kernel launches one program per (sequence, query head, block of ``BLOCK_M`` query rows) and
runs the online softmax (see ``decode.py``) over key tiles of ``TILE_N`` positions with
``tl.dot``. Each key position finds its own physical block through the block table, so one tile
may span several small blocks. Options, all with vLLM's conventions (v0.33.0
vllm/v1/attention/ops/triton_unified_attention.py and triton_attention_helpers.py):

* sliding window ``window_size = (left, 0)``: a query at position ``p`` sees keys ``k`` with
  ``p - k <= left`` (vLLM: ``SLIDING_WINDOW = 1 + window_size[0]`` and ``p - k < SLIDING_WINDOW``);
  tiles entirely before the window are skipped;
* soft cap ``c > 0``: ``s = c * tanh(s / c)`` on the scaled score, before masking and ALiBi;
* ALiBi: ``slope_h * (k - p)`` (vLLM adds ``slope_h * (k - context_len)``; the two differ by a
  per-row constant, which softmax ignores);
* GQA/MQA, fp32/fp16/bf16 with fp32 accumulation; probabilities are cast to the value dtype before
  the second product, as vLLM does.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from reference.attention.validate import check_varlen

#: Query rows per program. 16 is the smallest M that ``tl.dot`` accepts on GPUs.
BLOCK_M = 16


def dot_in_fp32(dtype: torch.dtype) -> bool:
    """Whether the kernel's two matrix products run on fp32 operands.

    fp32 inputs always do (with ``input_precision="ieee"``, so GPUs do not silently drop to
    TF32). bf16 inputs do too *under the Triton interpreter*: the interpreter stores bf16 as raw
    ``uint16`` bits and its ``tl.dot`` multiplies those integers (Triton 3.4-3.8,
    ``interpreter.py create_dot``), which yields garbage; upcasting first sidesteps that. On a
    GPU, fp16/bf16 operands go to the tensor cores as they are.
    """
    interpreted = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    return dtype == torch.float32 or (dtype == torch.bfloat16 and interpreted)


@triton.jit
def _varlen_kernel(
    out_ptr, q_ptr, k_cache_ptr, v_cache_ptr, tables_ptr, query_start_ptr, seq_lens_ptr,
    alibi_ptr, scale, softcap, window_left,
    q_stride_token, q_stride_head, o_stride_token, o_stride_head, table_stride,
    kc_stride_block, kc_stride_offset, kc_stride_head, kc_stride_dim,
    vc_stride_block, vc_stride_offset, vc_stride_head, vc_stride_dim,
    QUERIES_PER_KV: tl.constexpr, HEAD_SIZE: tl.constexpr, HEAD_PADDED: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr, BLOCK_M: tl.constexpr,
    USE_ALIBI: tl.constexpr, USE_SOFTCAP: tl.constexpr, USE_WINDOW: tl.constexpr,
    DOT_IN_FP32: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    row_block = tl.program_id(2)
    q_first = tl.load(query_start_ptr + seq)
    query_len = tl.load(query_start_ptr + seq + 1) - q_first
    if row_block * BLOCK_M < query_len:
        seq_len = tl.load(seq_lens_ptr + seq)
        context_len = seq_len - query_len
        kv_head = head // QUERIES_PER_KV
        rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
        row_live = rows < query_len
        q_pos = context_len + rows  # absolute position of each query row
        d = tl.arange(0, HEAD_PADDED)
        d_valid = d < HEAD_SIZE
        q = tl.load(q_ptr + (q_first + rows)[:, None].to(tl.int64) * q_stride_token
                    + head * q_stride_head + d[None, :],
                    mask=row_live[:, None] & d_valid[None, :], other=0.0)
        slope = 0.0
        if USE_ALIBI:
            slope = tl.load(alibi_ptr + head)
        table_row = tables_ptr + seq.to(tl.int64) * table_stride

        # Keys this row block can see: up to its last live row (causal) ...
        key_end = context_len + tl.minimum(row_block * BLOCK_M + BLOCK_M, query_len)
        key_start = 0
        if USE_WINDOW:  # ... and, with a window, nothing before its first row's window.
            key_start = tl.maximum(context_len + row_block * BLOCK_M - window_left, 0)

        m = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        l = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_PADDED], dtype=tl.float32)
        for tile in range(key_start // TILE_N, (key_end + TILE_N - 1) // TILE_N):
            keys = tile * TILE_N + tl.arange(0, TILE_N)
            key_live = keys < key_end
            block = tl.load(table_row + keys // BLOCK_SIZE, mask=key_live, other=0).to(tl.int64)
            offset = keys % BLOCK_SIZE
            kv_mask = key_live[:, None] & d_valid[None, :]
            k = tl.load(k_cache_ptr + block[:, None] * kc_stride_block
                        + offset[:, None] * kc_stride_offset + kv_head * kc_stride_head
                        + d[None, :] * kc_stride_dim, mask=kv_mask, other=0.0)
            v = tl.load(v_cache_ptr + block[:, None] * vc_stride_block
                        + offset[:, None] * vc_stride_offset + kv_head * vc_stride_head
                        + d[None, :] * vc_stride_dim, mask=kv_mask, other=0.0)
            if DOT_IN_FP32:
                s = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)), input_precision="ieee")
            else:
                s = tl.dot(q, tl.trans(k))
            s = s * scale
            if USE_SOFTCAP:
                # tanh(y) = 1 - 2 / (exp(2y) + 1): saturates cleanly to +-1 for large |y|.
                s = softcap * (1.0 - 2.0 / (tl.exp(2.0 * s / softcap) + 1.0))
            allowed = (keys[None, :] <= q_pos[:, None]) & row_live[:, None]
            if USE_WINDOW:
                allowed = allowed & ((q_pos[:, None] - keys[None, :]) <= window_left)
            s = tl.where(allowed, s, float("-inf"))
            if USE_ALIBI:
                s += slope * (keys[None, :] - q_pos[:, None]).to(tl.float32)
            m_new = tl.maximum(m, tl.max(s, axis=1))
            # A row that has seen no allowed key yet keeps m = -inf; shift by 0 instead so that
            # exp(-inf - (-inf)) never produces NaN.
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.exp(s - m_safe[:, None])
            alpha = tl.exp(m - m_safe)
            l = l * alpha + tl.sum(p, axis=1)
            if DOT_IN_FP32:
                pv = tl.dot(p, v.to(tl.float32), input_precision="ieee")
            else:
                pv = tl.dot(p.to(v.dtype), v)
            acc = acc * alpha[:, None] + pv
            m = m_new
        # Rows past the chunk's end saw nothing (l = 0); divide them by 1 instead (never stored).
        out = acc / tl.where(l > 0.0, l, 1.0)[:, None]
        tl.store(out_ptr + (q_first + rows)[:, None].to(tl.int64) * o_stride_token
                 + head * o_stride_head + d[None, :],
                 out.to(out_ptr.dtype.element_ty), mask=row_live[:, None] & d_valid[None, :])


def varlen_paged_attention(query, key_cache, value_cache, block_tables, query_start_loc,
                           seq_lens, scale: float, alibi_slopes=None, window_size=(-1, -1),
                           softcap: float = 0.0, out=None, validate: bool = True) -> torch.Tensor:
    """Attention for packed query rows of many sequences over a flash-layout paged cache.

    ``query [num_tokens, num_heads, head_size]``; ``key_cache/value_cache [num_blocks,
    block_size, num_kv_heads, head_size]``; ``block_tables [num_seqs, max_blocks]``;
    ``query_start_loc [num_seqs + 1]`` (cumulative query lengths, starting at 0);
    ``seq_lens [num_seqs]`` (cached prefix + the query rows); ``window_size`` as in vLLM
    (``(left, 0)``, or ``(-1, -1)`` for none); ``softcap`` 0 disables. Returns ``out``.
    ``validate=False`` skips the host-side input checks, as in
    :func:`reference.attention.decode.paged_attention_v1`.
    """
    if validate:
        check_varlen(query, key_cache, value_cache, block_tables, query_start_loc, seq_lens,
                     scale, alibi_slopes, window_size, softcap)
    if query.stride(2) != 1:
        raise ValueError("query: the head dimension must be contiguous (stride 1)")
    out = torch.empty_like(query) if out is None else out
    if out.shape != query.shape or out.dtype != query.dtype or out.stride(2) != 1:
        raise ValueError("out: must match query's shape and dtype with a contiguous head dim")
    starts = query_start_loc.tolist()
    max_query_len = max(b - a for a, b in zip(starts, starts[1:]))
    if max_query_len == 0:
        return out
    num_heads, head_size = query.shape[1], query.shape[2]
    block_size = key_cache.shape[1]
    grid = (len(starts) - 1, num_heads, triton.cdiv(max_query_len, BLOCK_M))
    _varlen_kernel[grid](
        out, query, key_cache, value_cache, block_tables, query_start_loc, seq_lens,
        alibi_slopes if alibi_slopes is not None else query, float(scale), float(softcap),
        int(window_size[0]),
        query.stride(0), query.stride(1), out.stride(0), out.stride(1), block_tables.stride(0),
        *key_cache.stride(), *value_cache.stride(),
        QUERIES_PER_KV=num_heads // key_cache.shape[2], HEAD_SIZE=head_size,
        HEAD_PADDED=triton.next_power_of_2(head_size), BLOCK_SIZE=block_size,
        TILE_N=max(16, block_size), BLOCK_M=BLOCK_M, USE_ALIBI=alibi_slopes is not None,
        USE_SOFTCAP=softcap > 0, USE_WINDOW=window_size[0] >= 0,
        DOT_IN_FP32=dot_in_fp32(query.dtype),
    )
    return out
