"""MkDocs hook: one readable source page per module of ``reference/``, and the side-by-side pages.

At build time this hook parses every module of ``reference/`` (statically, see
:mod:`docs.hooks.reference_index`), adds a virtual page ``reference/<dotted.module>.md`` per module
to the "Reference" section of the navigation, and fills it with the module's code beside its own
docstrings and comments (:mod:`docs.hooks.reference_page`). The Sphinx roles in those docstrings
become links to the symbols' lines (:mod:`docs.hooks.sphinx_roles`).

From the annotations it collects, for every reference symbol, the upstream notes whose ``ref:``
names it, and lists them beside the symbol ("re-implements ... note ``x``"). For every annotated
file with such notes it adds a comparison page ``compare/v<version>/<upstream>.md`` (not in the
navigation; reached from both sides) that puts each note's lines next to the reference code
(:mod:`docs.hooks.compare_page`). A ``ref:`` that resolves to nothing is logged as a warning, which
fails ``mkdocs build --strict``.
"""

from __future__ import annotations

import logging
from html import escape

import markdown
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.pages import Page
from mkdocs.utils import get_relative_url

from annotations import model
from docs.hooks.code_lines import highlight_lines
from docs.hooks.compare_page import Pair, Side, compare_src_uri, section_html
from docs.hooks.page_markers import replace_html_marker, repo_root
from docs.hooks.reference_index import ReferenceIndex, Target, source_src_uri
from docs.hooks.reference_page import Cite, anchor_ids, owner_anchor, render_module
from docs.hooks.source_page import AnnotatedSourceError, page_src_uri
from docs.hooks.source_set import SourceEntry, SourceSet, rewrite_citations
from docs.hooks.sphinx_roles import convert_roles
from upstream import fetch

log = logging.getLogger("mkdocs.hooks.reference_sources")

NAV_SECTION = "Reference"
PAGE_MARKER = "REFERENCE-SOURCE-BODY"
COMPARE_MARKER = "COMPARE-BODY"


def nav_entries(modules: list[str]) -> list[dict]:
    """Navigation for the module pages: one section per package, its modules inside.

    A package's own page comes first in its section (titled by the package name), followed by
    its modules, titled by their last component.
    """
    packages = {m for m in modules if any(o.startswith(m + ".") for o in modules)}
    sections: dict[str, list[dict[str, str]]] = {}
    for module in modules:
        home = module if module in packages else module.rpartition(".")[0] or module
        title = module if module in packages else module.rpartition(".")[2]
        sections.setdefault(home, []).append({title: source_src_uri(module)})
    return [{package: entries} for package, entries in sections.items()]


def module_markdown(module: str, path: str) -> str:
    return (
        "---\nhide:\n  - toc\n---\n\n"
        f"# {module}\n\n"
        f'<p class="ann-path"><code>{escape(path)}</code>: the code with its own docstrings and comments '
        "beside it; where upstream notes cite a symbol, they are listed with it.</p>\n\n"
        f"{PAGE_MARKER}\n"
    )


def compare_markdown(entry: SourceEntry) -> str:
    ann = entry.annotation
    return (
        # Out of the search index: every note here is already indexed on its source page.
        "---\nhide:\n  - toc\n  - navigation\nsearch:\n  exclude: true\n---\n\n"
        f"# Side by side: {ann.upstream.rsplit('/', 1)[-1]}\n\n"
        f'<p class="ann-path"><code>{escape(ann.upstream)}</code> at vLLM v{escape(ann.version)}, each note '
        "that names reference code next to that code (upstream on the left, the reference on the right; "
        "one above the other on narrow screens).</p>\n\n"
        f"{COMPARE_MARKER}\n"
    )


def ref_notes(entry: SourceEntry) -> list:
    return [n for n in entry.annotation.notes if n.refs]


