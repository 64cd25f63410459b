"""Audit worksheets: notes chosen by the auditor, each printed beside its sha256-verified lines.

``python -m annotations sample`` serves someone who did not write the notes: their seed (or list
of note ids) chooses the notes, and the worksheet gives, for each one, the note exactly as written
in its annotation file, the upstream lines it covers with the lines around them and their numbers
(the file refused unless its sha256 is the one the annotation header records), where its ``- ref:``
symbols are defined and what its ``- prop:`` properties compare, what became of its lines in each
later release the committed drift reports follow, and empty verdict lines for each thing to judge.
The header lines that decide the notes' reach statuses, with the shared definitions they include,
are printed once per file at the end, and each shared definition and property once. What the
auditor still takes from this repository's tools can be checked by hand: the number of notes drawn
from (one per ``## `` note heading under ``annotations/v*/``), each note's file and line, the
upstream sha256 against the release's sdist, each ref's and property's file and line, and the
later-release fates, which ``python -m annotations drift --check`` recomputes from the sdists.
The draw is reproducible: the same seed over the same notes draws the same notes, and the
worksheet names the command that drew them.
"""

from __future__ import annotations

import functools
import importlib.util
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from annotations import cite, drift
from annotations import serving as serving_definitions
from annotations.check import definition_line, reference_source, resolve_ref, source_object
from annotations.citations import GITHUB_BLOB
from annotations.model import ANNOTATIONS_ROOT, AnnotationFile, Note, Reader, annotation_paths, parse

VERDICTS = ("true", "imprecise", "wrong", "not fully audited")
#: what a verdict is given for, one line each on the worksheet
JUDGED = ("prose", "reach status", "links (ref, prop, see)", "later releases")
CONTEXT_LINES = 5  # upstream lines shown before and after a note's range
DEFAULT_COUNT = 20  # notes drawn when the auditor names no count


class SampleError(ValueError):
    """A request that cannot be met: a count outside 1 to the number of notes, a reference that names
    no note or several, a negative context, or options that contradict each other."""


@dataclass(frozen=True)
class Drawn:
    """One note chosen for the audit, with the annotation file it belongs to."""

    annotation: AnnotationFile
    note: Note

    @property
    def qualified_id(self) -> str:
        """``v<version>/<path>#<id>``: unique even where two files use the same id."""
        return f"{self.annotation.cite_path}#{self.note.id}"


def population(root: Path = ANNOTATIONS_ROOT) -> list[Drawn]:
    """Every note of every annotation file, ordered by file and line (the order a draw indexes)."""
    files = sorted((parse(path) for path in annotation_paths(root)), key=lambda af: af.cite_path)
    return [Drawn(af, note) for af in files for note in af.notes]


def draw(notes: list[Drawn], count: int, seed: int) -> list[Drawn]:
    """``count`` distinct notes chosen by ``random.Random(seed)``, in file and line order."""
    if count < 1 or count > len(notes):
        raise SampleError(f"cannot draw {count} notes from {len(notes)}: ask for 1 to {len(notes)}")
    chosen = random.Random(seed).sample(range(len(notes)), count)
    return [notes[i] for i in sorted(chosen)]


def named(notes: list[Drawn], references: list[str]) -> list[Drawn]:
    """The notes the auditor names, in the order given, each as ``python -m annotations cite`` takes it:
    a note id, or ``v<version>/<path>#<id>`` where ids repeat.

    Raises :class:`SampleError` naming every reference that matches no note or several notes.
    """
    chosen: list[Drawn] = []
    problems: list[str] = []
    for reference in references:
        matches = [d for d in notes if cite.names_note(reference, d.annotation, d.note)]
        if len(matches) == 1:
            if matches[0] not in chosen:
                chosen.append(matches[0])
        elif not matches:
            problems.append(f"`{reference}` names no note")
        else:
            problems.append(f"`{reference}` is in {len(matches)} files ("
                            + ", ".join(d.qualified_id for d in matches) + "): name one as v<version>/<path>#<id>")
    if problems:
        raise SampleError("; ".join(problems))
    return chosen


