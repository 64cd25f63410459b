"""Which lines of chosen upstream files ran: the tracer and the source facts the reach probes share.

A reach probe runs real vLLM code under :class:`LineTracer` and records, per upstream file, the line
numbers Python executed. Two facts about the source decide what such a record proves: the lines of
``def`` headers (:func:`def_header_lines`), which run when a module is imported and bind a name but
run no function, and the ``if``, ``while`` and ``for`` statements (:func:`guard_spans`) whose header
ran while their body did not (:func:`declined_headers`): the code looked and declined, so the body
was not entered.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterable
from pathlib import Path


def traced_name(rel: str, traced: Iterable[str]) -> bool:
    """Whether the upstream path ``rel`` is one of ``traced`` (a trailing ``/`` names a folder)."""
    return any(rel == t or (t.endswith("/") and rel.startswith(t)) for t in traced)


class LineTracer:
    """Line events of the traced upstream files under ``root``, as ``{upstream path: line numbers}``."""

    def __init__(self, root: Path, traced: Iterable[str]) -> None:
        self.root = str(root) + os.sep
        self.traced = tuple(traced)
        self.seen: dict[str, set[int]] = {}
        self._names: dict[str, str | None] = {}

    def _name(self, filename: str) -> str | None:
        if filename not in self._names:
            name = None
            if filename.startswith(self.root):
                rel = filename[len(self.root):].replace(os.sep, "/")
                if traced_name(rel, self.traced):
                    name = rel
            self._names[filename] = name
        return self._names[filename]

    def _global(self, frame, event, arg):
        name = self._name(frame.f_code.co_filename)
        if name is None:
            return None
        lines = self.seen.setdefault(name, set())

        def local(frame, event, arg):
            if event == "line":
                lines.add(frame.f_lineno)
            return local

        return local

    def start(self) -> None:
        sys.settrace(self._global)

    def stop(self) -> None:
        sys.settrace(None)

    def lines(self) -> dict[str, list[int]]:
        return {name: sorted(lines) for name, lines in sorted(self.seen.items())}


def def_header_lines(source: str) -> list[int]:
    """Lines of every ``def`` header (decorators and signature): at import they only bind a name."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            lines.update(range(first, node.body[0].lineno))
    return sorted(lines)


def _is_stub(node: ast.stmt) -> bool:
    """A docstring, ``...``, ``pass`` or ``raise NotImplementedError``: a statement that does no work."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return True
    if isinstance(node, ast.Pass):
        return True
    if isinstance(node, ast.Raise) and node.exc is not None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def working_lines(source: str) -> list[int]:
    """First lines of the statements that do work when they run: every statement but docstrings,
    ``...``, ``pass`` and ``raise NotImplementedError`` (an abstract method's body). A note with none
    (a signature and its docstring, say) has nothing a run could show."""
    return sorted({node.lineno for node in ast.walk(ast.parse(source))
                   if isinstance(node, ast.stmt) and not _is_stub(node)})


def guard_spans(source: str) -> list[list[int]]:
    """``[first header line, last header line, first body line, last body line]`` of every ``if``,
    ``elif``, ``while`` and ``for`` whose body starts on a line of its own: the header is the test
    (or the loop's target and iterable), which may span several lines."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.If, ast.While)):
            header_end = node.test.end_lineno or node.test.lineno
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            header_end = node.iter.end_lineno or node.iter.lineno
        else:
            continue
        first, last = node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno
        if first > header_end:
            spans.append([node.lineno, header_end, first, last])
    return sorted(spans)


def declined_headers(spans: list[list[int]], ran: set[int]) -> set[int]:
    """Header lines of ``if``/``while``/``for`` statements that ran while no line of their body did
    (:func:`guard_spans`): the code tested or looped over nothing, so the body was not entered."""
    return {n for start, end, first, last in spans
            if any(start <= m <= end for m in ran) and not any(first <= m <= last for m in ran)
            for n in range(start, end + 1)}
