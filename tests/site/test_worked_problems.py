"""The worked problems' arithmetic, checked against definitions and brute-force counts."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from docs.hooks import worked_problems as wp
from docs.hooks.problems import (
    GIB,
    KIB,
    LLAMA_13B,
    MIB,
    Model,
    causal_window_ratio,
    full_causal_pairs,
    kv_bytes_per_page,
    kv_bytes_per_token,
    lookup_overheads,
    naive_window_ratio,
    pages_that_fit,
    prefix_caching_saving,
    window_causal_pairs,
)


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
    text = (wp.__file__.rsplit("/hooks/", 1)[0] + "/worked-problems.md")
    names = re.findall(r"^WORKED-PROBLEM:([a-z-]+)$", open(text, encoding="utf-8").read(), re.M)
    assert names and set(names) <= set(wp.SOLUTIONS)
