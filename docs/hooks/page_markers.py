"""The two things every page-filling hook does, one way each: find the repository root, and put
generated text where a page's marker stands.

* :func:`repo_root`: the folder of the build's ``mkdocs.yml`` (tests point it at a scratch copy);
  a configuration without that path is an error, never the working directory.
* :func:`replace_marker` (in a page's Markdown) and :func:`replace_html_marker` (in its HTML, where
  the marker became a paragraph of its own): a page without its marker is an error naming the page
  and the marker, never a page built without the generated part.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError


def repo_root(config: Any) -> Path:
    """The repository root: the folder holding ``config.config_file_path`` (the build's mkdocs.yml)."""
    path = getattr(config, "config_file_path", None)
    if not path:
        raise PluginError("the build's configuration names no mkdocs.yml: cannot find the repository root")
    return Path(path).resolve().parent


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
