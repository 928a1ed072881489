"""One constraint of a policy, compiled for direct monitoring (docs/design.md §3.6).

A constraint is split where its operators change direction. Each *maximal past subformula* (one
with a past operator and no future one) becomes a small program evaluated once per step by its
recursive definition, children before parents, with one memory bit per temporal node (Havelund and
Roşu, "Synthesizing monitors for safety properties", 2002): ``once φ`` is ``φ or pre``,
``historically φ`` is ``φ and pre``, ``φ since ψ`` is ``ψ or (φ and pre)``, ``previously φ`` is the
value φ had one step before. Nothing is determinised: a step costs the size of the formula. The
rest, the *future skeleton*, sees each past subformula as one proposition and is translated by Spot
(LTLf, as the whole spec was before) into a small DFA whose letters are the state code plus those
bits. A rule whose past operators hold future ones (``once (eventually A)``) cannot be evaluated
step by step; it keeps the construction of §3.5 for that one constraint (:class:`TableRule`).

First-order rules (§2.6) put their quantifiers first. Their body is compiled once, as above, with
one more kind of proposition, the *value atoms* ``(State ?x)`` and ``(mentions State ?x)``; the
monitor (:mod:`ltlagent.logic.engine`) runs one instance of the body per assignment of values.

Everything here is frozen compile data; the transitions a monitor has computed are memoised in
each rule's ``memo`` (a plain dict, so a rule pickles into process pools with what it learnt).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace

from ltlagent import spotlib
from ltlagent.errors import SpecError
from ltlagent.logic.automaton import DEAD, Automaton, build_automaton
from ltlagent.logic.ltl import ALIVE, Encoding
from ltlagent.spec.syntax import (
    MENTIONS,
    PAST_OPERATORS,
    QUANTIFIERS,
    Formula,
    Spec,
    any_sequence,
    has_future,
    has_past,
    value_keys,
)

__all__ = ["Rule", "DirectRule", "TableRule", "ValueAtom", "PastNode", "compile_rule",
           "LIVENESS_BUDGET"]

#: Most local states one rule's liveness search visits before it answers "live" (a rule's own
#: state space is small: this bounds pathological formulas, not realistic ones).
LIVENESS_BUDGET = 50_000

# past-program node kinds
_STATE, _VALUE, _TRUE, _FALSE, _NOT, _AND, _OR, _IMPLIES, _IFF, _PREV, _ONCE, _HIST, _SINCE = \
    range(13)
_PAST_KIND = {"previously": _PREV, "once": _ONCE, "historically": _HIST, "since": _SINCE}
_BOOL_KIND = {"not": _NOT, "and": _AND, "or": _OR, "implies": _IMPLIES, "iff": _IFF}
_FUTURE = {"next": "X[!]", "weak-next": "X", "always": "G", "eventually": "F"}
_FUTURE_BIN = {"until": "U", "release": "R"}
_BOOL_SPOT = {"implies": "->", "iff": "<->", "and": "&", "or": "|"}


@dataclass(frozen=True)
class ValueAtom:
    """``(State ?x)`` (``kind`` "value": the step is in ``state`` and one of the values at
    ``keys`` equals the variable's) or ``(mentions State ?x)`` (the step's text contains it)."""

    kind: str
    state: int
    var: int  # index into the rule's variables
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class PastNode:
    """One node of a past program: its kind, its children (earlier nodes), the spec state (state
    atoms), the value atom's index (value atoms), the memory bit (temporal nodes)."""

    kind: int
    args: tuple[int, ...] = ()
    state: int = -1
    atom: int = -1
    mem: int = -1


