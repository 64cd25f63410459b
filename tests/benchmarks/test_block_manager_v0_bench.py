"""The V0 block-manager benchmark's traces and its end-of-trace books check.

No timing is asserted: timings belong to the script's output. What is tested is that the V0
benchmark cannot silently time the wrong thing: traces are functions of their seed, a fresh
reference accepts every recorded call with the recorded answer, and replays that end with
different books are reported instead of being compared.
"""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.block_manager_v0 import ReferenceV0Side, measure
from benchmarks.harness import Run, replay
from benchmarks.traces_v0 import ALLOCATE, CAN_APPEND, FREE, STEP, V0_SETTINGS, make_v0_trace

SMALL = 20  # requests per trace: enough for churn, forks and a full tight pool


@pytest.mark.parametrize("name", list(V0_SETTINGS))
def test_v0_traces_are_functions_of_their_seed(name):
    """Catches: a V0 generator or recorder using unseeded randomness (or set order), so that two
    runs -- or the two sides of one run -- would be handed different work."""
    first = make_v0_trace(name, SMALL, seed=3)
    again = make_v0_trace(name, SMALL, seed=3)
    other = make_v0_trace(name, SMALL, seed=4)
    assert first.ops == again.ops and first.prompts == again.prompts
    assert first.ops != other.ops


@pytest.mark.parametrize("name", list(V0_SETTINGS))
def test_fresh_reference_accepts_every_op_with_the_recorded_answer(name):
    """Catches: a recorder whose calls a fresh manager refuses or answers differently (a stale
    is_prefill flag, appending before allocating, freeing twice), which would make the timed
    replay measure an error path; and a trace that leaves pages behind (a sequence never freed)."""
    trace = make_v0_trace(name, SMALL)
    result = measure([(ReferenceV0Side(), trace)], repeats=1)
    assert result.problems == []
    freed = [op[1] for op in trace.ops if op[0] == FREE]
    assert sorted(freed) == list(range(trace.num_seqs))  # every sequence freed exactly once
    assert sum(1 for op in trace.ops if op[0] == ALLOCATE) == len(trace.prompts)
    side = ReferenceV0Side()
    run = Run(side, trace, side.prepare(trace))
    replay(run, trace.ops)
    books = side.final_state(run.state)
    assert books["tables"] == {}
    assert run.state.manager.get_num_free_gpu_blocks() == trace.num_gpu_blocks


def test_books_check_catches_a_different_final_state():
    """Catches: a books comparison that never fires, so that two sides doing different work (here
    one side is handed a trace whose last request is never freed) would be timed as equals."""
    trace = make_v0_trace("decode_heavy", SMALL)
    last_free = max(i for i, op in enumerate(trace.ops) if op[0] == FREE)
    short = dataclasses.replace(trace, ops=trace.ops[:last_free] + trace.ops[last_free + 1:])
    result = measure([(ReferenceV0Side(), trace), (_Relabelled("other"), short)], repeats=1)
    assert len(result.problems) == 1 and "different books" in result.problems[0]


def test_replay_reports_a_changed_answer():
    """Catches: a replay that ignores the recorded answers, so that a side answering differently
    (e.g. a different copy-on-write pair) would still be timed as doing the same work."""
    trace = make_v0_trace("decode_heavy", SMALL)
    index = next(i for i, op in enumerate(trace.ops) if op[0] == STEP)
    bad_at = next(i for i, op in enumerate(trace.ops) if i > index and op[0] == CAN_APPEND)
    op = trace.ops[bad_at]
    broken = dataclasses.replace(trace, ops=trace.ops[:bad_at] + ((op[0], op[1], not op[2]),) + trace.ops[bad_at + 1:])
    result = measure([(ReferenceV0Side(), broken)], repeats=1)
    assert len(result.problems) == 1 and "diverged" in result.problems[0]


class _Relabelled(ReferenceV0Side):
    def __init__(self, label: str) -> None:
        self.label = label
