"""The annotation file format as data: a strict parser for ``annotations/v<VERSION>/<path>.md``.

An annotation file is a contract between three readers: people studying vLLM, the docs site that
places our notes beside the real upstream lines, and the checker that proves the notes still
describe those lines. The parser is therefore strict: anything it cannot read unambiguously is an
:class:`AnnotationFormatError` naming the file and line, never a silent guess. It checks syntax
only; whether ranges fit the upstream file, tile it and keep their hashes is the checker's job
(``annotations.check``), because that needs the upstream bytes. A ``serving:`` header's
``{{name}}`` includes are expanded from the shared definitions (``annotations.serving``).
``stamp_text`` is the one writer: it fills placeholder hashes from verified upstream bytes and
changes nothing else.

The format is specified in ``annotations/FORMAT.md``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from annotations import serving as serving_definitions
from annotations.reach import Reach, ReachError, combine_routes, parse_reach

ANNOTATIONS_ROOT = Path(__file__).resolve().parent

#: A hash written like this is a placeholder that ``stamp`` fills in.
UNSTAMPED_HASH = "?" * 12
#: A header ``sha256`` written like this is a placeholder that ``stamp`` fills in.
UNSTAMPED_SHA256 = "?"

Reader = Callable[[str, str], bytes]  # (version, upstream path) -> the upstream file's bytes

HEADER_KEYS = ("upstream", "version", "commit", "sha256", "coverage", "title")
#: Header keys that may be omitted: the default reachability of the notes and what serving means.
OPTIONAL_HEADER_KEYS = ("reach", "serving")
LINK_KINDS = ("ref", "prop", "see", "reach", "later")

NOTE_ID = r"[a-z0-9_.-]+"
_HEADING = re.compile(
    r"^## `(?P<id>" + NOTE_ID + r")` +L(?P<start>[0-9]+)(?:-L(?P<end>[0-9]+))? +· +"
    r"(?P<hash>[0-9a-f]{12}|\?{12}) *$"
)
_LINK = re.compile(r"^- (?P<kind>[a-z]+): *(?P<value>\S.*?) *$")
_HEADER_LINE = re.compile(r"^(?P<key>[a-z0-9_]+): *(?P<value>.*?)(?: +#.*)? *$")
#: A line that opens or closes a fenced code block.
FENCE = re.compile(r"^ {0,3}(```|~~~)")
_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
#: A ``see`` target: ``<version>/<upstream path>#<note id>``, version with a leading ``v``.
SEE_TARGET = re.compile(r"^v(?P<version>[0-9]+\.[0-9]+\.[0-9]+)/(?P<path>[^#\s]+)#(?P<id>" + NOTE_ID + r")$")


def fenced_lines(lines: Iterable[str]) -> Iterator[tuple[str, bool]]:
    """Each Markdown line with whether it is fenced code: a fence line itself or a line between two."""
    inside = False
    for line in lines:
        if FENCE.match(line):
            inside = not inside
            yield line, True
        else:
            yield line, inside


class AnnotationFormatError(ValueError):
    """An annotation file breaks the format; names the file and the 1-based line."""

    def __init__(self, path: Path | str, line: int, message: str) -> None:
        self.path = Path(path)
        self.line = line
        self.message = message
        super().__init__(f"{path}:{line}: {message}")


@dataclass
class Note:
    """One note: the prose about upstream lines ``start..end`` (1-based, inclusive)."""

    id: str
    start: int
    end: int
    hash: str  # first 12 hex digits of sha256 over the covered lines, or UNSTAMPED_HASH
    body: str  # Markdown prose, without the link lines
    refs: list[str] = field(default_factory=list)
    props: list[str] = field(default_factory=list)
    sees: list[str] = field(default_factory=list)
    heading_line: int = 0  # 1-based line of the ``##`` heading in the annotation file
    reach: Reach | None = None  # the note's own reachability status (``- reach:``), if any
    #: what changed in a later release, in our words (``- later: <version>: <Markdown>``), by version
    later: dict[str, str] = field(default_factory=dict)

    @property
    def range_text(self) -> str:
        """The range as written in headings and messages: ``L3`` or ``L3-L9``."""
        return f"L{self.start}" if self.start == self.end else f"L{self.start}-L{self.end}"


@dataclass
class AnnotationFile:
    """A parsed annotation file: the header, the introduction and the notes in file order."""

    path: Path
    upstream: str  # upstream path inside the release, e.g. vllm/core/block_manager.py
    version: str  # release, e.g. 0.10.2
    commit: str  # short commit id of the release
    sha256: str  # of the whole upstream file, or UNSTAMPED_SHA256
    coverage: float  # minimum % of non-blank upstream lines that notes must cover
    title: str
    intro: str
    notes: list[Note]
    reach: Reach | None = None  # the header's default status for notes without their own
    serving: str = ""  # what "the serving path" means for this file (header ``serving:``, expanded)
    #: the shared definitions its ``serving:`` and ``reach:`` lines include (``{{name}}``, see ``annotations.serving``)
    serving_names: frozenset[str] = frozenset()
    #: the header's ``serving:`` and ``reach:`` lines as written, ``{{name}}`` includes unexpanded
    status_lines: tuple[str, ...] = ()

    def reach_of(self, note: Note) -> Reach | None:
        """The note's reachability: its own ``- reach:`` line, else the file's default."""
        return note.reach or self.reach

    def note(self, note_id: str) -> Note | None:
        """The note with this id, or ``None``."""
        return next((n for n in self.notes if n.id == note_id), None)

    @property
    def cite_path(self) -> str:
        """How other files cite this one: ``v0.10.2/vllm/core/block_manager.py``."""
        return f"v{self.version}/{self.upstream}"


def upstream_lines(data: bytes) -> list[bytes]:
    """Split upstream bytes into lines, each keeping its trailing ``\\n`` (only ``\\n`` ends a line).

    Line numbers must agree with GitHub's ``#L`` anchors and with the hashes other tools compute,
    so we split on ``\\n`` alone and keep the bytes exact (a final line without a newline stays so).
    """
    parts = data.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def range_hash(lines: list[bytes], start: int, end: int) -> str:
    """The note hash of lines ``start..end`` (1-based, inclusive): 12 hex digits of sha256."""
    return hashlib.sha256(b"".join(lines[start - 1 : end])).hexdigest()[:12]


def is_blank(line: bytes) -> bool:
    """Blank lines (only whitespace) never need a note."""
    return not line.strip()


def _parse_header(path: Path, lines: list[str]) -> tuple[dict[str, str], int]:
    """Read the ``---`` block; return its values and the index of the first line after it."""
    if not lines or lines[0].rstrip() != "---":
        raise AnnotationFormatError(path, 1, "the file must start with a '---' header line")
    values: dict[str, str] = {}
    for index in range(1, len(lines)):
        text = lines[index].rstrip()
        if text == "---":
            break
        if not text.strip():
            continue
        match = _HEADER_LINE.match(text)
        if not match:
            raise AnnotationFormatError(path, index + 1, f"header line is not 'key: value': {text!r}")
        key = match["key"]
        if key not in HEADER_KEYS + OPTIONAL_HEADER_KEYS:
            known = ", ".join(HEADER_KEYS + OPTIONAL_HEADER_KEYS)
            raise AnnotationFormatError(path, index + 1, f"unknown header key {key!r} (known: {known})")
        if key in OPTIONAL_HEADER_KEYS:
            value = text.split(":", 1)[1].strip()  # free text: a '#' is part of it
            if key == "reach" and key in values:  # one header line per route
                values[key] += "\n" + value
                continue
            if key in values:
                raise AnnotationFormatError(path, index + 1, f"header key {key!r} given twice")
            values[key] = value
            continue
        if key in values:
            raise AnnotationFormatError(path, index + 1, f"header key {key!r} given twice")
        values[key] = match["value"]
    else:
        raise AnnotationFormatError(path, len(lines), "the header has no closing '---' line")
    missing = [k for k in HEADER_KEYS if k not in values]
    if missing:
        raise AnnotationFormatError(path, index + 1, f"header lacks {', '.join(missing)}")
    _validate_header(path, values, lines)
    return values, index + 1


def _validate_header(path: Path, values: dict[str, str], lines: list[str]) -> None:
    def line_of(key: str) -> int:
        return next(i + 1 for i, t in enumerate(lines) if t.startswith(key + ":"))

    if not _VERSION.match(values["version"]):
        raise AnnotationFormatError(path, line_of("version"), f"version {values['version']!r} is not like 0.10.2")
    if not _COMMIT.match(values["commit"]):
        raise AnnotationFormatError(path, line_of("commit"), f"commit {values['commit']!r} is not a hex commit id")
    if values["sha256"] != UNSTAMPED_SHA256 and not _SHA256.match(values["sha256"]):
        raise AnnotationFormatError(path, line_of("sha256"), "sha256 must be 64 lowercase hex digits or '?'")
    upstream = values["upstream"]
    if not upstream or upstream.startswith("/") or ".." in upstream.split("/"):
        raise AnnotationFormatError(path, line_of("upstream"), f"upstream {upstream!r} is not a relative path")
    try:
        coverage = float(values["coverage"])
    except ValueError:
        raise AnnotationFormatError(path, line_of("coverage"), f"coverage {values['coverage']!r} is not a number") from None
    if not 0 <= coverage <= 100:
        raise AnnotationFormatError(path, line_of("coverage"), f"coverage {coverage} is outside 0..100")
    if not values["title"].strip():
        raise AnnotationFormatError(path, line_of("title"), "title is empty")


def _split_links(
    path: Path, heading_line: int, body_lines: list[str]
) -> tuple[str, dict[str, list[str]], dict[str, list[int]]]:
    """Separate the trailing link lines of a note from its prose; links must come last.

    Returns the prose, each kind's values and the 1-based line where each value starts.
    A ``- reach:`` or ``- later:`` value may continue on following lines indented by two spaces.
    """
    links: dict[str, list[str]] = {kind: [] for kind in LINK_KINDS}
    link_lines: dict[str, list[int]] = {kind: [] for kind in LINK_KINDS}
    prose: list[str] = []
    first_link: int | None = None
    last_kind: str | None = None
    for offset, (text, fenced) in enumerate(fenced_lines(body_lines)):
        line_no = heading_line + 1 + offset
        if last_kind in ("reach", "later") and text.startswith("  ") and text.strip():
            links[last_kind][-1] += " " + text.strip()
            continue
        match = None if fenced else _LINK.match(text)
        kind = match["kind"] if match else None
        last_kind = kind
        if kind in LINK_KINDS:
            if first_link is None:
                first_link = line_no
            if kind == "see" and not SEE_TARGET.match(match["value"]):
                raise AnnotationFormatError(
                    path, line_no, f"see target {match['value']!r} is not 'v<version>/<path>#<note id>'"
                )
            links[kind].append(match["value"])
            link_lines[kind].append(line_no)
            continue
        if kind is not None and kind.startswith(("ref", "prop", "see", "rea", "lat")):
            raise AnnotationFormatError(path, line_no, f"unknown link kind {kind!r} (known: {', '.join(LINK_KINDS)})")
        if first_link is not None and text.strip():
            raise AnnotationFormatError(
                path, line_no, f"prose after the link lines that start at line {first_link}; links must end the note"
            )
        prose.append(text)
    return "\n".join(prose).strip("\n"), links, link_lines


def parse(path: Path | str) -> AnnotationFile:
    """Parse one annotation file strictly; raise :class:`AnnotationFormatError` on any defect."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise AnnotationFormatError(path, 1, f"not UTF-8: {err}") from None
    return parse_text(path, text)


