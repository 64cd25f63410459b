"""MkDocs hook: the seed demo's figures, drawn at build time from the reference's own results.

``docs/seed-demo.md`` carries markers (``SEED-FIGURE:placement``, ``SEED-FIGURE:workload``);
this hook runs the experiments in :mod:`docs.hooks.seed_data` and replaces each marker with
inline SVG and the numbers the reference computed. If the reference changes behaviour, the
figures change with it.
"""

from __future__ import annotations

import re

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

from docs.hooks.page_markers import replace_named_markers
from docs.hooks.seed_data import (
    DEMO_BLOCK_SIZE,
    DEMO_NUM_BLOCKS,
    WORKLOAD_BLOCKS,
    PlacementResult,
    Stage,
    placement_demo,
    workload_stages,
)
from docs.hooks.svg import FILL, Canvas

PAGE = "seed-demo.md"
MARKER = re.compile(r"^SEED-FIGURE:(?P<name>[a-z-]+)$", re.MULTILINE)

#: The seed's placement (logical blocks 0, 1 in physical 4, 1) and another one.
PLACEMENTS = ([4, 1], [2, 7])


def _fmt(x: float) -> str:
    return f"{x:g}"


def placement_svg(result: PlacementResult, key: str) -> str:
    """Logical blocks of the sequence, the physical pool, and where each logical block lives."""
    bs = DEMO_BLOCK_SIZE
    c = Canvas(620, 250, f"Block table {result.table}: logical blocks mapped to physical blocks", key)
    c.text(10, 22, f"block table = {result.table}", 14, anchor="start", bold=True)
    slot_w, top = 30, 40
    for logical, _physical in enumerate(result.table):
        x0 = 40 + logical * (bs * slot_w + 40)
        c.text(x0 + bs * slot_w / 2, top - 4, f"logical block {logical}", 11, cls="muted")
        for s in range(bs):
            pos = logical * bs + s
            filled = pos < len(result.values)
            c.rect(x0 + s * slot_w, top, slot_w, 30, FILL["logical"] if filled else FILL["free"], dash=not filled)
            if filled:
                c.text(x0 + s * slot_w + slot_w / 2, top + 20, _fmt(result.values[pos]), 13, on_fill=True)
    pool_y, bw, gap = 150, 64, 9
    c.text(10, pool_y - 14, "physical blocks (the KV cache pool)", 11, anchor="start", cls="muted")
    owner = {phys: logical for logical, phys in enumerate(result.table)}
    for b in range(DEMO_NUM_BLOCKS):
        x = 10 + b * (bw + gap)
        logical = owner.get(b)
        for s in range(bs):
            pos = None if logical is None else logical * bs + s
            filled = pos is not None and pos < len(result.values)
            c.rect(x + s * bw / bs, pool_y, bw / bs, 30, FILL["used"] if filled else FILL["free"])
            if filled:
                c.text(x + s * bw / bs + bw / bs / 2, pool_y + 20, _fmt(result.values[pos]), 11, on_fill=True)
        c.text(x + bw / 2, pool_y + 46, str(b), 12, bold=logical is not None)
        if logical is not None:
            lx = 40 + logical * (bs * slot_w + 40) + bs * slot_w / 2
            c.arrow(lx, top + 32, x + bw / 2, pool_y - 4)
    outs = ", ".join(f"{n} tokens → {_fmt(v)}" for n, v in sorted(result.output_by_length.items()))
    c.rect(10, 212, 600, 28, FILL["result"])
    c.text(20, 231, f"attention output (oracle): {outs}", 13, anchor="start", on_fill=True)
    return c.render()


