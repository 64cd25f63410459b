"""Run conformance properties against the installed vLLM and describe what was checked.

The report is printed as a table and written as JSON (the study site's conformance page reads
it). Every registered property appears in it: passed, failed (with the divergence and the path
of the saved trace), or not applicable (with the reason).

A property can be *required* (``required=[...]``, the command's ``--require``): then "not
applicable" is a failure. The project's own test command requires, in each pinned vLLM
environment, every property that release has, so a vLLM that fails to import, or a harness that
no longer finds a mechanism, cannot pass quietly. A user's own environment requires nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import platform
import sys
import time
from pathlib import Path

from conformance.lockstep import NotApplicable, save_trace
from conformance.properties import all_properties
from conformance.versions import installed_vllm_version

FAILURES = Path("conformance/traces/failures")


def device() -> str:
    """A short description of the accelerator the kernels ran on, or the CPU."""
    try:
        import torch
    except ImportError:
        return f"cpu ({platform.machine()}; torch not installed)"
    if torch.cuda.is_available():
        return f"cuda: {torch.cuda.get_device_name(0)} (torch {torch.__version__})"
    return f"cpu ({platform.machine()}, torch {torch.__version__})"


def run(names: list[str] | None, examples: int, steps: int, kernel_examples: int | None = None,
        out=None, required: list[str] | None = None) -> dict:
    """Run the selected properties (all when ``names`` is empty); return the report dict.

    Kernel properties (``kernel.*``) draw ``kernel_examples`` cases (default: ``examples``): on a
    CPU each case runs vLLM's and the reference's Triton kernels under the slow interpreter.
    """
    kernel_examples = kernel_examples or examples
    out = out or sys.stdout
    props = all_properties()
    required = set(required or [])
    unknown = sorted((set(names or []) | required) - set(props))
    if unknown:
        raise SystemExit(f"unknown property {', '.join(unknown)}; known: {', '.join(props)}")
    if names and required - set(names):
        raise SystemExit(f"required but not selected: {', '.join(sorted(required - set(names)))}")
    selected = [props[n] for n in (names or props)]
    report = {
        "vllm_version": installed_vllm_version(),
        "device": device(),
        "python": platform.python_version(),
        "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "settings": {"examples": examples, "steps": steps, "kernel_examples": kernel_examples,
                     "required": sorted(required)},
        "properties": [],
    }
    print(f"conformance: vLLM {report['vllm_version'] or '(not installed)'} on {report['device']}; "
          f"{len(selected)} properties, {examples} examples x {steps} steps per state machine, "
          f"{kernel_examples} cases per kernel property", file=out)
    t_all = time.perf_counter()
    for i, prop in enumerate(selected, 1):
        prefix = f"[{i}/{len(selected)}] {prop.name}"
        t0 = time.perf_counter()
        n = kernel_examples if prop.name.startswith("kernel.") else examples

        def progress(done: int, prefix=prefix, t0=t0, n=n) -> None:
            if done % max(1, n // 10) == 0:
                print(f"{prefix}: {done}/{n} examples ({time.perf_counter() - t0:.0f} s)",
                      file=out, flush=True)

        entry = {"name": prop.name, "checks": prop.checks, "required": prop.name in required}
        try:
            result = prop.run(n, steps, progress)
        except NotApplicable as why:
            if prop.name in required:
                entry.update(status="failed", examples=0, steps=0,
                             detail=f"required, but not applicable here: {why}")
            else:
                entry.update(status="not_applicable", examples=0, steps=0, detail=str(why))
        else:
            entry.update(status="passed" if result.passed else "failed", examples=result.examples,
                         steps=result.steps, detail=result.detail)
            trace = result.extra.get("trace")
            if trace:
                path = save_trace(trace, FAILURES, f"{prop.name}-{time.strftime('%Y%m%d-%H%M%S')}")
                entry["trace"] = str(path)
            entry.update({k: v for k, v in result.extra.items() if k != "trace"})
        entry["duration_s"] = round(time.perf_counter() - t0, 2)
        report["properties"].append(entry)
        print(f"{prefix}: {entry['status'].upper()} ({entry['examples']} examples, {entry['steps']} steps, "
              f"{entry['duration_s']:.1f} s) {entry['detail']}", file=out, flush=True)
        if entry.get("trace"):
            print(f"    shrunk trace saved to {entry['trace']}; replay: python -m conformance replay "
                  f"{entry['trace']}", file=out)
    report["duration_s"] = round(time.perf_counter() - t_all, 2)
    counts = {s: sum(p["status"] == s for p in report["properties"])
              for s in ("passed", "failed", "not_applicable")}
    report["summary"] = counts
    print(f"conformance: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['not_applicable']} not applicable ({report['duration_s']:.0f} s)", file=out)
    return report


def write(report: dict, path: Path) -> None:
    """Write the report as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n")