def parse_text(path: Path | str, text: str, definitions: serving_definitions.Definitions | None = None) -> AnnotationFile:
    """Parse annotation ``text`` as if read from ``path``.

    ``path`` names the file in messages and, unless ``definitions`` is given, says where the shared
    serving definitions live (``serving.md`` in the annotations root above it).
    """
    path = Path(path)
    lines = text.split("\n")
    header, body_start = _parse_header(path, lines)
    serving = _expand_includes(path, header, lines, definitions, "serving")
    header_routes = _header_routes(path, header, lines, definitions)
    headings: list[tuple[int, re.Match[str]]] = []
    for index, (line, fenced) in enumerate(fenced_lines(lines[body_start:]), start=body_start):
        if fenced or not line.startswith("## "):
            continue
        match = _HEADING.match(line.rstrip())
        if not match:
            raise AnnotationFormatError(
                path, index + 1,
                "a level-2 heading must be a note: '## `note.id` L<start>-L<end> · <12 hex or ?>'"
                f" (use ### for other sections); got {line.strip()!r}",
            )
        headings.append((index, match))
    notes: list[Note] = []
    seen: dict[str, int] = {}
    included: set[str] = set()  # definition names that notes' reach lines include
    for position, (index, match) in enumerate(headings):
        start = int(match["start"])
        end = int(match["end"]) if match["end"] else start
        if start < 1 or end < start:
            raise AnnotationFormatError(path, index + 1, f"range L{start}-L{end} is empty or starts before line 1")
        note_id = match["id"]
        if note_id in seen:
            raise AnnotationFormatError(path, index + 1, f"note id {note_id!r} already used at line {seen[note_id]}")
        seen[note_id] = index + 1
        stop = headings[position + 1][0] if position + 1 < len(headings) else len(lines)
        body, links, link_lines = _split_links(path, index + 1, lines[index + 1 : stop])
        reach = None
        if links["reach"]:
            values, numbers = _with_header_routes(path, header, lines, note_id, links["reach"], link_lines["reach"])
            included |= serving_definitions.names_used("\n".join(values))
            reach = _routes(
                path, header["version"], values, numbers, definitions,
                where=f"the reach line of note {note_id!r}", combine_prefix=f"note {note_id!r}: ",
            )
        later = _parse_later(path, index + 1, note_id, links["later"])
        notes.append(
            Note(note_id, start, end, match["hash"], body, links["ref"], links["prop"], links["see"], index + 1, reach, later)
        )
    intro_stop = headings[0][0] if headings else len(lines)
    return AnnotationFile(
        path=path,
        upstream=header["upstream"],
        version=header["version"],
        commit=header["commit"],
        sha256=header["sha256"],
        coverage=float(header["coverage"]),
        title=header["title"].strip(),
        intro="\n".join(lines[body_start:intro_stop]).strip("\n"),
        notes=notes,
        reach=header_routes,
        serving=serving,
        serving_names=frozenset(
            serving_definitions.names_used(header.get("serving", ""))
            | serving_definitions.names_used(header.get("reach", ""))
            | included
        ),
        status_lines=tuple(line.rstrip() for line in lines[1 : body_start - 1]
                           if line.startswith(("serving:", "reach:"))),
    )


