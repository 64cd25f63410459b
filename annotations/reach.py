"""Reachability as data: whether the pinned release's serving path runs the lines a note explains.

A note says what code does; a reader also needs to know whether the release actually runs it.
Each note may carry one ``- reach:`` line (and an annotation file a ``reach:`` header giving the
default for its notes), in one of four forms:

* ``default`` — reached on the serving path with default settings, for every model it covers;
* ``models <which>: <why>`` — reached with default settings, but only when serving the models
  named (Markdown up to the first ``": "``, a phrase that follows "models", e.g. ``with Mamba
  (SSM) layers``); the why must cite the code that selects the mechanism for them (checked by
  ``annotations.check``);
* ``setting <setting>[: <why>]`` — reached only when the named setting is made (Markdown up to
  the first ``": "``, e.g. ```VLLM_USE_V1=0` and `preemption_mode="swap"```), optionally with why;
* ``unreached: <why>`` — not reached from the serving path; the why must cite the callers
  (an upstream citation, checked by ``annotations.check``).

Lines that more than one route reaches carry one status per route, one ``- reach:`` line each
(``reach:`` header lines likewise): for example ``models <which>: <why>`` for the models that
reach them by default and ``setting <setting>: <why>`` for the others. Read together they mean
"reached by any of these routes"; ``default`` and ``unreached`` say all there is and stand alone
(:func:`combine_routes`).

What "the serving path" is for a file is said once by its ``serving:`` header (for the V0 files
of 0.10.2: the V0 engine, which that release runs only when it is selected). Releases listed in
:data:`REQUIRED_FOR` must give every note a status.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from upstream.releases import PINNED

STATUSES = ("default", "models", "setting", "unreached")
#: Releases whose every note must carry a reachability status (its own or its file's default).
REQUIRED_FOR = PINNED
#: Statuses whose why must carry an upstream citation: the callers (``unreached``) or the code that
#: selects the mechanism for the models named (``models``).
CITING = ("models", "unreached")
#: Statuses that say all there is about the lines, so they cannot be one route among others.
ALONE = ("default", "unreached")
#: Short labels for badges and legends, one per status.
LABELS = {
    "default": "reached by default",
    "models": "reached only for some models",
    "setting": "reached only with a setting",
    "unreached": "not reached from serving",
}

_FORM = re.compile(r"^(?P<status>[a-z-]+)(?P<rest>.*)$")
_SETTING = re.compile(r"^ +(?P<setting>[^:]*\S)(?:: +(?P<why>\S.*))?$")
_WHY = re.compile(r"^: *(?P<why>\S.*)$")


class ReachError(ValueError):
    """A ``reach`` value that does not follow the grammar; the message says what is wrong."""


@dataclass(frozen=True)
class Reach:
    """One reachability status: its first route, and the other routes that also reach the lines."""

    status: str  # one of STATUSES
    setting: str = ""  # "setting": the setting; "models": which models (Markdown, e.g. "`VLLM_USE_V1=0`")
    why: str = ""  # Markdown; for "unreached" it cites the callers, for "models" the selecting code
    also: tuple[Reach, ...] = ()  # further routes, each a single-route Reach ("models" or "setting")

    @property
    def label(self) -> str:
        return LABELS[self.status]

    @property
    def routes(self) -> tuple[Reach, ...]:
        """Every route, the first one included, each without further routes."""
        return (Reach(self.status, self.setting, self.why), *self.also)

    @property
    def needs_a_setting(self) -> bool:
        """True when every route names a setting: no default run of any model reaches the lines."""
        return all(route.status == "setting" for route in self.routes)


def parse_reach(value: str) -> Reach:
    """Read a ``reach`` value; raise :class:`ReachError` naming the defect."""
    text = value.strip()
    match = _FORM.match(text)
    status = match["status"] if match else ""
    if status not in STATUSES:
        raise ReachError(f"reach status {status or text!r} is unknown (known: {', '.join(STATUSES)})")
    rest = match["rest"]
    if status == "default":
        why = _WHY.match(rest)
        if rest.strip() and not why:
            raise ReachError(f"'default' takes nothing or ': <why>', got {rest.strip()!r}")
        return Reach("default", why=why["why"] if why else "")
    if status == "setting":
        setting = _SETTING.match(rest)
        if not setting:
            raise ReachError("'setting' must name the setting: setting <setting, Markdown>[: <why>]")
        return Reach("setting", setting["setting"], setting["why"] or "")
    if status == "models":
        models = _SETTING.match(rest)
        if not models or not models["why"]:
            raise ReachError("'models' must name the models and cite what selects them: models <which, Markdown>: <why>")
        return Reach("models", models["setting"], models["why"])
    why = _WHY.match(rest)
    if not why:
        raise ReachError("'unreached' needs ': <why>', citing the callers")
    return Reach("unreached", why=why["why"])


def combine_routes(values: list[str]) -> Reach:
    """Read the ``reach`` values of one note (or one header), one route each; raise
    :class:`ReachError` naming the defect. A single value is a single route."""
    if not values:
        raise ReachError("no reach value")
    routes = [parse_reach(value) for value in values]
    if len(routes) == 1:
        return routes[0]
    for route in routes:
        if route.status in ALONE:
            raise ReachError(f"'{route.status}' cannot be one of several routes; it says all there is about the lines")
    seen: set[tuple[str, str]] = set()
    for route in routes:
        key = (route.status, route.setting)
        if key in seen:
            raise ReachError(f"route '{route.status} {route.setting}' is given twice")
        seen.add(key)
    first, *rest = routes
    return Reach(first.status, first.setting, first.why, tuple(rest))
