"""The trace explorer's data and page: replayed states, highlighted events, deep-link anchors,
exercise questions answered by the reference, and the exercise sets the theory pages link to."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conformance.adapters.reference_v0 import ReferenceV0System
from conformance.adapters.reference_v1 import ReferenceV1System
from conformance.configs import V0Config, V1Config
from conformance.corpus import corpus
from conformance.explorer.exercises import note_kind, trace_questions
from conformance.explorer.page import explorer_data, explorer_html, step_item
from conformance.explorer.steps import matches, op_summary, replay, view_v1
from docs.hooks.trace_explorer import EXERCISE_SETS, seed_questions
from docs.hooks.trace_steps import SEED_DEMO_TRACE, SEED_FIFTH_TOKEN_SLUG, SEED_FIFTH_TOKEN_TRACE, corpus_specs

DOCS = Path(__file__).resolve().parents[2] / "docs"

V1_CONFIG = {"policy": "v0.33.0", "block_size": 4, "num_blocks": 4, "groups": [{"kind": "full"}],
             "max_model_len": 64, "enable_caching": True, "hash_fn": "sha256", "pythonhashseed": "0"}
#: a fills blocks 1 and 2 (both full, so cached), finishes; b needs three blocks: the free queue
#: hands out block 3 first, then a's cached blocks, whose hashes are dropped (evicted).
V1_TRACE = {
    "semantics": "v1",
    "config": V1_CONFIG,
    "ops": [
        {"op": "add_request", "req": "a", "tokens": list(range(8))},
        {"op": "get_computed_blocks", "req": "a"},
        {"op": "allocate_slots", "req": "a", "num_new_tokens": 8, "use_hit": True},
        {"op": "free", "req": "a"},
        {"op": "add_request", "req": "b", "tokens": list(range(100, 112))},
        {"op": "get_computed_blocks", "req": "b"},
        {"op": "allocate_slots", "req": "b", "num_new_tokens": 12, "use_hit": True},
    ],
    "expect": [None, None, {"outcome": {"result": [[1, 2]]}}, None, None, None, {"outcome": {"result": [[9]]}}],
}


def test_every_step_shows_the_reference_snapshot_after_that_op() -> None:
    """Catches: a state panel showing the state of another step (off by one) or a stale copy."""
    steps = replay(V1_TRACE)
    assert len(steps) == len(V1_TRACE["ops"]) + 1 and steps[0]["op"] is None
    system = ReferenceV1System(V1Config.from_json(V1_CONFIG))
    assert steps[0]["state"] == view_v1(system.snapshot())
    for k, op in enumerate(V1_TRACE["ops"], 1):
        system.apply(op)
        snap = system.snapshot()
        assert steps[k]["state"] == view_v1(snap), k
        assert steps[k]["state"]["free"] == snap["free_queue"]
    assert steps[3]["state"]["tables"][0][:2] == ["a", [[1, 2]]]
    assert steps[4]["state"]["free"][-2:] == [2, 1]  # freed tail first: eviction order


def test_evictions_and_new_blocks_are_reported_in_the_step_they_happen() -> None:
    """Catches: evictions not highlighted, or highlighted in every later step."""
    steps = replay(V1_TRACE)
    assert [k for k, s in enumerate(steps) if s["events"]["evicted"]] == [7]
    assert steps[7]["events"]["evicted"] == [1, 2]
    assert steps[7]["events"]["new"] == [1, 2, 3] and steps[3]["events"]["new"] == [1, 2]
    assert steps[4]["state"]["hashes"].keys() == {"1", "2"}  # freed but still cached
    assert steps[7]["state"]["cached"] == [] or all(h not in dict(steps[7]["state"]["cached"])
                                                    for h in steps[4]["state"]["hashes"].values())


def test_pinned_expectations_are_checked_not_assumed() -> None:
    """Catches: a step claiming to meet vLLM's pinned values when it does not."""
    steps = replay(V1_TRACE)
    assert steps[3]["met"] is True  # [[1, 2]] is what the reference returns
    assert steps[7]["met"] is False  # [[9]] is not
    assert steps[1]["met"] is None
    assert matches({"state": {"num_free_blocks": 3}}, {"result": None}, {"num_free_blocks": 2}) is False


