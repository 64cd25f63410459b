"""What a vLLM release's environment needs beyond ``pip install vllm==RELEASE``, and what it can go without.

``scripts/version-matrix`` builds each release's environment with pip. Two things can stop that
build or the run inside it, and this module decides what to do about each and what to record:

* **A pinned dependency the index does not serve** (vLLM 0.34.0 pins ``flashinfer-python==0.7.3``;
  the index has 0.7.2.post1 and 0.7.4). ``missing_distribution`` reads pip's error; if the missing
  package is one of vLLM's own requirements, vLLM is installed with ``--no-deps`` and
  ``requirements`` lists the others (from the wheel's ``Requires-Dist``, markers evaluated, extras
  left out). The matrix entry records the package, the version asked for, what pip was offered
  and ``why_not_needed``.
* **A left-out pin that a release imports anyway** (vLLM 0.8.1 pins ``xgrammar==0.1.16``, which
  the index does not serve at all, and imports it whenever ``vllm.v1.request`` is imported).
  ``STAND_INS`` names such packages and why no property depends on their version: the version
  ``STAND_IN_VERSIONS`` names (else the offered one nearest below the pin) is installed with
  ``--no-deps`` in its place, only where ``IMPORT_PROBE`` shows the import failing on it, and the left-out record
  says so (``stand_in``).
* **A package that installs but cannot load** (torchcodec 0.14.0 loads FFmpeg's shared libraries
  from the system, ``libavutil.so.56`` to ``.60``, and a machine without FFmpeg has none; vLLM
  0.25.0's ``vllm/multimodal/video.py`` catches only ImportError around its import, so the
  RuntimeError stopped every V1 property. Debian 12's FFmpeg 5.1 runtime packages, libavutil57
  and siblings, would satisfy its ``libtorchcodec_core5``; removing the package needs no root).
  ``UNLOADABLE_REMOVED`` names such packages, the probe that shows whether they load, and why
  the harness can do without them: they are uninstalled and the entry records it.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

try:
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.version import InvalidVersion, Version
except ImportError:  # the script runs under whichever python3 is first on PATH: pip's copy then
    from pip._vendor.packaging.markers import default_environment  # type: ignore[no-redef]  # the same names, pip's copy
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]  # the same names, pip's copy
    from pip._vendor.packaging.version import InvalidVersion, Version  # type: ignore[no-redef]  # the same names, pip's copy


def canonical(name: str) -> str:
    """A project name as the index compares it (PEP 503): ``Flashinfer_Python`` -> ``flashinfer-python``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """The canonical project name of a requirement string: ``fastapi[standard]>=0.115`` -> ``fastapi``."""
    return canonical(re.split(r"[\[=<>!~ @;]", requirement.strip())[0])


@dataclass(frozen=True)
class Missing:
    """A requirement pip found no distribution for."""

    package: str       # canonical name
    requirement: str   # as pip printed it, e.g. "flashinfer-python==0.7.3"
    parent: str | None  # the package that asked for it ("vllm"), None for a top-level requirement
    offers: tuple[str, ...]  # the versions pip was offered (this platform, before the cutoff)
    parent_versions: tuple[str, ...] = ()  # the parent's versions that asked for it, newest first


_NOT_FOUND = re.compile(r"Could not find a version that satisfies the requirement (\S+)"
                        r"(?: \(from (?!versions:)([^)]*)\))?(?: \(from versions: ([^)]*)\))?")


def missing_distribution(pip_output: str) -> Missing | None:
    """The requirement pip's output says it found no distribution for, or None."""
    match = _NOT_FOUND.search(pip_output)
    if match is None:
        return None
    requirement, parent, offers = match.groups()
    name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    versions = tuple(v.strip() for v in (offers or "").split(",") if v.strip() and v.strip() != "none")
    pinned = re.fullmatch(r"[A-Za-z0-9._-]+==([A-Za-z0-9._+!-]+)", parent.strip()) if parent else None
    return Missing(canonical(name[0]) if name else requirement, requirement,
                   requirement_name(parent) if parent else None, versions,
                   (pinned.group(1),) if pinned else ())


_DEPENDS = re.compile(r"^\s+([A-Za-z0-9][A-Za-z0-9._-]*) (\S+) depends on ([A-Za-z0-9][A-Za-z0-9._-]*)(\S*)", re.M)
_UNAVAILABLE = re.compile(r"no matching distributions available for your environment:\n((?:\s+\S+\n?)+)")


def unavailable_dependency(pip_output: str) -> Missing | None:
    """The dependency of a dependency that pip's ResolutionImpossible says has no distribution
    at all ("outlines 0.0.46 depends on pyairports" ... "no matching distributions available for
    your environment: pyairports"), with the parent and the parent's versions it tried, or None."""
    unavailable = _UNAVAILABLE.search(pip_output)
    if unavailable is None:
        return None
    names = {canonical(n) for n in unavailable.group(1).split()}
    asked = [(canonical(p), v, canonical(d), spec) for p, v, d, spec in _DEPENDS.findall(pip_output)
             if canonical(d) in names]
    parents = {p for p, _, _, _ in asked}
    if len(parents) != 1:
        return None
    parent, _, package, spec = asked[0]
    versions = sorted({v for _, v, _, _ in asked}, key=_version_key, reverse=True)
    return Missing(package, package + spec, parent, (), tuple(versions))


