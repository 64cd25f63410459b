"""Reachability badges and their legend on the annotated source pages.

Each note may carry a reachability status (``annotations.reach``); this module turns it into a
small badge placed above the note's prose (one per route when several routes reach the lines), and writes the legend that explains the four badges
and what "the serving path" means for the page (the file's ``serving:`` header). A note without a
status of its own shows the file's badges without their reasons, which the legend gives once (a
file reached by several routes would otherwise repeat the same paragraphs above every note); a
note's own route that is also one of the file's routes links to the legend the same way. Markdown inside
the setting and the why (code spans, citations) is rendered by the caller's Markdown instance.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from html import escape

from annotations import reach_probe, reach_probe_v1
from annotations.line_trace import traced_name
from annotations.model import AnnotationFile, Note
from annotations.probe_report import entered_lines
from annotations.reach import LABELS, STATUSES, Reach
from annotations.reach_probe_v1_workload import CONFIGS

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

#: The V1 probe's configurations that add settings to a kind of model's defaults.
_V1_SETTINGS = [name for name, config in CONFIGS.items() if config.get("settings")]

#: The probes that check badges by running vLLM: (release, traced upstream paths, what it ran, test,
#: the committed report's loader).
PROBES = (
    (reach_probe.VERSION, reach_probe.TRACED, "the real V0 engine step on CPU, in the defaults and in each"
     " setting the notes name", "tests/test_reach_probe.py", reach_probe.load_report),
    (reach_probe_v1.VERSION, reach_probe_v1.TRACED,
     f"the real V1 scheduler on CPU for {len(CONFIGS) - len(_V1_SETTINGS)} kinds of model with default"
     f" settings and in {len(_V1_SETTINGS)} configurations that add settings, an EAGLE drafter and a KV connector"
     " among them", "tests/test_reach_probe_v1.py", reach_probe_v1.load_report),
)


def probe_sentence(ann: AnnotationFile) -> str:
    """How this page's badges were checked by running vLLM, or ``""`` for a file no probe traces."""
    for version, traced, ran, test, _ in PROBES:
        if ann.version == version and traced_name(ann.upstream, traced):
            return (f"<p><strong>Checked by running:</strong> the annotations' reach probe ran {escape(ran)},"
                    f" recorded which lines of this file executed, and <code>{escape(test)}</code> fails"
                    " when lines whose badges all say \u201cnot reached\u201d or \u201conly with a setting\u201d ran"
                    " without that setting. Under each note's badge, the configurations in which its lines"
                    " ran are listed (hover a name for the kind of model or the settings).</p>")
    return ""


@cache
def _probe_report(version: str) -> dict:
    return next(load() for release, _, _, _, load in PROBES if release == version)


def probe_runs(ann: AnnotationFile, note: Note) -> dict[str, str] | None:
    """The probe configurations in which lines of the note ran, each with what it stands for (the
    kind of model, or the settings); ``None`` for a file no probe traces. Lines run at import are not
    counted, nor the header of an ``if``, ``while`` or ``for`` whose body did not run."""
    if not probe_sentence(ann):
        return None
    report = _probe_report(ann.version)
    runs = {}
    for name, config in report["configs"].items():
        if any(note.start <= n <= note.end for n in entered_lines(report, name, ann.upstream)):
            runs[name] = config.get("model") or ", ".join(config.get("settings", []))
    return runs


def probe_runs_html(ann: AnnotationFile, note: Note) -> str:
    """One line under a probed note's badge: where the reach probe ran its lines. Empty on a page no
    probe traces and for a note with nothing a run could show (a signature, a docstring)."""
    runs = probe_runs(ann, note)
    if runs is None:
        return ""
    report = _probe_report(ann.version)
    total = len(report["configs"])
    inside = range(note.start, note.end + 1)
    defs = set(report["def_headers"].get(ann.upstream, []))
    if not runs:
        if any(n in inside for n in set(report["imported"].get(ann.upstream, [])) - defs):
            return ('<div class="ann-reach-probe">In the reach probe these lines ran only while the module was'
                    f" imported, in none of its {total} configurations.</div>\n")
        if not any(n in inside for n in set(report["working"].get(ann.upstream, [])) - defs):
            return ""
        return (f'<div class="ann-reach-probe">In the reach probe these lines ran in none of its {total}'
                " configurations.</div>\n")
    if len(runs) == total:
        return f'<div class="ann-reach-probe">In the reach probe these lines ran in all {total} of its configurations.</div>\n'
    names = ", ".join(f'<code title="{escape(what, quote=True)}">{escape(name)}</code>' for name, what in runs.items())
    return (f'<div class="ann-reach-probe">In the reach probe these lines ran in {len(runs)} of its {total}'
            f" configurations: {names}.</div>\n")