def test_seed_demo_workload_shows_its_copy_on_write_and_its_eviction() -> None:
    """Catches: the V0 copy-on-write pair or the V0 eviction missing from the seed demo's trace."""
    steps = replay(SEED_DEMO_TRACE)
    cow = [k for k, s in enumerate(steps) if s["events"]["cow"]]
    assert cow == [11] and steps[11]["events"]["cow"] == [[2, 4]]
    assert steps[11]["state"]["tables"][2][:2] == ["3", [[0, 1, 4]]]
    evicted = [k for k, s in enumerate(steps) if s["events"]["evicted"]]
    assert evicted == [20] and steps[20]["events"]["evicted"] == [1]
    assert steps[18]["state"]["evictable"] == [0, 1]


def test_the_corpus_includes_vllms_test_prefill_at_both_versions_and_the_seed_demo() -> None:
    """Catches: traces silently left out of the explorer."""
    slugs = {s.slug for s in corpus_specs(corpus())}
    assert {"v1-upstream-test-prefill-v0.10.2", "v1-upstream-test-prefill-v0.33.0", "seed-demo-workload"} <= slugs
    assert len(slugs) == len(corpus()) + 2 and SEED_FIFTH_TOKEN_SLUG in slugs


def test_page_has_one_anchor_per_step_and_data_that_cannot_end_the_script() -> None:
    """Catches: #step-N links landing nowhere, or trace data with '</script>' breaking the page."""
    trace = dict(V1_TRACE, source="evil </script><b>")
    steps = replay(trace)
    data = explorer_data("x", "x", trace, steps, {}, trace_questions(trace, steps))
    html = explorer_html(data, steps, [("x", "./"), ("y", "../y/")])
    assert re.findall(r'<li id="step-(\d+)"', html) == [str(k) for k in range(len(steps))]
    payload = re.search(r'<script type="application/json" class="tx-data">(.*?)</script>', html, re.S)[1]
    data = json.loads(payload)
    assert len(data["steps"]) == len(steps) and data["num_blocks"] == 4
    assert '<option value="./" selected>x</option>' in html
    assert "vLLM ✗" in step_item(7, steps[7]) and "evict" in step_item(7, steps[7])


def test_unknown_semantics_and_long_ops_are_handled() -> None:
    """Catches: a trace of another semantics replayed by the wrong system; unreadable long ops."""
    with pytest.raises(ValueError, match="semantics"):
        replay({"semantics": "v2", "config": {}, "ops": []})
    assert op_summary({"op": "add_request", "req": "r", "tokens": list(range(50))}) == \
        "add_request(req=r, tokens=[0, 1, 2, 3, 4, 5, … 50 items])"


# --- exercises -------------------------------------------------------------------------------------

def fresh_states(trace: dict) -> list[dict]:
    """The reference's raw snapshot after each op, replayed independently of the explorer."""
    system = (ReferenceV1System(V1Config.from_json(trace["config"])) if trace["semantics"] == "v1"
              else ReferenceV0System(V0Config.from_json(trace["config"])))
    snaps, results = [system.snapshot()], [None]
    for op in trace["ops"]:
        results.append(system.apply(op))
        snaps.append(system.snapshot())
    return list(zip(snaps, results))


