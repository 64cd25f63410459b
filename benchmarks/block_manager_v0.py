"""How fast is the reference V0 block manager next to vLLM 0.10.2's ``SelfAttnBlockSpaceManager``?

    python -m benchmarks.block_manager_v0 [--repeats 5] [--requests 1000] [--traces all]
                                         [--seed 0] [--json PATH] [--profile]

The V0 companion of :mod:`benchmarks.block_manager`, measured the same way: each trace of
:mod:`benchmarks.traces_v0` is recorded once and replayed ``--repeats`` times by each side from
fresh managers, the two sides interleaved slice by slice with the leading side rotating, the
garbage collector paused, the clock the thread's CPU time. Unlike V1, the V0 scheduler has to
change its sequence objects between manager calls (the forward pass advances the computed count,
the sampler appends a token, a fork deep-copies a ``Sequence``); that is scheduler work, not page
management, so the clock is read around each manager call alone, and the cost of one pair of clock
reads (calibrated before each replay) is taken off again. All sequence objects -- vLLM's
``Sequence``/``SequenceGroup`` (built as the conformance adapter builds them) and the reference's
``SeqView`` values -- are made outside the timed calls. Operations per second count manager calls.

Every answer a side gives (allocation status, copy-on-write and swap pairs, common computed
blocks) is checked against the recorded one, untimed, and after each replay the whole ledger
(block tables, free lists, reference counts, cached hashes, evictor, trackers: the conformance
snapshot) is compared with the first side's. A difference is reported and the exit status is 1.

vLLM 0.10.2 is optional: without it only the reference is timed, and the output says so.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import platform
import pstats
import sys
import time
from collections.abc import Sequence
from typing import Any

from benchmarks import block_manager as v1_bench
from benchmarks.block_manager import Diverged, TraceResult, format_table
from benchmarks.traces_v0 import (
    ALLOCATE, APPEND_SLOTS, CACHED, CAN_ALLOCATE, CAN_APPEND, CAN_SWAP_IN, CAN_SWAP_OUT, COMMON, FORK,
    FREE, MARK, SCHEDULED, STEP, SWAP_IN, SWAP_OUT, V0_SETTINGS, V0Trace, make_v0_trace, reference_manager,
)
from reference.blocks.v0 import SeqView

PINNED = "0.10.2"
CLOCK = time.thread_time


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


def _pairs(got: Any) -> tuple:
    return tuple(map(tuple, got))


class _Replay:
    """A side's state during one replay: its manager, its sequence objects and its clock total."""

    def __init__(self, manager: Any, trace: V0Trace) -> None:
        self.manager = manager
        self.trace = trace
        self.cpu = 0.0
        self.calls = 0
        self.members: dict[int, list[int]] = {g: [g] for g in range(len(trace.prompts))}


