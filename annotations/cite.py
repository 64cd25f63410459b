"""Citations a student can paste, and the check that a pasted one still names the same bytes.

A citation names a release, a file, a line range, the content hash of those lines and where to
read them: on GitHub at the release tag and on the annotated page of this site (at the note, or at
the line). It is written in the forms the checker already verifies (``annotations/citations.py``;
``FORMAT.md``, "Upstream citations"), so a citation pasted into a page is checked by
``python -m annotations check`` like any other:

* **Markdown**: ``vLLM v0.10.2, [`vllm/core/block_manager.py` L166-L183](<GitHub link> "<hash>"),
  note [`block_manager.allocate`](<site page>#block_manager.allocate) · content hash `<hash>```;
* **plain**: ``v0.10.2/vllm/core/block_manager.py#L166-L183@<hash> (vLLM v0.10.2, note
  block_manager.allocate) <site page>#block_manager.allocate``.

The content hash is the notes' own (:func:`annotations.model.range_hash`: the first 12 hex digits
of sha256 over the exact bytes of the lines). :func:`verify` reads the citations in a pasted text
and compares each with the bytes of a release: **fine** (the cited lines hash as cited),
**moved** (they no longer stand at the cited lines but do elsewhere in the file: it says where),
**drifted** (they stand nowhere in the file), or **dead** (no such file, or the range lies outside
it). The site's "cite" controls (``docs/hooks/source_page.py``) and ``python -m annotations cite``
take their text from this module alone.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from annotations.check import find_moved
from annotations.citations import GITHUB_BLOB, Citation, Resolver, find_markdown
from annotations.model import (
    ANNOTATIONS_ROOT,
    NOTE_ID,
    AnnotationFile,
    Note,
    Reader,
    annotation_paths,
    parse,
    range_hash,
    upstream_lines,
)

#: The site's configuration; its ``site_url`` is where citations link to.
MKDOCS_CONFIG = ANNOTATIONS_ROOT.parent / "mkdocs.yml"
#: Placeholders of a line citation template (``line_templates``), filled by the page's script.
LINE_SLOT = "{line}"
HASH_SLOT = "{hash}"
_NOTE_MENTION = re.compile(r"\bnote \[?`?(?P<id>" + NOTE_ID + r")`?\]?(?=[\s,()·]|$)")
_SITE_URL = re.compile(r"^site_url:\s*(?P<url>\S+)\s*$", re.MULTILINE)


class CiteError(ValueError):
    """A note cannot be cited: unknown or ambiguous id, or bytes that are not the annotated ones."""


def site_url(config: Path = MKDOCS_CONFIG) -> str:
    """The site's ``site_url`` from ``mkdocs.yml``, ending in ``/``."""
    match = _SITE_URL.search(config.read_text(encoding="utf-8"))
    if not match:
        raise CiteError(f"{config} has no site_url line")
    return match["url"].rstrip("/") + "/"


def page_path(version: str, upstream: str) -> str:
    """The annotated page's path on the site, e.g. ``sources/v0.10.2/vllm/core/block_manager.py/``."""
    return f"sources/v{version}/{upstream}/"


def _range(start: int | str, end: int | str) -> str:
    return f"L{start}" if start == end else f"L{start}-L{end}"


def _markdown(version: str, path: str, rng: str, digest: str, note_id: str | None, page: str) -> str:
    where = f"[`{path}` {rng}]({GITHUB_BLOB}v{version}/{path}#{rng} \"{digest}\")"
    read = f"note [`{note_id}`]({page}#{note_id})" if note_id else f"[annotated]({page}#{rng})"
    return f"vLLM v{version}, {where}, {read} · content hash `{digest}`"


def _plain(version: str, path: str, rng: str, digest: str, note_id: str | None, page: str) -> str:
    about = f"vLLM v{version}, note {note_id}" if note_id else f"vLLM v{version}"
    return f"v{version}/{path}#{rng}@{digest} ({about}) {page}#{note_id or rng}"


@dataclass(frozen=True)
class Cited:
    """Lines ``start..end`` of ``path`` at ``version``, their content hash, and the note, if any."""

    version: str
    path: str
    start: int
    end: int
    hash: str
    note_id: str | None = None

    @property
    def range_text(self) -> str:
        return _range(self.start, self.end)

    def page(self, site: str) -> str:
        return site.rstrip("/") + "/" + page_path(self.version, self.path)

    def markdown(self, site: str) -> str:
        """The Markdown form (a checker-verified GitHub link whose title is the hash)."""
        return _markdown(self.version, self.path, self.range_text, self.hash, self.note_id, self.page(site))

    def plain(self, site: str) -> str:
        """The plain form (``v<ver>/<path>#L<a>-L<b>@<hash>``, also checker-verified)."""
        return _plain(self.version, self.path, self.range_text, self.hash, self.note_id, self.page(site))


