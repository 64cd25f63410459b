"""Shared test configuration: Hypothesis profiles.

``ci`` is what the README's test command uses: the state machines run 200 examples of at most
100 steps; Hypothesis draws each run's length, about half the maximum on average, so each machine
takes some 10,000 steps (200 x 50).
``dev`` (the default) is a quick local run. Select with ``HYPOTHESIS_PROFILE=ci``.

Marker ``reference_only``: the test drives only our own code (the reference against itself, our
strategies), never an installed vLLM, so its outcome does not depend on which vLLM is installed.
The dev environment's run (the project's own tests) runs it; the pinned vLLM environments of
``scripts/test`` (same Python, Hypothesis and pytest) deselect it with ``-m "not reference_only"``
instead of running it a second and third time.
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


def pytest_configure(config):
    config.addinivalue_line("markers", "reference_only: drives only our own code, never an installed vLLM "
                                       "(scripts/test runs it once, in the dev environment)")
