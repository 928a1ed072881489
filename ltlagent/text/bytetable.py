"""Byte DFAs as numpy tables, and the subset construction over NFAs whose parts are whole tables.

The JSON-schema compiler (:mod:`ltlagent.text.jsonschema`) builds each string, array and object
once and embeds it in its parents. Copying an embedded DFA state by state into an NFA and
determinising it again costs Python work per state and byte (seconds for an 11k-state tool-call
automaton). Here an embedded part stays a table (a *block*): :class:`Glue` is a
:class:`~ltlagent.text.content.ByteNFA` for the glue between blocks (literals, optional spaces,
alternatives), and its subset construction treats a block's inner states, whose subsets are
singletons, as a whole: their rows are the block's rows shifted by one numpy operation. Only the
subsets where glue and blocks meet (a block's accepting states, overlapping alternatives) are built
in Python. Reachability and liveness are vectorised breadth-first searches.
"""

from __future__ import annotations

import functools
import itertools
import random
from dataclasses import dataclass, field

import numpy as np

from ltlagent.errors import UsageError
from ltlagent.text.content import DEAD, ByteNFA, ContentDFA

__all__ = ["ByteTable", "Glue", "Periods", "trim", "runs", "distance_to", "row_edges", "sample_text"]

#: ``(a, b, k)`` ranges of states that repeat with period ``k`` (see :attr:`ByteTable.periods`)
Periods = tuple[tuple[int, int, int], ...]


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
        return not bool(self.accepting.any())

    @functools.cached_property
    def content(self) -> ContentDFA:
        """The same DFA as a :class:`ContentDFA` (tuples), for the byte-at-a-time users."""
        live = frozenset() if self.empty else frozenset(range(self.num_states))
        return ContentDFA(tuple(map(tuple, self.trans.tolist())),
                          frozenset(np.nonzero(self.accepting)[0].tolist()), live, self.source)

    @staticmethod
    def build(trans: np.ndarray, accepting: np.ndarray, source: str = "", periods: Periods = (), *,
              reachable: bool = False) -> ByteTable:
        """The trimmed table of any DFA (state 0 the start); ``periods`` in ``trans``'s numbering;
        ``reachable``: every state is known to be reachable (only the dead ones are removed)."""
        t, a, p = _trim(trans, accepting, periods, reachable)
        return ByteTable(t, a, source, p)


