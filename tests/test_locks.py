"""Every environment installs from a complete lock that agrees with its top-level requirements.

``requirements/NAME.txt`` says what an environment is for (top-level pins);
``requirements/pylock.NAME.toml`` (PEP 751, made by ``scripts/lock NAME`` with ``pip lock``) pins
every package of it, transitive ones included, to one wheel and its sha256, and records the
sha256 of the ``NAME.txt`` it was made from. ``scripts/ensure-env`` installs only the lock
(``--require-hashes --no-deps``). These tests fail when someone edits a ``.txt`` and forgets to
re-lock, which would otherwise build an environment that silently ignores the edit.
"""

import hashlib
import importlib.util
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "requirements"
NAMES = sorted(p.stem for p in REQUIREMENTS.glob("*.txt"))


def top_level(text: str) -> dict[str, Requirement]:
    """The requirements of a ``NAME.txt`` text, by canonical name."""
    reqs = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            reqs[canonicalize_name(req.name)] = req
    return reqs


def lock_problems(name: str, requirements_text: str, lock: dict) -> list[str]:
    """Every way a lock disagrees with its top-level requirements (empty when they agree)."""
    problems = []
    recorded = lock.get("tool", {}).get("pagedattention-study", {})
    if recorded.get("requirements") != f"requirements/{name}.txt":
        problems.append(f"pylock.{name}.toml does not say it was made from requirements/{name}.txt")
    if recorded.get("requirements-sha256") != hashlib.sha256(requirements_text.encode()).hexdigest():
        problems.append(f"requirements/{name}.txt changed since its lock was made: run scripts/lock {name}")
    pins = {canonicalize_name(p["name"]): p for p in lock.get("packages", [])}
    for key, req in top_level(requirements_text).items():
        if key not in pins:
            problems.append(f"{req.name} is in {name}.txt but not in its lock")
        elif not req.specifier.contains(Version(pins[key]["version"]), prereleases=True):
            problems.append(f"{req.name}: {name}.txt asks {req.specifier}, the lock pins {pins[key]['version']}")
    for key, pkg in pins.items():
        wheels = pkg.get("wheels") or []
        if not wheels or not all(w.get("hashes", {}).get("sha256") for w in wheels):
            problems.append(f"{key}=={pkg.get('version')} has no hashed wheel")
    return problems


def load_lock(name: str) -> dict:
    path = REQUIREMENTS / f"pylock.{name}.toml"
    assert path.is_file(), f"requirements/{name}.txt has no lock: run scripts/lock {name}"
    return tomllib.loads(path.read_text())


def test_every_lock_has_requirements_and_back():
    """Catches: an environment with top-level requirements but no lock (ensure-env would refuse to
    build it), or an orphaned lock left behind when an environment was removed."""
    locks = sorted(p.name[len("pylock."):-len(".toml")] for p in REQUIREMENTS.glob("pylock.*.toml"))
    assert NAMES and locks == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_lock_agrees_with_top_level_requirements(name):
    """Catches: a top-level pin changed, added or removed in requirements/NAME.txt without running
    scripts/lock NAME, so the environment built from the lock is not the one the .txt describes;
    and a lock entry without a wheel hash, which --require-hashes would refuse."""
    assert lock_problems(name, (REQUIREMENTS / f"{name}.txt").read_text(), load_lock(name)) == []


def test_checker_sees_a_stale_lock():
    """Catches: a lock checker that cannot fail: an edited .txt, a bumped pin, a missing package
    and a hashless entry must each be reported."""
    txt = "alpha==1.0\nbeta>=2\n"
    lock = {"packages": [{"name": "Alpha", "version": "1.0", "wheels": [{"hashes": {"sha256": "aa"}}]},
                         {"name": "beta", "version": "2.1", "wheels": [{"hashes": {"sha256": "bb"}}]}],
            "tool": {"pagedattention-study": {"requirements": "requirements/x.txt",
                                              "requirements-sha256": hashlib.sha256(txt.encode()).hexdigest()}}}
    assert lock_problems("x", txt, lock) == []
    problems = lock_problems("x", "alpha==1.1\nbeta>=2\ngamma\n", lock)
    assert problems[0].startswith("requirements/x.txt changed since its lock was made")
    assert "alpha: x.txt asks ==1.1, the lock pins 1.0" in problems
    assert "gamma is in x.txt but not in its lock" in problems
    lock["packages"][1]["wheels"] = [{"name": "beta.tar.gz"}]
    assert lock_problems("x", txt, lock) == ["beta==2.1 has no hashed wheel"]


