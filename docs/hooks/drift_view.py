"""Drift on the annotated pages: what became of each note's lines in the newest release followed.

The committed drift reports (``annotations/drift/*.json``, written by ``python -m annotations
drift``) hold line numbers, hashes and statuses only. Here each note of a page gets a small box
("unchanged in 0.34.0 (now L120–L140)", "changed in 0.34.0" with the old and new lines side by side,
"gone in 0.34.0"), plus its ``- later:`` text, and the page banner gets a per-file summary. The
later release's lines are read at build time through the same verified fetcher as the page's own
code and checked against the sha256 the report recorded; a report that no longer fits a note (its
range or hash changed since the report was written) shows nothing for that note rather than
something wrong.

This module knows nothing about MkDocs: bytes arrive through a reader and Markdown through a
render function, so it can be unit-tested alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from pathlib import Path

from annotations import drift
from annotations.model import AnnotationFile, Note
from docs.hooks.code_lines import highlight_lines
from docs.hooks.source_page import upstream_url

Reader = Callable[[str, str], bytes]
Render = Callable[[str], str]  # Markdown -> HTML
#: Rows shown per side of a changed note before the rest is left to the upstream link.
MAX_SIDE_LINES = 120


@dataclass(frozen=True)
class PageDrift:
    """One annotated page's file in the newest release its pinned release is followed into."""

    report: drift.DriftReport
    file: drift.FileDrift
    old_fragments: list[str]  # highlighted lines of the pinned file, line n = [n - 1]
    new_fragments: list[str] | None  # the same for the later release (None: gone, or not needed)
    problem: str | None = None  # why the later lines could not be shown, if they could not

    @property
    def to_version(self) -> str:
        return self.report.to_version

    def note(self, note: Note) -> drift.NoteDrift | None:
        """The note's entry, only if the report was written for its current range and hash."""
        found = self.file.note(note.id)
        if found is None or (found.old_start, found.old_end, found.old_hash) != (note.start, note.end, note.hash):
            return None
        return found


def load_reports(root: Path = drift.DRIFT_ROOT) -> list[drift.DriftReport]:
    """Every committed report (a malformed one raises :class:`annotations.drift.DriftError`)."""
    return [drift.load(path) for path in drift.committed_reports(root)]


def report_for(reports: list[drift.DriftReport], annotation: AnnotationFile, repo: Path) -> tuple[drift.DriftReport, drift.FileDrift] | None:
    """The newest report that follows this annotation's release, and the annotation's file in it."""
    rel = drift.relative_path(annotation.path, repo)
    found = [(r, r.file(rel)) for r in reports if r.from_version == annotation.version and r.file(rel) is not None]
    if not found:
        return None
    return max(found, key=lambda pair: drift.version_key(pair[0].to_version))


def page_drift(reports: list[drift.DriftReport], annotation: AnnotationFile, data: bytes, reader: Reader,
               repo: Path) -> PageDrift | None:
    """The drift of one page, with the later release's lines fetched when some note changed."""
    found = report_for(reports, annotation, repo)
    if found is None:
        return None
    report, file = found
    old = highlight_lines(data.decode("utf-8"), annotation.upstream)
    if not any(n.status == "changed" for n in file.notes):
        return PageDrift(report, file, old, None)
    try:
        new_data = reader(report.to_version, annotation.upstream)
    except Exception as err:  # noqa: BLE001 (no later bytes: the badges still stand, the lines do not)
        return PageDrift(report, file, old, None, f"cannot read {annotation.upstream} at {report.to_version}: {err}")
    actual = hashlib.sha256(new_data).hexdigest()
    if actual != file.new_sha256:
        return PageDrift(report, file, old, None, f"{annotation.upstream} at {report.to_version} has sha256 {actual}, "
                         f"but the drift report recorded {file.new_sha256}; re-run `python -m annotations drift`")
    return PageDrift(report, file, old, highlight_lines(new_data.decode("utf-8"), annotation.upstream))


def _inline(html: str) -> str:
    """Rendered Markdown of one paragraph without its ``<p>``, so it runs on after a label."""
    html = html.strip()
    if html.startswith("<p>") and html.endswith("</p>") and html.count("<p>") == 1:
        return html[3:-4]
    return html


def _range_label(start: int, end: int) -> str:
    return f"L{start}" if start == end else f"L{start}–L{end}"


def _lines_link(version: str, path: str, start: int, end: int) -> str:
    return (f'<a href="{escape(upstream_url(version, path, start, end))}" '
            f'title="these lines upstream at v{escape(version)}">{_range_label(start, end)}</a>')


