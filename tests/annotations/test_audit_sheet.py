"""Audit worksheets (``annotations.audit_sheet``) and ``python -m annotations sample``.

The worksheet tests run on the toy release (``annotation_toy``): four notes in one file, a second
file reusing one note id, committed drift reports of our own and a fake reader, so a draw, a named
list, a worksheet and a refusal can each be seen whole. The locator tests read this repository's
own ``reference/`` and ``conformance/``, and a scratch module of ours written to a temporary folder.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import pytest
from annotation_toy import TOY_SOURCE, UPSTREAM, VERSION, NoteSpec

import annotations as package
import annotations.__main__ as cli
from annotations import audit_sheet, cite, drift
from annotations.model import parse, range_hash, upstream_lines

IDS = ["ring.module", "ring.init", "ring.push", "ring.peek"]


@pytest.fixture
def offline(monkeypatch, toy):
    monkeypatch.setattr(cli.fetch, "read_file", lambda version, path, checkout=None: toy.reader(version, path))
    return toy


PUSH_BODY = "Push drops the oldest item when the ring is full."


def _two_files(toy) -> None:
    """The toy file, plus ``toy/other.py`` (same bytes) whose only note reuses the id ``ring.push``."""
    toy.write(notes=[NoteSpec("ring.module", 1, 3, body="The module docstring and its import."),
                     NoteSpec("ring.init", 6, 9), NoteSpec("ring.push", 11, 14, links=("prop: toy.prop",), body=PUSH_BODY),
                     NoteSpec("ring.peek", 16, 17, body="Peek reads the oldest item.")])
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
    ids = lambda seed: [d.qualified_id for d in audit_sheet.draw(notes, 3, seed)]  # noqa: E731
    draws = {seed: ids(seed) for seed in range(12)}
    assert all(ids(seed) == drawn for seed, drawn in draws.items())
    assert all(len(set(drawn)) == 3 for drawn in draws.values())
    assert len({tuple(drawn) for drawn in draws.values()}) > 1
    order = [d.qualified_id for d in notes]
    assert all(drawn == sorted(drawn, key=order.index) for drawn in draws.values())


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
    chosen = audit_sheet.named(notes, ["ring.peek", f"v{VERSION}/toy/other.py#ring.push", "ring.peek", "#ring.init"])
    assert [d.qualified_id for d in chosen] == [f"v{VERSION}/{UPSTREAM}#ring.peek", f"v{VERSION}/toy/other.py#ring.push",
                                                f"v{VERSION}/{UPSTREAM}#ring.init"]
    with pytest.raises(audit_sheet.SampleError) as err:
        audit_sheet.named(notes, ["ring.nope", "ring.push"])
    assert "`ring.nope` names no note" in str(err.value)
    assert "`ring.push` is in 2 files" in str(err.value)


def test_worksheet_shows_the_note_as_written_beside_its_verified_lines(toy):
    """Catches: a worksheet that paraphrases the note, drops its links, quotes other lines or leaves out how it was chosen."""
    _two_files(toy)
    notes = audit_sheet.population(toy.root)
    chosen = audit_sheet.named(notes, [f"v{VERSION}/{UPSTREAM}#ring.push"])
    sheet = audit_sheet.worksheet(chosen, toy.reader, "python -m annotations sample --notes X", "abc123", 5, toy.root,
                                  {"toy.prop": "Pushes agree."}, context=1)
    digest = range_hash(upstream_lines(TOY_SOURCE), 11, 14)
    assert "Chosen by `python -m annotations sample --notes X` at commit `abc123`" in sheet
    assert "1 of the 5 notes" in sheet
    assert f"> ## `ring.push` L11-L14 · {digest}\n>\n> {PUSH_BODY}\n>\n> - prop: toy.prop\n\n" in sheet
    assert "ring.peek" not in sheet and "Peek reads" not in sheet
    assert "- prop `toy.prop`: under *Properties* at the end" in sheet
    assert sheet.count("Pushes agree.") == 1 and "## Properties\n\nEach conformance property" in sheet
    assert "\n- `toy.prop`: Pushes agree.\n" in sheet
    assert ("  10 |\n> 11 |     def push(self, item):\n> 12 |         if len(self.items) == self.size:\n"
            "> 13 |             self.items.popleft()\n> 14 |         self.items.append(item)\n  15 |\n```") in sheet
    assert "self.items[0]" not in sheet
    assert sheet.count("- verdict, prose:") == 1 and sheet.count("- verdict, reach status:") == 1


def test_excerpt_numbers_lines_marks_the_note_and_stops_at_the_file_edges(toy):
    """Catches: context lines passed off as the note's own, wrong line numbers, or context read past the file's ends."""
    af = parse(toy.write())
    head = audit_sheet.excerpt(af, af.note("ring.module"), toy.reader, context=3)
    assert head.split("\n")[1:-1] == [
        '> 1 | """A toy ring queue used only to test the annotation checker."""', "> 2 |", "> 3 | import collections",
        "  4 |", "  5 |", "  6 | class Ring:"]
    tail = audit_sheet.excerpt(af, af.note("ring.peek"), toy.reader, context=5)
    assert tail.split("\n")[1] == "  11 |     def push(self, item):"
    assert tail.split("\n")[-3:-1] == ["> 16 |     def peek(self):", "> 17 |         return self.items[0]"]


def test_files_section_prints_each_header_once_with_its_definitions(toy):
    """Catches: a file's long header repeated under every note (the sheet grows with the draw), or a `{{name}}` shown without its words."""
    (toy.root / "serving.md").write_text(f"# Serving\n\n## `{VERSION}/toy-route`\n\nThe toy scheduler calls push.\n",
                                         encoding="utf-8")
    toy.write(serving="Serving the toy. {{toy-route}}")
    toy.files[(VERSION, "toy/other.py")] = TOY_SOURCE
    other = toy.text([NoteSpec("ring.push", 11, 14)], upstream="toy/other.py", coverage="0",
                     serving="Serving the other toy. {{toy-route}}")
    toy.write(text=other, where=f"v{VERSION}/toy/other.py.md")
    chosen = audit_sheet.population(toy.root)
    sheet = audit_sheet.worksheet(chosen, toy.reader, "how", "abc123", 5, toy.root)
    assert sheet.count("serving: Serving the toy. {{toy-route}}") == 1
    assert sheet.count("serving: Serving the other toy. {{toy-route}}") == 1
    assert sheet.count(f"- `{VERSION}/toy-route`: The toy scheduler calls push.") == 1
    assert sheet.count(f"It includes `{VERSION}/toy-route`.") == 2
    assert sheet.count("*Files*, B") == 4 and f"### B. `v{VERSION}/{UPSTREAM}`" in sheet