def _csr(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    return ptr, dst[order]


def _levels(ptr: np.ndarray, adj: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """Breadth-first search from ``seeds`` over a CSR graph, one vectorised step per level: each
    node's distance from the seeds (-1 where none reaches it)."""
    dist = np.full(ptr.size - 1, -1, dtype=np.int64)
    dist[seeds] = 0
    slot = np.zeros(ptr.size - 1, dtype=np.int64)  # for removing repeats within a level
    front = np.asarray(seeds, dtype=np.int64)
    level = 0
    while front.size:
        lo, hi = ptr[front], ptr[front + 1]
        cnt = hi - lo
        total = int(cnt.sum())
        if not total:
            break
        owner_start = np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
        nxt = adj[np.arange(total, dtype=np.int64) + owner_start]
        nxt = nxt[dist[nxt] < 0]
        if not nxt.size:
            break
        here = np.arange(nxt.size, dtype=np.int64)
        slot[nxt] = here
        nxt = nxt[slot[nxt] == here]  # one of each (the last written wins)
        level += 1
        dist[nxt] = level
        front = nxt
    return dist


def row_edges(trans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The edges of a table as (source, target) arrays, one per run of equal successors in a row
    (a row has a few runs, not 256 edges)."""
    first = np.ones(trans.shape, dtype=bool)
    first[:, 1:] = trans[:, 1:] != trans[:, :-1]
    src, col = np.nonzero(first & (trans >= 0))
    return src.astype(np.int64), trans[src, col].astype(np.int64)


def distance_to(trans: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Fewest bytes from each state of ``trans`` to one where ``targets`` (bool) holds; -1 where none
    is reachable. Entries of ``trans`` outside ``[0, n)`` are dead."""
    n = int(trans.shape[0])
    src, dst = row_edges(np.where((trans >= 0) & (trans < n), trans, DEAD))
    return _levels(*_csr(dst, src, n), np.nonzero(targets)[0].astype(np.int64))


def _kept(trans: np.ndarray, accepting: np.ndarray, reachable: bool = False) -> np.ndarray:
    """The states reachable from 0 (all, if ``reachable``) that can reach acceptance."""
    n = int(trans.shape[0])
    src, dst = row_edges(trans)
    bwd = _levels(*_csr(dst, src, n), np.nonzero(accepting)[0].astype(np.int64)) >= 0
    if reachable:
        return bwd
    return bwd & (_levels(*_csr(src, dst, n), np.zeros(1, dtype=np.int64)) >= 0)


def trim(trans: np.ndarray, accepting: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``trans``/``accepting`` restricted to the states reachable from 0 that can reach acceptance,
    renumbered in order (state 0 stays the start); edges into removed states become ``-1``."""
    t, a, _p = _trim(trans, accepting, ())
    return t, a


def _trim(trans: np.ndarray, accepting: np.ndarray, periods: Periods, reachable: bool = False
          ) -> tuple[np.ndarray, np.ndarray, Periods]:
    """:func:`trim`, and the periods that survive it whole, renumbered."""
    n = int(trans.shape[0])
    keep = _kept(trans, accepting, reachable)
    if not keep[0]:
        return np.full((1, 256), DEAD, dtype=np.int32), np.zeros(1, dtype=bool), ()
    new = np.full(n + 1, DEAD, dtype=np.int32)  # the last entry serves DEAD (-1)
    new[:n][keep] = np.arange(int(keep.sum()), dtype=np.int32)
    kept = tuple((int(new[a]), int(new[a]) + b - a, k) for a, b, k in periods if keep[a:b].all())
    return new[trans[keep]], accepting[keep].copy(), kept


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


class Glue:
    """An NFA whose parts may be whole :class:`ByteTable` blocks, determinised into one table.

    Positions are the glue NFA's nodes (``0 … N-1``) and the blocks' states (block ``k``'s state
    ``q`` at ``N + offset[k] + q``); a block is entered by an epsilon edge from its start node and
    left by an epsilon edge from each accepting state to its end node."""

    def __init__(self) -> None:
        self.nfa = ByteNFA()
        self.blocks: list[tuple[ByteTable, int, int]] = []

    def new(self) -> int:
        return self.nfa.new()

    def table(self, t: ByteTable, start: int, end: int) -> None:
        """``t``'s language between ``start`` and ``end`` (nothing when it is empty)."""
        if not t.empty:
            self.blocks.append((t, start, end))

    def determinize(self, start: int, final: int, limit: int, what: str, hint: str) -> ByteTable:
        """The trimmed DFA from ``start``, accepting where ``final`` is reached; a
        :class:`UsageError` naming ``what`` beyond ``limit`` states."""
        nfa, blocks = self.nfa, self.blocks
        n_glue = len(nfa.eps)
        offsets = [0, *itertools.accumulate(b[0].num_states for b in blocks)]
        enter: dict[int, list[int]] = {}
        for k, (_t, s, _e) in enumerate(blocks):
            enter.setdefault(s, []).append(n_glue + offsets[k])
        block_of = np.repeat(np.arange(len(blocks)), [b[0].num_states for b in blocks])
        acc_rows = [b[0].accepting for b in blocks]
        rows_of = [b[0].trans for b in blocks]

        def where(p: int) -> tuple[int, int]:
            k = int(block_of[p - n_glue])
            return k, p - n_glue - offsets[k]

        def closure(key: frozenset[int]) -> frozenset[int]:
            seen = set(key)
            todo = list(key)
            while todo:
                u = todo.pop()
                if u < n_glue:
                    nxt = [*nfa.eps[u], *enter.get(u, ())]
                else:
                    k, q = where(u)
                    nxt = [blocks[k][2]] if acc_rows[k][q] else []
                for v in nxt:
                    if v not in seen:
                        seen.add(v)
                        todo.append(v)
            return frozenset(seen)

        # result ids: general subsets 0, 1, …; block k's states, once entered, at VIRT + base[k] + q
        virt = 1 << 30
        base: dict[int, int] = {}
        size = [0]
        ids: dict[frozenset[int], int] = {}
        order: list[frozenset[int]] = []
        todo: list[tuple[int, frozenset[int]]] = []  # (result id, subset) rows to compute in Python

        def grow(by: int) -> None:
            size[0] += by
            if size[0] > limit:
                raise UsageError(f"{what} needs more than {limit} automaton states", hint=hint)

        def state_of(key: frozenset[int]) -> int:
            if len(key) == 1:
                (p,) = key
                if p >= n_glue:  # a block's state alone: the block's own row
                    k, q = where(p)
                    if k not in base:
                        base[k] = sum(blocks[j][0].num_states for j in base)
                        grow(blocks[k][0].num_states)
                        for a in np.nonzero(acc_rows[k])[0].tolist():
                            p2 = n_glue + offsets[k] + a
                            todo.append((virt + base[k] + a, closure(frozenset((p2,)))))
                    return virt + base[k] + q
            nxt = closure(key)
            j = ids.get(nxt)
            if j is None:
                j = ids[nxt] = len(order)
                order.append(nxt)
                grow(1)
                todo.append((j, nxt))
            return j

        def edges(p: int) -> list[tuple[int, int, int]]:
            if p < n_glue:
                return nfa.edges[p]
            k, q = where(p)
            shift = n_glue + offsets[k]
            return [(lo, hi, r + shift) for lo, hi, r in runs(rows_of[k][q].tolist())]

        rows: dict[int, list[int]] = {}
        accepting: set[int] = set()
        state_of(frozenset((start,)))
        while todo:
            rid, cur = todo.pop()
            if final in cur:
                accepting.add(rid)
            row = [DEAD] * 256
            es = sorted(e for p in cur for e in edges(p))
            if all(a[1] < b[0] for a, b in itertools.pairwise(es)):  # disjoint: no classes needed
                for lo, hi, v in es:
                    row[lo:hi + 1] = [state_of(frozenset((v,)))] * (hi + 1 - lo)
            else:
                cuts = sorted({0, 256, *(lo for lo, _h, _v in es), *(hi + 1 for _l, hi, _v in es)})
                for lo, hi in itertools.pairwise(cuts):
                    vs = frozenset(v for a, b, v in es if a <= lo and hi - 1 <= b)
                    if vs:
                        row[lo:hi] = [state_of(vs)] * (hi - lo)
            rows[rid] = row
        n_gen = len(order)
        total = n_gen + size[0]
        trans = np.full((total, 256), DEAD, dtype=np.int32)
        acc = np.zeros(total, dtype=bool)
        for k, b0 in base.items():  # the blocks' own rows, moved to their place at once
            t = rows_of[k]
            lo = n_gen + b0
            trans[lo:lo + t.shape[0]] = np.where(t >= 0, t + lo, DEAD)
        if rows:  # the rows built here (general subsets, blocks' accepting states)
            at = np.array(list(rows), dtype=np.int64)
            got = np.array(list(rows.values()), dtype=np.int64)
            moved = np.where(got >= virt, got - virt + n_gen, got)
            trans[np.where(at >= virt, at - virt + n_gen, at)] = moved
        for rid in accepting:
            acc[rid if rid < virt else rid - virt + n_gen] = True
        periods = tuple((a + n_gen + b0, b + n_gen + b0, k) for j, b0 in base.items()
                        for a, b, k in blocks[j][0].periods)
        return ByteTable.build(trans, acc, what, periods)


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
