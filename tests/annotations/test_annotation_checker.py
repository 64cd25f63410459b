"""The checker accepts a good annotation file and names the file, note and lines of each defect."""

from __future__ import annotations

from annotation_toy import COMMIT, TOY_NOTES, TOY_SOURCE, UPSTREAM, VERSION, NoteSpec

from annotations.check import find_moved, resolve_ref
from annotations.model import upstream_lines


def _messages(report) -> list[str]:
    return [str(p) for p in report.problems]


def _toy_notes(**replace: NoteSpec) -> list[NoteSpec]:
    return [replace.get(n[0], NoteSpec(*n)) for n in TOY_NOTES]


def test_good_file_passes_with_full_coverage(toy):
    """Catches: a checker that reports problems on a correct file, or miscounts coverage (blank lines)."""
    path = toy.write()
    report = toy.checker().run()
    assert report.ok, _messages(report)
    [row] = report.coverage
    nonblank = sum(1 for line in TOY_SOURCE.split(b"\n") if line.strip())
    assert (row.covered, row.nonblank, row.path) == (nonblank, nonblank, path)


def test_tampered_source_reports_file_sha_and_stale_notes_with_new_range(toy):
    """Catches: a checker that trusts swapped upstream bytes, or fails to say which notes went stale and where their lines moved."""
    toy.write()
    toy.files[(VERSION, UPSTREAM)] = b"# an inserted line\n" + TOY_SOURCE
    messages = _messages(toy.checker().run())
    assert any("has sha256" in m and "header says" in m for m in messages), messages
    for note_id, start, end in TOY_NOTES:
        [drift] = [m for m in messages if f"note `{note_id}`" in m and "hash drift" in m]
        assert f"L{start + 1}-L{end + 1} (moved +1)" in drift
    assert any("4 of 4 notes went stale" in m for m in messages), messages


def test_hash_drift_of_one_note_is_reported(toy):
    """Catches: a checker that does not compare each note's hash with its lines."""
    toy.write(_toy_notes(**{"ring.push": NoteSpec("ring.push", 11, 14, hash="0123456789ab")}))
    messages = _messages(toy.checker().run())
    assert len(messages) == 1, messages
    assert "note `ring.push` L11-L14: hash drift: the note says 0123456789ab" in messages[0]
    assert "nowhere in the current file" in messages[0]


def test_note_range_outside_the_file_is_reported(toy):
    """Catches: a note that runs past the last upstream line being accepted (or crashing the checker)."""
    toy.write(_toy_notes(**{"ring.peek": NoteSpec("ring.peek", 16, 40, hash="0" * 12)}))
    messages = _messages(toy.checker().run())
    assert any("note `ring.peek` L16-L40: range ends after the file's last line L17" in m for m in messages), messages


def test_gap_under_coverage_target_lists_uncovered_ranges(toy):
    """Catches: a coverage shortfall going unnoticed, or uncovered ranges not listed (blank lines must be bridged)."""
    toy.write([NoteSpec(*TOY_NOTES[0]), NoteSpec(*TOY_NOTES[3])])
    messages = _messages(toy.checker().run())
    [coverage] = [m for m in messages if "coverage" in m]
    assert "under the target 100%" in coverage and "uncovered: L6-L14" in coverage, coverage


def test_gap_within_a_lower_target_passes(toy):
    """Catches: a checker that ignores the header's coverage target and always demands 100%."""
    toy.write([NoteSpec(*n) for n in TOY_NOTES[:3]], coverage="80")
    report = toy.checker().run()
    assert report.ok, _messages(report)
    assert report.coverage[0].covered == report.coverage[0].nonblank - 2


def test_overlapping_notes_are_reported(toy):
    """Catches: two notes claiming the same upstream line."""
    toy.write(_toy_notes(**{"ring.push": NoteSpec("ring.push", 9, 14)}))
    messages = _messages(toy.checker().run())
    assert any("note `ring.push` L9-L14: overlaps note `ring.init` L6-L9" in m for m in messages), messages


def test_notes_out_of_order_are_reported(toy):
    """Catches: notes written in descending order slipping through (they must ascend)."""
    notes = [NoteSpec(*n) for n in TOY_NOTES]
    notes[1], notes[2] = notes[2], notes[1]
    toy.write(notes)
    messages = _messages(toy.checker().run())
    assert any("note `ring.init` L6-L9: comes before note `ring.push`" in m for m in messages), messages


