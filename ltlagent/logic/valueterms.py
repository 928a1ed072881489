"""The values a first-order rule lets a call bind now, as a value term (docs/design.md §14.1).

The decoder cannot wait for a call to be written to judge its values: it must know, before the
call starts, which values of a bound argument keep every rule alive, as a language it can
intersect with the argument's schema automaton (:mod:`ltlagent.text.values`). That language is
computed here for the fragment that covers the rules people write about data provenance:

    (forall (?x) (always (implies TRIGGER CONDITION)))

where TRIGGER is a value atom ``(State ?x)`` or a disjunction of them, and CONDITION a past
formula (``once``, ``historically``, ``previously``, ``since``, Boolean connectives) over value
atoms ``(B ?x)``, ``(mentions S ?x)`` and state atoms. At a step in a trigger state that binds
``v``, the rule holds iff CONDITION holds for ``v``; CONDITION at step ``j`` denotes a set of
values: ``(B ?x)`` the values step ``j`` bound (if it was a B step), ``(mentions S ?x)`` the
substrings of its text (if an S step), and the connectives and past operators their unions,
intersections and complements over the steps so far. Any other rule shape gives None: the
decoder then writes the call unconstrained by value and the call is judged after it is written.
"""

from __future__ import annotations

from collections.abc import Sequence

from ltlagent.logic.composite import StepValues
from ltlagent.spec.syntax import MENTIONS, Formula, Spec, value_keys
from ltlagent.text.values import ValueAnd, ValueEnum, ValueNot, ValueOr, ValueSubstrings, ValueTerm

__all__ = ["ANY", "NONE", "fragment", "trigger_term", "condition_term"]

#: Every value (an empty conjunction) and no value (an empty disjunction).
ANY: ValueTerm = ValueAnd(())
NONE: ValueTerm = ValueOr(())
_PAST = ("once", "historically", "previously", "since")
_BOOL = ("not", "and", "or", "implies")


def _or(terms: Sequence[ValueTerm]) -> ValueTerm:
    """A union, folded: constants dropped or absorbing, enums and substrings merged."""
    if any(t == ANY for t in terms):
        return ANY
    values: dict[str, None] = {}
    texts: dict[str, None] = {}
    rest: list[ValueTerm] = []
    for t in terms:
        if t == NONE:
            continue
        if isinstance(t, ValueEnum):
            values.update(dict.fromkeys(t.values))
        elif isinstance(t, ValueSubstrings):
            texts.update(dict.fromkeys(t.texts))
        elif isinstance(t, ValueOr):
            rest.extend(t.terms)
        else:
            rest.append(t)
    out: list[ValueTerm] = []
    if values:
        out.append(ValueEnum(tuple(values)))
    if texts:
        out.append(ValueSubstrings(tuple(texts)))
    out += rest
    return out[0] if len(out) == 1 else ValueOr(tuple(out))


def _and(terms: Sequence[ValueTerm]) -> ValueTerm:
    if any(t == NONE for t in terms):
        return NONE
    kept = [t for t in terms if t != ANY]
    return kept[0] if len(kept) == 1 else ValueAnd(tuple(kept))


def _not(t: ValueTerm) -> ValueTerm:
    if t == ANY:
        return NONE
    if t == NONE:
        return ANY
    return t.term if isinstance(t, ValueNot) else ValueNot(t)


def condition_term(f: Formula, var: str, spec: Spec, history: Sequence[StepValues],
                   now: int) -> ValueTerm | None:
    """The values ``v`` for which ``f`` holds at the step about to be taken (a step in state
    index ``now`` that binds ``v``), after the steps ``history``; None outside the fragment."""
    index = {n: i for i, n in enumerate(spec.names)}
    memo: dict[tuple[int, int], ValueTerm | None] = {}

    def at(g: Formula, j: int) -> ValueTerm | None:
        key = (id(g), j)
        if key not in memo:
            memo[key] = _at(g, j)
        return memo[key]

    def _at(g: Formula, j: int) -> ValueTerm | None:
        current = j == len(history)
        state = now if current else history[j].state
        if g.op in ("true", "false"):
            return ANY if g.op == "true" else NONE
        if g.is_state and g.var is None:
            return ANY if index[g.op] == state else NONE
        if g.is_state:  # (B ?x)
            if g.var != var or index[g.op] != state:
                return None if g.var != var else NONE
            if current:
                return ANY  # the step binds v itself
            keys = value_keys(spec.state(g.op), var)
            vals = [v for k in keys for v in history[j].keyed.get(k, ())]
            return ValueEnum(tuple(dict.fromkeys(vals))) if vals else NONE
        if g.op == MENTIONS:
            if g.var != var:
                return None
            if index[g.args[0].op] != state:
                return NONE
            return ANY if current else (ValueSubstrings((history[j].text,))
                                        if history[j].text else NONE)
        subs: list[ValueTerm] = []
        if g.op in _BOOL:
            for a in g.args:
                t = at(a, j)
                if t is None:
                    return None
                subs.append(t)
            if g.op == "not":
                return _not(subs[0])
            if g.op == "and":
                return _and(subs)
            if g.op == "or":
                return _or(subs)
            return _or([_not(subs[0]), subs[1]])
        if g.op == "previously":
            return at(g.args[0], j - 1) if j > 0 else NONE
        if g.op in ("once", "historically"):
            for k in range(j + 1):
                t = at(g.args[0], k)
                if t is None:
                    return None
                subs.append(t)
            return _or(subs) if g.op == "once" else _and(subs)
        if g.op == "since":  # ψ at some k ≤ j and φ at every step after k
            out: list[ValueTerm] = []
            for k in range(j + 1):
                t = at(g.args[1], k)
                if t is None:
                    return None
                after = [at(g.args[0], m) for m in range(k + 1, j + 1)]
                if any(a is None for a in after):
                    return None
                out.append(_and([t, *(a for a in after if a is not None)]))
            return _or(out)
        return None  # a future operator, iff, raw LTL

    return at(f, len(history))


def fragment(rule: Formula) -> tuple[str, frozenset[str], Formula] | None:
    """A rule ``forall ?x (always (implies TRIGGER PAST-COND))`` read as its variable, the states
    of its trigger (each binding ``?x``) and its condition; None for any other rule."""
    if rule.op != "forall" or len(rule.vars) != 1:
        return None
    var = rule.vars[0]
    body = rule.args[0]
    if body.op != "always" or body.args[0].op != "implies":
        return None
    trig, cond = body.args[0].args
    atoms = trig.args if trig.op == "or" else (trig,)
    if not all(a.is_state and a.var == var for a in atoms):
        return None
    return var, frozenset(a.op for a in atoms), cond


def trigger_term(rule: Formula, spec: Spec, state: int, history: Sequence[StepValues]
                 ) -> tuple[str, ValueTerm] | None:
    """For a rule in the fragment: its variable and the term of the values a step in ``state``
    may bind to it now (every value when the state is no trigger of the rule); None outside the
    fragment."""
    parts = fragment(rule)
    if parts is None:
        return None
    var, triggers, cond = parts
    if spec.names[state] not in triggers:
        return var, ANY
    term = condition_term(cond, var, spec, history, state)
    return None if term is None else (var, term)
