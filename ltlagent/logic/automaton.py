"""A spec → its deterministic automaton as a small frozen table, and the views derived from it
(docs/design.md §3).

The behaviour is compiled by ltlagent (:mod:`ltlagent.logic.pattern`: a minimal DFA over spec
states); the constraints by Spot (LTLf for finite specs). A finite spec's table is the product of
the two DFAs, minimised; an infinite spec's Büchi automaton (built from the pattern's DFAs) is
determinised by Spot together with the constraints' automaton. Either way the result is an
immutable table ``(automaton state, spec state) → next automaton state``. Everything on the hot
path (check-trace, validation, the decoding monitor) uses the table; lassos and containment go to
Spot, whose automaton each :class:`Automaton` keeps (parsed from its HOA text at most once). Spot
is reached through :mod:`ltlagent.spotlib` only.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import InitVar, dataclass, field, fields
from functools import cached_property

from ltlagent import spotlib
from ltlagent.errors import CompileError, SpecError
from ltlagent.graph import coreachable, reachable
from ltlagent.logic.ltl import ALIVE, Encoding, Formulas, build_formulas, encode
from ltlagent.logic.pattern import Dfa, OmegaEdges, intersect, omega_edges, pattern_dfa, split_always
from ltlagent.spec.syntax import Spec
from ltlagent.spotlib import EdgeTable, TwaGraph

__all__ = ["Automaton", "Verdict", "build_automaton", "behavior_dfa", "DEAD"]

DEAD = -1


@dataclass(frozen=True)
class Verdict:
    """The result of running a trace: where it broke, or how far it is from complete."""

    status: str  # "accepted" | "incomplete" | "rejected"
    trace: tuple[str, ...]
    failed_at: int | None = None  # index of the first step that breaks the spec
    allowed: tuple[str, ...] = ()  # allowed at the failing step, or next after an incomplete prefix
    completion: tuple[str, ...] = ()  # a shortest way to finish an incomplete prefix

    @property
    def accepted(self) -> bool:
        return self.status == "accepted"

    def to_dict(self) -> dict[str, object]:
        return {"status": self.status, "trace": list(self.trace), "failed_at": self.failed_at,
                "allowed": list(self.allowed), "completion": list(self.completion)}


@dataclass(frozen=True)
class Automaton:
    """A deterministic automaton over spec states, as a table.

    ``delta[q][i]`` is the successor of automaton state ``q`` on spec state ``names[i]`` (or -1).
    ``live`` holds the states from which some complete trace (finite) or some accepted infinite
    continuation (infinite) is still possible; transitions into non-live states are not allowed.

    The views every consumer needs (the live table, reachability, the state codes, Spot's
    automaton and its edges) are derived here once, on first use, and cached on the instance; a
    pickled copy carries the table only and re-derives them.
    """

    names: tuple[str, ...]
    initial: int
    delta: tuple[tuple[int, ...], ...]
    accepting: frozenset[int]
    live: frozenset[int]
    infinite: bool
    formulas: Formulas
    hoa: str = field(repr=False, compare=False)
    translate_seconds: float = field(default=0.0, compare=False)
    #: Spot's automaton and its edge table when the builder has them (else derived from ``hoa``).
    spot_graph: InitVar[TwaGraph | None] = None
    spot_edges: InitVar[EdgeTable | None] = None

    def __post_init__(self, spot_graph: TwaGraph | None, spot_edges: EdgeTable | None) -> None:
        """Seed the caches of the Spot views with what the builder already holds."""
        if spot_graph is not None:
            self.__dict__["_spot"] = spot_graph
        if spot_edges is not None:
            self.__dict__["letter_edges"] = spot_edges

    def __getstate__(self) -> dict[str, object]:
        """Pickle the table only: Spot's objects do not pickle, and the views are re-derived."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    # -- queries used everywhere
    @property
    def num_states(self) -> int:
        return len(self.delta)

    def index(self, name: str) -> int:
        return self.names.index(name)

    def step(self, q: int, name: str) -> int:
        """Successor of ``q`` on state ``name``, or -1 when the spec forbids it (dead or not live)."""
        r = self.delta[q][self.names.index(name)] if q >= 0 else DEAD
        return r if r in self.live else DEAD

    def allowed(self, q: int) -> tuple[str, ...]:
        """The states allowed next from ``q`` (successors from which acceptance is reachable)."""
        return tuple(self.names[i] for i in self.allowed_index[q])

    @cached_property
    def allowed_index(self) -> tuple[tuple[int, ...], ...]:
        """Per automaton state, the indices of the allowed next spec states."""
        return tuple(tuple(i for i, r in enumerate(row) if r >= 0) for row in self.live_delta)

    # -- derived views, computed once per automaton
    @cached_property
    def live_delta(self) -> tuple[tuple[int, ...], ...]:
        """``delta`` with every transition into a state that is not live folded into -1: the
        allowed moves, as a table."""
        live = self.live
        return tuple(tuple(r if r in live else DEAD for r in row) for row in self.delta)

    @cached_property
    def reachable(self) -> frozenset[int]:
        """States some allowed trace reaches (through allowed transitions from the initial
        state; empty when the initial state is not live)."""
        return reachable(self.live_delta, self.initial if self.initial in self.live else DEAD)

    @cached_property
    def doomed(self) -> frozenset[int]:
        """States reachable through the raw table that can no longer reach acceptance: the
        monitor never lets a trace enter them."""
        return reachable(self.delta, self.initial) - self.live

    @cached_property
    def visited_names(self) -> frozenset[str]:
        """Spec states on some allowed transition from a reachable state: those a trace visits."""
        return frozenset(self.names[i] for q in self.reachable for i in self.allowed_index[q])

    @cached_property
    def encoding(self) -> Encoding:
        """The binary code of the spec states that Spot's automaton reads."""
        return Encoding(self.names)

    @cached_property
    def state_cubes(self) -> tuple[str, ...]:
        """Each spec state's code as a conjunction of literals: the letters for Spot."""
        return tuple(self.encoding.state_cube(n) for n in self.names)

    @cached_property
    def _spot(self) -> TwaGraph:
        """Spot's automaton: the builder's own object, else parsed from ``hoa`` on first use."""
        return spotlib.from_hoa(self.hoa)

    @cached_property
    def letter_edges(self) -> EdgeTable:
        """Spot's edges per state and spec state: ``(successor, acceptance marks)`` (equivalence
        reads the marks of infinite specs)."""
        return spotlib.letter_edges(self._spot, self.state_cubes)

    @cached_property
    def accepting_marks(self) -> frozenset[int]:
        """The acceptance-mark sets (bit masks) whose infinite recurrence makes a run accept."""
        return spotlib.accepting_mark_sets(self._spot)

    def is_complete(self, q: int) -> bool:
        """A finite trace ending in ``q`` is accepted."""
        return not self.infinite and q in self.accepting

    def can_stop(self, q: int) -> bool:
        """Complete and nothing further allowed: generation must end here."""
        return self.is_complete(q) and not self.allowed_index[q]

    @cached_property
    def distance_to_accept(self) -> tuple[int, ...]:
        """Fewest further steps from each state to an accepting one (finite specs; -1: never)."""
        n = self.num_states
        dist = [-1] * n
        rev: list[list[int]] = [[] for _ in range(n)]
        for q, row in enumerate(self.delta):
            for r in row:
                if r >= 0:
                    rev[r].append(q)
        todo = deque(q for q in self.accepting)
        for q in self.accepting:
            dist[q] = 0
        while todo:
            r = todo.popleft()
            for q in rev[r]:
                if dist[q] < 0:
                    dist[q] = dist[r] + 1
                    todo.append(q)
        return tuple(dist)

    def run(self, trace: list[str] | tuple[str, ...]) -> Verdict:
        """Replay a finite trace (a prefix, for infinite specs)."""
        q = self.initial
        for i, name in enumerate(trace):
            if name not in self.names:
                return Verdict("rejected", tuple(trace), i, self.allowed(q))
            r = self.step(q, name)
            if r < 0:
                return Verdict("rejected", tuple(trace), i, self.allowed(q))
            q = r
        if trace and self.is_complete(q):
            return Verdict("accepted", tuple(trace), allowed=self.allowed(q))
        return Verdict("incomplete", tuple(trace), allowed=self.allowed(q),
                       completion=self.shortest_completion(q))

    def shortest_completion(self, q: int) -> tuple[str, ...]:
        """A shortest sequence of states that takes ``q`` to acceptance (finite specs)."""
        if self.infinite or self.distance_to_accept[q] < 0:
            return ()
        out: list[str] = []
        d = self.distance_to_accept
        while d[q] > 0:
            for i, r in enumerate(self.delta[q]):
                if r >= 0 and d[r] == d[q] - 1:
                    out.append(self.names[i])
                    q = r
                    break
        return tuple(out)

    def accepts_lasso(self, prefix: list[str], cycle: list[str]) -> bool:
        """Does the spec accept the infinite word ``prefix · cycle^ω``? (Asked of Spot.)"""
        if not cycle:
            raise ValueError("the cycle of a lasso must not be empty")
        if not self.infinite:
            return False
        cube = self.encoding.state_cube
        return spotlib.accepts_lasso(self._spot, [cube(n) for n in prefix],
                                     [cube(n) for n in cycle])

    def spot_automaton(self) -> TwaGraph:
        """The table as a Spot automaton (the same object on every call): for a finite spec its
        accepting states are the complete traces' ends; for an infinite one, the deterministic
        ω-automaton the table was read from."""
        return self._spot

    @cached_property
    def _pinned(self) -> TwaGraph:
        return spotlib.from_hoa(_pinned_hoa(self))

    def pinned_spot_automaton(self) -> TwaGraph:
        """A finite spec's language as ω-words for Spot's containment checks: each complete
        trace followed by code 0 (the end) forever."""
        if self.infinite:
            raise ValueError("pinned_spot_automaton is for finite specs: use spot_automaton")
        return self._pinned

    # -- graph views (networkx) for `show`; the compile path itself avoids networkx, whose import
    # alone (0.4 s measured) would cost several times a whole spec compilation
    def graph(self) -> object:
        """The table as a ``networkx.MultiDiGraph`` with spec-state names on the edges (``label``);
        transitions into states that cannot reach acceptance are included too."""
        import networkx as nx

        g = nx.MultiDiGraph()
        g.add_nodes_from(range(self.num_states))
        for q, row in enumerate(self.delta):
            for i, r in enumerate(row):
                if r >= 0:
                    g.add_edge(q, r, label=self.names[i])
        return g

    def to_dot(self) -> str:
        """Graphviz DOT of the live part, spec-state names on the edges; double circles accept."""
        lines = ["digraph automaton {", "  rankdir=LR;", '  node [shape=circle];',
                 '  init [shape=point, label=""];', f"  init -> {self.initial};"]
        for q in range(self.num_states):
            if q not in self.live:
                continue
            shape = "doublecircle" if q in self.accepting and not self.infinite else "circle"
            lines.append(f'  {q} [shape={shape}, label="{q}"];')
        for q, row in enumerate(self.delta):
            if q not in self.live:
                continue
            by_dst: dict[int, list[str]] = {}
            for i in self.allowed_index[q]:
                by_dst.setdefault(row[i], []).append(self.names[i])
            for r, labels in by_dst.items():
                lab = "\\n".join(x.replace('"', '\\"') for x in labels)
                lines.append(f'  {q} -> {r} [label="{lab}"];')
        lines.append("}")
        return "\n".join(lines) + "\n"

    def summary(self) -> dict[str, object]:
        return {
            "states": self.num_states,
            "live_states": len(self.live),
            "initial": self.initial,
            "initially_allowed": list(self.allowed(self.initial)),
            "accepting": sorted(self.accepting) if not self.infinite else [],
            "infinite": self.infinite,
            "translate_seconds": round(self.translate_seconds, 6),
        }


