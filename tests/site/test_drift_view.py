"""Drift on the annotated pages (``docs/hooks/drift_view.py``), on the synthetic upstream file.

``pkg/tiny.py`` at 9.9.9 (notes ``tiny.doc`` L1, ``tiny.add`` L3-L6, ``tiny.box`` L9-L11) is edited
into a "later release" 9.10.0; the drift report is computed by ``annotations.drift`` itself.
"""

from __future__ import annotations

from pathlib import Path

import markdown
import pytest

from annotations import drift
from annotations.model import parse
from docs.hooks import drift_view
from tests.site.synthetic import UPSTREAM_PY

LATER = "9.10.0"
SDISTS = {"9.9.9": {"file": "vllm-9.9.9.tar.gz", "sha256": "a" * 64}, LATER: {"file": "vllm-9.10.0.tar.gz", "sha256": "b" * 64}}
#: tiny.add's return line rewritten; two lines inserted above class Box (tiny.box moves by 2).
LATER_PY = UPSTREAM_PY.replace(b"    return a + b\n", b"    return b + a\n").replace(
    b"class Box:", b"ANSWER = 42\n\nclass Box:")


def _render(text: str) -> str:
    return markdown.Markdown().convert(text)


@pytest.fixture
def setup(annotation_root: Path, fake_upstream):
    """(annotation of pkg/tiny.py, its report, a reader serving both releases)."""
    fake_upstream.files[(LATER, "pkg/tiny.py")] = LATER_PY
    annotation = parse(annotation_root / "v9.9.9" / "pkg" / "tiny.py.md")
    repo = annotation_root.parent
    report = drift.compute([annotation], "9.9.9", LATER, fake_upstream, lambda v: ["pkg/tiny.py"], SDISTS, repo)
    return annotation, report, fake_upstream, repo


def _page(setup):
    annotation, report, reader, repo = setup
    return drift_view.page_drift([report], annotation, UPSTREAM_PY, reader, repo)


def test_each_note_says_what_became_of_its_lines(setup):
    """Catches: a changed note shown as unchanged (or the reverse), or a moved note without its new range."""
    annotation, _, _, _ = setup
    page = _page(setup)
    boxes = {n.id: drift_view.note_html(page, annotation, n, _render) for n in annotation.notes}
    assert "drift-unchanged" in boxes["tiny.doc"] and "unchanged in 9.10.0</span>" in boxes["tiny.doc"]
    assert "drift-changed" in boxes["tiny.add"] and "changed in 9.10.0" in boxes["tiny.add"]
    assert "drift-moved" in boxes["tiny.box"] and "unchanged in 9.10.0 (now" in boxes["tiny.box"]
    assert "L11–L13" in boxes["tiny.box"] and "blob/v9.10.0/pkg/tiny.py#L11-L13" in boxes["tiny.box"]


def test_changed_lines_are_shown_side_by_side_with_the_changed_line_marked(setup):
    """Catches: side-by-side lines taken from the wrong release or the wrong range, or the changed
    line not marked, so a student cannot see what changed."""
    annotation, _, _, _ = setup
    add = annotation.note("tiny.add")
    box = drift_view.note_html(_page(setup), annotation, add, _render)
    old_side, new_side = box.split('class="cmp-side drift-old"')[1].split('class="cmp-side drift-new"')
    assert "a</span> <span class=\"o\">+</span> <span class=\"n\">b" in old_side.replace("\n", "")
    assert "b</span> <span class=\"o\">+</span> <span class=\"n\">a" in new_side.replace("\n", "")
    marked = [row for row in new_side.split('<div class="ann-line') if row.startswith(" drift-mark")]
    assert len(marked) == 1 and ">6</a>" in marked[0]


def test_the_later_text_is_shown_and_a_stale_entry_shows_nothing(setup):
    """Catches: a note's '- later:' explanation not shown, or a badge drawn from a report written for
    other lines of the note (wrong status on the page)."""
    annotation, _, _, _ = setup
    page = _page(setup)
    add = annotation.note("tiny.add")
    add.later["9.10.0"] = "The operands are swapped, see `add`."
    assert "<strong>In 9.10.0:</strong>" in drift_view.note_html(page, annotation, add, _render)
    add.later.clear()
    add.end = 5  # the note was re-ranged after the report was written
    assert drift_view.note_html(page, annotation, add, _render) == ""


def test_the_banner_summary_counts_the_notes_and_lists_uncovered_new_lines(setup):
    """Catches: a per-file summary whose counts disagree with the notes, or new code no note covers hidden."""
    annotation, _, _, _ = setup
    summary = drift_view.file_summary_html(_page(setup), annotation)
    assert "of its notes, 1 unchanged, 1 moved (the same lines at other numbers), 1 changed." in summary
    assert "blob/v9.10.0/pkg/tiny.py#L9" in summary  # ANSWER = 42, between the notes
    assert "vllm-9.10.0.tar.gz" in summary


def test_later_bytes_that_do_not_match_the_report_are_not_shown(setup):
    """Catches: side-by-side lines rendered from bytes other than those the report was computed from."""
    annotation, report, reader, repo = setup
    reader.files[(LATER, "pkg/tiny.py")] = LATER_PY + b"# and more\n"
    page = drift_view.page_drift([report], annotation, UPSTREAM_PY, reader, repo)
    assert page.new_fragments is None and "re-run" in page.problem
    assert "cmp-pair" not in drift_view.note_html(page, annotation, annotation.note("tiny.add"), _render)


def test_a_gone_file_is_said_once_per_page(setup):
    """Catches: a file absent from the later release shown with per-note statuses it cannot have, or
    the same "gone" repeated on every note of the page."""
    annotation, _, reader, repo = setup
    gone = drift.compute([annotation], "9.9.9", LATER, reader, lambda v: [], SDISTS, repo)
    page = drift_view.page_drift([gone], annotation, UPSTREAM_PY, reader, repo)
    assert "all 3 notes of this page are gone there" in drift_view.file_summary_html(page, annotation)
    doc = annotation.note("tiny.doc")
    assert drift_view.note_html(page, annotation, doc, _render) == ""
    doc.later[LATER] = "Its replacement lives elsewhere."
    assert "Its replacement lives elsewhere." in drift_view.note_html(page, annotation, doc, _render)


def test_no_report_no_drift(setup):
    """Catches: drift boxes invented for a release no committed report follows."""
    annotation, _, reader, repo = setup
    assert drift_view.page_drift([], annotation, UPSTREAM_PY, reader, repo) is None
    assert drift_view.note_html(None, annotation, annotation.note("tiny.doc"), _render) == ""
    assert drift_view.file_summary_html(None, annotation) == ""
