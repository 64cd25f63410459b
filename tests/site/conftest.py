"""Fixtures for the site tests, built from :mod:`tests.site.synthetic` (no vLLM code anywhere)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.site.synthetic import UPSTREAM_CU, UPSTREAM_PY, FakeUpstream, NoteSpec, annotation_text, write_annotation


@pytest.fixture
def fake_upstream() -> FakeUpstream:
    return FakeUpstream({("9.9.9", "pkg/tiny.py"): UPSTREAM_PY, ("9.9.9", "csrc/twice.cu"): UPSTREAM_CU})


@pytest.fixture
def standard_notes() -> dict[str, list[NoteSpec]]:
    """Notes for both synthetic files; ids contain dots, links of every kind."""
    return {
        "pkg/tiny.py": [
            NoteSpec("tiny.doc", 1, 1, "The module docstring."),
            NoteSpec("tiny.add", 3, 6, "Adds; see [the kernel](v9.9.9/csrc/twice.cu#twice.body).",
                     ("ref: reference.blocks.errors", "prop: demo.prop", "see: v9.9.9/csrc/twice.cu#twice.body")),
            NoteSpec("tiny.box", 9, 11, "A box.\n\n```python\nprint('fenced')\n```"),
        ],
        "csrc/twice.cu": [NoteSpec("twice.body", 2, 4, "Doubles.")],
    }


@pytest.fixture
def annotation_root(tmp_path: Path, fake_upstream: FakeUpstream, standard_notes) -> Path:
    root = tmp_path / "annotations"
    for path, notes in standard_notes.items():
        write_annotation(root, "9.9.9", path, annotation_text(path, "9.9.9", fake_upstream.files[("9.9.9", path)], notes))
    return root
