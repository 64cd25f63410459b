"""The trace explorer's data: a trace replayed through the reference, one display state per step.

A trace is the conformance engine's JSON (``semantics``, ``config``, ``ops``, optional
``expect``). :func:`replay` drives the reference through the lockstep adapters
(``conformance/adapters/reference_v1.py`` / ``reference_v0.py``: their ``apply`` and ``snapshot``
are exactly what the conformance runs compare against vLLM) and turns each snapshot into the few
things a reader follows: each request's block table, the free queue in order, reference counts,
which block carries which (shortened) hash, and what the step did that is easy to miss:
evictions, copy-on-write pairs, swaps, newly mapped blocks. Where the trace pins vLLM's own
expectations for a step (rebuilt from vLLM's tests), the step says whether the reference met them.

Step 0 is the state before any op; step ``k`` is the state after op ``k`` (1-based).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.lockstep import outcome
from conformance.trace_file import load_trace

HASH_CHARS = 8

#: The seed demo's V0 workload (``docs/hooks/seed_data.py``: shared prefix, fork with copy-on-write,
#: free, an allocation that must evict), written as lockstep ops so it replays like any trace.
SEED_PREFIX = [11, 12, 13, 14, 15, 16, 17, 18]
SEED_DEMO_TRACE: dict[str, Any] = {
    "semantics": "v0",
    "source": "the seed demo's V0 workload (docs/hooks/seed_data.py: workload_stages) as lockstep ops",
    "config": {"block_size": 4, "num_gpu_blocks": 8, "num_cpu_blocks": 0, "watermark": 0.0,
               "sliding_window": None, "enable_caching": True},
    "ops": [
        {"op": "add_group", "group": "A", "seqs": [1], "prompt": SEED_PREFIX + [21, 22]},
        {"op": "allocate", "group": "A"},
        {"op": "num_cached_tokens", "seq": 1},
        {"op": "mark_computed", "group": "A"},
        {"op": "add_group", "group": "B", "seqs": [2], "prompt": SEED_PREFIX + [31, 32]},
        {"op": "allocate", "group": "B"},
        {"op": "num_cached_tokens", "seq": 2},
        {"op": "compute", "seq": 1},
        {"op": "fork", "group": "A", "parent": 1, "child": 3},
        {"op": "append_token", "seq": 3, "token": 41},
        {"op": "append_slots", "seq": 3, "lookahead": 0},
        {"op": "num_cached_tokens", "seq": 3},
        {"op": "access", "seq": 1, "now": 1.0},
        {"op": "access", "seq": 2, "now": 2.0},
        {"op": "access", "seq": 3, "now": 3.0},
        {"op": "free", "seq": 1},
        {"op": "free", "seq": 2},
        {"op": "free", "seq": 3},
        {"op": "add_group", "group": "C", "seqs": [4], "prompt": list(range(100, 128))},
        {"op": "allocate", "group": "C"},
        {"op": "num_cached_tokens", "seq": 4},
    ],
}


@dataclass(frozen=True)
class TraceSpec:
    """A trace to explore: its page slug, a title, and the trace itself."""

    slug: str
    title: str
    trace: dict


def corpus_specs(paths: list[Path]) -> list[TraceSpec]:
    """Every trace of the corpus (``conformance.corpus.corpus()``), then the seed demo's workload."""
    specs = []
    for path in paths:
        trace = load_trace(path)
        specs.append(TraceSpec(f"{path.parent.name}-{path.stem}".lower(), f"{path.parent.name}/{path.stem}", trace))
    specs.append(TraceSpec("seed-demo-workload", "seed demo: the V0 workload", SEED_DEMO_TRACE))
    return specs


def system_for(trace: dict):
    """The reference system behind a trace's semantics."""
    semantics = trace.get("semantics")
    if semantics == "v1":
        from conformance.adapters.reference_v1 import ReferenceV1System

        return ReferenceV1System(trace["config"])
    if semantics == "v0":
        from conformance.adapters.reference_v0 import ReferenceV0System

        return ReferenceV0System(trace["config"])
    raise ValueError(f"trace semantics {semantics!r} is neither 'v0' nor 'v1'")


def short(hex_hash: str | None) -> str | None:
    return None if hex_hash is None else hex_hash[:HASH_CHARS]


