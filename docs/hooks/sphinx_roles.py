"""Turn the reference's Sphinx roles (``:attr:`V1Policy.x```, ``:class:`~a.b.C```) into Markdown.

Docstrings in ``reference/`` cross-reference each other with Sphinx roles. Rendered as plain
Markdown they would show as raw text (``:attr:`` followed by code), so before a docstring is
rendered every role becomes either a link to the symbol's lines on its source page (when
``resolve`` finds the target) or plain inline code (a builtin such as ``ValueError``). No role
survives either way.
"""

from __future__ import annotations

import re
from collections.abc import Callable

#: ``:role:`target``` with an optional ``py:`` domain and ``~`` (show the last component only).
ROLE = re.compile(r":(?:py:)?(?P<role>attr|class|meth|func|mod|data|exc|obj|const|ref|term)"
                  r":`(?P<tilde>~?)(?P<target>[^`]+)`")
#: What a leftover role looks like in built HTML (Markdown turned the backticks into <code>).
RENDERED_ROLE = re.compile(r":(?:py:)?(?:attr|class|meth|func|mod|data|exc|obj|const|ref|term):(?:<code>|`)")


def display_name(target: str, tilde: bool) -> str:
    """The text a role shows: the target without leading dots, or its last part under ``~``."""
    name = target.lstrip(".")
    return name.rpartition(".")[2] if tilde else name


def convert_roles(text: str, resolve: Callable[[str], str | None]) -> str:
    """Replace every role in Markdown ``text``; ``resolve(target)`` gives a URL or None."""

    def replace(match: re.Match[str]) -> str:
        target = match["target"].strip()
        shown = f"`{display_name(target, bool(match['tilde']))}`"
        url = resolve(target)
        return f"[{shown}]({url})" if url else shown

    return ROLE.sub(replace, text)
