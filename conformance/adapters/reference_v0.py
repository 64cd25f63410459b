"""The reference V0 block manager as a lockstep *system* (semantics ``"v0"``).

The reference manager takes plain :class:`~reference.blocks.v0.SeqView` values, so this adapter
keeps the sequences themselves - tokens, computed count, prefill/decode stage, status - exactly as
vLLM's ``Sequence``/``SequenceGroup`` would, and turns every op into the manager call the V0
scheduler would make. ``conformance.adapters.vllm_v0`` does the same with vLLM's real objects; the
op vocabulary is documented there, in :data:`OPS`.
"""

from __future__ import annotations

from typing import Any

from conformance.changelog import policy_named
from conformance.lockstep import OpError
from reference.blocks.errors import BlockManagerError, OutOfBlocks, UnknownBlock, UnknownRequest
from reference.blocks.policies import V0Policy
from reference.blocks.v0 import BlockSpaceManager, Device, SeqView
from upstream.releases import V0_RELEASE, policy_name

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


class _Seq:
    """A sequence as vLLM's ``Sequence`` tracks it (only the fields the manager reads)."""

    def __init__(self, seq_id: int, tokens: list[int]) -> None:
        self.seq_id = seq_id
        self.tokens = list(tokens)
        self.computed = 0
        self.prefill = True
        self.status = "WAITING"

    def view(self) -> SeqView:
        return SeqView(self.seq_id, self.tokens, self.computed, self.prefill)


class ReferenceV0System:
    label = "reference-v0"

    def __init__(self, config: dict) -> None:
        self.config = config
        self.manager = BlockSpaceManager(
            block_size=config["block_size"], num_gpu_blocks=config["num_gpu_blocks"],
            num_cpu_blocks=config["num_cpu_blocks"], watermark=config["watermark"],
            sliding_window=config.get("sliding_window"), enable_caching=config["enable_caching"],
            policy=policy_named(config.get("policy", policy_name(V0_RELEASE)), V0Policy))
        self.seqs: dict[int, _Seq] = {}
        self.groups: dict[str, list[int]] = {}

    # -- sequence-group helpers (SequenceGroup.get_seqs(status=...)) -------------------------------
    def _seqs(self, group: str, status: str) -> list[_Seq]:
        return [self.seqs[s] for s in self.groups[group] if self.seqs[s].status == status]

    def _set_status(self, group: str, old: str, new: str) -> None:
        for seq in self._seqs(group, old):
            seq.status = new

    def apply(self, op: dict) -> Any:
        try:
            return self._apply(op)
        except BlockManagerError as err:
            raise OpError(error_category(err), str(err)) from None

    def _apply(self, op: dict) -> Any:  # one branch per op, kept flat on purpose
        m, kind = self.manager, op["op"]
        if kind == "add_group":
            self.groups[op["group"]] = list(op["seqs"])
            for sid in op["seqs"]:
                self.seqs[sid] = _Seq(sid, op["prompt"])
            return None
        if kind == "num_cached_tokens":
            return m.get_num_cached_tokens(self.seqs[op["seq"]].view())
        if kind == "can_allocate":
            return m.can_allocate(self._seqs(op["group"], "WAITING")[0].view(), op["lookahead"]).name
        if kind == "allocate":
            m.allocate([s.view() for s in self._seqs(op["group"], "WAITING")])
            self._set_status(op["group"], "WAITING", "RUNNING")
            return None
        if kind == "compute":
            seq = self.seqs[op["seq"]]
            seq.computed = len(seq.tokens)
            seq.prefill = False
            return None
        if kind == "append_token":
            self.seqs[op["seq"]].tokens.append(op["token"])
            return None
        if kind == "can_append_slots":
            return m.can_append_slots([s.view() for s in self._seqs(op["group"], "RUNNING")],
                                      op["lookahead"])
        if kind == "append_slots":
            seq = self.seqs.get(op["seq"])
            view = seq.view() if seq is not None else SeqView(op["seq"])
            return [list(p) for p in m.append_slots(view, op["lookahead"])]
        if kind == "fork":
            parent = self.seqs[op["parent"]]
            child = _Seq(op["child"], parent.tokens)
            child.computed, child.prefill, child.status = parent.computed, parent.prefill, parent.status
            self.seqs[child.seq_id] = child
            self.groups[op["group"]].append(child.seq_id)
            m.fork(parent.seq_id, child.seq_id)
            return None
        if kind == "free":
            m.free(op["seq"])
            self.seqs[op["seq"]].status = "FINISHED"
            return None
        if kind == "can_swap_out":
            return m.can_swap_out([s.view() for s in self._seqs(op["group"], "RUNNING")])
        if kind == "swap_out":
            pairs = m.swap_out([s.view() for s in self._seqs(op["group"], "RUNNING")])
            self._set_status(op["group"], "RUNNING", "SWAPPED")
            return [list(p) for p in pairs]
        if kind == "can_swap_in":
            return m.can_swap_in([s.view() for s in self._seqs(op["group"], "SWAPPED")],
                                 op["lookahead"]).name
        if kind == "swap_in":
            pairs = m.swap_in([s.view() for s in self._seqs(op["group"], "SWAPPED")])
            self._set_status(op["group"], "SWAPPED", "RUNNING")
            return [list(p) for p in pairs]
        if kind == "access":
            m.access_all_blocks_in_seq(op["seq"], op["now"])
            return None
        if kind == "mark_computed":
            m.mark_blocks_as_computed()
            return None
        if kind == "common_computed":
            return list(m.get_common_computed_block_ids(
                [s.view() for s in self._seqs(op["group"], "RUNNING")]))
        if kind == "reset_prefix_cache":
            return m.reset_prefix_cache()
        if kind == "hit_rate":
            return m.get_prefix_cache_hit_rate(Device.GPU)
        if kind == "num_free":
            return [m.get_num_free_gpu_blocks(), m.get_num_free_cpu_blocks()]
        if kind == "block_table":
            return list(m.get_block_table(op["seq"]))
        raise ValueError(f"unknown v0 op {kind!r}")

    def snapshot(self) -> dict:
        return self.manager.snapshot()
