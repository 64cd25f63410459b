"""Lay out one annotated upstream file as HTML: real line numbers, code, and our notes beside it.

The page is a sequence of *segments* that tile the file from line 1 to the last line: a note's
range is one segment, and every stretch of lines no note covers is a plain segment. Each segment
is a small two-column grid (code, note) on wide screens and a single column (note, then code) on
narrow ones, so a note always sits next to exactly the lines it explains.

Anchors never depend on anything but the upstream file and the note itself: line ``n`` is element
``L<n>``, a note is the element whose id is the note id (dots included; the JavaScript uses
``CSS.escape``), and a range ``#L120-L140`` is resolved by ``docs/assets/annotated.js``.

Each note's head has a "cite" control carrying the note's citation in Markdown and plain text
(``annotations.cite``: release, file, range, note id, content hash, links), and each line carries
its content hash, which the page's script puts into the page's one line-citation template when the
line is cited. The script only copies what was built here; it computes no hash.

This module knows nothing about MkDocs: links to other pages arrive through a
:class:`LinkResolver`, and note bodies arrive already rendered, so it can be unit-tested alone.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from html import escape
from typing import Protocol

from annotations import cite
from annotations.model import AnnotationFile, Note, is_blank, range_hash, upstream_lines
from docs.hooks.code_lines import highlight_lines
from upstream.releases import V0_RELEASE, V1_RELEASE

UPSTREAM_REPO = "https://github.com/vllm-project/vllm"

#: Upstream paths of v0.10.2 that belong to the V0 engine and are absent from later releases
#: (v0.33.0 has no ``vllm/core/`` and none of these files).
V0_ENGINE_PREFIXES = ("vllm/core/", "vllm/attention/backends/", "vllm/attention/ops/paged_attn.py")
#: The CUDA paged-attention kernel sources of v0.10.2, all absent from the v0.33.0 source tree.
CUDA_KERNEL_PREFIXES = (
    "csrc/attention/paged_attention_",
    "csrc/attention/attention_",
    "csrc/attention/dtype_",
)


class AnnotatedSourceError(RuntimeError):
    """An annotation cannot be placed on its upstream file (wrong bytes, impossible ranges)."""


class LinkResolver(Protocol):
    """Where a note's links point, as seen from the page being rendered."""

    def ref(self, symbol: str) -> str:
        """HTML for a link to a ``reference`` symbol's lines on its source page."""

    def compare(self, note_id: str) -> str | None:
        """URL of the note on its side-by-side comparison page, or None if there is none."""

    def prop_result(self, name: str) -> str | None:
        """What the newest conformance report of the note's release says of property ``name``."""

    def prop(self, name: str) -> str | None:
        """URL of a conformance property's anchor, or None if the property is unknown."""

    def see(self, target: str) -> str | None:
        """URL of another note (``v<version>/<path>#<id>``), or None if it does not exist."""


@dataclass(frozen=True)
class Segment:
    """Lines ``start..end`` (1-based, inclusive), explained by ``note`` or, if None, by nothing."""

    start: int
    end: int
    note: Note | None


def page_src_uri(version: str, upstream: str) -> str:
    """The site path of the generated page, e.g. ``sources/v0.10.2/vllm/core/block_manager.py.md``."""
    return f"sources/v{version}/{upstream}.md"


def upstream_url(version: str, path: str, start: int | None = None, end: int | None = None) -> str:
    """The same file (and lines) on GitHub at the pinned release tag."""
    url = f"{UPSTREAM_REPO}/blob/v{version}/{path}"
    if start is not None:
        url += f"#L{start}" if end is None or end == start else f"#L{start}-L{end}"
    return url


def verify_upstream(annotation: AnnotationFile, data: bytes) -> None:
    """Refuse bytes that are not the file the annotation was written for."""
    actual = hashlib.sha256(data).hexdigest()
    if actual != annotation.sha256:
        raise AnnotatedSourceError(
            f"{annotation.path}: upstream {annotation.upstream} at {annotation.version} has sha256 "
            f"{actual}, but the annotation header says {annotation.sha256}; "
            "the notes were written for other bytes (run `python -m annotations check`)"
        )


def segments(notes: list[Note], line_count: int, where: str = "annotation") -> list[Segment]:
    """Tile lines 1..line_count with the notes' ranges and plain gaps, in order.

    Notes must be ascending, non-overlapping and inside the file; anything else has no faithful
    layout, so it raises :class:`AnnotatedSourceError` naming the note.
    """
    out: list[Segment] = []
    line = 1
    for note in notes:
        if note.end > line_count:
            raise AnnotatedSourceError(
                f"{where}: note `{note.id}` {note.range_text} ends after the file's last line {line_count}"
            )
        if note.start < line:
            raise AnnotatedSourceError(
                f"{where}: note `{note.id}` {note.range_text} overlaps or precedes the note before it"
            )
        if note.start > line:
            out.append(Segment(line, note.start - 1, None))
        out.append(Segment(note.start, note.end, note))
        line = note.end + 1
    if line <= line_count:
        out.append(Segment(line, line_count, None))
    return out


