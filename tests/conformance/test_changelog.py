"""The change log: every release's policy and API computed from one record of changes."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from annotations import citations
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
    # Fields added since the table (the 0.8.0-0.8.4 ones) are checked below; here only its own.
    for name, record in got.items():
        if record is not None and expected[name] is not None:
            got[name] = {k: v for k, v in record.items() if k in expected[name]}
    assert got == expected


# Every field added with the 0.8.0-0.8.4 releases, with its value at each of them and from 0.8.5 on
# (read from the sdists: v0.8.x vllm/v1/core/kv_cache_manager.py, kv_cache_utils.py, block_pool.py,
# request.py, vllm/attention/ops/chunked_prefill_paged_decode.py).
V08_FIELDS = {
    (V1Policy, "preallocate_tokens"): {"0.8.0": 64, "0.8.2": 64, "0.8.3": 64, "0.8.4": 64, "0.8.5": 0},
    (V1Policy, "lookahead_supported"): {"0.8.0": False, "0.8.3": False, "0.8.4": True, "0.8.5": True},
    (V1Policy, "none_hash_seed_inverted"): {"0.8.0": False, "0.8.2": False, "0.8.3": True, "0.8.4": True,
                                            "0.8.5": False},
    (V1Policy, "builtin_hash_only"): {"0.8.0": True, "0.8.1": True, "0.8.2": True, "0.8.3": False},
    (V1Policy, "pool_has_null_block"): {"0.8.0": False, "0.8.2": False, "0.8.3": True},
    (V1Policy, "sliding_window_managed"): {"0.8.0": False, "0.8.2": False, "0.8.3": True},
    (V1Policy, "lookup_leaves_last_token"): {"0.8.0": False, "0.8.2": False, "0.8.3": True},
    (V1Api, "manager_takes_kv_cache_config"): {"0.8.0": False, "0.8.2": False, "0.8.3": True},
    (V1Api, "manager_hash_algo_arg"): {"0.8.2": False, "0.8.3": True, "0.10.0": True, "0.10.1": False},
    (V1Api, "allocate_lookahead_arg"): {"0.8.3": False, "0.8.4": True},
    (V1Api, "request_prompt_arg"): {"0.8.0": True, "0.8.4": True, "0.8.5": False},
    (KernelApi, "paged_2d_max_seq_len_arg"): {"0.8.0": False, "0.8.2": False, "0.8.3": True},
    (KernelApi, "paged_2d_rocm_check_bound_at_import"): {"0.8.0": False, "0.8.2": False, "0.8.3": True,
                                                         "0.10.0": True, "0.10.1": False},
}
# ... and at 0.33.0, the behaviour every later release has.
V08_LATEST = {key: values[max(values, key=changelog.release_key)] for key, values in V08_FIELDS.items()}


def _value(record: type, field: str, release: str):
    if record is V1Policy:
        return getattr(changelog.v1_policy_at(release), field)
    return getattr(changelog.api_at(release).v1 if record is V1Api else changelog.api_at(release).kernels, field)


@pytest.mark.parametrize("record, field", sorted(V08_FIELDS, key=lambda k: (k[0].__name__, k[1])),
                         ids=lambda v: getattr(v, "__name__", v))
def test_the_0_8_fields_have_the_values_read_from_the_sdists(record, field):
    """Catches: a field of the 0.8.0-0.8.4 releases logged with the wrong first release or value
    (e.g. preallocation ending at 0.8.4 instead of 0.8.5, or the inverted NONE_HASH test put on
    0.8.2), or one that later releases do not keep at its last logged value."""
    for release, value in V08_FIELDS[(record, field)].items():
        assert _value(record, field, release) == value, (field, release)
    assert _value(record, field, "0.33.0") == V08_LATEST[(record, field)], (field, "0.33.0")


def test_the_0_8_releases_have_every_mechanism_they_ship():
    """Catches: 0.8.0-0.8.4 logged without the Triton kernel their sdists have
    (vllm/attention/ops/chunked_prefill_paged_decode.py), which made every kernel property a
    harness error there ("has Triton kernels, but no known release has one to drive it as")."""
    for release in ("0.8.0", "0.8.1", "0.8.2", "0.8.3", "0.8.4"):
        api = changelog.api_at(release)
        assert api.v1 is not None and api.v0 is not None and api.kernels is not None, release
    assert changelog.api_at("0.7.3").kernels is None


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


# Log entries whose ``upstream`` may cite a ``.py`` file without line numbers, as
# (record, field, first release) with the reason in a comment. None: every entry cites the lines
# that show its claim, and a bare file is a claim that ``python -m annotations check`` cannot verify.
BARE_FILE_ALLOWED: set[tuple[str, str, str]] = set()

#: A ``.py`` path not followed by ``:<line>`` or `` L<line>``.
_BARE_PY = re.compile(r"[\w./-]*\.py\b(?!:\d| L\d)")


def _bare_files(upstream: str) -> list[str]:
    return _BARE_PY.findall(upstream)


def test_every_upstream_citation_names_its_lines():
    """Catches: an entry whose upstream names a file without its lines (e.g. ``v0.9.1
    vllm/v1/core/kv_cache_coordinator.py``, or ``before: v0.22.1 vllm/v1/core/block_pool.py has no
    prepend``): the citation checker verifies cited lines only, so such a claim goes unchecked."""
    assert _bare_files("v0.9.1 vllm/a.py; v0.9.1 vllm/b.py:3, c.py L4-L5 (d.py)") == ["vllm/a.py", "d.py"]
    bare = [
        (record.__name__, change.field, change.first, found)
        for record, log in changelog.LOGS.items() for change in log
        if (record.__name__, change.field, change.first) not in BARE_FILE_ALLOWED
        and (found := _bare_files(change.upstream))
    ]
    bare += [("NotAField", entry.kind, entry.first, found)
             for entry in changelog.NOT_FIELDS if (found := _bare_files(entry.upstream))]
    assert bare == []


def test_each_upstream_citation_is_checked_at_the_release_it_names():
    """Catches: a citation whose release is written at the end of the previous source line
    (``...; v0.23.0 "`` then ``"block_pool.py:419-440``), which the citation checker reads at the
    release of the line before (0.24.0) and so verifies other lines than the entry means."""
    source = Path(changelog.__file__)
    checked = {(c.version, c.path, c.start, c.end) for c in citations.find(source)}
    entries = [(change.field, change.upstream) for log in changelog.LOGS.values() for change in log]
    entries += [(entry.what, entry.upstream) for entry in changelog.NOT_FIELDS]
    wrong = [
        (name, f"v{c.version} {c.path}:{c.start}-{c.end}")
        for name, upstream in entries
        for c in citations.find_python(source, upstream)
        if (c.version, c.path, c.start, c.end) not in checked
    ]
    assert wrong == []


def test_the_0_7_0_v0_api_is_the_one_its_sdist_has():
    """Catches: reset_prefix_cache and per-sequence get_seqs logged from 0.7.2 although 0.7.0 has
    both (v0.7.0 vllm/core/block_manager.py:458-459, vllm/sequence.py:822-832), so that 0.7.0 and
    0.7.1, which are measured, were driven without the reset the installed code offers."""
    for release in ("0.7.0", "0.7.1"):
        v0 = changelog.api_at(release).v0
        assert v0 is not None and v0.reset_prefix_cache and v0.group_status_per_sequence, release
    v0 = changelog.api_at("0.6.6.post1").v0
    assert v0 is not None and not v0.reset_prefix_cache and not v0.group_status_per_sequence