class Site:
    """What one build knows: the reference modules, the annotations, and who cites what."""

    def __init__(self, index: ReferenceIndex, sources: SourceSet) -> None:
        self.index = index
        self.sources = sources
        self.fragments: dict[str, list[str]] = {}
        self.unresolved: list[str] = []
        # anchor of the symbol that lists the cite -> [(entry, note, target)]
        self.cited: dict[str, list[tuple[SourceEntry, object, Target]]] = {}
        for entry in sources.sorted_entries():
            for note in ref_notes(entry):
                for ref in note.refs:
                    target = index.resolve(ref)
                    if target is None:
                        self.unresolved.append(f"{entry.annotation.path}: note `{note.id}` refs {ref}, "
                                               "which names nothing in reference/")
                        continue
                    owner = owner_anchor(index.modules[target.module], target.symbol)
                    self.cited.setdefault(owner, []).append((entry, note, target))

    def module_fragments(self, module: str) -> list[str]:
        if module not in self.fragments:
            text = self.index.modules[module].text
            self.fragments[module] = highlight_lines(text, self.index.paths[module].name) if text else [""]
        return self.fragments[module]

    def compare_entries(self) -> list[SourceEntry]:
        return [e for e in self.sources.sorted_entries() if ref_notes(e)]


_site: Site | None = None


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Parse the reference and the annotations, and list the module pages under "Reference"."""
    global _site
    try:
        sources = SourceSet.load(model.ANNOTATIONS_ROOT, fetch.read_file)
    except AnnotatedSourceError as err:
        raise PluginError(str(err)) from None
    _site = Site(ReferenceIndex.cached(repo_root(config)), sources)
    for item in config.nav or []:
        if isinstance(item, dict) and NAV_SECTION in item:
            children = item[NAV_SECTION]
            if not isinstance(children, list):
                children = [children]
            item[NAV_SECTION] = children + nav_entries(list(_site.index.modules))
            break
    else:
        if config.nav is not None:
            raise PluginError(f"mkdocs.yml nav has no '{NAV_SECTION}' section for the reference pages")
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add one page per reference module and one comparison page per annotated file with refs."""
    assert _site is not None, "on_config runs first"
    for message in _site.unresolved:
        log.warning(message)
    for module, path in _site.index.paths.items():
        rel = path.relative_to(repo_root(config))
        files.append(File.generated(config, source_src_uri(module), content=module_markdown(module, rel.as_posix())))
    for entry in _site.compare_entries():
        ann = entry.annotation
        files.append(File.generated(config, compare_src_uri(ann.version, ann.upstream), content=compare_markdown(entry),
                                    inclusion=InclusionLevel.NOT_IN_NAV))
    return files


def _url(files: Files, src_uri: str, page: Page) -> str | None:
    target = files.get_file_from_path(src_uri)
    return None if target is None else get_relative_url(target.url, page.url)


