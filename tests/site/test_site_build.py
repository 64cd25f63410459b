"""Build a small MkDocs site with the annotated-sources hook, in-process, on synthetic annotations.

These tests exercise the hook through MkDocs itself: generated pages, navigation, the HTML put in
place of the placeholders, anchors registered for MkDocs' link validation, and strict-mode
failures on broken input.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from mkdocs.commands.build import build
from mkdocs.config import load_config
from mkdocs.exceptions import Abort

from annotations import model
from tests.site.synthetic import HOOKS, REPO, UPSTREAM_PY, annotation_text, write_annotation
from upstream import fetch

HOOK = str(HOOKS / "annotated_sources.py")
REF_HOOK = str(HOOKS / "reference_sources.py")


def make_project(tmp_path: Path, theory_link: str = "") -> Path:
    docs = tmp_path / "docs"
    (docs / "sources").mkdir(parents=True)
    (docs / "index.md").write_text("# Home\n\n" + theory_link + "\n")
    (docs / "sources" / "index.md").write_text("# Sources\n\nANNOTATED-SOURCES-INDEX\n")
    (docs / "reference").mkdir()
    (docs / "reference" / "index.md").write_text("# Reference\n")
    (docs / "conformance.md").write_text('# Conformance\n\n<div id="demo.prop">demo</div>\n')
    # The hooks read the reference from the built project's root: the real one, linked in.
    (tmp_path / "reference").symlink_to(REPO / "reference", target_is_directory=True)
    yml = tmp_path / "mkdocs.yml"
    yml.write_text(
        "site_name: test\nsite_url: http://127.0.0.1:8000/\ntheme: {name: mkdocs}\n"
        f"hooks: ['{HOOK}', '{REF_HOOK}']\n"
        "markdown_extensions: [admonition, attr_list]\n"
        "validation: {links: {anchors: warn, not_found: warn}}\n"
        "nav:\n  - Home: index.md\n  - Annotated sources:\n    - sources/index.md\n"
        "  - Reference:\n    - reference/index.md\n  - Conformance: conformance.md\n"
    )
    return yml


def run_build(yml: Path, monkeypatch, root: Path, reader, properties=frozenset({"demo.prop"})) -> Path:
    monkeypatch.setattr(model, "ANNOTATIONS_ROOT", root)
    monkeypatch.setattr(fetch, "read_file", reader)
    cfg = load_config(config_file=str(yml), strict=True)
    monkeypatch.setattr(cfg.plugins[HOOK], "_registered_properties", lambda: set(properties))
    build(cfg)
    return Path(cfg.site_dir)


def test_generated_page_has_code_notes_banner_and_nav(tmp_path, monkeypatch, annotation_root, fake_upstream) -> None:
    """Catches: annotated pages missing, unlisted in the navigation, or left with placeholders."""
    site = run_build(make_project(tmp_path), monkeypatch, annotation_root, fake_upstream)
    page = (site / "sources" / "v9.9.9" / "pkg" / "tiny.py" / "index.html").read_text()
    assert "ANNOTATED-SOURCE" not in page
    assert re.findall(r'id="L(\d+)"', page) == [str(n) for n in range(1, 12)]
    for nid in ("tiny.doc", "tiny.add", "tiny.box"):
        assert f'id="{nid}"' in page
    assert "commit <code>abc1234</code>" in page and "vLLM v9.9.9" in page
    assert "An introduction in our words." in page
    # the note body went through Markdown (fenced code became highlighted code)
    assert "print" in page and "<pre" in page
    # nav lists both generated pages under their sections
    index = (site / "index.html").read_text()
    assert "pkg/tiny.py" in index and "csrc/twice.cu" in index
    listing = (site / "sources" / "index.html").read_text()
    assert "ANNOTATED-SOURCES-INDEX" not in listing and "v9.9.9/pkg/tiny.py/" in listing


def test_note_links_resolve_to_pages_that_exist(tmp_path, monkeypatch, annotation_root, fake_upstream) -> None:
    """Catches: prop/see/citation links pointing at URLs that the built site does not have."""
    site = run_build(make_project(tmp_path), monkeypatch, annotation_root, fake_upstream)
    page_dir = site / "sources" / "v9.9.9" / "pkg" / "tiny.py"
    page = (page_dir / "index.html").read_text()
    hrefs = set(re.findall(r'href="([^"#]*\.\./[^"#]*)#(demo\.prop|twice\.body)"', page))
    assert {anchor for _, anchor in hrefs} == {"demo.prop", "twice.body"}
    for rel, anchor in hrefs:
        target = (page_dir / rel / "index.html").resolve()
        assert target.exists(), rel
        assert f'id="{anchor}"' in target.read_text()
    # ref: opens the module's source page at the symbol, and that page lists the note back
    ref = re.search(r'class="ann-reflink" href="([^"#]+)#(reference\.blocks\.errors)"', page)
    assert ref, "the note's ref: link is missing"
    target = (page_dir / ref[1] / "index.html").resolve()
    ref_page = target.read_text()
    assert 'id="reference.blocks.errors"' in ref_page
    back = re.search(r'<li class="ann-cite">.*?href="([^"#]+)#tiny\.add".*?</li>', ref_page)
    assert back and (target.parent / back[1] / "index.html").resolve() == (page_dir / "index.html").resolve()
    # and the side-by-side view of the note exists, reachable from the note
    cmp = re.search(r'<li class="ann-cmp">Side by side: <a href="([^"#]+)#tiny\.add"', page)
    assert cmp, "the note has no side-by-side link"
    cmp_page = (page_dir / cmp[1] / "index.html").resolve().read_text()
    assert 'id="tiny.add"' in cmp_page and 'class="cmp-side cmp-reference"' in cmp_page
    # the note's own prose is there too, its citation made a working link
    section = re.search(r'<section class="cmp" id="tiny\.add">(.*?)</section>\s*(?:<section class="cmp"|</div>)', cmp_page, re.S)
    assert section and "Adds; see" in section[1]
    cited = re.search(r'Adds; see <a href="([^"#]+)#twice\.body"', section[1])
    assert cited and 'id="twice.body"' in ((page_dir / cmp[1]).resolve() / cited[1] / "index.html").resolve().read_text()


def test_other_pages_can_link_to_note_and_line_anchors(tmp_path, monkeypatch, annotation_root, fake_upstream) -> None:
    """Catches: strict builds rejecting valid links to #note.id / #L3 because anchors were not registered."""
    link = ("[n](sources/v9.9.9/pkg/tiny.py.md#tiny.add) [l](sources/v9.9.9/pkg/tiny.py.md#L3)")
    site = run_build(make_project(tmp_path, link), monkeypatch, annotation_root, fake_upstream)
    assert 'href="sources/v9.9.9/pkg/tiny.py/#tiny.add"' in (site / "index.html").read_text()


