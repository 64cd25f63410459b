"""Exercise mode: questions about the next state of a trace, answered by the reference's replay.

Before a step's result is shown, the reader predicts parts of it. The questions are made from the
replayed steps (:func:`conformance.explorer.steps.replay`) when the page is built, so the answer
to each is what the reference computed; the browser only compares. Per step, at most
:data:`MAX_PER_STEP` questions, in this order:

* ``returns``: the block ids the op returns (``allocate_slots``'s new blocks, ``None`` when the
  pool refuses; a prefix-cache hit's blocks; V0's block table and common computed blocks);
* ``hit``: the hit length (tokens a prefix-cache lookup finds computed);
* ``table``: the blocks of the first block table the op changed beyond adopting a hit and
  appending what it returns (V0 allocations and appends; V1 blocks released behind a sliding
  window);
* ``ref``: the reference count of the first block whose count the op changed (V1: not the null
  block);
* ``free_head``: the new head of the free queue, where the op changed it (``None``: empty).

Each question links the note of the step that decides its answer (:func:`note_kind`), not only
the op's first note: a window's release, a prefix hit, a fork's shared blocks.

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


def _sliding(trace: dict) -> bool:
    return trace["semantics"] == "v1" and any(g.get("kind") == "sliding" for g in trace["config"].get("groups", []))


def _returns(trace: dict, op: dict, result, shared: bool = False, hit: bool = False) -> list[dict]:
    """Questions on what the op itself returns (V0's copies only where the sequence shares a
    block, ``shared``, so that a copy could happen; ``hit``: the allocation adopts a prefix hit
    first, which decides how many blocks are new)."""
    name, call = op["op"], f"<code>{escape(op_summary(op))}</code>"
    why = _op_note(trace, op)
    if name == "get_computed_blocks" and _sliding(trace):
        why = _kind_note(trace, "lookup_window")
    if name == "allocate_slots":
        if result is None:
            answer = "refused"
        elif len(result) == 1:
            answer = result[0]
        else:
            return []
        # the ids come from the free queue's front, after a hit is adopted; none when the table is
        # already long enough
        kind = "no_new_blocks" if answer == [] else "new_blocks_after_hit" if hit else "new_blocks"
        why = _kind_note(trace, kind) or why
        return [{"kind": "ids", "q": "returns", "answer": answer, "why": why, "label": "the new blocks",
                 "prompt": f"Which new block ids does {call} return? (<kbd>none</kbd> if no new block; <kbd>refused</kbd> if it cannot allocate)"}]
    if name == "get_computed_blocks":
        out = []
        ids = result["block_ids"]
        if len(ids) == 1:
            hint = (" A position before the window comes back as the null block, <kbd>0</kbd>."
                    if _sliding(trace) else "")
            out.append({"kind": "ids", "q": "returns", "answer": ids[0], "why": why, "label": "the cached blocks found",
                        "prompt": f"Which cached blocks does {call} find, in order? (<kbd>none</kbd> if it finds "
                                  f"none){hint}"})
        out.append({"kind": "int", "q": "hit", "answer": result["num_computed_tokens"], "why": why,
                    "label": "the hit length",
                    "prompt": f"How many tokens does {call} find already computed (the hit length)?"})
        return out
    if name == "num_cached_tokens":
        return [{"kind": "int", "q": "hit", "answer": result, "why": why, "label": "the cached tokens",
                 "prompt": f"How many of the sequence's tokens does {call} count as cached (the hit length)?"}]
    if name == "append_slots" and result is not None and shared:  # V0: the copy-on-write pairs for the worker
        pairs = [b for pair in result for b in pair]
        return [{"kind": "ids", "q": "returns", "answer": pairs, "why": _kind_note(trace, "copies"),
                 "label": "the copy-on-write copies",
                 "prompt": f"Which block does {call} copy, and into which? (source, destination for each "
                           "copy; <kbd>none</kbd> if it copies nothing)"}]
    if name in ("block_table", "common_computed"):
        return [{"kind": "ids", "q": "returns", "answer": list(result), "why": why, "label": "the returned blocks",
                 "prompt": f"Which block ids does {call} return? (<kbd>none</kbd> if none)"}]
    return []


def _table(trace: dict, steps: list[dict], k: int, returned: list | None, hit: list[int]) -> list[dict]:
    """The first block table (single-group) that the op changed in a way its return value does not
    already say (V0's allocations and appends; V1's blocks released behind a sliding window);
    ``hit``: the prefix-hit blocks the op adopts (:func:`_adopted_hit`)."""
    op, before, after = steps[k]["op"], steps[k - 1]["state"], steps[k]["state"]
    old = {row[0]: row[1] for row in before["tables"]}
    for row in after["tables"]:
        name, groups = row[0], row[1]
        was = old.get(name)
        if was == groups or len(groups) != 1 or not groups[0]:
            continue
        held = was[0] if was else []
        adopted = [] if held else hit
        if returned is not None and was is not None and held + adopted + returned == groups[0]:
            continue  # the hit adopted, the new blocks appended: the other questions ask exactly that
        v1 = trace["semantics"] == "v1"
        hint = (" (a position outside the window, released or skipped by a hit, reads as the null block, <kbd>0</kbd>;"
                " the trace has no step in flight)" if _sliding(trace) else "")
        who = "request" if v1 else "sequence"
        released = v1 and groups[0].count(0) > (held + adopted).count(0)  # nulls the window's release made
        why = _kind_note(trace, note_kind(trace, steps, k, "table", released=released))
        return [{"kind": "ids", "q": "table", "answer": groups[0], "why": why or _op_note(trace, op),
                 "label": f"{who} {name}'s block table",
                 "prompt": f"Which blocks does {who} <code>{escape(str(name))}</code>'s block table hold now, "
                           f"in order?{hint}"}]
    return []


def _free_head(trace: dict, steps: list[dict], k: int) -> list[dict]:
    before, after = steps[k - 1]["state"], steps[k]["state"]
    if before["free"][:1] == after["free"][:1]:
        return []
    return [{"kind": "block", "q": "free_head", "answer": after["free"][0] if after["free"] else None,
             "why": _kind_note(trace, note_kind(trace, steps, k, "free_head")), "label": "the head of the free queue",
             "prompt": "Which block is now at the head of the free queue, the next one an allocation "
                       "takes? (<kbd>none</kbd> if the queue is empty)"}]


def _adopted_hit(steps: list[dict], k: int) -> list[int]:
    """The prefix-hit blocks (first group) op ``k`` adopts, in order: for an ``allocate_slots`` that
    uses a hit, what its request's latest ``get_computed_blocks`` before it answered; else none."""
    op = steps[k]["op"]
    if op["op"] != "allocate_slots" or not op.get("use_hit"):
        return []
    for step in reversed(steps[:k]):
        prior, out = step["op"], step["outcome"]
        if prior is not None and prior["op"] == "get_computed_blocks" and prior.get("req") == op["req"]:
            groups = ((out or {}).get("result") or {}).get("block_ids") or [[]]
            return list(groups[0])
    return []


