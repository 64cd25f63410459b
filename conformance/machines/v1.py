"""Semantics ``"v1"``: the reference V1 page manager and vLLM's, in lockstep.

The machine plays a scheduler with a small, adversarial workload: prompts drawn from two short
*stems* over a three-token alphabet (so prefixes are shared and prefix hits are frequent),
chunked prefill of random sizes, decode steps with lookahead slots, preemption and re-admission,
finishing, prefix-cache resets and targeted evictions, on pools small enough that allocations
fail and cached blocks are evicted. Configs vary the block size, the groups (full attention,
sliding window, both), caching on/off, both hash functions, the NONE_HASH seed, cache salts,
LoRA adapters, (v0.33.0) the watermark, (from 0.29.0, with a sliding window) the prefix-cache
retention interval and (from 0.26.0) the whole-sequence admission check with the in-flight tokens
that cap a sliding window's count. After every op the engine compares the outcome and
the whole snapshot (block tables, free-queue order, every block's ref count and hash, the
prefix-cache map, request hashes).

``make_systems`` pairs the reference with the installed vLLM, or -- with ``peer="reference"``
in the config -- with a second reference, which tests the machine itself without vLLM. A config
is a :class:`conformance.configs.V1Config` (with its policy object), drawn by :func:`v1_configs`.
Importing this module does not import vLLM.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from conformance.changelog import api_at, policy_named
from conformance.configs import FULL, V1Config, V1Group
from conformance.lockstep import LockstepMachine, run_machine
from conformance.properties import Property
from conformance.versions import distinct_v1_policy_names
from reference.blocks.policies import V1Policy
from reference.blocks.v1.hashing import hash_function_names

SEMANTICS = "v1"
ALPHABET = (0, 1, 2)
MAX_LIVE_REQUESTS = 5


def make_systems(config: V1Config | dict):
    """(reference, vLLM) for ``config``; (reference, reference) when ``config.peer == "reference"``.
    A trace file's config object is read as a :class:`V1Config` here. vLLM is imported only here."""
    from conformance.adapters.reference_v1 import ReferenceV1System

    config = V1Config.of(config)
    reference = ReferenceV1System(config)
    if config.peer == "reference":
        return reference, ReferenceV1System(config, label="reference-peer")
    try:
        from conformance.adapters.vllm_v1 import VllmV1System

        return reference, VllmV1System(config)
    except ImportError as err:
        from conformance.versions import vllm_import_failed

        raise vllm_import_failed(err) from None


def target_policy() -> V1Policy:
    """The V1Policy of the installed vLLM (NotApplicable without one)."""
    from conformance.versions import installed_v1_policy_name

    return policy_named(installed_v1_policy_name())


def accepted_layout(groups: tuple[V1Group, ...], block_size: int, enable_caching: bool, rules: V1Policy) -> bool:
    """Does the release of ``rules`` accept these groups?"""
    from reference.blocks.v1.specs import FullAttention, SlidingWindow, hybrid_layout_problem

    specs = [FullAttention(block_size) if g.window is None else SlidingWindow(block_size, g.window) for g in groups]
    return hybrid_layout_problem(specs, enable_caching, rules.hybrid_groups_any_layout,
                                 rules.hybrid_needs_distinct_specs,
                                 rules.hybrid_layout_checked_without_caching,
                                 rules.single_kv_cache_group) is None


