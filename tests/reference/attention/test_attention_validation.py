"""Misuse is refused before launch with a ValueError naming the argument, and changes nothing."""

import pytest
import torch

from reference.attention import cache_write, decode, varlen
from reference.attention.batch import make_batch


def decode_args(batch, **changes):
    args = dict(query=batch.query, key_cache=batch.key_cache, value_cache=batch.value_cache,
                block_tables=batch.block_tables, seq_lens=batch.seq_lens, scale=batch.scale)
    args.update(changes)
    return args


DECODE_MISUSE = [
    ("block_tables", lambda b: dict(block_tables=torch.full_like(b.block_tables, 99))),
    ("block_tables", lambda b: dict(block_tables=-torch.ones_like(b.block_tables))),
    ("seq_lens", lambda b: dict(seq_lens=torch.tensor([10_000, 5], dtype=torch.int32))),
    ("seq_lens", lambda b: dict(seq_lens=torch.tensor([0, 5], dtype=torch.int32))),
    ("seq_lens", lambda b: dict(seq_lens=torch.tensor([5], dtype=torch.int32))),
    ("query", lambda b: dict(query=b.query[..., :16].contiguous())),
    ("query", lambda b: dict(query=b.query[:, :3].contiguous())),
    ("key_cache", lambda b: dict(key_cache=b.key_cache.half())),
    ("key_cache", lambda b: dict(key_cache=b.key_cache.reshape(*b.key_cache.shape[:2], -1, 2))),
    ("value_cache", lambda b: dict(value_cache=b.value_cache[:, :, :, :4])),
    ("scale", lambda b: dict(scale=0.0)),
    ("alibi_slopes", lambda b: dict(alibi_slopes=torch.ones(3))),
    ("block_tables", lambda b: dict(block_tables=b.block_tables.float())),
]


@pytest.mark.parametrize("argument,change", DECODE_MISUSE)
@pytest.mark.parametrize("fn", [decode.paged_attention_v1, decode.paged_attention_v2])
def test_decode_refuses_misuse(fn, argument, change):
    """Catches: launching with out-of-range block ids, lengths past the table's capacity, or
    mismatched shapes/dtypes (a silent out-of-bounds read on a GPU) instead of a clear error."""
    batch = make_batch([5, 20], layout="classic", block_size=8, head_size=32)
    with pytest.raises(ValueError, match=f"^{argument}"):
        fn(**decode_args(batch, **change(batch)))


def test_decode_refuses_bad_partition_size():
    """Catches: a v2 partition that is not a whole number of blocks (blocks would straddle two
    partitions and be counted twice or never)."""
    batch = make_batch([5], layout="classic", block_size=8, head_size=32)
    with pytest.raises(ValueError, match="^partition_size"):
        decode.paged_attention_v2(**decode_args(batch), partition_size=12)


VARLEN_MISUSE = [
    ("query_start_loc", lambda b: dict(query_start_loc=torch.tensor([0, 1, 3]))),
    ("query_start_loc", lambda b: dict(query_start_loc=torch.tensor([0, 2, 1, 5]))),
    ("seq_lens", lambda b: dict(seq_lens=torch.tensor([1, 1, 1], dtype=torch.int32))),
    ("window_size", lambda b: dict(window_size=(4, 4))),
    ("softcap", lambda b: dict(softcap=-1.0)),
    ("seq_lens", lambda b: dict(block_tables=b.block_tables[:, :1].contiguous())),
]


@pytest.mark.parametrize("argument,change", VARLEN_MISUSE)
def test_varlen_refuses_misuse(argument, change):
    """Catches: chunks longer than their sequence, non-monotone packing, unsupported window forms
    or a block table too short for the context, all of which would read out of bounds."""
    batch = make_batch([3, 9, 17], query_lens=[1, 2, 2], layout="flash", block_size=8,
                       head_size=32)
    args = dict(query=batch.query, key_cache=batch.key_cache, value_cache=batch.value_cache,
                block_tables=batch.block_tables, query_start_loc=batch.query_start_loc,
                seq_lens=batch.seq_lens, scale=batch.scale)
    args.update(change(batch))
    with pytest.raises(ValueError, match=f"^{argument}"):
        varlen.varlen_paged_attention(**args)


@pytest.mark.parametrize("layout", ["classic", "flash"])
@pytest.mark.parametrize("argument,slots", [("slot_mapping", [0, 16]),
                                            ("slot_mapping", [3, 3]),
                                            ("slot_mapping", [0])])
def test_cache_write_refuses_bad_slots_and_leaves_cache_unchanged(layout, argument, slots):
    """Catches: writing past the pool, racing two tokens onto one slot, or a slot mapping of the
    wrong length, and partial writes before the error (the cache must be untouched)."""
    batch = make_batch([16], layout=layout, block_size=8, head_size=32, spare_blocks=0,
                       num_kv_heads=1)
    k, v = batch.key_cache, batch.value_cache
    before = (k.clone(), v.clone())
    key = torch.zeros(2, 1, 32)
    fn = cache_write.reshape_and_cache if layout == "classic" else \
        cache_write.reshape_and_cache_flash
    with pytest.raises(ValueError, match=f"^{argument}"):
        fn(key, key.clone(), k, v, torch.tensor(slots))
    assert torch.equal(k, before[0]) and torch.equal(v, before[1])


def test_cache_write_refuses_dtype_mismatch():
    """Catches: silently converting keys into a cache of another dtype (quantised caches are not
    supported by the reference, so this must be an error naming the cache)."""
    k, v = torch.zeros(2, 8, 1, 32, dtype=torch.float16), torch.zeros(2, 8, 1, 32)
    with pytest.raises(ValueError, match="^key_cache"):
        cache_write.reshape_and_cache_flash(torch.zeros(1, 1, 32), torch.zeros(1, 1, 32), k, v,
                                            torch.tensor([0]))
