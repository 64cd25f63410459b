"""The V1 notes' reachability statuses agree with what vLLM 0.33.0 ran in the committed probe report.

Bug this catches: a ``- reach:`` status of a V1 block-manager note that the running scheduler
contradicts. ``annotations.reach_probe_v1`` drove the real 0.33.0 scheduler, KV-cache manager,
coordinators, single-type managers and block pool on CPU, for kinds of model with their default
settings and in configurations that add settings (an EAGLE drafter and a KV connector among them), and committed the executed lines of the five V1 core files per run
(``annotations/reach-probe-0.33.0.json``). A note whose every route needs a setting (or that is
marked ``unreached``) but whose lines ran with default settings, or with a setting none of its
routes names, shows students a badge that calls that code optional or tied to another setting. The test reads the committed JSON and the notes; it needs no vLLM. After
changing a note's range or status, or the probe, rerun the probe (FORMAT.md, "Reachability").
"""

from __future__ import annotations

from annotations.model import parse_text
from annotations.reach_probe_v1 import (
    EXPLAINED,
    REPORT,
    VERSION,
    compare,
    load_report,
    note_matrix,
    stale_files,
    unexplained,
)
from annotations.reach_probe_v1_workload import CONFIGS, WORKLOAD


def test_probe_report_is_of_the_annotated_bytes_and_of_this_probe():
    """Catches: a report made from other vLLM sources than the notes describe (line numbers would
    not match), or by another version of the probe (other kinds of model, another workload)."""
    report = load_report()
    assert report["vllm_version"] == VERSION
    assert {name: c["model"] for name, c in report["configs"].items()} == {n: c["model"] for n, c in CONFIGS.items()}
    assert report["workload"] == WORKLOAD
    assert not stale_files(report)
    # every request finished, except in a configuration that stops the engine
    assert all(config["run"]["unfinished"] == 0 for config in report["configs"].values() if "stopped" not in config["run"])


def test_no_reach_status_contradicts_the_probe():
    """Catches: a note none of whose routes is `default` or `models`, whose lines ran with default
    settings; or a `default` note none of whose functions ran for any kind of model."""
    found = unexplained(compare(load_report()))
    assert not found, f"reach statuses contradicted by {REPORT.name}:\n" + "\n".join(map(str, found))


def test_every_explained_finding_is_still_found():
    """Catches: an explanation kept after the note or the probe changed, which would hide the next
    finding on that note."""
    found = {(f.file, f.note): (f.kind, f.lines) for f in compare(load_report())}
    assert {key: value[:2] for key, value in EXPLAINED.items()} == {key: found.get(key) for key in EXPLAINED}


_TOY = """---
upstream: vllm/v1/core/toy.py
version: 0.33.0
commit: 4ba787ec9
sha256: ?
coverage: 0
title: toy
reach: default
---

## `toy.live` L1-L3 · ????????????

Runs.

## `toy.events` L4-L6 · ????????????

Only with events.

- reach: setting `enable_kv_cache_events=True`: [x](https://github.com/vllm-project/vllm/blob/v0.33.0/x.py#L1 "0")

## `toy.hybrid` L7-L9 · ????????????

Only for some models.

- reach: models with Mamba layers: [x](https://github.com/vllm-project/vllm/blob/v0.33.0/x.py#L1 "0")

## `toy.doc` L10-L12 · ????????????

A signature and its docstring.
"""


def _toy_report(ran: list[int], guards: list[list[int]] = (), imported: list[int] = ()) -> dict:
    upstream = "vllm/v1/core/toy.py"
    return {
        "sha256": {upstream: "?"},
        "guards": {upstream: list(guards)},
        "def_headers": {upstream: [10]},
        "working": {upstream: list(range(1, 10))},
        "imported": {upstream: list(imported)},
        "configs": {"full_attention": {"executed": {upstream: ran}}},
    }


def test_compare_flags_a_setting_note_that_ran_and_a_default_note_that_did_not():
    """Catches: a comparison that misses a `setting` note whose lines ran with default settings,
    calls a `models` note that ran a contradiction, or misses a `default` note that never ran."""
    toy = [parse_text("toy.md", _TOY)]
    found = {(f.kind, f.note, f.lines) for f in compare(_toy_report([2, 5, 8]), toy)}
    assert found == {("contradiction", "toy.events", (5,))}
    found = {(f.kind, f.note) for f in compare(_toy_report([]), toy)}
    assert found == {("suspect", "toy.live"), ("unseen", "toy.hybrid")}