def note_citation(annotation: AnnotationFile, note: Note) -> Cited:
    """The citation of a note: its range and the hash it was written for."""
    return Cited(annotation.version, annotation.upstream, note.start, note.end, note.hash, note.id)


def line_templates(annotation: AnnotationFile, site: str) -> tuple[str, str]:
    """The Markdown and plain citation of one line, with ``{line}`` and ``{hash}`` left to fill.

    The annotated page carries these once and each line's hash (:func:`line_hashes`), instead of
    two full citations per line.
    """
    page = site.rstrip("/") + "/" + page_path(annotation.version, annotation.upstream)
    rng = f"L{LINE_SLOT}"
    return (
        _markdown(annotation.version, annotation.upstream, rng, HASH_SLOT, None, page),
        _plain(annotation.version, annotation.upstream, rng, HASH_SLOT, None, page),
    )


def line_hashes(data: bytes) -> list[str]:
    """The content hash of every line on its own (index 0 is line 1)."""
    lines = upstream_lines(data)
    return [range_hash(lines, n, n) for n in range(1, len(lines) + 1)]


# -- finding a note --------------------------------------------------------------------------
def names_note(reference: str, annotation: AnnotationFile, note: Note) -> bool:
    """Whether ``reference`` (a note id, or ``v<version>/<path>#<note id>``) names this note."""
    target_file, _, note_id = reference.rpartition("#")
    return note.id == note_id and (not target_file or annotation.cite_path == target_file)