def note_kind(trace: dict, steps: list[dict], k: int, question: str, block: str | None = None,
              released: bool = False) -> str:
    """The :data:`~conformance.explorer.op_notes.QUESTION_NOTES` kind of the note that explains a
    question about op ``k``: the step of the op that decided the answer. The rule covers what the
    traces' managers do (full-attention and sliding-window groups); 0.33.0 changes counts in other
    places too (Mamba groups, copy-on-write of a hit that ends mid-block, HiSparse), which no trace
    reaches.

    ``ref`` (``block``'s count). V1: a count falls in ``free_blocks``, called by ``allocate_slots``
    only for blocks the window released (``ref_window``); it rises in ``touch`` for a block of the
    request's prefix hit that ``allocate_slots`` adopts (or any block already held, which only a
    hit can share), and in ``get_new_blocks`` otherwise. V0 without prefix caching: the fork, the
    copy-on-write, the allocation or the free that changed it; otherwise the counter itself.
    ``table``: V1 a table that gained null entries (``released``) was cut by the window; V0 an
    allocation splits the tokens into blocks, an append grows the table or copies its shared last
    block. ``free_head``: V1 a free or preemption orders the queue by ``free_blocks``; anything
    else takes from its front. A kind that names no note (``table`` for any other table) leaves
    the question with the op's own note."""
    op = steps[k]["op"]
    name = op["op"]
    v1 = trace["semantics"] == "v1"
    if question == "free_head":
        return "free_head_freed" if v1 and name in ("free", "preempt") else "free_head"
    if question == "table":
        if v1:
            return "table_window" if released and name == "allocate_slots" else "table"
        if name == "append_slots":
            return "table_copy" if steps[k]["outcome"].get("result") else "table_append"
        return "table_allocate" if name == "allocate" else "table"
    assert block is not None
    before, after = steps[k - 1]["state"], steps[k]["state"]
    was, now = before["refs"].get(block, 0), after["refs"].get(block, 0)
    if not v1:
        if trace["config"].get("enable_caching"):
            return "ref"
        if name == "append_slots":
            copied = {b for pair in steps[k]["outcome"].get("result") or [] for b in pair}
            return "ref_cow" if int(block) in copied else "ref_allocate" if now > was else "ref"
        return {"fork": "ref_fork", "allocate": "ref_allocate", "free": "ref_free"}.get(name, "ref")
    if now < was:
        return "ref_window" if name == "allocate_slots" else "ref_free"
    return "ref_hit" if int(block) in _adopted_hit(steps, k) or was > 0 else "ref_new"


