"""An array's table written directly from its item's table (docs/design.md §5.1).

An array is ``[``, its items separated by ``,`` and an optional space, ``]``; within its bounds
(``minItems``, ``maxItems``) the glue between the items is deterministic by construction when the
item's table cannot be confused with that glue: after ``[`` or ``,`` the item's first bytes enter
the copy of the item for that count, and the copy's accepting states go on by ``,`` (to the next
count's copy, or back to the last one's where there is no ``maxItems``) and by ``]`` (once
``minItems`` are written). :func:`array_table` writes that table out as a
:class:`~ltlagent.text.glue.Nested`, state for state the one the subset construction over the glue
(:meth:`~ltlagent.text.glue.Glue.nested`) builds, without building its subsets one Python set at a
time: arrays were a fifth of a median schema's compile once objects were written directly
(:mod:`~ltlagent.text.objecttable`). None where the item's table could not be joined so (it
accepts at its start or leads back to it, begins with a space, or goes on by ``,`` or ``]``), for
``[]`` alone, and where the states would pass the limit: the caller determinises the glue then.
"""

from __future__ import annotations

from ltlagent.text.bytetable import Rim
from ltlagent.text.glue import Block, Joiner, Nested, enters_start

__all__ = ["array_table"]

_OPEN, _CLOSE, _COMMA, _SPACE = 0x5B, 0x5D, 0x2C, 0x20


def array_table(item: Block, min_items: int, max_items: int | None, source: str, limit: int
                ) -> Nested | None:
    """The table of ``[``, ``min_items`` to ``max_items`` (None: any number of) items, ``]``:
    states ``0`` (before ``[``), ``1`` (after it), ``2`` (after ``]``, accepting), per ``,`` the
    state after it and after its space, then one copy of the item per count up to the last one
    unrolled (``max_items``, or ``max(min_items, 1)`` whose ``,`` leads back to it), each but its
    start (whose row is the rows after ``[`` or the ``,`` before it). None where the item cannot
    be joined so, for ``[]`` alone (``max_items`` 0) and where the states would be more than
    ``limit`` (the glue then refuses the array, with its message)."""
    if max_items is not None and (max_items == 0 or min_items > max_items):
        return None
    if item.empty or enters_start(item) or any(lo <= _SPACE <= hi for lo, hi, _r in item.rim.start):
        return None  # (an item that begins with a space would be confused with the one after ``,``)
    loops = max_items is None
    unroll = max(min_items, 1) if max_items is None else max_items
    commas = unroll - 1 + loops  # the ``,`` after each copy but the last (and after it, looping)
    own = 3 + 2 * commas
    if own + unroll * (item.num_states - 1) > limit:
        return None
    start, after_open, end = 0, 1, 2
    out = Joiner(own)
    out.rows[start] = [(_OPEN, _OPEN, after_open)]
    out.rows[end] = []
    firsts = []
    for k in range(1, unroll + 1):  # copy k: the k-th item
        lane = [(_COMMA, _COMMA, 3 + 2 * (k - 1))] if k < unroll or loops else []
        if k >= min_items:
            lane.append((_CLOSE, _CLOSE, end))
        first = out.copy(item, lane, (_COMMA, _CLOSE))
        if first is None:
            return None
        firsts.append(first)
    out.rows[after_open] = sorted([*firsts[0], *([(_CLOSE, _CLOSE, end)] if min_items == 0 else [])])
    for j in range(commas):  # after the ``,`` that follows copy j + 1: copy j + 2 (or the last)
        comma, spaced = 3 + 2 * j, 4 + 2 * j
        nxt = firsts[min(j + 1, unroll - 1)]
        out.rows[comma] = sorted([(_SPACE, _SPACE, spaced), *nxt])
        out.rows[spaced] = nxt
    table = out.nested([end], source)
    # the rim known by construction (as Nested.rim would read it from the rows: ``[`` from the
    # start, the end accepting with no row, and no edge back to the start)
    table.__dict__["rim"] = Rim([(_OPEN, _OPEN, after_open)], [(end, [])], True)
    return table