class Rule:
    """What the policy monitor asks of a named part: an initial local state, a step, whether a
    local state accepts and whether it can still be completed (all local states are ints)."""

    name: str
    quantifiers: tuple[tuple[str, str], ...] = ()
    atoms: tuple[ValueAtom, ...] = ()

    @property
    def initial(self) -> int:
        raise NotImplementedError

    def step(self, local: int, i: int, abits: int = 0) -> int:
        raise NotImplementedError

    def accepts(self, local: int) -> bool:
        raise NotImplementedError

    def live(self, local: int) -> bool:
        raise NotImplementedError

    def allowed(self, local: int, names: tuple[str, ...]) -> tuple[str, ...]:
        """The states this part alone allows next (value atoms false)."""
        return tuple(n for i, n in enumerate(names)
                     if (r := self.step(local, i)) != DEAD and self.live(r))


@dataclass(frozen=True, eq=False)
class TableRule(Rule):
    """A part given as a whole automaton table: the behaviour, a rule whose past operators hold
    future ones (§3.5's construction for that constraint alone), or an infinite spec."""

    name: str
    automaton: Automaton

    @property
    def initial(self) -> int:
        return self.automaton.initial

    def step(self, local: int, i: int, abits: int = 0) -> int:
        return self.automaton.delta[local][i] if local != DEAD else DEAD

    def accepts(self, local: int) -> bool:
        a = self.automaton
        return local in (a.live if a.infinite else a.accepting)

    def live(self, local: int) -> bool:
        return local in self.automaton.live


@dataclass(frozen=True, eq=False)
class DirectRule(Rule):
    """A constraint monitored directly: a past program and the future skeleton's DFA.

    A local state packs the DFA state and the memory bits: ``memory * dfa_size + q``. A letter
    of the DFA is the state code (``i + 1``) in the low ``code_bits`` bits, then one bit per past
    subformula, then one per value atom of the skeleton."""

    name: str
    n: int  # spec states
    code_bits: int
    program: tuple[PastNode, ...]
    outputs: tuple[int, ...]  # program node of each past proposition
    mem_init: int
    skeleton_atoms: tuple[int, ...]  # the value atom of each skeleton value proposition
    dfa: spotlib.CubeDfa
    quantifiers: tuple[tuple[str, str], ...] = ()  # (forall|exists, ?var), outermost first
    atoms: tuple[ValueAtom, ...] = ()
    memo: dict[tuple[int, int, int], int] = field(default_factory=dict, repr=False)
    live_memo: dict[int, bool] = field(default_factory=dict, repr=False)

    @property
    def initial(self) -> int:
        return self.mem_init * len(self.dfa.edges) + self.dfa.initial

    @property
    def vars(self) -> tuple[str, ...]:
        return tuple(v for _, v in self.quantifiers)

    def step(self, local: int, i: int, abits: int = 0) -> int:
        key = (local, i, abits)
        r = self.memo.get(key)
        if r is None:
            r = self.memo[key] = self._step(local, i, abits)
        return r

    def _step(self, local: int, i: int, abits: int) -> int:
        if local == DEAD:
            return DEAD
        nq = len(self.dfa.edges)
        q, mem = local % nq, local // nq
        vals = [False] * len(self.program)
        new_mem = 0
        for k, node in enumerate(self.program):
            kind, a = node.kind, node.args
            if kind == _STATE:
                v = i == node.state
            elif kind == _VALUE:
                v = bool(abits >> node.atom & 1)
            elif kind == _TRUE:
                v = True
            elif kind == _FALSE:
                v = False
            elif kind == _NOT:
                v = not vals[a[0]]
            elif kind == _AND:
                v = all(vals[x] for x in a)
            elif kind == _OR:
                v = any(vals[x] for x in a)
            elif kind == _IMPLIES:
                v = not vals[a[0]] or vals[a[1]]
            elif kind == _IFF:
                v = vals[a[0]] == vals[a[1]]
            else:
                pre = bool(mem >> node.mem & 1)
                if kind == _PREV:
                    v = pre
                    now = vals[a[0]]
                elif kind == _ONCE:
                    v = now = vals[a[0]] or pre
                elif kind == _HIST:
                    v = now = vals[a[0]] and pre
                else:  # since: args (φ, ψ)
                    v = now = vals[a[1]] or (vals[a[0]] and pre)
                if now:
                    new_mem |= 1 << node.mem
            vals[k] = v
        letter = i + 1
        shift = self.code_bits
        for k, out in enumerate(self.outputs):
            if vals[out]:
                letter |= 1 << (shift + k)
        shift += len(self.outputs)
        for k, atom in enumerate(self.skeleton_atoms):
            if abits >> atom & 1:
                letter |= 1 << (shift + k)
        q2 = self.dfa.step(q, letter)
        return DEAD if q2 == DEAD else new_mem * nq + q2

    def accepts(self, local: int) -> bool:
        return local != DEAD and local % len(self.dfa.edges) in self.dfa.accepting

    def live(self, local: int) -> bool:
        """Whether some continuation (value atoms free where their state is the step's) brings
        this rule alone to an accepting state: a breadth-first search, memoised."""
        if local == DEAD:
            return False
        known = self.live_memo.get(local)
        if known is not None:
            return known
        if self.accepts(local):
            self.live_memo[local] = True
            return True
        letters = self._letters()
        seen = {local}
        todo = deque([local])
        found = False
        while todo and not found:
            x = todo.popleft()
            for i, abits in letters:
                y = self.step(x, i, abits)
                if y == DEAD or y in seen:
                    continue
                if self.live_memo.get(y) or self.accepts(y):
                    found = True
                    break
                if self.live_memo.get(y) is False:
                    continue
                seen.add(y)
                todo.append(y)
            if len(seen) > LIVENESS_BUDGET:
                found = True  # undecided within the budget: not blamed (design §3.6)
                break
        if found:
            self.live_memo[local] = True
        else:
            for x in seen:
                self.live_memo[x] = False
        return found

    def _letters(self) -> list[tuple[int, int]]:
        """Every step a continuation may take: each state, with each combination of the value
        atoms that can hold in it (a future step may bind any value, write any text)."""
        out: list[tuple[int, int]] = []
        for i in range(self.n):
            mine = [k for k, a in enumerate(self.atoms) if a.state == i]
            for combo in range(1 << len(mine)):
                abits = 0
                for j, k in enumerate(mine):
                    if combo >> j & 1:
                        abits |= 1 << k
                out.append((i, abits))
        return out


