"""The trace file: its schema, and the one loader every reader of a trace goes through.

A trace is a JSON object (``conformance/traces/<semantics>/*.json``, the failures a run saves in
``conformance/traces/failures/``, ``conformance/known-upstream-bugs/*.json``, and whatever is handed
to the trace explorer):

``semantics``   ``"v0"`` or ``"v1"``: which op vocabulary and config the trace speaks;
``config``      the systems' configuration (:data:`CONFIG_FIELDS` per semantics);
``ops``         the calls, in order, each an object whose ``op`` names one of :data:`OP_FIELDS`;
``expect``      optional, one entry per op: ``null`` or ``{"outcome": {"result": ...} | {"error":
                category}, "state": {snapshot key: value}}`` (what vLLM's own test asserts there);
``versions``    optional list of vLLM versions the trace applies to (others skip it);
``note``, ``source``, ``divergence``  optional text for people.
``sides``       optional, in a trace saved from a divergence: each system's label, outcome of the
                last op and snapshot after it (:func:`conformance.lockstep.side_states`), so the
                explorer can show both sides without the installed vLLM.

:func:`load_trace` reads and checks a file; :func:`check_trace` checks a trace already in memory.
Both return the trace unchanged (a dict) or raise :class:`TraceFileError`, whose message names the
file and the field (``ops[3].seq: expected an integer, got 'x'``). Every check is of shape (a wrong
type, a missing or unknown field, an unknown op or policy); whether an op makes sense in its
state is the systems' business, and a replay reports it as an outcome.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SEMANTICS = ("v0", "v1")


class TraceFileError(ValueError):
    """A trace file that does not follow the schema; ``str()`` is ``"SOURCE: FIELD: PROBLEM"``."""

    def __init__(self, source: str, field: str, problem: str) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        super().__init__(f"{source}: {self.detail}")

    @property
    def detail(self) -> str:
        """``"FIELD: PROBLEM"`` (or the problem alone, for the file as a whole)."""
        return f"{self.field}: {self.problem}" if self.field else self.problem


@dataclass(frozen=True)
class Kind:
    """A JSON value's expected kind: a name for messages and a test."""

    name: str
    test: Callable[[Any], bool]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


INT = Kind("an integer", _is_int)
NUMBER = Kind("a number", lambda v: _is_int(v) or isinstance(v, float))
BOOL = Kind("true or false", lambda v: isinstance(v, bool))
STR = Kind("a string", lambda v: isinstance(v, str))
STR_OR_NULL = Kind("a string or null", lambda v: v is None or isinstance(v, str))
INT_OR_NULL = Kind("an integer or null", lambda v: v is None or _is_int(v))
INTS = Kind("a list of integers", lambda v: isinstance(v, list) and all(_is_int(x) for x in v))
STRS = Kind("a list of strings", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v))
OBJECT = Kind("an object", lambda v: isinstance(v, dict))
LIST = Kind("a list", lambda v: isinstance(v, list))
HEX = Kind("a string of hex digits", lambda v: isinstance(v, str) and _is_hex(v))


