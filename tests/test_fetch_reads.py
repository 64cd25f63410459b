"""``upstream.fetch.read_file``: files of a cached sdist, read with one pass over the archive.

A real (small) tar.gz is written into a temporary cache with its recorded sha256, so no index and
no network are involved.
"""

from __future__ import annotations

import hashlib
import io
import tarfile

import pytest

from upstream import fetch

FILES = {
    "vllm/core/block_manager.py": b"class BlockSpaceManager: ...\n",
    "vllm/v1/core/block_pool.py": b"class BlockPool: ...\n",
    "csrc/cache_kernels.cu": b"// kernels\n",
    "docs/index.md": b"# docs\n",
}


@pytest.fixture
def cached_sdist(tmp_path, monkeypatch):
    """An sdist of ``vllm==9.9.9`` in a temporary cache, verified, holding :data:`FILES`."""
    monkeypatch.setattr(fetch, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(fetch, "_sources", {})
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in FILES.items():
            info = tarfile.TarInfo(f"vllm-9.9.9/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive = fetch.CACHE / "sdist" / "vllm-9.9.9.tar.gz"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(buffer.getvalue())
    archive.with_suffix(".sha256").write_text(hashlib.sha256(buffer.getvalue()).hexdigest() + "\n")
    opened: list[str] = []
    real_open = tarfile.open

    def counting_open(*args, **kwargs):
        opened.append(str(args[0]))
        return real_open(*args, **kwargs)

    monkeypatch.setattr(fetch.tarfile, "open", counting_open)
    return opened


def test_reading_many_files_of_a_release_passes_over_its_archive_once(cached_sdist):
    """Catches: each uncached file read decompressing the whole gzip archive again (on an empty
    cache, hundreds of cited files made the citation test take minutes), or the listing costing a
    pass of its own."""
    for name in ("vllm/core/block_manager.py", "vllm/v1/core/block_pool.py", "csrc/cache_kernels.cu"):
        assert fetch.read_file("9.9.9", name) == FILES[name]
    assert sorted(fetch.release_files("9.9.9")) == sorted(FILES)
    assert len(cached_sdist) == 1
    assert fetch.cached_file("9.9.9", "vllm/v1/core/block_pool.py").read_bytes() == FILES["vllm/v1/core/block_pool.py"]


def test_files_outside_the_kept_folders_and_missing_files(cached_sdist):
    """Catches: a file outside vllm/ and csrc/ becoming unreadable, or a missing file answered with
    empty bytes instead of an error naming it."""
    assert fetch.read_file("9.9.9", "docs/index.md") == FILES["docs/index.md"]
    with pytest.raises(fetch.UpstreamError, match="has no file vllm/nope.py"):
        fetch.read_file("9.9.9", "vllm/nope.py")


def test_a_second_process_reads_from_the_file_cache_without_the_archive(cached_sdist, monkeypatch):
    """Catches: the extracted files not written to the cache, so every process pays the pass again."""
    fetch.read_file("9.9.9", "vllm/core/block_manager.py")
    monkeypatch.setattr(fetch, "_sources", {})  # a new process
    before = len(cached_sdist)
    assert fetch.read_file("9.9.9", "vllm/core/block_manager.py") == FILES["vllm/core/block_manager.py"]
    assert len(cached_sdist) == before
