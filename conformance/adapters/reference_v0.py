"""The reference V0 block manager behind the lockstep op vocabulary (semantics ``"v0"``).

The vocabulary is the V0 scheduler's side of the block-manager protocol, one JSON dict per call;
each field's type is in :data:`conformance.trace_file.OP_FIELDS`.

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

Refusals are reported by category (:data:`KEY_ERROR`, :data:`OUT_OF_BLOCKS`, :data:`REFUSED`; an
op this vocabulary lacks: ``"invalid_argument"``, from :mod:`conformance.adapters.op_dispatch`).
The reference manager takes plain :class:`~reference.blocks.v0.SeqView` values, so this adapter keeps the sequences themselves
(:mod:`conformance.adapters.v0_sequences`), exactly as vLLM's ``Sequence``/``SequenceGroup``
would. :func:`snapshot` is the state both systems are compared on;
``conformance.adapters.vllm_v0`` builds the same shape from vLLM's objects.

This module never imports vLLM.
"""

from __future__ import annotations

from typing import Any

from conformance.adapters.op_dispatch import Ops, dispatch_table
from conformance.adapters.v0_sequences import RUNNING, SWAPPED, WAITING, V0Sequences
from conformance.configs import V0Config
from conformance.lockstep import OpError
from reference.blocks.errors import BlockManagerError, OutOfBlocks, UnknownBlock, UnknownRequest
from reference.blocks.v0 import BlockSpaceManager, Device, SeqView
from reference.blocks.v0.content_hash import hash_hex
from reference.blocks.v0.device_allocator import DeviceAllocator
from reference.blocks.v0.evictor import LRUEvictor
from reference.blocks.v0.naive_allocator import NaiveAllocator
from reference.blocks.v0.prefix_caching_allocator import NEVER_ACCESSED, PrefixCachingAllocator
from reference.blocks.v0.trackers import ComputedBlockIdsTracker, ComputedBlocksTracker

# Error categories both adapters agree on.
KEY_ERROR = "key_error"          # unknown sequence or block (vLLM: KeyError)
OUT_OF_BLOCKS = "out_of_blocks"  # pool ran dry (vLLM: NoFreeBlocksError)
REFUSED = "refused"              # any other refusal (vLLM: AssertionError / ValueError)


def error_category(err: Exception) -> str:
    if isinstance(err, (UnknownRequest, UnknownBlock)):
        return KEY_ERROR
    if isinstance(err, OutOfBlocks):
        return OUT_OF_BLOCKS
    return REFUSED


class V0Ops(Ops):
    """What both V0 adapters share: the V0 vocabulary's dispatch (``self.ops = dispatch_table(self)``,
    :mod:`conformance.adapters.op_dispatch`), and the ops that change only the sequences, not the
    manager (each adapter keeps its sequences in ``self.sequences``, with the methods of
    ``V0Sequences``)."""

    semantics = "v0"
    sequences: Any

    def _add_group(self, op: dict) -> None:
        self.sequences.add_group(op["group"], op["seqs"], op["prompt"])

    def _compute(self, op: dict) -> None:
        self.sequences.compute_all(op["seq"])

    def _append_token(self, op: dict) -> None:
        self.sequences.append_token(op["seq"], op["token"])


class ReferenceV0System(V0Ops):
    """The reference BlockSpaceManager, driven by lockstep ops."""

    def __init__(self, config: V0Config, label: str = "reference") -> None:
        self.label = label
        self.config = config
        self.manager = BlockSpaceManager(
            block_size=config.block_size, num_gpu_blocks=config.num_gpu_blocks,
            num_cpu_blocks=config.num_cpu_blocks, watermark=config.watermark,
            sliding_window=config.sliding_window, enable_caching=config.enable_caching, policy=config.policy)
        self.sequences = V0Sequences()
        self.ops = dispatch_table(self)
        # What the machine may ask (read by conformance.machines.v0), as the policy's manager offers it.
        self.supports_num_cached_tokens = config.policy.cached_tokens_tracker

    def apply(self, op: dict) -> Any:
        handler = self.handler(op)
        try:
            return handler(op)
        except BlockManagerError as err:
            raise OpError(error_category(err), str(err)) from None

    def snapshot(self) -> dict:
        return snapshot(self.manager)

    # -- one method per op that calls the manager (V0Ops has the others) ----------------------
    def _num_cached_tokens(self, op: dict) -> int:
        return self.manager.get_num_cached_tokens(self.sequences.seqs[op["seq"]].view())

    def _can_allocate(self, op: dict) -> str:
        return self.manager.can_allocate(self.sequences.views(op["group"], WAITING)[0], op["lookahead"]).name

    def _allocate(self, op: dict) -> None:
        self.manager.allocate(self.sequences.views(op["group"], WAITING))
        self.sequences.move(op["group"], WAITING, RUNNING)

    def _can_append_slots(self, op: dict) -> bool:
        return self.manager.can_append_slots(self.sequences.views(op["group"], RUNNING), op["lookahead"])

    def _append_slots(self, op: dict) -> list[list[int]]:
        seq = self.sequences.seqs.get(op["seq"])
        view = seq.view() if seq is not None else SeqView(op["seq"])
        return [list(p) for p in self.manager.append_slots(view, op["lookahead"])]

    def _fork(self, op: dict) -> None:
        self.sequences.fork(op["group"], op["parent"], op["child"])
        self.manager.fork(op["parent"], op["child"])

    def _free(self, op: dict) -> None:
        self.manager.free(op["seq"])
        self.sequences.finish(op["seq"])

    def _can_swap_out(self, op: dict) -> bool:
        return self.manager.can_swap_out(self.sequences.views(op["group"], RUNNING))

    def _swap_out(self, op: dict) -> list[list[int]]:
        pairs = self.manager.swap_out(self.sequences.views(op["group"], RUNNING))
        self.sequences.move(op["group"], RUNNING, SWAPPED)
        return [list(p) for p in pairs]

    def _can_swap_in(self, op: dict) -> str:
        return self.manager.can_swap_in(self.sequences.views(op["group"], SWAPPED), op["lookahead"]).name

    def _swap_in(self, op: dict) -> list[list[int]]:
        pairs = self.manager.swap_in(self.sequences.views(op["group"], SWAPPED))
        self.sequences.move(op["group"], SWAPPED, RUNNING)
        return [list(p) for p in pairs]

    def _access(self, op: dict) -> None:
        self.manager.access_all_blocks_in_seq(op["seq"], op["now"])

    def _mark_computed(self, op: dict) -> None:
        self.manager.mark_blocks_as_computed()

    def _common_computed(self, op: dict) -> list[int]:
        return list(self.manager.get_common_computed_block_ids(self.sequences.views(op["group"], RUNNING)))

    def _reset_prefix_cache(self, op: dict) -> bool:
        return self.manager.reset_prefix_cache()

    def _hit_rate(self, op: dict) -> float:
        return self.manager.get_prefix_cache_hit_rate(Device.GPU)

    def _num_free(self, op: dict) -> list[int]:
        return [self.manager.get_num_free_gpu_blocks(), self.manager.get_num_free_cpu_blocks()]

    def _block_table(self, op: dict) -> list[int]:
        return list(self.manager.get_block_table(op["seq"]))


