"""The explorer's HTML: the data a page carries, the fragment the site embeds, a self-contained page.

A page carries everything as JSON in ``<script class="tx-data">`` (no request to a server), which
``assets/trace-explorer.js`` shows one step at a time:

``title``, ``slug``, ``semantics``, ``num_blocks``
    what the trace is; ``slug`` keys the exercise progress kept in the browser's localStorage;
``steps``
    one entry per step (op and outcome summaries, display state, events, expectation);
``links``
    op name -> ``{"notes": [{label, title, href}], "ref": {label, href} | null}``: the upstream
    notes of the call the op makes and the reference function that reproduced it;
``release``
    ``{"trace": release the trace was recorded at, "notes": annotated release linked, or null}``;
``questions``
    exercise mode's questions (:mod:`conformance.explorer.exercises`), ``why`` resolved to a link;
``divergence``
    only for a trace saved from a divergence: the step, the message, the first differing field
    and both sides' outcome and state (:func:`divergence_view`).

How links resolve is the caller's: the site links to its own annotated and reference pages, the
``explore`` command to the upstream lines on GitHub and the installed reference files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from html import escape
from pathlib import Path

from conformance.explorer.op_notes import OP_REFERENCE, NoteRef, note_ref, notes_release, op_notes, trace_release
from conformance.explorer.steps import op_summary, outcome_summary, view
from conformance.lockstep import first_difference

ASSETS = Path(__file__).parent / "assets"
SCRIPT = ASSETS / "trace-explorer.js"
STYLE = ASSETS / "trace-explorer.css"

NoteLink = Callable[[NoteRef], "str | None"]
RefLink = Callable[[str], "str | None"]


def num_blocks(trace: dict) -> int:
    cfg = trace["config"]
    return int(cfg.get("num_blocks", cfg.get("num_gpu_blocks", 0)))


def op_links(trace: dict, note_href: NoteLink, ref_href: RefLink) -> dict:
    """Per op name of the trace: its upstream notes and its reference function, as links."""
    semantics, release = trace["semantics"], trace_release(trace)
    links = {}
    for name in dict.fromkeys(op["op"] for op in trace["ops"]):
        notes = [{"label": n.note_id, "title": f"vLLM v{n.version} {n.path}", "href": note_href(n)}
                 for n in op_notes(semantics, release, name)]
        ref = OP_REFERENCE.get(semantics, {}).get(name)
        links[name] = {"notes": notes,
                       "ref": None if ref is None else {"label": ".".join(ref.split(".")[-2:]), "title": ref,
                                                         "href": ref_href(ref)}}
    return links


def resolved_questions(questions: list[dict], note_href: NoteLink, page_href: Callable[[str], str | None]) -> list[dict]:
    """Questions with ``why`` as ``{label, href}``: a note target, or ``page:<docs page>#anchor``."""
    out = []
    for q in questions:
        why = q.get("why")
        if why is None:
            link = None
        elif why.startswith("page:"):
            target = why[len("page:"):]
            link = {"label": q.get("why_label") or target, "href": page_href(target)}
        else:
            ref = note_ref(why)
            link = {"label": f"{ref.note_id} (vLLM v{ref.version} {ref.path.rsplit('/', 1)[-1]})",
                    "href": note_href(ref)}
        out.append({k: v for k, v in q.items() if k not in ("why", "why_label")} | {"why": link})
    return out


_BOXES_V1 = (("free_queue", "free"), ("num_free_blocks", "free"), ("blocks", "blocks"), ("cached", "cached"),
             ("requests", "tables"))
_BOXES_V0 = (("gpu/free", "free"), ("gpu/refcounts", "blocks"), ("gpu/cached", "cached"),
             ("gpu/evictor", "evictor"), ("cpu", "cpu"), ("tables", "tables"), ("full_slots", "tables"),
             ("tokens", "tables"), ("hashes", "tables"))


