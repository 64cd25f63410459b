"""Test helpers: a deep, comparable copy of a reference V1 manager's whole state, and builders."""

from __future__ import annotations

from reference.blocks.policies import V1Policy
from reference.blocks.v1.manager import KVCacheManager
from reference.blocks.v1.specs import FullAttention, SlidingWindow


def deep_state(m: KVCacheManager) -> dict:
    """Everything a manager holds, as plain values (so before/after copies can be compared)."""
    pool = m.pool
    return {
        "blocks": [(b.block_id, b.ref_cnt, b.block_hash, b.is_null) for b in pool.blocks],
        "queue": pool.free_queue.block_ids(),
        "queue_len": len(pool.free_queue),
        "cached": {key: list(holders) for key, holders in pool.cached.items()},
        "tables": [{r: [b.block_id for b in t] for r, t in g.req_to_blocks.items()} for g in m.groups],
        "num_cached": [dict(g.num_cached_block) for g in m.groups],
        "requests": {
            r: (list(s.token_ids), s.num_prompt_tokens, list(s.block_hashes), s.num_computed_tokens,
                s.status, s.cache_salt, s.lora)
            for r, s in m.requests.items()
        },
        "stamp": m._stamp,
    }


def full_manager(policy: V1Policy, num_blocks: int = 11, block_size: int = 4, **kw) -> KVCacheManager:
    kw.setdefault("pythonhashseed", "0")
    return KVCacheManager([FullAttention(block_size)], num_blocks, 256, policy, **kw)


def sliding_manager(policy: V1Policy, window: int, num_blocks: int = 11, block_size: int = 2,
                    with_full: bool = False) -> KVCacheManager:
    groups = ([FullAttention(block_size)] if with_full else []) + [SlidingWindow(block_size, window)]
    return KVCacheManager(groups, num_blocks, 256, policy, pythonhashseed="0")


def prefill(m: KVCacheManager, req: str, tokens: list[int], chunk: int | None = None, **kw) -> int:
    """Admit ``req`` with its prefix hit and compute all its tokens; return the hit length."""
    m.add_request(req, tokens, **kw)
    hit = m.get_computed_blocks(req)
    left = len(tokens) - hit.num_tokens
    first = min(left, chunk or left)
    assert m.allocate_slots(req, first, hit.num_tokens, hit) is not None
    m.mark_computed(req, hit.num_tokens + first)
    left -= first
    while left:
        step = min(left, chunk or left)
        assert m.allocate_slots(req, step) is not None
        m.mark_computed(req, step)
        left -= step
    return hit.num_tokens
