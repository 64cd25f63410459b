"""The GPU-lane script, tested without a GPU: argument parsing, refusal, report writing with the
GPU steps mocked, and a preprocessing pass of the CUDA launcher against vLLM's and torch's headers.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conformance.gpu import build, run

REPO = Path(__file__).resolve().parents[2]


def csrc_dir(scratch: Path) -> Path | None:
    """vLLM v0.10.2's csrc/: $PASTUDY_VLLM_CSRC, else unpacked from the pinned, sha256-verified
    sdist that ``annotations.upstream`` fetches and caches (None only when it cannot be had)."""
    given = os.environ.get("PASTUDY_VLLM_CSRC", "")
    if given and Path(given, "attention", "attention_kernels.cuh").is_file():
        return Path(given)
    import tarfile

    from annotations.upstream import UpstreamError, sdist_path

    try:
        archive = sdist_path("0.10.2")
    except (UpstreamError, OSError) as err:
        pytest.skip(f"the pinned vLLM 0.10.2 sdist cannot be fetched here: {err}")
    prefix = "vllm-0.10.2/csrc/"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
        for m in members:
            m.name = m.name[len("vllm-0.10.2/"):]
        tar.extractall(scratch, members=members, filter="data")
    return scratch / "csrc"


def test_parse_args_defaults_and_build_needs_csrc():
    """Catches: a default that writes the report somewhere unexpected, or build mode that starts
    compiling without knowing where vLLM's sources are."""
    args = run.parse_args([])
    assert args.mode == "auto" and args.out == Path("reports/gpu-lane.json")
    assert not args.skip_bench and args.seeds == 1
    with pytest.raises(SystemExit) as exc:
        run.parse_args(["--mode", "build"])
    assert exc.value.code == 2


def test_refuses_clearly_without_gpu(tmp_path, capsys):
    """Catches: a script that, without a GPU, crashes deep inside torch or reports success."""
    out = tmp_path / "report.json"
    status = run.main(["--out", str(out)], has_gpu=lambda: False)
    assert status == run.NO_GPU
    assert "no CUDA GPU" in capsys.readouterr().err
    assert not out.exists()


def fake_steps(fail_conformance=False):
    def conformance(ops, args):
        if fail_conformance:
            raise AssertionError("paged_attention_v2 differs")
        return [{"check": "paged_attention_v1", "ops": ops}]
    return {"load_ops": lambda args: ("OPS", "fake ops"), "conformance": conformance,
            "triton_unified": lambda args: [{"check": "unified_attention", "skipped": "x"}],
            "benchmark": lambda ops, args: {"kernels": {"vllm_cuda_v1": {"ms": 1.0}}}}


def test_report_written_with_mocked_gpu_steps(tmp_path):
    """Catches: a report missing steps, losing the ops' origin, or exit status 0 on failure."""
    out = tmp_path / "sub" / "report.json"
    assert run.main(["--out", str(out)], steps=fake_steps(), has_gpu=lambda: True) == 0
    report = json.loads(out.read_text())
    assert report["passed"] is True
    assert set(report["steps"]) == {"load_ops", "conformance", "triton_unified", "benchmark"}
    assert report["steps"]["load_ops"]["result"] == "fake ops"
    assert report["steps"]["conformance"]["result"][0]["ops"] == "OPS"

    assert run.main(["--out", str(out), "--skip-bench"], steps=fake_steps(True),
                    has_gpu=lambda: True) == 1
    report = json.loads(out.read_text())
    assert report["passed"] is False and "benchmark" not in report["steps"]
    assert "paged_attention_v2 differs" in report["steps"]["conformance"]["error"]


def test_check_csrc_names_what_is_missing(tmp_path):
    """Catches: starting a long build from a directory that is not vLLM's csrc/."""
    with pytest.raises(ValueError, match="cache_kernels.cu"):
        build.check_csrc(tmp_path)


def test_run_sh_forwards_arguments():
    """Catches: a wrapper script that is not executable or does not reach the Python entry point."""
    script = REPO / "conformance" / "gpu" / "run.sh"
    assert os.access(script, os.X_OK)
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHON": sys.executable})
    assert done.returncode == 0 and "--csrc" in done.stdout


# CUDA-library headers torch's CUDA headers include but that a bare nvcc toolkit may lack; for a
# preprocessing pass empty stand-ins are enough (no declaration from them is used by our code).
ABSENT_OK = ["cusparse.h", "cublas_v2.h", "cublasLt.h", "cusolverDn.h", "cusolver_common.h",
             "c10/cuda/impl/cuda_cmake_macros.h"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_launcher_preprocesses_against_vllm_and_torch_headers(tmp_path):
    """Catches: a launcher that includes the wrong vLLM paths or names kernels/macros that do not
    exist in the pinned v0.10.2 sources: nvcc -E must resolve every include."""
    csrc = csrc_dir(tmp_path / "src")
    from torch.utils.cpp_extension import include_paths
    stubs = tmp_path / "stubs"
    for name in ABSENT_OK:
        (stubs / name).parent.mkdir(parents=True, exist_ok=True)
        (stubs / name).touch()
    cmd = ["nvcc", "-E", "-x", "cu", "-std=c++17", "-DTORCH_EXTENSION_NAME=pastudy_kernels",
           f"-I{csrc}", *[f"-I{p}" for p in include_paths()],
           f"-I{sysconfig.get_paths()['include']}", f"-I{stubs}",
           str(build.LAUNCHER), "-o", str(tmp_path / "launcher.ii")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    text = (tmp_path / "launcher.ii").read_text(errors="replace")
    assert "paged_attention_v2_reduce_kernel" in text and "reshape_and_cache_flash" in text
