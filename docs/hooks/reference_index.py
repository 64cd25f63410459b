"""Every module of ``reference/``, parsed once, and the answer to "where is this dotted name defined?".

Notes name reference symbols by dotted path (``ref: reference.blocks.v1.block_pool.BlockPool``);
a path may go through a package that re-exports the name (``reference.blocks.v0.BlockSpaceManager``
is defined in ``reference.blocks.v0.manager``). :meth:`ReferenceIndex.resolve` follows such
imports statically to the module and lines that define the symbol, so a link can open exactly
those lines on the module's source page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from docs.hooks.python_source import ModuleSource, Symbol, parse_module

PACKAGE = "reference"


def module_names(root: Path, package: str = PACKAGE) -> dict[str, Path]:
    """Dotted name -> file of every module and package under ``root/<package>`` (``__main__`` excluded)."""
    base = root / package
    found: dict[str, Path] = {}
    if not base.is_dir():
        return found
    for path in sorted(base.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if any(not p.isidentifier() for p in parts) or parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return dict(sorted(found.items()))


def source_src_uri(module: str) -> str:
    """The generated page of a module: ``reference/reference.blocks.v1.block_pool.md``."""
    return f"reference/{module}.md"


_CACHE: dict[str, object] = {}


@dataclass(frozen=True)
class Target:
    """Where a dotted name is defined: a module and a symbol in it."""

    module: str
    symbol: Symbol

    @property
    def anchor(self) -> str:
        """The element id of the symbol on its page: its canonical dotted path."""
        return self.module + ("." + self.symbol.qualname if self.symbol.qualname else "")


@dataclass
class ReferenceIndex:
    """The parsed modules of the reference package, by dotted name."""

    modules: dict[str, ModuleSource] = field(default_factory=dict)
    paths: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path, package: str = PACKAGE) -> ReferenceIndex:
        index = cls()
        for name, path in module_names(root, package).items():
            index.modules[name] = parse_module(name, path.read_text(encoding="utf-8"), path.name == "__init__.py")
            index.paths[name] = path
        return index

    @classmethod
    def cached(cls, root: Path, package: str = PACKAGE) -> ReferenceIndex:
        """:meth:`load`, reused while no module file changed (both site hooks ask for it)."""
        files = module_names(root, package)
        key = (str(root), package, tuple((name, p.stat().st_mtime_ns, p.stat().st_size) for name, p in files.items()))
        if _CACHE.get("key") != key:
            _CACHE["key"], _CACHE["index"] = key, cls.load(root, package)
        return _CACHE["index"]

    def resolve(self, dotted: str, depth: int = 0) -> Target | None:
        """The definition of ``dotted`` (module, class, function, method or attribute), or None."""
        if depth > 8:
            return None
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            module = ".".join(parts[:cut])
            if module not in self.modules:
                continue
            source = self.modules[module]
            rest = parts[cut:]
            if not rest:
                return Target(module, source.symbols[""])
            qual = ".".join(rest)
            if qual in source.symbols:
                return Target(module, source.symbols[qual])
            imported = source.imports.get(rest[0])
            if imported is not None and imported != dotted:
                return self.resolve(".".join([imported] + rest[1:]), depth + 1)
            return None
        return None

    def resolve_in(self, module: str, name: str) -> Target | None:
        """A name as written inside ``module``'s prose (``V1Policy.x``, ``get_new_blocks``).

        Tried in order: the full dotted path; relative to the module; through the module's
        imports; as a member of a class defined in the module (when exactly one has it).
        """
        source = self.modules.get(module)
        if name.startswith(".") and source is not None:  # relative to the module's package
            package = module if source.is_package else module.rpartition(".")[0]
            for _ in range(len(name) - len(name.lstrip(".")) - 1):
                package = package.rpartition(".")[0]
            return self.resolve(f"{package}.{name.lstrip('.')}")
        found = self.resolve(name)
        if found is not None:
            return found
        if source is None:
            return None
        found = self.resolve(f"{module}.{name}")
        if found is not None:
            return found
        head, _, tail = name.partition(".")
        if head in source.imports:
            found = self.resolve(source.imports[head] + (f".{tail}" if tail else ""))
            if found is not None:
                return found
        owners = [q for q, s in source.symbols.items() if s.kind == "class" and f"{q}.{name}" in source.symbols]
        if len(owners) == 1:
            return Target(module, source.symbols[f"{owners[0]}.{name}"])
        return None