def test_a_declined_guard_and_import_time_lines_are_not_work():
    """Catches: an `if` line whose body did not run, or a statement run at import, being counted
    as the note's code running; and a note of only a signature being called unrun."""
    toy = [parse_text("toy.md", _TOY)]
    assert not compare(_toy_report([2, 4, 8], [[4, 4, 5, 6]]), toy)
    assert not [f for f in compare(_toy_report([8], imported=[2]), toy) if f.note == "toy.live"]


def test_a_loop_or_a_multi_line_test_that_declined_is_not_its_body_running():
    """Catches: the continuation lines of a multi-line `if` test, or a `for` header over nothing,
    counted as the branch or the loop body running."""
    from annotations.line_trace import declined_headers, guard_spans

    source = "if (a\n        and b):\n    x = 1\nfor i in (\n        []):\n    y = 2\nif c: z = 3\n"
    spans = guard_spans(source)
    assert spans == [[1, 2, 3, 3], [4, 5, 6, 6]]  # the one-line `if` has no body of its own to tell apart
    assert declined_headers(spans, {1, 2, 4, 5}) == {1, 2, 4, 5}
    assert declined_headers(spans, {1, 2, 3, 4, 5}) == {4, 5}


def test_a_setting_note_may_run_only_where_its_setting_is_made():
    """Catches: a `setting` note let through in a configuration that makes another setting, or
    flagged where the probe makes exactly the setting its route names."""
    toy = [parse_text("toy.md", _TOY)]
    report = _toy_report([2, 8])
    report["configs"]["kv_events"] = {"settings": ["`enable_kv_cache_events=True`"],
                                      "executed": {"vllm/v1/core/toy.py": [2, 5]}}
    assert not [f for f in compare(report, toy) if f.kind == "contradiction"]
    report["configs"]["no_caching"] = {"settings": ["`enable_prefix_caching=False`"],
                                       "executed": {"vllm/v1/core/toy.py": [5]}}
    assert [(f.kind, f.note, f.configs) for f in compare(report, toy) if f.kind == "contradiction"] == [
        ("contradiction", "toy.events", ("no_caching",))]
    del report["configs"]["no_caching"]
    report["configs"]["kv_events"]["executed"]["vllm/v1/core/toy.py"] = [2]
    assert [(f.kind, f.note) for f in compare(report, toy) if f.note == "toy.events"] == [("unseen", "toy.events")]


def test_each_configuration_made_the_setting_it_claims():
    """Catches: a configuration that names a setting its run never had (a drafter layer not marked as
    one, so no KV-cache group drops EAGLE blocks; lookahead hashes left on where the drop is claimed;
    a hash unit not finer than the block; prefix caching left on; a Whisper model the scheduler did not take
    for an encoder-decoder one; an audio model whose requests carried no audio, or were never hashed with it; a prefix-cache
    reset never asked for, or never both refused and made; decode context parallelism that did not
    widen the scheduler's block; a run that stopped where none should, or did not stop where the engine does; no connector built; the hybrid manager or the retention interval left at their defaults), which would let notes of that
    setting pass without the probe ever running them."""
    for name, config in load_report()["configs"].items():
        plan, claims = config["plan"], CONFIGS[name]
        eagle = claims.get("eagle")
        assert bool(plan["eagle_groups"]) == (eagle is not None), name
        assert plan["eagle_block_drop"] == (eagle == "drop"), name
        assert (plan["hash_lookahead_tokens"] > 0) == (eagle == "lookahead"), name
        if "prefix_match_unit" in claims:
            assert plan["hash_block_size"] == claims["prefix_match_unit"] < plan["block_size"], name
        assert plan["kv_connector"] == claims.get("kv_connector"), name
        assert plan["hybrid_kv_cache_manager"] == (not claims.get("disable_hybrid_kv_cache_manager", False)), name
        assert plan["prefix_cache_retention_interval"] == claims.get("retention_interval", 0), name
        if not claims.get("prefix_caching", True):
            assert config["run"]["prefix_cache_queries"] == 0, name
        # an encoder-decoder model: the scheduler took it for one (encoder budget, cross-attention sizing)
        # and, as the engine does for such a model, turned chunked prefill off
        whisper = claims.get("checkpoint") == "whisper"
        assert plan["encoder_decoder"] == whisper, name
        assert plan["chunked_prefill"] == (not whisper), name
        # an audio model: the scheduler built the encoder budget of a model that takes multimodal inputs,
        # and requests carried audio items; a multimodal decoder's prompts hit the prefix cache with them
        assert plan["multimodal_inputs"] == ("checkpoint" in claims), name
        assert bool(config["run"].get("audio_items")) == ("checkpoint" in claims), name
        if claims.get("checkpoint") == "qwen2_audio":
            assert config["run"]["prefix_cache_hits"] > 0, name
        # decode context parallelism: the scheduler's block spans the ranks' blocks, and the hash unit
        # stays the layer block, which is what lets a Mamba group take fine-grained hits
        dcp = claims.get("parallel", {}).get("decode_context_parallel_size", 1)
        assert plan["decode_context_parallel_size"] == dcp, name
        if dcp > 1:
            assert plan["block_size"] == dcp * plan["hash_block_size"] == dcp * min(plan["group_block_sizes"]), name
        # a configuration the engine accepts and cannot serve stops where and as the notes say, and no other stops
        assert ("stopped" in config["run"]) == ("stops" in claims), name
        if "stops" in claims:
            assert config["run"]["stopped"].startswith(claims["stops"] + ":"), name
        # a prefix-cache reset on request: refused once while blocks were in use, made once when none was
        resets = (config["run"].get("prefix_cache_resets_refused"), config["run"].get("prefix_cache_resets"))
        assert resets == ((1, 1) if claims.get("reset_prefix_cache") else (None, None)), name


