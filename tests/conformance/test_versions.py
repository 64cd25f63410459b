"""The versions table: one reader of the installed vLLM, one row per release range."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import pathlib
import re

import pytest

from conformance import versions
from conformance.lockstep import NotApplicable
from reference.blocks.policies import V1_POLICIES

ROOT = pathlib.Path(__file__).resolve().parents[2]


def fake_installed(monkeypatch, raw: str | None) -> None:
    def version(name: str) -> str:
        assert name == "vllm"
        if raw is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return raw

    monkeypatch.setattr(versions.importlib.metadata, "version", version)


def test_local_suffix_is_dropped(monkeypatch):
    """Catches: a ``0.10.2+cu128`` build seen as present by one reader and as unknown by another."""
    fake_installed(monkeypatch, "0.10.2+cu128")
    assert versions.installed_vllm_version() == "0.10.2"
    assert versions.installed_v1_policy_name() == "v0.10.2"


def test_absent_vllm_is_none_and_not_applicable(monkeypatch):
    """Catches: a missing vLLM reported as a crash instead of "not installed"."""
    fake_installed(monkeypatch, None)
    assert versions.installed_vllm_version() is None
    with pytest.raises(NotApplicable, match="not installed"):
        versions.installed_release()


def test_release_outside_the_table_is_not_applicable_with_the_ranges(monkeypatch):
    """Catches: an unknown release silently given the nearest release's API (0.10.1 lies between
    the 0.9.2 and 0.10.2 rows and matches neither: its requests hash themselves, into int hashes)."""
    fake_installed(monkeypatch, "0.10.1")
    with pytest.raises(NotApplicable, match=r"0\.10\.1 is outside the release table"):
        versions.installed_release()
    fake_installed(monkeypatch, "0.6.3.post1")
    with pytest.raises(NotApplicable, match=r"0\.6\.3\.post1 is outside the release table"):
        versions.installed_release()


def test_version_key_orders_post_releases_and_refuses_garbage():
    """Catches: 0.6.3.post1 sorted before 0.6.3, or a pre-release silently treated as final."""
    assert versions.version_key("0.6.3") < versions.version_key("0.6.3.post1") < versions.version_key("0.6.4")
    assert versions.version_key("0.9.2") < versions.version_key("0.10.0")
    for bad in ("0.10.2rc1", "v0.10.2", "0.10", ""):
        with pytest.raises(ValueError):
            versions.version_key(bad)


def test_rows_do_not_overlap_and_name_known_policies():
    """Catches: two rows claiming the same release, or a row naming a policy the reference lacks."""
    rows = sorted(versions.RELEASES, key=lambda r: versions.version_key(r.first))
    for row in rows:
        assert versions.version_key(row.first) <= versions.version_key(row.last)
        assert row.v1_policy is None or row.v1_policy in V1_POLICIES
        assert row.v1_policy is None or row.v1_api is not None
        assert all(row.covers(m) for m in row.measured)
    for a, b in zip(rows, rows[1:]):
        assert versions.version_key(a.last) < versions.version_key(b.first)


def test_policy_names_mapping_asks_the_table():
    """Catches: the benchmarks' "is there a policy for this release" answer differing from the machines'."""
    assert versions.V1_POLICY_NAMES["0.33.0"] == "v0.33.0"
    assert "0.7.3" not in versions.V1_POLICY_NAMES and "garbage" not in versions.V1_POLICY_NAMES
    with pytest.raises(KeyError):
        versions.V1_POLICY_NAMES["0.7.3"]


def test_no_version_string_comparisons_outside_the_table():
    """Catches: a machine or adapter branching on a release string instead of a named field."""
    pattern = re.compile(r"""(==|!=)\s*["']v?0\.\d+\.\d+|["']v?0\.\d+\.\d+["']\s*(==|!=)|__version__""")
    offenders = []
    for folder in ("conformance/adapters", "conformance/machines"):
        for path in sorted((ROOT / folder).glob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, offenders


def test_a_v1_manager_the_adapter_cannot_drive_is_a_harness_error(monkeypatch):
    """Catches: a release that has the V1 manager reported "not applicable" because the harness
    cannot drive it (only a missing mechanism may be not applicable). Every V1 release in the
    table is driven today, so the gap is put on 0.9.2's row for the test."""
    fake_installed(monkeypatch, "0.9.2")
    row = versions.release_row("0.9.2")
    gapped = dataclasses.replace(row, v1_harness_gap="its manager cannot be built here")
    monkeypatch.setattr(versions, "RELEASES", tuple(gapped if r is row else r for r in versions.RELEASES))
    with pytest.raises(versions.HarnessError, match="has a V1 KVCacheManager, but its manager cannot be built"):
        versions.installed_v1_policy_name()
    fake_installed(monkeypatch, "0.7.3")
    with pytest.raises(NotApplicable, match="has no BlockPool"):
        versions.installed_v1_policy_name()
