"""The reachability badge and legend of the annotated source pages (``docs/hooks/reach_badge.py``)."""

from __future__ import annotations

import markdown

from annotations.model import AnnotationFile, Note
from annotations.reach import Reach
from docs.hooks.reach_badge import badge_html, legend_html, note_badge_html


def _render(text: str) -> str:
    return markdown.Markdown().convert(text)


def _file(reach: Reach | None, notes: list[Note], serving: str = "") -> AnnotationFile:
    return AnnotationFile("x.md", "vllm/x.py", "0.10.2", "abc1234", "?", 100, "X", "", notes, reach, serving)


def test_each_status_renders_its_own_badge():
    """Catches: a status drawn with another status's badge (a 'not reached' note shown as reached)."""
    assert "ann-reach-default" in badge_html(Reach("default"), _render)
    setting = badge_html(Reach("setting", '`preemption_mode="swap"`', "swap only"), _render)
    assert "ann-reach-setting" in setting and 'reached only with <code>preemption_mode="swap"</code>' in setting
    assert "swap only" in setting
    unreached = badge_html(Reach("unreached", why="[fork_seq](https://example.org/x#L1) is never called"), _render)
    assert "ann-reach-unreached" in unreached and "not reached from serving" in unreached
    assert '<a href="https://example.org/x#L1">fork_seq</a>' in unreached
    models = badge_html(Reach("models", "with Mamba (SSM) layers", "[registry](https://example.org/r#L2)"), _render)
    assert "ann-reach-models" in models and "reached only for models with Mamba (SSM) layers" in models
    assert '<a href="https://example.org/r#L2">registry</a>' in models


def test_note_without_status_gets_the_file_default_or_nothing():
    """Catches: the file default ignored (badge missing) or a badge invented for an unclassified note."""
    note = Note("a", 1, 2, "0" * 12, "body")
    assert "ann-reach-setting" in note_badge_html(_file(Reach("setting", "`VLLM_USE_V1=0`"), [note]), note, _render)
    assert note_badge_html(_file(None, [note]), note, _render) == ""


def test_legend_names_every_status_and_the_serving_path():
    """Catches: a page with badges but no legend, a legend that omits a status or the serving path,
    or one that still calls notes "not classified" (every note of a pinned release has a status)."""
    note = Note("a", 1, 2, "0" * 12, "body", reach=Reach("unreached", why="x"))
    legend = legend_html(_file(None, [note], serving="the V0 engine (`VLLM_USE_V1=0`)"), _render)
    for label in ("reached by default", "reached only for some models", "reached only with a setting",
                  "not reached from serving"):
        assert label in legend
    assert "<code>VLLM_USE_V1=0</code>" in legend and "not classified" not in legend
    assert legend_html(_file(None, [Note("b", 1, 2, "0" * 12, "body")]), _render) == ""


def test_each_route_of_a_status_gets_its_badge():
    """Catches: a note reached by several routes showing only its first (the models route hiding
    the setting that reaches the lines for every other model), or routes drawn without their "or"."""
    reach = Reach("models", "with Mamba layers", "[spec](https://example.org/s#L3)",
                  also=(Reach("setting", "`prefix_match_unit`", "finer hashes"),))
    html = badge_html(reach, _render)
    assert html.startswith('<div class="ann-reach-routes">')
    assert "reached only for models with Mamba layers" in html and "ann-reach-models" in html
    assert "or with <code>prefix_match_unit</code>" in html and "ann-reach-setting" in html
    assert "finer hashes" in html and '<a href="https://example.org/s#L3">spec</a>' in html
    legend = legend_html(_file(None, [Note("a", 1, 2, "0" * 12, "body", reach=reach)]), _render)
    assert "one badge per route" in legend
    single = legend_html(_file(None, [Note("b", 1, 2, "0" * 12, "body", reach=Reach("default"))]), _render)
    assert "one badge per route" not in single


def test_a_note_shows_the_file_status_without_its_reasons_and_the_legend_gives_them_once():
    """Catches: the file's reasons repeated above every note that inherits them (the Triton page
    repeated a 5,000-character header reason 62 times), a legend that lacks them, or a note's own
    status losing its reasons."""
    file_reach = Reach("setting", "`TRITON_ATTN`", "the [backend](https://example.org/b#L7) calls it",
                       also=(Reach("models", "on a GPU below 8.0", "[priority](https://example.org/p#L1)"),))
    own = Note("own", 3, 4, "0" * 12, "body", reach=Reach("unreached", why="no [caller](https://example.org/c#L2)"))
    plain = Note("plain", 1, 2, "0" * 12, "body")
    ann = _file(file_reach, [plain, own])
    inherited = note_badge_html(ann, plain, _render)
    assert "ann-reach-setting" in inherited and "ann-reach-models" in inherited
    assert "ann-reach-why" not in inherited and "example.org/b" not in inherited
    assert 'href="#reach-legend"' in inherited
    assert "no <a href=\"https://example.org/c#L2\">caller</a>" in note_badge_html(ann, own, _render)
    legend = legend_html(ann, _render)
    assert 'id="reach-legend"' in legend
    assert legend.count('<a href="https://example.org/b#L7">backend</a>') == 1
    assert '<a href="https://example.org/p#L1">priority</a>' in legend


