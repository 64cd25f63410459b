"""Fixtures for the annotation tooling tests: a toy release and a throwaway ``reference`` module.

The helpers live in ``annotation_toy`` (a uniquely named module, so that test files never import
another folder's ``conftest`` by accident).
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from annotation_toy import TOY_SOURCE, UPSTREAM, VERSION, VERSION_FILE, ToyRelease


@pytest.fixture
def toy(tmp_path: Path) -> ToyRelease:
    release = ToyRelease(tmp_path / "annotations")
    release.root.mkdir()
    release.files[(VERSION, UPSTREAM)] = TOY_SOURCE
    release.files[(VERSION, "vllm/_version.py")] = VERSION_FILE
    return release


@pytest.fixture
def fake_reference(monkeypatch: pytest.MonkeyPatch) -> str:
    """Register a throwaway module inside the real ``reference`` package; return its name."""
    import reference

    name = "reference._toy_fixture_for_annotation_tests"
    module = types.ModuleType(name)

    class Ring:
        def push(self) -> None:
            """A method a ref can name."""

    module.Ring = Ring
    monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(reference, name.rsplit(".", 1)[1], module, raising=False)
    return name
