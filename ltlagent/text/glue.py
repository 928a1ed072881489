"""The subset construction over NFAs whose parts are whole tables, and tables kept as their parts.

The JSON-schema compiler (:mod:`ltlagent.text.jsonschema`) builds each string, array and object
once and embeds it in its parents. Copying an embedded DFA state by state into an NFA and
determinising it again costs Python work per state and byte (seconds for an 11k-state tool-call
automaton). Here an embedded part stays a table (a *block*): :class:`Glue` is a
:class:`~ltlagent.text.content.ByteNFA` for the glue between blocks (literals, optional spaces,
alternatives), and its subset construction treats a block's inner states, whose subsets are
singletons, as a whole. Only the subsets where glue and blocks meet (a block's accepting states,
overlapping alternatives) are built in Python. The result is kept as its parts (:class:`Nested`:
the rows built in Python, and each block's kept states with their numbers), read through them by
an enclosing glue, and written out flat once, at the top: a table nested ``d`` deep is copied once,
not ``d`` times. Reachability is a vectorised breadth-first search.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
from array import array
from dataclasses import dataclass, field

import numpy as np

from ltlagent.errors import UsageError
from ltlagent.graph import csr, levels
from ltlagent.text.bytetable import ByteTable, Periods, Rim, Runs
from ltlagent.text.content import DEAD, ByteNFA

__all__ = ["Glue", "Nested", "Block", "Joiner", "enters_start"]


@dataclass(frozen=True, eq=False)
class _Map:
    """Which states of a block a table keeps, and their numbers there: states ``lo … hi - 1``
    moved by ``delta`` (a block kept whole, or whole but its start), or, where ``lookup`` is set,
    each state's number (``DEAD``: left out; one more last entry, ``DEAD``, which a dead target
    ``-1`` reads). Either way the kept states keep their order and get consecutive numbers."""

    lo: int
    hi: int
    delta: int
    lookup: np.ndarray | None = field(default=None, repr=False)  # int32 [block states + 1]

    @staticmethod
    def of(lookup: np.ndarray) -> _Map | None:
        """The map of a lookup table, as a shift where the kept states are one run; None when it
        keeps nothing."""
        kept = (lookup[:-1] >= 0).nonzero()[0]
        if not kept.size:
            return None
        first, last = int(kept[0]), int(kept[-1])
        if last - first + 1 == kept.size:
            return _Map(first, last + 1, int(lookup[first]) - first)
        return _Map(first, last + 1, 0, lookup)

    @functools.cached_property
    def kept(self) -> np.ndarray:
        """The kept states, in order (their numbers are ``at``, ``at + 1``, …)."""
        if self.lookup is None:
            return np.arange(self.lo, self.hi, dtype=np.int64)
        return (self.lookup[:-1] >= 0).nonzero()[0]

    @property
    def at(self) -> int:
        """The number of the first kept state."""
        return self.lo + self.delta if self.lookup is None else int(self.lookup[self.lo])

    @property
    def size(self) -> int:
        return self.hi - self.lo if self.lookup is None else int(self.kept.size)

    def source(self, q: int) -> int:
        """The block's state numbered ``q``."""
        return q - self.delta if self.lookup is None else int(self.kept[q - self.at])

    def target(self, r: int) -> int:
        """The number of the block's (kept) state ``r``."""
        return r + self.delta if self.lookup is None else int(self.lookup[r])

    def apply(self, states: np.ndarray) -> np.ndarray:
        """The numbers of ``states`` (``DEAD`` for those left out and for ``-1``)."""
        if self.lookup is not None:
            return self.lookup[states]
        return np.where((states >= self.lo) & (states < self.hi), states + self.delta, DEAD)

    def then(self, outer: _Map, n: int) -> _Map | None:
        """This map (of a block of ``n`` states) followed by ``outer`` (of the table holding it);
        None when nothing is kept through both."""
        if self.lookup is None and outer.lookup is None:
            lo = max(self.lo, outer.lo - self.delta)
            hi = min(self.hi, outer.hi - self.delta)
            return _Map(lo, hi, self.delta + outer.delta) if lo < hi else None
        mine = self.lookup
        if mine is None:
            mine = np.full(n + 1, DEAD, dtype=np.int32)
            mine[self.lo:self.hi] = np.arange(self.lo + self.delta, self.hi + self.delta, dtype=np.int32)
        got = outer.apply(mine).astype(np.int32, copy=False)
        got[-1] = DEAD
        return _Map.of(got)


