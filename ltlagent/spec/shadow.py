"""Event states that can never match: every step they match is taken by earlier states
(docs/design.md §2.5).

A chat step is in the *first* declared state whose options all match it, so a state declared
after a broader one (``User (:from user)`` above ``Confirm (:from user) (:contains "yes")``) never
gets a step, and every rule about it silently changes meaning. :func:`shadowed_states` finds such
states over the declarations alone and only when it is certain: a state is reported when each kind
of step it can match (its author, or each tool it names) is matched by one earlier state whose
options are each implied by the later state's own (same or no ``:contains``; each ``:args``
matcher of the earlier state given the same key in the later one, with a regex that accepts every
value the later one accepts). Overlaps it cannot prove (two different ``:contains`` regexes) are
not reported: a warning is never wrong.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from ltlagent.errors import UsageError
from ltlagent.spec.syntax import AUTHORS, Spec, State

__all__ = ["Shadowed", "shadowed_states", "shadow_warnings", "args_regex_implies", "exact_regex",
           "regex_key"]

#: A call state with ``(:call)`` matches calls to any tool; a cell of its steps stands for them.
_ANY_TOOL = None


@dataclass(frozen=True)
class Shadowed:
    """A state that never matches, and the earlier states that take each of its steps."""

    state: State
    by: tuple[State, ...]

    def message(self) -> str:
        """``state 'Confirm' can never match: every step it matches is taken by 'User' (…)``."""
        takers = " or ".join(f"{s.name!r}" + (f" (declared earlier at {s.loc})" if s.loc else "")
                             for s in self.by)
        return f"state {self.state.name!r} can never match: every step it matches is taken by " \
               f"{takers}"

    def warning(self) -> str:
        """The message in the ``file:line:col: warning: …`` form of the project's diagnostics."""
        where = f"{self.state.loc}: " if self.state.loc else ""
        return f"{where}warning: {self.message()}"


def shadowed_states(states: Sequence[State]) -> tuple[Shadowed, ...]:
    """The event states of ``states`` (in declaration order) that no step can ever be in."""
    out: list[Shadowed] = []
    for k, late in enumerate(states):
        if not late.is_event:
            continue
        takers: list[State] = []
        for cell in _cells(late):
            early = next((e for e in states[:k] if e.is_event and _covers(e, late, cell)), None)
            if early is None:
                break
            if early not in takers:
                takers.append(early)
        else:
            order = {id(s): i for i, s in enumerate(states)}
            out.append(Shadowed(late, tuple(sorted(takers, key=lambda s: order[id(s)]))))
    return tuple(out)


def shadow_warnings(spec: Spec) -> list[str]:
    """One ``file:line:col: warning: …`` line per state of ``spec`` that can never match."""
    return [s.warning() for s in shadowed_states(spec.states)]


def _cells(st: State) -> list[tuple[str, str | None]]:
    """The kinds of step a state can match: (author, None) for text, ("call", tool) for calls."""
    if st.calls is not None:
        return [("call", t) for t in st.calls] if st.calls else [("call", _ANY_TOOL)]
    return [(st.author, None)] if st.author is not None else [(a, None) for a in AUTHORS]


def _covers(early: State, late: State, cell: tuple[str, str | None]) -> bool:
    """Whether every step of ``late`` in ``cell`` certainly matches ``early`` too."""
    who, tool = cell
    if who == "call":
        if early.calls is None or (early.calls and (tool is _ANY_TOOL or tool not in early.calls)):
            return False
    elif early.calls is not None or early.author not in (None, who):
        return False
    if early.contains is not None and (late.contains is None or
                                       regex_key(early.contains) != regex_key(late.contains)):
        return False
    late_args = dict(late.args)
    return all(k in late_args and args_regex_implies(late_args[k], r) for k, r in early.args)


