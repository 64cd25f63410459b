"""The benchmark reports: one dataclass per report kind, written and read here and nowhere else.

Three kinds of report are committed as JSON:

* :class:`BlockManagerReport` (``benchmarks/results/block_manager*-vllm-<release>.json``), written
  by ``python -m benchmarks.block_manager --json`` and ``python -m benchmarks.block_manager_v0
  --json``: one :class:`TraceEntry` per trace, with throughput spreads and ratios;
* :class:`ScalingReport` (``benchmarks/results/scaling-vllm-<release>.json``), written by
  ``python -m benchmarks.scaling --json``: one :class:`ScalingPoint` per context length, with
  microseconds per call of each operation on each side;
* :class:`CapacityReport` (``docs/assets/capacity/capacity.json``), written by
  ``python -m benchmarks.capacity --json``: one :class:`CapacityOutcome` per scheme.

Each class has ``to_json`` / ``from_json`` (the on-disk shape) and ``write`` / ``read`` (a file).
Reading validates every field it keeps and raises :class:`ReportError` naming the file and the
field; the benchmark scripts write through ``write`` and the site's hooks read through ``read``,
so the two cannot drift apart. This module imports nothing but the standard library.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any


class ReportError(ValueError):
    """A file is not a report of the kind it was read as; the message names the file and field."""


# -- field readers --------------------------------------------------------------------------------
def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ReportError(f"{what} is {value!r}, not a finite number")
    return float(value)


def _integer(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ReportError(f"{what} is {value!r}, not an integer")
    return value


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ReportError(f"{what} is {value!r}, not a string")
    return value


def _object(value: object, what: str) -> dict:
    if not isinstance(value, dict):
        raise ReportError(f"{what} is not an object")
    return value


def _list(value: object, what: str) -> list:
    if not isinstance(value, list):
        raise ReportError(f"{what} is not a list")
    return value


def _texts(value: object, what: str) -> list[str]:
    return [_text(v, f"{what} entry") for v in _list(value, what)]


def _integers(value: object, what: str) -> dict[str, int]:
    return {_text(k, f"{what} key"): _integer(v, f"{what}[{k}]") for k, v in _object(value, what).items()}


def _numbers(value: object, what: str) -> dict[str, float]:
    return {_text(k, f"{what} key"): _number(v, f"{what}.{k}") for k, v in _object(value, what).items()}


def _series(value: object, what: str) -> dict[str, list[float]]:
    """An object of lists of numbers (per side: one figure per repeat)."""
    return {_text(k, f"{what} key"): [_number(x, f"{what}.{k} entry") for x in _list(v, f"{what}.{k}")]
            for k, v in _object(value, what).items()}


def _sides(raw: dict) -> list[str]:
    sides = raw.get("sides")
    if not isinstance(sides, list) or not sides or not all(isinstance(s, str) for s in sides):
        raise ReportError(f"'sides' is {sides!r}, not a non-empty list of side labels")
    return list(sides)


def _load(path: Path) -> dict:
    """A report file's top-level JSON object; ReportError naming the file when it is not one."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ReportError(f"{path.name}: not readable JSON: {err}") from None
    return raw


def _read(path: Path, kind: str, parse):
    """``parse(raw, source)`` on a file's JSON; a defect is raised naming the file and the kind."""
    path = Path(path)
    raw = _load(path)
    try:
        if not isinstance(raw, dict):
            raise ReportError("the top level is not an object")
        return parse(raw, path.name)
    except ReportError as err:
        raise ReportError(f"{path.name}: not a {kind}: {err}") from None


def _write(path: Path, data: dict, indent: int, newline: bool) -> None:
    text = json.dumps(data, indent=indent)
    Path(path).write_text(text + ("\n" if newline else ""), encoding="utf-8")


