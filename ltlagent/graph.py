"""Reachability on transition tables (``delta[q][letter]``, -1 = none): shared by the spec
automaton and the content DFAs, and free of both so that neither depends on the other."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["coreachable", "coreachable_table", "reachable"]


def coreachable(delta: Sequence[Sequence[int]], targets: Iterable[int]) -> frozenset[int]:
    """States of ``delta`` that can reach one of ``targets`` (the targets included)."""
    rev: dict[int, list[int]] = {}
    for q, row in enumerate(delta):
        for r in set(row):
            if r >= 0:
                rev.setdefault(r, []).append(q)
    seen = set(targets)
    todo = list(seen)
    while todo:
        r = todo.pop()
        for q in rev.get(r, ()):
            if q not in seen:
                seen.add(q)
                todo.append(q)
    return frozenset(seen)


def reachable(delta: Sequence[Sequence[int]], start: int) -> frozenset[int]:
    """States of ``delta`` reachable from ``start`` (itself included; nothing when it is -1)."""
    if start < 0:
        return frozenset()
    seen, todo = {start}, [start]
    while todo:
        for r in delta[todo.pop()]:
            if r >= 0 and r not in seen:
                seen.add(r)
                todo.append(r)
    return frozenset(seen)


def coreachable_table(trans: np.ndarray, targets: Iterable[int]) -> frozenset[int]:
    """:func:`coreachable` of a numpy table (``int [n, k]``): its edges deduplicated in numpy first
    (runs along a row dropped, then the rest sorted: a row of 256 bytes has a few distinct
    successors), then searched backward in Python."""
    n = int(trans.shape[0])
    t = trans.astype(np.int64, copy=False)
    # a successor repeated along a row (runs of bytes) is one edge: only run starts are kept
    run = np.ones(t.shape, dtype=bool)
    run[:, 1:] = t[:, 1:] != t[:, :-1]
    src = np.nonzero(run)[0]
    dst = t[run]
    ok = dst >= 0
    pairs = np.unique(dst[ok] * n + src[ok])  # by successor, then predecessor
    ptr = np.searchsorted(pairs, np.arange(n + 1, dtype=np.int64) * n).tolist()
    pred = (pairs % n).tolist() if n else []
    seen = set(targets)
    todo = list(seen)
    while todo:
        r = todo.pop()
        for q in pred[ptr[r]:ptr[r + 1]]:
            if q not in seen:
                seen.add(q)
                todo.append(q)
    return frozenset(seen)
