"""The last commit that changed what the reference and the harness *execute*, as opposed to their prose.

A conformance verdict depends on the code that ran. A commit that edits only the docstrings or the
comments of Python files under the matrix's paths cannot change a verdict, so the releases page
does not count it when it asks whether a verdict is older than the reference and the harness it
names. Everything else counts, conservatively: any change to a file that is not Python, a Python
file added, deleted or not parseable on either side, a changed string that is not a docstring (a
change-log entry's text, say), and a commit git cannot diff against a parent.

Two versions of a Python file are the same code when their syntax trees are equal once the
docstrings are dropped (the first statement of a module, class or function body, when it is a
string constant); comments and line positions are not part of a syntax tree.
"""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Callable, Sequence

Git = Callable[..., "subprocess.CompletedProcess | None"]


def code_of(source: str) -> str | None:
    """A Python source's syntax tree without docstrings, as text; None if it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:]
    return ast.dump(tree, include_attributes=False)


def _ok(done: subprocess.CompletedProcess | None) -> str | None:
    return done.stdout if done is not None and done.returncode == 0 else None


def changes_code(git: Git, commit: str, paths: Sequence[str]) -> bool:
    """Whether ``commit`` changes the code (not only docstrings or comments) of a file under ``paths``."""
    files = _ok(git("diff", "--name-only", f"{commit}^", commit, "--", *paths))
    names = files.splitlines() if files else []
    if not names:
        return True  # a root commit, a failed diff, or nothing to compare: count it
    for name in names:
        if not name.endswith(".py"):
            return True
        before, after = _ok(git("show", f"{commit}^:{name}")), _ok(git("show", f"{commit}:{name}"))
        if before is None or after is None:
            return True
        old, new = code_of(before), code_of(after)
        if old is None or new is None or old != new:
            return True
    return False


def last_code_change(git: Git, paths: Sequence[str]) -> tuple[str, str] | None:
    """(commit, its day) of the newest commit that changes code under ``paths``; None when git
    cannot be asked or no such commit exists."""
    log = _ok(git("log", "--format=%H %cs", "--", *paths))
    if log is None:
        return None
    for line in log.splitlines():
        commit, day = line.split()
        if changes_code(git, commit, paths):
            return commit, day
    return None
