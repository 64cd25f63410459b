"""Lockstep at real sizes: 4k- to 128k-token sequences on pools of 100,000+ blocks.

The V1 and V0 machines (``conformance.machines.v1`` / ``.v0``) draw small pools and short prompts
so that every corner is reached in a few steps. Real deployments run 32k-128k-token contexts
(2,048-8,192 blocks of 16 per sequence) on pools of 100k+ blocks, where other bugs live: a
recursion over a block chain, a walk of the whole chain per block, an id that only overflows
past 65,536. These two machines keep the same rules (so the same scheduler-like workload, the
same full-snapshot comparison after every op) and change only the sizes:

* block sizes 16 and 32; prompts made by repeating a short stem up to 4k, 16k, 64k or 128k
  tokens (so prefixes are still shared and prefix hits long);
* pools from "just fits one maximal request" up to 100,001 blocks per group;
* V1: sliding windows of 512 + r tokens for every residue r of the block size, groups in every
  order; V0: windows of 4096 + r.

A run spends a bounded share of its time here: the property runs ``max(2, examples // 50)``
examples of at most ``min(steps, 25)`` steps (each step compares snapshots of 100k+ blocks).
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from conformance.changelog import policy_named
from conformance.configs import FULL, V0Config, V1Config, V1Group
from conformance.lockstep import run_machine
from conformance.machines import v0, v1
from conformance.properties import Property
from conformance.versions import distinct_v1_policy_names
from reference.blocks.policies import V1Policy
from reference.blocks.v1.hashing import hash_function_names

CONTEXTS = [4096, 16384, 65536, 131072]
MAX_MODEL_LEN = 131072
BIG_POOL = 100_001


def budget(examples: int, steps: int) -> tuple[int, int]:
    """(examples, steps) for a real-size property given the command's budget."""
    return max(2, examples // 50), min(steps, 25)


def long_prompt(unit: list[int], length: int) -> list[int]:
    """``unit`` repeated to exactly ``length`` tokens."""
    return (unit * (length // len(unit) + 1))[:length]


# -- V1 -----------------------------------------------------------------------------------------
@st.composite
def long_v1_configs(draw, policy: V1Policy, sliding: bool, peer: str | None = None) -> V1Config:
    block_size = draw(st.sampled_from([16, 32]))
    enable_caching = draw(st.sampled_from([True, True, False]))
    full = FULL
    if sliding:
        sw = V1Group("sliding", 512 + draw(st.integers(0, block_size - 1)))
        # The layouts the release's manager accepts (before 0.9.1: one group only).
        layouts = [g for g in ((sw,), (full, sw), (sw, full))
                   if v1.accepted_layout(g, block_size, enable_caching, policy)]
        groups = draw(st.sampled_from(layouts))
    else:
        groups = (full,)
    one_request = -(-MAX_MODEL_LEN // block_size) + 1
    per_group = draw(st.sampled_from([one_request, one_request + 7, BIG_POOL]))
    return V1Config(
        policy=policy,
        block_size=block_size,
        num_blocks=1 + per_group * len(groups),
        groups=groups,
        max_model_len=MAX_MODEL_LEN,
        enable_caching=enable_caching,
        hash_fn=draw(st.sampled_from(hash_function_names(policy))),
        pythonhashseed=None,
        entropy="5e" * 32,
        watermark=draw(st.sampled_from([0.0, 0.01])) if policy.watermark_supported else 0.0,
        # the engine's default 0 (only the window's tails before the reachable boundaries) or dense
        retention_interval=draw(st.sampled_from([None, 0]))
        if sliding and policy.retention_interval_supported else None,
        peer=peer,
    )


class V1LongContextMachine(v1.V1Machine):
    """The V1 machine with long prompts on large pools (same rules)."""

    @initialize(data=st.data())
    def setup(self, data) -> None:
        policy = policy_named(data.draw(st.sampled_from(self.policies))) if self.policies else v1.target_policy()
        sliding = data.draw(st.booleans(), label="sliding")
        self.config = data.draw(long_v1_configs(policy, sliding, self.peer), label="config")
        self.start(self.config)
        bs = self.config.block_size
        self.stems = []
        for _ in range(2):
            unit = data.draw(st.lists(st.sampled_from(v1.ALPHABET), min_size=bs, max_size=3 * bs), label="unit")
            length = data.draw(st.sampled_from(CONTEXTS), label="length") - data.draw(st.integers(0, 2), label="cut")
            self.stems.append(long_prompt(unit, length))


class V1LongContextPeer(V1LongContextMachine):
    """Reference against reference at real sizes (the machine itself, without vLLM)."""

    peer = "reference"
    policies = distinct_v1_policy_names()


# -- V0 -----------------------------------------------------------------------------------------
def long_v0_configs(enable_caching: bool, peer: str | None = None) -> st.SearchStrategy[V0Config]:
    def window(block_size):
        if enable_caching:
            return st.just(None)
        return st.one_of(st.none(), st.integers(0, block_size - 1).map(lambda r: 4096 + r))

    @st.composite
    def configs(draw) -> V0Config:
        block_size = draw(st.sampled_from([16, 32]))
        one_request = -(-MAX_MODEL_LEN // block_size) + 2
        return V0Config(
            policy=v0.target_policy(peer),
            block_size=block_size,
            num_gpu_blocks=draw(st.sampled_from([one_request, BIG_POOL])),
            num_cpu_blocks=draw(st.sampled_from([0, one_request])),
            watermark=draw(st.sampled_from([0.0, 0.01])),
            sliding_window=draw(window(block_size)),
            enable_caching=enable_caching,
            peer=peer,
        )

    return configs()


class V0LongContextMachine(v0.V0Machine):
    """The V0 machine with long prompts on large pools (same rules but for new_group); each
    example draws whether prefix caching is on, into its config."""

    max_fork_blocks = 512  # well under vLLM's recursive table copy's limit (v0.V0Machine)

    @initialize(data=st.data())
    def setup(self, data):
        caching = data.draw(st.booleans(), label="caching")
        self.config = data.draw(long_v0_configs(caching, self.peer), label="config")
        self.start(self.config)
        bs = self.config.block_size
        unit = data.draw(st.lists(st.sampled_from(v0.ALPHABET), min_size=bs, max_size=3 * bs), label="unit")
        self.prompts = [long_prompt(unit, n) for n in CONTEXTS]

    @precondition(lambda self: len(self.members) < 8)
    @rule(stem=st.integers(0, 1000), cut=st.sampled_from([0, 1, 15, 16, 17, 4095, 16385, MAX_MODEL_LEN]),
          suffix=st.lists(st.sampled_from(v0.ALPHABET), min_size=0, max_size=9), n=st.sampled_from([1, 1, 1, 2]))
    def new_group(self, stem, cut, suffix, n):
        """As the V0 machine's, with prompts cut from 4k-128k-token stems (at most 128k tokens)."""
        base = self.prompts[stem % len(self.prompts)]
        prompt = (base[:cut] + suffix)[:MAX_MODEL_LEN] or [0]
        self.add_group(prompt, n)


class V0LongContextPeer(V0LongContextMachine):
    """Reference against reference at real sizes (the machine itself, without vLLM)."""

    peer = "reference"


def _run(machine):
    def run(examples, steps, progress=None):
        return run_machine(machine, *budget(examples, steps), progress)
    return run


PROPERTIES = [
    Property(
        name="v1.long_context",
        checks=("the v1.lifecycle / v1.sliding_window comparison at real sizes: prompts of 4k-128k "
                "tokens (up to 8,192 blocks of 16 per request), pools of up to 100,001 blocks per "
                "group, windows of 512 + every residue of the block size, groups in every order, "
                "dense or (from 0.29.0) the engine's default sparse retention"),
        run=_run(V1LongContextMachine),
        needs="vLLM's V1 KVCacheManager",
    ),
    Property(
        name="v0.long_context",
        checks=("the v0.lifecycle / v0.prefix_caching comparison at real sizes: prompts of 4k-128k "
                "tokens (up to 8,192 blocks of 16 per sequence), GPU pools of up to 100,001 blocks, "
                "windows of 4096 + every residue of the block size"),
        run=_run(V0LongContextMachine),
        needs="vLLM 0.10.2 (vllm.core.block_manager.SelfAttnBlockSpaceManager)",
    ),
]