def behavior_dfa(spec: Spec) -> Dfa:
    """The minimal DFA of a finite spec's behaviour over its state indices (no constraints, no
    Spot): the traces the pattern allows, the empty one excluded."""
    prefix, body = split_always(spec.behavior)
    if body is not None or prefix is None:
        raise ValueError(f"spec {spec.name!r} is infinite: its behaviour ends in (always …)")
    return pattern_dfa(prefix, spec.names, text=spec.text)


def build_automaton(spec: Spec) -> Automaton:
    """The spec's deterministic automaton as a frozen table (docs/design.md §3.2).

    The behaviour is compiled by :mod:`ltlagent.logic.pattern`; Spot is called only for the
    constraints (none: no translation at all for a finite spec) and, for an infinite spec, to
    determinise the Büchi automaton of ``prefix · body^ω``. Raises :class:`SpecError` (at the
    behaviour) when the spec admits no trace.
    """
    t0 = time.perf_counter()
    formulas = build_formulas(spec)
    if spec.is_infinite:
        table = _infinite(spec, formulas, t0)
    else:
        table = _finite(spec, formulas, t0)
    if table.initial not in table.live or not table.allowed(table.initial):
        raise SpecError("the spec admits no trace: its behaviour and constraints contradict "
                        "each other", spec.behavior.loc, spec.text,
                        "check the :constraints against the :behavior")
    return table


