"""Content constraints as byte-level DFAs, for the decoding monitor (docs/design.md §2.2, §5).

A state's content is the text between its prompt string and the next one, leading and trailing
whitespace ignored: ``(:choices "Search" "Lookup")`` means ``content.strip()`` is one of the
strings, ``(:regex "[0-9]+")`` means it fullmatches. Both become a DFA over UTF-8 bytes of the raw
content (whitespace handling built in), so the monitor can step it one byte at a time and tell
early when a prefix can no longer be completed.

Regexes are read with Python's own parser (``re._parser``) and compiled by Thompson's construction
and the subset construction. Supported: literals, ``.``, classes, ``|``, groups, greedy and lazy
repetition, ``^``/``$``/``\\A``/``\\Z`` at the very start or end. Not supported (a clear error, raised
already when the spec is read: :mod:`ltlagent.spec.syntax` builds the DFA once to check): backreferences,
conditional groups, lookaround, ``\\b``/``\\B``, anchors elsewhere than at the ends, possessive
repetition and atomic groups, flags other than ``(?a)``/``(?s)``/``(?u)``/``(?x)``, bounded repetition
above :data:`MAX_REGEX_REPEAT`, and DFAs of more than :data:`MAX_DFA_STATES` states. ``\\d``,
``\\w``, ``\\s`` match exactly what Python matches among ASCII characters and no non-ASCII
character (stricter than Python, never looser), so every generated content passes ``re.fullmatch``.
"""

from __future__ import annotations

import functools
import itertools
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from ltlagent.errors import UsageError
from ltlagent.graph import cells, coreachable, coreachable_table, run_starts

__all__ = ["ContentDFA", "WHITESPACE", "choices_dfa", "regex_dfa", "pattern_dfa", "content_dfa",
           "DEAD", "MAX_DFA_STATES", "MAX_REGEX_REPEAT", "ByteNFA", "minimize", "minimize_table",
           "byte_classes", "predecessors", "meets", "product_table", "live_table_of",
           "intersect", "as_dfa", "stripped"]

DEAD = -1
#: Bytes stripped from content (a subset of what ``str.strip()`` strips).
WHITESPACE = frozenset(b" \t\n\r\x0b\x0c")
#: Largest content DFA (states) built; each state costs a 256-entry row here and masks later.
MAX_DFA_STATES = 4000
#: Largest finite bound of a regex repetition (``{m,n}``): each iteration is written out.
MAX_REGEX_REPEAT = 200
#: The same for JSON Schema patterns (ECMA-262), as long as the longest string compiled.
MAX_PATTERN_REPEAT = 1000
_HINT = ("the monitor compiles a :regex to a byte automaton: use literals, classes, groups, | and "
         f"repetition (bounds up to {MAX_REGEX_REPEAT}); ^ and $ only at the very start or end")
_MAXCP = 0x10FFFF
#: Characters ``str.strip()`` removes that are not in WHITESPACE: a regex never matches them, so a
#: content can neither start nor end with one (``[c for c in range(0x110000) if chr(c).isspace()]``).
ODD_SPACES = ((0x1C, 0x1F), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
              (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000))
