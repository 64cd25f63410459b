"""The 0.34.0 drift notes on ``BlockHashToBlockMap`` say the new map answers every call as 0.33.0's did.

0.34.0 stores block ids (duplicates in a separate ``_dup_ids`` dict) where 0.33.0 stored blocks (a
bare block, or a ``{block_id: block}`` dict). The notes' ``- later: 0.34.0:`` lines claim the change
is invisible to callers. This test is that claim's evidence: it takes the class out of each
release's sha256-verified ``vllm/v1/core/block_pool.py`` (nothing of vLLM is committed or imported:
the class body is compiled alone, with stand-ins for the names it uses) and drives both with the
same random insert/pop sequences (3,000 of them, the count `conformance/changelog.py` cites for this
representation change), comparing every answer after every step.
"""

from __future__ import annotations

import ast
import random

import pytest

from upstream import fetch

PATH = "vllm/v1/core/block_pool.py"


class _Block:
    """Stands in for ``KVCacheBlock``: the map only reads ``block_id``."""

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id


def _map_class(version: str):
    try:
        source = fetch.read_file(version, PATH).decode()
    except fetch.UpstreamError as err:  # pragma: no cover - the check needs the release bytes
        pytest.fail(f"cannot fetch {PATH} at {version}: {err}")
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "BlockHashToBlockMap")
    namespace = {"KVCacheBlock": _Block, "BlockHashWithGroupId": bytes, "Any": object, "gc_untrack": lambda x: x}
    exec(compile("from __future__ import annotations\n" + ast.get_source_segment(source, node), PATH, "exec"), namespace)
    return namespace["BlockHashToBlockMap"]


def _drive(old_cls, new_cls, seeds: int = 3000, blocks: int = 6, steps: int = 40) -> None:
    keys = [b"a", b"b", b"c"]
    for seed in range(seeds):
        rng = random.Random(seed)
        pool = [_Block(i) for i in range(blocks)]
        old, new = old_cls(), new_cls(pool)
        for step in range(steps):
            key, block_id = rng.choice(keys), rng.randrange(blocks)
            if rng.random() < 0.55:
                old.insert(key, pool[block_id])
                new.insert(key, pool[block_id])
            else:
                got_old, got_new = old.pop(key, block_id), new.pop(key, block_id)
                assert got_old is got_new, (seed, step, "pop", key, block_id)
            for k in keys:
                assert old.get_one_block(k) is new.get_one_block(k), (seed, step, "get_one_block", k)
                assert [old.contain(k, i) for i in range(blocks)] == [new.contain(k, i) for i in range(blocks)], (
                    seed, step, "contain", k)
            assert len(old) == len(new), (seed, step, "len")


def test_the_0_34_0_map_answers_every_call_as_the_0_33_0_map():
    """Catches: a note telling students the id-based map behaves like the old one when some call
    (which duplicate ``get_one_block`` returns, ``pop``'s result, ``contain``, ``len``) differs."""
    _drive(_map_class("0.33.0"), _map_class("0.34.0"))


def test_the_comparison_notices_a_map_that_picks_another_duplicate():
    """Catches: a comparison too weak to see a difference (planted: ``pop`` re-points a key at the
    newest remaining duplicate instead of the oldest)."""
    new_cls = _map_class("0.34.0")

    class NewestFirst(new_cls):
        def pop(self, key, block_id):
            found = super().pop(key, block_id)
            if key in self._dup_ids:
                self._cache[key] = list(self._dup_ids[key])[-1]
            return found

    with pytest.raises(AssertionError):
        _drive(_map_class("0.33.0"), NewestFirst, seeds=200)