# -- what the worksheet shows for one note ----------------------------------------------------------
def raw_note(drawn: Drawn) -> str:
    """The note's lines exactly as its annotation file holds them, from its heading to the next."""
    lines = drawn.annotation.path.read_text(encoding="utf-8").split("\n")
    following = [n.heading_line for n in drawn.annotation.notes if n.heading_line > drawn.note.heading_line]
    stop = min(following) - 1 if following else len(lines)
    return "\n".join(lines[drawn.note.heading_line - 1 : stop]).strip("\n")


def definitions_in(text: str, version: str, root: Path) -> list[tuple[str, str]]:
    """(name, paragraph) of every ``{{name}}`` that ``text`` includes, in name order."""
    definitions = serving_definitions.definitions_at(root)
    return [(name, definitions.get((version, name), "(not defined)"))
            for name in sorted(serving_definitions.names_used(text))]


def excerpt(annotation: AnnotationFile, note: Note, reader: Reader, context: int = CONTEXT_LINES) -> str:
    """The note's upstream lines with ``context`` lines either side, numbered; its own marked ``>``.

    Raises :class:`annotations.cite.CiteError` for bytes that are not the annotated file's, or a
    note that no longer matches its lines.
    """
    lines = cite.note_lines(annotation, note, reader)
    first, last = max(1, note.start - context), min(len(lines), note.end + context)
    width = len(str(last))
    rows = []
    for number in range(first, last + 1):
        mark = ">" if note.start <= number <= note.end else " "
        text = lines[number - 1].decode("utf-8", "replace").rstrip("\n")
        rows.append(f"{mark} {number:>{width}} | {text}".rstrip())
    return cite.fenced("\n".join(rows), "text")


def reference_location(dotted: str, repo: Path) -> str:
    """Where a ``- ref:`` symbol is defined: ``reference/...py L<n>``, or why that is not known."""
    if resolve_ref(dotted) is not None:
        return "not found (run `python -m annotations check`)"
    found = reference_source(dotted)
    if found is None:
        return ("not located (no def, class or plain assignment in the top-level body of its module or "
                "class that the locator can show is still the binding in effect: bound or rebound by an "
                "import, any star import, an unpacking, an augmented assignment or inside a block, or "
                "inherited, for example)")
    return _location_text(*found, repo)


def _location_text(source: Path, line: int, repo: Path) -> str:
    """``path L<n>``, the path relative to ``repo`` where it lies inside it."""
    return f"`{drift.relative_path(source, repo)}` L{line}"


def property_location(run: object, repo: Path) -> str:
    """Where the function that runs a property is defined, followed through a ``functools.partial``
    and the decorators that keep ``__wrapped__`` (any other decorator is located at its wrapper):
    ``conformance/...py L<n>``, the line of its first decorator, else of its ``def`` or ``lambda``,
    or ``""``."""
    found = definition_line(source_object(run.func if isinstance(run, functools.partial) else run))
    return "" if found is None else _location_text(*found, repo)


def property_checks(repo: Path) -> tuple[dict[str, str] | None, str]:
    """Each conformance property's sentence of what it compares, with where its runner is defined,
    read from the registry of the checkout ``repo`` (imported here when called, so that importing
    this module imports nothing from ``conformance``); or ``None`` and the reason when the importable
    ``conformance`` is not ``repo``'s own (checked before importing it) or its registry cannot be
    loaded."""
    spec = importlib.util.find_spec("conformance")
    home = Path(spec.origin).resolve().parent if spec is not None and spec.origin else None
    if home != (repo / "conformance").resolve():
        return None, f"the importable conformance is {home or 'missing'}, not this checkout's"
    try:
        from conformance.properties import all_properties

        found = all_properties()
    except Exception as err:  # noqa: BLE001 (any failure to load the registry is reported, not raised)
        return None, f"{type(err).__name__}: {err}"
    out = {}
    for name, prop in found.items():
        where = property_location(prop.run, repo)
        out[name] = prop.checks + (f" (run by {where})" if where else "")
    return out, ""


