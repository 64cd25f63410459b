"""The registry of conformance properties: stable names that notes, pages and reports cite.

Each property module lists its properties in a module-level ``PROPERTIES`` list; this module
gathers them. Importing it imports no vLLM (modules import vLLM only when a property runs).

A property's ``run(examples, steps, progress)`` returns a :class:`Result`; it raises
:class:`conformance.lockstep.NotApplicable` when the installed vLLM lacks what it needs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

# Modules that define properties, in report order.
PROPERTY_MODULES = (
    "conformance.machines.v1",
    "conformance.machines.v0",
    "conformance.machines.long_context",
    "conformance.corpus",
    "conformance.kernels.properties",
    "conformance.kernels.cpu_build",
)


@dataclass
class Result:
    """What one property run did."""

    passed: bool
    examples: int = 0
    steps: int = 0
    detail: str = ""
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Property:
    """A named, checkable claim that the reference behaves like vLLM."""

    name: str  # stable, e.g. "v1.lifecycle"
    checks: str  # one sentence: exactly what is compared
    run: Callable[..., Result]
    needs: str = ""  # what the installed vLLM must provide, for the not-applicable message


def all_properties() -> dict[str, Property]:
    """Every registered property by name (modules that do not exist yet are skipped)."""
    found: dict[str, Property] = {}
    for name in PROPERTY_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name or name.startswith(str(err.name) + "."):
                continue
            raise
        for prop in getattr(module, "PROPERTIES", []):
            if prop.name in found:
                raise ValueError(f"property {prop.name!r} is registered twice")
            found[prop.name] = prop
    return found


def property_names() -> set[str]:
    """The stable property names, for link checking."""
    return set(all_properties())
