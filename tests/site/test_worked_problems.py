"""The worked problems' arithmetic, checked against definitions, brute-force counts and the
reference's cache layout, and the problem statements against the inputs the solutions use."""

from __future__ import annotations

import re
from math import prod
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from docs.hooks import worked_problems as wp
from docs.hooks.problems import (
    GIB,
    KIB,
    LLAMA_13B,
    MIB,
    Model,
    block_run_bytes,
    causal_window_ratio,
    entry_per_token_ratio,
    full_causal_pairs,
    kv_bytes_per_page,
    kv_bytes_per_token,
    lookup_overheads,
    naive_window_ratio,
    pages_that_fit,
    parameters_in,
    prefix_caching_saving,
    seconds_at,
    weight_bytes,
    window_causal_pairs,
)
from reference.attention.layouts import CLASSIC_BLOCK_SIZES, classic_cache_shapes

PAGE_FILE = Path(wp.__file__).parents[1] / wp.PAGE


def brute_pairs(n: int, w: int | None) -> int:
    """Count visible (query, key) pairs one by one."""
    return sum(1 for q in range(n) for k in range(q + 1) if w is None or q - k < w)


models = st.builds(Model, st.just("m"), st.integers(1, 80), st.integers(1, 64), st.sampled_from([64, 128]),
                   st.sampled_from([1, 2, 4]), st.just(1e9))


@given(models, st.integers(1, 64))
def test_kv_bytes_count_every_layer_head_and_both_tensors(m: Model, block: int) -> None:
    """Catches: forgetting K or V, or the layer count, in the per-token KV size."""
    per_token = kv_bytes_per_token(m)
    assert per_token == sum(m.head_dim * m.dtype_bytes for _tensor in "KV" for _l in range(m.layers)
                            for _h in range(m.kv_heads))
    assert kv_bytes_per_page(m, block) == block * per_token


def test_llama_13b_is_800_kib_per_token_not_819() -> None:
    """Catches: the seed's "819 KiB" (decimal kB mislabelled as KiB) reaching the page."""
    per_token = kv_bytes_per_token(LLAMA_13B)
    assert per_token % KIB == 0 and per_token // KIB == 800
    assert per_token // 1000 == 819  # the seed's number is the decimal kilobyte count
    page = wp.kv_capacity()
    assert "800 KiB" in page and "819 KiB" in page and "819.2 kB" in page
    assert f"{kv_bytes_per_page(LLAMA_13B, 16) / MIB:g} MiB" in page


@given(st.integers(0, 10**12), st.integers(1, 10**9))
def test_pages_that_fit_is_the_largest_whole_count(capacity: int, page: int) -> None:
    """Catches: rounding up (a page that does not fit) or losing a whole page to rounding."""
    n = pages_that_fit(capacity, page)
    assert n * page <= capacity < (n + 1) * page


def test_pages_in_70_gib_match_the_page() -> None:
    """Catches: the page quoting a page count that the tested function does not produce."""
    n = pages_that_fit(70 * GIB, kv_bytes_per_page(LLAMA_13B, 16))
    assert n * kv_bytes_per_page(LLAMA_13B, 16) <= 70 * GIB
    assert f"**{n:,} whole pages**" in wp.kv_capacity()


def test_non_positive_page_size_is_refused() -> None:
    """Catches: a zero page size dividing by zero or returning nonsense."""
    with pytest.raises(ValueError, match="page size"):
        pages_that_fit(100, 0)


@given(st.integers(1, 60), st.integers(1, 70))
def test_window_pairs_match_brute_force(n: int, w: int) -> None:
    """Catches: an off-by-one in the window triangle (the query's own key, the first W rows)."""
    assert full_causal_pairs(n) == brute_pairs(n, None)
    assert window_causal_pairs(n, w) == brute_pairs(n, w)


@given(st.integers(1, 60), st.integers(1, 70))
def test_causal_window_ratio_is_the_brute_force_quotient(n: int, w: int) -> None:
    """Catches: the page's causal ratio divided by another pair count than the window's (a window
    one key wider, say), which the bounds test below would let through."""
    assert causal_window_ratio(n, w) == pytest.approx(brute_pairs(n, None) / brute_pairs(n, w))


@given(st.integers(2, 4000), st.integers(1, 4000))
def test_causal_ratio_never_exceeds_naive_ratio_when_window_is_shorter(n: int, w: int) -> None:
    """Catches: claiming the naive N/W saving survives causality (it roughly halves for N >> W)."""
    if w < n:
        assert 1 <= causal_window_ratio(n, w) <= naive_window_ratio(n, w)


def test_sliding_window_page_reports_both_ratios() -> None:
    """Catches: the page showing only the naive 8x, or numbers that differ from the functions."""
    page = wp.sliding_window()
    assert f"**{naive_window_ratio(wp.WINDOW_N, wp.WINDOW_W):g}×**" in page
    assert f"**{causal_window_ratio(wp.WINDOW_N, wp.WINDOW_W):.2f}×**" in page


