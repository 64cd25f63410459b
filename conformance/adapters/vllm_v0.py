"""vLLM's real V0 block manager (``SelfAttnBlockSpaceManager``) as a lockstep system.

Which releases have it, and how they are called, is read from :mod:`conformance.versions`
(a row's ``v0_api``); a release without it gives "not applicable" with the reason.

Public API (used by the machine and the benchmarks): :meth:`VllmV0System.make_sequence`,
:meth:`VllmV0System.make_group`, :meth:`VllmV0System.apply`, :meth:`VllmV0System.snapshot`.

Sequences and groups are built the way vLLM's own tests build them (``tests/core/utils.py``
``create_dummy_prompt``: a ``Sequence`` from ``token_inputs`` and a ``SequenceGroup`` around it);
status changes are made by hand, as those tests and the V0 scheduler do. vLLM is imported only
when a system is built, so importing this module is free.

Ops (JSON dicts, ``"op"`` names the kind; the V0 scheduler call each stands for):

``add_group`` {group, seqs, prompt}      - new waiting group (no manager call)
``num_cached_tokens`` {seq}              - ``get_num_cached_tokens(seq)``
``can_allocate`` {group, lookahead}      - ``can_allocate(group, n)`` -> "OK"/"LATER"/"NEVER"
``allocate`` {group}                     - ``allocate(group)``; waiting seqs become running
``compute`` {seq}                        - the forward pass: all tokens computed, stage decode
``append_token`` {seq, token}            - the sampler appends one output token
``can_append_slots`` {group, lookahead}  - ``can_append_slots(group, n)``
``append_slots`` {seq, lookahead}        - ``append_slots(seq, n)`` -> copy-on-write pairs
``fork`` {group, parent, child}          - ``Sequence.fork`` + ``fork(parent, child)``
``free`` {seq}                           - ``free(seq)``; the seq is finished
``can_swap_out`` / ``swap_out`` {group}  - preemption by swapping; running -> swapped
``can_swap_in`` {group, lookahead} / ``swap_in`` {group} - swapped -> running
``access`` {seq, now}                    - ``access_all_blocks_in_seq(seq, now)``
``mark_computed`` {group}                - ``mark_blocks_as_computed(group, 0)``
``common_computed`` {group}              - ``get_common_computed_block_ids(running seqs)``
``reset_prefix_cache`` / ``hit_rate`` / ``num_free`` / ``block_table`` {seq}
"""

from __future__ import annotations

import os
from typing import Any

from conformance.adapters.installed_api import detect_v0
from conformance.adapters.reference_v0 import KEY_ERROR, OUT_OF_BLOCKS, REFUSED
from conformance.lockstep import NotApplicable, OpError
from conformance.versions import installed_v0


def _hex(value):
    return None if value is None else format(value & 0xFFFF_FFFF_FFFF_FFFF, "016x")


