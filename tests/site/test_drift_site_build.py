"""The drift view through MkDocs itself: a committed report beside synthetic annotations, built strict.

``pkg/tiny.py`` at 9.9.9 is followed into a "later release" 9.10.0 whose bytes the fake reader
serves; the report is written by ``annotations.drift`` into the annotations root's ``drift/``.
"""

from __future__ import annotations

import pytest
from mkdocs.exceptions import Abort

from annotations import drift
from annotations.model import parse
from tests.site.test_drift_view import LATER, LATER_PY, SDISTS
from tests.site.test_site_build import make_project, run_build


def _commit_report(annotation_root, fake_upstream):
    fake_upstream.files[(LATER, "pkg/tiny.py")] = LATER_PY
    annotations = [parse(p) for p in sorted(annotation_root.glob("v*/**/*.md"))]
    report = drift.compute(annotations, "9.9.9", LATER, fake_upstream, lambda v: ["pkg/tiny.py"], SDISTS,
                           annotation_root.parent)
    (annotation_root / "drift").mkdir()
    drift.report_path("9.9.9", LATER, annotation_root / "drift").write_text(report.dumps())


def test_the_built_page_shows_each_note_and_the_file_in_the_later_release(tmp_path, monkeypatch, annotation_root,
                                                                          fake_upstream):
    """Catches: the hook not reading the committed report, or dropping the boxes or the summary on the way
    to the page (the unit tests of drift_view would still pass)."""
    _commit_report(annotation_root, fake_upstream)
    site = run_build(make_project(tmp_path), monkeypatch, annotation_root, fake_upstream)
    page = (site / "sources" / "v9.9.9" / "pkg" / "tiny.py" / "index.html").read_text()
    assert page.count('class="drift drift-') == 3
    assert "changed in 9.10.0" in page and 'class="cmp-side drift-new"' in page
    assert "In vLLM 9.10.0" in page and "vllm-9.10.0.tar.gz" in page
    other = (site / "sources" / "v9.9.9" / "csrc" / "twice.cu" / "index.html").read_text()
    assert "In vLLM 9.10.0" in other and "all 1 notes of this page are gone there" in other


def test_later_bytes_other_than_the_report_says_fail_a_strict_build(tmp_path, monkeypatch, annotation_root,
                                                                     fake_upstream, caplog):
    """Catches: a site that silently shows side-by-side lines from bytes the report was not computed from."""
    _commit_report(annotation_root, fake_upstream)
    fake_upstream.files[(LATER, "pkg/tiny.py")] = LATER_PY + b"# a later edit\n"
    with pytest.raises(Abort):
        run_build(make_project(tmp_path), monkeypatch, annotation_root, fake_upstream)
    assert "drift lines not shown" in caplog.text and "re-run" in caplog.text
