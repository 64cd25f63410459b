"""What became of each note's lines in a later vLLM release: unchanged, moved, changed or gone.

A note is written for exact lines of a pinned release. When vLLM publishes a later release, a
student reading today's code needs to know which notes still describe what they see. This module
aligns each annotated file with the same path in the later release's sdist (both fetched by name
and version and verified against the index's sha256, ``upstream.fetch``) and classifies
every note.

The alignment is ``difflib.SequenceMatcher`` over the exact line bytes of the two files (no junk
heuristic), read as opcodes: ``equal`` blocks pair old lines with identical new lines; ``replace``,
``delete`` and ``insert`` blocks are what changed. For a note covering old lines ``s..e``:

* **unchanged**: all of ``s..e`` lie in one ``equal`` block that pairs them with new lines
  ``s..e``: the same bytes at the same line numbers.
* **moved**: all of ``s..e`` lie in one ``equal`` block that pairs them with new lines
  ``s+d..e+d``, ``d != 0``: the same bytes, now at another range (the note's hash still holds there).
* **changed**: some line of ``s..e`` is in a ``replace`` or ``delete`` block, or new lines are
  inserted between two of its lines (insertions right before ``s`` or right after ``e`` belong to
  no note), and at least one new line corresponds to the note. Its new range is the smallest span
  of new lines holding every correspondent: the paired line of each ``equal`` line, the whole
  replacement of each ``replace`` block that overlaps ``s..e`` (a rewritten block that straddles a
  note boundary counts whole for both notes), the inserted lines of an insertion inside. Each
  non-``equal`` block is recorded as a hunk (its old lines clipped to ``s..e``).
* **gone**: no new line corresponds to the note: its lines were deleted, or the file is not in
  the later release at all (then the file is reported once, with its note count, not note by note).

The committed result (``annotations/drift/v<pinned>-to-<later>.json``) holds line numbers, hashes
and statuses only, never upstream text; the site renders the changed lines side by side from the
fetched sdists at build time. ``python -m annotations drift VERSION`` writes it and
``drift --check`` fails when a committed file disagrees with what the bytes say now, or when a
note of the newest pinned release whose lines changed says nothing about the later release (its
``- later:`` line, ``annotations/FORMAT.md``).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from annotations.model import ANNOTATIONS_ROOT, AnnotationFile, Note, is_blank, range_hash, upstream_lines

STATUSES = ("unchanged", "moved", "changed", "gone")
#: Where the committed drift reports live.
DRIFT_ROOT = ANNOTATIONS_ROOT / "drift"
#: Bumped when the JSON's meaning changes, so an old file is reported instead of misread.
SCHEMA = 1

Reader = Callable[[str, str], bytes]  # (version, upstream path) -> verified bytes
Lister = Callable[[str], list[str]]  # version -> every file path in the release


class DriftError(ValueError):
    """A drift report cannot be computed or read (bad input, malformed JSON); says which and why."""


@dataclass(frozen=True)
class Hunk:
    """One changed stretch in a note: old lines ``old_start..old_end`` became new ``new_start..new_end``.

    1-based and inclusive; an empty side has ``end == start - 1`` (lines deleted, or inserted,
    before line ``start`` of that side).
    """

    old_start: int
    old_end: int
    new_start: int
    new_end: int

    def as_list(self) -> list[int]:
        return [self.old_start, self.old_end, self.new_start, self.new_end]

    @property
    def size(self) -> int:
        """Lines this hunk touches on both sides together."""
        return (self.old_end - self.old_start + 1) + (self.new_end - self.new_start + 1)


@dataclass(frozen=True)
class NoteDrift:
    """What became of one note's lines ``old_start..old_end`` in the later release."""

    id: str
    old_start: int
    old_end: int
    old_hash: str  # the hash of the old lines (the note's own hash when it is not stale)
    status: str
    new_start: int | None = None
    new_end: int | None = None
    new_hash: str | None = None  # of new lines new_start..new_end
    hunks: tuple[Hunk, ...] = ()

    @property
    def new_range_text(self) -> str:
        if self.new_start is None or self.new_end is None:
            return ""
        return f"L{self.new_start}" if self.new_start == self.new_end else f"L{self.new_start}-L{self.new_end}"

    @property
    def old_range_text(self) -> str:
        return f"L{self.old_start}" if self.old_start == self.old_end else f"L{self.old_start}-L{self.old_end}"

    @property
    def changed_lines(self) -> int:
        """Old plus new lines inside the note's hunks (0 unless changed)."""
        return sum(h.size for h in self.hunks)

    def to_json(self) -> dict:
        out: dict = {"id": self.id, "status": self.status, "old": [self.old_start, self.old_end], "old_hash": self.old_hash}
        if self.new_start is not None:
            out["new"] = [self.new_start, self.new_end]
            out["new_hash"] = self.new_hash
        if self.hunks:
            out["hunks"] = [h.as_list() for h in self.hunks]
        return out

    @classmethod
    def from_json(cls, data: dict) -> NoteDrift:
        if data.get("status") not in STATUSES:
            raise DriftError(f"note {data.get('id')!r}: status {data.get('status')!r} is not one of {', '.join(STATUSES)}")
        new = data.get("new") or [None, None]
        return cls(
            id=data["id"], old_start=data["old"][0], old_end=data["old"][1], old_hash=data["old_hash"],
            status=data["status"], new_start=new[0], new_end=new[1], new_hash=data.get("new_hash"),
            hunks=tuple(Hunk(*h) for h in data.get("hunks", [])),
        )


