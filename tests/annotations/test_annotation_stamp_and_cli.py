"""``stamp`` fills placeholders honestly; the command line wires fetch, stamp, check and coverage."""

from __future__ import annotations

import hashlib
import subprocess

import pytest
from annotation_toy import TOY_NOTES, TOY_SOURCE, UPSTREAM, VERSION, NoteSpec

import annotations.__main__ as cli
from annotations.model import UNSTAMPED_HASH, parse, range_hash, stamp_text, upstream_lines


def _placeholder_notes() -> list[NoteSpec]:
    return [NoteSpec(*n, hash=UNSTAMPED_HASH) for n in TOY_NOTES]


@pytest.fixture
def offline(monkeypatch, toy):
    """Serve the toy release to the command line instead of the real upstream module."""
    monkeypatch.setattr(cli.fetch, "read_file", lambda version, path, checkout=None: toy.reader(version, path))
    return toy


def test_stamp_fills_placeholders_and_header_sha(toy):
    """Catches: stamp computing hashes over the wrong lines or leaving the header sha256 unfilled."""
    path = toy.write(_placeholder_notes(), sha256="?")
    text, changes = stamp_text(path, path.read_text(), toy.reader)
    af = parse(toy.write(text=text))
    lines = upstream_lines(TOY_SOURCE)
    assert af.sha256 == hashlib.sha256(TOY_SOURCE).hexdigest()
    assert [n.hash for n in af.notes] == [range_hash(lines, s, e) for _, s, e in TOY_NOTES]
    assert len(changes) == len(TOY_NOTES) + 1
    assert toy.checker().run().ok


def test_stamp_never_overwrites_an_existing_hash(toy):
    """Catches: stamp papering over drift by rewriting a hash that is already present."""
    notes = _placeholder_notes()
    notes[2] = NoteSpec("ring.push", 11, 14, hash="0123456789ab")
    path = toy.write(notes)
    text, changes = stamp_text(path, path.read_text(), toy.reader)
    assert "## `ring.push` L11-L14 · 0123456789ab" in text
    assert not any("ring.push" in c for c in changes)


def test_stamp_refuses_other_bytes_and_out_of_range_notes(toy):
    """Catches: stamping against a file whose sha256 the header contradicts, or past the file's end."""
    path = toy.write(_placeholder_notes(), sha256="e" * 64)
    with pytest.raises(ValueError, match="is not that of toy/ring.py"):
        stamp_text(path, path.read_text(), toy.reader)
    path = toy.write([NoteSpec("ring.module", 1, 99, hash=UNSTAMPED_HASH)])
    with pytest.raises(ValueError, match=r"ends after the last line L17"):
        stamp_text(path, path.read_text(), toy.reader)


def test_cli_stamp_then_check_passes_and_failed_stamp_leaves_file(offline, capsys):
    """Catches: the stamp command not writing its result, or writing a file it refused to stamp."""
    path = offline.write(_placeholder_notes(), sha256="?")
    assert cli.main(["stamp", str(path), "--root", str(offline.root)]) == 0
    assert UNSTAMPED_HASH not in path.read_text()
    assert cli.main(["check", "--root", str(offline.root)]) == 0
    out = capsys.readouterr().out
    assert "annotations check: ok" in out and "v9.9.9/toy/ring.py" in out and "100.0%" in out
    broken = offline.write([NoteSpec("ring.module", 1, 99, hash=UNSTAMPED_HASH)])
    before = broken.read_text()
    assert cli.main(["stamp", str(broken)]) == 1
    assert broken.read_text() == before


def test_cli_check_reads_the_conformance_property_registry(offline, capsys):
    """Catches: the check command building its checker without conformance's property registry
    (the checker imports none itself), so a registered ``prop:`` reads as dead or a dead one passes."""
    offline.write([NoteSpec(*n, links=("prop: v1.lifecycle", "prop: toy.missing")) if n[0] == "ring.peek"
                   else NoteSpec(*n) for n in TOY_NOTES])
    assert cli.main(["check", "--root", str(offline.root)]) == 1
    out = capsys.readouterr().out
    assert "dead prop toy.missing: not a registered conformance property" in out and "1 problems" in out, out