def test_install_lines_pin_the_locked_wheel():
    """Catches: ensure-env installing something other than the lock's wheel (a line without the
    hash would let pip pick any file of that version), or a lock with an sdist slipping through."""
    spec = importlib.util.spec_from_loader("pylock_requirements", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec((ROOT / "scripts" / "pylock-requirements").read_text(), module.__dict__)
    lines = module.requirements({"packages": [
        {"name": "torch", "version": "2.13.0+cpu", "wheels": [{"hashes": {"sha256": "ab12"}}]}]})
    assert lines == ["torch==2.13.0+cpu --hash=sha256:ab12"]
    with pytest.raises(SystemExit, match="no hashed wheel"):
        module.requirements({"packages": [{"name": "x", "version": "1", "sdist": {"name": "x-1.tar.gz"}}]})


def test_environment_cache_is_keyed_by_the_lock():
    """Catches: an environment cache keyed by the top-level file (the old key), under which a
    re-lock that moves a transitive pin reuses a stale environment on machines that built it."""
    text = (ROOT / "scripts" / "ensure-env").read_text()
    key_line = next(line for line in text.splitlines() if line.startswith("key="))
    assert '"$lock"' in key_line and '"$boot"' in key_line and "sys.version" in key_line
    assert '"$req"' not in key_line


def test_an_environment_moved_from_another_path_is_rebuilt(tmp_path):
    """Catches: ensure-env reusing an environment moved or copied in from another cache path. Its
    bin/python still starts, but every script (bin/mkdocs, bin/mypy) names the old interpreter
    path: moved, it fails with "cannot execute: required file not found" (scripts/test's lint and
    site parts died that way in CI); copied, it runs the original environment. Also catches the
    marker compared as written: the same cache reached through a symlink must not be rebuilt."""
    requirements = tmp_path / "requirements"
    requirements.mkdir()
    (requirements / "tiny.txt").write_text("")
    boot = (REQUIREMENTS / "pylock.bootstrap.toml").read_text()
    (requirements / "pylock.bootstrap.toml").write_text(boot)
    (requirements / "pylock.tiny.toml").write_text(boot)  # the installer alone: a few seconds

    def ensure(cache: Path) -> subprocess.CompletedProcess:
        return subprocess.run([str(ROOT / "scripts" / "ensure-env"), str(requirements / "tiny.txt")],
                              env={**os.environ, "PASTUDY_CACHE": str(cache)},
                              capture_output=True, text=True, check=True)

    first = ensure(tmp_path / "a")
    env = Path(first.stdout.strip())
    assert "building tiny" in first.stderr
    assert "building" not in ensure(tmp_path / "a").stderr  # built here: reused as it is

    shutil.move(str(tmp_path / "a"), str(tmp_path / "b"))
    moved = ensure(tmp_path / "b")
    assert "built at another path; rebuilding" in moved.stderr and "building tiny" in moved.stderr
    rebuilt = Path(moved.stdout.strip())
    assert rebuilt == (tmp_path / "b" / "envs" / env.name).resolve()
    version = subprocess.run([str(rebuilt / "bin" / "pip"), "--version"], check=True, capture_output=True, text=True)
    assert f" from {rebuilt}/" in version.stdout  # the script starts, and runs this environment

    (tmp_path / "link").symlink_to(tmp_path / "b")
    through_link = ensure(tmp_path / "link")
    assert "building" not in through_link.stderr and Path(through_link.stdout.strip()) == rebuilt
