"""vLLM v0.10.2's ``csrc/`` (the CUDA kernel sources the launcher includes), from the pinned sdist.

The sdist is fetched and sha256-verified by ``upstream.fetch`` (cached outside the clone);
its ``csrc/`` is unpacked once into the cache, under a folder named by the sdist's digest, so that
the same bytes always sit at the same path with the same modification times (a rebuild is keyed
by content, see ``build.py``). Nothing here is committed: the path is printed, not stored.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
from pathlib import Path

from upstream.releases import V0_RELEASE

VERSION = V0_RELEASE
REQUIRED = ("attention/attention_kernels.cuh", "cache_kernels.cu", "cuda_compat.h")


def cache_root() -> Path:
    """``${PASTUDY_CACHE:-~/.cache/pagedattention-study}``: the project's cache (not in the clone)."""
    return Path(os.environ.get("PASTUDY_CACHE", Path.home() / ".cache" / "pagedattention-study"))


def check_csrc(csrc: Path) -> Path:
    """Return ``csrc`` if it looks like vLLM's kernel sources, else raise ValueError saying why."""
    csrc = Path(csrc)
    missing = [p for p in REQUIRED if not (csrc / p).is_file()]
    if missing:
        raise ValueError(f"{csrc}: not an unpacked vLLM csrc/ directory "
                         f"(missing {', '.join(missing)})")
    return csrc


def unpack(archive: Path, dest_root: Path, version: str = VERSION) -> Path:
    """Unpack ``vllm-<version>/csrc/`` of ``archive`` under ``dest_root/csrc-<version>-<digest>``
    (once; later calls return the same folder) and return the ``csrc`` folder inside it."""
    digest = hashlib.sha256(Path(archive).read_bytes()).hexdigest()[:16]
    target = dest_root / f"csrc-{version}-{digest}"
    if (target / "COMPLETE").is_file():
        return check_csrc(target / "csrc")
    partial = dest_root / f"{target.name}.partial-{os.getpid()}"
    prefix = f"vllm-{version}/csrc/"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
        if not members:
            raise ValueError(f"{archive}: no {prefix} in this archive")
        for m in members:
            m.name = m.name[len(f"vllm-{version}/"):]
        tar.extractall(partial, members=members, filter="data")
    (partial / "COMPLETE").write_text(f"{archive.name} sha256 prefix {digest}\n")
    try:
        partial.rename(target)
    except OSError:  # another process finished first: keep its copy
        import shutil

        shutil.rmtree(partial, ignore_errors=True)
    return check_csrc(target / "csrc")


def pinned_csrc(dest_root: Path | None = None) -> Path:
    """The pinned release's ``csrc/``: $PASTUDY_VLLM_CSRC if set, else unpacked from the
    verified sdist (fetched through ``upstream.fetch`` when not cached yet)."""
    given = os.environ.get("PASTUDY_VLLM_CSRC")
    if given:
        return check_csrc(Path(given))
    from upstream.fetch import sdist_path

    return unpack(sdist_path(VERSION), dest_root or cache_root() / "gpu-build")
