"""An object's table written directly from its members' tables (docs/design.md §5.1).

Where an object's keys are each written one way (no character of a key has an escape) and it
writes no undeclared keys, the glue between its members is deterministic by construction: after
``{`` or ``,`` (and its optional space) a trie of the keys that may come next, each key's closing
quote leads to its ``:``, the optional space and its value's table, whose accepting states go on
by ``,`` or ``}``. :func:`object_table` writes that table out as a :class:`~ltlagent.text.glue.Nested`
(the rows built here, the values' tables as parts, copied once at the top) without the subset
construction over the glue NFA (:meth:`~ltlagent.text.glue.Glue.nested`), which builds the same
states one Python subset at a time: the keys' tries, the lanes of optional properties and the
entries into each value were most of a median schema's compile. The keys' trie is built once;
a state is a node of it with the members that may still come there (a slice of the node's own
members, which are in order, so the state is named by the node and the slice's ends, found by
bisection), so that the lanes share states where the subset construction does (a key's bytes
once it is the only one left). Those bytes, past the key's longest prefix shared with another
key, are not built as trie nodes: they are a *chain* whose states are written one after another
when its first is reached, numbered as the trie's nodes were. None where a value's table could
not be joined so (it accepts at its start, leads back to it, begins with a space, or goes on by
``,`` or ``}``) or the states would pass the limit: the caller determinises the glue then.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate, pairwise

import numpy as np

from ltlagent.text.bytetable import Rim
from ltlagent.text.glue import Block, Joiner, Nested, Run, enters_start
from ltlagent.text.objectrows import compiled_object_rows

__all__ = ["Member", "object_table"]

_COLON, _SPACE, _COMMA, _CLOSE = 0x3A, 0x20, 0x2C, 0x7D

#: An object's own rows by the compiled loop (:mod:`~ltlagent.text.objectrows`) where numba is
#: installed; off (or without numba): built in Python here.
COMPILED_ROWS = True


class _TooMany(Exception):
    """More states than the limit allows (caught in :func:`object_table`)."""


@dataclass(frozen=True)
class Member:
    """A declared property as the object writes it: its key's text (quotes included, each byte
    written one way), whether it is required, and its value's table."""

    key: bytes
    required: bool
    value: Block