def find_note(reference: str, root: Path = ANNOTATIONS_ROOT, version: str | None = None) -> tuple[AnnotationFile, Note]:
    """The note named ``reference``: a note id, or ``v<version>/<path>#<note id>`` where ids repeat.

    Raises :class:`CiteError` naming the candidates when the id is unknown or not unique.
    """
    target_file, _, note_id = reference.rpartition("#")
    matches: list[tuple[AnnotationFile, Note]] = []
    for path in annotation_paths(root):
        af = parse(path)
        if version is not None and af.version != version:
            continue
        matches += [(af, note) for note in af.notes if names_note(reference, af, note)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise CiteError(f"no note `{note_id}`" + (f" in {target_file}" if target_file else "")
                        + (f" at {version}" if version else "") + " among the annotations")
    names = ", ".join(f"{af.cite_path}#{note.id}" for af, note in matches)
    raise CiteError(f"note id `{note_id}` is in {len(matches)} files ({names}): name one as v<version>/<path>#<id>")


def verified_lines(annotation: AnnotationFile, reader: Reader) -> list[bytes]:
    """The upstream lines of an annotated file, refused unless the file's sha256 is the header's."""
    data = reader(annotation.version, annotation.upstream)
    actual = hashlib.sha256(data).hexdigest()
    if actual != annotation.sha256:
        raise CiteError(f"{annotation.upstream} @ {annotation.version} has sha256 {actual}, "
                        f"but {annotation.path} says {annotation.sha256}: these are not the annotated bytes")
    return upstream_lines(data)


def note_lines(annotation: AnnotationFile, note: Note, reader: Reader) -> list[bytes]:
    """Every line of the annotated file, sha256-verified, once the note is known to match its range.

    Raises :class:`CiteError` when the note no longer matches its lines (a stale note is not cited).
    """
    lines = verified_lines(annotation, reader)
    if note.end > len(lines) or range_hash(lines, note.start, note.end) != note.hash:
        raise CiteError(f"note `{note.id}` {note.range_text} does not match its upstream lines "
                        "(run `python -m annotations check`)")
    return lines


def fenced(text: str, language: str = "") -> str:
    """``text`` in a Markdown code fence longer than any run of backticks inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def quoted(annotation: AnnotationFile, note: Note, reader: Reader) -> str:
    """The note's upstream lines, sha256-verified, as a fenced Markdown block.

    Raises :class:`CiteError` when the note no longer matches its lines (a stale note is not cited).
    """
    lines = note_lines(annotation, note, reader)
    text = b"".join(lines[note.start - 1 : note.end]).decode("utf-8", "replace").rstrip("\n")
    return fenced(text, _language(annotation.upstream))


def _language(path: str) -> str:
    suffix = path.rsplit(".", 1)[-1]
    return {"py": "python", "cu": "cuda", "cuh": "cuda", "cpp": "cpp", "h": "cpp", "hpp": "cpp"}.get(suffix, "")


# -- checking a pasted citation --------------------------------------------------------------
FINE, MOVED, DRIFTED, DEAD = "fine", "moved", "drifted", "dead"


@dataclass(frozen=True)
class Verdict:
    """What became of one pasted citation: ``status`` is fine, moved, drifted or dead."""

    citation: Citation
    status: str
    detail: str
    note_id: str | None = None
    moved_to: tuple[int, ...] = ()  # start lines where the cited content now stands

    @property
    def label(self) -> str:
        c = self.citation
        return f"v{c.version}/{c.path}#{c.range_text}" + (f"@{c.hash}" if c.hash else "")


def _note_ids(text: str) -> list[tuple[int, str]]:
    """(line number, note id) of every ``note <id>`` mention."""
    found = []
    for number, line in enumerate(text.split("\n"), start=1):
        found += [(number, m["id"].rstrip(".")) for m in _NOTE_MENTION.finditer(line)]
    return found


def verify(text: str, reader: Reader, against: str | None = None,
           root: Path = ANNOTATIONS_ROOT) -> list[Verdict]:
    """Check every line citation in ``text`` (Markdown or plain form) against release bytes.

    ``against`` checks the cited content in another release's same file instead of the cited
    release. A ``note <id>`` on the same line as exactly one citation is checked too: it must
    still be a note of the cited file, and where it no longer covers the cited lines the verdict
    says what it covers now.
    """
    resolver = Resolver(reader)
    cited = [c for c in find_markdown(Path("-"), text) if c.start is not None]
    per_line: dict[int, int] = {}
    for c in cited:
        per_line[c.line] = per_line.get(c.line, 0) + 1
    notes = {number: note_id for number, note_id in _note_ids(text) if per_line.get(number) == 1}
    return [_verdict(c, resolver, against, notes.get(c.line), root) for c in cited]


def _verdict(c: Citation, resolver: Resolver, against: str | None, note_id: str | None, root: Path) -> Verdict:
    release = against or c.version
    lines = resolver.lines(release, c.path)
    where = f"{c.path} @ {release}"
    if isinstance(lines, Exception):
        return Verdict(c, DEAD, f"no {where}: {lines}", note_id)
    if c.hash is None or not re.fullmatch(r"[0-9a-f]{12}", c.hash):
        return Verdict(c, DEAD, "the citation carries no content hash to check", note_id)
    length = c.end - c.start + 1
    if c.start < 1 or c.end < c.start:
        return Verdict(c, DEAD, f"range {c.range_text} is empty", note_id)
    here = range_hash(lines, c.start, c.end) if c.end <= len(lines) else None
    note = _note_remark(c, note_id, root)
    if here == c.hash:
        return Verdict(c, FINE, f"{where} {c.range_text} hash to {c.hash}" + note, note_id)
    moved = tuple(sorted(find_moved(lines, length, c.hash), key=lambda s: (abs(s - c.start), s)))
    if moved:
        places = ", ".join(f"{_range(s, s + length - 1)} ({s - c.start:+d})" for s in moved[:3])
        more = f" and {len(moved) - 3} more places" if len(moved) > 3 else ""
        return Verdict(c, MOVED, f"the cited lines now stand at {places}{more} of {where}" + note, note_id, moved)
    if here is None:
        return Verdict(c, DEAD, f"range {c.range_text} ends after the last line L{len(lines)} of {where},"
                       " and the cited content is nowhere in the file" + note, note_id)
    return Verdict(c, DRIFTED, f"{where} {c.range_text} hash to {here}, not {c.hash}, and no "
                   f"{length} lines of the file hash to {c.hash}: the cited text is gone" + note, note_id)


def _note_remark(c: Citation, note_id: str | None, root: Path) -> str:
    if note_id is None:
        return ""
    md = root / f"v{c.version}" / (c.path + ".md")
    if not md.is_file():
        return f"; no annotation file v{c.version}/{c.path}.md holds note `{note_id}`"
    note = parse(md).note(note_id)
    if note is None:
        return f"; v{c.version}/{c.path} has no note `{note_id}` any more"
    if (note.start, note.end, note.hash) != (c.start, c.end, c.hash):
        return f"; note `{note_id}` of v{c.version} now covers {note.range_text} (hash {note.hash})"
    return f"; note `{note_id}` of v{c.version} still covers these lines"
