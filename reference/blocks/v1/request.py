"""What the page manager remembers about one request.

The manager needs a request's tokens (to hash full blocks), how many of them already have KV in
the cache (``num_computed_tokens``), its scheduling status (the watermark treats waiting and
preempted requests differently from running ones) and the request-level inputs to hashing: the
cache salt and the LoRA adapter. In vLLM these live on the scheduler's ``Request`` object; the
reference keeps them in this plain record so that callers pass only ids and token lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from reference.blocks.v1.hashing import LoRAIdentity


class RequestStatus(Enum):
    """The three scheduler states the page manager distinguishes."""

    WAITING = "waiting"  # admitted but never allocated
    RUNNING = "running"  # holds blocks, some tokens computed
    PREEMPTED = "preempted"  # blocks released, to be re-admitted from scratch


@dataclass
class RequestState:
    """One request's tokens, progress and hashing inputs."""

    request_id: str
    token_ids: list[int]
    num_prompt_tokens: int
    cache_salt: str | None = None
    lora: LoRAIdentity | None = None
    block_hashes: list[bytes] = field(default_factory=list)
    num_computed_tokens: int = 0
    status: RequestStatus = RequestStatus.WAITING
    # The end of the shared prefix the last lookup found cached in one group but not in all
    # (the hit plus the uncached shared prefix; 0 when there is none).
    shared_prefix_boundary: int = 0

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)
