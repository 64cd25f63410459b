"""``annotations.drift``: each note of a pinned file followed into a later release, on a toy release.

The toy upstream file (``annotation_toy.TOY_SOURCE``) is edited into a "later release" in each test;
its notes are ``ring.module`` L1-L3, ``ring.init`` L6-L9, ``ring.push`` L11-L14, ``ring.peek`` L16-L17.
"""

from __future__ import annotations

import json

import pytest
from annotation_toy import TOY_NOTES, TOY_SOURCE, UPSTREAM, VERSION, NoteSpec

import annotations.__main__ as cli
from annotations import drift
from annotations.model import AnnotationFormatError, parse, range_hash, upstream_lines

LATER = "9.10.0"
SDISTS = {VERSION: {"file": f"vllm-{VERSION}.tar.gz", "sha256": "a" * 64},
          LATER: {"file": f"vllm-{LATER}.tar.gz", "sha256": "b" * 64}}


def _edit(replace: dict[int, bytes] | None = None, insert_after: dict[int, bytes] | None = None,
          delete: set[int] = frozenset()) -> bytes:
    """TOY_SOURCE with 1-based lines replaced, inserted after, or deleted."""
    out = []
    for number, line in enumerate(upstream_lines(TOY_SOURCE), start=1):
        if number not in delete:
            out.append((replace or {}).get(number, line))
        if number in (insert_after or {}):
            out.append(insert_after[number])
    return b"".join(out)


def _by_id(notes):
    return {n.id: n for n in notes}


def _notes(toy):
    return parse(toy.write()).notes


def test_a_planted_changed_line_flags_its_note_and_only_it(toy):
    """Catches: a changed line inside a note not flagged (a student told stale prose still holds),
    or its neighbours flagged too."""
    later = _edit(replace={13: b"            self.items.pop()\n"})
    got = _by_id(drift.map_notes(_notes(toy), TOY_SOURCE, later))
    push = got["ring.push"]
    assert push.status == "changed"
    assert (push.new_start, push.new_end) == (11, 14)
    assert push.hunks == (drift.Hunk(13, 13, 13, 13),)
    assert push.new_hash == range_hash(upstream_lines(later), 11, 14) != push.old_hash
    assert [got[i].status for i in ("ring.module", "ring.init", "ring.peek")] == ["unchanged"] * 3


def test_a_pure_shift_is_moved_with_the_new_range(toy):
    """Catches: lines that only moved reported as changed, or reported at their old line numbers."""
    later = _edit(insert_after={3: b"import itertools\n"})
    got = _by_id(drift.map_notes(_notes(toy), TOY_SOURCE, later))
    # the insertion sits right after ring.module's last line: it belongs to no note
    assert got["ring.module"].status == "unchanged"
    for note_id, start, end in TOY_NOTES[1:]:
        note = got[note_id]
        assert (note.status, note.new_start, note.new_end) == ("moved", start + 1, end + 1)
        assert note.new_hash == note.old_hash  # the same bytes, so the note's hash holds there
        assert note.hunks == ()


def test_lines_inserted_between_two_lines_of_a_note_change_it(toy):
    """Catches: an insertion inside a note's range missed because none of its old lines changed."""
    later = _edit(insert_after={12: b"            self.dropped += 1\n"})
    push = _by_id(drift.map_notes(_notes(toy), TOY_SOURCE, later))["ring.push"]
    assert (push.status, push.new_start, push.new_end) == ("changed", 11, 15)
    assert push.hunks == (drift.Hunk(13, 12, 13, 13),)  # nothing old, one new line before old L13


def test_deleted_lines_are_gone_and_the_file_missing_is_gone_by_count(toy):
    """Catches: a note whose lines were deleted given a made-up new range, and a file absent from the
    later release listed as if it were there."""
    later = _edit(delete={15, 16, 17})
    peek = _by_id(drift.map_notes(_notes(toy), TOY_SOURCE, later))["ring.peek"]
    assert (peek.status, peek.new_start) == ("gone", None)
    gone = drift.file_drift(parse(toy.write()), TOY_SOURCE, None, toy.root.parent)
    assert (gone.status, gone.notes, gone.counts()["gone"]) == ("gone", (), len(TOY_NOTES))


def test_code_added_between_notes_is_reported_uncovered(toy):
    """Catches: new upstream code that no note explains hidden by a report that lists notes only."""
    later = _edit(insert_after={14: b"\n    def size(self):\n        return len(self.items)\n"})
    report = drift.file_drift(parse(toy.write()), TOY_SOURCE, later, toy.root.parent)
    assert report.uncovered == ((16, 17),)


def _report(toy, later: bytes):
    toy.files[(LATER, UPSTREAM)] = later
    annotations = [parse(toy.write())]
    return annotations, drift.compute(annotations, VERSION, LATER, toy.reader, lambda v: [UPSTREAM],
                                      SDISTS, toy.root.parent)


