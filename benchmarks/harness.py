"""The one benchmark harness: trace -> replay on a side -> timed calls -> books compared.

Every benchmark of :mod:`benchmarks` replays a recorded trace (a tuple of op tuples, the op code
first) on two or more *sides* -- the reference and the installed vLLM -- and compares them. A side
knows how to turn one op into the manager calls its scheduler would make; this module does the
rest, the same way for every benchmark:

* :func:`replay` is the single place where anything is timed. For each op it asks the side for the
  op's manager calls as one zero-argument callable (``side.call``, untimed: building requests,
  sequence views or status changes is scheduler work), reads the thread's CPU clock around that
  callable alone, then hands the answer back to the side (``side.check``, untimed) to compare it
  with the recorded one and do the scheduler's bookkeeping. The cost of one pair of clock reads,
  calibrated per replay, is taken off again. Time is kept per op kind, so a benchmark can report
  per-operation figures as well as the total.
* :func:`interleaved_replay` lets the sides take turns, ``SEGMENT_OPS`` ops at a time with the
  leading side rotating, so that the load swings of a shared machine fall on every side alike.
  The garbage collector is paused while replaying.
* :func:`measure` repeats that from fresh managers and, after each replay, compares every side's
  final books (``side.final_state``) with the first side's; a difference, or an answer other than
  the recorded one, is reported instead of a timing.

A side is any object with ``label``, ``prepare(trace) -> state``, ``call(state, op) -> callable or
None`` (None: the op changes only the side's own objects, e.g. a sampled token), ``check(state,
op, answer)`` and ``final_state(state) -> dict``.
"""

from __future__ import annotations

import cProfile
import gc
import io
import pstats
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from benchmarks.report import Spread, TraceEntry

if TYPE_CHECKING:
    from conformance.versions import Target

CLOCK = time.thread_time
SEGMENT_OPS = 2000  # ops per interleaving slice: ~10-30 ms of work, short next to load swings
MAX_REPORTED_DIFFERENCES = 5


class Diverged(Exception):
    """A replay saw an outcome other than the recorded one, or a side refused a recorded call."""


def clock_pair_cost(samples: int = 2000) -> float:
    """CPU seconds one ``start = clock(); ...; clock() - start`` costs with nothing in between."""
    best = float("inf")
    for _ in range(5):
        begin = CLOCK()
        for _ in range(samples):
            c = CLOCK()
            c = CLOCK() - c
        best = min(best, (CLOCK() - begin) / samples)
    return best


@dataclass
class Run:
    """One side's replay of one trace in progress: its state and its clock totals per op kind."""

    side: Any
    trace: Any
    state: Any
    key: Callable[[tuple], Any] = itemgetter(0)  # an op's kind: its op code unless told otherwise
    seconds: dict[Any, float] = field(default_factory=dict)  # op kind -> CPU seconds in calls
    calls: dict[Any, int] = field(default_factory=dict)  # op kind -> timed calls


def replay(run: Run, ops: Sequence[tuple], offset: int = 0) -> None:
    """Replay ``ops`` on ``run``'s side; the clock is read around each op's manager calls alone."""
    side, state, seconds, calls, key = run.side, run.state, run.seconds, run.calls, run.key
    call_of, check = side.call, side.check
    clock = CLOCK
    position = 0
    try:
        for position, op in enumerate(ops):  # noqa: B007 - the except clause below reads it
            call = call_of(state, op)
            if call is None:
                continue
            began = clock()
            answer = call()
            spent = clock() - began
            kind = key(op)
            seconds[kind] = seconds.get(kind, 0.0) + spent
            calls[kind] = calls.get(kind, 0) + 1
            check(state, op, answer)
    except Exception as err:
        raise Diverged(f"{side.label} diverged at op {offset + position} {ops[position][:4]}: {err!r}") from err


@dataclass
class Replayed:
    """What one replay of one side gives: CPU seconds per op kind (clock cost removed), wall
    seconds of the whole replay, and the final books."""

    seconds: dict[Any, float]
    calls: dict[Any, int]
    wall: float
    books: dict

    @property
    def cpu(self) -> float:
        return sum(self.seconds.values())