@dataclass(frozen=True)
class FileDrift:
    """One annotated file in the later release: its bytes' hash there, or gone; each note's fate."""

    annotation: str  # the note file, relative to the repository: annotations/v0.33.0/<path>.md
    upstream: str
    old_sha256: str
    new_sha256: str | None  # None: the later release has no file at this path
    notes: tuple[NoteDrift, ...] = ()
    gone_notes: int = 0  # notes of a file that is gone (reported by count, not one by one)
    #: spans of non-blank new lines inside no note's new range (code the later release added
    #: between notes, or that no note covered before), blank lines bridged
    uncovered: tuple[tuple[int, int], ...] = ()

    @property
    def status(self) -> str:
        """``gone``, ``unchanged`` (the same bytes) or ``changed``."""
        if self.new_sha256 is None:
            return "gone"
        return "unchanged" if self.new_sha256 == self.old_sha256 else "changed"

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in STATUSES}
        for note in self.notes:
            out[note.status] += 1
        out["gone"] += self.gone_notes
        return out

    def note(self, note_id: str) -> NoteDrift | None:
        return next((n for n in self.notes if n.id == note_id), None)

    def to_json(self) -> dict:
        out: dict = {"annotation": self.annotation, "upstream": self.upstream, "status": self.status,
                     "old_sha256": self.old_sha256, "new_sha256": self.new_sha256}
        if self.new_sha256 is None:
            out["gone_notes"] = self.gone_notes
        else:
            out["notes"] = [n.to_json() for n in self.notes]
            out["uncovered"] = [list(span) for span in self.uncovered]
        return out

    @classmethod
    def from_json(cls, data: dict) -> FileDrift:
        return cls(
            annotation=data["annotation"], upstream=data["upstream"], old_sha256=data["old_sha256"],
            new_sha256=data["new_sha256"], notes=tuple(NoteDrift.from_json(n) for n in data.get("notes", [])),
            gone_notes=data.get("gone_notes", 0), uncovered=tuple(tuple(s) for s in data.get("uncovered", [])),
        )


