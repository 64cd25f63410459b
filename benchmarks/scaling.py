"""Does the reference keep up with vLLM as contexts grow to 128k tokens and pools to 100k blocks?

    python -m benchmarks.scaling [--contexts 4096,16384,65536,131072] [--pool 100000] [--seqs 4]
                                 [--decode 256] [--chunk 2048] [--repeats 3] [--generation auto]
                                 [--json PATH] [--profile]

For each context length the same long-context trace is replayed on the reference and on the
installed vLLM through the one harness (:mod:`benchmarks.harness`): ``--seqs`` requests of that
many prompt tokens (distinct, seeded), prefilled ``--chunk`` tokens a step, then ``--decode``
sampled tokens each, then freed, on a pool of ``--pool`` blocks of 16 tokens with prefix
caching on. Which comparison runs follows the installed vLLM: 0.33.0 (or any release with a V1
policy) compares the V1 ``KVCacheManager``; 0.10.2 compares the V0 ``SelfAttnBlockSpaceManager``
(``--generation v1`` or ``v0`` forces one; without vLLM the reference alone is timed).

Printed, per context and operation: timed calls, microseconds per call on each side (median over
the repeats of CPU time in the calls alone), and the ratio vLLM time / reference time (> 1: the
reference is faster); per context, the peak traced Python memory of one whole replay (manager,
requests and all) divided by the pool's blocks, on each side. The target is every ratio >= 1.0
at every size and no ratio falling as the size grows; the last lines say where that is not met.
As everywhere in :mod:`benchmarks`, answers and final books are compared and a mismatch is
reported instead of a timing (exit status 1).
"""

from __future__ import annotations

import argparse
import gc
import platform
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from benchmarks import block_manager as v1_bench
from benchmarks import block_manager_v0 as v0_bench
from benchmarks.harness import Diverged, Run, TraceResult, align, measure, profile_side, replay
from benchmarks.report import ScalingOp, ScalingPoint, ScalingReport
from benchmarks.traces import FREE, SCHEDULE, VOCAB, Trace, Workload, record_trace, reference_manager
from benchmarks.traces import OP_NAMES as V1_OP_NAMES
from benchmarks.traces_v0 import OP_NAMES as V0_OP_NAMES
from benchmarks.traces_v0 import V0Settings, record_v0_trace
from conformance.changelog import policy_named
from upstream.releases import V1_RELEASE, policy_name

CONTEXTS = (4096, 16384, 65536, 131072)
BLOCK_SIZE = 16
FALL_TOLERANCE = 0.10  # a ratio this much below the previous size's counts as falling (noise aside)


def long_workload(context: int, seqs: int, decode: int, chunk: int, pool: int, seed: int) -> Workload:
    """``seqs`` distinct prompts of ``context`` tokens, each decoding ``decode`` tokens."""
    rng = random.Random(f"scaling:{context}:{seqs}:{seed}")
    prompts = tuple(tuple(rng.choices(range(1, VOCAB), k=context)) for _ in range(seqs))
    return Workload(name=f"{context // 1024}k", prompts=prompts, output_lens=(decode,) * seqs,
                    chunk_sizes=(chunk,) * seqs, num_blocks=pool, block_size=BLOCK_SIZE,
                    max_model_len=context + decode + BLOCK_SIZE, max_num_seqs=seqs,
                    token_budget=chunk * seqs, seed=seed)


def make_scaling_trace(generation: str, workload: Workload, policy_name: str, seed: int):
    if generation == "v1":
        return record_trace(workload, policy_named(policy_name))
    settings = V0Settings(enable_caching=True, fork_prob=0.0, cpu_blocks_ratio=0.01)
    return record_v0_trace(workload.name, workload, settings, seed)


def v1_op_kind(op: tuple) -> str:
    """V1 ops by kind, a schedule split into prefill chunks and decode steps (one token)."""
    if op[0] == SCHEDULE:
        return "schedule_decode" if op[2] == 1 else "schedule_prefill"
    return V1_OP_NAMES[op[0]]