def _legend(key: str) -> str:
    items = [("free", "free"), ("used", "held by one table"), ("shared", "shared (ref count > 1)"),
             ("cow", "copy made by copy-on-write"), ("cached", "cached, evictable"),
             ("evicted", "evicted and reused")]
    c = Canvas(620, 78, "Legend of the block-table figures", key)
    for i, (fill, label) in enumerate(items):
        x, y = 10 + (i % 3) * 205, 8 + (i // 3) * 24
        c.rect(x, y, 16, 16, FILL[fill])
        c.text(x + 22, y + 13, label, 12, anchor="start")
    c.text(10, 70, "Yellow boxes: a sequence's block table, logical order. '#': the block's content hash "
           "is registered in the prefix cache.", 11, anchor="start", cls="muted")
    return c.render()


def stage_svg(stage: Stage, index: int, key: str) -> str:
    """One step of the workload: each sequence's block table and the physical pool."""
    rows = list(stage.tables.items())
    row_h, pool_bw, gap = 34, 66, 9
    pool_y = 40 + max(1, len(rows)) * row_h + 40
    c = Canvas(620, pool_y + 44, f"Step {index}: {stage.caption}", key)
    c.text(10, 20, f"step {index}", 13, anchor="start", bold=True)
    copies = {dst for _, dst in stage.cow}
    pool_x = {b: 10 + b * (pool_bw + gap) for b in range(WORKLOAD_BLOCKS)}
    for r, (label, ids) in enumerate(rows):
        y = 40 + r * row_h
        c.text(30, y + 18, f"{label}:", 13, anchor="end", bold=True)
        for i, block in enumerate(ids):
            x = 40 + i * 48 + r * 8
            c.rect(x, y, 40, 24, FILL["logical"])
            c.text(x + 20, y + 17, str(block), 12, on_fill=True)
            c.arrow(x + 20, y + 25, pool_x[block] + pool_bw / 2, pool_y - 4)
    if not rows:
        c.text(40, 58, "(no live sequences)", 12, anchor="start", cls="muted")
    for b, x in pool_x.items():
        rc = stage.refcounts.get(b, 0)
        if b in stage.evicted:
            fill = "evicted"
        elif b in copies:
            fill = "cow"
        elif rc > 1:
            fill = "shared"
        elif rc == 1:
            fill = "used"
        elif b in stage.evictable:
            fill = "cached"
        else:
            fill = "free"
        c.rect(x, pool_y, pool_bw, 34, FILL[fill])
        c.text(x + pool_bw / 2, pool_y + 14, f"block {b}", 11, on_fill=True, bold=True)
        status = f"ref {rc}" if rc else ("cached" if b in stage.evictable else "free")
        if b in stage.cached and rc:
            status += " · #"
        c.text(x + pool_bw / 2, pool_y + 28, status, 10, on_fill=True)
    return c.render()


def placement_section() -> str:
    """Figures and numbers for the two placements of the seed's 5-token sequence."""
    results = [placement_demo(t) for t in PLACEMENTS]
    figs = "\n".join(f'<div class="fig-svg">{placement_svg(r, f"place{i}")}</div>' for i, r in enumerate(results))
    rows = "\n".join(
        f"| `{r.table}` | {_fmt(r.output_by_length[4])} | {_fmt(r.output_by_length[5])} |" for r in results
    )
    return f"{figs}\n\n| Block table | Output after 4 tokens | Output after 5 tokens |\n| --- | --- | --- |\n{rows}\n"


def workload_section() -> str:
    """The legend and one figure per step of the shared-prefix / CoW / eviction workload."""
    parts = [f'<div class="fig-svg">{_legend("legend")}</div>']
    for i, stage in enumerate(workload_stages(), 1):
        parts.append(f'<div class="fig-svg">{stage_svg(stage, i, f"stage{i}")}</div>')
        facts = [f"block tables {stage.tables}" if stage.tables else "no block tables"]
        if stage.cow:
            facts.append(f"copy-on-write pairs (source → copy) {stage.cow}")
        if stage.evicted:
            facts.append(f"evicted {stage.evicted}")
        facts.append(f"free list {stage.free}")
        parts.append(f"*Step {i}.* {stage.caption} Manager state: " + "; ".join(facts) + ".\n")
    return "\n\n".join(parts) + "\n"


SECTIONS = {"placement": placement_section, "workload": workload_section}


def render(markdown_text: str) -> str:
    """Replace each ``SEED-FIGURE:<name>`` line with its figures."""
    return replace_named_markers(markdown_text, MARKER, SECTIONS, PAGE, "figure")


def on_page_markdown(markdown_text: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Draw the seed demo's figures."""
    return render(markdown_text) if page.file.src_uri == PAGE else markdown_text
