"""Citations of notes and lines (``annotations.cite``) and ``cite`` / ``verify-citation`` on the command line.

Everything runs on the toy release (``annotation_toy``): a citation is made from a note, then
checked against the same bytes (fine), against bytes where two lines were inserted above the
cited ones (moved), and against bytes where a cited line was rewritten (drifted).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from annotation_toy import TOY_NOTES, TOY_SOURCE, UPSTREAM, VERSION, NoteSpec

import annotations.__main__ as cli
from annotations import citations, cite
from annotations.model import parse, range_hash, upstream_lines

SITE = "https://study.example/"


def _push_citation(toy) -> cite.Cited:
    af = parse(toy.write())
    return cite.note_citation(af, af.note("ring.push"))


def _release_with(toy, data: bytes, version: str = "9.9.10"):
    """The toy reader plus a later release whose ring.py is ``data``."""
    toy.files[(version, UPSTREAM)] = data
    return toy.reader


INSERTED = TOY_SOURCE.replace(b"    def push(self, item):\n", b"    # a comment\n\n    def push(self, item):\n")
REWRITTEN = TOY_SOURCE.replace(b"self.items.popleft()", b"self.items.pop()")


def test_note_citation_names_release_file_range_note_hash_and_links(toy):
    """Catches: a citation missing one of release, file, range, note id, hash, upstream or site link."""
    c = _push_citation(toy)
    digest = range_hash(upstream_lines(TOY_SOURCE), 11, 14)
    md, plain = c.markdown(SITE), c.plain(SITE)
    page = f"{SITE}sources/v{VERSION}/{UPSTREAM}/#ring.push"
    assert md == (f"vLLM v{VERSION}, [`{UPSTREAM}` L11-L14](https://github.com/vllm-project/vllm/blob/v{VERSION}/"
                  f"{UPSTREAM}#L11-L14 \"{digest}\"), note [`ring.push`]({page}) · content hash `{digest}`")
    assert plain == f"v{VERSION}/{UPSTREAM}#L11-L14@{digest} (vLLM v{VERSION}, note ring.push) {page}"


def test_both_forms_are_what_the_checker_verifies(toy):
    """Catches: a citation format the project's checker does not recognise (it could drift unchecked)."""
    c = _push_citation(toy)
    found = citations.find_markdown(Path("page.md"), c.markdown(SITE) + "\n" + c.plain(SITE))
    assert [(f.form, f.version, f.path, f.start, f.end, f.hash) for f in found] == [
        ("link", VERSION, UPSTREAM, 11, 14, c.hash), ("plain", VERSION, UPSTREAM, 11, 14, c.hash)]
    problems, _ = citations.check(found, citations.Resolver(toy.reader), {}, toy.root)
    assert problems == []


def test_verify_fine_on_the_same_bytes(toy):
    """Catches: a correct citation reported as moved or drifted."""
    c = _push_citation(toy)
    verdicts = cite.verify(c.markdown(SITE) + "\n" + c.plain(SITE), toy.reader, root=toy.root)
    assert [v.status for v in verdicts] == [cite.FINE, cite.FINE]
    assert all(v.note_id == "ring.push" and "still covers" in v.detail for v in verdicts)


def test_verify_moved_says_where_the_lines_stand_now(toy):
    """Catches: lines that moved down by two reported as drifted, or at the wrong place."""
    c = _push_citation(toy)
    reader = _release_with(toy, INSERTED)
    (verdict,) = cite.verify(c.plain(SITE), reader, against="9.9.10", root=toy.root)
    assert verdict.status == cite.MOVED
    assert verdict.moved_to == (13,)
    assert "L13-L16 (+2)" in verdict.detail


def test_verify_drifted_when_a_cited_line_changed(toy):
    """Catches: a citation whose lines were rewritten passing as fine (the planted change is one word)."""
    c = _push_citation(toy)
    reader = _release_with(toy, REWRITTEN)
    (verdict,) = cite.verify(c.markdown(SITE), reader, against="9.9.10", root=toy.root)
    assert verdict.status == cite.DRIFTED
    assert "the cited text is gone" in verdict.detail


def test_verify_reports_a_hand_edited_range_as_moved(toy):
    """Catches: a mistyped range checked only by hash presence, not against the lines it names."""
    c = _push_citation(toy)
    typo = c.plain(SITE).replace("#L11-L14@", "#L12-L15@")
    (verdict,) = cite.verify(typo, toy.reader, root=toy.root)
    assert verdict.status == cite.MOVED and verdict.moved_to == (11,)
    assert "now covers L11-L14" in verdict.detail  # the note is still where it was


