"""The launcher build's decisions, tested without compiling: the C++ standard per torch, which pip
headers and runtime are linked in, the content key, the build cache, the csrc unpacking, and the
CI command's skip without nvcc. (The real build is the CI part ``python -m conformance.gpu.build
--ci`` in the vllm-0.33.0 environment.)
"""

import io
import struct
import tarfile
from pathlib import Path

import pytest

from conformance.gpu import build, csrc


def test_cxx_standard_follows_torch():
    """Catches: -std=c++17 with torch 2.14 (its headers #error below C++20), or C++20 forced on
    torch 2.13 and older, or a version parser confused by local suffixes (+cu130)."""
    assert build.cxx_standard("2.14.0+cu130") == "c++20"
    assert build.cxx_standard("2.15.1") == "c++20"
    assert build.cxx_standard("3.0.0") == "c++20"
    assert build.cxx_standard("2.13.0+cpu") == "c++17"
    assert build.cxx_standard("2.9.1") == "c++17"
    assert "-std=c++20" in build.nvcc_flags("c++20") and "-std=c++20" in build.cxx_flags("c++20")


def make_nvidia_tree(root: Path) -> Path:
    nvidia = root / "nvidia"
    files = ["cu13/include/cusparse.h", "cu13/include/cublas_v2.h", "cu13/include/cublasLt.h",
             "cu13/include/cusolverDn.h", "cu13/include/curand.h", "cu13/include/cufft.h",
             "cu13/include/cuda_runtime.h", "cu13/include/cuda_fp16.h", "cu13/include/crt/x.h",
             "cu13/lib/libcudart.so.13", "cu13/lib/libcudart_static.a",
             "cu13/lib/libcublas.so.13", "cusolver/include/cusolver_common.h"]
    for name in files:
        (nvidia / name).parent.mkdir(parents=True, exist_ok=True)
        (nvidia / name).write_text(name)
    return nvidia


def test_only_library_headers_and_the_pip_runtime_are_linked_in(tmp_path):
    """Catches: putting the pip package's whole include/ folder on the path (its CUDA runtime
    headers then shadow nvcc's and the launch stubs break), missing one of the library families
    torch's headers include, or linking the static runtime instead of libcudart.so.<major>."""
    nvidia = make_nvidia_tree(tmp_path)
    found = build.library_headers([nvidia])
    assert sorted(found) == ["cublasLt.h", "cublas_v2.h", "cufft.h", "curand.h",
                             "cusolverDn.h", "cusolver_common.h", "cusparse.h"]
    assert build.cudart_library([nvidia]) == nvidia / "cu13/lib/libcudart.so.13"
    assert build.cudart_library([tmp_path / "none"]) is None
    linked = build.link_folder(tmp_path / "links", found)
    assert sorted(p.name for p in linked.iterdir()) == sorted(found)
    assert (linked / "cusparse.h").read_text() == "cu13/include/cusparse.h"
    assert not (linked / "cuda_runtime.h").exists()


def write_csrc(folder: Path) -> Path:
    for name in csrc.REQUIRED:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(f"// {name}\n")
    return folder


def test_build_key_changes_with_any_source_or_setting(tmp_path):
    """Catches: a cache key that misses a csrc file, a file's path, or a setting (torch version,
    flags, architecture), so a stale build would be loaded after a change."""
    source = write_csrc(tmp_path / "csrc")
    settings = {"arch": "9.0", "torch": "2.14.0", "nvcc_flags": ["-O3"]}
    key = build.build_key(source, settings)
    assert key == build.build_key(source, dict(reversed(list(settings.items()))))
    assert key != build.build_key(source, {**settings, "arch": "8.0"})
    assert key != build.build_key(source, {**settings, "torch": "2.13.0"})
    (source / "cache_kernels.cu").write_text("// changed\n")
    changed = build.build_key(source, settings)
    assert changed != key
    (source / "cache_kernels.cu").rename(source / "cache_kernels2.cu")
    assert build.build_key(source, settings) != changed


def test_cached_build_compiles_once_and_never_keeps_a_failed_build(tmp_path):
    """Catches: recompiling unchanged sources, loading a half-finished build after an error,
    or a cached build that loads something other than the folder's module."""
    compiled, loaded = [], []

    def compile_into(work):
        compiled.append(work)
        (work / f"{build.EXTENSION}.so").write_text("binary")
        return "fresh module"

    def load(folder):
        loaded.append(folder)
        return "cached module"

    first = build.cached_build(tmp_path, "k1", compile_into, {"arch": "9.0"}, load)
    assert (first.module, first.cached, len(compiled)) == ("fresh module", False, 1)
    assert first.folder == tmp_path / "k1" and (tmp_path / "k1" / "manifest.json").is_file()
    again = build.cached_build(tmp_path, "k1", compile_into, {"arch": "9.0"}, load)
    assert (again.module, again.cached, again.seconds, len(compiled)) == ("cached module", True,
                                                                          0.0, 1)
    assert loaded == [tmp_path / "k1"]

    def broken(work):
        (work / "half.o").write_text("x")
        raise RuntimeError("nvcc failed")

    with pytest.raises(RuntimeError, match="nvcc failed"):
        build.cached_build(tmp_path, "k2", broken, {}, load)
    assert not (tmp_path / "k2").exists()
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]
    build.cached_build(tmp_path, "k2", compile_into, {}, load)
    assert len(compiled) == 2