def test_exercise_answers_are_the_reference_state_after_the_step_not_before() -> None:
    """Catches: questions answered from the state before the op (off by one), from another
    request, or answers made up instead of read from the reference."""
    for path in corpus():
        if path.stem not in ("upstream-test-prefill-v0.33.0", "fork-copy-on-write",
                             "upstream-sliding-window-remove-skipped-v0.33.0"):
            continue
        trace = json.loads(path.read_text())
        questions = trace_questions(trace, replay(trace))
        states = fresh_states(trace)
        kinds = set()
        for q in questions:
            snap, result = states[q["step"]]
            kinds.add(q["q"])
            if q["q"] == "free_head":
                free = snap["free_queue"] if trace["semantics"] == "v1" else snap["gpu"]["free"]
                assert q["answer"] == (free[0] if free else None), q
                before = states[q["step"] - 1][0]
                before_free = before["free_queue"] if trace["semantics"] == "v1" else before["gpu"]["free"]
                assert before_free[:1] != free[:1], "asked where the head did not change"
            elif q["q"] == "ref":
                block = int(re.search(r"block (\d+)", q["prompt"])[1])
                ref = snap["blocks"][block][0] if trace["semantics"] == "v1" else snap["gpu"]["refcounts"].get(str(block), 0)
                assert q["answer"] == ref, q
            elif q["q"] == "returns" and trace["ops"][q["step"] - 1]["op"] == "allocate_slots":
                assert q["answer"] == ("refused" if result is None else result[0]), q
            elif q["q"] == "hit":
                assert q["answer"] == result["num_computed_tokens"], q
            elif q["q"] == "table":
                name = re.search(r"<code>(.*?)</code>", q["prompt"])[1]
                held = snap["requests"][name]["tables"][0] if trace["semantics"] == "v1" else snap["tables"][name]
                assert q["answer"] == held, q
        assert len({q["id"] for q in questions}) == len(questions)
        assert {"free_head", "ref"} <= kinds
        if "sliding" in path.stem:  # released blocks: the table asked where returns do not say it
            assert "table" in kinds


def test_the_seed_demo_is_the_first_exercise_and_answers_3_in_both_layouts() -> None:
    """Catches: the seed demo's exercise missing, not first, or its attention answers not the
    oracle's (the seed's claim: the placement does not change the output)."""
    assert EXERCISE_SETS[0][0] == SEED_FIFTH_TOKEN_SLUG and EXERCISE_SETS[0][2] == "seed-demo.md"
    steps = replay(SEED_FIFTH_TOKEN_TRACE)
    tables = [s["state"]["tables"] for s in steps]
    assert tables[2][0][1] == [[0]] and tables[5][0][1] == [[0, 1]]  # the fifth token takes a second block
    attention = seed_questions(steps)
    assert [q["answer"] for q in attention] == [pytest.approx(3.0), pytest.approx(3.0)]
    assert all(q["step"] == len(steps) - 1 and q["kind"] == "number" for q in attention)
    table_questions = [q for q in trace_questions(SEED_FIFTH_TOKEN_TRACE, steps) if q["q"] == "table"]
    assert [q["answer"] for q in table_questions] == [[0], [0, 1]]


def test_every_theory_page_links_its_exercise_set() -> None:
    """Catches: an exercise set nobody can find (its page does not link it), a set on a trace
    that is not in the explorer, or a set without questions."""
    specs = {s.slug: s for s in corpus_specs(corpus())}
    pages = {home for _, _, home in EXERCISE_SETS}
    assert {"theory/prefix-caching.md", "theory/sliding-window.md", "theory/copy-on-write.md",
            "theory/chunked-prefill.md", "seed-demo.md"} <= pages
    for slug, _, home in EXERCISE_SETS:
        assert slug in specs, slug
        text = (DOCS / home).read_text()
        prefix = "../" * home.count("/")
        assert f"]({prefix}trace-explorer/{slug}.md#exercise)" in text, (home, slug)
        trace = specs[slug].trace
        assert trace_questions(trace, replay(trace)), slug


def test_exercise_prompts_escape_what_the_trace_names() -> None:
    """Catches: a hand-written trace whose request name is markup injected into the page."""
    trace = json.loads(json.dumps(V1_TRACE).replace('"a"', '"<img src=x onerror=alert(1)>"'))
    prompts = " ".join(q["prompt"] for q in trace_questions(trace, replay(trace)))
    assert "<img" not in prompts and "&lt;img" in prompts


