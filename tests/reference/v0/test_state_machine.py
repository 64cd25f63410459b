"""A random scheduler against the V0 reference, checked after every step by an independent model.

The model plays the *worker*: it owns page memory (id -> token per slot), writes each sequence's
tokens through that sequence's block table, performs the copy-on-write copies and swap copies the
manager returns, and then reads every live sequence back through its table. If the manager ever
lets a write land in a page another sequence still uses, forgets a copy, or shares a page between
different prefixes, some read comes back wrong. Alongside it checks the books: every page is free
or referenced, ref counts equal table references, free + used equals the pool size per device,
and every full page's hash is the chained Python tuple hash of the sequence's own tokens.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from conformance.adapters.reference_v0 import snapshot
from reference.blocks.v0 import AllocStatus, BlockSpaceManager, SeqView
from reference.blocks.v0.content_hash import NONE_HASH
from reference.blocks.v0.faults import UpstreamInvariantBroken


class V0ReferenceModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.m: BlockSpaceManager | None = None
        self.tokens: dict[int, list[int]] = {}
        self.status: dict[int, str] = {}
        self.memory: dict[int, dict[int, int]] = {}
        self.next_id = 1
        self.clock = 0
        self.broken = False

    @initialize(bs=st.sampled_from([1, 2, 4]), gpu=st.integers(1, 10), cpu=st.integers(0, 6),
                caching=st.booleans())
    def setup(self, bs, gpu, cpu, caching):
        self.bs, self.gpu, self.cpu, self.caching = bs, gpu, cpu, caching
        self.m = BlockSpaceManager(bs, gpu, cpu, watermark=0.0, enable_caching=caching)

    @precondition(lambda self: self.broken)
    @rule()
    def restart(self):
        """vLLM's evictor failed its own assertion (reproduced on purpose): start a fresh pool."""
        self.m = BlockSpaceManager(self.bs, self.gpu, self.cpu, watermark=0.0,
                                   enable_caching=self.caching)
        self.tokens, self.status, self.memory, self.broken = {}, {}, {}, False

    def guarded(self, call):
        """Run a manager call; a reproduced upstream assertion ends this pool's life."""
        try:
            return call()
        except UpstreamInvariantBroken:
            self.broken = True
            return None

    def stamp(self, sid: int) -> None:
        """The scheduler stamps every scheduled sequence with a fresh time."""
        self.clock += 1
        self.m.access_all_blocks_in_seq(sid, self.clock)

    # -- the worker ---------------------------------------------------------------------------
    def view(self, sid: int) -> SeqView:
        return SeqView(sid, self.tokens[sid], len(self.tokens[sid]) - 1, False)

    def write(self, sid: int, start: int) -> None:
        table = self.m.get_block_table(sid)
        for pos in range(start, len(self.tokens[sid])):
            page = table[pos // self.bs]
            self.memory.setdefault(page, {})[pos % self.bs] = self.tokens[sid][pos]

    def copy(self, pairs, src_base: int, dst_base: int) -> None:
        for src, dst in pairs:
            self.memory[dst + dst_base] = dict(self.memory.get(src + src_base, {}))

    def running(self):
        return [s for s, st_ in self.status.items() if st_ == "RUNNING"]

    def swapped(self):
        return [s for s, st_ in self.status.items() if st_ == "SWAPPED"]

    # -- rules --------------------------------------------------------------------------------
    @precondition(lambda self: not self.broken and len(self.running() + self.swapped()) < 6)
    @rule(prompt=st.lists(st.integers(0, 2), min_size=1, max_size=9))
    def admit(self, prompt):
        sid, self.next_id = self.next_id, self.next_id + 1
        self.tokens[sid] = list(prompt)
        seq = SeqView(sid, prompt)
        if self.caching:
            self.m.get_num_cached_tokens(seq)
        if self.m.can_allocate(seq) is AllocStatus.OK:
            self.guarded(lambda: self.m.allocate([seq]))
            if sid in self.m.block_tables:
                self.status[sid] = "RUNNING"
                self.write(sid, 0)
                self.stamp(sid)

    @precondition(lambda self: not self.broken and self.running())
    @rule(pick=st.integers(0, 99), token=st.integers(0, 2), lookahead=st.sampled_from([0, 2]))
    def decode(self, pick, token, lookahead):
        sid = self.running()[pick % len(self.running())]
        start = len(self.tokens[sid])
        self.tokens[sid].append(token)
        if self.m.can_append_slots([self.view(sid)], lookahead):
            cows = self.guarded(lambda: self.m.append_slots(self.view(sid), lookahead))
            if cows is not None:
                self.copy(cows, 0, 0)
                # Catches writes into shared pages: a page that just received a token is private,
                # unless it became full and prefix caching moved it onto an identical cached page.
                block = self.m.block_tables[sid].blocks[start // self.bs]
                if not (self.caching and block.is_full):
                    assert snapshot(self.m)["gpu"]["refcounts"][str(block.block_id)] == 1
                self.write(sid, start)
        else:
            self.tokens[sid].pop()

    @precondition(lambda self: not self.broken and self.running())
    @rule(pick=st.integers(0, 99))
    def fork(self, pick):
        parent = self.running()[pick % len(self.running())]
        child, self.next_id = self.next_id, self.next_id + 1
        self.tokens[child] = list(self.tokens[parent])
        self.m.fork(parent, child)
        self.status[child] = "RUNNING"
        if self.caching:
            self.m.get_num_cached_tokens(self.view(child))
        self.stamp(child)

    def freeable(self):
        # With prefix caching vLLM stamps a swapped sequence's CPU pages on the GPU pool and
        # fails (block_manager.py:262); the reference refuses the same way, so skip those.
        return self.running() + ([] if self.caching else self.swapped())

    @precondition(lambda self: not self.broken and self.freeable())
    @rule(pick=st.integers(0, 99))
    def free(self, pick):
        live = self.freeable()
        sid = live[pick % len(live)]
        self.m.free(sid)
        self.status[sid] = "FINISHED"

    @precondition(lambda self: not self.broken and self.running())
    @rule(pick=st.integers(0, 99))
    def swap_out(self, pick):
        sid = self.running()[pick % len(self.running())]
        if self.m.can_swap_out([self.view(sid)]) and \
                len(self.m.get_block_table(sid)) <= self.m.get_num_free_cpu_blocks():
            pairs = self.guarded(lambda: self.m.swap_out([self.view(sid)]))
            if pairs is not None:
                self.copy(pairs, 0, self.gpu)
                self.status[sid] = "SWAPPED"

    @precondition(lambda self: not self.broken and self.swapped())
    @rule(pick=st.integers(0, 99))
    def swap_in(self, pick):
        sid = self.swapped()[pick % len(self.swapped())]
        if self.m.can_swap_in([self.view(sid)], 0) is AllocStatus.OK and \
                len(self.m.get_block_table(sid)) <= self.m.get_num_free_gpu_blocks():
            pairs = self.guarded(lambda: self.m.swap_in([self.view(sid)]))
            if pairs is not None:
                self.copy(pairs, self.gpu, 0)
                self.status[sid] = "RUNNING"

    @precondition(lambda self: not self.broken and self.caching)
    @rule()
    def scheduler_bookkeeping(self):
        for sid in self.running():
            self.stamp(sid)
        self.m.mark_blocks_as_computed()

    # -- invariants ---------------------------------------------------------------------------
    @precondition(lambda self: self.m is not None and not self.broken)
    @invariant()
    def pages_hold_every_live_sequence(self):
        """Catches: writes into shared pages, lost copy-on-write or swap copies, wrong prefix hits."""
        for sid in self.running() + self.swapped():
            table = self.m.get_block_table(sid)
            read = [self.memory.get(table[p // self.bs], {}).get(p % self.bs)
                    for p in range(self.m.block_tables[sid].num_full_slots)]
            assert read == self.tokens[sid][:len(read)], f"sequence {sid} reads {read}"

    @precondition(lambda self: self.m is not None and not self.broken)
    @invariant()
    def table_ids_mirror_the_views(self):
        """Catches: a page move (copy-on-write, cache promotion, swap, window drop) that the table's id list missed."""
        for sid, table in self.m.block_tables.items():
            assert table.physical_block_ids == [b.block_id for b in table.blocks], f"sequence {sid}"

    @precondition(lambda self: self.m is not None and not self.broken)
    @invariant()
    def books_balance(self):
        """Catches: leaked pages, pages both free and used, ref counts != table references."""
        snap = snapshot(self.m)
        refs: dict[int, int] = {}
        for ids in snap["tables"].values():
            for b in ids:
                refs[b] = refs.get(b, 0) + 1
        for device, base, size in (("gpu", 0, self.gpu), ("cpu", self.gpu, self.cpu)):
            pool = snap[device]
            counts = {int(b): c for b, c in pool["refcounts"].items()}
            mine = {b: c for b, c in refs.items() if base <= b < base + size}
            assert counts == mine
            parked = [p[0] for p in pool.get("evictor", {}).get("parked", [])]
            free = pool["free"] + parked
            assert len(set(free)) == len(free) and not set(free) & set(mine)
            assert len(free) + len(mine) == size

    @precondition(lambda self: self.m is not None and not self.broken and self.caching)
    @invariant()
    def full_pages_carry_the_chained_hash(self):
        """Catches: a content hash not equal to hash((first, prev, *tokens, None)) of the prefix."""
        for sid in self.running() + self.swapped():
            prev = NONE_HASH
            for i, h in enumerate(snapshot(self.m)["hashes"][str(sid)]):
                page = self.tokens[sid][i * self.bs:(i + 1) * self.bs]
                if len(page) < self.bs or i * self.bs + self.bs > self.m.block_tables[sid].num_full_slots:
                    break
                prev = hash((i == 0, prev, *page, None))
                assert h == format(prev & 0xFFFF_FFFF_FFFF_FFFF, "016x")


TestV0ReferenceModel = V0ReferenceModel.TestCase