def _definitions(path: Path, definitions: serving_definitions.Definitions | None) -> serving_definitions.Definitions:
    """The shared definitions for ``path``: those given, else those of its annotations root."""
    if definitions is not None:
        return definitions
    root = serving_definitions.root_of(path)
    try:
        return serving_definitions.definitions_at(root) if root is not None else {}
    except serving_definitions.ServingError as err:
        raise AnnotationFormatError(path, 1, f"{serving_definitions.SERVING_FILE}:{err.line}: {err}") from None


def _expand_includes(
    path: Path, header: dict[str, str], lines: list[str], definitions: serving_definitions.Definitions | None, key: str
) -> str:
    """The header line(s) ``key`` with their ``{{name}}`` includes replaced by the shared definitions."""
    raw = header.get(key, "")
    if not serving_definitions.names_used(raw):
        return raw
    expanded = []
    for number, route in enumerate(raw.split("\n")):
        try:
            expanded.append(serving_definitions.expand(route, header["version"], _definitions(path, definitions), f"{key} header"))
        except serving_definitions.ServingError as err:
            raise AnnotationFormatError(path, _header_line(lines, key, number), str(err)) from None
    return "\n".join(expanded)


def _header_line(lines: list[str], key: str, number: int = 0) -> int:
    """The 1-based line of the header's ``number``-th (0-based) ``key:`` line."""
    found = [i + 1 for i, t in enumerate(lines) if t.startswith(key + ":")]
    return found[min(number, len(found) - 1)] if found else 1


