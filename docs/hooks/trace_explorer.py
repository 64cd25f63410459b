"""MkDocs hook: the trace explorer, one static page per trace, data and exercises computed at build time.

Every trace of the conformance corpus (``conformance/traces/<semantics>/*.json``, vLLM's own
``test_prefill`` at both versions among them) and the seed demo's two experiments get a page
``trace-explorer/<slug>.md`` under "Trace explorer" in the navigation. The hook replays the trace
through the reference (:mod:`conformance.explorer.steps`), makes the exercise questions from the
replayed states (:mod:`conformance.explorer.exercises`), and writes into the page
(:func:`conformance.explorer.page.explorer_html`):

* the list of steps as plain HTML, each ``<li id="step-N">`` so ``#step-12`` is a citable link
  that works without JavaScript too (``#exercise`` opens exercise mode);
* the replayed states, the questions with their answers, and each op's links (the upstream notes
  of the call it makes, on the annotated pages; the reference function, on the reference pages) as
  JSON in the page itself, which ``assets/trace-explorer.js`` shows one step at a time.

The script and style are the ones ``python -m conformance explore`` inlines into its own pages
(``conformance/explorer/assets/``); the hook adds them to the site as ``assets/trace-explorer.*``.

:data:`EXERCISE_SETS` names the trace behind each theory page's exercises, the seed demo first;
``trace-explorer.md`` lists them and the traces in place of its marker paragraphs. A trace that
cannot be replayed stops the build with its name; a link to a note or reference function that
is not on the site is logged as a warning (a strict build fails).
"""

from __future__ import annotations

import logging
from html import escape

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from mkdocs.utils import get_relative_url

from conformance.corpus import corpus
from conformance.explorer.exercises import trace_questions
from conformance.explorer.op_notes import NoteRef
from conformance.explorer.page import SCRIPT, STYLE, explorer_data, explorer_html, op_links, resolved_questions
from conformance.explorer.steps import replay
from docs.hooks.page_markers import replace_marker, repo_root
from docs.hooks.reference_index import ReferenceIndex, source_src_uri
from docs.hooks.source_page import page_src_uri
from docs.hooks.trace_steps import SEED_FIFTH_TOKEN_SLUG, TraceSpec, corpus_specs

log = logging.getLogger("mkdocs.hooks.trace_explorer")

NAV_SECTION = "Trace explorer"
INDEX_PAGE = "trace-explorer.md"
INDEX_MARKER = "TRACE-EXPLORER-INDEX"
EXERCISES_MARKER = "TRACE-EXPLORER-EXERCISES"
PAGE_MARKER = "TRACE-EXPLORER-BODY"
ASSETS = {"assets/trace-explorer.js": SCRIPT, "assets/trace-explorer.css": STYLE}

#: (trace slug, what it exercises, the page it belongs to), the seed demo first. Each page links to
#: its set at ``trace-explorer/<slug>.md#exercise`` (tests/site/test_trace_explorer.py checks it).
EXERCISE_SETS: list[tuple[str, str, str]] = [
    (SEED_FIFTH_TOKEN_SLUG, "The seed demo: blocks of four, the fifth token needs a second block", "seed-demo.md"),
    ("v1-upstream-test-prefill-v0.33.0", "Prefix caching: hits, shared blocks, the free queue's order",
     "theory/prefix-caching.md"),
    ("v1-upstream-sliding-window-remove-skipped-v0.33.0", "Sliding window: blocks released behind the window",
     "theory/sliding-window.md"),
    ("v0-fork-copy-on-write", "Copy-on-write: a fork shares blocks until the child writes", "theory/copy-on-write.md"),
    ("v1-measured-sliding-window-null-count-v0.33.0", "Chunked prefill: a prompt allocated chunk by chunk",
     "theory/chunked-prefill.md"),
]

#: The seed demo's two placements of logical blocks 0 and 1 (docs/seed-demo.md).
SEED_PLACEMENTS = ([4, 1], [2, 7])
SEED_WHY = "page:seed-demo.md#one-sequence-two-placements"

_specs: list[TraceSpec] = []
_steps: dict[str, list[dict]] = {}
_questions: dict[str, list[dict]] = {}


def trace_src_uri(slug: str) -> str:
    return f"trace-explorer/{slug}.md"


def seed_questions(steps: list[dict]) -> list[dict]:
    """The seed demo's attention questions, answered by the reference's decode oracle: the output
    after the fifth token in each placement (3 in both: where blocks live changes nothing)."""
    from docs.hooks.seed_data import placement_demo

    k = len(steps) - 1
    questions = []
    for i, table in enumerate(SEED_PLACEMENTS):
        value = placement_demo(table).output_by_length[5]
        questions.append({
            "id": f"s{k}-attention-{i}", "step": k, "kind": "number", "q": "attention", "answer": value,
            "why": SEED_WHY, "why_label": "the seed demo: one sequence, two placements",
            "label": f"the output with blocks {table[0]} and {table[1]}",
            "prompt": f"Place logical blocks 0 and 1 in physical blocks <b>{table[0]} and {table[1]}</b>. Every "
                      "key is the same and token <i>t</i> carries the value <i>t</i>, so every score ties. What "
                      "does decode attention output after the fifth token?"})
    return questions


