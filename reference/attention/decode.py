"""Paged decode attention over the classic layout, in Triton: v1 (one pass) and v2 (partitioned).

During decoding each sequence contributes exactly one new query token, which must attend to every
cached position of its sequence. The cache is paged, so the kernel walks the sequence's block
table: logical block ``b`` holds positions ``b*block_size ..`` in physical block
``block_tables[seq, b]``.

**v1** launches one program per (sequence, query head) and streams over all blocks with the
*online softmax*: it keeps a running maximum ``m``, a running normaliser ``l = sum exp(s - m)`` and a
running weighted sum ``acc = sum exp(s - m) * v``; when a new block raises the maximum to ``m'``,
the old ``l`` and ``acc`` are multiplied by ``exp(m - m')`` so every term stays relative to the
current maximum. The output is ``acc / l``. This mirrors what vLLM's
``paged_attention_v1_kernel`` computes (v0.10.2 csrc/attention/attention_kernels.cuh), though that
kernel stores all logits of the sequence in shared memory and does an exact two-pass softmax.

**v2** splits a long sequence into partitions of ``partition_size`` tokens (512 in vLLM,
paged_attention_v2.cu ``PARTITION_SIZE = 512``) so that one long sequence can occupy many
programs. Each partition writes its own maximum ``m_i``, normaliser ``l_i`` and normalised output
``o_i``. A reduce kernel then rescales each partition to the global maximum ``M`` -- the weight of
partition ``i`` is ``l_i * exp(m_i - M)`` -- and returns ``sum_i w_i o_i / sum_i w_i``, exactly the
scheme of vLLM's ``paged_attention_v2_reduce_kernel``.

Both versions support GQA/MQA (query head ``h`` reads KV head ``h // (heads / kv_heads)``), ALiBi
as vLLM applies it (``slope * (pos - seq_len + 1)``), fp32/fp16/bf16 inputs with fp32
accumulation, head sizes 32..256 (padded to a power of two inside the kernel) and block sizes
8/16/32. Positions at or past ``seq_len`` are never loaded (masked loads with 0), so whatever the
unused tail of the last block holds -- even NaN -- cannot reach the output.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from reference.attention.validate import check_decode

#: vLLM's partition size for paged attention v2 (v0.10.2 csrc/attention/paged_attention_v2.cu).
PARTITION_SIZE = 512


@triton.jit
def _attend_blocks(
    q, kv_head, seq_len, first_block, end_block, slope,
    k_cache_ptr, v_cache_ptr, table_row_ptr, scale,
    kc_stride_block, kc_stride_head, kc_stride_chunk, kc_stride_offset, kc_stride_lane,
    vc_stride_block, vc_stride_head, vc_stride_dim, vc_stride_offset,
    HEAD_SIZE: tl.constexpr, HEAD_PADDED: tl.constexpr, BLOCK_SIZE: tl.constexpr,
    X: tl.constexpr, USE_ALIBI: tl.constexpr,
):
    """Online softmax of one query over logical blocks [first_block, end_block): (m, l, acc)."""
    d = tl.arange(0, HEAD_PADDED)
    t = tl.arange(0, BLOCK_SIZE)
    d_valid = d < HEAD_SIZE
    m = -float("inf")
    l = 0.0
    acc = tl.zeros([HEAD_PADDED], dtype=tl.float32)
    for b in range(first_block, end_block):
        block = tl.load(table_row_ptr + b).to(tl.int64)
        pos = b * BLOCK_SIZE + t
        live = pos < seq_len
        load_mask = live[:, None] & d_valid[None, :]
        k_off = (block * kc_stride_block + kv_head * kc_stride_head
                 + (d[None, :] // X) * kc_stride_chunk + t[:, None] * kc_stride_offset
                 + (d[None, :] % X) * kc_stride_lane)
        k = tl.load(k_cache_ptr + k_off, mask=load_mask, other=0.0).to(tl.float32)
        s = tl.sum(k * q[None, :], axis=1) * scale
        if USE_ALIBI:
            s += slope * (pos - seq_len + 1).to(tl.float32)
        s = tl.where(live, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new)
        v_off = (block * vc_stride_block + kv_head * vc_stride_head
                 + d[None, :] * vc_stride_dim + t[:, None] * vc_stride_offset)
        v = tl.load(v_cache_ptr + v_off, mask=load_mask, other=0.0).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        l = l * alpha + tl.sum(p, axis=0)
        m = m_new
    return m, l, acc


@triton.jit
def _decode_v1_kernel(
    out_ptr, q_ptr, k_cache_ptr, v_cache_ptr, tables_ptr, seq_lens_ptr, alibi_ptr, scale,
    q_stride_seq, q_stride_head, o_stride_seq, o_stride_head, table_stride,
    kc_stride_block, kc_stride_head, kc_stride_chunk, kc_stride_offset, kc_stride_lane,
    vc_stride_block, vc_stride_head, vc_stride_dim, vc_stride_offset,
    QUERIES_PER_KV: tl.constexpr, HEAD_SIZE: tl.constexpr, HEAD_PADDED: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, X: tl.constexpr, USE_ALIBI: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // QUERIES_PER_KV
    seq_len = tl.load(seq_lens_ptr + seq)
    d = tl.arange(0, HEAD_PADDED)
    d_valid = d < HEAD_SIZE
    q = tl.load(q_ptr + seq * q_stride_seq + head * q_stride_head + d, mask=d_valid,
                other=0.0).to(tl.float32)
    slope = 0.0
    if USE_ALIBI:
        slope = tl.load(alibi_ptr + head)
    num_blocks = (seq_len + BLOCK_SIZE - 1) // BLOCK_SIZE
    m, l, acc = _attend_blocks(
        q, kv_head, seq_len, 0, num_blocks, slope, k_cache_ptr, v_cache_ptr,
        tables_ptr + seq.to(tl.int64) * table_stride, scale,
        kc_stride_block, kc_stride_head, kc_stride_chunk, kc_stride_offset, kc_stride_lane,
        vc_stride_block, vc_stride_head, vc_stride_dim, vc_stride_offset,
        HEAD_SIZE, HEAD_PADDED, BLOCK_SIZE, X, USE_ALIBI)
    out = acc / l
    tl.store(out_ptr + seq * o_stride_seq + head * o_stride_head + d,
             out.to(out_ptr.dtype.element_ty), mask=d_valid)


@triton.jit
def _decode_v2_partition_kernel(
    part_out_ptr, part_max_ptr, part_sum_ptr,
    q_ptr, k_cache_ptr, v_cache_ptr, tables_ptr, seq_lens_ptr, alibi_ptr, scale,
    q_stride_seq, q_stride_head, table_stride,
    kc_stride_block, kc_stride_head, kc_stride_chunk, kc_stride_offset, kc_stride_lane,
    vc_stride_block, vc_stride_head, vc_stride_dim, vc_stride_offset,
    NUM_HEADS: tl.constexpr, MAX_PARTITIONS: tl.constexpr,
    QUERIES_PER_KV: tl.constexpr, HEAD_SIZE: tl.constexpr, HEAD_PADDED: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, X: tl.constexpr, USE_ALIBI: tl.constexpr,
    PARTITION_SIZE: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    part = tl.program_id(2)
    seq_len = tl.load(seq_lens_ptr + seq)
    if part * PARTITION_SIZE < seq_len:  # partitions past the end stay untouched
        kv_head = head // QUERIES_PER_KV
        d = tl.arange(0, HEAD_PADDED)
        d_valid = d < HEAD_SIZE
        q = tl.load(q_ptr + seq * q_stride_seq + head * q_stride_head + d, mask=d_valid,
                    other=0.0).to(tl.float32)
        slope = 0.0
        if USE_ALIBI:
            slope = tl.load(alibi_ptr + head)
        blocks_per_part = PARTITION_SIZE // BLOCK_SIZE
        num_blocks = (seq_len + BLOCK_SIZE - 1) // BLOCK_SIZE
        first = part * blocks_per_part
        end = tl.minimum(first + blocks_per_part, num_blocks)
        m, l, acc = _attend_blocks(
            q, kv_head, seq_len, first, end, slope, k_cache_ptr, v_cache_ptr,
            tables_ptr + seq.to(tl.int64) * table_stride, scale,
            kc_stride_block, kc_stride_head, kc_stride_chunk, kc_stride_offset, kc_stride_lane,
            vc_stride_block, vc_stride_head, vc_stride_dim, vc_stride_offset,
            HEAD_SIZE, HEAD_PADDED, BLOCK_SIZE, X, USE_ALIBI)
        row = (seq * NUM_HEADS + head) * MAX_PARTITIONS + part
        tl.store(part_max_ptr + row, m)
        tl.store(part_sum_ptr + row, l)
        tl.store(part_out_ptr + row * HEAD_PADDED + d, acc / l, mask=d_valid)


@triton.jit
def _decode_v2_reduce_kernel(
    out_ptr, part_out_ptr, part_max_ptr, part_sum_ptr, seq_lens_ptr,
    o_stride_seq, o_stride_head,
    NUM_HEADS: tl.constexpr, MAX_PARTITIONS: tl.constexpr, PARTS_PADDED: tl.constexpr,
    HEAD_SIZE: tl.constexpr, HEAD_PADDED: tl.constexpr, PARTITION_SIZE: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    seq_len = tl.load(seq_lens_ptr + seq)
    num_parts = (seq_len + PARTITION_SIZE - 1) // PARTITION_SIZE
    i = tl.arange(0, PARTS_PADDED)
    used = i < num_parts
    rows = (seq * NUM_HEADS + head) * MAX_PARTITIONS + i
    m_i = tl.load(part_max_ptr + rows, mask=used, other=float("-inf"))
    l_i = tl.load(part_sum_ptr + rows, mask=used, other=0.0)
    global_max = tl.max(m_i, axis=0)
    # Rescale every partition's normaliser from its own maximum to the global one.
    weight = tl.where(used, l_i * tl.exp(m_i - global_max), 0.0)
    total = tl.sum(weight, axis=0)
    d = tl.arange(0, HEAD_PADDED)
    d_valid = d < HEAD_SIZE
    o_i = tl.load(part_out_ptr + rows[:, None] * HEAD_PADDED + d[None, :],
                  mask=used[:, None] & d_valid[None, :], other=0.0)
    out = tl.sum(o_i * weight[:, None], axis=0) / total
    tl.store(out_ptr + seq * o_stride_seq + head * o_stride_head + d,
             out.to(out_ptr.dtype.element_ty), mask=d_valid)


def _common_args(query, key_cache, value_cache, block_tables):
    if query.stride(2) != 1:
        raise ValueError("query: the head dimension must be contiguous (stride 1)")
    num_heads, head_size = query.shape[1], query.shape[2]
    meta = dict(
        QUERIES_PER_KV=num_heads // key_cache.shape[1], HEAD_SIZE=head_size,
        HEAD_PADDED=triton.next_power_of_2(head_size), BLOCK_SIZE=key_cache.shape[3],
        X=key_cache.shape[4],
    )
    strides = (block_tables.stride(0), *key_cache.stride(), *value_cache.stride())
    return meta, strides


def paged_attention_v1(query, key_cache, value_cache, block_tables, seq_lens, scale: float,
                       alibi_slopes=None, out=None, validate: bool = True) -> torch.Tensor:
    """Decode attention, one program per (sequence, head).

    ``query [num_seqs, num_heads, head_size]``; classic-layout caches; ``block_tables
    [num_seqs, max_blocks]`` and ``seq_lens [num_seqs]`` int32/int64; ``alibi_slopes
    [num_heads]`` fp32 or None. Returns ``out`` (allocated when None).

    ``validate=False`` skips the host-side input checks (:mod:`.validate`), which copy the block
    table and the lengths to the host: only for inputs already checked once, such as the timed
    repeats of a benchmark. Invalid inputs then read out of bounds instead of raising.
    """
    if validate:
        check_decode(query, key_cache, value_cache, block_tables, seq_lens, scale, alibi_slopes)
    out = torch.empty_like(query) if out is None else out
    if out.shape != query.shape or out.dtype != query.dtype or out.stride(2) != 1:
        raise ValueError("out: must match query's shape and dtype with a contiguous head dim")
    meta, (table_stride, *cache_strides) = _common_args(query, key_cache, value_cache,
                                                        block_tables)
    _decode_v1_kernel[(query.shape[0], query.shape[1])](
        out, query, key_cache, value_cache, block_tables, seq_lens,
        alibi_slopes if alibi_slopes is not None else query, float(scale),
        query.stride(0), query.stride(1), out.stride(0), out.stride(1), table_stride,
        *cache_strides, USE_ALIBI=alibi_slopes is not None, **meta,
    )
    return out


def paged_attention_v2(query, key_cache, value_cache, block_tables, seq_lens, scale: float,
                       alibi_slopes=None, partition_size: int = PARTITION_SIZE,
                       out=None, validate: bool = True) -> torch.Tensor:
    """Decode attention split into partitions of ``partition_size`` tokens, then reduced.

    Same contract as :func:`paged_attention_v1`; ``partition_size`` must be a multiple of the
    block size (vLLM fixes it at 512). The per-partition scratch is kept in fp32 (vLLM keeps the
    partition outputs in the activation dtype; fp32 only moves us closer to the oracle).
    """
    if validate:
        check_decode(query, key_cache, value_cache, block_tables, seq_lens, scale, alibi_slopes,
                     partition_size)
    out = torch.empty_like(query) if out is None else out
    if out.shape != query.shape or out.dtype != query.dtype or out.stride(2) != 1:
        raise ValueError("out: must match query's shape and dtype with a contiguous head dim")
    meta, (table_stride, *cache_strides) = _common_args(query, key_cache, value_cache,
                                                        block_tables)
    num_seqs, num_heads = query.shape[0], query.shape[1]
    max_parts = -(-max(seq_lens.tolist()) // partition_size)
    part_max = torch.empty((num_seqs, num_heads, max_parts), dtype=torch.float32,
                           device=query.device)
    part_sum = torch.empty_like(part_max)
    part_out = torch.empty((num_seqs, num_heads, max_parts, meta["HEAD_PADDED"]),
                           dtype=torch.float32, device=query.device)
    _decode_v2_partition_kernel[(num_seqs, num_heads, max_parts)](
        part_out, part_max, part_sum, query, key_cache, value_cache, block_tables, seq_lens,
        alibi_slopes if alibi_slopes is not None else query, float(scale),
        query.stride(0), query.stride(1), table_stride, *cache_strides,
        NUM_HEADS=num_heads, MAX_PARTITIONS=max_parts, USE_ALIBI=alibi_slopes is not None,
        PARTITION_SIZE=partition_size, **meta,
    )
    _decode_v2_reduce_kernel[(num_seqs, num_heads)](
        out, part_out, part_max, part_sum, seq_lens, out.stride(0), out.stride(1),
        NUM_HEADS=num_heads, MAX_PARTITIONS=max_parts,
        PARTS_PADDED=triton.next_power_of_2(max_parts), HEAD_SIZE=meta["HEAD_SIZE"],
        HEAD_PADDED=meta["HEAD_PADDED"], PARTITION_SIZE=partition_size,
    )
    return out