def difference_place(semantics: str, path: str) -> dict:
    """Where in the panel the first difference (a :func:`first_difference` path) shows."""
    field = path.split(":", 1)[0].lstrip("/")
    for prefix, box in (_BOXES_V1 if semantics == "v1" else _BOXES_V0):
        if field == prefix or field.startswith(prefix + "/") or field.startswith(prefix + "["):
            rest = field[len(prefix):]
            place: dict = {"box": box, "block": None, "row": None}
            if box == "blocks":
                m = re.match(r"^(?:\[|/)(\d+)", rest)
                place["block"] = int(m[1]) if m else None
            if box == "tables":
                m = re.match(r"^/([^/\[]+)", rest)
                place["row"] = m[1] if m else None
            return place
    return {"box": "state", "block": None, "row": None}


def _said(out: dict | None) -> str:
    """An outcome as a divergence shows it: a None result and a missing outcome are not alike."""
    if out is None:
        return "(no outcome saved)"
    return outcome_summary(out) or "→ null"


def divergence_view(trace: dict, steps: list[dict]) -> dict | None:
    """Both sides at the step a saved divergence happened, with the first field that differs.

    The reference side is the replay (``steps``, replayed with snapshots); the other side is what
    the failure file saved (``trace["sides"]``: outcome and snapshot of each system at the last
    op). Before that op both systems agreed at every step (the run compared them), so the other
    side's earlier states are the reference's. A trace without saved sides (older failure files)
    shows the message alone.
    """
    message = trace.get("divergence")
    if not message:
        return None
    k = len(trace["ops"])
    sides = trace.get("sides")
    result: dict = {"step": min(k, len(steps) - 1), "message": message, "first": None, "place": None, "sides": None}
    if not sides:
        return result
    semantics = trace["semantics"]
    ours = steps[result["step"]]
    # the side that is not the reference (the runs save the reference first; a reference paired
    # with itself, as tests do, has two "reference..." labels: then the second)
    other = next((s for s in sides if not str(s.get("label", "")).startswith("reference")), sides[-1])
    shown = [{"label": "reference (replayed now)", "out": _said(ours["outcome"]), "state": ours["state"]}]
    snap = other.get("snapshot")
    shown.append({"label": f"{other.get('label', 'vLLM')} (saved in the trace file)",
                  "out": _said(other.get("outcome")),
                  "state": view(semantics, snap) if isinstance(snap, dict) else None})
    result["sides"] = shown
    diff = None
    if ours["outcome"] is not None and other.get("outcome") is not None:
        diff = first_difference(ours["outcome"], other["outcome"])
        if diff:
            result["first"], result["place"] = f"outcome{diff if diff.startswith('/') else ': ' + diff}", {
                "box": "outcome", "block": None, "row": None}
    if diff is None and isinstance(snap, dict) and "snapshot" in ours:
        diff = first_difference(ours["snapshot"], snap)
        if diff:
            result["first"], result["place"] = diff, difference_place(semantics, diff)
    if diff is None:
        result["first"] = ("none: the reference replayed now agrees with the saved side (the reference "
                           "changed since the run, or the difference was in a crash)")
    return result


def explorer_data(title: str, slug: str, trace: dict, steps: list[dict], links: dict,
                  questions: list[dict], divergence: dict | None = None) -> dict:
    release = trace_release(trace)
    return {"title": title, "slug": slug, "semantics": trace["semantics"], "num_blocks": num_blocks(trace),
            "release": {"trace": release, "notes": notes_release(trace["semantics"], release)},
            "steps": [{"op": op_summary(s["op"]), "name": None if s["op"] is None else s["op"]["op"],
                       "out": outcome_summary(s["outcome"]), "state": s["state"], "events": s["events"],
                       "expect": s["expect"], "met": s["met"]} for s in steps],
            "links": links, "questions": questions, "divergence": divergence}


def step_item(k: int, step: dict) -> str:
    met = step["met"]
    badge = "" if met is None else (
        '<span class="tx-badge tx-ok" title="meets the value vLLM pins for this step">vLLM ✓</span>' if met
        else '<span class="tx-badge tx-bad" title="differs from the value vLLM pins for this step">vLLM ✗</span>')
    ev = step["events"]
    marks = "".join(
        f'<span class="tx-badge tx-{name}">{label}</span>'
        for name, label in (("evicted", "evict"), ("cow", "copy-on-write"), ("swapped", "swap"))
        if ev[name]
    )
    return (f'<li id="step-{k}" data-step="{k}"><a href="#step-{k}"><span class="tx-k">{k}</span> '
            f"<code>{escape(op_summary(step['op']))}</code></a> "
            f'<span class="tx-res">{escape(outcome_summary(step["outcome"]))}</span>{marks}{badge}</li>')


