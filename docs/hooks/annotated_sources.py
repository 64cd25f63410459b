"""MkDocs hook: one generated page per annotated upstream file.

The pages do not exist in ``docs/``. At build time this hook parses ``annotations/``, fetches the
pinned upstream bytes (``upstream.fetch.read_file``, verified against each header's sha256),
adds one virtual page per file (``sources/v0.10.2/vllm/core/block_manager.py/``), puts them in the
navigation under "Annotated sources", and finally replaces each page's placeholder with the
annotated code. Note bodies are rendered with the site's own Markdown configuration.

Links leave a note in three ways: ``ref`` links to the symbol's lines on the reference module's
source page (``docs/hooks/reference_sources.py``; a symbol that names nothing fails a strict
build), plus one link per note to its side-by-side comparison page; ``prop`` points at the property's
anchor on the conformance page, and ``see`` (and Markdown citations of notes) at another
annotated page. A link that cannot be resolved is logged as a warning, which fails
``mkdocs build --strict``.

Each note also shows what became of its lines in the newest release the committed drift reports
follow, and the banner a per-file summary (``docs/hooks/drift_view.py``).
"""

from __future__ import annotations

import logging
from functools import partial
from html import escape

import markdown
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from mkdocs.utils import get_relative_url

from annotations import drift, model
from annotations.model import AnnotationFile
from docs.hooks import drift_view
from docs.hooks.compare_page import compare_src_uri
from docs.hooks.conformance_page import REPORTS, property_results
from docs.hooks.page_markers import replace_html_marker, replace_marker, repo_root
from docs.hooks.reach_badge import legend_html, note_badge_html
from docs.hooks.reference_index import ReferenceIndex, source_src_uri
from docs.hooks.source_page import AnnotatedSourceError, anchor_ids, banner_html, render_source, stale_notes
from docs.hooks.source_set import SourceEntry, SourceSet, rewrite_citations
from upstream import fetch

log = logging.getLogger("mkdocs.hooks.annotated_sources")

#: The navigation entry the generated sections are appended to.
NAV_SECTION = "Annotated sources"
#: The page listing all annotated files; its marker paragraph is replaced by the list.
INDEX_PAGE = "sources/index.md"
INDEX_MARKER = "ANNOTATED-SOURCES-INDEX"
#: The paragraph a generated page carries until ``on_page_content`` puts the code there.
PAGE_MARKER = "ANNOTATED-SOURCE-BODY"
#: Where conformance property anchors live.
CONFORMANCE_PAGE = "conformance.md"

_sources: SourceSet | None = None
_drift_reports: list[drift.DriftReport] = []  # the committed drift reports (annotations/drift/), loaded in on_config


def page_markdown(entry: SourceEntry, resolve_intro) -> str:
    """The Markdown of a generated page: title, path, introduction and the code placeholder."""
    ann = entry.annotation
    intro, missing = rewrite_citations(ann.intro, resolve_intro)
    for cited in missing:
        log.warning("%s: the introduction cites %s, which is not an annotated note", ann.path, cited)
    return (
        "---\nhide:\n  - toc\n---\n\n"
        f"# {ann.title}\n\n"
        f"<p class=\"ann-path\"><code>{escape(ann.upstream)}</code> at vLLM v{escape(ann.version)}</p>\n\n"
        f"{PAGE_MARKER}\n\n"
        f"{intro}\n\n"
        f"## Annotated source\n\n{PAGE_MARKER}-CODE\n"
    )


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Load and verify every annotation, and add the generated pages to the navigation."""
    global _sources, _drift_reports
    _results.clear()
    try:
        _sources = SourceSet.load(model.ANNOTATIONS_ROOT, fetch.read_file)
        _drift_reports = drift_view.load_reports(model.ANNOTATIONS_ROOT / "drift")
    except (AnnotatedSourceError, drift.DriftError) as err:
        raise PluginError(str(err)) from None
    for item in config.nav or []:
        if isinstance(item, dict) and NAV_SECTION in item:
            children = item[NAV_SECTION]
            if not isinstance(children, list):
                children = [children]
            item[NAV_SECTION] = children + _sources.nav_sections()
            break
    else:
        if config.nav is not None:
            raise PluginError(f"mkdocs.yml nav has no '{NAV_SECTION}' section for the annotated pages")
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add one virtual Markdown page per annotated file."""
    assert _sources is not None, "on_config runs first"
    for entry in _sources.sorted_entries():

        def resolve_intro(version: str, path: str, note_id: str | None, entry: SourceEntry = entry) -> str | None:
            target = _sources.note_target(version, path, note_id)
            if target is None:
                return None
            rel = get_relative_url(target, entry.src_uri)
            return rel + (f"#{note_id}" if note_id else "")

        files.append(File.generated(config, entry.src_uri, content=page_markdown(entry, resolve_intro)))
    return files


