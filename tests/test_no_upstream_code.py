"""No file we track may carry vLLM's copyright header or a package-registry host name.

We re-implement and annotate vLLM in our own words; its SPDX copyright line appearing in one of
our files is the tell-tale sign of pasted upstream code. Registry host names are kept out so that
every download goes through the clients' own configuration. The forbidden strings are assembled
from pieces so that this file does not contain them itself.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

SPDX_COPYRIGHT = " ".join(["SPDX-File" + "CopyrightText:", "Copyright", "contributors", "to", "the", "vLLM", "project"])
REGISTRY_HOSTS = [
    "pypi" + ".org",
    "python" + "hosted" + ".org",
    "npmjs" + ".org",
    "npmjs" + ".com",
    "crates" + ".io",
    "anaconda" + ".org",
]


def _project_files() -> list[Path]:
    """Tracked files plus untracked ones git does not ignore (so a check before commit counts too)."""
    out = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, check=False,
    )
    if out.returncode != 0:
        pytest.skip(f"not a git checkout: {out.stderr.decode().strip()}")
    names = [n for n in out.stdout.decode().split("\0") if n]
    return [REPO / n for n in names if (REPO / n).is_file()]


def _offenders(needle: str) -> list[str]:
    wanted = needle.lower().encode()
    return [str(p.relative_to(REPO)) for p in _project_files() if wanted in p.read_bytes().lower()]


def test_files_are_listed():
    """Catches: the scan silently checking nothing (git listing broken), which would make the tests below vacuous."""
    assert any(p.name == "test_no_upstream_code.py" for p in _project_files())


def test_no_vllm_spdx_copyright_header():
    """Catches: vLLM source pasted into the repository, which carries vLLM's SPDX copyright line."""
    assert _offenders(SPDX_COPYRIGHT) == []


@pytest.mark.parametrize("host", REGISTRY_HOSTS)
def test_no_package_registry_host_names(host):
    """Catches: a package-registry host name written into a file (downloads must use the clients' configuration)."""
    assert _offenders(host) == []
