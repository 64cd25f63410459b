"""The hooks' shared marker replacement and root finding (``docs/hooks/page_markers.py``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from mkdocs.exceptions import PluginError

from docs.hooks.page_markers import replace_html_marker, replace_marker, repo_root


def test_missing_marker_is_an_error_naming_page_and_marker():
    """Catches: a page whose marker was deleted or misspelt built silently without its generated part."""
    with pytest.raises(PluginError, match=r"conformance\.md: the CONFORMANCE-STATUS marker is missing"):
        replace_marker("no marker here", "CONFORMANCE-STATUS", "table", "conformance.md")
    assert replace_marker("a\n\nMARK\n\nb", "MARK", "table", "p.md") == "a\n\ntable\n\nb"


def test_root_is_the_folder_of_mkdocs_yml_never_the_working_directory(tmp_path):
    """Catches: a hook reading reports from the working directory (or another guess) instead of the
    repository whose mkdocs.yml is being built, and a configuration without one passing silently."""
    assert repo_root(SimpleNamespace(config_file_path=str(tmp_path / "mkdocs.yml"))) == tmp_path.resolve()
    for config in (None, SimpleNamespace(), SimpleNamespace(config_file_path=None)):
        with pytest.raises(PluginError, match="names no mkdocs.yml"):
            repo_root(config)
    assert repo_root(SimpleNamespace(config_file_path="mkdocs.yml")) == Path.cwd().resolve()


def test_missing_html_marker_is_an_error_and_only_the_marker_paragraph_is_replaced():
    """Catches: an HTML-stage hook (annotated source, reference module, comparison, bug page) building
    a page without its generated part when the marker paragraph is missing, or replacing the
    marker's text where it appears inside other prose or code."""
    with pytest.raises(PluginError, match=r"bugs/x\.md: the BUG-EXPLORER marker is missing"):
        replace_html_marker("<p>no marker</p>", "BUG-EXPLORER", "<div/>", "bugs/x.md")
    html = "<p>see BUG-EXPLORER below</p>\n<p>BUG-EXPLORER</p>\n<p>BUG-EXPLORER</p>"
    assert replace_html_marker(html, "BUG-EXPLORER", "<div/>", "p.md") == (
        "<p>see BUG-EXPLORER below</p>\n<div/>\n<p>BUG-EXPLORER</p>")
