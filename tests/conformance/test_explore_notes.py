"""The op -> note map behind the explorer's links: every note it names exists, every op has one."""

from __future__ import annotations

import importlib

import pytest

from annotations import model
from conformance.explorer import op_notes
from conformance.explorer.op_notes import (
    BOOKKEEPING,
    OP_NOTES,
    OP_REFERENCE,
    NoteRef,
    all_note_refs,
    note_ref,
    notes_release,
)
from conformance.explorer.op_notes import op_notes as notes_for
from conformance.trace_file import OP_FIELDS


def annotated_notes() -> set[tuple[str, str, str]]:
    return {(a.version, a.upstream, n.id) for a in model.discover() for n in a.notes}


def missing_notes(refs: list[NoteRef], known: set[tuple[str, str, str]]) -> list[str]:
    return [r.target for r in refs if (r.version, r.path, r.note_id) not in known]


def test_every_mapped_note_exists_in_the_annotations() -> None:
    """Catches: a note renamed or removed in annotations/v*/ while the explorer still links to it
    (a dead link on every step of that op)."""
    known = annotated_notes()
    refs = all_note_refs()
    assert len(refs) > 30
    assert missing_notes(refs, known) == []
    # the check itself bites: a renamed note is reported
    renamed = NoteRef("0.33.0", "vllm/v1/core/kv_cache_manager.py", "kv_cache_manager.allocate_slots_renamed")
    assert missing_notes([renamed], known) == [renamed.target]


def test_every_op_of_the_trace_vocabulary_links_somewhere_or_is_bookkeeping() -> None:
    """Catches: an op added to the trace vocabulary (conformance/trace_file.py) that the explorer
    shows without notes and without saying why, or bookkeeping that is mapped anyway."""
    for semantics, ops in OP_FIELDS.items():
        for release, mapped in OP_NOTES[semantics].items():
            assert set(mapped) | BOOKKEEPING[semantics] == set(ops), (semantics, release)
            assert not set(mapped) & BOOKKEEPING[semantics]
        assert set(OP_REFERENCE[semantics]) | BOOKKEEPING[semantics] == set(ops), semantics


def test_every_reference_function_named_exists() -> None:
    """Catches: a reference method renamed while the explorer still says it reproduced the op."""
    for semantics, ops in OP_REFERENCE.items():
        for op, dotted in ops.items():
            module, cls, name = dotted.rsplit(".", 2)
            assert callable(getattr(getattr(importlib.import_module(module), cls), name)), (semantics, op, dotted)


def test_a_release_without_notes_links_the_nearest_annotated_one() -> None:
    """Catches: V1 traces recorded at v0.10.2 (no V1 notes at that release) linking nothing, or
    linking a release the annotations do not have."""
    assert notes_release("v1", "0.33.0") == "0.33.0"
    assert notes_release("v1", "0.10.2") == "0.33.0"  # none earlier: the oldest annotated one
    assert notes_release("v0", "0.10.2") == "0.10.2"
    assert notes_release("v0", "0.6.6") == "0.10.2"
    monkey = dict(OP_NOTES["v1"], **{"0.20.0": OP_NOTES["v1"]["0.33.0"]})
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(op_notes.OP_NOTES, "v1", monkey)
        assert notes_release("v1", "0.27.1") == "0.20.0"
        assert notes_release("v1", "0.33.1") == "0.33.0"
    assert [n.note_id for n in notes_for("v1", "0.10.2", "allocate_slots")][0] == "kv_cache_manager.allocate_slots"
    assert notes_for("v0", "0.10.2", "add_group") == []


def test_note_targets_are_parsed_strictly() -> None:
    """Catches: a malformed target silently linking nowhere."""
    assert note_ref("v0.10.2/vllm/core/block_manager.py#block_manager.fork") == \
        NoteRef("0.10.2", "vllm/core/block_manager.py", "block_manager.fork")
    with pytest.raises(ValueError, match="not 'v<release>"):
        note_ref("vllm/core/block_manager.py#block_manager.fork")
