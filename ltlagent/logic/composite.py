"""A policy's parts judged together, without building their product up front (docs/design.md §3.6).

:class:`Composite` is the product of the parts (the behaviour's DFA and each propositional rule),
explored on the fly: a composite state is the tuple of the parts' local states, interned to an
int the first time a trace reaches it, with its transitions and its liveness memoised. A trace
pays one dict lookup per step once its states are known, as a precomputed table would, but only
the states traces actually reach are ever made: ten rules cost ten small automata, not their
exponential product. Liveness ("can the conversation still be completed?") is a breadth-first
search over composite states that stops at the first one every part accepts; a step after which
every part accepts, the common case for safety rules, needs no search.

:class:`ValueInstances` runs a first-order rule (§2.6): one instance of the rule's body per
assignment of values to its variables, the values ranging over those bound so far; an instance
created when its value first appears is brought up to date by replaying the steps before.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product

from ltlagent.logic.automaton import DEAD
from ltlagent.logic.rules import DirectRule, Rule

__all__ = ["Composite", "ValueInstances", "StepValues", "step_values", "JOINT_BUDGET", "INITIAL"]

#: Most composite states one liveness search visits; past it, each part's own liveness answers
#: (a conflict between parts that only shows that far ahead is then found later, design §3.6).
JOINT_BUDGET = 20_000
#: The composite state before the first step (the empty trace is never complete).
INITIAL = 0
_UNKNOWN = -2


@dataclass(frozen=True, eq=False)
class Composite:
    """The on-the-fly product of ``parts`` over ``n`` spec states (memo tables inside)."""

    parts: tuple[Rule, ...]
    n: int
    ids: dict[tuple[int, ...], int] = field(default_factory=dict, repr=False)
    states: list[tuple[int, ...]] = field(default_factory=list, repr=False)
    delta: list[list[int]] = field(default_factory=list, repr=False)
    live_memo: list[int] = field(default_factory=list, repr=False)
    allowed_memo: dict[int, tuple[int, ...]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._intern((0, *(p.initial for p in self.parts)))

    def _intern(self, key: tuple[int, ...]) -> int:
        cid = self.ids.get(key)
        if cid is None:
            cid = self.ids[key] = len(self.states)
            self.states.append(key)
            self.delta.append([_UNKNOWN] * self.n)
            self.live_memo.append(-1)
        return cid

    def locals(self, cid: int) -> tuple[int, ...]:
        """Each part's local state in composite state ``cid``."""
        return self.states[cid][1:]

    def step(self, cid: int, i: int) -> int:
        """The composite state after a step in spec state ``i`` (DEAD: a part has no move)."""
        if cid == DEAD:
            return DEAD
        row = self.delta[cid]
        r = row[i]
        if r == _UNKNOWN:
            key = [1]
            for p, local in zip(self.parts, self.states[cid][1:]):
                nxt = p.step(local, i)
                if nxt == DEAD:
                    key = []
                    break
                key.append(nxt)
            r = row[i] = self._intern(tuple(key)) if key else DEAD
        return r

    def accepts(self, cid: int) -> bool:
        """Whether the trace may end here: at least one step, and every part accepts."""
        if cid == DEAD:
            return False
        key = self.states[cid]
        return key[0] == 1 and all(p.accepts(x) for p, x in zip(self.parts, key[1:]))

    def live(self, cid: int) -> bool:
        """Whether some continuation ends where every part accepts (memoised search)."""
        if cid == DEAD:
            return False
        known = self.live_memo[cid]
        if known >= 0:
            return known == 1
        if self.accepts(cid):
            self.live_memo[cid] = 1
            return True
        if not all(p.live(x) for p, x in zip(self.parts, self.locals(cid))):
            self.live_memo[cid] = 0
            return False
        seen = {cid}
        todo = deque([cid])
        found = False
        while todo and not found:
            x = todo.popleft()
            for i in range(self.n):
                y = self.step(x, i)
                if y == DEAD or y in seen or self.live_memo[y] == 0:
                    continue
                if self.live_memo[y] == 1 or self.accepts(y):
                    found = True
                    break
                seen.add(y)
                todo.append(y)
            if len(seen) > JOINT_BUDGET:
                found = True  # each part is live on its own (checked above): design §3.6
                break
        if found:
            self.live_memo[cid] = 1
        else:
            for x in seen:
                self.live_memo[x] = 0
        return found

    def explore(self, budget: int) -> int | None:
        """The number of live composite states a trace can reach, explored breadth-first from
        the start (for ``show``); None when there are more than ``budget``."""
        seen = {INITIAL}
        todo = deque([INITIAL])
        while todo:
            x = todo.popleft()
            for i in self.allowed(x):
                y = self.step(x, i)
                if y not in seen:
                    if len(seen) >= budget:
                        return None
                    seen.add(y)
                    todo.append(y)
        return len(seen)

    def allowed(self, cid: int) -> tuple[int, ...]:
        """The spec states a step may be in now (its composite state stays live)."""
        if cid == DEAD:
            return ()
        got = self.allowed_memo.get(cid)
        if got is None:
            got = self.allowed_memo[cid] = tuple(
                i for i in range(self.n) if self.live(self.step(cid, i)))
        return got


