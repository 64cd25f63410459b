"""How a lockstep adapter finds the method for an op: one table per semantics, one refusal.

An adapter subclasses :class:`Ops`, names its ``semantics`` (a key of
:data:`conformance.trace_file.OP_FIELDS`), defines a ``_<kind>`` method for every op kind of that
vocabulary, and sets ``self.ops = dispatch_table(self)``; its ``apply`` calls ``self.handler(op)``.
An op outside the vocabulary is refused with :func:`unknown_op` before anything runs, the same
way by every adapter of that semantics, so the two sides of a lockstep run agree on it.

This module never imports vLLM.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from conformance.lockstep import OpError
from conformance.trace_file import OP_FIELDS

#: The category of an op outside the vocabulary.
UNKNOWN_OP = "invalid_argument"


class Ops:
    """What an adapter's op dispatch needs: its ``semantics`` and its table ``ops`` (:func:`dispatch_table`)."""

    semantics: ClassVar[str]
    ops: dict[str, Callable[[dict], Any]]

    def handler(self, op: dict) -> Callable[[dict], Any]:
        """The method for ``op``; an op outside the vocabulary is refused (:func:`unknown_op`)."""
        found = self.ops.get(op["op"])
        if found is None:
            raise unknown_op(self.semantics, op["op"])
        return found


def dispatch_table(system: Ops) -> dict[str, Callable[[dict], Any]]:
    """An adapter's table from op kind to method: every op of its semantics' vocabulary
    (:data:`conformance.trace_file.OP_FIELDS`), each handled by the adapter's ``_<kind>`` method."""
    return {kind: getattr(system, "_" + kind) for kind in OP_FIELDS[system.semantics]}


def unknown_op(semantics: str, kind: Any) -> OpError:
    """The refusal of an op outside the ``semantics`` vocabulary."""
    return OpError(UNKNOWN_OP, f"unknown {semantics} op {kind!r}")


__all__ = ["UNKNOWN_OP", "Ops", "dispatch_table", "unknown_op"]
