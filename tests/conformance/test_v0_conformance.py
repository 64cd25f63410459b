"""Lockstep conformance of the V0 reference block manager (semantics "v0").

The vLLM-backed tests need vLLM 0.10.2 (run them in that environment); they skip with the reason
otherwise, except inside the pinned 0.10.2 environment of the test command, where they fail. The reference-against-reference tests run anywhere and test the machine itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis.stateful import invariant

from conformance.configs import V0Config
from conformance.lockstep import NotApplicable, replay, run_machine
from conformance.machines import v0
from tests.conformance.pinned import unavailable

TRACES = sorted((Path(__file__).resolve().parents[2] / "conformance" / "traces" / "v0").glob("*.json"))


def _vllm_v0_or_skip() -> None:
    try:
        v0.make_systems({"block_size": 4, "num_gpu_blocks": 2, "num_cpu_blocks": 0,
                         "watermark": 0.0, "sliding_window": None, "enable_caching": False})
    except NotApplicable as err:
        unavailable(str(err), "v0.")


@pytest.mark.reference_only
@pytest.mark.parametrize("machine", [v0.V0ReferencePeerLifecycle, v0.V0ReferencePeerPrefixCaching],
                         ids=["lifecycle", "prefix_caching"])
def test_machine_reference_against_reference(machine):
    """Catches: a machine or adapter bug (non-JSON results, nondeterministic snapshots, rules that
    crash the harness) without needing vLLM."""
    result = run_machine(machine, 20, 20)
    assert result.passed, result.detail
    assert result.steps > 0


class _ComputesOnlyWrittenTokens(v0.V0ReferencePeerLifecycle):
    """The reference-peer lifecycle machine, checking after every rule that no live sequence
    counts more computed tokens than its table holds slots for."""

    @invariant()
    def computed_tokens_have_slots(self):
        for sids in self.members.values():
            for sid in sids:
                assert self.sequences.seqs[sid].computed <= self.written[sid], (
                    f"seq {sid}: {self.sequences.seqs[sid].computed} computed, {self.written[sid]} written")


@pytest.mark.reference_only
def test_machine_computes_only_tokens_with_slots():
    """Catches: the decode rule marking tokens computed after a refused append (tokens without
    KV slots), a state no scheduler reaches; with a sliding window vLLM's append_slots then
    indexes past the block table (v0.10.2 block_table.py L150-L159; the reference, which mirrors
    those lines, raised IndexError in the 0.6.3.post1 release sweep), a false divergence."""
    result = run_machine(_ComputesOnlyWrittenTokens, 100, 30)
    assert result.passed, result.detail


class _RecordsAccessTimes(v0.V0ReferencePeerPrefixCaching):
    """The reference-peer prefix-caching machine, recording the time of every access it sends."""

    times: list[list[int]] = []

    def __init__(self) -> None:
        super().__init__()
        self.times.append([])

    def act(self, op):
        if op.get("op") == "access":
            self.times[-1].append(op["now"])
        return super().act(op)


@pytest.mark.reference_only
def test_machine_stamps_one_step_with_one_time():
    """Catches: the machine advancing its clock per sequence, which the scheduler does not (it
    stamps a step's sequences with one ``now``, v0.10.2 vllm/core/scheduler.py:1509): the
    evictor's ties on time, routine under the engine, and the block id that then decides them would
    never be driven."""
    _RecordsAccessTimes.times = []
    result = run_machine(_RecordsAccessTimes, 60, 40)
    assert result.passed, result.detail
    runs = [t for t in _RecordsAccessTimes.times if t]
    assert all(a <= b for t in runs for a, b in zip(t, t[1:]))  # time never runs backwards
    assert any(a == b for t in runs for a, b in zip(t, t[1:]))  # and a step stamps more than one


@pytest.mark.reference_only
def test_decode_run_takes_a_sequence_past_its_window():
    """Catches: a windowed lifecycle machine that cannot make a sequence outgrow its window, so
    vLLM's page drop (v0.10.2 vllm/core/block/block_table.py:149-159), the null block and freeing
    a table that holds it are never driven (before decode_run, runs of 200 examples of 100 steps
    dropped no page at all: single decodes among the other rules stall at the first refusal)."""
    machine = v0.V0ReferencePeerLifecycle()
    machine.config = V0Config(policy=v0.target_policy("reference"), block_size=2, num_gpu_blocks=12,
                              num_cpu_blocks=0, watermark=0.0, sliding_window=4, enable_caching=False,
                              peer="reference")
    machine.start(machine.config)
    machine.add_group([1, 2, 3, 0, 1, 2], 1)
    assert machine.running, "the prompt was not admitted"
    machine.decode_run(0, [1] * 6)
    assert machine.dropped, "no page left the window"
    machine.teardown()


@pytest.mark.reference_only
@settings(max_examples=200, deadline=None)
@given(config=v0.config_strategy(False, "reference"))
def test_a_windowed_pool_can_hold_a_sequence_past_its_window(config):
    """Catches: windowed configs drawn with pools too small for one sequence to hold more pages than
    its window keeps (window // block_size + 2), so that no page is ever dropped (with 1-12 pages
    for every config, runs of 200 examples of 100 steps dropped none)."""
    if config.sliding_window is not None:
        assert config.num_gpu_blocks > config.sliding_window // config.block_size + 2


@pytest.mark.parametrize("machine", [v0.V0LifecycleMachine, v0.V0PrefixCachingMachine],
                         ids=["v0.lifecycle", "v0.prefix_caching"])
def test_machine_against_vllm(machine):
    """Catches: any difference in return value, refusal or snapshot between the reference and
    vLLM 0.10.2's SelfAttnBlockSpaceManager over random scheduler runs."""
    _vllm_v0_or_skip()
    result = run_machine(machine, 20, 20)
    assert result.passed, f"{result.detail}\n{json.dumps(result.extra.get('trace'), indent=1)}"


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_trace_replays_identically(path):
    """Catches: regressions on saved scenarios, incl. the expectations vLLM's own tests assert."""
    _vllm_v0_or_skip()
    applied, diff = replay(json.loads(path.read_text()))
    assert diff is None, diff
    assert applied == len(json.loads(path.read_text())["ops"])


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_trace_expectations_hold_for_the_reference(path):
    """Catches: the reference drifting from what vLLM's tests assert, checked without vLLM."""
    trace = json.loads(path.read_text())
    applied, diff = replay({**trace, "config": {**trace["config"], "peer": "reference"}})
    assert diff is None, diff
    assert applied == len(trace["ops"])


def test_properties_are_registered_under_their_stable_names():
    """Catches: renamed or missing property names that notes and pages cite."""
    assert [p.name for p in v0.PROPERTIES] == ["v0.lifecycle", "v0.prefix_caching"]