#: A note's ``- reach:`` value that stands for every route of its file's ``reach`` header, so that a
#: note can add routes to the header's without writing them out again.
HEADER_ROUTES = "the header's routes"


def _with_header_routes(
    path: Path, header: dict[str, str], lines: list[str], note_id: str, values: list[str], numbers: list[int]
) -> tuple[list[str], list[int]]:
    """A note's reach values with :data:`HEADER_ROUTES` replaced by the header's own lines."""
    out: list[str] = []
    out_numbers: list[int] = []
    for value, number in zip(values, numbers, strict=True):
        if value.strip() != HEADER_ROUTES:
            out.append(value)
            out_numbers.append(number)
            continue
        if "reach" not in header:
            raise AnnotationFormatError(path, number, f"note {note_id!r} names {HEADER_ROUTES!r}, but the file has no reach header")
        header_values = header["reach"].split("\n")
        out.extend(header_values)
        out_numbers.extend(_header_line(lines, "reach", index) for index in range(len(header_values)))
    return out, out_numbers


def _header_routes(
    path: Path, header: dict[str, str], lines: list[str], definitions: serving_definitions.Definitions | None
) -> Reach | None:
    """The header's ``reach:`` routes, includes expanded, each parsed and then combined."""
    if "reach" not in header:
        return None
    values = header["reach"].split("\n")
    numbers = [_header_line(lines, "reach", number) for number in range(len(values))]
    return _routes(path, header["version"], values, numbers, definitions, where="reach header")