@dataclass(frozen=True)
class DriftReport:
    """Every annotated file of one pinned release, followed into one later release."""

    from_version: str
    to_version: str
    sdists: dict[str, dict[str, str]]  # version -> {"file": archive name, "sha256": verified hash}
    files: tuple[FileDrift, ...] = field(default_factory=tuple)

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in STATUSES}
        for f in self.files:
            for status, n in f.counts().items():
                out[status] += n
        return out

    def file(self, annotation: str) -> FileDrift | None:
        return next((f for f in self.files if f.annotation == annotation), None)

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "from": self.from_version, "to": self.to_version, "sdists": self.sdists,
                "counts": self.counts(), "files": [f.to_json() for f in self.files]}

    def dumps(self) -> str:
        """The committed form: indented, with each list of line numbers on one line."""
        text = json.dumps(self.to_json(), indent=1)
        text = re.sub(r"\[\s*(-?\d+(?:,\s*-?\d+)*)\s*\]", lambda m: "[" + re.sub(r",\s*", ", ", m[1]) + "]", text)
        text = re.sub(r"\[\s*(\[[-\d, ]*\](?:,\s*\[[-\d, ]*\])*)\s*\]", lambda m: "[" + re.sub(r"\],\s*\[", "], [", m[1]) + "]", text)
        return text + "\n"

    @classmethod
    def from_json(cls, data: dict) -> DriftReport:
        if data.get("schema") != SCHEMA:
            raise DriftError(f"drift report schema {data.get('schema')!r}, expected {SCHEMA}")
        return cls(data["from"], data["to"], data["sdists"], tuple(FileDrift.from_json(f) for f in data["files"]))


def report_path(from_version: str, to_version: str, root: Path = DRIFT_ROOT) -> Path:
    """``annotations/drift/v0.33.0-to-0.34.0.json``."""
    return Path(root) / f"v{from_version}-to-{to_version}.json"


def load(path: Path) -> DriftReport:
    """Read a committed report; a malformed one is a :class:`DriftError` naming the file."""
    try:
        return DriftReport.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError, IndexError) as err:
        raise DriftError(f"{path}: not a drift report: {err}") from None


def committed_reports(root: Path = DRIFT_ROOT) -> list[Path]:
    return sorted(Path(root).glob("v*-to-*.json"))


# -- the alignment ---------------------------------------------------------------------------------
def map_notes(notes: Sequence[Note], old: bytes, new: bytes) -> list[NoteDrift]:
    """Classify each note (ascending, within ``old``) against ``new``, as the module docstring defines."""
    a, b = upstream_lines(old), upstream_lines(new)
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    out: list[NoteDrift] = []
    for note in notes:
        if note.start < 1 or note.end > len(a) or note.end < note.start:
            raise DriftError(f"note `{note.id}` {note.range_text} lies outside the old file of {len(a)} lines")
        out.append(_classify(note, a, b, ops))
    return out


def _classify(note: Note, a: list[bytes], b: list[bytes], ops: list[tuple[str, int, int, int, int]]) -> NoteDrift:
    s0, e0 = note.start - 1, note.end  # half-open, 0-based
    old_hash = range_hash(a, note.start, note.end)
    touched = [op for op in ops if _touches(op, s0, e0)]
    if len(touched) == 1 and touched[0][0] == "equal":
        shift = touched[0][3] - touched[0][1]
        start, end = note.start + shift, note.end + shift
        return NoteDrift(note.id, note.start, note.end, old_hash, "unchanged" if shift == 0 else "moved",
                         start, end, range_hash(b, start, end))
    images: list[int] = []  # 0-based new lines corresponding to the note
    hunks: list[Hunk] = []
    for tag, i1, i2, j1, j2 in touched:
        lo, hi = max(i1, s0), min(i2, e0)
        if tag == "equal":
            images += range(j1 + lo - i1, j1 + hi - i1)
            continue
        images += range(j1, j2)  # replace: the whole replacement; insert: the inserted lines; delete: none
        if tag == "insert":
            lo = hi = i1
        hunks.append(Hunk(lo + 1, hi, j1 + 1, j2))
    if not images:
        return NoteDrift(note.id, note.start, note.end, old_hash, "gone", hunks=tuple(hunks))
    start, end = min(images) + 1, max(images) + 1
    return NoteDrift(note.id, note.start, note.end, old_hash, "changed", start, end, range_hash(b, start, end), tuple(hunks))


