"""Hypothesis profiles (issue 31): CI never passes or fails by chance, exploring finds new cases.

- ``ci`` (the default, and always when the ``CI`` environment variable is set): derandomised
  (the examples are a function of each test, the same on every run and machine), no example
  database, no deadline (a loaded machine is slow, not wrong). Each test keeps the number of
  examples its own ``@settings`` asks for, so it keeps the power it was written with.
- ``explore`` (``make test-explore``, ``LTLAGENT_HYPOTHESIS=explore``): unseeded, each property test
  runs ``EXPLORE_FACTOR`` times its own number of examples (its derandomisation undone too), and
  only the property tests run. A failure found there is reproduced from the printed example and
  kept as an ``@example(...)`` on the test, so that CI checks it on every run from then on.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, is_hypothesis_test, settings

#: How many times a property test's own ``max_examples`` the ``explore`` profile runs.
EXPLORE_FACTOR = 10

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
#: Examples under ``explore`` for a property that takes its count from the profile
#: (tests/test_differential.py); the others get ``EXPLORE_FACTOR`` times their own.
EXPLORE_EXAMPLES = 1000

settings.register_profile("explore", max_examples=EXPLORE_EXAMPLES, derandomize=False,
                          database=None, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])


def profile_name() -> str:
    """The profile this run uses: ``ci`` under CI whatever else is set, else the variable's."""
    if os.environ.get("CI"):
        return "ci"
    return os.environ.get("LTLAGENT_HYPOTHESIS", os.environ.get("HYPOTHESIS_PROFILE", "ci"))


settings.load_profile(profile_name())


def pytest_report_header(config: pytest.Config) -> str:
    return f"hypothesis profile: {settings.get_current_profile_name()}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``explore``: keep only the property tests, each with ``EXPLORE_FACTOR`` times its
    examples and unseeded (a test's own ``@settings`` would otherwise win over the profile)."""
    if settings.get_current_profile_name() != "explore":
        return
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    done: set[int] = set()  # the parametrised cases of one test share its function
    for item in items:
        fn = getattr(item, "obj", None)
        if fn is None or not is_hypothesis_test(fn):
            dropped.append(item)
            continue
        keep.append(item)
        own = getattr(fn, "_hypothesis_internal_use_settings", None)  # what @settings set
        if isinstance(own, settings) and id(fn) not in done:
            done.add(id(fn))
            fn._hypothesis_internal_use_settings = settings(  # type: ignore[attr-defined]
                own, max_examples=own.max_examples * EXPLORE_FACTOR, derandomize=False, database=None)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
