"""Reachability statuses: parsed strictly, required where the release demands it, callers cited.

Uses the toy release of ``annotation_toy``; its version is made to require statuses by patching
``REQUIRED_FOR`` where a test needs it.
"""

from __future__ import annotations

import pytest
from annotation_toy import TOY_NOTES, UPSTREAM, VERSION, NoteSpec

from annotations import check as check_module
from annotations.model import AnnotationFormatError, parse_text
from annotations.reach import Reach, ReachError, combine_routes, parse_reach

GH = f"https://github.com/vllm-project/vllm/blob/v{VERSION}/{UPSTREAM}"


def _notes(reach_for: dict[str, str]) -> list[NoteSpec]:
    return [NoteSpec(i, a, b, links=(f"reach: {reach_for[i]}",) if i in reach_for else ()) for i, a, b in TOY_NOTES]


@pytest.mark.parametrize("value, expected", [
    ("default", Reach("default")),
    ("default: every step", Reach("default", why="every step")),
    ("setting `VLLM_USE_V1=0`", Reach("setting", "`VLLM_USE_V1=0`")),
    ('setting `VLLM_USE_V1=0` and `preemption_mode="swap"`: the default recomputes',
     Reach("setting", '`VLLM_USE_V1=0` and `preemption_mode="swap"`', "the default recomputes")),
    ("unreached: nothing calls it (see x)", Reach("unreached", why="nothing calls it (see x)")),
    ("models with Mamba (SSM) layers: the registry binds them (see x)",
     Reach("models", "with Mamba (SSM) layers", "the registry binds them (see x)")),
])
def test_parse_reach_forms(value, expected):
    """Catches: a valid status misread (wrong setting or why), which the badge would then show."""
    assert parse_reach(value) == expected


@pytest.mark.parametrize("value", [
    "reachable", "sometimes: maybe", "unreached", "setting", "default because",
    "models", "models with Mamba layers", "models: the registry binds them",
])
def test_parse_reach_rejects_bad_values(value):
    """Catches: an unknown status, an 'unreached' without why, a 'setting' naming nothing, or a 'models'
    status that names no models or gives no why (so nothing could cite what selects them) being accepted."""
    with pytest.raises(ReachError):
        parse_reach(value)


def test_unknown_reach_value_fails_the_parse_with_its_line(toy):
    """Catches: a typo in a note's status (e.g. 'reachd') silently dropping the badge."""
    text = toy.text(_notes({"ring.push": "reachd"}))
    with pytest.raises(AnnotationFormatError) as err:
        parse_text("x.md", text)
    assert "reach status 'reachd' is unknown" in str(err.value)
    assert text.split("\n")[err.value.line - 1].startswith("- reach:")


def test_unknown_header_reach_fails(toy):
    """Catches: a malformed file-level default status being accepted."""
    with pytest.raises(AnnotationFormatError, match="unknown"):
        parse_text("x.md", toy.text(reach="sometimes"))


def test_header_default_and_note_override(toy):
    """Catches: the file default overriding a note's own status, or not applying to notes without one."""
    af = parse_text("x.md", toy.text(_notes({"ring.push": "setting `big=1`"}), reach="default", serving="toy serving"))
    assert af.reach_of(af.note("ring.push")) == Reach("setting", "`big=1`")
    assert af.reach_of(af.note("ring.peek")) == Reach("default")
    assert af.serving == "toy serving"


def test_reach_continues_on_indented_lines(toy):
    """Catches: a long why wrapped onto a second line being cut off or read as stray prose."""
    text = toy.text(_notes({"ring.push": "unreached: nothing"})).replace(
        "- reach: unreached: nothing", "- reach: unreached: nothing\n  calls it at all"
    )
    af = parse_text("x.md", text)
    assert af.note("ring.push").reach.why == "nothing calls it at all"


def test_required_release_without_status_fails(toy, monkeypatch):
    """Catches: a note of a release that must carry statuses passing the check without one."""
    monkeypatch.setattr(check_module, "REACH_REQUIRED_FOR", (VERSION,))
    toy.write(_notes({"ring.push": "default"}), serving="toy serving")
    messages = "\n".join(str(p) for p in toy.checker().run().problems)
    assert "ring.init" in messages and "no reachability status" in messages
    assert "ring.push" not in messages


