"""conformance/release_env.py and the build steps of scripts/version-matrix that use it: a pinned
requirement the index lacks is left out (and recorded), a package that cannot load is removed
(and recorded), an environment that cannot be built says why."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conformance import release_env

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "version-matrix"

# Shaped like vLLM 0.34.0's wheel METADATA (a subset of its Requires-Dist lines).
METADATA = """\
Metadata-Version: 2.4
Name: vllm
Version: 0.34.0
Requires-Dist: regex
Requires-Dist: transformers<5.23.0,>=5.16.1
Requires-Dist: protobuf!=6.30.*,>=5.29.6; platform_machine != "s390x"
Requires-Dist: protobuf==7.36.1; platform_machine == "s390x"
Requires-Dist: fastapi[standard]<0.137.0,>=0.133.0
Requires-Dist: xgrammar==0.2.8; platform_machine == "x86_64" or platform_machine == "aarch64"
Requires-Dist: six>=1.16.0; python_version > "3.11"
Requires-Dist: torch==2.14.0
Requires-Dist: torchcodec>=0.14
Requires-Dist: Flashinfer_Python==0.7.3
Requires-Dist: apache-tvm-ffi==0.1.11
Requires-Dist: tensorizer==2.10.1; extra == "tensorizer"
Requires-Dist: flashinfer-cubin==0.7.3; extra == "flashinfer"
Provides-Extra: tensorizer

Some description mentioning
Requires-Dist: not-a-header
"""

LINUX_311 = {"implementation_name": "cpython", "implementation_version": "3.11.7", "os_name": "posix",
             "platform_machine": "x86_64", "platform_release": "6", "platform_system": "Linux",
             "platform_version": "1", "python_full_version": "3.11.7", "platform_python_implementation": "CPython",
             "python_version": "3.11", "sys_platform": "linux"}

# pip's own words for vLLM 0.34.0's pin (captured from pip with a wheel that pins the same).
PIP_MISSING = """\
ERROR: Could not find a version that satisfies the requirement flashinfer-python==0.7.3 (from vllm) (from versions: 0.5.0rc1, 0.6.18.post1, 0.7.0rc3, 0.7.0, 0.7.1, 0.7.2rc6, 0.7.2, 0.7.2.post1, 0.7.4)
ERROR: No matching distribution found for flashinfer-python==0.7.3
"""


def test_requirements_leave_out_the_missing_pin_extras_and_other_platforms():
    """Catches: installing vLLM's other requirements with the missing pin still among them
    (however its name is spelled), with extras' requirements, or with another platform's or
    Python's requirements (two protobuf pins at once)."""
    got = release_env.requirements(METADATA, {"flashinfer-python"}, LINUX_311)
    assert got == ["regex", "transformers<5.23.0,>=5.16.1", "protobuf!=6.30.*,>=5.29.6",
                   "fastapi[standard]<0.137.0,>=0.133.0", "xgrammar==0.2.8", "torch==2.14.0",
                   "torchcodec>=0.14", "apache-tvm-ffi==0.1.11"]
    on_312_arm = release_env.requirements(METADATA, set(), {**LINUX_311, "python_version": "3.12",
                                                            "platform_machine": "s390x"})
    assert "six>=1.16.0" in on_312_arm and "protobuf==7.36.1" in on_312_arm
    assert "xgrammar==0.2.8" not in on_312_arm and "Flashinfer_Python==0.7.3" in on_312_arm


