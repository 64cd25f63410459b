"""Citations of upstream lines outside a note's own range, found anywhere and checked against the sdist.

A note is checked line by line against the bytes it sits beside; a sentence elsewhere that says
"see scheduler.py L1656-L1657" is only as good as those line numbers. This module finds every such
citation in our Markdown (notes, reading questions, theory pages) and in ``reference/`` Python,
resolves it against the pinned release (the file exists, the range lies inside it) and compares a
content hash of the cited lines, so that a mistyped range or a re-pinned release is caught.

Three written forms are recognised (``FORMAT.md`` specifies them):

* **Markdown link** (pages and notes): a GitHub blob link with a line anchor whose link *title*
  is the 12-hex content hash, e.g.
  ``[scheduler.py L1656-L1657](https://github.com/vllm-project/vllm/blob/v0.10.2/vllm/core/scheduler.py#L1656-L1657 "0123456789ab")``.
  A link without a line anchor names a whole file: only its existence is checked.
* **Plain** (anywhere, e.g. a docstring): ``v0.10.2/vllm/core/scheduler.py#L1656-L1657@0123456789ab``.
* **Legacy** (``reference/`` Python comments and docstrings, as written there):
  ``[v0.33.0 ][vllm/v1/core/]block_pool.py:816-849[, 851-869]`` and ``:340-342`` continuing the
  previous file of the line. A bare file name is resolved inside the release (it must be unique).
  The release is the last ``v<version>`` written before the citation on its line, else that of a
  citation on the previous line; a citation with neither states no release and is a problem
  (never guessed from the citing file's folder). Their hashes live in the
  ledger ``annotations/citations.lock`` instead of the source, so that ``reference/`` stays
  readable; ``python -m annotations stamp --citations`` writes it.

A hash written ``????????????`` (or a Markdown link with no title) is a placeholder that the
stamp command fills; the checker reports it as unstamped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from annotations.model import UNSTAMPED_HASH, fenced_lines, range_hash, upstream_lines
from upstream.releases import V1_RELEASE

Reader = Callable[[str, str], bytes]  # (version, upstream path) -> bytes
Lister = Callable[[str], list[str]]  # version -> every file path in the release

GITHUB_BLOB = "https://github.com/vllm-project/vllm/blob/"
_VERSION = r"[0-9]+\.[0-9]+\.[0-9]+(?:\.[0-9]+)?(?:\.post[0-9]+)?"
_HASH = r"[0-9a-f]{12}|\?{12}"
#: ``](https://github.com/vllm-project/vllm/blob/v<ver>/<path>[#L<a>[-L<b>]][ "<hash>"])``
LINK = re.compile(
    r"\]\(" + re.escape(GITHUB_BLOB) + r"v(?P<version>" + _VERSION + r")/(?P<path>[^)#\s\"]+)"
    r"(?:#L(?P<start>[0-9]+)(?:-L(?P<end>[0-9]+))?)?(?:\s+\"(?P<hash>[^\"]*)\")?\)"
)
#: ``v<ver>/<path>#L<a>[-L<b>]@<hash>``
PLAIN = re.compile(
    r"(?<![\w/])v(?P<version>" + _VERSION + r")/(?P<path>[A-Za-z0-9_][A-Za-z0-9_./-]*)"
    r"#L(?P<start>[0-9]+)(?:-L(?P<end>[0-9]+))?@(?P<hash>" + _HASH + r")"
)
_SOURCE_EXT = r"(?:py|cu|cuh|cpp|h|hpp)"
#: ``path.py:12-34`` / ``path.py:12`` / ``path.py L12-L34`` / ``path.py L12-34``
LEGACY_FILE = re.compile(
    r"(?<![\w/.-])(?P<path>(?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_-]+\." + _SOURCE_EXT + r")"
    r"(?::|\s+L)(?P<start>[0-9]+)(?:-L?(?P<end>[0-9]+))?\b"
)
#: ``, 518-525`` right after a legacy range, continuing the same file
LEGACY_MORE = re.compile(r",\s*(?P<start>[0-9]+)(?:-(?P<end>[0-9]+))?\b(?!\.)")
#: ``:340-342`` (after whitespace, a backtick, ``(`` or ``,``): the previous file of the line
LEGACY_COLON = re.compile(r"(?<=[\s`(,]):(?P<start>[0-9]+)(?:-(?P<end>[0-9]+))?\b")
_LINE_VERSION = re.compile(r"(?<![\w.])v(?P<version>" + _VERSION + r")\b")


@dataclass(frozen=True)
class Citation:
    """One citation of upstream lines ``start..end`` (both ``None`` for a whole file)."""

    source: Path  # the file that cites
    line: int  # 1-based line in ``source``
    version: str
    path: str  # as written (legacy: maybe a bare file name)
    start: int | None
    end: int | None
    hash: str | None  # as written; ``None`` for legacy (ledger) and whole-file links
    form: str  # "link", "plain" or "legacy"

    @property
    def range_text(self) -> str:
        if self.start is None:
            return ""
        return f"L{self.start}" if self.start == self.end else f"L{self.start}-L{self.end}"

    def where(self) -> str:
        return f"{self.source}:{self.line}"


#: The version of a legacy citation that states no release (reported by :func:`check`).
NO_RELEASE = ""


def unfenced_lines(text: str) -> Iterator[tuple[int, str]]:
    """Each line of Markdown ``text`` outside fenced code, with its 1-based number (the fence lines
    themselves are skipped too)."""
    for number, (line, fenced) in enumerate(fenced_lines(text.split("\n")), start=1):
        if not fenced:
            yield number, line


def find_markdown(source: Path, text: str) -> list[Citation]:
    """Link and plain citations in Markdown (fenced code is skipped)."""
    found: list[Citation] = []
    for number, line in unfenced_lines(text):
        for m in LINK.finditer(line):
            start = int(m["start"]) if m["start"] else None
            end = int(m["end"]) if m["end"] else start
            digest = m["hash"] if m["hash"] is not None else (UNSTAMPED_HASH if start else None)
            found.append(Citation(source, number, m["version"], m["path"], start, end, digest, "link"))
        found += _plain(source, number, line)
    return found


def _plain(source: Path, number: int, line: str) -> list[Citation]:
    out = []
    for m in PLAIN.finditer(line):
        start = int(m["start"])
        end = int(m["end"]) if m["end"] else start
        out.append(Citation(source, number, m["version"], m["path"], start, end, m["hash"], "plain"))
    return out


def find_python(source: Path, text: str) -> list[Citation]:
    """Plain and legacy citations in Python source (comments, docstrings, strings alike)."""
    found: list[Citation] = []
    previous: Citation | None = None
    for number, line in enumerate(text.split("\n"), start=1):
        plain = _plain(source, number, line)
        found += plain
        masked = PLAIN.sub(lambda m: " " * len(m[0]), line)
        versions = [(m.start(), m["version"]) for m in _LINE_VERSION.finditer(masked)]
        line_cites: list[Citation] = []
        events = sorted(
            [(m.start(), "file", m) for m in LEGACY_FILE.finditer(masked)]
            + [(m.start(), "colon", m) for m in LEGACY_COLON.finditer(masked)],
            key=lambda e: e[0],
        )
        for position, kind, m in events:
            before = [v for p, v in versions if p < position]
            if before:
                version = before[-1]
            elif previous is not None and previous.line >= number - 1:
                version = previous.version
            else:
                version = NO_RELEASE
            if kind == "file":
                path = m["path"]
            elif line_cites:
                path, version = line_cites[-1].path, line_cites[-1].version
            else:
                continue  # a colon with no file before it on the line: not a citation
            start = int(m["start"])
            end = int(m["end"]) if m["end"] else start
            line_cites.append(Citation(source, number, version, path, start, end, None, "legacy"))
            cursor = m.end()
            while (more := LEGACY_MORE.match(masked, cursor)) is not None:
                s = int(more["start"])
                line_cites.append(
                    Citation(source, number, version, path, s, int(more["end"]) if more["end"] else s, None, "legacy")
                )
                cursor = more.end()
        found += line_cites
        if line_cites:
            previous = line_cites[-1]
    return found


def find(source: Path, text: str | None = None) -> list[Citation]:
    """Every citation in ``source`` (Markdown or Python; other files cite nothing)."""
    source = Path(source)
    if text is None:
        text = source.read_text(encoding="utf-8")
    if source.suffix == ".md":
        return find_markdown(source, text)
    if source.suffix == ".py":
        return find_python(source, text)
    return []


# -- the ledger of legacy citations ------------------------------------------------------------
LedgerKey = tuple[str, str, str, int, int]  # (source relative to repo, version, resolved path, start, end)


def read_ledger(path: Path) -> dict[LedgerKey, str]:
    """``source<TAB>v<version>/<path>#L<a>-L<b><TAB>hash`` per line; ``#`` starts a comment."""
    entries: dict[LedgerKey, str] = {}
    if not path.is_file():
        return entries
    for number, raw in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        m = re.match(r"^(\S+)\t+v(" + _VERSION + r")/(\S+)#L([0-9]+)-L([0-9]+)\t+([0-9a-f]{12})$", text)
        if not m:
            raise ValueError(f"{path}:{number}: not 'source<TAB>v<version>/<path>#L<a>-L<b><TAB><hash>': {raw!r}")
        entries[(m[1], m[2], m[3], int(m[4]), int(m[5]))] = m[6]
    return entries


