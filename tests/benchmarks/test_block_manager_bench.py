"""The block-manager benchmark's traces and its end-of-trace books check.

No timing is asserted here: timings belong to the script's output. What is tested is that the
benchmark cannot silently time the wrong thing: traces are functions of their seed, every op of
a trace is one the reference accepts with the recorded outcome, and two replays that end with
different books are reported instead of being compared.
"""

from __future__ import annotations

import copy
import json
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.block_manager import ReferenceSide, compare_books, installed_vllm, main, measure, timed_replay
from benchmarks.traces import (
    APPEND,
    FREE,
    SCHEDULE,
    WORKLOADS,
    Trace,
    Workload,
    make_trace,
    make_workload,
    record_trace,
)
from conformance.changelog import policy_named, v1_policy_at
from conformance.versions import distinct_v1_policy_names

# The policies of the two pinned releases, computed by the change log.
V1_V0_10_2 = v1_policy_at("0.10.2")
V1_V0_33_0 = v1_policy_at("0.33.0")

SMALL = 24  # requests per trace in these tests: enough for the tight pool to fail allocations


def _structure_problems(trace: Trace, workload: Workload) -> list[str]:
    """What is wrong with a trace's shape, judged without any page manager."""
    problems = []
    if trace.prompts != workload.prompts:
        problems.append("the trace's prompts are not the workload's")
    appended = Counter()
    freed = Counter()
    for op in trace.ops:
        index = op[1]
        if freed[index]:
            problems.append(f"op {op[:4]} touches request {index} after it was freed")
        if op[0] == SCHEDULE and op[2] < 1:
            problems.append(f"op {op[:4]} schedules no tokens")
        if op[0] == APPEND:
            appended[index] += len(op[2])
        if op[0] == FREE:
            freed[index] += 1
    for index in range(len(trace.prompts)):
        if freed[index] != 1:
            problems.append(f"request {index} freed {freed[index]} times")
    aborted = workload.abort_prob > 0
    for index, out in enumerate(workload.output_lens):
        if appended[index] > out or (not aborted and appended[index] != out):
            problems.append(f"request {index} produced {appended[index]} of {out} tokens")
    return problems


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_traces_are_functions_of_their_seed(name):
    """Catches: a generator or recorder using unseeded randomness (or dict/set order), so that
    two runs -- or the two sides of one run -- would be handed different work."""
    first = make_trace(name, SMALL, V1_V0_33_0, seed=3)
    again = make_trace(name, SMALL, V1_V0_33_0, seed=3)
    other = make_trace(name, SMALL, V1_V0_33_0, seed=4)
    assert first.prompts == again.prompts and first.ops == again.ops
    assert first.prompts != other.prompts


@pytest.mark.parametrize("name", list(WORKLOADS))
@pytest.mark.parametrize("policy", [V1_V0_33_0, V1_V0_10_2], ids=lambda p: p.name)
def test_reference_accepts_every_op_with_the_recorded_outcome(name, policy):
    """Catches: a recorder that writes calls the manager refuses (appending before the prompt is
    computed, allocating past a request's tokens, freeing twice), or a trace whose recorded
    allocation outcomes a fresh manager does not reproduce; either would make the timed replay
    measure an error path. Also checks the shape without any manager: every request is freed
    once, nothing touches a freed request, and each request samples its output length."""
    workload = make_workload(name, SMALL)
    trace = record_trace(workload, policy)
    assert _structure_problems(trace, workload) == []
    books = timed_replay(ReferenceSide(policy), trace).books  # raises Diverged on any refusal
    assert books["tables"] == {}
    assert books["num_free_blocks"] == trace.num_blocks - 1
    assert set(books["ref_cnts"]) == {0}


def test_workloads_exercise_what_they_claim():
    """Catches: a workload that silently stops exercising its path (no prefix hits in the shared
    prompts trace, no failed allocation in the tight pool, no preemption in the churn trace),
    which would leave that manager path out of the comparison."""
    counts = {name: make_trace(name, SMALL, V1_V0_33_0).counts for name in WORKLOADS}
    assert counts["tight_pool"]["failed_allocations"] > 0 and counts["tight_pool"]["preempt"] > 0
    assert counts["churn"]["preempt"] > 0
    assert counts["chunked_prefill"]["schedule"] > 2 * SMALL  # several chunks per prompt
    shared = make_trace("shared_prefix", SMALL, V1_V0_33_0)
    side = ReferenceSide(V1_V0_33_0)
    manager, ids, _ = side.prepare(shared)
    hits = 0
    for op in shared.ops:  # replay by hand, counting tokens served from the prefix cache
        if op[0] == SCHEDULE and op[3]:
            found = manager.get_computed_blocks(ids[op[1]])
            hits += found.num_tokens
            assert manager.allocate_slots(ids[op[1]], op[2], found.num_tokens, found) is not None
            manager.mark_computed(ids[op[1]], found.num_tokens + op[2])
        elif op[0] == SCHEDULE:
            assert manager.allocate_slots(ids[op[1]], op[2]) is not None
            manager.mark_computed(ids[op[1]], op[2])
        elif op[0] == APPEND:
            manager.append_token_ids(ids[op[1]], op[2])
        elif op[0] == FREE:
            manager.free(ids[op[1]])
    assert hits > sum(len(p) for p in shared.prompts) // 2


