"""A compiled policy over chat events: classify each step of a conversation into the spec's
event states, monitor the parts, and say which named constraint breaks where (docs/design.md §12).

:class:`Policy` is the compile step (frozen, picklable: it runs inside process pools, Ray or Spark
UDFs): the spec, the event classifier, and one monitor per named part -- the behaviour's DFA and
each constraint compiled on its own (:mod:`ltlagent.logic.rules`: past operators evaluated step by
step, no determinisation) -- composed on the fly (:mod:`ltlagent.logic.composite`, design §3.6).
First-order rules (§2.6) run one instance per assignment of the values bound so far.
:class:`PolicyCursor` is the runtime: one per conversation, the only thing that changes per step.
``check-log``, the guard in front of an API and the decoder all classify through the same
:class:`Classifier` and step the same monitors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ltlagent.chat.events import Event, conversation_events, message_events
from ltlagent.errors import LogError, UsageError
from ltlagent.logic.automaton import DEAD, build_automaton
from ltlagent.logic.composite import (
    INITIAL,
    Composite,
    StepValues,
    ValueInstances,
    step_values,
)
from ltlagent.logic.rules import DirectRule, Rule, TableRule, compile_rule
from ltlagent.logic.valueterms import ANY, NONE, trigger_term
from ltlagent.logic.valuewords import value_reason
from ltlagent.spec.syntax import (
    BEHAVIOR_NAME,
    Spec,
    State,
    any_sequence,
    load_spec,
    value_keys,
)
from ltlagent.text.values import ValueAnd, ValueTerm

__all__ = ["Policy", "PolicyCursor", "Classifier", "Decision", "Violation", "ConversationReport",
           "TOGETHER", "VERDICTS", "describe_allowed"]

#: Reported as the constraint when the parts are each satisfiable but not together.
TOGETHER = "(constraints together)"
#: Verdicts of a conversation, in the order summaries list them.
VERDICTS = ("ok", "violated", "incomplete", "unmatched", "malformed")


def describe_allowed(allowed: Sequence[str], names: Sequence[str]) -> str:
    """The allowed states in words: the list, or what is not allowed when that is shorter."""
    if not allowed:
        return "nothing further"
    rest = [n for n in names if n not in allowed]
    if rest and len(rest) < len(allowed):
        return "anything but " + ", ".join(rest)
    return ", ".join(allowed)


@dataclass(frozen=True)
class _Matcher:
    """One event state's test, compiled: the state's index and what an event must have."""

    index: int
    calls: frozenset[str] | None  # None: any tool (or not a call state)
    args: tuple[tuple[str, re.Pattern[str]], ...]
    contains: re.Pattern[str] | None


@dataclass(frozen=True)
class Classifier:
    """Which event state a step is in: the first declared state whose options all match.

    A state with ``(:call …)`` matches tool calls only, any other state text steps only;
    ``(:from …)`` narrows the author (calls are the assistant's). ``(:args (K (:regex R)))``
    fullmatches R (ASCII classes, as the decoder's DFAs) against argument K — a string value as
    is, any other value as its JSON text; a missing key does not match. ``(:contains R)`` is
    Python's ``re.search`` on the text (for a call: its arguments as written).
    """

    names: tuple[str, ...]
    by_kind: Mapping[tuple[str, str], tuple[_Matcher, ...]]

    @staticmethod
    def build(states: Sequence[State]) -> Classifier:
        by_kind: dict[tuple[str, str], list[_Matcher]] = {}
        for i, st in enumerate(states):
            kind = "call" if st.calls is not None else "text"
            authors = ("assistant",) if kind == "call" else \
                ((st.author,) if st.author else ("system", "user", "assistant", "tool"))
            m = _Matcher(i, frozenset(st.calls) if st.calls else None,
                         tuple((k, re.compile(r, re.ASCII)) for k, r in st.args),
                         re.compile(st.contains) if st.contains is not None else None)
            for a in authors:
                by_kind.setdefault((a, kind), []).append(m)
        return Classifier(tuple(s.name for s in states),
                          {k: tuple(v) for k, v in by_kind.items()})

    def index(self, event: Event) -> int:
        """The index of the event's state, or -1 when no state matches it."""
        for m in self.by_kind.get((event.author, event.kind), ()):
            if m.calls is not None and event.tool not in m.calls:
                continue
            if m.contains is not None and m.contains.search(event.text) is None:
                continue
            if m.args and not _args_match(m.args, event.arguments):
                continue
            return m.index
        return -1

    def state(self, event: Event) -> str | None:
        i = self.index(event)
        return self.names[i] if i >= 0 else None


def _args_match(tests: tuple[tuple[str, re.Pattern[str]], ...],
                arguments: Mapping[str, object] | None) -> bool:
    if arguments is None:
        return False
    for key, rx in tests:
        if key not in arguments:
            return False
        v = arguments[key]
        s = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
        if rx.fullmatch(s) is None:
            return False
    return True


Binding = tuple[tuple[str, str], ...]


def _binding_text(binding: Binding) -> str:
    return ", ".join(f"{var} = {value!r}" for var, value in binding)


@dataclass(frozen=True)
class Violation:
    """The first failure of one named part: the step (0-based, in the trace) and the message
    (0-based, in the conversation) where it can no longer hold, the state there and what the
    part allowed instead. ``constraint`` None marks a step that matches no state. ``binding``:
    for a first-order rule, the values of its variables in the instance that broke; ``reason``:
    for a rule of the enforced fragment, why the value breaks it, in words (``valuewords``)."""

    constraint: str | None
    step: int
    message: int
    state: str | None
    allowed: tuple[str, ...]
    binding: Binding = ()
    reason: str = ""

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {"constraint": self.constraint, "step": self.step,
                                "message": self.message, "state": self.state,
                                "allowed": list(self.allowed)}
        if self.binding:
            d["binding"] = dict(self.binding)
        if self.reason:
            d["reason"] = self.reason
        return d


@dataclass(frozen=True)
class ConversationReport:
    """The verdict on one conversation (``VERDICTS``) and why."""

    verdict: str
    steps: int = 0
    trace: tuple[str, ...] = ()  # the states up to the end; left empty when ok (see Policy.trace)
    violations: tuple[Violation, ...] = ()
    unmet: tuple[str, ...] = ()  # parts an incomplete conversation leaves unmet
    error: str | None = None  # malformed: what is wrong, with the message index
    error_message: int | None = None

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {"verdict": self.verdict, "steps": self.steps,
                                "violations": [v.to_dict() for v in self.violations]}
        if self.unmet:
            d["unmet"] = list(self.unmet)
        if self.error is not None:
            d["error"] = self.error
            d["message"] = self.error_message
        return d


@dataclass(frozen=True)
class Decision:
    """Whether one step may come now, and why not."""

    allowed: bool
    state: str | None  # the step's state (None: it matches no declared state)
    violated: tuple[str, ...]  # the parts it breaks
    allowed_states: tuple[str, ...]  # what the policy allowed at this point
    names: tuple[str, ...] = field(default=(), repr=False, compare=False)  # all the states
    #: for a first-order rule it breaks: the values of the instance that breaks
    binding: Binding = ()
    #: for such a rule of the enforced fragment: why the value breaks it, in words
    reason: str = ""

    def explain(self) -> str:
        """One sentence for a model or a person: which rule forbids the step, what is allowed
        (for a value a first-order rule refuses: the argument, the value, the condition it
        fails and the values the rule allows now)."""
        now = describe_allowed(self.allowed_states, self.names)
        if self.allowed:
            return f"allowed: {self.state}"
        if self.state is None:
            return f"forbidden: this step matches no state of the policy; allowed now: {now}"
        if self.reason:
            values = f": {self.reason}"
        else:
            values = f" (for {_binding_text(self.binding)})" if self.binding else ""
        return (f"forbidden: a {self.state} step now breaks {', '.join(self.violated)}{values}; "
                f"allowed now: {now}")

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {"allowed": self.allowed, "state": self.state,
                                "violated": list(self.violated),
                                "allowed_states": list(self.allowed_states)}
        if self.binding:
            d["binding"] = dict(self.binding)
        if self.reason:
            d["reason"] = self.reason
        return d


@dataclass(frozen=True)
class Policy:
    """A spec compiled for chat events: the classifier and the monitors of its parts.

    ``composite`` judges the propositional parts together (for an infinite spec: the whole
    automaton, §3.5); ``blame`` are the named parts run alone to say which broke (for a finite
    spec, the composite's own parts); ``value_rules`` the first-order rules."""

    spec: Spec
    composite: Composite = field(repr=False)
    blame: tuple[Rule, ...] = field(repr=False)
    value_rules: tuple[DirectRule, ...] = field(repr=False)
    classifier: Classifier = field(repr=False)

    @staticmethod
    def load(spec: Spec | str | Path) -> Policy:
        """Compile a spec (object, file path or bundled name) whose states are event states."""
        s = spec if isinstance(spec, Spec) else load_spec(spec)
        if not s.is_event_spec:
            raise UsageError(f"spec {s.name!r} ({s.source}) declares prompt-string states, not "
                             "event states: it describes text, not chat logs",
                             hint="declare states with (:from …), (:call …), (:contains …) "
                                  "(docs/design.md §2.5)")
        classifier = Classifier.build(s.states)
        n = len(s.names)
        if s.is_infinite:  # ω-acceptance: the whole automaton, as in §3.5
            if s.is_first_order:
                raise UsageError(f"spec {s.name!r}: first-order rules need a finite behaviour "
                                 "(a conversation is a finite trace)")
            whole = TableRule("(whole)", build_automaton(s))
            named: list[tuple[str, Spec]] = []
            if s.behavior_declared:
                named.append((BEHAVIOR_NAME, replace(s, constraints=())))
            anything = any_sequence(s.names)
            named += [(nm, replace(s, behavior=anything, constraints=(c,),
                                   behavior_declared=False))
                      for nm, c in zip(s.constraint_names, s.constraints)]
            blame: tuple[Rule, ...] = (TableRule(named[0][0], whole.automaton),) \
                if len(named) == 1 else tuple(TableRule(nm, build_automaton(p)) for nm, p in named)
            return Policy(s, Composite((whole,), n), blame, (), classifier)
        parts: list[Rule] = []
        if s.behavior_declared:
            parts.append(TableRule(BEHAVIOR_NAME, build_automaton(replace(s, constraints=()))))
        values: list[DirectRule] = []
        for nm, c in zip(s.constraint_names, s.constraints):
            rule = compile_rule(s, nm, c)
            if isinstance(rule, DirectRule) and (rule.quantifiers or rule.atoms):
                values.append(rule)
            else:
                parts.append(rule)
        return Policy(s, Composite(tuple(parts), n), tuple(parts), tuple(values), classifier)

    @property
    def names(self) -> tuple[str, ...]:
        return self.spec.names

    def state_of(self, event: Event) -> str | None:
        return self.classifier.state(event)

    def trace(self, messages: Sequence[object]) -> tuple[str | None, ...]:
        """The state of each step of a conversation (None where no state matches); raises
        :class:`LogError` for a malformed message."""
        return tuple(self.classifier.state(ev) for ev in conversation_events(messages))

    def cursor(self) -> PolicyCursor:
        return PolicyCursor(self)

    def values_of(self, i: int, event: Event) -> StepValues:
        """What a step in state ``i`` offers the first-order rules."""
        return step_values(i, self.spec.states[i].binds, event.arguments, event.text)

    def check(self, messages: Sequence[object]) -> ConversationReport:
        """The verdict on one conversation (a list of OpenAI-format messages)."""
        if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
            return ConversationReport("malformed", error="a conversation is a list of messages")
        if not messages:
            return ConversationReport("malformed", error="the conversation has no messages")
        try:
            events = conversation_events(messages, lenient=True)
        except LogError as e:
            return ConversationReport("malformed", error=e.message, error_message=e.index)
        report = self.check_events(events)
        bad = next((ev for ev in events if ev.error is not None), None)
        if bad is None:
            return report
        # a call whose arguments are not JSON is still a call of its name (design §12): judged,
        # and reported as malformed unless the judgement already finds a violation
        verdict = "violated" if report.verdict == "violated" else "malformed"
        return replace(report, verdict=verdict, error=bad.error, error_message=bad.message)

    def check_events(self, events: Sequence[Event]) -> ConversationReport:
        """The verdict on a trace of events (the fast path: one memoised lookup per step and
        part group, plus one step per first-order instance)."""
        comp = self.composite
        index = self.classifier.index
        fo = [ValueInstances(r) for r in self.value_rules]
        cid = INITIAL
        codes: list[int] = []
        for k, ev in enumerate(events):
            i = index(ev)
            codes.append(i)
            if i < 0:
                return ConversationReport(
                    "unmatched", k, self._names(codes[:-1]),
                    (Violation(None, k, ev.message, None, self._allowed_names(cid, fo)),))
            nxt = comp.step(cid, i)
            broken = nxt == DEAD or not comp.live(nxt)
            if fo:
                sv = self.values_of(i, ev)
                for inst in fo:
                    inst.push(sv)
                    if inst.dead() is not None:
                        broken = True
            if broken:
                for ev2 in events[k + 1:]:  # the parts are judged on the whole trace
                    codes.append(index(ev2))
                return self._attribute(events, codes, "violated", k, cid)
            cid = nxt
        if comp.accepts(cid) and all(inst.accepts() for inst in fo):
            return ConversationReport("ok", len(events))  # no trace: ok is the common case
        return self._attribute(events, codes, "incomplete", len(events), cid)

    def value_reason(self, rule: str, i: int, sv: StepValues, history: Sequence[StepValues],
                     binding: Binding) -> str:
        """Why a step in state index ``i`` binding ``sv`` after ``history`` breaks the first-order
        rule named ``rule`` for ``binding``, in words ("" outside the fragment, §2.6)."""
        spec = self.spec
        formula = spec.constraints[spec.constraint_names.index(rule)]
        return value_reason(formula, spec, i, sv, history, binding) or ""

    def _names(self, codes: Iterable[int]) -> tuple[str, ...]:
        return tuple(self.names[i] if i >= 0 else "?" for i in codes)

    def _allowed_names(self, cid: int, fo: Sequence[ValueInstances]) -> tuple[str, ...]:
        """The states a step may be in now (binding no value, for the first-order rules)."""
        ok = self.composite.allowed(cid)
        if fo:
            ok = tuple(i for i in ok if not any(
                inst.dead(inst.after(StepValues(i, {}, ""))) for inst in fo))
        return tuple(self.names[i] for i in ok)

    def _attribute(self, events: Sequence[Event], codes: list[int], verdict: str, at: int,
                   cid: int) -> ConversationReport:
        """Run each part alone to say which broke where (first failure of each) and which are
        unmet at the end."""
        found: list[Violation] = []
        unmet: list[str] = []
        names = self.names
        for part in self.blame:
            x = part.initial
            for k, i in enumerate(codes):
                if i < 0:  # a later step matches no state: the parts stop there
                    break
                y = part.step(x, i)
                if y == DEAD or not part.live(y):
                    found.append(Violation(part.name, k, events[k].message, names[i],
                                           part.allowed(x, names)))
                    break
                x = y
            else:
                if not part.accepts(x):
                    unmet.append(part.name)
        for rule in self.value_rules:
            inst = ValueInstances(rule)
            for k, i in enumerate(codes):
                if i < 0:
                    break
                sv = self.values_of(i, events[k])
                inst.push(sv)
                bad = inst.dead()
                if bad is not None:  # the words read the steps before this one
                    why = self.value_reason(rule.name, i, sv, inst.history[:-1], bad)
                    found.append(Violation(rule.name, k, events[k].message, names[i], (), bad, why))
                    break
            else:
                if not inst.accepts():
                    unmet.append(rule.name)
        if verdict == "violated" and not any(v.step <= at for v in found):
            i = codes[at]
            found.append(Violation(TOGETHER, at, events[at].message, names[i],
                                   tuple(names[j] for j in self.composite.allowed(cid))))
        found.sort(key=lambda v: v.step)
        if verdict == "incomplete" and not unmet:
            unmet.append(TOGETHER)
        return ConversationReport(verdict, len(events), self._names(codes), tuple(found),
                                  tuple(unmet))


class PolicyCursor:
    """A conversation in progress: the composite state, each named part's own state, and the
    first-order rules' instances."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.cid = INITIAL
        self.part_local = [p.initial for p in policy.blame]
        self.values = [ValueInstances(r) for r in policy.value_rules]
        self.steps = 0
        self.trace: list[str | None] = []

    def copy(self) -> PolicyCursor:
        c = PolicyCursor.__new__(PolicyCursor)
        c.policy, c.cid, c.part_local = self.policy, self.cid, list(self.part_local)
        c.values = [v.copy() for v in self.values]
        c.steps, c.trace = self.steps, list(self.trace)
        return c

    @property
    def is_dead(self) -> bool:
        """True once a step broke the policy: nothing is allowed from here."""
        return self.cid == DEAD

    @property
    def is_complete(self) -> bool:
        return self.cid != DEAD and self.policy.composite.accepts(self.cid) \
            and all(v.accepts() for v in self.values) and self.steps > 0

    def allowed_states(self) -> tuple[str, ...]:
        """The states a step may be in now (for first-order rules: a step binding no value)."""
        if self.cid == DEAD:
            return ()
        return self.policy._allowed_names(self.cid, self.values)

    def decide(self, event: Event) -> Decision:
        """Would ``event`` be allowed as the next step? (The cursor does not move.)"""
        return self._judge(self.policy.classifier.index(event), event)[0]

    def _judge(self, i: int, event: Event) -> tuple[Decision, list[dict[tuple[str, ...], int]]]:
        """The decision on ``event``, classified into state index ``i`` (-1: none), and each
        first-order rule's instances after it (which :meth:`push` keeps: a new value's instances
        are replayed once)."""
        now = self.allowed_states()
        policy = self.policy
        names = policy.names
        if i < 0:
            return Decision(False, None, (), now, names), []
        name = names[i]
        # the values the step binds: read only by the first-order rules' instances
        sv = policy.values_of(i, event) if self.values else StepValues(i, {}, "")
        comp = policy.composite
        ok = self.cid != DEAD and comp.live(comp.step(self.cid, i))
        bad_values: list[tuple[ValueInstances, tuple[tuple[str, str], ...]]] = []
        after = [inst.after(sv) for inst in self.values]
        for inst, local in zip(self.values, after):
            bad = inst.dead(local)
            if bad is not None:
                bad_values.append((inst, bad))
        if ok and not bad_values:
            return Decision(True, name, (), now, names), after
        broken = [p.name for p, x in zip(policy.blame, self.part_local)
                  if x == DEAD or not p.live(p.step(x, i))]
        broken += [inst.rule.name for inst, _ in bad_values]
        binding: Binding = ()
        reason = ""
        if bad_values:
            inst, binding = bad_values[0]
            reason = policy.value_reason(inst.rule.name, i, sv, inst.history, binding)
        return Decision(False, name, tuple(broken) or (TOGETHER,), now, names, binding,
                        reason), after

    def push(self, event: Event) -> Decision:
        """Take ``event`` as the next step (also when it breaks the policy) and say how it went."""
        i = self.policy.classifier.index(event)
        d, after = self._judge(i, event)
        self.steps += 1
        self.trace.append(d.state)
        if i < 0:
            self.cid = DEAD
            return d
        policy = self.policy
        self.cid = policy.composite.step(self.cid, i) if d.allowed else DEAD
        self.part_local = [p.step(x, i) for p, x in zip(policy.blame, self.part_local)]
        if self.values:
            sv = policy.values_of(i, event)
            for inst, local in zip(self.values, after):
                inst.push(sv, local)
        return d

    def push_message(self, message: object, index: int = -1) -> list[Decision]:
        """Take every event of one OpenAI-format message (raises :class:`LogError`)."""
        return [self.push(ev) for ev in message_events(message, index)]

    def push_messages(self, messages: Sequence[object], start: int = 0) -> list[Decision]:
        """Take the events of ``messages[start:]`` (message indices are positions in the list)."""
        out: list[Decision] = []
        for k in range(start, len(messages)):
            out += self.push_message(messages[k], k)
        return out

    def call_options(self, names: Iterable[str]) -> dict[str, tuple[tuple[str, str], ...]]:
        """The tools among ``names`` whose call may come now, each with the argument regexes its
        call must then match (empty: any arguments) — what a decoder may let a model write.

        A call is in the first call state that matches it, so where the states of one tool differ
        in ``(:args …)`` the verdict depends on the arguments: a tool is offered unnarrowed when
        every state its call can fall in is allowed, narrowed to the first state's ``(:args …)``
        when that state is allowed (a call matching them is in it, whatever comes after), and
        not at all otherwise (excluding arguments would need the complement of a regex: refused
        here, conservatively, so that what is offered is always allowed). First-order rules are
        asked about a call that binds no value: the values themselves are judged when the call
        is pushed (design §14)."""
        out: dict[str, tuple[tuple[str, str], ...]] = {}
        if self.cid == DEAD:
            return out
        allowed = set(self.policy.names.index(n) for n in self.allowed_states())
        spec_states = self.policy.spec.states
        matchers = self.policy.classifier.by_kind.get(("assistant", "call"), ())
        for name in names:
            cands = [m for m in matchers if m.calls is None or name in m.calls]
            chain: list[_Matcher] = []
            for m in cands:
                chain.append(m)
                if not m.args and m.contains is None:
                    break  # a catch-all: later states never see this tool
            if not chain:
                continue
            ok = [m.index in allowed for m in chain]
            catch_all = not chain[-1].args and chain[-1].contains is None
            if all(ok) and catch_all:
                out[name] = ()
            elif ok[0] and chain[0].args and chain[0].contains is None:
                out[name] = spec_states[chain[0].index].args
        return out

    def value_terms(self, tool: str) -> dict[str, ValueTerm] | None:
        """For a call to ``tool`` made now: per argument key (as the spec writes it, ``a.b``
        nested) that a first-order rule constrains, the term of the values the policy allows
        there now ({}: no rule constrains this tool's arguments); None when a rule constrains
        them outside the fragment enforced token by token (design §14.1): the decoder then
        writes the call unconstrained by value, and the call is judged once written.

        On a dead cursor (a step broke the policy) nothing is allowed, as :meth:`decide` says:
        every key a rule compares gets the empty term (``call_options`` offers no tool there)."""
        if not self.values:
            return {}
        policy = self.policy
        spec = policy.spec
        matchers = policy.classifier.by_kind.get(("assistant", "call"), ())
        chain: list[_Matcher] = []
        for m in matchers:
            if m.calls is None or tool in m.calls:
                chain.append(m)
                if not m.args and m.contains is None:
                    break
        if not chain:
            return {}
        states = {m.index for m in chain}
        concerned = [inst for inst in self.values
                     if any(a.state in states for a in inst.rule.atoms)]
        if not concerned:
            return {}
        if self.cid == DEAD:
            return {k: NONE for inst in concerned for a in inst.rule.atoms
                    if a.state in states for k in a.keys}
        if len(chain) > 1:
            return None  # which state the call is in depends on its arguments
        i = chain[0].index
        out: dict[str, list[ValueTerm]] = {}
        for inst in concerned:
            formula = spec.constraints[spec.constraint_names.index(inst.rule.name)]
            got = trigger_term(formula, spec, i, inst.history)
            if got is None:
                return None
            var, term = got
            for key in value_keys(spec.states[i], var):
                out.setdefault(key, []).append(term)
        return {k: ValueAnd(tuple(ts)) if len(ts) > 1 else ts[0] for k, ts in out.items()
                if any(t != ANY for t in ts)}

    def allowed_tools(self, names: Iterable[str]) -> tuple[str, ...]:
        """The tools among ``names`` whose call would be allowed now. Arguments are not known
        here: a call is classified with empty arguments, so ``(:args …)`` states do not match."""
        return tuple(n for n in names if self.decide(Event.call(n, {})).allowed)