# -- compiling --------------------------------------------------------------------------------

def _future_inside_past(f: Formula) -> bool:
    if f.op in PAST_OPERATORS:
        return any(has_future(a) for a in f.args)
    return any(_future_inside_past(a) for a in f.args)


class _Builder:
    """Collects a rule's past program, value atoms and skeleton propositions while the
    skeleton's Spot string is written."""

    def __init__(self, spec: Spec, variables: tuple[str, ...]) -> None:
        self.spec = spec
        self.enc = Encoding(spec.names)
        self.index = {n: i for i, n in enumerate(spec.names)}
        self.variables = variables
        self.program: list[PastNode] = []
        self.node_of: dict[tuple[object, ...], int] = {}
        self.mem = 0
        self.mem_init = 0
        self.outputs: list[int] = []
        self.atoms: list[ValueAtom] = []
        self.skeleton_atoms: list[int] = []

    def atom(self, f: Formula) -> int:
        """The index of a value atom (one per distinct atom)."""
        if f.op == MENTIONS:
            a = ValueAtom("mentions", self.index[f.args[0].op], self.variables.index(f.var or ""))
        else:
            st = self.spec.state(f.op)
            a = ValueAtom("value", self.index[f.op], self.variables.index(f.var or ""),
                          value_keys(st, f.var or ""))
        if a not in self.atoms:
            self.atoms.append(a)
        return self.atoms.index(a)

    def node(self, f: Formula) -> int:
        """The program node computing a past-or-Boolean subformula (shared when equal)."""
        if f.is_state and f.var is None:
            return self._add(PastNode(_STATE, state=self.index[f.op]))
        if f.is_state or f.op == MENTIONS:
            return self._add(PastNode(_VALUE, atom=self.atom(f)))
        if f.op in ("true", "false"):
            return self._add(PastNode(_TRUE if f.op == "true" else _FALSE))
        kids = tuple(self.node(a) for a in f.args)
        if f.op in _BOOL_KIND:
            return self._add(PastNode(_BOOL_KIND[f.op], kids))
        kind = _PAST_KIND[f.op]
        key = ("t", kind, kids)
        if key in self.node_of:
            return self.node_of[key]
        bit = self.mem
        self.mem += 1
        if kind == _HIST:
            self.mem_init |= 1 << bit
        self.program.append(PastNode(kind, kids, mem=bit))
        self.node_of[key] = len(self.program) - 1
        return len(self.program) - 1

    def _add(self, node: PastNode) -> int:
        key = (node.kind, node.args, node.state, node.atom)
        if key not in self.node_of:
            self.program.append(node)
            self.node_of[key] = len(self.program) - 1
        return self.node_of[key]

    def skeleton(self, f: Formula) -> str:
        """The future part in Spot's syntax; past subformulas and value atoms as propositions."""
        if f.op in PAST_OPERATORS or (has_past(f) and not has_future(f)):
            node = self.node(f)
            if node not in self.outputs:
                self.outputs.append(node)
            return f"past{self.outputs.index(node)}"
        if f.is_state and f.var is None:
            return self.enc.state_cube(f.op)
        if f.is_state or f.op == MENTIONS:
            a = self.atom(f)
            if a not in self.skeleton_atoms:
                self.skeleton_atoms.append(a)
            return f"val{self.skeleton_atoms.index(a)}"
        if f.op in ("true", "false"):
            return f.op
        if f.op == "ltl":
            return spotlib.rename_atomic_propositions(f.raw or "", self.enc.state_cube)
        subs = [self.skeleton(a) for a in f.args]
        if f.op == "not":
            return f"!({subs[0]})"
        if f.op in _FUTURE:
            return f"{_FUTURE[f.op]}({subs[0]})"
        if f.op in _FUTURE_BIN:
            return f"(({subs[0]}) {_FUTURE_BIN[f.op]} ({subs[1]}))"
        return "(" + f" {_BOOL_SPOT[f.op]} ".join(f"({s})" for s in subs) + ")"