def test_pips_missing_distribution_message_is_read_exactly():
    """Catches: the fallback not recognising pip's message (the build fails as before), or
    recording the wrong package, the wrong parent, or offers cut from the wrong end."""
    missing = release_env.missing_distribution(PIP_MISSING)
    assert missing == release_env.Missing("flashinfer-python", "flashinfer-python==0.7.3", "vllm",
                                          ("0.5.0rc1", "0.6.18.post1", "0.7.0rc3", "0.7.0", "0.7.1", "0.7.2rc6",
                                           "0.7.2", "0.7.2.post1", "0.7.4"))
    assert release_env.nearest(missing) == ["0.7.2.post1", "0.7.4"]
    top = release_env.missing_distribution(
        "ERROR: Could not find a version that satisfies the requirement vllm==0.6.3.post1 (from versions: none)")
    assert (top.package, top.parent, top.offers) == ("vllm", None, ())
    assert release_env.missing_distribution("ERROR: HTTP error 503 while getting https://...") is None


def test_a_left_out_pin_is_recorded_with_offers_and_a_reason():
    """Catches: a left-out package recorded without what the index offered, or an unreviewed
    package presented as known to be unneeded."""
    record = release_env.left_out_record(release_env.missing_distribution(PIP_MISSING), "2026-11-20T00:00:00Z")
    assert record["required"] == "flashinfer-python==0.7.3" and record["index_nearest"] == ["0.7.2.post1", "0.7.4"]
    assert record["reviewed"] and "attention backends" in record["why_not_needed"]
    other = release_env.left_out_record(release_env.Missing("mystery", "mystery==1", "vllm", ()), "t")
    assert not other["reviewed"] and other["why_not_needed"].startswith("not reviewed")


def test_loader_errors_name_the_missing_libraries():
    """Catches: a removed torchcodec recorded without the libraries the machine lacked."""
    text = ("[start of libtorchcodec loading traceback]\nFFmpeg version 8: OSError: libavutil.so.60: cannot "
            "open shared object file: No such file or directory\nFFmpeg version 7: OSError: libavutil.so.59: "
            "cannot open shared object file\nFFmpeg version 8 again: libavutil.so.60: cannot open shared "
            "object file\n")
    assert release_env.missing_libraries(text) == ["libavutil.so.60", "libavutil.so.59"]


@pytest.fixture
def vm():
    loader = importlib.machinery.SourceFileLoader("version_matrix_env", str(SCRIPT))
    spec = importlib.util.spec_from_loader("version_matrix_env", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


class FakePip:
    """pip as the build steps call it: ``download`` writes a wheel with METADATA; ``install``
    of requirements fails with 'no distribution' for each name in ``absent``."""

    def __init__(self, absent: dict[str, str], metadata: dict[str, str] | None = None):
        self.absent = absent
        self.metadata = metadata or {}  # a downloaded project's METADATA (vLLM 0.34.0's by default)
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, *args: str, check: bool = False) -> subprocess.CompletedProcess:
        self.calls.append(args)
        if args[0] == "download":
            target = Path(args[args.index("-d") + 1])
            target.mkdir(parents=True, exist_ok=True)
            name, _, version = args[args.index("-d") - 1].partition("==")
            with zipfile.ZipFile(target / f"{name}-{version}-cp38-abi3-manylinux_2_28_x86_64.whl", "w") as whl:
                whl.writestr(f"{name}-{version}.dist-info/METADATA", self.metadata.get(name, METADATA))
            return subprocess.CompletedProcess(args, 0, "", "")
        for name, parent in self.absent.items():
            if args[0] == "install" and any(a.lower().startswith(name) for a in args):
                err = (f"ERROR: Could not find a version that satisfies the requirement {name}==9 "
                       f"{parent}(from versions: 1, 2)\n")
                return subprocess.CompletedProcess(args, 1, "", err)
        return subprocess.CompletedProcess(args, 0, "", "")


def test_each_missing_direct_requirement_is_left_out_and_vllm_installed_without_deps(vm, tmp_path):
    """Catches: the fallback stopping at the second missing pin, installing vLLM with its
    dependencies after all (pip would fail again on the missing pin), or recording only the first."""
    pip = FakePip({"xgrammar": ""})
    first = release_env.missing_distribution(PIP_MISSING)
    records = vm.install_without("0.34.0", tmp_path, pip, ["--quiet"], "2026-11-20T00:00:00Z", first)
    assert [r["package"] for r in records] == ["flashinfer-python", "xgrammar"]
    installs = [c for c in pip.calls if c[0] == "install"]
    assert not any(a.startswith(("Flashinfer", "flashinfer")) for c in installs for a in c)
    assert installs[-1][-2:] == ("--no-deps", str(tmp_path / "vllm-wheel" / "vllm-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl"))