# -- spreads --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Spread:
    """Min, median and max of per-repeat figures."""

    min: float
    median: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        return cls(min(values), statistics.median(values), max(values))

    def to_json(self) -> dict[str, float]:
        return {"min": self.min, "median": self.median, "max": self.max}

    @classmethod
    def from_json(cls, value: object, what: str) -> Spread:
        if not isinstance(value, dict):
            raise ReportError(f"{what} is {value!r}, not a min/median/max object")
        low, mid, high = (_number(value.get(k), f"{what}.{k}") for k in ("min", "median", "max"))
        if not low <= mid <= high:
            raise ReportError(f"{what} has min {low} / median {mid} / max {high}, out of order")
        return cls(low, mid, high)


# -- block-manager reports ------------------------------------------------------------------------
COUNT_KEYS = ("num_ops", "num_calls")  # what a trace's count counts: V1 trace ops, V0 timed ops (each one manager call but `scheduled`, two)


@dataclass(frozen=True)
class TraceEntry:
    """One trace of a block-manager report: its counts, timings per side and the ratios."""

    name: str
    num_ops: int  # trace ops (V1) or timed ops (V0, `scheduled` being two manager calls): see BlockManagerReport.count_key
    counts: dict[str, int] = field(default_factory=dict)  # op kind -> ops in the trace
    problems: list[str] = field(default_factory=list)  # why the sides' replays differed (empty: same)
    cpu_seconds: dict[str, list[float]] = field(default_factory=dict)  # side -> per repeat
    wall_seconds: dict[str, list[float]] = field(default_factory=dict)  # side -> per repeat
    op_cpu_seconds: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # side -> op -> per repeat
    op_calls: dict[str, int] = field(default_factory=dict)  # op -> timed calls per replay
    ops_per_second: dict[str, Spread] = field(default_factory=dict)  # side -> spread over the repeats
    ratio_reference_over_vllm: Spread | None = None  # per-repeat throughput ratio (two sides)
    ratio_best_over_best: float | None = None  # fastest replay against fastest replay

    def to_json(self, count_key: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, count_key: self.num_ops, "counts": self.counts, "problems": self.problems,
            "cpu_seconds": self.cpu_seconds, "wall_seconds": self.wall_seconds,
            "op_cpu_seconds": self.op_cpu_seconds, "op_calls": self.op_calls,
            "ops_per_second": {label: s.to_json() for label, s in self.ops_per_second.items()}}
        if self.ratio_reference_over_vllm is not None:
            out["ratio_reference_over_vllm"] = self.ratio_reference_over_vllm.to_json()
        if self.ratio_best_over_best is not None:
            out["ratio_best_over_best"] = self.ratio_best_over_best
        return out

    @classmethod
    def from_json(cls, raw: object, sides: Sequence[str], where: str) -> tuple[TraceEntry, str]:
        """(the entry, the key its count was stored under)."""
        raw = _object(raw, where)
        name = _text(raw.get("name"), f"{where}.name")
        where = f"trace {name!r}"
        count_key = next((k for k in COUNT_KEYS if k in raw), None)
        if count_key is None:
            raise ReportError(f"{where} has neither num_ops nor num_calls")
        speeds = _object(raw.get("ops_per_second", {}), f"{where}.ops_per_second")
        unknown = sorted(set(speeds) - set(sides))
        if unknown:
            raise ReportError(f"{where}.ops_per_second names sides {unknown} that 'sides' does not list")
        op_seconds = _object(raw.get("op_cpu_seconds", {}), f"{where}.op_cpu_seconds")
        ratio, best = raw.get("ratio_reference_over_vllm"), raw.get("ratio_best_over_best")
        return cls(
            name=name,
            num_ops=_integer(raw.get(count_key), f"{where}.{count_key}"),
            counts=_integers(raw.get("counts", {}), f"{where}.counts"),
            problems=_texts(raw.get("problems", []), f"{where}.problems"),
            cpu_seconds=_series(raw.get("cpu_seconds", {}), f"{where}.cpu_seconds"),
            wall_seconds=_series(raw.get("wall_seconds", {}), f"{where}.wall_seconds"),
            op_cpu_seconds={_text(k, f"{where}.op_cpu_seconds key"): _series(v, f"{where}.op_cpu_seconds.{k}")
                            for k, v in op_seconds.items()},
            op_calls=_integers(raw.get("op_calls", {}), f"{where}.op_calls"),
            ops_per_second={label: Spread.from_json(speeds[label], f"{where}.ops_per_second.{label}")
                            for label in sides if label in speeds},
            ratio_reference_over_vllm=None if ratio is None else Spread.from_json(
                ratio, f"{where}.ratio_reference_over_vllm"),
            ratio_best_over_best=None if best is None else _number(best, f"{where}.ratio_best_over_best"),
        ), count_key


