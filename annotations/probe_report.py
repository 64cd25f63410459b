"""A reach probe's report: the upstream facts it records, how it is written, and whether it still
describes the bytes the notes were written for.

The probes (``reach_probe`` for V0, ``reach_probe_v1`` for V1, and ``prop_probe``, which runs the
notes' linked properties in both pinned releases) run vLLM under
:class:`annotations.line_trace.LineTracer` and commit one JSON report each; this module holds what
they share around that: where the installed vLLM lives, the lines its traced modules run at import, the
per-file facts every report carries, the compact JSON form, and the staleness check.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path

from annotations.line_trace import (
    LineTracer,
    declined_headers,
    def_header_lines,
    guard_spans,
    working_lines,
)
from annotations.model import AnnotationFile, discover


def installed_vllm_root() -> Path:
    """The folder holding the installed ``vllm`` package (upstream paths are relative to it)."""
    import vllm

    return Path(vllm.__file__).resolve().parent.parent


def lines_run_at_import(root: Path, traced: Iterable[str], files: list[str], entry_module: str) -> dict:
    """Import ``entry_module`` and then every traced file under the tracer: the module bodies
    (imports, class bodies, ``def`` statements) that run once, apart from any serving work."""
    import importlib

    tracer = LineTracer(root, traced)
    tracer.start()
    try:
        importlib.import_module(entry_module)
        for f in files:
            importlib.import_module(f[: -len(".py")].replace("/", "."))
    finally:
        tracer.stop()
    return tracer.lines()


def file_facts(root: Path, files: list[str]) -> dict:
    """The per-file facts every report carries: each file's sha256, its ``def`` header lines, its
    ``if``/``while``/``for`` spans and its working lines (each file read once)."""
    sources = {f: (root / f).read_bytes() for f in files}
    texts = {f: data.decode("utf-8") for f, data in sources.items()}
    return {
        "sha256": {f: hashlib.sha256(data).hexdigest() for f, data in sources.items()},
        "def_headers": {f: def_header_lines(text) for f, text in texts.items()},
        "guards": {f: guard_spans(text) for f, text in texts.items()},
        "working": {f: working_lines(text) for f, text in texts.items()},
    }


def write_report(report: dict, out: Path) -> None:
    """Indented JSON with every list of numbers on one line (the executed lines stay readable)."""
    text = json.dumps(report, indent=1)
    text = re.sub(r"\[[0-9,\s]*\]", lambda m: json.dumps(json.loads(m.group(0))), text)
    out.write_text(text + "\n", encoding="utf-8")


def read_report(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def stale_files(report: dict, version: str, files: list[AnnotationFile] | None = None) -> list[str]:
    """Traced files whose probed bytes are not the bytes the notes of ``version`` were written for."""
    if files is None:
        files = discover()
    return [
        f"{af.upstream}: probed sha256 {report['sha256'][af.upstream]} != note header {af.sha256}"
        for af in files
        if af.version == version and af.upstream in report["sha256"] and report["sha256"][af.upstream] != af.sha256
    ]


def entered_lines(report: dict, config: str, upstream: str, section: str = "configs") -> set[int]:
    """The lines of ``upstream`` that ran in the run ``config`` of ``report[section]`` (a reach
    probe's configurations, the link probe's property runs), less the headers of ``if``, ``while``
    and ``for`` statements whose body did not run."""
    ran = set(report[section][config]["executed"].get(upstream, []))
    return ran - declined_headers(report["guards"].get(upstream, []), ran)