def test_dead_ref_is_reported_and_live_ref_passes(toy, fake_reference):
    """Catches: a ref to a symbol that does not import or resolve being accepted, or a live one rejected."""
    live = f"ref: {fake_reference}.Ring.push"
    dead = f"ref: {fake_reference}.Ring.pop"
    toy.write(_toy_notes(**{"ring.push": NoteSpec("ring.push", 11, 14, links=(live, dead))}))
    messages = _messages(toy.checker().run())
    assert len(messages) == 1, messages
    assert f"note `ring.push` L11-L14: dead ref {fake_reference}.Ring.pop" in messages[0]
    assert "has no attribute 'pop'" in messages[0]


def test_resolve_ref_explains_each_kind_of_dead_ref(fake_reference):
    """Catches: refs outside reference/, missing modules or attributes being resolved as live."""
    assert resolve_ref(f"{fake_reference}.Ring") is None
    assert "not a dotted path into reference/" in resolve_ref("annotations.model.parse")
    assert "reference has no attribute 'no_such_module_xyz' (and no submodule" in resolve_ref("reference.no_such_module_xyz.Thing")
    assert "has no attribute 'Queue'" in resolve_ref(f"{fake_reference}.Queue")


def test_dead_prop_is_reported(toy):
    """Catches: a prop link naming a property the conformance registry does not have."""
    links = ("prop: toy.prop", "prop: toy.missing")
    toy.write(_toy_notes(**{"ring.init": NoteSpec("ring.init", 6, 9, links=links)}))
    messages = _messages(toy.checker().run())
    assert len(messages) == 1, messages
    assert "note `ring.init` L6-L9: dead prop toy.missing: not a registered conformance property" in messages[0]


def test_broken_property_registry_is_reported_not_raised(toy):
    """Catches: an exception in the property registry crashing the checker instead of naming the cause."""
    def broken() -> set[str]:
        raise ImportError("conformance is half written")

    toy.write(_toy_notes(**{"ring.init": NoteSpec("ring.init", 6, 9, links=("prop: toy.prop",))}))
    messages = _messages(toy.checker(property_names=broken).run())
    assert any("dead prop toy.prop: the property registry failed: ImportError" in m for m in messages), messages


def test_prop_link_without_a_registry_is_reported_not_passed(toy):
    """Catches: a checker given no property registry passing every ``prop:`` link unchecked (the
    checker imports no registry itself; the command passes conformance's)."""
    toy.write(_toy_notes(**{"ring.init": NoteSpec("ring.init", 6, 9, links=("prop: toy.prop",))}))
    messages = _messages(toy.checker(property_names=None).run())
    assert any("dead prop toy.prop: no property registry was given to the checker" in m for m in messages), messages


def test_dead_see_is_reported_for_missing_file_and_missing_note(toy):
    """Catches: see links to an annotation file or a note id that does not exist."""
    other = toy.write(where=f"v{VERSION}/toy/other.py.md", text=toy.text(upstream=UPSTREAM))
    assert other.exists()
    links = (
        f"see: v{VERSION}/{UPSTREAM}#ring.init",
        f"see: v{VERSION}/toy/absent.py#ring.init",
        f"see: v{VERSION}/{UPSTREAM}#ring.absent",
    )
    toy.write(_toy_notes(**{"ring.peek": NoteSpec("ring.peek", 16, 17, links=links)}))
    messages = _messages(toy.checker().run([toy.root / f"v{VERSION}/{UPSTREAM}.md"]))
    assert len(messages) == 2, messages
    assert "dead see v9.9.9/toy/absent.py#ring.init: no annotation file v9.9.9/toy/absent.py.md" in messages[0]
    assert "dead see v9.9.9/toy/ring.py#ring.absent: v9.9.9/toy/ring.py has no note `ring.absent`" in messages[1]


def test_dead_citation_in_free_markdown_is_reported(toy):
    """Catches: reading-questions style Markdown citing a note that does not exist."""
    toy.write()
    questions = toy.root / "questions.md"
    questions.write_text(
        "# Q\n\nSee [push](v9.9.9/toy/ring.py#ring.push) and [gone](v9.9.9/toy/ring.py#ring.gone).\n"
        "```\n[in a fence](v9.9.9/toy/ring.py#ignored)\n```\n"
    )
    messages = _messages(toy.checker().run())
    assert messages == [f"{questions}: line 3: dead citation: v9.9.9/toy/ring.py has no note `ring.gone`"]


def test_malformed_heading_is_a_problem_naming_the_line(toy):
    """Catches: a malformed note heading being skipped silently instead of failing the check."""
    text = toy.text().replace("## `ring.push` L11-L14", "## `Ring.Push` L11-L14")
    toy.write(text=text)
    messages = _messages(toy.checker().run())
    line = text.split("\n").index(next(t for t in text.split("\n") if "Ring.Push" in t)) + 1
    assert len(messages) == 1 and f"line {line}: a level-2 heading must be a note" in messages[0], messages


