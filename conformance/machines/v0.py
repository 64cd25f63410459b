"""Semantics ``"v0"``: the reference V0 block manager against vLLM v0.10.2's, op for op.

The machine plays a small V0 scheduler. It admits sequence groups whose prompts share prefixes
(drawn from a four-token alphabet), allocates them when ``can_allocate`` says OK, decodes (the
forward pass marks tokens computed, the sampler appends a token, ``can_append_slots`` then
``append_slots`` with lookahead slots), forks running sequences, frees them, preempts groups by
swapping them out and back in, and - with prefix caching - stamps access times, marks blocks
computed, asks for cached tokens and common computed blocks, and resets the cache. After every op
the lockstep engine compares the returned value (or refusal category) and the whole snapshot:
block tables, per-block tokens and hashes, free-id queues in order, reference counts, cached-hash
maps, evictor tables *and* heaps, page statuses, the copy-on-write and swap logs, the computed-
tokens and last-access trackers.

Two properties: ``v0.lifecycle`` (naive allocator, incl. sliding windows) and
``v0.prefix_caching`` (prefix caching on). ``make_systems`` pairs the reference with the installed
vLLM, or -- with ``peer="reference"`` in the config -- with a second reference, which tests the
machine itself without vLLM. A config is a :class:`conformance.configs.V0Config` (with its policy
object), drawn by :func:`config_strategy`. Importing this module does not import vLLM.

After a refusal (vLLM's own sanity assertion fired; both sides must agree on it) the example ends:
see ``V0Machine.act``.

Paths the machine deliberately avoids, because vLLM corrupts its own state there (documented in
the report and in ``reference.blocks.v0``): allocating or appending without asking ``can_*``
first; forking or swapping a sequence whose front pages a sliding window dropped; freeing a
prefix-cached sequence that was never asked for its cached tokens; sliding windows together with
prefix caching.
"""

from __future__ import annotations

from collections.abc import Hashable

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from conformance.adapters.v0_sequences import RUNNING, SWAPPED, WAITING, V0Sequences
from conformance.changelog import policy_named
from conformance.configs import V0Config
from conformance.lockstep import LockstepMachine, run_machine
from conformance.properties import Property
from reference.blocks.policies import V0Policy
from upstream.releases import V0_RELEASE, policy_name

SEMANTICS = "v0"
ALPHABET = (0, 1, 2, 3)


def make_systems(config: V0Config | dict):
    """(reference, vLLM) for ``config``; (reference, reference) when ``config.peer == "reference"``.
    A trace file's config object is read as a :class:`V0Config` here. vLLM is imported only here."""
    from conformance.adapters.reference_v0 import ReferenceV0System

    config = V0Config.of(config)
    if config.peer == "reference":
        return ReferenceV0System(config), ReferenceV0System(config, label="reference-peer")
    import os

    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    try:
        import vllm  # noqa: F401 - imported only to learn whether it imports
    except ImportError as err:
        from conformance.versions import vllm_import_failed

        raise vllm_import_failed(err) from None
    from conformance.adapters.vllm_v0 import VllmV0System

    return ReferenceV0System(config), VllmV0System(config)


def target_policy(peer: str | None) -> V0Policy:
    """The V0Policy the reference runs: the installed vLLM's, or v0.10.2's against itself."""
    if peer == "reference":
        return policy_named(policy_name(V0_RELEASE), V0Policy)
    from conformance.versions import installed_v0_policy_name

    return policy_named(installed_v0_policy_name(), V0Policy)


@st.composite
def config_strategy(draw, enable_caching: bool, peer: str | None = None) -> V0Config:
    # A window drops pages only once a sequence holds more than window // block_size + 2 of them at
    # once, so a windowed pool has that many pages more than a pool without a window (with 1-12 in
    # all, runs of 200 examples of 100 steps dropped none; decode_run is the other half).
    block_size = draw(st.sampled_from([1, 2, 4]))
    window = None if enable_caching else draw(st.one_of(st.none(), st.none(), st.integers(1, 12)))
    window_pages = 0 if window is None else window // block_size + 3
    return V0Config(
        policy=target_policy(peer),
        block_size=block_size,
        num_gpu_blocks=window_pages + draw(st.integers(1, 12)),
        num_cpu_blocks=draw(st.integers(0, 8)),
        watermark=draw(st.sampled_from([0.0, 0.01, 0.1, 0.3])),
        sliding_window=window,
        enable_caching=enable_caching,
        peer=peer,
    )