def test_reference_location_names_the_file_and_line_of_a_ref():
    """Catches: a ref shown as a bare name (the auditor has to hunt for it), a wrong file or line for it, or a
    decorated kernel located below its decorator."""
    repo = Path(package.__file__).resolve().parent.parent
    where = audit_sheet.reference_location("reference.blocks.v1.manager.KVCacheManager.get_computed_blocks", repo)
    assert where.startswith("`reference/blocks/v1/manager.py` L")
    line = int(where.rsplit("L", 1)[1])
    text = (repo / "reference/blocks/v1/manager.py").read_text(encoding="utf-8").split("\n")[line - 1]
    assert "def get_computed_blocks" in text
    kernel = audit_sheet.reference_location("reference.attention.cache_write._write_flash_kernel", repo)
    assert kernel.startswith("`reference/attention/cache_write.py` L")
    lines = (repo / "reference/attention/cache_write.py").read_text(encoding="utf-8").split("\n")
    line = int(kernel.rsplit("L", 1)[1])
    assert lines[line - 1] == "@triton.jit" and lines[line].startswith("def _write_flash_kernel(")
    constant = audit_sheet.reference_location("reference.attention.layouts.CLASSIC_BLOCK_SIZES", repo)
    assert constant.startswith("`reference/attention/layouts.py` L")
    text = (repo / "reference/attention/layouts.py").read_text(encoding="utf-8").split("\n")[int(constant.rsplit("L", 1)[1]) - 1]
    assert text.startswith("CLASSIC_BLOCK_SIZES")
    assert audit_sheet.reference_location("reference.blocks.v1.manager.NoSuchThing", repo).startswith("not found")


