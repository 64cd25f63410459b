"""The pre-0.9.1 V1 manager wrapper: both shapes (0.8.x and 0.9.0) called as each expects."""

from __future__ import annotations

import sys
import types

from conformance.adapters.vllm_v1_single_group import SingleGroupManager


class Blocks090:
    """0.9.0's one-group KVCacheBlocks: a flat ``blocks`` list (v0.9.0 vllm/v1/core/kv_cache_manager.py:20-48)."""

    def __init__(self, blocks):
        self.blocks = blocks


class Manager090:
    """0.9.0's manager: tables on ``single_type_manager``, KVCacheBlocks in and out."""

    def __init__(self):
        self.block_pool = object()
        self.req_to_block_hashes = {}
        self.single_type_manager = types.SimpleNamespace(req_to_blocks={"r": [types.SimpleNamespace(block_id=4)]},
                                                         num_cached_block={"r": 1})
        self.calls = []

    def get_computed_blocks(self, request):
        return Blocks090([types.SimpleNamespace(block_id=7)]), 16

    def allocate_slots(self, request, num_new_tokens, num_new_computed_tokens=0, new_computed_blocks=None,
                       num_draft_tokens=0, num_lookahead_tokens=0, delay_cache_blocks=False):
        self.calls.append((num_new_tokens, num_new_computed_tokens, new_computed_blocks, num_lookahead_tokens,
                           delay_cache_blocks))
        return Blocks090([types.SimpleNamespace(block_id=9)])


class Manager085:
    """0.8.x's manager: tables on the manager, plain lists in and out."""

    def __init__(self):
        self.block_pool = object()
        self.req_to_block_hashes = {}
        self.req_to_blocks = {"r": [types.SimpleNamespace(block_id=3)]}
        self.num_cached_block = {"r": 0}
        self.calls = []

    def get_computed_blocks(self, request):
        return [types.SimpleNamespace(block_id=7)], 16

    def allocate_slots(self, request, num_tokens, new_computed_blocks=None, num_lookahead_tokens=0):
        self.calls.append((num_tokens, new_computed_blocks, num_lookahead_tokens))
        return [types.SimpleNamespace(block_id=9)]


def test_0_9_0_gets_the_hit_length_and_its_own_blocks_type(monkeypatch):
    """Catches: 0.9.0's allocate_slots called the 0.8.x way (the hit list passed as
    num_new_computed_tokens, delay_cache_blocks refused), or its tables read off the manager."""
    module = types.ModuleType("fake_kv_cache_manager_090")
    module.KVCacheBlocks = Blocks090
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(Manager090, "__module__", module.__name__)
    manager = Manager090()
    wrapped = SingleGroupManager(manager, "0.9.0")
    hit, length = wrapped.get_computed_blocks(None)
    assert [b.block_id for b in hit.blocks[0]] == [7] and length == 16
    new = wrapped.allocate_slots(None, 5, 16, hit, num_lookahead_tokens=2, delay_cache_blocks=True)
    (n, computed, blocks, lookahead, delay), = manager.calls
    assert (n, computed, lookahead, delay) == (5, 16, 2, True)
    assert isinstance(blocks, Blocks090) and [b.block_id for b in blocks.blocks] == [7]
    assert new.get_block_ids() == ([9],)
    assert wrapped.get_block_ids("r") == ([4],)
    assert wrapped.coordinator.single_type_managers[0].num_cached_block == {"r": 1}


def test_0_8_x_gets_a_plain_list():
    """Catches: the 0.9.0 path taken for 0.8.x's list-based allocate_slots."""
    manager = Manager085()
    wrapped = SingleGroupManager(manager, "0.8.5.post1")
    hit, _ = wrapped.get_computed_blocks(None)
    assert wrapped.allocate_slots(None, 5, 16, hit, num_lookahead_tokens=2).get_block_ids() == ([9],)
    (n, blocks, lookahead), = manager.calls
    assert n == 5 and [b.block_id for b in blocks] == [7] and lookahead == 2
    assert wrapped.get_block_ids("r") == ([3],) and wrapped.get_block_ids("other") == ([],)


class Manager083(Manager085):
    """0.8.0-0.8.3's allocate_slots: no num_lookahead_tokens (v0.8.3 vllm/v1/core/kv_cache_manager.py:162-167)."""

    def allocate_slots(self, request, num_tokens, new_computed_blocks=None):
        self.calls.append((num_tokens, new_computed_blocks))
        return [types.SimpleNamespace(block_id=9)]


def test_a_manager_without_lookahead_slots_is_called_without_the_argument():
    """Catches: the wrapper passing num_lookahead_tokens=0 to 0.8.0-0.8.3's allocate_slots, which
    has no such parameter, so every allocation there raised TypeError."""
    wrapped = SingleGroupManager(Manager083(), "0.8.3")
    new = wrapped.allocate_slots("req", 3, 0, None, num_lookahead_tokens=0)
    assert new is not None and new.get_block_ids() == ([9],)
    assert wrapped.manager.calls == [(3, None)]
