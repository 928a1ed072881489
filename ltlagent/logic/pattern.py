"""Behaviour patterns → minimal deterministic automata over state indices (docs/design.md §3.2).

A pattern is a regular expression over spec states (§2.1), so ltlagent compiles it itself instead
of handing a SERE to Spot, whose SERE simplifier is wrong on several shapes (§3.2): the pattern
becomes an ε-NFA (Thompson-style, built backwards from its continuation so that the exit of a
bounded repetition is one ε-step from every copy), the NFA a DFA by the subset construction, and
the DFA is minimised (Hopcroft). Letters are state indices ``0 … n-1`` (declaration order); a
bounded repetition is unrolled, which :data:`~ltlagent.spec.syntax.MAX_UNROLLED_STEPS` bounds when
the spec is read. Everything here is pure Python over frozen data: no Spot.

:func:`omega_edges` builds the Büchi automaton of ``prefix · body^ω`` (iterations non-empty) from
two such DFAs; Spot determinises it (:mod:`ltlagent.logic.automaton`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ltlagent.errors import SpecError
from ltlagent.spec.syntax import Always, Next, Or, Pattern, Repeat, Until, Visit

__all__ = ["Dfa", "Nfa", "MAX_DFA_STATES", "DEAD", "pattern_nfa", "determinise", "minimise",
           "pattern_dfa", "non_empty", "intersect", "omega_edges", "OmegaEdges", "split_always"]

DEAD = -1
#: The subset construction stops with an error past this many states (a pattern such as
#: ``(next (repeat (or A B)) A (repeat (or A B) :min 20 :max 20))`` needs 2^20): no spec the
#: monitor can use has that many, and the error beats an hour of work.
MAX_DFA_STATES = 200_000


@dataclass(frozen=True)
class Nfa:
    """An ε-NFA over letters ``0 … letters-1``: per state its ε-successors and its
    ``(letter, successor)`` moves; one initial and one final state."""

    letters: int
    initial: int
    final: int
    eps: tuple[tuple[int, ...], ...]
    moves: tuple[tuple[tuple[int, int], ...], ...]


@dataclass(frozen=True)
class Dfa:
    """A deterministic automaton over letters ``0 … letters-1``: ``delta[q][a]`` is the successor
    of ``q`` on ``a``, or -1 (the word is rejected)."""

    letters: int
    initial: int
    delta: tuple[tuple[int, ...], ...]
    accepting: frozenset[int]

    @property
    def num_states(self) -> int:
        return len(self.delta)

    def accepts(self, word: Iterable[int]) -> bool:
        """Whether the finite word (letter indices) is accepted."""
        q = self.initial
        for a in word:
            q = self.delta[q][a]
            if q < 0:
                return False
        return q in self.accepting


class _NfaBuilder:
    """Builds an :class:`Nfa` backwards: :meth:`build` compiles a pattern in front of a
    continuation state, so a bounded repetition's copies all exit to the same state by one ε."""

    def __init__(self, letters: int, index: dict[str, int]) -> None:
        self.letters = letters
        self.index = index
        self.eps: list[list[int]] = []
        self.moves: list[list[tuple[int, int]]] = []

    def state(self) -> int:
        self.eps.append([])
        self.moves.append([])
        return len(self.eps) - 1

    def build(self, p: Pattern, then: int) -> int:
        """A state from which the words of ``p`` lead to ``then``."""
        if isinstance(p, Visit):
            s = self.state()
            self.moves[s].append((self.index[p.name], then))
            return s
        if isinstance(p, Next):
            s = then
            for part in reversed(p.parts):
                s = self.build(part, s)
            return s
        if isinstance(p, Or):
            s = self.state()
            self.eps[s].extend(self.build(part, then) for part in p.parts)
            return s
        if isinstance(p, Until):
            return self.repeat(p.body, p.min, p.max, self.build(p.then, then))
        if isinstance(p, Repeat):
            return self.repeat(p.body, p.min, p.max, then)
        raise TypeError(f"'always' cannot occur inside a finite pattern: {p!r}")

    def repeat(self, body: Pattern, lo: int, hi: int | None, then: int) -> int:
        """``body`` between ``lo`` and ``hi`` (None: unbounded) times, then ``then``: ``lo``
        copies in front of a loop, or of ``hi - lo`` nested optional copies, each of which may
        leave for ``then`` directly."""
        if hi is None:
            loop = self.state()
            self.eps[loop].extend((then, self.build(body, loop)))
            s = loop
        else:
            s = then
            for _ in range(hi - lo):
                opt = self.state()
                self.eps[opt].extend((then, self.build(body, s)))
                s = opt
        for _ in range(lo):
            s = self.build(body, s)
        return s


