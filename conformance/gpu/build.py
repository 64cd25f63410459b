"""Build our launcher (``launcher.cu``) against vLLM v0.10.2's ``csrc/`` as a torch extension,
cached by content.

The launcher ``#include``s vLLM's paged-attention and cache-write kernels from the pinned sources
and instantiates only the configurations the GPU lane tests, for one architecture, so one
translation unit is compiled: 80-95 s on this project's 2-core workstation when it is idle
(issue 11's measurement), 390-450 s wall (about 2 minutes of CPU) while other jobs loaded it.

Three facts about the toolchain decide the flags (measured with torch 2.13 and 2.14, nvcc 13.0):

* the C++ standard follows the torch in use: torch 2.14's headers refuse anything below C++20
  (``#error C++20 or later compatible compiler is required``), 2.13 and older accept C++17;
* torch's CUDA headers include cuSPARSE, cuBLAS, cuSOLVER (and the CUDA toolkit of a bare machine
  may lack them); the ``nvidia-*`` pip packages that come with torch have them. Only those
  libraries' headers are linked into a folder of our own: adding the package's whole
  ``include/`` would put its CUDA runtime headers ahead of nvcc's own, and nvcc's generated launch
  stubs then fail to compile;
* the link needs ``-lcudart`` to find the same CUDA runtime torch loads: a folder where
  ``libcudart.so`` points at the pip package's ``libcudart.so.<major>`` comes first.

The build output is cached under ``${PASTUDY_CACHE:-~/.cache/pagedattention-study}/gpu-build/
<key>/``, where the key hashes the launcher, every file of ``csrc/``, the torch and CUDA versions,
nvcc's version, the Python ABI, the architecture and every flag: unchanged inputs load the cached
module without compiling.

``python -m conformance.gpu.build --ci`` is the CI part (see :func:`main`).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

from conformance.gpu.csrc import cache_root, check_csrc, pinned_csrc

LAUNCHER = Path(__file__).with_name("launcher.cu")
EXTENSION = "pastudy_vllm_kernels"
OPS = ("paged_attention_v1", "paged_attention_v2", "reshape_and_cache", "reshape_and_cache_flash")
CI_ARCH = "9.0"  # the H200 the GPU lane is lent (sm_90)
#: Header families torch's CUDA headers include, taken from the pip packages one family at a time.
LIBRARY_HEADERS = ("cusparse", "cublas", "cusolver", "curand", "cufft")
SKIP = 0  # exit status when the build cannot be attempted here (no nvcc): a skip, said so


@dataclass(frozen=True)
class Toolkit:
    """The CUDA compiler found on this machine."""

    nvcc: str
    cuda_home: str
    version: str  # "13.0" as nvcc reports it


def find_toolkit() -> Toolkit | None:
    """nvcc on the PATH and the toolkit folder it really runs from (it may be a wrapper script,
    as /usr/local/bin/nvcc is here), or None when there is no nvcc."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True)
    found = re.search(r"release (\d+\.\d+)", version.stdout)
    dry = subprocess.run([nvcc, "--dryrun", "-E", "-x", "cu", os.devnull], capture_output=True,
                         text=True)
    here = re.search(r"^#\$ _HERE_=(.+)$", dry.stdout + dry.stderr, re.MULTILINE)
    home = (Path(here.group(1).strip()).parent if here
            else Path(os.path.realpath(nvcc)).parent.parent)
    return Toolkit(nvcc, str(home), found.group(1) if found else "unknown")


def cxx_standard(torch_version: str) -> str:
    """``c++20`` for torch 2.14 and later (their headers require it), else ``c++17``."""
    major, minor = (int(x) for x in re.match(r"(\d+)\.(\d+)", torch_version).groups())
    return "c++20" if (major, minor) >= (2, 14) else "c++17"


def nvcc_flags(std: str) -> list[str]:
    """Device-code flags: optimised, the given C++ standard, and the fast math and half/bf16
    operators vLLM's own build uses."""
    return ["-O3", f"-std={std}", "--use_fast_math", "-U__CUDA_NO_HALF_OPERATORS__",
            "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
            "-U__CUDA_NO_HALF2_OPERATORS__"]


def cxx_flags(std: str) -> list[str]:
    return ["-O3", f"-std={std}"]


