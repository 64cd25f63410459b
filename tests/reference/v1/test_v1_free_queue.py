"""The free queue: order semantics against a list model, and O(1) operations."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference.blocks.errors import OutOfBlocks, UnknownBlock
from reference.blocks.v1.block import KVBlock
from reference.blocks.v1.free_queue import FreeBlockQueue

OPS = st.lists(st.tuples(st.sampled_from(["popleft", "remove", "append", "prepend_n", "append_n"]),
                         st.integers(0, 30), st.integers(0, 3)), max_size=40)


@given(OPS)
def test_queue_matches_list_model(ops):
    """Catches: a linked-list bug (lost link, reversed bulk insert, stale size) that reorders or drops free blocks."""
    blocks = [KVBlock(i) for i in range(12)]
    queue = FreeBlockQueue(blocks[:6])
    model = blocks[:6]
    for kind, pick, count in ops:
        outside = [b for b in blocks if b not in model]
        if kind == "popleft" and model:
            assert queue.popleft() is model.pop(0)
        elif kind == "remove" and model:
            victim = model.pop(pick % len(model))
            queue.remove(victim)
        elif kind == "append" and outside:
            queue.append(outside[pick % len(outside)])
            model.append(outside[pick % len(outside)])
        elif kind in ("prepend_n", "append_n"):
            chosen = outside[:count]
            getattr(queue, kind)(chosen)
            model = chosen + model if kind == "prepend_n" else model + chosen
        assert queue.block_ids() == [b.block_id for b in model]
        assert len(queue) == len(model)
        assert all(queue.contains(b) == (b in model) for b in blocks)


def test_operations_never_walk_the_queue(monkeypatch):
    """Catches: an O(n) remove/append/prepend (e.g. list.remove) that makes eviction quadratic."""
    blocks = [KVBlock(i) for i in range(1000)]
    queue = FreeBlockQueue(blocks[:999])

    def forbidden(self):
        raise AssertionError("iterated the queue")

    monkeypatch.setattr(FreeBlockQueue, "__iter__", forbidden)
    queue.remove(blocks[500])
    queue.append(blocks[500])
    queue.remove(blocks[10])
    queue.prepend_n([blocks[10], blocks[999]])
    assert queue.popleft() is blocks[10]
    assert len(queue) == 999
    monkeypatch.undo()
    assert queue.block_ids()[:2] == [999, 0]
    assert queue.block_ids()[-1] == 500


def test_misuse_is_refused_without_change():
    """Catches: double-queueing a block or removing an unqueued one silently corrupting the links."""
    blocks = [KVBlock(i) for i in range(4)]
    queue = FreeBlockQueue(blocks[:3])
    with pytest.raises(UnknownBlock):
        queue.append(blocks[1])
    with pytest.raises(UnknownBlock):
        queue.prepend_n([blocks[3], blocks[3]])
    with pytest.raises(UnknownBlock):
        queue.remove(blocks[3])
    with pytest.raises(OutOfBlocks):
        queue.popleft_n(4)
    assert queue.block_ids() == [0, 1, 2]


def test_remove_n_unlinks_from_anywhere_and_refuses_an_unqueued_block():
    """Catches: a bulk unlink (the pool's touch of a long hit) that loses or keeps a neighbour's
    link, miscounts the size, or accepts a block that is not queued."""
    blocks = [KVBlock(block_id=i) for i in range(10)]
    queue = FreeBlockQueue(blocks)
    queue.remove_n([blocks[7], blocks[0], blocks[4]])
    assert queue.block_ids() == [1, 2, 3, 5, 6, 8, 9] and len(queue) == 7
    with pytest.raises(UnknownBlock):
        queue.remove_n([blocks[1], blocks[4]])
    assert queue.block_ids() == [2, 3, 5, 6, 8, 9] and len(queue) == 6
