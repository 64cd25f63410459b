"""How a lockstep machine ends: after a refusal, and when the harness itself breaks."""

from __future__ import annotations

import pytest
from hypothesis.errors import InvalidDefinition

from conformance import lockstep
from conformance.adapters.reference_v0 import ReferenceV0System
from conformance.lockstep import Divergence, OpError, run_machine
from conformance.machines import v0, v1


class RefusesAllocate:
    """A system that answers like vLLM tripping a sanity assertion on every ``allocate``."""

    def __init__(self, inner, label):
        self.inner, self.label = inner, label

    def apply(self, op):
        if op["op"] == "allocate":
            raise OpError("refused", "stand-in for vLLM's assertion")
        return self.inner.apply(op)

    def snapshot(self):
        return self.inner.snapshot()


def refusing_systems(config):
    return (RefusesAllocate(ReferenceV0System(config), "a"), RefusesAllocate(ReferenceV0System(config), "b"))


def test_v0_machine_ends_cleanly_after_a_refusal(monkeypatch):
    """Catches: the old `broken` latch, under which every rule's precondition turned false after a
    refusal and Hypothesis raised InvalidDefinition ("No progress can be made"), reported as a
    failed property with no replayable trace. Now the example ends at the refusal and passes."""
    monkeypatch.setattr(v0, "make_systems", refusing_systems)
    result = run_machine(v0.V0ReferencePeerLifecycle, 30, 30)
    assert result.passed, result.detail
    assert result.steps > 0


def test_v0_machine_sends_nothing_after_a_refusal(monkeypatch):
    """Catches: a machine that keeps driving vLLM after vLLM refused (its state is no longer
    trustworthy), which would turn the next op's nonsense into a reported divergence."""
    systems = []

    class Recording(RefusesAllocate):
        def __init__(self, inner, label):
            super().__init__(inner, label)
            self.sent = []
            systems.append(self)

        def apply(self, op):
            self.sent.append(op["op"])
            return super().apply(op)

    monkeypatch.setattr(v0, "make_systems", lambda c: (Recording(ReferenceV0System(c), "a"),
                                                      Recording(ReferenceV0System(c), "b")))
    run_machine(v0.V0ReferencePeerLifecycle, 30, 30)
    refused = [s for s in systems if "allocate" in s.sent]
    assert refused, "the machine never allocated, so the refusal path was not exercised"
    for system in refused:  # one pair of systems per example: the refusal is the last op it saw
        assert system.sent.index("allocate") == len(system.sent) - 1, system.sent


def test_harness_errors_are_not_reported_as_divergences():
    """Catches: a broken machine (here: no rule can ever run) reported as 'vLLM and the reference
    disagree', which would send a reader hunting for a divergence that does not exist."""
    from hypothesis import strategies as st
    from hypothesis.stateful import initialize, precondition, rule

    class Stuck(lockstep.LockstepMachine):
        semantics_module = v0.__name__

        @initialize(config=v0.config_strategy(False, "reference"))
        def setup(self, config):
            self.start(config)

        @precondition(lambda self: False)
        @rule(x=st.integers())
        def never(self, x):
            pass

    result = run_machine(Stuck, 3, 5)
    assert not result.passed
    assert result.extra["failure"] == "harness_error" and "trace" not in result.extra
    assert "harness error" in result.detail and InvalidDefinition.__name__ in result.detail


def test_divergences_keep_their_trace_and_kind(monkeypatch):
    """Catches: a real divergence losing its shrunk trace or being labelled a harness error."""

    class Differs(RefusesAllocate):
        def apply(self, op):
            out = self.inner.apply(op)
            return "different" if self.label == "b" and op["op"] == "num_free" else out

    monkeypatch.setattr(v0, "make_systems", lambda c: (Differs(ReferenceV0System(c), "a"),
                                                      Differs(ReferenceV0System(c), "b")))
    result = run_machine(v0.V0ReferencePeerLifecycle, 30, 30)
    assert not result.passed and result.extra["failure"] == "divergence"
    assert result.extra["trace"]["ops"][-1]["op"] == "num_free"
    assert issubclass(Divergence, AssertionError)


def test_only_the_named_health_checks_are_suppressed():
    """Catches: a return to suppressing every health check, which hides e.g. a machine whose
    preconditions filter out almost every draw."""
    from hypothesis import HealthCheck

    off = set(lockstep.machine_settings(5, 5).suppress_health_check)
    assert HealthCheck.filter_too_much not in off
    assert off <= {HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example}


