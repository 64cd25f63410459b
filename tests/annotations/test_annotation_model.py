"""The parser reads the annotation format strictly and names the file and line of every defect."""

from __future__ import annotations

import pytest
from annotation_toy import TOY_NOTES, NoteSpec

from annotations.model import AnnotationFormatError, fenced_lines, parse, parse_text, upstream_lines


def _error(toy, text: str) -> AnnotationFormatError:
    path = toy.write(text=text)
    with pytest.raises(AnnotationFormatError) as info:
        parse(path)
    assert info.value.path == path
    return info.value


def test_parse_reads_header_intro_notes_and_links(toy):
    """Catches: fields lost or mixed up in parsing (links left in the prose, wrong heading lines)."""
    notes = [NoteSpec(*n) for n in TOY_NOTES]
    notes[1] = NoteSpec("ring.init", 6, 9, links=("ref: reference.x.Y", "prop: v1.lifecycle", "see: v1.0.0/a.py#a.b"))
    path = toy.write(notes, intro="### Overview\n\nIntro text.")
    af = parse(path)
    assert (af.upstream, af.version, af.commit, af.coverage, af.title) == ("toy/ring.py", "9.9.9", "abcdef123", 100.0, "A toy ring")
    assert af.intro == "### Overview\n\nIntro text."
    assert [(n.id, n.start, n.end) for n in af.notes] == TOY_NOTES
    init = af.note("ring.init")
    assert (init.refs, init.props, init.sees) == (["reference.x.Y"], ["v1.lifecycle"], ["v1.0.0/a.py#a.b"])
    assert init.body == "Why these lines exist."
    lines = path.read_text().split("\n")
    assert all(lines[n.heading_line - 1].startswith(f"## `{n.id}`") for n in af.notes)


def test_single_line_range_and_placeholder_hash_parse(toy):
    """Catches: `L<n>` ranges or `????????????` placeholders being rejected."""
    af = parse(toy.write([NoteSpec("ring.module", 1, 1, hash="?" * 12)]))
    assert (af.notes[0].start, af.notes[0].end, af.notes[0].hash, af.notes[0].range_text) == (1, 1, "?" * 12, "L1")


@pytest.mark.parametrize(
    "bad_heading, why",
    [
        ("## `ring.push` L11-L14", "a level-2 heading must be a note"),  # no hash
        ("## ring.push L11-L14 · 0123456789ab", "a level-2 heading must be a note"),  # no backticks
        ("## `ring.push` 11-14 · 0123456789ab", "a level-2 heading must be a note"),  # no L
        ("## `ring.push` L11-L14 · 0123456789", "a level-2 heading must be a note"),  # short hash
        ("## `ring.push` L11-L14 · 0123456789AB", "a level-2 heading must be a note"),  # upper-case hex
        ("## Overview", "a level-2 heading must be a note"),
        ("## `ring.push` L14-L11 · 0123456789ab", "is empty or starts before line 1"),
        ("## `ring.push` L0-L3 · 0123456789ab", "is empty or starts before line 1"),
        ("## `ring.init` L11-L14 · 0123456789ab", "note id 'ring.init' already used"),
    ],
)
def test_malformed_headings_raise_with_line(toy, bad_heading, why):
    """Catches: malformed note headings being accepted or reported without their line number."""
    text = toy.text()
    good = next(t for t in text.split("\n") if t.startswith("## `ring.push`"))
    text = text.replace(good, bad_heading)
    error = _error(toy, text)
    assert why in error.message
    assert error.line == text.split("\n").index(bad_heading) + 1


def test_fenced_lines_marks_both_fence_lines_and_the_code_between():
    """Catches: the one fence walker every parser and check uses treating a closing fence line, a
    tilde fence or a fence indented by up to three spaces as prose (its text then read for links,
    headings or citations), or a line indented four spaces as a fence."""
    lines = ["prose", "```python", "## `x` L1 · 000000000000", "```", "after", "   ~~~", "- ref: y", "~~~",
             "    ```", "end"]
    assert [fenced for _, fenced in fenced_lines(lines)] == [False, True, True, True, False, True, True, True,
                                                             False, False]


