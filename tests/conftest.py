"""Shared test configuration: Hypothesis profiles.

``ci`` is what the README's test command uses: the state machines run 200 examples of at most
100 steps; Hypothesis draws each run's length, about half the maximum on average, so each machine
takes some 10,000 steps (200 x 50).
``dev`` (the default) is a quick local run. Select with ``HYPOTHESIS_PROFILE=ci``.
"""

import os

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # the browser-test environment has no Hypothesis and needs no profiles
    settings = None

if settings is not None:
    _quiet = [HealthCheck.too_slow, HealthCheck.data_too_large]
    settings.register_profile("ci", max_examples=200, stateful_step_count=100, deadline=None,
                              database=None, suppress_health_check=_quiet)
    settings.register_profile("dev", max_examples=30, stateful_step_count=20, deadline=None,
                              suppress_health_check=_quiet)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
