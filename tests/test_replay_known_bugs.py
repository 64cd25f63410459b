"""scripts/replay-known-bugs: how a replay's printed line becomes the verdict the bug pages show."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "replay-known-bugs"


def _script():
    loader = importlib.machinery.SourceFileLoader("replay_known_bugs", str(SCRIPT))
    spec = importlib.util.spec_from_loader("replay_known_bugs", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_verdicts_need_the_same_exception_and_agreement_is_not_reproduction() -> None:
    """Catches: any divergence counted as the bug reproducing (another crash is not the recorded one),
    an identical replay or a not-applicable release counted as a reproduction, or a crash of the
    harness itself taken for a verdict."""
    verdict = _script().verdict
    trace = {"divergence": "{'op': 'swap_out'} raised IndexError: list index out of range (not an OpError)"}
    assert verdict(trace, 1, "DIVERGED after 19 of 19 ops: {'op': 'swap_out'} raised IndexError: x") == "reproduces"
    assert verdict(trace, 1, "DIVERGED after 3 of 19 ops: {'op': 'free'} raised KeyError: 2") == "diverges otherwise"
    assert verdict(trace, 0, "identical over 19 ops") == "does not reproduce"
    assert verdict(trace, 0, "not applicable: vLLM 0.33.0 has no V0 block manager") == "not applicable"
    assert verdict(trace, 1, "Traceback (most recent call last): ...") == "harness error"
    # a trace without a recorded divergence (a deliberate difference): any divergence is it
    assert verdict({}, 1, "DIVERGED after 8 of 8 ops: state after ... differs at /gpu/hit_rate[2]") == "reproduces"
