"""The pinned vLLM environments really hold the pinned, importable vLLM."""

from importlib import metadata

import pytest

from tests.conformance.pinned import PINNED, PINNED_PROPERTIES


def test_pinned_vllm_imports_at_the_pinned_version():
    """Catches: a pinned environment whose vLLM is missing, another version, or fails to import
    (e.g. a transitive dependency that moved), which would otherwise only show as skipped tests."""
    if not PINNED:
        pytest.skip("not a pinned vLLM environment (PASTUDY_PINNED_VLLM unset)")
    assert PINNED in PINNED_PROPERTIES, f"no expectations recorded for pinned vLLM {PINNED}"
    try:
        installed = metadata.version("vllm")
    except metadata.PackageNotFoundError:
        pytest.fail(f"PASTUDY_PINNED_VLLM={PINNED} but vLLM is not installed")
    assert installed.split("+")[0] == PINNED
    import vllm  # noqa: F401  (an ImportError here is the failure this test exists for)


def test_expectations_name_registered_properties():
    """Catches: a required property name that no longer exists (the pinned run would refuse it
    with 'unknown property', or, worse, a prefix that matches nothing and requires nothing)."""
    from conformance.properties import all_properties

    names = set(all_properties())
    for release, props in PINNED_PROPERTIES.items():
        assert set(props) <= names, release


def test_unavailable_fails_only_where_the_pin_expects_it(monkeypatch):
    """Catches: the pinned-environment switch doing nothing (tests would still skip in CI), or
    failing tests for mechanisms the pinned release does not have (V0 at 0.33.0)."""
    import tests.conformance.pinned as pinned

    monkeypatch.setattr(pinned, "PINNED", "0.33.0")
    assert pinned.expected_here("v1.") and not pinned.expected_here("v0.")
    with pytest.raises(pytest.skip.Exception):
        pinned.unavailable("no V0 here", "v0.lifecycle")
    with pytest.raises(pytest.fail.Exception):
        pinned.unavailable("vLLM does not import", "v1.lifecycle")
    with pytest.raises(pytest.fail.Exception):
        pinned.unavailable("vLLM does not import")
    monkeypatch.setattr(pinned, "PINNED", "")
    with pytest.raises(pytest.skip.Exception):
        pinned.unavailable("vLLM does not import", "v1.lifecycle")