@dataclass(frozen=True, eq=False)
class Nested:
    """A determinised table kept as its parts: the rows its subset construction built (``rows``,
    as runs ``src``/``lo``/``hi``/``to``), and its blocks' kept states (``parts``, each a
    :class:`ByteTable` or another :class:`Nested` with the :class:`_Map` of its states here). A
    block's rows are read through the maps, never copied, until :meth:`table` writes every leaf
    table's rows once, at their final numbers: a table nested ``d`` deep is copied once, not ``d``
    times. What :class:`Glue` reads of a block (a row, ``sealed``, ``successors``, ``accepting``)
    is answered from the parts. Immutable once built; the same table as its flat form, state for
    state."""

    num_states: int
    accepting: np.ndarray = field(repr=False)  # bool [n]
    rows: np.ndarray = field(repr=False)  # int64: the states whose rows were built here (sorted)
    src: np.ndarray = field(repr=False)  # int64 runs of those rows: state, first and last byte, target
    lo: np.ndarray = field(repr=False)
    hi: np.ndarray = field(repr=False)
    to: np.ndarray = field(repr=False)
    parts: tuple[tuple[Block, _Map], ...] = field(repr=False)  # in the order of their numbers
    source: str = ""
    periods: Periods = ()

    def __post_init__(self) -> None:
        for a in (self.accepting, self.rows, self.src, self.lo, self.hi, self.to):
            a.setflags(write=False)

    @property
    def empty(self) -> bool:
        return not np.count_nonzero(self.accepting)

    @functools.cached_property
    def _built(self) -> np.ndarray:
        """Per state, whether its row was built here (it replaces a part's)."""
        built = np.zeros(self.num_states, dtype=bool)
        built[self.rows] = True
        return built

    @functools.cached_property
    def _spread(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows built here byte by byte: each byte's place in the flat table (``256 * state +
        byte``), its target, and where each run's bytes begin (for :func:`_write`)."""
        lens = self.hi - self.lo + 1
        cut = np.zeros(lens.size + 1, dtype=np.int64)
        lens.cumsum(out=cut[1:])
        at = (self.src * 256 + self.lo - cut[:-1]).repeat(lens) + np.arange(int(cut[-1]))
        return at, self.to.repeat(lens), cut

    @functools.cached_property
    def _starts(self) -> list[int]:
        return [m.at for _b, m in self.parts]

    @functools.cached_property
    def rim(self) -> Rim:
        """:attr:`ByteTable.rim`: from the rows built here (the start's, each accepting state's;
        a part's rows never lead back to the start)."""
        detached = not self.accepting[0] and not np.count_nonzero(self.to == 0)
        return Rim.of(self.row_runs, self.accepting, detached)

    @functools.cached_property
    def start_targets(self) -> list[int]:
        """:attr:`ByteTable.start_targets`: the targets of the first runs (the start's row is
        built here, and runs are sorted by state)."""
        return sorted(set(self.to[:int(self.src.searchsorted(1))].tolist()))

    @functools.cached_property
    def sealed(self) -> bool:
        """:attr:`ByteTable.sealed`, from the rows built here: state 0 and the accepting states are
        subsets built here, and a part's rows lead to the part's own states, never to 0."""
        return not (np.count_nonzero(self.to == 0) or np.count_nonzero(self.accepting[self.src]))

    def row_runs(self, q: int) -> list[tuple[int, int, int]]:
        """State ``q``'s row as :func:`runs` (each the longest, as from the flat table): from the
        runs built here (neighbours with one target joined), or its part's, renumbered."""
        memo = self._built_runs
        got = memo.get(q)
        if got is None:
            i = int(self.rows.searchsorted(q))
            if i == self.rows.size or int(self.rows[i]) != q:  # a part's row
                block, m = self.parts[bisect.bisect_right(self._starts, q) - 1]
                return [(a, b, m.target(r)) for a, b, r in block.row_runs(m.source(q))]
            got = memo[q] = []
            a, b = self.src.searchsorted((q, q + 1)).tolist()
            for lo, hi, to in zip(self.lo[a:b].tolist(), self.hi[a:b].tolist(), self.to[a:b].tolist()):
                if got and got[-1][1] + 1 == lo and got[-1][2] == to:
                    got[-1] = (got[-1][0], hi, to)
                else:
                    got.append((lo, hi, to))
        return list(got)

    @functools.cached_property
    def _built_runs(self) -> dict[int, list[tuple[int, int, int]]]:
        """The rows built here that :meth:`row_runs` read, each found once by bisection (a table
        of hundreds of rows built, an object's, is read at its rim and a few more rows: reading
        every row at the first one cost a few per cent of a median schema's compile)."""
        return {}

    @functools.cached_property
    def successors(self) -> tuple[np.ndarray, np.ndarray]:
        """:attr:`ByteTable.successors` (the same edges, maybe some repeated): those of the rows
        built here, and each part's own, renumbered, but from rows built here (they replace the
        part's)."""
        srcs, dsts = [self.src], [self.to]
        built = self._built
        for block, m in self.parts:
            b_src, b_dst = block.successors
            s = m.apply(b_src)
            ok = s >= 0
            ok[ok] = ~built[s[ok]]
            srcs.append(s[ok])
            dsts.append(m.apply(b_dst[ok]))
        src = np.concatenate(srcs).astype(np.int64, copy=False)
        dst = np.concatenate(dsts).astype(np.int64, copy=False)
        src.setflags(write=False)
        dst.setflags(write=False)
        return src, dst

    @functools.cached_property
    def flat(self) -> ByteTable:
        """The table as one :class:`ByteTable`, each leaf's rows copied once (:func:`_write`); a
        part met more than once below (an array's item, a definition used twice) is made flat
        first and then copied whole each time, its rows built here written once, not per copy."""
        trans = np.empty((self.num_states, 256), dtype=np.int32)
        self.write(trans)
        return ByteTable(trans, self.accepting, self.source, self.periods)

    def write(self, out: np.ndarray) -> None:
        """Write the flat table's rows (``-1``: dead) into ``out`` (``int32 [num_states, 256]``),
        without keeping them: a reader with its own array (the decoder's,
        :meth:`~ltlagent.decode.turnlang.TurnLanguage.of_table`) has the rows written once, not
        written here and copied there. Made flat already: copied."""
        if "flat" in self.__dict__:
            np.copyto(out, self.flat.trans)
            return
        _write(self, out, _Map(0, self.num_states, 0), _shared(self))

    def table(self) -> ByteTable:
        """:attr:`flat`."""
        return self.flat

    @property
    def runs(self) -> Runs:
        """:attr:`ByteTable.runs` of :attr:`flat` (which it makes)."""
        return self.flat.runs


