"""MkDocs hook: render the worked problems with numbers computed by :mod:`docs.hooks.problems`.

``docs/worked-problems.md`` holds the problem statements and markers such as
``WORKED-PROBLEM:kv-capacity``; this hook replaces each marker with a solution whose every
number is computed at build time, so the page cannot disagree with the tested arithmetic.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

from docs.hooks.page_markers import replace_named_markers
from docs.hooks.problems import (
    GIB,
    KIB,
    LLAMA_13B,
    MIB,
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
from reference.attention.layouts import CLASSIC_BLOCK_SIZES

PAGE = "worked-problems.md"
MARKER = re.compile(r"^WORKED-PROBLEM:(?P<name>[a-z-]+)$", re.MULTILINE)

BLOCK_SIZE = 16
CAPACITY_GIB = 70
GPU_GIB = 80
WINDOW_N = 32 * 1024
WINDOW_W = 4096
SHARED_REQUESTS = 100
SHARED_PREFIX = 500
THROUGHPUT_FLOPS = 300e12  # an assumed sustained throughput, for the prefill time saved
TABLE_ENTRY_BYTES = 4  # one int32 block number
SECTOR_BYTES = 32  # the least a read moves from GPU memory (one sector), assumed


def _n(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def kv_capacity() -> str:
    """Bytes per token and per page of LLaMA-13B, and the pages that fit in 70 GiB."""
    m = LLAMA_13B
    per_token = kv_bytes_per_token(m)
    per_page = kv_bytes_per_page(m, BLOCK_SIZE)
    capacity = CAPACITY_GIB * GIB
    pages = pages_that_fit(capacity, per_page)
    left = capacity - pages * per_page
    weights = weight_bytes(m)
    gpu = GPU_GIB * GIB
    room = gpu - weights
    room_pages = pages_that_fit(room, per_page)
    return f"""\
**Per token.** Every layer stores a key and a value vector for every head:
2 × {m.layers} layers × {m.kv_heads} heads × {m.head_dim} dims × {m.dtype_bytes} bytes
= **{_n(per_token)} bytes** per token.

That is exactly **{per_token / KIB:g} KiB** ({_n(per_token)} / 1024), or {per_token / 1000:g} kB in decimal units.
The problem statement's "819 KiB" mixes the two: 819 is the decimal kilobyte count; in KiB the
answer is {per_token / KIB:g}.

