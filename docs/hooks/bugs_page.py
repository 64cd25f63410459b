"""MkDocs hook: "Bugs found in vLLM", one generated page per trace in ``conformance/known-upstream-bugs/``.

Every ``*.json`` trace in that folder gets a page ``bugs/<trace stem>.md`` under "Bugs found in
vLLM" in the navigation (a trace added later gets one too), and ``bugs/index.md`` lists them in
place of its marker paragraph. A page says:

* what happens, in our words: the trace's paragraph in the folder's ``README.md`` and the trace's
  own ``note``;
* the trace in the trace explorer (``conformance.explorer``), replayed through the
  reference at build time, the divergence vLLM showed at its last step;
* the releases it reproduces in, as measured by ``scripts/replay-known-bugs`` and committed in
  ``about/replays.json``, and which releases were not measured;
* the upstream lines at fault and whether the serving path can reach it, from ``about/bugs.json``
  (hand-written; its plain citations ``v<ver>/<path>#L<a>-L<b>@<hash>`` are checked against the
  release bytes at build time, and a drifted or dead one is a warning, which fails a strict build);
* the replay command.

A trace without an entry in ``about/bugs.json`` or ``about/replays.json`` still gets its page,
which says what is not recorded yet.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from mkdocs.utils import get_relative_url

from annotations.citations import GITHUB_BLOB, PLAIN, Citation, Resolver
from annotations.model import ANNOTATIONS_ROOT, parse
from conformance.trace_file import TraceFileError, load_trace
from docs.hooks.page_markers import replace_html_marker, replace_marker, repo_root

log = logging.getLogger("mkdocs.hooks.bugs_page")

#: The folder of the traces, relative to the repository root.
BUGS = Path("conformance") / "known-upstream-bugs"
NAV_SECTION = "Bugs found in vLLM"
INDEX_PAGE = "bugs/index.md"
INDEX_MARKER = "KNOWN-UPSTREAM-BUGS-INDEX"
EXPLORER_MARKER = "KNOWN-UPSTREAM-BUG-EXPLORER"
#: Verdicts of scripts/replay-known-bugs, in the words the pages use.
VERDICTS = {"reproduces": "reproduces", "does not reproduce": "does not reproduce",
            "not applicable": "not applicable", "diverges otherwise": "diverges in another way",
            "harness error": "harness error (no verdict)"}
_NOTE_LINK = re.compile(r"\]\((?P<path>v[0-9]+\.[0-9]+\.[0-9]+/[^)#\s]+)#(?P<id>[^)\s]+)\)")


@dataclass
class Bug:
    """One trace of the folder and what the repository says about it."""

    name: str  # file name, e.g. v0-fork-recursion.json
    trace: dict
    readme: str | None  # its README paragraph (Markdown), if the README has one
    facts: dict | None  # its entry in about/bugs.json
    replays: dict[str, dict] = field(default_factory=dict)  # release -> scripts/replay-known-bugs' entry

    @property
    def stem(self) -> str:
        return self.name.removesuffix(".json")

    @property
    def src_uri(self) -> str:
        return f"bugs/{self.stem}.md"

    @property
    def title(self) -> str:
        return (self.facts or {}).get("title") or self.stem

    @property
    def kind(self) -> str:
        return (self.facts or {}).get("kind") or "not classified yet"

    def reproduces_in(self) -> list[str]:
        return [r for r, e in sorted(self.replays.items(), key=lambda kv: release_key(kv[0]))
                if e.get("verdict") == "reproduces"]


def release_key(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"[0-9]+", release))


def readme_paragraphs(text: str) -> dict[str, str]:
    """``- `NAME.json`: ...`` bullets of the README (with their indented continuation lines), by name."""
    found: dict[str, str] = {}
    current: str | None = None
    for line in text.split("\n"):
        match = re.match(r"^- `(?P<name>[^`]+\.json)`: *(?P<text>.*)$", line)
        if match:
            current = match["name"]
            found[current] = match["text"].strip()
        elif current is not None and line.startswith("  ") and line.strip():
            found[current] += " " + line.strip()
        else:
            current = None
    return found


def load(folder: Path) -> list[Bug]:
    """Every trace of ``folder`` (``*.json`` at its top level), with README paragraph, facts and replays."""
    readme = folder / "README.md"
    paragraphs = readme_paragraphs(readme.read_text(encoding="utf-8")) if readme.is_file() else {}
    facts = _json(folder / "about" / "bugs.json").get("traces", {})
    replays = _json(folder / "about" / "replays.json").get("traces", {})
    bugs = []
    for path in sorted(folder.glob("*.json")):
        try:
            trace = load_trace(path)
        except TraceFileError as err:  # names the file and the field
            raise PluginError(str(err)) from None
        bugs.append(Bug(path.name, trace, paragraphs.get(path.name), facts.get(path.name), replays.get(path.name, {})))
    for name in sorted(set(facts) - {b.name for b in bugs}):
        log.warning("%s/about/bugs.json describes %s, which is not a trace of the folder", folder, name)
    return bugs


def _json(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise PluginError(f"{path}: not JSON: {err}") from None


# -- checking and rendering citations --------------------------------------------------------
def citation_problems(text: str, resolver: Resolver) -> list[str]:
    """Why the plain citations in ``text`` do not name the lines they say (empty when all hold)."""
    problems = []
    for m in PLAIN.finditer(text):
        start = int(m["start"])
        c = Citation(Path("-"), 0, m["version"], m["path"], start, int(m["end"] or start), m["hash"], "plain")
        actual, why = resolver.actual_hash(c, c.path)
        if why:
            problems.append(f"{m[0]}: dead: {why}")
        elif actual != c.hash:
            problems.append(f"{m[0]}: hash drift: the lines hash to {actual}")
    return problems


def linked(text: str) -> str:
    """Plain citations as GitHub links at the release tag, titled with their hash (the checker's form)."""

    def link(m: re.Match[str]) -> str:
        rng = f"L{m['start']}" + (f"-L{m['end']}" if m["end"] else "")
        name = m["path"].rsplit("/", 1)[-1]
        return f"[`{name}` {rng} @ v{m['version']}]({GITHUB_BLOB}v{m['version']}/{m['path']}#{rng} \"{m['hash']}\")"

    return PLAIN.sub(link, text)


def note_links(text: str, from_uri: str, note_exists: Callable[[str, str, str], bool]) -> tuple[str, list[str]]:
    """Note citations ``](v0.10.2/path#id)`` as links from ``from_uri`` to the annotated pages."""
    missing: list[str] = []

    def link(m: re.Match[str]) -> str:
        version, _, path = m["path"][1:].partition("/")
        if not note_exists(version, path, m["id"]):
            missing.append(f"{m['path']}#{m['id']}")
            return m[0]
        return f"]({get_relative_url(f'sources/v{version}/{path}.md', from_uri)}#{m['id']})"

    return _NOTE_LINK.sub(link, text), missing


def note_exists(version: str, path: str, note_id: str, root: Path = ANNOTATIONS_ROOT) -> bool:
    md = root / f"v{version}" / f"{path}.md"
    return md.is_file() and parse(md).note(note_id) is not None


# -- the pages -------------------------------------------------------------------------------
def replay_command(bug: Bug) -> str:
    return f"python -m conformance replay conformance/known-upstream-bugs/{bug.name}"


def releases_markdown(bug: Bug, measured_anywhere: list[str]) -> str:
    """The measured releases as a table, then the releases that were not measured."""
    lines = []
    if bug.replays:
        lines += ["| vLLM | Verdict | What the replay printed | Replayed |", "| --- | --- | --- | --- |"]
        for release, entry in sorted(bug.replays.items(), key=lambda kv: release_key(kv[0])):
            how = f"retargeted to policy `{entry['retargeted_to']}`" if entry.get("retargeted_to") else "as recorded"
            output = entry.get("output", "").replace("|", "\\|").replace("`", "'")
            verdict = VERDICTS.get(entry.get("verdict", ""), entry.get("verdict", "?"))
            lines.append(f"| {release} | **{verdict}** | `{output}` | {how}, {entry.get('date', '?')} |")
        lines.append("")
        if any(e.get("retargeted_to") for e in bug.replays.values()):
            lines.append("*Retargeted*: the trace as recorded names another release's policy and does not "
                         "apply there, so its ops were replayed under the installed release's policy, as the "
                         "corpus replays V1 traces (`conformance.corpus.retargeted`).\n")
    else:
        lines.append("*Not measured yet: `scripts/replay-known-bugs` has not been run on this trace.*\n")
    recorded = bug.trace.get("versions") or []
    unmeasured = [r for r in recorded if r not in bug.replays]
    ran = ", ".join(measured_anywhere) or "none"
    note = (f"Measured here: vLLM {ran} (the environments `scripts/replay-known-bugs` ran in). "
            "No other release was replayed, so the table says nothing about them.")
    if unmeasured:
        note += (f" The trace is recorded for vLLM {', '.join(unmeasured)} (its `versions`), where it was "
                 "found; that release was **not measured** here.")
    lines.append(note)
    return "\n".join(lines)


def page_markdown(bug: Bug, measured_anywhere: list[str], note_exists_fn=note_exists) -> tuple[str, list[str]]:
    """A bug's page (the explorer is a marker that :func:`on_page_content` fills); and dead note links."""
    trace = bug.trace
    facts = bug.facts or {}
    recorded = ", ".join(trace.get("versions") or []) or "no release in particular"
    parts = [
        "---\nhide:\n  - toc\n---\n",
        f"# {bug.title}\n",
        f'<p class="bug-meta">{escape(bug.kind)} · trace <code>{escape(bug.name)}</code> · semantics '
        f"<code>{escape(trace['semantics'])}</code> · {len(trace['ops'])} ops · recorded for vLLM "
        f"{escape(recorded)}</p>\n",
        "## What happens\n",
        bug.readme or "*The folder's README has no paragraph on this trace yet.*",
        "",
    ]
    if trace.get("note"):
        parts += ["The trace's own note:\n", "> " + trace["note"].replace("\n", "\n> "), ""]
    parts += ["## The trace\n",
              "Step through it below: the states are the reference's, replayed when this site was built; "
              "the last step is where vLLM " + ("showed the divergence: `" + trace["divergence"] + "`."
                                                if trace.get("divergence") else "differs from the reference."),
              "", EXPLORER_MARKER, "",
              "## Releases it reproduces in\n", releases_markdown(bug, measured_anywhere), "",
              "## The upstream lines at fault\n"]
    at_fault = facts.get("at_fault") or []
    if at_fault:
        parts += [f"- {linked(item['cite'])}: {item['why']}" for item in at_fault]
    else:
        parts.append("*Not recorded yet (`conformance/known-upstream-bugs/about/bugs.json`).*")
    parts += ["", "## Replay it\n",
              "In an environment with the vLLM release installed (`scripts/ensure-env "
              "requirements/vllm-0.10.2.txt` prints one), from the repository root:\n",
              f"```\n{replay_command(bug)}\n```\n",
              "It prints `DIVERGED after N of M ops: ...` where vLLM and the reference part, `identical "
              "over M ops` where they agree, or why the trace does not apply to the installed release.",
              "", "## Can the serving path reach it?\n",
              linked(facts.get("serving") or "*Not recorded yet (`conformance/known-upstream-bugs/about/bugs.json`).*"),
              ""]
    text, missing = note_links("\n".join(parts), bug.src_uri, note_exists_fn)
    return text, missing


def index_table(bugs: list[Bug]) -> str:
    rows = ["| Trace | Kind | Reproduces in (measured) | Recorded for |", "| --- | --- | --- | --- |"]
    for bug in bugs:
        link = get_relative_url(bug.src_uri, INDEX_PAGE)
        where = ", ".join(bug.reproduces_in()) or ("none of the releases measured" if bug.replays else "not measured")
        rows.append(f"| [{bug.title}]({link}) | {bug.kind} | {where} | {', '.join(bug.trace.get('versions') or []) or '–'} |")
    return "\n".join(rows) if bugs else "*No traces in `conformance/known-upstream-bugs/`.*"


def explorer_fragment(bug: Bug) -> str:
    """The trace explorer for the bug's trace (steps replayed on the reference; a crash ends them)."""
    from conformance.explorer.page import divergence_view, explorer_data, explorer_html
    from conformance.explorer.steps import replay

    steps = replay(bug.trace, snapshots=True, stop_on_crash=True)
    for step in steps:
        step.pop("snapshot", None)
    data = explorer_data(bug.title, f"bug-{bug.stem}", bug.trace, steps, {}, [], divergence_view(bug.trace, steps))
    return explorer_html(data, steps, [])


# -- the hook --------------------------------------------------------------------------------
_bugs: list[Bug] = []


def measured_releases(bugs: list[Bug]) -> list[str]:
    return sorted({r for b in bugs for r in b.replays}, key=release_key)


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Read the folder, check the citations of the lines at fault, list the pages in the navigation."""
    global _bugs
    from upstream import fetch

    _bugs = load(repo_root(config) / BUGS)
    resolver = Resolver(fetch.read_file)
    for bug in _bugs:
        texts = [item.get("cite", "") for item in (bug.facts or {}).get("at_fault", [])]
        texts.append((bug.facts or {}).get("serving", ""))
        for problem in citation_problems("\n".join(texts), resolver):
            log.warning("known-upstream-bugs/about/bugs.json, %s: %s", bug.name, problem)
    for item in config.nav or []:
        if isinstance(item, dict) and NAV_SECTION in item:
            children = item[NAV_SECTION]
            if not isinstance(children, list):
                children = [children]
            item[NAV_SECTION] = children + [{bug.title: bug.src_uri} for bug in _bugs]
            break
    else:
        if config.nav is not None:
            raise PluginError(f"mkdocs.yml nav has no '{NAV_SECTION}' section for the bug pages")
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    measured = measured_releases(_bugs)
    for bug in _bugs:
        text, missing = page_markdown(bug, measured)
        for cited in missing:
            log.warning("%s: cites note %s, which is not an annotated note", bug.src_uri, cited)
        files.append(File.generated(config, bug.src_uri, content=text))
    return files


def on_page_markdown(markdown_text: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri != INDEX_PAGE:
        return markdown_text
    return replace_marker(markdown_text, INDEX_MARKER, index_table(_bugs), INDEX_PAGE)


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    bug = next((b for b in _bugs if b.src_uri == page.file.src_uri), None)
    if bug is None:
        return html
    try:
        fragment = explorer_fragment(bug)
    except Exception as err:  # noqa: BLE001 (named in the build error)
        raise PluginError(f"bugs page: {bug.name} cannot be shown in the explorer: {err!r}") from None
    return replace_html_marker(html, EXPLORER_MARKER, fragment, bug.src_uri)
