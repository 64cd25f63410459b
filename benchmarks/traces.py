"""Seeded operation traces for the block-manager benchmark.

A benchmark that compares two page managers must give both *exactly* the same work. The work is
written down once, ahead of time, as a flat list of manager calls (a *trace*); both sides then
replay it. Writing it down needs the answers to some calls, though: whether an allocation
succeeded decides whether the scheduler preempts someone, and how long a prefix-cache hit was
decides how many tokens the next prefill chunk covers. So a trace is *recorded*: a small
scheduler (the shape of vLLM's V1 scheduler loop, stripped to what touches pages) serves a seeded
workload against the reference manager, and every call it makes is appended to the trace together
with the outcome it saw. A replay that sees a different outcome has diverged, and the benchmark
says so instead of timing different work.

The scheduler, once per step: (1) optional churn -- abort or preempt a random running request;
(2) give each running request its next chunk (a prefill piece or one decode token) from a token
budget, preempting the most recently admitted request when the pool cannot supply blocks, as vLLM
does; (3) if nothing was preempted, admit waiting requests first come first served, each starting
with a prefix-cache lookup; (4) every request whose tokens are all computed samples one token,
and finishes (is freed) after its output length.

Five workloads exercise different paths: shared system prompts (prefix hits), chunked prefill of
long prompts, decode-heavy batches, abort/preemption churn, and a pool too small for the load
(eviction of cached blocks and failed allocations). A ``Workload`` is policy-independent; the
recorded ``Trace`` depends on the policy, because the free-queue order (a policy field) decides
which cached blocks survive and hence how long later hits are.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

from reference.blocks.policies import V1Policy
from reference.blocks.v1.hashing import hash_function_names
from reference.blocks.v1.manager import KVCacheManager
from reference.blocks.v1.specs import FullAttention

# Op codes: the first element of every op tuple.
SCHEDULE = 0  # (SCHEDULE, request index, num_new_tokens, with_lookup, expected_ok)
APPEND = 1  # (APPEND, request index, [token ids])
FREE = 2  # (FREE, request index)
PREEMPT = 3  # (PREEMPT, request index)
OP_NAMES = {SCHEDULE: "schedule", APPEND: "append", FREE: "free", PREEMPT: "preempt"}

VOCAB = 32000
ENTROPY = bytes.fromhex("5e" * 32)  # the conformance adapters' default stand-in for os.urandom(32)


@dataclass(frozen=True)
class Workload:
    """A seeded request stream plus the scheduler limits and pool size it is served with."""

    name: str
    prompts: tuple[tuple[int, ...], ...]
    output_lens: tuple[int, ...]
    chunk_sizes: tuple[int, ...]  # per request: the largest prefill piece per step
    num_blocks: int
    block_size: int = 16
    max_model_len: int = 8192
    max_num_seqs: int = 64
    token_budget: int = 4096
    abort_prob: float = 0.0  # per step: abort (free) one random running request
    preempt_prob: float = 0.0  # per step: preempt one random running request
    seed: int = 0


@dataclass(frozen=True)
class Trace:
    """A recorded call sequence: the ops, the prompts they refer to, and the pool they need."""

    name: str
    prompts: tuple[tuple[int, ...], ...]
    ops: tuple[tuple, ...]
    num_blocks: int
    block_size: int
    max_model_len: int
    policy_name: str
    counts: dict[str, int] = field(default_factory=dict)

    def request_id(self, index: int) -> str:
        return f"req-{index}"


# -- workloads ----------------------------------------------------------------------------------
def _tokens(rng: random.Random, n: int) -> list[int]:
    return rng.choices(range(1, VOCAB), k=n)


def _prefixed(rng: random.Random, n: int, prefixes: list[list[int]], suffix: tuple[int, int]) -> tuple:
    prompts = []
    for _ in range(n):
        prompts.append(tuple(rng.choice(prefixes) + _tokens(rng, rng.randint(*suffix))))
    return tuple(prompts)


def shared_prefix(n: int, seed: int = 0) -> Workload:
    """Eight system prompts shared by all requests: most prompt blocks are prefix-cache hits."""
    rng = random.Random(f"shared_prefix:{seed}")
    prefixes = [_tokens(rng, rng.randint(128, 512)) for _ in range(8)]
    return Workload(
        "shared_prefix", _prefixed(rng, n, prefixes, (16, 128)),
        tuple(rng.randint(8, 32) for _ in range(n)), (4096,) * n,
        num_blocks=8192, max_num_seqs=64, seed=seed,
    )


def chunked_prefill(n: int, seed: int = 0) -> Workload:
    """Long unique prompts computed in chunks of 256-512 tokens, a few output tokens each."""
    rng = random.Random(f"chunked_prefill:{seed}")
    prompts = tuple(tuple(_tokens(rng, rng.randint(768, 1536))) for _ in range(n))
    return Workload(
        "chunked_prefill", prompts, tuple(rng.randint(4, 16) for _ in range(n)),
        tuple(rng.randint(256, 512) for _ in range(n)),
        num_blocks=4096, max_num_seqs=16, token_budget=2048, seed=seed,
    )


def decode_heavy(n: int, seed: int = 0) -> Workload:
    """Short prompts, nearly all prefilled in one step, then 16-48 sampled tokens: almost every call
    is a one-token step."""
    rng = random.Random(f"decode_heavy:{seed}")
    prompts = tuple(tuple(_tokens(rng, rng.randint(16, 96))) for _ in range(n))
    return Workload(
        "decode_heavy", prompts, tuple(rng.randint(16, 48) for _ in range(n)), (4096,) * n,
        num_blocks=4096, max_num_seqs=128, seed=seed,
    )


def churn(n: int, seed: int = 0) -> Workload:
    """Aborts and preemptions at random; re-admitted requests hit their own cached blocks."""
    rng = random.Random(f"churn:{seed}")
    prefixes = [_tokens(rng, rng.randint(128, 384)) for _ in range(4)]
    return Workload(
        "churn", _prefixed(rng, n, prefixes, (16, 128)), tuple(rng.randint(8, 32) for _ in range(n)),
        (4096,) * n, num_blocks=4096, max_num_seqs=48, abort_prob=0.05, preempt_prob=0.1, seed=seed,
    )


def tight_pool(n: int, seed: int = 0) -> Workload:
    """A pool of 256 blocks for 32 concurrent requests: evictions, failed allocations, preemption."""
    rng = random.Random(f"tight_pool:{seed}")
    prefixes = [_tokens(rng, rng.randint(64, 256)) for _ in range(16)]
    return Workload(
        "tight_pool", _prefixed(rng, n, prefixes, (32, 256)), tuple(rng.randint(8, 32) for _ in range(n)),
        (4096,) * n, num_blocks=256, max_num_seqs=32, seed=seed,
    )


WORKLOADS = {w.__name__: w for w in (shared_prefix, chunked_prefill, decode_heavy, churn, tight_pool)}


def make_workload(name: str, n: int, seed: int = 0) -> Workload:
    """The named workload with ``n`` requests."""
    if name not in WORKLOADS:
        raise ValueError(f"unknown trace {name!r}; choose from {sorted(WORKLOADS)}")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of requests must be a positive int, got {n!r}")
    return WORKLOADS[name](n, seed)


# -- recording ----------------------------------------------------------------------------------
@dataclass
class _Live:
    """The recorder's view of one request: progress the scheduler tracks."""

    index: int
    num_tokens: int
    output_len: int
    chunk: int
    computed: int = 0
    outputs: int = 0


