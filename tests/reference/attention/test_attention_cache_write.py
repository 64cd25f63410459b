"""Cache writes: the Triton kernels against the oracle, bit for bit, in both layouts."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from reference.attention import cache_write, layouts, oracle

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
BITS = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}


def bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bit patterns, so NaN == NaN and -0.0 != 0.0 (true bit-exactness)."""
    return t.contiguous().view(BITS[t.dtype])


def new_caches(layout, num_blocks, heads, head_size, block_size, dtype):
    make = layouts.new_classic_cache if layout == "classic" else layouts.new_flash_cache
    return make(num_blocks, heads, head_size, block_size, dtype, fill=float("nan"))


WRITERS = {"classic": (cache_write.reshape_and_cache, oracle.reshape_and_cache_oracle),
           "flash": (cache_write.reshape_and_cache_flash, oracle.reshape_and_cache_flash_oracle)}


@settings(max_examples=12, deadline=None)
@given(layout=st.sampled_from(["classic", "flash"]), dtype=st.sampled_from(DTYPES),
       head_size=st.sampled_from([32, 64, 80]), block_size=st.sampled_from([8, 16, 32]),
       heads=st.integers(1, 3), data=st.data())
def test_triton_write_is_bit_exact_with_oracle(layout, dtype, head_size, block_size, heads, data):
    """Catches: a wrong destination offset (chunk/lane split of the classic key, transposed value,
    flash row order), a dropped or converted element, or a skipped token written anyway."""
    num_blocks = data.draw(st.integers(1, 4), label="num_blocks")
    num_slots = num_blocks * block_size
    num_tokens = data.draw(st.integers(0, min(num_slots, 12)), label="num_tokens")
    slots = data.draw(st.lists(st.integers(0, num_slots - 1), min_size=num_tokens,
                               max_size=num_tokens, unique=True), label="slots")
    skip = data.draw(st.lists(st.booleans(), min_size=num_tokens, max_size=num_tokens))
    slot_mapping = torch.tensor([-1 if s else v for v, s in zip(slots, skip)], dtype=torch.int64)
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16), label="seed"))
    key = torch.randn(num_tokens, heads, head_size, generator=gen).to(dtype)
    value = torch.randn(num_tokens, heads, head_size, generator=gen).to(dtype)
    kernel, reference = WRITERS[layout]
    k_got, v_got = new_caches(layout, num_blocks, heads, head_size, block_size, dtype)
    k_want, v_want = k_got.clone(), v_got.clone()
    kernel(key, value, k_got, v_got, slot_mapping)
    reference(key, value, k_want, v_want, slot_mapping)
    assert torch.equal(bits(k_got), bits(k_want))
    assert torch.equal(bits(v_got), bits(v_want))


@pytest.mark.parametrize("layout", ["classic", "flash"])
def test_skipped_tokens_leave_cache_untouched(layout):
    """Catches: treating slot -1 as a real slot (writing to the last slot via negative indexing
    or to slot 0) instead of skipping the padding token."""
    kernel, _ = WRITERS[layout]
    k_cache, v_cache = new_caches(layout, 2, 2, 32, 8, torch.float16)
    before_k, before_v = bits(k_cache).clone(), bits(v_cache).clone()
    key = torch.ones(3, 2, 32, dtype=torch.float16)
    kernel(key, key.clone(), k_cache, v_cache, torch.tensor([-1, -1, -1]))
    assert torch.equal(bits(k_cache), before_k) and torch.equal(bits(v_cache), before_v)


def test_classic_layout_places_dimension_in_chunk_and_lane():
    """Catches: swapping the chunk (d // x) and lane (d % x) indices of the classic key cache, or
    writing the value cache token-major instead of dimension-major."""
    dtype = torch.float16  # x = 8
    k_cache, v_cache = new_caches("classic", 3, 1, 32, 8, dtype)
    key = torch.arange(32, dtype=dtype).reshape(1, 1, 32)
    cache_write.reshape_and_cache(key, -key, k_cache, v_cache, torch.tensor([2 * 8 + 5]))
    assert layouts.vector_width(dtype) == 8
    for d in range(32):
        assert k_cache[2, 0, d // 8, 5, d % 8].item() == d
        assert v_cache[2, 0, d, 5].item() == -d


def test_flash_write_into_views_of_a_combined_cache():
    """Catches: assuming contiguous key/value caches (vLLM's V1 backends hand the kernel the two
    halves of one [2, num_blocks, ...] tensor, which is fine, or strided views)."""
    combined = torch.full((2, 3, 8, 2, 32), float("nan"))
    key, value = torch.randn(4, 2, 32), torch.randn(4, 2, 32)
    slots = torch.tensor([0, 9, -1, 23])
    cache_write.reshape_and_cache_flash(key, value, combined[0], combined[1], slots)
    want = torch.full_like(combined, float("nan"))
    oracle.reshape_and_cache_flash_oracle(key, value, want[0], want[1], slots)
    assert torch.equal(bits(combined), bits(want))


@pytest.mark.parametrize("block_size", [8, 16, 32])
def test_flash_write_into_head_major_memory(block_size):
    """Catches: the reference write assuming a token-major flash cache (head stride = head size):
    the GPU lane's "flash_hnd" case hands vLLM's writer and the reference the flash view of
    head-major memory, where a token's heads lie ``block_size · head_size`` elements apart."""
    from conformance.gpu.cuda_checks import new_flash_hnd_cache

    k_cache, v_cache = new_flash_hnd_cache(4, 2, 64, block_size, torch.float16, device="cpu")
    assert k_cache.shape == (4, block_size, 2, 64) and k_cache.stride(2) == block_size * 64
    want = [torch.full_like(c, float("nan")) for c in (k_cache, v_cache)]
    gen = torch.Generator().manual_seed(block_size)
    key, value = (torch.randn(7, 2, 64, generator=gen).half() for _ in range(2))
    slots = torch.tensor([0, 1, block_size + 3, -1, 2 * block_size, 4 * block_size - 1, 5])
    cache_write.reshape_and_cache_flash(key, value, k_cache, v_cache, slots)
    oracle.reshape_and_cache_flash_oracle(key, value, *want, slots)
    assert torch.equal(bits(k_cache), bits(want[0])) and torch.equal(bits(v_cache), bits(want[1]))
