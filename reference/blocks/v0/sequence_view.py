"""What the page manager needs to know about a sequence, as plain data.

vLLM passes its rich ``Sequence`` objects to the block manager, which reads only a handful of
fields from them. The reference takes exactly those fields, so that a test can describe a sequence
in one line and no model-serving machinery is needed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class SeqView:
    """One sequence as the manager sees it.

    ``token_ids`` are all tokens (prompt then output); ``num_computed_tokens`` is how many of them
    the model has processed (it drives the sliding-window page dropping); ``is_prefill`` is true
    until every token has been computed once; ``extra_hash`` folds e.g. a LoRA id into page hashes.
    """

    seq_id: int
    token_ids: tuple[int, ...] = field(default_factory=tuple)
    num_computed_tokens: int = 0
    is_prefill: bool = True
    extra_hash: Optional[int] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "token_ids", tuple(self.token_ids))
