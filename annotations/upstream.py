"""Fetch pinned vLLM source files from vLLM's release artifacts, verified by hash.

No vLLM source is committed to this repository. This module obtains the sdist of a pinned vLLM
release by package name and version through the package index that pip is configured to use
(PEP 691 JSON simple API), checks the sha256 that the index publishes for it, caches the archive
outside the clone, and extracts single files on demand. A local vLLM git checkout can stand in for
the index (``--checkout PATH``), e.g. on a machine without registry access.

The index address is never written here: it comes from ``PIP_INDEX_URL``, then pip's own
configuration, then pip's built-in default.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import urllib.parse
import urllib.request
from pathlib import Path

PACKAGE = "vllm"
CACHE = Path(os.environ.get("PASTUDY_CACHE", Path.home() / ".cache" / "pagedattention-study"))


class UpstreamError(RuntimeError):
    """The pinned upstream bytes could not be obtained or did not verify."""


def index_url() -> str:
    """The simple-index base URL pip would use (environment, then pip config, then pip default)."""
    env = os.environ.get("PIP_INDEX_URL")
    if env:
        return env.rstrip("/") + "/"
    out = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.index-url"],
        capture_output=True, text=True, check=False,
    )
    if out.returncode == 0 and out.stdout.strip():
        return out.stdout.strip().rstrip("/") + "/"
    # pip's built-in default index, read in a child process: importing pip here would make
    # setuptools' distutils shim step aside for the rest of this process (its spec_for_pip hook),
    # and a later ``import setuptools`` (torch.utils.cpp_extension) would then fail its assertion.
    default = subprocess.run(
        [sys.executable, "-c", "from pip._internal.models.index import PyPI; print(PyPI.simple_url)"],
        capture_output=True, text=True, check=False,
    )
    if default.returncode != 0 or not default.stdout.strip():
        raise UpstreamError(f"cannot read pip's default index: {default.stderr.strip()[-500:]}")
    return default.stdout.strip().rstrip("/") + "/"


def _get(url: str, accept: str | None = None) -> bytes:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=120) as resp:  # noqa: S310 (index URL from pip config)
        return resp.read()


def sdist_path(version: str) -> Path:
    """Return the cached, sha256-verified sdist of ``vllm==version``, downloading it if needed."""
    target = CACHE / "sdist" / f"{PACKAGE}-{version}.tar.gz"
    digest_file = target.with_suffix(".sha256")
    if target.exists() and digest_file.exists():
        if hashlib.sha256(target.read_bytes()).hexdigest() == digest_file.read_text().strip():
            return target
    page = json.loads(_get(index_url() + PACKAGE + "/", "application/vnd.pypi.simple.v1+json"))
    name = f"{PACKAGE}-{version}.tar.gz"
    files = [f for f in page.get("files", []) if f["filename"] == name]
    if not files:
        raise UpstreamError(f"the index lists no sdist {name} for package {PACKAGE!r}")
    entry = files[0]
    expected = entry.get("hashes", {}).get("sha256")
    if not expected:
        raise UpstreamError(f"the index publishes no sha256 for {name}; refusing unverified bytes")
    url = urllib.parse.urljoin(index_url() + PACKAGE + "/", entry["url"])
    data = _get(url)
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise UpstreamError(f"{name}: sha256 {actual} does not match the index's {expected}")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".part")
    tmp.write_bytes(data)
    tmp.replace(target)
    digest_file.write_text(expected + "\n")
    return target


def read_file(version: str, path: str, checkout: Path | None = None) -> bytes:
    """The bytes of upstream ``path`` (e.g. ``vllm/core/block_manager.py``) at ``version``."""
    if checkout is not None:
        out = subprocess.run(
            ["git", "-C", str(checkout), "show", f"v{version}:{path}"], capture_output=True, check=False
        )
        if out.returncode != 0:
            raise UpstreamError(f"{checkout}: no {path} at tag v{version}: {out.stderr.decode().strip()}")
        return out.stdout
    extracted = cached_file(version, path)
    if extracted.exists():
        return extracted.read_bytes()
    with tarfile.open(sdist_path(version)) as tar:
        prefix = f"{PACKAGE}-{version}/"
        try:
            member = tar.getmember(prefix + path)
        except KeyError:
            raise UpstreamError(f"the vllm {version} sdist has no file {path}") from None
        handle = tar.extractfile(member)
        if handle is None:
            raise UpstreamError(f"{path} in the vllm {version} sdist is not a regular file")
        data = handle.read()
    store_file(version, path, data)
    return data


def cached_file(version: str, path: str) -> Path:
    """Where the extracted bytes of upstream ``path`` at ``version`` are cached."""
    if path.startswith("/") or ".." in path.split("/"):
        raise UpstreamError(f"upstream path {path!r} must be relative and stay inside the release")
    return CACHE / "files" / version / path


def store_file(version: str, path: str, data: bytes) -> Path:
    """Cache bytes obtained elsewhere (a verified checkout) so later reads work offline."""
    target = cached_file(version, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(target)
    return target


def release_commit(version: str, checkout: Path | None = None) -> str:
    """The commit a release was built from: the tag's commit in a checkout, else the sdist's record.

    setuptools-scm writes ``commit_id = 'g<hex>'`` into the sdist's ``vllm/_version.py``; a git
    checkout does not track that generated file, so there the tag itself is resolved.
    """
    if checkout is not None:
        out = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", f"v{version}^{{commit}}"], capture_output=True, check=False
        )
        if out.returncode != 0:
            raise UpstreamError(f"{checkout}: no tag v{version}: {out.stderr.decode().strip()}")
        return out.stdout.decode().strip()
    text = read_file(version, "vllm/_version.py").decode("utf-8", "replace")
    match = re.search(r"commit_id\s*=\s*['\"]g?([0-9a-f]+)['\"]", text)
    if not match:
        raise UpstreamError(f"the vllm {version} sdist records no commit_id in vllm/_version.py")
    return match[1]


def release_files(version: str) -> list[str]:
    """Every file path in the vllm ``version`` sdist (relative to the release root), cached."""
    listing = CACHE / "listing" / f"{version}.txt"
    if listing.exists():
        return listing.read_text(encoding="utf-8").split("\n")
    prefix = f"{PACKAGE}-{version}/"
    with tarfile.open(sdist_path(version)) as tar:
        names = sorted(m.name[len(prefix):] for m in tar.getmembers() if m.isfile() and m.name.startswith(prefix))
    listing.parent.mkdir(parents=True, exist_ok=True)
    tmp = listing.with_suffix(".part")
    tmp.write_text("\n".join(names), encoding="utf-8")
    tmp.replace(listing)
    return names
