"""The real-size lockstep properties (conformance/machines/long_context.py)."""

from __future__ import annotations

import pytest
from hypothesis import find

from conformance.changelog import policy_named
from conformance.configs import V0Config
from conformance.lockstep import NotApplicable, replay, run_machine
from conformance.machines import long_context as lc
from tests.conformance.pinned import unavailable

V1_V0_33_0 = policy_named("v0.33.0")


@pytest.mark.reference_only
@pytest.mark.parametrize("machine", [lc.V1LongContextPeer, lc.V0LongContextPeer], ids=lambda m: m.__name__)
def test_real_size_machines_run_reference_against_reference(machine):
    """Catches: a real-size machine that crashes its harness or the reference (e.g. a recursion
    over an 8,192-block chain), checked without vLLM."""
    result = run_machine(machine, 2, 8)
    assert result.passed, result.detail
    assert result.steps > 0


@pytest.mark.reference_only
@pytest.mark.parametrize("block_size", [16, 32])
def test_v1_windows_cover_every_residue_and_every_group_order(block_size):
    """Catches: window draws that miss a residue of the window modulo the block size (the
    off-by-one cases of the window-to-block arithmetic), or a group order never drawn."""
    for residue in range(block_size):
        find(lc.long_v1_configs(V1_V0_33_0, True), lambda c, residue=residue: c.block_size == block_size and any(
            g.window % block_size == residue for g in c.groups if g.window is not None))
    for order in (["sliding"], ["full", "sliding"], ["sliding", "full"]):
        find(lc.long_v1_configs(V1_V0_33_0, True), lambda c, order=order: [g.kind for g in c.groups] == order)


@pytest.mark.reference_only
def test_v1_pools_reach_real_sizes():
    """Catches: a 'real-size' property whose draws never reach a 100k-block pool or a pool that
    barely fits one 128k-token request."""
    big = find(lc.long_v1_configs(V1_V0_33_0, False), lambda c: c.num_blocks > 100_000)
    assert big.max_model_len == 131072
    tight = find(lc.long_v1_configs(V1_V0_33_0, False), lambda c: c.num_blocks < 9000)
    assert tight.num_blocks - 1 >= 131072 // tight.block_size


@pytest.mark.reference_only
def test_v0_windows_cover_every_residue():
    """Catches: V0 window draws that miss a residue modulo the block size (the sliding-window cap
    over-counts when W mod block_size == 1)."""
    for bs in (16, 32):
        for residue in range(bs):
            find(lc.long_v0_configs(False, "reference"), lambda c, bs=bs, residue=residue: c.block_size == bs and
                 c.sliding_window is not None and c.sliding_window % bs == residue)


def long_sequence_trace(blocks: int, enable_caching: bool) -> dict:
    """A V0 trace: one sequence of ``blocks`` full blocks of 16, allocated, decoded past a block
    edge, queried and freed, then the pool checked."""
    tokens = [i % 4 for i in range(blocks * 16)]
    ops = [{"op": "add_group", "group": "g1", "seqs": [1], "prompt": tokens},
           {"op": "can_allocate", "group": "g1", "lookahead": 0},
           {"op": "allocate", "group": "g1"}]
    for t in range(2):
        ops += [{"op": "append_token", "seq": 1, "token": t},
                {"op": "can_append_slots", "group": "g1", "lookahead": 0},
                {"op": "append_slots", "seq": 1, "lookahead": 0}]
    if enable_caching:
        ops += [{"op": "num_cached_tokens", "seq": 1}, {"op": "mark_computed", "group": "g1"},
                {"op": "common_computed", "group": "g1"}]
    ops += [{"op": "block_table", "seq": 1}, {"op": "free", "seq": 1}, {"op": "num_free"}]
    config = {"block_size": 16, "num_gpu_blocks": blocks + 64, "num_cpu_blocks": 0,
              "watermark": 0.0, "sliding_window": None, "enable_caching": enable_caching}
    return {"semantics": "v0", "config": config, "ops": ops}


@pytest.mark.parametrize("blocks", [1024, 8192])
@pytest.mark.parametrize("enable_caching", [False, True], ids=["naive", "prefix_caching"])
def test_v0_long_sequence_in_lockstep_with_vllm(blocks, enable_caching):
    """Catches: the V0 reference failing where vLLM 0.10.2 does not at real sizes: `free` of a
    1,000+-block sequence raised RecursionError and left the manager half-freed (vLLM's chain
    walks are loops), and vLLM's own block-manager tests use 1,024-block sequences."""
    trace = long_sequence_trace(blocks, enable_caching)
    try:
        applied, diff = replay(trace)
    except NotApplicable as err:
        unavailable(str(err), "v0.")
    assert diff is None, diff
    assert applied == len(trace["ops"])


@pytest.mark.reference_only
@pytest.mark.parametrize("blocks", [1024, 8192])
def test_v0_long_sequence_reference_against_reference(blocks):
    """Catches: the same real-size V0 failures without vLLM (the dev environment's run)."""
    trace = long_sequence_trace(blocks, True)
    trace["config"]["peer"] = "reference"
    applied, diff = replay(trace)
    assert diff is None and applied == len(trace["ops"])


def test_real_size_v0_machine_never_forks_past_the_recursion_bound():
    """Catches: the real-size V0 machine forking (or allocating several sequences over) a table
    of thousands of blocks, which vLLM copies recursively and answers with RecursionError
    (conformance/known-upstream-bugs/v0-fork-recursion.json): a flaky 'divergence' at 0.6.6.post1."""
    machine = lc.V0LongContextMachine()
    machine.config = V0Config.from_json({"policy": "v0.10.2", "block_size": 16, "num_gpu_blocks": 2000,
                                         "num_cpu_blocks": 0, "watermark": 0.0, "sliding_window": None,
                                         "enable_caching": False, "peer": "reference"})
    assert machine._fork_fits(512 * 16) and not machine._fork_fits(512 * 16 + 1)
    machine.start(machine.config)
    machine.add_group([1] * (600 * 16), 2)
    assert all(len(members) == 1 for members in machine.members.values())
    assert machine._forkable() == []
