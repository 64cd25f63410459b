"""The installed vLLM: one reader of its version, and the known release it is driven as."""

from __future__ import annotations

import importlib.metadata
import pathlib
import re

import pytest

from conformance import versions
from conformance.lockstep import NotApplicable
from conformance.release_api import Mechanisms

ROOT = pathlib.Path(__file__).resolve().parents[2]
ALL = Mechanisms(v0_block_manager=True, v1_block_pool=True, triton_kernels=True)
V1_ONLY = Mechanisms(v0_block_manager=False, v1_block_pool=True, triton_kernels=True)


# The measured releases these tests assume (a fixed set, so that a release newly added to
# conformance/reports/matrix.json does not change what they expect).
MEASURED = frozenset({"0.6.6.post1", "0.7.3", "0.8.5.post1", "0.9.2", "0.10.2", "0.11.2", "0.12.0", "0.13.0",
                      "0.14.1", "0.15.0", "0.15.1", "0.16.0", "0.17.1", "0.18.1", "0.19.1", "0.20.1", "0.20.2",
                      "0.21.0", "0.22.1", "0.23.0", "0.24.0", "0.25.1", "0.26.0", "0.27.1", "0.28.0", "0.29.0",
                      "0.30.0", "0.31.0", "0.32.0", "0.33.0"})


@pytest.fixture(autouse=True)
def fixed_matrix(monkeypatch):
    real = versions.measured_releases
    monkeypatch.setattr(versions, "measured_releases", lambda matrix=None: MEASURED if matrix is None else real(matrix))


def fake_installed(monkeypatch, raw: str | None, mechanisms: Mechanisms | None = None) -> None:
    """vLLM's package metadata says ``raw`` (None: not installed); its files show ``mechanisms``
    (None: its package directory is not found, so the change log decides)."""
    def version(name: str) -> str:
        assert name == "vllm"
        if raw is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return raw

    monkeypatch.setattr(versions.importlib.metadata, "version", version)
    monkeypatch.setattr(versions, "installed_mechanisms", lambda: mechanisms)


def test_local_suffix_is_dropped(monkeypatch):
    """Catches: a ``0.10.2+cu128`` build seen as present by one reader and as unknown by another."""
    fake_installed(monkeypatch, "0.10.2+cu128")
    assert versions.installed_vllm_version() == "0.10.2"
    assert versions.installed_v1_policy_name() == "v0.10.2"
    assert versions.installed_target().exact


def test_absent_vllm_is_none_and_not_applicable(monkeypatch):
    """Catches: a missing vLLM reported as a crash instead of "not installed"."""
    fake_installed(monkeypatch, None)
    assert versions.installed_vllm_version() is None
    with pytest.raises(NotApplicable, match="not installed"):
        versions.installed_target()


@pytest.mark.parametrize("raw, driven_as", [
    ("0.33.1.dev12+g1a2b3c4", "0.33.0"),   # a source build after 0.33.0
    ("0.34.0rc1", "0.33.0"),               # a release candidate sorts before its release
    ("0.34.0.dev3", "0.33.0"),
    ("0.99.0", "0.33.0"),                  # newer than every known release
    ("0.10.1", "0.9.2"),                   # a published release between two measured ones
    ("0.10.1.1", "0.9.2"),                 # a four-part hotfix
    ("0.6.6.post1+cpu", "0.6.6.post1"),
])
def test_any_version_is_driven_as_the_nearest_earlier_known_release(monkeypatch, raw, driven_as):
    """Catches: a dev build, an rc, a local build, a hotfix or a release newer than the table
    ending in a traceback ("not a final vLLM release") or in "not applicable" for mechanisms it
    has, instead of being driven as the nearest known release at or before it."""
    fake_installed(monkeypatch, raw, ALL)
    target = versions.installed_target()
    assert target.release == driven_as
    public = raw.split("+")[0]
    if public == driven_as:
        assert target.exact and target.note is None
    else:
        assert not target.exact
        assert target.note == f"{public} is not in the measured matrix: driven as {driven_as}"
        assert versions.installed_v1_policy_name() == f"v{driven_as}"


