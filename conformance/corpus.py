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
from conformance.trace_file import TraceFileError, load_trace

TRACES = Path(__file__).parent / "traces"


def corpus() -> list[Path]:
    """All committed traces, in a stable order."""
    return sorted(p for p in TRACES.glob("*/*.json") if p.parent.name != "failures")


def retargeted(trace: dict, policy: str) -> dict:
    """A V1 trace recorded under another release's policy, to replay under ``policy``.

    The ops are scheduler calls every V1 release accepts; the ``expect`` entries pin what one
    release's own test asserts, so they are dropped: the replay compares the reference (under
    ``policy``) with the installed vLLM step by step, as the machines do. A retention interval, the
    manager's ``max_in_flight_tokens`` and the whole-sequence admission flag are dropped where the
    release has none of them (``retention_interval_supported``, ``full_sequence_admission``); an
    op's ``num_in_flight_tokens`` is kept, since a release before 0.26.0 ignores it as the
    reference does under its policy.
    """
    from conformance.changelog import policy_named
    from reference.blocks.v1.hashing import hash_function_names

    out = {k: v for k, v in trace.items() if k != "expect"}
    out["config"] = {**trace["config"], "policy": policy}
    # A hash function the release lacks (sha256_cbor before 0.10.2) becomes sha256, which every
    # release from 0.8.3 has (0.8.0-0.8.2 hash with the builtin hash only): the ops find the same
    # hits under any collision-free hash.
    target = policy_named(policy)
    offered = hash_function_names(target)
    if out["config"].get("hash_fn", "sha256") not in offered:
        out["config"]["hash_fn"] = "sha256" if "sha256" in offered else offered[0]
    # Settings the release does not have are left out: its manager would refuse them.
    if not target.retention_interval_supported:
        out["config"].pop("retention_interval", None)
    if not target.full_sequence_admission:
        out["config"].pop("max_in_flight_tokens", None)
        out["ops"] = [{k: v for k, v in op.items() if k != "full_sequence_must_fit"} for op in out["ops"]]
    return out


def layout_accepted(trace: dict) -> bool:
    """Does the release a retargeted V1 trace names accept its KV-cache groups? (Before 0.9.1 the
    manager takes one group; 0.10.2's hybrid coordinator refuses some layouts: ``accepted_layout``.)"""
    from conformance.configs import V1Config
    from conformance.machines.v1 import accepted_layout

    config = V1Config.from_json(trace["config"])
    return accepted_layout(config.groups, config.block_size, config.enable_caching, config.policy)


def replay_key(trace: dict) -> str:
    """What makes two retargeted V1 traces one replay at a release whose policy no trace records:
    the config but its policy and hash function, and the ops. (A pinned pair may differ in its
    hash function only; the V1 machines drive every hash function a release offers, so the corpus
    need not replay the pair twice.)"""
    config = {k: v for k, v in trace["config"].items() if k not in ("policy", "hash_fn")}
    return json.dumps([config, trace["ops"]], sort_keys=True)


def installed_v0_policy() -> str | None:
    """The installed release's V0 policy name, or None where it has no V0 block manager.

    Raises :class:`conformance.versions.HarnessError` where the release has a V0 block manager
    that the harness cannot drive.
    """
    from conformance.versions import installed_v0_policy_name

    try:
        return installed_v0_policy_name()
    except NotApplicable:
        return None


def installed_policy() -> str | None:
    """The installed release's V1 policy name, or None where it has none.

    Raises :class:`conformance.versions.HarnessError` where the release has a V1 manager that
    the harness cannot drive.
    """
    from conformance.versions import installed_v1_policy_name

    try:
        return installed_v1_policy_name()
    except NotApplicable:
        return None