def write_ledger(path: Path, entries: dict[LedgerKey, str]) -> None:
    header = (
        "# Content hashes of the legacy upstream citations in reference/ (see annotations/citations.py).\n"
        "# Written by `python -m annotations stamp --citations`; checked by `python -m annotations check`.\n"
    )
    rows = [f"{s}\tv{v}/{p}#L{a}-L{b}\t{h}" for (s, v, p, a, b), h in sorted(entries.items())]
    path.write_text(header + "\n".join(rows) + "\n", encoding="utf-8")


# -- resolving -------------------------------------------------------------------------------
class Resolver:
    """Resolves citations against release bytes; caches files and listings."""

    def __init__(self, reader: Reader, lister: Lister | None = None) -> None:
        self.reader = reader
        self.lister = lister
        self._lines: dict[tuple[str, str], list[bytes] | Exception] = {}
        self._listing: dict[str, list[str] | Exception] = {}

    def lines(self, version: str, path: str) -> list[bytes] | Exception:
        key = (version, path)
        if key not in self._lines:
            try:
                self._lines[key] = upstream_lines(self.reader(version, path))
            except Exception as err:  # noqa: BLE001 (reported as a dead citation)
                self._lines[key] = err
        return self._lines[key]

    def resolve_path(self, citation: Citation, hints: set[str] = frozenset()) -> tuple[str | None, str | None]:
        """The release path a citation names, or ``(None, why)``.

        A bare name that several release files share is settled by ``hints``: the folders of the
        citations in the same source file that did resolve (``common.py`` next to
        ``vllm/core/block/naive_block.py`` means ``vllm/core/block/common.py``).
        """
        if citation.form != "legacy":
            return citation.path, None
        if self.lister is None:
            return citation.path, None
        if citation.version not in self._listing:
            try:
                self._listing[citation.version] = self.lister(citation.version)
            except Exception as err:  # noqa: BLE001 - remembered, reported as a dead citation
                self._listing[citation.version] = err
        listing = self._listing[citation.version]
        if isinstance(listing, Exception):
            return None, f"cannot list the vllm {citation.version} release: {listing}"
        if citation.path in listing:
            return citation.path, None
        tail = "/" + citation.path
        matches = sorted(p for p in listing if p.endswith(tail))
        if len(matches) > 1:
            near = [p for p in matches if p.rsplit("/", 1)[0] in hints]
            matches = near if len(near) == 1 else matches
        if len(matches) == 1:
            return matches[0], None
        if not matches:
            return None, f"no file {citation.path!r} in the vllm {citation.version} release"
        return None, f"{citation.path!r} is ambiguous in vllm {citation.version} ({', '.join(matches[:4])}): write the full path"

    def actual_hash(self, citation: Citation, path: str) -> tuple[str | None, str | None]:
        """``(hash of the cited lines, None)`` or ``(None, why the citation is dead)``."""
        lines = self.lines(citation.version, path)
        if isinstance(lines, Exception):
            return None, f"no {path} in the vllm {citation.version} release ({lines})"
        if citation.start is None:
            return None, None
        if citation.end < citation.start or citation.start < 1:
            return None, f"range {citation.range_text} is empty"
        if citation.end > len(lines):
            return None, f"range {citation.range_text} ends after the last line L{len(lines)} of {path} @ {citation.version}"
        return range_hash(lines, citation.start, citation.end), None


