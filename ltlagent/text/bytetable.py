"""Byte DFAs as numpy tables (:class:`ByteTable`): trimming, rows as runs of equal successors,
distances, sampling. The subset construction over NFAs whose parts are whole tables, and tables
kept as their parts, are :mod:`ltlagent.text.glue`'s. Reachability and liveness are vectorised
breadth-first searches.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ltlagent.errors import UsageError
from ltlagent.graph import csr, levels, row_edges, run_spans
from ltlagent.text.content import DEAD, ContentDFA

__all__ = ["ByteTable", "Periods", "Rim", "Runs", "literal_table", "trie", "trim", "runs", "distance_to",
           "row_edges", "sample_text"]

#: ``(a, b, k)`` ranges of states that repeat with period ``k`` (see :attr:`ByteTable.periods`)
Periods = tuple[tuple[int, int, int], ...]

#: Every row's runs of a table, as :func:`_table_runs` gives them
Runs = tuple[list[int], list[int], list[int], list[int]]


class Rim(NamedTuple):
    """What a table joined around a block's copies reads of the block
    (:class:`~ltlagent.text.glue.Joiner`): its start's runs, each accepting state with its runs,
    and whether the start can be left out of a copy (it does not accept and no edge leads back).
    Kept on the table and shared by every reader: read, never changed."""

    start: list[tuple[int, int, int]]
    accepting: list[tuple[int, list[tuple[int, int, int]]]]
    detached: bool

    @staticmethod
    def of(row_runs: Callable[[int], list[tuple[int, int, int]]], accepting: np.ndarray, detached: bool
           ) -> Rim:
        """The rim of a table (a :class:`ByteTable`, a :class:`~ltlagent.text.glue.Nested`) from
        its ``row_runs`` and ``accepting``; ``detached`` as the table's kind knows it."""
        return Rim(row_runs(0), [(a, row_runs(a)) for a in np.flatnonzero(accepting).tolist()], detached)


@dataclass(frozen=True, eq=False)
class ByteTable:
    """A trimmed byte DFA: ``trans[s, b]`` the successor (``-1`` dead), ``accepting[s]``; state 0 is
    the start, and every state is reachable from it and can reach an accepting one (an empty
    language is one state, not accepting, with no edges). Immutable once built."""

    trans: np.ndarray = field(repr=False)  # int32 [n, 256]
    accepting: np.ndarray = field(repr=False)  # bool [n]
    source: str = ""
    #: hints for token walks: ``(a, b, k)`` where the rows of states ``s + k`` look like those of
    #: ``s`` shifted by ``k`` (a string's character count; checked by whoever relies on it)
    periods: Periods = ()

    def __post_init__(self) -> None:
        self.trans.setflags(write=False)
        self.accepting.setflags(write=False)

    @property
    def num_states(self) -> int:
        return int(self.trans.shape[0])

    @property
    def empty(self) -> bool:
        return not np.count_nonzero(self.accepting)

    @functools.cached_property
    def sealed(self) -> bool:
        """Whether no edge leads back to the start and none leaves an accepting state: then, where
        the table is a block of a :class:`Glue`, its states are reachable from the start's
        successors alone (what :meth:`Glue.determinize` relies on to skip a search)."""
        return not (np.count_nonzero(self.trans == 0) or np.count_nonzero(self.trans[self.accepting] >= 0))

    @functools.cached_property
    def rim(self) -> Rim:
        """:class:`Rim`, found once per table (a block is joined wherever its schema recurs; a
        library constant's, once per process); a sealed table's start is known to be detached."""
        detached = not self.accepting[0] and (self.sealed if "sealed" in self.__dict__
                                              else not np.count_nonzero(self.trans == 0))
        return Rim.of(self.row_runs, self.accepting, detached)

    @functools.cached_property
    def start_targets(self) -> list[int]:
        """The distinct successors of the start, ascending (kept: a block's, checked by every
        :class:`~ltlagent.text.glue.Glue` it is copied into)."""
        first = self.trans[0]
        return sorted(set(first[first >= 0].tolist()))

    @functools.cached_property
    def successors(self) -> tuple[np.ndarray, np.ndarray]:
        """The table's edges as (source, target) arrays, one per run of equal successors in a row
        (:func:`row_edges`), computed once: a block's, for the searches of every table it is
        copied into."""
        src, dst = row_edges(self.trans)
        src.setflags(write=False)
        dst.setflags(write=False)
        return src, dst

    @functools.cached_property
    def content(self) -> ContentDFA:
        """The same DFA as a :class:`ContentDFA` (tuples), for the byte-at-a-time users."""
        live = frozenset() if self.empty else frozenset(range(self.num_states))
        return ContentDFA(tuple(map(tuple, self.trans.tolist())),
                          frozenset(np.nonzero(self.accepting)[0].tolist()), live, self.source)

    @staticmethod
    def build(trans: np.ndarray, accepting: np.ndarray, source: str = "", periods: Periods = (), *,
              reachable: bool = False, live: bool = False) -> ByteTable:
        """The trimmed table of any DFA (state 0 the start); ``periods`` in ``trans``'s numbering;
        ``reachable``: every state is known to be reachable (only the dead ones are removed);
        ``live``: every state is known to reach acceptance (only the unreachable ones are)."""
        t, a, p = _trim(trans, accepting, periods, reachable, live)
        return ByteTable(t, a, source, p)

    def row_runs(self, q: int) -> list[tuple[int, int, int]]:
        """State ``q``'s row as :func:`runs` (from :attr:`runs` where they were found): what a
        :class:`~ltlagent.text.glue.Glue` reads of a block."""
        got = self.__dict__.get("runs")
        if got is None:
            return _row_runs(self.trans[q], 0)
        ptr, lo, hi, to = got
        a, b = ptr[q], ptr[q + 1]
        return list(zip(lo[a:b], hi[a:b], to[a:b]))

    @functools.cached_property
    def runs(self) -> Runs:
        """Every row's runs (:func:`_table_runs`), found once per table: what a
        :class:`~ltlagent.text.glue.Glue` reads of a block whose rows it visits one by one, shared
        by every block and every glue the table is part of."""
        return _table_runs(self.trans)

    def table(self) -> ByteTable:
        """Itself (what :class:`~ltlagent.text.glue.Nested` makes on demand)."""
        return self


