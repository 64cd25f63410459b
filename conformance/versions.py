"""Which vLLM is installed, and which known release the machines drive it as.

Any installed vLLM gets a target: a final release (``0.33.0``), a post release (``0.6.3.post1``),
a hotfix (``0.9.0.1``), a release candidate (``0.34.0rc1``), a source build (``0.33.1.dev12+g1a2b3c4``)
or a version newer than every known one. The machines drive it as the nearest *known* release at
or before it:

* a release measured in its own environment (an entry of ``conformance/reports/matrix.json``
  whose run was not itself driven as another release) is driven as itself;
* anything else is driven as the nearest earlier known release, and every printed line, report and
  page says so ("0.33.1.dev12 is not in the measured matrix: driven as 0.33.0").

The policy and the API of the release driven as come from the change log
(:mod:`conformance.changelog`). Which mechanisms exist is read from the installed package's files
where it can be (a source build may have dropped or gained one), from the log otherwise.

Reading the version never imports vLLM.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from conformance import changelog
from conformance.lockstep import NotApplicable
from conformance.release_api import KernelApi, Mechanisms, V0Api, V1Api

MATRIX = Path(__file__).parent / "reports" / "matrix.json"


class HarnessError(RuntimeError):
    """The installed release has the mechanism, but the harness cannot drive it (the reason)."""


# PEP 440, the subset vLLM's builds use: N.N.N[.N][{a,b,rc}N][.postN][.devN][+local]
_PEP440 = re.compile(
    r"^v?(?P<release>\d+(?:\.\d+)*)(?:[-_.]?(?P<pre_l>a|b|rc)[-_.]?(?P<pre_n>\d+))?"
    r"(?:[-_.]?post[-_.]?(?P<post>\d+))?(?:[-_.]?dev[-_.]?(?P<dev>\d+))?(?:\+(?P<local>[a-z0-9.]+))?$",
    re.IGNORECASE)
_PRE_ORDER = {"a": 0, "b": 1, "rc": 2}


@dataclass(frozen=True)
class Version:
    """An installed vLLM's version, parsed. ``public`` drops the local part (``+cu128``, ``+g1a2b3c``)."""

    text: str
    release: tuple[int, ...]
    pre: tuple[str, int] | None
    post: int | None
    dev: int | None
    local: str | None

    @property
    def public(self) -> str:
        return self.text.split("+", 1)[0]

    @property
    def is_published_form(self) -> bool:
        """A final or post release (what the index publishes as a release), no rc or dev part."""
        return self.pre is None and self.dev is None

    def key(self) -> tuple:
        """PEP 440 order: 0.34.0.dev1 < 0.34.0rc1 < 0.34.0 < 0.34.0.post1 < 0.34.0.1 < 0.34.1."""
        release = self.release + (0,) * (4 - len(self.release))
        if self.pre is None and self.post is None and self.dev is not None:
            pre: tuple = (-1, 0)  # a dev release sorts before the release's pre-releases
        elif self.pre is None:
            pre = (3, 0)
        else:
            pre = (_PRE_ORDER[self.pre[0]], self.pre[1])
        post = -1 if self.post is None else self.post
        dev = float("inf") if self.dev is None else self.dev
        return (release, pre, post, dev)


def parse_version(text: str) -> Version:
    """Parse a vLLM version string; ValueError (with the text) for anything that is not PEP 440."""
    match = _PEP440.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"not a PEP 440 version: {text!r}")
    g = match.groupdict()
    return Version(
        text=text.strip(), release=tuple(int(p) for p in g["release"].split(".")),
        pre=(g["pre_l"].lower(), int(g["pre_n"])) if g["pre_l"] else None,
        post=int(g["post"]) if g["post"] is not None else None,
        dev=int(g["dev"]) if g["dev"] is not None else None, local=g["local"])


def installed_vllm_version() -> str | None:
    """The installed vLLM's public version (``0.10.2`` for a ``0.10.2+cu128`` build,
    ``0.33.1.dev12`` for ``0.33.1.dev12+g1a2b3c4``); None if vLLM is absent. vLLM is not imported."""
    try:
        raw = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return None
    return raw.split("+", 1)[0]