def test_verify_dead_citations(toy):
    """Catches: a citation of a missing file or of lines past the end passing, or crashing the check."""
    gone = f"v{VERSION}/toy/gone.py#L1-L2@0123456789ab"
    past = f"v{VERSION}/{UPSTREAM}#L40-L44@0123456789ab"
    statuses = [v.status for v in cite.verify(f"{gone}\n{past}", toy.reader, root=toy.root)]
    assert statuses == [cite.DEAD, cite.DEAD]


def test_verify_notices_a_renamed_note(toy):
    """Catches: a citation whose note id no longer exists reported without a word about it."""
    c = _push_citation(toy)
    toy.write([NoteSpec(*n) if n[0] != "ring.push" else NoteSpec("ring.append", 11, 14) for n in TOY_NOTES])
    (verdict,) = cite.verify(c.plain(SITE), toy.reader, root=toy.root)
    assert verdict.status == cite.FINE and "has no note `ring.push` any more" in verdict.detail


def test_line_templates_filled_give_a_verified_line_citation(toy):
    """Catches: the page's per-line citation template or line hash naming other bytes than the line."""
    af = parse(toy.write())
    md, plain = cite.line_templates(af, SITE)
    hashes = cite.line_hashes(TOY_SOURCE)
    assert len(hashes) == len(upstream_lines(TOY_SOURCE))
    text = "\n".join(t.replace(cite.LINE_SLOT, "12").replace(cite.HASH_SLOT, hashes[11]) for t in (md, plain))
    assert "#L12" in text and "{" not in text
    assert [v.status for v in cite.verify(text, toy.reader, root=toy.root)] == [cite.FINE, cite.FINE]


def test_find_note_by_id_or_qualified_and_ambiguity(toy):
    """Catches: an id found in several files silently picking one, or a qualified id not accepted."""
    toy.write()
    toy.files[(VERSION, "toy/other.py")] = TOY_SOURCE
    toy.write(text=toy.text(upstream="toy/other.py"), where=f"v{VERSION}/toy/other.py.md")
    with pytest.raises(cite.CiteError, match="is in 2 files"):
        cite.find_note("ring.push", toy.root)
    af, note = cite.find_note(f"v{VERSION}/toy/other.py#ring.push", toy.root)
    assert (af.upstream, note.id) == ("toy/other.py", "ring.push")
    with pytest.raises(cite.CiteError, match="no note `ring.nope`"):
        cite.find_note("ring.nope", toy.root)


def test_quoted_refuses_other_bytes_and_stale_notes(toy):
    """Catches: quoting lines from bytes that are not the annotated file, or under a stale note."""
    af = parse(toy.write())
    assert "self.items.popleft()" in cite.quoted(af, af.note("ring.push"), toy.reader)
    toy.files[(VERSION, UPSTREAM)] = REWRITTEN
    with pytest.raises(cite.CiteError, match="not the annotated bytes"):
        cite.quoted(af, af.note("ring.push"), toy.reader)


@pytest.fixture
def offline(monkeypatch, toy):
    monkeypatch.setattr(cli.fetch, "read_file", lambda version, path, checkout=None: toy.reader(version, path))
    return toy


def test_cli_cite_prints_markdown_quoted_lines_and_plain(offline, capsys):
    """Catches: `cite` printing no quoted lines, another hash, or exiting 0 on an unknown note."""
    offline.write()
    assert cli.main(["cite", "ring.push", "--root", str(offline.root), "--site-url", SITE]) == 0
    out = capsys.readouterr().out
    digest = range_hash(upstream_lines(TOY_SOURCE), 11, 14)
    assert out.startswith(f"vLLM v{VERSION}, [`{UPSTREAM}` L11-L14]")
    assert "```python\n    def push(self, item):\n" in out and "self.items.append(item)\n```" in out
    assert f"plain: v{VERSION}/{UPSTREAM}#L11-L14@{digest}" in out
    assert cli.main(["cite", "ring.nope", "--root", str(offline.root)]) == 2
    assert "cannot cite ring.nope" in capsys.readouterr().err


def test_cli_verify_citation_exit_codes_and_stdin(offline, capsys, monkeypatch):
    """Catches: verify-citation exiting 0 on a moved or drifted citation, or ignoring `-` (stdin)."""
    c = _push_citation(offline)
    root = ["--root", str(offline.root)]
    assert cli.main(["verify-citation", c.plain(SITE), *root]) == 0
    assert capsys.readouterr().out.startswith("fine: ")
    _release_with(offline, REWRITTEN)
    assert cli.main(["verify-citation", c.plain(SITE), "--release", "9.9.10", *root]) == 1
    assert capsys.readouterr().out.startswith("drifted: ")
    monkeypatch.setattr("sys.stdin", io.StringIO(c.markdown(SITE) + "\n"))
    assert cli.main(["verify-citation", "-", *root]) == 0
    assert cli.main(["verify-citation", "no citation here", *root]) == 2
