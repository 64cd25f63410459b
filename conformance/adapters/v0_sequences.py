"""The V0 scheduler's sequences and groups, as vLLM's ``Sequence``/``SequenceGroup`` track them.

vLLM's V0 block manager is handed sequence objects and reads from them only what this module
keeps: a sequence's id, its tokens, how many of them were computed, whether it is still in its
prefill stage, and its status (which the manager's callers filter a group by). Every side of the
harness that keeps V0 sequences itself uses these two classes: the reference adapter
(:mod:`conformance.adapters.reference_v0`), the V0 machine's own bookkeeping
(:mod:`conformance.machines.v0`), and the V0 benchmark's recorder and reference side
(:mod:`benchmarks.traces_v0`, :mod:`benchmarks.block_manager_v0`). vLLM's side keeps vLLM's real
objects instead, behind the same methods (:class:`conformance.adapters.vllm_v0.VllmV0Sequences`).

This module never imports vLLM.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from reference.blocks.v0 import SeqView

# A sequence's status, by the name of vLLM's ``SequenceStatus`` member it stands for (FINISHED:
# any of the FINISHED_* members).
WAITING, RUNNING, SWAPPED, FINISHED = "WAITING", "RUNNING", "SWAPPED", "FINISHED"


@dataclass
class V0Sequence:
    """One sequence: its tokens (prompt, then outputs), computed count, stage and status."""

    seq_id: int
    tokens: list[int]
    computed: int = 0
    prefill: bool = True  # vLLM's stage: decode from the moment every token was computed once
    status: str = WAITING

    def view(self) -> SeqView:
        """The plain description the reference manager is given."""
        return SeqView(self.seq_id, self.tokens, self.computed, self.prefill)

    def compute(self, n: int) -> None:
        """The forward pass computed ``n`` more tokens (``SequenceData.update_num_computed_tokens``)."""
        self.computed += n
        if self.computed >= len(self.tokens):
            self.prefill = False

    def compute_all(self) -> None:
        """The forward pass computed every token the sequence holds."""
        self.compute(len(self.tokens) - self.computed)

    def append_token(self, token: int) -> None:
        """The sampler appended one output token."""
        self.tokens.append(token)

    def fork(self, child_id: int) -> V0Sequence:
        """A copy under ``child_id`` (``Sequence.fork``): same tokens, counts, stage and status."""
        return V0Sequence(child_id, list(self.tokens), self.computed, self.prefill, self.status)


class V0Sequences:
    """Every sequence by id and every group's members in order, as the V0 scheduler holds them.

    A group keeps its finished members (as a ``SequenceGroup`` does); :meth:`live` leaves them out.
    Group keys are whatever the caller names groups by (the adapters: strings, the benchmark: ints).
    """

    def __init__(self) -> None:
        self.seqs: dict[int, V0Sequence] = {}
        self.groups: dict[Hashable, list[int]] = {}

    def add_group(self, group: Hashable, seq_ids: Iterable[int], prompt: Iterable[int]) -> None:
        """A new group of waiting sequences, each holding its own copy of ``prompt``."""
        ids = list(seq_ids)
        self.groups[group] = ids
        for sid in ids:
            self.seqs[sid] = V0Sequence(sid, list(prompt))

    def members(self, group: Hashable) -> list[V0Sequence]:
        """The group's sequences in order, finished ones included."""
        return [self.seqs[s] for s in self.groups[group]]

    def with_status(self, group: Hashable, status: str) -> list[V0Sequence]:
        """The group's sequences of one status (``SequenceGroup.get_seqs(status=...)``)."""
        return [self.seqs[s] for s in self.groups[group] if self.seqs[s].status == status]

    def views(self, group: Hashable, status: str) -> list[SeqView]:
        """:meth:`with_status` as the values the reference manager is given."""
        return [seq.view() for seq in self.with_status(group, status)]

    def move(self, group: Hashable, old: str, new: str) -> None:
        """The group's ``old`` sequences become ``new`` (admission, swap out, swap in)."""
        for seq in self.with_status(group, old):
            seq.status = new

    def fork(self, group: Hashable, parent: int, child: int) -> V0Sequence:
        """Add a fork of ``parent`` under ``child`` to ``group`` and return it."""
        seq = self.seqs[parent].fork(child)
        self.seqs[child] = seq
        self.groups[group].append(child)
        return seq

    def finish(self, seq_id: int) -> None:
        self.seqs[seq_id].status = FINISHED

    def compute(self, seq_id: int, n: int) -> None:
        """The forward pass computed ``n`` more tokens of sequence ``seq_id``."""
        self.seqs[seq_id].compute(n)

    def compute_all(self, seq_id: int) -> None:
        self.seqs[seq_id].compute_all()

    def append_token(self, seq_id: int, token: int) -> None:
        self.seqs[seq_id].append_token(token)

    def live(self, group: Hashable) -> list[int]:
        """The ids of the group's sequences that are not finished, in order."""
        return [s for s in self.groups[group] if self.seqs[s].status != FINISHED]