@dataclass(frozen=True)
class BlockManagerReport:
    """One run of ``benchmarks.block_manager`` (V1) or ``benchmarks.block_manager_v0`` (V0)."""

    found: str  # what the run found installed, in a sentence
    sides: list[str]  # side labels, the reference first
    repeats: int
    requests: int  # requests per trace
    seed: int
    python: str
    traces: list[TraceEntry]
    policy: str | None = None  # the reference's V1 policy (V1 only)
    count_key: str = "num_ops"  # the key a trace's count is stored under: "num_ops" (V1), "num_calls" (V0)
    source: str = field(default="", compare=False)  # the file it was read from ("" when built)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"found": self.found}
        if self.policy is not None:
            out["policy"] = self.policy
        out.update({"sides": list(self.sides), "repeats": self.repeats, "requests": self.requests,
                    "seed": self.seed, "python": self.python,
                    "traces": [t.to_json(self.count_key) for t in self.traces]})
        return out

    @classmethod
    def from_json(cls, raw: dict, source: str = "") -> BlockManagerReport:
        sides = _sides(raw)
        traces = raw.get("traces")
        if not isinstance(traces, list) or not traces:
            raise ReportError("it lists no traces")
        entries = [TraceEntry.from_json(t, sides, f"traces[{i}]") for i, t in enumerate(traces)]
        keys = {key for _, key in entries}
        if len(keys) > 1:
            raise ReportError(f"its traces count under both {sorted(keys)}")
        policy = raw.get("policy")
        return cls(
            found=_text(raw.get("found"), "'found'"),
            sides=sides,
            repeats=_integer(raw.get("repeats"), "'repeats'"),
            requests=_integer(raw.get("requests"), "'requests'"),
            seed=_integer(raw.get("seed"), "'seed'"),
            python=_text(raw.get("python"), "'python'"),
            traces=[entry for entry, _ in entries],
            policy=None if policy is None else _text(policy, "'policy'"),
            count_key=keys.pop(),
            source=source,
        )

    def write(self, path: Path) -> None:
        _write(path, self.to_json(), indent=2, newline=False)

    @classmethod
    def read(cls, path: Path) -> BlockManagerReport:
        """Parse one results file; :class:`ReportError` naming the file and the defect."""
        return _read(path, "benchmark report", cls.from_json)


# -- scaling reports ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScalingOp:
    """One operation at one context length: timed calls per replay, microseconds per call."""

    calls: int
    us: dict[str, float]  # side label -> median microseconds per call (a side that timed none: absent)
    ratio_vllm_over_reference: float | None = None  # vLLM time / reference time (two sides)

    def to_json(self, sides: Sequence[str]) -> dict[str, Any]:
        out: dict[str, Any] = {"calls": self.calls}
        out.update({f"{label}_us": self.us.get(label) for label in sides})
        if self.ratio_vllm_over_reference is not None:
            out["ratio_vllm_over_reference"] = self.ratio_vllm_over_reference
        return out

    @classmethod
    def from_json(cls, raw: object, sides: Sequence[str], where: str) -> ScalingOp:
        raw = _object(raw, where)
        ratio = raw.get("ratio_vllm_over_reference")
        return cls(
            calls=_integer(raw.get("calls"), f"{where}.calls"),
            us={label: _number(raw[f"{label}_us"], f"{where}.{label}_us")
                for label in sides if raw.get(f"{label}_us") is not None},
            ratio_vllm_over_reference=None if ratio is None else _number(
                ratio, f"{where}.ratio_vllm_over_reference"),
        )


