"""Input validation for the paged-attention kernels, done before anything is launched.

A GPU kernel trusts its arguments: a block id past the end of the pool, or a context length longer
than the block table can address, becomes an out-of-bounds read that returns garbage (or crashes
much later), never an error. The reference therefore checks every argument on the host first and
raises :class:`ValueError` naming the argument that is wrong. Because checking happens before any
launch, a refused call leaves every tensor exactly as it was.

The checks read small index tensors (block tables, lengths, slot mappings) back to the host. That
costs a synchronisation, which is the right trade for a reference implementation.
"""

from __future__ import annotations

import torch

from reference.attention.layouts import (
    CLASSIC_BLOCK_SIZES,
    FLASH_BLOCK_SIZES,
    SUPPORTED_DTYPES,
    SUPPORTED_HEAD_SIZES,
    vector_width,
)

_INDEX_DTYPES = (torch.int32, torch.int64)


def _fail(name: str, problem: str) -> None:
    raise ValueError(f"{name}: {problem}")


def _tensor(name: str, value, ndim: int, dtypes=None) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        _fail(name, f"expected a torch.Tensor, got {type(value).__name__}")
    if value.dim() != ndim:
        _fail(name, f"expected {ndim} dimensions, got shape {tuple(value.shape)}")
    if dtypes is not None and value.dtype not in dtypes:
        _fail(name, f"dtype {value.dtype} is not one of {[str(d) for d in dtypes]}")
    return value


def _same_device(names_and_tensors) -> None:
    (first_name, first), *rest = names_and_tensors
    for name, t in rest:
        if t is not None and t.device != first.device:
            _fail(name, f"is on {t.device} but {first_name} is on {first.device}")