def pattern_nfa(p: Pattern, names: Sequence[str]) -> Nfa:
    """The ε-NFA of a finite pattern (no ``always``) over the indices of ``names``."""
    b = _NfaBuilder(len(names), {n: i for i, n in enumerate(names)})
    final = b.state()
    start = b.build(p, final)
    return Nfa(len(names), start, final, tuple(map(tuple, b.eps)), tuple(map(tuple, b.moves)))


def determinise(nfa: Nfa, max_states: int = MAX_DFA_STATES) -> Dfa:
    """The subset construction. A subset keeps only the NFA states that matter (those with moves,
    and the final state), so subsets that differ in ε-states alone are one DFA state. Raises
    :class:`OverflowError` past ``max_states`` states."""
    important = [bool(m) or s == nfa.final for s, m in enumerate(nfa.moves)]
    closures: dict[int, frozenset[int]] = {}

    def closure(s: int) -> frozenset[int]:
        hit = closures.get(s)
        if hit is None:
            seen, todo = {s}, [s]
            while todo:
                for r in nfa.eps[todo.pop()]:
                    if r not in seen:
                        seen.add(r)
                        todo.append(r)
            hit = closures[s] = frozenset(r for r in seen if important[r])
        return hit

    start = closure(nfa.initial)
    number: dict[frozenset[int], int] = {start: 0}
    subsets = [start]
    delta: list[tuple[int, ...]] = []
    for subset in subsets:  # grows while iterating
        targets: dict[int, set[int]] = {}
        for s in subset:
            for a, r in nfa.moves[s]:
                targets.setdefault(a, set()).update(closure(r))
        row = [DEAD] * nfa.letters
        for a, t in targets.items():
            key = frozenset(t)
            q = number.get(key)
            if q is None:
                if len(subsets) >= max_states:
                    raise OverflowError(f"more than {max_states} states")
                q = number[key] = len(subsets)
                subsets.append(key)
            row[a] = q
        delta.append(tuple(row))
    accepting = frozenset(q for q, s in enumerate(subsets) if nfa.final in s)
    return Dfa(nfa.letters, 0, tuple(delta), accepting)


