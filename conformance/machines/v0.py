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
``v0.prefix_caching`` (prefix caching on). Setting ``config["against"] = "reference"`` builds the
reference on both sides, which tests the machine itself without vLLM.

After a refusal (vLLM's own sanity assertion fired; both sides must agree on it) the example ends:
see ``V0Machine.do``.

Paths the machine deliberately avoids, because vLLM corrupts its own state there (documented in
the report and in ``reference.blocks.v0``): allocating or appending without asking ``can_*``
first; forking or swapping a sequence whose front pages a sliding window dropped; freeing a
prefix-cached sequence that was never asked for its cached tokens; sliding windows together with
prefix caching.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from conformance.lockstep import LockstepMachine, run_machine
from conformance.properties import Property
from upstream.releases import V0_RELEASE, policy_name

SEMANTICS = "v0"
ALPHABET = st.integers(0, 3)


def make_systems(config: dict):
    """(reference system, vLLM system) for ``config``; vLLM is imported only here."""
    from conformance.adapters.reference_v0 import ReferenceV0System

    if config.get("against") == "reference":
        other = ReferenceV0System(config)
        other.label = "reference-v0-b"
        return ReferenceV0System(config), other
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


def target_policy(against: str | None) -> str:
    """The V0Policy the reference runs: the installed vLLM's, or v0.10.2's against itself."""
    if against == "reference":
        return policy_name(V0_RELEASE)
    from conformance.versions import installed_v0_policy_name

    return installed_v0_policy_name()


def config_strategy(enable_caching: bool, against: str | None = None):
    windows = st.just(None) if enable_caching else st.one_of(st.none(), st.none(), st.integers(1, 12))
    return st.fixed_dictionaries({
        "policy": st.just(target_policy(against)),
        "block_size": st.sampled_from([1, 2, 4]),
        "num_gpu_blocks": st.integers(1, 12),
        "num_cpu_blocks": st.integers(0, 8),
        "watermark": st.sampled_from([0.0, 0.01, 0.1, 0.3]),
        "sliding_window": windows,
        "enable_caching": st.just(enable_caching),
    }).map(lambda c: {**c, "against": against} if against else c)


class V0Machine(LockstepMachine):
    """Drives both V0 managers like the V0 scheduler would."""

    semantics_module = __name__
    enable_caching = False
    against: str | None = None

    def __init__(self) -> None:
        super().__init__()
        self.config: dict = {}
        self.prompts: list[list[int]] = [[]]
        self.waiting: list[str] = []
        self.running: list[str] = []
        self.swapped: list[str] = []
        self.members: dict[str, list[int]] = {}  # live sequences of each group
        self.tokens: dict[int, int] = {}         # sequence id -> token count
        self.computed: dict[int, int] = {}       # sequence id -> computed token count
        self.written: dict[int, int] = {}        # sequence id -> tokens its table holds
        self.dropped: set[int] = set()           # sequences whose front pages were dropped
        self.next_seq = 1
        self.next_group = 1
        self.clock = 0
        self.broken = False

    @initialize(config=st.data())
    def setup(self, config):
        self.config = config.draw(config_strategy(self.enable_caching, self.against))
        self.start(self.config)

    # -- helpers ------------------------------------------------------------------------------
    def do(self, op: dict) -> dict:
        """Apply ``op`` to both systems in lockstep and return the shared outcome.

        A ``"refused"`` outcome means vLLM tripped one of its own sanity assertions: its state is
        no longer trustworthy, so the example ends there. Hypothesis offers no way to stop an
        example early, and a rule set whose preconditions all turn false makes it raise
        ``InvalidDefinition`` ("No progress can be made"), which is a harness error, not a
        verdict. So every rule stays valid, and after a refusal ``do`` sends nothing to either
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

    def _status_per_sequence(self) -> bool:
        """Can one sequence of a group finish while the others run? (V0Api.group_status_per_sequence)"""
        return self._both_allow("group_status_per_sequence")

    def _admit(self, gid: str) -> None:
        out = self.do({"op": "can_allocate", "group": gid, "lookahead": 0})
        admit = out.get("result") == "OK"
        if admit and self._window_blocks() is not None:
            # can_allocate caps the need at the window, but allocate writes the whole prompt: vLLM
            # then runs dry half way and leaks the pages it took. Ask like a careful scheduler.
            free_gpu = self.do({"op": "num_free"}).get("result", [0])[0]
            admit = -(-self.tokens[self.members[gid][0]] // self.config["block_size"]) <= free_gpu
        if admit:
            self.do({"op": "allocate", "group": gid})
            self.waiting.remove(gid)
            self.running.append(gid)
            for sid in self.members[gid]:
                self._touch(sid)
        elif out.get("result") == "NEVER":
            self.waiting.remove(gid)

    def _touch(self, sid: int) -> None:
        if self.enable_caching:
            self.clock += 1
            self.do({"op": "access", "seq": sid, "now": self.clock})

    def _fits(self, gid: str, device: int) -> bool:
        """Does the destination hold every page of the group? (0: GPU, 1: CPU)

        ``can_swap_in/out`` count pages the *next append* touches, not the empty lookahead pages a
        table already holds, so vLLM can run dry half way through a swap. A careful scheduler
        checks the page count itself; so does the machine, through ops that stay in the trace.
        """
        pages = sum(len(self.do({"op": "block_table", "seq": s}).get("result", []))
                    for s in self.members[gid])
        return pages <= self.do({"op": "num_free"}).get("result", [0, 0])[device]

    def _window_blocks(self) -> int | None:
        w = self.config.get("sliding_window")
        return None if w is None else w // self.config["block_size"] + 2

    # -- rules --------------------------------------------------------------------------------
    @precondition(lambda self: len(self.members) < 8)
    @rule(stem=st.integers(0, 1000), cut=st.integers(0, 12),
          suffix=st.lists(ALPHABET, min_size=0, max_size=9), n=st.sampled_from([1, 1, 1, 2]))
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
        self.do({"op": "add_group", "group": gid, "seqs": sids, "prompt": prompt})
        self.members[gid] = sids
        for sid in sids:
            self.tokens[sid] = len(prompt)
            self.computed[sid] = 0
            self.written[sid] = len(prompt)
            if self.enable_caching:
                self.do({"op": "num_cached_tokens", "seq": sid})
        self.waiting.append(gid)
        self._admit(gid)

    @precondition(lambda self: self.waiting)
    @rule(pick=st.integers(0, 100))
    def retry_waiting(self, pick):
        self._admit(self.waiting[pick % len(self.waiting)])

    @precondition(lambda self: self.running)
    @rule(pick=st.integers(0, 100), token=ALPHABET, lookahead=st.sampled_from([0, 0, 1, 3]),
          compute=st.booleans())
    def decode(self, pick, token, lookahead, compute):
        gid = self.running[pick % len(self.running)]
        for sid in self.members[gid]:
            if compute:
                self.do({"op": "compute", "seq": sid})
                self.computed[sid] = self.tokens[sid]
            self.do({"op": "append_token", "seq": sid, "token": token})
            self.tokens[sid] += 1
        out = self.do({"op": "can_append_slots", "group": gid, "lookahead": lookahead})
        wb = self._window_blocks()
        grow = out.get("result") is True
        if grow and wb is not None:
            # can_append_slots does not count the null page the first sliding-window append takes,
            # so vLLM can run dry half way through append_slots. Leave room like a careful scheduler.
            bs = self.config["block_size"]
            need = sum((self.tokens[s] - self.written[s] + lookahead) // bs + 2 for s in self.members[gid])
            grow = need <= self.do({"op": "num_free"}).get("result", [0])[0]
        if grow:
            for sid in self.members[gid]:
                self.do({"op": "append_slots", "seq": sid, "lookahead": lookahead})
                self.written[sid] = self.tokens[sid]
                # Pages before computed // block_size - window are now the null block.
                if wb is not None and self.computed[sid] // self.config["block_size"] - wb > 0:
                    self.dropped.add(sid)
            for sid in self.members[gid]:
                self._touch(sid)

    # vLLM copies a sequence's table for a fork (here, and in allocate for a group of several
    # sequences) with get_all_blocks_recursively, one Python frame per block (v0.10.2 vllm/core/block/common.py:349-371),
    # so a table of about 1,000 blocks raises RecursionError in every V0 release (kept in
    # conformance/known-upstream-bugs/v0-fork-recursion.json; the 0.10.2 serving path never forks).
    # None: no bound (short sequences only); the real-size machine sets one.
    max_fork_blocks: int | None = None

    def _fork_fits(self, num_tokens: int) -> bool:
        bound = self.max_fork_blocks
        return bound is None or -(-num_tokens // self.config["block_size"]) <= bound

    def _forkable(self) -> list[int]:
        return [s for g in self.running for s in self.members[g]
                if s not in self.dropped and self._fork_fits(self.written[s])]

    def _swappable(self) -> list[str]:
        return [g for g in self.running if not any(s in self.dropped for s in self.members[g])]

    @precondition(lambda self: self._forkable())
    @rule(pick=st.integers(0, 100))
    def fork(self, pick):
        candidates = self._forkable()
        parent = candidates[pick % len(candidates)]
        gid = next(g for g in self.running if parent in self.members[g])
        child = self.next_seq
        self.next_seq += 1
        self.do({"op": "fork", "group": gid, "parent": parent, "child": child})
        self.members[gid].append(child)
        self.tokens[child] = self.tokens[parent]
        self.computed[child] = self.computed[parent]
        self.written[child] = self.written[parent]
        if self.enable_caching:
            self.do({"op": "num_cached_tokens", "seq": child})
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
        if self._status_per_sequence():
            chosen = [self.members[gid][which % len(self.members[gid])]]
        else:  # the release's SequenceGroup cannot hold a finished member beside running ones
            chosen = list(self.members[gid])
        for sid in chosen:
            # A refusal leaves the sequence alive.
            if "error" not in self.do({"op": "free", "seq": sid}):
                self.members[gid].remove(sid)
        if not self.members[gid]:
            for pool in (self.running, self.swapped):
                if gid in pool:
                    pool.remove(gid)
            del self.members[gid]

    @precondition(lambda self: self._swappable())
    @rule(pick=st.integers(0, 100))
    def swap_out(self, pick):
        candidates = self._swappable()
        gid = candidates[pick % len(candidates)]
        if self.do({"op": "can_swap_out", "group": gid}).get("result") is True and self._fits(gid, 1):
            self.do({"op": "swap_out", "group": gid})
            self.running.remove(gid)
            self.swapped.append(gid)

    @precondition(lambda self: self.swapped)
    @rule(pick=st.integers(0, 100), lookahead=st.sampled_from([0, 1, 3]))
    def swap_in(self, pick, lookahead):
        gid = self.swapped[pick % len(self.swapped)]
        out = self.do({"op": "can_swap_in", "group": gid, "lookahead": lookahead})
        if out.get("result") == "OK" and self._fits(gid, 0):
            self.do({"op": "swap_in", "group": gid})
            self.swapped.remove(gid)
            self.running.append(gid)

    @precondition(lambda self: self.running)
    @rule(pick=st.integers(0, 100))
    def cache_queries(self, pick):
        gid = self.running[pick % len(self.running)]
        self.do({"op": "mark_computed", "group": gid})
        self.do({"op": "common_computed", "group": gid})
        self.do({"op": "hit_rate"})

    @precondition(lambda self: self._both_allow("supports_reset_prefix_cache"))
    @rule()
    def reset_prefix_cache(self):
        self.do({"op": "reset_prefix_cache"})
        self.do({"op": "num_free"})

    @rule(seq=st.integers(0, 40), lookahead=st.sampled_from([0, 2]))
    def misuse(self, seq, lookahead):
        """Ask about a sequence that may be unknown or freed: both must refuse alike."""
        live = {s for ss in self.members.values() for s in ss}
        self.do({"op": "block_table", "seq": seq})
        if seq not in live:
            self.do({"op": "append_slots", "seq": seq, "lookahead": lookahead})


class V0LifecycleMachine(V0Machine):
    enable_caching = False


class V0PrefixCachingMachine(V0Machine):
    enable_caching = True


class V0LifecycleSelfMachine(V0Machine):
    """Reference against reference: exercises the machine and adapters without vLLM."""

    enable_caching = False
    against = "reference"


class V0PrefixCachingSelfMachine(V0Machine):
    enable_caching = True
    against = "reference"


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