@st.composite
def v1_configs(draw, policy: V1Policy, sliding: bool, peer: str | None = None) -> V1Config:
    """A lockstep config: pool, groups, caching, hashing, watermark and retention settings."""
    block_size = draw(st.sampled_from([2, 4]))
    enable_caching = draw(st.sampled_from([True, True, True, False]))
    full = FULL
    if sliding:
        # Where the manager hashes (before 0.10.1), a window no longer than a block trips vLLM's
        # own assertion in cache_full_blocks (conformance/known-upstream-bugs/
        # v0.9.2-sliding-window-decode-hash-from-null.json), so windows start past one block.
        shortest = 2 if policy.hashes_on_request else block_size + 1
        sw = V1Group("sliding", draw(st.integers(shortest, 3 * block_size + 1)))
        # Every order of up to three groups with at least one sliding window (the coordinator
        # and the null-block bookkeeping index groups by position), less those the release's
        # hybrid coordinator refuses (policy field hybrid_groups_any_layout).
        layouts = [(sw,), (full, sw), (sw, full), (sw, sw), (full, sw, sw), (sw, full, sw),
                   (sw, sw, full), (full, full, sw)]
        groups = draw(st.sampled_from([g for g in layouts if accepted_layout(g, block_size, enable_caching, policy)]))
    else:
        groups = (full,)
    retention = None  # dense: every full block of a sliding-window group cached
    if policy.retention_interval_supported and any(g.window is not None for g in groups):
        # the engine's default 0 (only the window's tail before each reachable boundary), or a
        # tail every k tokens: one block is always covered by the window's tail (as dense), two
        # only when the window is more than a block and a token, four never with the windows drawn here
        retention = draw(st.sampled_from([None, 0, 0, block_size, 2 * block_size, 4 * block_size]))
    in_flight = None  # max_model_len: the sliding window's admission cap never binds
    if policy.full_sequence_admission and sliding:
        in_flight = draw(st.sampled_from([None, 1, block_size, 2 * block_size]))
    tight = draw(st.booleans())
    per_group = draw(st.integers(2, 5) if tight else st.integers(6, 12))
    return V1Config(
        policy=policy,
        block_size=block_size,
        num_blocks=1 + per_group * len(groups),
        groups=groups,
        max_model_len=draw(st.integers(3 * block_size, 8 * block_size)),
        enable_caching=enable_caching,
        hash_fn=draw(st.sampled_from(hash_function_names(policy))),
        pythonhashseed=draw(st.sampled_from([None, "0", "1234"])),
        entropy=draw(st.sampled_from(["5e" * 32, "a1" * 32])),
        watermark=draw(st.sampled_from([0.0, 0.0, 0.25])) if policy.watermark_supported else 0.0,
        retention_interval=retention,
        max_in_flight_tokens=in_flight,
        peer=peer,
    )


