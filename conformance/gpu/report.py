"""The GPU lane's committed report (``conformance/gpu/reports/gpu-lane.json``, written by
``run.sh``), read and checked, and rendered as the Markdown the site's Conformance and Performance
pages show (their hooks call :func:`conformance_markdown` and :func:`performance_markdown`).
No report means the lane has never run; the pages say so instead of showing anything.
Plain Python (no torch): the site builds on any machine.
"""

from __future__ import annotations

import json
from pathlib import Path

REPORT = Path("conformance/gpu/reports/gpu-lane.json")  # relative to the repository root
COMMAND = "bash conformance/gpu/run.sh"
STEP_NAMES = ("load_ops", "conformance", "triton_unified", "benchmark")


class ReportError(ValueError):
    """A file is not a GPU lane report."""


def read_report(path: Path) -> dict:
    """The report as a dict, checked for what the pages use; raises ReportError naming the
    file and the defect."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ReportError(f"{path}: not readable JSON: {err}") from None
    problems = []
    if not isinstance(raw, dict) or raw.get("report") != "gpu-lane":
        raise ReportError(f"{path}: not a GPU lane report (no \"report\": \"gpu-lane\")")
    for key, kind in (("started", str), ("summary", str), ("passed", bool), ("steps", dict)):
        if not isinstance(raw.get(key), kind):
            problems.append(f"{key!r} is {raw.get(key)!r}, not a {kind.__name__}")
    steps = raw.get("steps") if isinstance(raw.get("steps"), dict) else {}
    for name, step in steps.items():
        if name not in STEP_NAMES:
            problems.append(f"unknown step {name!r}")
        elif not isinstance(step, dict) or not isinstance(step.get("ok"), bool):
            problems.append(f"step {name!r} has no boolean 'ok'")
    for name in ("conformance", "triton_unified"):
        result = steps.get(name, {}).get("result") if isinstance(steps.get(name), dict) else None
        if result is not None and not (isinstance(result, list)
                                       and all(isinstance(r, dict) for r in result)):
            problems.append(f"step {name!r}: result is not a list of checks")
    bench = steps.get("benchmark") if isinstance(steps.get("benchmark"), dict) else {}
    if "result" in bench:
        result = bench["result"]
        if not isinstance(result, dict) or not all(isinstance(result.get(k), str)
                                                   for k in ("table", "summary")):
            problems.append("step 'benchmark': result lacks its table or summary")
    if problems:
        raise ReportError(f"{path}: not a GPU lane report: {'; '.join(problems)}")
    return raw


def load(root: Path) -> dict | None:
    """The committed report under repository ``root``, or None when there is none."""
    path = Path(root) / REPORT
    return read_report(path) if path.is_file() else None


def cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def indent(text: str) -> str:
    return "\n".join(f"    {line}" if line else "" for line in text.splitlines())


def never_run(what: str) -> str:
    return ('!!! note "Never run"\n' + indent(
        f"The GPU lane has never been run: no GPU has been available to the project so far, so "
        f"there are no {what} here, and none should be inferred from the CPU results. On a CUDA "
        f"machine, `{COMMAND}` writes `{REPORT.as_posix()}`; commit it and rebuild the site.")
        + "\n")


def context_line(report: dict, extra: str = "") -> str:
    load_step = report["steps"].get("load_ops", {})
    source = (load_step.get("result") or {}).get("source") if load_step.get("ok") else None
    return (f"*{cell(report.get('device', 'unknown device'))}, torch "
            f"{cell(report.get('torch', '?'))} (CUDA {cell(report.get('torch_cuda', '?'))}); "
            f"started {cell(report['started'])}, {report.get('total_seconds', 0):.0f} s in all; "
            f"vLLM's CUDA ops: {cell(source or 'not loaded')}{extra}; from "
            f"`{REPORT.as_posix()}`.*")


def step_error(step: dict) -> str | None:
    if step.get("ok") or "error" not in step:
        return None
    return f'!!! failure "This step raised"\n{indent("`" + cell(step["error"]) + "`")}\n'


def number(value, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def checks_table(results: list[dict]) -> str:
    rows = ["| check | dtype | head size | block size | result | max abs error vs oracle | "
            "max abs diff vs reference |", "| --- | --- | ---: | ---: | --- | ---: | ---: |"]
    for r in results:
        if r.get("skipped"):
            verdict = f"skipped: {cell(r['skipped'])}"
        else:
            verdict = "**passed**" if r.get("ok") else f"**FAILED**: {cell(r.get('error', ''))}"
        exact = " (bit-exact)" if r.get("bit_exact") else ""
        rows.append(f"| `{cell(r.get('check', '?'))}` | {cell(r.get('dtype', ''))} | "
                    f"{cell(r.get('head_size', ''))} | {cell(r.get('block_size', ''))} | "
                    f"{verdict}{exact} | {number(r.get('max_abs_err_vs_oracle'))} | "
                    f"{number(r.get('max_abs_diff_vs_reference'))} |")
    return "\n".join(rows)


def conformance_markdown(report: dict | None) -> str:
    """The Conformance page's GPU section: the CUDA kernel checks and the Triton comparison."""
    out = ["### vLLM's CUDA kernels on a GPU (the GPU lane)\n"]
    if report is None:
        out.append(never_run("CUDA kernel results"))
        return "\n".join(out)
    verdict = "**passed**" if report["passed"] else "**FAILED**"
    out.append(f"{verdict}. `{cell(report['summary'])}`\n")
    out.append(context_line(report) + "\n")
    for name, title in (("conformance", "vLLM CUDA kernels vs the reference and the oracle"),
                        ("triton_unified", "vLLM's Triton `unified_attention` vs the reference")):
        step = report["steps"].get(name)
        if step is None:
            continue
        out.append(f"**{title}** ({step.get('seconds', 0):.0f} s)\n")
        out.append(step_error(step) or checks_table(step.get("result") or []) + "\n")
    return "\n".join(out)


def performance_markdown(report: dict | None) -> str:
    """The Performance page's GPU section: the sweep's table and its targets, as measured."""
    out = ["### GPU kernel benchmark: decode attention (the GPU lane's sweep)\n"]
    if report is None:
        out.append(never_run("kernel timings"))
        return "\n".join(out)
    step = report["steps"].get("benchmark")
    if step is None or "skipped" in step:
        reason = "not in this run" if step is None else step["skipped"]
        out.append(f'!!! warning "Not measured in the latest run"\n'
                   f"{indent(f'The benchmark step was skipped: {cell(reason)}.')}\n")
        out.append(context_line(report) + "\n")
        return "\n".join(out)
    error = step_error(step)
    if error:
        out.append(error)
        out.append(context_line(report) + "\n")
        return "\n".join(out)
    result = step["result"]
    out.append(result["table"] + "\n")
    bandwidth = result.get("copy_bandwidth_GBps")
    out.append(context_line(report, f"; measured copy bandwidth {bandwidth:.0f} GB/s"
                                    if bandwidth else "") + "\n")
    out.append("```text\n" + result["summary"] + "\n```\n")
    return "\n".join(out)