def _touches(op: tuple[str, int, int, int, int], s0: int, e0: int) -> bool:
    """Whether an opcode concerns the old lines ``s0..e0-1``; an insertion only strictly inside them."""
    tag, i1, i2 = op[:3]
    if tag == "insert":
        return s0 < i1 < e0
    return i1 < e0 and i2 > s0


# -- whole releases ----------------------------------------------------------------------------------
def file_drift(annotation: AnnotationFile, old: bytes, new: bytes | None, repo: Path) -> FileDrift:
    """One annotated file against the later release's bytes (``None``: the path is not there)."""
    rel = relative_path(annotation.path, repo)
    old_sha = hashlib.sha256(old).hexdigest()
    if new is None:
        return FileDrift(rel, annotation.upstream, old_sha, None, gone_notes=len(annotation.notes))
    notes = tuple(map_notes(annotation.notes, old, new))
    return FileDrift(rel, annotation.upstream, old_sha, hashlib.sha256(new).hexdigest(), notes,
                     uncovered=uncovered_spans(notes, upstream_lines(new)))


def uncovered_spans(notes: Iterable[NoteDrift], lines: list[bytes]) -> tuple[tuple[int, int], ...]:
    """Spans of non-blank ``lines`` (1-based) inside no note's new range; blank lines are bridged."""
    covered = set()
    for n in notes:
        if n.new_start is not None and n.new_end is not None:
            covered.update(range(n.new_start, n.new_end + 1))
    spans: list[list[int]] = []
    for number, line in enumerate(lines, start=1):
        if number in covered or is_blank(line):
            continue
        if spans and all(is_blank(lines[k - 1]) for k in range(spans[-1][1] + 1, number)):
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return tuple((a, b) for a, b in spans)


def relative_path(path: Path, repo: Path) -> str:
    """How a report names a note file: its path inside the repository (``annotations/v0.33.0/...md``)."""
    try:
        return Path(path).resolve().relative_to(Path(repo).resolve()).as_posix()
    except ValueError:
        return Path(path).as_posix()


def compute(
    annotations: Iterable[AnnotationFile],
    from_version: str,
    to_version: str,
    reader: Reader,
    lister: Lister,
    sdists: dict[str, dict[str, str]],
    repo: Path,
    progress: Callable[[str], None] = lambda line: None,
) -> DriftReport:
    """Follow every annotation of ``from_version`` into ``to_version``; ``sdists`` is the record of both archives."""
    in_later = set(lister(to_version))
    files: list[FileDrift] = []
    for annotation in sorted(annotations, key=lambda a: a.upstream):
        if annotation.version != from_version:
            continue
        old = reader(from_version, annotation.upstream)
        new = reader(to_version, annotation.upstream) if annotation.upstream in in_later else None
        files.append(file_drift(annotation, old, new, repo))
        progress(f"{annotation.upstream}: {files[-1].status}")
    if not files:
        raise DriftError(f"no annotation file is pinned at {from_version}")
    return DriftReport(from_version, to_version, sdists, tuple(files))


