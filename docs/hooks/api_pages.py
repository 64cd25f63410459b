"""MkDocs hook: one API page per module of the ``reference`` package, generated at build time.

The reference implementation is being written alongside the site, so the list of modules is
not fixed. Instead of hand-maintained pages that go stale, this hook walks ``reference/`` on disk
(no import: mkdocstrings reads the source statically), adds a virtual page
``reference/<dotted.module>.md`` holding a ``::: dotted.module`` directive for each module, and
lists them in the navigation under "Reference". Every documented object gets an anchor equal to
its dotted path, which is what the annotated pages' ``ref`` links resolve to through autorefs.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

NAV_SECTION = "Reference"
PACKAGE = "reference"


def reference_modules(root: Path) -> list[str]:
    """Dotted names of every module and package under ``root/reference``, sorted.

    Packages appear under their own name (``reference.blocks``), modules under theirs
    (``reference.blocks.v0.manager``); private modules (leading underscore) are included
    because notes may cite them.
    """
    base = root / PACKAGE
    if not base.is_dir():
        return []
    names: list[str] = []
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        parts = list(rel.parts)
        if any(not p.isidentifier() for p in parts):
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        elif parts[-1] == "__main__":
            continue
        names.append(".".join(parts))
    return sorted(set(names))


def api_src_uri(module: str) -> str:
    """The generated page of a module: ``reference/reference.blocks.v0.manager.md``."""
    return f"reference/{module}.md"


def api_markdown(module: str) -> str:
    """A page that renders one module (its members, not its submodules)."""
    return f"::: {module}\n    options:\n      show_submodules: false\n"


def nav_entries(modules: list[str]) -> list[dict]:
    """Navigation for the API pages: one section per package, its modules inside.

    A package's own page comes first in its section (titled by the package name), followed by
    its modules, titled by their last component.
    """
    packages = {m for m in modules if any(o.startswith(m + ".") for o in modules)}
    sections: dict[str, list[dict[str, str]]] = {}
    for module in modules:
        home = module if module in packages else module.rpartition(".")[0] or module
        title = module if module in packages else module.rpartition(".")[2]
        sections.setdefault(home, []).append({title: api_src_uri(module)})
    return [{package: entries} for package, entries in sections.items()]


def _repo_root(config: MkDocsConfig) -> Path:
    return Path(config.config_file_path).resolve().parent


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """List the modules in the navigation under "Reference"."""
    modules = reference_modules(_repo_root(config))
    for item in config.nav or []:
        if isinstance(item, dict) and NAV_SECTION in item:
            children = item[NAV_SECTION]
            if not isinstance(children, list):
                children = [children]
            item[NAV_SECTION] = children + nav_entries(modules)
            break
    else:
        if config.nav is not None:
            raise PluginError(f"mkdocs.yml nav has no '{NAV_SECTION}' section for the API pages")
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the virtual API pages."""
    for module in reference_modules(_repo_root(config)):
        files.append(File.generated(config, api_src_uri(module), content=api_markdown(module)))
    return files
