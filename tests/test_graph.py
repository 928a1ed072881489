"""Reachability helpers (ltlagent/graph.py): the numpy table search against the list search."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ltlagent.graph import coreachable, coreachable_table


@pytest.mark.parametrize("seed", range(40))
def test_coreachable_table_is_coreachable(seed: int) -> None:
    """On random tables (dead entries, self loops, unreachable parts, 1 to 60 states, 1 to 256
    letters) the deduplicated numpy search finds exactly the states the plain search finds."""
    rng = random.Random(seed)
    n, k = rng.randint(1, 60), rng.choice([1, 2, 7, 256])
    dead = rng.random()
    rows = [[-1 if rng.random() < dead else rng.randrange(n) for _ in range(k)] for _ in range(n)]
    targets = rng.sample(range(n), rng.randint(0, min(n, 3)))
    got = coreachable_table(np.array(rows, dtype=np.int32), targets)
    assert got == coreachable(rows, targets)


def test_coreachable_table_follows_chains_backward() -> None:
    """A chain 0 → 1 → … → 9 with the target at its end: every state reaches it; with the
    target in the middle, only the states before it (and itself)."""
    rows = [[q + 1 if q < 9 else -1, -1] for q in range(10)]
    t = np.array(rows, dtype=np.int64)
    assert coreachable_table(t, [9]) == frozenset(range(10))
    assert coreachable_table(t, [4]) == frozenset(range(5))
    assert coreachable_table(t, []) == frozenset()
