"""Audit worksheets (``annotations.audit_sheet``) and ``python -m annotations sample``.

Everything runs on the toy release (``annotation_toy``): four notes in one file, a second file
reusing one note id, and a fake reader, so a draw, a named list and a refusal can each be seen
whole.
"""

from __future__ import annotations

import pytest
from annotation_toy import TOY_SOURCE, UPSTREAM, VERSION, NoteSpec

import annotations.__main__ as cli
from annotations import audit_sheet, cite
from annotations.model import range_hash, upstream_lines

SITE = "https://study.example/"
IDS = ["ring.module", "ring.init", "ring.push", "ring.peek"]


@pytest.fixture
def offline(monkeypatch, toy):
    monkeypatch.setattr(cli.fetch, "read_file", lambda version, path, checkout=None: toy.reader(version, path))
    return toy


def _two_files(toy) -> None:
    """The toy file, plus ``toy/other.py`` (same bytes) whose only note reuses the id ``ring.push``."""
    toy.write(notes=[NoteSpec("ring.module", 1, 3, body="The module docstring and its import."),
                     NoteSpec("ring.init", 6, 9), NoteSpec("ring.push", 11, 14, links=("prop: toy.prop",)),
                     NoteSpec("ring.peek", 16, 17)])
    toy.files[(VERSION, "toy/other.py")] = TOY_SOURCE
    other = toy.text([NoteSpec("ring.push", 11, 14)], upstream="toy/other.py", coverage="0")
    toy.write(text=other, where=f"v{VERSION}/toy/other.py.md")


def test_population_is_every_note_of_every_file_in_file_order(toy):
    """Catches: a draw that can never choose some file's notes, or an order that depends on the filesystem."""
    _two_files(toy)
    notes = audit_sheet.population(toy.root)
    assert [d.qualified_id for d in notes] == (
        [f"v{VERSION}/toy/other.py#ring.push"] + [f"v{VERSION}/{UPSTREAM}#{i}" for i in IDS])


def test_draw_is_reproducible_distinct_and_differs_between_seeds(toy):
    """Catches: a seed that does not reproduce its draw, a note drawn twice, or a seed that is ignored."""
    _two_files(toy)
    notes = audit_sheet.population(toy.root)
    draws = {seed: [d.qualified_id for d in audit_sheet.draw(notes, 3, seed)] for seed in range(12)}
    assert all(len(set(ids)) == 3 for ids in draws.values())
    assert draws[5] == [d.qualified_id for d in audit_sheet.draw(notes, 3, 5)]
    assert len({tuple(ids) for ids in draws.values()}) > 1
    order = [d.qualified_id for d in notes]
    assert all(ids == sorted(ids, key=order.index) for ids in draws.values())


def test_draw_refuses_counts_outside_the_population(toy):
    """Catches: asking for more notes than exist silently returning fewer (or raising a bare ValueError)."""
    _two_files(toy)
    notes = audit_sheet.population(toy.root)
    for count in (0, 6):
        with pytest.raises(audit_sheet.SampleError, match="ask for 1 to 5"):
            audit_sheet.draw(notes, count, 1)


def test_named_resolves_ids_and_refuses_unknown_or_ambiguous_ones(toy):
    """Catches: an unknown id dropped without a word, or a repeated id resolved to either file at random."""
    _two_files(toy)
    notes = audit_sheet.population(toy.root)
    chosen = audit_sheet.named(notes, ["ring.peek", f"v{VERSION}/toy/other.py#ring.push", "ring.peek"])
    assert [d.qualified_id for d in chosen] == [f"v{VERSION}/{UPSTREAM}#ring.peek", f"v{VERSION}/toy/other.py#ring.push"]
    with pytest.raises(audit_sheet.SampleError) as err:
        audit_sheet.named(notes, ["ring.nope", "ring.push"])
    assert "`ring.nope` names no note" in str(err.value)
    assert "`ring.push` is in 2 files" in str(err.value)


def test_worksheet_shows_the_note_as_written_beside_its_verified_lines(toy):
    """Catches: a worksheet that paraphrases the note, drops its links, quotes other lines or leaves out how it was chosen."""
    _two_files(toy)
    notes = audit_sheet.population(toy.root)
    chosen = audit_sheet.named(notes, [f"v{VERSION}/{UPSTREAM}#ring.push"])
    sheet = audit_sheet.worksheet(chosen, toy.reader, SITE, "python -m annotations sample --notes X", "abc123", 5, toy.root)
    digest = range_hash(upstream_lines(TOY_SOURCE), 11, 14)
    assert "Chosen by `python -m annotations sample --notes X` at commit `abc123`" in sheet
    assert "1 of the 5 notes" in sheet
    assert f"> ## `ring.push` L11-L14 · {digest}" in sheet and "> - prop: toy.prop" in sheet
    assert "```python\n    def push(self, item):\n" in sheet and "self.items.append(item)\n```" in sheet
    assert "self.items[0]" not in sheet
    assert sheet.count("- verdict:") == 1


def test_worksheet_refuses_bytes_that_are_not_the_annotated_ones(toy):
    """Catches: an auditor handed lines from a different file than the one the notes were written for."""
    _two_files(toy)
    notes = audit_sheet.population(toy.root)
    toy.files[(VERSION, UPSTREAM)] = TOY_SOURCE.replace(b"popleft", b"pop")
    with pytest.raises(cite.CiteError, match="not the annotated bytes"):
        audit_sheet.worksheet(notes, toy.reader, SITE, "how", "abc123", len(notes), toy.root)


def test_worksheet_includes_the_shared_definitions_a_header_names(toy):
    """Catches: a note whose status rests on a `{{name}}` definition shown without the definition's words."""
    (toy.root / "serving.md").write_text(f"# Serving\n\n## `{VERSION}/toy-route`\n\nThe toy scheduler calls push.\n",
                                         encoding="utf-8")
    toy.write(serving="Serving the toy. {{toy-route}}")
    chosen = audit_sheet.named(audit_sheet.population(toy.root), ["ring.push"])
    sheet = audit_sheet.worksheet(chosen, toy.reader, SITE, "how", "abc123", 4, toy.root)
    assert "serving: Serving the toy. {{toy-route}}" in sheet
    assert f"- `{VERSION}/toy-route`: The toy scheduler calls push." in sheet


def test_cli_sample_prints_the_seed_and_exits_2_on_a_bad_draw(offline, capsys, tmp_path):
    """Catches: a draw without its seed (not reproducible), a worksheet not written, or exit 0 on a bad request."""
    _two_files(offline)
    root = ["--root", str(offline.root), "--site-url", SITE]
    assert cli.main(["sample", "--count", "2", *root]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("# Audit worksheet") and captured.out.count("- verdict:") == 2
    how = captured.err.strip().split("reproduce with: ")[1]
    seed = int(how.rsplit("--seed ", 1)[1])
    out = tmp_path / "sheet.md"
    assert cli.main(["sample", "--count", "2", "--seed", str(seed), "--out", str(out), *root]) == 0
    assert out.read_text(encoding="utf-8").split("\n## ")[1:] == captured.out.split("\n## ")[1:]
    capsys.readouterr()
    assert cli.main(["sample", "--count", "9", *root]) == 2
    assert "cannot draw 9 notes from 5" in capsys.readouterr().err
    assert cli.main(["sample", "--notes", "ring.nope", *root]) == 2
    assert "`ring.nope` names no note" in capsys.readouterr().err