#: A part of a :class:`Glue`: a table, flat or kept as its parts
Block = ByteTable | Nested


Run = tuple[int, int, int]  # a row's run: first byte, last byte, target


def enters_start(t: Block) -> bool:
    """Whether ``t`` accepts at its start or some edge leads back to it (then its start state
    cannot be left out of a copy): :attr:`Rim.detached`, found once per block."""
    return not t.rim.detached


class Joiner:
    """A :class:`Nested` written by hand (:mod:`~ltlagent.text.objecttable`,
    :mod:`~ltlagent.text.arraytable`): the rows of its own states ``0 … own - 1`` and copies of
    blocks, each but its start (whose row is the rows that enter the copy), one after another
    from ``own`` on. The builder of one table: discarded once :meth:`nested` made it."""

    def __init__(self, own: int, rows: dict[int, list[Run]] | None = None) -> None:
        self.total = own
        self.rows: dict[int, list[Run]] = {} if rows is None else rows  # own states' (and copies' accepting)
        self.parts: list[tuple[Block, _Map]] = []
        self.periods: list[tuple[int, int, int]] = []

    def copy(self, t: Block, lane: list[Run], stops: tuple[int, ...]) -> list[Run] | None:
        """Place a copy of ``t`` but its start (state ``q`` of ``t`` at ``q + total - 1``): its
        accepting rows go on by ``lane`` too. The start's runs, renumbered (what enters the copy),
        or None where an accepting row already goes on by one of ``stops`` (``lane``'s bytes)."""
        d = self.total - 1
        rows = self.rows
        rim = t.rim
        for a, runs in rim.accepting if lane else ():  # (no lane: its accepting rows are its own)
            own = [(lo, hi, r + d) for lo, hi, r in runs]
            if any(lo <= b <= hi for lo, hi, _r in own for b in stops):
                return None
            rows[a + d] = sorted([*own, *lane])
        self.parts.append((t, _Map(1, t.num_states, d)))
        self.periods.extend((a + d, b + d, p) for a, b, p in t.periods if a >= 1)
        self.total += t.num_states - 1
        return [(lo, hi, r + d) for lo, hi, r in rim.start]

    def nested(self, accepting: list[int], source: str) -> Nested:
        """The table: the rows written, the copies, ``accepting`` the states that accept (own
        states, or a copy's where nothing follows it)."""
        acc = np.zeros(self.total, dtype=bool)
        acc[accepting] = True
        rows = self.rows
        built = sorted(rows)
        src, lo, hi, to = [], [], [], []
        for q in built:
            for a, b, r in rows[q]:
                src.append(q)
                lo.append(a)
                hi.append(b)
                to.append(r)
        return Nested(self.total, acc, np.array(built, dtype=np.int64), np.array(src, dtype=np.int64),
                      np.array(lo, dtype=np.int64), np.array(hi, dtype=np.int64),
                      np.array(to, dtype=np.int64), tuple(self.parts), source, tuple(self.periods))


def _shifted(rows: np.ndarray, delta: int, out: np.ndarray) -> None:
    """``out = where(rows >= 0, rows + delta, DEAD)`` for ``int32`` rows, with no mask: ``rows >>
    31`` is all ones where a row is dead (``-1``) and zero elsewhere, so or-ing it into the sum
    leaves ``-1`` exactly there (a boolean-mask assignment costs five times as much on a table of
    tens of MB). Past a few rows, 128 rows at a time through one small buffer: a temporary the
    size of the rows (a ``maxLength`` string's table: hundreds of kB) was fresh memory from the
    system at each compile, page faults and all (an object with a ``maxLength: 50`` string: 582 →
    343 µs)."""
    if not delta:
        np.copyto(out, rows)
        return
    if rows.shape[0] <= _FEW_ROWS:
        np.add(rows, delta, out=out)
        np.bitwise_or(out, np.right_shift(rows, 31), out=out)
        return
    step = 2 * _FEW_ROWS
    sign = np.empty((min(step, rows.shape[0]), 256), dtype=np.int32)
    for a in range(0, rows.shape[0], step):
        r, o = rows[a:a + step], out[a:a + step]
        s = sign[:r.shape[0]]
        np.right_shift(r, 31, out=s)
        np.add(r, delta, out=o)
        np.bitwise_or(o, s, out=o)


#: Rows that :func:`_shifted` moves at once (64 kB); more go through a buffer of twice as many
_FEW_ROWS = 64


def _shared(top: Nested) -> frozenset[int]:
    """The ids of the :class:`Nested` tables that are parts more than once below ``top``."""
    count: dict[int, int] = {}
    todo = [top]
    while todo:
        for b, _m in todo.pop().parts:
            if isinstance(b, Nested):
                count[id(b)] = count.get(id(b), 0) + 1
                if count[id(b)] == 1:
                    todo.append(b)
    return frozenset(k for k, c in count.items() if c > 1)


