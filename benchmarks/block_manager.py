"""How fast is the reference V1 page manager next to vLLM's own ``KVCacheManager``?

    python -m benchmarks.block_manager [--repeats 5] [--requests 2000] [--traces all]
                                      [--seed 0] [--json PATH] [--profile]

Each trace of :mod:`benchmarks.traces` is recorded once (seeded, so every run replays the same
calls) and then replayed ``--repeats`` times by each side from fresh managers. The two sides
replay *interleaved*, a slice of ``SEGMENT_OPS`` ops at a time with the leading side rotating, so
that the load swings of a shared machine fall on both alike. Only the manager calls a scheduler
makes are timed: the prefix-cache lookup, ``allocate_slots``, ``free``, appending a sampled
token (which hashes any block it completes) and the two counters a scheduler updates after an
allocation or a preemption. Building managers and request objects -- and with them hashing
every prompt -- happens before the clock starts, on both sides alike. The garbage collector is
paused while replaying, and the clock is the thread's CPU time (wall time is kept in the JSON),
which leaves out the time spent waiting for a core. Operations per second count every op of the
trace (a lookup plus its allocation is one op).

After every replay the side's final books (live block tables, free-queue order, reference
counts, cached hashes) are compared with the first side's, untimed: a benchmark that timed
different work would be worthless, so a mismatch, or an allocation outcome that differs from the
recorded one, is reported as such and the exit status is 1.

vLLM is optional: without it (or with a release the reference has no policy for) only the
reference is timed, and the output says so. The policy is the one matching the installed vLLM.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.traces import APPEND, FREE, SCHEDULE, WORKLOADS, Trace, make_trace, reference_manager
from reference.blocks.policies import V1_POLICIES, V1Policy

MAX_REPORTED_DIFFERENCES = 5


class Diverged(Exception):
    """A replay saw an outcome other than the recorded one, or a side refused a recorded call."""


# -- the two sides --------------------------------------------------------------------------------
class ReferenceSide:
    """The reference ``KVCacheManager`` addressed by request id strings."""

    def __init__(self, policy: V1Policy, label: str = "reference") -> None:
        self.policy = policy
        self.label = label

    def prepare(self, trace: Trace) -> tuple[Any, list[str]]:
        manager = reference_manager(trace.num_blocks, trace.block_size, trace.max_model_len, self.policy)
        ids = [trace.request_id(i) for i in range(len(trace.prompts))]
        for rid, prompt in zip(ids, trace.prompts):
            manager.add_request(rid, list(prompt))
        return manager, ids

    def replay(self, prepared: tuple[Any, list[str]], ops: Sequence[tuple], offset: int = 0) -> None:
        manager, ids = prepared
        lookup_hit, allocate, mark = manager.get_computed_blocks, manager.allocate_slots, manager.mark_computed
        append, free, preempt = manager.append_token_ids, manager.free, manager.preempt
        position = 0
        try:
            for position, op in enumerate(ops):
                kind = op[0]
                if kind == SCHEDULE:
                    _, index, n, with_lookup, ok = op
                    rid = ids[index]
                    if with_lookup:
                        found = lookup_hit(rid)
                        hit = found.num_tokens
                        got = allocate(rid, n, hit, found)
                    else:
                        hit = 0
                        got = allocate(rid, n)
                    if (got is None) is ok:
                        raise Diverged(f"allocation {'failed' if ok else 'succeeded'}; recorded the opposite")
                    if ok:
                        mark(rid, hit + n)
                elif kind == APPEND:
                    append(ids[op[1]], op[2])
                elif kind == FREE:
                    free(ids[op[1]])
                else:
                    preempt(ids[op[1]])
        except Exception as err:
            raise Diverged(f"{self.label} diverged at op {offset + position} {ops[position][:4]}: {err!r}") from err

    def final_state(self, prepared: tuple[Any, list[str]]) -> dict:
        manager = prepared[0]
        pool = manager.pool
        return _books(
            tables={rid: [b.block_id for b in t] for rid, t in manager.groups[0].req_to_blocks.items() if t},
            free_queue=pool.free_queue.block_ids(),
            num_free=pool.num_free_blocks,
            blocks=pool.blocks,
        )


class VllmSide:
    """The installed vLLM's ``KVCacheManager`` with one ``Request`` object per request.

    Managers and requests are built by the conformance adapter's builders
    (:class:`conformance.adapters.vllm_v1.VllmV1System`), so both projects' checks construct
    vLLM the same way; only the manager calls below are timed.
    """

    label = "vllm"

    def __init__(self, policy: V1Policy) -> None:
        from conformance.adapters.vllm_v1 import VllmV1System  # imports vLLM lazily, on build

        self.policy = policy
        self._system_class = VllmV1System

    def prepare(self, trace: Trace) -> tuple[Any, list[Any]]:
        system = self._system_class({
            "policy": self.policy.name, "block_size": trace.block_size, "max_model_len": trace.max_model_len,
            "num_blocks": trace.num_blocks, "groups": [{"kind": "full"}],
        })
        self.running, self.preempted = system.RequestStatus.RUNNING, system.RequestStatus.PREEMPTED
        requests = [system._make_request(trace.request_id(i), list(p), None, None) for i, p in enumerate(trace.prompts)]
        return system.manager, requests

    def replay(self, prepared: tuple[Any, list[Any]], ops: Sequence[tuple], offset: int = 0) -> None:
        manager, requests = prepared
        lookup_hit, allocate, free = manager.get_computed_blocks, manager.allocate_slots, manager.free
        running, preempted = self.running, self.preempted
        position = 0
        try:
            for position, op in enumerate(ops):
                kind = op[0]
                if kind == SCHEDULE:
                    _, index, n, with_lookup, ok = op
                    request = requests[index]
                    if with_lookup:
                        found = lookup_hit(request)
                        hit = found[1]
                        got = allocate(request, n, hit, found[0])
                    else:
                        hit = 0
                        got = allocate(request, n)
                    if (got is None) is ok:
                        raise Diverged(f"allocation {'failed' if ok else 'succeeded'}; recorded the opposite")
                    if ok:
                        request.num_computed_tokens += hit + n
                        request.status = running
                elif kind == APPEND:
                    requests[op[1]].append_output_token_ids(op[2])
                elif kind == FREE:
                    free(requests[op[1]])
                else:
                    request = requests[op[1]]
                    free(request)
                    request.status = preempted
                    request.num_computed_tokens = 0
        except Exception as err:
            raise Diverged(f"{self.label} diverged at op {offset + position} {ops[position][:4]}: {err!r}") from err

    def final_state(self, prepared: tuple[Any, list[Any]]) -> dict:
        manager = prepared[0]
        pool = manager.block_pool
        table_map = manager.coordinator.single_type_managers[0].req_to_blocks
        return _books(
            tables={rid: [b.block_id for b in t] for rid, t in table_map.items() if t},
            free_queue=[b.block_id for b in pool.free_block_queue.get_all_free_blocks()],
            num_free=pool.get_num_free_blocks(),
            blocks=pool.blocks,
        )


def _books(tables: dict, free_queue: list[int], num_free: int, blocks: Sequence[Any]) -> dict:
    """A side's final books in one plain shape, so that two sides compare with ``==``."""
    return {
        "tables": dict(sorted(tables.items())),
        "num_free_blocks": num_free,
        "free_queue": free_queue,
        "ref_cnts": [b.ref_cnt for b in blocks],
        "hashes": {b.block_id: bytes(b.block_hash).hex() for b in blocks if b.block_hash is not None},
    }


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
    seconds: dict[str, list[float]] = field(default_factory=dict)  # CPU seconds per repeat
    wall_seconds: dict[str, list[float]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def ops_per_second(self, label: str) -> list[float]:
        return [self.num_ops / s for s in self.seconds[label]]


SEGMENT_OPS = 2000  # ops per interleaving slice: ~10-30 ms of work, short next to load swings


def timed_replay(side: Any, trace: Trace) -> tuple[float, float, dict]:
    """One whole replay of ``trace`` by ``side`` alone: CPU seconds, wall seconds, final books."""
    prepared = side.prepare(trace)
    gc.collect()
    gc.disable()
    try:
        cpu, wall = time.thread_time(), time.perf_counter()
        side.replay(prepared, trace.ops)
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    finally:
        gc.enable()
    return cpu, wall, side.final_state(prepared)


def interleaved_replay(runs: Sequence[tuple[Any, Trace]], first: int = 0) -> tuple[list[float], list[float], list[dict]]:
    """One replay per (side, trace) pair, interleaved slice by slice; per side CPU s, wall s, books.

    On a machine shared with other work, the speed a process gets drifts over seconds (other
    jobs start and stop, cores are shared). Replaying whole traces one side after the other
    lets that drift land on one side only. Here every side replays ``SEGMENT_OPS`` ops in turn,
    the first side of each slice rotating, so both meet the same conditions; each slice is
    timed by the CPU clock of this thread, which leaves out time spent waiting for a core.
    """
    prepared = [side.prepare(trace) for side, trace in runs]
    cpu, wall = [0.0] * len(runs), [0.0] * len(runs)
    longest = max(len(trace.ops) for _, trace in runs)
    order = list(range(len(runs)))
    gc.collect()
    gc.disable()
    try:
        for number, begin in enumerate(range(0, longest, SEGMENT_OPS)):
            shift = (first + number) % len(runs)
            for i in order[shift:] + order[:shift]:
                side, trace = runs[i]
                ops = trace.ops[begin:begin + SEGMENT_OPS]
                c, w = time.thread_time(), time.perf_counter()
                side.replay(prepared[i], ops, begin)
                cpu[i] += time.thread_time() - c
                wall[i] += time.perf_counter() - w
    finally:
        gc.enable()
    return cpu, wall, [side.final_state(p) for (side, _), p in zip(runs, prepared)]


def measure(runs: Sequence[tuple[Any, Any]], repeats: int, replay=None,
            num_ops: int | None = None) -> TraceResult:
    """Replay every (side, trace) pair ``repeats`` times, interleaved, from fresh managers each time.

    Normally every pair holds the same trace; the pairs are explicit so that a test can hand one
    side a different trace and see the books comparison catch it. ``replay`` (default: this
    module's ``interleaved_replay``) and ``num_ops`` let the V0 benchmark reuse the loop.
    """
    replay = replay or interleaved_replay
    first_trace = runs[0][1]
    result = TraceResult(first_trace.name, len(first_trace.ops) if num_ops is None else num_ops,
                         dict(first_trace.counts))
    result.seconds = {side.label: [] for side, _ in runs}
    result.wall_seconds = {side.label: [] for side, _ in runs}
    for repeat in range(repeats):
        try:
            cpu, wall, books = replay(runs, first=repeat)
        except Diverged as err:
            result.problems.append(str(err))
            return result
        for (side, _), c, w, b in zip(runs, cpu, wall, books):
            result.seconds[side.label].append(c)
            result.wall_seconds[side.label].append(w)
            differences = compare_books(books[0], b)
            if differences:
                result.problems.append(f"{side.label} (repeat {repeat + 1}) ended with different books from "
                                       f"{runs[0][0].label}: " + "; ".join(differences))
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


def profile_side(side: Any, trace: Trace, top: int = 12) -> str:
    """cProfile one untimed replay; the functions with the most time of their own."""
    prepared = side.prepare(trace)
    profiler = cProfile.Profile()
    profiler.runcall(side.replay, prepared, trace.ops)
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


# -- command line ---------------------------------------------------------------------------------
def installed_vllm() -> tuple[str | None, str]:
    """(policy name matching the installed vLLM or None, a sentence saying what was found)."""
    from conformance.versions import V1_POLICY_NAMES as SUPPORTED, installed_vllm_version

    version = installed_vllm_version()
    if version is None:
        return None, "vLLM is absent from this environment: timing the reference alone"
    base = version.split("+")[0]
    if base not in SUPPORTED:
        return None, f"vLLM {version} has no reference policy: timing the reference alone"
    return SUPPORTED[base], f"vLLM {version} installed: reference (policy {SUPPORTED[base]}) vs vLLM"


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
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.block_manager", description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--requests", type=int, default=2000, help="requests per trace")
    parser.add_argument("--traces", default="all", help=f"comma-separated subset of {', '.join(WORKLOADS)}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policy", default="v0.33.0", help="reference policy when vLLM is absent")
    parser.add_argument("--json", help="write the results as JSON to this path")
    parser.add_argument("--profile", action="store_true", help="also cProfile one replay per side and trace")
    args = parser.parse_args(argv)
    names = list(WORKLOADS) if args.traces == "all" else args.traces.split(",")
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown or args.repeats < 1 or args.requests < 1:
        parser.error(f"bad arguments: unknown traces {unknown}" if unknown else "repeats and requests must be >= 1")

    vllm_policy, found = installed_vllm()
    policy = V1_POLICIES[vllm_policy or args.policy]
    sides: list[Any] = [ReferenceSide(policy)]
    if vllm_policy is not None:
        sides.append(VllmSide(policy))
    labels = [side.label for side in sides]
    print(found)
    print(f"{args.requests} requests per trace, {args.repeats} repeats, seed {args.seed}; "
          f"timings on a shared machine are noisy: read the medians")

    results, profiles = [], {}
    for name in names:
        began = time.perf_counter()
        trace = make_trace(name, args.requests, policy, args.seed)
        result = measure([(side, trace) for side in sides], args.repeats)
        results.append(result)
        status = "; ".join(result.problems) if result.problems else "same books on every replay"
        print(f"  {name}: {len(trace.ops)} ops {trace.counts} ({time.perf_counter() - began:.0f} s): {status}",
              flush=True)
        if args.profile:
            for side in sides:
                profiles[f"{name}/{side.label}"] = profile_side(side, trace)
    print()
    print(format_table(results, labels))
    print("kops/s: thousands of trace ops per CPU second of the replaying thread, over the repeats."
          + (" ref/vllm: per-repeat throughput ratio (> 1: the reference is faster); best/best: ratio"
             " of each side's fastest replay." if len(labels) == 2 else ""))
    for key, text in profiles.items():
        print(f"\n== cProfile {key} ==\n{text}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(_json_report(results, labels, found, policy, args), handle, indent=2)
    return 1 if any(r.problems for r in results) else 0


def json_trace_entries(results: Sequence[TraceResult], labels: Sequence[str], count_key: str = "num_ops") -> list[dict]:
    """One JSON entry per trace: counts, CPU and wall seconds, throughput spreads and ratios.

    Shared with :mod:`benchmarks.block_manager_v0`, which counts manager calls (``num_calls``)."""
    traces = []
    for r in results:
        entry: dict[str, Any] = {"name": r.name, count_key: r.num_ops, "counts": r.counts, "problems": r.problems,
                                 "cpu_seconds": r.seconds, "wall_seconds": r.wall_seconds, "ops_per_second": {}}
        for label in labels:
            if r.seconds.get(label):
                entry["ops_per_second"][label] = spread(r.ops_per_second(label))
        if len(labels) == 2 and not r.problems and all(r.seconds.get(label) for label in labels):
            entry["ratio_reference_over_vllm"] = spread(ratios(r, *labels))
            entry["ratio_best_over_best"] = best_ratio(r, *labels)
        traces.append(entry)
    return traces


def _json_report(results: Sequence[TraceResult], labels: Sequence[str], found: str, policy: V1Policy, args) -> dict:
    return {"found": found, "policy": policy.name, "sides": list(labels), "repeats": args.repeats,
            "requests": args.requests, "seed": args.seed, "python": platform.python_version(),
            "traces": json_trace_entries(results, labels)}

if __name__ == "__main__":
    sys.exit(main())