def _version_key(text: str) -> Version:
    return Version(text) if _is_version(text) else Version("0")


def requirements(metadata: str, leave_out: set[str], environment: dict[str, str] | None = None) -> list[str]:
    """The ``Requires-Dist`` of a wheel's METADATA that apply (markers evaluated for
    ``environment``, default this interpreter, with no extra), minus the packages ``leave_out``
    names. Each is returned as a requirement string without its marker, for pip."""
    env = {**(environment or default_environment()), "extra": ""}
    left_out = {canonical(n) for n in leave_out}
    out = []
    headers = metadata.split("\n\n", 1)[0]  # the description after the first blank line is not headers
    for line in headers.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.partition(":")[2].strip())
        if canonical(req.name) in left_out:
            continue
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        where = f" @ {req.url}" if req.url else str(req.specifier)
        out.append(f"{req.name}{extras}{where}")
    return out


def wheel_metadata(wheel: Path) -> str:
    """The METADATA file of a wheel."""
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
        if len(names) != 1:
            raise ValueError(f"{wheel}: expected one */METADATA, found {names}")
        return archive.read(names[0]).decode("utf-8")


# Packages the conformance command can run without, and why. The command drives vLLM's KV-cache
# managers (vllm/v1/core, vllm/core) and its Triton kernels (vllm/attention/ops,
# vllm/v1/attention/ops); a package only vLLM's GPU serving paths import is not needed there.
WHY_NOT_NEEDED = {
    "flashinfer-python": (
        "FlashInfer is imported at module level only by vLLM's FlashInfer attention backends "
        "(vllm/v1/attention/backends/flashinfer.py, mla/flashinfer_mla.py), a multi-node "
        "communicator (vllm/distributed/device_communicators/mnnvl_compat.py) and model-specific "
        "GPU code, and elsewhere (samplers, fused MoE, communicators) inside functions on GPU paths; "
        "the KV-cache managers (vllm/v1/core) and the Triton kernels the conformance command drives "
        "(chunked_prefill_paged_decode, triton_unified_attention, triton_reshape_and_cache_flash) "
        "do not mention it (read at 0.34.0, where vllm/utils/flashinfer.py probes for it with "
        "find_spec). A property that imported it would report a harness error (ImportError), not "
        "a verdict."),
}


WHY_NOT_NEEDED["pyairports"] = (
    "outlines 0.0.43 to 0.0.46 (vLLM 0.6.3.post1 to 0.6.4.post1 require outlines>=0.0.43,<0.1) "
    "require pyairports, whose releases are gone from the index (a 0.0.1 source archive uploaded "
    "in 2025 is all that remains). Outlines loads it on every import (outlines/__init__.py imports "
    "outlines.types, which imports outlines/types/airports.py, which imports pyairports.airports), "
    "and vLLM imports outlines only in vllm/model_executor/guided_decoding/"
    "outlines_logits_processors.py, for guided decoding, which no property uses. Outlines is "
    "installed with --no-deps and its other requirements; a property whose import reached it "
    "would report a harness error (ModuleNotFoundError), not a verdict.")


def why_not_needed(package: str) -> str:
    return WHY_NOT_NEEDED.get(canonical(package), (
        f"not reviewed: {package} is not known to be needed by the KV-cache managers or the Triton "
        "kernels; a property that imported it would report a harness error (ImportError), not a "
        "verdict."))


def nearest(missing: Missing) -> list[str]:
    """For a pin (``==X``): the offered versions just below and just above X."""
    req = Requirement(missing.requirement)
    pins = [s.version for s in req.specifier if s.operator == "=="]
    if len(pins) != 1 or "*" in pins[0]:
        return []
    pin = Version(pins[0])
    offered = sorted({Version(v) for v in missing.offers if _is_version(v)})
    below = [v for v in offered if v < pin]
    above = [v for v in offered if v > pin]
    return [str(v) for v in (below[-1:] + above[:1])]


def _is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def left_out_record(missing: Missing, cutoff: str, parent_version: str | None = None) -> dict:
    """What the matrix entry says about a requirement left out of the environment (``by`` the
    package that requires it, with the version installed where that is not vLLM)."""
    by = f"{missing.parent}=={parent_version}" if parent_version else missing.parent
    return {"package": missing.package, "required": missing.requirement, "by": by,
            "index_nearest": nearest(missing), "index_offers": list(missing.offers[-12:]),
            "offers_seen": f"this platform, uploaded before {cutoff}",
            "reviewed": canonical(missing.package) in WHY_NOT_NEEDED,
            "why_not_needed": why_not_needed(missing.package)}


