"""Exercise mode: questions about the next state of a trace, answered by the reference's replay.

Before a step's result is shown, the reader predicts parts of it. The questions are made from the
replayed steps (:func:`conformance.explorer.steps.replay`) when the page is built, so the answer
to each is what the reference computed; the browser only compares. Per step, at most
:data:`MAX_PER_STEP` questions, in this order:

* ``returns``: the block ids the op returns (``allocate_slots``'s new blocks, ``None`` when the
  pool refuses; a prefix-cache hit's blocks; V0's block table and common computed blocks);
* ``hit``: the hit length (tokens a prefix-cache lookup finds computed);
* ``table``: the blocks of the first block table the op changed beyond appending what it returns
  (V0 allocations and appends; V1 blocks released behind a sliding window);
* ``free_head``: the new head of the free queue, where the op changed it (``None``: empty);
* ``ref``: the reference count of the first block whose count the op changed.

A question is a dict: ``id`` (unique in its trace), ``step``, ``kind`` (how the answer is typed:
``ids`` a list of block ids, maybe empty, or ``"refused"`` where the op returned None; ``int``;
``block`` a block id or None; ``number``), ``prompt`` (HTML, its values escaped), ``label`` (what
the answer is, plain text), ``answer`` and ``why`` (the note that explains it,
``v<release>/<path>#<note id>``, or None).
"""

from __future__ import annotations

from html import escape

from conformance.changelog import policy_named
from conformance.explorer.op_notes import op_notes, question_note, trace_release
from conformance.explorer.steps import op_summary

MAX_PER_STEP = 3


def _op_note(trace: dict, op: dict) -> str | None:
    notes = op_notes(trace["semantics"], trace_release(trace), op["op"])
    return notes[0].target if notes else None


def _kind_note(trace: dict, kind: str) -> str | None:
    note = question_note(trace["semantics"], kind)
    return None if note is None else note.target


def _returns(trace: dict, op: dict, result) -> list[dict]:
    """Questions on what the op itself returns."""
    name, call = op["op"], f"<code>{escape(op_summary(op))}</code>"
    why = _op_note(trace, op)
    if name == "allocate_slots":
        if result is None:
            answer = "refused"
        elif len(result) == 1:
            answer = result[0]
        else:
            return []
        return [{"kind": "ids", "q": "returns", "answer": answer, "why": why, "label": "the new blocks",
                 "prompt": f"Which new block ids does {call} return? (<kbd>none</kbd> if no new block; <kbd>refused</kbd> if it cannot allocate)"}]
    if name == "get_computed_blocks":
        out = []
        ids = result["block_ids"]
        if len(ids) == 1:
            out.append({"kind": "ids", "q": "returns", "answer": ids[0], "why": why, "label": "the cached blocks found",
                        "prompt": f"Which cached blocks does {call} find? (<kbd>none</kbd> if it finds none)"})
        out.append({"kind": "int", "q": "hit", "answer": result["num_computed_tokens"], "why": why,
                    "label": "the hit length",
                    "prompt": f"How many tokens does {call} find already computed (the hit length)?"})
        return out
    if name == "num_cached_tokens":
        return [{"kind": "int", "q": "hit", "answer": result, "why": why, "label": "the cached tokens",
                 "prompt": f"How many of the sequence's tokens does {call} count as cached (the hit length)?"}]
    if name in ("block_table", "common_computed"):
        return [{"kind": "ids", "q": "returns", "answer": list(result), "why": why, "label": "the returned blocks",
                 "prompt": f"Which block ids does {call} return? (<kbd>none</kbd> if none)"}]
    return []


def _table(trace: dict, op: dict, before: dict, after: dict, returned: list | None) -> list[dict]:
    """The first block table (single-group) that the op changed in a way its return value does not
    already say (V0's allocations and appends; V1's blocks released behind a sliding window)."""
    old = {row[0]: row[1] for row in before["tables"]}
    for row in after["tables"]:
        name, groups = row[0], row[1]
        was = old.get(name)
        if was == groups or len(groups) != 1 or not groups[0]:
            continue
        if returned is not None and was is not None and was[0] + returned == groups[0]:
            continue  # the new blocks were appended: the "returns" question asks exactly that
        v1 = trace["semantics"] == "v1"
        hint = (" (a block released behind the sliding window reads as the null block, <kbd>0</kbd>)"
                if v1 and any(g.get("kind") == "sliding" for g in trace["config"].get("groups", [])) else "")
        who = "request" if v1 else "sequence"
        return [{"kind": "ids", "q": "table", "answer": groups[0], "why": _op_note(trace, op),
                 "label": f"{who} {name}'s block table",
                 "prompt": f"Which blocks does {who} <code>{escape(str(name))}</code>'s block table hold now, "
                           f"in order?{hint}"}]
    return []