def _ref(trace: dict, steps: list[dict], k: int) -> list[dict]:
    before, after = steps[k - 1]["state"], steps[k]["state"]
    changed = sorted({int(b) for b in set(before["refs"]) | set(after["refs"])
                      if before["refs"].get(b, 0) != after["refs"].get(b, 0)})
    if trace["semantics"] == "v1" and policy_named(trace["config"]["policy"]).pool_has_null_block:
        changed = [b for b in changed if b != 0]  # the null block: some releases count it, the notes' 0.33.0 does not
    if not changed:
        return []
    block = changed[0]
    why = _kind_note(trace, note_kind(trace, steps, k, "ref", str(block)))
    return [{"kind": "int", "q": "ref", "answer": after["refs"].get(str(block), 0), "why": why,
             "label": f"block {block}'s reference count",
             "prompt": f"What is block {block}'s reference count now?"}]


def _shares_a_block(steps: list[dict], k: int) -> bool:
    """Whether op ``k``'s V0 sequence held a block with another sequence before the op."""
    seq, before = steps[k]["op"].get("seq"), steps[k - 1]["state"]
    table: list[int] = next((row[1][0] for row in before["tables"] if row[0] == str(seq)), [])
    return any(before["refs"].get(str(b), 0) > 1 for b in table)


def step_questions(trace: dict, steps: list[dict], k: int) -> list[dict]:
    """The questions about step ``k`` (the state after op ``k``), answered from ``steps``."""
    step = steps[k]
    out = step["outcome"]
    if step["op"] is None or out is None or "result" not in out:
        return []  # the initial state, a refusal or a crash: nothing to predict but the refusal
    op = step["op"]
    hit = _adopted_hit(steps, k)
    shared = op["op"] == "append_slots" and _shares_a_block(steps, k)
    found = _returns(trace, op, out["result"], shared=shared, hit=bool(hit))
    returned = next((q["answer"] for q in found if q["q"] == "returns"), None)
    if op["op"] == "append_slots":
        returned = []  # V0's copies are not blocks of the table
    found += _table(trace, steps, k, returned if isinstance(returned, list) else None, hit)
    found += _ref(trace, steps, k) + _free_head(trace, steps, k)
    return [{"id": f"s{k}-{q['q']}", "step": k, **q} for q in found[:MAX_PER_STEP]]


def trace_questions(trace: dict, steps: list[dict]) -> list[dict]:
    """Every question of a trace, in step order."""
    return [q for k in range(1, len(steps)) for q in step_questions(trace, steps, k)]