def measured_releases(matrix: Path = MATRIX) -> frozenset[str]:
    """Releases the matrix ran in their own environment (entries not driven as another release)."""
    return _measured(str(matrix))


@cache
def _measured(matrix: str) -> frozenset[str]:
    try:
        entries = json.loads(Path(matrix).read_text())["releases"]
    except (OSError, ValueError, KeyError):
        return frozenset()
    return frozenset(r for r, e in entries.items()
                     if isinstance(e, dict) and e.get("driven_as", r) == r and _is_release(r))


def _is_release(text: str) -> bool:
    try:
        changelog.release_key(text)
    except ValueError:
        return False
    return True


def known_releases() -> dict[str, str]:
    """Every known release -> the release it is driven as: itself, measured in its own environment."""
    return {r: r for r in measured_releases()}


@dataclass(frozen=True)
class Target:
    """What an installed vLLM is driven as."""

    installed: str  # the public version, e.g. "0.33.1.dev12"
    release: str | None  # the measured release it is driven as; None: older than every known one
    exact: bool  # the installed version is itself a measured release
    note: str | None  # the sentence that says it is driven as another release (None when exact)
    api: changelog.ReleaseApi | None  # the change log's view of ``release``
    mechanisms: Mechanisms | None  # what the installed files show (None: vLLM's files not found)

    @property
    def label(self) -> str:
        return self.installed if self.exact else f"{self.installed} (driven as {self.release or 'nothing'})"


#: Set to a published release by ``scripts/version-matrix`` while it measures that release in its
#: own environment: the release is then driven as itself (the change log's values at it), which is
#: what makes its matrix entry a measurement rather than a run driven as an earlier release.
MEASURE_VARIABLE = "PASTUDY_MEASURE_RELEASE"


def target_for(installed: str, mechanisms: Mechanisms | None = None, measuring: str | None = None) -> Target:
    """The target for a version string (the installed one, or any other, e.g. in tests).

    ``measuring``: the release being measured (see :data:`MEASURE_VARIABLE`); when it is this
    version, a published release, it is driven as itself.
    """
    version = parse_version(installed)
    known = known_releases()
    public = version.public
    if measuring is not None and measuring == public and version.is_published_form and _is_release(public):
        return Target(public, public, True, None, changelog.api_at(public), mechanisms)
    if public in known and version.is_published_form:
        release, note = known[public], None
    else:
        earlier = [r for r in known if parse_version(r).key() <= version.key()]
        if not earlier:
            oldest = min(known, key=lambda r: parse_version(r).key()) if known else changelog.OLDEST
            return Target(public, None, False,
                          f"{public} is older than every release the change log knows (the oldest is {oldest})",
                          None, mechanisms)
        nearest = max(earlier, key=lambda r: parse_version(r).key())
        release = known[nearest]
        note = f"{public} is not in the measured matrix: driven as {release}"
    return Target(public, release, release == public and note is None, note, changelog.api_at(release), mechanisms)


def installed_mechanisms() -> Mechanisms | None:
    """Which modelled mechanisms the installed vLLM's files contain; None where vLLM's package
    directory cannot be found (then the change log's values are used). Does not import vLLM."""
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    roots = [Path(p) for p in spec.submodule_search_locations]

    def has(*relative: str) -> bool:
        return any((root / r).exists() for root in roots for r in relative)

    return Mechanisms(
        v0_block_manager=has("core/block_manager.py"),
        v1_block_pool=has("v1/core/block_pool.py"),
        triton_kernels=has("attention/ops/chunked_prefill_paged_decode.py",
                           "v1/attention/ops/chunked_prefill_paged_decode.py"),
    )


def installed_target() -> Target:
    """The installed vLLM's target; NotApplicable without vLLM; HarnessError for a version that is
    not PEP 440 (a broken install: its metadata says nothing usable)."""
    version = installed_vllm_version()
    if version is None:
        raise NotApplicable("vLLM is not installed in this environment")
    try:
        return target_for(version, installed_mechanisms(), os.environ.get(MEASURE_VARIABLE))
    except ValueError as err:
        raise HarnessError(f"vLLM's package metadata gives a version this harness cannot read: {err}") from None


