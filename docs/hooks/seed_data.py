"""The data behind the seed demo's figures, computed by the reference implementation.

Two experiments, both small enough to draw:

* :func:`placement_demo` stores a 5-token sequence in a paged KV cache (blocks of 4 tokens)
  under a given block table and runs the reference's plain-PyTorch decode oracle over it. The
  point of the seed demo is that *where* the blocks live does not change the answer.
* :func:`workload_stages` drives the reference V0 block manager through a shared prefix, a
  fork with copy-on-write, freeing, and an allocation that must evict, and records the manager's
  own state after every step. Nothing in the pictures is drawn by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from conformance.adapters.reference_v0 import snapshot
from reference.attention.layouts import new_classic_cache
from reference.attention.oracle import paged_decode_oracle, write_sequences_classic
from reference.blocks.v0.manager import BlockSpaceManager
from reference.blocks.v0.sequence_view import SeqView

DEMO_BLOCK_SIZE = 4
DEMO_NUM_BLOCKS = 8
DEMO_HEAD_SIZE = 4  # fp32 classic layout packs 4 elements per 16-byte vector


@dataclass(frozen=True)
class PlacementResult:
    """Decode attention of one sequence stored under ``table``, at two lengths."""

    table: list[int]
    values: list[float]  # the value of token t in every dimension
    output_by_length: dict[int, float]  # sequence length -> attention output (every dimension)


def placement_demo(table: list[int], lengths: tuple[int, ...] = (4, 5)) -> PlacementResult:
    """Attention of the last token over the first ``n`` tokens, for each ``n`` in ``lengths``.

    Every key is the same vector and the query points along it, so all scores tie, the softmax
    is uniform and the output is the plain average of the values 1, 2, ..., n. Keys and values
    are written into the cache through ``table`` (logical block ``i`` -> physical ``table[i]``)
    and read back by the oracle through the same table.
    """
    longest = max(lengths)
    if len(table) * DEMO_BLOCK_SIZE < longest:
        raise ValueError(f"table {table} holds {len(table) * DEMO_BLOCK_SIZE} tokens, need {longest}")
    if len(set(table)) != len(table) or not all(0 <= b < DEMO_NUM_BLOCKS for b in table):
        raise ValueError(f"table {table} must name distinct blocks in 0..{DEMO_NUM_BLOCKS - 1}")
    values = [float(t + 1) for t in range(longest)]
    keys = torch.zeros(longest, 1, DEMO_HEAD_SIZE)
    keys[:, 0, 0] = 1.0
    vals = torch.tensor(values).reshape(longest, 1, 1).expand(longest, 1, DEMO_HEAD_SIZE).contiguous()
    outputs: dict[int, float] = {}
    for n in lengths:
        key_cache, value_cache = new_classic_cache(DEMO_NUM_BLOCKS, 1, DEMO_HEAD_SIZE, DEMO_BLOCK_SIZE,
                                                   torch.float32)
        tables = torch.tensor([table], dtype=torch.int32)
        write_sequences_classic([keys[:n]], [vals[:n]], key_cache, value_cache, tables)
        query = torch.zeros(1, 1, DEMO_HEAD_SIZE)
        query[0, 0, 0] = 1.0
        out = paged_decode_oracle(query, key_cache, value_cache, tables,
                                  torch.tensor([n], dtype=torch.int32), scale=DEMO_HEAD_SIZE ** -0.5)
        outputs[n] = float(out[0, 0, 0])
    return PlacementResult(list(table), values, outputs)


@dataclass(frozen=True)
class Stage:
    """The block manager's state after one step of the workload."""

    caption: str
    tables: dict[str, list[int]]  # sequence label -> physical block ids, logical order
    tokens: dict[str, list[list[int]]]  # sequence label -> token ids per logical block
    refcounts: dict[int, int]  # physical block -> number of tables holding it
    cached: set[int]  # blocks whose content hash is registered (prefix cache)
    evictable: list[int]  # cached blocks no table holds (reusable by hash, or evicted)
    free: list[int]  # blocks holding nothing
    cow: list[tuple[int, int]] = field(default_factory=list)  # (source, copy) pairs of this step
    evicted: list[int] = field(default_factory=list)  # cached blocks reused for other content


WORKLOAD_BLOCKS = 8
PREFIX = (11, 12, 13, 14, 15, 16, 17, 18)  # an 8-token shared prompt prefix: two full blocks


def _stage(m: BlockSpaceManager, labels: dict[int, str], caption: str, **extra) -> Stage:
    snap = snapshot(m)
    gpu = snap["gpu"]
    live = {int(seq): ids for seq, ids in snap["tables"].items()}
    return Stage(
        caption=caption,
        tables={labels[s]: list(ids) for s, ids in sorted(live.items())},
        tokens={labels[int(s)]: toks for s, toks in sorted(snap["tokens"].items(), key=lambda kv: int(kv[0]))},
        refcounts={int(b): c for b, c in gpu["refcounts"].items()},
        cached={int(b) for _, b in gpu["cached"]},
        evictable=[int(p[0]) for p in gpu["evictor"]["parked"]],
        free=[int(b) for b in gpu["free"]],
        **extra,
    )


def workload_stages() -> list[Stage]:
    """Run the shared-prefix / fork / copy-on-write / evict workload on the V0 manager."""
    m = BlockSpaceManager(block_size=DEMO_BLOCK_SIZE, num_gpu_blocks=WORKLOAD_BLOCKS, num_cpu_blocks=0,
                          watermark=0.0, enable_caching=True)
    labels = {1: "A", 2: "B", 3: "A′", 4: "C"}
    stages: list[Stage] = []

    a = SeqView(1, PREFIX + (21, 22))
    m.allocate([a])
    m.get_num_cached_tokens(a)
    m.mark_blocks_as_computed()
    stages.append(_stage(m, labels, "A's 10-token prompt takes three blocks; its two full blocks are hashed."))

    b = SeqView(2, PREFIX + (31, 32))
    m.allocate([b])
    m.get_num_cached_tokens(b)
    stages.append(_stage(m, labels, "B has the same 8-token prefix: its first two blocks are A's, by hash."))

    m.fork(1, 3)
    child = SeqView(3, PREFIX + (21, 22, 41), num_computed_tokens=10, is_prefill=False)
    cow = m.append_slots(child, 0)
    m.get_num_cached_tokens(child)
    stages.append(_stage(m, labels, "A′ forks from A and appends a token: the shared partial block is copied.",
                         cow=list(cow)))

    for seq, now in ((1, 1.0), (2, 2.0), (3, 3.0)):
        m.access_all_blocks_in_seq(seq, now)
    for seq in (1, 2, 3):
        m.free(seq)
    stages.append(_stage(m, labels, "All three finish: full blocks stay cached (evictable), the rest are free."))

    before = _stage(m, labels, "")
    c = SeqView(4, tuple(range(100, 100 + 7 * DEMO_BLOCK_SIZE)))
    m.allocate([c])
    m.get_num_cached_tokens(c)
    after = _stage(m, labels, "")
    evicted = [blk for blk in before.evictable if blk not in after.evictable]
    stages.append(_stage(m, labels, "C needs seven blocks: the free ones, then one evicted from the cache.",
                         evicted=evicted))
    return stages