def _render_module_page(module: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    assert _site is not None
    index = _site.index
    md = markdown.Markdown(extensions=config.markdown_extensions, extension_configs=config.mdx_configs or {})

    def role_url(target: str) -> str | None:
        found = index.resolve_in(module, target)
        if found is None:
            return None
        url = _url(files, source_src_uri(found.module), page)
        return None if url is None else f"{url}#{found.anchor}"

    def render(text: str) -> str:
        return md.reset().convert(convert_roles(text, role_url)) if text else ""

    cites: dict[str, list[Cite]] = {}
    source = index.modules[module]
    for anchor in [a for a in _site.cited if a == module or a.startswith(module + ".")]:
        if index.resolve(anchor) is None or index.resolve(anchor).module != module:
            continue
        for entry, note, target in _site.cited[anchor]:
            ann = entry.annotation
            note_page = _url(files, page_src_uri(ann.version, ann.upstream), page)
            cmp_page = _url(files, compare_src_uri(ann.version, ann.upstream), page)
            member = target.symbol.qualname.rpartition(".")[2] if target.symbol.kind == "attribute" else None
            cites.setdefault(anchor, []).append(Cite(
                ann.version, ann.upstream, note.id, note.start, note.end,
                f"{note_page}#{note.id}" if note_page else None,
                f"{cmp_page}#{note.id}" if cmp_page else None, member))
    path = index.paths[module]
    return render_module(source, render, cites, path.name)


def _note_body(entry: SourceEntry, note, page: Page, files: Files, md: markdown.Markdown) -> str:
    """The note's own prose, rendered as on its annotated page (citations made site links)."""
    assert _site is not None

    def resolve(version: str, path: str, note_id: str | None) -> str | None:
        target = _site.sources.note_target(version, path, note_id)
        url = None if target is None else _url(files, target, page)
        return None if url is None else url + (f"#{note_id}" if note_id else "")

    body, missing = rewrite_citations(note.body, resolve)
    for cited in missing:
        log.warning("%s: note `%s` cites %s, which is not an annotated note", entry.annotation.path, note.id, cited)
    return md.reset().convert(body)


def _render_compare_page(entry: SourceEntry, page: Page, config: MkDocsConfig, files: Files) -> str:
    assert _site is not None
    md = markdown.Markdown(extensions=config.markdown_extensions, extension_configs=config.mdx_configs or {})
    ann = entry.annotation
    up_fragments = highlight_lines(entry.data.decode("utf-8"), ann.upstream)
    up_page = _url(files, page_src_uri(ann.version, ann.upstream), page) or ""
    sections = []
    for note in ref_notes(entry):
        pairs = []
        for ref in note.refs:
            target = _site.index.resolve(ref)
            if target is None:
                continue
            ref_page = _url(files, source_src_uri(target.module), page) or ""
            sym = target.symbol
            start, end = (sym.start, sym.end) if sym.kind != "module" else (1, _site.index.modules[target.module].line_count)
            up_title = (f'<a href="{escape(up_page)}#{escape(note.id)}">vLLM v{escape(ann.version)} · '
                        f"<code>{escape(ann.upstream)}</code> {escape(note.range_text)}</a>")
            ref_title = (f'<a href="{escape(ref_page)}#{escape(target.anchor)}">reference · '
                         f"<code>{escape(target.anchor)}</code> L{start}–{end}</a>")
            pairs.append(Pair(
                Side(up_title, up_page, up_fragments, note.start, note.end),
                Side(ref_title, ref_page, _site.module_fragments(target.module), start, end)))
        head = (f'<a class="ann-note-id" href="{escape(up_page)}#{escape(note.id)}"><code>{escape(note.id)}</code></a> '
                f'<span class="cmp-refs">re-implemented by {", ".join(f"<code>{escape(r)}</code>" for r in note.refs)}</span>')
        head += f'<div class="cmp-body ann-note-body">{_note_body(entry, note, page, files, md)}</div>'
        sections.append(section_html(note.id, head, pairs))
    return '<div class="cmp-page">' + "\n".join(sections) + "</div>"


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Put the code into the module pages and the pairs into the comparison pages."""
    if _site is None:
        return html
    uri = page.file.src_uri
    if uri.startswith("reference/") and uri.endswith(".md"):
        module = uri[len("reference/"):-len(".md")]
        if module in _site.index.modules:
            html = replace_html_marker(html, PAGE_MARKER, _render_module_page(module, page, config, files), uri)
            if page.present_anchor_ids is not None:
                page.present_anchor_ids |= anchor_ids(_site.index.modules[module])
        return html
    if uri.startswith("compare/"):
        for entry in _site.compare_entries():
            if compare_src_uri(entry.annotation.version, entry.annotation.upstream) == uri:
                html = replace_html_marker(html, COMPARE_MARKER, _render_compare_page(entry, page, config, files), uri)
                if page.present_anchor_ids is not None:
                    page.present_anchor_ids |= {n.id for n in ref_notes(entry)}
                break
    return html
