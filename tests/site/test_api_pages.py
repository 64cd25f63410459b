"""The generated API pages: every module of reference/ gets a page and a place in the navigation."""

from __future__ import annotations

from pathlib import Path

from docs.hooks.api_pages import api_markdown, api_src_uri, nav_entries, reference_modules


def make_tree(root: Path, files: list[str]) -> None:
    for f in files:
        p = root / f
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text('"""doc"""\n')


def test_every_module_and_package_is_found(tmp_path: Path) -> None:
    """Catches: a new reference module without an API page (its ref: links would not resolve)."""
    make_tree(tmp_path, ["reference/__init__.py", "reference/blocks/__init__.py", "reference/blocks/v1/__init__.py",
                         "reference/blocks/v1/block_pool.py", "reference/blocks/v1/_private.py",
                         "reference/attention/oracle.py", "reference/__main__.py", "reference/not-a-module.py"])
    assert reference_modules(tmp_path) == [
        "reference", "reference.attention.oracle", "reference.blocks", "reference.blocks.v1",
        "reference.blocks.v1._private", "reference.blocks.v1.block_pool"]


def test_nav_groups_modules_under_their_package(tmp_path: Path) -> None:
    """Catches: modules listed under the wrong package, or a module without a nav entry."""
    modules = ["reference", "reference.blocks", "reference.blocks.v1", "reference.blocks.v1.block_pool",
               "reference.blocks.v1.hashing"]
    nav = nav_entries(modules)
    flat = {title: uri for section in nav for entries in section.values() for e in entries for title, uri in e.items()}
    assert sorted(flat.values()) == sorted(api_src_uri(m) for m in modules)
    v1 = next(entries for section in nav for name, entries in section.items() if name == "reference.blocks.v1")
    assert v1[0] == {"reference.blocks.v1": api_src_uri("reference.blocks.v1")}
    assert {"block_pool": api_src_uri("reference.blocks.v1.block_pool")} in v1


def test_page_renders_exactly_its_module() -> None:
    """Catches: a page that documents a different object (its anchors would not match ref: links)."""
    assert api_markdown("reference.blocks.v1.block_pool").splitlines()[0] == "::: reference.blocks.v1.block_pool"
