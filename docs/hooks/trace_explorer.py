"""MkDocs hook: the trace explorer, one static page per trace, data computed at build time.

Every trace of the conformance corpus (``conformance/traces/<semantics>/*.json``, vLLM's own
``test_prefill`` at both versions among them) and the seed demo's V0 workload get a page
``trace-explorer/<slug>.md`` under "Trace explorer" in the navigation. The hook replays the trace
through the reference (:mod:`docs.hooks.trace_steps`) and writes into the page:

* the list of steps as plain HTML, each ``<li id="step-N">`` so ``#step-12`` is a citable link
  that works without JavaScript too;
* the replayed states as JSON in the page itself (no request to a server; the page works from a
  static host), which ``docs/assets/trace-explorer.js`` shows one step at a time: forwards and
  backwards with buttons, a slider or the left/right keys.

The page ``trace-explorer.md`` lists the traces in place of its marker paragraph. A trace that
cannot be replayed stops the build with its name.
"""

from __future__ import annotations

import json
from html import escape

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from mkdocs.utils import get_relative_url

from conformance.corpus import corpus
from docs.hooks.trace_steps import TraceSpec, corpus_specs, op_summary, outcome_summary, replay

NAV_SECTION = "Trace explorer"
INDEX_PAGE = "trace-explorer.md"
INDEX_MARKER = "TRACE-EXPLORER-INDEX"
PAGE_MARKER = "TRACE-EXPLORER-BODY"

_specs: list[TraceSpec] = []
_steps: dict[str, list[dict]] = {}


def trace_src_uri(slug: str) -> str:
    return f"trace-explorer/{slug}.md"


def trace_markdown(spec: TraceSpec, steps: list[dict]) -> str:
    trace = spec.trace
    cfg = ", ".join(f"{k}={v}" for k, v in trace["config"].items() if k not in ("entropy",))
    pinned = sum(1 for s in steps if s["expect"])
    return (
        "---\nhide:\n  - toc\n---\n\n"
        f"# Trace: {spec.title}\n\n"
        f'<p class="tx-source">{escape(trace.get("source") or "a trace of the conformance corpus")} · '
        f'semantics <code>{escape(trace["semantics"])}</code> · {len(steps) - 1} ops'
        + (f" · {pinned} steps pin vLLM's expected values" if pinned else "")
        + f'</p>\n\n<p class="tx-config"><code>{escape(cfg)}</code></p>\n\n{PAGE_MARKER}\n'
    )


def num_blocks(trace: dict) -> int:
    cfg = trace["config"]
    return int(cfg.get("num_blocks", cfg.get("num_gpu_blocks", 0)))


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


def explorer_html(spec: TraceSpec, steps: list[dict], choices: list[tuple[str, str]]) -> str:
    """The explorer: trace picker, controls, the state panel (filled by script) and the step list."""
    options = "".join(
        f'<option value="{escape(url)}"{" selected" if title == spec.title else ""}>{escape(title)}</option>'
        for title, url in choices
    )
    data = {"title": spec.title, "semantics": spec.trace["semantics"], "num_blocks": num_blocks(spec.trace),
            "steps": [{"op": op_summary(s["op"]), "out": outcome_summary(s["outcome"]), "state": s["state"],
                       "events": s["events"], "expect": s["expect"], "met": s["met"]} for s in steps]}
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    last = len(steps) - 1
    items = "".join(step_item(k, s) for k, s in enumerate(steps))
    return (
        f'<section class="tx" data-search-exclude data-last="{last}">'
        f'<div class="tx-bar"><label class="tx-pick">Trace <select class="tx-select">{options}</select></label>'
        f'<span class="tx-controls"><button type="button" class="md-button tx-prev" title="back (←)">◀ back</button>'
        f'<input type="range" class="tx-range" min="0" max="{last}" value="0" aria-label="step">'
        f'<button type="button" class="md-button tx-next" title="forward (→)">forward ▶</button></span>'
        f'<span class="tx-pos">step <b class="tx-now">0</b> / {last}</span></div>'
        f'<div class="tx-body"><div class="tx-panel" aria-live="polite"><noscript>The state panel needs JavaScript; '
        "the list of steps works without it.</noscript></div>"
        f'<ol class="tx-steps" start="0">{items}</ol></div>'
        f'<script type="application/json" class="tx-data">{payload}</script></section>'
    )


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Replay every trace on the reference and list the trace pages under "Trace explorer"."""
    global _specs, _steps
    _specs = corpus_specs(corpus())
    _steps = {}
    for spec in _specs:
        try:
            _steps[spec.slug] = replay(spec.trace)
        except Exception as err:  # a trace the reference cannot replay has no page
            raise PluginError(f"trace explorer: {spec.title} cannot be replayed on the reference: {err!r}") from None
    for item in config.nav or []:
        if isinstance(item, dict) and NAV_SECTION in item:
            children = item[NAV_SECTION]
            if not isinstance(children, list):
                children = [children]
            item[NAV_SECTION] = children + [{spec.title: trace_src_uri(spec.slug)} for spec in _specs]
            break
    else:
        if config.nav is not None:
            raise PluginError(f"mkdocs.yml nav has no '{NAV_SECTION}' section for the trace pages")
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for spec in _specs:
        files.append(File.generated(config, trace_src_uri(spec.slug), content=trace_markdown(spec, _steps[spec.slug])))
    return files


def on_page_markdown(markdown_text: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Fill the explorer's index page with a table of the traces."""
    if page.file.src_uri != INDEX_PAGE:
        return markdown_text
    rows = ["| Trace | Semantics | Ops | Source |", "| --- | --- | --- | --- |"]
    for spec in _specs:
        link = get_relative_url(trace_src_uri(spec.slug), INDEX_PAGE)
        source = (spec.trace.get("source") or "conformance corpus").replace("|", "\\|")
        rows.append(f"| [{spec.title}]({link}) | {spec.trace['semantics']} | {len(spec.trace['ops'])} | {source} |")
    return markdown_text.replace(INDEX_MARKER, "\n".join(rows))


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    spec = next((s for s in _specs if trace_src_uri(s.slug) == page.file.src_uri), None)
    if spec is None:
        return html
    choices = []
    for other in _specs:
        target = files.get_file_from_path(trace_src_uri(other.slug))
        if target is not None:
            choices.append((other.title, get_relative_url(target.url, page.url)))
    steps = _steps[spec.slug]
    html = html.replace(f"<p>{PAGE_MARKER}</p>", explorer_html(spec, steps, choices), 1)
    if page.present_anchor_ids is not None:
        page.present_anchor_ids |= {f"step-{k}" for k in range(len(steps))}
    return html
