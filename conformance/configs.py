"""The systems' configurations, one frozen dataclass per semantics, built once and passed to adapters.

A machine's Hypothesis strategy draws a config object; the lockstep engine hands it to the
semantics module's ``make_systems``, whose adapters read its fields (never a dict). A config
holds its *policy object* (:class:`reference.blocks.policies.V0Policy` or ``V1Policy``), not a
name to look up.

Trace files keep their JSON shape (:data:`conformance.trace_file.CONFIG_FIELDS`): the conversion
happens at that boundary only, ``to_json`` when a trace is recorded (the policy written as its
name, ``"v0.10.2"``) and ``from_json`` when one is replayed (the name resolved through
:func:`conformance.changelog.policy_named`). Importing this module imports no vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from conformance.changelog import policy_named
from reference.blocks.policies import V0Policy, V1Policy
from upstream.releases import V0_RELEASE, policy_name

PEERS = (None, "reference")  # what a config may pair the reference with: the installed vLLM, or itself
V1_GROUP_KINDS = ("full", "sliding")  # the KV-cache groups a V1 config may hold (trace_file.V1_GROUP_FIELDS)
DEFAULT_ENTROPY = "5e" * 32  # hex: the "random" bytes NONE_HASH uses where a release draws them


class TraceConfig:
    """A machine configuration that a trace file's ``config`` object also describes."""

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Self:
        raise NotImplementedError

    @classmethod
    def of(cls, config: Self | dict[str, Any]) -> Self:
        """``config`` itself, or the config a trace file's JSON object describes."""
        if isinstance(config, cls):
            return config
        if not isinstance(config, dict):
            raise TypeError(f"neither a {cls.__name__} nor a trace file's config object: {config!r}")
        return cls.from_json(config)


@dataclass(frozen=True)
class V0Config(TraceConfig):
    """Semantics ``"v0"``: one V0 block manager's settings and the release behaviour it follows."""

    policy: V0Policy  # the reference's behaviour (vLLM's adapter follows the installed release)
    block_size: int
    num_gpu_blocks: int
    num_cpu_blocks: int
    watermark: float
    sliding_window: int | None = None  # tokens; None: no window
    enable_caching: bool = False  # prefix caching
    peer: str | None = None  # "reference": the reference is paired with a second reference, not vLLM

    def __post_init__(self) -> None:
        if not isinstance(self.policy, V0Policy):
            raise TypeError(f"V0Config.policy must be a V0Policy, not {self.policy!r}")
        if self.block_size < 1 or self.num_gpu_blocks < 0 or self.num_cpu_blocks < 0:
            raise ValueError(f"V0Config sizes out of range: block_size {self.block_size}, "
                             f"num_gpu_blocks {self.num_gpu_blocks}, num_cpu_blocks {self.num_cpu_blocks}")
        if self.peer not in PEERS:
            raise ValueError(f"V0Config.peer must be one of {PEERS}, not {self.peer!r}")

    def to_json(self) -> dict[str, Any]:
        """The trace file's ``config`` object (``peer`` only when set)."""
        out: dict[str, Any] = {
            "policy": self.policy.name, "block_size": self.block_size, "num_gpu_blocks": self.num_gpu_blocks,
            "num_cpu_blocks": self.num_cpu_blocks, "watermark": self.watermark,
            "sliding_window": self.sliding_window, "enable_caching": self.enable_caching}
        if self.peer is not None:
            out["peer"] = self.peer
        return out

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> V0Config:
        """A trace file's ``config`` object (checked by :mod:`conformance.trace_file`); a trace
        without ``policy`` follows the V0 pin's."""
        return cls(
            policy=policy_named(raw.get("policy", policy_name(V0_RELEASE)), V0Policy),
            block_size=raw["block_size"], num_gpu_blocks=raw["num_gpu_blocks"],
            num_cpu_blocks=raw["num_cpu_blocks"], watermark=raw["watermark"],
            sliding_window=raw.get("sliding_window"), enable_caching=raw["enable_caching"],
            peer=raw.get("peer"))


@dataclass(frozen=True)
class V1Group:
    """One KV-cache group of a V1 config: full attention, or a sliding window of ``window`` tokens."""

    kind: str  # one of V1_GROUP_KINDS
    window: int | None = None  # tokens; set for "sliding" groups only

    def __post_init__(self) -> None:
        if self.kind not in V1_GROUP_KINDS:
            raise ValueError(f"V1Group.kind must be one of {V1_GROUP_KINDS}, not {self.kind!r}")
        if self.kind == "sliding" and (not isinstance(self.window, int) or self.window < 1):
            raise ValueError(f"a sliding V1Group needs a window of at least one token, not {self.window!r}")
        if self.kind == "full" and self.window is not None:
            raise ValueError(f"a full-attention V1Group has no window, got {self.window!r}")

    def to_json(self) -> dict[str, Any]:
        """The trace file's group object (``window`` for a sliding window only)."""
        return {"kind": self.kind} if self.window is None else {"kind": self.kind, "window": self.window}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> V1Group:
        """A trace file's group object (checked by :mod:`conformance.trace_file`)."""
        return cls(kind=raw["kind"], window=raw.get("window"))