def stale_notes(annotation: AnnotationFile, data: bytes) -> list[Note]:
    """Notes whose hash no longer matches the lines they cover (their prose may have drifted)."""
    lines = upstream_lines(data)
    return [n for n in annotation.notes if n.end <= len(lines) and range_hash(lines, n.start, n.end) != n.hash]


def coverage_percent(annotation: AnnotationFile, data: bytes) -> float:
    """Share of non-blank upstream lines that lie inside some note, in percent."""
    lines = upstream_lines(data)
    nonblank = [i for i, line in enumerate(lines, 1) if not is_blank(line)]
    if not nonblank:
        return 100.0
    covered = sum(1 for i in nonblank if any(n.start <= i <= n.end for n in annotation.notes))
    return 100.0 * covered / len(nonblank)


def status_text(version: str, path: str) -> str:
    """What became of this upstream file after the pinned release, in careful, checkable words."""
    if version == V0_RELEASE and path.startswith(V0_ENGINE_PREFIXES):
        return (
            f"This is V0 engine code. Later releases removed the V0 engine: the v{V1_RELEASE} source tree "
            "has no <code>vllm/core/</code> and no V0 attention backends; KV-cache management lives "
            "in <code>vllm/v1/core/</code> there."
        )
    if version == V0_RELEASE and path.startswith(CUDA_KERNEL_PREFIXES):
        return (
            "This is the CUDA paged-attention kernel code that V0-era attention backends called. "
            "In this same release the V1 engine's GPU backends already computed attention with "
            "other kernels (FlashAttention, FlashInfer, Triton), and these files are no longer in "
            f"the v{V1_RELEASE} source tree."
        )
    if version == V0_RELEASE:
        return f"This is the older pinned release; the file may differ in v{V1_RELEASE}."
    return "This is the newer pinned release, with the V1 engine only."


def banner_html(annotation: AnnotationFile, data: bytes, stale: list[Note]) -> str:
    """The box at the top of the page: release, commit, status, coverage and the upstream link."""
    covered = coverage_percent(annotation, data)
    parts = [
        '<div class="ann-banner admonition info">',
        f'<p class="admonition-title">vLLM v{escape(annotation.version)} · commit '
        f"<code>{escape(annotation.commit)}</code> · <code>{escape(annotation.upstream)}</code></p>",
        f"<p>{status_text(annotation.version, annotation.upstream)}</p>",
        f"<p>{len(annotation.notes)} notes cover {covered:.1f}% of the non-blank lines "
        f"(target {annotation.coverage:g}%). The code below is the exact upstream file "
        f"(sha256 <code>{annotation.sha256[:16]}…</code>), fetched and verified at build time. "
        f'<a class="ann-upstream" href="{escape(upstream_url(annotation.version, annotation.upstream))}">'
        "View the file upstream at the pinned tag</a>.</p>",
    ]
    if stale:
        ids = ", ".join(f"<code>{escape(n.id)}</code>" for n in stale)
        parts.append(f'<p class="ann-stale-list">Notes whose lines changed since they were written: {ids}.</p>')
    parts.append("</div>")
    return "\n".join(parts)


#: Upstream license-marker text, broken by an invisible ``<wbr>`` when rendered: the page shows and
#: copies the exact upstream text, but no built file contains the marker line verbatim (the
#: project never writes vLLM's SPDX header into any file, generated ones included).
LICENSE_MARKER = "SPDX-FileCopyrightText"


def _code_html(fragments: list[str], start: int, end: int, line_hashes: list[str]) -> str:
    # data-h: the line's content hash, which the line's "cite" control puts into the page's
    # citation template (data-cite-line-md / data-cite-line-plain on the .ann container).
    rows = [
        f'<div class="ann-line" id="L{n}"><a class="ann-ln" href="#L{n}" data-h="{line_hashes[n - 1]}">{n}</a>'
        f'<span class="ann-src">{fragments[n - 1].replace(LICENSE_MARKER, "SPDX-<wbr>FileCopyrightText") or " "}'
        "</span></div>"
        for n in range(start, end + 1)
    ]
    # Code is left out of the search index (data-search-exclude): searching finds notes, not
    # thousands of upstream lines, and the index stays small. The container is a <section>, not a
    # <div>: the search indexer matches end tags by name, so the first nested </div> would end
    # the exclusion early.
    return '<section class="ann-code highlight" data-search-exclude>' + "".join(rows) + "</section>"


