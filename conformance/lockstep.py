"""The lockstep engine: apply the same operation to two systems and demand the same behaviour.

A *system* is anything with ``label``, ``apply(op)`` and ``snapshot()``: the reference wrapped by
an adapter, or the installed vLLM wrapped by another. An *operation* is a small JSON-able dict
(``{"op": "allocate_slots", "req": "r1", "num_new_tokens": 7}``), so every run is a trace that can
be saved, replayed and kept as a regression case.

After every operation the engine compares

* the outcome: the returned value, or the error *category* the adapter reported (``OpError``);
* the snapshot: every observable piece of state the semantics defines (block tables, free-queue
  order, ref counts, hashes, ...).

The first difference raises :class:`Divergence`, which carries the trace that produced it.

A semantics module (``conformance.machines.v1``, ``conformance.machines.v0``) provides

* ``SEMANTICS``: its name (``"v1"``, ``"v0"``);
* ``make_systems(config) -> (reference_system, vllm_system)``, raising :class:`NotApplicable`
  with a reason when the installed vLLM lacks what the config needs (``config``: the semantics'
  config object, or a trace file's JSON config, which it reads into one);
* a :class:`LockstepMachine` subclass whose ``@initialize`` rule draws a config and calls
  ``self.start(config)``, and whose rules build ops and call ``self.step(op)``.
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hypothesis.stateful import RuleBasedStateMachine


class OpError(Exception):
    """An operation was refused. Adapters raise it with a category both systems agree on
    (e.g. ``"unknown_request"``, ``"no_free_blocks"``); ``detail`` is for humans only."""

    def __init__(self, category: str, detail: str = ""):
        super().__init__(f"{category}: {detail}" if detail else category)
        self.category = category
        self.detail = detail


class NotApplicable(Exception):
    """The installed vLLM does not have what a semantics or config needs; the message says why."""


class Divergence(AssertionError):
    """The two systems behaved differently. ``trace`` replays it (``python -m conformance replay``)."""

    def __init__(self, message: str, trace: dict):
        super().__init__(message + "\n\ntrace:\n" + json.dumps(trace, indent=1))
        self.trace = trace


class System(Protocol):
    label: str

    def apply(self, op: dict) -> Any: ...

    def snapshot(self) -> dict: ...


def outcome(system: System, op: dict) -> dict:
    """Apply ``op`` and normalise what happened into a comparable dict."""
    try:
        return {"result": system.apply(op)}
    except OpError as err:
        return {"error": err.category}


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """A short description of the first place where two JSON-like values differ, or None."""
    if type(a) is not type(b) and not (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple))):
        return f"{path or '<root>'}: {a!r} != {b!r}"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                return f"{path}/{key}: present only in {'first' if key in a else 'second'}"
            diff = first_difference(a[key], b[key], f"{path}/{key}")
            if diff:
                return diff
        return None
    if isinstance(a, (list, tuple)):
        for i, (x, y) in enumerate(zip(a, b)):
            diff = first_difference(x, y, f"{path}[{i}]")
            if diff:
                return diff
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)} ({a!r} vs {b!r})"
        return None
    return None if a == b else f"{path or '<root>'}: {a!r} != {b!r}"


def compare_step(a: System, b: System, op: dict) -> tuple[dict, str | None]:
    """Apply ``op`` to both systems; return (shared outcome, None) or (outcome of a, difference)."""
    out_a, _, diff = compare_step_sides(a, b, op)
    return out_a, diff


def compare_step_sides(a: System, b: System, op: dict) -> tuple[dict, dict, str | None]:
    """Apply ``op`` to both systems; return both outcomes and the first difference (or None)."""
    out_a, out_b = outcome(a, op), outcome(b, op)
    diff = first_difference(out_a, out_b)
    if diff:
        return out_a, out_b, f"outcome of {op!r} differs at {diff}\n  {a.label}: {out_a}\n  {b.label}: {out_b}"
    diff = first_difference(a.snapshot(), b.snapshot())
    if diff:
        return out_a, out_b, f"state after {op!r} differs at {diff} ({a.label} vs {b.label})"
    return out_a, out_b, None


def side_states(a: System, b: System, outcomes: tuple[dict | None, dict | None] = (None, None)) -> list[dict]:
    """What a saved divergence keeps of each system after the last op: label, outcome, snapshot.

    Before that op the two agreed at every step, so these two states are all a reader needs to see
    both sides of the whole trace (``python -m conformance explore``). A snapshot that cannot be
    taken (the system is broken by the op) is ``null``, with ``snapshot_error`` saying why.
    """
    sides = []
    for system, out in zip((a, b), outcomes):
        side: dict[str, Any] = {"label": system.label, "outcome": out}
        try:
            side["snapshot"] = json.loads(json.dumps(system.snapshot(), default=str))
        except Exception as err:  # noqa: BLE001 - the op left the system unable to describe itself
            side["snapshot"], side["snapshot_error"] = None, f"{type(err).__name__}: {err}"
        sides.append(json.loads(json.dumps(side, default=str)))
    return sides


@dataclass
class RunRecord:
    """What one run of a machine has exercised, for the report: one record per run
    (:func:`run_machine` hands it to every machine instance of the run), never shared by two runs."""

    examples: int = 0
    steps: int = 0
    configs: dict[str, int] = field(default_factory=dict)  # a config's JSON -> examples that drew it
    last_divergence: dict | None = None  # the trace of the latest divergence (after shrinking: the shrunk one)
    progress: Callable[[int], None] | None = None  # called with the examples started so far


class LockstepMachine(RuleBasedStateMachine):
    """Base class of the conformance state machines: holds two systems and the trace.

    A machine instance is one example; what the run has done so far is in ``self.record``, which
    :func:`run_machine` sets on each instance it builds (a machine built otherwise, e.g. by
    Hypothesis's ``TestCase``, keeps a record of its own).
    """

    semantics_module: str = ""  # dotted name of the module providing make_systems

    def __init__(self):
        super().__init__()
        self.a: System | None = None
        self.b: System | None = None
        self.trace: dict = {}
        self.record = RunRecord()

    # -- used by subclasses -------------------------------------------------------------------
    def start(self, config: Any) -> None:
        """Build both systems for ``config`` (call from the machine's ``@initialize`` rule).

        ``config`` is the semantics' config object (``conformance.configs``), whose ``to_json()``
        the trace records, or a trace file's config object itself."""
        module = importlib.import_module(self.semantics_module)
        self.a, self.b = module.make_systems(config)
        recorded = config.to_json() if hasattr(config, "to_json") else config
        self.trace = {"semantics": module.SEMANTICS, "config": recorded, "ops": []}
        record = self.record
        record.examples += 1
        if record.progress is not None:
            record.progress(record.examples)
        key = json.dumps(recorded, sort_keys=True)
        record.configs[key] = record.configs.get(key, 0) + 1
        self._check(None, self.a.snapshot(), self.b.snapshot())

    def step(self, op: dict) -> dict:
        """Apply ``op`` to both systems, compare outcome and state; return the shared outcome."""
        assert self.a is not None, "call self.start(config) in an @initialize rule first"
        self.trace["ops"].append(json.loads(json.dumps(op)))  # a copy: rules may reuse their lists
        self.record.steps += 1
        try:
            out, out_b, diff = compare_step_sides(self.a, self.b, op)
        except Exception as err:  # noqa: BLE001 - an exception no adapter maps to a category: keep its trace too
            self._diverged(f"{op!r} raised {type(err).__name__}: {err} (not an OpError: a bug in an "
                           f"adapter, the reference or vLLM)")
        if diff:
            self._diverged(diff, (out, out_b))
        return out

    # -- internals ----------------------------------------------------------------------------
    def _check(self, op, snap_a, snap_b) -> None:
        diff = first_difference(snap_a, snap_b)
        if diff:
            self._diverged(f"initial state differs at {diff}")

    def _diverged(self, message: str, outcomes: tuple[dict | None, dict | None] = (None, None)) -> None:
        trace = json.loads(json.dumps(self.trace))
        trace["divergence"] = message
        if self.a is not None and self.b is not None:
            trace["sides"] = side_states(self.a, self.b, outcomes)
        self.record.last_divergence = trace
        raise Divergence(message, trace)


# -- traces -------------------------------------------------------------------------------------
SEMANTICS_MODULES = {"v1": "conformance.machines.v1", "v0": "conformance.machines.v0"}


def save_trace(trace: dict, directory: Path, stem: str | None = None) -> Path:
    """Write a trace as small, readable JSON and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = stem or f"{trace['semantics']}-{time.strftime('%Y%m%d-%H%M%S')}"
    path = directory / f"{stem}.json"
    path.write_text(json.dumps(trace, indent=1) + "\n")
    return path


def replay(trace: dict) -> tuple[int, str | None]:
    """Replay a trace on fresh systems; return (ops applied, first difference or None).

    :func:`replay_sides` does the same and also returns both systems' states at the difference.

    ``trace["expect"]``, when present, is a list aligned with ``ops``; each entry is ``null`` (no
    expectation) or ``{"outcome": ..., "state": {key: value}}`` where ``state`` names top-level
    snapshot keys. Traces rebuilt from vLLM's own tests pin what vLLM's test asserts (e.g. the
    free-queue order after ``test_prefill``), so a replay checks the reference against vLLM's
    expectation *and* against vLLM.
    """
    done, diff, _ = replay_sides(trace)
    return done, diff


def replay_sides(trace: dict) -> tuple[int, str | None, list[dict] | None]:
    """:func:`replay`, plus :func:`side_states` of both systems where they differ (else None)."""
    module = importlib.import_module(SEMANTICS_MODULES[trace["semantics"]])
    a, b = module.make_systems(trace["config"])
    diff = first_difference(a.snapshot(), b.snapshot())
    if diff:
        return 0, f"initial state differs at {diff}", side_states(a, b)
    expect = trace.get("expect") or [None] * len(trace["ops"])
    for i, (op, want) in enumerate(zip(trace["ops"], expect)):
        try:
            out, out_b, diff = compare_step_sides(a, b, op)
        except NotApplicable:  # the trace asks for something this release does not have
            raise
        except Exception as err:  # noqa: BLE001 - as in LockstepMachine.step: report it, with where it happened
            return i + 1, (f"{op!r} raised {type(err).__name__}: {err} (not an OpError: a bug in an "
                           f"adapter, the reference or vLLM)"), side_states(a, b)
        if diff:
            return i + 1, diff, side_states(a, b, (out, out_b))
        if want and "outcome" in want:
            diff = first_difference(out, want["outcome"])
            if diff:
                return i + 1, f"op {i} {op!r}: outcome differs from the expected one at {diff}", \
                    side_states(a, b, (out, out_b))
        if want and "state" in want:
            snap = a.snapshot()
            for key, value in want["state"].items():
                diff = first_difference(snap.get(key), value, "/" + key)
                if diff:
                    return i + 1, f"after op {i} {op!r}: state differs from the expected at {diff}", \
                        side_states(a, b, (out, out_b))
    return len(trace["ops"]), None, None


# -- running a machine as a property ------------------------------------------------------------
def _is_divergence(err: BaseException) -> bool:
    """Is ``err`` a Divergence, or an exception group (Hypothesis reports several distinct
    failures as one) all of whose members are?"""
    if isinstance(err, Divergence):
        return True
    members = getattr(err, "exceptions", None)
    return bool(members) and all(_is_divergence(e) for e in members)


def _first_divergence(err: BaseException) -> Divergence | None:
    """The first Divergence in ``err`` or, depth first, in the exception groups around it."""
    if isinstance(err, Divergence):
        return err
    for member in getattr(err, "exceptions", None) or ():
        found = _first_divergence(member)
        if found is not None:
            return found
    return None


# The health checks a lockstep machine really trips, and only those:
MACHINE_HEALTH_CHECKS_OFF = (
    # Rules run inside data generation; a step that drives vLLM's manager (or the Triton
    # interpreter) is slower than Hypothesis's budget for generating data.
    "too_slow",
    # Runs of up to 100 steps, each drawing lists of tokens, exceed the default data budget.
    "data_too_large",
    # The smallest example is an initialize rule plus a run of steps: larger than the default
    # "base example" Hypothesis expects of a plain test.
    "large_base_example",
)


def suppressed_health_checks() -> list:
    """The HealthCheck members of MACHINE_HEALTH_CHECKS_OFF that this Hypothesis has."""
    from hypothesis import HealthCheck

    return [getattr(HealthCheck, name) for name in MACHINE_HEALTH_CHECKS_OFF if hasattr(HealthCheck, name)]


def machine_settings(examples: int, steps: int):
    """Hypothesis settings for a lockstep property run (no database: a run is self-contained)."""
    from hypothesis import settings

    return settings(max_examples=examples, stateful_step_count=steps, deadline=None, database=None,
                    suppress_health_check=suppressed_health_checks(), print_blob=False)


def run_machine(machine_cls: type[LockstepMachine], examples: int, steps: int, progress=None):
    """Run ``machine_cls`` for ``examples`` examples of up to ``steps`` steps; return a Result.

    ``progress(examples_done)`` is called as examples start (for the command's progress line).
    A failure is one of two kinds, in ``extra["failure"]``: ``"divergence"`` (the two systems
    behaved differently; the result carries the shrunk trace in ``extra["trace"]``) or
    ``"harness_error"`` (the machine itself could not go on: a Hypothesis error such as
    ``InvalidDefinition``, or a bug in a rule), which says nothing about vLLM or the reference.
    """
    from hypothesis.stateful import run_state_machine_as_test

    from conformance.properties import Result

    record = RunRecord(progress=progress)

    def example() -> LockstepMachine:  # every example of this run adds to this run's record alone
        machine = machine_cls()
        machine.record = record
        return machine

    try:
        run_state_machine_as_test(example, settings=machine_settings(examples, steps))
    except NotApplicable:
        raise
    except Exception as err:  # noqa: BLE001 - a divergence, or a harness error: both fail the property
        trace = record.last_divergence
        c = record
        detail = str(err).split("\n\ntrace:")[0]
        divergence = trace is not None and _is_divergence(err)
        first = _first_divergence(err)
        if divergence and first is not err and first is not None:
            # Several failures in one group (distinct, or one that replayed differently): name the
            # first divergence itself rather than the group's summary.
            count = len(getattr(err, "exceptions", ()) or ())
            detail = (str(first).split("\n\ntrace:")[0]
                      + f" (Hypothesis reported {type(err).__name__} with {count} failures; the first)")
            err, trace = first, first.trace
        extra = {"failure": "divergence" if divergence else "harness_error"}
        if trace and divergence:
            extra["trace"] = trace
        kind = "" if divergence else "harness error (not a verdict on vLLM or the reference): "
        return Result(False, c.examples, c.steps, f"{kind}{type(err).__name__}: {detail}", extra)
    c = record
    return Result(True, c.examples, c.steps, f"{len(c.configs)} distinct configs",
                  {"configs": len(c.configs)})
