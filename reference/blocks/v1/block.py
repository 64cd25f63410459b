"""The metadata of one KV-cache page (a *block*), as the V1 page manager sees it.

A block is a fixed slot in GPU memory able to hold ``block_size`` tokens' keys and values. The
manager never touches the memory; it only keeps, per block:

* ``ref_cnt`` -- how many request block tables currently point at the block. A block with
  ``ref_cnt == 0`` sits in the free queue and may be handed out (and its cached content lost).
* ``block_hash`` -- set once the block is *full* and registered in the prefix cache; it is the
  chained content hash of the tokens up to and including this block, with the KV-cache group id
  appended (the ``BlockHashWithGroupId`` key). A freed block keeps its hash, so a later request
  with the same prefix can revive it; the hash is dropped only when the block is reused
  (evicted) or the cache is reset.
* ``is_null`` -- block 0 is the *null block*, a placeholder written into block tables where a
  sliding-window layer no longer needs a page. It is never handed out and never queued.

``prev_free`` / ``next_free`` are the links of the intrusive doubly linked free queue
(:mod:`reference.blocks.v1.free_queue`); nothing else may change them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False, slots=True)
class KVBlock:
    """One page's bookkeeping: id, reference count, prefix-cache key and free-queue links."""

    block_id: int
    ref_cnt: int = 0
    block_hash: Any = None  # bytes, or an IntBlockHashWithGroup before vLLM 0.10.2
    is_null: bool = False
    prev_free: KVBlock | None = field(default=None, repr=False)
    next_free: KVBlock | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        tag = " null" if self.is_null else ""
        key = self.block_hash
        while isinstance(key, tuple):  # an int hash (with its group id) before vLLM 0.10.2
            key = key[0]
        digest = None if key is None else key.hex()[:8] if isinstance(key, bytes) else f"{key:x}"[:8]
        return f"KVBlock({self.block_id}{tag}, ref={self.ref_cnt}, hash={digest})"