def minimise(d: Dfa) -> Dfa:
    """The minimal DFA of the same language (Hopcroft's partition refinement), with -1 for every
    state from which no word is accepted, numbered in breadth-first order from 0 (the initial
    state; a DFA of the empty language is one state without moves)."""
    order = _reachable_order(d)
    pos = {q: i for i, q in enumerate(order)}
    n, k = len(order), d.letters
    sink = n  # the completion: -1 goes here
    succ = [[pos[r] if r >= 0 else sink for r in d.delta[q]] for q in order] + [[sink] * k]
    pred: list[dict[int, list[int]]] = [{} for _ in range(k)]
    for q, row in enumerate(succ):
        for a, r in enumerate(row):
            pred[a].setdefault(r, []).append(q)
    acc = {pos[q] for q in d.accepting if q in pos}
    rest = set(range(n + 1)) - acc
    blocks: list[set[int]] = [set(b) for b in (acc, rest) if b]
    block_of = [0] * (n + 1)
    for i, b in enumerate(blocks):
        for q in b:
            block_of[q] = i
    waiting = [min(range(len(blocks)), key=lambda i: len(blocks[i]))] if len(blocks) == 2 else []
    in_waiting = set(waiting)
    while waiting:
        top = waiting.pop()
        in_waiting.discard(top)
        splitter = list(blocks[top])
        for a in range(k):
            pa = pred[a]
            hit: dict[int, set[int]] = {}
            for r in splitter:
                for q in pa.get(r, ()):
                    hit.setdefault(block_of[q], set()).add(q)
            for i, inside in hit.items():
                if len(inside) == len(blocks[i]):
                    continue
                blocks[i] -= inside
                j = len(blocks)
                blocks.append(inside)
                for q in inside:
                    block_of[q] = j
                small = j if i in in_waiting or len(inside) <= len(blocks[i]) else i
                waiting.append(small)
                in_waiting.add(small)
    return _quotient(succ, block_of, block_of[sink], {block_of[q] for q in acc}, k)


def _reachable_order(d: Dfa) -> list[int]:
    """The states reachable from the initial one, breadth-first."""
    order, seen = [d.initial], {d.initial}
    for q in order:
        for r in d.delta[q]:
            if r >= 0 and r not in seen:
                seen.add(r)
                order.append(r)
    return order


def _quotient(succ: list[list[int]], block_of: list[int], dead: int, accepting: set[int],
              letters: int) -> Dfa:
    """The DFA over the blocks of a partition of ``succ``'s states (state 0 initial), numbered
    breadth-first from the initial block, the ``dead`` block folded into -1."""
    member: dict[int, int] = {}
    for s in range(len(succ)):
        member.setdefault(block_of[s], s)
    number = {block_of[0]: 0}
    order = [block_of[0]]
    delta: list[tuple[int, ...]] = []
    for b in order:  # grows while iterating
        row = [DEAD] * letters
        if b != dead:
            for a, r in enumerate(succ[member[b]]):
                c = block_of[r]
                if c == dead:
                    continue
                q = number.get(c)
                if q is None:
                    q = number[c] = len(order)
                    order.append(c)
                row[a] = q
        delta.append(tuple(row))
    return Dfa(letters, 0, tuple(delta),
               frozenset(number[b] for b in order if b in accepting))


def non_empty(d: Dfa) -> Dfa:
    """The same language without the empty word: a trace has at least one step (§2.1), and each
    iteration of ``always`` is non-empty. Adds a non-accepting copy of the initial state when the
    initial state is accepting."""
    if d.initial not in d.accepting:
        return d
    fresh = d.num_states
    return Dfa(d.letters, fresh, (*d.delta, d.delta[d.initial]), d.accepting)


def pattern_dfa(p: Pattern, names: Sequence[str], *, allow_empty: bool = False,
                max_states: int | None = None, text: str | None = None) -> Dfa:
    """The minimal DFA of a finite pattern over the indices of ``names``, the empty word excluded
    unless ``allow_empty``. A pattern whose DFA would pass ``max_states`` (default
    :data:`MAX_DFA_STATES`) is a
    :class:`~ltlagent.errors.SpecError` at the pattern (``text``: the spec's source, for the
    caret)."""
    limit = MAX_DFA_STATES if max_states is None else max_states
    try:
        d = determinise(pattern_nfa(p, names), limit)
    except OverflowError:
        raise SpecError(f"the behaviour's deterministic automaton has more than {limit} "
                        "states", p.loc, text or None,
                        "after an unbounded repetition of a choice, a deterministic automaton "
                        "must remember which of the last k steps could start the fixed-length "
                        "part that follows (up to 2^k states): shorten or restructure it") from None
    return minimise(d if allow_empty else non_empty(d))