def test_later_fates_read_the_committed_drift_report(toy):
    """Catches: a worksheet silent on what became of a note's lines in a later release, or one not saying a `- later:` line is owed."""
    path = toy.write()
    af = parse(path)
    notes = tuple(
        drift.NoteDrift(n.id, n.start, n.end, n.hash, status, *new)
        for n, status, new in zip(af.notes, ("unchanged", "moved", "changed", "gone"),
                                  ((1, 3, "h"), (8, 11, "h"), (13, 16, "h2"), (None, None, None)), strict=True))
    report = drift.DriftReport(VERSION, "9.9.10", {}, (drift.FileDrift(
        drift.relative_path(path, toy.root.parent), UPSTREAM, af.sha256, "f" * 64, notes),))
    (toy.root / "drift").mkdir()
    drift.report_path(VERSION, "9.9.10", toy.root / "drift").write_text(report.dumps(), encoding="utf-8")
    reports = [drift.load(p) for p in drift.committed_reports(toy.root / "drift")]
    fates = {n.id: audit_sheet.later_fates(af, n, reports, toy.root.parent, VERSION) for n in af.notes}
    assert fates == {"ring.module": ["9.9.10: unchanged (now L1-L3)"], "ring.init": ["9.9.10: moved (now L8-L11)"],
                     "ring.push": ["9.9.10: changed (now L13-L16) (a `- later:` line is owed)"],
                     "ring.peek": ["9.9.10: gone"]}
    sheet = audit_sheet.worksheet(audit_sheet.named(audit_sheet.population(toy.root), ["ring.push"]),
                                  toy.reader, "how", "abc123", 4, toy.root)
    assert "- in 9.9.10: changed (now L13-L16) (a `- later:` line is owed)" in sheet
    older = audit_sheet.later_fates(af, af.note("ring.push"), reports, toy.root.parent, "9.9.99")
    assert older == ["9.9.10: changed (now L13-L16)"]  # an older pin's drift is shown, not owed a note


def test_worksheet_refuses_bytes_that_are_not_the_annotated_ones(toy):
    """Catches: an auditor handed lines from a different file than the one the notes were written for."""
    _two_files(toy)
    notes = audit_sheet.population(toy.root)
    toy.files[(VERSION, UPSTREAM)] = TOY_SOURCE.replace(b"popleft", b"pop")
    with pytest.raises(cite.CiteError, match="not the annotated bytes"):
        audit_sheet.worksheet(notes, toy.reader, "how", "abc123", len(notes), toy.root)


def _sheet_ids(sheet: str) -> list[str]:
    return [line.split("`")[1] for line in sheet.split("\n") if line.startswith("## ") and "`" in line]


def test_cli_sample_draws_with_the_printed_seed(offline, capsys, monkeypatch):
    """Catches: a CLI that ignores --seed, or prints a seed other than the one it drew with (the draw cannot be reproduced)."""
    _two_files(offline)
    root = ["--root", str(offline.root)]
    monkeypatch.setattr(cli.os, "urandom", lambda n: bytes(range(1, n + 1)))
    assert cli.main(["sample", "--count", "2", *root]) == 0
    captured = capsys.readouterr()
    seed = int.from_bytes(bytes(range(1, 9)), "big")
    assert captured.err.strip().endswith(f"reproduce with: python -m annotations sample --count 2 --seed {seed}")
    population = audit_sheet.population(offline.root)
    assert _sheet_ids(captured.out) == [d.qualified_id for d in audit_sheet.draw(population, 2, seed)]
    for other in range(6):
        assert cli.main(["sample", "--count", "2", "--seed", str(other), *root]) == 0
        assert _sheet_ids(capsys.readouterr().out) == [d.qualified_id for d in audit_sheet.draw(population, 2, other)]


def test_cli_sample_writes_the_file_and_refuses_bad_requests_with_exit_2(offline, capsys, tmp_path):
    """Catches: a worksheet not written, a traceback for an unwritable --out, or exit 0 on a request it cannot meet."""
    _two_files(offline)
    root = ["--root", str(offline.root)]
    out = tmp_path / "sheet.md"
    assert cli.main(["sample", "--count", "2", "--seed", "3", "--out", str(out), *root]) == 0
    assert out.read_text(encoding="utf-8").startswith("# Audit worksheet")
    assert f"wrote {out}: 2 notes" in capsys.readouterr().err
    refusals = {
        ("--count", "9"): "cannot draw 9 notes from 5",
        ("--notes", "ring.nope"): "`ring.nope` names no note",
        ("--count", "2", "--context", "-1"): "--context -1",
        ("--notes", "ring.peek", "--seed", "3"): "leave out --count and --seed",
        ("--count", "2", "--out", str(tmp_path / "no" / "such" / "sheet.md")): "sample: ",
    }
    for words, message in refusals.items():
        assert cli.main(["sample", *words, *root]) == 2, words
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (words, err)


