"""The systems' configurations, one frozen dataclass per semantics, built once and passed to adapters.

A machine's Hypothesis strategy draws a config object; the lockstep engine hands it to the
semantics module's ``make_systems``, whose adapters read its fields (never a dict). A config
holds its *policy object* (:class:`reference.blocks.policies.V0Policy`), not a name to look up.

Trace files keep their JSON shape (:data:`conformance.trace_file.CONFIG_FIELDS`): the conversion
happens at that boundary only, ``to_json`` when a trace is recorded (the policy written as its
name, ``"v0.10.2"``) and ``from_json`` when one is replayed (the name resolved through
:func:`conformance.changelog.policy_named`). Importing this module imports no vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conformance.changelog import policy_named
from reference.blocks.policies import V0Policy
from upstream.releases import V0_RELEASE, policy_name

PEERS = (None, "reference")  # what a config may pair the reference with: the installed vLLM, or itself


@dataclass(frozen=True)
class V0Config:
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

    @classmethod
    def of(cls, config: V0Config | dict[str, Any]) -> V0Config:
        """``config`` itself, or the config a trace file's JSON object describes."""
        if isinstance(config, V0Config):
            return config
        return cls.from_json(config)


__all__ = ["PEERS", "V0Config"]
