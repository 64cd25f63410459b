"""The reference source pages, the role conversion and the side-by-side view, on synthetic modules."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from docs.hooks.code_lines import highlight_lines
from docs.hooks.compare_page import Pair, Side, section_html
from docs.hooks.python_source import parse_module
from docs.hooks.reference_index import ReferenceIndex, module_names, source_src_uri
from docs.hooks.reference_page import Cite, anchor_ids, owner_anchor, render_module, segments
from docs.hooks.reference_sources import nav_entries
from docs.hooks.sphinx_roles import RENDERED_ROLE, convert_roles

ROOT = Path(__file__).resolve().parents[2]

POOL = textwrap.dedent(
    '''\
    """The pool. See :class:`Pool` and :meth:`take`, and :class:`ValueError`."""

    from .queue import Queue as Q

    LIMIT = 4


    # A comment block directly above the class
    # is part of its prose.
    class Pool:
        """Holds blocks."""

        size: int = 0

        @staticmethod
        def take(n):
            """Take ``n``; see :attr:`Pool.size` and :func:`~pkg.queue.make`."""
            def inner():
                return n
            return inner()


    def free():
        return None
    '''
)
QUEUE = '"""Queue."""\n\n\nclass Queue:\n    pass\n\n\ndef make():\n    return Queue()\n'
INIT = '"""The package."""\n\nfrom pkg.pool import Pool\n'


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(INIT)
    (tmp_path / "pkg" / "pool.py").write_text(POOL)
    (tmp_path / "pkg" / "queue.py").write_text(QUEUE)
    (tmp_path / "pkg" / "__main__.py").write_text("")
    return tmp_path


def test_symbols_have_their_exact_lines_docstrings_and_imports() -> None:
    """Catches: symbol anchors on the wrong lines (decorators dropped, nested defs listed as methods)."""
    mod = parse_module("pkg.pool", POOL)
    lines = POOL.splitlines()
    take = mod.symbols["Pool.take"]
    assert (take.kind, lines[take.start - 1].strip(), take.end) == ("method", "@staticmethod", 20)
    assert take.doc.startswith("Take ``n``") and (take.doc_start, take.doc_end) == (17, 17)
    assert "Pool.take.inner" not in mod.symbols and "inner" not in mod.symbols
    assert mod.symbols["Pool.size"].kind == "attribute" and mod.symbols["Pool.size"].start == 13
    assert mod.symbols["LIMIT"].start == 5 and mod.symbols["free"].kind == "function"
    assert mod.imports["Q"] == "pkg.queue.Queue"
    assert mod.symbols[""].doc.startswith("The pool.")


def test_index_follows_reexports_and_resolves_names_as_prose_writes_them(tree: Path) -> None:
    """Catches: ref: links through a package re-export, or roles written relative to a module, landing nowhere."""
    assert list(module_names(tree, "pkg")) == ["pkg", "pkg.pool", "pkg.queue"]
    index = ReferenceIndex.load(tree, "pkg")
    assert index.resolve("pkg.Pool").anchor == "pkg.pool.Pool"  # re-exported by the package
    assert index.resolve("pkg.Pool.take").anchor == "pkg.pool.Pool.take"
    assert index.resolve("pkg.pool.Q").anchor == "pkg.queue.Queue"  # an alias import
    assert index.resolve("pkg.pool.Nope") is None and index.resolve("other.x") is None
    assert index.resolve_in("pkg.pool", "take").anchor == "pkg.pool.Pool.take"  # a member of the one class with it
    assert index.resolve_in("pkg.pool", "Pool.size").anchor == "pkg.pool.Pool.size"
    assert index.resolve_in("pkg.pool", ".queue").anchor == "pkg.queue"  # relative module
    assert index.resolve_in("pkg", ".pool").anchor == "pkg.pool"  # relative to a package itself
    assert index.resolve_in("pkg.pool", "ValueError") is None


def test_roles_become_links_or_code_never_raw_text() -> None:
    """Catches: Sphinx roles shown raw on the site (`:attr:` followed by code)."""
    urls = {"Pool.size": "p/#pkg.pool.Pool.size", "~pkg.queue.make": None, "pkg.queue.make": "q/#pkg.queue.make"}
    out = convert_roles("see :attr:`Pool.size`, :func:`~pkg.queue.make` and :class:`ValueError`.",
                        lambda t: urls.get(t))
    assert out == "see [`Pool.size`](p/#pkg.pool.Pool.size), [`make`](q/#pkg.queue.make) and `ValueError`."
    assert not RENDERED_ROLE.search(out)
    assert RENDERED_ROLE.search(":attr:<code>x</code>") and RENDERED_ROLE.search(":py:meth:`x`")


def test_segments_tile_every_line_once_with_comment_blocks_as_prose() -> None:
    """Catches: lines missing or repeated on a source page, or a comment above a def split from it."""
    mod = parse_module("pkg.pool", POOL)
    segs = segments(mod)
    covered = [n for s in segs for n in range(s.start, s.end + 1)]
    assert covered == list(range(1, mod.line_count + 1))
    by_symbol = {s.symbol.qualname: s for s in segs if s.symbol is not None}
    assert by_symbol[""].start == 1 and by_symbol["Pool"].start == 8  # the two comment lines above
    assert by_symbol["Pool"].end == by_symbol["Pool.take"].start - 1
    assert by_symbol["Pool.take"].end == 20
    assert [s for s in segs if s.symbol is None and s.start == 21]  # the gap after the class is plain


def test_rendered_module_has_every_line_symbol_anchors_prose_and_cites() -> None:
    """Catches: a page without #L anchors, symbols without ids, docstrings not shown as prose, cites lost."""
    mod = parse_module("pkg.pool", POOL)
    cite = Cite("9.9.9", "vllm/x.py", "x.take", 10, 20, "../x/#x.take", "../cmp/#x.take")
    member = Cite("9.9.9", "vllm/x.py", "x.size", 3, 3, None, None, member="size")
    html = render_module(mod, lambda md: f"<p>{md}</p>",
                         {"pkg.pool.Pool.take": [cite], owner_anchor(mod, mod.symbols["Pool.size"]): [member]},
                         "pool.py")
    assert [int(n) for n in re.findall(r'<div class="ann-line[^"]*" id="L(\d+)"', html)] == list(range(1, 25))
    assert set(re.findall(r' id="([^"]+)"', html)) == anchor_ids(mod)
    take = re.search(r'<aside class="ann-note ann-prose" id="pkg\.pool\.Pool\.take" data-start="(\d+)" data-end="(\d+)">(.*?)</aside>', html)
    assert take and (take[1], take[2]) == ("15", "20")
    assert "Take ``n``" in take[3]
    assert 're-implements <a href="../x/#x.take"><code>vllm/x.py</code> L10–20</a> @ v9.9.9' in take[3]
    assert 'href="../cmp/#x.take">side by side</a>' in take[3]
    pool = re.search(r'id="pkg\.pool\.Pool" data-start="10" data-end="20">(.*?)</aside>', html, re.S)
    assert pool and "A comment block directly above the class\nis part of its prose." in pool[1]
    assert "<code>size</code> re-implements" in pool[1]
    assert '<span class="ann-sym" id="pkg.pool.Pool.size" data-start="13" data-end="13"></span>' in html
    assert 'class="ann-line ann-docline" id="L17"' in html