class VllmV0System:
    label = "vllm-v0"

    def __init__(self, config: dict) -> None:
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        target, logged = installed_v0()
        api = detect_v0(logged)  # the installed code's API; the change log fills what it cannot show
        self.version, self.api = target.installed, api
        # What the machine may ask of this release (read by conformance.machines.v0).
        self.supports_reset_prefix_cache = api.reset_prefix_cache
        self.group_status_per_sequence = api.group_status_per_sequence
        from vllm.core.block.interfaces import BlockAllocator
        from vllm.core.block_manager import SelfAttnBlockSpaceManager
        from vllm.inputs import token_inputs
        from vllm.sequence import Logprob, Sequence, SequenceGroup, SequenceStatus
        from vllm.utils import Device

        self._Sequence, self._SequenceGroup, self._Status = Sequence, SequenceGroup, SequenceStatus
        self._token_inputs, self._Logprob, self._Device = token_inputs, Logprob, Device
        self._NoFree = BlockAllocator.NoFreeBlocksError
        self.config = config
        self.bm = SelfAttnBlockSpaceManager(
            block_size=config["block_size"], num_gpu_blocks=config["num_gpu_blocks"],
            num_cpu_blocks=config["num_cpu_blocks"], watermark=config["watermark"],
            sliding_window=config.get("sliding_window"), enable_caching=config["enable_caching"])
        self.seqs: dict[int, Any] = {}
        self.groups: dict[str, list[int]] = {}

    # -- the public API shared with the benchmarks ---------------------------------------------
    def make_sequence(self, seq_id: int, tokens: list[int]):
        """A new WAITING ``vllm.sequence.Sequence`` holding the prompt ``tokens`` (not registered here)."""
        return self._Sequence(seq_id, inputs=self._token_inputs(list(tokens)),
                              block_size=self.config["block_size"])

    def make_group(self, group_id: str, seqs: list):
        """A ``vllm.sequence.SequenceGroup`` around ``seqs``, as the V0 scheduler holds them."""
        return self._SequenceGroup(request_id=group_id, seqs=list(seqs), arrival_time=0.0)

    def _group(self, gid: str):
        return self.make_group(gid, [self.seqs[s] for s in self.groups[gid]])

    def _set_status(self, gid: str, old, new) -> None:
        for seq in self._group(gid).get_seqs(status=old):
            seq.status = new

    def apply(self, op: dict) -> Any:
        try:
            return self._apply(op)
        except KeyError as err:
            raise OpError(KEY_ERROR, repr(err)) from None
        except self._NoFree as err:
            raise OpError(OUT_OF_BLOCKS, repr(err)) from None
        except (AssertionError, ValueError) as err:
            raise OpError(REFUSED, repr(err)) from None

    def _apply(self, op: dict) -> Any:  # one branch per op, kept flat on purpose
        bm, kind, S = self.bm, op["op"], self._Status
        if kind == "add_group":
            self.groups[op["group"]] = list(op["seqs"])
            for sid in op["seqs"]:
                self.seqs[sid] = self.make_sequence(sid, op["prompt"])
            return None
        if kind == "num_cached_tokens":
            return bm.get_num_cached_tokens(self.seqs[op["seq"]])
        if kind == "can_allocate":
            return bm.can_allocate(self._group(op["group"]), op["lookahead"]).name
        if kind == "allocate":
            bm.allocate(self._group(op["group"]))
            self._set_status(op["group"], S.WAITING, S.RUNNING)
            return None
        if kind == "compute":
            data = self.seqs[op["seq"]].data
            data.update_num_computed_tokens(data.get_len() - data.get_num_computed_tokens())
            return None
        if kind == "append_token":
            t = op["token"]
            self.seqs[op["seq"]].append_token_id(t, {t: self._Logprob(0.0)})
            return None
        if kind == "can_append_slots":
            return bm.can_append_slots(self._group(op["group"]), op["lookahead"])
        if kind == "append_slots":
            seq = self.seqs.get(op["seq"])
            if seq is None:
                seq = self.make_sequence(op["seq"], [0])
            return [list(p) for p in bm.append_slots(seq, op["lookahead"])]
        if kind == "fork":
            parent = self.seqs[op["parent"]]
            child = parent.fork(op["child"])
            self.seqs[child.seq_id] = child
            self.groups[op["group"]].append(child.seq_id)
            bm.fork(parent, child)
            return None
        if kind == "free":
            seq = self.seqs[op["seq"]]
            bm.free(seq)
            seq.status = S.FINISHED_STOPPED
            return None
        if kind == "can_swap_out":
            return bm.can_swap_out(self._group(op["group"]))
        if kind == "swap_out":
            pairs = bm.swap_out(self._group(op["group"]))
            self._set_status(op["group"], S.RUNNING, S.SWAPPED)
            return [list(p) for p in pairs]
        if kind == "can_swap_in":
            return bm.can_swap_in(self._group(op["group"]), op["lookahead"]).name
        if kind == "swap_in":
            pairs = bm.swap_in(self._group(op["group"]))
            self._set_status(op["group"], S.SWAPPED, S.RUNNING)
            return [list(p) for p in pairs]
        if kind == "access":
            bm.access_all_blocks_in_seq(self.seqs[op["seq"]], op["now"])
            return None
        if kind == "mark_computed":
            bm.mark_blocks_as_computed(self._group(op["group"]), 0)
            return None
        if kind == "common_computed":
            running = self._group(op["group"]).get_seqs(status=S.RUNNING)
            return list(bm.get_common_computed_block_ids(running))
        if kind == "reset_prefix_cache":
            if not self.supports_reset_prefix_cache:  # the machine never asks; a saved trace may
                raise NotApplicable(f"vLLM {self.version}'s V0 block manager has no reset_prefix_cache "
                                    "(V0Api.reset_prefix_cache)")
            return bm.reset_prefix_cache()
        if kind == "hit_rate":
            return bm.get_prefix_cache_hit_rate(self._Device.GPU)
        if kind == "num_free":
            return [bm.get_num_free_gpu_blocks(), bm.get_num_free_cpu_blocks()]
        if kind == "block_table":
            seq = self.seqs.get(op["seq"])
            if seq is None:
                raise KeyError(op["seq"])
            return list(bm.get_block_table(seq))
        raise ValueError(f"unknown v0 op {kind!r}")

    # -- snapshot: the same shape as reference.blocks.v0.BlockSpaceManager.snapshot() ----------------
    def _pool(self, alloc) -> dict:
        if not self.config["enable_caching"]:
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
                "heap": [[la, n, b, _hex(h)] for la, n, b, h in ev.priority_queue],
            },
            "hit_rate": [alloc.metric_data.num_completed_blocks,
                         alloc.metric_data.completed_block_cache_hit_rate,
                         alloc.metric_data.num_incompleted_block_queries,
                         alloc.metric_data.num_incompleted_block_hit],
        }

    def snapshot(self) -> dict:
        bm, D = self.bm, self._Device
        ca = bm.block_allocator
        tables = bm.block_tables
        ct = bm._computed_blocks_tracker
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
            "computed_tracker": {str(s): {"hashes": [_hex(h) for h in hs],
                                          "cached_tokens": ct._seq_id_to_num_tokens_computed.get(s)}
                                 for s, hs in ct._seq_id_to_blocks_hashes.items()},
            "last_access": {str(s): t for s, t in bm._last_access_blocks_tracker._seq_last_access.items()},
        }