def _has(target: Target, mechanism: str) -> bool:
    """Whether the installed vLLM has a mechanism: its files say, else the log at its target."""
    if target.mechanisms is not None:
        return getattr(target.mechanisms, mechanism)
    return target.api is not None and getattr(target.api.mechanisms, mechanism)


# mechanism -> (what it is, the file that shows it, the ReleaseApi attribute of its record)
_WHAT = {
    "v1_block_pool": ("a V1 BlockPool", "vllm/v1/core/block_pool.py", "v1"),
    "v0_block_manager": ("the V0 block manager", "vllm/core/block_manager.py", "v0"),
    "triton_kernels": ("vLLM's Triton attention kernels", "chunked_prefill_paged_decode.py", "kernels"),
}


def _driven(mechanism: str):
    """(target, the logged record of its release) for one mechanism, or NotApplicable / HarnessError."""
    target = installed_target()
    what, where, attr = _WHAT[mechanism]
    if not _has(target, mechanism):
        found = "the installed package" if target.mechanisms is not None else f"vLLM {target.release} (change log)"
        raise NotApplicable(f"vLLM {target.installed} does not have {what} (no {where} in {found})")
    record = None if target.api is None else getattr(target.api, attr)
    if record is None:
        raise HarnessError(f"vLLM {target.installed} has {what} ({where}), but no known release at or before "
                           f"it has one to drive it as ({target.note}); measure it: "
                           f"scripts/version-matrix {target.installed}")
    return target, record


def installed_v1() -> tuple[Target, V1Api]:
    """The installed vLLM's target and the V1 API of the release it is driven as."""
    return _driven("v1_block_pool")


def installed_v0() -> tuple[Target, V0Api]:
    """The installed vLLM's target and the V0 API of the release it is driven as."""
    return _driven("v0_block_manager")


def installed_kernels() -> tuple[Target, KernelApi]:
    """The installed vLLM's target and the Triton kernel API of the release it is driven as."""
    return _driven("triton_kernels")


def installed_v1_policy_name() -> str:
    """The V1 policy the installed vLLM is driven with (``v<release>``), or NotApplicable / HarnessError."""
    target, _ = installed_v1()
    return f"v{target.release}"


def installed_v0_policy_name() -> str:
    """The V0 policy the installed vLLM is driven with (``v<release>``), or NotApplicable / HarnessError."""
    target, _ = installed_v0()
    return f"v{target.release}"


def distinct_v1_policy_names() -> tuple[str, ...]:
    """One policy name per distinct V1 behaviour among the measured releases (newest first), each
    named by the earliest measured release that behaves so: what the reference-against-reference
    machines run, so that every measured behaviour is exercised without vLLM."""
    seen: dict[tuple, str] = {}
    for release in sorted(measured_releases(), key=lambda r: parse_version(r).key()):
        if changelog.api_at(release).v1 is None:
            continue
        policy = changelog.v1_policy_at(release)
        values = tuple(getattr(policy, f) for f in policy.__dataclass_fields__ if f != "name")
        seen.setdefault(values, policy.name)
    return tuple(reversed(list(seen.values())))


def vllm_import_failed(err: ImportError) -> Exception:
    """What a failed ``import vllm`` means: NotApplicable when vLLM is not installed, a
    HarnessError (a broken environment, not a verdict) when it is installed but does not import."""
    installed = installed_vllm_version()
    if installed is None:
        return NotApplicable(f"vLLM is not installed ({err})")
    return HarnessError(f"vLLM {installed} is installed but does not import: {type(err).__name__}: {err}")


__all__ = [
    "HarnessError", "MATRIX", "MEASURE_VARIABLE", "Target", "Version", "distinct_v1_policy_names", "installed_kernels", "installed_mechanisms",
    "installed_target", "installed_v0", "installed_v0_policy_name", "installed_v1", "installed_v1_policy_name",
    "installed_vllm_version", "known_releases", "measured_releases", "parse_version", "target_for",
    "vllm_import_failed", "KernelApi", "V0Api", "V1Api",
]
