"""``python -m conformance explore TRACE.json``: any trace in the trace explorer, on this machine.

The trace (a divergence a run saved in ``conformance/traces/failures/``, a corpus trace, one
written by hand) is checked (:func:`conformance.trace_file.load_trace`), replayed on the reference
only (no vLLM needed) and written as one self-contained page, the study site's explorer with its
script and style inlined: every step's state, the exercise questions, and each op's links, here to
the upstream lines on GitHub (at the release whose notes stand for the trace's) and to the
installed reference's source file.

A trace saved from a divergence carries the message and, since the runs save them, both systems'
outcome and state after the last op (``sides``, :func:`conformance.lockstep.side_states`); the page
shows both at that step and outlines the first field that differs. An older failure file without
``sides`` shows the message beside the reference's state.

Bad input is one line naming the file and the field (:class:`ExploreError`), never a traceback.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import sys
import tempfile
from html import escape
from pathlib import Path

from conformance.explorer.exercises import trace_questions
from conformance.explorer.op_notes import NoteRef
from conformance.explorer.page import divergence_view, explorer_data, op_links, resolved_questions, standalone_page
from conformance.explorer.steps import replay
from conformance.trace_file import TraceFileError, load_trace

PAGE = "index.html"


class ExploreError(Exception):
    """A trace that cannot be explored; ``str()`` is one line naming the file and the field."""


def github_note_href(note: NoteRef) -> str:
    """The upstream lines a note covers, on GitHub (the file alone where the note is not found)."""
    from annotations.citations import GITHUB_BLOB
    from annotations.model import ANNOTATIONS_ROOT, AnnotationFormatError, parse

    url = f"{GITHUB_BLOB}v{note.version}/{note.path}"
    try:
        found = parse(ANNOTATIONS_ROOT / f"v{note.version}" / f"{note.path}.md").note(note.note_id)
    except (OSError, AnnotationFormatError):
        found = None
    return url if found is None else f"{url}#L{found.start}-L{found.end}"


def reference_href(dotted: str) -> str | None:
    """The installed reference's source file defining ``dotted`` (a ``file:`` URL), or None."""
    from annotations.check import reference_source

    found = reference_source(dotted)
    return None if found is None else found[0].as_uri()


def _check_sides(trace: dict, source: str) -> None:
    sides = trace.get("sides")
    if sides is None:
        return
    for i, side in enumerate(sides):
        if not isinstance(side, dict):
            raise ExploreError(f"{source}: sides[{i}]: expected an object with label, outcome and snapshot")
        for name, kinds in (("label", (str,)), ("outcome", (dict, type(None))), ("snapshot", (dict, type(None)))):
            if name in side and not isinstance(side[name], kinds):
                raise ExploreError(f"{source}: sides[{i}].{name}: expected "
                                   f"{'a string' if name == 'label' else 'an object or null'}")


def intro_html(path: Path, trace: dict, steps: list[dict]) -> str:
    cfg = ", ".join(f"{k}={v}" for k, v in trace["config"].items() if k != "entropy")
    lines = [f'<p class="tx-source"><code>{escape(str(path))}</code> · semantics '
             f'<code>{escape(trace["semantics"])}</code> · {len(trace["ops"])} ops, replayed on the reference</p>']
    for key in ("source", "note"):
        if trace.get(key):
            lines.append(f'<p class="tx-source">{escape(trace[key])}</p>')
    lines.append(f'<p class="tx-config"><code>{escape(cfg)}</code></p>')
    crash = steps[-1]["outcome"] if len(steps) > 1 else None
    if crash and "crash" in crash:
        lines.append(f'<p class="tx-bad">The reference stops at op {len(steps) - 1}: it raised '
                     f"{escape(crash['crash'])}; the steps after it are not shown.</p>")
    if trace.get("divergence"):
        lines.append(f'<p>This trace was saved from a divergence: '
                     f'<a href="#step-{min(len(trace["ops"]), len(steps) - 1)}">go to the step where the two sides part</a>.</p>')
    return "".join(lines)


def build_page(path: Path) -> tuple[str, dict]:
    """The explorer page of the trace at ``path`` and its data; :class:`ExploreError` on bad input."""
    try:
        trace = load_trace(path)
    except TraceFileError as err:
        raise ExploreError(str(err)) from None
    _check_sides(trace, str(path))
    try:
        steps = replay(trace, snapshots=True, stop_on_crash=True)
    except (KeyError, ValueError, TypeError) as err:  # a config the reference cannot be built from
        raise ExploreError(f"{path}: config: the reference cannot be built from it: {type(err).__name__}: {err}") from None
    questions = resolved_questions(trace_questions(trace, steps), github_note_href, lambda target: None)
    digest = hashlib.sha256(json.dumps(trace["ops"], sort_keys=True).encode()).hexdigest()[:8]
    try:
        divergence = divergence_view(trace, steps)
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise ExploreError(f"{path}: sides: a saved snapshot is not a {trace['semantics']} snapshot "
                           f"({type(err).__name__}: {err})") from None
    data = explorer_data(path.stem, f"explore-{path.stem}-{digest}", trace, steps,
                         op_links(trace, github_note_href, reference_href), questions, divergence)
    return standalone_page(data, steps, intro_html(path, trace, steps)), data


def default_out(path: Path) -> Path:
    return Path(tempfile.gettempdir()) / "conformance-explore" / path.stem


def write_page(path: Path, out: Path | None = None) -> Path:
    """Write the page for ``path`` into ``out`` (default: a folder under the temp dir); its path."""
    html, _ = build_page(path)
    out = out or default_out(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
        page = out / PAGE
        page.write_text(html, encoding="utf-8")
    except OSError as err:
        raise ExploreError(f"{out}: cannot write the page: {err}") from None
    return page


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # one line per request would bury the address
        pass


def server(directory: Path, port: int = 0) -> http.server.ThreadingHTTPServer:
    """A server for ``directory`` on 127.0.0.1 (``port`` 0: a free one), not yet serving."""
    try:
        return http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(_Quiet, directory=str(directory)))
    except OSError as err:
        raise ExploreError(f"127.0.0.1:{port}: cannot serve there: {err}") from None


def main(trace: Path, out: Path | None = None, serve: bool = False, port: int = 0, stdout=None) -> int:
    """The command: write the page and print its path; with ``serve``, serve it until interrupted."""
    stdout = stdout or sys.stdout
    try:
        page = write_page(trace, out)
        if not serve:
            print(page, file=stdout)
            return 0
        httpd = server(page.parent, port)
    except ExploreError as err:
        print(f"explore: {err}", file=sys.stderr)
        return 2
    host, bound = httpd.server_address[:2]
    print(f"{page}\nserving it at http://{host}:{bound}/{PAGE} (Ctrl-C stops)", file=stdout, flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
    return 0