class V0Machine(LockstepMachine):
    """Drives both V0 managers like the V0 scheduler would."""

    semantics_module = __name__
    # The class's parameters for the config it draws; the machine reads the drawn config, never these.
    enable_caching = False
    peer: str | None = None  # "reference": pair the reference with itself
    config: V0Config  # drawn by setup, before any rule runs

    def __init__(self) -> None:
        super().__init__()
        self.prompts: list[list[int]] = [[]]
        self.waiting: list[str] = []
        self.running: list[str] = []
        self.swapped: list[str] = []
        self.sequences = V0Sequences()           # every sequence's tokens and computed count, by group
        self.written: dict[int, int] = {}        # sequence id -> tokens its table holds
        self.dropped: set[int] = set()           # sequences whose front pages were dropped
        self.next_seq = 1
        self.next_group = 1
        self.clock = 0
        self.broken = False

    @initialize(data=st.data())
    def setup(self, data):
        self.config = data.draw(config_strategy(self.enable_caching, self.peer))
        self.start(self.config)

    # -- helpers ------------------------------------------------------------------------------
    @property
    def members(self) -> dict[Hashable, list[int]]:
        """The live (not freed) sequences of each group that has any, in admission order."""
        live = {g: self.sequences.live(g) for g in self.sequences.groups}
        return {g: ids for g, ids in live.items() if ids}

    def live(self, gid: str) -> list[int]:
        """The live sequences of group ``gid``, in order."""
        return self.sequences.live(gid)

    def tokens(self, sid: int) -> int:
        """How many tokens sequence ``sid`` holds."""
        return len(self.sequences.seqs[sid].tokens)

    def act(self, op: dict) -> dict:
        """Apply ``op`` to both systems in lockstep and return the shared outcome.

        A ``"refused"`` outcome means vLLM tripped one of its own sanity assertions: its state is
        no longer trustworthy, so the example ends there. Hypothesis offers no way to stop an
        example early, and a rule set whose preconditions all turn false makes it raise
        ``InvalidDefinition`` ("No progress can be made"), which is a harness error, not a
        verdict. So every rule stays valid, and after a refusal ``act`` sends nothing to either
        system: the remaining steps only move this machine's own bookkeeping, the trace ends at
        the refusal, and no step is counted.
        """
        if self.broken:
            return {}
        out = self.step(op)
        if out.get("error") == "refused":
            self.broken = True
        return out

    def _both_allow(self, capability: str) -> bool:
        """Do both systems offer ``capability`` (an adapter flag from V0Api; the reference has all)?"""
        return all(getattr(s, capability, True) for s in (self.a, self.b))

    def _asks_cached_tokens(self) -> bool:
        """Does the scheduler ask for a new sequence's cached tokens? With prefix caching, in the
        releases that have get_num_cached_tokens (V0Api.num_cached_tokens)."""
        return self.config.enable_caching and self._both_allow("supports_num_cached_tokens")

    def _status_per_sequence(self) -> bool:
        """Can one sequence of a group finish while the others run? (V0Api.group_status_per_sequence)"""
        return self._both_allow("group_status_per_sequence")

    def _admit(self, gid: str) -> None:
        out = self.act({"op": "can_allocate", "group": gid, "lookahead": 0})
        admit = out.get("result") == "OK"
        if admit and self._window_blocks() is not None:
            # can_allocate caps the need at the window, but allocate writes the whole prompt: vLLM
            # then runs dry half way and leaks the pages it took. Ask like a careful scheduler.
            free_gpu = self.act({"op": "num_free"}).get("result", [0])[0]
            admit = -(-self.tokens(self.live(gid)[0]) // self.config.block_size) <= free_gpu
        if admit:
            self.act({"op": "allocate", "group": gid})
            self.sequences.move(gid, WAITING, RUNNING)
            self.waiting.remove(gid)
            self.running.append(gid)
            for sid in self.live(gid):
                self._touch(sid)
        elif out.get("result") == "NEVER":
            self.waiting.remove(gid)

    def _touch(self, sid: int) -> None:
        """Mark the sequence's pages accessed at the current step's time. The scheduler stamps every
        sequence of a step with the same ``now`` (v0.10.2 vllm/core/scheduler.py:1509), so pages of
        sequences touched in one step tie on time and the evictor's later keys decide; the clock
        advances only in ``next_step``."""
        if self.config.enable_caching:
            self.act({"op": "access", "seq": sid, "now": self.clock})

    @precondition(lambda self: self.config.enable_caching)
    @rule()
    def next_step(self):
        """A new scheduler step: later accesses get a later time."""
        self.clock += 1

    def _fits(self, gid: str, device: int) -> bool:
        """Does the destination hold every page of the group? (0: GPU, 1: CPU)

        ``can_swap_in/out`` count pages the *next append* touches, not the empty lookahead pages a
        table already holds, so vLLM can run dry half way through a swap. A careful scheduler
        checks the page count itself; so does the machine, through ops that stay in the trace.
        """
        pages = sum(len(self.act({"op": "block_table", "seq": s}).get("result", []))
                    for s in self.live(gid))
        return pages <= self.act({"op": "num_free"}).get("result", [0, 0])[device]

    def _window_blocks(self) -> int | None:
        w = self.config.sliding_window
        return None if w is None else w // self.config.block_size + 2

    # -- rules --------------------------------------------------------------------------------
    @precondition(lambda self: len(self.members) < 8)
    @rule(stem=st.integers(0, 1000), cut=st.integers(0, 12),
          suffix=st.lists(st.sampled_from(ALPHABET), min_size=0, max_size=9), n=st.sampled_from([1, 1, 1, 2]))
    def new_group(self, stem, cut, suffix, n):
        base = self.prompts[stem % len(self.prompts)]
        self.add_group(base[:cut] + suffix or [0], n)

    def add_group(self, prompt: list[int], n: int) -> None:
        """Admit a new group of ``n`` sequences sharing ``prompt`` (also used by the real-size
        machine, which draws its prompts differently)."""
        self.prompts.append(prompt)
        if n > 1 and not self._fork_fits(len(prompt)):
            n = 1  # allocate would fork the table (see max_fork_blocks)
        gid = f"g{self.next_group}"
        self.next_group += 1
        sids = list(range(self.next_seq, self.next_seq + n))
        self.next_seq += n
        self.act({"op": "add_group", "group": gid, "seqs": sids, "prompt": prompt})
        self.sequences.add_group(gid, sids, prompt)
        for sid in sids:
            self.written[sid] = len(prompt)
            if self._asks_cached_tokens():
                self.act({"op": "num_cached_tokens", "seq": sid})
        self.waiting.append(gid)
        self._admit(gid)

    @precondition(lambda self: self.waiting)
    @rule(pick=st.integers(0, 100))
    def retry_waiting(self, pick):
        self._admit(self.waiting[pick % len(self.waiting)])

    @precondition(lambda self: self.running)
    @rule(pick=st.integers(0, 100), token=st.sampled_from(ALPHABET), lookahead=st.sampled_from([0, 0, 1, 3]),
          compute=st.booleans())
    def decode(self, pick, token, lookahead, compute):
        gid = self.running[pick % len(self.running)]
        for sid in self.live(gid):
            # The forward pass computes only tokens that have KV slots: after a refused append the
            # last tokens have none, and vLLM's sliding-window drop counts pages from the computed
            # count, indexing past the table where it exceeds the written tokens
            # (v0.10.2 vllm/core/block/block_table.py:150-159).
            if compute and self.tokens(sid) == self.written[sid]:
                self.act({"op": "compute", "seq": sid})
                self.sequences.compute_all(sid)
            self.act({"op": "append_token", "seq": sid, "token": token})
            self.sequences.append_token(sid, token)
        out = self.act({"op": "can_append_slots", "group": gid, "lookahead": lookahead})
        wb = self._window_blocks()
        grow = out.get("result") is True
        if grow and wb is not None:
            # can_append_slots does not count the null page the first sliding-window append takes,
            # so vLLM can run dry half way through append_slots. Leave room like a careful scheduler.
            bs = self.config.block_size
            need = sum((self.tokens(s) - self.written[s] + lookahead) // bs + 2 for s in self.live(gid))
            grow = need <= self.act({"op": "num_free"}).get("result", [0])[0]
        if grow:
            for sid in self.live(gid):
                self.act({"op": "append_slots", "seq": sid, "lookahead": lookahead})
                self.written[sid] = self.tokens(sid)
                # Pages before computed // block_size - window are now the null block.
                if wb is not None and self.sequences.seqs[sid].computed // self.config.block_size - wb > 0:
                    self.dropped.add(sid)
            for sid in self.live(gid):
                self._touch(sid)

    def _caught_up(self) -> list[str]:
        """The running groups all of whose tokens have KV slots."""
        return [g for g in self.running if all(self.tokens(s) == self.written[s] for s in self.live(g))]

    @precondition(lambda self: self.config.sliding_window is not None and self._caught_up())
    @rule(pick=st.integers(0, 100), tokens=st.lists(st.sampled_from(ALPHABET), min_size=2, max_size=12))
    def decode_run(self, pick, tokens):
        """Computed decode steps of one group in a row, while its appends succeed (a scheduler would
        preempt it at a refusal): the way a windowed sequence outgrows its window, which single
        decodes among the other rules almost never reach."""
        groups = self._caught_up()
        gid = groups[pick % len(groups)]
        for token in tokens:
            self.decode(self.running.index(gid), token, 0, True)
            if gid not in self.running or gid not in self._caught_up():
                return

    # vLLM copies a sequence's table for a fork (here, and in allocate for a group of several
    # sequences) with get_all_blocks_recursively, one Python frame per block (v0.10.2 vllm/core/block/common.py:349-371),
    # so a table of about 1,000 blocks raises RecursionError in every V0 release (kept in
    # conformance/known-upstream-bugs/v0-fork-recursion.json; the 0.10.2 serving path never forks).
    # None: no bound (short sequences only); the real-size machine sets one.
    max_fork_blocks: int | None = None

    def _fork_fits(self, num_tokens: int) -> bool:
        bound = self.max_fork_blocks
        return bound is None or -(-num_tokens // self.config.block_size) <= bound

    def _forkable(self) -> list[int]:
        return [s for g in self.running for s in self.live(g)
                if s not in self.dropped and self._fork_fits(self.written[s])]

    def _swappable(self) -> list[str]:
        return [g for g in self.running if not any(s in self.dropped for s in self.live(g))]

    @precondition(lambda self: self._forkable())
    @rule(pick=st.integers(0, 100))
    def fork(self, pick):
        candidates = self._forkable()
        parent = candidates[pick % len(candidates)]
        gid = next(g for g in self.running if parent in self.live(g))
        child = self.next_seq
        self.next_seq += 1
        self.act({"op": "fork", "group": gid, "parent": parent, "child": child})
        self.sequences.fork(gid, parent, child)
        self.written[child] = self.written[parent]
        if self._asks_cached_tokens():
            self.act({"op": "num_cached_tokens", "seq": child})
        self._touch(child)

    # Only running sequences are freed. Freeing a *swapped* one corrupts vLLM 0.10.2's block-object
    # pools: the block objects travelled to the CPU allocator keeping the pool index they had in
    # the GPU allocator's pool (v0.10.2 vllm/core/block/naive_block.py:312-331 reuses the object;
    # vllm/core/block/common.py:205-229 frees by pool_id), so the CPU pool later hands out an
    # index past its end (IndexError in v0.10.2 vllm/core/block/common.py:217) or another
    # allocator's object. Shrunk trace:
    # conformance/known-upstream-bugs/v0.10.2-free-swapped-sequence.json. The reference has no
    # object pools and cannot (and should not) mimic that corruption.
    @precondition(lambda self: self.running)
    @rule(pick=st.integers(0, 100), which=st.integers(0, 100))
    def free(self, pick, which):
        groups = self.running
        gid = groups[pick % len(groups)]
        live = self.live(gid)
        if self._status_per_sequence():
            chosen = [live[which % len(live)]]
        else:  # the release's SequenceGroup cannot hold a finished member beside running ones
            chosen = list(live)
        for sid in chosen:
            # A refusal leaves the sequence alive.
            if "error" not in self.act({"op": "free", "seq": sid}):
                self.sequences.finish(sid)
        if not self.live(gid):
            for pool in (self.running, self.swapped):
                if gid in pool:
                    pool.remove(gid)

    @precondition(lambda self: self._swappable())
    @rule(pick=st.integers(0, 100))
    def swap_out(self, pick):
        candidates = self._swappable()
        gid = candidates[pick % len(candidates)]
        if self.act({"op": "can_swap_out", "group": gid}).get("result") is True and self._fits(gid, 1):
            self.act({"op": "swap_out", "group": gid})
            self.sequences.move(gid, RUNNING, SWAPPED)
            self.running.remove(gid)
            self.swapped.append(gid)

    @precondition(lambda self: self.swapped)
    @rule(pick=st.integers(0, 100), lookahead=st.sampled_from([0, 1, 3]))
    def swap_in(self, pick, lookahead):
        gid = self.swapped[pick % len(self.swapped)]
        out = self.act({"op": "can_swap_in", "group": gid, "lookahead": lookahead})
        if out.get("result") == "OK" and self._fits(gid, 0):
            self.act({"op": "swap_in", "group": gid})
            self.sequences.move(gid, SWAPPED, RUNNING)
            self.swapped.remove(gid)
            self.running.append(gid)

    @precondition(lambda self: self.running)
    @rule(pick=st.integers(0, 100))
    def cache_queries(self, pick):
        gid = self.running[pick % len(self.running)]
        self.act({"op": "mark_computed", "group": gid})
        self.act({"op": "common_computed", "group": gid})
        self.act({"op": "hit_rate"})

    @precondition(lambda self: self._both_allow("supports_reset_prefix_cache"))
    @rule()
    def reset_prefix_cache(self):
        self.act({"op": "reset_prefix_cache"})
        self.act({"op": "num_free"})

    @rule(seq=st.integers(0, 40), lookahead=st.sampled_from([0, 2]))
    def misuse(self, seq, lookahead):
        """Ask about a sequence that may be unknown or freed: both must refuse alike."""
        live = {s for ss in self.members.values() for s in ss}
        self.act({"op": "block_table", "seq": seq})
        if seq not in live:
            self.act({"op": "append_slots", "seq": seq, "lookahead": lookahead})


class V0LifecycleMachine(V0Machine):
    enable_caching = False


class V0PrefixCachingMachine(V0Machine):
    enable_caching = True


class V0ReferencePeerLifecycle(V0Machine):
    """Reference against reference: exercises the machine and adapters without vLLM."""

    enable_caching = False
    peer = "reference"


class V0ReferencePeerPrefixCaching(V0Machine):
    enable_caching = True
    peer = "reference"


PROPERTIES = [
    Property(
        name="v0.lifecycle",
        checks=("after every allocate/append/fork/free/swap op of the V0 manager without prefix "
                "caching (incl. sliding windows), the return value or refusal category and the full "
                "snapshot - block tables, per-block tokens, free-id queue order, ref counts, null "
                "block, copy-on-write and swap logs - are identical in the reference and vLLM"),
        run=lambda examples, steps, progress=None: run_machine(V0LifecycleMachine, examples, steps, progress),
        needs="vLLM 0.10.2 (vllm.core.block_manager.SelfAttnBlockSpaceManager)",
    ),
    Property(
        name="v0.prefix_caching",
        checks=("after every op of the V0 manager with prefix caching, the return value or refusal "
                "category and the full snapshot - block tables, per-block tokens and content hashes, "
                "free-id queue order, ref counts, cached-hash map, evictor table and heap, page "
                "statuses, hit-rate counters, computed-token and last-access trackers - are identical "
                "in the reference and vLLM"),
        run=lambda examples, steps, progress=None: run_machine(V0PrefixCachingMachine, examples, steps, progress),
        needs="vLLM 0.10.2 (vllm.core.block_manager.SelfAttnBlockSpaceManager)",
    ),
]