def test_cli_sample_names_the_commit_and_marks_uncommitted_notes(offline, capsys, tmp_path):
    """Catches: a worksheet that hides that the notes, the reference lines it cites or the conformance properties it
    describes are not the committed ones."""
    _two_files(offline)
    repo = offline.root.parent
    (repo / "reference").mkdir()
    (repo / "reference" / "ring.py").write_text("RING = 1\n", encoding="utf-8")
    (repo / "conformance").mkdir()
    (repo / "conformance" / "ring.py").write_text("CHECK = 1\n", encoding="utf-8")
    git = lambda *words: subprocess.run(["git", "-C", str(repo), *words], capture_output=True, text=True, check=True)  # noqa: E731
    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "toy")
    commit = git("rev-parse", "--short=12", "HEAD").stdout.strip()
    root = ["--root", str(offline.root)]
    assert cli.main(["sample", "--notes", "ring.peek", *root]) == 0
    assert f"at commit `{commit}` of this repository" in capsys.readouterr().out
    path = offline.root / f"v{VERSION}" / f"{UPSTREAM}.md"
    path.write_text(path.read_text(encoding="utf-8").replace("Peek reads", "Peek returns"), encoding="utf-8")
    assert cli.main(["sample", "--notes", "ring.peek", *root]) == 0
    assert f"at commit `{commit} with uncommitted changes to annotations/`" in capsys.readouterr().out
    (repo / "reference" / "ring.py").write_text("RING = 2\n", encoding="utf-8")
    assert cli.main(["sample", "--notes", "ring.peek", *root]) == 0
    assert f"at commit `{commit} with uncommitted changes to annotations/, reference/`" in capsys.readouterr().out
    git("checkout", "-q", "--", "annotations", "reference")
    (repo / "conformance" / "ring.py").write_text("CHECK = 2\n", encoding="utf-8")
    assert cli.main(["sample", "--notes", "ring.peek", *root]) == 0
    assert f"at commit `{commit} with uncommitted changes to conformance/`" in capsys.readouterr().out


def _report(toy, af, fates, to_version="9.9.10", gone=False):
    """A committed drift report from ``af``'s release: ``fates`` maps a note id to (status, new range or None)."""
    notes = tuple(drift.NoteDrift(n.id, n.start, n.end, n.hash, *fates[n.id][:1],
                                  *(fates[n.id][1] or (None, None)), "h" if fates[n.id][1] else None)
                  for n in af.notes if n.id in fates)
    path = drift.relative_path(af.path, toy.root.parent)
    followed = drift.FileDrift(path, af.upstream, af.sha256, None if gone else "f" * 64, () if gone else notes,
                               gone_notes=len(af.notes) if gone else 0)
    (toy.root / "drift").mkdir(exist_ok=True)
    drift.report_path(af.version, to_version, toy.root / "drift").write_text(
        drift.DriftReport(af.version, to_version, {}, (followed,)).dumps(), encoding="utf-8")
    return [drift.load(p) for p in drift.committed_reports(toy.root / "drift")]


def test_later_fates_owe_no_line_once_written_and_say_when_the_file_is_gone(toy):
    """Catches: a note that has its `- later:` line still reported as owing one, or a gone file shown as unfollowed."""
    af = parse(toy.write(notes=[NoteSpec("ring.module", 1, 3), NoteSpec("ring.init", 6, 9),
                                NoteSpec("ring.push", 11, 14, links=("later: 9.9.10: push now appends first",)),
                                NoteSpec("ring.peek", 16, 17)]))
    reports = _report(toy, af, {"ring.push": ("changed", (13, 16))})
    assert audit_sheet.later_fates(af, af.note("ring.push"), reports, toy.root.parent, VERSION) == [
        "9.9.10: changed (now L13-L16)"]
    gone = _report(toy, af, {}, to_version="9.9.11", gone=True)
    assert "9.9.11: the file is gone" in audit_sheet.later_fates(af, af.note("ring.peek"), gone, toy.root.parent, VERSION)