def _is_hex(text: str) -> bool:
    try:
        bytes.fromhex(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Fields:
    """An object's fields: the required ones and the optional ones, each with its kind."""

    required: Mapping[str, Kind]
    optional: Mapping[str, Kind]


#: Each semantics' config fields. ``peer`` pairs the reference with itself (``"reference"``); the
#: machines write it into the traces they save.
CONFIG_FIELDS: dict[str, Fields] = {
    "v0": Fields(
        required={"block_size": INT, "num_gpu_blocks": INT, "num_cpu_blocks": INT, "watermark": NUMBER,
                  "enable_caching": BOOL},
        optional={"sliding_window": INT_OR_NULL, "policy": STR, "peer": STR_OR_NULL},
    ),
    "v1": Fields(
        required={"policy": STR, "block_size": INT, "num_blocks": INT, "groups": LIST, "max_model_len": INT},
        optional={"enable_caching": BOOL, "hash_fn": STR, "pythonhashseed": STR_OR_NULL, "entropy": HEX,
                  "watermark": NUMBER, "retention_interval": INT_OR_NULL, "max_in_flight_tokens": INT_OR_NULL,
                  "peer": STR_OR_NULL},
    ),
}

#: Config fields that an older trace carries under a name the schema no longer has: old -> new.
RENAMED_CONFIG_FIELDS: dict[str, str] = {"against": "peer"}

#: A V1 config's KV-cache groups, by ``kind``.
V1_GROUP_FIELDS: dict[str, Fields] = {
    "full": Fields(required={"kind": STR}, optional={}),
    "sliding": Fields(required={"kind": STR, "window": INT}, optional={}),
}

_NONE = Fields(required={"op": STR}, optional={})


def _op(required: Mapping[str, Kind] | None = None, optional: Mapping[str, Kind] | None = None) -> Fields:
    return Fields(required={"op": STR, **(required or {})}, optional=dict(optional or {}))


#: Each semantics' ops and their fields (the adapters' vocabularies: the docstrings of
#: ``conformance/adapters/reference_v1.py`` and ``reference_v0.py`` say what each op stands for).
OP_FIELDS: dict[str, dict[str, Fields]] = {
    "v0": {
        "add_group": _op({"group": STR, "seqs": INTS, "prompt": INTS}),
        "num_cached_tokens": _op({"seq": INT}),
        "can_allocate": _op({"group": STR, "lookahead": INT}),
        "allocate": _op({"group": STR}),
        "compute": _op({"seq": INT}),
        "append_token": _op({"seq": INT, "token": INT}),
        "can_append_slots": _op({"group": STR, "lookahead": INT}),
        "append_slots": _op({"seq": INT, "lookahead": INT}),
        "fork": _op({"group": STR, "parent": INT, "child": INT}),
        "free": _op({"seq": INT}),
        "can_swap_out": _op({"group": STR}),
        "swap_out": _op({"group": STR}),
        "can_swap_in": _op({"group": STR, "lookahead": INT}),
        "swap_in": _op({"group": STR}),
        "access": _op({"seq": INT, "now": NUMBER}),
        "mark_computed": _op({"group": STR}),
        "common_computed": _op({"group": STR}),
        "reset_prefix_cache": _NONE,
        "hit_rate": _NONE,
        "num_free": _NONE,
        "block_table": _op({"seq": INT}),
    },
    "v1": {
        "add_request": _op({"req": STR, "tokens": INTS}, {"salt": STR_OR_NULL, "lora": STR_OR_NULL}),
        "get_computed_blocks": _op({"req": STR}),
        "allocate_slots": _op({"req": STR, "num_new_tokens": INT},
                              {"use_hit": BOOL, "num_lookahead_tokens": INT, "delay_cache_blocks": BOOL,
                               "has_scheduled_reqs": BOOL, "full_sequence_must_fit": BOOL,
                               "num_in_flight_tokens": INT}),
        "append_tokens": _op({"req": STR, "tokens": INTS}),
        "preempt": _op({"req": STR}),
        "free": _op({"req": STR}),
        "reset_prefix_cache": _NONE,
        "evict_blocks": _op({"block_ids": INTS}),
    },
}

TOP_FIELDS = Fields(
    required={"semantics": STR, "config": OBJECT, "ops": LIST},
    optional={"expect": LIST, "versions": STRS, "note": STR, "source": STR, "divergence": STR, "sides": LIST},
)
EXPECT_FIELDS = Fields(required={}, optional={"outcome": OBJECT, "state": OBJECT})


def _describe(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, (bytes, set)) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_fields(obj: Any, fields: Fields, source: str, where: str, what: str) -> None:
    if not isinstance(obj, dict):
        raise TraceFileError(source, where, f"expected {what} (a JSON object), got {_describe(obj)}")
    for name in fields.required:
        if name not in obj:
            raise TraceFileError(source, where, f"missing field {name!r} ({what} needs "
                                 f"{', '.join(fields.required)})")
    for name, value in obj.items():
        kind = fields.required.get(name) or fields.optional.get(name)
        path = f"{where}.{name}" if where else name
        if kind is None:
            known = ", ".join([*fields.required, *fields.optional])
            raise TraceFileError(source, path, f"unknown field in {what} (known: {known})")
        if not kind.test(value):
            raise TraceFileError(source, path, f"expected {kind.name}, got {_describe(value)}")


def _check_config(semantics: str, config: dict, source: str) -> None:
    from conformance.changelog import policy_named
    from reference.blocks.policies import V0Policy, V1Policy

    for old, new in RENAMED_CONFIG_FIELDS.items():
        if isinstance(config, dict) and old in config:
            raise TraceFileError(source, f"config.{old}", f"renamed to {new!r}: write \"{new}\": "
                                 f"{_describe(config[old])} instead")
    _check_fields(config, CONFIG_FIELDS[semantics], source, "config", f"a {semantics} config")
    if "policy" in config:
        try:
            policy_named(config["policy"], V1Policy if semantics == "v1" else V0Policy)
        except KeyError as err:
            raise TraceFileError(source, "config.policy", f"{config['policy']!r} is not a {semantics} policy "
                                 f"({err.args[0]})") from None
    for name in ("block_size", "num_blocks", "max_model_len", "num_gpu_blocks", "num_cpu_blocks"):
        least = 1 if name == "block_size" else 0
        if name in config and config[name] < least:
            raise TraceFileError(source, f"config.{name}", f"must be at least {least}, got {config[name]}")
    for i, group in enumerate(config.get("groups", [])):
        where = f"config.groups[{i}]"
        kind = group.get("kind") if isinstance(group, dict) else None
        if kind not in V1_GROUP_FIELDS:
            raise TraceFileError(source, where, f"expected an object whose 'kind' is one of "
                                 f"{', '.join(V1_GROUP_FIELDS)}, got {_describe(group)}")
        _check_fields(group, V1_GROUP_FIELDS[kind], source, where, f"a {kind!r} group")


def _check_ops(semantics: str, ops: list, source: str) -> None:
    vocabulary = OP_FIELDS[semantics]
    for i, op in enumerate(ops):
        where = f"ops[{i}]"
        name = op.get("op") if isinstance(op, dict) else None
        if not isinstance(op, dict) or "op" not in op:
            raise TraceFileError(source, where, f"expected an object with an 'op' field, got {_describe(op)}")
        if name not in vocabulary:
            raise TraceFileError(source, f"{where}.op", f"unknown {semantics} op {_describe(name)} "
                                 f"(known: {', '.join(vocabulary)})")
        _check_fields(op, vocabulary[name], source, where, f"a {name!r} op")


def _check_expect(expect: list, num_ops: int, source: str) -> None:
    if len(expect) != num_ops:
        raise TraceFileError(source, "expect", f"has {len(expect)} entries for {num_ops} ops "
                             "(one per op, null where nothing is expected)")
    for i, entry in enumerate(expect):
        if entry is None:
            continue
        where = f"expect[{i}]"
        _check_fields(entry, EXPECT_FIELDS, source, where, "an expectation")
        outcome = entry.get("outcome")
        if outcome is not None and (len(outcome) != 1 or not ("result" in outcome or "error" in outcome)):
            raise TraceFileError(source, f"{where}.outcome", "expected {\"result\": value} or "
                                 f"{{\"error\": category}}, got {_describe(outcome)}")
        if outcome is not None and "error" in outcome and not isinstance(outcome["error"], str):
            raise TraceFileError(source, f"{where}.outcome.error", f"expected a string, got {_describe(outcome['error'])}")


def check_trace(trace: Any, source: str = "<trace>") -> dict:
    """``trace`` itself if it follows the schema; else :class:`TraceFileError` naming ``source``."""
    if not isinstance(trace, dict):
        raise TraceFileError(source, "", f"expected a JSON object with semantics, config and ops, got "
                             f"{_describe(trace)}")
    if "semantics" in trace and trace["semantics"] not in SEMANTICS:
        raise TraceFileError(source, "semantics", f"expected one of {', '.join(SEMANTICS)}, got "
                             f"{_describe(trace['semantics'])}")
    _check_fields(trace, TOP_FIELDS, source, "", "a trace")
    semantics = trace["semantics"]
    _check_config(semantics, trace["config"], source)
    _check_ops(semantics, trace["ops"], source)
    if "expect" in trace:
        _check_expect(trace["expect"], len(trace["ops"]), source)
    return trace


def load_trace(path: Path | str) -> dict:
    """Read the trace file at ``path`` and check it (:func:`check_trace`); the error names the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise TraceFileError(str(path), "", f"cannot be read: {err}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise TraceFileError(str(path), "", f"is not JSON: {err}") from None
    return check_trace(data, str(path))


__all__ = ["CONFIG_FIELDS", "OP_FIELDS", "RENAMED_CONFIG_FIELDS", "SEMANTICS", "TraceFileError", "check_trace", "load_trace"]