def test_the_multimodal_run_hashed_its_clips():
    """Catches: audio items that never reached the block hasher (a request built without them, an
    identifier the hasher skips), which would leave the multimodal key scan unrun while the
    configuration claims a multimodal model."""
    ran = {row["note"]: row["configs"] for row in note_matrix(load_report())}
    assert "multimodal" in ran["kv_cache_utils.mm_extra_keys.scan"]
    assert [name for name, configs in ran.items() if "multimodal" in configs and name.startswith("kv_cache_utils.mm")] == [
        "kv_cache_utils.mm_extra_keys", "kv_cache_utils.mm_extra_keys.scan"]


#: The KV-cache spec each stand-in layer must declare, as the layer it stands for declares it.
_SPEC_OF_LAYER = {"full": "FullAttentionSpec", "draft_full": "FullAttentionSpec", "sliding_window": "SlidingWindowSpec",
                  "sliding_window_wide": "SlidingWindowSpec", "draft_sliding_window": "SlidingWindowSpec",
                  "chunked_local": "ChunkedLocalAttentionSpec", "mamba": "MambaSpec", "mamba1": "MambaSpec",
                  "rswa": "RSWASpec", "circular_buffer": "CircularBufferSpec", "hidden_state": "HiddenStateCacheSpec",
                  "cross_attention": "CrossAttentionSpec"}


def test_each_configuration_planned_the_layers_it_claims():
    """Catches: a stand-in layer the planner folded into another kind of group (an R-SWA layer planned
    as plain full attention, a circular buffer merged away), which would let the notes of that
    layer's manager pass without the probe ever building it."""
    for name, config in load_report()["configs"].items():
        if not config["plan"]["hybrid_kv_cache_manager"]:
            continue  # without the hybrid manager every layer is planned as full attention
        claimed = {_SPEC_OF_LAYER[kind] for kind in CONFIGS[name]["layers"]}
        if claimed == {"FullAttentionSpec", "HiddenStateCacheSpec"}:
            # a full-attention-type spec (HiddenStateCacheSpec is an MLAAttentionSpec): one uniform group
            claimed = {"FullAttentionSpec"}
        assert set(config["plan"]["groups"]) == claimed, name


def test_a_models_note_run_only_under_a_setting_must_name_it():
    """Catches: a note whose `models` route claims lines that the kind of model reaches only with a
    setting (they ran with an EAGLE drafter, say, and not in the same kind of model with default
    settings), while no setting route of it names that setting."""
    toy = [parse_text("toy.md", _TOY)]
    report = _toy_report([2])
    report["configs"]["attention_and_mamba"] = {"executed": {"vllm/v1/core/toy.py": [2]}}
    report["configs"]["attention_and_mamba_eagle_drop"] = {
        "settings": ["`disable_lookahead_block_hashes=True`"], "kind": "attention_and_mamba",
        "executed": {"vllm/v1/core/toy.py": [2, 8]}}
    assert [(f.kind, f.note, f.lines) for f in compare(report, toy) if f.kind == "setting-only"] == [
        ("setting-only", "toy.hybrid", (8,))]
    report["configs"]["attention_and_mamba"]["executed"]["vllm/v1/core/toy.py"] = [2, 7]
    assert not [f for f in compare(report, toy) if f.kind == "setting-only"]
