"""What the page manager needs to know about a sequence, as plain data.

vLLM passes its rich ``Sequence`` objects to the block manager, which reads only a handful of
fields from them. The reference takes exactly those fields, so that a test can describe a sequence
in one line and no model-serving machinery is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class SeqView:
    """One sequence as the manager sees it.

    ``token_ids`` are all tokens (prompt then output); ``num_computed_tokens`` is how many of them
    the model has processed (it drives the sliding-window page dropping); ``is_prefill`` is true
    until every token has been computed once; ``extra_hash`` folds e.g. a LoRA id into page hashes.

    ``token_ids`` may be any sequence of ints and is used as given, not copied: the manager
    reads it only during the call it is passed to and keeps nothing of it but what it hashed.
    A caller can therefore keep one growing list per sequence, append each sampled token to it
    (as vLLM's ``Sequence.append_token_id`` does) and pass a new view of the same list each step,
    which costs the same at any context length. The list must only grow while the manager knows
    the sequence; a shorter one is refused.
    """

    seq_id: int
    token_ids: Sequence[int] = ()
    num_computed_tokens: int = 0
    is_prefill: bool = True
    extra_hash: Optional[int] = None