def test_required_release_needs_serving_header(toy, monkeypatch):
    """Catches: statuses without a statement of what 'the serving path' means for the file."""
    monkeypatch.setattr(check_module, "REACH_REQUIRED_FOR", (VERSION,))
    toy.write(reach="default")
    assert "needs a 'serving:' header" in "\n".join(str(p) for p in toy.checker().run().problems)


def test_unreached_must_cite_callers(toy):
    """Catches: 'not reached' claimed without the callers that show it (an unverifiable claim)."""
    toy.write(_notes({"ring.push": "unreached: nothing calls it"}))
    assert "must cite the callers" in "\n".join(str(p) for p in toy.checker().run().problems)


def test_unreached_with_a_checked_citation_passes(toy):
    """Catches: a well-formed 'unreached' status (with a correct citation) reported as a problem."""
    from annotations.model import range_hash, upstream_lines

    digest = range_hash(upstream_lines(toy.files[(VERSION, UPSTREAM)]), 16, 17)
    toy.write(_notes({"ring.push": f"unreached: only [peek]({GH}#L16-L17 \"{digest}\") could call it"}))
    report = toy.checker().run()
    assert report.ok, "\n".join(str(p) for p in report.problems)


def test_models_must_cite_what_selects_them(toy):
    """Catches: 'only for some models' claimed without the upstream code that selects the mechanism
    for them (an unverifiable claim, like an uncited 'unreached')."""
    toy.write(_notes({"ring.push": "models with big rings: only they push"}))
    assert "reach 'models' must cite the code that selects it" in "\n".join(str(p) for p in toy.checker().run().problems)


def test_a_later_models_route_must_cite_too(toy):
    """Catches: the citation check reading only a note's first route, so a 'models' route written
    second goes out with nothing that shows what selects those models."""
    text = toy.text(_notes({"ring.push": "setting `big=1`"})).replace(
        "- reach: setting `big=1`", "- reach: setting `big=1`\n- reach: models with big rings: only they push")
    toy.write(text=text)
    assert "reach 'models' must cite the code that selects it" in "\n".join(str(p) for p in toy.checker().run().problems)


def test_models_with_a_checked_citation_passes(toy):
    """Catches: a well-formed 'models' status (with a correct citation) reported as a problem."""
    from annotations.model import range_hash, upstream_lines

    digest = range_hash(upstream_lines(toy.files[(VERSION, UPSTREAM)]), 6, 7)
    toy.write(_notes({"ring.push": f"models with big rings: [init]({GH}#L6-L7 \"{digest}\") sizes them"}))
    report = toy.checker().run()
    assert report.ok, "\n".join(str(p) for p in report.problems)


def test_every_annotated_release_requires_statuses():
    """Catches: a pinned release whose notes may go without a reachability status (0.33.0's did, and
    its pages said "not classified", so a reader could not tell whether a note applies to every model)."""
    from annotations.model import ANNOTATIONS_ROOT, annotation_paths, parse
    from annotations.reach import REQUIRED_FOR

    versions = {parse(path).version for path in annotation_paths(ANNOTATIONS_ROOT)}
    assert versions == {"0.10.2", "0.33.0"}, versions
    assert versions <= set(REQUIRED_FOR), sorted(versions - set(REQUIRED_FOR))


def test_pinned_files_all_carry_statuses():
    """Catches: a note of either pinned release committed without a reachability status, or a file
    without its 'serving' line (its badges would be missing or unexplained)."""
    from annotations.model import ANNOTATIONS_ROOT, annotation_paths, parse

    for path in annotation_paths(ANNOTATIONS_ROOT):
        af = parse(path)
        assert af.serving, path
        missing = [n.id for n in af.notes if af.reach_of(n) is None]
        assert not missing, (path, missing)


def test_real_settings_and_models_are_not_cut_at_an_inner_colon():
    """Catches: a setting or model list written with ': ' inside it (e.g. "(not only `A`: also `B`)"),
    which the grammar cuts at that colon, so the badge shows a truncated setting and the rest as why."""
    from annotations.model import ANNOTATIONS_ROOT, annotation_paths, parse

    cut = []
    for path in annotation_paths(ANNOTATIONS_ROOT):
        af = parse(path)
        for reach in {af.reach_of(n) for n in af.notes} - {None}:
            for route in reach.routes:
                text = route.setting
                if text.count("(") != text.count(")") or text.count("`") % 2:
                    cut.append((path.name, text))
    assert not cut, cut


