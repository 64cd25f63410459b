"""Synthetic upstream releases for the annotation checker's tests (imported as ``annotation_toy``).

The tests never touch vLLM's bytes or the network: a tiny upstream file of our own (a toy ring
queue) is served by a fake reader, and annotation files about it are written into a temporary
annotations root. ``ToyRelease.write`` builds a well-formed file by default; each test breaks
exactly one thing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from annotations.check import Checker
from annotations.model import range_hash, upstream_lines
from upstream.fetch import UpstreamError

VERSION = "9.9.9"
COMMIT = "abcdef123"
UPSTREAM = "toy/ring.py"
TOY_SOURCE = b'''"""A toy ring queue used only to test the annotation checker."""

import collections


class Ring:
    def __init__(self, size):
        self.size = size
        self.items = collections.deque()

    def push(self, item):
        if len(self.items) == self.size:
            self.items.popleft()
        self.items.append(item)

    def peek(self):
        return self.items[0]
'''
VERSION_FILE = f"__commit_id__ = commit_id = 'g{COMMIT}'\n".encode()

#: (id, start, end) of a complete, non-overlapping tiling of TOY_SOURCE.
TOY_NOTES = [
    ("ring.module", 1, 3),
    ("ring.init", 6, 9),
    ("ring.push", 11, 14),
    ("ring.peek", 16, 17),
]


@dataclass
class NoteSpec:
    """How to write one note heading and body; ``hash`` None means the correct hash."""

    id: str
    start: int
    end: int
    links: tuple[str, ...] = ()
    hash: str | None = None
    body: str = "Why these lines exist."


@dataclass
class ToyRelease:
    """A temporary annotations root plus the upstream bytes a fake reader serves."""

    root: Path
    files: dict[tuple[str, str], bytes] = field(default_factory=dict)

    def reader(self, version: str, path: str) -> bytes:
        try:
            return self.files[(version, path)]
        except KeyError:
            raise UpstreamError(f"no {path} at {version} in the toy release") from None

    def header(self, **overrides: str) -> str:
        data = self.files[(VERSION, UPSTREAM)]
        values = {
            "upstream": UPSTREAM, "version": VERSION, "commit": COMMIT,
            "sha256": hashlib.sha256(data).hexdigest(), "coverage": "100", "title": "A toy ring",
        }
        values.update(overrides)
        return "---\n" + "".join(f"{k}: {v}\n" for k, v in values.items()) + "---\n"

    def text(self, notes: list[NoteSpec] | None = None, intro: str = "An introduction.", **header: str) -> str:
        lines = upstream_lines(self.files[(VERSION, UPSTREAM)])
        if notes is None:
            notes = [NoteSpec(*n) for n in TOY_NOTES]
        parts = [self.header(**header), "", intro, ""]
        for note in notes:
            digest = note.hash if note.hash is not None else range_hash(lines, note.start, note.end)
            rng = f"L{note.start}" if note.start == note.end else f"L{note.start}-L{note.end}"
            parts += [f"## `{note.id}` {rng} · {digest}", "", note.body, ""]
            parts += [f"- {link}" for link in note.links]
            if note.links:
                parts.append("")
        return "\n".join(parts)

    def write(self, notes: list[NoteSpec] | None = None, *, text: str | None = None,
              where: str = f"v{VERSION}/{UPSTREAM}.md", **kwargs: str) -> Path:
        path = self.root / where
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text if text is not None else self.text(notes, **kwargs), encoding="utf-8")
        return path

    def checker(self, props: set[str] | None = None, **kwargs) -> Checker:
        names = props if props is not None else {"toy.prop"}
        kwargs.setdefault("property_names", lambda: names)
        return Checker(self.root, reader=self.reader, **kwargs)
