"""The free-block queue: a doubly linked list with O(1) removal from the middle.

Free blocks are kept in *eviction order*: the block at the front is the next one handed out,
and with it whatever prefix-cache content it still holds is lost. A request that hits a cached
but free block must pull that block out of the queue wherever it is, so the queue needs O(1)
removal of an arbitrary member -- which a plain ``collections.deque`` cannot do. vLLM therefore
threads the queue through the blocks themselves (``prev_free`` / ``next_free``) between two
sentinel nodes, allocating nothing per operation; this module does the same.

Bulk operations keep the order of their argument: ``append_n([a, b])`` leaves ``..., a, b`` at
the tail and ``prepend_n([a, b])`` leaves ``a, b, ...`` at the front.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from reference.blocks.errors import OutOfBlocks, UnknownBlock
from reference.blocks.v1.block import KVBlock


class FreeBlockQueue:
    """Blocks with no references, front = next to be reused."""

    def __init__(self, blocks: Iterable[KVBlock] = ()) -> None:
        self._head = KVBlock(block_id=-1)  # sentinel before the first free block
        self._tail = KVBlock(block_id=-1)  # sentinel after the last free block
        self._head.next_free = self._tail
        self._tail.prev_free = self._head
        self._size = 0
        self.append_n(list(blocks))

    # -- queries ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[KVBlock]:
        node = self._head.next_free
        while node is not self._tail:
            assert node is not None
            yield node
            node = node.next_free

    def contains(self, block: KVBlock) -> bool:
        """True when ``block`` is linked into this queue (O(1): a queued block has both links)."""
        return block.prev_free is not None and block.next_free is not None

    def block_ids(self) -> list[int]:
        """The queue's block ids, front first."""
        return [block.block_id for block in self]

    # -- removal ------------------------------------------------------------------------------
    def popleft(self) -> KVBlock:
        """Remove and return the front block."""
        if self._size == 0:
            raise OutOfBlocks("the free queue is empty")
        block = self._head.next_free
        assert block is not None
        self._unlink(block)
        return block

    def popleft_n(self, n: int) -> list[KVBlock]:
        """Remove and return the first ``n`` blocks, front first.

        One walk from the front collects them; the head sentinel is then linked straight to the
        first block left, so the blocks in between are cut out together rather than one by one.
        """
        if n > self._size:
            raise OutOfBlocks(f"asked for {n} free blocks, the queue holds {self._size}")
        taken = []
        node = self._head.next_free
        for _ in range(n):
            assert node is not None
            taken.append(node)
            node = node.next_free
        assert node is not None
        self._head.next_free = node
        node.prev_free = self._head
        for block in taken:
            block.prev_free = block.next_free = None
        self._size -= n
        return taken

    def remove(self, block: KVBlock) -> None:
        """Unlink ``block`` from wherever it is in the queue."""
        if not self.contains(block):
            raise UnknownBlock(f"block {block.block_id} is not in the free queue")
        self._unlink(block)

    def remove_n(self, blocks: list[KVBlock]) -> None:
        """Unlink every block of ``blocks`` (each queued, each once) from wherever it is, in one pass.

        A prefix-cache hit revives thousands of free blocks at a long context; this unlinks them
        with no call per block. A block that is not queued raises UnknownBlock; the blocks before
        it stay unlinked and the size stays exact.
        """
        for block in blocks:
            predecessor, successor = block.prev_free, block.next_free
            if predecessor is None or successor is None:
                raise UnknownBlock(f"block {block.block_id} is not in the free queue")
            predecessor.next_free = successor
            successor.prev_free = predecessor
            block.prev_free = block.next_free = None
            self._size -= 1

    # -- insertion ----------------------------------------------------------------------------
    def append(self, block: KVBlock) -> None:
        """Put ``block`` at the tail (reused last)."""
        self._link_before(block, self._tail)

    def append_n(self, blocks: list[KVBlock]) -> None:
        """Put ``blocks`` at the tail, keeping their order."""
        self._link_run(blocks, self._tail)

    def prepend_n(self, blocks: list[KVBlock]) -> None:
        """Put ``blocks`` at the front, keeping their order (``blocks[0]`` becomes the front)."""
        first = self._head.next_free
        assert first is not None
        self._link_run(blocks, first)

    def append_released(self, blocks: list[KVBlock]) -> None:
        """:meth:`append_n` for blocks known to be out of the queue and distinct, unchecked.

        The pool's release path uses it: a block whose last reference was just dropped had a
        reference, so it was not queued, and it reaches zero once. vLLM links them the same way.
        """
        before = self._tail.prev_free
        assert before is not None
        self._splice(blocks, before, self._tail)

    def prepend_released(self, blocks: list[KVBlock]) -> None:
        """:meth:`prepend_n` for blocks known to be out of the queue and distinct, unchecked."""
        after = self._head.next_free
        assert after is not None
        self._splice(blocks, self._head, after)

    # -- internals ----------------------------------------------------------------------------
    def _splice(self, blocks: list[KVBlock], before: KVBlock, after: KVBlock) -> None:
        """Link ``blocks`` in order between the adjacent nodes ``before`` and ``after`` (unchecked)."""
        last = before
        for block in blocks:
            last.next_free = block
            block.prev_free = last
            last = block
        last.next_free = after
        after.prev_free = last
        self._size += len(blocks)

    def _link_run(self, blocks: list[KVBlock], successor: KVBlock) -> None:
        """Link ``blocks`` in order just before ``successor``, in one pass.

        A block already queued, or passed twice (its link is set once it is linked here), stops
        the pass: the blocks linked so far are cut out again and the whole batch is refused.
        """
        predecessor = successor.prev_free
        assert predecessor is not None
        last = predecessor
        for block in blocks:
            if block.prev_free is not None or block.next_free is not None:
                self._cut_run(predecessor, last, successor)
                raise UnknownBlock(f"block {block.block_id} is already in the free queue or passed twice")
            last.next_free = block
            block.prev_free = last
            last = block
        last.next_free = successor
        successor.prev_free = last
        self._size += len(blocks)

    def _cut_run(self, predecessor: KVBlock, last: KVBlock, successor: KVBlock) -> None:
        """Undo a partly linked run: unlink the blocks after ``predecessor`` up to ``last``."""
        node = predecessor.next_free if last is not predecessor else None
        while node is not None:
            following = node.next_free if node is not last else None
            node.prev_free = node.next_free = None
            node = following
        predecessor.next_free = successor
        successor.prev_free = predecessor

    def _link_before(self, block: KVBlock, successor: KVBlock) -> None:
        if self.contains(block):
            raise UnknownBlock(f"block {block.block_id} is already in the free queue")
        self._link_unqueued_before(block, successor)

    def _link_unqueued_before(self, block: KVBlock, successor: KVBlock) -> None:
        predecessor = successor.prev_free
        assert predecessor is not None
        predecessor.next_free = block
        block.prev_free = predecessor
        block.next_free = successor
        successor.prev_free = block
        self._size += 1

    def _unlink(self, block: KVBlock) -> None:
        predecessor, successor = block.prev_free, block.next_free
        assert predecessor is not None and successor is not None
        predecessor.next_free = successor
        successor.prev_free = predecessor
        block.prev_free = block.next_free = None
        self._size -= 1