def test_heading_inside_a_code_fence_is_prose(toy):
    """Catches: an example heading inside a fenced block being parsed as a note."""
    text = toy.text(intro="```\n## `not.a.note` L1 · 000000000000\n```")
    assert [n.id for n in parse(toy.write(text=text)).notes] == [n[0] for n in TOY_NOTES]


@pytest.mark.parametrize(
    "change, why",
    [
        (lambda t: t.replace("---\n", "", 1), "must start with a '---' header"),
        (lambda t: t.replace("title: A toy ring\n---\n", "title: A toy ring\n"), "header"),
        (lambda t: t.replace("commit: abcdef123\n", ""), "header lacks commit"),
        (lambda t: t.replace("commit: abcdef123\n", "commit: nothex\n"), "is not a hex commit id"),
        (lambda t: t.replace("version: 9.9.9\n", "version: 9.9\n"), "is not like 0.10.2"),
        (lambda t: t.replace("coverage: 100\n", "coverage: 101\n"), "outside 0..100"),
        (lambda t: t.replace("coverage: 100\n", "coverage: all\n"), "is not a number"),
        (lambda t: t.replace("title: A toy ring\n", "title: A toy ring\nauthor: me\n"), "unknown header key 'author'"),
        (lambda t: t.replace("upstream: toy/ring.py\n", "upstream: ../ring.py\n"), "is not a relative path"),
    ],
)
def test_malformed_headers_raise(toy, change, why):
    """Catches: a header with missing, unknown or ill-typed keys being accepted."""
    assert why in _error(toy, change(toy.text())).message


def test_header_comments_and_unstamped_sha_are_allowed(toy):
    """Catches: FORMAT.md's own example header (trailing '# comment', 'sha256: ?') being rejected."""
    text = toy.text(sha256="?", commit="abcdef123            # setuptools-scm commit id")
    af = parse(toy.write(text=text))
    assert (af.sha256, af.commit) == ("?", "abcdef123")


def test_prose_after_links_and_unknown_link_kinds_raise(toy):
    """Catches: link lines buried in prose, or misspelt link kinds silently becoming prose."""
    notes = [NoteSpec(*n) for n in TOY_NOTES]
    notes[0] = NoteSpec("ring.module", 1, 3, links=("ref: reference.a",))
    text = toy.text(notes).replace("- ref: reference.a\n", "- ref: reference.a\nMore prose.\n")
    assert "links must end the note" in _error(toy, text).message
    text = toy.text(notes).replace("- ref: reference.a", "- refs: reference.a")
    assert "unknown link kind 'refs'" in _error(toy, text).message
    text = toy.text(notes).replace("- ref: reference.a", "- see: not-a-target")
    assert "is not 'v<version>/<path>#<note id>'" in _error(toy, text).message


def test_ordinary_list_items_stay_prose(toy):
    """Catches: an ordinary '- word: text' bullet in prose being taken for a link or rejected."""
    notes = [NoteSpec("ring.module", 1, 3, body="Two cases:\n\n- watermark: keeps headroom\n- cap: bounds the window")]
    af = parse(toy.write(notes))
    assert "- watermark: keeps headroom" in af.notes[0].body and af.notes[0].refs == []


def test_upstream_lines_keep_exact_bytes():
    """Catches: line splitting that drops a final unterminated line or splits on carriage returns."""
    assert upstream_lines(b"a\r\nb\n\nc") == [b"a\r\n", b"b\n", b"\n", b"c"]
    assert upstream_lines(b"a\n") == [b"a\n"]
    assert upstream_lines(b"") == []


def test_parse_text_names_the_given_path():
    """Catches: errors from in-memory parsing naming the wrong file."""
    with pytest.raises(AnnotationFormatError, match=r"^some/file.md:1: "):
        parse_text("some/file.md", "no header")
