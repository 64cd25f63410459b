"""The corpus at releases whose policy no trace records: V1 traces replayed under the installed
release's policy."""

from __future__ import annotations

import json

import pytest

from conformance import corpus
from conformance.lockstep import replay
from conformance.versions import distinct_v1_policy_names

V1_TRACES = [p for p in corpus.corpus() if p.parent.name == "v1"]


def installed_as(monkeypatch, release: str, policy=None) -> None:
    """Make the corpus see vLLM ``release`` installed, with the V1 policy ``v<release>`` (or the
    ``policy`` callable given); the mechanisms come from the change log, not this env's files."""
    monkeypatch.setattr(corpus, "installed_policy", policy or (lambda: f"v{release}"))
    monkeypatch.setattr("conformance.versions.installed_vllm_version", lambda: release)
    monkeypatch.setattr("conformance.versions.installed_mechanisms", lambda: None)


def recorded_replays(monkeypatch, field: str) -> list:
    """Replace the corpus's replay by one that records each trace's config ``field`` and passes."""
    replayed = []

    def fake_replay(trace):
        replayed.append(trace["config"].get(field))
        return len(trace["ops"]), None

    monkeypatch.setattr(corpus, "replay", fake_replay)
    return replayed


def retention_pin_trace() -> dict:
    """The committed two-group trace with a retention interval (a fresh copy)."""
    return json.loads(next(p for p in V1_TRACES if "retention-shared-prefix-pin" in p.name).read_text())


def test_retargeted_trace_takes_the_policy_and_drops_release_pinned_expectations():
    """Catches: a retargeted replay checking one release's pinned test expectations against
    another release, or still running under the recorded release's policy."""
    trace = json.loads(next(p for p in V1_TRACES if "test-prefill-v0.33.0" in p.name).read_text())
    out = corpus.retargeted(trace, "v0.20.2")
    assert out["config"]["policy"] == "v0.20.2" and "expect" not in out
    assert trace["config"]["policy"] == "v0.33.0" and "expect" in trace  # the original is untouched


@pytest.mark.parametrize("policy", distinct_v1_policy_names())
def test_every_v1_trace_replays_under_every_policy(policy):
    """Catches: a corpus op that some release's policy refuses in the reference itself (the
    retargeted corpus would then report a divergence that is the harness's), for every trace whose
    groups the release accepts."""
    for path in V1_TRACES:
        trace = corpus.retargeted(json.loads(path.read_text()), policy)
        if not corpus.layout_accepted(trace):  # the corpus skips it there, saying so
            continue
        trace["config"]["peer"] = "reference"
        done, diff = replay(trace)
        assert diff is None and done == len(trace["ops"]), (path.name, diff)


def test_at_an_unpinned_release_each_config_and_op_sequence_is_replayed_once(monkeypatch):
    """Catches: the pinned pair of a trace (same config, hash function aside, and ops, two
    releases) replayed twice, or skipped: of the 11 V1 traces, 5 pinned pairs and one single trace
    are 6 replays at 0.20.2."""
    installed_as(monkeypatch, "0.20.2")
    replayed = recorded_replays(monkeypatch, "policy")
    result = corpus.run_corpus()
    assert len(V1_TRACES) == 11 and replayed.count("v0.20.2") == 6
    assert result.passed


def test_a_release_the_v1_harness_cannot_drive_is_a_harness_error_not_a_pass(monkeypatch):
    """Catches: V1 traces silently skipped at a release whose V1 manager the adapter cannot drive
    (the corpus would pass on V0 traces alone)."""
    from conformance.versions import HarnessError

    def gap():
        raise HarnessError("vLLM 0.9.2 has a V1 KVCacheManager, but no block_hasher")

    installed_as(monkeypatch, "0.9.2", policy=gap)
    monkeypatch.setattr(corpus, "replay", lambda trace: (len(trace["ops"]), None))
    result = corpus.run_corpus()
    assert not result.passed and result.extra["failure"] == "harness_error"
    assert "no block_hasher" in result.detail and f"{len(corpus.corpus()) - len(V1_TRACES)} traces replayed" in result.detail