def see_location(target: str, root: Path) -> str:
    """Where a ``- see:`` target (``v<version>/<path>#<id>``) is written: its file and heading line."""
    file_part, _, note_id = target.partition("#")
    path = root / f"{file_part}.md"
    try:
        note = parse(path).note(note_id)
    except (OSError, ValueError):
        note = None
    if note is None:
        return "not found (run `python -m annotations check`)"
    return f"`{drift.relative_path(path, root.parent)}` line {note.heading_line}"


def later_fates(annotation: AnnotationFile, note: Note, reports: list[drift.DriftReport], repo: Path,
                newest_pinned: str) -> list[str]:
    """What each committed drift report says became of the note's lines, one sentence a release.

    A changed note owes a ``- later:`` line only in ``newest_pinned`` (:func:`annotations.drift.later_owed_by`),
    as ``drift --check`` requires; an older pin's drift is shown, not narrated.
    """
    relative = drift.relative_path(annotation.path, repo)
    fates = []
    for report in reports:
        if report.from_version != annotation.version:
            continue
        followed = report.file(relative)
        fate = followed.note(note.id) if followed else None
        if followed is not None and followed.new_sha256 is None:
            fates.append(f"{report.to_version}: the file is gone")
        elif fate is None:
            fates.append(f"{report.to_version}: not followed (run `python -m annotations drift --check`)")
        elif (fate.old_start, fate.old_end, fate.old_hash) != (note.start, note.end, note.hash):
            fates.append(f"{report.to_version}: the committed report follows {fate.old_range_text}, not this note's "
                         f"{note.range_text} (stale; run `python -m annotations drift --check`)")
        else:
            where = f" (now {fate.new_range_text})" if fate.new_range_text else ""
            owed = (" (a `- later:` line is owed)" if annotation.version == newest_pinned
                    and drift.owes_later_line(fate.status, note, report.to_version) else "")
            fates.append(f"{report.to_version}: {fate.status}{where}{owed}")
    return fates


def _quote(markdown: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in markdown.split("\n"))


def _file_letter(index: int) -> str:
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(ord("A") + rest) + letters
    return letters


