"""The shared serving definitions (``annotations/serving.md``) and their ``{{name}}`` includes."""

from __future__ import annotations

import re

import pytest
from annotation_toy import VERSION

from annotations.model import ANNOTATIONS_ROOT, AnnotationFormatError, annotation_paths, parse
from annotations.serving import INCLUDE, SERVING_FILE, ServingError, parse_definitions

DEFINITIONS = f"""# Shared facts

An introduction that defines nothing.

## `{VERSION}/toy-engine`

The toy engine runs every ring
on one thread.

## `1.0.0/other-release`

A fact of another release.
"""


def test_an_include_is_replaced_by_the_definition_of_the_files_release(toy):
    """Catches: a header include left as written, so the page legend shows ``{{toy-engine}}``
    instead of the fact, or a definition read from another release."""
    (toy.root / SERVING_FILE).write_text(DEFINITIONS, encoding="utf-8")
    af = parse(toy.write(serving="Serving toy rings. {{toy-engine}}", reach="default"))
    assert af.serving == "Serving toy rings. The toy engine runs every ring on one thread."
    assert af.serving_names == frozenset({"toy-engine"})


def test_an_unknown_name_is_a_format_error_at_the_serving_line(toy):
    """Catches: a misspelt include that renders as nothing (or as braces) instead of failing."""
    (toy.root / SERVING_FILE).write_text(DEFINITIONS, encoding="utf-8")
    path = toy.write(serving="Serving toy rings. {{other-release}}")
    with pytest.raises(AnnotationFormatError) as err:
        parse(path)
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[err.value.line - 1].startswith("serving:")
    assert "other-release" in err.value.message and "toy-engine" in err.value.message


def test_an_include_outside_an_annotations_root_is_an_error(tmp_path):
    """Catches: an include silently kept when the file lies where no serving.md can be found."""
    from annotation_toy import TOY_SOURCE, ToyRelease

    release = ToyRelease(tmp_path)
    release.files[(VERSION, "toy/ring.py")] = TOY_SOURCE
    path = release.write(serving="{{toy-engine}}", where="loose.md")
    with pytest.raises(AnnotationFormatError, match="does not define"):
        parse(path)


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (f"## `{VERSION}/a`\n\none\n\n## `{VERSION}/a`\n\ntwo\n", 5, "given twice"),
        ("## Not a definition\n\ntext\n", 1, "level-2 heading"),
        (f"## `{VERSION}/empty`\n\n## `{VERSION}/b`\n\nb\n", 1, "empty"),
        (f"## `{VERSION}/a`\n\nsee {{{{b}}}}\n", 1, "includes another"),
    ],
)
def test_a_malformed_definitions_file_is_refused_with_its_line(text, line, message):
    """Catches: a definitions file whose second copy of a name silently wins, whose stray heading
    swallows a definition, or whose definition nests another include that is never expanded."""
    with pytest.raises(ServingError, match=message) as err:
        parse_definitions(text)
    assert err.value.line == line


def test_the_checker_reports_a_definition_no_header_includes(toy):
    """Catches: a definition left behind after the last header stopped including it, so a
    correction made there reaches no page."""
    (toy.root / SERVING_FILE).write_text(DEFINITIONS, encoding="utf-8")
    toy.write(serving="Serving toy rings. {{toy-engine}}")
    messages = [p.message for p in toy.checker().serving_problems()]
    assert messages == ["definition `1.0.0/other-release` is included by no serving: or reach: header; remove it or use it"]