def view_v1(snap: dict) -> dict:
    """The display state of a V1 snapshot (``ReferenceV1System.snapshot``)."""
    hashes = {i: short(h) for i, (_, h) in enumerate(snap["blocks"]) if h is not None}
    return {
        "tables": [[req, r["tables"], f"{r['status']}, {r['num_computed_tokens']}/{r['num_tokens']} tokens computed"]
                   for req, r in snap["requests"].items()],
        "free": list(snap["free_queue"]),
        "evictable": None,
        "refs": {str(i): ref for i, (ref, _) in enumerate(snap["blocks"]) if ref},
        "num_blocks": len(snap["blocks"]),
        "hashes": {str(i): h for i, h in hashes.items()},
        "cached": [[short(key), list(ids)] for key, ids in snap["cached"]],
        "cpu_free": None,
    }


def view_v0(snap: dict) -> dict:
    """The display state of a V0 snapshot (``BlockSpaceManager.snapshot``, GPU side first)."""
    gpu = snap["gpu"]
    cached = gpu.get("cached", [])
    return {
        "tables": [[seq, [ids], f"{snap['full_slots'].get(seq, 0)} token slots"] for seq, ids in snap["tables"].items()],
        "free": list(gpu["free"]),
        "evictable": [p[0] for p in gpu.get("evictor", {}).get("parked", [])],
        "refs": {str(b): c for b, c in gpu["refcounts"].items() if c},
        "num_blocks": None,
        "hashes": {str(b): short(h) for h, b in cached},
        "cached": [[short(h), [b]] for h, b in cached],
        "cpu_free": list(snap["cpu"]["free"]) if snap.get("cpu", {}).get("free") or snap.get("cpu", {}).get("refcounts") else None,
    }


def events(semantics: str, op: dict, result: Any, before: dict, after: dict) -> dict:
    """What this step did to blocks: evictions, copy-on-write and swap pairs, newly mapped blocks."""
    evicted: list[int] = []
    if op.get("op") != "reset_prefix_cache":
        for block, h in before["hashes"].items():
            if after["hashes"].get(block) != h and (
                semantics == "v1" or int(block) in (before["evictable"] or []) or int(block) in before["free"]
            ):
                evicted.append(int(block))
    old = {b for _, groups, _ in before["tables"] for g in groups for b in g}
    new = sorted({b for _, groups, _ in after["tables"] for g in groups for b in g} - old)
    cow = [list(p) for p in result] if op.get("op") == "append_slots" and isinstance(result, list) else []
    swapped = [list(p) for p in result] if op.get("op") in ("swap_out", "swap_in") and isinstance(result, list) else []
    return {"evicted": sorted(evicted), "cow": cow, "swapped": swapped, "new": new}


def matches(expect: dict | None, out: dict, snap: dict) -> bool | None:
    """Whether the step meets the trace's pinned expectation (None when it pins nothing)."""
    if not expect:
        return None
    ok = True
    if "outcome" in expect:
        ok &= expect["outcome"] == out
    for key, value in expect.get("state", {}).items():
        ok &= snap.get(key) == value
    return bool(ok)


def replay(trace: dict) -> list[dict]:
    """Every step of ``trace`` on the reference: op, outcome, display state, events, expectation."""
    system = system_for(trace)
    semantics = trace["semantics"]
    view = view_v1 if semantics == "v1" else view_v0
    expects = trace.get("expect") or []
    state = view(system.snapshot())
    steps = [{"op": None, "outcome": None, "state": state, "events": events(semantics, {}, None, state, state),
              "expect": None, "met": None}]
    for k, op in enumerate(trace["ops"]):
        out = outcome(system, op)
        snap = system.snapshot()
        after = view(snap)
        expect = expects[k] if k < len(expects) else None
        steps.append({"op": op, "outcome": out, "state": after,
                      "events": events(semantics, op, out.get("result"), state, after),
                      "expect": expect, "met": matches(expect, out, snap)})
        state = after
    return steps


def op_summary(op: dict | None, limit: int = 6) -> str:
    """One line for an op: its name and arguments, long token lists shortened."""
    if op is None:
        return "initial state"
    parts = []
    for key, value in op.items():
        if key == "op":
            continue
        if isinstance(value, list) and len(value) > limit:
            value = f"[{', '.join(map(str, value[:limit]))}, … {len(value)} items]"
        parts.append(f"{key}={value}")
    return f"{op['op']}({', '.join(parts)})"


def outcome_summary(out: dict | None) -> str:
    if out is None:
        return ""
    if "error" in out:
        return f"refused: {out['error']}"
    return "" if out.get("result") is None else f"→ {json.dumps(out['result'])}"
