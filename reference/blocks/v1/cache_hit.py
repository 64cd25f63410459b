"""The longest prefix-cache hit across all KV-cache groups of a model.

Each group can only reuse a prefix if *its* pages for that prefix are cached, and all groups
must agree on one hit length (the request resumes from a single position). With one group the
group's own answer is final. With several, vLLM's coordinator groups identical specs together
(they are looked up jointly: a hash must be cached in every member group), puts full attention
first, and iterates: each spec group either accepts the current candidate length or shrinks it,
until a pass changes nothing. Full attention is *downward closed* -- any shorter prefix of a hit
is a hit -- so it is searched once and afterwards merely truncated. A model with one
full-attention spec and one other spec needs a single pass.

Reproduces v0.33.0 ``UnitaryKVCacheCoordinator`` / ``HybridKVCacheCoordinator.find_longest_cache_hit``
(v0.33.0 vllm/v1/core/kv_cache_coordinator.py:582-600, 806-941) for equal block sizes and no EAGLE,
with its uncached shared prefix; for
the configurations v0.10.2 accepts (one full-attention spec plus one other spec, not
interleaved) its two-step search (kv_cache_coordinator.py HybridKVCacheCoordinator) gives the
same blocks and length.
"""

from __future__ import annotations

from collections.abc import Sequence

from reference.blocks.v1.block import KVBlock
from reference.blocks.v1.single_type import GroupManager, cdiv
from reference.blocks.v1.specs import FullAttention


def spec_groups(groups: Sequence[GroupManager]) -> list[list[int]]:
    """Group ids sharing one spec, full attention first, otherwise in first-seen order."""
    merged: dict[object, list[int]] = {}
    for manager in groups:
        merged.setdefault(manager.spec, []).append(manager.group_id)
    ordered = list(merged.items())
    ordered.sort(key=lambda item: not isinstance(item[0], FullAttention))
    return [ids for _, ids in ordered]


def longest_cache_hit(
    groups: Sequence[GroupManager], block_hashes: Sequence[bytes], max_length: int
) -> tuple[list[list[KVBlock]], int, int]:
    """Per-group hit blocks, the common hit length (at most ``max_length`` tokens) and the
    *uncached shared prefix*: how much longer than the common hit the longest single search was
    (0 with one group). A group with a sparse retention may lack blocks another group holds, and
    the request then pins that boundary (``RequestState.shared_prefix_boundary``)."""
    if len(groups) == 1:
        hit, length = groups[0].find_hit(block_hashes, max_length, [0])
        return hit, length, 0

    members = spec_groups(groups)
    simple_hybrid = len(members) == 2 and isinstance(groups[members[0][0]].spec, FullAttention)
    hit_blocks: list[list[KVBlock] | None] = [None] * len(groups)
    hit_lengths = [0] * len(groups)
    hit_length = max_length
    longest = 0  # the longest hit a search returned (a full-attention trim is not a search)
    while True:
        candidate = hit_length
        for ids in members:
            leader = groups[ids[0]]
            if isinstance(leader.spec, FullAttention) and hit_blocks[ids[0]] is not None:
                candidate = min(candidate, hit_lengths[ids[0]])
                continue
            blocks, candidate = leader.find_hit(block_hashes, candidate, ids)
            for group_id, group_blocks in zip(ids, blocks):
                hit_blocks[group_id] = group_blocks
                hit_lengths[group_id] = candidate
            longest = max(longest, candidate)
        if candidate >= hit_length:
            break
        hit_length = candidate
        if simple_hybrid:
            break

    for ids in members:
        leader = groups[ids[0]]
        if isinstance(leader.spec, FullAttention):
            keep = cdiv(hit_length, leader.block_size)
            for group_id in ids:
                del hit_blocks[group_id][keep:]  # type: ignore[union-attr]  # found above: a list
    return [blocks if blocks is not None else [] for blocks in hit_blocks], hit_length, longest - hit_length
