"""The two pinned vLLM releases have one home, ``upstream/releases.py``, and every reader uses it.

Data named by a release keeps its name (the environment locks, the annotation folders, the change
log's records, trace names); these tests tie that data to the home and refuse a pinned release
written as a value anywhere else in the project's code.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from upstream.releases import PINNED, V0_RELEASE, V1_RELEASE, lock_name

ROOT = Path(__file__).resolve().parents[1]
#: The code that reads the pins (reference/ imports nothing of ours; its policy names are data).
CODE_ROOTS = ("annotations", "conformance", "benchmarks", "docs/hooks", "upstream", "scripts",
              "tests/conformance/pinned.py")
PYTHON_SCRIPTS = ("scripts/version-matrix", "scripts/replay-known-bugs", "scripts/pylock-requirements")
#: Files whose release strings are records about a release, not the pin, and why.
ALLOWED_FILES = {
    "upstream/releases.py": "the home itself",
    "conformance/changelog.py": "the change log: the release each value first holds at, and the lines it cites there",
}
#: Single values that name data recorded at a release (they keep their names when a pin moves).
ALLOWED_VALUES = {
    ("docs/hooks/trace_explorer.py", "v1-upstream-test-prefill-v0.33.0"),  # corpus trace names
    ("docs/hooks/trace_explorer.py", "v1-upstream-sliding-window-remove-skipped-v0.33.0"),
    ("docs/hooks/trace_explorer.py", "v1-measured-sliding-window-null-count-v0.33.0"),
}


def pin_pattern(releases: tuple[str, ...] = PINNED) -> re.Pattern[str]:
    return re.compile(r"(?<![0-9.])(" + "|".join(map(re.escape, releases)) + r")(?![0-9])")


def pinned_values(source: str, releases: tuple[str, ...] = PINNED) -> list[tuple[int, str]]:
    """(line, value) of every string in Python ``source`` that holds a pinned release as a value or
    a name: a string without whitespace (prose, which has some, and docstrings may say a release)."""
    pattern = pin_pattern(releases)
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            and pattern.search(node.value) and not re.search(r"\s", node.value)]


def code_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", *CODE_ROOTS], cwd=ROOT, capture_output=True, text=True, check=True)
    return [f for f in listed.stdout.split() if f.endswith(".py") or f in PYTHON_SCRIPTS]


def test_the_scan_finds_a_value_and_passes_prose():
    """Catches: a guard that cannot fail (a value in code, a name built from it or an f-string part
    not seen), or one that flags prose and docstrings, which may say a release."""
    source = ('"""Notes of vLLM 0.10.2."""\n'
              'A = "0.10.2"\nB = "v0.33.0"\nC = f"block_manager-vllm-0.33.0.json{A}"\n'
              'D = "the V0 engine of 0.10.2"\nE = "0.10.21"\n'
              'def f():\n    """0.33.0"""\n    return "reach-probe-0.10.2.json"\n')
    assert [line for line, _ in pinned_values(source)] == sorted([2, 3, 4, 9])


def test_no_pinned_release_in_code_outside_its_home():
    """Catches: a pinned release written again as a value (``"0.10.2"``, ``"v0.33.0"``, a file or
    lock name built from it) instead of read from ``upstream.releases``: moving a pin would leave
    that reader on the old release."""
    found = []
    for name in code_files():
        if name in ALLOWED_FILES:
            continue
        source = (ROOT / name).read_text(encoding="utf-8")
        found += [f"{name}:{line}: {value!r}" for line, value in pinned_values(source)
                  if (name, value) not in ALLOWED_VALUES]
    assert not found, "read these from upstream.releases:\n" + "\n".join(found)


def test_the_test_command_reads_the_pins_from_their_home():
    """Catches: scripts/test naming a pinned release itself (outside comments), or
    ``python -m upstream.releases`` printing anything but both pins, oldest first, which it reads."""
    pattern = pin_pattern()
    code = [line.split("#", 1)[0] for line in (ROOT / "scripts" / "test").read_text().splitlines()]
    assert not [line for line in code if pattern.search(line)]
    assert "python3 -m upstream.releases" in (ROOT / "scripts" / "test").read_text()
    printed = subprocess.run([sys.executable, "-m", "upstream.releases"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    assert tuple(printed) == PINNED == (V0_RELEASE, V1_RELEASE)


def test_locks_and_annotation_folders_are_the_pinned_releases():
    """Catches: a pin moved in its home but not in the data named by it (or the reverse): an
    environment lock ``requirements/vllm-<release>.txt`` or an annotation folder
    ``annotations/v<release>/`` for a release that is not pinned, or a pin without one."""
    locks = {p.stem for p in (ROOT / "requirements").glob("vllm-*.txt") if re.fullmatch(r"vllm-[0-9.]+", p.stem)}
    assert locks == {lock_name(r) for r in PINNED}
    folders = {p.name for p in (ROOT / "annotations").glob("v*") if p.is_dir() and re.fullmatch(r"v[0-9.]+", p.name)}
    assert folders == {f"v{r}" for r in PINNED}
    assert tuple(map(int, V0_RELEASE.split("."))) < tuple(map(int, V1_RELEASE.split(".")))  # oldest first
