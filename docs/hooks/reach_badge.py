"""Reachability badges and their legend on the annotated source pages.

Each note may carry a reachability status (``annotations.reach``); this module turns it into a
small badge placed above the note's prose, and writes the legend that explains the four badges
and what "the serving path" means for the page (the file's ``serving:`` header). Markdown inside
the setting and the why (code spans, citations) is rendered by the caller's Markdown instance.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from annotations.model import AnnotationFile, Note
from annotations.reach import LABELS, STATUSES, Reach

#: One CSS class per status (``docs/assets/annotated.css`` colours them).
CSS_CLASS = {status: f"ann-reach ann-reach-{status}" for status in STATUSES}
#: The legend's explanation of each status.
MEANING = {
    "default": "these lines run on this page's serving path with default settings, for every model it covers.",
    "models": "these lines run with default settings, but only when serving the models the badge names"
    " (it cites the code that selects them).",
    "setting": "these lines run only when the named setting is made (the badge names it).",
    "unreached": "nothing on the serving path runs these lines; the note cites the callers that show it.",
}

Render = Callable[[str], str]  # Markdown -> HTML (inline content is wrapped in <p> by Markdown)


def _inline(render: Render, markdown_text: str) -> str:
    html = render(markdown_text).strip()
    if html.startswith("<p>") and html.endswith("</p>") and html.count("<p>") == 1:
        html = html[3:-4]
    return html


def badge_html(reach: Reach | None, render: Render) -> str:
    """The badge of one status (empty when the note has none)."""
    if reach is None:
        return ""
    text = escape(reach.label)
    if reach.status == "setting":
        text = f"reached only with {_inline(render, reach.setting)}"
    elif reach.status == "models":
        text = f"reached only for models {_inline(render, reach.setting)}"
    why = f'<span class="ann-reach-why">{_inline(render, reach.why)}</span>' if reach.why else ""
    return f'<div class="{CSS_CLASS[reach.status]}"><span class="ann-reach-label">{text}</span>{why}</div>\n'


def note_badge_html(ann: AnnotationFile, note: Note, render: Render) -> str:
    """The badge of a note: its own status, else its file's default."""
    return badge_html(ann.reach_of(note), render)


def legend_html(ann: AnnotationFile, render: Render) -> str:
    """The page legend: what serving means here and what each badge says (empty without statuses)."""
    if ann.reach is None and not any(n.reach for n in ann.notes):
        return ""
    rows = "".join(
        f'<li><span class="{CSS_CLASS[s]}"><span class="ann-reach-label">{escape(LABELS[s])}</span></span> '
        f"{escape(MEANING[s])}</li>"
        for s in STATUSES
    )
    serving = f"<p><strong>Serving path on this page:</strong> {_inline(render, ann.serving)}</p>" if ann.serving else ""
    return (
        '<div class="ann-reach-legend"><p><strong>Reachability badges.</strong> Each badge says whether '
        f"vLLM {escape(ann.version)} runs the lines of its note when serving.</p>{serving}<ul>{rows}</ul></div>\n"
    )