# -- values ------------------------------------------------------------------------------------

def _scalar(v: object) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True,
                                                   separators=(",", ":"))


def _at(arguments: Mapping[str, object], key: str) -> list[str]:
    """The values an argument key binds (design §2.6): a string as is, a number, boolean or
    object as its JSON text, each element of a list; nothing for an absent key or null."""
    v: object = arguments
    for part in key.split("."):
        if not isinstance(v, Mapping) or part not in v:
            return []
        v = v[part]
    if v is None:
        return []
    if isinstance(v, list):
        return [_scalar(x) for x in v if x is not None]
    return [_scalar(v)]


@dataclass(frozen=True)
class StepValues:
    """What a step offers the value atoms: its state, the values at each binding key, its text."""

    state: int
    keyed: Mapping[str, tuple[str, ...]]
    text: str

    @property
    def bound(self) -> tuple[str, ...]:
        """Every value the step binds, in order, without repeats."""
        seen: dict[str, None] = {}
        for vals in self.keyed.values():
            for v in vals:
                seen.setdefault(v, None)
        return tuple(seen)


def step_values(state: int, binds: Sequence[tuple[str, str]],
                arguments: Mapping[str, object] | None, text: str) -> StepValues:
    """The values a step in ``state`` binds through the state's ``(:args (KEY ?var))``."""
    keyed: dict[str, tuple[str, ...]] = {}
    if arguments is not None:
        for key, _ in binds:
            vals = _at(arguments, key)
            if vals:
                keyed[key] = tuple(vals)
    return StepValues(state, keyed, text)


class ValueInstances:
    """A first-order rule's instances in one conversation: the local state of the rule's body
    for each assignment of values (tuples over the values bound so far, in order of appearance)."""

    def __init__(self, rule: DirectRule) -> None:
        self.rule = rule
        self.domain: list[str] = []
        self.local: dict[tuple[str, ...], int] = {}
        self.history: list[StepValues] = []
        if not rule.vars:
            self.local[()] = rule.initial

    def copy(self) -> ValueInstances:
        c = ValueInstances.__new__(ValueInstances)
        c.rule, c.domain, c.local = self.rule, list(self.domain), dict(self.local)
        c.history = list(self.history)
        return c

    def _abits(self, sigma: tuple[str, ...], sv: StepValues) -> int:
        bits = 0
        for k, a in enumerate(self.rule.atoms):
            if a.state != sv.state:
                continue
            value = sigma[a.var]
            if a.kind == "mentions":
                hit = value in sv.text
            else:
                hit = any(value in sv.keyed.get(key, ()) for key in a.keys)
            if hit:
                bits |= 1 << k
        return bits

    def after(self, sv: StepValues) -> dict[tuple[str, ...], int]:
        """Each instance's local state after the step (new values' instances replayed first)."""
        rule = self.rule
        local = dict(self.local)
        new = [v for v in sv.bound if v not in self.domain]
        if new and rule.vars:
            domain = [*self.domain, *new]
            for sigma in product(domain, repeat=len(rule.vars)):
                if sigma in local:
                    continue
                x = rule.initial
                for past in self.history:
                    x = rule.step(x, past.state, self._abits(sigma, past))
                local[sigma] = x
        return {sigma: rule.step(x, sv.state, self._abits(sigma, sv))
                for sigma, x in local.items()}

    def push(self, sv: StepValues, after: dict[tuple[str, ...], int] | None = None) -> None:
        """Take the step; ``after``: :meth:`after` of it, when already computed."""
        self.local = self.after(sv) if after is None else after
        for v in sv.bound:
            if v not in self.domain:
                self.domain.append(v)
        self.history.append(sv)

    # -- verdicts
    def dead(self, local: Mapping[tuple[str, ...], int] | None = None
             ) -> tuple[tuple[str, str], ...] | None:
        """The assignment of a dead instance, when the rule can no longer hold (only a rule
        whose quantifiers are all ``forall`` dies before the end: an ``exists`` may still be
        met by a value not yet seen); None while it can."""
        if any(q != "forall" for q, _ in self.rule.quantifiers):
            return None
        for sigma, x in (self.local if local is None else local).items():
            if not self.rule.live(x):
                return tuple(zip(self.rule.vars, sigma))
        return None

    def accepts(self) -> bool:
        """The rule's truth on the trace so far, quantifiers over the values bound so far."""
        rule = self.rule

        def holds(level: int, prefix: tuple[str, ...]) -> bool:
            if level == len(rule.quantifiers):
                x = self.local.get(prefix, DEAD)
                return rule.accepts(x)
            each: Iterable[bool] = (holds(level + 1, (*prefix, v)) for v in self.domain)
            return all(each) if rule.quantifiers[level][0] == "forall" else any(each)

        return holds(0, ())