def _side(title: str, fragments: list[str], start: int, end: int, marked: set[int], line_url: Callable[[int], str],
          kind: str) -> str:
    shown = range(start, min(end, start + MAX_SIDE_LINES - 1) + 1)
    rows = "".join(
        f'<div class="ann-line{" drift-mark" if n in marked else ""}"><a class="ann-ln" href="{escape(line_url(n))}">{n}</a>'
        f'<span class="ann-src">{fragments[n - 1].replace("SPDX-FileCopyrightText", "SPDX-<wbr>FileCopyrightText") or " "}'
        "</span></div>"
        for n in shown
    )
    more = end - shown[-1] if shown else 0
    tail = f'<p class="drift-more">{more} more lines: follow the range link above.</p>' if more > 0 else ""
    return (f'<div class="cmp-side drift-{kind}"><header class="cmp-head">{title}</header>'
            f'<section class="ann-code highlight" data-search-exclude>{rows}</section>{tail}</div>')


def side_by_side_html(page: PageDrift, annotation: AnnotationFile, entry: drift.NoteDrift) -> str:
    """The old lines beside the new ones, the changed ones marked (empty if the new lines are unavailable)."""
    if page.new_fragments is None or entry.new_start is None or entry.new_end is None:
        return ""
    old_marked = {n for h in entry.hunks for n in range(h.old_start, h.old_end + 1)}
    new_marked = {n for h in entry.hunks for n in range(h.new_start, h.new_end + 1)}
    path, to = annotation.upstream, page.to_version
    old = _side(f"v{escape(annotation.version)} {_range_label(entry.old_start, entry.old_end)}", page.old_fragments,
                entry.old_start, entry.old_end, old_marked, lambda n: f"#L{n}", "old")
    new = _side(f"v{escape(to)} {_lines_link(to, path, entry.new_start, entry.new_end)}", page.new_fragments,
                entry.new_start, entry.new_end, new_marked, lambda n: upstream_url(to, path, n), "new")
    return (f'<details class="drift-lines"><summary>the changed lines side by side '
            f'({len(old_marked)} old, {len(new_marked)} new)</summary><div class="cmp-pair">{old}{new}</div></details>')


def note_html(page: PageDrift | None, annotation: AnnotationFile, note: Note, render: Render) -> str:
    """The note's drift box: its status in the later release, its ``- later:`` text, the changed lines."""
    if page is None:
        return ""
    entry = page.note(note)
    to = page.to_version
    later = note.later.get(to)
    later_html = f'<div class="drift-later"><strong>In {escape(to)}:</strong> {_inline(render(later))}</div>' if later else ""
    if page.file.status == "gone":  # said once, in the banner; a note adds only its own later text
        return f'<div class="drift drift-gone">{later_html}</div>\n' if later else ""
    if entry is None:
        return ""
    label = {
        "unchanged": f"unchanged in {escape(to)}",
        "moved": f"unchanged in {escape(to)} (now {_lines_link(to, annotation.upstream, entry.new_start or 0, entry.new_end or 0)})",
        "changed": f"changed in {escape(to)}" + (
            f" (now {_lines_link(to, annotation.upstream, entry.new_start, entry.new_end)})" if entry.new_start else ""),
        "gone": f"gone in {escape(to)}: no line of it remains",
    }[entry.status]
    lines = side_by_side_html(page, annotation, entry) if entry.status == "changed" else ""
    return (f'<div class="drift drift-{entry.status}"><span class="drift-label">{label}</span>'
            f"{later_html}{lines}</div>\n")


def file_summary_html(page: PageDrift | None, annotation: AnnotationFile) -> str:
    """The banner's line about the file in the later release."""
    if page is None:
        return ""
    to, file = page.to_version, page.file
    sdist = page.report.sdists.get(to, {})
    source = (f'(sdist <code>{escape(sdist.get("file", "?"))}</code>, sha256 '
              f'<code>{escape(sdist.get("sha256", "?")[:16])}…</code>)')
    head = f'<div class="drift-summary admonition note"><p class="admonition-title">In vLLM {escape(to)}</p>'
    if file.status == "gone":
        return (f"{head}<p>The {escape(to)} release {source} has no <code>{escape(annotation.upstream)}</code>:"
                f" all {file.gone_notes} notes of this page are gone there.</p></div>\n")
    counts = file.counts()
    said = {"moved": "moved (the same lines at other numbers)"}
    parts = ", ".join(f"{counts[s]} {said.get(s, s)}" for s in drift.STATUSES if counts[s])
    what = "unchanged (the same bytes)" if file.status == "unchanged" else "changed"
    uncovered = ""
    if file.uncovered and file.status == "changed":
        spans = ", ".join(_lines_link(to, annotation.upstream, a, b) for a, b in file.uncovered[:12])
        extra = f" and {len(file.uncovered) - 12} more" if len(file.uncovered) > 12 else ""
        uncovered = f" Lines there that no note's lines became: {spans}{extra}."
    problem = f' <span class="drift-problem">{escape(page.problem)}</span>' if page.problem else ""
    return (f"{head}<p>In the {escape(to)} release {source} this file is {what}: of its notes, {parts}."
            f"{uncovered}{problem} Each note says what became of its lines.</p></div>\n")