def test_several_reach_lines_are_routes(toy):
    """Catches: a second '- reach:' line dropped or overwriting the first, so a note reached by
    some models by default and by the others through a setting shows only one of the two."""
    text = toy.text(_notes({"ring.push": "models with big rings: the factory picks them (see x)"})).replace(
        "- reach: models with big rings: the factory picks them (see x)",
        "- reach: models with big rings: the factory picks them (see x)\n- reach: setting `big=1`: or by hand",
    )
    reach = parse_text("x.md", text).note("ring.push").reach
    assert reach.routes == (Reach("models", "with big rings", "the factory picks them (see x)"),
                            Reach("setting", "`big=1`", "or by hand"))
    assert not reach.needs_a_setting
    assert combine_routes(["setting `a=1`", "setting `b=1`"]).needs_a_setting


@pytest.mark.parametrize("values, message", [
    (["default", "setting `a=1`"], "'default' cannot be one of several routes"),
    (["setting `a=1`", "unreached: nothing calls it"], "'unreached' cannot be one of several routes"),
    (["setting `a=1`: x", "setting `a=1`: y"], "given twice"),
])
def test_routes_that_cannot_combine_are_rejected(values, message):
    """Catches: 'default' or 'unreached' offered as one route among others (they say all there is,
    so the badge would contradict itself), or one route written twice."""
    with pytest.raises(ReachError, match=message):
        combine_routes(values)


def test_header_reach_lines_are_routes_and_serving_is_single(toy):
    """Catches: a second header 'reach:' line silently replacing the first (the file default would
    lose a route), or a second 'serving:' line silently replacing the first."""
    text = toy.text(reach="setting `a=1`: one", serving="toy serving")
    text = text.replace("reach: setting `a=1`: one", "reach: setting `a=1`: one\nreach: setting `b=1`: two")
    af = parse_text("x.md", text)
    assert [r.setting for r in af.reach.routes] == ["`a=1`", "`b=1`"]
    with pytest.raises(AnnotationFormatError, match="given twice"):
        parse_text("x.md", text.replace("serving: toy serving", "serving: toy serving\nserving: again"))
    with pytest.raises(AnnotationFormatError, match="cannot be one of several routes") as err:
        parse_text("x.md", text.replace("reach: setting `b=1`: two", "reach: default"))
    assert text.replace("reach: setting `b=1`: two", "reach: default").split("\n")[err.value.line - 1] == "reach: default"


def test_a_bad_reach_line_is_named_by_its_own_line(toy):
    """Catches: a reach error reported at the wrong line when the note's prose quotes a
    '- reach:' line inside a code fence, or when an earlier route wraps onto a second line."""
    text = toy.text(_notes({"ring.push": "setting `a=1`: one"})).replace(
        "- reach: setting `a=1`: one",
        "- reach: setting `a=1`: one\n  wrapped\n- reach: reachd",
    )
    heading = next(t for t in text.split("\n") if t.startswith("## `ring.push`"))
    text = text.replace(heading, heading + "\n\n```\n- reach: default\n```\n")
    with pytest.raises(AnnotationFormatError, match="'reachd' is unknown") as err:
        parse_text("x.md", text)
    assert text.split("\n")[err.value.line - 1] == "- reach: reachd"


def test_a_note_adds_routes_to_the_header_routes(toy):
    """Catches: a note that writes "the header's routes" beside a route of its own losing the
    header's routes (its badges would show only the added one), keeping the literal text as a
    route, or being accepted in a file with no reach header to stand for."""
    text = toy.text(_notes({"ring.push": "the header's routes"}), reach="setting `a=1`: one", serving="toy serving")
    text = text.replace("- reach: the header's routes", "- reach: the header's routes\n- reach: setting `big=1`: more")
    af = parse_text("x.md", text)
    assert [r.setting for r in af.note("ring.push").reach.routes] == ["`a=1`", "`big=1`"]
    with pytest.raises(AnnotationFormatError, match="given twice"):
        parse_text("x.md", text.replace("setting `big=1`: more", "setting `a=1`: one"))
    bare = toy.text(_notes({"ring.push": "the header's routes"}), serving="toy serving")
    with pytest.raises(AnnotationFormatError, match="no reach header"):
        parse_text("x.md", bare)