def _finite(spec: Spec, formulas: Formulas, t0: float) -> Automaton:
    """Pattern DFA × constraints DFA (Spot's LTLf translation read into a table), minimised."""
    dfa = behavior_dfa(spec)
    if spec.constraints:
        dfa = intersect(dfa, _constraints_dfa(spec, formulas))
    live = coreachable(dfa.delta, dfa.accepting)
    bits = encode(spec).bits
    rows = [[(i, r, False) for i, r in enumerate(row) if r >= 0] for row in dfa.delta]
    hoa = _hoa(spec.name, bits, dfa.initial, rows, dfa.accepting)
    return Automaton(spec.names, dfa.initial, dfa.delta, dfa.accepting, live, False, formulas, hoa,
                     time.perf_counter() - t0)


def _constraints_dfa(spec: Spec, formulas: Formulas) -> Dfa:
    """The finite-word automaton Spot makes of the constraints, as a DFA over state indices."""
    try:
        aut = spotlib.translate_finite(formulas.coded, ALIVE, formulas.hidden)
    except spotlib.SpotError as e:
        raise CompileError(f"Spot rejected the constraints of {spec.name}: {e}\n"
                           f"formula: {formulas.coded}") from e
    enc = encode(spec)
    edges = spotlib.letter_edges(aut, [enc.state_cube(n) for n in spec.names])
    return Dfa(len(spec.names), spotlib.initial_state(aut), _deterministic(spec, edges),
               spotlib.accepting_states(aut))


