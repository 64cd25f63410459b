"""The exceptions every reference block manager raises when it is misused.

A block manager is bookkeeping: it hands out page ids, counts references and remembers hashes.
When a caller asks for something impossible (free a request twice, allocate more pages than the
pool holds, pass a negative token count) the manager must say *what* was wrong and must leave its
books exactly as they were before the call, so that the caller can recover or report. Every such
refusal is one of the classes below, all sharing the base :class:`BlockManagerError`, so callers
can catch "any misuse" or one precise kind.

Each class carries a stable ``category`` string. The conformance adapters report refusals by that
category, so the reference and vLLM are compared on *which kind* of refusal happened, not on
error-message wording.
"""

from __future__ import annotations


class BlockManagerError(Exception):
    """Base class: a block-manager call was refused and no state was changed."""

    category = "block_manager_error"


class UnknownRequest(BlockManagerError, KeyError):
    """The request id names no request the manager currently tracks."""

    category = "unknown_request"

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return Exception.__str__(self)


class UnknownBlock(BlockManagerError, KeyError):
    """The block id is outside the pool, or names a block the call may not touch."""

    category = "unknown_block"

    def __str__(self) -> str:
        return Exception.__str__(self)


class DoubleFree(BlockManagerError):
    """A block or request was released more times than it was acquired."""

    category = "double_free"


class OutOfBlocks(BlockManagerError):
    """The pool has too few free blocks to satisfy the request."""

    category = "out_of_blocks"


class InvalidArgument(BlockManagerError, ValueError):
    """An argument is malformed: a negative size, an empty token list, a bad combination."""

    category = "invalid_argument"


__all__ = [
    "BlockManagerError",
    "UnknownRequest",
    "UnknownBlock",
    "DoubleFree",
    "OutOfBlocks",
    "InvalidArgument",
]