def test_a_measured_earlier_patch_is_driven_as_itself_not_as_its_series_latest(monkeypatch):
    """Catches: 0.14.0, measured in its own environment, driven as 0.14.1 (the later patch whose
    sources it was once read as equal to) or as 0.13.0, instead of under its own policy and API."""
    fake_installed(monkeypatch, "0.14.0", V1_ONLY)
    unmeasured = versions.installed_target()  # never a later release: nothing is read as measured
    assert unmeasured.release == "0.13.0" and unmeasured.note == "0.14.0 is not in the measured matrix: driven as 0.13.0"
    monkeypatch.setattr(versions, "measured_releases", lambda matrix=None: MEASURED | {"0.14.0"})
    target = versions.installed_target()
    assert target.release == "0.14.0" and target.exact and target.note is None
    assert versions.installed_v1_policy_name() == "v0.14.0"


def test_pep440_order():
    """Catches: 0.34.0rc1 sorted after 0.34.0, or a dev build after the release it precedes."""
    order = ["0.33.0", "0.33.0.post1", "0.33.1.dev2", "0.33.1rc1", "0.33.1", "0.33.1.1", "0.34.0.dev0",
             "0.34.0rc1", "0.34.0", "0.34.0.post1"]
    keys = [versions.parse_version(v).key() for v in order]
    assert keys == sorted(keys)
    for bad in ("", "latest", "0.33.0-beta", "abc1.2"):
        with pytest.raises(ValueError):
            versions.parse_version(bad)


def test_unreadable_metadata_is_a_harness_error_not_a_traceback(monkeypatch):
    """Catches: a vLLM whose metadata version is garbage ending the run with a ValueError."""
    fake_installed(monkeypatch, "not-a-version", ALL)
    with pytest.raises(versions.HarnessError, match="cannot read"):
        versions.installed_target()


def test_mechanisms_come_from_the_installed_files(monkeypatch):
    """Catches: a source build that dropped the V0 block manager (files absent) driven through the
    V0 adapter because the release it is driven as had one; and a release with a V1 BlockPool but
    no earlier known release with one (0.8.2) reported as not applicable instead of a harness error."""
    fake_installed(monkeypatch, "0.10.2.dev1", V1_ONLY)
    with pytest.raises(NotApplicable, match="no vllm/core/block_manager.py in the installed package"):
        versions.installed_v0()
    fake_installed(monkeypatch, "0.8.2", ALL)
    with pytest.raises(versions.HarnessError, match="has a V1 BlockPool.*scripts/version-matrix 0.8.2"):
        versions.installed_v1()
    target, api = versions.installed_v0()
    assert target.release == "0.7.3" and api.reset_prefix_cache
    fake_installed(monkeypatch, "0.7.3", Mechanisms(v0_block_manager=True, v1_block_pool=False, triton_kernels=False))
    with pytest.raises(NotApplicable, match="does not have a V1 BlockPool"):
        versions.installed_v1()


def test_a_version_older_than_the_log_is_a_harness_error_for_what_it_has(monkeypatch):
    """Catches: 0.6.3.post1, which has the V0 block manager, answered "not applicable"."""
    fake_installed(monkeypatch, "0.6.3.post1", Mechanisms(v0_block_manager=True, v1_block_pool=False,
                                                          triton_kernels=False))
    with pytest.raises(versions.HarnessError, match="older than every release the change log knows"):
        versions.installed_v0()


def test_measured_releases_exclude_entries_driven_as_another(tmp_path):
    """Catches: a run driven as 0.33.0 recorded in the matrix and then counted as a measurement of
    the installed version (the fallback must never promote itself to a verdict)."""
    matrix = tmp_path / "matrix.json"
    matrix.write_text('{"releases": {"0.33.0": {}, "0.34.0": {"driven_as": "0.33.0"}, "0.35.0": {"driven_as": "0.35.0"}}}')
    assert versions.measured_releases(matrix) == {"0.33.0", "0.35.0"}


def test_no_version_string_comparisons_outside_the_versions_module():
    """Catches: a machine or adapter branching on a release string instead of a named field."""
    pattern = re.compile(r"""(==|!=|<|>)\s*["']v?0\.\d+\.\d+|["']v?0\.\d+\.\d+["']\s*(==|!=|<|>)|vllm\.__version__""")
    offenders = []
    for folder in ("conformance/adapters", "conformance/machines", "conformance/kernels"):
        for path in sorted((ROOT / folder).glob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, offenders
