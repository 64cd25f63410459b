"""The change log: every release's policy and API computed from one record of changes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from conformance import changelog
from conformance.release_api import KernelApi, V0Api, V1Api
from reference.blocks.policies import V0_V0_10_2, V0Policy, V1Policy

TABLE = Path(__file__).parent / "data" / "table-at-3e581e2.json"


def _fields(record) -> dict | None:
    return None if record is None else {k: v for k, v in dataclasses.asdict(record).items() if k != "name"}


@pytest.mark.parametrize("release", sorted(json.loads(TABLE.read_text())["releases"], key=changelog.release_key))
def test_the_log_computes_what_the_hand_written_table_gave(release):
    """Catches: a change entry with the wrong first release or value, so that some release gets
    another policy or API than the hand-built table (43 releases, every field) gave it before the
    log replaced the table. ``cached_map_wrapped`` is no longer logged: the adapter reads the
    prefix-cache map's shape from the installed code."""
    expected = json.loads(TABLE.read_text())["releases"][release]
    api = changelog.api_at(release)
    if expected["v1_api"] is not None:
        expected["v1_api"].pop("cached_map_wrapped")
    got = {
        "v1_policy": _fields(changelog.v1_policy_at(release)) if api.v1 else None,
        "v0_policy": _fields(changelog.v0_policy_at(release)) if api.v0 else None,
        "v1_api": _fields(api.v1), "v0_api": _fields(api.v0), "kernels": _fields(api.kernels),
    }
    assert got == expected


def test_the_log_is_well_formed():
    """Catches: a field without a value before its first change, a change naming a field that does
    not exist, two changes of one field out of order, or an entry that changes nothing."""
    assert changelog.check_log() == []


def test_check_log_finds_a_change_that_changes_nothing(monkeypatch):
    """Catches: a check_log that cannot fail (an entry repeating the previous value passes)."""
    noop = changelog.Change("min_block_size", "0.30.0", 1, "nothing", "nothing", "")
    monkeypatch.setitem(changelog.LOGS, KernelApi, changelog.KERNEL_API_LOG + (noop,))
    assert any("keeps the value 1" in p for p in changelog.check_log())


def test_every_record_field_has_a_value_before():
    """Catches: a new field added to a record but not to INITIAL (every release would crash)."""
    for record in (V1Policy, V0Policy, V1Api, V0Api, KernelApi):
        names = {f.name for f in dataclasses.fields(record)} - {"name"}
        assert set(changelog.INITIAL[record]) == names, record.__name__


def test_a_change_applies_from_its_first_release_on():
    """Catches: a change applied one release early or late (release_key order, post releases and
    four-part hotfix versions included)."""
    assert changelog.v1_policy_at("0.27.0").caching_off_frees_to_front is False
    assert changelog.v1_policy_at("0.26.0").caching_off_frees_to_front is True
    assert changelog.v1_policy_at("0.28.0").caching_off_frees_to_front is True
    assert changelog.release_key("0.9.0") < changelog.release_key("0.9.0.1") < changelog.release_key("0.9.1")
    assert changelog.release_key("0.6.3") < changelog.release_key("0.6.3.post1") < changelog.release_key("0.6.4")


def test_the_reference_default_v0_policy_is_the_logged_one():
    """Catches: the reference V0 manager's default (the annotated 0.10.2) drifting from the log."""
    assert V0_V0_10_2 == changelog.v0_policy_at("0.10.2")


def test_policy_names_refuse_releases_without_the_mechanism():
    """Catches: a trace naming a V1 policy for a release with no V1 BlockPool (0.7.3) silently
    replayed under the log's initial values."""
    assert changelog.policy_named("v0.33.0") == changelog.v1_policy_at("0.33.0")
    with pytest.raises(KeyError, match="no V1 BlockPool"):
        changelog.policy_named("v0.7.3")
    with pytest.raises(KeyError, match="no V0 block manager"):
        changelog.policy_named("v0.33.0", V0Policy)
    with pytest.raises(KeyError, match="v<release>"):
        changelog.policy_named("0.33.0")


def test_every_change_names_its_release_in_its_citations():
    """Catches: an upstream citation in the log without its release (the checker would have to
    guess which release's bytes it means)."""
    for log in changelog.LOGS.values():
        for change in log:
            assert change.upstream.startswith(("v0.", "before: v0.")), (change.field, change.first)
