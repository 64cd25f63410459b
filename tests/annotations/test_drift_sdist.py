"""``upstream.fetch.sdist``: any release's sdist by package name and version, verified by sha256.

The index is faked (``fetch._get`` serves a JSON simple page and the archive bytes), so no
network is used and nothing outside a temporary cache is written.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from upstream import fetch

ARCHIVE = b"not really a tarball, but bytes with a known sha256"
INDEX = "https://index.invalid/simple/"


@pytest.fixture
def fake_index(tmp_path, monkeypatch):
    """A fake index listing ``vllm-0.34.0.tar.gz`` with a sha256; returns the served entries and a request log."""
    monkeypatch.setattr(fetch, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(fetch, "index_url", lambda: INDEX)
    entry = {"filename": "vllm-0.34.0.tar.gz", "url": "../../files/vllm-0.34.0.tar.gz",
             "hashes": {"sha256": hashlib.sha256(ARCHIVE).hexdigest()}}
    served = {"files": [entry], "bytes": ARCHIVE}
    requests: list[str] = []

    def get(url, accept=None):
        requests.append(url)
        if url == INDEX + "vllm/":
            return json.dumps({"files": served["files"]}).encode()
        if url.endswith("/files/vllm-0.34.0.tar.gz"):
            return served["bytes"]
        raise AssertionError(f"unexpected request {url}")

    monkeypatch.setattr(fetch, "_get", get)
    return served, requests


def test_sdist_verifies_against_the_index_and_records_the_hash(fake_index):
    """Catches: an sdist accepted without comparing its bytes to the index's published sha256, or a
    record that names another hash than the bytes have."""
    _, requests = fake_index
    found = fetch.sdist("0.34.0")
    assert (found.filename, found.sha256) == ("vllm-0.34.0.tar.gz", hashlib.sha256(ARCHIVE).hexdigest())
    assert found.path.read_bytes() == ARCHIVE
    assert (found.path.parent / "vllm-0.34.0.tar.sha256").read_text().strip() == found.sha256
    assert requests == [INDEX + "vllm/", "https://index.invalid/files/vllm-0.34.0.tar.gz"]
    requests.clear()
    assert fetch.sdist("0.34.0") == found and requests == []  # the verified cache, offline


def test_sdist_refuses_bytes_that_do_not_match_and_caches_nothing(fake_index):
    """Catches: tampered or truncated bytes cached and used as if they were the release."""
    served, _ = fake_index
    served["bytes"] = ARCHIVE + b"tampered"
    with pytest.raises(fetch.UpstreamError, match="does not match the index"):
        fetch.sdist("0.34.0")
    assert not (fetch.CACHE / "sdist" / "vllm-0.34.0.tar.gz").exists()


def test_sdist_refuses_an_entry_without_a_sha256_or_a_missing_release(fake_index):
    """Catches: unverifiable bytes accepted, or a release the index does not list silently skipped."""
    served, _ = fake_index
    served["files"][0]["hashes"] = {}
    with pytest.raises(fetch.UpstreamError, match="no sha256"):
        fetch.sdist("0.34.0")
    with pytest.raises(fetch.UpstreamError, match="lists no sdist"):
        fetch.sdist("0.99.0")
    with pytest.raises(fetch.UpstreamError, match="not a package name"):
        fetch.sdist("0.34.0", package="../etc")
