"""Check the notes' ``- prop:`` links by running each linked property under a line tracer.

A ``- prop: NAME`` line says that the conformance property ``NAME`` checks what the note describes.
A property can only check lines it runs, so this probe runs, in the environment of one pinned
release, every property that a note of that release's Python files links, each for a few examples,
and records which lines of those files ran while it did (:class:`annotations.line_trace.LineTracer`;
the lines the modules run at import are recorded apart, before any property runs). The report
(``annotations/prop-probe-<release>.json``) gives, per property, what the run did and its executed
lines; :func:`compare` sets it against the links: a link whose property ran none of the note's
runtime lines (:func:`annotations.line_trace.working_lines`, less ``def`` headers, less the
statements that run at import; the header of an ``if``, ``while`` or ``for`` whose body did not
run does not count as run) is a finding. A link whose property runs some of the note's lines but
skips the branch the note is about is not: the probe cannot tell which lines a note is about.

Running the lines is what a link needs, not all it needs: the probe does not show that the property
compares what those lines decide, which the note and the property's ``checks`` sentence say. The
CUDA and C++ notes (``csrc/``) cannot be traced; their links are read, and their properties run only
where a GPU or vLLM's CPU build is present.

Run it once per pinned release, in that release's environment (``scripts/ensure-env
requirements/vllm-<release>.txt``)::

    CUDA_VISIBLE_DEVICES="" TRITON_INTERPRET=1 PYTHONPATH=. $V/bin/python -m annotations.prop_probe

Importing this module needs no vLLM: :func:`compare` and :func:`load_report` are what the tests use.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from annotations import probe_report
from annotations.model import ANNOTATIONS_ROOT, AnnotationFile, discover
from annotations.probe_report import (
    entered_lines,
    file_facts,
    installed_vllm_root,
    lines_run_at_import,
    read_report,
    write_report,
)
from upstream.releases import V0_RELEASE, V1_RELEASE

RELEASES = (V0_RELEASE, V1_RELEASE)
COMMAND = 'CUDA_VISIBLE_DEVICES="" TRITON_INTERPRET=1 PYTHONPATH=. $V/bin/python -m annotations.prop_probe'
#: Examples per property (state machines: of up to STEPS steps, the test command's sizes; kernels:
#: cases). The real-size machines scale them down themselves (200 gives them 4 examples), so they get
#: more. A link whose lines need a rarer draw shows as a finding. The runs are derandomized, so the
#: same command records the same lines, examples and steps (only the timings differ).
EXAMPLES = {"state machine": 200, "kernel": 12, "v0.long_context": 500, "v1.long_context": 500}
STEPS = 100
#: The module each release's serving path imports first (its import-time lines are set aside).
ENTRY = {V0_RELEASE: "vllm.core.block_manager", V1_RELEASE: "vllm.v1.core.kv_cache_manager"}


def report_path(release: str) -> Path:
    return ANNOTATIONS_ROOT / f"prop-probe-{release}.json"


def traced_files(release: str, files: list[AnnotationFile] | None = None) -> list[str]:
    """The upstream Python files the notes of ``release`` annotate (the rest cannot be traced)."""
    if files is None:
        files = discover()
    return sorted(af.upstream for af in files if af.version == release and af.upstream.endswith(".py"))


def linked_properties(release: str, files: list[AnnotationFile] | None = None) -> list[str]:
    """Every property a note of ``release``'s Python files links."""
    if files is None:
        files = discover()
    traced = set(traced_files(release, files))
    return sorted({p for af in files if af.version == release and af.upstream in traced
                   for note in af.notes for p in note.props})


# --------------------------------------------------------------------------- running the properties


def _run_property(name: str, root: Path, files: list[str]) -> dict:
    from annotations.line_trace import LineTracer
    from conformance.lockstep import NotApplicable
    from conformance.properties import all_properties

    prop = all_properties()[name]
    examples = EXAMPLES.get(name) or EXAMPLES["kernel" if name.startswith("kernel.") else "state machine"]
    tracer = LineTracer(root, files)
    t0 = time.perf_counter()
    outcome: dict[str, object]
    tracer.start()
    try:
        result = prop.run(examples, STEPS)
        outcome = {"status": "passed" if result.passed else "failed", "examples": result.examples,
                   "steps": result.steps}
    except NotApplicable as why:
        outcome = {"status": "not_applicable", "detail": str(why)}
    finally:
        tracer.stop()
    outcome["seconds"] = round(time.perf_counter() - t0)
    outcome["executed"] = tracer.lines()
    return outcome