def nvidia_roots() -> list[Path]:
    """The folders of the ``nvidia`` pip namespace package (empty when it is not installed)."""
    spec = importlib.util.find_spec("nvidia")
    return [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []


def library_headers(roots: list[Path], families=LIBRARY_HEADERS) -> dict[str, Path]:
    """Header file name -> path, for every header of ``families`` in the pip packages' include
    folders (``nvidia/cu13/include`` or, older, ``nvidia/cusparse/include`` ...). Nothing else:
    the CUDA runtime headers there must not shadow nvcc's own."""
    found: dict[str, Path] = {}
    for root in roots:
        for include in [*root.glob("*/include"), *root.glob("*/*/include")]:
            for header in include.iterdir():
                if header.is_file() and header.name.startswith(families):
                    found.setdefault(header.name, header)
    return found


def cudart_library(roots: list[Path]) -> Path | None:
    """The pip package's ``libcudart.so.<major>`` (the runtime torch loads), if there is one."""
    for root in roots:
        libs = [*root.glob("*/lib/libcudart.so.*"), *root.glob("*/*/lib/libcudart.so.*")]
        for lib in sorted(libs):
            if re.fullmatch(r"libcudart\.so\.\d+", lib.name):
                return lib
    return None


def link_folder(folder: Path, targets: dict[str, Path]) -> Path:
    """A folder of symbolic links ``name -> target`` (replaced if it exists)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, target in sorted(targets.items()):
        (folder / name).symlink_to(target)
    return folder


def file_digest(digest, path: Path, label: str) -> None:
    digest.update(f"{label}\0{path.stat().st_size}\0".encode())
    digest.update(path.read_bytes())


def build_key(csrc: Path, settings: dict) -> str:
    """sha256 over the launcher, every file under ``csrc`` (relative path and bytes) and the
    build settings (versions, architecture, flags, the headers and runtime linked in)."""
    digest = hashlib.sha256()
    file_digest(digest, LAUNCHER, "launcher.cu")
    for path in sorted(p for p in Path(csrc).rglob("*") if p.is_file()):
        file_digest(digest, path, path.relative_to(csrc).as_posix())
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:24]


def settings_for(torch_module, toolkit: Toolkit, arch: str) -> dict:
    """Everything besides the sources that decides the built bytes."""
    std = cxx_standard(torch_module.__version__)
    roots = nvidia_roots()
    cudart = cudart_library(roots)
    return {"extension": EXTENSION, "arch": arch, "std": std, "nvcc_flags": nvcc_flags(std),
            "cxx_flags": cxx_flags(std), "torch": torch_module.__version__,
            "torch_cuda": torch_module.version.cuda, "nvcc": toolkit.version,
            "cuda_home": toolkit.cuda_home, "python_abi": sysconfig.get_config_var("SOABI"),
            "library_headers": {n: str(p.resolve()) for n, p in
                                sorted(library_headers(roots).items())},
            "cudart": str(cudart.resolve()) if cudart else None}


@dataclass
class Built:
    """A loaded launcher module and where it came from."""

    module: object
    key: str
    folder: Path
    seconds: float  # compile time (this call), 0 when the cached build was loaded
    cached: bool


def import_extension(so_file: Path):
    """Import a built extension module from its file (torch must be imported first)."""
    loader = importlib.machinery.ExtensionFileLoader(EXTENSION, str(so_file))
    spec = importlib.util.spec_from_file_location(EXTENSION, so_file, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def build(csrc: Path, arch: str, cache: Path | None = None, verbose: bool = False,
          toolkit: Toolkit | None = None) -> Built:
    """Compile (or load from the cache) the launcher for compute capability ``arch`` ("9.0")."""
    csrc = check_csrc(csrc)
    toolkit = toolkit or find_toolkit()
    if toolkit is None:
        raise RuntimeError("nvcc is not on the PATH: the CUDA launcher cannot be built here")
    # cpp_extension reads CUDA_HOME when imported, the architecture list when it builds.
    os.environ["CUDA_HOME"] = toolkit.cuda_home
    os.environ["TORCH_CUDA_ARCH_LIST"] = arch
    import torch

    if not torch.version.cuda:
        raise RuntimeError(f"torch {torch.__version__} is built without CUDA: no extension can be "
                           "built against it")
    settings = settings_for(torch, toolkit, arch)
    key = build_key(csrc, settings)
    return cached_build(cache or cache_root() / "gpu-build", key,
                        lambda work: compile_extension(csrc, work, settings, verbose),
                        {**settings, "csrc": str(csrc)})


def cached_build(root: Path, key: str, compile_into, manifest: dict,
                 load=None) -> Built:
    """``root/key/`` holds a finished build (with its ``manifest.json``): load it. Otherwise
    ``compile_into(work)`` builds in a scratch folder that becomes ``root/key/`` only once it has
    succeeded, so an interrupted build is never taken for a finished one. A lock file serialises
    builds of one key: a second caller waits, then loads what the first built."""
    load = load or (lambda folder: import_extension(folder / f"{EXTENSION}.so"))
    root.mkdir(parents=True, exist_ok=True)
    folder = root / key
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / "manifest.json").is_file():
            return Built(load(folder), key, folder, 0.0, True)
        work = root / f"{key}.partial-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        print(f"GPU launcher: no cached build {key}: compiling into {folder} (one translation "
              "unit, 1-2 minutes on an idle machine)", file=sys.stderr, flush=True)
        started = time.time()
        try:
            module = compile_into(work)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        seconds = time.time() - started
        (work / "manifest.json").write_text(json.dumps(
            {**manifest, "key": key, "compile_seconds": round(seconds, 1),
             "built": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=1, default=str) + "\n")
        shutil.rmtree(folder, ignore_errors=True)
        work.rename(folder)
    return Built(module, key, folder, seconds, False)


def compile_extension(csrc: Path, work: Path, settings: dict, verbose: bool):
    """torch's ``cpp_extension.load`` into ``work``, with our include and library folders."""
    from torch.utils import cpp_extension

    # cpp_extension reads CUDA_HOME once, when first imported (perhaps before build() set it).
    cpp_extension.CUDA_HOME = settings["cuda_home"]
    # It runs `ninja` from the PATH: the environment's own (the ninja pip package) if not active.
    env_bin = str(Path(sys.executable).parent)
    if env_bin not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = env_bin + os.pathsep + os.environ.get("PATH", "")
    headers = link_folder(work / "library-headers",
                          {n: Path(p) for n, p in settings["library_headers"].items()})
    ldflags = []
    if settings["cudart"]:
        runtime = link_folder(work / "cudart", {"libcudart.so": Path(settings["cudart"])})
        ldflags.append(f"-L{runtime}")  # before torch's -L$CUDA_HOME/lib64 -lcudart
    return cpp_extension.load(name=EXTENSION, sources=[str(LAUNCHER)],
                              extra_include_paths=[str(csrc), str(headers)],
                              extra_cuda_cflags=settings["nvcc_flags"],
                              extra_cflags=settings["cxx_flags"], extra_ldflags=ldflags,
                              build_directory=str(work), verbose=verbose)


def registered_ops(module) -> dict[str, str]:
    """Each op the lane needs -> its pybind signature line; raises when one is missing."""
    missing = [name for name in OPS if not callable(getattr(module, name, None))]
    if missing:
        raise RuntimeError(f"the built launcher lacks {', '.join(missing)}")
    return {name: (getattr(module, name).__doc__ or "").strip().splitlines()[0] for name in OPS}


FATBIN_MAGIC = 0xBA55ED50
FATBIN_KINDS = {1: "ptx", 2: "cubin"}


def fatbin_entries(so_file: Path) -> list[tuple[str, int]]:
    """(kind, sm) of every device-code entry in the ``.nv_fatbin`` section of a built library,
    e.g. ``[("cubin", 90)]``: what the GPU would load, read without a driver (or cuobjdump)."""
    data = Path(so_file).read_bytes()
    if data[:5] != b"\x7fELF\x02":
        raise ValueError(f"{so_file}: not a 64-bit ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = sections[shstrndx][4]

    def name(offset):
        return data[names + offset:data.index(b"\0", names + offset)].decode()

    entries = []
    for sh_name, _, _, _, offset, size in sections:
        if name(sh_name) != ".nv_fatbin":
            continue
        at, end = offset, offset + size
        while at + 16 <= end:
            magic, _, header, fat_size = struct.unpack_from("<IHHQ", data, at)
            if magic != FATBIN_MAGIC:
                at += 8  # fat binaries are 8-byte aligned within the section
                continue
            entry = at + header
            while entry < at + header + fat_size:
                kind, _, entry_header, entry_size = struct.unpack_from("<HHIQ", data, entry)
                sm, = struct.unpack_from("<I", data, entry + 28)
                entries.append((FATBIN_KINDS.get(kind, f"kind {kind}"), sm))
                entry += entry_header + entry_size
            at += header + fat_size
    return entries


def check_argument_refusals(module) -> list[str]:
    """Call the attention ops with arguments the launcher refuses before touching the GPU (an
    fp8 cache, a head size it was not built for): this runs the pybind argument conversion and
    our dispatch without a driver. Returns the refusal messages; raises if one is not refused."""
    import torch

    def tensor(*shape, dtype=torch.float16):
        return torch.zeros(shape, dtype=dtype)

    q, one = tensor(1, 8, 96), torch.ones(1)
    caches = (tensor(1, 2, 12, 16, 8), tensor(1, 2, 96, 16))
    tail = (caches[0], caches[1], 2, 0.1, torch.zeros(1, 1, dtype=torch.int32),
            torch.ones(1, dtype=torch.int32), 16, 1, None)
    expected = [
        ("paged_attention_v1", (tensor(1, 8, 96), q, *tail, "fp8", one, one), "without fp8"),
        ("paged_attention_v1", (tensor(1, 8, 96), q, *tail, "auto", one, one), "head sizes 64/128"),
        ("paged_attention_v2", (tensor(1, 8, 96), tensor(1, 8, 1, dtype=torch.float32),
                                tensor(1, 8, 1, dtype=torch.float32), tensor(1, 8, 1, 96), q, *tail,
                                "auto", one, one), "head sizes 64/128"),
    ]
    messages = []
    for name, args, needle in expected:
        try:
            getattr(module, name)(*args)
        except RuntimeError as err:
            if needle not in str(err):
                raise RuntimeError(f"{name}: refused for another reason: {err}") from None
            messages.append(f"{name}: {str(err).splitlines()[0]}")
        else:
            raise RuntimeError(f"{name} accepted arguments the launcher must refuse ({needle})")
    return messages


def ci(cache: Path | None = None, arch: str = CI_ARCH, verbose: bool = False) -> int:
    """The CI part: build for ``arch`` in this environment (cached), import the module, check its
    ops and argument refusals. Exit status 0 with a SKIP line when nvcc is absent."""
    toolkit = find_toolkit()
    if toolkit is None:
        print("GPU launcher build: SKIP: nvcc is not on the PATH, so the CUDA launcher cannot be "
              "built on this machine (install the CUDA toolkit 13.x to run this part)")
        return SKIP
    csrc = pinned_csrc()
    built = build(csrc, arch, cache, verbose=verbose, toolkit=toolkit)
    ops = registered_ops(built.module)
    refusals = check_argument_refusals(built.module)
    so_file = built.folder / f"{EXTENSION}.so"
    sm = int(arch.replace(".", ""))
    device_code = fatbin_entries(so_file)
    if ("cubin", sm) not in device_code:
        raise RuntimeError(f"{so_file}: no sm_{sm} machine code inside (found {device_code})")
    how = ("loaded from the cache, not recompiled" if built.cached
           else f"compiled in {built.seconds:.0f} s")
    print(f"GPU launcher build: OK: {EXTENSION} for sm_{arch.replace('.', '')} with nvcc "
          f"{toolkit.version}, {so_file} ({how}); device code "
          f"{', '.join(f'{k} sm_{n}' for k, n in device_code)}; ops {', '.join(ops)} registered; "
          f"{len(refusals)} argument refusals checked without a GPU")
    return 0


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m conformance.gpu.build",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--ci", action="store_true",
                        help="build for sm_90 against the pinned csrc/, import, check the ops")
    parser.add_argument("--arch", default=CI_ARCH, help="compute capability (default 9.0)")
    parser.add_argument("--cache", type=Path, help="cache folder (default "
                        "${PASTUDY_CACHE:-~/.cache/pagedattention-study}/gpu-build)")
    parser.add_argument("--print-csrc", action="store_true",
                        help="print the pinned csrc/ folder (unpacking it if needed) and exit")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    if not (args.ci or args.print_csrc):
        parser.error("say what to do: --ci or --print-csrc")
    if not re.fullmatch(r"\d+\.\d+", args.arch):
        parser.error(f"--arch {args.arch!r}: expected a compute capability such as 9.0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.print_csrc:
        print(pinned_csrc())
        return 0
    return ci(args.cache, args.arch, args.verbose)


if __name__ == "__main__":
    sys.exit(main())
