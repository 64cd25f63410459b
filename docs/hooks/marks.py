"""Verdict marks for the site's tables: inline SVG from mkdocs-material's own icons.

An emoji (a check mark, a cross) needs an emoji font, which a plain browser install may lack (the
Debian Chromium of the browser test shows empty boxes); these marks are paths inside the page.
:func:`icon_symbols` goes once at the top of a page; :func:`mark` refers to one symbol.
"""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

# kind -> (mkdocs-material icon, colour, what it means)
MARKS = {
    "passed": ("check-circle", "#2e7d32", "passed"),
    "failed": ("close-circle", "#c62828", "failed: a divergence"),
    "harness_error": ("alert-circle", "#ef6c00", "failed: a harness error, not a verdict"),
    "not_applicable": ("minus-circle-outline", "#757575", "not applicable"),
    "current": ("check-circle", "#2e7d32", "run at or after the last change to the reference and the harness"),
    "stale": ("history", "#ef6c00", "run before the reference or the harness last changed"),
    "unknown": ("help-circle-outline", "#757575", "unknown whether the run predates the last change"),
    "unbuilt": ("package-variant-remove", "#c62828", "the environment could not be built"),
}


def icon_symbols() -> str:
    """One hidden SVG holding every mark once (``<use>`` refers to them), from mkdocs-material's icons."""
    import material

    icons = Path(material.__file__).parent / "templates" / ".icons" / "material"
    symbols = []
    for name in sorted({icon for icon, _, _ in MARKS.values()}):
        svg = (icons / f"{name}.svg").read_text()
        paths = "".join(re.findall(r"<path [^>]*/>", svg))
        symbols.append(f'<symbol id="rm-{name}" viewBox="0 0 24 24">{paths}</symbol>')
    return ('<svg xmlns="http://www.w3.org/2000/svg" style="display:none" aria-hidden="true">'
            + "".join(symbols) + "</svg>\n\n<style>.md-typeset svg.rm{width:1.15em;height:1.15em;max-width:none;vertical-align:-0.2em;"
            "fill:currentColor}.md-typeset table:has(svg.rm) :is(td,th){padding:.5em .6em}"
            ".md-typeset table:has(svg.rm) td:has(> svg.rm){white-space:nowrap;width:1%}"
            ".md-typeset table:has(td > svg.rm){display:table;width:100%}"
            ".md-typeset table:has(td > svg.rm) th{min-width:0}</style>\n")


def mark(kind: str, title: str = "") -> str:
    icon, colour, meaning = MARKS[kind]
    text = escape(title or meaning, quote=True)
    return (f'<svg class="rm" style="color:{colour}" role="img" aria-label="{text}"><title>{text}</title>'
            f'<use href="#rm-{icon}"/></svg>')
