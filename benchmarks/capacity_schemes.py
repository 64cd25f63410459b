"""How much KV memory each allocation scheme holds for a request, in token slots.

The PagedAttention paper compares paging with three ways a pre-paging serving system (Orca) could
reserve KV memory when it admits a request:

* **max**: reserve the model's maximum sequence length, since the output length is unknown;
* **pow2**: reserve the next power of two at or above the request's true final length (the paper's
  model of an allocator that over-reserves by at most 2x);
* **oracle**: reserve exactly the final length, as if the output length were known in advance.

All three reserve one contiguous region at admission and keep it until the request finishes. The
regions are placed first-fit in one linear address space. Under pow2 and oracle, whose regions
differ in size, freed regions leave holes: a request whose reservation fits in the total free
memory but in no single hole must wait (external fragmentation), as it would with a real
contiguous allocator. Under max every region has the same size, so any freed region fits.
**paged** instead takes fixed-size blocks on demand as tokens arrive, through the reference V1
block manager, and wastes at most one partly filled block per request.
"""

from __future__ import annotations

from benchmarks.workload import Request
from conformance.changelog import v1_policy_at
from reference.blocks.v1.manager import KVCacheManager
from reference.blocks.v1.specs import FullAttention
from upstream.releases import V1_RELEASE

# The V1 policy of the pinned V1 release, computed by the change log.
V1_PINNED = v1_policy_at(V1_RELEASE)


class ReservationScheme:
    """Reserve a contiguous region per request at admission; free it when the request finishes."""

    def __init__(self, name: str, capacity: int, max_len: int):
        self.name, self.capacity, self.max_len = name, capacity, max_len
        self.held: dict[int, tuple[int, int]] = {}  # rid -> (start, length)
        self.holes: list[tuple[int, int]] = [(0, capacity)]  # free (start, length), by address

    def reservation(self, req: Request) -> int:
        if self.name == "max":
            return self.max_len
        if self.name == "pow2":
            return min(self.max_len, 1 << (req.total_len - 1).bit_length())
        if self.name == "oracle":
            return req.total_len
        raise ValueError(f"unknown reservation scheme {self.name!r}")

    def used(self) -> int:
        return sum(length for _, length in self.held.values())

    def admit(self, req: Request) -> bool:
        need = self.reservation(req)
        for i, (start, length) in enumerate(self.holes):  # first fit
            if length >= need:
                self.holes[i:i + 1] = [(start + need, length - need)] if length > need else []
                self.held[req.rid] = (start, need)
                return True
        return False

    def grow(self, req: Request, num_tokens: int) -> bool:
        return num_tokens <= self.held[req.rid][1]  # the reservation covers the whole request

    def release(self, req: Request) -> None:
        start, length = self.held.pop(req.rid)
        holes = sorted(self.holes + [(start, length)])
        merged = [holes[0]]
        for s, n in holes[1:]:  # coalesce neighbours
            ps, pn = merged[-1]
            merged[-1:] = [(ps, pn + n)] if ps + pn == s else [(ps, pn), (s, n)]
        self.holes = merged


class PagedScheme:
    """Blocks of ``block_size`` slots taken on demand from the reference V1 block manager.

    The simulator drives the manager the way vLLM's scheduler does: ``allocate_slots`` for the
    prompt at admission, then, for each generated token, ``append_token_ids``, ``allocate_slots``
    for one more slot and ``mark_computed``; ``free`` when the request is done or preempted.
    """

    def __init__(self, capacity: int, block_size: int, max_len: int = 2048):
        self.name = f"paged-{block_size}"
        self.block_size = block_size
        num_blocks = capacity // block_size
        # +1: block 0 is the null block, never handed out, as in vLLM.
        self.manager = KVCacheManager([FullAttention(block_size)], num_blocks + 1, max_len + 1,
                                      V1_PINNED, enable_caching=False)
        self.capacity = num_blocks * block_size
        self.tokens: dict[int, int] = {}  # rid -> slots allocated so far

    def used(self) -> int:
        return (self.manager.pool.num_blocks - 1 - self.manager.pool.num_free_blocks) * self.block_size

    def admit(self, req: Request) -> bool:
        rid = str(req.rid)
        if rid not in self.manager.requests:
            self.manager.add_request(rid, [0] * req.prompt_len)  # contents do not matter here
        if self.manager.allocate_slots(rid, req.prompt_len) is None:
            self.manager.free(rid)
            return False
        self.manager.mark_computed(rid, req.prompt_len)
        self.tokens[req.rid] = req.prompt_len
        return True

    def grow(self, req: Request, num_tokens: int) -> bool:
        rid = str(req.rid)
        state = self.manager.requests[rid]
        if num_tokens > state.num_tokens:  # the new token exists even if no slot is found for it
            self.manager.append_token_ids(rid, [0] * (num_tokens - state.num_tokens))
        missing = num_tokens - state.num_computed_tokens
        if missing <= 0:
            return True
        if self.manager.allocate_slots(rid, missing) is None:
            return False  # the caller preempts someone and asks again
        self.manager.mark_computed(rid, missing)
        self.tokens[req.rid] = num_tokens
        return True

    def release(self, req: Request) -> None:
        self.manager.free(str(req.rid))
        self.tokens.pop(req.rid, None)
