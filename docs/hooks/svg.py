"""A very small SVG writer for the site's build-time figures.

The figures are boxes, labels and arrows; a plotting library would add weight and hide the
geometry. Each call appends one element to a :class:`Canvas`; :meth:`Canvas.render` returns the
finished ``<svg>`` text. Text colour uses CSS classes (``fg``, ``muted``) that the site's
stylesheet maps to the theme's colours, so the figures stay legible in light and dark mode; box
fills are pale and always carry dark text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

#: Fills by meaning, shared by all figures so a colour means the same thing everywhere.
FILL = {
    "free": "#eceff1",
    "used": "#bbdefb",
    "shared": "#c8e6c9",
    "cow": "#ffe0b2",
    "cached": "#e1bee7",
    "evicted": "#ffcdd2",
    "logical": "#fff9c4",
    "result": "#b2ebf2",
}
INK = "#263238"  # text on pale fills


@dataclass
class Canvas:
    """An SVG drawing of fixed size, built element by element."""

    width: int
    height: int
    title: str
    key: str  # unique per page: names the arrowhead marker
    parts: list[str] = field(default_factory=list)

    def rect(self, x: float, y: float, w: float, h: float, fill: str, stroke: str = "#546e7a",
             dash: bool = False) -> None:
        dash_attr = ' stroke-dasharray="4 3"' if dash else ""
        self.parts.append(
            f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" rx="3" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="1.2"{dash_attr}/>'
        )

    def text(self, x: float, y: float, content: str, size: int = 12, anchor: str = "middle",
             cls: str = "fg", bold: bool = False, on_fill: bool = False) -> None:
        weight = ' font-weight="bold"' if bold else ""
        colour = f' fill="{INK}"' if on_fill else f' class="{cls}"'
        self.parts.append(
            f'<text x="{x:g}" y="{y:g}" font-size="{size}" text-anchor="{anchor}"{weight}{colour} '
            f'font-family="sans-serif">{escape(content)}</text>'
        )

    def arrow(self, x1: float, y1: float, x2: float, y2: float, colour: str = "#607d8b") -> None:
        self.parts.append(
            f'<line x1="{x1:g}" y1="{y1:g}" x2="{x2:g}" y2="{y2:g}" stroke="{colour}" '
            f'stroke-width="1.4" marker-end="url(#arrow-{self.key})"/>'
        )

    def render(self) -> str:
        """The complete SVG element (inline-able in HTML, no external resources)."""
        defs = (
            f'<defs><marker id="arrow-{self.key}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
            'fill="#607d8b"/></marker></defs>'
        )
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" '
            f'width="{self.width}" height="{self.height}" role="img" aria-label="{escape(self.title)}">'
            f"<title>{escape(self.title)}</title>{defs}{''.join(self.parts)}</svg>"
        )
