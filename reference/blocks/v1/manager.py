"""The V1 KV-cache manager: the page manager the scheduler talks to.

A request's life, as the scheduler drives it:

1. ``add_request`` -- the prompt arrives; its full blocks are hashed at once (before vLLM 0.10.1,
   at the first ``get_computed_blocks`` and then as blocks are cached: ``hashes_on_request``).
2. ``get_computed_blocks`` -- look up the longest cached prefix. It is capped at
   ``num_tokens - 1`` tokens: even when the whole prompt is cached, the last token must be run
   through the model to produce logits, and since hits are whole blocks this may recompute a
   whole block.
3. ``allocate_slots`` -- adopt the hit (taking references on its blocks) and make room for the
   next ``num_new_tokens`` (a prefill *chunk*, or one decode token) plus optional lookahead
   slots for speculative tokens. Returns the newly allocated blocks, or None when the pool cannot
   supply them (the caller then preempts someone or waits). Full blocks among the computed
   tokens are registered in the prefix cache unless ``delay_cache_blocks`` asks to wait.
4. ``mark_computed`` -- the scheduler's side: those tokens now have KV.
5. ``append_token_ids`` -- a decode step produced tokens; new full blocks get hashed.
6. ``preempt`` (release everything, recompute later) or ``free`` (finished: release and forget).

Blocks are released tail first, so under LRU eviction a request's *last* blocks go first and
its shared prefix survives longest.

Every method validates its arguments before changing anything: a refused call raises a
:mod:`reference.blocks.errors` exception and leaves the manager exactly as it was. (vLLM itself
trusts its scheduler and checks almost nothing; the checks here guard the reference's callers.)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from reference.blocks.errors import DoubleFree, InvalidArgument, UnknownRequest
from reference.blocks.policies import V1Policy
from reference.blocks.v1.block import KVBlock
from reference.blocks.v1.block_pool import BlockPool
from reference.blocks.v1.cache_hit import longest_cache_hit
from reference.blocks.v1.hashing import BlockHasher, LoRAIdentity, derive_none_hash, hash_function
from reference.blocks.v1.request import RequestState, RequestStatus
from reference.blocks.v1.single_type import GroupManager, cdiv
from reference.blocks.v1.specs import FullAttention, GroupSpec, SlidingWindow, hybrid_layout_problem


@dataclass(frozen=True)
class ComputedBlocks:
    """A prefix-cache hit: per-group blocks (nulls for skipped window entries) and its length.

    Valid only until the manager next changes state: ``allocate_slots`` refuses a stale hit,
    because its blocks may have been evicted and reused in between.
    """

    request_id: str
    blocks: tuple[tuple[KVBlock, ...], ...]
    num_tokens: int
    stamp: int

    def block_ids(self) -> tuple[list[int], ...]:
        return tuple([b.block_id for b in group] for group in self.blocks)


def retention_interval_problem(interval: int | None, groups: Sequence[GroupSpec], policy: V1Policy) -> str | None:
    """Why vLLM would refuse this prefix-cache retention interval (None: it accepts it).

    None (dense) is always accepted. A release without the setting (``retention_interval_supported``)
    takes nothing else. A model without a sliding-window group accepts only 0; otherwise the
    interval must be a non-negative multiple of the block size (the scheduler's block size, equal
    here). (v0.33.0 vllm/v1/core/kv_cache_coordinator.py:33-62)
    """
    if interval is None:
        return None
    if not policy.retention_interval_supported:
        return f"vLLM {policy.name} has no prefix-cache retention interval"
    if not isinstance(interval, int) or isinstance(interval, bool):
        return f"the retention interval must be an int or None, got {interval!r}"
    if not any(isinstance(spec, SlidingWindow) for spec in groups):
        return None if interval == 0 else \
            f"retention interval {interval} set, but no group has a sliding window (only 0 is accepted)"
    block_size = groups[0].block_size
    if interval < 0 or interval % block_size:
        return f"retention interval {interval} must be a non-negative multiple of the block size {block_size}"
    return None


class KVCacheManager:
    """Page management for one model's KV cache: a block pool shared by one or more groups."""

    def __init__(
        self,
        groups: Sequence[GroupSpec],
        num_blocks: int,
        max_model_len: int,
        policy: V1Policy,
        *,
        enable_caching: bool = True,
        hash_fn: str = "sha256",
        pythonhashseed: str | None = None,
        entropy: Callable[[int], bytes] = os.urandom,
        watermark: float = 0.0,
        retention_interval: int | None = None,
        max_in_flight_tokens: int | None = None,
    ) -> None:
        if not isinstance(policy, V1Policy):
            raise InvalidArgument(f"policy must be a V1Policy (conformance.changelog.v1_policy_at computes any release's), got {policy!r}")
        if not groups:
            raise InvalidArgument("at least one KV-cache group is required")
        if len({spec.block_size for spec in groups}) != 1:
            raise InvalidArgument("all KV-cache groups must share one block size")
        if not isinstance(max_model_len, int) or max_model_len < 1:
            raise InvalidArgument(f"max_model_len must be a positive int, got {max_model_len!r}")
        if watermark < 0 or (watermark and not policy.watermark_supported):
            raise InvalidArgument(f"watermark {watermark!r} is not available under policy {policy.name}")
        retention = retention_interval_problem(retention_interval, groups, policy)
        if retention:
            raise InvalidArgument(retention)
        if max_in_flight_tokens is not None and not (
                policy.full_sequence_admission and _is_count(max_in_flight_tokens) and max_in_flight_tokens > 0):
            raise InvalidArgument(f"max_in_flight_tokens {max_in_flight_tokens!r} is not available under policy "
                                  f"{policy.name} (a positive int from 0.26.0)")
        layout = hybrid_layout_problem(groups, enable_caching, policy.hybrid_groups_any_layout,
                                       policy.hybrid_needs_distinct_specs,
                                       policy.hybrid_layout_checked_without_caching,
                                       policy.single_kv_cache_group)
        if layout:
            raise InvalidArgument(f"vLLM {policy.name} refuses these groups: {layout}")
        self.policy = policy
        self.block_size = groups[0].block_size
        self.max_model_len = max_model_len
        self.enable_caching = enable_caching
        self.pool = BlockPool(num_blocks, enable_caching, policy)
        if not policy.sliding_window_managed:
            # Before 0.8.3 the manager never reads its sliding_window: a window is full attention.
            groups = [FullAttention(g.block_size) if isinstance(g, SlidingWindow) else g for g in groups]
        # Tokens scheduled but not yet settled; without a value, max_model_len, so that the cap of
        # the whole-sequence admission check never binds (v0.33.0 vllm/v1/core/kv_cache_manager.py:155-156).
        in_flight = max_model_len if max_in_flight_tokens is None else max_in_flight_tokens
        self.groups = [GroupManager(spec, self.pool, i, enable_caching, _admission_cap(spec, in_flight, max_model_len))
                       for i, spec in enumerate(groups)]
        self.max_blocks_per_request = cdiv(max_model_len, self.block_size)
        fn = hash_function(hash_fn, policy)
        self.none_hash = derive_none_hash(fn, policy, pythonhashseed, entropy)
        self.hasher = BlockHasher(self.block_size, fn, self.none_hash, policy)
        self.watermark_blocks = int(watermark * num_blocks)
        self.retention_interval = retention_interval
        self.requests: dict[str, RequestState] = {}
        self._no_hit: tuple[tuple[KVBlock, ...], ...] = tuple(() for _ in self.groups)
        self._stamp = 0  # bumped by every accepted state change; dates ComputedBlocks

    # -- request registry ---------------------------------------------------------------------
    def add_request(
        self,
        request_id: str,
        prompt_token_ids: Sequence[int],
        *,
        cache_salt: str | None = None,
        lora: LoRAIdentity | None = None,
    ) -> RequestState:
        """Register a new request and hash its full prompt blocks (see ``hashes_on_request``)."""
        if not isinstance(request_id, str) or request_id in self.requests:
            raise InvalidArgument(f"request id {request_id!r} is not a new string id")
        tokens = self._check_tokens(prompt_token_ids, 0)
        if cache_salt is not None and not self.policy.cache_salt_supported:
            raise InvalidArgument(f"vLLM {self.policy.name} requests carry no cache salt")
        state = RequestState(request_id, tokens, len(tokens), cache_salt, lora)
        if self.policy.hashes_on_request:
            state.block_hashes = self.hasher.new_hashes([], tokens, cache_salt, lora)
        self._stamp += 1
        self.requests[request_id] = state
        return state

    def append_token_ids(self, request_id: str, token_ids: Sequence[int]) -> None:
        """A decode step produced ``token_ids``; hash any block they complete."""
        state = self._request(request_id)
        held = state.token_ids
        num_tokens = len(held)
        if state.status is not RequestStatus.RUNNING or state.num_computed_tokens != num_tokens:
            raise InvalidArgument(
                f"request {request_id!r} cannot take output tokens: {state.num_computed_tokens} of "
                f"{num_tokens} tokens computed, status {state.status.value}"
            )
        # One sampled token is the common case: checked without building a list or a set.
        if (type(token_ids) is list and len(token_ids) == 1 and type(token_ids[0]) is int and token_ids[0] >= 0
                and num_tokens < self.max_model_len):
            tokens = token_ids
        else:
            tokens = self._check_tokens(token_ids, num_tokens)
        self._stamp += 1
        held.extend(tokens)
        if not self.policy.hashes_on_request:  # hashed at the next lookup or caching instead
            return
        if len(held) >= (len(state.block_hashes) + 1) * self.block_size:  # a block completed
            state.block_hashes.extend(
                self.hasher.new_hashes(state.block_hashes, state.token_ids, state.cache_salt, state.lora)
            )

    # -- the allocation protocol --------------------------------------------------------------
    def get_computed_blocks(self, request_id: str) -> ComputedBlocks:
        """The longest cached prefix of the request, at most ``num_tokens - 1`` tokens (before vLLM
        0.8.3, ``lookup_leaves_last_token``, every token: the scheduler dropped the last block)."""
        state = self._request(request_id)
        if not self.enable_caching:
            state.shared_prefix_boundary = 0
            return ComputedBlocks(request_id, tuple(() for _ in self.groups), 0, self._stamp)
        if not self.policy.hashes_on_request and not state.block_hashes:
            # Before 0.10.1 the first lookup hashes every full block the request has by now; the
            # list is then only extended as blocks are cached (even if tokens arrive meanwhile).
            state.block_hashes = self.hasher.new_hashes([], state.token_ids, state.cache_salt, state.lora)
        limit = state.num_tokens - 1 if self.policy.lookup_leaves_last_token else state.num_tokens
        hit, length, uncached = longest_cache_hit(self.groups, state.block_hashes, limit)
        # The scheduler pins the end of a shared prefix some group did not cache yet, so that a
        # sparse-retention group caches the window's tail there (v0.33.0 vllm/v1/core/kv_cache_manager.py:318-328).
        state.shared_prefix_boundary = length + uncached if uncached else 0
        return ComputedBlocks(request_id, tuple(tuple(g) for g in hit), length, self._stamp)

    def allocate_slots(
        self,
        request_id: str,
        num_new_tokens: int,
        num_new_computed_tokens: int = 0,
        new_computed_blocks: ComputedBlocks | None = None,
        num_lookahead_tokens: int = 0,
        delay_cache_blocks: bool = False,
        has_scheduled_reqs: bool = True,
        full_sequence_must_fit: bool = False,
        num_in_flight_tokens: int = 0,
    ) -> tuple[list[KVBlock], ...] | None:
        """Adopt a hit and make room for ``num_new_tokens`` (+ lookahead) more tokens.

        Returns the newly allocated blocks per group, or None when the pool is too small (after
        having released the request's out-of-window pages, which happens either way), or, with
        ``full_sequence_must_fit``, when the request's whole current sequence would not fit
        (then before releasing anything). ``num_in_flight_tokens`` is the request's count of
        tokens in steps scheduled but not yet run (asynchronous scheduling); from 0.26.0 the
        pages those steps still read are kept (``V1Policy.frees_behind_in_flight_tokens``); the
        count may then exceed the computed tokens (a preempted request keeps it), and the release
        is at 0. Earlier policies release at the computed tokens whatever the count.
        """
        state = self._request(request_id)
        self._check_allocation(state, num_new_tokens, num_new_computed_tokens, new_computed_blocks, num_lookahead_tokens,
                               delay_cache_blocks, full_sequence_must_fit, num_in_flight_tokens)
        self._stamp += 1
        hit = new_computed_blocks.blocks if new_computed_blocks else self._no_hit
        num_local_computed = state.num_computed_tokens + num_new_computed_tokens
        total_computed = min(num_local_computed, self.max_model_len)
        needs_watermark = has_scheduled_reqs and state.status in (RequestStatus.WAITING, RequestStatus.PREEMPTED)
        watermark_blocks = self.watermark_blocks if needs_watermark else 0
        num_slots = min(total_computed + num_new_tokens + num_lookahead_tokens, self.max_model_len)
        if full_sequence_must_fit:
            whole = min(state.num_tokens, self.max_model_len)
            needed = sum(group.num_blocks_to_allocate(request_id, whole, group_hit, num_local_computed, capped=True)
                         for group, group_hit in zip(self.groups, hit))
            if needed + watermark_blocks > self.pool.num_free_blocks:
                return None

        # Release out-of-window pages first, so this allocation can reuse them. (v0.10.2 passes
        # request.num_computed_tokens here; it differs from total_computed only when a hit is
        # adopted, and then the table is still empty.) From 0.26.0 only the pages the step in
        # flight no longer reads go. The count may exceed the computed tokens: a preempted request
        # keeps it while its computed tokens go back to 0, so the position is clamped at 0
        #   v0.33.0 vllm/v1/core/sched/scheduler.py:1822, 1835
        processed = max(0, total_computed - num_in_flight_tokens) \
            if self.policy.frees_behind_in_flight_tokens else total_computed
        for group in self.groups:
            group.remove_skipped_blocks(request_id, processed)
        # Before 0.9.0 the admission check counts lookahead slots past max_model_len too
        # (lookahead_capped_at_admission); the blocks taken are capped either way.
        asked = num_slots if self.policy.lookahead_capped_at_admission else \
            total_computed + num_new_tokens + num_lookahead_tokens
        needed = 0
        for group, group_hit in zip(self.groups, hit):
            needed += group.num_blocks_to_allocate(request_id, asked, group_hit, num_local_computed)
        if needed + watermark_blocks > self.pool.num_free_blocks:
            return None
        if any(hit):
            for i, group in enumerate(self.groups):
                group.add_computed_blocks(request_id, hit[i], num_local_computed)
        # Before 0.8.5 an allocation that needs new blocks takes some more (preallocate_tokens),
        # one block fewer per whole block of lookahead slots.
        extra = max(0, cdiv(self.policy.preallocate_tokens, self.block_size)
                    - num_lookahead_tokens // self.block_size)
        new_blocks = tuple([group.allocate_new_blocks(request_id, num_slots, extra, self.max_blocks_per_request)
                            for group in self.groups])
        if delay_cache_blocks or not self.enable_caching:
            return new_blocks
        # Only tokens that exist are cached; lookahead slots hold unverified draft tokens.
        num_to_cache = min(total_computed + num_new_tokens, state.num_tokens)
        if not self.policy.hashes_on_request and len(state.block_hashes) < num_to_cache // self.block_size:
            # Before 0.10.1 caching hashes the blocks it caches that have no hash yet.
            state.block_hashes.extend(self.hasher.new_hashes(
                state.block_hashes, state.token_ids, state.cache_salt, state.lora, end=num_to_cache))
        boundaries = [state.num_prompt_tokens - 1]  # the replay boundary: a resent prompt's hit ends there
        if state.shared_prefix_boundary:
            boundaries.append(state.shared_prefix_boundary)
        for group in self.groups:
            group.cache_blocks(request_id, state.block_hashes, num_to_cache, self.retention_interval, boundaries)
        return new_blocks

    def mark_computed(self, request_id: str, num_tokens: int) -> None:
        """Record that ``num_tokens`` more tokens of the request now have KV (the scheduler's job)."""
        state = self._request(request_id)
        if not isinstance(num_tokens, int) or num_tokens < 0:
            raise InvalidArgument(f"num_tokens must be a non-negative int, got {num_tokens!r}")
        if state.num_computed_tokens + num_tokens > state.num_tokens:
            raise InvalidArgument(f"request {request_id!r} has only {state.num_tokens} tokens")
        self._stamp += 1
        state.num_computed_tokens += num_tokens
        state.status = RequestStatus.RUNNING

    # -- release ------------------------------------------------------------------------------
    def preempt(self, request_id: str) -> None:
        """Release all the request's blocks; it will be recomputed from scratch when re-admitted."""
        state = self._request(request_id)
        if state.status is RequestStatus.PREEMPTED:
            raise DoubleFree(f"request {request_id!r} is already preempted")
        if state.status is not RequestStatus.RUNNING:
            raise InvalidArgument(f"request {request_id!r} is {state.status.value}, not running")
        self._stamp += 1
        self._release(request_id)
        state.num_computed_tokens = 0
        state.status = RequestStatus.PREEMPTED

    def free(self, request_id: str) -> None:
        """The request finished: release its blocks and forget it."""
        self._request(request_id)
        self._stamp += 1
        self._release(request_id)
        del self.requests[request_id]

    def reset_prefix_cache(self) -> bool:
        """Forget every cached hash if no block is in use; return whether it happened."""
        self._stamp += 1
        return self.pool.reset_prefix_cache()

    def evict_blocks(self, block_ids: Iterable[int]) -> None:
        """Drop the given blocks from the prefix cache (vLLM 0.13.0 and later: :attr:`V1Policy.evict_blocks_supported`)."""
        ids = list(block_ids)
        if not self.policy.evict_blocks_supported:
            raise InvalidArgument(f"evict_blocks does not exist in vLLM {self.policy.name}")
        if not all(isinstance(i, int) and 0 <= i < self.pool.num_blocks for i in ids):
            raise InvalidArgument(f"block ids {ids!r} are not all inside the pool of {self.pool.num_blocks}")
        self._stamp += 1
        self.pool.evict_blocks(ids)

    # -- queries ------------------------------------------------------------------------------
    def block_ids(self, request_id: str) -> tuple[list[int], ...]:
        """The request's block table per group, as block ids (0 = null block)."""
        self._request(request_id)
        return tuple([b.block_id for b in group.blocks(request_id)] for group in self.groups)

    @property
    def usage(self) -> float:
        return self.pool.usage

    # -- internals ----------------------------------------------------------------------------
    def _request(self, request_id: str) -> RequestState:
        try:
            return self.requests[request_id]
        except (KeyError, TypeError):
            raise UnknownRequest(f"unknown request {request_id!r}") from None

    def _release(self, request_id: str) -> None:
        for group in self.groups:
            group.free(request_id)

    def _check_tokens(self, token_ids: Sequence[int], already: int) -> list[int]:
        tokens = list(token_ids) if isinstance(token_ids, (list, tuple)) else None
        if not tokens or not _are_token_ids(tokens):
            raise InvalidArgument(f"token ids must be a non-empty list of non-negative ints, got {token_ids!r}")
        if already + len(tokens) > self.max_model_len:
            raise InvalidArgument(f"{already + len(tokens)} tokens exceed max_model_len {self.max_model_len}")
        return tokens

    def _check_allocation(
        self,
        state: RequestState,
        num_new_tokens: int,
        num_new_computed_tokens: int,
        hit: ComputedBlocks | None,
        num_lookahead_tokens: int,
        delay_cache_blocks: bool = False,
        full_sequence_must_fit: bool = False,
        num_in_flight_tokens: int = 0,
    ) -> None:
        for name, value in (
            ("num_new_tokens", num_new_tokens),
            ("num_new_computed_tokens", num_new_computed_tokens),
            ("num_lookahead_tokens", num_lookahead_tokens),
            ("num_in_flight_tokens", num_in_flight_tokens),
        ):
            if not _is_count(value):
                raise InvalidArgument(f"{name} must be a non-negative int, got {value!r}")
        if hit is None:
            if num_new_computed_tokens:
                raise InvalidArgument("num_new_computed_tokens given without new_computed_blocks")
        else:
            if hit.request_id != state.request_id or hit.stamp != self._stamp:
                raise InvalidArgument("new_computed_blocks is stale or belongs to another request")
            if num_new_computed_tokens != hit.num_tokens:
                raise InvalidArgument(
                    f"num_new_computed_tokens {num_new_computed_tokens} != hit length {hit.num_tokens}"
                )
            if any(hit.blocks) and any(group.blocks(state.request_id) for group in self.groups):
                raise InvalidArgument(f"request {state.request_id!r} already holds blocks; it cannot adopt a hit")
        if num_lookahead_tokens and not self.policy.lookahead_supported:
            raise InvalidArgument(f"vLLM {self.policy.name}'s allocate_slots has no lookahead slots")
        if delay_cache_blocks and not self.policy.delay_cache_blocks_supported:
            raise InvalidArgument(f"vLLM {self.policy.name}'s allocate_slots has no delay_cache_blocks")
        if full_sequence_must_fit and not self.policy.full_sequence_admission:
            raise InvalidArgument(f"full_sequence_must_fit is not driven under policy {self.policy.name} (from 0.26.0; "
                                  "0.21.0-0.25.x take it with a cap counted from max_num_batched_tokens, "
                                  "0.19.0-0.20.x have can_fit_full_sequence instead, earlier releases no such check)")
        if num_new_tokens == 0 and not (self.policy.zero_token_hit_adoption and num_new_computed_tokens > 0):
            raise InvalidArgument("num_new_tokens must be positive (unless adopting a hit under v0.33.0)")
        end = state.num_computed_tokens + num_new_computed_tokens + num_new_tokens
        if end > state.num_tokens:
            raise InvalidArgument(f"allocating up to token {end} but request {state.request_id!r} has {state.num_tokens}")


def _admission_cap(spec: GroupSpec, in_flight: int, max_model_len: int) -> int | None:
    """The most blocks the whole-sequence admission check counts for one request of this group:
    a sliding window holds the window's last tokens plus the in-flight ones, and one more block
    since the window need not start at a block boundary (v0.33.0 vllm/v1/kv_cache_interface.py:918-944;
    vLLM also adds extra_retained_tokens, 0 without a multi-module MTP drafter, which the
    reference does not model)."""
    if not isinstance(spec, SlidingWindow):
        return None
    return cdiv(min(spec.window - 1 + in_flight, max_model_len), spec.block_size) + 1


def _is_count(value: object) -> bool:
    """A non-negative plain int (``type(...) is int`` also refuses bools, cheaply)."""
    return type(value) is int and value >= 0


def _are_token_ids(tokens: list) -> bool:
    """Every element a non-negative plain int; both checks run as C loops (the hot path)."""
    return set(map(type, tokens)) <= {int} and min(tokens) >= 0