def test_unpack_takes_only_csrc_once(tmp_path):
    """Catches: unpacking the whole sdist, unpacking again on every run (new modification times
    would make the build tools recompile), or accepting an archive without csrc/."""
    archive = tmp_path / "vllm-0.10.2.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in [*csrc.REQUIRED, "../../setup.py"]:
            data = f"// {name}\n".encode()
            info = tarfile.TarInfo(f"vllm-0.10.2/csrc/{name}".replace("csrc/../../", ""))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    first = csrc.unpack(archive, tmp_path / "cache")
    assert first.name == "csrc" and (first / "cache_kernels.cu").is_file()
    assert not (first.parent / "setup.py").exists()
    stamp = (first / "cache_kernels.cu").stat().st_mtime_ns
    assert csrc.unpack(archive, tmp_path / "cache") == first
    assert (first / "cache_kernels.cu").stat().st_mtime_ns == stamp
    empty = tmp_path / "empty.tar.gz"
    with tarfile.open(empty, "w:gz"):
        pass
    with pytest.raises(ValueError, match="no vllm-0.10.2/csrc/"):
        csrc.unpack(empty, tmp_path / "cache2")


def test_ci_skips_with_a_reason_without_nvcc(monkeypatch, capsys):
    """Catches: the CI part failing (or silently passing with no word) on a machine without the
    CUDA toolkit, or trying to fetch sources and build before finding out."""
    monkeypatch.setattr(build, "find_toolkit", lambda: None)
    monkeypatch.setattr(build, "pinned_csrc", lambda: pytest.fail("fetched csrc without nvcc"))
    assert build.main(["--ci"]) == build.SKIP == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("GPU launcher build: SKIP: nvcc is not on the PATH")
    with pytest.raises(SystemExit):
        build.parse_args([])
    with pytest.raises(SystemExit):
        build.parse_args(["--ci", "--arch", "sm_90"])


def test_registered_ops_names_what_is_missing():
    """Catches: a launcher module missing an op being reported as built and usable."""
    class Module:
        def paged_attention_v1(self):
            """paged_attention_v1(arg0: torch.Tensor) -> None"""

    with pytest.raises(RuntimeError, match="paged_attention_v2, reshape_and_cache, "
                                           "reshape_and_cache_flash"):
        build.registered_ops(Module())


def synthetic_library(entries: list[tuple[int, int]]) -> bytes:
    """A minimal 64-bit ELF file with a ``.nv_fatbin`` section holding ``(kind, sm)`` entries
    in the layout nvcc writes (fat binary header, then per entry a 64-byte header)."""
    body = b""
    for kind, sm in entries:
        payload = b"\xab" * 24
        header = bytearray(struct.pack("<HHIQ", kind, 0x101, 64, len(payload)).ljust(64, b"\0"))
        struct.pack_into("<I", header, 28, sm)
        body += bytes(header) + payload
    fatbin = b"\0" * 8 + struct.pack("<IHHQ", build.FATBIN_MAGIC, 1, 16, len(body)) + body
    names = b"\0.shstrtab\0.nv_fatbin\0"
    names_at, fatbin_at = 64, 64 + 32
    table_at = fatbin_at + len(fatbin) + (-len(fatbin) % 8)
    elf = bytearray(b"\x7fELF\x02\x01\x01".ljust(64, b"\0"))
    struct.pack_into("<Q", elf, 0x28, table_at)
    struct.pack_into("<HHH", elf, 0x3A, 64, 3, 1)
    elf += names.ljust(32, b"\0") + fatbin + b"\0" * (table_at - fatbin_at - len(fatbin))
    section = "<IIQQQQIIQQ"
    elf += struct.pack(section, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    elf += struct.pack(section, 1, 3, 0, 0, names_at, len(names), 0, 0, 1, 0)
    elf += struct.pack(section, 11, 1, 2, 0, fatbin_at, len(fatbin), 0, 0, 8, 0)
    return bytes(elf)


def test_fatbin_entries_reads_the_architectures_built(tmp_path):
    """Catches: a CI build that compiled for the wrong architecture (TORCH_CUDA_ARCH_LIST not
    applied: the H200 would find no sm_90 code) being reported as fine, or PTX taken for
    machine code."""
    library = tmp_path / "lib.so"
    library.write_bytes(synthetic_library([(2, 90)]))
    assert build.fatbin_entries(library) == [("cubin", 90)]
    library.write_bytes(synthetic_library([(1, 80), (2, 80)]))
    assert build.fatbin_entries(library) == [("ptx", 80), ("cubin", 80)]
    library.write_bytes(b"not an elf")
    with pytest.raises(ValueError, match="not a 64-bit ELF"):
        build.fatbin_entries(library)
