"""Serving facts shared by several annotation headers, written once in ``annotations/serving.md``.

A file's ``serving:`` header says what "the serving path" means for its reach badges. Some of
what it says holds for many files of a release: which engine 0.10.2 runs by default, which value
of ``enable_prefix_caching`` a status means, what 0.33.0's defaults turn on. Such a fact is a
*definition*: a paragraph in ``serving.md`` under a heading ``## `<version>/<name>```. A header
includes it by writing ``{{<name>}}``, and the parser (``annotations.model``) puts the paragraph
in its place, so every page shows the fact and there is one text to correct. ``reach:`` header
lines and notes' ``- reach:`` lines include the same way the reasons of a route several notes or
files share.

The definitions file sits beside the release folders (``<root>/serving.md`` next to
``<root>/v0.10.2/``); its upstream citations are checked like those of any Markdown page there.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

SERVING_FILE = "serving.md"
#: ``{{v0-engine}}`` in a ``serving:`` header: the definition of that name for the file's release.
INCLUDE = re.compile(r"\{\{(?P<name>[a-z0-9-]+)\}\}")
_DEFINITION = re.compile(r"^## `(?P<version>[0-9]+\.[0-9]+\.[0-9]+)/(?P<name>[a-z0-9-]+)` *$")
_RELEASE_FOLDER = re.compile(r"^v[0-9]+\.[0-9]+\.[0-9]+$")

Definitions = dict[tuple[str, str], str]  # (version, name) -> one paragraph of Markdown


class ServingError(ValueError):
    """``serving.md`` is malformed, or a header names a definition it lacks."""

    def __init__(self, message: str, line: int = 0) -> None:
        self.line = line  # 1-based line in serving.md, 0 when the problem is not in it
        super().__init__(message)


def parse_definitions(text: str) -> Definitions:
    """The definitions in ``serving.md`` text: each ``## `<version>/<name>``` heading's paragraph.

    Text before the first definition is the file's own introduction. A definition runs to the
    next heading of any level; its lines are joined into one paragraph, as a header holds one line.
    """
    definitions: Definitions = {}
    current: tuple[str, str] | None = None
    started = 0
    lines: list[str] = []

    def close() -> None:
        if current is None:
            return
        body = " ".join(line.strip() for line in lines if line.strip())
        if not body:
            raise ServingError(f"definition `{current[0]}/{current[1]}` is empty", started)
        if INCLUDE.search(body):
            raise ServingError(f"definition `{current[0]}/{current[1]}` includes another", started)
        definitions[current] = body

    for number, line in enumerate(text.split("\n"), start=1):
        if line.startswith("#"):
            close()
            current, lines = None, []
            match = _DEFINITION.match(line.rstrip())
            if line.startswith("## ") and not match:
                raise ServingError(f"a level-2 heading must be '## `<version>/<name>`', got {line.strip()!r}", number)
            if match:
                key = (match["version"], match["name"])
                if key in definitions:
                    raise ServingError(f"definition `{key[0]}/{key[1]}` is given twice", number)
                current, started = key, number
            continue
        if current is not None:
            lines.append(line)
    close()
    return definitions


@lru_cache(maxsize=8)
def _read(path: Path, mtime_ns: int) -> Definitions:
    return parse_definitions(path.read_text(encoding="utf-8"))


def definitions_at(root: Path) -> Definitions:
    """The definitions of the annotations root ``root`` (none when it has no ``serving.md``)."""
    path = root / SERVING_FILE
    if not path.is_file():
        return {}
    return _read(path.resolve(), path.stat().st_mtime_ns)


def root_of(annotation_path: Path) -> Path | None:
    """The annotations root above ``<root>/v<version>/...``, or ``None`` outside such a folder."""
    for parent in Path(annotation_path).parents:
        if _RELEASE_FOLDER.match(parent.name):
            return parent.parent
    return None


def expand(serving: str, version: str, definitions: Definitions, where: str = "serving header") -> str:
    """``serving`` (the text of the line ``where`` names, e.g. "reach header") with each ``{{name}}``
    replaced by the release's definition of that name."""

    def one(match: re.Match[str]) -> str:
        key = (version, match["name"])
        if key not in definitions:
            known = ", ".join(sorted(name for v, name in definitions if v == version)) or "none"
            raise ServingError(f"{where} names {{{{{match['name']}}}}}, which {SERVING_FILE} does not define"
                               f" for {version} (defined: {known})")
        return definitions[key]

    return INCLUDE.sub(one, serving)


def names_used(serving: str) -> set[str]:
    """The definition names a raw ``serving:`` or ``reach:`` header line includes."""
    return {match["name"] for match in INCLUDE.finditer(serving)}