FULL = V1Group("full")


@dataclass(frozen=True)
class V1Config(TraceConfig):
    """Semantics ``"v1"``: one V1 KV-cache manager's settings and the release behaviour it follows."""

    policy: V1Policy  # the reference's behaviour (vLLM's adapter requires the installed release's name)
    block_size: int
    num_blocks: int
    groups: tuple[V1Group, ...]  # in the coordinator's order
    max_model_len: int
    enable_caching: bool = True  # prefix caching
    hash_fn: str = "sha256"  # the block hash function's name (reference.blocks.v1.hashing)
    pythonhashseed: str | None = None  # PYTHONHASHSEED while NONE_HASH is seeded; None: unset
    entropy: str = DEFAULT_ENTROPY  # hex: what os.urandom returns while NONE_HASH is seeded
    watermark: float = 0.0
    # the KV-cache config's prefix_cache_retention_interval (None: dense; reference.blocks.policies)
    retention_interval: int | None = None
    # the manager's max_in_flight_tokens (None: max_model_len), which caps a sliding window's blocks
    # in the whole-sequence admission check
    max_in_flight_tokens: int | None = None
    peer: str | None = None  # "reference": the reference is paired with a second reference, not vLLM

    def __post_init__(self) -> None:
        if not isinstance(self.policy, V1Policy):
            raise TypeError(f"V1Config.policy must be a V1Policy, not {self.policy!r}")
        if not isinstance(self.groups, tuple) or not all(isinstance(g, V1Group) for g in self.groups):
            raise TypeError(f"V1Config.groups must be a tuple of V1Group, not {self.groups!r}")
        if self.block_size < 1 or self.num_blocks < 0 or self.max_model_len < 0:
            raise ValueError(f"V1Config sizes out of range: block_size {self.block_size}, "
                             f"num_blocks {self.num_blocks}, max_model_len {self.max_model_len}")
        try:
            bytes.fromhex(self.entropy)
        except (TypeError, ValueError):
            raise ValueError(f"V1Config.entropy must be a string of hex digits, not {self.entropy!r}") from None
        if self.peer not in PEERS:
            raise ValueError(f"V1Config.peer must be one of {PEERS}, not {self.peer!r}")

    @property
    def entropy_bytes(self) -> bytes:
        """The bytes that stand in for ``os.urandom`` when a release seeds NONE_HASH randomly."""
        return bytes.fromhex(self.entropy)

    def to_json(self) -> dict[str, Any]:
        """The trace file's ``config`` object (``retention_interval``, ``max_in_flight_tokens`` and ``peer``
        only when set)."""
        out: dict[str, Any] = {
            "policy": self.policy.name, "block_size": self.block_size, "num_blocks": self.num_blocks,
            "groups": [g.to_json() for g in self.groups], "max_model_len": self.max_model_len,
            "enable_caching": self.enable_caching, "hash_fn": self.hash_fn,
            "pythonhashseed": self.pythonhashseed, "entropy": self.entropy, "watermark": self.watermark}
        if self.retention_interval is not None:
            out["retention_interval"] = self.retention_interval
        if self.max_in_flight_tokens is not None:
            out["max_in_flight_tokens"] = self.max_in_flight_tokens
        if self.peer is not None:
            out["peer"] = self.peer
        return out

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> V1Config:
        """A trace file's ``config`` object (checked by :mod:`conformance.trace_file`); an optional
        field a trace leaves out takes the default above."""
        return cls(
            policy=policy_named(raw["policy"], V1Policy), block_size=raw["block_size"],
            num_blocks=raw["num_blocks"], groups=tuple(V1Group.from_json(g) for g in raw["groups"]),
            max_model_len=raw["max_model_len"], enable_caching=raw.get("enable_caching", True),
            hash_fn=raw.get("hash_fn", "sha256"), pythonhashseed=raw.get("pythonhashseed"),
            entropy=raw.get("entropy", DEFAULT_ENTROPY), watermark=raw.get("watermark", 0.0),
            retention_interval=raw.get("retention_interval"), max_in_flight_tokens=raw.get("max_in_flight_tokens"),
            peer=raw.get("peer"))


__all__ = ["DEFAULT_ENTROPY", "FULL", "PEERS", "TraceConfig", "V0Config", "V1Config", "V1Group", "V1_GROUP_KINDS"]
