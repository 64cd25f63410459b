"""MkDocs hook: the "vLLM release by release" page, from the committed release matrix.

``scripts/version-matrix`` writes ``conformance/reports/matrix.json``: for each vLLM release, the
verdict of every conformance property inside that release's own environment. The page shows
releases down and properties across, then each release's non-passing details, then the
behaviour changes between releases (``V1_FIELD_HISTORY`` and ``V0_FIELD_HISTORY`` in
``reference.blocks.policies``): the first release, what changed, why, the upstream lines and the
annotation notes that discuss it. A second marker renders the V0 liveness measured by the
annotations' reach probe (``annotations/reach-probe-0.10.2.json``): which V0 mechanisms the 0.10.2
engine actually ran, per configuration.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

PAGE = "releases.md"
MARKER = "RELEASE-MATRIX"
MATRIX = Path("conformance") / "reports" / "matrix.json"
LIVENESS_MARKER = "V0-LIVENESS"
PROBE = Path("annotations") / "reach-probe-0.10.2.json"
BADGE = {"passed": "✅", "failed": "❌", "not_applicable": "➖"}
WORD = {"passed": "passed", "failed": "failed", "not_applicable": "not applicable"}


class MatrixError(ValueError):
    """The matrix file is not a release matrix."""


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
                if prop.get("status") not in BADGE:
                    raise MatrixError(f"{path}: {version} {name}: unknown status {prop.get('status')!r}")
    except (OSError, ValueError) as err:
        if isinstance(err, MatrixError):
            raise
        raise MatrixError(f"{path}: not readable JSON: {err}") from None
    except (KeyError, TypeError, AttributeError) as err:
        raise MatrixError(f"{path}: not a release matrix (missing or malformed {err})") from None
    return {v: releases[v] for v in sorted(releases, key=release_key)}


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _policies(entry: dict) -> str:
    """The reference policies a release ran under: V1's, and V0's where it has a V0 manager."""
    v1 = f"`{entry.get('policy') or '—'}`"
    v0 = (entry.get("row") or {}).get("v0_policy")
    return v1 + (f" · V0 `{v0}`" if v0 else "")


def matrix_markdown(releases: dict[str, dict], history: list, v0_history: list = ()) -> str:
    """The page body. ``history`` / ``v0_history``: FieldChange-like objects (field, first,
    value_from, what, why, upstream, notes) of V1Policy and V0Policy."""
    out: list[str] = []
    if not releases:
        out.append('!!! note "No matrix yet"\n    No release has been run yet: '
                   "`scripts/version-matrix RELEASE` writes `conformance/reports/matrix.json`.\n")
    else:
        names = sorted({n for e in releases.values() for n in e["properties"]})
        out.append("| Release | Released | Policy | " + " | ".join(f"`{n}`" for n in names) + " |")
        out.append("| --- | --- | --- | " + " | ".join("---" for _ in names) + " |")
        for version, entry in releases.items():
            cells = [BADGE[entry["properties"][n]["status"]] if n in entry["properties"] else " "
                     for n in names]
            out.append(f"| [{version}](#release-{version.replace('.', '-')}) | "
                       f"{entry.get('released') or ''} | {_policies(entry)} | " + " | ".join(cells) + " |")
        out.append("\n✅ passed · ❌ failed (a divergence, or a harness error: the detail says which) · "
                   "➖ not applicable (the reason is given below)\n")
        for version, entry in releases.items():
            out.append(f'<div id="release-{version.replace(".", "-")}" markdown="1">\n')
            out.append(f"### vLLM {version}\n")
            summary = entry.get("summary") or {}
            out.append(f"Run on {entry.get('date', '?')} ({_cell(entry.get('device', ''))}, "
                       f"{entry.get('duration_s', '?')} s): {summary.get('passed', 0)} passed, "
                       f"{summary.get('failed', 0)} failed, {summary.get('not_applicable', 0)} not "
                       f"applicable. Reference policies: {_policies(entry)}"
                       + (f"; installed: {', '.join(entry['installed'])}" if entry.get("installed") else "")
                       + ".\n")
            rows = [(n, p) for n, p in entry["properties"].items() if p["status"] != "passed"]
            if rows:
                out.append("| Property | Verdict | Detail |\n| --- | --- | --- |")
                for name, prop in rows:
                    out.append(f"| `{name}` | {WORD[prop['status']]} | {_cell(prop.get('detail', ''))} |")
            else:
                out.append("Every property passed.")
            out.append("\n</div>\n")
    out.append("## Behaviour changes, release by release\n")
    out.append("Each is a field of `V1Policy` or `V0Policy` (`reference/blocks/policies.py`); the "
               "reference follows whichever value the installed release has.\n")
    out.append("| First release | Field | What changed | Why | Upstream | Notes |\n| --- | --- | --- | --- | --- | --- |")
    tagged = [("V1Policy", c) for c in history] + [("V0Policy", c) for c in v0_history]
    for kind, change in sorted(tagged, key=lambda t: release_key(t[1].first)):
        notes = ", ".join(f"[{n.split('#')[-1]}](sources/{n.split('#')[0]}.md#{n.split('#')[-1]})"
                          for n in change.notes)
        out.append(f"| {change.first} | `{kind}.{change.field}` = `{change.value_from!r}` | {_cell(change.what)} | "
                   f"{_cell(change.why)} | {_cell(change.upstream)} | {notes} |")
    return "\n".join(out) + "\n"


def _ending(run: dict) -> str:
    if run.get("error"):
        return run["error"]
    left = run.get("unfinished_after", 0)
    return f"{left} requests unfinished" if left else "all requests done"


def liveness_markdown(probe: dict) -> str:
    """One row per probe configuration: what the V0 engine's run exercised (from the probe's JSON)."""
    out = [f"Measured by `{probe['command']}` on vLLM {probe['vllm_version']} ({probe['driver']}).\n",
           "| Configuration | Settings | Steps | Preemptions | Requests with n > 1 | Largest sequence group added "
           "| Blocks swapped out | Blocks copied (copy-on-write) | Ended |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, config in probe["configs"].items():
        run = config["run"]
        out.append(f"| {name} | {', '.join(config['settings'])} | {run['steps']} | {run['preempted']} | "
                   f"{run['parallel_sample_requests']} | {run['largest_group_added']} | "
                   f"{run['blocks_swapped_out']} | {run['blocks_copied']} | "
                   f"{_cell(_ending(run))} |")
    return "\n".join(out) + "\n"


def on_page_markdown(markdown_text: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace the marker on the releases page with the matrix."""
    if page.file.src_uri != PAGE:
        return markdown_text
    from reference.blocks.policies import V0_FIELD_HISTORY, V1_FIELD_HISTORY

    root = Path(config.config_file_path).resolve().parent
    try:
        releases = read_matrix(root / MATRIX)
    except MatrixError as err:
        raise PluginError(f"releases page: {err}") from None
    markdown_text = markdown_text.replace(
        MARKER, matrix_markdown(releases, list(V1_FIELD_HISTORY), list(V0_FIELD_HISTORY)))
    if LIVENESS_MARKER in markdown_text:
        try:
            probe = json.loads((root / PROBE).read_text())
        except (OSError, ValueError) as err:
            raise PluginError(f"releases page: cannot read {PROBE}: {err}") from None
        markdown_text = markdown_text.replace(LIVENESS_MARKER, liveness_markdown(probe))
    return markdown_text
