"""The set of annotated upstream files, loaded and verified once per site build.

Loading is where trust is established: every annotation is parsed strictly, and the upstream
bytes it describes are fetched and checked against the sha256 in its header. A file that does
not parse, or bytes that do not verify, stop the build with a message naming the file; a page of
notes beside the wrong code would teach the wrong thing.

The rest of this module answers questions the pages ask about the set: where each page lives,
which navigation section it belongs to, and where a ``see`` citation points.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from annotations.model import SEE_TARGET, AnnotationFile, AnnotationFormatError, annotation_paths, parse
from docs.hooks.source_page import AnnotatedSourceError, page_src_uri, segments, verify_upstream
from upstream.releases import V0_RELEASE, V1_RELEASE

Reader = Callable[[str, str], bytes]  # (version, upstream path) -> bytes

#: Navigation sections of "Annotated sources", in display order.
SECTION_ORDER = (f"V0 @ v{V0_RELEASE}", f"V1 @ v{V0_RELEASE}", f"V1 @ v{V1_RELEASE}", "CUDA kernels")

#: A Markdown link to a note, as annotations write it: ``](v0.10.2/vllm/core/x.py#note.id)``.
CITATION = re.compile(r"\]\((?P<path>v[0-9]+\.[0-9]+\.[0-9]+/[^)#\s]+)(?:#(?P<id>[^)\s]*))?\)")


def section_of(annotation: AnnotationFile) -> str:
    """The navigation section an annotated file belongs to."""
    if annotation.upstream.startswith("csrc/"):
        return "CUDA kernels"
    if annotation.version == V0_RELEASE:
        return f"V1 @ v{V0_RELEASE}" if annotation.upstream.startswith("vllm/v1/") else f"V0 @ v{V0_RELEASE}"
    return f"V1 @ v{annotation.version}"


@dataclass
class SourceEntry:
    """One annotated file together with its verified upstream bytes."""

    annotation: AnnotationFile
    data: bytes

    @property
    def src_uri(self) -> str:
        return page_src_uri(self.annotation.version, self.annotation.upstream)

    @property
    def line_count(self) -> int:
        return self.data.count(b"\n") + (0 if self.data.endswith(b"\n") or not self.data else 1)


@dataclass
class SourceSet:
    """Every annotated file of the site, keyed by its generated page path."""

    entries: dict[str, SourceEntry] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path, reader: Reader) -> SourceSet:
        """Parse every annotation under ``root`` and fetch and verify its upstream bytes.

        All problems are collected first and raised together as one
        :class:`AnnotatedSourceError`, so a single build names every broken file.
        """
        problems: list[str] = []
        found = cls()
        for path in annotation_paths(root):
            try:
                annotation = parse(path)
            except AnnotationFormatError as err:
                problems.append(f"does not parse: {err}")
                continue
            try:
                data = reader(annotation.version, annotation.upstream)
                verify_upstream(annotation, data)
                segments(annotation.notes, SourceEntry(annotation, data).line_count, str(path))
            except AnnotatedSourceError as err:
                problems.append(str(err))
                continue
            except Exception as err:  # noqa: BLE001 - the reader failed: no bytes, no page
                problems.append(f"{path}: cannot read upstream {annotation.upstream} at {annotation.version}: {err}")
                continue
            entry = SourceEntry(annotation, data)
            found.entries[entry.src_uri] = entry
        if problems:
            raise AnnotatedSourceError("annotated sources cannot be built:\n  " + "\n  ".join(problems))
        return found

    def sorted_entries(self) -> list[SourceEntry]:
        """Entries by section, then by upstream path."""
        return sorted(
            self.entries.values(),
            key=lambda e: (SECTION_ORDER.index(section_of(e.annotation)) if section_of(e.annotation) in SECTION_ORDER
                           else len(SECTION_ORDER), e.annotation.version, e.annotation.upstream),
        )

    def nav_sections(self) -> list[dict[str, list[dict[str, str]]]]:
        """MkDocs ``nav`` entries: one section per kind of source, one page per file."""
        sections: dict[str, list[dict[str, str]]] = {}
        for entry in self.sorted_entries():
            section = section_of(entry.annotation)
            sections.setdefault(section, []).append({entry.annotation.upstream: entry.src_uri})
        return [{name: pages} for name, pages in sections.items()]

    def note_target(self, version: str, path: str, note_id: str | None) -> str | None:
        """The page path of a cited note (or file), or None when no such note exists."""
        entry = self.entries.get(page_src_uri(version, path))
        if entry is None:
            return None
        if note_id and entry.annotation.note(note_id) is None:
            return None
        return entry.src_uri

    def see_target(self, target: str) -> tuple[str, str] | None:
        """(page path, note id) of a ``see`` link ``v<version>/<path>#<id>``, or None if missing."""
        match = SEE_TARGET.match(target)
        if not match:
            return None
        src = self.note_target(match["version"], match["path"], match["id"])
        return (src, match["id"]) if src else None


def rewrite_citations(markdown: str, resolve: Callable[[str, str, str | None], str | None]) -> tuple[str, list[str]]:
    """Turn note citations ``](v0.10.2/path#id)`` into links that work on the site.

    ``resolve(version, path, note_id)`` returns the link target to write, or None when the cited
    note does not exist; unresolved citations are left as they were and returned for reporting.
    """
    missing: list[str] = []

    def replace(match: re.Match[str]) -> str:
        cited = match["path"]
        version, _, path = cited[1:].partition("/")
        url = resolve(version, path, match["id"] or None)
        if url is None:
            missing.append(cited + (f"#{match['id']}" if match["id"] else ""))
            return match.group(0)
        return f"]({url})"

    return CITATION.sub(replace, markdown), missing
