"""MkDocs hook: the "vLLM release by release" page, from the committed release matrix.

``scripts/version-matrix`` writes ``conformance/reports/matrix.json``: for each vLLM release, the
verdict of every conformance property inside that release's own environment. The page shows
releases down and properties across, then each release's non-passing details, then the
behaviour changes between releases (``reference.blocks.policies.V1_FIELD_HISTORY``): the first
release, what changed, why, the upstream lines and the annotation notes that discuss it.
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


def matrix_markdown(releases: dict[str, dict], history: list) -> str:
    """The page body. ``history``: FieldChange-like objects (field, first, value_from, what,
    why, upstream, notes)."""
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
                       f"{entry.get('released') or ''} | `{entry.get('policy') or '—'}` | " + " | ".join(cells) + " |")
        out.append("\n✅ passed · ❌ failed (a divergence, or a harness error: the detail says which) · "
                   "➖ not applicable (the reason is given below)\n")
        for version, entry in releases.items():
            out.append(f'<div id="release-{version.replace(".", "-")}" markdown="1">\n')
            out.append(f"### vLLM {version}\n")
            summary = entry.get("summary") or {}
            out.append(f"Run on {entry.get('date', '?')} ({_cell(entry.get('device', ''))}, "
                       f"{entry.get('duration_s', '?')} s): {summary.get('passed', 0)} passed, "
                       f"{summary.get('failed', 0)} failed, {summary.get('not_applicable', 0)} not "
                       f"applicable. Reference policy: `{entry.get('policy') or 'none'}`"
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
    out.append("Each is a field of `V1Policy` (`reference/blocks/policies.py`); the reference follows "
               "whichever value the installed release has.\n")
    out.append("| First release | Field | What changed | Why | Upstream | Notes |\n| --- | --- | --- | --- | --- | --- |")
    for change in sorted(history, key=lambda c: release_key(c.first)):
        notes = ", ".join(f"[{n.split('#')[-1]}](sources/{n.split('#')[0]}.md#{n.split('#')[-1]})"
                          for n in change.notes)
        out.append(f"| {change.first} | `{change.field}` = `{change.value_from!r}` | {_cell(change.what)} | "
                   f"{_cell(change.why)} | {_cell(change.upstream)} | {notes} |")
    return "\n".join(out) + "\n"


def on_page_markdown(markdown_text: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace the marker on the releases page with the matrix."""
    if page.file.src_uri != PAGE:
        return markdown_text
    from reference.blocks.policies import V1_FIELD_HISTORY

    root = Path(config.config_file_path).resolve().parent
    try:
        releases = read_matrix(root / MATRIX)
    except MatrixError as err:
        raise PluginError(f"releases page: {err}") from None
    return markdown_text.replace(MARKER, matrix_markdown(releases, list(V1_FIELD_HISTORY)))
