"""The annotated pages' "cite" controls: the text they copy is built at build time by ``annotations.cite``.

Synthetic annotations only (``tests.site.synthetic``); the page's script is tested in the browser
test (``test_cite_control_copies_the_notes_markdown``).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import yaml
from mkdocs.structure.files import File

from annotations import cite
from annotations.model import parse, range_hash, upstream_lines
from docs.hooks.source_page import page_src_uri, render_source
from tests.site.synthetic import REPO, UPSTREAM_PY
from tests.site.test_hooks import Links

SITE = "https://study.example/"


def _page(annotation_root: Path) -> tuple[object, str]:
    ann = parse(annotation_root / "v9.9.9" / "pkg" / "tiny.py.md")
    return ann, render_source(ann, UPSTREAM_PY, {}, Links(), SITE)


def test_every_note_has_a_cite_control_with_the_cli_citation(annotation_root: Path) -> None:
    """Catches: a note without a cite control, or a control whose text differs from `annotations cite`'s."""
    ann, out = _page(annotation_root)
    buttons = re.findall(r'<aside class="ann-note" id="([^"]+)".*?<button type="button" class="ann-cite" '
                         r'data-cite-md="([^"]*)" data-cite-plain="([^"]*)"', out, re.S)
    assert [b[0] for b in buttons] == [n.id for n in ann.notes]
    for note_id, md, plain in buttons:
        cited = cite.note_citation(ann, ann.note(note_id))
        assert html.unescape(md) == cited.markdown(SITE)
        assert html.unescape(plain) == cited.plain(SITE)
        assert f"#{note_id}" in html.unescape(md) and cited.hash in html.unescape(md)


def test_line_hashes_and_template_cite_the_exact_line(annotation_root: Path, fake_upstream) -> None:
    """Catches: a line's data-h that is not its own content hash (a line citation that would not verify)."""
    _, out = _page(annotation_root)
    hashes = dict(re.findall(r'<a class="ann-ln" href="#L(\d+)" data-h="([0-9a-f]{12})">', out))
    lines = upstream_lines(UPSTREAM_PY)
    assert hashes == {str(n): range_hash(lines, n, n) for n in range(1, len(lines) + 1)}
    md = html.unescape(re.search(r'data-cite-line-md="([^"]*)"', out)[1])
    plain = html.unescape(re.search(r'data-cite-line-plain="([^"]*)"', out)[1])
    filled = "\n".join(t.replace(cite.LINE_SLOT, "4").replace(cite.HASH_SLOT, hashes["4"]) for t in (md, plain))
    verdicts = cite.verify(filled, fake_upstream, root=annotation_root)
    assert [(v.status, v.citation.start) for v in verdicts] == [(cite.FINE, 4), (cite.FINE, 4)]


def test_citation_links_to_the_page_mkdocs_builds(tmp_path: Path) -> None:
    """Catches: citations linking to a site path other than the generated page's URL, or another site."""
    built = File(page_src_uri("0.10.2", "vllm/core/block_manager.py"), str(tmp_path), str(tmp_path), True)
    assert cite.page_path("0.10.2", "vllm/core/block_manager.py") == built.url
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    assert cite.site_url() == config["site_url"].rstrip("/") + "/"
