"""vLLM's real V0 block manager (``SelfAttnBlockSpaceManager``) as a lockstep system.

Which releases have it, and how they are called, is read from :mod:`conformance.versions`
(a row's ``v0_api``); a release without it gives "not applicable" with the reason.

Public API (used by the machine and the benchmarks): :class:`VllmV0System` (``apply``,
``snapshot``, ``make_sequence``, ``make_group``) and :class:`VllmV0Sequences`, vLLM's own
``Sequence``/``SequenceGroup`` objects behind the methods of
:class:`conformance.adapters.v0_sequences.V0Sequences`.

Sequences and groups are built the way vLLM's own tests build them (``tests/core/utils.py``
``create_dummy_prompt``: a ``Sequence`` from ``token_inputs`` and a ``SequenceGroup`` around it);
status changes are made by hand, as those tests and the V0 scheduler do. vLLM is imported only
when a system is built, so importing this module is free.

The ops are those of :mod:`conformance.adapters.reference_v0` (its docstring says what each stands
for); both adapters refuse an op outside that vocabulary alike (``"invalid_argument"``).
"""

from __future__ import annotations

import os
from typing import Any

from conformance.adapters.installed_api import detect_v0
from conformance.adapters.op_dispatch import dispatch_table
from conformance.adapters.reference_v0 import KEY_ERROR, OUT_OF_BLOCKS, REFUSED, V0Ops
from conformance.adapters.v0_sequences import FINISHED, RUNNING, SWAPPED, WAITING
from conformance.configs import V0Config
from conformance.lockstep import NotApplicable, OpError
from conformance.versions import installed_v0


def _hex(value):
    return None if value is None else format(value & 0xFFFF_FFFF_FFFF_FFFF, "016x")


class VllmV0Sequences:
    """vLLM's own ``Sequence`` objects, grouped as the V0 scheduler holds them.

    The methods are those of :class:`conformance.adapters.v0_sequences.V0Sequences` (statuses by
    the same names; a finished sequence is ``FINISHED_STOPPED``); :meth:`group` builds the
    ``SequenceGroup`` the manager is handed, afresh from the current members.
    """

    def __init__(self, system: VllmV0System) -> None:
        from vllm.sequence import Logprob, SequenceStatus

        self.system = system
        self._Logprob, self._Status = Logprob, SequenceStatus
        self.seqs: dict[int, Any] = {}
        self.groups: dict[Any, list[int]] = {}

    def _status(self, name: str):
        return self._Status.FINISHED_STOPPED if name == FINISHED else getattr(self._Status, name)

    def add_group(self, group, seq_ids, prompt) -> None:
        ids = list(seq_ids)
        self.groups[group] = ids
        for sid in ids:
            self.seqs[sid] = self.system.make_sequence(sid, prompt)

    def group(self, group):
        """A ``SequenceGroup`` around the group's members (finished ones included)."""
        return self.system.make_group(str(group), [self.seqs[s] for s in self.groups[group]])

    def with_status(self, group, status: str) -> list:
        return self.group(group).get_seqs(status=self._status(status))

    def move(self, group, old: str, new: str) -> None:
        for seq in self.with_status(group, old):
            seq.status = self._status(new)

    def fork(self, group, parent: int, child: int):
        seq = self.seqs[parent].fork(child)
        self.seqs[child] = seq
        self.groups[group].append(child)
        return seq

    def finish(self, seq_id: int) -> None:
        self.seqs[seq_id].status = self._status(FINISHED)

    def compute(self, seq_id: int, n: int) -> None:
        self.seqs[seq_id].data.update_num_computed_tokens(n)

    def compute_all(self, seq_id: int) -> None:
        data = self.seqs[seq_id].data
        self.compute(seq_id, data.get_len() - data.get_num_computed_tokens())

    def append_token(self, seq_id: int, token: int) -> None:
        self.seqs[seq_id].append_token_id(token, {token: self._Logprob(0.0)})


