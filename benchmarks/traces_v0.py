"""Seeded operation traces for the V0 block-manager benchmark.

The V0 manager (vLLM's ``SelfAttnBlockSpaceManager``) is driven by the V0 scheduler, whose calls
differ from V1's: a group is admitted with ``can_allocate`` then ``allocate`` (the whole prompt at
once), every running group asks ``can_append_slots`` and then ``append_slots`` for each of its
sequences, groups that do not fit are preempted by *swapping* them to CPU pages, and swapped
groups come back with ``can_swap_in``/``swap_in``. Each step the model runner reads every
scheduled sequence's block table, stamps its pages with the step time and, with prefix caching,
asks for the pages the group may skip; after the step the scheduler marks blocks computed.

As for V1 (:mod:`benchmarks.traces`), the calls are written down once, with the answers a
reference manager gave, by a small scheduler of that shape serving a seeded workload; both sides
then replay the same list, and a side that answers differently has diverged. The workloads are
the V1 benchmark's (same prompts, output lengths and churn), served the V0 way: chunk sizes cap
how much of a prompt is computed per step (the prompt's pages are all allocated up front, as V0
does), a preemption is a swap-out (an abort if the CPU pool is full), and parallel sampling now
and then forks a decoding sequence into siblings, which then write their own tokens into the
shared last page (copy-on-write).

A sequence's id is its group's index for the first sequence and ``len(prompts) + k`` for the
``k``-th forked child. Besides the manager calls the trace holds ``STEP`` ops -- the forward pass
and the sampler changing a sequence -- which a replay applies to its own sequence objects untimed.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

from benchmarks.traces import VOCAB, Workload, make_workload
from conformance.adapters.v0_sequences import RUNNING, SWAPPED, WAITING, V0Sequences
from conformance.changelog import policy_named
from conformance.configs import V0Config
from reference.blocks.policies import V0Policy
from reference.blocks.v0 import AllocStatus, BlockSpaceManager
from upstream.releases import V0_RELEASE, policy_name

# Op codes: the first element of every op tuple; the comment gives the rest of the tuple.
CACHED = 0  # (seq,)                        get_num_cached_tokens(seq)
CAN_ALLOCATE = 1  # (group, status name)    can_allocate(group, 0)
ALLOCATE = 2  # (group,)                     allocate(group); its waiting seqs become running
CAN_APPEND = 3  # (group, bool)              can_append_slots(group, 0)
APPEND_SLOTS = 4  # (seq, cow pairs)         append_slots(seq, 0)
SCHEDULED = 5  # (seq, now)                  get_block_table(seq) + access_all_blocks_in_seq(seq, now)
COMMON = 6  # (group, block ids)             get_common_computed_block_ids(running seqs)
MARK = 7  # (group,)                         mark_blocks_as_computed(group, 0)
FORK = 8  # (group, parent seq, child seq)  Sequence.fork (untimed) + fork(parent, child)
FREE = 9  # (seq,)                           free(seq); the seq is finished
CAN_SWAP_OUT = 10  # (group, bool)           can_swap_out(group)
SWAP_OUT = 11  # (group, pairs)              swap_out(group); running -> swapped
CAN_SWAP_IN = 12  # (group, status name)     can_swap_in(group, 0)
SWAP_IN = 13  # (group, pairs)               swap_in(group); swapped -> running
STEP = 14  # (seq, newly computed, token or None)  forward pass + sampler: not a manager call
OP_NAMES = {CACHED: "cached", CAN_ALLOCATE: "can_allocate", ALLOCATE: "allocate", CAN_APPEND: "can_append",
            APPEND_SLOTS: "append_slots", SCHEDULED: "scheduled", COMMON: "common", MARK: "mark",
            FORK: "fork", FREE: "free", CAN_SWAP_OUT: "can_swap_out", SWAP_OUT: "swap_out",
            CAN_SWAP_IN: "can_swap_in", SWAP_IN: "swap_in", STEP: "step"}


@dataclass(frozen=True)
class V0Settings:
    """What the V0 traces add to a V1 workload: prefix caching, forks and the CPU pool."""

    enable_caching: bool
    fork_prob: float  # per group, on its first sampled token: fork 1-3 siblings
    cpu_blocks_ratio: float  # CPU pages as a fraction of GPU pages


V0_SETTINGS = {
    "shared_prefix": V0Settings(enable_caching=True, fork_prob=0.0, cpu_blocks_ratio=0.5),
    "chunked_prefill": V0Settings(enable_caching=False, fork_prob=0.0, cpu_blocks_ratio=0.5),
    "decode_heavy": V0Settings(enable_caching=False, fork_prob=0.1, cpu_blocks_ratio=0.5),
    "churn": V0Settings(enable_caching=False, fork_prob=0.1, cpu_blocks_ratio=0.5),
    "tight_pool": V0Settings(enable_caching=True, fork_prob=0.05, cpu_blocks_ratio=4.0),
}


@dataclass(frozen=True)
class V0Trace:
    """A recorded V0 call sequence and the manager configuration it must be replayed on."""

    name: str
    prompts: tuple[tuple[int, ...], ...]
    ops: tuple[tuple, ...]
    num_gpu_blocks: int
    num_cpu_blocks: int
    block_size: int
    enable_caching: bool
    num_seqs: int  # sequence ids run 0 .. num_seqs - 1 (prompts first, forked children after)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def config(self) -> V0Config:
        """The manager configuration the conformance adapters take (the V0 pin's policy)."""
        return V0Config(policy=policy_named(policy_name(V0_RELEASE), V0Policy), block_size=self.block_size,
                        num_gpu_blocks=self.num_gpu_blocks, num_cpu_blocks=self.num_cpu_blocks, watermark=0.01,
                        sliding_window=None, enable_caching=self.enable_caching)

    @property
    def num_timed_ops(self) -> int:
        return sum(1 for op in self.ops if op[0] != STEP)


def reference_manager(trace: V0Trace) -> BlockSpaceManager:
    c = trace.config
    return BlockSpaceManager(c.block_size, c.num_gpu_blocks, c.num_cpu_blocks, c.watermark, c.sliding_window,
                             c.enable_caching)


# -- recording ----------------------------------------------------------------------------------
@dataclass
class _Group:
    """What the scheduler knows of a request beyond its sequences (those are in ``_Recorder.sequences``)."""

    index: int
    output_len: int
    chunk: int
    outputs: int = 0


class _Recorder:
    """Serves a workload V0-style against the reference manager, writing down every call."""

    def __init__(self, name: str, workload: Workload, settings: V0Settings, seed: int) -> None:
        self.w = workload
        self.s = settings
        self.trace_config = V0Trace(name, self.w.prompts, (), self.w.num_blocks,
                                    int(self.w.num_blocks * self.s.cpu_blocks_ratio), self.w.block_size,
                                    self.s.enable_caching, 0)
        self.m = reference_manager(self.trace_config)
        self.rng = random.Random(f"v0-scheduler:{name}:{seed}")
        self.ops: list[tuple] = []
        self.next_seq_id = len(self.w.prompts)
        self.sequences = V0Sequences()
        for i, p in enumerate(self.w.prompts):
            self.sequences.add_group(i, [i], p)
        self.waiting: deque[_Group] = deque(
            _Group(i, self.w.output_lens[i], self.w.chunk_sizes[i]) for i in range(len(self.w.prompts)))
        self.running: list[_Group] = []
        self.swapped: deque[_Group] = deque()
        self.now = 0.0

    def run(self) -> V0Trace:
        while self.waiting or self.running or self.swapped:
            self.now += 1.0
            self._churn()
            scheduled, preempted = self._schedule_running()
            if not preempted:
                scheduled += self._swap_in()
                if not self.swapped:
                    scheduled += self._admit()
            self._forward(scheduled)
        counts = {name: 0 for name in OP_NAMES.values()}
        for op in self.ops:
            counts[OP_NAMES[op[0]]] += 1
        base = self.trace_config
        return V0Trace(base.name, base.prompts, tuple(self.ops), base.num_gpu_blocks, base.num_cpu_blocks,
                       base.block_size, base.enable_caching, self.next_seq_id, counts)

    def _churn(self) -> None:
        if self.running and self.rng.random() < self.w.abort_prob:
            self._abort(self.running.pop(self.rng.randrange(len(self.running))))
        if self.running and self.rng.random() < self.w.preempt_prob:
            self._swap_out(self.running.pop(self.rng.randrange(len(self.running))))

    def _schedule_running(self) -> tuple[list[_Group], bool]:
        scheduled, preempted, index = [], False, 0
        while index < len(self.running):
            group = self.running[index]
            while True:
                ok = self.m.can_append_slots(self.sequences.views(group.index, RUNNING), 0)
                self.ops.append((CAN_APPEND, group.index, ok))
                if ok:
                    break
                victim = self.running.pop()  # the most recently admitted group yields
                self._swap_out(victim)
                preempted = True
                if victim is group:
                    break
            if not ok:
                break
            self._append_slots(group)
            scheduled.append(group)
            index += 1
        return scheduled, preempted

    def _append_slots(self, group: _Group) -> None:
        for seq in self.sequences.with_status(group.index, RUNNING):
            cows = self.m.append_slots(seq.view(), 0)
            self.ops.append((APPEND_SLOTS, seq.seq_id, tuple(map(tuple, cows))))

    def _swap_out(self, group: _Group) -> None:
        ok = self.m.can_swap_out(self.sequences.views(group.index, RUNNING))
        self.ops.append((CAN_SWAP_OUT, group.index, ok))
        if not ok:
            self._abort(group)
            return
        pairs = self.m.swap_out(self.sequences.views(group.index, RUNNING))
        self.ops.append((SWAP_OUT, group.index, tuple(map(tuple, pairs))))
        self.sequences.move(group.index, RUNNING, SWAPPED)
        self.swapped.append(group)

    def _swap_in(self) -> list[_Group]:
        scheduled = []
        while self.swapped and len(self.running) < self.w.max_num_seqs:
            group = self.swapped[0]
            status = self.m.can_swap_in(self.sequences.views(group.index, SWAPPED), 0)
            self.ops.append((CAN_SWAP_IN, group.index, status.name))
            if status is not AllocStatus.OK:
                break
            self.swapped.popleft()
            pairs = self.m.swap_in(self.sequences.views(group.index, SWAPPED))
            self.ops.append((SWAP_IN, group.index, tuple(map(tuple, pairs))))
            self.sequences.move(group.index, SWAPPED, RUNNING)
            self._append_slots(group)
            self.running.append(group)
            scheduled.append(group)
        return scheduled

    def _admit(self) -> list[_Group]:
        scheduled = []
        while self.waiting and len(self.running) < self.w.max_num_seqs:
            group = self.waiting[0]
            seq = self.sequences.members(group.index)[0]
            if self.s.enable_caching:
                self.m.get_num_cached_tokens(seq.view())
                self.ops.append((CACHED, seq.seq_id))
            status = self.m.can_allocate(seq.view(), 0)
            self.ops.append((CAN_ALLOCATE, group.index, status.name))
            if status is AllocStatus.LATER:
                break
            self.waiting.popleft()
            if status is AllocStatus.NEVER:  # the scheduler ignores it; nothing was allocated
                continue
            self.m.allocate([seq.view()])
            self.ops.append((ALLOCATE, group.index))
            self.sequences.move(group.index, WAITING, RUNNING)
            self.running.append(group)
            scheduled.append(group)
        return scheduled

    def _forward(self, scheduled: list[_Group]) -> None:
        for group in scheduled:
            for seq in self.sequences.with_status(group.index, RUNNING):
                self.m.get_block_table(seq.seq_id)
                self.m.access_all_blocks_in_seq(seq.seq_id, self.now)
                self.ops.append((SCHEDULED, seq.seq_id, self.now))
            if self.s.enable_caching:
                common = self.m.get_common_computed_block_ids(self.sequences.views(group.index, RUNNING))
                self.ops.append((COMMON, group.index, tuple(common)))
        for group in scheduled:
            self.m.mark_blocks_as_computed()
            self.ops.append((MARK, group.index))
        for group in scheduled:
            self._compute_and_sample(group)

    def _compute_and_sample(self, group: _Group) -> None:
        sampled = False
        for seq in self.sequences.with_status(group.index, RUNNING):
            n = min(len(seq.tokens) - seq.computed, group.chunk)  # a decode step computes one token
            seq.compute(n)
            token = None
            if seq.computed == len(seq.tokens):
                token = self.rng.randrange(1, VOCAB)
                seq.append_token(token)
                sampled = True
            self.ops.append((STEP, seq.seq_id, n, token))
        if not sampled:
            return
        group.outputs += 1
        if group.outputs >= group.output_len:
            self.running.remove(group)
            self._abort(group)
        elif (group.outputs == 1 and len(self.sequences.groups[group.index]) == 1
              and self.rng.random() < self.s.fork_prob):
            self._fork(group, self.rng.randint(1, 3))

    def _fork(self, group: _Group, children: int) -> None:
        parent = self.sequences.members(group.index)[0]
        for _ in range(children):
            child = self.sequences.fork(group.index, parent.seq_id, self.next_seq_id)
            self.next_seq_id += 1
            self.m.fork(parent.seq_id, child.seq_id)
            self.ops.append((FORK, group.index, parent.seq_id, child.seq_id))
            if self.s.enable_caching:  # the freeing of a sequence needs it tracked
                self.m.get_num_cached_tokens(child.view())
                self.ops.append((CACHED, child.seq_id))

    def _abort(self, group: _Group) -> None:
        for seq in self.sequences.members(group.index):
            if seq.status in (RUNNING, SWAPPED, WAITING):
                self.m.free(seq.seq_id)
                self.ops.append((FREE, seq.seq_id))
                self.sequences.finish(seq.seq_id)


def make_v0_trace(name: str, n: int, seed: int = 0) -> V0Trace:
    """Generate the named workload with ``n`` requests and record it V0-style on the reference."""
    if name not in V0_SETTINGS:
        raise ValueError(f"unknown trace {name!r}; choose from {sorted(V0_SETTINGS)}")
    return record_v0_trace(name, make_workload(name, n, seed), V0_SETTINGS[name], seed)


def record_v0_trace(name: str, workload: Workload, settings: V0Settings, seed: int = 0) -> V0Trace:
    """Serve ``workload`` V0-style on the reference with ``settings`` and record the calls."""
    return _Recorder(name, workload, settings, seed).run()
