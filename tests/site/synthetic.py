"""Synthetic annotations over a synthetic "upstream" file, for the site tests.

Nothing here is vLLM code. The upstream file is a few lines of our own Python, the annotation
files are written in the format of ``annotations/FORMAT.md``, and the reader that stands in for
``upstream.fetch.read_file`` serves bytes from a dict, so the hooks can be tested without
network, cache or vLLM.
"""

from __future__ import annotations

import hashlib
import textwrap
from dataclasses import dataclass
from pathlib import Path

from annotations.model import range_hash, upstream_lines

REPO = Path(__file__).resolve().parents[2]
HOOKS = REPO / "docs" / "hooks"

#: A tiny upstream file with a multi-line docstring (a token spanning lines) and blank lines.
UPSTREAM_PY = textwrap.dedent(
    '''\
    """A tiny module used only by the site tests."""

    def add(a, b):
        """Sum two numbers,
        across two docstring lines."""
        return a + b


    class Box:
        def __init__(self, value):
            self.value = value
    '''
).encode()

#: A second upstream file, so that ``see`` links and citations have somewhere to point.
UPSTREAM_CU = b"// a comment\nint twice(int x) {\n  return 2 * x;\n}\n"


@dataclass
class NoteSpec:
    """A note to write into a synthetic annotation file."""

    id: str
    start: int
    end: int
    body: str = "Why these lines exist."
    links: tuple[str, ...] = ()
    hash: str | None = None  # None: the correct hash of the lines


def annotation_text(upstream: str, version: str, data: bytes, notes: list[NoteSpec], *,
                    sha256: str | None = None, intro: str = "An introduction in our words.",
                    title: str = "A synthetic file") -> str:
    """An annotation file in the project's format, with correct hashes unless told otherwise."""
    lines = upstream_lines(data)
    out = [
        "---",
        f"upstream: {upstream}",
        f"version: {version}",
        "commit: abc1234",
        f"sha256: {sha256 or hashlib.sha256(data).hexdigest()}",
        "coverage: 0",
        f"title: {title}",
        "---",
        "",
        intro,
        "",
    ]
    for note in notes:
        digest = note.hash or range_hash(lines, note.start, note.end)
        rng = f"L{note.start}" if note.start == note.end else f"L{note.start}-L{note.end}"
        out += [f"## `{note.id}` {rng} · {digest}", "", note.body, ""]
        out += [f"- {link}" for link in note.links]
        out.append("")
    return "\n".join(out)


@dataclass
class FakeUpstream:
    """A stand-in for ``upstream.fetch.read_file`` serving fixed bytes."""

    files: dict[tuple[str, str], bytes]

    def __call__(self, version: str, path: str) -> bytes:
        try:
            return self.files[(version, path)]
        except KeyError:
            raise FileNotFoundError(f"no {path} at {version} in the fake upstream") from None


def write_annotation(root: Path, version: str, upstream: str, text: str) -> Path:
    path = root / f"v{version}" / f"{upstream}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