def test_a_notes_route_shared_with_its_file_links_to_the_legend_and_keeps_its_other_reasons():
    """Catches: a file route that a note repeats among routes of its own (the Triton pointer-path
    notes share five of the header's eight routes) printing the header's long reasons again above
    that note, or the note's own, narrower routes losing their reasons."""
    shared = Reach("models", "on a GPU below 8.0", "[priority](https://example.org/p#L1)")
    file_reach = Reach("setting", "`TRITON_ATTN`", "the [backend](https://example.org/b#L7) calls it", also=(shared,))
    narrowed = Reach("setting", "`TRITON_ATTN` on XPU with `TD=0`", "the [switch](https://example.org/s#L3)")
    note = Note("n", 1, 2, "0" * 12, "body", reach=Reach(narrowed.status, narrowed.setting, narrowed.why, also=(shared,)))
    html = note_badge_html(_file(file_reach, [note]), note, _render)
    assert "example.org/p" not in html and html.count('href="#reach-legend"') == 1
    assert '<a href="https://example.org/s#L3">switch</a>' in html
    alone = Note("m", 3, 4, "0" * 12, "body", reach=shared)
    assert "example.org/p" not in note_badge_html(_file(file_reach, [alone]), alone, _render)
    other_file = _file(Reach("default"), [note])
    assert '<a href="https://example.org/p#L1">priority</a>' in note_badge_html(other_file, note, _render)


def test_legend_says_how_a_probed_file_was_checked_and_only_there():
    """Catches: a page claiming its badges were checked by running when no probe traces its file,
    or a probed page (V0 block manager, V1 core) that does not say so."""
    note = Note("a", 1, 2, "0" * 12, "body", reach=Reach("default"))
    v0 = AnnotationFile("x.md", "vllm/core/block/naive_block.py", "0.10.2", "abc1234", "?", 100, "X", "", [note], None, "")
    v1 = AnnotationFile("x.md", "vllm/v1/core/block_pool.py", "0.33.0", "abc1234", "?", 100, "X", "", [note], None, "")
    kernel = AnnotationFile("x.md", "csrc/attention/attention_kernels.cuh", "0.10.2", "abc1234", "?", 100, "X", "",
                            [note], None, "")
    assert "tests/test_reach_probe.py" in legend_html(v0, _render)
    assert "tests/test_reach_probe_v1.py" in legend_html(v1, _render)
    assert "Checked by running" not in legend_html(kernel, _render)


def test_a_probed_note_lists_where_the_probe_ran_it_and_only_there():
    """Catches: a probed note's line naming configurations in which its lines did not run (or
    leaving out one that ran them), a note the probe never ran shown as run, or the line appearing
    on a page no probe traces."""
    from annotations.model import discover
    from annotations.reach_probe_v1 import load_report

    v1 = next(a for a in discover() if a.upstream == "vllm/v1/core/block_pool.py" and a.version == "0.33.0")
    events = next(n for n in v1.notes if n.id == "block_pool.cache_partial_block.events")
    html = note_badge_html(v1, events, _render)
    assert "ran in 1 of its" in html and "<code" in html and ">kv_events</code>" in html
    total = len(load_report()["configs"])
    writable = next(n for n in v1.notes if n.id == "block_pool.is_block_writable")
    html = note_badge_html(v1, writable, _render)  # speculative decoding on a Mamba hybrid only
    assert ">attention_and_mamba_eagle_drop</code>" in html and ">full_attention</code>" not in html
    kernel = AnnotationFile("x.md", "csrc/attention/attention_kernels.cuh", "0.10.2", "abc1234", "?", 100, "X", "",
                            [events], None, "")
    assert "ann-reach-probe" not in note_badge_html(kernel, events, _render)
    unrun = next(n for n in v1.notes if n.id == "block_pool.evict_blocks")
    assert f"ran in none of its {total} configurations" in note_badge_html(v1, unrun, _render)
    imports = next(n for n in v1.notes if n.id == "block_pool.imports")
    assert "only while the module was imported" in note_badge_html(v1, imports, _render)
    docstring = Note("doc", 1, 1, "0" * 12, "body", reach=Reach("default"))  # line 1: the module docstring
    assert "ann-reach-probe" not in note_badge_html(v1, docstring, _render)