def test_later_fates_call_a_report_for_other_lines_stale(toy):
    """Catches: a committed report written for a note's old range narrated as what became of its current lines."""
    af = parse(toy.write())
    reports = _report(toy, af, {"ring.push": ("moved", (20, 23))})
    moved = parse(toy.write(notes=[NoteSpec("ring.module", 1, 3), NoteSpec("ring.init", 6, 9),
                                   NoteSpec("ring.push", 11, 13), NoteSpec("ring.peek", 16, 17)]))
    (fate,) = audit_sheet.later_fates(moved, moved.note("ring.push"), reports, toy.root.parent, VERSION)
    assert fate.startswith("9.9.10: the committed report follows L11-L14, not this note's L11-L13 (stale")


def test_worksheet_owes_later_lines_only_in_the_newest_pinned_release(toy):
    """Catches: the newest pinned release taken as the oldest, so an older pin's notes are told they owe `- later:` lines."""
    af = parse(toy.write())
    _report(toy, af, {"ring.push": ("changed", (13, 16))})
    toy.files[("9.10.0", UPSTREAM)] = TOY_SOURCE
    toy.write(text=toy.text(version="9.10.0"), where=f"v9.10.0/{UPSTREAM}.md")
    chosen = audit_sheet.named(audit_sheet.population(toy.root), [f"v{VERSION}/{UPSTREAM}#ring.push"])
    sheet = audit_sheet.worksheet(chosen, toy.reader, "how", "abc123", 8, toy.root)
    assert "- in 9.9.10: changed (now L13-L16)\n" in sheet and "owed" not in sheet


def test_see_and_property_locations_name_file_and_line(toy):
    """Catches: a `- see:` target or a property's runner the auditor has to hunt for, or a wrong line."""
    _two_files(toy)
    where = audit_sheet.see_location(f"v{VERSION}/toy/other.py#ring.push", toy.root)
    assert where == f"`annotations/v{VERSION}/toy/other.py.md` line 13"
    text = (toy.root / f"v{VERSION}" / "toy/other.py.md").read_text(encoding="utf-8").split("\n")
    assert text[12].startswith("## `ring.push`")
    assert audit_sheet.see_location(f"v{VERSION}/toy/other.py#ring.nope", toy.root).startswith("not found")
    repo = Path(package.__file__).resolve().parent.parent
    checks, problem = audit_sheet.property_checks(repo)
    assert checks is not None and problem == ""

    def runner_line(name: str) -> tuple[str, str]:
        source, line = checks[name].rsplit("(run by `", 1)[1].rstrip(")").split("` L")
        return source, (repo / source).read_text(encoding="utf-8").split("\n")[int(line) - 1].lstrip()

    source, text = runner_line("v1.lifecycle")
    assert source == "conformance/machines/v1.py" and "run=lambda" in text and "V1LifecycleMachine" in text
    source, text = runner_line("kernel.cpu.copy_blocks")  # a decorated function: located under its decorator
    assert source == "conformance/kernels/cpu_build.py" and text == "@harness_guarded"  # the decorator over `def run(`


def test_worksheet_says_why_the_property_registry_is_missing(toy):
    """Catches: a worksheet that, given no registry, reports the linked properties as unknown instead of saying why."""
    _two_files(toy)
    chosen = audit_sheet.named(audit_sheet.population(toy.root), [f"v{VERSION}/{UPSTREAM}#ring.push"])
    sheet = audit_sheet.worksheet(chosen, toy.reader, "how", "abc123", 5, toy.root, None,
                                  properties_unavailable="ModuleNotFoundError: No module named 'hypothesis'")
    assert "could not be loaded here: ModuleNotFoundError: No module named 'hypothesis'" in sheet
    assert "\n- `toy.prop`\n" in sheet and "not in conformance's registry" not in sheet


def test_property_checks_report_a_registry_that_fails_to_load(offline, capsys, monkeypatch):
    """Catches: a registry that raises while loading shown as an empty one (every linked property then looks
    unregistered), or the command dropping the reason."""
    import types

    broken = types.ModuleType("conformance.properties")

    def all_properties():
        raise RuntimeError("the registry is broken")

    broken.all_properties = all_properties
    monkeypatch.setitem(sys.modules, "conformance.properties", broken)
    repo = Path(package.__file__).resolve().parent.parent
    assert audit_sheet.property_checks(repo) == (None, "RuntimeError: the registry is broken")
    # The toy checkout has no registry of its own, so the command is handed the answer above.
    monkeypatch.setattr(cli.audit_sheet, "property_checks", lambda root: (None, "RuntimeError: the registry is broken"))
    _two_files(offline)
    assert cli.main(["sample", "--notes", f"v{VERSION}/{UPSTREAM}#ring.push", "--root", str(offline.root)]) == 0
    out = capsys.readouterr().out
    assert "could not be loaded here: RuntimeError: the registry is broken" in out and "\n- `toy.prop`\n" in out