def worksheet(chosen: list[Drawn], reader: Reader, how: str, commit: str, population_size: int,
              root: Path = ANNOTATIONS_ROOT, properties: Mapping[str, str] | None = None,
              context: int = CONTEXT_LINES, properties_unavailable: str = "") -> str:
    """The worksheet as Markdown: how the notes were chosen, one section per note, then the files.

    ``properties`` maps a property name to the sentence saying what it compares and where it runs
    (:func:`property_checks`); ``None`` with ``properties_unavailable`` says why the registry could
    not be read. Raises :class:`annotations.cite.CiteError` when a file's bytes are not
    the annotated ones or a note no longer matches its lines: nothing is written then.
    """
    repo = root.parent
    reports = [drift.load(path) for path in drift.committed_reports(root / "drift")]
    newest_pinned = drift.later_owed_by(path.relative_to(root).parts[0][1:] for path in annotation_paths(root))
    files: list[AnnotationFile] = []
    for drawn in chosen:
        if drawn.annotation not in files:
            files.append(drawn.annotation)
    letter = {af.cite_path: _file_letter(i) for i, af in enumerate(files)}
    used: dict[tuple[str, str], str] = {}  # every shared definition the notes or their headers include
    out = [
        "# Audit worksheet",
        "",
        f"Chosen by `{how}` at commit `{commit}` of this repository: {len(chosen)} of the "
        f"{population_size} notes under `annotations/`.",
        "",
        "For each note: read every sentence against the upstream lines below (marked `>`) and the code "
        "around them in the pinned release; check its reach status (the note's own `- reach:` lines, "
        "else its file's `reach:` header lines, printed once per file under *Files* at the end) against "
        "the callers it cites; recompute every number; follow its `- ref:` (the reference symbol), "
        "`- prop:` (the conformance property), `- see:` (another note) and `- later:` links, and the "
        "later releases' lines. "
        "Give each of " + ", ".join(JUDGED) + " a verdict: " + ", ".join(f"**{v}**" for v in VERDICTS)
        + ". For each verdict but true, quote the sentence, give the evidence (file and line numbers in "
        "the release, a computation or an experiment) and a corrected sentence.",
    ]
    for number, drawn in enumerate(chosen, start=1):
        af, note = drawn.annotation, drawn.note
        block = excerpt(af, note, reader, context)
        citation = cite.note_citation(af, note)
        upstream = f"{GITHUB_BLOB}v{af.version}/{af.upstream}#{note.range_text}"
        out += ["", f"## {number}. `{drawn.qualified_id}`", "",
                f"- lines: [`{af.upstream}` {note.range_text}]({upstream}) at v{af.version}, content hash "
                f"`{citation.hash}`",
                f"- written at: `{drift.relative_path(af.path, repo)}` line {note.heading_line}",
                f"- its file's header lines and their definitions: *Files*, {letter[af.cite_path]}"]
        out += [f"- ref `{ref}`: {reference_location(ref, repo)}" for ref in note.refs]
        out += [f"- prop `{prop}`: under *Properties* at the end" for prop in note.props]
        out += [f"- see `{target}`: {see_location(target, root)}" for target in note.sees]
        out += [f"- in {fate}" for fate in later_fates(af, note, reports, repo, newest_pinned)]
        note_text = raw_note(drawn)
        own = definitions_in(note_text, af.version, root)
        used.update({(af.version, name): text for name, text in own})
        if own:
            out.append("- shared definitions the note itself includes: "
                       + ", ".join(f"`{af.version}/{name}`" for name, _ in own) + " (under *Definitions* at the end)")
        out += ["", "The note as written:", "", _quote(note_text), "",
                f"The upstream lines, sha256-verified, with up to {context} lines around them:", "",
                block, ""]
        out += [f"- verdict, {judged}:" for judged in JUDGED]
        out += ["- evidence:", "- corrected text:"]
    out += ["", "## Files", "",
            "Each file's `serving:` and `reach:` header lines as written. A note without its own "
            "`- reach:` line takes its file's routes."]
    for af in files:
        header = list(af.status_lines)
        out += ["", f"### {letter[af.cite_path]}. `{af.cite_path}`", ""]
        out += ["```text", *header, "```"] if header else ["(no `serving:` or `reach:` header lines)"]
        included = definitions_in("\n".join(header), af.version, root)
        if included:
            out += ["", "It includes " + ", ".join(f"`{af.version}/{name}`" for name, _ in included) + "."]
        used.update({(af.version, name): text for name, text in included})
    linked_properties = sorted({prop for drawn in chosen for prop in drawn.note.props})
    if linked_properties:
        out += ["", "## Properties", "", "Each conformance property the notes link, once: what it compares.", ""]
        if properties is None:
            out.append(f"(conformance's registry could not be loaded here: {properties_unavailable or 'not given'})")
            out += [f"- `{prop}`" for prop in linked_properties]
        else:
            out += [f"- `{prop}`: " + (properties.get(prop) or "(not in conformance's registry)") for prop in linked_properties]
    if used:
        out += ["", "## Definitions", "",
                "Each shared definition (`annotations/serving.md`) that the notes or their headers include, once.", ""]
        out += [f"- `{version}/{name}`: {text}" for (version, name), text in sorted(used.items())]
    return "\n".join(out) + "\n"