def on_page_markdown(markdown_text: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Fill the sources index page with a table of every annotated file."""
    if page.file.src_uri != INDEX_PAGE or _sources is None:
        return markdown_text
    rows = ["| File | Release | Notes | Title |", "| --- | --- | --- | --- |"]
    for entry in _sources.sorted_entries():
        ann = entry.annotation
        link = get_relative_url(entry.src_uri, INDEX_PAGE)
        rows.append(f"| [`{ann.upstream}`]({link}) | v{ann.version} | {len(ann.notes)} | {ann.title} |")
    table = "\n".join(rows) if _sources.entries else "*No annotation files yet.*"
    return replace_marker(markdown_text, INDEX_MARKER, table, INDEX_PAGE)


class _PageLinks:
    """Resolves a note's ``ref``/``prop``/``see`` links relative to one page."""

    def __init__(self, page: Page, files: Files, sources: SourceSet, properties: set[str] | None,
                 reference: ReferenceIndex | None = None, results: dict[str, str] | None = None) -> None:
        self.reference = reference
        self.results = results or {}
        self.page = page
        self.files = files
        self.sources = sources
        self.properties = properties
        self._warned: set[str] = set()

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            log.warning("%s: %s", self.page.file.src_uri, message)

    def _url(self, src_uri: str) -> str | None:
        target = self.files.get_file_from_path(src_uri)
        return None if target is None else get_relative_url(target.url, self.page.url)

    def ref(self, symbol: str) -> str:
        short = ".".join(symbol.split(".")[-2:])
        code = f'<code title="{escape(symbol)}">{escape(short)}</code>'
        target = self.reference.resolve(symbol) if self.reference is not None else None
        if target is None:
            self._warn(f"'ref' link {symbol} names nothing in reference/")
            return code
        url = self._url(source_src_uri(target.module))
        if url is None:
            self._warn(f"no source page for reference module {target.module} (ref {symbol})")
            return code
        return f'<a class="ann-reflink" href="{escape(url)}#{escape(target.anchor)}">{code}</a>'

    def compare(self, note_id: str) -> str | None:
        entry = self.sources.entries.get(self.page.file.src_uri)
        if entry is None:
            return None
        url = self._url(compare_src_uri(entry.annotation.version, entry.annotation.upstream))
        return None if url is None else f"{url}#{note_id}"

    def prop_result(self, name: str) -> str | None:
        return self.results.get(name)

    def prop(self, name: str) -> str | None:
        if self.properties is not None and name not in self.properties:
            self._warn(f"links to conformance property {name!r}, which is not registered")
            return None
        url = self._url(CONFORMANCE_PAGE)
        if url is None:
            self._warn(f"no {CONFORMANCE_PAGE} page to link property {name!r} to")
            return None
        return f"{url}#{name}"

    def see(self, target: str) -> str | None:
        found = self.sources.see_target(target)
        if found is None:
            self._warn(f"'see' link {target} names no annotated note")
            return None
        url = self._url(found[0])
        return None if url is None else f"{url}#{found[1]}"


_results: dict[str, dict[str, str]] = {}  # per release, for this build (git is asked once per release)


def _property_results(root, version: str) -> dict[str, str]:
    if version not in _results:
        _results[version] = property_results(root / REPORTS, version, root)
    return _results[version]


def _registered_properties() -> set[str] | None:
    try:
        from conformance.properties import property_names
    except ImportError:
        return None
    return property_names()


def _renderer(config: MkDocsConfig, links: _PageLinks, ann: AnnotationFile):
    """``render(text, where)``: Markdown to HTML with every note citation made a link relative to
    this page; a citation of no annotated note is logged, naming ``where`` it stands."""
    md = markdown.Markdown(extensions=config.markdown_extensions, extension_configs=config.mdx_configs or {})

    def resolve(version: str, path: str, note_id: str | None) -> str | None:
        target = links.sources.note_target(version, path, note_id)
        url = None if target is None else links._url(target)
        return None if url is None else url + (f"#{note_id}" if note_id else "")

    def render(text: str, where: str) -> str:
        rewritten, missing = rewrite_citations(text, resolve)
        for cited in missing:
            log.warning("%s: %s cites %s, which is not an annotated note", ann.path, where, cited)
        return md.reset().convert(rewritten)
    return render


def _render_bodies(entry: SourceEntry, page: Page, config: MkDocsConfig, links: _PageLinks,
                   page_drift: drift_view.PageDrift | None = None) -> dict[str, str]:
    render = _renderer(config, links, entry.annotation)
    bodies: dict[str, str] = {}
    for note in entry.annotation.notes:
        where = f"note `{note.id}`"
        badge = note_badge_html(entry.annotation, note, partial(render, where=where + "'s reach status"))
        drift_box = drift_view.note_html(page_drift, entry.annotation, note, partial(render, where=where + "'s drift text"))
        bodies[note.id] = badge + drift_box + render(note.body, where)
    return bodies


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Put the banner and the annotated code into a generated page, and register its anchors."""
    if _sources is None or page.file.src_uri not in _sources.entries:
        return html
    entry = _sources.entries[page.file.src_uri]
    ann: AnnotationFile = entry.annotation
    stale = stale_notes(ann, entry.data)
    for note in stale:
        log.warning("%s: note `%s` %s no longer matches its upstream lines (hash drift)", ann.path, note.id, note.range_text)
    results = _property_results(repo_root(config), ann.version)
    links = _PageLinks(page, files, _sources, _registered_properties(), ReferenceIndex.cached(repo_root(config)), results)
    page_drift = drift_view.page_drift(_drift_reports, ann, entry.data, fetch.read_file, model.ANNOTATIONS_ROOT.parent)
    if page_drift is not None and page_drift.problem:
        log.warning("%s: drift lines not shown: %s", ann.path, page_drift.problem)
    code = render_source(ann, entry.data, _render_bodies(entry, page, config, links, page_drift), links, config.site_url)
    html = replace_html_marker(html, f"{PAGE_MARKER}-CODE", code, page.file.src_uri)
    render = _renderer(config, links, ann)
    html = replace_html_marker(html, PAGE_MARKER, banner_html(ann, entry.data, stale)
                               + drift_view.file_summary_html(page_drift, ann)
                               + legend_html(ann, partial(render, where="the header's reach status")),
                               page.file.src_uri)
    if page.present_anchor_ids is not None:
        page.present_anchor_ids |= anchor_ids(ann, entry.line_count)
    return html