def intersect(a: Dfa, b: Dfa) -> Dfa:
    """The product DFA of ``a`` and ``b`` (same letters): the words both accept, minimised."""
    if a.letters != b.letters:
        raise ValueError(f"alphabets differ: {a.letters} and {b.letters} letters")
    start = (a.initial, b.initial)
    number = {start: 0}
    pairs = [start]
    delta: list[tuple[int, ...]] = []
    for qa, qb in pairs:  # grows while iterating
        row = [DEAD] * a.letters
        ra, rb = a.delta[qa], b.delta[qb]
        for x in range(a.letters):
            sa, sb = ra[x], rb[x]
            if sa < 0 or sb < 0:
                continue
            q = number.get((sa, sb))
            if q is None:
                q = number[(sa, sb)] = len(pairs)
                pairs.append((sa, sb))
            row[x] = q
        delta.append(tuple(row))
    acc = frozenset(i for i, (qa, qb) in enumerate(pairs) if qa in a.accepting and qb in b.accepting)
    return minimise(Dfa(a.letters, 0, tuple(delta), acc))


#: A nondeterministic Büchi automaton with accepting transitions: per state, its edges
#: ``(letter, successor, accepting)``; the initial state is 0.
OmegaEdges = tuple[tuple[tuple[int, int, bool], ...], ...]


def omega_edges(prefix: Dfa | None, body: Dfa) -> OmegaEdges:
    """The Büchi automaton of ``prefix · body^ω``, each iteration of ``body`` non-empty
    (``prefix`` None: no prefix; it may accept the empty word).

    States: the body's DFA states, then the prefix's, then one initial state when the prefix
    accepts the empty word. A move into an accepting state of the body may instead start the next
    iteration (back to the body's initial state) on an accepting edge, so an accepted run
    completes infinitely many iterations; a move into an accepting state of the prefix may
    instead start the first iteration.
    """
    body = non_empty(body)
    hub = body.initial
    edges: list[list[tuple[int, int, bool]]] = []
    for row in body.delta:
        out: list[tuple[int, int, bool]] = []
        for a, r in enumerate(row):
            if r >= 0:
                out.append((a, r, False))
                if r in body.accepting:
                    out.append((a, hub, True))
        edges.append(out)
    if prefix is None:
        return _omega_from(hub, edges)
    off = len(edges)
    for row in prefix.delta:
        out = []
        for a, r in enumerate(row):
            if r >= 0:
                out.append((a, r + off, False))
                if r in prefix.accepting:
                    out.append((a, hub, False))
        edges.append(out)
    start = prefix.initial + off
    if prefix.initial in prefix.accepting:  # the prefix may be empty: start in either part
        edges.append(edges[start] + edges[hub])
        start = len(edges) - 1
    return _omega_from(start, edges)


def _omega_from(start: int, edges: list[list[tuple[int, int, bool]]]) -> OmegaEdges:
    """The edges renumbered breadth-first from ``start`` (state 0), unreachable states dropped."""
    number = {start: 0}
    order = deque([start])
    seen = [start]
    while order:
        q = order.popleft()
        for _, r, _ in edges[q]:
            if r not in number:
                number[r] = len(seen)
                seen.append(r)
                order.append(r)
    return tuple(tuple(dict.fromkeys((a, number[r], m) for a, r, m in edges[q])) for q in seen)


def split_always(p: Pattern) -> tuple[Pattern | None, Pattern | None]:
    """A behaviour as its finite part and the body of its final ``always`` (either may be None)."""
    if isinstance(p, Always):
        return None, p.body
    if isinstance(p, Next) and isinstance(_last(p), Always):
        parts: list[Pattern] = []
        q: Pattern = p
        while isinstance(q, Next):
            parts.extend(q.parts[:-1])
            q = q.parts[-1]
        head = None if not parts else parts[0] if len(parts) == 1 else Next(tuple(parts), p.loc)
        return head, q.body if isinstance(q, Always) else None
    return p, None


def _last(p: Pattern) -> Pattern:
    while isinstance(p, Next):
        p = p.parts[-1]
    return p
