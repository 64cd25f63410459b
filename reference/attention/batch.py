"""Building paged batches: a random cache, random block tables, queries -- the kernels' inputs.

Tests, conformance checks and benchmarks all need the same thing: a few sequences of given lengths
whose keys and values sit in a paged cache at *scattered* physical blocks (so a kernel that ignores
the block table, or reads the wrong block, is caught), plus queries. :func:`make_batch` builds
that deterministically from a seed.

Slots that no sequence owns -- the tail of each sequence's last block and every unused block --
are filled with ``poison`` (NaN by default). A kernel that reads a slot it should not read then
produces NaN, which no tolerance accepts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from reference.attention.layouts import new_classic_cache, new_flash_cache
from reference.attention.oracle import write_sequences_classic, write_sequences_flash


@dataclass
class PagedBatch:
    """Everything a paged-attention call needs, plus the per-sequence truth it was built from."""

    layout: str  # "classic" or "flash"
    query: torch.Tensor  # [num_query_tokens, num_heads, head_size]
    key_cache: torch.Tensor
    value_cache: torch.Tensor
    block_tables: torch.Tensor  # [num_seqs, max_blocks] int32
    seq_lens: torch.Tensor  # [num_seqs] int32
    query_start_loc: torch.Tensor  # [num_seqs + 1] int32
    scale: float
    alibi_slopes: torch.Tensor | None = None
    keys: list = field(default_factory=list)  # per sequence [seq_len, kv_heads, head_size]
    values: list = field(default_factory=list)

    @property
    def query_lens(self) -> list[int]:
        starts = self.query_start_loc.tolist()
        return [b - a for a, b in zip(starts, starts[1:])]

    @property
    def block_size(self) -> int:
        return self.key_cache.shape[3] if self.layout == "classic" else self.key_cache.shape[1]


def make_batch(seq_lens: list[int], *, query_lens: list[int] | None = None, layout: str = "classic",
               num_heads: int = 4, num_kv_heads: int = 2, head_size: int = 64,
               block_size: int = 16, dtype: torch.dtype = torch.float32, seed: int = 0,
               spare_blocks: int = 3, extra_table_columns: int = 1, use_alibi: bool = False,
               poison: float = float("nan"), value_range: float = 1.0,
               device: str | torch.device = "cpu") -> PagedBatch:
    """A batch of ``len(seq_lens)`` sequences with keys/values at shuffled physical blocks.

    ``query_lens`` defaults to one query token per sequence (decode). Keys, values and queries are
    uniform in ``[-value_range, value_range]``; ALiBi slopes, when asked for, are uniform in
    ``[0, 1)``. ``spare_blocks`` unused blocks are added to the pool and ``extra_table_columns``
    columns of never-read table entries (pointing at block 0) are appended, so that neither the
    pool size nor the table width happen to equal what the sequences need.
    """
    gen = torch.Generator().manual_seed(seed)
    query_lens = [1] * len(seq_lens) if query_lens is None else list(query_lens)
    if len(query_lens) != len(seq_lens):
        raise ValueError("query_lens: needs one entry per sequence")
    blocks_needed = [-(-n // block_size) for n in seq_lens]
    num_blocks = sum(blocks_needed) + spare_blocks
    order = torch.randperm(num_blocks, generator=gen).tolist()
    width = max(blocks_needed) + extra_table_columns
    tables = torch.zeros((len(seq_lens), width), dtype=torch.int32)
    cursor = 0
    for i, need in enumerate(blocks_needed):
        tables[i, :need] = torch.tensor(order[cursor:cursor + need], dtype=torch.int32)
        cursor += need

    def uniform(*shape):
        return ((torch.rand(shape, generator=gen) * 2 - 1) * value_range).to(dtype)

    keys = [uniform(n, num_kv_heads, head_size) for n in seq_lens]
    values = [uniform(n, num_kv_heads, head_size) for n in seq_lens]
    if layout == "classic":
        k_cache, v_cache = new_classic_cache(num_blocks, num_kv_heads, head_size, block_size,
                                             dtype, fill=poison)
        write_sequences_classic(keys, values, k_cache, v_cache, tables)
    elif layout == "flash":
        k_cache, v_cache = new_flash_cache(num_blocks, num_kv_heads, head_size, block_size,
                                           dtype, fill=poison)
        write_sequences_flash(keys, values, k_cache, v_cache, tables)
    else:
        raise ValueError(f"layout: must be 'classic' or 'flash', got {layout!r}")
    starts = [0]
    for q in query_lens:
        starts.append(starts[-1] + q)
    query = uniform(starts[-1], num_heads, head_size)
    slopes = torch.rand(num_heads, generator=gen) if use_alibi else None
    return PagedBatch(
        layout=layout, query=query.to(device), key_cache=k_cache.to(device),
        value_cache=v_cache.to(device), block_tables=tables.to(device),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=device),
        query_start_loc=torch.tensor(starts, dtype=torch.int32, device=device),
        scale=head_size ** -0.5,
        alibi_slopes=None if slopes is None else slopes.to(device), keys=keys, values=values,
    )