def _write(block: Block, out: np.ndarray, m: _Map, shared: frozenset[int]) -> None:
    """Write the rows of ``block``'s states that ``m`` keeps into ``out``, at their numbers there:
    a leaf's by one shift or one lookup; a :class:`Nested` one's parts first, then the rows built
    for it, which replace theirs. One made flat already, or in ``shared``, is copied flat."""
    if isinstance(block, Nested) and ("flat" in block.__dict__ or id(block) in shared):
        block = block.flat
    if isinstance(block, ByteTable):
        t = block.trans
        if m.lookup is None:
            _shifted(t[m.lo:m.hi], m.delta, out[m.lo + m.delta:m.hi + m.delta])
        else:
            a = m.at
            np.take(m.lookup, t[m.kept], out=out[a:a + m.size], mode="wrap")  # -1 wraps to the end
        return
    for part, pm in block.parts:
        inner = pm.then(m, part.num_states)
        if inner is not None:
            _write(part, out, inner, shared)
    at, to, cut = block._spread
    flat = out.reshape(-1)
    if m.lookup is None and m.delta == 0 and m.lo == 0 and m.hi == block.num_states:  # the top
        out[block.rows] = DEAD
        flat[at] = to
        return
    if m.lookup is None:  # the rows in [lo, hi) (rows and runs are sorted by state), moved
        i0, i1 = block.rows.searchsorted((m.lo, m.hi)).tolist()
        out[block.rows[i0:i1] + m.delta] = DEAD
        j0, j1 = block.src.searchsorted((m.lo, m.hi)).tolist()
        a, b = int(cut[j0]), int(cut[j1])
        if m.delta:  # (a target outside [lo, hi) is in a row that a table above rewrites)
            flat[at[a:b] + 256 * m.delta] = to[a:b] + m.delta
        else:
            flat[at[a:b]] = to[a:b]
        return
    rows = m.lookup[block.rows]
    out[rows[rows >= 0]] = DEAD
    src = m.lookup[at >> 8]
    ok = src >= 0
    flat[src[ok] * 256 + (at[ok] & 255)] = m.lookup[to[ok]]


#: A flat block of at most this many states has its rows' runs found all at once on the fourth row
#: read by one glue (about the cost of a few rows read one by one; kept for every later glue)
_SMALL = 64


def _classes(es: list[tuple[int, int, int]]) -> list[tuple[int, int, frozenset[int]]]:
    """Overlapping byte ranges ``(lo, hi, target)`` (sorted) cut into the classes of bytes with
    the same targets: ``(lo, hi, targets)``, bytes with no target left out, cut wherever a range
    begins or ends. Where the ranges wider than a byte do not overlap one another (a string's
    row beside the first bytes of keys: the common case) they are cut at the single bytes
    directly (:func:`_cut_at_bytes`); else one sweep over the ranges' ends (a range is added
    where it begins and dropped where it ends)."""
    wide = [e for e in es if e[0] != e[1]]
    if all(a[1] < b[0] for a, b in itertools.pairwise(wide)):
        at: dict[int, list[int]] = {}
        for b, _b, v in es:
            if b == _b:
                at.setdefault(b, []).append(v)
        return _cut_at_bytes(wide, at)
    bounds = sorted({*(lo for lo, _h, _v in es), *(hi + 1 for _l, hi, _v in es)})
    active: dict[int, int] = {}  # target -> how many ranges give it here
    ends: list[tuple[int, int]] = []  # a heap of (first byte after the range, target)
    out: list[tuple[int, int, frozenset[int]]] = []
    i = 0
    for lo, nxt in itertools.pairwise(bounds):
        while ends and ends[0][0] <= lo:
            v = heapq.heappop(ends)[1]
            if active[v] == 1:
                del active[v]
            else:
                active[v] -= 1
        while i < len(es) and es[i][0] == lo:
            v = es[i][2]
            active[v] = active.get(v, 0) + 1
            heapq.heappush(ends, (es[i][1] + 1, v))
            i += 1
        if active:
            out.append((lo, nxt - 1, frozenset(active)))
    return out


def _cut_at_bytes(wide: list[tuple[int, int, int]], at: dict[int, list[int]]
                  ) -> list[tuple[int, int, frozenset[int]]]:
    """:func:`_classes` where the ranges wider than a byte (``wide``, sorted) are disjoint: each
    is cut around the single bytes (``at``: each one's targets) that fall inside it, a byte's
    class holding its range's target and its own; single bytes outside every range are classes
    alone."""
    points = sorted(at)
    out: list[tuple[int, int, frozenset[int]]] = []
    i = 0
    for lo, hi, v in wide:
        while i < len(points) and points[i] < lo:  # before this range: alone
            b = points[i]
            out.append((b, b, frozenset(at[b])))
            i += 1
        cur = lo
        mine = frozenset((v,))
        while i < len(points) and points[i] <= hi:
            b = points[i]
            if cur < b:
                out.append((cur, b - 1, mine))
            out.append((b, b, frozenset((*at[b], v))))
            cur = b + 1
            i += 1
        if cur <= hi:
            out.append((cur, hi, mine))
    for b in points[i:]:
        out.append((b, b, frozenset(at[b])))
    return out