def test_property_checks_refuse_another_checkouts_registry(tmp_path):
    """Catches: property sentences read from whichever conformance is importable, describing another tree than the
    one the worksheet names."""
    repo = Path(package.__file__).resolve().parent.parent
    for other in (tmp_path, repo.parent):
        checks, problem = audit_sheet.property_checks(other)
        assert checks is None and problem.startswith("the importable conformance is ") and "not this checkout's" in problem


REFS_MODULE = '''"""Symbols bound in most of the ways the locator tells apart (not a property)."""
import functools
import typing
from functools import WRAPPER_ASSIGNMENTS

import triton


def _decorate(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args)
    return wrapper


@functools.cache
def cached(x):
    return x


@_decorate
def wrapped(x):
    return x


class Holder:
    @functools.cached_property
    def lazy(self):
        return 1

    LIMIT = 4

    def add(self, x, y):
        return x + y

    add_one = functools.partialmethod(add, 1)


def plain(x, y):
    return x + y


class Sub(Holder):
    pass


PARTIAL = functools.partial(plain, 1)
ALIAS = plain
TWICE = 1
TWICE = 2


class Rule:
    def __init__(self, fn):
        self.fn = fn


RULE = Rule(plain)


def _as_partial(fn):
    return functools.partial(fn, 0)


@_as_partial
def decorated_partial(x, y):
    return x + y


KERNEL = triton.jit(plain)
LATER_IMPORT = (1,)
from functools import reduce as LATER_IMPORT  # noqa
AUG = 1
AUG += 1
ANNOT = 1
ANNOT: int
UNPACKED = 1
UNPACKED, OTHER = 2, 3
KEY = "a"
REGISTRY = {}
REGISTRY[KEY] = 1
LATER_BLOCK = 1
if True:
    LATER_BLOCK = 2
CAUGHT = 1
try:
    pass
except ValueError as CAUGHT:
    pass
LIMIT = 4
if True:
    def _scoped():
        LIMIT = 5
        return LIMIT
WIDTH = 8
[WIDTH for WIDTH in range(2)]
TUNED = triton.autotune(configs=[triton.Config({})], key=[])(triton.jit(plain))


class Pair(typing.NamedTuple):
    left: int
    right: int = 0


class Base:
    inherited: int = 1


class Child(Base):
    inherited: int


class Unpacked:
    left, right = 1, 2
    left: int


class Imported:
    from functools import reduce as fold
    fold: object


WALRUS = 1
[(WALRUS := i) for i in range(2)]
DEFAULTED = 1
if True:
    def _defaults(x=(DEFAULTED := 2)):
        return x


A, B = 1, 2
if True:
    IN_BLOCK = 3
'''


def plain_runner(tag, examples):
    """A stand-in property runner for the partial case."""
    return tag, examples


