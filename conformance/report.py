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

from conformance import vllm_log
from conformance.lockstep import NotApplicable, save_trace
from conformance.matrix import project_state
from conformance.properties import all_properties
from conformance.versions import HarnessError, installed_target, installed_vllm_version

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


def target_description() -> dict:
    """The installed version, the release it is driven as, and why (for the report and its header)."""
    try:
        target = installed_target()
    except NotApplicable:
        return {"installed": None, "driven_as": None, "exact": False, "note": "vLLM is not installed"}
    except HarnessError as err:
        return {"installed": installed_vllm_version(), "driven_as": None, "exact": False, "note": str(err)}
    return {"installed": target.installed, "driven_as": target.release, "exact": target.exact, "note": target.note}


def progress_line(prefix: str, done: int, asked: int, elapsed_s: float) -> str:
    """A property's progress line after ``done`` examples started, of ``asked`` to be kept.

    Hypothesis stops after ``asked`` examples it keeps; it also starts examples that it then
    discards (a draw that ran past its data, a rule with no valid choice), so ``done`` can pass
    ``asked``: the line says so rather than print a fraction above one."""
    count = f"{done}/{asked} examples" if done <= asked else \
        f"{done} examples started ({asked} to keep; Hypothesis discards some it starts)"
    return f"{prefix}: {count} ({elapsed_s:.0f} s)"


def run(names: list[str] | None, examples: int, steps: int, kernel_examples: int | None = None,
        out=None, required: list[str] | None = None, vllm_log_path: Path | None = None) -> dict:
    """Run the selected properties (all when ``names`` is empty); return the report dict.

    Kernel properties (``kernel.*``) draw ``kernel_examples`` cases (default: ``examples``): on a
    CPU each case runs vLLM's and the reference's Triton kernels under the slow interpreter.
    vLLM's own log lines go to ``vllm_log_path`` (None: to the terminal, as vLLM prints them).
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
    target = target_description()
    if vllm_log_path is not None:
        vllm_log.to_file(vllm_log_path)
    report = {
        "vllm_version": installed_vllm_version(),
        "driven_as": target["driven_as"],
        "exact_release": target["exact"],
        "target_note": target["note"],
        "vllm_log": str(vllm_log_path) if vllm_log_path is not None else None,
        "device": device(),
        "python": platform.python_version(),
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        # the commit of this project the run happened at: whether the reference or the harness
        # changed since decides whether its verdicts still speak for them (the site says so)
        "project": project_state(Path(__file__).resolve().parents[1]),
        "settings": {"examples": examples, "steps": steps, "kernel_examples": kernel_examples,
                     "required": sorted(required)},
        "properties": [],
    }
    print(f"conformance: vLLM {report['vllm_version'] or '(not installed)'} on {report['device']}; "
          f"{len(selected)} properties, {examples} examples x {steps} steps per state machine, "
          f"{kernel_examples} cases per kernel property", file=out)
    if target["installed"] is not None and not target["exact"]:
        print(f"conformance: {target['note']}", file=out)
    elif target["driven_as"] is not None:
        print(f"conformance: {target['installed']} is a measured release: driven as itself", file=out)
    if vllm_log_path is not None:
        print(f"conformance: vLLM's own log lines go to {vllm_log_path}", file=out)
    t_all = time.perf_counter()
    for i, prop in enumerate(selected, 1):
        prefix = f"[{i}/{len(selected)}] {prop.name}"
        t0 = time.perf_counter()
        n = kernel_examples if prop.name.startswith("kernel.") else examples

        def progress(done: int, prefix=prefix, t0=t0, n=n) -> None:
            if done % max(1, n // 10) == 0:
                print(progress_line(prefix, done, n, time.perf_counter() - t0), file=out, flush=True)

        entry = {"name": prop.name, "checks": prop.checks, "required": prop.name in required}
        try:
            result = prop.run(n, steps, progress)
        except NotApplicable as why:
            if prop.name in required:
                entry.update(status="failed", examples=0, steps=0,
                             detail=f"required, but not applicable here: {why}")
            else:
                entry.update(status="not_applicable", examples=0, steps=0, detail=str(why))
        except Exception as err:  # noqa: BLE001 - a harness that could not drive this vLLM: never a traceback, never a verdict
            kind = "" if isinstance(err, HarnessError) else f"{type(err).__name__}: "
            entry.update(status="failed", examples=0, steps=0, failure="harness_error",
                         detail=f"harness error (not a verdict on vLLM or the reference): {kind}{err}"[:3000])
        else:
            entry.update(status="passed" if result.passed else "failed", examples=result.examples,
                         steps=result.steps, detail=result.detail)
            trace = result.extra.get("trace")
            if not result.passed and not target["exact"] and target["driven_as"] and \
                    result.extra.get("failure") == "divergence":
                entry["candidate_behaviour_change"] = (
                    f"vLLM {target['installed']} differs here from {target['driven_as']}, the release it "
                    "is driven as: a candidate behaviour change (or a bug). To record it, name the field "
                    "in conformance/changelog.py with its first release and upstream lines, give the "
                    "reference its branch, and rerun this property")
            if trace:
                path = save_trace(trace, FAILURES, f"{prop.name}-{time.strftime('%Y%m%d-%H%M%S')}")
                entry["trace"] = str(path)
            entry.update({k: v for k, v in result.extra.items() if k != "trace"})
        entry["duration_s"] = round(time.perf_counter() - t0, 2)
        report["properties"].append(entry)
        print(f"{prefix}: {entry['status'].upper()} ({entry['examples']} examples, {entry['steps']} steps, "
              f"{entry['duration_s']:.1f} s) {entry['detail']}", file=out, flush=True)
        if entry.get("candidate_behaviour_change"):
            print(f"    {entry['candidate_behaviour_change']}", file=out)
        if entry.get("trace"):
            print(f"    shrunk trace saved to {entry['trace']}; replay: python -m conformance replay "
                  f"{entry['trace']}; explore: python -m conformance explore {entry['trace']}", file=out)
    report["duration_s"] = round(time.perf_counter() - t_all, 2)
    counts = {s: sum(p["status"] == s for p in report["properties"])
              for s in ("passed", "failed", "not_applicable")}
    report["summary"] = counts
    api = sys.modules.get("conformance.adapters.installed_api")
    report["api_detected"] = api.differences_seen() if api is not None else {}
    if report["api_detected"]:
        shown = ", ".join(f"{k} ({v['change_log']!r} -> {v['installed_code']!r})" for k, v in report["api_detected"].items())
        print(f"conformance: the installed code's V1 API differs from the change log's at "
              f"{target['driven_as']} in: {shown} (the installed code was followed)", file=out)
    print(f"conformance: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['not_applicable']} not applicable ({report['duration_s']:.0f} s)", file=out)
    return report


def write(report: dict, path: Path) -> None:
    """Write the report as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n")
