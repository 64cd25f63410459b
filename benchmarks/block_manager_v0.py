"""How fast is the reference V0 block manager next to vLLM 0.10.2's ``SelfAttnBlockSpaceManager``?

    python -m benchmarks.block_manager_v0 [--repeats 5] [--requests 1000] [--traces all]
                                         [--seed 0] [--json PATH] [--profile]

The V0 companion of :mod:`benchmarks.block_manager`, measured by the same harness
(:mod:`benchmarks.harness`): each trace of :mod:`benchmarks.traces_v0` is recorded once and
replayed ``--repeats`` times by each side from fresh managers, interleaved, the clock read around
each timed operation's manager calls alone. The V0 scheduler changes its sequence objects between manager calls (the
forward pass advances the computed count, the sampler appends a token, a fork deep-copies a
``Sequence``); that is scheduler work, not page management, and untimed. All sequence objects --
vLLM's ``Sequence``/``SequenceGroup`` (built by the conformance adapter's public API) and the
reference's ``SeqView`` values (one growing token list per sequence, as vLLM's ``Sequence``
keeps; both kept by the one V0 sequence model, :mod:`conformance.adapters.v0_sequences`) -- are
made outside the timed calls. Operations per second count the trace's timed operations: each
is one manager call, except ``scheduled``, a sequence's ``get_block_table`` and
``access_all_blocks_in_seq`` together.

Every answer a side gives (allocation status, copy-on-write and swap pairs, common computed
blocks) is checked against the recorded one, untimed, and after each replay the whole ledger
(block tables, free lists, reference counts, cached hashes, evictor, trackers: the conformance
snapshot) is compared with the first side's. A difference is reported and the exit status is 1.

vLLM 0.10.2 is optional: without it only the reference is timed, and the output says so.
"""

from __future__ import annotations

import argparse
import platform
import sys
from collections.abc import Sequence
from functools import partial
from typing import Any

from benchmarks.harness import Diverged, TraceResult, format_table, run_traces, trace_entries
from benchmarks.harness import measure as harness_measure
from benchmarks.report import BlockManagerReport
from benchmarks.traces_v0 import (
    ALLOCATE,
    APPEND_SLOTS,
    CACHED,
    CAN_ALLOCATE,
    CAN_APPEND,
    CAN_SWAP_IN,
    CAN_SWAP_OUT,
    COMMON,
    FORK,
    FREE,
    MARK,
    OP_NAMES,
    SCHEDULED,
    STEP,
    SWAP_IN,
    SWAP_OUT,
    V0_SETTINGS,
    V0Trace,
    make_v0_trace,
    reference_manager,
)
from conformance.adapters.reference_v0 import snapshot
from conformance.adapters.v0_sequences import RUNNING, SWAPPED, WAITING, V0Sequences

# Ops whose answer is compared with the recorded one, and how an answer is made comparable.
ANSWERED = {
    APPEND_SLOTS: lambda got: tuple(map(tuple, got)), CAN_APPEND: bool, COMMON: tuple,
    CAN_ALLOCATE: lambda got: got.name, CAN_SWAP_OUT: bool, SWAP_OUT: lambda got: tuple(map(tuple, got)),
    CAN_SWAP_IN: lambda got: got.name, SWAP_IN: lambda got: tuple(map(tuple, got)),
}
# Status changes a call makes to its group's sequences: (from, to).
MOVES = {ALLOCATE: (WAITING, RUNNING), SWAP_OUT: (RUNNING, SWAPPED), SWAP_IN: (SWAPPED, RUNNING)}


def check_answer(op: tuple, got: Any) -> None:
    """Compare a call's answer with the recorded one (ops that answer nothing pass)."""
    shape = ANSWERED.get(op[0])
    if shape is not None and shape(got) != op[2]:
        raise Diverged(f"answered {shape(got)!r}, recorded {op[2]!r}")


def _step(sequences: Any, op: tuple) -> None:
    """A STEP (the forward pass and the sampler, not a manager call) on either side's sequences."""
    _, sid, n, token = op
    sequences.compute(sid, n)
    if token is not None:
        sequences.append_token(sid, token)