# -- the reference --------------------------------------------------------------------------------
class ReferenceV0Side:
    """The reference ``BlockSpaceManager``, given ``SeqView`` values kept up to date untimed."""

    label = "reference"

    def prepare(self, trace: V0Trace) -> _Replay:
        state = _Replay(reference_manager(trace), trace)
        state.tokens = {i: list(p) for i, p in enumerate(trace.prompts)}
        state.computed = dict.fromkeys(state.tokens, 0)
        state.status = dict.fromkeys(state.tokens, "WAITING")
        state.views = {i: SeqView(i, p, 0, True) for i, p in enumerate(trace.prompts)}
        return state

    def replay(self, state: _Replay, ops: Sequence[tuple], offset: int = 0) -> None:  # noqa: C901
        m, views, status, members = state.manager, state.views, state.status, state.members
        clock, spent, calls, position = CLOCK, 0.0, 0, 0

        def group(g: int, wanted: str) -> list[SeqView]:
            return [views[s] for s in members[g] if status[s] == wanted]

        try:
            for position, op in enumerate(ops):
                kind = op[0]
                if kind == STEP:
                    _, sid, n, token = op
                    tokens = state.tokens[sid]
                    computed = state.computed[sid] = state.computed[sid] + n
                    prefill = views[sid].is_prefill and computed < len(tokens)  # decode is for good
                    if token is not None:
                        tokens.append(token)
                    views[sid] = SeqView(sid, tokens, computed, prefill)
                    continue
                calls += 1
                if kind == APPEND_SLOTS:
                    view = views[op[1]]
                    c = clock()
                    got = m.append_slots(view, 0)
                    spent += clock() - c
                    expected = op[2]
                    got = _pairs(got)
                elif kind == SCHEDULED:
                    c = clock()
                    m.get_block_table(op[1])
                    m.access_all_blocks_in_seq(op[1], op[2])
                    spent += clock() - c
                    continue
                elif kind == CAN_APPEND:
                    seqs = group(op[1], "RUNNING")
                    c = clock()
                    got = m.can_append_slots(seqs, 0)
                    spent += clock() - c
                    expected = op[2]
                elif kind == MARK:
                    c = clock()
                    m.mark_blocks_as_computed()
                    spent += clock() - c
                    continue
                elif kind == COMMON:
                    seqs = group(op[1], "RUNNING")
                    c = clock()
                    got = m.get_common_computed_block_ids(seqs)
                    spent += clock() - c
                    got, expected = tuple(got), op[2]
                elif kind == CACHED:
                    view = views[op[1]]
                    c = clock()
                    m.get_num_cached_tokens(view)
                    spent += clock() - c
                    continue
                elif kind == CAN_ALLOCATE:
                    first = group(op[1], "WAITING")[0]
                    c = clock()
                    got = m.can_allocate(first, 0).name
                    spent += clock() - c
                    expected = op[2]
                elif kind == ALLOCATE:
                    seqs = group(op[1], "WAITING")
                    c = clock()
                    m.allocate(seqs)
                    spent += clock() - c
                    for view in seqs:
                        status[view.seq_id] = "RUNNING"
                    continue
                elif kind == FREE:
                    c = clock()
                    m.free(op[1])
                    spent += clock() - c
                    status[op[1]] = "FINISHED"
                    continue
                elif kind == FORK:
                    _, g, parent, child = op
                    state.tokens[child] = list(state.tokens[parent])
                    state.computed[child] = state.computed[parent]
                    status[child] = status[parent]
                    views[child] = SeqView(child, state.tokens[child], state.computed[child], views[parent].is_prefill)
                    members[g].append(child)
                    c = clock()
                    m.fork(parent, child)
                    spent += clock() - c
                    continue
                elif kind in (CAN_SWAP_OUT, SWAP_OUT):
                    seqs = group(op[1], "RUNNING")
                    c = clock()
                    got = m.can_swap_out(seqs) if kind == CAN_SWAP_OUT else _pairs(m.swap_out(seqs))
                    spent += clock() - c
                    expected = op[2]
                    if kind == SWAP_OUT:
                        for view in seqs:
                            status[view.seq_id] = "SWAPPED"
                else:  # CAN_SWAP_IN, SWAP_IN
                    seqs = group(op[1], "SWAPPED")
                    c = clock()
                    got = m.can_swap_in(seqs, 0).name if kind == CAN_SWAP_IN else _pairs(m.swap_in(seqs))
                    spent += clock() - c
                    expected = op[2]
                    if kind == SWAP_IN:
                        for view in seqs:
                            status[view.seq_id] = "RUNNING"
                if got != expected:
                    raise Diverged(f"answered {got!r}, recorded {expected!r}")
        except Exception as err:
            raise Diverged(f"{self.label} diverged at op {offset + position} {ops[position][:3]}: {err!r}") from err
        finally:
            state.cpu += spent
            state.calls += calls

    def final_state(self, state: _Replay) -> dict:
        return state.manager.snapshot()


