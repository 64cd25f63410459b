"""Fetch pinned vLLM source files from vLLM's release artifacts, verified by hash.

No vLLM source is committed to this repository. This module obtains the sdist of a pinned vLLM
release by package name and version through the package index that pip is configured to use
(PEP 691 JSON simple API), checks the sha256 that the index publishes for it, caches the archive
outside the clone, and extracts files on demand (one pass over the archive per release and
process, :func:`read_file`). A local vLLM git checkout can stand in for
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
from dataclasses import dataclass
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
    with urllib.request.urlopen(req, timeout=120) as resp:  # the index URL comes from pip's config
        return resp.read()


@dataclass(frozen=True)
class Sdist:
    """A release's source archive as fetched: where it is cached and the sha256 it verified against."""

    package: str
    version: str
    filename: str  # as the index lists it, e.g. vllm-0.34.0.tar.gz
    sha256: str  # the index's published sha256, which the cached bytes match
    path: Path


def _project_name(package: str) -> str:
    """The index's normalized project name (PEP 503): lowercase, runs of ``-_.`` become ``-``."""
    return re.sub(r"[-_.]+", "-", package).lower()


def sdist(version: str, package: str = PACKAGE) -> Sdist:
    """The cached, sha256-verified sdist of ``package==version``, downloading it if needed.

    The index's JSON page names the file and publishes its sha256; bytes that do not match are
    refused, and an entry without a sha256 is refused too. The verified hash is recorded next to
    the archive (``vllm-0.34.0.tar.sha256``), so a later call re-verifies the cache offline.
    """
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", package) or not re.fullmatch(r"[0-9A-Za-z.+!_-]+", version):
        raise UpstreamError(f"not a package name and version: {package!r} {version!r}")
    name = _project_name(package)
    # PEP 625 names the file with the underscored name; older sdists used the name as published.
    candidates = {f"{n}-{version}.tar.gz" for n in (package, name.replace("-", "_"), name)}
    for filename in sorted(candidates):
        target = CACHE / "sdist" / filename
        recorded = _digest_file(target)
        if target.exists() and recorded.exists():
            expected = recorded.read_text().strip()
            if hashlib.sha256(target.read_bytes()).hexdigest() == expected:
                return Sdist(package, version, filename, expected, target)
    page = json.loads(_get(index_url() + name + "/", "application/vnd.pypi.simple.v1+json"))
    files = [f for f in page.get("files", []) if f.get("filename") in candidates]
    if not files:
        raise UpstreamError(f"the index lists no sdist {package}-{version}.tar.gz for package {package!r}")
    entry = files[0]
    filename = entry["filename"]
    expected = entry.get("hashes", {}).get("sha256")
    if not expected:
        raise UpstreamError(f"the index publishes no sha256 for {filename}; refusing unverified bytes")
    url = urllib.parse.urljoin(index_url() + name + "/", entry["url"])
    data = _get(url)
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise UpstreamError(f"{filename}: sha256 {actual} does not match the index's {expected}")
    target = CACHE / "sdist" / filename
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(filename + ".part")
    tmp.write_bytes(data)
    tmp.replace(target)
    _digest_file(target).write_text(expected + "\n")
    return Sdist(package, version, filename, expected, target)


def _digest_file(archive: Path) -> Path:
    """Where the verified sha256 of a cached archive is recorded: ``vllm-0.34.0.tar.sha256``."""
    return archive.with_suffix(".sha256")


def sdist_path(version: str) -> Path:
    """Return the cached, sha256-verified sdist of ``vllm==version``, downloading it if needed."""
    return sdist(version).path


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
    members = _sources_of(version)
    data = members.get(path)
    if data is None and path.startswith(SOURCE_FOLDERS):
        raise UpstreamError(f"the vllm {version} sdist has no file {path}")
    if data is None:
        data = _read_member(version, path)  # outside the source folders kept in memory
    store_file(version, path, data)
    return data


#: The folders of an sdist whose files a pass over the archive keeps in memory: the ones our
#: notes and citations read. A gzip archive cannot be read at an offset, so finding one member
#: costs a pass over the archive; keeping these folders turns N reads of a release into one pass.
SOURCE_FOLDERS = ("vllm/", "csrc/")
#: How many releases' source folders a process keeps (about 55 MB each for a recent release).
_KEPT_RELEASES = 2
_sources: dict[str, dict[str, bytes]] = {}


def _sources_of(version: str) -> dict[str, bytes]:
    """``path -> bytes`` of every regular file under :data:`SOURCE_FOLDERS` of the sdist, one pass.

    The same pass writes the release's file listing (:func:`release_files`) if it is not cached.
    """
    if version in _sources:
        return _sources[version]
    prefix = f"{PACKAGE}-{version}/"
    kept: dict[str, bytes] = {}
    names: list[str] = []
    with tarfile.open(sdist_path(version)) as tar:
        for member in tar:
            if not member.isfile() or not member.name.startswith(prefix):
                continue
            name = member.name[len(prefix):]
            names.append(name)
            if name.startswith(SOURCE_FOLDERS):
                handle = tar.extractfile(member)
                if handle is not None:
                    kept[name] = handle.read()
    _write_listing(version, sorted(names))
    while len(_sources) >= _KEPT_RELEASES:
        del _sources[next(iter(_sources))]
    _sources[version] = kept
    return kept


def _read_member(version: str, path: str) -> bytes:
    with tarfile.open(sdist_path(version)) as tar:
        try:
            member = tar.getmember(f"{PACKAGE}-{version}/{path}")
        except KeyError:
            raise UpstreamError(f"the vllm {version} sdist has no file {path}") from None
        handle = tar.extractfile(member)
        if handle is None:
            raise UpstreamError(f"{path} in the vllm {version} sdist is not a regular file")
        return handle.read()


def cached_file(version: str, path: str) -> Path:
    """Where the extracted bytes of upstream ``path`` at ``version`` are cached."""
    if path.startswith("/") or ".." in path.split("/"):
        raise UpstreamError(f"upstream path {path!r} must be relative and stay inside the release")
    return CACHE / "files" / version / path


def store_file(version: str, path: str, data: bytes) -> Path:
    """Cache bytes obtained elsewhere (a verified checkout) so later reads work offline."""
    target = cached_file(version, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.part")
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
    listing = _listing_file(version)
    if not listing.exists():
        _sources_of(version)
    return listing.read_text(encoding="utf-8").split("\n")


def _listing_file(version: str) -> Path:
    return CACHE / "listing" / f"{version}.txt"


def _write_listing(version: str, names: list[str]) -> None:
    listing = _listing_file(version)
    if listing.exists():
        return
    listing.parent.mkdir(parents=True, exist_ok=True)
    tmp = listing.with_name(f"{listing.name}.{os.getpid()}.part")
    tmp.write_text("\n".join(names), encoding="utf-8")
    tmp.replace(listing)