def run(release: str | None = None) -> dict:
    """Run every linked property of the installed pinned release and write its report."""
    import vllm

    installed = vllm.__version__
    if release is None:
        release = installed
    if installed != release or release not in RELEASES:
        raise SystemExit(f"prop_probe: installed vLLM {installed}; the probe runs in the environment of a "
                         f"pinned release ({', '.join(RELEASES)}), and notes of {release} need that release")
    from hypothesis import settings

    from conformance import vllm_log

    log = Path(tempfile.gettempdir()) / f"prop-probe-{release}.vllm.log"
    vllm_log.to_file(log)
    print(f"prop_probe: vLLM {release}; vLLM's own log lines go to {log}", flush=True)
    settings.register_profile("prop-probe", derandomize=True, database=None, deadline=None)
    settings.load_profile("prop-probe")
    root = installed_vllm_root()
    notes = discover()  # parsed once: the traced files and the linked properties both come from it
    files = traced_files(release, notes)
    names = linked_properties(release, notes)
    imported = lines_run_at_import(root, files, files, ENTRY[release])
    runs = {}
    for i, name in enumerate(names, 1):
        print(f"[{i}/{len(names)}] {name} ...", flush=True)
        runs[name] = _run_property(name, root, files)
        print(f"[{i}/{len(names)}] {name}: {runs[name]['status']} in {runs[name]['seconds']} s", flush=True)
    report = {
        "vllm_version": installed,
        "python": sys.version.split()[0],
        "command": COMMAND,
        "examples": EXAMPLES,
        "steps": STEPS,
        **file_facts(root, files),
        "imported": imported,
        "runs": runs,  # one run per linked property, by property name
    }
    write_report(report, report_path(release))
    return report


# --------------------------------------------------------------------------- comparing with the links

#: Links whose property runs none of the note's lines and whose note says so, by (upstream file,
#: note id, property): why the link stays. Anything else found fails.
EXPLAINED: dict[tuple[str, str, str], str] = {
    ("vllm/core/block/common.py", "common.cache_metric_data", "v0.long_context"): (
        "the real-size machine draws few examples (200 give it 4); it folds the hit-rate window only"
        " when one of them has caching on and makes 1000 whole-block allocations on one device, which"
        " the probe's derandomized 12 did not; the note says not every run does"),
}


@dataclass(frozen=True)
class Finding:
    kind: str  # "not-run": the property ran none of the note's lines; "not-probed": it was not run
    release: str
    file: str  # upstream path
    note: str
    prop: str
    why: str

    def __str__(self) -> str:
        return f"[{self.kind}] {self.release} {self.file} `{self.note}` -> {self.prop}: {self.why}"


def load_report(release: str) -> dict:
    return read_report(report_path(release))


def stale_files(report: dict, release: str, files: list[AnnotationFile] | None = None) -> list[str]:
    """Traced files whose probed bytes are not the bytes the notes of ``release`` were written for."""
    return probe_report.stale_files(report, release, files)


def compare(report: dict, release: str, files: list[AnnotationFile] | None = None) -> list[Finding]:
    """Every ``- prop:`` link of a traced note of ``release`` whose property ran none of its lines.

    Only the note's *runtime* lines count: its working lines less ``def`` headers and less the
    statements its module ran at import. A note with none (an interface, a signature and its
    docstring, a class body of constants) has nothing a run could show and is not compared.
    """
    if files is None:
        files = discover()
    findings = []
    for af in files:
        if af.version != release or af.upstream not in report["sha256"]:
            continue
        upstream = af.upstream
        runtime = (set(report["working"].get(upstream, [])) - set(report["def_headers"].get(upstream, []))
                   - set(report["imported"].get(upstream, [])))
        for note in af.notes:
            inside = range(note.start, note.end + 1)
            if not note.props or not any(n in inside for n in runtime):
                continue
            for prop in note.props:
                if prop not in report["runs"]:
                    findings.append(Finding("not-probed", release, upstream, note.id, prop,
                                            "the report has no run of this property: rerun the probe"))
                    continue
                ran = entered_lines(report, prop, upstream, "runs") & runtime
                if not any(n in inside for n in ran):
                    status = report["runs"][prop]["status"]
                    findings.append(Finding("not-run", release, upstream, note.id, prop,
                                            f"the property ({status}) ran none of L{note.start}-L{note.end}"))
    return findings


def unexplained(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if (f.file, f.note, f.prop) not in EXPLAINED]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m annotations.prop_probe", description=__doc__.split("\n")[0])
    parser.add_argument("--compare-only", metavar="RELEASE", choices=RELEASES,
                        help="read the committed report of RELEASE; run nothing")
    args = parser.parse_args(argv)
    release = args.compare_only
    report = load_report(release) if release else run()
    release = report["vllm_version"]
    for name, outcome in report["runs"].items():
        print(f"{name}: {outcome['status']}, {outcome.get('examples', 0)} examples in {outcome['seconds']} s")
    notes = discover()
    problems = stale_files(report, release, notes)
    findings = compare(report, release, notes)
    failing = unexplained(findings)
    for finding in findings:
        print(finding if finding in failing else f"{finding} (explained)")
    for line in problems:
        print(line)
    return 1 if problems or failing else 0


if __name__ == "__main__":
    raise SystemExit(main())
