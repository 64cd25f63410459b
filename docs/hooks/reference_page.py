"""Lay out one reference module as HTML: real line numbers, code, and its own prose beside it.

The page looks like an annotated upstream page (the same ``.ann`` markup and CSS), but the
prose is the module's: each class, function and method is one segment whose note column holds
its docstring and the comment block directly above it, rendered as Markdown. Lines no symbol
owns (imports, constants between definitions) are plain segments. Every line is shown, docstring
lines included (dimmed), so line ``n`` is always element ``L<n>`` and ``#L<a>-L<b>`` works as on
the upstream pages.

Anchors: a class, function or method is its note (``aside``) with the symbol's canonical dotted
path as id (``reference.blocks.v1.block_pool.BlockPool.touch``) and the symbol's full line range
in ``data-start``/``data-end``; an attribute (constant, dataclass field) is an empty
``span.ann-sym`` at the start of its line, with the same data. ``annotated.js`` highlights the
range of either when the URL names it.

Each symbol also lists the upstream notes that cite it (``ref:``), handed in as :class:`Cite`
values, with links to the note and to the side-by-side comparison. This module knows nothing
about MkDocs: prose arrives as a rendering function and links as URLs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from html import escape

from docs.hooks.code_lines import highlight_lines, split_lines
from docs.hooks.python_source import ModuleSource, Symbol, comment_block_above


@dataclass(frozen=True)
class Cite:
    """An upstream note that names a reference symbol in its ``ref:`` links."""

    version: str
    upstream: str
    note_id: str
    start: int
    end: int
    note_url: str | None  # the note on its annotated page
    compare_url: str | None  # the side-by-side view of the note and the reference
    member: str | None = None  # the attribute cited, when the cite is shown on its owner

    @property
    def range_text(self) -> str:
        return f"L{self.start}" if self.start == self.end else f"L{self.start}–{self.end}"


@dataclass(frozen=True)
class RefSegment:
    """Lines ``start..end`` (inclusive) shown beside ``symbol``'s prose, or plain if None."""

    start: int
    end: int
    symbol: Symbol | None


def prose_symbols(module: ModuleSource) -> list[Symbol]:
    """The symbols that get their own segment and note, in source order: every class, function
    and method, and every attribute with a comment block directly above it (a documented field
    or constant)."""
    lines = split_lines(module.text)
    documented = [s for s in module.symbols.values()
                  if s.kind == "attribute" and comment_block_above(lines, s.start) < s.start]
    return sorted(module.blocks() + documented, key=lambda s: (s.start, -s.end))


def segments(module: ModuleSource) -> list[RefSegment]:
    """Tile the module's lines: the module's own head, one segment per definition, plain gaps."""
    lines = split_lines(module.text)
    total = len(lines)
    starts: list[tuple[int, Symbol]] = []
    for sym in prose_symbols(module):
        start = comment_block_above(lines, sym.start)
        if starts and start <= starts[-1][0]:  # a comment run cannot reach back past the previous start
            start = sym.start
        starts.append((start, sym))
    out: list[RefSegment] = []
    first = starts[0][0] if starts else total + 1
    if first > 1 or total == 0:
        out.append(RefSegment(1, max(1, first - 1) if total else 1, module.symbols[""]))
    for i, (start, sym) in enumerate(starts):
        nxt = starts[i + 1][0] if i + 1 < len(starts) else total + 1
        end = min(nxt - 1, sym.end)
        out.append(RefSegment(start, end, sym))
        if end + 1 <= nxt - 1:
            out.append(RefSegment(end + 1, nxt - 1, None))
    return out


def symbol_anchor(module: ModuleSource, symbol: Symbol) -> str:
    return module.name + (f".{symbol.qualname}" if symbol.qualname else "")


def prose_markdown(module: ModuleSource, symbol: Symbol, seg_start: int) -> str:
    """The Markdown beside a segment: the comment block above the definition, then its docstring."""
    lines = split_lines(module.text)
    comments = [lines[n - 1].strip()[1:] for n in range(seg_start, symbol.start) if lines[n - 1].strip().startswith("#")]
    comments = [c[1:] if c.startswith(" ") else c for c in comments]
    # an indented comment line (a list of upstream places, a continuation) keeps its own line
    comments = [c + "  " if i + 1 < len(comments) and comments[i + 1][:1].isspace() else c
                for i, c in enumerate(comments)]
    parts = ["\n".join(comments)] if comments else []
    if symbol.doc:
        parts.append(symbol.doc)
    return "\n\n".join(parts)