**Per page.** With {BLOCK_SIZE}-token blocks a page holds {BLOCK_SIZE} × {_n(per_token)} =
**{_n(per_page)} bytes = {per_page / MIB:g} MiB** (all {m.layers} layers together; vLLM actually
allocates one such block per layer, {per_page // m.layers:,} bytes each, and the same block id
indexes every layer's cache).

**Pages in {CAPACITY_GIB} GiB.** {CAPACITY_GIB} GiB = {_n(capacity)} bytes;
{_n(capacity)} / {_n(per_page)} = {capacity / per_page:.2f}, so **{_n(pages)} whole pages**
({_n(pages * BLOCK_SIZE)} tokens of context in total), with {left / MIB:.2f} MiB left over —
less than one page.

**The premise is generous.** This model's {m.parameters / 1e9:g} × 10⁹ 16-bit weights alone take
{_n(weights)} bytes = {weights / GIB:.2f} GiB, so an {GPU_GIB} GiB GPU has at most
{room / GIB:.2f} GiB left for the KV cache even before activations: {_n(room_pages)} pages, not
{_n(pages)}. The statement's {CAPACITY_GIB} GiB leaves {GPU_GIB - CAPACITY_GIB} GiB for weights and activations,
enough for at most {parameters_in(gpu - capacity, m.dtype_bytes) / 1e9:.1f} × 10⁹ 16-bit parameters; the
[capacity page](capacity.md) budgets the 13B model's memory with its weights and a reserve.
"""


def sliding_window() -> str:
    """The compute ratio of full versus sliding-window attention, naive and causal-aware."""
    n, w = WINDOW_N, WINDOW_W
    naive = naive_window_ratio(n, w)
    full = full_causal_pairs(n)
    win = window_causal_pairs(n, w)
    causal = causal_window_ratio(n, w)
    return f"""\
**Naive count.** Full attention scores every query against every key: N × N pairs. With a window
each query scores W keys: N × W pairs. The ratio is N / W = {_n(n)} / {_n(w)} = **{naive:g}×**.

**Causal count.** A decoder never scores future keys, so full attention is a triangle: query *i*
(0-based) sees *i* + 1 keys, N(N + 1)/2 = **{_n(full)}** pairs. With a window of W keys (the query's
own key included) query *i* sees min(*i* + 1, W): a triangle of W(W + 1)/2 for the first W queries
and W for each of the other N − W, in total **{_n(win)}** pairs. The ratio is
{_n(full)} / {_n(win)} = **{causal:.2f}×**: {100 / causal:.1f}% of the full causal attention compute
remains, not the {100 / naive:g}% of the naive count.

**Why the two differ.** Causality halves full attention but barely touches the window: only its
first W rows are triangular. The naive {naive:g}× compares a square with a band; the honest comparison is
triangle against band, about {causal:.1f}×. The saving still grows linearly with N: for N ≫ W the
causal ratio tends to N / (2W). A tiled kernel realizes the saving by skipping every key tile that
lies wholly outside the window, so its cost is O(N·W) rather than O(N²); the tiles that straddle
the window's edge are computed and masked.
"""


def prefix_caching() -> str:
    """What 100 requests sharing a 500-token prefix save with prefix caching."""
    m = LLAMA_13B
    s = prefix_caching_saving(m, SHARED_REQUESTS, SHARED_PREFIX, BLOCK_SIZE)
    ideal = prefix_caching_saving(m, SHARED_REQUESTS, SHARED_PREFIX, 1)
    tail = s.prefix_tokens - s.shared_tokens
    return f"""\
**What is shareable.** Prefix caching hashes *full* blocks only (in V0, and in V1 for a model with
one KV-cache group, as LLaMA-13B is). {s.prefix_tokens} tokens in
{s.block_size}-token blocks are {s.shared_tokens // s.block_size} full blocks ({s.shared_tokens} tokens)
plus a partial block of {tail} tokens, which every request computes and stores for itself.
The first request computes the {s.shared_tokens} shared tokens; the other {s.requests - 1} reuse them:
{s.requests - 1} × {s.shared_tokens} = **{_n(s.saved_tokens)} tokens** neither recomputed nor stored again.

**KV memory saved.** {_n(s.saved_tokens)} × {_n(kv_bytes_per_token(m))} bytes =
**{_n(s.saved_kv_bytes)} bytes ≈ {s.saved_kv_bytes / GIB:.2f} GiB**, a saving of memory held at one
time only while all {s.requests} requests are resident together (requests that run one after
another never hold their copies at once). (Were sharing possible at
token granularity the figure would be {ideal.saved_kv_bytes / GIB:.2f} GiB; the block rounding costs
{(ideal.saved_kv_bytes - s.saved_kv_bytes) / GIB:.2f} GiB here.)

**Prefill compute saved.** The weight matrices cost about 2 FLOPs per parameter per token (counting
the input embedding table, a lookup that costs no FLOPs, and the LM head, which prefill runs only at
a request's last position, so this overstates it by a few percent):
2 × {m.parameters:.3g} × {_n(s.saved_tokens)} ≈ **{s.saved_linear_flops:.3e} FLOPs**. Attention over
the shared prefix adds 4 × hidden ({m.hidden}) × layers ({m.layers}) × {_n(full_causal_pairs(s.shared_tokens))}
causal pairs per request, {s.saved_attention_flops:.3e} FLOPs for the {s.requests - 1} requests —
{100 * s.saved_attention_flops / s.saved_linear_flops:.1f}% on top, because a {s.shared_tokens}-token context is
short next to the {m.hidden}-wide projections. At, say, {THROUGHPUT_FLOPS / 1e12:g} TFLOP/s of useful throughput the total is
about {seconds_at(s.saved_linear_flops + s.saved_attention_flops, THROUGHPUT_FLOPS):.1f} s of GPU time not spent.
"""


def lookup_overhead() -> str:
    """The cost of reading the block table during decode, relative to the KV bytes read."""
    m = LLAMA_13B
    overheads = lookup_overheads(m, BLOCK_SIZE, TABLE_ENTRY_BYTES)
    rows = "\n".join(
        f"| {o.assumption} | {o.table_bytes:g} | {_n(o.kv_bytes)} | {100 * o.ratio:.5f}% |" for o in overheads
    )
    worst = max(o.ratio for o in overheads)
    naive = entry_per_token_ratio(m, TABLE_ENTRY_BYTES)
    run = block_run_bytes(m, BLOCK_SIZE)
    sizes = CLASSIC_BLOCK_SIZES
    return f"""\
**Set-up.** During decode, attention reads every cached key and value of the sequence once.
Paging adds one indirection: for every {BLOCK_SIZE}-token block the kernel reads a {TABLE_ENTRY_BYTES}-byte (int32)
physical block number from the block table. Whether that read reaches memory depends on how often
the same entry is re-read, so we count per {BLOCK_SIZE} tokens under four assumptions (LLaMA-13B,
16-bit KV):

| Assumption | Table bytes | KV bytes | Overhead |
| --- | --- | --- | --- |
{rows}

**Reading.** Even the pessimistic row, where every head re-reads the entry in both its key and
value loops, adds {100 * worst:.2f}% counting {TABLE_ENTRY_BYTES}-byte reads (a read moves at least a {SECTOR_BYTES}-byte sector
from memory, so up to {SECTOR_BYTES // TABLE_ENTRY_BYTES} times that where no read is shared); with any reuse the indirection is invisible next to
the KV traffic. The often-quoted "~0.0005%" is one int32 against one token's full KV
({TABLE_ENTRY_BYTES} / {_n(kv_bytes_per_token(m))} = {100 * naive:.5f}%). It forgets that one entry serves {BLOCK_SIZE}
tokens, which alone would make it {BLOCK_SIZE}× smaller, and it silently assumes a single read for
all layers and heads; the kernel's real reuse lies somewhere between the rows above. What paging really costs is not these bytes but the scattered access pattern —
which is why a block holds several tokens ({BLOCK_SIZE} by default; the 0.10.2 CUDA kernels accept
{", ".join(map(str, sizes[:-1]))} or {sizes[-1]}): in their cache layout a {BLOCK_SIZE}-token block is a contiguous {run:,}-byte run per head
for K and another for V ({2 * run:,} bytes together), long enough for coalesced loads.
"""


SOLUTIONS: dict[str, Callable[[], str]] = {
    "kv-capacity": kv_capacity,
    "sliding-window": sliding_window,
    "prefix-caching": prefix_caching,
    "lookup-overhead": lookup_overhead,
}


def render(markdown_text: str) -> str:
    """Replace every ``WORKED-PROBLEM:<name>`` line with its computed solution."""
    return replace_named_markers(markdown_text, MARKER, SOLUTIONS, PAGE, "worked problem")


def on_page_markdown(markdown_text: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Fill in the worked problems page."""
    return render(markdown_text) if page.file.src_uri == PAGE else markdown_text