def regex_key(pattern: str) -> object:
    """The same key for regexes that differ only in how they are written (capturing or plain
    groups, ``[e]`` for ``e``, ``a|b`` for ``[ab]``): Python's parse tree with the flags and with
    groups that set no flag spliced in; the pattern itself where a backreference or a parse
    error makes the tree depend on group numbers."""
    import re._constants as C
    import re._parser as P

    def norm(items: list[object]) -> tuple[object, ...]:
        out: list[object] = []
        for item in items:
            assert isinstance(item, tuple)
            op, av = item
            if op is C.SUBPATTERN and not av[1] and not av[2]:
                out += norm(list(av[3]))
            elif op is C.SUBPATTERN:
                out.append((op, av[1], av[2], norm(list(av[3]))))
            elif op is C.BRANCH:
                out.append((op, tuple(norm(list(alt)) for alt in av[1])))
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
                out.append((op, av[0], av[1], norm(list(av[2]))))
            elif op in (C.ASSERT, C.ASSERT_NOT):
                out.append((op, av[0], norm(list(av[1]))))
            elif op is C.ATOMIC_GROUP:
                out.append((op, norm(list(av))))
            elif op is C.IN:
                out.append((op, tuple(av)))
            elif op in (C.GROUPREF, C.GROUPREF_EXISTS):
                raise ValueError(op)
            else:
                out.append((op, av))
        return tuple(out)

    try:
        tree = P.parse(pattern, 0)
        return (tree.state.flags, norm(list(tree)))
    except (re.error, ValueError):
        return pattern


def args_regex_implies(narrow: str, wide: str) -> bool:
    """True when every value that fullmatches ``narrow`` fullmatches ``wide`` (Python's ``re``
    with ``re.ASCII``, as ``(:args …)`` is matched), proved on the content DFAs of
    :mod:`ltlagent.text.content`; False when not, or when it cannot be proved."""
    if narrow == wide:
        return True
    if not exact_regex(narrow):
        return False
    from ltlagent.text.content import pattern_dfa  # content builds automata: only when needed

    try:
        a, b = pattern_dfa(narrow), pattern_dfa(wide)
    except UsageError:
        return False
    # a DFA never accepts more than Python does (its classes are exact on ASCII and stricter
    # beyond); ``narrow``'s is exact, so L(narrow) = DFA(narrow) ⊆ DFA(wide) ⊆ L(wide) suffices
    seen = {(0, 0)}
    todo = deque(seen)
    while todo:
        p, q = todo.popleft()
        if p in a.accepting and q not in b.accepting:
            return False
        for c in range(256):
            p2 = a.step(p, c)
            if p2 < 0:
                continue
            nxt = (p2, b.step(q, c) if q >= 0 else -1)
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return True


def exact_regex(pattern: str) -> bool:
    """Whether :func:`ltlagent.text.content.pattern_dfa` accepts exactly what Python's
    ``re.fullmatch(pattern, s, re.ASCII)`` does on every string: it does unless a character class
    holds a category (``\\d``, ``\\w``, ``\\s``) together with a negation or a non-ASCII character
    (the DFA leaves non-ASCII characters out of such classes, Python does not)."""
    import re._constants as C
    import re._parser as P

    try:
        tree = P.parse(pattern, 0)
    except re.error:  # unreadable: nothing can be proved
        return False
    todo: list[object] = [list(tree)]
    while todo:
        items = todo.pop()
        assert isinstance(items, list)
        for op, av in items:
            if op is C.IN:
                cats = [x for o, x in av if o is C.CATEGORY]
                wide = any(o is C.NEGATE for o, _ in av) or any(
                    (o is C.LITERAL and x > 127) or (o is C.RANGE and x[1] > 127) for o, x in av)
                if cats and (wide or any(str(c).startswith("CATEGORY_NOT") for c in cats)):
                    return False
            elif op is C.BRANCH:
                todo += [list(alt) for alt in av[1]]
            elif op is C.SUBPATTERN:
                todo.append(list(av[3]))
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
                todo.append(list(av[2]))
    return True