class Glue:
    """An NFA whose parts may be whole :class:`ByteTable` blocks, determinised into one table.

    Positions are the glue NFA's nodes (``0 … N-1``) and the blocks' states (block ``k``'s state
    ``q`` at ``N + offset[k] + q``); a block is entered by an epsilon edge from its start node and
    left by an epsilon edge from each accepting state to its end node."""

    def __init__(self) -> None:
        self.nfa = ByteNFA()
        self.blocks: list[tuple[Block, int, int]] = []

    def new(self) -> int:
        return self.nfa.new()

    def table(self, t: Block, start: int, end: int) -> None:
        """``t``'s language between ``start`` and ``end`` (nothing when it is empty)."""
        if not t.empty:
            self.blocks.append((t, start, end))

    def determinize(self, start: int, final: int, limit: int, what: str, hint: str) -> ByteTable:
        """The trimmed DFA from ``start``, accepting where ``final`` is reached; a
        :class:`UsageError` naming ``what`` beyond ``limit`` states."""
        return self.nested(start, final, limit, what, hint).table()

    def nested(self, start: int, final: int, limit: int, what: str, hint: str) -> Block:
        """:meth:`determinize`, the blocks' rows not copied: a :class:`Nested` table (what a
        block of another :class:`Glue` can be), or a flat one where the language is empty."""
        nfa, blocks = self.nfa, self.blocks
        nfa_eps = nfa.eps
        n_glue = len(nfa_eps)
        offsets = [0, *itertools.accumulate(b[0].num_states for b in blocks)]
        # liveness on the NFA side, so that the DFA needs no backward search: a glue node is live
        # when ``final`` is reachable from it; a block's state when its block's end node is (its
        # table is trimmed: each of its states reaches an accepting one, which leads to the end).
        # Dead positions are left out of every subset, so every subset built is live.
        live = self._live(final)
        if not live[start]:
            return ByteTable.build(np.full((1, 256), DEAD, dtype=np.int32), np.zeros(1, dtype=bool),
                                   what, reachable=True, live=True)
        enter: dict[int, list[int]] = {}
        for k, (_t, s, e) in enumerate(blocks):
            if live[e]:
                enter.setdefault(s, []).append(n_glue + offsets[k])
        acc_of: list[frozenset[int] | None] = [None] * len(blocks)

        def where(p: int) -> tuple[int, int]:
            k = bisect.bisect_right(offsets, p - n_glue) - 1
            return k, p - n_glue - offsets[k]

        def accepting_in(k: int) -> frozenset[int]:
            got = acc_of[k]
            if got is None:
                got = acc_of[k] = frozenset(blocks[k][0].accepting.nonzero()[0].tolist())
            return got

        closures: dict[int, frozenset[int]] = {}  # per position, its epsilon closure
        alone: set[int] = set()  # the positions known to be their own closure

        def closure1(p: int) -> frozenset[int]:
            got = closures.get(p)
            if got is not None:
                return got
            if p < n_glue and not nfa.eps[p] and p not in enter:  # most glue nodes: itself
                got = closures[p] = frozenset((p,))
                alone.add(p)
                return got
            if p >= n_glue:  # a block's state: itself, and its end's closure where it accepts
                k, q = where(p)
                if q in accepting_in(k):
                    got = closures[p] = closure1(blocks[k][2]) | {p}
                else:
                    got = closures[p] = frozenset((p,))
                    alone.add(p)
                return got
            # the closures of the epsilon successors first (post-order, each kept), then the union:
            # a chain of optional properties costs a union per node, not a walk per node
            on_path = {p}
            stack = [(p, iter(succ(p)))]
            while stack:
                u, it = stack[-1]
                for v in it:
                    if v in closures:
                        continue
                    if v in on_path:  # an epsilon cycle: walk from p instead
                        return walk(p)
                    on_path.add(v)
                    stack.append((v, iter(succ(v))))
                    break
                else:
                    stack.pop()
                    on_path.discard(u)
                    c = {u}
                    for v in succ(u):
                        c |= closures[v]
                    closures[u] = frozenset(c)
            return closures[p]

        def succ(u: int) -> list[int]:
            """The epsilon successors of a position (into blocks from their start nodes, out of a
            block from its accepting states)."""
            if u < n_glue:
                into = enter.get(u)
                out = [v for v in nfa.eps[u] if live[v]]
                return out if into is None else out + into
            k, q = where(u)
            return [blocks[k][2]] if q in accepting_in(k) else []

        def walk(p: int) -> frozenset[int]:
            """``p``'s closure by a plain search (where epsilon edges make a cycle)."""
            seen = {p}
            todo = [p]
            while todo:
                for v in succ(todo.pop()):
                    if v not in seen:
                        known = closures.get(v)
                        if known is not None:
                            seen |= known
                        else:
                            seen.add(v)
                            todo.append(v)
            got = closures[p] = frozenset(seen)
            return got

        def closure(key: frozenset[int]) -> frozenset[int]:
            if len(key) == 1:
                return closure1(next(iter(key)))
            if key <= alone:  # a trie of literals: the subset itself (its hash already known)
                return key
            out: set[int] = set()
            for p in key:
                out |= closure1(p)
            return frozenset(out)

        # result ids: general subsets 0, 1, …; block k's states, once entered, at VIRT + base[k] + q;
        # a group's (the same state of several blocks of one table, followed in lockstep) at
        # VIRT + group_base[group] + q; each copy of a table, in the order of its offset, in copies
        virt = 1 << 30
        base: dict[int, int] = {}
        group_base: dict[frozenset[int], int] = {}
        copies: list[tuple[Block, int]] = []
        size = [0]
        ids: dict[frozenset[int], int] = {}  # closed subset → id
        raw: dict[frozenset[int], int] = {}  # subset before closing → id
        single: dict[int, int] = {}  # one position → id
        n_gen = [0]
        todo: list[tuple[int, frozenset[int]]] = []  # (result id, subset) rows to compute in Python

        def grow(by: int) -> None:
            size[0] += by
            if size[0] > limit:
                raise UsageError(f"{what} needs more than {limit} automaton states", hint=hint)

        def closed(nxt: frozenset[int]) -> int:
            j = ids.get(nxt)
            if j is None:
                j = ids[nxt] = n_gen[0]
                n_gen[0] += 1
                grow(1)
                todo.append((j, nxt))
            return j

        def state_of1(p: int) -> int:
            j = single.get(p)
            if j is not None:
                return j
            if p >= n_glue:  # a block's state alone: the block's own row
                k, q = where(p)
                if k not in base:
                    base[k] = copy_of((k,))
                j = virt + base[k] + q
            else:
                j = closed(closure1(p))
            single[p] = j
            return j

        def copy_of(ks: tuple[int, ...] | frozenset[int]) -> int:
            """A copy of the table of blocks ``ks`` (one block, or a group of blocks of one table):
            its offset among the copies; its accepting states' rows, which leave by every block's
            end, are scheduled to be built here."""
            t = blocks[next(iter(ks))][0]
            b0 = size[0] - n_gen[0]
            copies.append((t, b0))
            grow(t.num_states)
            for a in sorted(accepting_in(next(iter(ks)))):
                todo.append((virt + b0 + a, closure(frozenset(n_glue + offsets[k] + a for k in ks))))
            return b0

        def state_of(key: frozenset[int]) -> int:
            if len(key) == 1:
                return state_of1(next(iter(key)))
            j = raw.get(key)
            if j is None:
                g = group_of(key)
                j = raw[key] = closed(closure(key)) if g is None else g
            return j

        def group_of(key: frozenset[int]) -> int | None:
            """The state of a group, where ``key`` is one state ``q`` of several blocks of the same
            table (the same property of several ``anyOf`` branches): from there the blocks move in
            lockstep until they accept, so the subset's rows are the table's rows from ``q``, and
            the table is copied once for the group (its accepting states' rows, which leave the
            blocks, are built here from all the blocks' ends), not built subset by subset."""
            if min(key) < n_glue:
                return None
            group: list[int] = []
            q0 = -1
            t0: Block | None = None
            for p in key:
                k, q = where(p)
                if t0 is None:
                    q0, t0 = q, blocks[k][0]
                elif q != q0 or blocks[k][0] is not t0:
                    return None
                group.append(k)
            g = frozenset(group)
            b0 = group_base.get(g)
            if b0 is None:
                b0 = group_base[g] = copy_of(g)
            return virt + b0 + q0

        out_edges: dict[int, list[tuple[int, int, int]]] = {}  # per position, its live byte edges
        asked: dict[int, int] = {}  # per table (its id), how many of its rows were read one by one
        block_runs: dict[int, Runs] = {}  # per table (its id), every row's runs (:attr:`ByteTable.runs`)

        def edges(p: int) -> list[tuple[int, int, int]]:
            got = out_edges.get(p)
            if got is None:
                if p < n_glue:
                    es = nfa.edges[p]
                    if len(es) == 1:  # most glue nodes: a literal's byte (the list is only read)
                        got = es if live[es[0][2]] else []
                    else:
                        got = sorted([e for e in es if live[e[2]]])
                else:
                    k, q = where(p)
                    shift = n_glue + offsets[k]
                    t = blocks[k][0]
                    whole = block_runs.get(id(t))
                    if whole is None:  # a row at a time, until a share of the table is asked for
                        # (the same table may be several blocks: an array's items, a key's lanes)
                        n_asked = asked[id(t)] = asked.get(id(t), 0) + 1
                        if ((n_asked >= 64 and n_asked * 16 >= t.num_states) or "runs" in t.__dict__
                                or (n_asked >= 4 and t.num_states <= _SMALL and isinstance(t, ByteTable))):
                            whole = block_runs[id(t)] = t.runs
                    if whole is None:
                        got = [(lo, hi, r + shift) for lo, hi, r in t.row_runs(q)]
                    else:
                        ptr, lo_l, hi_l, to_l = whole
                        a, b = ptr[q], ptr[q + 1]
                        got = [(lo, hi, r + shift) for lo, hi, r in zip(lo_l[a:b], hi_l[a:b], to_l[a:b])]
                out_edges[p] = got
            return got

        def disjoint(es: list[tuple[int, int, int]]) -> bool:
            return all(a[1] < b[0] for a, b in itertools.pairwise(es))

        # the rows computed here, as runs: (result id, first byte, last byte, target id)
        # (typed arrays: appended as fast as lists, and read by numpy as they are)
        r_id, r_lo, r_hi, r_to = array("q"), array("q"), array("q"), array("q")
        done, accepting = array("q"), array("q")
        def split_edges(cur: frozenset[int]) -> tuple[dict[int, list[int]], list[tuple[int, int, int]]]:
            """A subset's edges in one pass: the targets of each single byte (keys' and
            constants' literals), and the ranges wider than a byte (strings' and numbers' rows)."""
            by_byte: dict[int, list[int]] = {}
            wide: list[tuple[int, int, int]] = []
            for p in cur:  # (the hottest loop of a trie of many keys: edges' memo read inline)
                es = out_edges.get(p)
                for e in edges(p) if es is None else es:
                    if e[0] == e[1]:
                        got = by_byte.get(e[0])
                        if got is None:
                            by_byte[e[0]] = [e[2]]
                        else:
                            got.append(e[2])
                    else:
                        wide.append(e)
            return by_byte, wide

        try:
            closed(closure1(start))
            while todo:
                rid, cur = todo.pop()
                # a run of literal bytes to states not built yet: each row is one byte to the next, in
                # the order the stack would give (the next one would be pushed and popped at once)
                # (a glue node, its own closure as ``cur`` is closed, whose one live edge is one byte
                # to another node that is its own closure: a literal's inner byte; checked inline)
                while len(cur) == 1:
                    (p,) = cur
                    if p >= n_glue:
                        break
                    es = out_edges.get(p)
                    if es is None:
                        es = edges(p)
                    if len(es) != 1:
                        break
                    b, b_hi, v = es[0]
                    if b != b_hi or v >= n_glue or nfa_eps[v] or v in enter or v in single:
                        break
                    key = frozenset((v,))
                    if key in ids:
                        break
                    j = ids[key] = single[v] = n_gen[0]
                    closures[v] = key
                    alone.add(v)
                    n_gen[0] = j + 1
                    grow(1)
                    done.append(rid)
                    if p == final:
                        accepting.append(rid)
                    r_id.append(rid)
                    r_lo.append(b)
                    r_hi.append(b)
                    r_to.append(j)
                    rid, cur = j, key
                done.append(rid)
                if final in cur:
                    accepting.append(rid)
                if len(cur) == 1:  # one position (a literal's byte, a block's accepting state)
                    es = edges(next(iter(cur)))
                else:
                    by_byte, wide = split_edges(cur)
                    if not wide:  # the classes are the bytes themselves (keys' tries)
                        for b in sorted(by_byte):
                            to = by_byte[b]
                            r_id.append(rid)
                            r_lo.append(b)
                            r_hi.append(b)
                            if len(to) == 1:
                                known = single.get(to[0])
                                r_to.append(state_of1(to[0]) if known is None else known)
                            else:
                                r_to.append(state_of(frozenset(to)))
                        continue
                    wide.sort()
                    if disjoint(wide):  # cut at the single bytes (a string beside keys)
                        for lo, hi, vs in _cut_at_bytes(wide, by_byte):
                            r_id.append(rid)
                            r_lo.append(lo)
                            r_hi.append(hi)
                            r_to.append(state_of(vs))
                        continue
                    es = sorted([*wide, *((b, b, v) for b, vs in by_byte.items() for v in vs)])
                if len(es) < 2 or disjoint(es):  # no classes needed
                    for lo, hi, v in es:
                        r_id.append(rid)
                        r_lo.append(lo)
                        r_hi.append(hi)
                        known = single.get(v)
                        r_to.append(state_of1(v) if known is None else known)
                else:
                    for lo, hi, vs in _classes(es):
                        r_id.append(rid)
                        r_lo.append(lo)
                        r_hi.append(hi)
                        r_to.append(state_of(vs))
            gen = n_gen[0]
            total = size[0]
            # the rows' targets, the rows built, their sources and the accepting ones, placed by
            # one numpy pass (a copy's state virt + b0 + q is gen + b0 + q): a glue of a few dozen
            # subsets is mostly numpy calls here, each microseconds whatever its size
            n_r, n_done = len(r_id), len(done)
            numbered = np.frombuffer(r_to + done + r_id + accepting, dtype=np.int64)
            placed = numbered >> 30  # 1 for a copy's state (virt = 2 ** 30, and ids stay below 2 ** 31)
            placed *= gen - virt
            placed += numbered
            targets, rows = placed[:n_r], placed[n_r:n_r + n_done]
            src, fin = placed[n_r + n_done:2 * n_r + n_done], placed[2 * n_r + n_done:]
            # every subset holds a live position; a block's rows come whole, and its start's row is
            # left out where it is known unreachable (:meth:`_reached`); else a forward search over the
            # rows built here and the blocks' own edges (each block's, computed once per table)
            keep = self._reached(copies, gen, total, targets)
            parts: list[tuple[Block, _Map]] = []
            if keep is not None:
                # every state kept but each copy's start: the i-th copy's state q (at gen + b0 + q)
                # is numbered gen + b0 + q - (i + 1), its kept states one run from q = 1
                new = keep.cumsum()
                new -= 1
                for i, (t, b0) in enumerate(copies):
                    if t.num_states > 1:
                        parts.append((t, _Map(1, t.num_states, gen + b0 - i - 1)))
                periods = tuple((gen + b0 + a - i - 1, gen + b0 + b - i - 1, k)
                                for i, (t, b0) in enumerate(copies) for a, b, k in t.periods
                                if not a <= 0 < b)
            else:
                keep = self._searched(copies, gen, total, rows, src, targets)
                new = keep.cumsum()  # the new number of each kept state
                new -= 1
                # a block's kept states, by one shift where they are one run (whole, or whole but
                # its start), else by a lookup (states left out inside); its rows are not copied
                # here (:class:`Nested`)
                for t, b0 in copies:
                    lo, hi = gen + b0, gen + b0 + t.num_states
                    local = keep[lo:hi].nonzero()[0]
                    if not local.size:
                        continue
                    first, last = int(local[0]), int(local[-1])
                    if last - first + 1 == local.size:
                        parts.append((t, _Map(first, last + 1, int(new[lo + first]) - first)))
                        continue
                    lookup = np.full(hi - lo + 1, DEAD, dtype=np.int32)  # the last entry serves -1
                    lookup[local] = new[lo + local]
                    parts.append((t, _Map(first, last + 1, 0, lookup)))
                periods = tuple((int(new[a + gen + b0]), int(new[a + gen + b0]) + b - a, k)
                                for t, b0 in copies for a, b, k in t.periods
                                if keep[a + gen + b0:b + gen + b0].all())
            kept_rows = new[rows[keep[rows]]]
            kept_rows.sort()
            acc = np.zeros(int(new[-1]) + 1, dtype=bool)
            acc[new[fin[keep[fin]]]] = True
            # the runs of the rows kept (most often all of them), row by row, each row's runs in
            # byte order: ``pick`` the runs in that order
            ok = keep[src]
            if np.count_nonzero(ok) == n_r:
                r_src = new[src]
                pick = r_src.argsort(kind="stable")
                r_src = r_src[pick]
            else:
                sel = ok.nonzero()[0]
                r_src = new[src[sel]]
                order = r_src.argsort(kind="stable")
                pick = sel[order]
                r_src = r_src[order]
            return Nested(acc.size, acc, kept_rows, r_src, np.frombuffer(r_lo, dtype=np.int64)[pick],
                          np.frombuffer(r_hi, dtype=np.int64)[pick], new[targets[pick]],
                          tuple(parts), what, periods)
        finally:
            # the nested functions above refer to one another (closure1 to itself): a reference
            # cycle that would keep every container they close over (subsets, closures, edges:
            # hundreds of thousands of objects) alive until the cyclic collector ran
            for memo in (closures, ids, raw, single, out_edges, block_runs, asked, alone, group_base):
                memo.clear()
            todo.clear()
            # and the cycle itself, which holds the glue's NFA (its lists, one per node) as well
            where = accepting_in = closure1 = succ = walk = closure = grow = closed = None  # type: ignore[assignment]
            state_of1 = state_of = group_of = copy_of = edges = disjoint = split_edges = None  # type: ignore[assignment]

    @staticmethod
    def _searched(copies: list[tuple[Block, int]], gen: int, total: int, rows: np.ndarray,
                  src: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """The states reachable from the start in a determinised table, by a forward search over
        its edges without building it: the rows computed in Python (``rows``; their edges
        ``src`` → ``targets``) and, for every other state of a table copied whole at ``gen + b0``
        (``copies``: each table and its offset), the table's own edges
        (:attr:`ByteTable.successors`, once per table)."""
        built = np.zeros(total, dtype=bool)
        built[rows] = True
        srcs, dsts = [src], [targets]
        for t, b0 in copies:
            lo = gen + b0
            b_src, b_dst = t.successors
            own = ~built[b_src + lo]  # a row built here replaces the block's
            srcs.append(b_src[own] + lo)
            dsts.append(b_dst[own] + lo)
        ptr, adj = csr(np.concatenate(srcs), np.concatenate(dsts), total)
        return levels(ptr, adj, np.zeros(1, dtype=np.int64)) >= 0

    @staticmethod
    def _reached(copies: list[tuple[Block, int]], gen: int, total: int, targets: np.ndarray
                 ) -> np.ndarray | None:
        """The reachable states of a determinised table whose subsets (the first ``gen``) are all
        reachable, and whose blocks' rows were copied whole at ``gen + b0`` (``copies``: each
        table and its offset, a block's or a group's), ``targets`` being
        the states the rows built in Python lead to: a block's states but its start, when the block
        is :attr:`ByteTable.sealed` and each successor of its start is among ``targets`` (every
        other state lies on a path from one of them that neither returns to the start nor passes
        an accepting state, whose row was built in Python). None when some block is not so."""
        hit = np.zeros(total, dtype=bool)
        hit[targets] = True
        starts: list[int] = []
        after: list[int] = []  # the successors of the copies' starts, placed
        for t, b0 in copies:
            if not t.sealed:
                return None
            lo = gen + b0
            starts.append(lo)
            after.extend([lo + s for s in t.start_targets])
        if np.count_nonzero(hit[starts]) or np.count_nonzero(hit[after]) < len(after):
            return None
        keep = np.ones(total, dtype=bool)
        keep[starts] = False
        return keep

    def _live(self, final: int) -> list[bool]:
        """Per glue node, whether ``final`` is reachable from it (blocks count as edges from their
        start to their end: a block is never empty here)."""
        nfa = self.nfa
        back: list[list[int]] = [[] for _ in nfa.eps]
        for u, (eps, es) in enumerate(zip(nfa.eps, nfa.edges)):
            for v in eps:
                back[v].append(u)
            for _lo, _hi, v in es:
                back[v].append(u)
        for _t, s, e in self.blocks:
            back[e].append(s)
        live = [False] * len(back)
        live[final] = True
        todo = [final]
        while todo:
            for u in back[todo.pop()]:
                if not live[u]:
                    live[u] = True
                    todo.append(u)
        return live
