"""The hooks' shared marker replacement and root finding (``docs/hooks/page_markers.py``)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from mkdocs.exceptions import PluginError

from docs.hooks.page_markers import load_or_fail, replace_html_marker, replace_marker, replace_named_markers, repo_root


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


def test_a_refused_data_file_stops_the_build_naming_the_page():
    """Catches: a hook's broken data file (a report, the matrix, the liveness table) let through as
    a bare exception without the page's name, or an error the reader does not own swallowed."""
    def read(path: str) -> str:
        if path == "broken.json":
            raise ValueError("broken.json: not JSON")
        if path == "missing.json":
            raise KeyError(path)
        return f"read {path}"

    assert load_or_fail(read, "ok.json", ValueError, "releases page") == "read ok.json"
    with pytest.raises(PluginError, match=r"^releases page: broken\.json: not JSON$"):
        load_or_fail(read, "broken.json", ValueError, "releases page")
    with pytest.raises(KeyError):
        load_or_fail(read, "missing.json", ValueError, "releases page")


def test_named_markers_are_each_replaced_and_an_unknown_name_is_an_error():
    """Catches: a figure or worked-problem marker left on the page, replaced by another section's
    output, or an unknown name built silently instead of failing with the known names."""
    marker = re.compile(r"^FIG:(?P<name>[a-z-]+)$", re.MULTILINE)
    sections = {"one": lambda: "ONE", "two": lambda: "TWO"}
    assert replace_named_markers("a\nFIG:two\nb\nFIG:one\n", marker, sections, "p.md", "figure") == "a\nTWO\nb\nONE\n"
    with pytest.raises(PluginError, match=r"^p\.md: unknown figure 'three' \(known: one, two\)$"):
        replace_named_markers("FIG:three", marker, sections, "p.md", "figure")