def test_cli_check_fails_with_problem_lines(offline, capsys):
    """Catches: the check command exiting 0 or printing no location when a note drifted."""
    offline.write([NoteSpec(*n, hash="0" * 12) if n[0] == "ring.peek" else NoteSpec(*n) for n in TOY_NOTES])
    assert cli.main(["check", "--root", str(offline.root)]) == 1
    out = capsys.readouterr().out
    assert "note `ring.peek` L16-L17: hash drift" in out and "1 problems" in out


def test_cli_fetch_verifies_sha_and_reports(offline, capsys):
    """Catches: fetch accepting bytes whose sha256 differs from the header, or not saying what it fetched."""
    offline.write()
    assert cli.main(["fetch", "--root", str(offline.root)]) == 0
    assert f"fetched {UPSTREAM} @ {VERSION} from release sdist: 17 lines, sha256 ok" in capsys.readouterr().out
    offline.files[(VERSION, UPSTREAM)] = TOY_SOURCE + b"# changed\n"
    assert cli.main(["fetch", "--root", str(offline.root)]) == 1
    assert "FAIL toy/ring.py @ 9.9.9: sha256" in capsys.readouterr().out
    assert cli.main(["fetch", "--root", str(offline.root), "--version", "0.0.1"]) == 0
    assert "0 upstream files" in capsys.readouterr().out


def test_cli_coverage_prints_table_only(offline, capsys):
    """Catches: the coverage command printing problems or a wrong covered/non-blank count."""
    offline.write([NoteSpec(*n) for n in TOY_NOTES[:2]], coverage="10")
    assert cli.main(["coverage", "--root", str(offline.root)]) == 0
    out = capsys.readouterr().out
    nonblank = sum(1 for line in TOY_SOURCE.split(b"\n") if line.strip())
    assert f"6/{nonblank}" in out and "problem" not in out


def test_cli_fetch_from_a_checkout_verifies_and_caches(toy, tmp_path, monkeypatch, capsys):
    """Catches: --checkout reading the wrong tag, path or commit, or caching bytes before they verified."""
    repo = tmp_path / "checkout"
    (repo / "toy").mkdir(parents=True)
    (repo / UPSTREAM).write_bytes(TOY_SOURCE)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "toy"], ["tag", f"v{VERSION}"]):
        subprocess.run(git + args, check=True, capture_output=True)
    monkeypatch.setattr(cli.fetch, "CACHE", tmp_path / "cache")
    tag_commit = subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True).stdout.decode()
    toy.write(commit=tag_commit[:9])
    assert cli.main(["fetch", "--root", str(toy.root), "--checkout", str(repo)]) == 0
    assert f"fetched {UPSTREAM} @ {VERSION} from checkout" in capsys.readouterr().out
    assert cli.main(["check", "--root", str(toy.root), "--checkout", str(repo)]) == 0
    assert "annotations check: ok" in capsys.readouterr().out
    assert cli.fetch.cached_file(VERSION, UPSTREAM).read_bytes() == TOY_SOURCE
    cli.fetch.cached_file(VERSION, UPSTREAM).unlink()
    (repo / UPSTREAM).write_bytes(TOY_SOURCE + b"# later\n")
    subprocess.run(git + ["commit", "-q", "-am", "later"], check=True, capture_output=True)
    subprocess.run(git + ["tag", "-f", f"v{VERSION}"], check=True, capture_output=True)
    assert cli.main(["fetch", "--root", str(toy.root), "--checkout", str(repo)]) == 1
    assert not cli.fetch.cached_file(VERSION, UPSTREAM).exists()
