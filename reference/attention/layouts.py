"""The two physical layouts of a paged KV cache, and how to read one token back out of each.

A paged KV cache is a pool of fixed-size *blocks* (pages). Each block holds ``block_size``
consecutive token positions of one sequence; a per-sequence *block table* maps logical block ``i``
(positions ``i*block_size .. (i+1)*block_size-1``) to a physical block id in the pool. A *slot* is
``physical_block * block_size + offset_in_block``; the slot mapping tells a cache write where each
new token goes.

vLLM has used two arrangements of the same numbers inside a block:

* The **classic** layout of the CUDA paged-attention kernels (vLLM v0.10.2
  ``csrc/attention/attention_kernels.cuh``; ``csrc/cache_kernels.cu`` writes it)::

      key_cache   [num_blocks, num_kv_heads, head_size // x, block_size, x]
      value_cache [num_blocks, num_kv_heads, head_size, block_size]

  ``x = 16 // element_size`` is how many elements fill 16 bytes (8 for fp16/bf16, 4 for fp32).
  Splitting the head dimension into chunks of ``x`` lets one thread load a whole 16-byte vector
  of a key with one instruction while consecutive tokens of the block stay adjacent in memory.
  The value cache is stored transposed (head dim before tokens) so that the weighted sum over
  tokens reads contiguous memory.

* The **flash** layout used by vLLM's V1 Triton and FlashAttention backends::

      key_cache = value_cache = [num_blocks, block_size, num_kv_heads, head_size]

  Every token's heads sit together, so one token's keys are one contiguous row.

The helpers here name the shapes and read single tokens through the block table; they are the
ground truth the oracle gathers with, so they are deliberately simple loops over positions.
"""

from __future__ import annotations

import torch

#: The head sizes vLLM's CUDA paged-attention kernels are compiled for
#: (v0.10.2 csrc/attention/paged_attention_v1.cu, the ``switch (head_size)``).
SUPPORTED_HEAD_SIZES = (32, 64, 80, 96, 112, 120, 128, 192, 256)

#: The block sizes the CUDA paged-attention kernels are compiled for (same file,
#: ``CALL_V1_LAUNCHER_BLOCK_SIZE``); the classic-layout decode kernels accept exactly these.
CLASSIC_BLOCK_SIZES = (8, 16, 32)

#: Block sizes the flash-layout (varlen) kernel accepts: powers of two, one tile per block or
#: several blocks per tile.
FLASH_BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)

#: The element types the kernels support; accumulation is always in fp32.
SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def vector_width(dtype: torch.dtype) -> int:
    """``x``: how many elements of ``dtype`` make up 16 bytes (the classic key cache's last dim)."""
    return 16 // torch.empty((), dtype=dtype).element_size()


def classic_cache_shapes(
    num_blocks: int, num_kv_heads: int, head_size: int, block_size: int, dtype: torch.dtype
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The (key, value) shapes of a classic-layout cache."""
    x = vector_width(dtype)
    if head_size % x:
        raise ValueError(f"head_size={head_size} is not a multiple of x={x} for {dtype}")
    key = (num_blocks, num_kv_heads, head_size // x, block_size, x)
    value = (num_blocks, num_kv_heads, head_size, block_size)
    return key, value


def flash_cache_shape(
    num_blocks: int, num_kv_heads: int, head_size: int, block_size: int
) -> tuple[int, int, int, int]:
    """The shape of each of the two flash-layout caches (key and value share it)."""
    return (num_blocks, block_size, num_kv_heads, head_size)


def new_classic_cache(num_blocks: int, num_kv_heads: int, head_size: int, block_size: int,
                      dtype: torch.dtype, fill: float = float("nan"),
                      device: str | torch.device = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """An empty classic cache filled with ``fill`` (NaN by default, so unread slots stay visible)."""
    k_shape, v_shape = classic_cache_shapes(num_blocks, num_kv_heads, head_size, block_size, dtype)
    return (torch.full(k_shape, fill, dtype=dtype, device=device),
            torch.full(v_shape, fill, dtype=dtype, device=device))


def new_flash_cache(num_blocks: int, num_kv_heads: int, head_size: int, block_size: int,
                    dtype: torch.dtype, fill: float = float("nan"),
                    device: str | torch.device = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """An empty flash cache pair filled with ``fill``."""
    shape = flash_cache_shape(num_blocks, num_kv_heads, head_size, block_size)
    return (torch.full(shape, fill, dtype=dtype, device=device),
            torch.full(shape, fill, dtype=dtype, device=device))


def classic_key_at(key_cache: torch.Tensor, block: int, offset: int) -> torch.Tensor:
    """The keys ``[num_kv_heads, head_size]`` stored at one (block, offset) of a classic cache."""
    # [heads, head_size // x, x] -> [heads, head_size]: chunk c, lane l is dimension c * x + l.
    chunks = key_cache[block, :, :, offset, :]
    return chunks.reshape(chunks.shape[0], -1)


def classic_value_at(value_cache: torch.Tensor, block: int, offset: int) -> torch.Tensor:
    """The values ``[num_kv_heads, head_size]`` stored at one (block, offset) of a classic cache."""
    return value_cache[block, :, :, offset]


def flash_at(cache: torch.Tensor, block: int, offset: int) -> torch.Tensor:
    """The entries ``[num_kv_heads, head_size]`` stored at one (block, offset) of a flash cache."""
    return cache[block, offset]


def block_size_of(key_cache: torch.Tensor, layout: str) -> int:
    """The block size a cache was laid out with (``layout`` is ``"classic"`` or ``"flash"``)."""
    if layout == "classic":
        return key_cache.shape[3]
    if layout == "flash":
        return key_cache.shape[1]
    raise ValueError(f"layout must be 'classic' or 'flash', got {layout!r}")


def gather_sequence(key_cache: torch.Tensor, value_cache: torch.Tensor, block_table_row,
                    length: int, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Read positions ``0..length-1`` of one sequence, token by token, through its block table.

    Returns ``(keys, values)``, each ``[length, num_kv_heads, head_size]``. This is the slow,
    obviously-correct path: position ``p`` lives at offset ``p % block_size`` of the physical
    block ``block_table_row[p // block_size]``.
    """
    block_size = block_size_of(key_cache, layout)
    table = [int(b) for b in block_table_row]
    keys, values = [], []
    for pos in range(length):
        block, offset = table[pos // block_size], pos % block_size
        if layout == "classic":
            keys.append(classic_key_at(key_cache, block, offset))
            values.append(classic_value_at(value_cache, block, offset))
        else:
            keys.append(flash_at(key_cache, block, offset))
            values.append(flash_at(value_cache, block, offset))
    if not keys:
        heads, size = (key_cache.shape[1], key_cache.shape[2] * key_cache.shape[4]) \
            if layout == "classic" else (key_cache.shape[2], key_cache.shape[3])
        empty = key_cache.new_empty((0, heads, size))
        return empty, empty.clone()
    return torch.stack(keys), torch.stack(values)