def _routes(
    path: Path,
    version: str,
    values: list[str],
    line_numbers: list[int],
    definitions: serving_definitions.Definitions | None,
    where: str,
    combine_prefix: str = "",
) -> Reach:
    """Routes written as ``reach`` lines (of a header or a note), combined into one reach status.

    Each value has its ``{{name}}`` includes expanded and is parsed on its own; an error names the
    line in ``line_numbers`` where that value starts, and ``where`` says whose line it is.
    """
    expanded = []
    for value, line_no in zip(values, line_numbers, strict=True):
        if serving_definitions.names_used(value):
            try:
                value = serving_definitions.expand(value, version, _definitions(path, definitions), where)
            except serving_definitions.ServingError as err:
                raise AnnotationFormatError(path, line_no, str(err)) from None
        try:
            parse_reach(value)
        except ReachError as err:
            raise AnnotationFormatError(path, line_no, str(err)) from None
        expanded.append(value)
    try:
        return combine_routes(expanded)
    except ReachError as err:
        raise AnnotationFormatError(path, line_numbers[-1], f"{combine_prefix}{err}") from None


_LATER = re.compile(r"^(?P<version>[0-9]+\.[0-9]+\.[0-9]+): +(?P<text>\S.*)$")


def _parse_later(path: Path, heading_line: int, note_id: str, values: list[str]) -> dict[str, str]:
    """``- later: <version>: <Markdown>`` lines, one per later release, as {version: Markdown}."""
    later: dict[str, str] = {}
    for value in values:
        match = _LATER.match(value)
        if not match:
            raise AnnotationFormatError(path, heading_line, f"note {note_id!r}: later line {value!r} is not '<version>: <text>'")
        if match["version"] in later:
            raise AnnotationFormatError(path, heading_line, f"note {note_id!r} has two later lines for {match['version']}")
        later[match["version"]] = match["text"]
    return later


def annotation_paths(root: Path = ANNOTATIONS_ROOT) -> list[Path]:
    """Every annotation file under ``root``: ``v<version>/**/*.md``, sorted."""
    return sorted(p for p in root.glob("v*/**/*.md") if p.is_file())


def discover(root: Path = ANNOTATIONS_ROOT) -> list[AnnotationFile]:
    """Parse every annotation file under ``root`` (the first malformed one raises)."""
    return [parse(p) for p in annotation_paths(root)]


def stamp_text(path: Path, text: str, reader: Reader) -> tuple[str, list[str]]:
    """Fill ``????????????`` note hashes and a ``?`` header sha256 from the upstream bytes.

    Existing hashes are never overwritten: a wrong one is drift for ``check`` to report, not
    something to paper over. Raises ``ValueError`` (nothing changed) when the file cannot be
    stamped honestly: the header sha256 names other bytes, or a note lies outside the file.
    """
    af = parse_text(path, text)
    data = reader(af.version, af.upstream)
    actual = hashlib.sha256(data).hexdigest()
    if af.sha256 not in (UNSTAMPED_SHA256, actual):
        raise ValueError(f"{path}: header sha256 {af.sha256} is not that of {af.upstream} @ {af.version} ({actual})")
    lines = upstream_lines(data)
    out = text.split("\n")
    changes: list[str] = []
    for note in af.notes:
        if note.end > len(lines):
            raise ValueError(f"{path}: note `{note.id}` {note.range_text} ends after the last line L{len(lines)}")
        if note.hash == UNSTAMPED_HASH:
            heading = out[note.heading_line - 1].rstrip()
            out[note.heading_line - 1] = heading[: -len(UNSTAMPED_HASH)] + range_hash(lines, note.start, note.end)
            changes.append(f"note `{note.id}` {note.range_text}")
    if af.sha256 == UNSTAMPED_SHA256:
        for index, line in enumerate(out):
            if re.match(r"^sha256: *\?", line):
                out[index] = re.sub(r"^sha256: *\?", f"sha256: {actual}", line, count=1)
                changes.append("header sha256")
                break
    return "\n".join(out), changes