def compile_rule(spec: Spec, name: str, constraint: Formula) -> Rule:
    """Compile one constraint of an event spec into a monitorable rule."""
    quantifiers: list[tuple[str, str]] = []
    body = constraint
    while body.op in QUANTIFIERS:
        quantifiers += [(body.op, v) for v in body.vars]
        body = body.args[0]
    if _future_inside_past(body):
        if quantifiers or body.is_first_order:
            raise SpecError(f"rule {name!r}: a future operator inside a past one cannot be "
                            "monitored for each value", constraint.loc, spec.text or None)
        part = replace(spec, behavior=any_sequence(spec.names), constraints=(constraint,),
                       behavior_declared=False)
        return TableRule(name, build_automaton(part))
    b = _Builder(spec, tuple(v for _, v in quantifiers))
    skel = b.skeleton(body)
    enc = b.enc
    props = [*enc.aps, *(f"past{k}" for k in range(len(b.outputs))),
             *(f"val{k}" for k in range(len(b.skeleton_atoms)))]
    zero = " & ".join(f"!{p}" for p in props)
    formula = (f"{ALIVE} & ({ALIVE} U G!{ALIVE}) & G(!{ALIVE} -> ({zero})) & "
               + spotlib.ltlf_to_ltl(skel, ALIVE))
    try:
        dfa = spotlib.finite_cube_dfa(formula, ALIVE, props)
    except spotlib.SpotError as e:
        raise SpecError(f"rule {name!r}: Spot refused its formula ({e})", constraint.loc,
                        spec.text or None) from None
    return DirectRule(name, len(spec.names), enc.bits, tuple(b.program), tuple(b.outputs),
                      b.mem_init, tuple(b.skeleton_atoms), dfa, tuple(quantifiers),
                      tuple(b.atoms))