def test_a_trace_replayed_where_only_the_builtin_hash_exists_uses_it():
    """Catches: a corpus trace retargeted to 0.8.0-0.8.2 keeping sha256, which those releases do not
    offer (V1Policy.builtin_hash_only), so the whole corpus was a harness error there
    ("unknown hash function 'sha256'")."""
    trace = {"config": {"policy": "v0.33.0", "hash_fn": "sha256_cbor"}, "ops": []}
    assert corpus.retargeted(trace, "v0.8.2")["config"]["hash_fn"] == "builtin"
    assert corpus.retargeted(trace, "v0.9.2")["config"]["hash_fn"] == "sha256"


def test_a_retargeted_trace_drops_settings_the_release_lacks():
    """Catches: a retention interval, an in-flight count or the whole-sequence admission flag kept
    for a release without them (its manager would refuse the trace, a harness failure rather than
    a verdict), or dropped for a release that has them."""
    trace = retention_pin_trace()
    trace["config"]["max_in_flight_tokens"] = 8
    trace["ops"][2]["full_sequence_must_fit"] = True
    old = corpus.retargeted(trace, "v0.20.2")
    assert "retention_interval" not in old["config"] and "max_in_flight_tokens" not in old["config"]
    assert not any("full_sequence_must_fit" in op for op in old["ops"])
    new = corpus.retargeted(trace, "v0.29.0")
    assert new["config"]["retention_interval"] == 0 and "max_in_flight_tokens" in new["config"]
    assert new["ops"][2]["full_sequence_must_fit"] is True
    between = corpus.retargeted(trace, "v0.26.0")  # admission, but no retention interval yet
    assert "retention_interval" not in between["config"] and between["config"]["max_in_flight_tokens"] == 8
    assert between["ops"][2]["full_sequence_must_fit"] is True


def test_layout_accepted_follows_the_release():
    """Catches: a two-group layout taken as accepted by a release whose manager takes one group
    (before 0.9.1), or refused where the release accepts it."""
    trace = retention_pin_trace()
    assert not corpus.layout_accepted(corpus.retargeted(trace, "v0.8.5"))
    assert corpus.layout_accepted(corpus.retargeted(trace, "v0.10.2"))


def test_the_corpus_skips_a_trace_whose_groups_the_release_refuses(monkeypatch):
    """Catches: a two-group trace replayed at 0.8.5, whose manager takes one group (the reference
    would refuse the config and the corpus would fail with an error that is the harness's)."""
    installed_as(monkeypatch, "0.8.5")
    replayed = recorded_replays(monkeypatch, "groups")
    result = corpus.run_corpus()
    assert result.passed and "groups v0.8.5 refuses" in result.detail
    assert all(len(groups) == 1 for groups in replayed if groups is not None)


def test_the_replay_key_keeps_what_changes_a_replay_and_drops_the_policy_and_hash():
    """Catches: a key of groups and ops only (two traces differing in pool size, retention or
    in-flight count would be replayed once), or one that keeps the policy or the hash function
    (a pinned pair would be replayed twice)."""
    trace = retention_pin_trace()
    key = corpus.replay_key(trace)
    for field, value in (("num_blocks", 33), ("retention_interval", None), ("max_in_flight_tokens", 8)):
        assert corpus.replay_key({**trace, "config": {**trace["config"], field: value}}) != key
    for field, value in (("policy", "v0.10.2"), ("hash_fn", "sha256_cbor")):
        assert corpus.replay_key({**trace, "config": {**trace["config"], field: value}}) == key


def test_a_pair_member_that_does_not_apply_leaves_the_other_to_be_replayed(monkeypatch):
    """Catches: the replay key marked as seen before the trace is known to apply (a trace the
    release skips would stop its pinned twin from ever being replayed)."""
    installed_as(monkeypatch, "0.20.2")
    replays = 0

    def fake_replay(trace):
        nonlocal replays
        if trace["semantics"] != "v1":
            return len(trace["ops"]), None
        if trace["config"].get("hash_fn") == "sha256_cbor":  # the first of the test-prefill pair
            raise corpus.NotApplicable("not here")
        replays += 1
        return len(trace["ops"]), None

    monkeypatch.setattr(corpus, "replay", fake_replay)
    assert corpus.run_corpus().passed
    assert replays == 6
