"""V0 liveness per release: which V0 block-manager mechanisms the serving path reaches, release by release.

``python -m annotations.reach_probe --liveness``, run inside a V0 release's environment (every
release from 0.6.3.post1 to 0.10.2 has ``vllm/core/block_manager.py``; ``scripts/version-matrix``
runs it for each such release it builds), drives that release's real V0 engine step with a fake
model (``annotations.reach_probe``) in every probe configuration and files the result here, in
``annotations/v0-liveness.json``, under the release: the command, the vLLM version, the
date, the project commit, the sha256 of the upstream files that decide what the run reaches, and
per configuration its settings and either ``run`` (what the run did: preemptions, requests with
``n > 1``, the largest sequence group added and run, sequences forked, blocks copied and swapped,
how it ended) or ``not_run`` (why this release could not run it, as vLLM said it). A release
whose environment could not be built has ``build_error`` and no configurations.

This module is the one reader and writer of that file and needs no vLLM: :func:`read` refuses a
malformed file, :func:`file_entry` replaces one release's entry, :func:`changes` lists where a
mechanism starts or stops being reached between two measured releases, which the releases page
shows (``docs/hooks/matrix_page.py``) beside the sentences that explain each change.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPORT = Path(__file__).resolve().parent / "v0-liveness.json"
ABOUT = ("V0 liveness per vLLM release: what the real V0 engine step reaches per configuration, written by "
         "python -m annotations.reach_probe --liveness inside each release's own environment (CPU, fake model).")
#: The figures of a run the page shows, in order: (key of ``run``, column heading).
COLUMNS = (
    ("preempted", "Preemptions"),
    ("parallel_sample_requests", "Requests with n > 1"),
    ("largest_group_added", "Largest group added"),
    ("largest_group_seen", "Largest group run"),
    ("forked_sequences", "Sequences forked"),
    ("blocks_copied", "Blocks copied"),
    ("blocks_swapped_out", "Blocks swapped out"),
)


def ended(run: dict) -> str:
    """How a run ended: the error vLLM raised, the requests left unfinished, or all done."""
    if run.get("error"):
        return str(run["error"])
    left = run.get("unfinished_after", 0)
    return f"{left} requests unfinished" if left else "all requests done"


#: The mechanisms, each a yes/no fact of a run: a change between releases is a fact that flips.
FACTS: dict[str, Callable[[dict], bool]] = {
    "preempts": lambda run: run["preempted"] > 0,
    "runs a group of several sequences": lambda run: run["largest_group_seen"] > 1,
    "forks sequences": lambda run: run["forked_sequences"] > 0,
    "copies blocks (copy-on-write)": lambda run: run["blocks_copied"] > 0,
    "swaps blocks out": lambda run: run["blocks_swapped_out"] > 0,
    "finishes every request without error": lambda run: ended(run) == "all requests done",
}


class LivenessError(ValueError):
    """The liveness file is malformed, or an entry to file is."""


def release_key(version: str) -> tuple[int, ...]:
    """0.6.3.post1 -> (0, 6, 3, 1): releases in order, a post release after its base."""
    return tuple(int(x) for x in re.findall(r"\d+", version))


def empty() -> dict:
    return {"about": ABOUT, "releases": {}}


def check_entry(version: str, entry: object, where: str = "") -> None:
    """LivenessError naming the defect if ``entry`` is not a liveness entry for ``version``."""
    at = f"{where}{version}"
    if not isinstance(entry, dict) or entry.get("release") != version:
        raise LivenessError(f"{at}: not an entry for release {version}")
    if entry.get("build_error"):
        if entry.get("configs"):
            raise LivenessError(f"{at}: a build error and configurations at once")
        return
    configs = entry.get("configs")
    if not isinstance(configs, dict) or not configs:
        raise LivenessError(f"{at}: no configurations and no reason why (build_error)")
    for name, config in configs.items():
        if not isinstance(config, dict) or not isinstance(config.get("settings"), list):
            raise LivenessError(f"{at} {name}: no settings")
        if ("run" in config) == ("not_run" in config):
            raise LivenessError(f"{at} {name}: needs exactly one of run (what it did) and not_run (why not)")
        if "not_run" in config:
            if not isinstance(config["not_run"], str) or not config["not_run"].strip():
                raise LivenessError(f"{at} {name}: not_run must say why")
            continue
        run = config["run"]
        for key in [k for k, _ in COLUMNS] + ["steps", "unfinished_after"]:
            if not isinstance(run.get(key), int) or isinstance(run.get(key), bool):
                raise LivenessError(f"{at} {name}: run has no whole number {key!r}")


def read(path: Path | None = None) -> dict:
    """The liveness file (default :data:`REPORT`, looked up at the call), empty if there is none,
    releases oldest first; LivenessError if malformed."""
    path = path or REPORT
    if not path.exists():
        return empty()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise LivenessError(f"{path}: not readable JSON: {err}") from None
    releases = data.get("releases") if isinstance(data, dict) else None
    if not isinstance(releases, dict):
        raise LivenessError(f"{path}: not a liveness file (no \"releases\" object)")
    for version, entry in releases.items():
        check_entry(version, entry, f"{path}: ")
    return {**data, "releases": {v: releases[v] for v in sorted(releases, key=release_key)}}


def write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=1)
    text = re.sub(r"\[[^\[\]{}]*\]", lambda m: json.dumps(json.loads(m.group(0))), text)  # short lists: one line
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(text + "\n", encoding="utf-8")
    tmp.replace(path)


def file_entry(entry: dict, path: Path | None = None) -> dict:
    """File ``entry`` under its release (replacing an older one) and write the file (default
    :data:`REPORT`, looked up at the call)."""
    path = path or REPORT
    version = entry.get("release") if isinstance(entry, dict) else None
    if not isinstance(version, str):
        raise LivenessError("an entry names no release")
    check_entry(version, entry)
    data = read(path)
    releases = {**data["releases"], version: entry}
    out = {"about": ABOUT, "releases": {v: releases[v] for v in sorted(releases, key=release_key)}}
    write(path, out)
    return out


def make_entry(summary: dict, *, release: str, command: str, project: dict, date: str,
               environment: dict | None = None) -> dict:
    """The entry of one probe summary (``annotations.reach_probe.summary``)."""
    entry = {"release": release, "vllm_version": summary["vllm_version"], "date": date, "command": command,
             "project": project, "python": summary.get("python"), "environment": environment,
             "files_sha256": summary["files_sha256"], "sha256": summary["sha256"], "configs": summary["configs"]}
    if summary["vllm_version"] != release:
        raise LivenessError(f"the probe ran vLLM {summary['vllm_version']}, not {release}")
    check_entry(release, entry)
    return entry


def build_error_entry(release: str, record: dict, *, command: str, project: dict, date: str) -> dict:
    """The entry of a release whose environment could not be built: why, and no configurations."""
    return {"release": release, "date": date, "command": command, "project": project, "build_error": record}


@dataclass(frozen=True)
class Change:
    """``fact`` of ``config`` is ``now`` from release ``at`` on and was not at ``before``, the
    previous release measured in that configuration."""

    config: str
    fact: str
    before: str
    at: str
    now: bool

    def __str__(self) -> str:
        if self.now:
            return f"{self.config}: {self.fact} from {self.at} on (not at {self.before})"
        return f"{self.config}: no longer {self.fact} from {self.at} on (did at {self.before})"


def changes(releases: dict[str, dict]) -> list[Change]:
    """Every flip of a :data:`FACTS` fact between consecutive releases that ran the configuration."""
    out: list[Change] = []
    ordered = sorted(releases, key=release_key)
    names = sorted({n for e in releases.values() for n in (e.get("configs") or {})})
    for name in names:
        ran = [(v, releases[v]["configs"][name]["run"]) for v in ordered
               if "run" in (releases[v].get("configs") or {}).get(name, {})]
        for (before, old), (at, new) in zip(ran, ran[1:]):
            for fact, holds in FACTS.items():
                if holds(old) != holds(new):
                    out.append(Change(name, fact, before, at, holds(new)))
    return out