def _prepare_sequences(sequences: Any, trace: V0Trace) -> Any:
    """``sequences`` (either side's) holding one waiting group per prompt, as the trace numbers them."""
    for i, prompt in enumerate(trace.prompts):
        sequences.add_group(i, [i], prompt)
    return sequences


class _ReferenceState:
    """A reference side's manager and its sequences (:class:`~conformance.adapters.v0_sequences.V0Sequences`)."""

    def __init__(self, manager: Any, trace: V0Trace) -> None:
        self.manager = manager
        self.sequences = _prepare_sequences(V0Sequences(), trace)


# -- the reference --------------------------------------------------------------------------------
class ReferenceV0Side:
    """The reference ``BlockSpaceManager``, given ``SeqView`` values of lists kept up to date untimed."""

    label = "reference"

    def prepare(self, trace: V0Trace) -> _ReferenceState:
        return _ReferenceState(reference_manager(trace), trace)

    def call(self, s: _ReferenceState, op: tuple):  # one line per op kind
        m, q, kind = s.manager, s.sequences, op[0]
        if kind == STEP:
            return _step(q, op)
        if kind == FORK:
            _, g, parent, child = op
            q.fork(g, parent, child)
            return partial(m.fork, parent, child)
        if kind == APPEND_SLOTS:
            return partial(m.append_slots, q.seqs[op[1]].view(), 0)
        if kind == SCHEDULED:
            return partial(_scheduled, m.get_block_table, m.access_all_blocks_in_seq, op[1], op[2])
        if kind == CACHED:
            return partial(m.get_num_cached_tokens, q.seqs[op[1]].view())
        if kind == MARK:
            return m.mark_blocks_as_computed
        if kind == FREE:
            q.finish(op[1])
            return partial(m.free, op[1])
        if kind == CAN_ALLOCATE:
            return partial(m.can_allocate, q.views(op[1], WAITING)[0], 0)
        if kind in MOVES:
            old, new = MOVES[kind]
            views = q.views(op[1], old)
            q.move(op[1], old, new)
            return partial({ALLOCATE: m.allocate, SWAP_OUT: m.swap_out, SWAP_IN: m.swap_in}[kind], views)
        if kind == CAN_APPEND:
            return partial(m.can_append_slots, q.views(op[1], RUNNING), 0)
        if kind == COMMON:
            return partial(m.get_common_computed_block_ids, q.views(op[1], RUNNING))
        if kind == CAN_SWAP_OUT:
            return partial(m.can_swap_out, q.views(op[1], RUNNING))
        return partial(m.can_swap_in, q.views(op[1], SWAPPED), 0)  # CAN_SWAP_IN

    def check(self, s: _ReferenceState, op: tuple, got: Any) -> None:
        check_answer(op, got)

    def final_state(self, s: _ReferenceState) -> dict:
        return snapshot(s.manager)


def _scheduled(get_block_table, access, seq: Any, now: float) -> None:
    """What the model runner asks of the manager for each scheduled sequence every step."""
    get_block_table(seq)
    access(seq, now)


# -- vLLM -----------------------------------------------------------------------------------------
class _VllmState:
    """vLLM's manager and its own ``Sequence`` objects for one replay, built by the adapter."""

    def __init__(self, system: Any, trace: V0Trace) -> None:
        from conformance.adapters.vllm_v0 import VllmV0Sequences

        self.system, self.bm = system, system.bm
        self.sequences = _prepare_sequences(VllmV0Sequences(system), trace)


