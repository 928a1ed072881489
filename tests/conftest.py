"""Hypothesis profiles for the whole suite (docs/design.md §9).

``ci`` (the default) is derandomised: every run draws the same examples, so CI never passes or
fails by chance, and nothing is read from or written to an example database. ``explore`` draws
many more random examples, to look for new bugs outside CI: ``HYPOTHESIS_PROFILE=explore pytest
tests/test_differential.py`` or ``pytest --hypothesis-profile=explore …``. Tests that set
``max_examples`` themselves keep their count; those that take it from the profile
(tests/test_differential.py) scale with it.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

#: examples per property under ``explore`` (``ci`` keeps Hypothesis's default of 100)
EXPLORE_EXAMPLES = 2000

settings.register_profile("ci", derandomize=True, database=None, deadline=None,
                          print_blob=True)
settings.register_profile("explore", max_examples=EXPLORE_EXAMPLES, derandomize=False,
                          deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
