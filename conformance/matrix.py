"""The release matrix file (``conformance/reports/matrix.json``): shards, entries and merging.

``scripts/version-matrix`` runs the conformance command inside one vLLM release's environment
after another and files each run as an *entry* of the matrix under its release. This module holds
what does not need vLLM: which releases a shard runs, how an entry is filed (an ``--only`` rerun
updates some properties and keeps the others' verdicts), how the partial files of several shards
are merged (refusing two different verdicts for one release), and what an entry records about
the project it ran at.

Sharding: ``--shard K/N`` (1 <= K <= N) takes the releases named on the command line, drops
duplicates, sorts them oldest first, and runs those at positions i (0-based) with i mod N == K-1.
Every release therefore lands in exactly one shard, whatever order the releases were typed in.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

STATUSES = ("passed", "failed", "not_applicable")
# A final release: 0.20.2, a hotfix such as 0.10.1.1, a post release such as 0.6.3.post1.
RELEASE = re.compile(r"^\d+\.\d+\.\d+(\.\d+)?(\.post\d+)?$")
ABOUT = ("Conformance verdicts per vLLM release, written by scripts/version-matrix "
         "(python -m conformance run inside each release's own environment, CPU only).")
# What a verdict depends on in this project: the reference and the harness. The reports
# (conformance/reports, the matrix among them) are written by the runs, and the trace explorer
# (conformance/explorer, conformance/explore.py) only displays saved traces, and this module files
# the runs' entries and records the project commit a run happens at: none of them changes a
# verdict. The pathspecs are git's; they are stored in the matrix so that the site compares an
# entry's commit against them.
HARNESS_PATHS = ("reference", "conformance", ":(exclude)conformance/reports", ":(exclude)conformance/explorer",
                 ":(exclude)conformance/explore.py", ":(exclude)conformance/matrix.py")


class MatrixError(ValueError):
    """A matrix or partial file that cannot be used, or partial files that disagree."""


def release_key(version: str) -> tuple[int, ...]:
    """Sort key of a release such as ``0.6.3.post1`` (numeric, so 0.9.2 comes before 0.33.0)."""
    return tuple(int(x) for x in re.findall(r"\d+", version))


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` as (K, N); ValueError unless 1 <= K <= N."""
    match = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if match is None:
        raise ValueError(f"--shard takes K/N such as 2/4, not {text!r}")
    k, n = int(match[1]), int(match[2])
    if not 1 <= k <= n:
        raise ValueError(f"--shard {text}: K must be between 1 and N")
    return k, n


def shard(releases: list[str], k: int, n: int) -> list[str]:
    """The releases shard ``k`` of ``n`` runs: the sorted, deduplicated list, every n-th from k-1."""
    ordered = sorted(set(releases), key=release_key)
    return [release for i, release in enumerate(ordered) if i % n == k - 1]


def summary(properties: dict[str, dict]) -> dict[str, int]:
    statuses = [p["status"] for p in properties.values()]
    return {s: statuses.count(s) for s in STATUSES}


def empty() -> dict:
    return {"about": ABOUT, "harness_paths": list(HARNESS_PATHS), "releases": {}}


def read(path: Path) -> dict:
    """The matrix (or partial file) at ``path``; an empty matrix if there is none."""
    if not path.exists():
        return empty()
    try:
        matrix = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise MatrixError(f"{path}: not readable JSON: {err}") from None
    releases = matrix.get("releases") if isinstance(matrix, dict) else None
    if not isinstance(releases, dict):
        raise MatrixError(f"{path}: not a release matrix (no \"releases\" object)")
    for version, entry in releases.items():
        if not isinstance(entry, dict) or entry.get("release") != version:
            raise MatrixError(f"{path}: entry {version!r} is not an entry for release {version}")
        if not isinstance(entry.get("properties"), dict):
            raise MatrixError(f"{path}: {version}: no \"properties\" object")
    return matrix


#: What a partial rerun records of its own run, under ``reruns``; the entry's other fields stay
#: those of the last full run.
RERUN_FIELDS = ("date", "project", "device", "python", "settings", "policy", "v0_policy", "installed")


def filed(old: dict | None, new: dict, partial: bool) -> dict:
    """The entry that goes into the matrix for ``new``'s release. A partial run (``--only``)
    updates its properties in ``old`` and keeps the other properties' verdicts. The entry keeps the
    last full run's fields (its project commit and date among them: the verdicts not listed under
    ``reruns`` were measured at that commit), so the site's freshness check never calls them
    current because some properties were rerun later; each rerun is listed under ``reruns`` with
    its own commit, date, device, Python, settings, policy rows, the vLLM, torch, triton and
    torchcodec versions it ran with (``installed``) and its properties, and a property rerun again
    leaves the earlier rerun's list. A rerun that covers every property of ``old``, which an entry
    with no verdicts (its environment could not be built) always is, is filed as a full run."""
    if not partial or old is None or set(new["properties"]) >= set(old.get("properties") or {}):
        return new
    rerun = {**{k: new.get(k) for k in RERUN_FIELDS}, "properties": sorted(new["properties"])}
    earlier = [{**r, "properties": [p for p in r["properties"] if p not in new["properties"]]}
               for r in old.get("reruns", [])]
    entry = {**old, "properties": {**old["properties"], **new["properties"]},
             "reruns": [r for r in earlier if r["properties"]] + [rerun]}
    entry["summary"] = summary(entry["properties"])
    return entry