def check_cache_write(key, value, key_cache, value_cache, slot_mapping, layout: str) -> None:
    """Validate a ``reshape_and_cache`` call (``layout`` is ``"classic"`` or ``"flash"``)."""
    _tensor("key", key, 3, SUPPORTED_DTYPES)
    _tensor("value", value, 3, SUPPORTED_DTYPES)
    if value.shape != key.shape:
        _fail("value", f"shape {tuple(value.shape)} differs from key shape {tuple(key.shape)}")
    if value.dtype != key.dtype:
        _fail("value", f"dtype {value.dtype} differs from key dtype {key.dtype}")
    num_tokens, num_heads, head_size = key.shape
    if layout == "classic":
        _tensor("key_cache", key_cache, 5)
        _tensor("value_cache", value_cache, 4)
        x = vector_width(key_cache.dtype)
        want_k = (key_cache.shape[0], num_heads, head_size // x, key_cache.shape[3], x)
        if head_size % x or tuple(key_cache.shape) != want_k:
            _fail("key_cache", f"shape {tuple(key_cache.shape)} is not the classic layout "
                               f"[num_blocks, {num_heads}, {head_size}//x, block_size, x={x}]")
        want_v = (key_cache.shape[0], num_heads, head_size, key_cache.shape[3])
        if tuple(value_cache.shape) != want_v:
            _fail("value_cache", f"shape {tuple(value_cache.shape)} != {want_v} (classic layout)")
        block_size = key_cache.shape[3]
    elif layout == "flash":
        _tensor("key_cache", key_cache, 4)
        _tensor("value_cache", value_cache, 4)
        if tuple(key_cache.shape[2:]) != (num_heads, head_size):
            _fail("key_cache", f"shape {tuple(key_cache.shape)} is not "
                               f"[num_blocks, block_size, {num_heads}, {head_size}]")
        if value_cache.shape != key_cache.shape:
            _fail("value_cache", f"shape {tuple(value_cache.shape)} differs from key_cache")
        block_size = key_cache.shape[1]
    else:
        raise ValueError(f"layout: must be 'classic' or 'flash', got {layout!r}")
    for name, cache in (("key_cache", key_cache), ("value_cache", value_cache)):
        if cache.dtype != key.dtype:
            _fail(name, f"dtype {cache.dtype} differs from key dtype {key.dtype} "
                        "(quantised caches are not supported)")
    _tensor("slot_mapping", slot_mapping, 1, _INDEX_DTYPES)
    if slot_mapping.shape[0] != num_tokens:
        _fail("slot_mapping", f"has {slot_mapping.shape[0]} entries for {num_tokens} tokens")
    _same_device([("key", key), ("value", value), ("key_cache", key_cache),
                  ("value_cache", value_cache), ("slot_mapping", slot_mapping)])
    num_slots = key_cache.shape[0] * block_size
    slots = [s for s in slot_mapping.tolist() if s >= 0]
    if slots and max(slots) >= num_slots:
        _fail("slot_mapping", f"slot {max(slots)} is past the cache's {num_slots} slots")
    if len(set(slots)) != len(slots):
        _fail("slot_mapping", "two tokens target the same slot (the write order would be a race)")


def _check_tables(block_tables, seq_lens, block_size: int, num_blocks: int, num_seqs: int,
                  min_len: int = 1) -> list:
    _tensor("block_tables", block_tables, 2, _INDEX_DTYPES)
    _tensor("seq_lens", seq_lens, 1, _INDEX_DTYPES)
    if seq_lens.shape[0] != num_seqs:
        _fail("seq_lens", f"has {seq_lens.shape[0]} entries for {num_seqs} sequences")
    if block_tables.shape[0] != num_seqs:
        _fail("block_tables", f"has {block_tables.shape[0]} rows for {num_seqs} sequences")
    lens = seq_lens.tolist()
    capacity = block_tables.shape[1] * block_size
    for i, n in enumerate(lens):
        if n < min_len:
            _fail("seq_lens", f"sequence {i} has length {n}; every sequence needs >= {min_len} "
                              f"token{'s' if min_len != 1 else ''}")
        if n > capacity:
            _fail("seq_lens", f"sequence {i} has length {n} but its block table row addresses "
                              f"only {block_tables.shape[1]} blocks x {block_size} = {capacity}")
    rows = block_tables.tolist()
    for i, n in enumerate(lens):
        used = rows[i][: -(-n // block_size)]
        bad = [b for b in used if not 0 <= b < num_blocks]
        if bad:
            _fail("block_tables", f"sequence {i} uses block id {bad[0]}, outside the cache's "
                                  f"{num_blocks} blocks")
    return lens


def _check_scalars(scale, alibi_slopes, num_heads: int) -> None:
    if not isinstance(scale, (int, float)) or not scale > 0:
        _fail("scale", f"must be a positive number, got {scale!r}")
    if alibi_slopes is not None:
        _tensor("alibi_slopes", alibi_slopes, 1, (torch.float32,))
        if alibi_slopes.shape[0] != num_heads:
            _fail("alibi_slopes", f"has {alibi_slopes.shape[0]} entries for {num_heads} heads")


def _check_heads(query, num_kv_heads: int, head_size: int) -> None:
    num_heads = query.shape[1]
    if query.shape[2] != head_size:
        _fail("query", f"head size {query.shape[2]} differs from the cache's {head_size}")
    if head_size not in SUPPORTED_HEAD_SIZES:
        _fail("query", f"head size {head_size} is not one of {SUPPORTED_HEAD_SIZES}")
    if num_heads % num_kv_heads:
        _fail("query", f"{num_heads} query heads are not a multiple of {num_kv_heads} KV heads")


def check_decode(query, key_cache, value_cache, block_tables, seq_lens, scale, alibi_slopes,
                 partition_size: int | None = None) -> None:
    """Validate a classic-layout decode call (one query token per sequence)."""
    _tensor("query", query, 3, SUPPORTED_DTYPES)
    _tensor("key_cache", key_cache, 5)
    _tensor("value_cache", value_cache, 4)
    num_blocks, num_kv_heads, _, block_size, x = key_cache.shape
    head_size = value_cache.shape[2]
    for name, cache in (("key_cache", key_cache), ("value_cache", value_cache)):
        if cache.dtype != query.dtype:
            _fail(name, f"dtype {cache.dtype} differs from query dtype {query.dtype}")
    if x != vector_width(query.dtype) or key_cache.shape[2] * x != head_size:
        _fail("key_cache", f"shape {tuple(key_cache.shape)} is not [num_blocks, kv_heads, "
                           f"head_size//x, block_size, x={vector_width(query.dtype)}]")
    if tuple(value_cache.shape) != (num_blocks, num_kv_heads, head_size, block_size):
        _fail("value_cache", f"shape {tuple(value_cache.shape)} does not match key_cache "
                             f"{tuple(key_cache.shape)}")
    if block_size not in CLASSIC_BLOCK_SIZES:
        _fail("key_cache", f"block size {block_size} is not one of {CLASSIC_BLOCK_SIZES}")
    _check_heads(query, num_kv_heads, head_size)
    if partition_size is not None and (partition_size <= 0 or partition_size % block_size):
        _fail("partition_size", f"{partition_size} is not a positive multiple of the block size "
                                f"{block_size}")
    _same_device([("query", query), ("key_cache", key_cache), ("value_cache", value_cache),
                  ("block_tables", block_tables), ("seq_lens", seq_lens),
                  ("alibi_slopes", alibi_slopes)])
    _check_tables(block_tables, seq_lens, block_size, num_blocks, query.shape[0])
    _check_scalars(scale, alibi_slopes, query.shape[1])


def check_varlen(query, key_cache, value_cache, block_tables, query_start_loc, seq_lens, scale,
                 alibi_slopes, window_size, softcap) -> None:
    """Validate a flash-layout varlen call (mixed prefill chunks and decodes)."""
    _tensor("query", query, 3, SUPPORTED_DTYPES)
    _tensor("key_cache", key_cache, 4)
    _tensor("value_cache", value_cache, 4)
    if value_cache.shape != key_cache.shape:
        _fail("value_cache", f"shape {tuple(value_cache.shape)} differs from key_cache "
                             f"{tuple(key_cache.shape)}")
    num_blocks, block_size, num_kv_heads, head_size = key_cache.shape
    for name, cache in (("key_cache", key_cache), ("value_cache", value_cache)):
        if cache.dtype != query.dtype:
            _fail(name, f"dtype {cache.dtype} differs from query dtype {query.dtype}")
    if block_size not in FLASH_BLOCK_SIZES:
        _fail("key_cache", f"block size {block_size} is not one of {FLASH_BLOCK_SIZES}")
    _check_heads(query, num_kv_heads, head_size)
    _tensor("query_start_loc", query_start_loc, 1, _INDEX_DTYPES)
    num_seqs = query_start_loc.shape[0] - 1
    if num_seqs < 1:
        _fail("query_start_loc", "needs at least two entries (one sequence)")
    _same_device([("query", query), ("key_cache", key_cache), ("value_cache", value_cache),
                  ("block_tables", block_tables), ("query_start_loc", query_start_loc),
                  ("seq_lens", seq_lens), ("alibi_slopes", alibi_slopes)])
    starts = query_start_loc.tolist()
    if starts[0] != 0 or starts[-1] != query.shape[0]:
        _fail("query_start_loc", f"must run from 0 to the {query.shape[0]} query tokens, "
                                 f"got {starts[0]}..{starts[-1]}")
    query_lens = [b - a for a, b in zip(starts, starts[1:])]
    if min(query_lens) < 0:
        _fail("query_start_loc", "must be non-decreasing")
    # An empty sequence (no tokens, no queries) is a real varlen batch entry: vLLM pads batches
    # with them. It contributes no output rows. A decode sequence needs at least its query token.
    lens = _check_tables(block_tables, seq_lens, block_size, num_blocks, num_seqs, min_len=0)
    if max(lens) < 1:
        _fail("seq_lens", "every sequence is empty")
    for i, (q, n) in enumerate(zip(query_lens, lens)):
        if q > n:
            _fail("seq_lens", f"sequence {i} has {q} query tokens but only {n} tokens in total")
    _check_scalars(scale, alibi_slopes, query.shape[1])
    if (not isinstance(window_size, (tuple, list)) or len(window_size) != 2
            or window_size[1] not in (-1, 0) or window_size[0] < -1):
        _fail("window_size", f"must be (left, 0) or (-1, -1) with left >= -1, got {window_size!r}")
    if not isinstance(softcap, (int, float)) or softcap < 0:
        _fail("softcap", f"must be a number >= 0 (0 disables it), got {softcap!r}")