def test_reference_source_follows_decorators_but_not_partials(tmp_path, monkeypatch):
    """Catches: a decorated ref located at its wrapper (or in the decorator's file), a cached property or class
    constant not located, a name bound to a partial or partialmethod located at the function it wraps (or inside
    functools), a name bound twice located at its first binding, an object with an `fn` attribute taken for a
    Triton kernel (or a Triton kernel not followed to its function, autotuned or not), a def under a decorator
    that returns a partial left unlocated, a subscript target or a nested scope's local taken for a rebinding, a
    class field made from a bare annotation left unlocated, a bare annotation at module level, after an unpacking
    or import, or over an inherited value taken for a binding, or an unpacking, a binding inside a block, an import,
    any star import, an `except ... as`, a walrus, a default value or a later rebinding (an import, an unpacking,
    `+=`) or an inherited value (an inherited partialmethod among them) given a place."""
    from annotations.check import reference_source

    (tmp_path / "audit_toy_refs.py").write_text(REFS_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    for scratch in ("audit_toy_refs", "audit_toy_star"):  # set, then drop: teardown restores sys.modules
        monkeypatch.setitem(sys.modules, scratch, None)
        monkeypatch.delitem(sys.modules, scratch)
    lines = REFS_MODULE.split("\n")

    def line_of(name: str) -> str:
        found = reference_source(f"audit_toy_refs.{name}")
        assert found is not None and found[0] == (tmp_path / "audit_toy_refs.py").resolve(), name
        return lines[found[1] - 1]

    assert line_of("cached") == "@functools.cache"
    assert line_of("wrapped") == "@_decorate"
    assert line_of("Holder.lazy").strip() == "@functools.cached_property"
    assert line_of("Holder.LIMIT").strip() == "LIMIT = 4"
    assert line_of("PARTIAL").startswith("PARTIAL = ")
    assert line_of("Holder.add_one").strip().startswith("add_one = ")
    assert line_of("ALIAS") == "def plain(x, y):"  # an alias: the definition it names
    assert line_of("TWICE") == "TWICE = 2"  # the binding in effect
    assert line_of("RULE").startswith("RULE = ")  # an object with an `fn` that is not a Triton kernel
    assert line_of("decorated_partial") == "@_as_partial"  # a decorator that returns a partial
    assert line_of("KERNEL") == "def plain(x, y):"  # a Triton kernel: the function it wraps
    assert line_of("ANNOT") == "ANNOT = 1"  # a bare annotation binds nothing
    assert line_of("KEY") == 'KEY = "a"' and line_of("REGISTRY") == "REGISTRY = {}"  # subscripts bind neither
    assert line_of("LIMIT") == "LIMIT = 4" and line_of("WIDTH") == "WIDTH = 8"  # nested scopes rebind nothing
    assert line_of("TUNED") == "def plain(x, y):"  # an autotuned kernel: followed to its function
    assert line_of("Pair.left").strip() == "left: int"  # a field the class machinery makes
    for unlocated in ("A", "IN_BLOCK", "Sub.LIMIT", "Sub.add_one", "WRAPPER_ASSIGNMENTS", "LATER_IMPORT", "AUG",
                      "UNPACKED", "LATER_BLOCK", "CAUGHT", "Child.inherited", "Unpacked.left",
                      "Imported.fold", "WALRUS", "DEFAULTED"):
        assert reference_source(f"audit_toy_refs.{unlocated}") is None, unlocated
    (tmp_path / "audit_toy_star.py").write_text("STARRED = 1\nfrom functools import *  # noqa\nAFTER = 2\n",
                                                encoding="utf-8")
    assert reference_source("audit_toy_star.STARRED") is None  # a later star import may rebind it
    assert reference_source("audit_toy_star.AFTER") == ((tmp_path / "audit_toy_star.py").resolve(), 3)


def test_property_location_follows_a_partial_runner():
    """Catches: a property run by a `functools.partial` shown with no location, or at the partial's own type."""
    runner = functools.partial(plain_runner, 1)
    where = audit_sheet.property_location(runner, Path(__file__).resolve().parent)
    assert where == f"`{Path(__file__).name}` L{plain_runner.__code__.co_firstlineno}"


def test_definitions_list_what_a_note_itself_includes(toy):
    """Catches: a `{{name}}` in a note's own text (not its file's header) left out of *Definitions*, or read from
    another note's text."""
    (toy.root / "serving.md").write_text(f"# Serving\n\n## `{VERSION}/toy-route`\n\nThe toy scheduler calls push.\n",
                                         encoding="utf-8")
    toy.write(notes=[NoteSpec("ring.module", 1, 3), NoteSpec("ring.init", 6, 9),
                     NoteSpec("ring.push", 11, 14, body="Push is reached. {{toy-route}}"), NoteSpec("ring.peek", 16, 17)])
    notes = audit_sheet.population(toy.root)
    for chosen in (audit_sheet.named(notes, ["ring.push"]), audit_sheet.named(notes, ["ring.peek", "ring.push"])):
        sheet = audit_sheet.worksheet(chosen, toy.reader, "how", "abc123", 4, toy.root)
        assert sheet.count(f"- shared definitions the note itself includes: `{VERSION}/toy-route`") == 1
        assert sheet.count(f"- `{VERSION}/toy-route`: The toy scheduler calls push.") == 1
        assert "## Definitions" in sheet


def test_a_module_ref_is_located_at_line_1():
    """Catches: a ref that names a module shown at line 0 (no such line)."""
    repo = Path(package.__file__).resolve().parent.parent
    assert audit_sheet.reference_location("reference.attention", repo) == "`reference/attention/__init__.py` L1"