def v0_op_kind(op: tuple) -> str:
    return V0_OP_NAMES[op[0]]


def peak_bytes(side: Any, trace: Any) -> int:
    """Peak traced Python memory of preparing ``side`` for ``trace`` and replaying it whole."""
    gc.collect()
    tracemalloc.start()
    try:
        run = Run(side, trace, side.prepare(trace))
        replay(run, trace.ops)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def per_call_us(result: TraceResult, label: str, op: str) -> float | None:
    seconds = result.op_seconds.get(label, {}).get(op)
    calls = result.op_calls.get(op)
    if not seconds or not calls:
        return None
    return statistics.median(seconds) / calls * 1e6


def op_entries(result: TraceResult, labels: Sequence[str], ops: Sequence[str]) -> dict[str, ScalingOp]:
    """Per op kind: timed calls per replay, microseconds per call on each side, their ratio."""
    out = {}
    for op in ops:
        us = {label: v for label in labels if (v := per_call_us(result, label, op)) is not None}
        paired = len(labels) == 2 and all(us.get(label) for label in labels)
        out[op] = ScalingOp(result.op_calls[op], us, us["vllm"] / us["reference"] if paired else None)
    return out


def context_entry(context: int, trace: Any, result: TraceResult, labels: Sequence[str],
                  memory: dict[str, int], pool: int) -> ScalingPoint:
    return ScalingPoint(context=context, num_ops=len(trace.ops), ops=op_entries(result, labels, sorted(result.op_calls)),
                        problems=list(result.problems), peak_bytes=memory,
                        peak_bytes_per_block={k: v / pool for k, v in memory.items()}, cpu_seconds=result.seconds)


def verdicts(points: Sequence[ScalingPoint]) -> list[str]:
    """Where the targets are not met: a ratio below 1.0, or one falling as the context grows."""
    out = []
    ops = sorted({op for p in points for op, v in p.ops.items() if v.ratio_vllm_over_reference is not None})
    for op in ops:
        series = [(p.context, p.ops[op].ratio_vllm_over_reference) for p in points if op in p.ops]
        known = [(c, r) for c, r in series if r is not None]
        for context, ratio in known:
            if ratio < 1.0:
                out.append(f"{op} at {context} tokens: {ratio:.2f}x of vLLM (below 1.0)")
        for (c0, r0), (c1, r1) in zip(known, known[1:]):
            if r1 < r0 * (1 - FALL_TOLERANCE):
                out.append(f"{op}: ratio falls from {r0:.2f} at {c0} to {r1:.2f} at {c1} tokens")
    return out


def format_entries(points: Sequence[ScalingPoint], labels: Sequence[str]) -> str:
    rows = [["context", "op", "calls"] + [f"{label} us/call" for label in labels]
            + (["vllm/ref"] if len(labels) == 2 else [])]
    for p in points:
        for name, v in p.ops.items():
            row = [str(p.context), name, str(v.calls)]
            row += [f"{v.us[label]:.1f}" if v.us.get(label) else "-" for label in labels]
            if len(labels) == 2:
                ratio = v.ratio_vllm_over_reference
                row.append(f"{ratio:.2f}" if ratio else "-")
            rows.append(row)
        mem = p.peak_bytes_per_block
        rows.append([str(p.context), "peak B/block", ""] + [f"{mem[label]:.0f}" if label in mem else "-"
                                                              for label in labels]
                    + ([f"{mem['vllm'] / mem['reference']:.2f}"] if len(labels) == 2 and len(mem) == 2 else []))
    return align(rows)


# -- one long prefix hit: the lookup and the allocation after it, timed apart ----------------------
# Op codes of a hit trace, beside benchmarks.traces' SCHEDULE and FREE (which the sides already know).
HIT_LOOKUP = "hit_lookup"  # (HIT_LOOKUP, request index, hit tokens recorded)
HIT_ALLOCATE = "hit_allocate"  # (HIT_ALLOCATE, request index, num_new_tokens, expected_ok)
HIT_OP_NAMES = {HIT_LOOKUP: "full_hit_lookup", HIT_ALLOCATE: "full_hit_allocate"}
HIT_LOOKUPS = 8  # full hits per replay