# -- what the committed report must agree with -------------------------------------------------------
def differences(committed: DriftReport, current: DriftReport) -> list[str]:
    """Sentences naming where a committed report disagrees with one computed now (empty: it agrees)."""
    if committed.to_json() == current.to_json():
        return []
    out: list[str] = []
    if (committed.from_version, committed.to_version) != (current.from_version, current.to_version):
        return [f"the report follows {committed.from_version} to {committed.to_version}, not "
                f"{current.from_version} to {current.to_version}"]
    for version, record in current.sdists.items():
        if committed.sdists.get(version) != record:
            out.append(f"sdist of {version}: committed {committed.sdists.get(version)}, fetched {record}")
    old_files = {f.annotation: f for f in committed.files}
    new_files = {f.annotation: f for f in current.files}
    for name in sorted(set(old_files) | set(new_files)):
        was, now = old_files.get(name), new_files.get(name)
        if was is None or now is None:
            out.append(f"{name}: {'not in the committed report' if was is None else 'no longer annotated'}")
            continue
        if (was.new_sha256, was.old_sha256, was.gone_notes, was.uncovered) != (
            now.new_sha256, now.old_sha256, now.gone_notes, now.uncovered
        ):
            out.append(f"{name}: committed file hashes or status differ from the bytes ({was.status} vs {now.status})")
        old_notes = {n.id: n for n in was.notes}
        new_notes = {n.id: n for n in now.notes}
        for note_id in sorted(set(old_notes) | set(new_notes)):
            a, b = old_notes.get(note_id), new_notes.get(note_id)
            if a != b:
                out.append(f"{name}: note `{note_id}`: committed {_describe(a)}, the bytes say {_describe(b)}")
    return out or ["the committed report differs from the computed one in its layout"]


def _describe(note: NoteDrift | None) -> str:
    if note is None:
        return "nothing"
    where = f" (now {note.new_range_text})" if note.new_range_text else ""
    return f"{note.old_range_text} {note.status}{where}"


def later_owed_by(versions: Iterable[str]) -> str:
    """The pinned release whose changed notes owe a ``- later:`` line: the newest. An older pin
    (0.10.2) is kept as the V0-era text on purpose, and its drift is shown, not narrated."""
    return max(versions, key=version_key)


def owes_later_line(status: str, note: Note, to_version: str) -> bool:
    """Whether a note of the owing release (:func:`later_owed_by`) with this drift ``status`` lacks
    the ``- later: <to_version>:`` line it owes: a changed note must say what changed."""
    return status == "changed" and to_version not in note.later


def missing_later_notes(report: DriftReport, annotations: Iterable[AnnotationFile], repo: Path) -> list[str]:
    """Changed notes that say nothing about the later release (no ``- later: <version>:`` line)."""
    by_path = {relative_path(a.path, repo): a for a in annotations}
    out: list[str] = []
    for f in report.files:
        annotation = by_path.get(f.annotation)
        if annotation is None:
            continue
        for drift in f.notes:
            note = annotation.note(drift.id)
            if note is not None and owes_later_line(drift.status, note, report.to_version):
                out.append(f"{f.annotation}: note `{drift.id}` {drift.old_range_text} changed in "
                           f"{report.to_version} (now {drift.new_range_text}) but has no '- later: {report.to_version}:' line")
    return out


def summary(report: DriftReport) -> str:
    """The terminal summary: one row per file, the changed and gone notes, the totals, the largest change."""
    lines = [f"notes of vLLM {report.from_version} followed into {report.to_version} "
             f"(sdist sha256 {report.sdists.get(report.to_version, {}).get('sha256', '?')[:16]}...)"]
    lines.append(f"{'file':<56} {'file':>9} {'unchanged':>9} {'moved':>6} {'changed':>7} {'gone':>5}")
    for f in report.files:
        c = f.counts()
        lines.append(f"{f.upstream:<56} {f.status:>9} {c['unchanged']:>9} {c['moved']:>6} {c['changed']:>7} {c['gone']:>5}")
    total = report.counts()
    lines.append(f"{'total':<56} {'':>9} {total['unchanged']:>9} {total['moved']:>6} {total['changed']:>7} {total['gone']:>5}")
    changed = [(n, f) for f in report.files for n in f.notes if n.status in ("changed", "gone")]
    for note, f in changed:
        now = f" -> {report.to_version} {note.new_range_text}" if note.new_range_text else ""
        lines.append(f"  {note.status:<8} {f.upstream} `{note.id}` {note.old_range_text}{now}"
                     f" ({len(note.hunks)} hunks, {note.changed_lines} lines)")
    if changed:
        note, f = max(changed, key=lambda pair: pair[0].changed_lines)
        lines.append(f"largest change: {f.upstream} `{note.id}` {note.old_range_text} -> {note.new_range_text} "
                     f"({note.changed_lines} old+new lines in {len(note.hunks)} hunks)")
    return "\n".join(lines)