def trace_markdown(spec: TraceSpec, steps: list[dict], questions: int) -> str:
    trace = spec.trace
    cfg = ", ".join(f"{k}={v}" for k, v in trace["config"].items() if k not in ("entropy",))
    pinned = sum(1 for s in steps if s["expect"])
    return (
        "---\nhide:\n  - toc\n---\n\n"
        f"# Trace: {spec.title}\n\n"
        f'<p class="tx-source">{escape(trace.get("source") or "a trace of the conformance corpus")} · '
        f'semantics <code>{escape(trace["semantics"])}</code> · {len(steps) - 1} ops'
        + (f" · {pinned} steps pin vLLM's expected values" if pinned else "")
        + (f' · <a href="#exercise">{questions} exercise questions</a>' if questions else "")
        + f'</p>\n\n<p class="tx-config"><code>{escape(cfg)}</code></p>\n\n{PAGE_MARKER}\n'
    )


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Replay every trace on the reference, make its questions, list the pages under "Trace explorer"."""
    global _specs, _steps, _questions
    _specs = corpus_specs(corpus())
    _steps, _questions = {}, {}
    for spec in _specs:
        try:
            steps = replay(spec.trace)
        except Exception as err:  # noqa: BLE001 - a trace the reference cannot replay has no page
            raise PluginError(f"trace explorer: {spec.title} cannot be replayed on the reference: {err!r}") from None
        _steps[spec.slug] = steps
        _questions[spec.slug] = trace_questions(spec.trace, steps)
        if spec.slug == SEED_FIFTH_TOKEN_SLUG:
            _questions[spec.slug] += seed_questions(steps)
    missing = [slug for slug, _, _ in EXERCISE_SETS if not _questions.get(slug)]
    if missing:
        raise PluginError(f"trace explorer: exercise sets without a trace or without questions: {', '.join(missing)}")
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
        files.append(File.generated(config, trace_src_uri(spec.slug),
                                    content=trace_markdown(spec, _steps[spec.slug], len(_questions[spec.slug]))))
    for uri, path in ASSETS.items():
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def on_page_markdown(markdown_text: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Fill the explorer's index page with the exercise sets and a table of the traces."""
    if page.file.src_uri != INDEX_PAGE:
        return markdown_text
    rows = ["| Trace | Semantics | Ops | Source |", "| --- | --- | --- | --- |"]
    for spec in _specs:
        link = get_relative_url(trace_src_uri(spec.slug), INDEX_PAGE)
        source = (spec.trace.get("source") or "conformance corpus").replace("|", "\\|")
        rows.append(f"| [{spec.title}]({link}) | {spec.trace['semantics']} | {len(spec.trace['ops'])} | {source} |")
    titles = {s.slug: s.title for s in _specs}
    sets = ["| Exercises | Trace | Questions | Page |", "| --- | --- | --- | --- |"]
    for slug, topic, home in EXERCISE_SETS:
        link = get_relative_url(trace_src_uri(slug), INDEX_PAGE)
        sets.append(f"| [{topic}]({link}#exercise) | {titles[slug]} | {len(_questions[slug])} | "
                    f"[{home}]({get_relative_url(home, INDEX_PAGE)}) |")
    markdown_text = replace_marker(markdown_text, EXERCISES_MARKER, "\n".join(sets), INDEX_PAGE)
    return replace_marker(markdown_text, INDEX_MARKER, "\n".join(rows), INDEX_PAGE)


def _url(files: Files, src_uri: str, page: Page) -> str | None:
    target = files.get_file_from_path(src_uri)
    return None if target is None else get_relative_url(target.url, page.url)


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    spec = next((s for s in _specs if trace_src_uri(s.slug) == page.file.src_uri), None)
    if spec is None:
        return html
    index = ReferenceIndex.cached(repo_root(config))

    def note_href(note: NoteRef) -> str | None:
        url = _url(files, page_src_uri(note.version, note.path), page)
        if url is None:
            log.warning("trace explorer: %s links to note %s, whose page is not on the site", spec.title, note.target)
            return None
        return f"{url}#{note.note_id}"

    def ref_href(dotted: str) -> str | None:
        target = index.resolve(dotted)
        url = None if target is None else _url(files, source_src_uri(target.module), page)
        if url is None:
            log.warning("trace explorer: %s links to %s, which names nothing in reference/", spec.title, dotted)
            return None
        return f"{url}#{target.anchor}"

    def page_href(target: str) -> str | None:
        path, _, anchor = target.partition("#")
        url = _url(files, path, page)
        if url is None:
            log.warning("trace explorer: %s links to %s, which is not a page", spec.title, target)
            return None
        return url + (f"#{anchor}" if anchor else "")

    choices = []
    for other in _specs:
        url = _url(files, trace_src_uri(other.slug), page)
        if url is not None:
            choices.append((other.title, url))
    steps = _steps[spec.slug]
    data = explorer_data(spec.title, spec.slug, spec.trace, steps, op_links(spec.trace, note_href, ref_href),
                         resolved_questions(_questions[spec.slug], note_href, page_href))
    html = html.replace(f"<p>{PAGE_MARKER}</p>", explorer_html(data, steps, choices), 1)
    if page.present_anchor_ids is not None:
        page.present_anchor_ids |= {f"step-{k}" for k in range(len(steps))} | ({"exercise"} if data["questions"] else set())
    return html