class _Recorder:
    """Serves a workload against a reference manager and writes down every call and outcome."""

    def __init__(self, workload: Workload, policy: V1Policy) -> None:
        self.w = workload
        self.manager = reference_manager(workload.num_blocks, workload.block_size, workload.max_model_len, policy)
        self.rng = random.Random(f"scheduler:{workload.seed}")
        self.ops: list[tuple] = []
        self.waiting: deque[_Live] = deque()
        self.running: list[_Live] = []

    def run(self) -> list[tuple]:
        w, m = self.w, self.manager
        for i, prompt in enumerate(w.prompts):
            m.add_request(f"req-{i}", list(prompt))
            self.waiting.append(_Live(i, len(prompt), w.output_lens[i], w.chunk_sizes[i]))
        while self.waiting or self.running:
            self._churn()
            budget, scheduled, preempted = self._schedule_running()
            if not preempted:
                self._admit(budget, scheduled)
            self._sample(scheduled)
        return self.ops

    def _churn(self) -> None:
        if self.running and self.rng.random() < self.w.abort_prob:
            victim = self.running.pop(self.rng.randrange(len(self.running)))
            self._free(victim)
        if self.running and self.rng.random() < self.w.preempt_prob:
            self._preempt(self.running.pop(self.rng.randrange(len(self.running))))

    def _schedule_running(self) -> tuple[int, list[tuple[_Live, int]], bool]:
        budget, scheduled, preempted = self.w.token_budget, [], False
        index = 0
        while index < len(self.running) and budget > 0:
            req = self.running[index]
            n = min(req.num_tokens - req.computed, req.chunk, budget)
            while True:
                ok = self.manager.allocate_slots(f"req-{req.index}", n) is not None
                self.ops.append((SCHEDULE, req.index, n, False, ok))
                if ok:
                    break
                victim = self.running.pop()  # the most recently admitted request yields
                self._preempt(victim)
                preempted = True
                if victim is req:
                    break
            if not ok:
                break
            self.manager.mark_computed(f"req-{req.index}", n)
            req.computed += n
            scheduled.append((req, n))
            budget -= n
            index += 1
        return budget, scheduled, preempted

    def _admit(self, budget: int, scheduled: list[tuple[_Live, int]]) -> None:
        while self.waiting and len(self.running) < self.w.max_num_seqs and budget > 0:
            req = self.waiting[0]
            rid = f"req-{req.index}"
            hit = self.manager.get_computed_blocks(rid)
            n = min(req.num_tokens - hit.num_tokens, req.chunk, budget)
            ok = self.manager.allocate_slots(rid, n, hit.num_tokens, hit) is not None
            self.ops.append((SCHEDULE, req.index, n, True, ok))
            if not ok:
                return
            self.manager.mark_computed(rid, hit.num_tokens + n)
            req.computed = hit.num_tokens + n
            self.waiting.popleft()
            self.running.append(req)
            scheduled.append((req, n))
            budget -= n

    def _sample(self, scheduled: list[tuple[_Live, int]]) -> None:
        for req, _ in scheduled:
            if req.computed < req.num_tokens:
                continue
            token = [self.rng.randrange(1, VOCAB)]
            self.manager.append_token_ids(f"req-{req.index}", token)
            self.ops.append((APPEND, req.index, token))
            req.num_tokens += 1
            req.outputs += 1
            if req.outputs >= req.output_len:
                self.running.remove(req)
                self._free(req)

    def _free(self, req: _Live) -> None:
        self.manager.free(f"req-{req.index}")
        self.ops.append((FREE, req.index))

    def _preempt(self, req: _Live) -> None:
        self.manager.preempt(f"req-{req.index}")
        self.ops.append((PREEMPT, req.index))
        req.computed = 0
        self.waiting.appendleft(req)