@dataclass(frozen=True)
class ScalingPoint:
    """One context length of a scaling report."""

    context: int  # prompt tokens per request
    ops: dict[str, ScalingOp]  # op kind -> figures
    problems: list[str] = field(default_factory=list)
    num_ops: int = 0  # ops in the trace
    peak_bytes: dict[str, int] = field(default_factory=dict)  # side -> peak traced bytes of one replay
    peak_bytes_per_block: dict[str, float] = field(default_factory=dict)  # the same over the pool's blocks
    cpu_seconds: dict[str, list[float]] = field(default_factory=dict)  # side -> per repeat

    def to_json(self, sides: Sequence[str]) -> dict[str, Any]:
        return {"context": self.context, "num_ops": self.num_ops,
                "ops": {name: op.to_json(sides) for name, op in self.ops.items()}, "problems": self.problems,
                "peak_bytes": self.peak_bytes, "peak_bytes_per_block": self.peak_bytes_per_block,
                "cpu_seconds": self.cpu_seconds}

    @classmethod
    def from_json(cls, raw: object, sides: Sequence[str], where: str) -> ScalingPoint:
        raw = _object(raw, where)
        context = _integer(raw.get("context"), f"{where}.context")
        where = f"context {context}"
        ops = raw.get("ops")
        if not isinstance(ops, dict) or not ops:
            raise ReportError(f"{where}.ops is not a non-empty object")
        return cls(
            context=context,
            ops={_text(name, f"{where}.ops key"): ScalingOp.from_json(value, sides, f"{where}.ops.{name}")
                 for name, value in ops.items()},
            problems=_texts(raw.get("problems", []), f"{where}.problems"),
            num_ops=_integer(raw.get("num_ops", 0), f"{where}.num_ops"),
            peak_bytes=_integers(raw.get("peak_bytes", {}), f"{where}.peak_bytes"),
            peak_bytes_per_block=_numbers(raw.get("peak_bytes_per_block", {}), f"{where}.peak_bytes_per_block"),
            cpu_seconds=_series(raw.get("cpu_seconds", {}), f"{where}.cpu_seconds"),
        )


