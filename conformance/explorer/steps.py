"""A trace replayed on the reference, one display state per step.

A trace is the conformance engine's JSON (:mod:`conformance.trace_file`). :func:`replay` drives
the reference through the lockstep adapters (``conformance/adapters/reference_v1.py`` /
``reference_v0.py``: their ``apply`` and ``snapshot`` are exactly what the conformance runs compare
against vLLM) and turns each snapshot into the few things a reader follows: each request's block
table, the free queue in order, reference counts, which block carries which (shortened) hash, and
what the step did that is easy to miss: evictions, copy-on-write pairs, swaps, newly mapped
blocks. Where the trace pins vLLM's own expectations for a step (rebuilt from vLLM's tests), the
step says whether the reference met them.

Step 0 is the state before any op; step ``k`` is the state after op ``k`` (1-based).
"""

from __future__ import annotations

import json
from typing import Any

from conformance.lockstep import outcome

HASH_CHARS = 8


def system_for(trace: dict):
    """The reference system behind a trace's semantics."""
    semantics = trace.get("semantics")
    if semantics == "v1":
        from conformance.adapters.reference_v1 import ReferenceV1System
        from conformance.configs import V1Config

        return ReferenceV1System(V1Config.from_json(trace["config"]))
    if semantics == "v0":
        from conformance.adapters.reference_v0 import ReferenceV0System
        from conformance.configs import V0Config

        return ReferenceV0System(V0Config.from_json(trace["config"]))
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
    """The display state of a V0 snapshot (``ReferenceV0System.snapshot``, GPU side first)."""
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


def replay(trace: dict, snapshots: bool = False, stop_on_crash: bool = False) -> list[dict]:
    """Every step of ``trace`` on the reference: op, outcome, display state, events, expectation.

    With ``snapshots`` each step also carries the reference's raw snapshot (``"snapshot"``), the
    form a divergence is compared in. An op that raises something other than a refusal
    (:class:`~conformance.lockstep.OpError`) propagates, unless ``stop_on_crash``: then the
    replay ends with that step, its outcome ``{"crash": "TypeError: ..."}`` and the state before it.
    """
    system = system_for(trace)
    semantics = trace["semantics"]
    view = view_v1 if semantics == "v1" else view_v0
    expects = trace.get("expect") or []
    snap = system.snapshot()
    state = view(snap)
    steps = [{"op": None, "outcome": None, "state": state, "events": events(semantics, {}, None, state, state),
              "expect": None, "met": None}]
    if snapshots:
        steps[0]["snapshot"] = snap
    for k, op in enumerate(trace["ops"]):
        try:
            out = outcome(system, op)
        except Exception as err:  # not a refusal: a bug in the reference or a trace it cannot take
            if not stop_on_crash:
                raise
            steps.append({"op": op, "outcome": {"crash": f"{type(err).__name__}: {err}"}, "state": state,
                          "events": events(semantics, {}, None, state, state), "expect": None, "met": None})
            if snapshots:
                steps[-1]["snapshot"] = snap
            break
        snap = system.snapshot()
        after = view(snap)
        expect = expects[k] if k < len(expects) else None
        steps.append({"op": op, "outcome": out, "state": after,
                      "events": events(semantics, op, out.get("result"), state, after),
                      "expect": expect, "met": matches(expect, out, snap)})
        if snapshots:
            steps[-1]["snapshot"] = snap
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
    if "crash" in out:
        return f"raised {out['crash']}"
    return "" if out.get("result") is None else f"→ {json.dumps(out['result'])}"


def view(semantics: str, snap: dict) -> dict:
    """The display state of a raw snapshot of either semantics."""
    return view_v1(snap) if semantics == "v1" else view_v0(snap)