def object_table(members: Sequence[Member], empty_closes: bool, source: str, limit: int) -> Nested | None:
    """The table of ``{``, the members in their order (optional ones may be left out), ``}``:
    states ``0`` (before ``{``), the glue's states (after ``{``; per member written, its ``,`` and
    the optional space after it; the keys' trie nodes; per member, after its key, its ``:`` and its
    space), the end (after ``}``, accepting), then each value's table but its start (its start's
    row is the row after ``:`` and after the space). ``empty_closes``: ``{}`` is allowed (no
    member is required and ``minProperties`` is 0). None where a value cannot be joined so, and
    where the glue's states and the values' would be more than ``limit`` (as the glue counts them:
    the caller's glue then refuses the object, with its message)."""
    n = len(members)
    if not n:
        return None
    for m in members:
        if m.value.empty or enters_start(m.value):
            return None
    room = limit - sum(m.value.num_states for m in members)  # for the glue's states
    # the first required member from each position on (n: none), and what may come next
    next_required = [n] * (n + 1)
    for i in range(n - 1, -1, -1):
        next_required[i] = i if members[i].required else next_required[i + 1]
    rows_loop = compiled_object_rows() if COMPILED_ROWS else None
    if rows_loop is not None:
        return _compiled_table(rows_loop, members, next_required, empty_closes, source, room)

    rows: dict[int, list[tuple[int, int, int]]] = {}  # state -> runs (lo, hi, target), built here
    counter = [0]

    def new() -> int:
        counter[0] += 1
        if counter[0] > room:
            raise _TooMany
        return counter[0] - 1

    # the keys' trie: per node, its children (byte, node) in byte order and the members whose keys
    # pass through it, ascending; a state of the table is a node with the members in a range
    # (those that may come next), a slice of the node's members. A key's bytes past its longest
    # prefix shared with another key are one member's alone: a *chain*, whose nodes are not built
    # (the child is ``-1 - k``, member k's chain from that depth on; its states are named by the
    # member and the depth, and written one after another when the first is: ``chain``)
    keys = [m.key for m in members]
    alone = [0] * n  # per member, its longest prefix shared with another key
    by_key = sorted(range(n), key=keys.__getitem__)
    for x, y in pairwise(by_key):
        kx, ky = keys[x], keys[y]
        i, most = 0, min(len(kx), len(ky))
        while i < most and kx[i] == ky[i]:
            i += 1
        alone[x], alone[y] = max(alone[x], i), max(alone[y], i)
    kids: list[list[tuple[int, int]]] = [[]]
    under: list[list[int]] = [[]]
    depth: list[int] = [0]
    for k, key in enumerate(keys):
        v = 0
        under[0].append(k)
        for d in range(alone[k]):
            b = key[d]
            for c, w in kids[v]:
                if c == b:
                    v = w
                    break
            else:
                w = len(kids)
                kids.append([])
                under.append([])
                depth.append(d + 1)
                kids[v].append((b, w))
                kids[v].sort()
                v = w
            under[v].append(k)
        kids[v].append((key[alone[k]], -1 - k))  # (a key is never a prefix of another: its quote)
        kids[v].sort()
    states: dict[tuple[int, int, int], int] = {}  # (node, slice of its members) -> state
    todo: list[tuple[int, int, int, int]] = []  # states whose rows are not built: state, node, slice

    def edges_of(v: int, a: int, z: int) -> list[tuple[int, int, int]]:
        """The byte edges of node ``v`` with its members ``a … z - 1`` (in ``under[v]``): to each
        child that has some of them (their rows are built from ``todo``), or, for the closing
        quote of a key, to the state after it (no function here calls itself, so none of them
        holds the others in a reference cycle)."""
        mine = under[v]
        first, last = mine[a], mine[z - 1]
        out = []
        for b, w in kids[v]:
            if w < 0:  # a chain: its member alone
                k = -1 - w
                if not first <= k <= last:
                    continue
                d = depth[v] + 1
                if d == len(keys[k]):  # its closing quote
                    out.append((b, b, after_key[k]))
                    continue
                got = states.get((w, d, -1))
                if got is None:
                    got = states[w, d, -1] = new()
                    todo.append((got, w, d, -1))
                out.append((b, b, got))
                continue
            theirs = under[w]
            i = bisect_left(theirs, first)
            j = bisect_right(theirs, last, i)
            if i == j:
                continue
            got = states.get((w, i, j))
            if got is None:
                got = states[w, i, j] = new()
                todo.append((got, w, i, j))
            out.append((b, b, got))
        return out

    def chain(q: int, k: int, d: int) -> None:
        """The rows of member ``k``'s chain from state ``q`` (its key's first ``d`` bytes read):
        a state per byte to its closing quote, numbered in order (as the trie's nodes were when
        each was built on its own, last in, first out)."""
        key = keys[k]
        last = len(key) - 1
        while d < last:
            r = new()
            rows[q] = [(key[d], key[d], r)]
            q, d = r, d + 1
        rows[q] = [(key[last], key[last], after_key[k])]

    def candidates(first: int) -> list[tuple[int, int, int]]:
        """The edges into the keys that may come at position ``first < n`` on, up to the first
        required one: the root's, with those members (the root's members are all, in order)."""
        return edges_of(0, first, min(next_required[first], n - 1) + 1)

    after_key: list[int] = []  # per member, after its key's closing quote
    try:
        start, after_open = new(), new()
        end = new()
        after_key.extend(new() for _ in range(n))
        colon = [new() for _ in range(n)]  # after ``:``
        space = [new() for _ in range(n)]  # after ``:`` and a space
        rows[start] = [(0x7B, 0x7B, after_open)]
        rows[after_open] = sorted([*candidates(0), *([(_CLOSE, _CLOSE, end)] if empty_closes else [])])
        rows[end] = []
        # per member, the lane after it: ``,`` (and a space) into the trie of the keys that may follow
        lane_after: list[list[tuple[int, int, int]]] = []
        for k in range(n):
            lane: list[tuple[int, int, int]] = []
            if k + 1 < n:
                comma, spaced = new(), new()
                root = candidates(k + 1)
                rows[comma] = sorted([(_SPACE, _SPACE, spaced), *root])
                rows[spaced] = root
                lane.append((_COMMA, _COMMA, comma))
            if next_required[k + 1] == n:
                lane.append((_CLOSE, _CLOSE, end))
            lane_after.append(lane)
        while todo:
            q, v, a, z = todo.pop()
            if v < 0:
                chain(q, -1 - v, a)
            else:
                rows[q] = edges_of(v, a, z)
    except _TooMany:
        return None
    # the values' copies, each but its start, after the glue's states
    out = Joiner(counter[0], rows)
    for k, m in enumerate(members):
        first = out.copy(m.value, lane_after[k], (_COMMA, _CLOSE))
        if first is None or any(lo <= _SPACE <= hi for lo, hi, _r in first):
            return None
        out.rows[after_key[k]] = [(_COLON, _COLON, colon[k])]
        out.rows[colon[k]] = sorted([(_SPACE, _SPACE, space[k]), *first])
        out.rows[space[k]] = first
    table = out.nested([end], source)
    # the rim known by construction (as Nested.rim would read it from the rows: ``{`` from the
    # start, the end accepting with no row, and no edge back to the start: glue states are
    # numbered from 1 on, the values' copies after them, none of them their start)
    table.__dict__["rim"] = Rim([(0x7B, 0x7B, after_open)], [(end, [])], True)
    return table