@dataclass(frozen=True)
class ScalingReport:
    """One run of ``benchmarks.scaling``."""

    found: str
    generation: str  # "v1" or "v0"
    sides: list[str]
    pool_blocks: int
    block_size: int
    seqs: int  # requests per trace
    decode: int  # sampled tokens per request
    chunk: int  # prefill tokens per request per step
    repeats: int
    seed: int
    python: str
    contexts: list[ScalingPoint]
    targets_not_met: list[str] = field(default_factory=list)
    profiles: dict[str, str] = field(default_factory=dict)  # "context/side" -> cProfile text
    policy: str | None = None  # the reference's policy name ("v0" for V0)
    hits: int | None = None  # V1: full prefix hits timed per context (None: not recorded)
    source: str = field(default="", compare=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"found": self.found, "generation": self.generation}
        if self.policy is not None:
            out["policy"] = self.policy
        out.update({"sides": list(self.sides), "pool_blocks": self.pool_blocks, "block_size": self.block_size,
                    "seqs": self.seqs, "decode": self.decode, "chunk": self.chunk, "repeats": self.repeats,
                    "seed": self.seed})
        if self.hits is not None:
            out["hits"] = self.hits
        out.update({"python": self.python, "contexts": [p.to_json(self.sides) for p in self.contexts],
                    "targets_not_met": self.targets_not_met, "profiles": self.profiles})
        return out

    @classmethod
    def from_json(cls, raw: dict, source: str = "") -> ScalingReport:
        sides = _sides(raw)
        contexts = raw.get("contexts")
        if not isinstance(contexts, list) or not contexts:
            raise ReportError("it lists no contexts")
        profiles = _object(raw.get("profiles", {}), "'profiles'")
        policy, hits = raw.get("policy"), raw.get("hits")
        return cls(
            found=_text(raw.get("found"), "'found'"),
            generation=_text(raw.get("generation"), "'generation'"),
            sides=sides,
            pool_blocks=_integer(raw.get("pool_blocks"), "'pool_blocks'"),
            block_size=_integer(raw.get("block_size"), "'block_size'"),
            seqs=_integer(raw.get("seqs"), "'seqs'"),
            decode=_integer(raw.get("decode"), "'decode'"),
            chunk=_integer(raw.get("chunk"), "'chunk'"),
            repeats=_integer(raw.get("repeats"), "'repeats'"),
            seed=_integer(raw.get("seed"), "'seed'"),
            python=_text(raw.get("python"), "'python'"),
            contexts=[ScalingPoint.from_json(c, sides, f"contexts[{i}]") for i, c in enumerate(contexts)],
            targets_not_met=_texts(raw.get("targets_not_met", []), "'targets_not_met'"),
            profiles={_text(k, "'profiles' key"): _text(v, f"profile {k}") for k, v in profiles.items()},
            policy=None if policy is None else _text(policy, "'policy'"),
            hits=None if hits is None else _integer(hits, "'hits'"),
            source=source,
        )

    def write(self, path: Path) -> None:
        _write(path, self.to_json(), indent=2, newline=False)

    @classmethod
    def read(cls, path: Path) -> ScalingReport:
        """Parse one scaling results file; :class:`ReportError` naming the file and the defect."""
        return _read(path, "scaling report", cls.from_json)


# -- capacity reports -----------------------------------------------------------------------------
@dataclass(frozen=True)
class CapacityOutcome:
    """One scheme's saturated-period averages in the capacity experiment."""

    scheme: str
    effective_usage_pct: float
    reserved_pct: float
    mean_concurrency: float
    max_concurrency: int
    internal_fragmentation_pct: float
    preemptions: int
    steps: int

    @classmethod
    def from_json(cls, raw: object, where: str) -> CapacityOutcome:
        raw = _object(raw, where)
        values: dict[str, Any] = {}
        for f in fields(cls):
            what = f"{where}.{f.name}"
            kind = f.type if isinstance(f.type, str) else f.type.__name__
            values[f.name] = {"str": _text, "int": _integer, "float": _number}[kind](raw.get(f.name), what)
        return cls(**values)


@dataclass(frozen=True)
class CapacityReport:
    """One run of ``benchmarks.capacity``: the workload, the KV budget and every scheme's outcome."""

    requests: int
    workload: str
    max_len: int
    kv_slots: int
    outcomes: list[CapacityOutcome]
    source: str = field(default="", compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "workload": self.workload, "max_len": self.max_len,
                "kv_slots": self.kv_slots, "outcomes": [asdict(o) for o in self.outcomes]}

    @classmethod
    def from_json(cls, raw: dict, source: str = "") -> CapacityReport:
        outcomes = _list(raw.get("outcomes"), "'outcomes'")
        return cls(
            requests=_integer(raw.get("requests"), "'requests'"),
            workload=_text(raw.get("workload"), "'workload'"),
            max_len=_integer(raw.get("max_len"), "'max_len'"),
            kv_slots=_integer(raw.get("kv_slots"), "'kv_slots'"),
            outcomes=[CapacityOutcome.from_json(o, f"outcomes[{i}]") for i, o in enumerate(outcomes)],
            source=source,
        )

    def write(self, path: Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        _write(path, self.to_json(), indent=1, newline=True)

    @classmethod
    def read(cls, path: Path) -> CapacityReport:
        """Parse the capacity experiment's file; :class:`ReportError` naming the file and the defect."""
        return _read(path, "capacity report", cls.from_json)