class V1Machine(LockstepMachine):
    """Scheduler-like op sequences against two V1 page managers."""

    semantics_module = __name__
    sliding = False  # draw configs with a sliding-window group
    peer: str | None = None  # "reference": pair the reference with itself
    policies: tuple[str, ...] = ()  # policy names; () = the installed vLLM's policy
    config: V1Config  # drawn by setup, before any rule runs

    def __init__(self) -> None:
        super().__init__()
        self.next_id = 0
        self.finished: list[str] = []
        self.last_lookup: tuple[str, int] | None = None  # (request, hit length) of the last lookup
        self.last_chunk: dict[str, int] = {}  # tokens of each request's last allocated chunk
        self.stems: list[list[int]] = []

    # -- helpers ------------------------------------------------------------------------------
    def live(self) -> dict:
        """The live requests' status and progress, read cheaply from the reference side."""
        if self.a is None:
            return {}
        return {
            r: {"status": s.status.value, "num_computed_tokens": s.num_computed_tokens, "num_tokens": s.num_tokens,
                "num_prompt_tokens": s.num_prompt_tokens}
            for r, s in self.a.manager.requests.items()
        }

    def act(self, op: dict) -> dict:
        out = self.step(op)
        self.last_lookup = None
        if op["op"] == "allocate_slots" and out.get("result") is not None:
            self.last_chunk[op["req"]] = op["num_new_tokens"]
        elif op["op"] in ("preempt", "free") and "result" in out:
            self.last_chunk.pop(op["req"], None)
        return out

    def remaining(self, req: str, hit: int = 0) -> int:
        state = self.live()[req]
        return state["num_tokens"] - state["num_computed_tokens"] - hit

    def allows_delay(self) -> bool:
        # Where cache_full_blocks caches null blocks too (v0.10.2: policy field
        # cache_full_blocks_skips_null), the reference models the hashes but not the later
        # consequences, so delayed caching is drawn with sliding windows only where null
        # blocks are skipped.
        policy = self.policy()
        return policy.delay_cache_blocks_supported and (policy.cache_full_blocks_skips_null
                                                        or not self.has_sliding_group())

    def has_sliding_group(self) -> bool:
        """Does this example's config (not the class's drawing parameter) have a sliding-window group?"""
        return any(g.kind == "sliding" for g in self.config.groups)

    def policy(self) -> V1Policy:
        """The V1Policy this trace runs under."""
        return self.config.policy

    def allocation_extras(self, data, req: str) -> dict:
        # Lookahead slots exist from 0.8.4 (lookahead_supported); both sides refuse them before.
        lookahead = data.draw(st.sampled_from([0, 0, 0, 1, 3]), label="lookahead") \
            if self.policy().lookahead_supported else 0
        if lookahead and self.table_is_full(req):
            lookahead = 0
        extras = {"num_lookahead_tokens": lookahead}
        if self.allows_delay():
            extras["delay_cache_blocks"] = data.draw(st.sampled_from([False, False, False, True]), label="delay")
        if self.policy().watermark_supported:
            extras["has_scheduled_reqs"] = data.draw(st.booleans(), label="has_scheduled")
        if self.policy().full_sequence_admission:
            # the scheduler asks it when admitting a waiting or preempted request
            extras["full_sequence_must_fit"] = data.draw(st.booleans(), label="whole_sequence")
        return extras

    # -- rules --------------------------------------------------------------------------------
    @initialize(data=st.data())
    def setup(self, data) -> None:
        policy = policy_named(data.draw(st.sampled_from(self.policies))) if self.policies else target_policy()
        self.config = data.draw(v1_configs(policy, self.sliding, self.peer), label="config")
        self.start(self.config)
        bs = self.config.block_size
        self.stems = [data.draw(st.lists(st.sampled_from(ALPHABET), min_size=bs, max_size=3 * bs), label="stem")
                      for _ in range(2)]

    @precondition(lambda self: len(self.live()) < MAX_LIVE_REQUESTS)
    @rule(data=st.data())
    def add_request(self, data) -> None:
        limit = self.config.max_model_len
        stem = data.draw(st.sampled_from(self.stems + [[]]), label="stem")
        suffix = data.draw(st.lists(st.sampled_from(ALPHABET), max_size=2 * self.config.block_size))
        tokens = (stem + suffix)[:limit] or [0]
        req = f"r{self.next_id}"
        self.next_id += 1
        self.act({"op": "add_request", "req": req, "tokens": tokens,
                  "salt": data.draw(st.sampled_from([None, None, None, "s1"]), label="salt")
                  if self.policy().cache_salt_supported else None,
                  "lora": data.draw(st.sampled_from([None, None, None, None, "a", "b"]), label="lora")})

    def table_is_full(self, req: str) -> bool:
        """Would lookahead slots trip vLLM's own assertion (before 0.9.0)?

        Before 0.9.0 the admission check counts lookahead slots past max_model_len, and the
        allocation is then clamped to cdiv(max_model_len, block_size) blocks and asserts that it
        still takes at least one (v0.8.5.post1 kv_cache_manager.py:255-263); a table that already
        has that many blocks fails the assertion. Lookahead is not drawn for such a table there.
        """
        config = self.config
        if self.policy().lookahead_capped_at_admission or self.a is None or req not in self.a.manager.requests:
            return False
        most = -(-config.max_model_len // config.block_size)
        return any(len(table) >= most for table in self.a.manager.block_ids(req))

    def lookup_overruns_hashes(self, req: str) -> bool:
        """Would vLLM's own lookup index past the request's hash list (and raise IndexError)?

        Before 0.10.1 the manager hashes a request at its first lookup and then only as blocks
        are cached, so a request holding full blocks that were never computed has a hash list
        shorter than its full blocks. A lone sliding-window group's hit search
        (v0.9.2 single_type_kv_cache_manager.py:333-341) indexes ``block_hashes[i]`` for every block up to
        ``num_tokens - 1`` and raises IndexError there; full attention stops at the list's end,
        and a hybrid layout bounds the window search by the full-attention hit. The scheduler
        only looks up waiting requests, whose uncomputed tail is one token unless a step accepted
        several (speculative decoding). Shrunk trace:
        conformance/known-upstream-bugs/v0.9.2-sliding-window-lookup-past-hashes.json. At 0.9.0
        and 0.9.0.1 the full-attention search indexes the list the same way
        (V1Api.full_hit_search_indexes_hashes) and raises once every hashed block hits. Such
        lookups are not drawn; the reference searches only the hashed blocks.
        """
        config = self.config
        groups = config.groups
        policy = self.policy()
        if policy.hashes_on_request or not config.enable_caching or len(groups) != 1 or self.a is None:
            return False
        if groups[0].kind == "sliding":
            indexes = policy.sliding_window_managed
        else:
            api = api_at(policy.name[1:]).v1
            indexes = groups[0].kind == "full" and api is not None and api.full_hit_search_indexes_hashes
        if not indexes:
            return False
        state = self.a.manager.requests.get(req)
        if state is None or not state.block_hashes:  # unknown (refused), or hashed in full now
            return False
        return (state.num_tokens - 1) // config.block_size > len(state.block_hashes)

    @precondition(lambda self: bool(self.live()))
    @rule(data=st.data())
    def lookup(self, data) -> None:
        candidates = [r for r in sorted(self.live()) if not self.lookup_overruns_hashes(r)]
        if not candidates:
            return
        req = data.draw(st.sampled_from(candidates), label="req")
        out = self.step({"op": "get_computed_blocks", "req": req})
        self.last_lookup = (req, out["result"]["num_computed_tokens"]) if "result" in out else None

    @precondition(lambda self: bool(self.live()))
    @rule(data=st.data())
    def allocate(self, data) -> None:
        """A prefill chunk (sometimes an empty, oversized or hit-less one) for a request with work left."""
        live = self.live()
        busy = sorted(r for r, s in live.items() if s["num_computed_tokens"] < s["num_tokens"])
        pool = busy if busy and data.draw(st.integers(0, 4), label="odd") else sorted(live)
        req = data.draw(st.sampled_from(pool), label="req")
        looked_up = self.last_lookup is not None and self.last_lookup[0] == req
        use_hit = data.draw(st.booleans() if looked_up else st.sampled_from([False] * 5 + [True]), label="use_hit")
        hit = self.last_lookup[1] if use_hit and looked_up else 0
        left = self.remaining(req, hit)
        n = data.draw(st.one_of(st.just(left), st.integers(1, max(1, left)), st.just(0), st.just(left + 1)), label="n")
        extras = self.allocation_extras(data, req)
        state, last = live[req], self.last_chunk.get(req, 0)
        if (self.has_sliding_group() and state["status"] == "running" and not use_hit and last and 1 <= n <= left
                and state["num_computed_tokens"] + n <= state["num_prompt_tokens"]):
            # Asynchronous scheduling schedules a prefill's next chunk before the previous one has
            # run: up to that chunk's tokens may still be in flight (never a prefix hit's).
            extras["num_in_flight_tokens"] = data.draw(
                st.sampled_from([0, 1, self.config.block_size, last, last]).map(lambda k: min(k, last)), label="in_flight")
        self.act({"op": "allocate_slots", "req": req, "num_new_tokens": n, "use_hit": use_hit, **extras})

    @precondition(lambda self: any(r["status"] != "running" for r in self.live().values()))
    @rule(data=st.data())
    def admit(self, data) -> None:
        """Lookup then adopt the hit at once, as the scheduler admits a waiting request."""
        waiting = sorted(r for r, s in self.live().items()
                         if s["status"] != "running" and not self.lookup_overruns_hashes(r))
        if not waiting:
            return
        req = data.draw(st.sampled_from(waiting), label="req")
        out = self.step({"op": "get_computed_blocks", "req": req})
        left = self.remaining(req, out["result"]["num_computed_tokens"])
        n = data.draw(st.one_of(st.just(left), st.integers(0, left)), label="chunk")
        self.act({"op": "allocate_slots", "req": req, "num_new_tokens": n, "use_hit": True,
                  **self.allocation_extras(data, req)})

    @precondition(lambda self: any(
        s["status"] == "running" and s["num_computed_tokens"] == s["num_tokens"] for s in self.live().values()))
    @rule(data=st.data())
    def decode(self, data) -> None:
        """Append one or two output tokens, then allocate a slot for them."""
        done = sorted(r for r, s in self.live().items()
                      if s["status"] == "running" and s["num_computed_tokens"] == s["num_tokens"])
        req = data.draw(st.sampled_from(done), label="req")
        tokens = data.draw(st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=2), label="tokens")
        out = self.act({"op": "append_tokens", "req": req, "tokens": tokens})
        if "result" in out:
            self.act({"op": "allocate_slots", "req": req, "num_new_tokens": len(tokens), "use_hit": False,
                      **self.allocation_extras(data, req)})

    @precondition(lambda self: any(s["status"] == "running" for s in self.live().values()))
    @rule(data=st.data())
    def preempt(self, data) -> None:
        """Preempt a running request (now and then a waiting or preempted one, to be refused)."""
        live = self.live()
        running = sorted(r for r, s in live.items() if s["status"] == "running")
        pool = running if data.draw(st.integers(0, 4), label="odd") else sorted(live)
        req = data.draw(st.sampled_from(pool), label="req")
        self.act({"op": "preempt", "req": req})

    @precondition(lambda self: bool(self.live()) or bool(self.finished))
    @rule(data=st.data())
    def free(self, data) -> None:
        req = data.draw(st.sampled_from(sorted(self.live()) + self.finished[-2:]), label="req")
        out = self.act({"op": "free", "req": req})
        if "result" in out:
            self.finished.append(req)

    @precondition(lambda self: bool(self.finished))
    @rule(data=st.data())
    def misuse_finished(self, data) -> None:
        """Ops on a finished request must be refused identically."""
        req = data.draw(st.sampled_from(self.finished[-2:]), label="req")
        op = data.draw(st.sampled_from([
            {"op": "append_tokens", "req": req, "tokens": [1]},
            {"op": "allocate_slots", "req": req, "num_new_tokens": 1, "use_hit": False},
            {"op": "get_computed_blocks", "req": req},
            {"op": "preempt", "req": req},
        ]), label="op")
        self.act(op)

    @precondition(lambda self: bool(self.finished))
    @rule(data=st.data())
    def maintain_cache(self, data) -> None:
        """Reset the prefix cache (refused while blocks are in use) or evict chosen blocks (v0.33.0)."""
        can_evict = self.policy().evict_blocks_supported
        if can_evict and data.draw(st.booleans(), label="evict"):
            top = self.config.num_blocks - 1
            ids = data.draw(st.lists(st.integers(0, top), max_size=3, unique=True), label="block_ids")
            self.act({"op": "evict_blocks", "block_ids": ids})
        else:
            self.act({"op": "reset_prefix_cache"})


