"""Reachability on transition tables (``delta[q][letter]``, -1 = none): shared by the spec
automaton and the content DFAs, and free of both so that neither depends on the other."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["coreachable", "reachable"]


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