def test_installed_but_broken_vllm_is_a_harness_error(monkeypatch):
    """Catches: a vLLM that is installed but fails to import reported as "not applicable" (as if
    the user had no vLLM), which reads as a verdict; it is a broken environment. Runs where vLLM
    does not import (the dev environment), pretending the metadata says it is installed."""
    import importlib.util

    import pytest

    from conformance import versions
    from conformance.lockstep import NotApplicable
    from conformance.machines import v1

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM imports here; the broken case is staged where it does not")
    v0_config = {"block_size": 4, "num_gpu_blocks": 2, "num_cpu_blocks": 0, "watermark": 0.0,
                 "sliding_window": None, "enable_caching": False}
    with pytest.raises(NotApplicable, match="not installed"):
        v0.make_systems(v0_config)
    monkeypatch.setattr(versions, "installed_vllm_version", lambda: "0.10.2")
    with pytest.raises(versions.HarnessError, match="0.10.2 is installed but does not import"):
        v0.make_systems(v0_config)
    v1_config = {"policy": "v0.10.2", "block_size": 2, "num_blocks": 8, "groups": [{"kind": "full"}],
                 "max_model_len": 8, "enable_caching": True, "hash_fn": "sha256", "pythonhashseed": "0",
                 "entropy": "5e" * 32, "watermark": 0.0}
    with pytest.raises(versions.HarnessError, match="installed but does not import"):
        v1.make_systems(v1_config)


def test_a_group_of_divergences_reports_the_first_with_its_trace(monkeypatch):
    """Catches: 'ExceptionGroup: Hypothesis found 2 distinct failures' (or 'FlakyFailure:
    Inconsistent results', as v0.long_context printed at 0.6.6.post1) as the whole detail of a
    failed state machine, with no divergence named and the trace of another failure attached."""
    import hypothesis.stateful

    first = Divergence("state after {'op': 'free'} differs at /x: 1 != 2", {"ops": [{"op": "free"}]})
    second = Divergence("state after {'op': 'fork'} differs at /y: 3 != 4", {"ops": [{"op": "fork"}]})

    def fails(example, settings):  # as Hypothesis would: build an example, which records the divergence
        example().record.last_divergence = second.trace
        raise ExceptionGroup("Hypothesis found 2 distinct failures.", [first, second])

    monkeypatch.setattr(hypothesis.stateful, "run_state_machine_as_test", fails)
    result = run_machine(v0.V0ReferencePeerLifecycle, 10, 10)
    assert not result.passed and result.extra["failure"] == "divergence"
    assert result.detail.startswith("Divergence: state after {'op': 'free'}"), result.detail
    assert "ExceptionGroup with 2 failures" in result.detail
    assert result.extra["trace"] == first.trace


def test_a_run_keeps_its_counts_to_itself():
    """Catches: run_machine keeping a run's counters, progress callback or last divergence on the
    machine class, so that another instance of the class (here one built and stepped while the run
    is on, as a second run or Hypothesis's TestCase would) adds to the run's counts, or the run
    leaves its state on the class."""
    from conformance.configs import V0Config

    machine = v0.V0ReferencePeerLifecycle
    before = dict(vars(machine))
    started, other = [], []

    def progress(done):
        started.append(done)
        if done == 1:
            stray = machine()
            stray.start(V0Config.from_json({"block_size": 2, "num_gpu_blocks": 4, "num_cpu_blocks": 0,
                                            "watermark": 0.0, "enable_caching": False, "peer": "reference"}))
            stray.step({"op": "num_free"})
            other.append(stray.record)

    result = run_machine(machine, 4, 3, progress)
    assert dict(vars(machine)) == before
    assert result.passed and result.examples == len(started) == started[-1]
    assert other[0].examples == 1 and other[0].steps == 1


@pytest.mark.parametrize("name", ["v0.V0ReferencePeerPrefixCaching", "long_context.V0LongContextPeer",
                                  "v1.V1ReferencePeerSlidingWindow", "long_context.V1LongContextPeer"])
def test_no_example_overwrites_its_class_settings(name):
    """Catches: a machine's setup writing the class's settings (``enable_caching``, ``sliding``,
    ``peer``, ...) on the instance to say what the example drew, so that what a rule reads is
    no longer the class's setting and the drawn config and the flag can disagree; an example
    says what it drew in its config alone."""
    from conformance.machines import long_context

    module, attr = name.split(".")
    base = getattr({"v0": v0, "v1": v1, "long_context": long_context}[module], attr)
    settings_names = {k for cls in base.__mro__ for k, v in vars(cls).items()
                      if not k.startswith("_") and isinstance(v, (bool, int, str, tuple, type(None)))}
    shadowed: list[set] = []

    class Watched(base):  # type: ignore[misc, valid-type]  # a machine class chosen at run time
        def teardown(self):
            shadowed.append(settings_names & set(vars(self)))
            super().teardown()

    result = run_machine(Watched, 3, 3)
    assert result.passed, result.detail
    assert shadowed and all(not s for s in shadowed), shadowed