def _inline(render: Render, markdown_text: str) -> str:
    html = render(markdown_text).strip()
    if html.startswith("<p>") and html.endswith("</p>") and html.count("<p>") == 1:
        html = html[3:-4]
    return html


#: The id of the legend, which the file-status badges of notes link to.
LEGEND_ID = "reach-legend"


#: The link a route shows in place of reasons that the legend gives.
_LEGEND_LINK = (f'<a class="ann-reach-file" href="#{LEGEND_ID}" title="the reasons are in this page\'s legend">'
                "{text}</a>")


def _route_html(route: Reach, render: Render, first: bool, with_why: bool = True, file_route: bool = False) -> str:
    """One route's badge: its label (read after "or" when it is not the first) and its why; a route
    that is also one of the file's routes (``file_route``) links to the legend instead of its why."""
    text = escape(route.label)
    if route.status == "setting":
        text = f"reached only with {_inline(render, route.setting)}"
    elif route.status == "models":
        text = f"reached only for models {_inline(render, route.setting)}"
    if not first:
        text = "or " + text.removeprefix("reached only ")
    why = ""
    if file_route:
        why = " " + _LEGEND_LINK.format(text="as in this file's status: why")
    elif route.why and with_why:
        why = f'<span class="ann-reach-why">{_inline(render, route.why)}</span>'
    return f'<div class="{CSS_CLASS[route.status]}"><span class="ann-reach-label">{text}</span>{why}</div>\n'


def badge_html(
    reach: Reach | None, render: Render, with_why: bool = True, file_routes: frozenset[Reach] = frozenset()
) -> str:
    """The badge of a status (empty when the note has none); a status of several routes gets one
    badge per route, the later ones read after "or", inside one group. A route among
    ``file_routes`` (the file's own) links to the legend, which gives its reasons, instead of
    repeating them."""
    if reach is None:
        return ""
    if not reach.also:
        return _route_html(reach, render, True, with_why, reach in file_routes)
    routes = "".join(
        _route_html(route, render, i == 0, with_why, route in file_routes) for i, route in enumerate(reach.routes)
    )
    return f'<div class="ann-reach-routes">{routes}</div>\n'


def note_badge_html(ann: AnnotationFile, note: Note, render: Render) -> str:
    """The badge of a note: its own status with its reasons (a route it shares with its file links
    to the legend instead), else its file's status, whose reasons the legend gives (linked from the
    badge)."""
    runs = probe_runs_html(ann, note)
    if note.reach is not None or ann.reach is None:
        file_routes = frozenset(ann.reach.routes) if ann.reach is not None else frozenset()
        return badge_html(note.reach, render, file_routes=file_routes) + runs
    link = _LEGEND_LINK.format(text="this file's status: why")
    return f'<div class="ann-reach-inherited">{badge_html(ann.reach, render, with_why=False)}{link}</div>\n' + runs



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
    statuses = [ann.reach, *(n.reach for n in ann.notes)]
    routes = (
        "<p>Lines that several routes reach carry one badge per route, the later ones read after"
        " &ldquo;or&rdquo;: any one of them runs the lines.</p>"
        if any(r is not None and r.also for r in statuses) else ""
    )
    own = (
        "<p><strong>This file's status</strong>, shown without its reasons on every note that has no"
        f" status of its own:</p>{badge_html(ann.reach, render)}" if ann.reach is not None else ""
    )
    return (
        f'<div class="ann-reach-legend" id="{LEGEND_ID}"><p><strong>Reachability badges.</strong> Each badge says whether '
        f"vLLM {escape(ann.version)} runs the lines of its note when serving.</p>{serving}<ul>{rows}</ul>{routes}{own}"
        f"{probe_sentence(ann)}</div>\n"
    )
