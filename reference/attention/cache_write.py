"""Cache writes (``reshape_and_cache``): scatter new tokens' keys and values into their slots.

After the model computes a layer's keys and values for the new tokens of a step, each token is
copied to the slot the scheduler gave it: block ``slot // block_size``, offset
``slot % block_size``. A slot of ``-1`` (any negative value) marks a padding token and is skipped;
vLLM's kernels return early for it (v0.10.2 csrc/cache_kernels.cu ``reshape_and_cache_kernel``
and ``reshape_and_cache_flash_kernel``; v0.33.0
vllm/v1/attention/ops/triton_reshape_and_cache_flash.py ``reshape_and_cache_kernel_flash``).

One Triton program handles one token and copies all ``num_heads * head_size`` numbers of its key
and of its value, computing each number's destination offset from the layout. The copy is exact:
no arithmetic touches the values, so the result must be bit-identical to the oracle's.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from reference.attention.validate import check_cache_write


@triton.jit
def _write_classic_kernel(
    key_ptr, value_ptr, key_cache_ptr, value_cache_ptr, slot_ptr,
    key_stride_token, key_stride_head, value_stride_token, value_stride_head,
    kc_stride_block, kc_stride_head, kc_stride_chunk, kc_stride_offset, kc_stride_lane,
    vc_stride_block, vc_stride_head, vc_stride_dim, vc_stride_offset,
    NUM_HEADS: tl.constexpr, HEAD_SIZE: tl.constexpr, BLOCK_SIZE: tl.constexpr,
    X: tl.constexpr, ROW_PADDED: tl.constexpr,
):
    token = tl.program_id(0)
    slot = tl.load(slot_ptr + token).to(tl.int64)
    if slot >= 0:
        block = slot // BLOCK_SIZE
        offset = slot % BLOCK_SIZE
        i = tl.arange(0, ROW_PADDED)  # flat index over (head, dim) of this token's row
        valid = i < NUM_HEADS * HEAD_SIZE
        head = i // HEAD_SIZE
        dim = i % HEAD_SIZE
        k = tl.load(key_ptr + token * key_stride_token + head * key_stride_head + dim, mask=valid)
        v = tl.load(value_ptr + token * value_stride_token + head * value_stride_head + dim,
                    mask=valid)
        # Key: dimension d lives in chunk d // X at lane d % X, next to the same lane of the
        # neighbouring tokens of the block.
        k_dst = (block * kc_stride_block + head * kc_stride_head + (dim // X) * kc_stride_chunk
                 + offset * kc_stride_offset + (dim % X) * kc_stride_lane)
        # Value: stored transposed, dimension-major, so token offsets are the fastest index.
        v_dst = (block * vc_stride_block + head * vc_stride_head + dim * vc_stride_dim
                 + offset * vc_stride_offset)
        tl.store(key_cache_ptr + k_dst, k, mask=valid)
        tl.store(value_cache_ptr + v_dst, v, mask=valid)


@triton.jit
def _write_flash_kernel(
    key_ptr, value_ptr, key_cache_ptr, value_cache_ptr, slot_ptr,
    key_stride_token, key_stride_head, value_stride_token, value_stride_head,
    kc_stride_block, kc_stride_offset, kc_stride_head, kc_stride_dim,
    vc_stride_block, vc_stride_offset, vc_stride_head, vc_stride_dim,
    NUM_HEADS: tl.constexpr, HEAD_SIZE: tl.constexpr, BLOCK_SIZE: tl.constexpr,
    ROW_PADDED: tl.constexpr,
):
    token = tl.program_id(0)
    slot = tl.load(slot_ptr + token).to(tl.int64)
    if slot >= 0:
        block = slot // BLOCK_SIZE
        offset = slot % BLOCK_SIZE
        i = tl.arange(0, ROW_PADDED)
        valid = i < NUM_HEADS * HEAD_SIZE
        head = i // HEAD_SIZE
        dim = i % HEAD_SIZE
        k = tl.load(key_ptr + token * key_stride_token + head * key_stride_head + dim, mask=valid)
        v = tl.load(value_ptr + token * value_stride_token + head * value_stride_head + dim,
                    mask=valid)
        k_dst = (block * kc_stride_block + offset * kc_stride_offset + head * kc_stride_head
                 + dim * kc_stride_dim)
        v_dst = (block * vc_stride_block + offset * vc_stride_offset + head * vc_stride_head
                 + dim * vc_stride_dim)
        tl.store(key_cache_ptr + k_dst, k, mask=valid)
        tl.store(value_cache_ptr + v_dst, v, mask=valid)


def _check_rows(key: torch.Tensor, value: torch.Tensor) -> None:
    # The kernels index the head dimension with stride 1 (each head's row is contiguous).
    for name, t in (("key", key), ("value", value)):
        if t.shape[2] > 1 and t.stride(2) != 1:
            raise ValueError(f"{name}: the last dimension must be contiguous (stride 1)")


def reshape_and_cache(key, value, key_cache, value_cache, slot_mapping) -> None:
    """Write ``key/value [num_tokens, kv_heads, head_size]`` into a classic-layout cache.

    ``slot_mapping [num_tokens]`` (int32/int64) gives each token's slot; negative = skip.
    Validates everything first (ValueError names the argument), then launches one program per
    token. Caches are modified in place.
    """
    check_cache_write(key, value, key_cache, value_cache, slot_mapping, "classic")
    _check_rows(key, value)
    num_tokens, num_heads, head_size = key.shape
    if num_tokens == 0:
        return
    _write_classic_kernel[(num_tokens,)](
        key, value, key_cache, value_cache, slot_mapping,
        key.stride(0), key.stride(1), value.stride(0), value.stride(1),
        *key_cache.stride(), *value_cache.stride(),
        NUM_HEADS=num_heads, HEAD_SIZE=head_size, BLOCK_SIZE=key_cache.shape[3],
        X=key_cache.shape[4], ROW_PADDED=triton.next_power_of_2(num_heads * head_size),
    )


def reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping) -> None:
    """Write ``key/value [num_tokens, kv_heads, head_size]`` into a flash-layout cache pair.

    Same contract as :func:`reshape_and_cache`, for caches ``[num_blocks, block_size, kv_heads,
    head_size]`` (any strides, so views into a combined ``[2, ...]`` tensor work too).
    """
    check_cache_write(key, value, key_cache, value_cache, slot_mapping, "flash")
    _check_rows(key, value)
    num_tokens, num_heads, head_size = key.shape
    if num_tokens == 0:
        return
    _write_flash_kernel[(num_tokens,)](
        key, value, key_cache, value_cache, slot_mapping,
        key.stride(0), key.stride(1), value.stride(0), value.stride(1),
        *key_cache.stride(), *value_cache.stride(),
        NUM_HEADS=num_heads, HEAD_SIZE=head_size, BLOCK_SIZE=key_cache.shape[1],
        ROW_PADDED=triton.next_power_of_2(num_heads * head_size),
    )
