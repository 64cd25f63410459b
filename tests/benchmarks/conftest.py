"""The benchmarks' timed replays call gc.collect() before each timing; in the whole suite that
scans every object earlier tests left alive, once per Hypothesis example. Freezing what exists
when a benchmark test module starts keeps those collections to the test's own objects."""

from __future__ import annotations

import gc

import pytest


@pytest.fixture(autouse=True, scope="module")
def frozen_heap():
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()
