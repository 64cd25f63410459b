"""MkDocs hook: the "vLLM release by release" page, from the committed release matrix.

``scripts/version-matrix`` writes ``conformance/reports/matrix.json``: for each vLLM release, the
verdict of every conformance property inside that release's own environment, the project commit it
ran at and how its environment was built. The page shows one row per release (its properties
grouped: block managers, then the trace corpus, then the Triton kernels, the CUDA kernels and the
CPU build's kernels; a group whose recorded properties are all not applicable is one mark, a group
the run recorded none of an empty cell), whether each run is older than the last change to the code
of the reference or the harness (docstrings and comments aside, ``code_changes``; asked of git at
build time; "unknown" without git), and the change-log entries first seen at that release; then each
release's details; then the change log itself (the first release of each change, what changed, why,
the upstream lines and the annotation notes that discuss it). Verdict marks are inline SVG (Material
Design icons from mkdocs-material), so they render without an emoji font. A second marker renders
the V0 liveness per release measured by the annotations' reach probe
(``annotations/v0-liveness.json``, read by ``annotations.liveness``): per release and configuration,
what the V0 engine step reached (preemptions, forks, copies, swaps, how the run ended), then where a
mechanism starts or stops being reached.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

from docs.hooks.code_changes import last_code_change
from docs.hooks.marks import icon_symbols, mark
from docs.hooks.page_markers import load_or_fail, replace_marker, repo_root

PAGE = "releases.md"
MARKER = "RELEASE-MATRIX"
MATRIX = Path("conformance") / "reports" / "matrix.json"
LIVENESS_MARKER = "V0-LIVENESS"
LIVENESS = Path("annotations") / "v0-liveness.json"
WORD = {"passed": "passed", "failed": "failed", "not_applicable": "not applicable"}
# Property groups, most informative first: (title, column heading, which property names belong to it).
GROUPS = (
    ("V1 manager", "V1", lambda n: n.startswith("v1.")),
    ("V0 manager", "V0", lambda n: n.startswith("v0.")),
    ("Trace corpus", "Corpus", lambda n: n.startswith("traces.")),
    ("Triton kernels", "Triton", lambda n: n.startswith("kernel.") and n.count(".") == 1),
    ("CUDA kernels", "CUDA", lambda n: n.startswith("kernel.cuda.")),
    ("CPU-build kernels", "CPU", lambda n: n.startswith("kernel.cpu.")),
    ("Other", "Other", lambda n: True),
)
# Marks: Material Design icon name (as mkdocs-material ships it), colour, meaning.
class MatrixError(ValueError):
    """The matrix file is not a release matrix."""


def change_log() -> list[tuple[type, object]]:
    """(record, change) for every logged change between releases, in log order: the one place
    that knows where the change log lives (``conformance.changelog.LOGS``). A change has
    ``field``, ``first``, ``value_from``, ``what``, ``why``, ``upstream`` and ``notes``; a record
    is the dataclass whose field changed."""
    from conformance.changelog import LOGS

    return [(record, change) for record, log in LOGS.items() for change in log]


def not_fields(version: str) -> list:
    """The change log's differences at ``version`` that are deliberately not fields (out of the
    reference's scope, or a change of representation), each with its reason."""
    from conformance.changelog import NOT_FIELDS

    return [note for note in NOT_FIELDS if note.first == version]