# -- the snapshot: every observable ledger of a reference manager, as JSON-able data ------------
def snapshot(manager: BlockSpaceManager) -> dict:
    """The state the V0 machines compare after every op (``VllmV0System.snapshot`` has the same
    shape): block tables, per-block tokens and hashes, both pools, the null block, copy-on-write
    and swap logs, the computed-blocks and last-access trackers."""
    tables = manager.block_tables
    return {
        "tables": {str(s): list(t.physical_block_ids) for s, t in tables.items()},
        "full_slots": {str(s): t.num_full_slots for s, t in tables.items()},
        "tokens": {str(s): [list(b.token_ids) for b in t.blocks] for s, t in tables.items()},
        "hashes": {str(s): [hash_hex(b.content_hash) for b in t.blocks] for s, t in tables.items()},
        **devices_snapshot(manager.allocator),
        "computed_tracker": computed_tracker_snapshot(manager.computed_tracker),
        "last_access": {str(s): t for s, t in manager.access_tracker.last_access.items()},
    }


def computed_tracker_snapshot(tracker: ComputedBlocksTracker | ComputedBlockIdsTracker) -> dict:
    """Per sequence: the token-page hashes and cached-token count, or (a policy without
    ``cached_tokens_tracker``) the computed block ids found and whether one was missing."""
    if isinstance(tracker, ComputedBlocksTracker):
        return {str(s): {"hashes": [hash_hex(h) for h in hs], "cached_tokens": tracker.seq_num_cached.get(s)}
                for s, hs in tracker.seq_hashes.items()}
    return {str(s): {"computed_ids": list(ids), "has_gap": gap} for s, (ids, gap) in tracker.seq_blocks.items()}


def devices_snapshot(devices: DeviceAllocator) -> dict:
    """Both pools, the null block, pending copy-on-writes and the swap log."""
    return {
        "gpu": pool_snapshot(devices.gpu),
        "cpu": pool_snapshot(devices.cpu),
        "null_block": None if devices.null_block is None else devices.null_block.block_id,
        "pending_cows": [list(p) for p in devices.gpu.cows.pending()],
        "swap_log": [[s, d] for s, d in devices.swap_log.items()],
    }


def pool_snapshot(alloc: NaiveAllocator | PrefixCachingAllocator) -> dict:
    """One device's allocator: free ids in order and ref counts; with prefix caching also the
    cached-hash map, touched pages, page statuses, the evictor's table and heap, the hit rate."""
    if not isinstance(alloc, PrefixCachingAllocator):
        return {"free": list(alloc.free_ids), "refcounts": {str(b): c for b, c in alloc.refcounter.nonzero().items()}}
    ev, metric = alloc.evictor, alloc.metric
    return {
        "free": list(alloc.hashless.free_ids),
        "refcounts": {str(b): c for b, c in alloc.refcounter.nonzero().items()},
        "cached": [[hash_hex(h), b] for h, b in alloc.cached.items()],
        "touched": sorted(alloc.touched),
        "status": {str(b): [s.active, s.last_accessed, s.computed] for b, s in alloc.status.items()
                   if s.active or s.computed or s.last_accessed != NEVER_ACCESSED},
        "evictor": {
            "parked": [[b, hash_hex(h), n, la] for b, (h, n, la) in ev.table.items()],
            "heap": [[la, n, b, hash_hex(h)] for la, n, b, h in ev.heap] if isinstance(ev, LRUEvictor) else None,
        },
        "hit_rate": [metric.num_completed_groups, metric.completed_hit_rate, metric.open_queries, metric.open_hits],
    }


__all__ = ["KEY_ERROR", "OUT_OF_BLOCKS", "REFUSED", "ReferenceV0System", "V0Ops",
           "computed_tracker_snapshot", "devices_snapshot", "error_category", "pool_snapshot", "snapshot"]