def _deterministic(spec: Spec, edges: EdgeTable) -> tuple[tuple[int, ...], ...]:
    """The successor table of Spot's edges, which must be deterministic on every letter."""
    delta: list[tuple[int, ...]] = []
    for row in edges:
        out = []
        for hits in row:
            succ = {dst for dst, _ in hits}
            if len(succ) > 1:
                raise CompileError(f"automaton of {spec.name} is not deterministic")
            out.append(succ.pop() if succ else DEAD)
        delta.append(tuple(out))
    return tuple(delta)


def _infinite(spec: Spec, formulas: Formulas, t0: float) -> Automaton:
    """The Büchi automaton of ``prefix · body^ω`` from the pattern's DFAs, determinised by Spot
    with the constraints' ω-automaton, read into a table."""
    prefix, body = split_always(spec.behavior)
    if body is None:
        raise ValueError(f"spec {spec.name!r} is finite")
    pre = (pattern_dfa(prefix, spec.names, allow_empty=True, text=spec.text)
           if prefix is not None else None)
    nba_edges: OmegaEdges = omega_edges(pre, pattern_dfa(body, spec.names, text=spec.text))
    enc = encode(spec)
    try:
        nba = spotlib.from_hoa(_hoa(spec.name, enc.bits, 0, nba_edges, None))
        cons = (spotlib.translate_infinite(formulas.coded, formulas.hidden)
                if spec.constraints else None)
        aut = spotlib.determinise(nba, cons)
    except spotlib.SpotError as e:
        raise CompileError(f"Spot failed on the automaton built for {spec.name}: {e}\n"
                           f"constraints: {formulas.coded}") from e
    edges = spotlib.letter_edges(aut, [enc.state_cube(n) for n in spec.names])
    delta = _deterministic(spec, edges)
    live = frozenset(q for q in range(len(delta)) if not spotlib.is_empty_from(aut, q))
    return Automaton(spec.names, spotlib.initial_state(aut), delta, frozenset(), live, True,
                     formulas, spotlib.to_hoa(aut), time.perf_counter() - t0,
                     spot_graph=aut, spot_edges=edges)