# Left-out pins a release imports on the harness's import path anyway, and why a nearby version
# can stand in: the name is looked up, nothing of it is called by any property.
STAND_IN_VERSIONS = {"xgrammar": "0.1.17"}  # a version that loads here; the reason says why this one
STAND_INS = {
    "xgrammar": (
        "vLLM 0.8.1 imports backend_xgrammar at module level "
        "(v0.8.1 vllm/v1/structured_output/__init__.py:12), whose dataclass XgrammarGrammar "
        "annotates two fields with xgr.GrammarMatcher and xgr.CompiledGrammar "
        "(v0.8.1 vllm/v1/structured_output/backend_xgrammar.py:113-114) in a module without "
        "`from __future__ import annotations`, so creating the class makes vLLM's LazyLoader "
        "import xgrammar whenever vllm.v1.request is imported (its import of "
        "vllm.v1.structured_output.request, v0.8.1 vllm/v1/request.py:9, runs the package's "
        "__init__ first); 0.8.2 no longer imports backend_xgrammar there. The stand-in is only "
        "looked up: no property compiles a grammar. It is 0.1.17, the version vLLM 0.8.3 pins: "
        "0.1.13, the nearest offered before the cutoff, builds a CUDA torch extension when "
        "imported, which fails on a machine without a GPU."),
}

# What the conformance command imports from vLLM, in an order that names the first failure; a
# module the release lacks is skipped. Prints the name of each missing top-level module.
IMPORT_PROBE = """\
import importlib, importlib.util
for name in ("vllm", "vllm.v1.request", "vllm.v1.core.kv_cache_manager", "vllm.core.block_manager"):
    parent = name.rpartition(".")[0]
    try:
        if parent and importlib.util.find_spec(parent) is None:
            continue
        importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name and not err.name.startswith("vllm"):
            print(err.name.partition(".")[0])
    except Exception:
        pass
"""


def stand_in_version(missing: Missing) -> str | None:
    """The version that stands in for a left-out pin of ``STAND_INS``: the one
    ``STAND_IN_VERSIONS`` names, else the offered version nearest below the pin (else above);
    None for any other package or when nothing is offered near it."""
    package = canonical(missing.package)
    if package not in STAND_INS:
        return None
    if package in STAND_IN_VERSIONS:
        return STAND_IN_VERSIONS[package]
    near = nearest(missing)  # [just below, just above], either may be absent; below comes first
    return near[0] if near else None


def stand_in_record(record: dict, version: str) -> dict:
    """A left-out record with the version that stands in for the pin, and why it may."""
    return {**record, "stand_in": f"{record['package']}=={version}", "reviewed": True,
            "why_not_needed": STAND_INS[canonical(record["package"])]}


@dataclass(frozen=True)
class Unloadable:
    """A package a release's resolver may pick that can be installed yet fail to load."""

    probe: str  # Python that imports what vLLM imports; it fails when the package cannot load
    fails_with: str  # text in the probe's output that says the package cannot load
    why_removed: str


UNLOADABLE_REMOVED = {
    "torchcodec": Unloadable(
        probe="import torchcodec.decoders",
        fails_with="Could not load libtorchcodec",
        why_removed=(
            "this torchcodec loads FFmpeg 4 to 8 from the system (torchcodec 0.14.0 ships "
            "libtorchcodec_core4 to core8, which need libavutil.so.56 to .60 and their siblings), "
            "and this machine has none of them; vLLM imports torchcodec only to decode video and "
            "audio, and where it is not installed puts a placeholder in its place (0.25.0's "
            "vllm/multimodal/video.py: except ImportError), whereas one that is installed but "
            "cannot load raises RuntimeError on import (0.25.0: vllm.v1.request -> "
            "vllm.multimodal.inputs -> .media -> .media.connector -> vllm.multimodal.video). No "
            "property decodes media."),
    ),
}


def missing_libraries(output: str) -> list[str]:
    """The shared libraries a loader error names as not found, in order of first mention."""
    seen: dict[str, None] = {}
    for lib in re.findall(r"(lib[\w.+-]+\.so(?:\.\d+)*): cannot open shared object file", output):
        seen.setdefault(lib)
    return list(seen)


def removed_record(package: str, version: str | None, output: str) -> dict:
    return {"package": package, "version": version, "why": UNLOADABLE_REMOVED[package].why_removed,
            "missing_libraries": missing_libraries(output)}


def build_error_record(step: str, output: str, missing: Missing | None, cutoff: str | None) -> dict:
    """Why a release's environment could not be built: the step, the package pip could not
    find (with what it offered) or pip's own conflict lines."""
    record: dict = {"step": step}
    if missing is not None:
        record.update(package=missing.package, required=missing.requirement, by=missing.parent,
                      index_offers=list(missing.offers[-12:]),
                      offers_seen=f"this platform, uploaded before {cutoff}" if cutoff else "this platform")
    lines = [line for line in output.splitlines() if line.startswith("ERROR") or "conflict" in line.lower()
             or line.startswith("    ")]
    record["pip"] = "\n".join(lines[-15:]) or output.strip()[-1500:]
    return record
