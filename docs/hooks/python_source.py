"""Read a Python module statically: its symbols with their line ranges, docstrings and imports.

The reference source pages show every module of ``reference/`` with its prose beside its code,
and anchor every symbol by its dotted path. Nothing is imported: the module is parsed with
:mod:`ast`, so a page can never run code, and line numbers are exactly the file's.

A *symbol* is the module itself (qualname ``""``), a class, a function, a method (any
function directly in a class body, nested classes included) or an attribute (a name bound by a
plain or annotated assignment at module or class level: constants, dataclass fields).
Functions nested inside functions are part of their enclosing function.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field

from docs.hooks.code_lines import split_lines


@dataclass(frozen=True)
class Symbol:
    """One named thing in a module, lines ``start..end`` (1-based, inclusive, decorators included)."""

    qualname: str  # "" for the module, "BlockPool", "BlockPool.touch", "V1_POLICIES"
    kind: str  # module | class | function | method | attribute
    start: int
    end: int
    doc: str | None = None  # the docstring, cleaned (inspect.cleandoc)
    doc_start: int | None = None  # lines of the docstring literal
    doc_end: int | None = None


@dataclass
class ModuleSource:
    """A parsed module: its text, its symbols by qualname, and the names it imports."""

    name: str  # dotted module name, e.g. reference.blocks.v1.block_pool
    text: str
    symbols: dict[str, Symbol] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)  # local name -> dotted target
    is_package: bool = False

    @property
    def line_count(self) -> int:
        return len(split_lines(self.text))

    def blocks(self) -> list[Symbol]:
        """Classes, functions and methods, in source order (the units that get their own prose)."""
        return sorted((s for s in self.symbols.values() if s.kind in ("class", "function", "method")),
                      key=lambda s: s.start)

    def enclosing(self, line: int) -> Symbol:
        """The innermost class/function/method whose lines contain ``line`` (else the module)."""
        best = self.symbols[""]
        for sym in self.blocks():
            if sym.start <= line <= sym.end and (best.qualname == "" or sym.end - sym.start <= best.end - best.start):
                best = sym
        return best


def _docstring(node: ast.AST) -> tuple[str | None, int | None, int | None]:
    body = getattr(node, "body", None)
    if not body or not isinstance(body[0], ast.Expr):
        return None, None, None
    value = body[0].value
    if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
        return None, None, None
    return inspect.cleandoc(value.value), body[0].lineno, body[0].end_lineno


def _assigned_names(node: ast.stmt) -> list[str]:
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, ast.AnnAssign):
        targets = [node.target]
    names: list[str] = []
    for target in targets:
        elts = target.elts if isinstance(target, ast.Tuple) else [target]
        names += [e.id for e in elts if isinstance(e, ast.Name)]
    return names


def _first_line(node: ast.AST) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno] + [d.lineno for d in decorators])


def _package_of(name: str, is_package: bool) -> str:
    return name if is_package else name.rpartition(".")[0]


def parse_module(name: str, text: str, is_package: bool = False) -> ModuleSource:
    """Parse ``text`` as module ``name``. A syntax error propagates (the module cannot be shown)."""
    tree = ast.parse(text)
    mod = ModuleSource(name, text, is_package=is_package)
    doc, ds, de = _docstring(tree)
    mod.symbols[""] = Symbol("", "module", 1, max(1, mod.line_count), doc, ds, de)

    def visit(body: list[ast.stmt], prefix: str, in_class: bool) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = prefix + node.name
                kind = "class" if isinstance(node, ast.ClassDef) else ("method" if in_class else "function")
                d, s, e = _docstring(node)
                mod.symbols[qual] = Symbol(qual, kind, _first_line(node), node.end_lineno or node.lineno, d, s, e)
                if isinstance(node, ast.ClassDef):
                    visit(node.body, qual + ".", True)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for target in _assigned_names(node):
                    qual = prefix + target
                    if qual not in mod.symbols:
                        mod.symbols[qual] = Symbol(qual, "attribute", node.lineno, node.end_lineno or node.lineno)
            elif isinstance(node, (ast.If, ast.Try)) and not in_class:
                # ``if TYPE_CHECKING:`` imports and the like: look inside for imports only
                for child in ast.walk(node):
                    if isinstance(child, (ast.Import, ast.ImportFrom)):
                        record_import(child)
            if isinstance(node, (ast.Import, ast.ImportFrom)) and not in_class:
                record_import(node)

    def record_import(node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.partition(".")[0]
                mod.imports[local] = alias.name if alias.asname else alias.name.partition(".")[0]
            return
        base = node.module or ""
        if node.level:
            package = _package_of(name, is_package)
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        for alias in node.names:
            if alias.name != "*":
                mod.imports[alias.asname or alias.name] = f"{base}.{alias.name}"

    visit(tree.body, "", False)
    return mod


def comment_block_above(lines: list[str], line: int) -> int:
    """The first line of the run of full-line comments directly above ``line`` (else ``line``).

    Lines are 1-based; a blank line ends the run, so a comment separated from a definition by a
    blank line is not taken as its prose.
    """
    first = line
    while first > 1 and lines[first - 2].lstrip().startswith("#"):
        first -= 1
    return first
