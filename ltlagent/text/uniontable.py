"""A union's table written directly from its branches' tables (docs/design.md §5.1).

A union (``anyOf``, ``oneOf``, a list of types: ``["string", "null"]``) whose branches begin with
different bytes (a string's ``"``, ``null``'s ``n``, an object's ``{``, an array's ``[``) is
deterministic by construction: the first byte chooses the branch, and the table is a start whose
row is the branches' start rows side by side, then each branch's table but its start.
:func:`union_table` writes that table out as a :class:`~ltlagent.text.glue.Nested` (the branches'
tables as parts, copied once at the top) without the subset construction over the glue
(:meth:`~ltlagent.text.glue.Glue.nested`), which found the same states one Python subset at a time:
a nullable value (``["array", "null"]``, an object or null) cost 0.2–0.6 ms there. None where two
branches may begin with the same byte, a branch accepts at its start or leads back to it, there
are fewer than two branches, or the states would pass the limit: the caller determinises the
glue then.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ltlagent.text.glue import Block, Joiner, Nested, Run, enters_start

__all__ = ["union_table"]


def union_table(branches: Sequence[Block], source: str, limit: int) -> Nested | None:
    """The table of any one of ``branches``: state ``0`` (the start, whose row is the branches'
    start rows), then each branch's table but its start, in order (accepting where the branch
    accepts). None where the branches' first bytes meet, a branch enters its start, there are
    fewer than two branches, or the states would be more than ``limit``."""
    if len(branches) < 2:
        return None
    if any(b.empty or enters_start(b) for b in branches):
        return None
    if 1 + sum(b.num_states - 1 for b in branches) > limit:
        return None
    firsts: list[Run] = sorted(r for b in branches for r in b.rim.start)
    if any(a[1] >= b[0] for a, b in itertools.pairwise(firsts)):
        return None  # two branches may begin with the same byte: the glue decides
    out = Joiner(1)
    accepting: list[int] = []
    entry: list[Run] = []
    for b in branches:
        d = out.total - 1
        first = out.copy(b, [], ())
        assert first is not None  # (no stop bytes: never refused)
        entry += first
        accepting += [a + d for a, _runs in b.rim.accepting]
    out.rows[0] = sorted(entry)
    return out.nested(accepting, source)
