"""Spot automaton → a small frozen transition table, and the views derived from it (docs/design.md §3).

Spot is the source of truth: the spec's formula is translated once to a deterministic automaton
(finite specs through ``to_finite``, infinite ones as a deterministic ω-automaton), and read into
an immutable table ``(automaton state, spec state) → next automaton state``. Everything on the hot
path (check-trace, validation, the decoding monitor) uses the table; lassos go back to Spot, whose
automaton each :class:`Automaton` keeps (parsed at most once). Spot is reached through
:mod:`ltlagent.spotlib` only.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import InitVar, dataclass, field, fields
from functools import cached_property

from ltlagent import spotlib
from ltlagent.errors import CompileError, SpecError
from ltlagent.graph import coreachable, reachable
from ltlagent.logic.ltl import ALIVE, MARK, Encoding, Formulas, build_formulas, encode
from ltlagent.spec.syntax import Spec
from ltlagent.spotlib import EdgeTable, TwaGraph

__all__ = ["Automaton", "Verdict", "build_automaton", "translate", "DEAD"]

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
        """The Spot automaton the table was read from (the same object on every call)."""
        return self._spot

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


def translate(spec: Spec, formulas: Formulas | None = None) -> TwaGraph:
    """The deterministic Spot automaton of ``spec`` over the code propositions."""
    f = formulas or build_formulas(spec)
    try:
        if not f.infinite:
            return spotlib.translate_finite(f.coded, ALIVE, f.hidden)
        return spotlib.translate_infinite(f.coded, (MARK, *f.hidden))
    except spotlib.SpotError as e:
        raise CompileError(f"Spot rejected the formula built for {spec.name}: {e}\n"
                           f"formula: {f.coded}") from e


def build_automaton(spec: Spec, formulas: Formulas | None = None) -> Automaton:
    """Translate ``spec`` with Spot and read the result into a frozen table.

    ``formulas`` overrides the translation (tests use it to check that a wrong reading of the
    pattern is caught). Raises :class:`SpecError` (at the behaviour) when the spec admits no trace.
    """
    t0 = time.perf_counter()
    formulas = formulas or build_formulas(spec)
    aut = translate(spec, formulas)
    seconds = time.perf_counter() - t0
    enc = encode(spec)
    edges = spotlib.letter_edges(aut, [enc.state_cube(n) for n in spec.names])
    delta: list[list[int]] = []
    for row in edges:
        delta.append([])
        for hits in row:
            succ = {dst for dst, _ in hits}
            if len(succ) > 1:
                raise CompileError(f"automaton of {spec.name} is not deterministic")
            delta[-1].append(succ.pop() if succ else DEAD)
    n = len(delta)
    if spec.is_infinite:
        accepting: frozenset[int] = frozenset()
        live = frozenset(q for q in range(n) if not spotlib.is_empty_from(aut, q))
    else:
        accepting = spotlib.accepting_states(aut)
        live = coreachable(delta, accepting)
    table = Automaton(spec.names, spotlib.initial_state(aut), tuple(tuple(r) for r in delta),
                      accepting, live, spec.is_infinite, formulas, spotlib.to_hoa(aut), seconds,
                      spot_graph=aut, spot_edges=edges)
    if table.initial not in live or not table.allowed(table.initial):
        raise SpecError("the spec admits no trace: its behaviour and constraints contradict "
                        "each other", spec.behavior.loc, spec.text,
                        "check the :constraints against the :behavior")
    return table