class VllmV0Side:
    """vLLM 0.10.2's ``SelfAttnBlockSpaceManager`` with its own ``Sequence``/``SequenceGroup`` objects.

    The manager and the sequences are built by the conformance adapter's public API
    (:class:`conformance.adapters.vllm_v0.VllmV0System` and ``VllmV0Sequences``), so both
    projects construct vLLM alike.
    """

    label = "vllm"

    def __init__(self) -> None:
        from conformance.adapters.vllm_v0 import VllmV0System  # imports vLLM lazily, on build

        self._system_class = VllmV0System

    def prepare(self, trace: V0Trace) -> _VllmState:
        return _VllmState(self._system_class(trace.config), trace)

    def call(self, v: _VllmState, op: tuple):  # one line per op kind
        bm, q, kind = v.bm, v.sequences, op[0]
        if kind == STEP:
            return _step(q, op)
        if kind == FORK:
            _, g, parent, child = op
            q.fork(g, parent, child)
            return partial(bm.fork, q.seqs[parent], q.seqs[child])
        if kind == APPEND_SLOTS:
            return partial(bm.append_slots, q.seqs[op[1]], 0)
        if kind == SCHEDULED:
            return partial(_scheduled, bm.get_block_table, bm.access_all_blocks_in_seq, q.seqs[op[1]], op[2])
        if kind == CACHED:
            return partial(bm.get_num_cached_tokens, q.seqs[op[1]])
        if kind == FREE:
            return partial(bm.free, q.seqs[op[1]])
        if kind == COMMON:
            return partial(bm.get_common_computed_block_ids, q.with_status(op[1], RUNNING))
        group = q.group(op[1])
        if kind == MARK:
            return partial(bm.mark_blocks_as_computed, group, 0)
        if kind == CAN_ALLOCATE:
            return partial(bm.can_allocate, group, 0)
        if kind == ALLOCATE:
            return partial(bm.allocate, group)
        if kind == CAN_APPEND:
            return partial(bm.can_append_slots, group, 0)
        if kind == CAN_SWAP_OUT:
            return partial(bm.can_swap_out, group)
        if kind == SWAP_OUT:
            return partial(bm.swap_out, group)
        if kind == CAN_SWAP_IN:
            return partial(bm.can_swap_in, group, 0)
        return partial(bm.swap_in, group)  # SWAP_IN

    def check(self, v: _VllmState, op: tuple, got: Any) -> None:
        check_answer(op, got)
        kind = op[0]
        if kind == FREE:
            v.sequences.finish(op[1])
        elif kind in MOVES:
            v.sequences.move(op[1], *MOVES[kind])

    def final_state(self, v: _VllmState) -> dict:
        return v.system.snapshot()


# -- measuring ------------------------------------------------------------------------------------
def measure(runs: Sequence[tuple[Any, V0Trace]], repeats: int) -> TraceResult:
    """Replay every (side, trace) pair ``repeats`` times from fresh managers; compare the books."""
    return harness_measure(runs, repeats, OP_NAMES, runs[0][1].num_timed_ops)


# -- command line ---------------------------------------------------------------------------------
def installed_vllm() -> tuple[bool, str]:
    """(whether the installed vLLM has a V0 block manager the harness drives, a sentence saying what was found)."""
    from benchmarks.harness import installed_target
    from conformance.versions import installed_v0

    target, found = installed_target(installed_v0)
    if target is None:
        return False, found
    return True, f"{found}: reference V0 manager vs SelfAttnBlockSpaceManager"


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
    results, profiles = run_traces(
        lambda name: make_v0_trace(name, args.requests, args.seed), names, sides, args.repeats, OP_NAMES,
        lambda t: (f"{t.num_timed_ops} timed ops, {t.num_seqs} seqs, caching "
                   f"{'on' if t.enable_caching else 'off'}"), args.profile)
    print()
    print(format_table(results, labels))
    print("kops/s: thousands of timed trace ops per CPU second of the replaying thread (calls alone, clock cost"
          " removed), over the repeats."
          + (" ref/vllm: per-repeat throughput ratio (> 1: the reference is faster); best/best: ratio"
             " of each side's fastest replay." if len(labels) == 2 else ""))
    for key, text in profiles.items():
        print(f"\n== cProfile {key} ==\n{text}")
    if args.json:
        json_report(results, labels, found, args).write(args.json)
    return 1 if any(r.problems for r in results) else 0


def json_report(results: Sequence[TraceResult], labels: Sequence[str], found: str, args) -> BlockManagerReport:
    """The run's report, as ``--json`` writes it (a trace's count is its timed operations)."""
    return BlockManagerReport(found=found, sides=list(labels), repeats=args.repeats, requests=args.requests,
                              seed=args.seed, python=platform.python_version(),
                              traces=trace_entries(results, labels), count_key="num_calls")


if __name__ == "__main__":
    sys.exit(main())