# -- following releases and checking what is committed -----------------------------------------------
SdistOf = Callable[[str], dict[str, str]]  # version -> {"file": archive name, "sha256": verified hash}


def sdist_record(version: str) -> dict[str, str]:
    """The verified record of vLLM ``version``'s sdist (fetched by name and version if not cached)."""
    from upstream import fetch

    found = fetch.sdist(version)
    return {"file": found.filename, "sha256": found.sha256}


def version_key(version: str) -> tuple[int, ...]:
    """Order releases numerically: 0.10.2 < 0.33.0 < 0.34.0."""
    try:
        return tuple(int(x) for x in version.split("."))
    except ValueError:
        raise DriftError(f"{version!r} is not a release number like 0.34.0") from None


def follow_plan(to_version: str, annotations: Iterable[AnnotationFile]) -> list[str]:
    """The pinned releases older than ``to_version``: one report each."""
    later = version_key(to_version)
    return sorted({a.version for a in annotations if version_key(a.version) < later}, key=version_key)


def follow(
    to_version: str,
    annotations: Sequence[AnnotationFile],
    reader: Reader,
    lister: Lister,
    sdist_of: SdistOf,
    repo: Path,
    progress: Callable[[str], None] = lambda line: None,
) -> list[DriftReport]:
    """One report per pinned release older than ``to_version``: its notes followed into ``to_version``."""
    froms = follow_plan(to_version, annotations)
    if not froms:
        raise DriftError(f"no pinned release is older than {to_version}")
    return [
        compute(annotations, v, to_version, reader, lister, {w: sdist_of(w) for w in (v, to_version)}, repo, progress)
        for v in froms
    ]


def check_committed(
    annotations: Sequence[AnnotationFile],
    reader: Reader,
    lister: Lister,
    sdist_of: SdistOf,
    repo: Path,
    root: Path = DRIFT_ROOT,
) -> list[str]:
    """Problems with the committed reports: missing, stale against the bytes, or changed notes left unexplained.

    The newest ``to`` release among the committed reports is the one the project follows; every
    pinned release older than it must have a report for it.
    """
    paths = committed_reports(root)
    if not paths:
        return [f"{root}: no drift report committed; run `python -m annotations drift VERSION`"]
    problems: list[str] = []
    committed: list[DriftReport] = []
    for path in paths:
        try:
            committed.append(load(path))
        except DriftError as err:
            problems.append(str(err))
    if problems:
        return problems
    newest = max((r.to_version for r in committed), key=version_key)
    newest_pinned = later_owed_by(a.version for a in annotations)
    expected = {report_path(v, newest, root) for v in follow_plan(newest, annotations)}
    for path in sorted(expected - set(paths)):
        problems.append(f"{path}: missing; run `python -m annotations drift {newest}`")
    for path, report in zip(paths, committed):
        if path != report_path(report.from_version, report.to_version, root):
            problems.append(f"{path}: holds {report.from_version} to {report.to_version}; its name must say so")
            continue
        current = compute(annotations, report.from_version, report.to_version, reader, lister,
                          {v: sdist_of(v) for v in (report.from_version, report.to_version)}, repo)
        problems += [f"{path}: {d}" for d in differences(report, current)]
        if report.from_version == newest_pinned:
            problems += missing_later_notes(current, annotations, repo)
    return problems