@given(
    name=st.sampled_from(sorted(WORKLOADS)),
    n=st.integers(1, 6),
    seed=st.integers(0, 2**16),
    policy=st.sampled_from(sorted(distinct_v1_policy_names())),
)
def test_any_seeded_trace_is_valid(name, n, seed, policy):
    """Catches: a trace shape bug that only some seeds or sizes reach (a lone request that cannot
    fit the pool, a preempted request re-admitted with a chunk of zero tokens, a churn abort of a
    request already finished), found by drawing seeds, sizes and policies."""
    workload = make_workload(name, n, seed)
    trace = record_trace(workload, policy_named(policy))
    assert _structure_problems(trace, workload) == []
    books = timed_replay(ReferenceSide(policy_named(policy)), trace).books
    null_blocks = 1 if policy_named(policy).pool_has_null_block else 0  # none before 0.8.3
    assert books["tables"] == {} and books["num_free_blocks"] == trace.num_blocks - null_blocks


def _without_last_free(trace: Trace) -> Trace:
    last = max(i for i, op in enumerate(trace.ops) if op[0] == FREE)
    return Trace(trace.name, trace.prompts, trace.ops[:last] + trace.ops[last + 1:], trace.num_blocks,
                 trace.block_size, trace.max_model_len, trace.policy_name, trace.counts)


def _with_changed_first_token(trace: Trace) -> Trace:
    prompts = list(trace.prompts)
    prompts[0] = (prompts[0][0] + 1,) + prompts[0][1:]
    return Trace(trace.name, tuple(prompts), trace.ops, trace.num_blocks, trace.block_size,
                 trace.max_model_len, trace.policy_name, trace.counts)


def _with_flipped_outcome(trace: Trace) -> Trace:
    ops = list(trace.ops)
    position = next(i for i, op in enumerate(ops) if op[0] == SCHEDULE)
    kind, index, n, lookup, ok = ops[position]
    ops[position] = (kind, index, n, lookup, not ok)
    return Trace(trace.name, trace.prompts, tuple(ops), trace.num_blocks, trace.block_size,
                 trace.max_model_len, trace.policy_name, trace.counts)


def test_same_trace_on_two_sides_ends_with_same_books():
    """Catches: books that differ between two fresh managers doing identical work (an unseeded
    NONE_HASH, a summary that includes object identities), which would make every real
    comparison report a mismatch."""
    trace = make_trace("churn", SMALL, V1_V0_33_0)
    result = measure([(ReferenceSide(V1_V0_33_0), trace), (ReferenceSide(V1_V0_33_0, "twin"), trace)], 2)
    assert result.problems == []
    assert len(result.seconds["reference"]) == len(result.seconds["twin"]) == 2


@pytest.mark.parametrize(
    "alter, trace_name, expected",
    [
        (_without_last_free, "decode_heavy", "different books"),  # one request still holds blocks
        (_with_changed_first_token, "decode_heavy", "different books"),  # other hashes, same ids
        (_with_flipped_outcome, "tight_pool", "diverged at op"),  # an outcome the side cannot see
    ],
    ids=["missing-free", "other-prompt", "flipped-outcome"],
)
def test_books_check_catches_a_side_given_different_work(alter, trace_name, expected):
    """Catches: an end-of-trace check too weak to notice that one side replayed a different
    trace -- a missing free (live tables differ), different prompt tokens (cached hash bytes
    differ though every block id agrees), or an allocation outcome other than the recorded one."""
    trace = make_trace(trace_name, SMALL, V1_V0_33_0)
    result = measure([(ReferenceSide(V1_V0_33_0), trace), (ReferenceSide(V1_V0_33_0, "altered"), alter(trace))], 1)
    assert len(result.problems) == 1 and expected in result.problems[0]


def test_compare_books_names_each_difference():
    """Catches: a comparison that reports only "differs" (or nothing) for a free-queue order or
    reference-count change, the subtle divergences a conformance bug would produce."""
    books = {"tables": {"r": [1, 2]}, "num_free_blocks": 3, "free_queue": [3, 4, 5], "ref_cnts": [0, 1, 1],
             "hashes": {1: "aa"}}
    assert compare_books(books, copy.deepcopy(books)) == []
    reordered = books | {"free_queue": [3, 5, 4]}
    assert compare_books(books, reordered) == ["free_queue: first difference at index 1 (lengths 3 and 3)"]
    recounted = books | {"ref_cnts": [0, 2, 1], "tables": {"r": [1, 2], "s": [2]}}
    assert compare_books(books, recounted) == [
        "ref_cnts: first difference at index 1 (lengths 3 and 3)", "tables[s]: None != [2]"]


def test_script_runs_and_writes_json(tmp_path, capsys):
    """Catches: the script failing where vLLM is absent (importing it eagerly) or writing JSON
    whose figures do not match the traces it ran (wrong op counts, missing repeats)."""
    path = tmp_path / "bench.json"
    status = main(["--requests", "6", "--repeats", "2", "--traces", "decode_heavy,tight_pool", "--json", str(path)])
    out = capsys.readouterr().out
    policy, found = installed_vllm()
    assert status == 0 and found in out and "ops/s" in out
    report = json.loads(path.read_text())
    assert report["sides"] == (["reference"] if policy is None else ["reference", "vllm"])
    for entry in report["traces"]:
        trace = make_trace(entry["name"], 6, policy_named(report["policy"]))
        assert entry["num_ops"] == len(trace.ops) and entry["problems"] == []
        assert all(len(v) == 2 for v in entry["cpu_seconds"].values())
