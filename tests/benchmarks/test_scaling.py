"""The scaling benchmark: its long-context traces, its per-operation figures and its verdicts.

No timing is asserted: what is tested is that the benchmark replays real work at the sizes it
names, keeps decode and prefill apart, fails loudly when two sides differ, and reports every
target it misses.
"""

from __future__ import annotations

import json

from benchmarks import scaling
from benchmarks.block_manager import ReferenceSide
from benchmarks.block_manager_v0 import ReferenceV0Side
from benchmarks.harness import Run, measure, replay
from benchmarks.report import ScalingOp, ScalingPoint
from benchmarks.traces import APPEND, FREE, SCHEDULE
from benchmarks.traces_v0 import ALLOCATE
from benchmarks.traces_v0 import FREE as V0_FREE
from conformance.changelog import v1_policy_at

# The policies of the two pinned releases, computed by the change log.
V1_V0_33_0 = v1_policy_at("0.33.0")


def test_long_v1_trace_holds_the_whole_context_and_frees_it():
    """Catches: a scaling trace that never reaches its nominal context (prompts cut short, a pool
    too small so requests are refused) or leaves pages behind."""
    workload = scaling.long_workload(16384, 2, 8, 2048, 5000, 0)
    trace = scaling.make_scaling_trace("v1", workload, "v0.33.0", 0)
    assert [len(p) for p in trace.prompts] == [16384, 16384]
    prefilled = sum(op[2] for op in trace.ops if op[0] == SCHEDULE and op[2] > 1)
    assert prefilled >= 2 * 16384 - 2 * 2048 and all(op[4] for op in trace.ops if op[0] == SCHEDULE)
    assert sum(1 for op in trace.ops if op[0] == APPEND) == 2 * 8
    assert sum(1 for op in trace.ops if op[0] == FREE) == 2
    side = ReferenceSide(V1_V0_33_0)
    run = Run(side, trace, side.prepare(trace))
    replay(run, trace.ops)
    books = side.final_state(run.state)
    assert books["tables"] == {} and books["num_free_blocks"] == 5000 - 1


def test_long_v0_trace_allocates_each_prompt_once_and_frees_it():
    """Catches: a V0 scaling trace whose sequences are never admitted at full length or never freed."""
    workload = scaling.long_workload(16384, 2, 4, 4096, 5000, 0)
    trace = scaling.make_scaling_trace("v0", workload, "v0", 0)
    assert sum(1 for op in trace.ops if op[0] == ALLOCATE) == 2
    assert sorted(op[1] for op in trace.ops if op[0] == V0_FREE) == [0, 1]
    result = measure([(ReferenceV0Side(), trace)], 1, None, trace.num_timed_ops, scaling.v0_op_kind)
    assert result.problems == [] and result.op_calls["allocate"] == 2 and result.op_calls["free"] == 2


def test_decode_and_prefill_are_timed_apart():
    """Catches: one average over one-token decode steps and 2,048-token prefill chunks, which would
    hide a decode step whose cost grows with the context."""
    assert scaling.v1_op_kind((SCHEDULE, 0, 1, False, True)) == "schedule_decode"
    assert scaling.v1_op_kind((SCHEDULE, 0, 2048, True, True)) == "schedule_prefill"
    assert scaling.v1_op_kind((FREE, 0)) == "free"


def test_verdicts_name_every_ratio_below_one_and_every_fall():
    """Catches: a summary that says the targets are met while an operation is slower than vLLM at
    some size, or its ratio drops as the context grows."""
    def entry(context, ratios):
        return ScalingPoint(context, {op: ScalingOp(1, {}, r) for op, r in ratios.items()})

    entries = [entry(4096, {"free": 1.5, "append": 1.2}), entry(131072, {"free": 0.9, "append": 1.19})]
    out = scaling.verdicts(entries)
    assert "free at 131072 tokens: 0.90x of vLLM (below 1.0)" in out
    assert "free: ratio falls from 1.50 at 4096 to 0.90 at 131072 tokens" in out
    assert not any(line.startswith("append") for line in out)  # a 1% move is noise, not a fall


def test_script_writes_per_operation_figures(tmp_path):
    """Catches: JSON without per-operation times or memory per block, or a run that skips a size."""
    path = tmp_path / "scaling.json"
    status = scaling.main(["--contexts", "512,1024", "--pool", "300", "--seqs", "2", "--decode", "4",
                           "--chunk", "256", "--repeats", "1", "--generation", "v0", "--json", str(path)])
    report = json.loads(path.read_text())
    assert status == 0 and report["generation"] == "v0"
    assert [c["context"] for c in report["contexts"]] == [512, 1024]
    for entry in report["contexts"]:
        assert entry["problems"] == [] and entry["ops"]["free"]["calls"] == 2
        assert entry["ops"]["free"]["reference_us"] > 0 and entry["peak_bytes_per_block"]["reference"] > 0
