"""Spot automaton → a small frozen transition table (docs/design.md §3).

Spot is the source of truth: the spec's formula is translated once to a deterministic automaton
(finite specs through ``to_finite``, infinite ones as a deterministic ω-automaton), and read into
an immutable table ``(automaton state, spec state) → next automaton state``. Everything on the hot
path (check-trace, validation, the decoding monitor) uses the table; lassos go back to Spot.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .errors import CompileError, SpecError
from .ltl import ALIVE, MARK, Encoding, Formulas, build_formulas, encode
from .spec import Spec

if TYPE_CHECKING:
    import spot

__all__ = ["Automaton", "Verdict", "compile_spec", "translate"]

DEAD = -1
_BDD_FALSE = 0  # BuDDy's id of the constant false BDD


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
        return tuple(n for n, r in zip(self.names, self.delta[q]) if r in self.live)

    @cached_property
    def allowed_index(self) -> tuple[tuple[int, ...], ...]:
        """Per automaton state, the indices of the allowed next spec states."""
        return tuple(tuple(i for i, r in enumerate(row) if r in self.live) for row in self.delta)

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
        aut = self.spot_automaton()
        enc = Encoding(self.names)
        letter = [enc.state_cube(n) for n in [*prefix, *cycle]]
        word = ";".join([*letter[: len(prefix)], "cycle{" + ";".join(letter[len(prefix):]) + "}"])
        return bool(aut.intersects(_spot().parse_word(word, aut.get_dict()).as_automaton()))

    def spot_automaton(self) -> spot.twa_graph:
        """The Spot automaton the table was read from (re-parsed from HOA)."""
        return _spot().automaton(self.hoa)

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
        """Graphviz DOT with spec-state names on the edges; double circles accept."""
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
            for i, r in enumerate(row):
                if r in self.live:
                    by_dst.setdefault(r, []).append(self.names[i])
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


def _spot() -> Any:  # the untyped spot module, imported on first use
    import spot

    return spot


def translate(spec: Spec, formulas: Formulas | None = None) -> spot.twa_graph:
    """The deterministic Spot automaton of ``spec`` over the code propositions."""
    import spot

    f = formulas or build_formulas(spec)
    try:
        if not f.infinite:
            aut = spot.translate(f.coded, "deterministic", "sbacc")
            return spot.to_finite(aut, ALIVE)
        aut = spot.translate(f.coded)
        rm = spot.remove_ap()
        rm.add_ap(MARK)
        return spot.postprocess(rm.strip(aut), "deterministic", "generic")
    except (RuntimeError, SyntaxError) as e:  # Spot reports bad formulas as these
        raise CompileError(f"Spot rejected the formula built for {spec.name}: {e}\n"
                           f"formula: {f.coded}") from e


def compile_spec(spec: Spec, formulas: Formulas | None = None) -> Automaton:
    """Translate ``spec`` with Spot and read the result into a frozen table.

    ``formulas`` overrides the translation (tests use it to check that a wrong reading of the
    pattern is caught). Raises :class:`SpecError` (at the behaviour) when the spec admits no trace.
    """
    import spot

    t0 = time.perf_counter()
    formulas = formulas or build_formulas(spec)
    aut = translate(spec, formulas)
    seconds = time.perf_counter() - t0
    enc = encode(spec)
    bdict = aut.get_dict()
    cubes = [spot.formula_to_bdd(spot.formula(enc.state_cube(n)), bdict, aut) for n in spec.names]
    n = aut.num_states()
    delta: list[list[int]] = [[DEAD] * len(cubes) for _ in range(n)]
    for q in range(n):
        for e in aut.out(q):
            for i, c in enumerate(cubes):
                if (e.cond & c).id() != _BDD_FALSE:
                    if delta[q][i] not in (DEAD, e.dst):
                        raise CompileError(f"automaton of {spec.name} is not deterministic")
                    delta[q][i] = e.dst
    init = aut.get_init_state_number()
    if spec.is_infinite:
        accepting: frozenset[int] = frozenset()
        live = frozenset(q for q in range(n) if not _empty_from(aut, q))
    else:
        accepting = frozenset(q for q in range(n) if aut.state_is_accepting(q))
        live = coreachable(delta, accepting)
    table = Automaton(spec.names, init, tuple(tuple(r) for r in delta), accepting, live,
                      spec.is_infinite, formulas, aut.to_str("hoa"), seconds)
    if init not in live or not table.allowed(init):
        raise SpecError("the spec admits no trace: its behaviour and constraints contradict "
                        "each other", spec.behavior.loc, spec.text,
                        "check the :constraints against the :behavior")
    return table


def _empty_from(aut: spot.twa_graph, q: int) -> bool:
    import spot

    a = spot.make_twa_graph(aut, spot.twa_prop_set.all())
    a.set_init_state(q)
    return bool(a.is_empty())


def coreachable(delta: Sequence[Sequence[int]], accepting: Iterable[int]) -> frozenset[int]:
    """States of a transition table (``delta[q][letter]``, -1 = none) that can reach ``accepting``."""
    rev: dict[int, list[int]] = {}
    for q, row in enumerate(delta):
        for r in row:
            if r >= 0:
                rev.setdefault(r, []).append(q)
    seen = set(accepting)
    todo = list(accepting)
    while todo:
        r = todo.pop()
        for q in rev.get(r, ()):
            if q not in seen:
                seen.add(q)
                todo.append(q)
    return frozenset(seen)