# -- vLLM -----------------------------------------------------------------------------------------
class VllmV0Side:
    """vLLM 0.10.2's ``SelfAttnBlockSpaceManager`` with its own ``Sequence``/``SequenceGroup`` objects.

    The manager and the sequences are built by the conformance adapter
    (:class:`conformance.adapters.vllm_v0.VllmV0System`), so both projects construct vLLM alike.
    """

    label = "vllm"

    def __init__(self) -> None:
        from conformance.adapters.vllm_v0 import VllmV0System  # imports vLLM lazily, on build

        self._system_class = VllmV0System

    def prepare(self, trace: V0Trace) -> _Replay:
        system = self._system_class(trace.config)
        state = _Replay(system.bm, trace)
        state.system = system
        size = trace.block_size
        state.seqs = {i: system._Sequence(i, inputs=system._token_inputs(list(p)), block_size=size)
                      for i, p in enumerate(trace.prompts)}
        state.groups = {i: system._SequenceGroup(request_id=str(i), seqs=[seq], arrival_time=0.0)
                        for i, seq in state.seqs.items()}
        return state

    def replay(self, state: _Replay, ops: Sequence[tuple], offset: int = 0) -> None:  # noqa: C901
        bm, seqs, groups, members = state.manager, state.seqs, state.groups, state.members
        system = state.system
        S, logprob = system._Status, system._Logprob
        clock, spent, calls, position = CLOCK, 0.0, 0, 0
        try:
            for position, op in enumerate(ops):
                kind = op[0]
                if kind == STEP:
                    _, sid, n, token = op
                    seq = seqs[sid]
                    if n:
                        seq.data.update_num_computed_tokens(n)
                    if token is not None:
                        seq.append_token_id(token, {token: logprob(0.0)})
                    continue
                calls += 1
                if kind == APPEND_SLOTS:
                    seq = seqs[op[1]]
                    c = clock()
                    got = bm.append_slots(seq, 0)
                    spent += clock() - c
                    expected = op[2]
                    got = _pairs(got)
                elif kind == SCHEDULED:
                    seq = seqs[op[1]]
                    c = clock()
                    bm.get_block_table(seq)
                    bm.access_all_blocks_in_seq(seq, op[2])
                    spent += clock() - c
                    continue
                elif kind == CAN_APPEND:
                    g = groups[op[1]]
                    c = clock()
                    got = bm.can_append_slots(g, 0)
                    spent += clock() - c
                    expected = op[2]
                elif kind == MARK:
                    g = groups[op[1]]
                    c = clock()
                    bm.mark_blocks_as_computed(g, 0)
                    spent += clock() - c
                    continue
                elif kind == COMMON:
                    running = groups[op[1]].get_seqs(status=S.RUNNING)  # the scheduler filters, untimed
                    c = clock()
                    got = bm.get_common_computed_block_ids(running)
                    spent += clock() - c
                    got, expected = tuple(got), op[2]
                elif kind == CACHED:
                    seq = seqs[op[1]]
                    c = clock()
                    bm.get_num_cached_tokens(seq)
                    spent += clock() - c
                    continue
                elif kind == CAN_ALLOCATE:
                    g = groups[op[1]]
                    c = clock()
                    got = bm.can_allocate(g, 0).name
                    spent += clock() - c
                    expected = op[2]
                elif kind == ALLOCATE:
                    g = groups[op[1]]
                    c = clock()
                    bm.allocate(g)
                    spent += clock() - c
                    for seq in g.get_seqs(status=S.WAITING):
                        seq.status = S.RUNNING
                    continue
                elif kind == FREE:
                    seq = seqs[op[1]]
                    c = clock()
                    bm.free(seq)
                    spent += clock() - c
                    seq.status = S.FINISHED_STOPPED
                    continue
                elif kind == FORK:
                    _, g, parent, child = op
                    seqs[child] = seqs[parent].fork(child)
                    members[g].append(child)
                    groups[g] = system._SequenceGroup(request_id=str(g), seqs=[seqs[s] for s in members[g]],
                                                      arrival_time=0.0)
                    c = clock()
                    bm.fork(seqs[parent], seqs[child])
                    spent += clock() - c
                    continue
                else:  # the swaps
                    g = groups[op[1]]
                    c = clock()
                    if kind == CAN_SWAP_OUT:
                        got = bm.can_swap_out(g)
                    elif kind == SWAP_OUT:
                        got = _pairs(bm.swap_out(g))
                    elif kind == CAN_SWAP_IN:
                        got = bm.can_swap_in(g, 0).name
                    else:
                        got = _pairs(bm.swap_in(g))
                    spent += clock() - c
                    expected = op[2]
                    old, new = {SWAP_OUT: (S.RUNNING, S.SWAPPED), SWAP_IN: (S.SWAPPED, S.RUNNING)}.get(kind, (0, 0))
                    if old:
                        for seq in g.get_seqs(status=old):
                            seq.status = new
                if got != expected:
                    raise Diverged(f"answered {got!r}, recorded {expected!r}")
        except Exception as err:
            raise Diverged(f"{self.label} diverged at op {offset + position} {ops[position][:3]}: {err!r}") from err
        finally:
            state.cpu += spent
            state.calls += calls

    def final_state(self, state: _Replay) -> dict:
        return state.system.snapshot()


# -- measuring ------------------------------------------------------------------------------------
SEGMENT_OPS = 2000