def _free_head(trace: dict, before: dict, after: dict) -> list[dict]:
    if before["free"][:1] == after["free"][:1]:
        return []
    return [{"kind": "block", "q": "free_head", "answer": after["free"][0] if after["free"] else None,
             "why": _kind_note(trace, "free_head"), "label": "the head of the free queue",
             "prompt": "Which block is now at the head of the free queue, the next one an allocation "
                       "takes? (<kbd>none</kbd> if the queue is empty)"}]


def _hit_blocks(steps: list[dict], k: int, req: str) -> set[int]:
    """The blocks request ``req``'s latest ``get_computed_blocks`` before step ``k`` answered."""
    for step in reversed(steps[:k]):
        op, out = step["op"], step["outcome"]
        if op is not None and op["op"] == "get_computed_blocks" and op.get("req") == req:
            result = (out or {}).get("result") or {}
            return {b for group in result.get("block_ids", []) for b in group}
    return set()


def ref_change(trace: dict, steps: list[dict], k: int, block: str) -> str:
    """Which step of op ``k`` changed ``block``'s reference count (a :data:`QUESTION_NOTES` kind).

    V1: a count falls only in ``free_blocks``; it rises in ``touch`` for a block of the request's
    prefix hit that ``allocate_slots`` uses (or any block already held, which only a hit can
    share), and in ``get_new_blocks`` otherwise. V0 has one note for every change."""
    if trace["semantics"] != "v1":
        return "ref"
    op, before, after = steps[k]["op"], steps[k - 1]["state"], steps[k]["state"]
    was, now = before["refs"].get(block, 0), after["refs"].get(block, 0)
    if now < was:
        return "ref_free"
    hit = op["op"] == "allocate_slots" and op.get("use_hit") and int(block) in _hit_blocks(steps, k, op["req"])
    return "ref_hit" if hit or was > 0 else "ref_new"


def _ref(trace: dict, steps: list[dict], k: int) -> list[dict]:
    before, after = steps[k - 1]["state"], steps[k]["state"]
    changed = sorted({int(b) for b in set(before["refs"]) | set(after["refs"])
                      if before["refs"].get(b, 0) != after["refs"].get(b, 0)})
    if trace["semantics"] == "v1" and policy_named(trace["config"]["policy"]).pool_has_null_block:
        changed = [b for b in changed if b != 0]  # the null block: some releases count it, the notes' 0.33.0 does not
    if not changed:
        return []
    block = changed[0]
    why = _kind_note(trace, ref_change(trace, steps, k, str(block)))
    return [{"kind": "int", "q": "ref", "answer": after["refs"].get(str(block), 0), "why": why,
             "label": f"block {block}'s reference count",
             "prompt": f"What is block {block}'s reference count now?"}]


def step_questions(trace: dict, steps: list[dict], k: int) -> list[dict]:
    """The questions about step ``k`` (the state after op ``k``), answered from ``steps``."""
    step = steps[k]
    out = step["outcome"]
    if step["op"] is None or out is None or "result" not in out:
        return []  # the initial state, a refusal or a crash: nothing to predict but the refusal
    before, after = steps[k - 1]["state"], step["state"]
    found = _returns(trace, step["op"], out["result"])
    returned = next((q["answer"] for q in found if q["q"] == "returns"), None)
    found += _table(trace, step["op"], before, after, returned if isinstance(returned, list) else None)
    found += _free_head(trace, before, after) + _ref(trace, steps, k)
    return [{"id": f"s{k}-{q['q']}", "step": k, **q} for q in found[:MAX_PER_STEP]]


def trace_questions(trace: dict, steps: list[dict]) -> list[dict]:
    """Every question of a trace, in step order."""
    return [q for k in range(1, len(steps)) for q in step_questions(trace, steps, k)]
