"""The committed annotation files pass the checker against the pinned upstream bytes.

The bytes come from the cached, sha256-verified release sdists (``upstream.fetch``); the
test skips, saying why, only when they cannot be obtained for lack of network.
"""

from __future__ import annotations

import urllib.error

import pytest

from annotations.check import Checker
from annotations.model import ANNOTATIONS_ROOT, annotation_paths
from conformance.properties import property_names
from upstream import fetch

FILES = annotation_paths(ANNOTATIONS_ROOT)
MARKDOWN = sorted(ANNOTATIONS_ROOT.glob("*.md"))


def _offline_reader(version: str, path: str) -> bytes:
    try:
        return fetch.read_file(version, path)
    except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
        if isinstance(err, urllib.error.HTTPError):
            raise  # the index answered: not a network outage, so a real failure
        pytest.skip(f"cannot obtain the vllm {version} sdist (no network?): {err}")


@pytest.fixture(scope="module")
def checker() -> Checker:
    return Checker(ANNOTATIONS_ROOT, reader=_offline_reader, property_names=property_names)


@pytest.mark.parametrize("path", FILES + MARKDOWN, ids=lambda p: str(p.relative_to(ANNOTATIONS_ROOT)))
def test_annotation_file_checks_clean(checker, path):
    """Catches: a committed note whose hash, range, coverage or links no longer hold for the pinned release."""
    report = checker.run([path])
    assert report.ok, "\n".join(str(p) for p in report.problems)


def test_there_are_annotation_files():
    """Catches: discovery finding nothing (a glob or layout change would silently check zero files)."""
    assert any(p.name == "block_manager.py.md" for p in FILES), FILES