def cite_button(markdown: str, plain: str, what: str) -> str:
    """The "cite" control: both forms of the citation, built here, for the page's script to copy."""
    return (f'<button type="button" class="ann-cite" data-cite-md="{escape(markdown)}" '
            f'data-cite-plain="{escape(plain)}" title="copy a citation of {escape(what)}">cite</button>')


def _note_html(
    annotation: AnnotationFile, note: Note, body_html: str, links: LinkResolver, stale: bool, site_url: str
) -> str:
    rng = f"#L{note.start}" if note.start == note.end else f"#L{note.start}-L{note.end}"
    label = note.range_text.replace("-", "–")
    cited = cite.note_citation(annotation, note)
    head = (
        f'<header class="ann-note-head"><a class="ann-note-id" href="#{escape(note.id)}">'
        f"<code>{escape(note.id)}</code></a> "
        f'<a class="ann-range" href="{rng}">{label}</a> '
        f'<a class="ann-upstream" href="{escape(upstream_url(annotation.version, annotation.upstream, note.start, note.end))}"'
        ' title="these lines upstream at the pinned tag">upstream ↗</a> '
        + cite_button(cited.markdown(site_url), cited.plain(site_url), f"note {note.id}")
        + "</header>"
    )
    items: list[str] = []
    for symbol in note.refs:
        items.append(f'<li class="ann-ref">Reference: {links.ref(symbol)}</li>')
    compare = links.compare(note.id) if note.refs else None
    if compare:
        items.append(f'<li class="ann-cmp">Side by side: <a href="{escape(compare)}">these lines beside the reference code</a></li>')
    for name in note.props:
        url = links.prop(name)
        code = f"<code>{escape(name)}</code>"
        result = links.prop_result(name)
        items.append(
            '<li class="ann-prop">Conformance: ' + (f'<a href="{escape(url)}">{code}</a>' if url else code)
            + (f' <span class="ann-prop-result">· {escape(result)}</span>' if result else "") + "</li>"
        )
    for target in note.sees:
        url = links.see(target)
        cited_file, _, cited_id = target.partition("#")
        version, _, cited_path = cited_file.partition("/")
        where = cited_path.rsplit("/", 1)[-1] + ("" if version == f"v{annotation.version}" else f" @ {version}")
        code = f'<code title="{escape(target)}">{escape(where)} · {escape(cited_id)}</code>'
        items.append('<li class="ann-see">See: ' + (f'<a href="{escape(url)}">{code}</a>' if url else code) + "</li>")
    stale_html = (
        '<p class="ann-stale">These lines changed since the note was written; read it with care.</p>'
        if stale
        else ""
    )
    links_html = f'<ul class="ann-links">{"".join(items)}</ul>' if items else ""
    return (
        f'<aside class="ann-note" id="{escape(note.id)}" data-start="{note.start}" data-end="{note.end}">'
        f'{head}{stale_html}<div class="ann-note-body">{body_html}</div>{links_html}</aside>'
    )


def render_source(
    annotation: AnnotationFile,
    data: bytes,
    note_bodies: dict[str, str],
    links: LinkResolver,
    site_url: str | None = None,
) -> str:
    """The annotated code as HTML: every upstream line once, in order, each note beside its lines.

    ``note_bodies`` maps note id to its body already rendered as HTML. Citations link to
    ``site_url`` (default: ``mkdocs.yml``'s ``site_url``).
    """
    site = site_url or cite.site_url()
    text = data.decode("utf-8")
    fragments = highlight_lines(text, annotation.upstream)
    hashes = cite.line_hashes(data)
    stale = {n.id for n in stale_notes(annotation, data)}
    line_md, line_plain = cite.line_templates(annotation, site)
    out = [f'<div class="ann" data-version="{escape(annotation.version)}" data-path="{escape(annotation.upstream)}" '
           f'data-cite-line-md="{escape(line_md)}" data-cite-line-plain="{escape(line_plain)}">']
    for seg in segments(annotation.notes, len(fragments), str(annotation.path)):
        code = _code_html(fragments, seg.start, seg.end, hashes)
        if seg.note is None:
            out.append(f'<div class="ann-seg ann-plain">{code}</div>')
        else:
            note = _note_html(annotation, seg.note, note_bodies.get(seg.note.id, ""), links, seg.note.id in stale, site)
            out.append(f'<div class="ann-seg ann-annotated">{note}{code}</div>')
    out.append("</div>")
    return "\n".join(out)


def anchor_ids(annotation: AnnotationFile, line_count: int) -> set[str]:
    """Every element id the rendered code carries: ``L1``..``L<n>`` and each note id."""
    return {f"L{n}" for n in range(1, line_count + 1)} | {n.id for n in annotation.notes}