def benchmark_hash_fn(policy: V1Policy) -> str:
    """The block hash both sides use: vLLM's ``sha256`` where the release offers it (from 0.8.3),
    else its only one, Python's builtin ``hash``."""
    offered = hash_function_names(policy)
    return "sha256" if "sha256" in offered else offered[0]


def reference_manager(num_blocks: int, block_size: int, max_model_len: int, policy: V1Policy) -> KVCacheManager:
    """The reference manager the benchmark and the recorder use: one full-attention group."""
    return KVCacheManager(
        [FullAttention(block_size)], num_blocks, max_model_len, policy,
        hash_fn=benchmark_hash_fn(policy), pythonhashseed=None, entropy=lambda n: ENTROPY[:n],
    )


def record_trace(workload: Workload, policy: V1Policy) -> Trace:
    """Serve ``workload`` against the reference under ``policy`` and return the recorded trace."""
    for prompt, out in zip(workload.prompts, workload.output_lens):
        if len(prompt) + out > workload.max_model_len:
            raise ValueError(f"a request of {len(prompt)} + {out} tokens exceeds max_model_len")
        if -(-(len(prompt) + out) // workload.block_size) > workload.num_blocks - 1:
            raise ValueError(f"a request of {len(prompt) + out} tokens cannot fit the pool on its own")
    ops = _Recorder(workload, policy).run()
    counts = {name: 0 for name in OP_NAMES.values()}
    for op in ops:
        counts[OP_NAMES[op[0]]] += 1
    counts["failed_allocations"] = sum(1 for op in ops if op[0] == SCHEDULE and not op[4])
    return Trace(workload.name, workload.prompts, tuple(ops), workload.num_blocks, workload.block_size,
                 workload.max_model_len, policy.name, counts)


def make_trace(name: str, n: int, policy: V1Policy, seed: int = 0) -> Trace:
    """Generate the named workload with ``n`` requests and record it under ``policy``."""
    return record_trace(make_workload(name, n, seed), policy)