def interleaved_replay(pairs: Sequence[tuple[Any, Any]], first: int = 0,
                       key: Callable[[tuple], Any] = itemgetter(0)) -> list[Replayed]:
    """One replay per (side, trace) pair, interleaved slice by slice with the leading side rotating;
    time is kept per ``key(op)`` (default: the op code)."""
    runs = [Run(side, trace, side.prepare(trace), key) for side, trace in pairs]
    overhead = clock_pair_cost()
    wall = [0.0] * len(runs)
    longest = max(len(trace.ops) for _, trace in pairs)
    order = list(range(len(runs)))
    gc.collect()
    gc.disable()
    try:
        for number, begin in enumerate(range(0, longest, SEGMENT_OPS)):
            shift = (first + number) % len(runs)
            for i in order[shift:] + order[:shift]:
                w = time.perf_counter()
                replay(runs[i], runs[i].trace.ops[begin:begin + SEGMENT_OPS], begin)
                wall[i] += time.perf_counter() - w
    finally:
        gc.enable()
    out = []
    for run, w in zip(runs, wall):
        seconds = {k: max(s - run.calls[k] * overhead, 1e-9) for k, s in run.seconds.items()}
        out.append(Replayed(seconds, dict(run.calls), w, run.side.final_state(run.state)))
    return out


def timed_replay(side: Any, trace: Any) -> Replayed:
    """One whole replay of ``trace`` by ``side`` alone."""
    return interleaved_replay([(side, trace)])[0]


# -- books ----------------------------------------------------------------------------------------
def compare_books(expected: dict, actual: dict) -> list[str]:
    """Human-readable differences between two final states (empty when they agree)."""
    out = []
    for key in expected.keys() | actual.keys():
        a, b = expected.get(key), actual.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            for item in sorted(a.keys() | b.keys(), key=str):
                if a.get(item) != b.get(item):
                    out.append(f"{key}[{item}]: {a.get(item)} != {b.get(item)}")
        elif isinstance(a, list) and isinstance(b, list):
            first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            out.append(f"{key}: first difference at index {first} (lengths {len(a)} and {len(b)})")
        else:
            out.append(f"{key}: {a} != {b}")
    return sorted(out)[:MAX_REPORTED_DIFFERENCES] if out else []


# -- measuring ------------------------------------------------------------------------------------
@dataclass
class TraceResult:
    """Timings of every side on one trace, and whether all replays ended in the same books."""

    name: str
    num_ops: int
    counts: dict[str, int]
    op_names: Mapping[int, str] = field(default_factory=dict)
    seconds: dict[str, list[float]] = field(default_factory=dict)  # CPU seconds per repeat
    wall_seconds: dict[str, list[float]] = field(default_factory=dict)
    op_seconds: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # label -> op -> per repeat
    op_calls: dict[str, int] = field(default_factory=dict)  # op -> timed calls per replay
    problems: list[str] = field(default_factory=list)

    def ops_per_second(self, label: str) -> list[float]:
        return [self.num_ops / s for s in self.seconds[label]]


def measure(pairs: Sequence[tuple[Any, Any]], repeats: int, op_names: Mapping[Any, str] | None = None,
            num_ops: int | None = None, key: Callable[[tuple], Any] = itemgetter(0)) -> TraceResult:
    """Replay every (side, trace) pair ``repeats`` times, interleaved, from fresh managers each time.

    Normally every pair holds the same trace; the pairs are explicit so that a test can hand one
    side a different trace and see the books comparison catch it. ``num_ops`` (default: the
    trace's op count) is what the throughput figures count. Time is kept per ``key(op)``, named
    by ``op_names`` (default key: the op code).
    """
    first_trace = pairs[0][1]
    names = dict(op_names or {})
    result = TraceResult(first_trace.name, len(first_trace.ops) if num_ops is None else num_ops,
                         dict(first_trace.counts), names)
    labels = [side.label for side, _ in pairs]
    result.seconds = {label: [] for label in labels}
    result.wall_seconds = {label: [] for label in labels}
    result.op_seconds = {label: {} for label in labels}
    for repeat in range(repeats):
        try:
            replays = interleaved_replay(pairs, first=repeat, key=key)
        except Diverged as err:
            result.problems.append(str(err))
            return result
        for label, r in zip(labels, replays):
            result.seconds[label].append(r.cpu)
            result.wall_seconds[label].append(r.wall)
            for kind, s in r.seconds.items():
                result.op_seconds[label].setdefault(names.get(kind, str(kind)), []).append(s)
                result.op_calls[names.get(kind, str(kind))] = r.calls[kind]
            differences = compare_books(replays[0].books, r.books)
            if differences:
                result.problems.append(f"{label} (repeat {repeat + 1}) ended with different books from "
                                       f"{labels[0]}: " + "; ".join(differences))
                return result
    return result