def test_comparison_pairs_show_exactly_the_two_ranges() -> None:
    """Catches: the side-by-side view showing other lines than the note's and the symbol's."""
    frags = highlight_lines(POOL, "pool.py")
    up = ["u1", "u2", "u3", "u4"]
    html = section_html("x.take", "<b>head</b>", [Pair(Side("U", "../up/", up, 2, 3), Side("R", "../ref/", frags, 15, 20))])
    assert html.startswith('<section class="cmp" id="x.take">')
    upstream, reference = html.split('class="cmp-side cmp-reference"')
    assert re.findall(r'href="\.\./up/#L(\d+)"', upstream) == ["2", "3"]
    assert re.findall(r'href="\.\./ref/#L(\d+)"', reference) == [str(n) for n in range(15, 21)]


def test_nav_groups_modules_under_their_package() -> None:
    """Catches: modules listed under the wrong package, or a module without a nav entry."""
    modules = ["reference", "reference.blocks", "reference.blocks.v1", "reference.blocks.v1.block_pool",
               "reference.blocks.v1.hashing"]
    nav = nav_entries(modules)
    flat = {title: uri for section in nav for entries in section.values() for e in entries for title, uri in e.items()}
    assert sorted(flat.values()) == sorted(source_src_uri(m) for m in modules)
    v1 = next(entries for section in nav for name, entries in section.items() if name == "reference.blocks.v1")
    assert v1[0] == {"reference.blocks.v1": source_src_uri("reference.blocks.v1")}
    assert {"block_pool": source_src_uri("reference.blocks.v1.block_pool")} in v1


def test_every_ref_in_the_annotations_resolves_in_the_real_reference() -> None:
    """Catches: a note's ref: naming a symbol the source pages cannot place (the link would land nowhere)."""
    from annotations.model import ANNOTATIONS_ROOT, annotation_paths, parse

    index = ReferenceIndex.load(ROOT)
    refs = {r for p in annotation_paths(ANNOTATIONS_ROOT) for n in parse(p).notes for r in n.refs}
    assert refs, "no ref: links found in the annotations"
    assert sorted(r for r in refs if index.resolve(r) is None) == []