def distance_to(trans: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Fewest bytes from each state of ``trans`` to one where ``targets`` (bool) holds; -1 where none
    is reachable. Entries of ``trans`` outside ``[0, n)`` are dead."""
    n = int(trans.shape[0])
    src, dst = row_edges(np.where((trans >= 0) & (trans < n), trans, DEAD))
    return levels(*csr(dst, src, n), np.nonzero(targets)[0].astype(np.int64))


def _kept(trans: np.ndarray, accepting: np.ndarray, reachable: bool = False, live: bool = False
          ) -> np.ndarray:
    """The states reachable from 0 (all, if ``reachable``) that can reach acceptance (all, if
    ``live``)."""
    n = int(trans.shape[0])
    keep = np.ones(n, dtype=bool)
    if reachable and live:
        return keep
    src, dst = row_edges(trans)
    if not live:
        keep &= levels(*csr(dst, src, n), np.nonzero(accepting)[0].astype(np.int64)) >= 0
    if not reachable:
        keep &= levels(*csr(src, dst, n), np.zeros(1, dtype=np.int64)) >= 0
    return keep


def trim(trans: np.ndarray, accepting: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``trans``/``accepting`` restricted to the states reachable from 0 that can reach acceptance,
    renumbered in order (state 0 stays the start); edges into removed states become ``-1``."""
    t, a, _p = _trim(trans, accepting, ())
    return t, a


def _trim(trans: np.ndarray, accepting: np.ndarray, periods: Periods, reachable: bool = False,
          live: bool = False, keep: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, Periods]:
    """:func:`trim`, and the periods that survive it whole, renumbered; ``keep``: the states to
    keep, when the caller knows them (no search then)."""
    n = int(trans.shape[0])
    if keep is None:
        keep = _kept(trans, accepting, reachable, live)
    if not keep[0]:
        return np.full((1, 256), DEAD, dtype=np.int32), np.zeros(1, dtype=bool), ()
    if keep.all():
        return trans.astype(np.int32, copy=False), accepting.astype(bool, copy=False), periods
    new = np.full(n + 1, DEAD, dtype=np.int32)  # the last entry serves DEAD (-1)
    new[:n][keep] = np.arange(int(keep.sum()), dtype=np.int32)
    kept = tuple((int(new[a]), int(new[a]) + b - a, k) for a, b, k in periods if keep[a:b].all())
    return new[trans[keep]], accepting[keep].copy(), kept


def trie(texts: Iterable[bytes]) -> tuple[list[dict[int, int]], set[int]]:
    """The trie of these byte texts: each node's children by byte (node 0 the root, nodes numbered
    as they are made) and the nodes where a text ends."""
    children: list[dict[int, int]] = [{}]
    ends: set[int] = set()
    for w in texts:
        s = 0
        for b in w:
            nxt = children[s].get(b)
            if nxt is None:
                nxt = children[s][b] = len(children)
                children.append({})
            s = nxt
        ends.add(s)
    return children, ends


def literal_table(texts: Sequence[bytes], source: str = "") -> ByteTable:
    """The table of exactly these byte texts (non-empty): their trie, every text that no other
    continues ending in one shared final state; the determinised alternatives of the literals, as
    the subset construction numbers them otherwise."""
    children, ends = trie(texts)
    leaves = {s for s in ends if not children[s]}
    final = -1  # the shared final state: numbered after the others
    number = [0] * len(children)
    n = 0
    for s in range(len(children)):
        if s in leaves:
            continue
        number[s] = n
        n += 1
    if leaves:
        final, n = n, n + 1
        for s in leaves:
            number[s] = final
    src: list[int] = []
    byte: list[int] = []
    dst: list[int] = []
    for s, kids in enumerate(children):
        for b, k in kids.items():
            src.append(number[s])
            byte.append(b)
            dst.append(number[k])
    trans = np.full((n, 256), DEAD, dtype=np.int32)
    trans[src, byte] = dst
    acc = np.zeros(n, dtype=bool)
    acc[[number[s] for s in ends]] = True
    return ByteTable(trans, acc, source)


def runs(row: list[int]) -> list[tuple[int, int, int]]:
    """A row of successors as (lo, hi, target) byte ranges, dead bytes left out."""
    out: list[tuple[int, int, int]] = []
    b = 0
    for r, run in itertools.groupby(row):
        n = len(list(run))
        if r >= 0:
            out.append((b, b + n - 1, r))
        b += n
    return out


def _row_runs(row: np.ndarray, shift: int) -> list[tuple[int, int, int]]:
    """:func:`runs` of one table row, targets moved by ``shift`` (numpy finds the runs' ends)."""
    ends = np.flatnonzero(row[1:] != row[:-1])
    firsts = [0, *(ends + 1).tolist()]
    lasts = [*ends.tolist(), 255]
    targets = row[firsts].tolist()
    return [(a, b, r + shift) for a, b, r in zip(firsts, lasts, targets) if r >= 0]


def _table_runs(trans: np.ndarray) -> Runs:
    """:func:`runs` of every row of a table at once: row ``q``'s runs are entries
    ``ptr[q]:ptr[q + 1]`` of the (first byte, last byte, target) lists."""
    n = int(trans.shape[0])
    src, col, end = run_spans(trans)  # every run, dead ones too (row-major order)
    last = end - 1
    to = trans[src, col]
    ok = to >= 0
    src, col, last, to = src[ok], col[ok], last[ok], to[ok]
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    return ptr.tolist(), col.tolist(), last.tolist(), to.tolist()


def sample_text(table: ByteTable, rng: random.Random, stop: float = 0.25, drift: float = 0.5,
                max_len: int = 4000) -> bytes:
    """A random text the table accepts: a walk that stops at an accepting state with probability
    ``stop`` and otherwise takes a random byte, one that brings acceptance nearer with probability
    ``drift`` (always once ``max_len`` bytes are written); for soundness checks (every text sampled
    must be valid) and examples. The table must not be empty."""
    if table.empty:
        raise UsageError("an empty language has no text to sample")
    trans = table.trans
    dist = distance_to(trans, table.accepting)
    out = bytearray()
    s = 0
    while True:
        if table.accepting[s] and (rng.random() < stop or (dist[s] == 0 and len(out) >= max_len)):
            return bytes(out)
        row = trans[s]
        ok = np.nonzero(row >= 0)[0]
        if len(out) >= max_len or rng.random() < drift:
            closer = ok[dist[row[ok]] < dist[s]]
            if len(closer):
                ok = closer
        if not len(ok):  # accepting with no way on
            return bytes(out)
        b = int(ok[rng.randrange(len(ok))])
        out.append(b)
        s = int(row[b])
