"""How fast is the reference V1 page manager next to vLLM's own ``KVCacheManager``?

    python -m benchmarks.block_manager [--repeats 5] [--requests 2000] [--traces all]
                                      [--seed 0] [--json PATH] [--profile]

Each trace of :mod:`benchmarks.traces` is recorded once (seeded, so every run replays the same
calls) and then replayed ``--repeats`` times by each side from fresh managers. The two sides
replay through the one harness (:mod:`benchmarks.harness`): interleaved, the clock read around
each op's manager calls alone. Only the manager calls a scheduler makes are timed: the
prefix-cache lookup with its ``allocate_slots``, ``free``, and appending a sampled token (which
hashes any block it completes). The counters a scheduler updates after an allocation, and
building managers and request objects -- and with them hashing every prompt -- are scheduler
work, untimed on both sides alike; after a preemption vLLM's scheduler resets them untimed, while
the reference's ``preempt`` resets them inside its timed call (two assignments). Operations per second count every op of the
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
import platform
import sys
from collections.abc import Sequence
from functools import partial
from typing import Any

from benchmarks.harness import (
    Diverged,
    TraceResult,
    compare_books,
    format_table,
    measure,
    run_traces,
    timed_replay,
    trace_entries,
)
from benchmarks.report import BlockManagerReport
from benchmarks.traces import (
    APPEND,
    FREE,
    OP_NAMES,
    PREEMPT,
    SCHEDULE,
    WORKLOADS,
    Trace,
    benchmark_hash_fn,
    make_trace,
    reference_manager,
)
from conformance.changelog import policy_named
from conformance.configs import FULL, V1Config
from reference.blocks.policies import V1Policy
from reference.blocks.v1.hashing import hash_text
from upstream.releases import V1_RELEASE, policy_name

__all__ = ["ReferenceSide", "VllmSide", "compare_books", "installed_vllm", "main", "measure", "timed_replay"]


def _check_outcome(got: Any, ok: bool) -> None:
    if (got is None) is ok:
        raise Diverged(f"allocation {'failed' if ok else 'succeeded'}; recorded the opposite")


# -- the two sides --------------------------------------------------------------------------------
class ReferenceSide:
    """The reference ``KVCacheManager`` addressed by request id strings."""

    def __init__(self, policy: V1Policy, label: str = "reference") -> None:
        self.policy = policy
        self.label = label

    def prepare(self, trace: Trace) -> tuple[Any, list[str], list[Any]]:
        """The manager, the request ids, and a list keeping freed requests' records alive."""
        manager = reference_manager(trace.num_blocks, trace.block_size, trace.max_model_len, self.policy)
        ids = [trace.request_id(i) for i in range(len(trace.prompts))]
        for rid, prompt in zip(ids, trace.prompts):
            manager.add_request(rid, list(prompt))
        return manager, ids, []

    def call(self, prepared: tuple[Any, list[str], list[Any]], op: tuple):
        manager, ids, _ = prepared
        kind, rid = op[0], ids[op[1]]
        if kind == SCHEDULE:
            n, with_lookup = op[2], op[3]
            if not with_lookup:
                return partial(manager.allocate_slots, rid, n)
            lookup, allocate = manager.get_computed_blocks, manager.allocate_slots

            def schedule():
                found = lookup(rid)
                return allocate(rid, n, found.num_tokens, found), found.num_tokens
            return schedule
        if kind == APPEND:
            return partial(manager.append_token_ids, rid, op[2])
        if kind == FREE:
            # vLLM's Request objects outlive ``free`` (the scheduler owns them), so its free never
            # pays for deallocating a request's tokens and hashes. The reference manager owns that
            # record; keeping it alive until the replay ends leaves the deallocation out of the
            # timed call here too (at 128k tokens it is about half the time of the free).
            prepared[2].append(manager.requests.get(rid))
            return partial(manager.free, rid)
        return partial(manager.preempt, rid)

    def check(self, prepared: tuple[Any, list[str], list[Any]], op: tuple, answer: Any) -> None:
        if op[0] != SCHEDULE:
            return
        got, hit = answer if op[3] else (answer, 0)
        _check_outcome(got, op[4])
        if op[4]:
            prepared[0].mark_computed(prepared[1][op[1]], hit + op[2])

    def final_state(self, prepared: tuple[Any, list[str], list[Any]]) -> dict:
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

    Managers and requests are built, and requests advanced, by the conformance adapter's public
    API (:class:`conformance.adapters.vllm_v1.VllmV1System`), so both projects' checks construct
    and drive vLLM the same way; only the manager calls are timed.
    """

    label = "vllm"

    def __init__(self, policy: V1Policy) -> None:
        from conformance.adapters.vllm_v1 import VllmV1System  # imports vLLM lazily, on build

        self.policy = policy
        self._system_class = VllmV1System

    def prepare(self, trace: Trace) -> tuple[Any, Any, list[Any]]:
        system = self._system_class(V1Config(
            policy=self.policy, block_size=trace.block_size, max_model_len=trace.max_model_len,
            num_blocks=trace.num_blocks, groups=(FULL,), hash_fn=benchmark_hash_fn(self.policy)))
        requests = [system.make_request(trace.request_id(i), list(p)) for i, p in enumerate(trace.prompts)]
        return system, system.manager, requests

    def call(self, prepared: tuple[Any, Any, list[Any]], op: tuple):
        _, manager, requests = prepared
        kind, request = op[0], requests[op[1]]
        if kind == SCHEDULE:
            n, with_lookup = op[2], op[3]
            if not with_lookup:
                return partial(manager.allocate_slots, request, n)
            lookup, allocate = manager.get_computed_blocks, manager.allocate_slots

            def schedule():
                found = lookup(request)  # (blocks, hit tokens) or, in later releases, 3 fields
                return allocate(request, n, found[1], found[0]), found[1]
            return schedule
        if kind == APPEND:
            return partial(request.append_output_token_ids, op[2])
        return partial(manager.free, request)  # FREE, and PREEMPT (the scheduler frees, then resets)

    def check(self, prepared: tuple[Any, Any, list[Any]], op: tuple, answer: Any) -> None:
        system, _, requests = prepared
        if op[0] == SCHEDULE:
            got, hit = answer if op[3] else (answer, 0)
            _check_outcome(got, op[4])
            if op[4]:
                system.advance_after_allocation(requests[op[1]], hit + op[2])
        elif op[0] == PREEMPT:
            system.advance_after_preemption(requests[op[1]])

    def final_state(self, prepared: tuple[Any, Any, list[Any]]) -> dict:
        manager = prepared[1]
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
        "hashes": {b.block_id: hash_text(b.block_hash) for b in blocks if b.block_hash is not None},
    }


# -- command line ---------------------------------------------------------------------------------
def installed_vllm() -> tuple[str | None, str]:
    """(the V1 policy the installed vLLM is driven with, or None; a sentence saying what was found)."""
    from benchmarks.harness import installed_target
    from conformance.versions import installed_v1

    target, found = installed_target(installed_v1)
    if target is None:
        return None, found
    policy = f"v{target.release}"
    return policy, f"{found}: reference (policy {policy}) vs vLLM"


def vllm_sides(policy: V1Policy, vllm_policy: str | None) -> list[Any]:
    """The reference side, plus the vLLM side when the installed vLLM has a reference policy."""
    return [ReferenceSide(policy)] + ([VllmSide(policy)] if vllm_policy is not None else [])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.block_manager", description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--requests", type=int, default=2000, help="requests per trace")
    parser.add_argument("--traces", default="all", help=f"comma-separated subset of {', '.join(WORKLOADS)}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policy", default=policy_name(V1_RELEASE), help="reference policy when vLLM is absent")
    parser.add_argument("--json", help="write the results as JSON to this path")
    parser.add_argument("--profile", action="store_true", help="also cProfile one replay per side and trace")
    args = parser.parse_args(argv)
    names = list(WORKLOADS) if args.traces == "all" else args.traces.split(",")
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown or args.repeats < 1 or args.requests < 1:
        parser.error(f"bad arguments: unknown traces {unknown}" if unknown else "repeats and requests must be >= 1")

    vllm_policy, found = installed_vllm()
    policy = policy_named(vllm_policy or args.policy)
    sides = vllm_sides(policy, vllm_policy)
    labels = [side.label for side in sides]
    print(found)
    print(f"{args.requests} requests per trace, {args.repeats} repeats, seed {args.seed}; "
          f"timings on a shared machine are noisy: read the medians")
    results, profiles = run_traces(
        lambda name: make_trace(name, args.requests, policy, args.seed), names, sides, args.repeats, OP_NAMES,
        lambda trace: f"{len(trace.ops)} ops {trace.counts}", args.profile)
    print()
    print(format_table(results, labels))
    print("kops/s: thousands of trace ops per CPU second of the replaying thread (manager calls alone, clock"
          " cost removed), over the repeats."
          + (" ref/vllm: per-repeat throughput ratio (> 1: the reference is faster); best/best: ratio"
             " of each side's fastest replay." if len(labels) == 2 else ""))
    for key, text in profiles.items():
        print(f"\n== cProfile {key} ==\n{text}")
    if args.json:
        json_report(results, labels, found, policy, args).write(args.json)
    return 1 if any(r.problems for r in results) else 0


def json_report(results: Sequence[TraceResult], labels: Sequence[str], found: str, policy: V1Policy,
                args) -> BlockManagerReport:
    """The run's report, as ``--json`` writes it."""
    return BlockManagerReport(found=found, policy=policy.name, sides=list(labels), repeats=args.repeats,
                              requests=args.requests, seed=args.seed, python=platform.python_version(),
                              traces=trace_entries(results, labels))


if __name__ == "__main__":
    sys.exit(main())