def _cite_html(cite: Cite) -> str:
    where = f"<code>{escape(cite.upstream)}</code> {escape(cite.range_text)}"
    if cite.note_url:
        where = f'<a href="{escape(cite.note_url)}">{where}</a>'
    member = f"<code>{escape(cite.member)}</code> " if cite.member else ""
    compare = (f' · <a class="ann-cmp" href="{escape(cite.compare_url)}">side by side</a>'
               if cite.compare_url else "")
    return (f'<li class="ann-cite">{member}re-implements {where} @ v{escape(cite.version)}, '
            f"note <code>{escape(cite.note_id)}</code>{compare}</li>")


def _code_html(fragments: list[str], start: int, end: int, doc_lines: set[int], attr_anchors: dict[int, str]) -> str:
    rows = []
    for n in range(start, end + 1):
        cls = "ann-line ann-docline" if n in doc_lines else "ann-line"
        rows.append(f'<div class="{cls}" id="L{n}">{attr_anchors.get(n, "")}<a class="ann-ln" href="#L{n}">{n}</a>'
                    f'<span class="ann-src">{fragments[n - 1] or " "}</span></div>')
    return '<section class="ann-code highlight" data-search-exclude>' + "".join(rows) + "</section>"


KIND_LABEL = {"module": "module", "class": "class", "function": "def", "method": "def", "attribute": "attr"}


def render_module(
    module: ModuleSource,
    render_prose: Callable[[str], str],
    cites: dict[str, list[Cite]],
    source_path: str,
) -> str:
    """The module as HTML. ``cites`` maps symbol anchors to the notes that cite them;
    ``render_prose`` turns a docstring's Markdown into HTML."""
    fragments = highlight_lines(module.text, source_path) if module.text else [""]
    doc_lines: set[int] = set()
    for sym in module.symbols.values():
        if sym.doc_start is not None:
            doc_lines.update(range(sym.doc_start, (sym.doc_end or sym.doc_start) + 1))
    attr_anchors: dict[int, str] = {}
    own_note = {s.qualname for s in prose_symbols(module)}
    for sym in module.symbols.values():
        if sym.kind == "attribute" and sym.qualname not in own_note:
            attr_anchors[sym.start] = attr_anchors.get(sym.start, "") + (
                f'<span class="ann-sym" id="{escape(symbol_anchor(module, sym))}" '
                f'data-start="{sym.start}" data-end="{sym.end}"></span>')
    segs = segments(module)
    if not segs or segs[0].symbol is None or segs[0].symbol.kind != "module":
        # the file opens with a definition: the module's anchor is a mark on line 1
        attr_anchors[1] = (f'<span class="ann-sym" id="{escape(module.name)}" data-start="1" data-end="1"></span>'
                           + attr_anchors.get(1, ""))
    out = [f'<div class="ann ann-refsrc" data-module="{escape(module.name)}">']
    for seg in segs:
        code = _code_html(fragments, seg.start, seg.end, doc_lines, attr_anchors)
        if seg.symbol is None:
            out.append(f'<div class="ann-seg ann-plain">{code}</div>')
            continue
        sym = seg.symbol
        anchor = symbol_anchor(module, sym)
        start, end = (sym.doc_start or 1, sym.doc_end or 1) if sym.kind == "module" else (sym.start, sym.end)
        rng = f"#L{start}" if start == end else f"#L{start}-L{end}"
        label = f"L{start}" if start == end else f"L{start}–{end}"
        name = sym.qualname or module.name
        head = (f'<header class="ann-note-head"><a class="ann-note-id" href="#{escape(anchor)}">'
                f'<span class="ann-kind">{KIND_LABEL[sym.kind]}</span> <code>{escape(name)}</code></a> '
                f'<a class="ann-range" href="{rng}">{label}</a></header>')
        body = render_prose(prose_markdown(module, sym, seg.start))
        listed = cites.get(anchor, [])
        cite_html = f'<ul class="ann-links ann-cites">{"".join(_cite_html(c) for c in listed)}</ul>' if listed else ""
        note = (f'<aside class="ann-note ann-prose" id="{escape(anchor)}" data-start="{start}" data-end="{end}">'
                f'{head}<div class="ann-note-body">{body}</div>{cite_html}</aside>')
        out.append(f'<div class="ann-seg ann-annotated">{note}{code}</div>')
    out.append("</div>")
    return "\n".join(out)


def anchor_ids(module: ModuleSource) -> set[str]:
    """Every element id the rendered module carries: ``L1``..``L<n>`` and each symbol's anchor."""
    return {f"L{n}" for n in range(1, module.line_count + 1)} | {symbol_anchor(module, s) for s in module.symbols.values()}


def owner_anchor(module: ModuleSource, symbol: Symbol) -> str:
    """The anchor whose note lists cites of ``symbol``: its own, or its owner's for an attribute."""
    if symbol.kind != "attribute" or symbol in prose_symbols(module):
        return symbol_anchor(module, symbol)
    owner = symbol.qualname.rpartition(".")[0]
    return symbol_anchor(module, module.symbols[owner]) if owner in module.symbols else module.name