def test_every_ref_is_cited_back_on_the_symbol_or_its_owner() -> None:
    """Catches: a reference symbol that a note re-implements without the note listed beside it."""
    from annotations import model
    from docs.hooks.reference_sources import Site
    from docs.hooks.source_set import SourceSet
    from upstream import fetch

    site = Site(ReferenceIndex.load(ROOT), SourceSet.load(model.ANNOTATIONS_ROOT, fetch.read_file))
    assert site.unresolved == []
    listed = {(entry.annotation.version, note.id, target.anchor)
              for cites in site.cited.values() for entry, note, target in cites}
    wanted = {(e.annotation.version, n.id, site.index.resolve(r).anchor)
              for e in site.sources.entries.values() for n in e.annotation.notes for r in n.refs}
    assert wanted and listed == wanted
    for owner, cites in site.cited.items():
        for _, _, target in cites:
            module = site.index.modules[target.module]
            assert owner == owner_anchor(module, target.symbol)
            assert owner in anchor_ids(module)  # the note that lists it exists on the page


def test_the_site_and_the_audit_worksheet_locate_every_ref_at_the_same_line() -> None:
    """Catches: the two locators of a note's ``- ref:`` symbols drifting apart. The site links a
    ref by parsing the reference statically (:class:`ReferenceIndex`); the checker and the audit
    worksheet locate it by importing it (``annotations.check.reference_source``). Where they
    disagree, an auditor reads other lines than the ones the site's link opens."""
    from annotations import check, model
    from docs.hooks.source_set import SourceSet
    from upstream import fetch

    index = ReferenceIndex.load(ROOT)
    sources = SourceSet.load(model.ANNOTATIONS_ROOT, fetch.read_file)
    refs = sorted({r for e in sources.entries.values() for n in e.annotation.notes for r in n.refs})
    assert len(refs) > 100
    apart = []
    for ref in refs:
        target = index.resolve(ref)
        static = None if target is None else (index.paths[target.module].resolve(), target.symbol.start)
        imported = check.reference_source(ref)
        if static != imported:
            apart.append((ref, static, imported))
    assert apart == []


def test_a_module_that_opens_with_a_definition_still_has_its_anchor() -> None:
    """Catches: links to a module's anchor landing nowhere when the file has no docstring."""
    mod = parse_module("pkg.bare", "def f():\n    return 1\n")
    html = render_module(mod, lambda md: md, {}, "bare.py")
    assert set(re.findall(r' id="([^"]+)"', html)) == anchor_ids(mod) == {"L1", "L2", "pkg.bare", "pkg.bare.f"}


def test_documented_fields_get_their_own_note() -> None:
    """Catches: a field's explaining comment block left as code instead of prose beside the field,
    or the field's anchor doubled (an id must be unique on the page)."""
    text = ('"""Policies."""\n\n\nclass Policy:\n    """One field per difference."""\n\n'
            "    # Whether the null block is counted.\n    #   v0.33.0 block_pool.py:816\n    counted: bool\n"
            "    plain: int\n")
    mod = parse_module("pkg.policies", text)
    html = render_module(mod, lambda md: f"<p>{md}</p>", {}, "policies.py")
    ids = re.findall(r' id="([^"]+)"', html)
    assert len(ids) == len(set(ids)) and set(ids) == anchor_ids(mod)
    note = re.search(r'<aside class="ann-note ann-prose" id="pkg\.policies\.Policy\.counted" data-start="9" data-end="9">(.*?)</aside>', html, re.S)
    assert note and "Whether the null block is counted.  \n  v0.33.0 block_pool.py:816" in note[1]  # a hard break
    assert '<span class="ann-sym" id="pkg.policies.Policy.plain"' in html  # undocumented: a mark only
    assert owner_anchor(mod, mod.symbols["Policy.counted"]) == "pkg.policies.Policy.counted"
    assert owner_anchor(mod, mod.symbols["Policy.plain"]) == "pkg.policies.Policy"
    covered = [n for seg in segments(mod) for n in range(seg.start, seg.end + 1)]
    assert covered == list(range(1, mod.line_count + 1))


def _names_outside_the_reference(target: str) -> bool:
    """Whether ``target`` is a builtin or an importable standard-library/dependency name."""
    import builtins
    import importlib

    target = target.lstrip(".")
    if hasattr(builtins, target):
        return True
    module, _, attribute = target.rpartition(".")
    while module:
        try:
            found: object = importlib.import_module(module)
        except ImportError:
            module, _, outer = module.rpartition(".")
            attribute = f"{outer}.{attribute}"
            continue
        for part in attribute.split("."):
            if not hasattr(found, part):
                return False
            found = getattr(found, part)
        return True
    return False


def test_every_sphinx_role_in_the_reference_resolves() -> None:
    """Catches: a docstring role naming something that does not exist (``:func:`scheme``` after the
    function was renamed), which the module pages silently render as plain code instead of a link."""
    from docs.hooks.sphinx_roles import ROLE

    index = ReferenceIndex.load(ROOT)
    unresolved = [f"{module}: {match[0]}" for module, path in index.paths.items()
                  for match in ROLE.finditer(path.read_text(encoding="utf-8"))
                  if index.resolve_in(module, match["target"].strip()) is None
                  and not _names_outside_the_reference(match["target"].strip())]
    assert len(list(ROLE.finditer((ROOT / "reference/blocks/v1/hashing.py").read_text()))) > 3
    assert unresolved == []
