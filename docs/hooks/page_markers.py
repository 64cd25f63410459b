"""What every page-filling hook does, one way each: find the repository root, read its data, and
put generated text where a page's marker stands.

* :func:`repo_root`: the folder of the build's ``mkdocs.yml`` (tests point it at a scratch copy);
  a configuration without that path is an error, never the working directory.
* :func:`load_or_fail`: a hook's data file read by its own reader; the reader's refusal stops the
  build with a PluginError naming the page, never a page built from a broken file.
* :func:`replace_marker` (in a page's Markdown) and :func:`replace_html_marker` (in its HTML, where
  the marker became a paragraph of its own): a page without its marker is an error naming the page
  and the marker, never a page built without the generated part.
* :func:`replace_named_markers`: each marker line naming a section (``SEED-FIGURE:placement``)
  replaced by what that section of a table draws; a name the table lacks is an error naming the
  page and the known names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from mkdocs.exceptions import PluginError

T = TypeVar("T")
S = TypeVar("S")


def repo_root(config: Any) -> Path:
    """The repository root: the folder holding ``config.config_file_path`` (the build's mkdocs.yml)."""
    path = getattr(config, "config_file_path", None)
    if not path:
        raise PluginError("the build's configuration names no mkdocs.yml: cannot find the repository root")
    return Path(path).resolve().parent


def load_or_fail(load: Callable[[S], T], source: S, errors: type[Exception], page: str) -> T:
    """``load(source)``; an ``errors`` it raises becomes a PluginError ``"<page>: <error>"``."""
    try:
        return load(source)
    except errors as err:
        raise PluginError(f"{page}: {err}") from None


def replace_marker(text: str, marker: str, replacement: str, page: str) -> str:
    """``text`` with every ``marker`` replaced by ``replacement``; PluginError if ``page`` has none."""
    if marker not in text:
        raise PluginError(f"{page}: the {marker} marker is missing")
    return text.replace(marker, replacement)


def replace_html_marker(html: str, marker: str, fragment: str, page: str) -> str:
    """``html`` with the paragraph ``<p>marker</p>`` replaced by ``fragment``; PluginError if ``page`` has none."""
    paragraph = f"<p>{marker}</p>"
    if paragraph not in html:
        raise PluginError(f"{page}: the {marker} marker is missing")
    return html.replace(paragraph, fragment, 1)


def replace_named_markers(text: str, marker: re.Pattern[str], sections: Mapping[str, Callable[[], str]],
                          page: str, what: str) -> str:
    """``text`` with each match of ``marker`` replaced by ``sections[match["name"]]()``; PluginError
    ``"<page>: unknown <what> <name>"`` (with the known names) for a name ``sections`` lacks."""

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in sections:
            raise PluginError(f"{page}: unknown {what} {name!r} (known: {', '.join(sections)})")
        return sections[name]()

    return marker.sub(replace, text)