class V1LifecycleMachine(V1Machine):
    """Full-attention configs against the installed vLLM."""


class V1SlidingWindowMachine(V1Machine):
    """Configs with a sliding-window group against the installed vLLM."""

    sliding = True


class V1ReferencePeerLifecycle(V1Machine):
    """Reference against reference under every measured V1 behaviour: the machine itself, without vLLM."""

    peer = "reference"
    policies = distinct_v1_policy_names()


class V1ReferencePeerSlidingWindow(V1ReferencePeerLifecycle):
    sliding = True


PROPERTIES = [
    Property(
        name="v1.lifecycle",
        checks=(
            "After every add/lookup/allocate/decode/preempt/free/reset/evict op on full-attention "
            "configs (caching on and off, every hash function the release offers, tight pools), the reference and "
            "vLLM's KVCacheManager return the same value or refusal and have identical block "
            "tables, free-queue order, per-block ref counts and hashes, prefix-cache map and "
            "request hashes."
        ),
        run=lambda examples, steps, progress=None: run_machine(V1LifecycleMachine, examples, steps, progress),
        needs="a vLLM with the V1 KVCacheManager and a V1 policy in conformance/versions.py",
    ),
    Property(
        name="v1.sliding_window",
        checks=(
            "The same lockstep comparison on configs with a sliding-window group (alone, or with "
            "full attention in either order), covering window release to null blocks (with a "
            "prefill chunk's predecessor still in flight, as asynchronous scheduling leaves it), "
            "right-to-left sliding-window prefix hits and (from 0.29.0) the blocks a retention "
            "interval of None, 0 or one, two or four blocks leaves in the prefix cache."
        ),
        run=lambda examples, steps, progress=None: run_machine(V1SlidingWindowMachine, examples, steps, progress),
        needs="a vLLM with the V1 KVCacheManager, SlidingWindowSpec and a V1 policy in conformance/versions.py",
    ),
]