def put(matrix: dict, entry: dict) -> dict:
    """``matrix`` with ``entry`` filed under its release, releases oldest first."""
    out = {**empty(), **{k: v for k, v in matrix.items() if k != "releases"}}
    out["about"], out["harness_paths"] = ABOUT, list(HARNESS_PATHS)
    releases = {**matrix.get("releases", {}), entry["release"]: entry}
    out["releases"] = {v: releases[v] for v in sorted(releases, key=release_key)}
    return out


def write(path: Path, matrix: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(matrix, indent=1, sort_keys=False) + "\n")
    tmp.replace(path)


def file_entry(path: Path, entry: dict, partial: bool = False, base: Path | None = None) -> dict:
    """File ``entry`` into the matrix (or partial file) at ``path`` and write it. An ``--only``
    rerun keeps the other properties of the release's entry in ``base`` (default ``path``): a
    shard writes its own file but starts from the committed matrix."""
    old = read(base or path)["releases"].get(entry["release"])
    matrix = put(read(path), filed(old, entry, partial))
    write(path, matrix)
    return matrix


def measured(entry: dict | None) -> bool:
    """Whether an entry is a run of its own release (verdicts, not driven as another release)."""
    return bool(entry and entry.get("properties") and entry.get("driven_as", entry["release"]) == entry["release"])


def unmeasured(published: list[str], releases: dict[str, dict], since: str) -> list[str]:
    """The published releases from ``since`` on, oldest first, that have no measured entry or
    one where a property ended in a harness error (no verdict on that property)."""
    return [r for r in sorted(set(published), key=release_key)
            if release_key(r) >= release_key(since)
            and (not measured(releases.get(r)) or harness_errors(releases[r]))]


def harness_errors(entry: dict) -> list[str]:
    """The properties of an entry that ended in a harness error, not a verdict."""
    return [n for n, p in entry.get("properties", {}).items() if p.get("failure") == "harness_error"]


def project_commit(entry: dict) -> str | None:
    return (entry.get("project") or {}).get("commit")


def conflict(a: dict, b: dict) -> str | None:
    """Why two entries of one release cannot both be true, or None if they agree: a different
    commit, different ``--only`` reruns, one built and the other not, or different verdicts (a
    property's status, or a property only one of them has)."""
    release = a["release"]
    if project_commit(a) != project_commit(b):
        return f"{release}: run at project commit {project_commit(a)} and at {project_commit(b)}"
    if a.get("reruns", []) != b.get("reruns", []):
        return f"{release}: different --only reruns filed"
    if bool(a.get("build_error")) != bool(b.get("build_error")):
        return f"{release}: built in one file and not buildable in the other"
    names = sorted(set(a["properties"]) | set(b["properties"]))
    differ = [f"{n} {a['properties'].get(n, {}).get('status', 'absent')} vs "
              f"{b['properties'].get(n, {}).get('status', 'absent')}"
              for n in names if a["properties"].get(n, {}).get("status") != b["properties"].get(n, {}).get("status")]
    if differ:
        return f"{release}: different verdicts ({'; '.join(differ)})"
    return None


def merge(partials: list[Path], base: Path) -> dict:
    """The matrix at ``base`` with every entry of the partial files filed into it.

    MatrixError (and nothing merged) if a file is not a matrix, or if two files hold entries of
    one release that conflict (see ``conflict``). Entries of one release that agree are the same
    verdicts; the first file's entry is kept."""
    chosen: dict[str, tuple[Path, dict]] = {}
    problems = []
    for path in partials:
        for release, entry in read(path)["releases"].items():
            if release not in chosen:
                chosen[release] = (path, entry)
                continue
            first_path, first = chosen[release]
            why = conflict(first, entry)
            if why:
                problems.append(f"{why} ({first_path} vs {path})")
    if problems:
        raise MatrixError("conflicting entries, nothing written:\n  " + "\n  ".join(problems))
    matrix = read(base)
    for _, entry in chosen.values():
        matrix = put(matrix, entry)
    return matrix


def coverage(partials: list[Path]) -> list[str]:
    """What a set of shard files leaves out: shards of the plan with no file, and releases a
    shard was to run that its file has no entry for (its run stopped). Empty when complete."""
    plans = [(path, read(path)) for path in partials]
    shards = [(path, m["shard"], m["releases"]) for path, m in plans if isinstance(m.get("shard"), dict)]
    problems = []
    for count in sorted({s["count"] for _, s, _ in shards}):
        have = {s["index"] for _, s, _ in shards if s["count"] == count}
        absent = sorted(set(range(1, count + 1)) - have)
        if absent:
            problems.append(f"no file for shard {', '.join(f'{k}/{count}' for k in absent)}")
    for path, plan, releases in shards:
        unrun = [r for r in plan.get("releases", []) if r not in releases]
        if unrun:
            problems.append(f"{path}: shard {plan['index']}/{plan['count']} has no entry for {', '.join(unrun)}")
    return problems


def project_state(root: Path) -> dict:
    """The project commit a run happens at: ``git rev-parse HEAD``, and whether the reference or
    the harness (``HARNESS_PATHS``) differs from it in the working tree (files changed or not
    yet committed, listed in ``changed``). ``commit`` is None where git cannot tell."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)

    try:
        head = git("rev-parse", "HEAD")
        status = git("status", "--porcelain", "--", *HARNESS_PATHS)
    except OSError:
        return {"commit": None, "dirty": None, "changed": [], "why": "git is not installed"}
    if head.returncode != 0 or status.returncode != 0:
        return {"commit": None, "dirty": None, "changed": [], "why": (head.stderr or status.stderr).strip()}
    changed = [line[3:] for line in status.stdout.splitlines() if line.strip()]
    return {"commit": head.stdout.strip(), "dirty": bool(changed), "changed": changed[:30]}