def test_a_reference_count_question_links_the_note_of_the_step_that_changed_the_count() -> None:
    """Catches: every V1 reference-count question linking to the prefix-hit note (``touch``), though
    most counts change when a block is newly allocated or freed, so a student's wrong answer was
    sent to a note that does not explain it."""
    trace = {"semantics": "v1", "config": V1_CONFIG, "ops": [
        {"op": "add_request", "req": "a", "tokens": list(range(8))},
        {"op": "get_computed_blocks", "req": "a"},
        {"op": "allocate_slots", "req": "a", "num_new_tokens": 8, "use_hit": True},
        {"op": "free", "req": "a"},
        {"op": "add_request", "req": "b", "tokens": list(range(8)) + [50, 51, 52, 53]},
        {"op": "get_computed_blocks", "req": "b"},
        {"op": "allocate_slots", "req": "b", "num_new_tokens": 4, "use_hit": True},
    ]}
    steps = replay(trace)
    assert steps[7]["outcome"]["result"] == [[3]] and ["b", [[1, 2, 3]]] == steps[7]["state"]["tables"][0][:2]
    why = {q["step"]: q["why"].split("#")[1] for q in trace_questions(trace, steps) if q["q"] == "ref"}
    assert why == {3: "block_pool.get_new_blocks", 4: "block_pool.free_blocks", 7: "block_pool.touch"}, why
    assert {b: note_kind(trace, steps, 7, "ref", b) for b in ("1", "2", "3")} == {
        "1": "ref_hit", "2": "ref_hit", "3": "ref_new"}
    # a block that get_new_blocks takes from the free queue and cache_blocks caches again under the
    # same hash in the same step is new, not a hit, though its hash is the same before and after
    again = {"semantics": "v1", "config": V1_CONFIG, "ops": [
        {"op": "add_request", "req": "a", "tokens": list(range(12))},
        {"op": "allocate_slots", "req": "a", "num_new_tokens": 12, "use_hit": False},
        {"op": "free", "req": "a"},
        {"op": "add_request", "req": "b", "tokens": list(range(12))},
        {"op": "get_computed_blocks", "req": "b"},
        {"op": "allocate_slots", "req": "b", "num_new_tokens": 4, "use_hit": True},
    ]}
    steps = replay(again)
    taken = steps[6]["outcome"]["result"][0]
    assert len(taken) == 1 and steps[5]["state"]["hashes"][str(taken[0])] == steps[6]["state"]["hashes"][str(taken[0])]
    assert note_kind(again, steps, 6, "ref", str(taken[0])) == "ref_new"


def test_no_reference_count_question_asks_about_the_null_block() -> None:
    """Catches: a 0.10.2-policy trace, whose pool counts references to the null block, asking for
    block 0's count and linking the 0.33.0 note of a pool that never counts it."""
    for path in corpus():
        if path.stem != "measured-sliding-window-null-count-v0.10.2":
            continue
        trace = json.loads(path.read_text())
        steps = replay(trace)
        assert any(s["state"]["refs"].get("0") for s in steps), "the trace no longer counts the null block"
        asked = [q["label"] for q in trace_questions(trace, steps) if q["q"] == "ref"]
        assert asked and not any(label.startswith("block 0'") for label in asked), asked
        return
    pytest.fail("the null-count trace is missing from the corpus")


def _set_questions(stem: str) -> tuple[dict, list[dict]]:
    path = next(p for p in corpus() if p.stem == stem)
    trace = json.loads(path.read_text())
    return trace, trace_questions(trace, replay(trace))


def test_a_sliding_window_lookup_question_names_the_null_block_and_its_note() -> None:
    """Catches: a sliding-window lookup graded against a list with null blocks (0) while its prompt
    asks only for "cached blocks", so a student who answers the one cached block is marked wrong,
    and its link going to the full-attention lookup that this group does not run."""
    _, questions = _set_questions("measured-sliding-window-null-count-v0.33.0")
    lookups = [q for q in questions if q["q"] == "returns" and q["label"] == "the cached blocks found"
               and 0 in q["answer"]]
    assert lookups, "the trace no longer finds a hit with null blocks"
    for q in lookups:
        assert "null block" in q["prompt"], q
        assert q["why"].endswith("#single_type_kv_cache_manager.swa.find_longest_cache_hit"), q


def test_the_copy_on_write_set_asks_for_the_copy_and_links_the_fork_and_the_copy() -> None:
    """Catches: the copy-on-write exercise promising "which block the child's append copies" but
    asking no such question, and its fork and copy-on-write counts linking only the counter's data
    structure, which explains neither."""
    _, questions = _set_questions("fork-copy-on-write")
    copies = [q for q in questions if q["label"] == "the copy-on-write copies"]
    assert [q["answer"] for q in copies] == [[1, 2]], copies
    refs = {q["step"]: q["why"].split("#")[1] for q in questions if q["q"] == "ref"}
    assert "block_table.fork" in refs.values() and "naive_block.cow_block_if_not_appendable.copy" in refs.values(), refs