#: ECMA-262's ``\s``: WhiteSpace (TAB, VT, FF, SP, NBSP, ZWNBSP and the Zs category) and
#: LineTerminator (LF, CR, LS, PS), §22.2.2.9 CharacterClassEscape and §12.2, §12.3.
ECMA_SPACE = ((0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
              (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
              (0xFEFF, 0xFEFF))
#: ECMA-262's line terminators: what ``.`` does not match without the ``s`` flag.
ECMA_LINE_TERMINATORS = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
#: Python regex syntax that means something else, or nothing, in ECMA-262 (with the ``u`` flag, as
#: JSON Schema validators such as ajv compile patterns): refused in the ECMA dialect.
_NOT_ECMA = re.compile(r"""
    (?P<esc>\\(?:[AZaUN]|0[0-9]))          # \A \Z \a \U \N and octal: Python's, not ECMA's
  | \\.                                   # any other escape (skipped)
  | (?P<ext>\(\?(?![:=!]|<[=!]))        # (?P…), (?#…), (?i), (?>…), (?<name>…)
  | (?P<empty>\[\^?\])                   # [] (nothing in ECMA) and [^] (anything)
  | (?P<comma>\{,[0-9]*\})                # Python reads {,n} as {0,n}; ECMA as text
""", re.X | re.S)


@dataclass(frozen=True)
class ContentDFA:
    """A DFA over bytes; state 0 is the start, ``DEAD`` (-1) the sink.

    ``trans[s][b]`` is the successor, ``accepting`` the states where the content is valid,
    ``live`` the states from which an accepting one is reachable.
    """

    trans: tuple[tuple[int, ...], ...] = field(repr=False)
    accepting: frozenset[int]
    live: frozenset[int]
    source: str = ""

    @property
    def num_states(self) -> int:
        return len(self.trans)

    @functools.cached_property
    def live_table(self) -> np.ndarray:
        """The transitions as ``int64 [n, 256]``, ``DEAD`` wherever :meth:`step` is (for
        :func:`intersect`; built once per DFA: a pattern's DFA meets many others)."""
        return _live_only(_as_table(self.trans), self.live)

    @functools.cached_property
    def runs(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        """Each state's row of :attr:`live_table` as runs (first byte, successor), ascending
        from byte 0 (for :func:`meets`; built once per DFA, in numpy)."""
        t = self.live_table
        start = run_starts(t)
        _state, first = cells(start)
        pairs = list(zip(first.tolist(), t[start].tolist(), strict=True))
        ends = np.cumsum(start.sum(axis=1)).tolist()
        return tuple(tuple(pairs[e0:e1]) for e0, e1 in itertools.pairwise([0, *ends]))

    def step(self, s: int, b: int) -> int:
        if s < 0:
            return DEAD
        r = self.trans[s][b]
        return r if r in self.live else DEAD

    def feed(self, s: int, data: bytes) -> int:
        for b in data:
            s = self.step(s, b)
            if s < 0:
                return DEAD
        return s

    def matches(self, data: bytes) -> bool:
        s = self.feed(0, data)
        return s >= 0 and s in self.accepting


def _strip_wrap(core: list[list[int]], core_acc: set[int], source: str,
                limit: int = MAX_DFA_STATES) -> ContentDFA:
    """The DFA of ``{w : w.strip() ∈ L(core)}``.

    States: LEAD (only whitespace so far) and pairs (core state after everything since the first
    non-whitespace byte, whether the core accepted at the last non-whitespace byte).
    """
    core_live = coreachable(core, core_acc)
    lead = (-2, False)  # the LEAD state's key (no core state is -2)
    ids: dict[tuple[int, bool], int] = {lead: 0}
    order: list[tuple[int, bool]] = [lead]
    trans: list[list[int]] = []
    accepting: set[int] = set()
    i = 0
    while i < len(order):
        key = order[i]
        row = [DEAD] * 256
        if key == lead:
            if 0 in core_acc:
                accepting.add(i)
        elif key[1]:
            accepting.add(i)
        for b in range(256):
            if key == lead:
                if b in WHITESPACE:
                    nk = lead
                else:
                    r2 = core[0][b]
                    if r2 < 0 or r2 not in core_live:
                        continue
                    nk = (r2, r2 in core_acc)
            else:
                r, saved = key
                r2 = core[r][b] if r >= 0 else DEAD
                if r2 >= 0 and r2 not in core_live:
                    r2 = DEAD
                if b in WHITESPACE:
                    if r2 < 0 and not saved:
                        continue
                    nk = (r2, saved)
                else:
                    if r2 < 0:
                        continue
                    nk = (r2, r2 in core_acc)
            j = ids.get(nk)
            if j is None:
                j = ids[nk] = len(order)
                order.append(nk)
                if len(order) > limit:
                    raise UsageError(f"content constraint {source!r} needs more than "
                                     f"{limit} automaton states",
                                     hint="simplify it, or check the content after generation")
            row[b] = j
        trans.append(row)
        i += 1
    return ContentDFA(tuple(tuple(r) for r in trans), frozenset(accepting),
                      coreachable(trans, accepting), source)


def stripped(dfa: ContentDFA, limit: int = MAX_DFA_STATES) -> ContentDFA:
    """The DFA of the contents whose text, leading and trailing :data:`WHITESPACE` removed, ``dfa``
    accepts: how a state's content is read, for a DFA built elsewhere (a JSON schema's, say)."""
    return _strip_wrap([list(r) for r in dfa.trans], set(dfa.accepting), dfa.source, limit)


def choices_dfa(choices: tuple[str, ...] | list[str]) -> ContentDFA:
    """Content must be one of ``choices`` (after stripping)."""
    core: list[list[int]] = [[DEAD] * 256]
    acc: set[int] = set()
    for c in choices:
        s = 0
        for b in c.encode("utf-8"):
            if core[s][b] < 0:
                core[s][b] = len(core)
                core.append([DEAD] * 256)
            s = core[s][b]
        acc.add(s)
    return _strip_wrap(core, acc, "choices " + " | ".join(choices))


# --- regex → byte NFA → DFA -----------------------------------------------------------------

def _utf8_split(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    """Byte-range sequences matching exactly the UTF-8 encodings of code points lo..hi
    (same encoded length, no surrogates)."""
    if lo > hi:
        return []
    n = len(chr(lo).encode("utf-8", "surrogatepass"))
    if n == 1:
        return [[(lo, hi)]]
    for i in range(1, n):
        m = (1 << (6 * i)) - 1
        if lo & ~m != hi & ~m:
            if lo & m:
                return _utf8_split(lo, lo | m) + _utf8_split((lo | m) + 1, hi)
            if hi & m != m:
                return _utf8_split(lo, (hi & ~m) - 1) + _utf8_split(hi & ~m, hi)
    a, b = chr(lo).encode(), chr(hi).encode()
    return [list(zip(a, b))]


def _utf8_ranges(ranges: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """Code point ranges as sequences of byte ranges (one per UTF-8 length and lead byte)."""
    if len(ranges) == 1 and ranges[0][1] < 0x80:  # one ASCII range (a literal's character): itself
        return [[ranges[0]]]
    out: list[list[tuple[int, int]]] = []
    for lo, hi in ranges:
        for a, b in ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xD7FF), (0xE000, 0xFFFF), (0x10000, _MAXCP)):
            lo2, hi2 = max(lo, a), min(hi, b)
            if lo2 <= hi2:
                out += _utf8_split(lo2, hi2)
    return out


def _normalise(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _complement(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    prev = 0
    for lo, hi in _normalise(ranges):
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev <= _MAXCP:
        out.append((prev, _MAXCP))
    return out


class ByteNFA:
    """A Thompson-style NFA over bytes: ``edges[u]`` holds (lo, hi, target) byte ranges, ``eps[u]``
    epsilon targets. Built by the regex compiler here and by the JSON-schema compiler
    (:mod:`ltlagent.text.jsonschema`), and made deterministic by :meth:`determinize`."""

    def __init__(self) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []

    def new(self) -> int:
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def literal(self, data: bytes, start: int, end: int) -> None:
        """A path from ``start`` to ``end`` spelling ``data``: its inner nodes new, numbered in
        order (``len(data) - 1`` of them, added at once, each with its one edge)."""
        n = len(data)
        if n <= 1:
            if n:
                self.edges[start].append((data[0], data[0], end))
            else:
                self.eps[start].append(end)
            return
        base = len(self.eps)  # the node after byte k is base + k (the last byte's: end)
        self.edges[start].append((data[0], data[0], base))
        self.eps.extend([] for _ in range(n - 1))
        self.edges.extend([(data[k], data[k], base + k)] for k in range(1, n - 1))
        self.edges.append([(data[-1], data[-1], end)])

    def embed(self, dfa: ContentDFA, start: int, end: int) -> None:
        """A copy of ``dfa``'s live part between ``start`` and ``end``."""
        if 0 not in dfa.live:
            return
        ids = {q: self.new() for q in sorted(dfa.live)}
        self.eps[start].append(ids[0])
        runs = dfa.runs  # computed once per DFA (the library's number DFAs: once per process)
        for q, u in ids.items():
            edges = self.edges[u]
            row = runs[q]
            for i, (b, r) in enumerate(row):
                if r >= 0:  # a live successor (the live table has DEAD for the others)
                    edges.append((b, row[i + 1][0] - 1 if i + 1 < len(row) else 255, ids[r]))
            if q in dfa.accepting:
                self.eps[u].append(end)

    def determinize(self, start: int, final: int, limit: int, what: str, hint: str
                    ) -> tuple[list[list[int]], set[int]]:
        """The subset construction from ``start``, accepting where ``final`` is reached; a
        :class:`UsageError` naming ``what`` beyond ``limit`` states. States are numbered in the
        order a queue finds them, each subset's successors in the order of their bytes.

        Subsets are Python ints used as bit sets (bit ``u``: NFA state ``u``): a subset's successor
        on a class of bytes is the union of its states' targets on that class, and its closure the
        union of its states' closures, each computed once; the rows are written per class and
        spread to the 256 bytes by one numpy lookup at the end."""
        cuts = {0, 256}
        for es in self.edges:
            for lo, hi, _v in es:
                cuts.add(lo)
                cuts.add(hi + 1)
        bounds = sorted(cuts)
        first = {lo: k for k, lo in enumerate(bounds[:-1])}
        # per state, its targets on each class it has edges on (class -> bit set), ascending
        moves: list[list[tuple[int, int]]] = []
        for es in self.edges:
            by_class: dict[int, int] = {}
            for lo, hi, v in es:
                bit = 1 << v
                for k in range(first[lo], first.get(hi + 1, len(bounds) - 1)):
                    by_class[k] = by_class.get(k, 0) | bit
            moves.append(sorted(by_class.items()))
        closures: dict[int, int] = {}  # per state, its closure as a bit set

        def closure1(u: int) -> int:
            got = closures.get(u)
            if got is None:
                seen = 1 << u
                todo = [u]
                while todo:
                    for v in self.eps[todo.pop()]:
                        if not seen >> v & 1:
                            seen |= 1 << v
                            todo.append(v)
                got = closures[u] = seen
            return got

        ids: dict[int, int] = {}  # closed subset -> state
        raw: dict[int, int] = {}  # subset before closing -> state
        order: list[int] = []
        rows: list[list[tuple[int, int]]] = []  # per state, (class, target state) ascending
        final_bit = 1 << final

        def state_of(key: int) -> int:
            """The DFA state of the closure of ``key``, added when new."""
            j = raw.get(key)
            if j is not None:
                return j
            closed = 0
            m = key
            while m:
                low = m & -m
                closed |= closure1(low.bit_length() - 1)
                m ^= low
            j = ids.get(closed)
            if j is None:
                j = ids[closed] = len(order)
                order.append(closed)
                if len(order) > limit:
                    raise UsageError(f"{what} needs more than {limit} automaton states", hint=hint)
            raw[key] = j
            return j

        state_of(1 << start)
        acc: set[int] = set()
        i = 0
        while i < len(order):
            cur = order[i]
            if cur & final_bit:
                acc.add(i)
            targets: dict[int, int] = {}
            m = cur
            while m:
                low = m & -m
                for k, bits in moves[low.bit_length() - 1]:
                    targets[k] = targets.get(k, 0) | bits
                m ^= low
            rows.append([(k, state_of(targets[k])) for k in sorted(targets)])
            i += 1
        n_classes = len(bounds) - 1
        table = np.full((len(rows), n_classes), DEAD, dtype=np.int64)
        src = [q for q, row in enumerate(rows) for _ in row]
        table[src, [k for row in rows for k, _ in row]] = [j for row in rows for _, j in row]
        class_of = np.repeat(np.arange(n_classes), np.diff(bounds))
        return table[:, class_of].tolist(), acc


def refine(blocks: list[set[int]], block_of: list[int], pred: Sequence[Sequence[tuple[int, int]]],
           work: list[int]) -> None:
    """Hopcroft's partition refinement, in place: split ``blocks`` (``block_of``: each state's
    block) until no input class tells the states of a block apart. ``pred[t]``: the (class,
    source) pairs of the transitions into ``t``; ``work``: the blocks to split by first. The
    result is the coarsest stable partition, whatever the order of the work."""
    pending = set(work)
    while work:
        a = work.pop()
        pending.discard(a)
        by_class: dict[int, list[int]] = {}
        for t in blocks[a]:
            for k, s_ in pred[t]:
                got = by_class.get(k)
                if got is None:
                    by_class[k] = [s_]
                else:
                    got.append(s_)
        for sources in by_class.values():
            touched: dict[int, list[int]] = {}
            for s_ in sources:
                touched.setdefault(block_of[s_], []).append(s_)
            for y, xs in touched.items():
                if len(xs) == len(blocks[y]):
                    continue
                moved = set(xs)
                blocks[y] -= moved
                z = len(blocks)
                blocks.append(moved)
                for s_ in moved:
                    block_of[s_] = z
                if y in pending:
                    work.append(z)
                    pending.add(z)
                else:
                    w = y if len(blocks[y]) <= len(moved) else z
                    work.append(w)
                    pending.add(w)


def _as_table(trans: Sequence[Sequence[int]] | np.ndarray) -> np.ndarray:
    """``trans`` as ``int64 [n, 256]`` (rows of Python ints read with ``fromiter``, not
    ``np.array``, which inspects each nested element)."""
    if isinstance(trans, np.ndarray):
        return trans.astype(np.int64, copy=False).reshape(-1, 256)
    return np.fromiter(itertools.chain.from_iterable(trans), dtype=np.int64,
                       count=256 * len(trans)).reshape(-1, 256)


def predecessors(by_class: np.ndarray) -> list[list[tuple[int, int]]]:
    """For :func:`refine`: the (class, source) pairs of the transitions into each state of
    ``by_class`` (``int [n, k]``: the successor of each state on each class, ``n`` a sink),
    the sink's own loops included; grouped in numpy."""
    n, k = by_class.shape
    flat = by_class.ravel()
    order = np.argsort(flat, kind="stable")
    bounds = np.searchsorted(flat[order], np.arange(n + 2)).tolist()
    pairs = list(zip((order % k).tolist(), (order // k).tolist(), strict=True))
    pred = [pairs[bounds[r]:bounds[r + 1]] for r in range(n + 1)]
    pred[n] += [(c, n) for c in range(k)]
    return pred


def byte_classes(table: np.ndarray) -> np.ndarray:
    """The first byte of each class of bytes whose columns in ``table`` are equal, ascending:
    runs of equal neighbouring columns found first (in numpy), then the runs' columns told apart
    by their bytes (a few dozen columns, not a sort of 256)."""
    starts = np.flatnonzero(np.concatenate([[True], (table[:, 1:] != table[:, :-1]).any(axis=0)]))
    firsts: dict[bytes, int] = {}
    for b, col in zip(starts.tolist(), np.ascontiguousarray(table[:, starts].T), strict=True):
        firsts.setdefault(col.tobytes(), b)
    return np.array(list(firsts.values()), dtype=np.int64)


def minimize_table(trans: Sequence[Sequence[int]] | np.ndarray,
                   acc: set[int]) -> tuple[np.ndarray, set[int]]:
    """:func:`minimize` as a numpy table: the 256-wide work (live states, byte classes,
    predecessors, the rows written out) in numpy, only the refinement in Python."""
    t = _as_table(trans)
    live = coreachable_table(t, acc)
    if 0 not in live:
        return np.full((1, 256), DEAD, dtype=np.int64), set()
    states = np.array(sorted(live), dtype=np.int64)
    n = len(states)  # the sink
    idx = np.full(t.shape[0] + 1, n, dtype=np.int64)  # old -> new; dead ends and DEAD: the sink
    idx[states] = np.arange(n)
    sub = idx[t[states]]  # successors renumbered, the sink for every missing one
    by_class = sub[:, byte_classes(sub)]  # a byte per class of bytes no live state tells apart
    pred = predecessors(by_class)
    acc_live = set(idx[[q for q in acc if 0 <= q < t.shape[0]]].tolist()) - {n}
    finals = set(acc_live)  # refined in place
    rest = set(range(n + 1)) - finals
    blocks: list[set[int]] = [finals, rest] if rest else [finals]
    block_of = [0] * (n + 1)
    for i in rest:
        block_of[i] = 1
    refine(blocks, block_of, pred, [0 if len(finals) <= len(rest) or not rest else 1])
    # new states numbered by their first live state (state 0's block first)
    block = np.array(block_of[:n], dtype=np.int64)
    _, firsts = np.unique(block, return_index=True)
    reps = np.sort(firsts)
    rank = np.full(len(blocks), DEAD, dtype=np.int64)  # the sink's block: DEAD
    rank[block[reps]] = np.arange(reps.size)
    new_of = np.full(t.shape[0] + 1, DEAD, dtype=np.int64)  # the last entry serves DEAD (-1)
    new_of[states] = rank[block]
    out = new_of[t[states[reps]]]
    out_acc = set(rank[block[sorted(acc_live)]].tolist()) if acc_live else set()
    return out, out_acc


def minimize(trans: Sequence[Sequence[int]] | np.ndarray, acc: set[int]) -> tuple[list[list[int]], set[int]]:
    """The minimal DFA of the live part (Hopcroft's partition refinement over byte classes, a sink
    added for the missing transitions); state 0 stays the start. States that cannot reach ``acc``
    are removed. New states are numbered by their first old state (:func:`minimize_table`)."""
    out, out_acc = minimize_table(trans, acc)
    return out.tolist(), out_acc


def as_dfa(trans: Sequence[Sequence[int]] | np.ndarray, acc: set[int], source: str) -> ContentDFA:
    """A :class:`ContentDFA` from a transition table (live states computed here; from a numpy
    table, in numpy, and its :attr:`~ContentDFA.live_table` filled in from the same table)."""
    if not isinstance(trans, np.ndarray):  # rows of Python ints: searched as they are
        return ContentDFA(tuple(map(tuple, trans)), frozenset(acc), coreachable(trans, acc), source)
    t = _as_table(trans)
    rows = tuple(map(tuple, t.tolist()))
    return _with_table(ContentDFA(rows, frozenset(acc), coreachable_table(t, acc), source), t)


def _with_table(d: ContentDFA, t: np.ndarray) -> ContentDFA:
    """``d`` with its :attr:`~ContentDFA.live_table` set from ``t`` (its ``trans`` as numpy)
    rather than read back from the tuples."""
    d.__dict__["live_table"] = _live_only(t, d.live)  # the cached_property's slot (frozen dataclass)
    return d


def live_table_of(t: np.ndarray, acc: Iterable[int]) -> np.ndarray:
    """``t`` (``int64 [n, 256]``) with ``DEAD`` for every successor that reaches no state of
    ``acc``: what :attr:`ContentDFA.live_table` is, for a table with no :class:`ContentDFA`."""
    return _live_only(t, coreachable_table(t, acc))


def _live_only(t: np.ndarray, live: frozenset[int]) -> np.ndarray:
    """``t`` with ``DEAD`` for every successor outside ``live`` (read-only)."""
    mask = np.zeros(t.shape[0] + 1, dtype=bool)  # the last entry serves DEAD (-1)
    mask[list(live)] = True
    out = np.where(mask[t], t, DEAD)
    out.setflags(write=False)
    return out


def intersect(a: ContentDFA, b: ContentDFA, limit: int = MAX_DFA_STATES) -> ContentDFA:
    """The product DFA accepting what both accept (:func:`product_table` of their live tables)."""
    table, acc = product_table(a.live_table, a.accepting, b.live_table, b.accepting,
                               (a.source, b.source), limit)
    return _with_table(ContentDFA(tuple(map(tuple, table.tolist())), frozenset(acc),
                                  coreachable_table(table, acc), f"({a.source}) & ({b.source})"), table)


def product_table(ta: np.ndarray, acc_a: Iterable[int], tb: np.ndarray, acc_b: Iterable[int],
                  names: tuple[str, str], limit: int = MAX_DFA_STATES) -> tuple[np.ndarray, list[int]]:
    """The product of two live tables (``int64 [n, 256]``, ``DEAD`` where a successor is not live)
    and its accepting states: its reachable pairs breadth first, numbered in the order a queue
    would find them (state by state, byte by byte), one level at a time in numpy (a pair's row is
    one operation on both rows, not 256 Python steps). For chains of products (a string's
    constraints met one by one) without the tuples of a :class:`ContentDFA` in between; ``names``
    say what the two are in the error past ``limit`` states."""
    nb = max(1, tb.shape[0])
    acc_a_mask = np.zeros(ta.shape[0], dtype=bool)
    acc_a_mask[list(acc_a)] = True
    acc_b_mask = np.zeros(tb.shape[0], dtype=bool)
    acc_b_mask[list(acc_b)] = True
    ids = {0: 0}  # pair code p * nb + q -> state
    rows: list[np.ndarray] = []
    ps, qs = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    pairs_p, pairs_q = [ps], [qs]
    count = 1
    while ps.size:
        ra, rb = ta[ps], tb[qs]
        code = np.where((ra >= 0) & (rb >= 0), ra * nb + rb, -1)
        flat = code.ravel()
        seen, first = np.unique(flat, return_index=True)
        new_codes = [int(c) for c in seen[np.argsort(first)].tolist() if c >= 0 and c not in ids]
        for c in new_codes:
            ids[c] = count
            count += 1
        if count > limit:
            raise UsageError(f"the intersection of {names[0]!r} and {names[1]!r} needs more "
                             f"than {limit} automaton states")
        lookup = np.array([ids[c] if c >= 0 else DEAD for c in seen.tolist()], dtype=np.int64)
        rows.append(lookup[np.searchsorted(seen, code)])
        fresh = np.array(new_codes, dtype=np.int64)
        ps, qs = fresh // nb, fresh % nb
        pairs_p.append(ps)
        pairs_q.append(qs)
    all_p, all_q = np.concatenate(pairs_p), np.concatenate(pairs_q)
    return np.concatenate(rows), np.flatnonzero(acc_a_mask[all_p] & acc_b_mask[all_q]).tolist()


def meets(a: ContentDFA, b: ContentDFA, limit: int = MAX_DFA_STATES) -> bool:
    """Some text is accepted by both ``a`` and ``b`` (``0 in intersect(a, b, limit).live``), found
    by a search of the product's pairs that stops at the first pair both accept, over the rows'
    runs (:attr:`ContentDFA.runs`: a pair's successors are a merge of a few runs, not 256 bytes).
    :class:`UsageError` past ``limit`` pairs, as :func:`intersect`, where no such pair came first
    (with no common text, exactly where :func:`intersect` raises)."""
    runs_a, runs_b = a.runs, b.runs
    acc_a, acc_b = a.accepting, b.accepting
    seen = {(0, 0)}
    todo = [(0, 0)]
    while todo:
        p, q = todo.pop()
        if p in acc_a and q in acc_b:
            return True
        ra, rb = runs_a[p], runs_b[q]
        i = j = 0
        while i < len(ra) and j < len(rb):  # the segments where both rows are constant
            pair = (ra[i][1], rb[j][1])
            if pair[0] >= 0 and pair[1] >= 0 and pair not in seen:
                seen.add(pair)
                todo.append(pair)
                if len(seen) > limit:
                    raise UsageError(f"the intersection of {a.source!r} and {b.source!r} needs "
                                     f"more than {limit} automaton states")
            end_a = ra[i + 1][0] if i + 1 < len(ra) else 256
            end_b = rb[j + 1][0] if j + 1 < len(rb) else 256
            i += end_a <= end_b
            j += end_b <= end_a
    return False


class _RegexCompiler:
    def __init__(self, pattern: str, *, exact: bool = False, ecma: bool = False) -> None:
        import re._constants as C
        import re._parser as P

        self.C = C
        self.pattern = pattern
        self.ecma = ecma  # ECMA-262 semantics (JSON Schema's patterns), else Python's (spec :regex)
        if ecma:
            m = _NOT_ECMA.search(pattern)
            while m is not None and m.lastgroup is None:
                m = _NOT_ECMA.search(pattern, m.end())
            if m is not None:
                self.unsupported(f"{m.group()!r}, which ECMA-262 reads differently from Python,")
        try:
            with warnings.catch_warnings():  # "possible nested set" (a literal [ in a class)
                warnings.simplefilter("ignore", FutureWarning)
                self.tree = P.parse(pattern, 0)
        except re.error as e:
            raise UsageError(f"bad :regex {pattern!r}: {e}") from e
        bad = self.tree.state.flags & ~self.harmless_flags
        if bad:
            self.unsupported(f"the inline flag {self.flag_names(bad)}")
        self.dotall = bool(self.tree.state.flags & C.SRE_FLAG_DOTALL)
        self.nfa = ByteNFA()
        self.exact = exact  # False: never match ODD_SPACES (for stripped content); True: Python's sets

    @property
    def harmless_flags(self) -> int:
        """Flags whose meaning is already in the parsed tree or in how we read it: ASCII (our
        classes are ASCII-exact), DOTALL (read by ``.``), UNICODE (the default), VERBOSE (parsing)."""
        C = self.C
        if self.ecma:  # ECMA-262 has no inline flags
            return C.SRE_FLAG_UNICODE
        return C.SRE_FLAG_ASCII | C.SRE_FLAG_DOTALL | C.SRE_FLAG_UNICODE | C.SRE_FLAG_VERBOSE

    def flag_names(self, flags: int) -> str:
        C = self.C
        letters = {C.SRE_FLAG_IGNORECASE: "i", C.SRE_FLAG_MULTILINE: "m", C.SRE_FLAG_LOCALE: "L",
                   C.SRE_FLAG_ASCII: "a", C.SRE_FLAG_DOTALL: "s", C.SRE_FLAG_VERBOSE: "x"}
        return "".join(f"(?{ch})" for bit, ch in letters.items() if flags & bit) or f"0x{flags:x}"

    def unsupported(self, what: str) -> NoReturn:
        raise UsageError(f":regex {self.pattern!r}: {what} is not supported by the decoding monitor",
                         hint=_HINT)

    # char sets as code point ranges; categories are exact on ASCII and exclude non-ASCII
    # The parsed tree of re._parser is untyped: (opcode, argument) pairs whose argument's type
    # depends on the opcode, hence Any below.
    def category(self, cat: Any) -> list[tuple[int, int]]:
        C = self.C
        rx = {C.CATEGORY_DIGIT: r"\d", C.CATEGORY_NOT_DIGIT: r"\D", C.CATEGORY_SPACE: r"\s",
              C.CATEGORY_NOT_SPACE: r"\S", C.CATEGORY_WORD: r"\w", C.CATEGORY_NOT_WORD: r"\W"}.get(cat)
        if rx is None:
            self.unsupported(f"the character category {cat}")
        if self.ecma:  # §22.2.2.9: over all code points, the negated ones the complements
            base = {"d": [(0x30, 0x39)], "w": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
                    "s": list(ECMA_SPACE)}[rx[1].lower()]
            return _complement(base) if rx[1].isupper() else _normalise(base)
        r = re.compile(rx)
        return _normalise([(c, c) for c in range(128) if r.fullmatch(chr(c))])

    def charset(self, items: list[tuple[Any, Any]]) -> list[tuple[int, int]]:
        C = self.C
        ranges: list[tuple[int, int]] = []
        negate = False
        has_cat = False
        for op, av in items:
            if op is C.NEGATE:
                negate = True
            elif op is C.LITERAL:
                ranges.append((av, av))
            elif op is C.RANGE:
                ranges.append(av)
            elif op is C.CATEGORY:
                has_cat = True
                ranges += self.category(av)
            else:
                self.unsupported(f"the class item {op}")
        out = _complement(ranges) if negate else _normalise(ranges)
        if has_cat and not self.ecma:  # non-ASCII membership unknown: exclude them (stricter)
            out = [(lo, min(hi, 127)) for lo, hi in out if lo <= 127]
        return out

    def chars(self, ranges: list[tuple[int, int]], start: int, end: int) -> None:
        if not self.exact and any(hi >= ODD_SPACES[0][0] and not (lo > ODD_SPACES[0][1] and hi < 0x80)
                                  for lo, hi in ranges):  # may meet ODD_SPACES (ASCII past 0x1F: never)
            ranges = _complement(_complement(ranges) + list(ODD_SPACES))
        for seq in _utf8_ranges(ranges):
            s = start
            for k, (lo, hi) in enumerate(seq):
                t = end if k == len(seq) - 1 else self.nfa.new()
                self.nfa.edges[s].append((lo, hi, t))
                s = t

    def seq(self, items: list[tuple[Any, Any]], start: int, end: int) -> None:
        s = start
        for k, it in enumerate(items):
            t = end if k == len(items) - 1 else self.nfa.new()
            self.item(it, s, t)
            s = t
        if not items:
            self.nfa.eps[start].append(end)

    def item(self, it: tuple[Any, Any], start: int, end: int) -> None:
        C, nfa = self.C, self.nfa
        op, av = it
        if op is C.LITERAL:
            self.chars([(av, av)], start, end)
        elif op is C.NOT_LITERAL:
            self.chars(_complement([(av, av)]), start, end)
        elif op is C.ANY and self.ecma:
            self.chars(_complement(list(ECMA_LINE_TERMINATORS)), start, end)
        elif op is C.ANY:
            self.chars([(0, _MAXCP)] if self.dotall else _complement([(10, 10)]), start, end)
        elif op is C.IN:
            self.chars(self.charset(list(av)), start, end)
        elif op is C.BRANCH:
            for alt in av[1]:
                self.seq(list(alt), start, end)
        elif op is C.SUBPATTERN:
            _group, add, rem, p = av
            if add & ~self.harmless_flags or rem:
                self.unsupported(f"the inline flag {self.flag_names(add & ~self.harmless_flags)}"
                                 if add & ~self.harmless_flags else
                                 f"removing the flag {self.flag_names(rem)}")
            outer = self.dotall  # (?s:…) makes . match newlines inside the group only
            self.dotall = outer or bool(add & C.SRE_FLAG_DOTALL)
            self.seq(list(p), start, end)
            self.dotall = outer
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, p = av
            body = list(p)
            s = start
            for _ in range(lo):
                t = nfa.new()
                self.seq(body, s, t)
                s = t
            if hi == C.MAXREPEAT:
                loop = nfa.new()
                nfa.eps[s].append(loop)
                t = nfa.new()
                self.seq(body, loop, t)
                nfa.eps[t].append(loop)
                nfa.eps[loop].append(end)
            else:
                cap = MAX_PATTERN_REPEAT if self.ecma else MAX_REGEX_REPEAT
                if hi - lo > cap:
                    self.unsupported(f"a repetition bound above {cap}")
                for _ in range(hi - lo):
                    nfa.eps[s].append(end)
                    t = nfa.new()
                    self.seq(body, s, t)
                    s = t
                nfa.eps[s].append(end)
        elif op is C.AT and av in (C.AT_BOUNDARY, C.AT_NON_BOUNDARY):
            self.unsupported("a word boundary (\\b, \\B)")
        elif op is C.AT:  # the ends were peeled off in build(): an anchor anywhere else
            self.unsupported("an anchor (^, $, \\A, \\Z) elsewhere than at the very start or end")
        else:
            what = {"GROUPREF": "a backreference", "GROUPREF_EXISTS": "a conditional group",
                    "ASSERT": "lookaround", "ASSERT_NOT": "lookaround",
                    "POSSESSIVE_REPEAT": "possessive repetition", "ATOMIC_GROUP": "an atomic group"}
            self.unsupported(what.get(str(op), str(op).lower()))

    def build(self, search: bool = False) -> tuple[list[list[int]], set[int]]:
        """The DFA of the strings the pattern fullmatches, or with ``search`` of those in which
        it is found (an unanchored end may be followed by anything; Python's ``$`` also by one
        newline). In the ECMA-262 dialect each top-level alternative may carry its own anchors
        (``^$|^a+$``)."""
        nfa = self.nfa
        start, final = nfa.new(), nfa.new()
        items = list(self.tree)
        C = self.C
        if search and self.ecma and len(items) == 1 and items[0][0] is C.BRANCH:
            alts = [list(alt) for alt in items[0][1][1]]
        else:
            alts = [items]
        for alt in alts:
            s, f = nfa.new(), nfa.new()
            nfa.eps[start].append(s)
            nfa.eps[f].append(final)
            self.anchored(alt, s, f, search)
        return nfa.determinize(start, final, MAX_DFA_STATES, f":regex {self.pattern!r}",
                               "simplify it (a wide class such as . under a bounded repetition "
                               "multiplies states)")

    def anchored(self, items: list[tuple[Any, Any]], start: int, final: int, search: bool) -> None:
        """One alternative between ``start`` and ``final`` (nodes of its own, so the loops of
        an unanchored end stay its own): anchors at its very start or end peeled off."""
        nfa, C = self.nfa, self.C
        head = tail = dollar = False
        while items and items[0][0] is C.AT and items[0][1] in (C.AT_BEGINNING,
                                                                 C.AT_BEGINNING_STRING):
            items.pop(0)
            head = True
        while items and items[-1][0] is C.AT and items[-1][1] in (C.AT_END, C.AT_END_STRING):
            dollar = dollar or (items[-1][1] is C.AT_END and not tail)
            items.pop()
            tail = True
        if search and self.ecma and len(items) == 1 and items[0][0] is C.BRANCH:
            # Python's parser factors a common prefix out of the alternatives (^a$|^b$ is
            # ^(?:a$|b$)): the anchors go back into each
            pre = [(C.AT, C.AT_BEGINNING)] if head else []
            post = [(C.AT, C.AT_END)] if tail else []
            for alt in items[0][1][1]:
                self.anchored([*pre, *alt, *post], start, final, search)
            return
        if not search:
            self.seq(items, start, final)
            return
        begin, stop = nfa.new(), nfa.new()
        if not head:  # anything before the match
            self.chars([(0, _MAXCP)], start, start)
        nfa.eps[start].append(begin)
        self.seq(items, begin, stop)
        nfa.eps[stop].append(final)
        if not tail:  # anything after it
            self.chars([(0, _MAXCP)], final, final)
        elif dollar and not self.ecma:  # Python's $ also matches before a final newline
            nfa.edges[stop].append((10, 10, final))


def pattern_dfa(pattern: str, *, search: bool = False, ecma: bool = False) -> ContentDFA:
    """The UTF-8 texts ``pattern`` fullmatches (or, with ``search``, in which it is found), with
    no stripping (unlike :func:`regex_dfa`): for string values whose bytes are not stripped, such as
    JSON strings (:mod:`ltlagent.text.jsonschema`). Python's dialect by default (``\\d``, ``\\w``,
    ``\\s`` on ASCII only, ``$`` also before a final newline); with ``ecma``, ECMA-262's as JSON
    Schema's ``pattern`` means it: ``$`` only at the end, ``.`` anything but a line terminator, and
    ``\\d \\D \\w \\W \\s \\S`` and negated classes over all code points (§22.2.2.9); Python
    syntax that ECMA-262 reads otherwise (``\\Z``, ``(?i)``, ``(?P<n>…)``, ``{,n}``, ``[]``) is refused."""
    core, acc = _RegexCompiler(pattern, exact=True, ecma=ecma).build(search)
    return as_dfa(core, acc, ("search " if search else "regex ") + pattern)


def regex_dfa(pattern: str) -> ContentDFA:
    """Content must fullmatch ``pattern`` (after stripping); :class:`UsageError` if no content
    can (the model could never write this state, and validation would refuse every example)."""
    core, acc = _RegexCompiler(pattern).build()
    dfa = _strip_wrap(core, acc, "regex " + pattern)
    if 0 not in dfa.live:
        raise UsageError(f":regex {pattern!r} matches no content",
                         hint="the content is the text stripped of surrounding whitespace, and a "
                              "regex here never matches non-ASCII spaces; check what it matches "
                              "with the definitions in docs/design.md §2.2")
    return dfa


def content_dfa(choices: Sequence[str] | None, regex: str | None) -> ContentDFA | None:
    """The DFA of a state's whole content constraint: one of ``choices`` *and* a full match of
    ``regex``, whichever are given (None: no constraint). The decoder and the validator both
    read a state's content through this, so they apply the same conjunction: with both, the
    choices are those the regex matches (:class:`UsageError` if none)."""
    if choices is None:
        return None if regex is None else regex_dfa(regex)
    if regex is not None:
        rx = regex_dfa(regex)
        kept = [c for c in choices if rx.matches(c.encode("utf-8"))]
        if not kept:
            raise UsageError(f"no choice ({', '.join(choices)}) matches the :regex {regex!r}",
                             hint="a state with both :choices and :regex takes the choices the "
                                  "regex matches; give one of the two")
        choices = kept
    return choices_dfa(list(choices))
