"""The regression corpus: every saved trace, replayed on the reference and the installed vLLM.

Traces live in ``conformance/traces/<semantics>/*.json``. Some are shrunk divergences found by the
state machines (kept after the fix so the bug stays fixed); others are rebuilt from scenarios in
vLLM's own tests and carry ``expect`` entries that pin what vLLM's test asserts. A trace may name
the vLLM versions it applies to (``"versions": ["0.33.0"]``); it is skipped on others.
"""

from __future__ import annotations

import json
from pathlib import Path

from conformance.lockstep import NotApplicable, replay
from conformance.properties import Property, Result

TRACES = Path(__file__).parent / "traces"


def corpus() -> list[Path]:
    """All committed traces, in a stable order."""
    return sorted(p for p in TRACES.glob("*/*.json") if p.parent.name != "failures")


def run_corpus(examples: int = 0, steps: int = 0, progress=None) -> Result:
    """Replay every trace that applies to the installed vLLM; fail on the first divergence."""
    from conformance.versions import installed_vllm_version

    version = installed_vllm_version()
    replayed, ops, skipped, failures = 0, 0, [], []
    for path in corpus():
        trace = json.loads(path.read_text())
        wanted = trace.get("versions")
        if wanted and version not in wanted:
            skipped.append(f"{path.name} (only {', '.join(wanted)})")
            continue
        try:
            done, diff = replay(trace)
        except NotApplicable as why:
            skipped.append(f"{path.name} ({why})")
            continue
        replayed += 1
        ops += done
        if diff:
            failures.append(f"{path.relative_to(TRACES)}: {diff}")
    if replayed == 0:
        raise NotApplicable("no trace applies to this vLLM: " + "; ".join(skipped or ["corpus empty"]))
    detail = f"{replayed} traces replayed" + (f", {len(skipped)} skipped" if skipped else "")
    if failures:
        return Result(False, replayed, ops, detail + "; diverged: " + " | ".join(failures))
    return Result(True, replayed, ops, detail, {"skipped": skipped})


PROPERTIES = [
    Property(
        name="traces.corpus",
        checks="every committed trace (shrunk past divergences and scenarios rebuilt from vLLM's own "
        "tests) gives identical outcomes and states on the reference and vLLM, and meets the trace's "
        "pinned expectations",
        run=run_corpus,
        needs="vLLM with the V0 or V1 block manager the traces use",
    )
]