def interleaved_replay(runs: Sequence[tuple[Any, V0Trace]], first: int = 0) -> tuple[list[float], list[float], list[dict]]:
    """One replay per (side, trace), interleaved slice by slice: per side CPU s in calls, wall s, books."""
    states = [side.prepare(trace) for side, trace in runs]
    overhead = clock_pair_cost()
    wall = [0.0] * len(runs)
    longest = max(len(trace.ops) for _, trace in runs)
    gc.collect()
    gc.disable()
    try:
        for number, begin in enumerate(range(0, longest, SEGMENT_OPS)):
            shift = (first + number) % len(runs)
            for i in list(range(shift, len(runs))) + list(range(shift)):
                side, trace = runs[i]
                w = time.perf_counter()
                side.replay(states[i], trace.ops[begin:begin + SEGMENT_OPS], begin)
                wall[i] += time.perf_counter() - w
    finally:
        gc.enable()
    cpu = [max(s.cpu - s.calls * overhead, 1e-9) for s in states]
    return cpu, wall, [side.final_state(s) for (side, _), s in zip(runs, states)]


def measure(runs: Sequence[tuple[Any, V0Trace]], repeats: int) -> TraceResult:
    """Replay every (side, trace) pair ``repeats`` times from fresh managers; compare the books."""
    return v1_bench.measure(runs, repeats, interleaved_replay, runs[0][1].num_timed_ops)


def profile_side(side: Any, trace: V0Trace, top: int = 14) -> str:
    """cProfile one untimed replay; the functions with the most time of their own."""
    state = side.prepare(trace)
    profiler = cProfile.Profile()
    profiler.runcall(side.replay, state, trace.ops)
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


# -- command line ---------------------------------------------------------------------------------
def installed_vllm() -> tuple[bool, str]:
    """(whether vLLM 0.10.2 is installed, a sentence saying what was found)."""
    from conformance.versions import installed_vllm_version

    version = installed_vllm_version()
    if version is None:
        return False, "vLLM is absent from this environment: timing the reference alone"
    if version.split("+")[0] != PINNED:
        return False, f"vLLM {version} has no V0 block manager (only {PINNED} does): timing the reference alone"
    return True, f"vLLM {version} installed: reference V0 manager vs SelfAttnBlockSpaceManager"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.block_manager_v0",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--requests", type=int, default=1000, help="requests per trace")
    parser.add_argument("--traces", default="all", help=f"comma-separated subset of {', '.join(V0_SETTINGS)}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the results as JSON to this path")
    parser.add_argument("--profile", action="store_true", help="also cProfile one replay per side and trace")
    args = parser.parse_args(argv)
    names = list(V0_SETTINGS) if args.traces == "all" else args.traces.split(",")
    unknown = [n for n in names if n not in V0_SETTINGS]
    if unknown or args.repeats < 1 or args.requests < 1:
        parser.error(f"bad arguments: unknown traces {unknown}" if unknown else "repeats and requests must be >= 1")

    with_vllm, found = installed_vllm()
    sides: list[Any] = [ReferenceV0Side()] + ([VllmV0Side()] if with_vllm else [])
    labels = [side.label for side in sides]
    print(found)
    print(f"{args.requests} requests per trace, {args.repeats} repeats, seed {args.seed}; "
          f"timings on a shared machine are noisy: read the medians")
    results, profiles = [], {}
    for name in names:
        began = time.perf_counter()
        trace = make_v0_trace(name, args.requests, args.seed)
        result = measure([(side, trace) for side in sides], args.repeats)
        results.append(result)
        status = "; ".join(result.problems) if result.problems else "same answers and books on every replay"
        print(f"  {name}: {trace.num_timed_ops} manager calls, {trace.num_seqs} seqs, caching "
              f"{'on' if trace.enable_caching else 'off'} ({time.perf_counter() - began:.0f} s): {status}", flush=True)
        if args.profile:
            for side in sides:
                profiles[f"{name}/{side.label}"] = profile_side(side, trace)
    print()
    print(format_table(results, labels))
    print("kops/s: thousands of manager calls per CPU second of the replaying thread (calls alone, clock cost"
          " removed), over the repeats."
          + (" ref/vllm: per-repeat throughput ratio (> 1: the reference is faster); best/best: ratio"
             " of each side's fastest replay." if len(labels) == 2 else ""))
    for key, text in profiles.items():
        print(f"\n== cProfile {key} ==\n{text}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(_json_report(results, labels, found, args), handle, indent=2)
    return 1 if any(r.problems for r in results) else 0


def _json_report(results: Sequence[TraceResult], labels: Sequence[str], found: str, args) -> dict:
    return {"found": found, "sides": list(labels), "repeats": args.repeats, "requests": args.requests,
            "seed": args.seed, "python": platform.python_version(),
            "traces": v1_bench.json_trace_entries(results, labels, count_key="num_calls")}

if __name__ == "__main__":
    sys.exit(main())