def test_a_missing_transitive_requirement_is_an_unbuildable_release_with_its_reason(vm, tmp_path):
    """Catches: leaving out a package vLLM does not itself require (it cannot be left out that way
    and pip would loop), or a build failure recorded without the package and the offers."""
    pip = FakePip({"regex": "(from some-dep) "})
    with pytest.raises(vm.BuildFailed) as failed:
        vm.install_without("0.34.0", tmp_path, pip, [], "2026-11-20T00:00:00Z",
                           release_env.missing_distribution(PIP_MISSING))
    record = failed.value.record
    assert record["package"] == "regex" and record["by"] == "some-dep" and record["index_offers"] == ["1", "2"]
    assert "without flashinfer-python" in record["step"]


def test_a_network_error_is_not_recorded_as_an_unbuildable_release(vm):
    """Catches: a transient pip failure (no distribution named) filed in matrix.json as a property of the release."""
    with pytest.raises(SystemExit, match="HTTP error"):
        vm.fail("pip install vllm==0.20.2", subprocess.CompletedProcess([], 1, "", "ERROR: HTTP error 503"), None,
                "t")


FAKE_PYTHON = r'''#!/usr/bin/env python3
import sys
if sys.argv[1:3] == ["-m", "pip"]:
    print("torchcodec==0.14.0\nvllm==0.25.0")
elif sys.argv[1] == "-c" and "torchcodec" in sys.argv[2]:
    if LOADS:
        sys.exit(0)
    sys.stderr.write("RuntimeError: Could not load libtorchcodec. ...\nFFmpeg version 8: libavutil.so.60: "
                     "cannot open shared object file: No such file or directory\n")
    sys.exit(1)
'''


@pytest.mark.parametrize("loads", [False, True])
def test_torchcodec_that_cannot_load_is_removed_and_recorded(vm, tmp_path, loads):
    """Catches: a torchcodec without its FFmpeg left in the environment (at 0.25.0 on a new
    machine every V1 property was a harness error), one removed without a record, or one that
    loads removed for nothing."""
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON.replace("LOADS", str(loads)))
    fake.chmod(0o755)
    pip = FakePip({})
    removed = vm.remove_unloadable(str(fake), pip)
    if loads:
        assert removed == [] and pip.calls == []
    else:
        assert pip.calls == [("uninstall", "--yes", "torchcodec")]
        assert removed[0]["package"] == "torchcodec" and removed[0]["version"] == "0.14.0"
        assert removed[0]["missing_libraries"] == ["libavutil.so.60"] and "FFmpeg" in removed[0]["why"]


def test_a_left_out_pin_that_vllm_imports_anyway_gets_a_stand_in_that_loads(vm, tmp_path):
    """Catches: vLLM 0.8.1's V1 properties ending in harness errors because its left-out
    xgrammar==0.1.16 is imported by vllm.v1.request anyway; a stand-in installed where the probe
    shows no need (0.8.2), installed with its dependencies, a version that
    builds CUDA code on import (0.1.13), or recorded without saying so."""
    missing = release_env.missing_distribution(
        "ERROR: Could not find a version that satisfies the requirement xgrammar==0.1.16 (from vllm==0.8.1) "
        "(from versions: 0.1.0, 0.1.11, 0.1.13)")
    record = release_env.left_out_record(missing, "2025-03-21T21:28:14Z")
    pip = FakePip({})
    unneeded = vm.install_stand_ins("0.8.2", pip, ["--quiet"], [record], set())
    assert unneeded == [record] and pip.calls == []
    got = vm.install_stand_ins("0.8.1", pip, ["--quiet"], [record], {"xgrammar"})
    assert pip.calls == [("install", "--quiet", "--no-deps", "xgrammar==0.1.17")]  # 0.1.13 builds CUDA code
    assert got[0]["stand_in"] == "xgrammar==0.1.17" and got[0]["reviewed"]
    assert "backend_xgrammar.py:113-114" in got[0]["why_not_needed"] and got[0]["required"] == "xgrammar==0.1.16"
    other = release_env.left_out_record(release_env.Missing("mystery", "mystery==2", "vllm", ("1", "3")), "t")
    assert vm.install_stand_ins("0.8.1", pip, [], [other], {"mystery"}) == [other]