def spread(values: Sequence[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def ratios(result: TraceResult, numerator: str, denominator: str) -> list[float]:
    """Per-repeat throughput ratios (numerator ops/s over denominator ops/s)."""
    return [d / n for n, d in zip(result.seconds[numerator], result.seconds[denominator])]


def best_ratio(result: TraceResult, numerator: str, denominator: str) -> float:
    """Fastest replay against fastest replay: interference from other work only ever slows a
    replay down, so each side's best time is its least disturbed one."""
    return min(result.seconds[denominator]) / min(result.seconds[numerator])


def profile_side(side: Any, trace: Any, top: int = 12) -> str:
    """cProfile one untimed replay; the functions with the most time of their own."""
    run = Run(side, trace, side.prepare(trace))
    profiler = cProfile.Profile()
    profiler.runcall(replay, run, trace.ops)
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


# -- reporting ------------------------------------------------------------------------------------
def format_table(results: Sequence[TraceResult], labels: Sequence[str]) -> str:
    rows = [["trace", "ops"] + [f"{label} kops/s min/med/max" for label in labels]]
    if len(labels) == 2:
        rows[0] += ["ref/vllm min/med/max", "best/best"]
    for r in results:
        row = [r.name, str(r.num_ops)]
        for label in labels:
            if r.seconds.get(label):
                s = spread(r.ops_per_second(label))
                row.append(f"{s['min'] / 1e3:.1f} / {s['median'] / 1e3:.1f} / {s['max'] / 1e3:.1f}")
            else:
                row.append("-")
        if len(labels) == 2:
            both = all(r.seconds.get(label) for label in labels) and not r.problems
            s = spread(ratios(r, *labels)) if both else None
            row.append(f"{s['min']:.2f} / {s['median']:.2f} / {s['max']:.2f}" if s else "-")
            row.append(f"{best_ratio(r, *labels):.2f}" if both else "-")
        rows.append(row)
    return align(rows)


def align(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def trace_entries(results: Sequence[TraceResult], labels: Sequence[str]) -> list[TraceEntry]:
    """One report entry per trace (:class:`benchmarks.report.TraceEntry`): counts, CPU and wall
    seconds, throughput spreads and ratios, and CPU seconds per op kind."""
    entries = []
    for r in results:
        paired = len(labels) == 2 and not r.problems and all(r.seconds.get(label) for label in labels)
        entries.append(TraceEntry(
            name=r.name, num_ops=r.num_ops, counts=r.counts, problems=r.problems, cpu_seconds=r.seconds,
            wall_seconds=r.wall_seconds, op_cpu_seconds=r.op_seconds, op_calls=r.op_calls,
            ops_per_second={label: Spread.of(r.ops_per_second(label)) for label in labels if r.seconds.get(label)},
            ratio_reference_over_vllm=Spread.of(ratios(r, *labels)) if paired else None,
            ratio_best_over_best=best_ratio(r, *labels) if paired else None))
    return entries


def run_traces(make, names: Sequence[str], sides: Sequence[Any], repeats: int, op_names: Mapping[int, str],
               describe, profile: bool) -> tuple[list[TraceResult], dict[str, str]]:
    """Make, measure (and optionally profile) each named trace on every side, printing progress."""
    results, profiles = [], {}
    for name in names:
        began = time.perf_counter()
        trace = make(name)
        num_ops = getattr(trace, "num_timed_ops", None)
        result = measure([(side, trace) for side in sides], repeats, op_names, num_ops)
        results.append(result)
        status = "; ".join(result.problems) if result.problems else "same answers and books on every replay"
        print(f"  {name}: {describe(trace)} ({time.perf_counter() - began:.0f} s): {status}", flush=True)
        if profile:
            for side in sides:
                profiles[f"{name}/{side.label}"] = profile_side(side, trace)
    return results, profiles


def installed_target(find) -> tuple[Target | None, str]:
    """(the installed vLLM's target from ``find`` -- ``conformance.versions.installed_v1`` or
    ``installed_v0`` -- or None, and when None the sentence saying why the reference is timed alone)."""
    from conformance.lockstep import NotApplicable
    from conformance.versions import HarnessError, installed_vllm_version

    try:
        target, _ = find()
    except (NotApplicable, HarnessError) as why:
        if installed_vllm_version() is None:
            return None, "vLLM is absent from this environment: timing the reference alone"
        return None, f"{why}: timing the reference alone"
    return target, f"vLLM {target.installed} installed" + (f" ({target.note})" if target.note else "")