def _cube(code: int, bits: int) -> str:
    """A state code as an HOA label over the proposition indices ``0 … bits-1``."""
    return "&".join(("" if code >> i & 1 else "!") + str(i) for i in range(bits))


def _hoa(name: str, bits: int, initial: int,
         rows: Sequence[Sequence[tuple[int, int, bool]]], accepting: frozenset[int] | None) -> str:
    """HOA text of an automaton over the state code (letter i is code i+1); ``rows[q]`` lists
    ``(letter, successor, accepting edge)``. With ``accepting`` (a set of states) the acceptance is
    state-based and the automaton deterministic (a finite spec's table, as Spot's ``to_finite``
    writes one); without, transition-based Büchi (ltlagent's ω-automata)."""
    state_acc = accepting is not None
    props = "trans-labels explicit-labels " + ("state-acc deterministic" if state_acc
                                               else "trans-acc")
    out = ["HOA: v1", f'name: "{_hoa_escape(name)}"', f"States: {len(rows)}", f"Start: {initial}",
           f"AP: {bits} " + " ".join(f'"b{i}"' for i in range(bits)), "acc-name: Buchi",
           "Acceptance: 1 Inf(0)", f"properties: {props}", "--BODY--"]
    for q, row in enumerate(rows):
        out.append(f"State: {q}" + (" {0}" if state_acc and q in (accepting or ()) else ""))
        grouped: dict[tuple[int, bool], list[int]] = {}
        for letter, r, mark in row:
            grouped.setdefault((r, mark), []).append(letter)
        for (r, mark), letters in grouped.items():
            label = " | ".join(_cube(i + 1, bits) for i in letters)
            out.append(f"[{label}] {r}" + (" {0}" if mark else ""))
    out.append("--END--")
    return "\n".join(out) + "\n"


def _hoa_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _pinned_hoa(t: Automaton) -> str:
    """HOA text of a finite table's traces, each followed by code 0 forever (Büchi: the end state
    recurs); letter -1 below is code 0."""
    end = t.num_states
    rows = [[(i, r, False) for i, r in enumerate(row) if r >= 0 and r in t.live]
            + ([(-1, end, False)] if q in t.accepting else [])
            for q, row in enumerate(t.delta)]
    rows.append([(-1, end, False)])
    return _hoa("pinned", t.encoding.bits, t.initial, rows, frozenset({end}))