class VllmV0System(V0Ops):
    label = "vllm"

    def __init__(self, config: V0Config) -> None:
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        target, logged = installed_v0()
        api = detect_v0(logged)  # the installed code's API; the change log fills what it cannot show
        self.version, self.api = target.installed, api
        # What the machine may ask of this release (read by conformance.machines.v0).
        self.supports_reset_prefix_cache = api.reset_prefix_cache
        self.supports_num_cached_tokens = api.num_cached_tokens
        self.group_status_per_sequence = api.group_status_per_sequence
        from vllm.core.block.interfaces import BlockAllocator
        from vllm.core.block_manager import SelfAttnBlockSpaceManager
        from vllm.inputs import token_inputs
        from vllm.sequence import Sequence, SequenceGroup
        from vllm.utils import Device

        self._Sequence, self._SequenceGroup = Sequence, SequenceGroup
        self._token_inputs, self._Device = token_inputs, Device
        self._NoFree = BlockAllocator.NoFreeBlocksError
        self.config = config
        self.bm = SelfAttnBlockSpaceManager(
            block_size=config.block_size, num_gpu_blocks=config.num_gpu_blocks,
            num_cpu_blocks=config.num_cpu_blocks, watermark=config.watermark,
            sliding_window=config.sliding_window, enable_caching=config.enable_caching)
        self.sequences = VllmV0Sequences(self)
        self.ops = dispatch_table(self)

    # -- the public API shared with the benchmarks ---------------------------------------------
    def make_sequence(self, seq_id: int, tokens: list[int]):
        """A new WAITING ``vllm.sequence.Sequence`` holding the prompt ``tokens`` (not registered here)."""
        return self._Sequence(seq_id, inputs=self._token_inputs(list(tokens)),
                              block_size=self.config.block_size)

    def make_group(self, group_id: str, seqs: list):
        """A ``vllm.sequence.SequenceGroup`` around ``seqs``, as the V0 scheduler holds them."""
        return self._SequenceGroup(request_id=group_id, seqs=list(seqs), arrival_time=0.0)

    def apply(self, op: dict) -> Any:
        handler = self.handler(op)
        try:
            return handler(op)
        except KeyError as err:
            raise OpError(KEY_ERROR, repr(err)) from None
        except self._NoFree as err:
            raise OpError(OUT_OF_BLOCKS, repr(err)) from None
        except (AssertionError, ValueError) as err:
            raise OpError(REFUSED, repr(err)) from None

    # -- one method per op that calls the manager (the reference adapter's names) ------------
    def _num_cached_tokens(self, op: dict) -> int:
        if not self.supports_num_cached_tokens:  # the machine never asks; a saved trace may
            raise NotApplicable(f"vLLM {self.version}'s V0 block manager has no get_num_cached_tokens "
                                "(V0Api.num_cached_tokens)")
        return self.bm.get_num_cached_tokens(self.sequences.seqs[op["seq"]])

    def _can_allocate(self, op: dict) -> str:
        return self.bm.can_allocate(self.sequences.group(op["group"]), op["lookahead"]).name

    def _allocate(self, op: dict) -> None:
        self.bm.allocate(self.sequences.group(op["group"]))
        self.sequences.move(op["group"], WAITING, RUNNING)

    def _can_append_slots(self, op: dict) -> bool:
        return self.bm.can_append_slots(self.sequences.group(op["group"]), op["lookahead"])

    def _append_slots(self, op: dict) -> list[list[int]]:
        seq = self.sequences.seqs.get(op["seq"])
        if seq is None:
            seq = self.make_sequence(op["seq"], [0])
        return [list(p) for p in self.bm.append_slots(seq, op["lookahead"])]

    def _fork(self, op: dict) -> None:
        child = self.sequences.fork(op["group"], op["parent"], op["child"])
        self.bm.fork(self.sequences.seqs[op["parent"]], child)

    def _free(self, op: dict) -> None:
        self.bm.free(self.sequences.seqs[op["seq"]])
        self.sequences.finish(op["seq"])

    def _can_swap_out(self, op: dict) -> bool:
        return self.bm.can_swap_out(self.sequences.group(op["group"]))

    def _swap_out(self, op: dict) -> list[list[int]]:
        pairs = self.bm.swap_out(self.sequences.group(op["group"]))
        self.sequences.move(op["group"], RUNNING, SWAPPED)
        return [list(p) for p in pairs]

    def _can_swap_in(self, op: dict) -> str:
        return self.bm.can_swap_in(self.sequences.group(op["group"]), op["lookahead"]).name

    def _swap_in(self, op: dict) -> list[list[int]]:
        pairs = self.bm.swap_in(self.sequences.group(op["group"]))
        self.sequences.move(op["group"], SWAPPED, RUNNING)
        return [list(p) for p in pairs]

    def _access(self, op: dict) -> None:
        self.bm.access_all_blocks_in_seq(self.sequences.seqs[op["seq"]], op["now"])

    def _mark_computed(self, op: dict) -> None:
        self.bm.mark_blocks_as_computed(self.sequences.group(op["group"]), 0)

    def _common_computed(self, op: dict) -> list[int]:
        return list(self.bm.get_common_computed_block_ids(self.sequences.with_status(op["group"], RUNNING)))

    def _reset_prefix_cache(self, op: dict) -> bool:
        if not self.supports_reset_prefix_cache:  # the machine never asks; a saved trace may
            raise NotApplicable(f"vLLM {self.version}'s V0 block manager has no reset_prefix_cache "
                                "(V0Api.reset_prefix_cache)")
        return self.bm.reset_prefix_cache()

    def _hit_rate(self, op: dict) -> float:
        return self.bm.get_prefix_cache_hit_rate(self._Device.GPU)

    def _num_free(self, op: dict) -> list[int]:
        return [self.bm.get_num_free_gpu_blocks(), self.bm.get_num_free_cpu_blocks()]

    def _block_table(self, op: dict) -> list[int]:
        seq = self.sequences.seqs.get(op["seq"])
        if seq is None:
            raise KeyError(op["seq"])
        return list(self.bm.get_block_table(seq))

    # -- snapshot: the same shape as conformance.adapters.reference_v0.snapshot ------------------
    def _pool(self, alloc) -> dict:
        if not self.config.enable_caching:
            counts = alloc._refcounter._refcounts
            return {"free": list(alloc._free_block_indices),
                    "refcounts": {str(b): c for b, c in sorted(counts.items()) if c}}
        counts = alloc._refcounter._refcounts
        ev = alloc.evictor
        return {
            "free": list(alloc._hashless_allocator._free_block_indices),
            "refcounts": {str(b): c for b, c in sorted(counts.items()) if c},
            "cached": [[_hex(h), b] for h, b in alloc._cached_blocks.items()],
            "touched": sorted(alloc._touched_blocks),
            "status": {str(b): [t.active, t.last_accessed, t.computed]
                       for b, t in alloc._block_tracker.items()
                       if t.active or t.computed or t.last_accessed != -1},
            "evictor": {
                "parked": [[b, _hex(m.content_hash), m.num_hashed_tokens, m.last_accessed]
                           for b, m in ev.free_table.items()],
                # None: the release's evictor scans its table and has no heap (V0Policy.evictor_heap).
                "heap": ([[la, n, b, _hex(h)] for la, n, b, h in ev.priority_queue]
                         if hasattr(ev, "priority_queue") else None),
            },
            "hit_rate": [alloc.metric_data.num_completed_blocks,
                         alloc.metric_data.completed_block_cache_hit_rate,
                         alloc.metric_data.num_incompleted_block_queries,
                         alloc.metric_data.num_incompleted_block_hit],
        }

    @staticmethod
    def _computed_tracker(ct) -> dict:
        """Per sequence: the token-page hashes and cached-token count, or (releases before 0.6.5,
        V0Policy.cached_tokens_tracker) the computed block ids found and whether one was missing."""
        if hasattr(ct, "_seq_id_to_blocks_hashes"):
            return {str(s): {"hashes": [_hex(h) for h in hs],
                             "cached_tokens": ct._seq_id_to_num_tokens_computed.get(s)}
                    for s, hs in ct._seq_id_to_blocks_hashes.items()}
        return {str(s): {"computed_ids": list(ids), "has_gap": gap}
                for s, (ids, gap) in ct._cached_computed_seq_blocks.items()}

    def snapshot(self) -> dict:
        bm, D = self.bm, self._Device
        ca = bm.block_allocator
        tables = bm.block_tables
        return {
            "tables": {str(s): list(t.physical_block_ids) for s, t in tables.items()},
            "full_slots": {str(s): t.num_full_slots for s, t in tables.items()},
            "tokens": {str(s): [list(b.token_ids) for b in t.blocks] for s, t in tables.items()},
            "hashes": {str(s): [_hex(b.content_hash) for b in t.blocks] for s, t in tables.items()},
            "gpu": self._pool(ca._allocators[D.GPU]),
            "cpu": self._pool(ca._allocators[D.CPU]),
            "null_block": None if ca._null_block is None else ca._null_block.block_id,
            "pending_cows": [list(p) for p in ca._allocators[D.GPU]._cow_tracker._copy_on_writes],
            "swap_log": [[s, d] for s, d in ca._swap_mapping.items()],
            "computed_tracker": self._computed_tracker(bm._computed_blocks_tracker),
            "last_access": {str(s): t for s, t in bm._last_access_blocks_tracker._seq_last_access.items()},
        }