@given(st.integers(1, 50), st.integers(0, 300), st.sampled_from([1, 4, 16]))
def test_prefix_saving_matches_a_block_by_block_simulation(requests: int, prefix: int, block: int) -> None:
    """Catches: counting the partial last block of the prefix as shareable, or the first request as saved."""
    m = LLAMA_13B
    computed_blocks = set()
    saved = 0
    for _ in range(requests):
        for b in range(prefix // block):  # only full blocks are hashed and cached
            key = tuple(range(b * block + block))  # the block's whole prefix identifies it
            if key in computed_blocks:
                saved += block
            computed_blocks.add(key)
    s = prefix_caching_saving(m, requests, prefix, block)
    assert s.saved_tokens == saved
    assert s.saved_kv_bytes == saved * kv_bytes_per_token(m)
    assert s.saved_linear_flops == pytest.approx(2 * m.parameters * saved)


@given(st.integers(1, 30), st.integers(0, 200), st.sampled_from([1, 4, 16]))
def test_prefix_attention_flops_count_every_causal_pair_of_the_shared_blocks(requests: int, prefix: int,
                                                                            block: int) -> None:
    """Catches: the attention FLOPs saved by the other requests counted over the whole prefix
    (the partial block included), without causality, or without the QK and PV halves."""
    m = LLAMA_13B
    shared = prefix // block * block
    per_request = sum(4 * m.hidden * m.layers * (position + 1) for position in range(shared))
    s = prefix_caching_saving(m, requests, prefix, block)
    assert s.saved_attention_flops == pytest.approx((requests - 1) * per_request)


@given(st.integers(1, 200), st.integers(1, 200))
def test_naive_window_ratio_is_the_square_over_the_band(n: int, w: int) -> None:
    """Catches: the page's naive ratio computed other than as N·N pairs over N·W, the count the
    seed's "8× less" rests on (causality ignored on both sides)."""
    square = sum(1 for _q in range(n) for _k in range(n))
    band = sum(1 for _q in range(n) for _k in range(w))
    assert naive_window_ratio(n, w) == pytest.approx(square / band)


def test_prefix_page_states_the_block_rounding() -> None:
    """Catches: the page claiming all 500 prefix tokens are shared when only 496 fill blocks."""
    page = wp.prefix_caching()
    s = prefix_caching_saving(LLAMA_13B, 100, 500, 16)
    assert s.shared_tokens == 496
    assert f"**{s.saved_tokens:,} tokens**" in page and f"{s.saved_kv_bytes / GIB:.2f} GiB" in page


def test_lookup_overheads_go_from_pessimistic_to_optimistic() -> None:
    """Catches: an overhead table whose rows contradict their own assumptions."""
    rows = lookup_overheads(LLAMA_13B, 16)
    ratios = [r.ratio for r in rows]
    assert ratios == sorted(ratios, reverse=True)
    assert rows[0].ratio == pytest.approx(2 * rows[1].ratio)
    assert rows[-1].ratio == pytest.approx(4 / (16 * kv_bytes_per_token(LLAMA_13B)))
    assert rows[0].ratio < 1e-3  # even the pessimistic case is under a tenth of a percent


def test_render_replaces_every_marker_and_rejects_unknown_ones() -> None:
    """Catches: a marker left on the page, or a typo in a marker silently dropping a solution."""
    text = "\n\n".join(f"WORKED-PROBLEM:{name}" for name in wp.SOLUTIONS)
    out = wp.render(text)
    assert "WORKED-PROBLEM" not in out
    with pytest.raises(Exception, match="unknown worked problem"):
        wp.render("WORKED-PROBLEM:no-such-problem")


def test_page_markers_all_have_solutions() -> None:
    """Catches: docs/worked-problems.md naming a problem the hook cannot solve."""
    names = re.findall(r"^WORKED-PROBLEM:([a-z-]+)$", PAGE_FILE.read_text(encoding="utf-8"), re.M)
    assert names and set(names) <= set(wp.SOLUTIONS)


@given(models)
def test_weights_and_the_parameters_they_hold_agree(m: Model) -> None:
    """Catches: the premise paragraph's weight bytes or its "at most N parameters" using another
    element size than the model's (or losing the parameter count to a unit slip)."""
    assert weight_bytes(m) == int(m.parameters) * m.dtype_bytes
    assert parameters_in(weight_bytes(m), m.dtype_bytes) == int(m.parameters)


def test_premise_paragraph_counts_parameters_at_the_models_element_size() -> None:
    """Catches: the premise paragraph's "at most N parameters" in the GiB the statement leaves
    computed at another element size than the model's 16 bits (4 bytes would say 2.7, not 5.4)."""
    left = (wp.GPU_GIB - wp.CAPACITY_GIB) * GIB
    assert f"at most {parameters_in(left, LLAMA_13B.dtype_bytes) / 1e9:.1f} × 10⁹ 16-bit parameters" in wp.kv_capacity()


def test_premise_paragraph_shows_the_room_left_by_the_weights() -> None:
    """Catches: the page's KV room on an 80 GiB GPU, or the pages in it, differing from the tested
    functions (13e9 16-bit weights are 26e9 bytes, 24.21 GiB)."""
    weights = weight_bytes(LLAMA_13B)
    assert weights == 26 * 10**9
    room = wp.GPU_GIB * GIB - weights
    page = wp.kv_capacity()
    assert f"{weights / GIB:.2f} GiB" in page and f"{room / GIB:.2f} GiB" in page
    assert f"{pages_that_fit(room, kv_bytes_per_page(LLAMA_13B, wp.BLOCK_SIZE)):,} pages" in page


@pytest.mark.parametrize("block_size", CLASSIC_BLOCK_SIZES)
def test_block_run_is_one_heads_slice_of_the_classic_cache(block_size: int) -> None:
    """Catches: the page's "contiguous run per head" disagreeing with the classic layout the V0
    kernels read, where one block's keys (and values) of one head fill the trailing axes."""
    key, value = classic_cache_shapes(1, LLAMA_13B.kv_heads, LLAMA_13B.head_dim, block_size, torch.float16)
    assert prod(key[2:]) * 2 == prod(value[2:]) * 2 == block_run_bytes(LLAMA_13B, block_size)
    if block_size == wp.BLOCK_SIZE:
        run = block_run_bytes(LLAMA_13B, block_size)
        assert f"contiguous {run:,}-byte run per head" in wp.lookup_overhead() and run == 4096


def test_quoted_overhead_is_one_entry_against_one_tokens_kv() -> None:
    """Catches: the page's account of the quoted "~0.0005%" computed differently from its own
    table (one entry per token for all layers is the optimistic row times the block size)."""
    quoted = entry_per_token_ratio(LLAMA_13B, wp.TABLE_ENTRY_BYTES)
    optimistic = lookup_overheads(LLAMA_13B, wp.BLOCK_SIZE, wp.TABLE_ENTRY_BYTES)[-1].ratio
    assert quoted == pytest.approx(wp.BLOCK_SIZE * optimistic)
    assert f"{100 * quoted:.5f}%" in wp.lookup_overhead()


def test_prefill_time_saved_is_the_flops_at_the_assumed_throughput() -> None:
    """Catches: the seconds of GPU time on the page not following from the FLOPs it states, and a
    zero throughput dividing by zero."""
    s = prefix_caching_saving(LLAMA_13B, wp.SHARED_REQUESTS, wp.SHARED_PREFIX, wp.BLOCK_SIZE)
    seconds = seconds_at(s.saved_linear_flops + s.saved_attention_flops, wp.THROUGHPUT_FLOPS)
    assert seconds == pytest.approx((s.saved_linear_flops + s.saved_attention_flops) / 300e12)
    assert f"about {seconds:.1f} s of GPU time" in wp.prefix_caching()
    with pytest.raises(ValueError, match="throughput"):
        seconds_at(1.0, 0.0)


def test_page_states_the_inputs_the_solutions_use() -> None:
    """Catches: a constant of the hook changed without the problem statement on the page (or the
    statement without the constant), so a solution answers another question than the one asked."""
    text = PAGE_FILE.read_text(encoding="utf-8")
    for stated in (f"{wp.BLOCK_SIZE}-token page", f"{wp.CAPACITY_GIB} GiB left for the KV cache",
                   f"on an {wp.GPU_GIB} GiB GPU", f"W = {wp.WINDOW_W}", f"N = {wp.WINDOW_N:,}",
                   f"{wp.SHARED_REQUESTS} requests share a {wp.SHARED_PREFIX}-token",
                   f"one int32 per {wp.BLOCK_SIZE} tokens", f"({wp.THROUGHPUT_FLOPS / 1e12:g} TFLOP/s)",
                   f"a {wp.SECTOR_BYTES}-byte memory sector"):
        assert stated in " ".join(text.split()), stated
    assert wp.TABLE_ENTRY_BYTES == 4  # "int32" in the statement
    m = LLAMA_13B
    for stated in (f"{m.name} as in the PagedAttention paper ({m.layers} layers, {m.kv_heads} heads of dimension "
                   f"{m.head_dim}, hidden size {m.hidden}, {8 * m.dtype_bytes}-bit KV cache, about "
                   f"{m.parameters / 1e9:g} billion parameters)",):
        assert stated in " ".join(text.split()), stated
