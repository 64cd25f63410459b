"""Audit worksheets: notes chosen by the auditor, each printed beside its sha256-verified lines.

``python -m annotations sample`` lets someone who did not write the notes audit them without
trusting this repository's tools for anything but fetching the bytes: the auditor's seed (or list
of note ids) chooses the notes, and the worksheet gives, for each one, the note exactly as written
in its annotation file, the header lines and shared definitions that decide its reach status, its
citation, the upstream lines it covers (the file refused unless its sha256 is the header's) and
empty verdict lines. The draw is reproducible: the same seed over the same notes draws the same
notes, and the worksheet names the command that drew them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from annotations import cite
from annotations import serving as serving_definitions
from annotations.model import ANNOTATIONS_ROOT, AnnotationFile, Note, Reader, annotation_paths, parse

VERDICTS = ("true", "imprecise", "wrong", "not fully audited")


class SampleError(ValueError):
    """A draw that cannot be made: too many notes asked for, or a note id that names no note."""


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
    """The notes the auditor names, each a note id or ``v<version>/<path>#<id>``, in the order given.

    Raises :class:`SampleError` naming every reference that matches no note or several notes.
    """
    chosen: list[Drawn] = []
    problems: list[str] = []
    for reference in references:
        matches = [d for d in notes if reference in (d.note.id, d.qualified_id)]
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


def raw_note(drawn: Drawn) -> str:
    """The note's lines exactly as its annotation file holds them, from its heading to the next."""
    lines = drawn.annotation.path.read_text(encoding="utf-8").split("\n")
    following = [n.heading_line for n in drawn.annotation.notes if n.heading_line > drawn.note.heading_line]
    stop = min(following) - 1 if following else len(lines)
    return "\n".join(lines[drawn.note.heading_line - 1 : stop]).strip("\n")


def header_lines(annotation: AnnotationFile) -> list[str]:
    """The file's ``serving:`` and ``reach:`` header lines as written (they decide a note's status)."""
    lines = annotation.path.read_text(encoding="utf-8").split("\n")
    end = lines.index("---", 1) if lines and lines[0] == "---" and "---" in lines[1:] else 0
    return [line for line in lines[1:end] if line.startswith(("serving:", "reach:"))]


def included_definitions(drawn: Drawn, root: Path) -> list[tuple[str, str]]:
    """(name, paragraph) of every ``{{name}}`` the note or its header lines include, in name order."""
    text = raw_note(drawn) + "\n" + "\n".join(header_lines(drawn.annotation))
    definitions = serving_definitions.definitions_at(root)
    version = drawn.annotation.version
    return [(name, definitions.get((version, name), "(not defined)"))
            for name in sorted(serving_definitions.names_used(text))]


def _quote(markdown: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in markdown.split("\n"))


def worksheet(chosen: list[Drawn], reader: Reader, site: str, how: str, commit: str,
              population_size: int, root: Path = ANNOTATIONS_ROOT) -> str:
    """The worksheet as Markdown: how the notes were chosen, then one section per note.

    Raises :class:`annotations.cite.CiteError` when a file's bytes are not the annotated ones or a
    note no longer matches its lines (run ``python -m annotations check``): nothing is written then.
    """
    out = [
        "# Audit worksheet",
        "",
        f"Chosen by `{how}` at commit `{commit}` of this repository: {len(chosen)} of the "
        f"{population_size} notes under `annotations/`.",
        "",
        "For each note: read every sentence against the upstream lines below and the code around them "
        "in the pinned release; check its reach status (the note's own `- reach:` lines, else its "
        "file's `reach:` header) against the callers it cites; recompute every number; follow its "
        "`- ref:` (the reference symbol in `reference/`), `- prop:` (the property in `conformance/`) "
        "and `- later:` links (the later release's lines). Verdicts: "
        + ", ".join(f"**{v}**" for v in VERDICTS)
        + ". For each verdict but true, quote the sentence, give the evidence (file and line "
        "numbers in the release, a computation or an experiment) and a corrected sentence.",
    ]
    for number, drawn in enumerate(chosen, start=1):
        af, note = drawn.annotation, drawn.note
        block = cite.quoted(af, note, reader)
        citation = cite.note_citation(af, note).markdown(site)
        relative = af.path.relative_to(root.parent) if af.path.is_relative_to(root.parent) else af.path
        out += ["", f"## {number}. `{drawn.qualified_id}`", "",
                f"- cite: {citation}",
                f"- written at: `{relative}` line {note.heading_line}", ""]
        header = header_lines(af)
        if header:
            out += ["Its file's header lines:", "", "```text", *header, "```", ""]
        definitions = included_definitions(drawn, root)
        if definitions:
            out += ["Shared definitions it includes (`annotations/serving.md`):", ""]
            out += [f"- `{af.version}/{name}`: {text}" for name, text in definitions]
            out.append("")
        out += ["The note as written:", "", _quote(raw_note(drawn)), "",
                f"The upstream lines, sha256-verified ({af.version}, `{af.upstream}` {note.range_text}):", "",
                block, "",
                "- verdict:", "- evidence:", "- corrected text:"]
    return "\n".join(out) + "\n"
