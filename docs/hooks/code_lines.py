"""Split syntax-highlighted source into one HTML fragment per upstream line.

An annotated page shows upstream code with its real line numbers, and every line carries its own
anchor (``#L123``) so that a note, a theory page or a reader can point at it. Pygments highlights a
whole file at once, and a token may span several lines (a docstring, a multi-line comment), so its
ordinary HTML output cannot be cut at newlines without breaking the ``<span>`` nesting. Here we walk
the token stream ourselves and close every span at the end of a line, reopening it on the next, so
each line is a self-contained, correctly nested fragment that uses the same CSS classes as the
site's other highlighted code (``.highlight .k`` and friends).
"""

from __future__ import annotations

import functools
from html import escape

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_for_filename
from pygments.token import STANDARD_TYPES, _TokenType
from pygments.util import ClassNotFound


def split_lines(text: str) -> list[str]:
    """The file's lines without their newline, numbered as an editor numbers them.

    A final newline does not start an extra line; a file without one still ends with its last
    line. This is the numbering upstream's ``#L<n>`` links and the annotations' ranges use.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def lexer_for(path: str) -> Lexer | None:
    """The Pygments lexer for an upstream path (by file name), or None for plain text."""
    try:
        return get_lexer_for_filename(path, stripnl=False, stripall=False, ensurenl=True, tabsize=0)
    except ClassNotFound:
        return None


def css_class(token_type: _TokenType) -> str:
    """The short Pygments CSS class of a token type, falling back to its nearest named parent."""
    while token_type not in STANDARD_TYPES:
        token_type = token_type.parent
    return STANDARD_TYPES[token_type]


def highlight_lines(text: str, path: str) -> list[str]:
    """One HTML fragment per line of ``text`` (as numbered by :func:`split_lines`).

    Fragments are escaped, each span is closed on the line where it opened, and the number of
    fragments always equals the number of lines, so line ``n`` of the file is fragment ``n - 1``.
    The result is remembered per (text, file name): an upstream file appears on its annotated page
    and on its comparison page, and highlighting is most of a site build's time.
    """
    return list(highlight_cached(text, path))


@functools.lru_cache(maxsize=128)
def highlight_cached(text: str, path: str) -> tuple[str, ...]:
    """:func:`highlight_lines`, computed once per distinct (text, path)."""
    return tuple(highlight_uncached(text, path))


def highlight_uncached(text: str, path: str) -> list[str]:
    """:func:`highlight_lines` without the cache."""
    lines = split_lines(text)
    lexer = lexer_for(path)
    if lexer is None:
        return [escape(line) for line in lines]
    out: list[list[str]] = [[]]
    for token_type, value in lexer.get_tokens(text):
        cls = css_class(token_type)
        parts = value.split("\n")
        for index, part in enumerate(parts):
            if index:
                out.append([])
            if part:
                chunk = escape(part)
                out[-1].append(f'<span class="{cls}">{chunk}</span>' if cls else chunk)
    fragments = ["".join(parts) for parts in out]
    # The lexer ensures a final newline, which opens one empty trailing fragment; drop any excess
    # so that fragments line up with split_lines exactly.
    fragments = fragments[: len(lines)]
    if len(fragments) != len(lines):  # pragma: no cover - defensive: lexers never drop text
        raise RuntimeError(f"{path}: highlighting produced {len(fragments)} lines for {len(lines)}")
    return fragments