def test_links_to_missing_notes_fail_a_strict_build(tmp_path, monkeypatch, annotation_root, fake_upstream) -> None:
    """Catches: a theory page linking to a note id that does not exist passing unnoticed."""
    yml = make_project(tmp_path, "[n](sources/v9.9.9/pkg/tiny.py.md#tiny.gone)")
    with pytest.raises(Abort):
        run_build(yml, monkeypatch, annotation_root, fake_upstream)


def test_unregistered_property_fails_a_strict_build(tmp_path, monkeypatch, annotation_root, fake_upstream, caplog) -> None:
    """Catches: a note's prop: link to a property the conformance suite does not have."""
    with caplog.at_level(logging.WARNING), pytest.raises(Abort):
        run_build(make_project(tmp_path), monkeypatch, annotation_root, fake_upstream, properties=frozenset())
    assert "demo.prop" in caplog.text


def test_unverifiable_upstream_fails_the_build_naming_the_file(tmp_path, monkeypatch, annotation_root, fake_upstream, caplog) -> None:
    """Catches: a build that publishes notes beside bytes whose sha256 does not match the header."""
    text = annotation_text("pkg/tiny.py", "9.9.9", UPSTREAM_PY, [], sha256="f" * 64)
    write_annotation(annotation_root, "9.9.9", "pkg/tiny.py", text)
    with caplog.at_level(logging.ERROR), pytest.raises(Abort):
        run_build(make_project(tmp_path), monkeypatch, annotation_root, fake_upstream)
    assert "tiny.py.md" in caplog.text and "sha256" in caplog.text


def test_hash_drift_fails_a_strict_build(tmp_path, monkeypatch, annotation_root, fake_upstream, caplog) -> None:
    """Catches: notes whose upstream lines changed being published as if still accurate."""
    path = annotation_root / "v9.9.9" / "csrc" / "twice.cu.md"
    text = path.read_text()
    path.write_text(re.sub(r"· [0-9a-f]{12}", "· 0123456789ab", text))
    with caplog.at_level(logging.WARNING), pytest.raises(Abort):
        run_build(make_project(tmp_path), monkeypatch, annotation_root, fake_upstream)
    assert "twice.body" in caplog.text and "drift" in caplog.text


def test_note_citations_in_a_reach_status_become_working_links(tmp_path, monkeypatch, fake_upstream) -> None:
    """Catches: a note cited inside a `- reach:` status (or the file's header status) left as the raw
    relative `v9.9.9/...#id` link, which the browser resolves under the page itself and finds nothing
    (the prose's citations were rewritten, the badge's were not)."""
    from tests.site.synthetic import NoteSpec

    root = tmp_path / "annotations"
    cite = "[the kernel](v9.9.9/csrc/twice.cu#twice.body)"
    notes = {
        "pkg/tiny.py": [NoteSpec("tiny.add", 3, 6, "Adds.", (f"reach: setting `X=1`: as in {cite}",))],
        "csrc/twice.cu": [NoteSpec("twice.body", 2, 4, "Doubles.")],
    }
    for path, specs in notes.items():
        text = annotation_text(path, "9.9.9", fake_upstream.files[("9.9.9", path)], specs)
        if path == "csrc/twice.cu":
            text = text.replace("title: A synthetic file\n", f"title: A synthetic file\nreach: setting `Y=1`: see {cite}\n")
        write_annotation(root, "9.9.9", path, text)
    site = run_build(make_project(tmp_path), monkeypatch, root, fake_upstream)
    for page_dir in (site / "sources" / "v9.9.9" / "pkg" / "tiny.py", site / "sources" / "v9.9.9" / "csrc" / "twice.cu"):
        page = (page_dir / "index.html").read_text()
        assert 'href="v9.9.9/' not in page
        hrefs = re.findall(r'<a href="([^"#]*)#twice\.body">the kernel</a>', page)
        assert hrefs, f"no resolved link to twice.body in {page_dir.name}"
        for rel in hrefs:
            assert 'id="twice.body"' in (page_dir / rel / "index.html").resolve().read_text()