def check(
    citations: Iterable[Citation], resolver: Resolver, ledger: dict[LedgerKey, str] | None, repo: Path
) -> tuple[list[tuple[Citation, str]], set[LedgerKey]]:
    """Problems (each a citation and a sentence) and the ledger keys the legacy citations used."""
    problems: list[tuple[Citation, str]] = []
    used: set[LedgerKey] = set()
    citations = list(citations)
    hints: dict[Path, set[str]] = {}
    # Release by release, every cited file is listed and read before the checks (which go in
    # citation order): the reader may pass over a release's whole archive to list or read it, and
    # keeps only a few releases at hand (upstream.fetch).
    for c in sorted(citations, key=lambda c: c.version):
        if c.version == NO_RELEASE:
            continue
        resolved, _ = resolver.resolve_path(c)
        if resolved is None:
            continue
        resolver.lines(c.version, resolved)
        if c.form == "legacy" and "/" in c.path:
            hints.setdefault(c.source, set()).add(resolved.rsplit("/", 1)[0])
    for c in citations:
        if c.version == NO_RELEASE:
            problems.append((c, f"citation {c.path}:{c.start}-{c.end} states no release: write it before "
                                f"the file (e.g. v{V1_RELEASE} {c.path}:{c.start}-{c.end})"))
            continue
        label = f"citation v{c.version}/{c.path}" + (f"#{c.range_text}" if c.start else "")
        path, why = resolver.resolve_path(c, hints.get(c.source, set()))
        if path is None:
            problems.append((c, f"{label}: dead: {why}"))
            continue
        actual, why = resolver.actual_hash(c, path)
        if why:
            problems.append((c, f"{label}: dead: {why}"))
            continue
        if actual is None:
            continue  # a whole-file link: existence is all there is to check
        if c.form == "legacy":
            key = ledger_key(c, path, repo)
            used.add(key)
            recorded = (ledger or {}).get(key)
            if recorded is None:
                problems.append((c, f"{label}: not in the ledger annotations/citations.lock: run `python -m annotations stamp --citations`"))
            elif recorded != actual:
                problems.append((c, f"{label}: hash drift: the ledger says {recorded}, the lines hash to {actual}"))
            continue
        if c.hash in (None, UNSTAMPED_HASH, ""):
            problems.append((c, f"{label}: unstamped: run `python -m annotations stamp {c.source}`"))
        elif c.hash != actual:
            problems.append((c, f"{label}: hash drift: the citation says {c.hash}, the lines hash to {actual}"))
    return problems, used