def test_the_import_probe_names_a_missing_top_level_module(tmp_path):
    """Catches: the probe reporting nothing when vLLM's import path fails on a missing package
    (no stand-in would be installed), or reporting vLLM's own missing submodules."""
    fake = tmp_path / "vllm"
    (fake / "v1").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "v1" / "__init__.py").write_text("")
    (fake / "v1" / "request.py").write_text("import xgrammar_not_installed_here.sub\n")
    done = subprocess.run([sys.executable, "-c", release_env.IMPORT_PROBE], capture_output=True, text=True,
                          cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert done.stdout.split() == ["xgrammar_not_installed_here"]


# pip 25.3's ResolutionImpossible for vLLM 0.6.4 as of 2024-11-17 (abridged to its conflict lines).
PIP_CONFLICT = """\
ERROR: Cannot install vllm because these package versions have conflicting dependencies.

The conflict is caused by:
    outlines 0.0.46 depends on pyairports
    outlines 0.0.45 depends on pyairports
    outlines 0.0.44 depends on pyairports
    outlines 0.0.43 depends on pyairports

Additionally, some packages in these conflicts have no matching distributions available for your environment:
    pyairports

To fix this you could try to:
"""


def test_a_dependency_of_a_requirement_with_no_distribution_is_left_out_one_level_down(vm, tmp_path):
    """Catches: vLLM 0.6.3.post1-0.6.4.post1 recorded as unbuildable because outlines needs
    pyairports, which the index no longer has; the parent installed with its dependencies (pip
    fails again), left out entirely, installed at a version pip did not pick, or the record not
    naming which package required the missing one."""
    missing = release_env.unavailable_dependency(PIP_CONFLICT)
    assert missing == release_env.Missing("pyairports", "pyairports", "outlines", (),
                                          ("0.0.46", "0.0.45", "0.0.44", "0.0.43"))
    vllm = "Metadata-Version: 2.1\nName: vllm\nVersion: 0.6.4\nRequires-Dist: torch==2.5.1\n" \
           "Requires-Dist: outlines<0.1,>=0.0.43\n"
    outlines = "Metadata-Version: 2.1\nName: outlines\nVersion: 0.0.46\nRequires-Dist: lark\n" \
               "Requires-Dist: pyairports\n"
    pip = FakePip({}, {"vllm": vllm, "outlines": outlines})
    records = vm.install_without("0.6.4", tmp_path, pip, ["--quiet"], "t", missing)
    assert [(r["package"], r["by"]) for r in records] == [("pyairports", "outlines==0.0.46")]
    installs = [c for c in pip.calls if c[0] == "install"]
    assert installs[0][-2:] == ("torch==2.5.1", "lark")  # neither outlines nor pyairports resolved
    assert installs[1][-3:] == ("--uploaded-prior-to", "t", "outlines==0.0.46") and "--no-deps" in installs[1]
    assert installs[2][-1].endswith("vllm-0.6.4-cp38-abi3-manylinux_2_28_x86_64.whl") and "--no-deps" in installs[2]
    assert release_env.unavailable_dependency("ERROR: HTTP error 503") is None
