"""A V0 page hashes after any object that offers vLLM's ``Block`` interface, as vLLM's does."""

from __future__ import annotations

import random
from unittest.mock import MagicMock

import pytest

from reference.blocks.v0.block import Block
from reference.blocks.v0.content_hash import NONE_HASH, hash_block_tokens

# The members of vLLM 0.10.2's ``Block`` interface (vllm/core/block/interfaces.py), what
# ``MagicMock(spec=PrefixCachingBlock)`` offers in vLLM's own tests.
BLOCK_INTERFACE = ["append_token_ids", "block_id", "token_ids", "num_tokens_total", "num_empty_slots",
                   "is_full", "prev_block", "extra_hash", "computed", "last_accessed", "content_hash"]


class StandIn:
    """A previous page that is nothing but the two members a page asks of it."""

    def __init__(self, content_hash, num_tokens_total: int) -> None:
        self.content_hash = content_hash
        self.num_tokens_total = num_tokens_total


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("block_size", [1, 16])
@pytest.mark.parametrize("is_curr_block_full", [True, False])
@pytest.mark.parametrize("prev_block_has_hash", [True, False])
@pytest.mark.parametrize("make_prev", ["stand_in", "mock"])
def test_nth_block_hashes_after_any_block(seed, block_size, is_curr_block_full, prev_block_has_hash, make_prev):
    """Catches: a page that asks its previous page for the reference's own attributes (``hashing``,
    ``_hash``) and so cannot follow an object that offers only vLLM's ``Block`` interface, as
    vLLM's test_nth_block_has_correct_content_hash builds one (AttributeError, or a MagicMock
    attribute taken for a hash)."""
    rng = random.Random(seed)
    prev_hash = rng.randint(0, 1000) if prev_block_has_hash else NONE_HASH
    if make_prev == "stand_in":
        prev = StandIn(prev_hash, 3 * block_size)
    else:
        prev = MagicMock(spec=BLOCK_INTERFACE)
        prev.content_hash = prev_hash
        prev.num_tokens_total = 3 * block_size
    token_ids = list(range(block_size if is_curr_block_full else rng.randint(0, block_size - 1)))
    block = Block(prev, token_ids, block_size, None, hashing=True)  # type: ignore[arg-type]  # a stand-in
    if is_curr_block_full and prev_block_has_hash:
        assert block.content_hash == hash_block_tokens(False, prev_hash, token_ids, None)
    else:
        assert block.content_hash is None
    assert block.num_tokens_total == 3 * block_size + len(token_ids)


def test_a_stand_in_carrying_a_reference_pages_hash_gives_the_same_chain():
    """Catches: hashing after a foreign previous page giving other values than after the
    reference's own page with the same hash (the chain would split at the stand-in)."""
    first = Block(None, [1, 2], 2, None, hashing=True)
    own = Block(first, [3, 4], 2, None, hashing=True)
    foreign = Block(StandIn(first.content_hash, 2), [3, 4], 2, None, hashing=True)  # type: ignore[arg-type]  # a stand-in, not a Block
    assert own.content_hash == foreign.content_hash is not None