def hit_pool_blocks(context: int) -> int:
    """Twice the blocks one request of ``context`` tokens holds, plus the null block."""
    return 2 * -(-context // BLOCK_SIZE) + 1


def record_hit_trace(context: int, lookups: int, policy_name: str, seed: int) -> Trace:
    """One request of ``context`` tokens prefilled and freed, then ``lookups`` requests with the same
    prompt, each a full prefix hit: looked up, allocated (the last block is recomputed), freed.

    The freed blocks keep their hashes in the free queue, so every lookup finds the whole prompt
    but its last block and every allocation revives those blocks from the free queue -- the work
    a scheduler does when a long conversation comes back. Recorded against the reference; a
    lookup that does not hit every block but the last is refused, since it would time less work.
    """
    rng = random.Random(f"scaling-hit:{context}:{seed}")
    prompt = tuple(rng.choices(range(1, VOCAB), k=context))
    prompts = (prompt,) * (lookups + 1)
    pool = hit_pool_blocks(context)
    manager = reference_manager(pool, BLOCK_SIZE, context, policy_named(policy_name))
    full_hit = (context - 1) // BLOCK_SIZE * BLOCK_SIZE  # the lookup is capped at num_tokens - 1
    ops: list[tuple] = []
    for index, tokens in enumerate(prompts):
        rid = f"req-{index}"
        manager.add_request(rid, list(tokens))
        hit = manager.get_computed_blocks(rid)
        if hit.num_tokens != (0 if index == 0 else full_hit):
            raise ValueError(f"request {index} hit {hit.num_tokens} tokens of {context}, expected {full_hit}")
        n = context - hit.num_tokens
        ok = manager.allocate_slots(rid, n, hit.num_tokens, hit) is not None
        if not ok:
            raise ValueError(f"a pool of {pool} blocks refused a request of {context} tokens")
        manager.mark_computed(rid, context)
        ops += [(SCHEDULE, index, n, True, ok)] if index == 0 else [(HIT_LOOKUP, index, hit.num_tokens),
                                                                     (HIT_ALLOCATE, index, n, ok)]
        manager.free(rid)
        ops.append((FREE, index))
    counts = {"prefill": 1, "full_hits": lookups, "free": lookups + 1}
    return Trace(f"hit-{context // 1024}k", prompts, tuple(ops), pool, BLOCK_SIZE, context, policy_name, counts)


def hit_op_kind(op: tuple) -> str:
    """The two timed calls of a full hit by name; the warm-up prefill and the frees by theirs."""
    return HIT_OP_NAMES.get(op[0]) or v1_op_kind(op)


def _expect_hit(got: int, recorded: int) -> None:
    if got != recorded:
        raise Diverged(f"the lookup hit {got} tokens; recorded {recorded}")


def _expect_outcome(got: Any, ok: bool) -> None:
    if (got is None) is ok:
        raise Diverged(f"allocation {'failed' if ok else 'succeeded'}; recorded the opposite")


class ReferenceHitSide(v1_bench.ReferenceSide):
    """The reference side, with a hit's lookup and its allocation as two calls timed apart.

    State: (the reference side's own, each request's lookup answer until its allocation): a
    wider state than the base side's, so ``prepared`` is typed Any here.
    """

    def prepare(self, trace: Trace) -> Any:
        return super().prepare(trace), {}

    def call(self, prepared: Any, op: tuple):
        (manager, ids, _), found = prepared
        if op[0] == HIT_LOOKUP:
            return partial(manager.get_computed_blocks, ids[op[1]])
        if op[0] == HIT_ALLOCATE:
            hit = found[op[1]]
            return partial(manager.allocate_slots, ids[op[1]], op[2], hit.num_tokens, hit)
        return super().call(prepared[0], op)

    def check(self, prepared: Any, op: tuple, answer: Any) -> None:
        (manager, ids, _), found = prepared
        if op[0] == HIT_LOOKUP:
            _expect_hit(answer.num_tokens, op[2])
            found[op[1]] = answer
        elif op[0] == HIT_ALLOCATE:
            _expect_outcome(answer, op[3])
            manager.mark_computed(ids[op[1]], found.pop(op[1]).num_tokens + op[2])
        else:
            super().check(prepared[0], op, answer)

    def final_state(self, prepared: Any) -> dict:
        return super().final_state(prepared[0])


class VllmHitSide(v1_bench.VllmSide):
    """vLLM's side, with a hit's lookup and its allocation as two calls timed apart.

    State: (vLLM's side's own, each request's lookup answer until its allocation), typed Any.
    """

    def prepare(self, trace: Trace) -> Any:
        return super().prepare(trace), {}

    def call(self, prepared: Any, op: tuple):
        (_, manager, requests), found = prepared
        if op[0] == HIT_LOOKUP:
            return partial(manager.get_computed_blocks, requests[op[1]])
        if op[0] == HIT_ALLOCATE:
            blocks, num_tokens = found[op[1]][:2]  # later releases answer a third field too
            return partial(manager.allocate_slots, requests[op[1]], op[2], num_tokens, blocks)
        return super().call(prepared[0], op)

    def check(self, prepared: Any, op: tuple, answer: Any) -> None:
        (system, _, requests), found = prepared
        if op[0] == HIT_LOOKUP:
            _expect_hit(answer[1], op[2])
            found[op[1]] = answer
        elif op[0] == HIT_ALLOCATE:
            _expect_outcome(answer, op[3])
            system.advance_after_allocation(requests[op[1]], found.pop(op[1])[1] + op[2])
        else:
            super().check(prepared[0], op, answer)

    def final_state(self, prepared: Any) -> dict:
        return super().final_state(prepared[0])


def hit_sides(sides: Sequence[Any]) -> list[Any]:
    """The V1 sides, each able to time a hit's two calls apart."""
    kinds = {v1_bench.ReferenceSide: ReferenceHitSide, v1_bench.VllmSide: VllmHitSide}
    return [kinds[type(side)](side.policy) for side in sides]


def choose(generation: str) -> tuple[str, list[Any], str, str]:
    """(generation, sides, reference policy name, a sentence saying what was found)."""
    with_vllm, found = v0_bench.installed_vllm()
    if generation == "auto":  # V0 where the installed vLLM has a V0 block manager, else V1
        generation = "v0" if with_vllm else "v1"
    if generation == "v0":
        return "v0", [v0_bench.ReferenceV0Side()] + ([v0_bench.VllmV0Side()] if with_vllm else []), "v0", found
    vllm_policy, found = v1_bench.installed_vllm()
    policy = policy_named(vllm_policy or policy_name(V1_RELEASE))
    return "v1", v1_bench.vllm_sides(policy, vllm_policy), policy.name, found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scaling", description=__doc__.split("\n")[0])
    parser.add_argument("--contexts", default=",".join(map(str, CONTEXTS)), help="prompt lengths in tokens")
    parser.add_argument("--pool", type=int, default=100_000, help="blocks in the pool")
    parser.add_argument("--seqs", type=int, default=4, help="requests per trace")
    parser.add_argument("--decode", type=int, default=256, help="sampled tokens per request")
    parser.add_argument("--chunk", type=int, default=2048, help="prefill tokens per request per step")
    parser.add_argument("--hits", type=int, default=HIT_LOOKUPS,
                        help="V1: full prefix hits of one request of each context, their lookup and allocation "
                             "timed apart (0: none)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--generation", choices=("auto", "v1", "v0"), default="auto")
    parser.add_argument("--json", help="write the results as JSON to this path")
    parser.add_argument("--profile", action="store_true", help="also cProfile one replay per side at each size")
    args = parser.parse_args(argv)
    contexts = [int(c) for c in args.contexts.split(",")]
    if min(contexts) < 1 or min(args.pool, args.seqs, args.decode, args.chunk, args.repeats) < 1:
        parser.error("contexts, pool, seqs, decode, chunk and repeats must be >= 1")
    if args.hits < 0:
        parser.error("hits must be >= 0")
    if args.seqs * (-(-(max(contexts) + args.decode) // BLOCK_SIZE)) > args.pool - 1:
        parser.error(f"{args.seqs} requests of {max(contexts)} tokens do not fit a pool of {args.pool} blocks")

    generation, sides, policy_name, found = choose(args.generation)
    labels = [side.label for side in sides]
    op_kind = v1_op_kind if generation == "v1" else v0_op_kind
    print(found)
    print(f"{generation.upper()} managers; {args.seqs} requests per trace, {args.decode} sampled tokens each "
          f"({args.decode - 1} decode steps after the one that ends the prefill), "
          f"prefill chunks of {args.chunk}, pool {args.pool} blocks of {BLOCK_SIZE}, {args.repeats} repeats")
    entries, profiles = [], {}
    for context in contexts:
        began = time.perf_counter()
        workload = long_workload(context, args.seqs, args.decode, args.chunk, args.pool, args.seed)
        trace = make_scaling_trace(generation, workload, policy_name, args.seed)
        print(f"  {context} tokens: trace of {len(trace.ops)} ops recorded "
              f"({time.perf_counter() - began:.0f} s); timing...", flush=True)
        result = measure([(side, trace) for side in sides], args.repeats, None,
                         getattr(trace, "num_timed_ops", None), op_kind)
        memory = {} if result.problems else {side.label: peak_bytes(side, trace) for side in sides}
        entries.append(context_entry(context, trace, result, labels, memory, args.pool))
        if args.profile:
            for side in sides:
                profiles[f"{context}/{side.label}"] = profile_side(side, trace)
        if generation == "v1" and args.hits and not result.problems:
            print(f"  {context} tokens: timing {args.hits} full prefix hits on a pool of "
                  f"{hit_pool_blocks(context)} blocks...", flush=True)
            hit_trace = record_hit_trace(context, args.hits, policy_name, args.seed)
            with_hits = hit_sides(sides)
            hits = measure([(side, hit_trace) for side in with_hits], args.repeats, None, None, hit_op_kind)
            timed_apart = {} if hits.problems else op_entries(hits, labels, list(HIT_OP_NAMES.values()))
            entries[-1] = replace(entries[-1], problems=entries[-1].problems + hits.problems,
                                  ops={**entries[-1].ops, **timed_apart})
            if args.profile:
                for side in with_hits:
                    profiles[f"{context}/full hits/{side.label}"] = profile_side(side, hit_trace)
        problems = entries[-1].problems
        status = "; ".join(problems) if problems else "same answers and books on every replay"
        print(f"  {context} tokens done ({time.perf_counter() - began:.0f} s): {status}", flush=True)
    print()
    print(format_entries(entries, labels))
    print("us/call: microseconds of CPU time per manager call (median over repeats); vllm/ref > 1: the "
          "reference is faster. peak B/block: peak traced memory of one replay over the pool's blocks.")
    misses = verdicts(entries) if len(labels) == 2 else []
    if len(labels) == 2:
        print("targets met: every op >= 1.0x at every size, no ratio falling" if not misses
              else "targets NOT met:\n  " + "\n  ".join(misses))
    for key, text in profiles.items():
        print(f"\n== cProfile {key} ==\n{text}")
    if args.json:
        ScalingReport(found=found, generation=generation, policy=policy_name, sides=labels, pool_blocks=args.pool,
                      block_size=BLOCK_SIZE, seqs=args.seqs, decode=args.decode, chunk=args.chunk,
                      repeats=args.repeats, seed=args.seed, hits=args.hits if generation == "v1" else 0,
                      python=platform.python_version(), contexts=entries, targets_not_met=misses,
                      profiles=profiles).write(args.json)
    return 1 if any(e.problems for e in entries) else 0


if __name__ == "__main__":
    sys.exit(main())