def ledger_key(c: Citation, path: str, repo: Path) -> LedgerKey:
    try:
        source = Path(c.source).resolve().relative_to(Path(repo).resolve()).as_posix()
    except ValueError:
        source = Path(c.source).as_posix()
    return (source, c.version, path, c.start or 0, c.end or 0)


def stamp_inline(text: str, resolver: Resolver) -> tuple[str, int]:
    """Fill missing or placeholder hashes of link and plain citations; never overwrite a hash."""
    count = 0

    def link(m: re.Match[str]) -> str:
        nonlocal count
        if not m["start"] or (m["hash"] not in (None, "", UNSTAMPED_HASH)):
            return m[0]
        c = Citation(Path("-"), 0, m["version"], m["path"], int(m["start"]), int(m["end"] or m["start"]), None, "link")
        actual, why = resolver.actual_hash(c, c.path)
        if actual is None:
            return m[0]
        count += 1
        anchor = f"#L{m['start']}" + (f"-L{m['end']}" if m["end"] else "")
        return f"]({GITHUB_BLOB}v{m['version']}/{m['path']}{anchor} \"{actual}\")"

    def plain(m: re.Match[str]) -> str:
        nonlocal count
        if m["hash"] != UNSTAMPED_HASH:
            return m[0]
        c = Citation(Path("-"), 0, m["version"], m["path"], int(m["start"]), int(m["end"] or m["start"]), None, "plain")
        actual, why = resolver.actual_hash(c, c.path)
        if actual is None:
            return m[0]
        count += 1
        return m[0][: -len(UNSTAMPED_HASH)] + actual

    return PLAIN.sub(plain, LINK.sub(link, text)), count