def explorer_html(data: dict, steps: list[dict], choices: list[tuple[str, str]]) -> str:
    """The explorer: trace picker (when there are ``choices``), controls, exercise mode, the state
    panel (filled by script) and the step list (plain HTML: works without script)."""
    if choices:
        options = "".join(
            f'<option value="{escape(url)}"{" selected" if title == data["title"] else ""}>{escape(title)}</option>'
            for title, url in choices)
        pick = f'<label class="tx-pick">Trace <select class="tx-select">{options}</select></label>'
    else:
        pick = f'<span class="tx-pick"><b>{escape(data["title"])}</b></span>'
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    last = len(steps) - 1
    items = "".join(step_item(k, s) for k, s in enumerate(steps))
    count = len(data["questions"])
    exercise = (
        f'<span class="tx-ex-bar" id="exercise"><button type="button" class="md-button tx-ex-toggle" '
        f'aria-pressed="false" title="predict each step before it is shown">Exercise mode ({count} questions)</button>'
        '<span class="tx-ex-progress" aria-live="polite"></span>'
        '<button type="button" class="md-button tx-ex-reset" hidden>reset progress</button></span>'
        if count else "")
    return (
        f'<section class="tx" data-search-exclude data-last="{last}">'
        f'<div class="tx-bar">{pick}'
        f'<span class="tx-controls"><button type="button" class="md-button tx-prev" title="back (←)">◀ back</button>'
        f'<input type="range" class="tx-range" min="0" max="{last}" value="0" aria-label="step">'
        f'<button type="button" class="md-button tx-next" title="forward (→)">forward ▶</button></span>'
        f'<span class="tx-pos">step <b class="tx-now">0</b> / {last}</span>{exercise}</div>'
        f'<div class="tx-body"><div class="tx-panel" aria-live="polite"><noscript>The state panel needs JavaScript; '
        "the list of steps works without it.</noscript></div>"
        f'<ol class="tx-steps" start="0">{items}</ol></div>'
        f'<script type="application/json" class="tx-data">{payload}</script></section>'
    )


#: What the site's theme gives the explorer and a page of its own must define itself.
STANDALONE_STYLE = """
:root { --md-default-fg-color: rgba(0,0,0,.87); --md-default-fg-color--light: rgba(0,0,0,.54);
  --md-default-fg-color--lighter: rgba(0,0,0,.32); --md-default-fg-color--lightest: rgba(0,0,0,.07);
  --md-default-bg-color: #fff; --md-code-font-family: ui-monospace, SFMono-Regular, Menlo, monospace; }
body { margin: 0; font: 20px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--md-default-fg-color); background: var(--md-default-bg-color); }
main.md-typeset { max-width: 70rem; margin: 0 auto; padding: 0.6rem 0.8rem 2rem; }
.md-typeset h1 { font-size: 1.2rem; font-weight: 400; margin: 0.4em 0; }
.md-typeset code { font-family: var(--md-code-font-family); font-size: 0.85em; overflow-wrap: anywhere; }
.md-typeset a { color: #3f51b5; }
.md-typeset .md-button { border: 1px solid #3f51b5; border-radius: 0.2em; background: none; color: #3f51b5;
  cursor: pointer; font: inherit; }
.md-typeset .md-button[aria-pressed="true"] { background: #3f51b5; color: #fff; }
.md-typeset .tx-bar { top: 0; }
"""


def standalone_page(data: dict, steps: list[dict], intro_html: str) -> str:
    """A page that needs nothing else: the explorer with its style and script inlined."""
    css = STYLE.read_text(encoding="utf-8")
    js = SCRIPT.read_text(encoding="utf-8").replace("</script", "<\\/script")
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Trace: {escape(data['title'])}</title>"
        f"<style>{STANDALONE_STYLE}\n{css}</style></head>\n"
        f'<body><main class="md-typeset"><h1>Trace: {escape(data["title"])}</h1>{intro_html}'
        f"{explorer_html(data, steps, [])}</main>\n<script>{js}</script></body></html>\n"
    )