def test_an_include_in_a_header_reach_route_is_expanded_and_counts_as_used(toy):
    """Catches: a shared route explanation left as ``{{name}}`` in the badge, a models route whose
    only citation sits in the definition refused as uncited, or a definition used only by reach
    lines reported as unused."""
    (toy.root / SERVING_FILE).write_text(DEFINITIONS, encoding="utf-8")
    af = parse(toy.write(serving="Serving toy rings.",
                         reach="setting `TOY=1`: {{toy-engine}}\nreach: models with two rings: {{other-release}}"
                         .replace("{{other-release}}", "{{toy-engine}}")))
    assert af.reach is not None and af.reach.routes[0].why == "The toy engine runs every ring on one thread."
    assert af.serving_names == frozenset({"toy-engine"})
    messages = [p.message for p in toy.checker().serving_problems()]
    assert messages == ["definition `1.0.0/other-release` is included by no serving: or reach: header; remove it or use it"]


def test_an_unknown_name_in_a_second_reach_route_is_an_error_at_that_line(toy):
    """Catches: a misspelt include in a later route reported at the first route's line (or not at
    all), so the author edits the wrong line."""
    (toy.root / SERVING_FILE).write_text(DEFINITIONS, encoding="utf-8")
    path = toy.write(serving="Serving toy rings.", reach="default\nreach: setting `TOY=1`: {{no-such-fact}}")
    with pytest.raises(AnnotationFormatError) as err:
        parse(path)
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[err.value.line - 1] == "reach: setting `TOY=1`: {{no-such-fact}}"
    assert err.value.message.startswith("reach header names {{no-such-fact}}")


def test_an_include_in_a_note_reach_line_is_expanded_and_counts_as_used(toy):
    """Catches: a note's shared route reason left as ``{{name}}`` on its badge, a models route
    whose only citation is in the definition refused as uncited, or a definition that only notes
    include reported as unused."""
    from annotation_toy import TOY_NOTES, NoteSpec

    (toy.root / SERVING_FILE).write_text(DEFINITIONS.replace(
        "The toy engine runs every ring\non one thread.",
        "The toy engine runs every ring on one thread ([ring.py L1](https://github.com/o/r/blob/v9.9.9/toy/ring.py#L1 \"x\"))."),
        encoding="utf-8")
    notes = [NoteSpec(*n) for n in TOY_NOTES]
    notes[1].links = ("reach: models with two rings: {{toy-engine}}",)
    af = parse(toy.write(notes, serving="Serving toy rings.", reach="default"))
    init = next(n for n in af.notes if n.id == "ring.init")
    assert init.reach is not None and init.reach.why.startswith("The toy engine runs every ring on one thread")
    assert af.serving_names == frozenset({"toy-engine"})
    notes[1].links = ("reach: models with two rings: {{no-such-fact}}",)
    with pytest.raises(AnnotationFormatError, match="the reach line of note 'ring.init' names"):
        parse(toy.write(notes, serving="Serving toy rings.", reach="default"))


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.;])\s+(?=[A-Z0-9`])", text) if len(s.strip()) > 60]


def test_no_cited_serving_fact_is_copied_into_two_headers():
    """Catches: the same cited sentence written into several headers of a release, so that a
    correction reaches one page and the others keep the old words (it happened to the
    `enable_prefix_caching` sentence, written out in five V0 headers, and to the XFormers routes
    of the three V0 kernel headers)."""
    raw: dict[str, dict[str, str]] = {}
    for path in annotation_paths(ANNOTATIONS_ROOT):
        af = parse(path)
        header = " ".join(line for line in path.read_text(encoding="utf-8").split("---")[1].split("\n")
                          if line.startswith(("serving:", "reach:")))
        raw.setdefault(af.version, {})[af.upstream] = header
    for version, headers in raw.items():
        seen: dict[str, str] = {}
        for upstream, header in headers.items():
            for sentence in _sentences(header):
                if "](https://github.com/vllm-project/vllm/blob/" not in sentence:
                    continue
                assert sentence not in seen, (version, upstream, seen.get(sentence), sentence[:120])
                seen[sentence] = upstream


def test_every_real_header_expands_fully():
    """Catches: an include that survives into the rendered legend of a real page."""
    for path in annotation_paths(ANNOTATIONS_ROOT):
        af = parse(path)
        assert af.serving and not INCLUDE.search(af.serving) and "{{" not in af.serving, path
