"""The side-by-side view: an upstream note's lines next to the reference code that re-implements them.

One page per annotated upstream file that has notes with ``ref:`` links. Each such note is a
section (its id is the note id, so ``compare/.../block_manager.py/#block_manager.allocate`` is
citable); inside, one pair per cited symbol: the upstream lines on the left and the reference
symbol's lines on the right on wide screens, stacked (upstream first) on narrow ones. Line
numbers link to the same line on the full page of each side.

This module knows nothing about MkDocs: code arrives as highlighted per-line fragments and all
links as URLs.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape


def compare_src_uri(version: str, upstream_path: str) -> str:
    """The comparison page of an annotated file: ``compare/v0.10.2/vllm/core/block_manager.py.md``."""
    return f"compare/v{version}/{upstream_path}.md"


@dataclass(frozen=True)
class Side:
    """One column: a title, the page the lines belong to, and the lines themselves."""

    title_html: str
    page_url: str  # the full page of this file (line links are page_url + "#L<n>")
    fragments: list[str]  # highlighted fragments of the *whole* file, line n = fragments[n - 1]
    start: int
    end: int


@dataclass(frozen=True)
class Pair:
    upstream: Side
    reference: Side


def side_html(side: Side, kind: str) -> str:
    rows = "".join(
        f'<div class="ann-line"><a class="ann-ln" href="{escape(side.page_url)}#L{n}">{n}</a>'
        f'<span class="ann-src">{side.fragments[n - 1] or " "}</span></div>'
        for n in range(side.start, side.end + 1)
    )
    return (f'<div class="cmp-side cmp-{kind}"><header class="cmp-head">{side.title_html}</header>'
            f'<section class="ann-code highlight" data-search-exclude>{rows}</section></div>')


def section_html(note_id: str, head_html: str, pairs: list[Pair]) -> str:
    """One note's comparison: its head, then one upstream/reference pair per cited symbol."""
    body = "".join(
        f'<div class="cmp-pair">{side_html(p.upstream, "upstream")}{side_html(p.reference, "reference")}</div>'
        for p in pairs
    )
    return (f'<section class="cmp" id="{escape(note_id)}"><header class="cmp-note">{head_html}</header>'
            f"{body}</section>")