def test_the_json_round_trips_and_holds_no_upstream_text(toy):
    """Catches: a report that reads back differently from what was written, or that carries
    upstream code (only numbers, hashes and statuses may be committed)."""
    _, report = _report(toy, _edit(replace={13: b"            self.items.pop()\n"}))
    text = report.dumps()
    assert drift.DriftReport.from_json(json.loads(text)) == report
    assert b"popleft" not in text.encode() and b"self.items" not in text.encode()
    assert report.counts() == {"unchanged": 3, "moved": 0, "changed": 1, "gone": 0}


def test_check_fails_when_the_committed_report_disagrees_with_the_bytes(toy):
    """Catches: CI passing with a committed report that says a note is unchanged while the later
    release's bytes changed it."""
    annotations, stale = _report(toy, TOY_SOURCE)  # written when the later release had the same bytes
    drift_root = toy.root / "drift"
    drift_root.mkdir()
    drift.report_path(VERSION, LATER, drift_root).write_text(stale.dumps())
    check = lambda: drift.check_committed(annotations, toy.reader, lambda v: [UPSTREAM], SDISTS.get,  # noqa: E731 - the call under test, named once
                                          toy.root.parent, drift_root)
    assert check() == []
    toy.files[(LATER, UPSTREAM)] = _edit(replace={13: b"            self.items.pop()\n"})
    problems = check()
    assert any("`ring.push`: committed L11-L14 unchanged (now L11-L14), the bytes say L11-L14 changed" in p
               for p in problems), problems


def test_check_requires_a_later_line_on_each_changed_note(toy):
    """Catches: a note whose lines changed in the later release left saying nothing about it."""
    later = _edit(replace={13: b"            self.items.pop()\n"})
    _, report = _report(toy, later)
    drift_root = toy.root / "drift"
    drift_root.mkdir()
    drift.report_path(VERSION, LATER, drift_root).write_text(report.dumps())

    def check(notes):
        annotations = [parse(toy.write(notes))]
        return drift.check_committed(annotations, toy.reader, lambda v: [UPSTREAM], SDISTS.get, toy.root.parent,
                                     drift_root)

    plain = [NoteSpec(*n) for n in TOY_NOTES]
    assert any("`ring.push`" in p and "no '- later: 9.10.0:' line" in p for p in check(plain))
    explained = [NoteSpec(*n) for n in TOY_NOTES]
    explained[2] = NoteSpec(*TOY_NOTES[2], links=("later: 9.10.0: the oldest item is no longer the one dropped",))
    assert check(explained) == []


def test_check_reports_a_missing_or_misnamed_report(toy):
    """Catches: CI passing when no report is committed, or when a file's name lies about its releases."""
    annotations, report = _report(toy, TOY_SOURCE)
    drift_root = toy.root / "drift"
    drift_root.mkdir()
    run = lambda: drift.check_committed(annotations, toy.reader, lambda v: [UPSTREAM], SDISTS.get,  # noqa: E731 - the call under test, named once
                                        toy.root.parent, drift_root)
    assert "no drift report committed" in run()[0]
    (drift_root / f"v{VERSION}-to-9.11.0.json").write_text(report.dumps())
    problems = run()
    assert any("its name must say so" in p for p in problems)
    assert any(f"v{VERSION}-to-9.11.0.json" not in p and "missing" in p for p in problems)


def test_later_lines_parse_with_continuations_and_reject_bad_ones(toy):
    """Catches: a later-release note silently dropped, a continuation line lost, or a malformed or
    doubled later line accepted."""
    notes = [NoteSpec(*n) for n in TOY_NOTES]
    notes[2] = NoteSpec(*TOY_NOTES[2], links=("later: 9.10.0: first part\n  second part",))
    assert parse(toy.write(notes)).note("ring.push").later == {"9.10.0": "first part second part"}
    for bad in (("later: soon: text",), ("later: 9.10.0: a", "later: 9.10.0: b")):
        notes[2] = NoteSpec(*TOY_NOTES[2], links=bad)
        with pytest.raises(AnnotationFormatError, match="later"):
            parse(toy.write(notes))


def test_cli_writes_the_report_and_check_passes_then_fails(toy, monkeypatch, capsys):
    """Catches: the command writing nothing or the wrong file, or --check exiting 0 on a stale report."""
    toy.write()
    toy.files[(LATER, UPSTREAM)] = _edit(insert_after={3: b"import itertools\n"})
    monkeypatch.setattr(cli.fetch, "read_file", lambda version, path, checkout=None: toy.reader(version, path))
    monkeypatch.setattr(cli.fetch, "release_files", lambda version: [UPSTREAM])
    monkeypatch.setattr(cli.drift, "sdist_record", SDISTS.get)
    assert cli.main(["drift", LATER, "--root", str(toy.root)]) == 0
    out = capsys.readouterr().out
    assert "moved" in out and f"v{VERSION}-to-{LATER}.json" in out
    written = json.loads((toy.root / "drift" / f"v{VERSION}-to-{LATER}.json").read_text())
    assert written["counts"] == {"unchanged": 1, "moved": 3, "changed": 0, "gone": 0}
    assert cli.main(["drift", "--check", "--root", str(toy.root)]) == 0
    toy.files[(LATER, UPSTREAM)] = TOY_SOURCE
    assert cli.main(["drift", "--check", "--root", str(toy.root)]) == 1
    assert "drift problems" in capsys.readouterr().out
