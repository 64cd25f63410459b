"""Small enumerations shared by the V0 page manager.

``AllocStatus`` answers "can this sequence group be given pages?" with three values rather than a
boolean, because the scheduler acts differently on each: ``OK`` - allocate now; ``LATER`` - the
pool is too busy right now, keep the group waiting; ``NEVER`` - even an empty pool could not hold
it (after keeping the watermark free), so the request must be rejected.
"""

from __future__ import annotations

import enum


class AllocStatus(enum.Enum):
    """The outcome of a capacity check (vLLM: ``vllm/core/interfaces.py`` ``AllocStatus``)."""

    OK = enum.auto()
    LATER = enum.auto()
    NEVER = enum.auto()


class Device(enum.Enum):
    """Where a page lives. GPU pages are numbered first, CPU pages after them."""

    GPU = enum.auto()
    CPU = enum.auto()