def test_header_sha256_and_commit_mismatches_are_reported(toy):
    """Catches: a header naming another file's sha256 or another release's commit being accepted."""
    toy.write(sha256="f" * 64, commit="1234567")
    messages = _messages(toy.checker().run())
    assert any("header says " + "f" * 64 in m for m in messages), messages
    assert any(f"header commit 1234567 but release {VERSION} is commit {COMMIT}" in m for m in messages), messages


def test_file_in_the_wrong_place_is_reported(toy):
    """Catches: an annotation file whose location disagrees with its header (the site would misplace it)."""
    toy.write(where=f"v{VERSION}/toy/elsewhere.py.md")
    messages = _messages(toy.checker().run())
    assert any("lives at v9.9.9/toy/elsewhere.py.md but its header says v9.9.9/toy/ring.py.md" in m for m in messages)


def test_unfetchable_upstream_is_a_problem_not_a_crash(toy):
    """Catches: a fetch failure aborting the whole check instead of being reported for that file."""
    toy.write(upstream="toy/missing.py", where=f"v{VERSION}/toy/missing.py.md")
    messages = _messages(toy.checker().run())
    assert any("cannot fetch toy/missing.py @ 9.9.9" in m for m in messages), messages


def test_find_moved_locates_shifted_lines():
    """Catches: the drift hint pointing at the wrong lines (off by one in the window search)."""
    old = upstream_lines(TOY_SOURCE)
    new = upstream_lines(b"x\ny\n" + TOY_SOURCE)
    from annotations.model import range_hash

    assert find_moved(new, 4, range_hash(old, 11, 14)) == [13]
    assert find_moved(new, 4, "0" * 12) == []


def test_plain_line_number_outside_the_note_is_reported(toy):
    """Catches: a line number outside the note's range written as plain text, which no hash
    checks, so a wrong number (or one left behind when the code moved) would pass unseen; and a
    fenced block's lines (code, not prose) reported as such."""
    body = (
        "The ring is built at L7 and read at L16-L17, a line the note does not cover; its own lines\n"
        "L11-L14 need no link, nor do `L3` in code or [L16](https://example.invalid/ring.py#L16).\n\n"
        "```\nL99 = 1\n```"
    )
    links = ("later: 9.9.10: the push moved to L40-L44",)
    toy.write(_toy_notes(**{"ring.push": NoteSpec("ring.push", 11, 14, links=links, body=body)}))
    messages = _messages(toy.checker().run([toy.root / f"v{VERSION}/{UPSTREAM}.md"]))
    bare = [m for m in messages if "plain text" in m]
    assert len(bare) == 2, messages
    assert "note `ring.push` L11-L14" in bare[0] and ": L7 lies outside" in bare[0]
    assert ": L16-L17 lies outside" in bare[1]


def test_plain_line_number_in_a_serving_definition_is_reported(toy):
    """Catches: a shared serving definition naming upstream lines in plain text; it has no lines of
    its own, so every line number there must be a checked link."""
    toy.write()
    (toy.root / "serving.md").write_text("# Serving\n\n## `9.9.9/ring-route`\n\nthe push at L11 runs for every ring\n")
    messages = _messages(toy.checker().run())
    assert any("serving.md: line 5: L11 is plain text" in m for m in messages), messages


def test_plain_line_number_on_a_study_page_is_reported(toy, tmp_path):
    """Catches: a study page (or a free Markdown file such as the reading questions) naming
    upstream lines in plain text, or a page citing them in the ledger's legacy form, which no hash
    checks there, so the number can go stale unseen."""
    toy.write()
    repo = tmp_path
    page = repo / "docs" / "theory" / "ring.md"
    page.parent.mkdir(parents=True)
    page.write_text(
        "# Ring\n\nThe push at L11 wraps; `L12` in code and\n```\nL13 in a fence\n```\nare not citations,"
        " but `v9.9.9 vllm/ring.py:11-14` is one no hash checks.\n"
    )
    questions = toy.root / "reading-questions.md"
    questions.write_text("# Questions\n\nWhy does L14-L15 wrap?\n")
    messages = _messages(toy.checker(repo=repo).run())
    plain = [m for m in messages if "plain text" in m]
    assert any("ring.md: line 3: L11 is plain text" in m for m in plain), messages
    assert any("reading-questions.md: line 3: L14-L15 is plain text" in m for m in plain), messages
    assert len(plain) == 2, plain
    assert any("ring.md: line 7: vllm/ring.py:11-14 cites upstream lines outside a link" in m for m in messages), messages