def release_key(version: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", version)]


def read_matrix(path: Path) -> dict[str, dict]:
    """The releases of a matrix file, oldest first; MatrixError naming the file and the defect."""
    if not path.exists():
        return {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        releases = raw["releases"]
        for version, entry in releases.items():
            if entry.get("release") != version:
                raise MatrixError(f"{path}: entry {version!r} names release {entry.get('release')!r}")
            for name, prop in entry["properties"].items():
                if prop.get("status") not in WORD:
                    raise MatrixError(f"{path}: {version} {name}: unknown status {prop.get('status')!r}")
            if not entry["properties"] and not entry.get("build_error"):
                raise MatrixError(f"{path}: {version}: no verdicts and no reason why (build_error)")
    except (OSError, ValueError) as err:
        if isinstance(err, MatrixError):
            raise
        raise MatrixError(f"{path}: not readable JSON: {err}") from None
    except (KeyError, TypeError, AttributeError) as err:
        raise MatrixError(f"{path}: not a release matrix (missing or malformed {err})") from None
    return {v: releases[v] for v in sorted(releases, key=release_key)}


def harness_paths(path: Path) -> list[str] | None:
    """The git pathspecs a verdict depends on, as the matrix file names them (None if it does not)."""
    try:
        paths = json.loads(path.read_text(encoding="utf-8")).get("harness_paths")
    except (OSError, ValueError):
        return None
    return list(paths) if isinstance(paths, list) and paths else None


def freshness(releases: dict[str, dict], root: Path, paths: list[str] | None) -> dict[str, tuple[str, str]]:
    """Per release: ("current" | "stale" | "unknown", why), comparing the commit the run
    recorded with the last commit that changed the code under ``paths`` (the reference and the
    harness; a commit that edits only docstrings or comments does not count, see
    :mod:`docs.hooks.code_changes`)."""
    def git(*args: str) -> subprocess.CompletedProcess | None:
        try:
            return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None

    last = last_code_change(git, paths) if paths else None
    if paths is None:
        shared = ("unknown", "the matrix does not name the paths its verdicts depend on")
    elif last is None:
        shared = ("unknown", "git could not be asked when the reference or the harness last changed")
    else:
        shared = None
        last_commit, last_day = last
    excluded = [p[len(":(exclude)"):] for p in paths or [] if p.startswith(":(exclude)")]

    def outside(path: str) -> bool:  # a changed file the paths exclude (recorded under older paths)
        return any(path == x or path.startswith(x.rstrip("/") + "/") for x in excluded)

    def state(project: dict) -> tuple[str, str]:
        commit = project.get("commit")
        if shared is not None:
            return shared
        if not commit:
            return ("unknown", "the run did not record the project commit it ran at")
        ancestor = git("merge-base", "--is-ancestor", last_commit, commit)
        if ancestor is None or ancestor.returncode not in (0, 1):
            return ("unknown", f"commit {commit[:10]} is not in this repository")
        if ancestor.returncode == 1:
            return ("stale", f"run at {commit[:10]}; the code of the reference or the harness changed after it, "
                             f"last at {last_commit[:10]} ({last_day})")
        changed = [f for f in project.get("changed") or [] if not outside(f)]
        if project.get("dirty") and (changed or not project.get("changed")):
            return ("stale", f"run at {commit[:10]} with uncommitted changes to "
                             f"{', '.join(changed or ['the harness'])}")
        return ("current", f"run at {commit[:10]}, after the last change to the code of the "
                           f"reference and the harness ({last_commit[:10]}, {last_day})")

    worse = {"current": 0, "unknown": 1, "stale": 2}
    out = {}
    for version, entry in releases.items():
        out[version] = state(entry.get("project") or {})
        # An --only rerun's verdicts were measured at its own commit: the row is as fresh as the
        # least fresh of the full run and its reruns.
        for rerun in entry.get("reruns") or []:
            rerun_state, why = state(rerun.get("project") or {})
            if worse[rerun_state] > worse[out[version][0]]:
                names = ", ".join(rerun.get("properties") or [])
                out[version] = (rerun_state, f"the rerun of {names}: {why}")
    return out


def verdict(prop: dict) -> str:
    return "harness_error" if prop["status"] == "failed" and prop.get("failure") == "harness_error" else prop["status"]


def anchor(version: str) -> str:
    return "release-" + version.replace(".", "-")


def change_anchor(record: type, change) -> str:
    return f"change-{record.__name__.lower()}-{change.field}-{change.first.replace('.', '-')}".replace("_", "-")


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _policies(entry: dict) -> str:
    """The reference policies a release ran under: V1's, and V0's where it has a V0 manager."""
    v1 = f"`{entry.get('policy') or '—'}`"
    v0 = entry.get("v0_policy") or (entry.get("row") or {}).get("v0_policy")
    return v1 + (f" · V0 `{v0}`" if v0 else "")


def grouped(names: list[str]) -> list[tuple[str, str, list[str]]]:
    """The groups (in GROUPS order) that hold any of ``names``: title, heading, names sorted."""
    left = sorted(names)
    out = []
    for title, heading, member in GROUPS:
        mine = [n for n in left if member(n)]
        left = [n for n in left if n not in mine]
        if mine:
            out.append((title, heading, mine))
    return out


def group_cell(entry: dict, names: list[str]) -> str:
    """One mark per property of the group, in its order (a property the run did not record gets the
    not-applicable mark, titled "not run"); one mark where every recorded property is not
    applicable; an empty cell where the run recorded none of them."""
    props = entry["properties"]
    present = [n for n in names if n in props]
    if not present:
        return ""
    if all(props[n]["status"] == "not_applicable" for n in present):
        return mark("not_applicable", f"not applicable: {', '.join(present)}")
    return "".join(mark(verdict(props[n]), f"{n}: {WORD[props[n]['status']]}") if n in props
                   else mark("not_applicable", f"{n}: not run") for n in names)


def changes_by_release(releases: list[str], changes: list[tuple[type, object]]) -> dict[str, list]:
    """Each change filed under the first matrix release at or after its first release."""
    out: dict[str, list] = {v: [] for v in releases}
    for record, change in changes:
        at = next((v for v in releases if release_key(v) >= release_key(change.first)), None)
        if at is not None:
            out[at].append((record, change))
    return out


def change_links(version: str, changes: list, small: bool = False) -> str:
    """Links to the change-log rows of ``changes`` (the first release named where it is not ``version``)."""
    links = ", ".join(f'<a href="#{change_anchor(record, change)}">{change.field}</a>'
                      + ("" if change.first == version else f" ({change.first})") for record, change in changes)
    return f"<small>{links}</small>" if small and links else links


def environment_lines(entry: dict) -> list[str]:
    """What the release's environment left out, removed, or why it could not be built."""
    out = []
    env = entry.get("environment") or {}
    if env.get("given"):
        out.append("- Run in an environment given with `--env`, not built by `scripts/version-matrix`.")
    if env.get("note"):
        out.append(f"- {_cell(env['note'])}.")
    for item in env.get("left_out", []):
        near = ", ".join(item.get("index_nearest") or []) or ", ".join(item.get("index_offers") or []) or "nothing"
        out.append(f"- Left out `{item['required']}` (required by {item.get('by') or 'vLLM'}; the index offers "
                   f"{near} around it, {item.get('offers_seen', '')}): {item['why_not_needed']}"
                   + (f" `{item['stand_in']}` is installed in its place." if item.get("stand_in") else ""))
    for item in env.get("removed", []):
        libs = ", ".join(f"`{lib}`" for lib in item.get("missing_libraries", [])) or "its libraries"
        out.append(f"- Removed `{item['package']}=={item.get('version')}` (missing {libs}): {item['why']}")
    error = entry.get("build_error")
    if error:
        what = (f"the index has no `{error['required']}`"
                + (f" (required by {error['by']})" if error.get("by") else "")
                + f"; it offers {', '.join(error.get('index_offers') or []) or 'no version'}"
                + (f" ({error['offers_seen']})" if error.get("offers_seen") else "")) if error.get("package") \
            else "pip could not resolve the requirements"
        out.append(f"- **Could not be built** at step `{error['step']}`: {what}. pip said: "
                   f"`{_cell(error.get('pip', '')).replace('`', chr(39))}`")
    return out


def release_details(version: str, entry: dict, fresh: tuple[str, str], changes: list) -> list[str]:
    out = [f'<div id="{anchor(version)}" markdown="1">\n', f"### vLLM {version}\n"]
    summary = entry.get("summary") or {}
    installed = entry.get("installed") or []
    packages = entry.get("packages") or []
    out.append(f"Released {entry.get('released') or '(date unknown)'}; run on {entry.get('date', '?')} "
               f"({_cell(entry.get('device') or 'not run')}, "
               f"{entry.get('duration_s', '?')} s): {summary.get('passed', 0)} passed, "
               f"{summary.get('failed', 0)} failed, {summary.get('not_applicable', 0)} not "
               f"applicable. Reference policies: {_policies(entry)}"
               + (f"; installed: {', '.join(installed)}" if installed else "")
               + (f" ({len(packages)} packages in all, listed in `matrix.json`)" if packages else "") + ".\n")
    out.append(f"{mark(fresh[0])} {fresh[0].capitalize()}: {_cell(fresh[1])}.\n")
    for rerun in entry.get("reruns") or []:
        commit = ((rerun.get("project") or {}).get("commit") or "no commit")[:10]
        out.append(f"Rerun on {rerun.get('date', '?')} at {commit}: "
                   f"{', '.join(f'`{n}`' for n in rerun.get('properties') or [])} (their verdicts are from that run).\n")
    env = environment_lines(entry)
    if env:
        out.append("\n".join(env) + "\n")
    if changes:
        out.append(f"Changed at this release: {change_links(version, changes)}.\n")
    for note in not_fields(version):
        out.append(f"- *Not a field ({note.kind}):* {_cell(note.what)} Why: {_cell(note.why)} "
                   f"({_cell(note.upstream)})")
    rows = [(n, p) for n, p in entry["properties"].items() if p["status"] != "passed"]
    if rows:
        # Properties the release lacks for one shared reason are one row.
        lacking: dict[str, list[str]] = {}
        out.append("| Property | Verdict | Detail |\n| --- | --- | --- |")
        for name, prop in rows:
            if prop["status"] == "not_applicable":
                lacking.setdefault(prop.get("detail", ""), []).append(name)
                continue
            out.append(f"| `{name}` | {mark(verdict(prop))} {WORD[prop['status']]} | {_cell(prop.get('detail', ''))} |")
        for detail, names in lacking.items():
            out.append(f"| {', '.join(f'`{n}`' for n in names)} | {mark('not_applicable')} not applicable | "
                       f"{_cell(detail)} |")
    elif entry["properties"]:
        out.append("Every property passed.")
    out.append("\n</div>\n")
    return out


def matrix_markdown(releases: dict[str, dict], changes: list[tuple[type, object]] = (),
                    fresh: dict[str, tuple[str, str]] | None = None) -> str:
    """The page body. ``changes``: (record, change) pairs as ``change_log`` gives them;
    ``fresh``: per release, as ``freshness`` gives it (default: unknown)."""
    fresh = fresh or {}
    unknown = ("unknown", "not compared with the project's history")
    out: list[str] = [icon_symbols()]
    by_release = changes_by_release(list(releases), list(changes))
    if not releases:
        out.append('!!! note "No matrix yet"\n    No release has been run yet: '
                   "`scripts/version-matrix RELEASE` writes `conformance/reports/matrix.json`.\n")
    else:
        groups = grouped(list({n for e in releases.values() for n in e["properties"]}))
        out.append("| Release | " + " | ".join(h for _, h, _ in groups) + " | Run | Changed here |")
        out.append("| --- | " + " | ".join("---" for _ in groups) + " | --- | --- |")
        for version, entry in releases.items():
            if entry.get("build_error"):
                cells = [f"{mark('unbuilt')} [not built](#{anchor(version)})"] + [""] * (len(groups) - 1)
            else:
                cells = [group_cell(entry, names) for _, _, names in groups]
            state, why = fresh.get(version, unknown)
            out.append(f"| [{version}](#{anchor(version)}) | " + " | ".join(cells)
                       + f" | {mark(state, why)} | {change_links(version, by_release[version], small=True)} |")
        order = "; ".join(f"{title}: {', '.join(f'`{n}`' for n in names)}" for title, _, names in groups)
        out.append(f"\nMarks: {mark('passed')} passed · {mark('failed')} failed (a divergence) · "
                   f"{mark('harness_error')} harness error (not a verdict on vLLM or the reference) · "
                   f"{mark('not_applicable')} not applicable (one mark for a whole group the release lacks; the "
                   f"reason is in its details) · {mark('unbuilt')} environment not built. Within a cell, in "
                   f"order: {order}. Run: {mark('current')} after the last change to the code of `reference/` or "
                   f"`conformance/` (a commit that edits only docstrings or comments cannot change a verdict "
                   f"and does not count) · {mark('stale')} before it (or with uncommitted changes) · "
                   f"{mark('unknown')} unknown (no commit recorded, or no git at build time). Hover a mark for "
                   "its property and verdict.\n")
        for version, entry in releases.items():
            out.extend(release_details(version, entry, fresh.get(version, unknown), by_release[version]))
    out.append("## Behaviour changes, release by release\n")
    out.append("Each is a field of one record (the `V1Policy` / `V0Policy` the reference follows, or how "
               "the adapters call a release); the page's rows link here from the first release run with it.\n")
    out.append("| First release | Field | What changed | Why | Upstream | Notes |\n| --- | --- | --- | --- | --- | --- |")
    for record, change in sorted(changes, key=lambda t: release_key(t[1].first)):
        notes = ", ".join(f"[{n.split('#')[-1]}](sources/{n.split('#')[0]}.md#{n.split('#')[-1]})"
                          for n in change.notes)
        out.append(f'| <span id="{change_anchor(record, change)}"></span>{change.first} | '
                   f"`{record.__name__}.{change.field}` = `{change.value_from!r}` | {_cell(change.what)} | "
                   f"{_cell(change.why)} | {_cell(change.upstream)} | {notes} |")
    return "\n".join(out) + "\n"


def liveness_markdown(releases: dict[str, dict]) -> str:
    """Per release and probe configuration, what the V0 engine's run reached (from the liveness
    report, releases oldest first as ``annotations.liveness.read`` gives them); then each release's
    run (date, project commit, hash of the files that decide the run, how its environment was
    built); then, per release, the mechanisms that start or stop being reached there."""
    from annotations.liveness import COLUMNS, changes, ended

    if not releases:
        return ('!!! note "No liveness measured yet"\n    `python -m annotations.reach_probe --liveness` '
                "inside a V0 release's environment files it.\n")
    out = ["| Release | Configuration | " + " | ".join(h for _, h in COLUMNS) + " | Ended |",
           "| --- | --- | " + " | ".join("---:" for _ in COLUMNS) + " | --- |"]
    for version, entry in releases.items():
        if entry.get("build_error"):
            error = entry["build_error"]
            out.append(f"| {version} | not built | " + " | ".join("" for _ in COLUMNS)
                       + f" | {_cell(error.get('step', ''))}: {_cell(error.get('pip', ''))[-200:]} |")
            continue
        for index, (name, config) in enumerate(entry["configs"].items()):
            first = f"**{version}**" if index == 0 else ""
            if "not_run" in config:
                out.append(f"| {first} | {name} | " + " | ".join("—" for _ in COLUMNS)
                           + f" | not run: {_cell(config['not_run'])} |")
                continue
            run = config["run"]
            out.append(f"| {first} | {name} | " + " | ".join(str(run[k]) for k, _ in COLUMNS)
                       + f" | {_cell(ended(run))} |")
    configs = next((e["configs"] for e in reversed(releases.values()) if e.get("configs")), {})
    out.append("\nConfigurations: " + "; ".join(f"{name}: {', '.join(c['settings'])}" for name, c in configs.items())
               + ". Runs:\n")
    for version, entry in releases.items():
        project = entry.get("project") or {}
        commit = (project.get("commit") or "no commit")[:10] + (" with uncommitted harness changes"
                                                                  if project.get("dirty") else "")
        env = entry.get("environment") or {}
        note = f"; environment: {_cell(env['note'])}" if env.get("note") else ""
        digest = f", files sha256 `{entry['files_sha256'][:12]}`" if entry.get("files_sha256") else ""
        out.append(f"- {version}: `{entry['command']}` on {entry.get('date', '?')} at {commit}{digest}{note}")
    found = changes(releases)
    if found:
        out.append("\nWhere a mechanism starts or stops being reached (against the previous release measured):\n")
        by_release: dict[tuple[str, str], dict[tuple[str, bool], list[str]]] = {}
        for change in found:
            by_release.setdefault((change.before, change.at), {}).setdefault((change.fact, change.now),
                                                                              []).append(change.config)
        for (before, at), facts in sorted(by_release.items(), key=lambda item: release_key(item[0][1])):
            said = "; ".join(f"{'' if now else 'no longer '}{fact} ({', '.join(names)})"
                             for (fact, now), names in facts.items())
            out.append(f"- **{at}** (after {before}): {said}.")
    return "\n".join(out) + "\n"


def on_page_markdown(markdown_text: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace the marker on the releases page with the matrix."""
    if page.file.src_uri != PAGE:
        return markdown_text
    root = repo_root(config)
    releases = load_or_fail(read_matrix, root / MATRIX, MatrixError, "releases page")
    fresh = freshness(releases, root, harness_paths(root / MATRIX))
    markdown_text = replace_marker(markdown_text, MARKER, matrix_markdown(releases, change_log(), fresh), PAGE)
    if LIVENESS_MARKER in markdown_text:
        from annotations.liveness import LivenessError, read

        liveness = load_or_fail(read, root / LIVENESS, LivenessError, "releases page")["releases"]
        markdown_text = markdown_text.replace(LIVENESS_MARKER, liveness_markdown(liveness))
    return markdown_text