def _compiled_table(rows_loop: Callable[..., tuple[int, np.ndarray, int]], members: Sequence[Member],
                    next_required: list[int], empty_closes: bool, source: str, room: int) -> Nested | None:
    """:func:`object_table` with the glue's own rows from the compiled loop
    (:func:`~ltlagent.text.objectrows.compiled_object_rows`: the same states, numbered alike, as
    arrays sorted by state); the values' copies, and the rows after each key, its ``:`` and its
    space (states ``3 … 3 + 3n - 1``, which read the values' first bytes), here as there."""
    n = len(members)
    keys = b"".join(m.key for m in members)
    off = np.array([0, *accumulate(len(m.key) for m in members)], dtype=np.int64)
    need = np.asarray(next_required, dtype=np.int64)
    comma = np.empty(n, dtype=np.int64)
    own, runs, low = rows_loop(np.frombuffer(keys, dtype=np.uint8), off, need, empty_closes, room, comma,
                               4 * len(keys) + 8 * n + 16)
    if own < 0:
        return None
    lanes = comma.tolist()
    out = Joiner(own)
    mid: list[int] = []  # rows of 3 … 3 + 3n - 1, flat: state, first byte, last, target
    firsts: list[list[Run]] = []
    for k, m in enumerate(members):
        lane: list[Run] = [(_COMMA, _COMMA, lanes[k])] if lanes[k] >= 0 else []
        if next_required[k + 1] == n:
            lane.append((_CLOSE, _CLOSE, 2))
        first = out.copy(m.value, lane, (_COMMA, _CLOSE))
        if first is None or any(lo <= _SPACE <= hi for lo, hi, _r in first):
            return None
        firsts.append(first)
    for k in range(n):
        mid += (3 + k, _COLON, _COLON, 3 + n + k)
    for k, first in enumerate(firsts):
        for a, b, r in sorted([(_SPACE, _SPACE, 3 + 2 * n + k), *first]):
            mid += (3 + n + k, a, b, r)
    for k, first in enumerate(firsts):
        for a, b, r in first:
            mid += (3 + 2 * n + k, a, b, r)
    kept = sorted(out.rows)  # the copies' accepting rows, after every own state
    for q in kept:
        for a, b, r in out.rows[q]:
            mid += (q, a, b, r)
    flat = np.array(mid, dtype=np.int64).reshape(-1, 4).T
    cut = 2 * n + 2 * sum(len(f) for f in firsts)  # the runs of the rows of 3 … 3 + 3n - 1
    src_, lo_, hi_, to_ = np.concatenate([runs[:, :low], flat[:, :cut], runs[:, low:], flat[:, cut:]], axis=1)
    acc = np.zeros(out.total, dtype=bool)
    acc[2] = True
    built = np.concatenate([np.arange(own, dtype=np.int64), np.array(kept, dtype=np.int64)])
    table = Nested(out.total, acc, built, src_, lo_, hi_, to_, tuple(out.parts), source, tuple(out.periods))
    table.__dict__["rim"] = Rim([(0x7B, 0x7B, 1)], [(2, [])], True)
    return table