def run_corpus(examples: int = 0, steps: int = 0, progress=None) -> Result:
    """Replay every trace that applies to the installed vLLM; fail on the first divergence.

    V1 traces recorded at a pinned release are replayed as they are there and, at a release whose
    policy no trace records, retargeted to that policy (:func:`retargeted`; one replay per
    distinct config, its hash function aside, and op sequence, :func:`replay_key`).
    """
    from conformance.versions import HarnessError, installed_target

    try:
        version = installed_target().release
    except (HarnessError, NotApplicable):
        version = None
    try:
        policy, gap = installed_policy(), None
    except HarnessError as err:  # V1 traces cannot be replayed here; V0 ones still are
        policy, gap = None, str(err)
    try:
        v0_policy, v0_gap = installed_v0_policy(), None
    except HarnessError as err:  # V0 traces cannot be replayed here; V1 ones still are
        v0_policy, v0_gap = None, str(err)
    try:
        traces = {path: load_trace(path) for path in corpus()}
    except TraceFileError as err:
        return Result(False, 0, 0, f"harness error (not a verdict on vLLM or the reference): {err}",
                      {"failure": "harness_error"})
    pinned_policies = {trace["config"].get("policy") for trace in traces.values()}
    replayed_keys: set[str] = set()
    replayed, ops, failures = 0, 0, []
    skipped: dict[str, list[str]] = {}  # reason -> trace names: a shared reason is said once

    def skip(path: Path, reason: str) -> None:
        skipped.setdefault(reason, []).append(path.name)

    for path, trace in traces.items():
        recorded = trace["config"].get("policy")
        if trace["semantics"] == "v1" and gap is not None:
            skip(path, "harness gap")
            continue
        if trace["semantics"] == "v0" and v0_gap is not None:
            skip(path, "harness gap")
            continue
        key = None
        if trace["semantics"] == "v1" and policy is not None and policy not in pinned_policies:
            trace = retargeted(trace, policy)
            if not layout_accepted(trace):
                skip(path, f"groups {policy} refuses")
                continue
            key = replay_key(trace)
            if key in replayed_keys:
                skip(path, "same config (its hash function aside) and ops as another trace, already replayed")
                continue
        elif recorded is not None and recorded != policy:
            skip(path, f"recorded for {recorded}; installed: {policy}")
            continue
        if trace["semantics"] == "v0":
            # V0 traces hold scheduler calls every V0 release accepts; they are replayed under the
            # installed release's V0 policy (none recorded means v0.10.2's).
            if v0_policy is not None:
                trace = {**trace, "config": {**trace["config"], "policy": v0_policy}}
        wanted = trace.get("versions")
        if wanted and version not in wanted:
            skip(path, f"only {', '.join(wanted)}")
            continue
        try:
            done, diff = replay(trace)
        except NotApplicable as why:
            skip(path, str(why))
            continue
        if key is not None:
            replayed_keys.add(key)  # only once it ran: a pair's other trace is replayed if this one was not
        replayed += 1
        ops += done
        if diff:
            failures.append(f"{path.relative_to(TRACES)}: {diff}")
    gap = "; ".join(g for g in (gap, v0_gap) if g) or None
    if replayed == 0 and gap is None:
        raise NotApplicable("no trace applies to this vLLM: " + (_reasons(skipped) or "corpus empty"))
    count = sum(len(names) for names in skipped.values())
    detail = f"{replayed} traces replayed" + (f", {count} skipped ({_reasons(skipped)})" if skipped else "")
    if failures:
        return Result(False, replayed, ops, detail + "; diverged: " + " | ".join(failures),
                      {"failure": "divergence"})
    if gap is not None:
        return Result(False, replayed, ops, f"harness error (not a verdict on vLLM or the reference): "
                      f"some traces cannot be replayed: {gap}; {detail}", {"failure": "harness_error"})
    return Result(True, replayed, ops, detail, {"skipped": skipped})


def _reasons(skipped: dict[str, list[str]]) -> str:
    """Each skip reason once, with how many traces it covers."""
    return "; ".join(f"{len(names)} x {reason}" for reason, names in skipped.items())


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
