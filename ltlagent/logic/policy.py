"""A compiled policy over chat events: classify each step of a conversation into the spec's
event states, run the automaton, and say which named constraint breaks where (docs/design.md §12).

:class:`Policy` is the compile step (frozen, picklable: it runs inside process pools, Ray or Spark
UDFs): the spec, the automaton of the whole spec, one automaton per named part (the behaviour, when
declared, and each constraint alone) for attributing failures, and the event classifier.
:class:`PolicyCursor` is the runtime: one per conversation, the only thing that changes per step.
``check-log``, the guard in front of an API and the decoder all classify through the same
:class:`Classifier` and step the same tables.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ltlagent.chat.events import Event, conversation_events, message_events
from ltlagent.errors import LogError, UsageError
from ltlagent.logic.automaton import DEAD, Automaton, build_automaton
from ltlagent.spec.syntax import BEHAVIOR_NAME, Spec, State, any_sequence, load_spec

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


@dataclass(frozen=True)
class Violation:
    """The first failure of one named part: the step (0-based, in the trace) and the message
    (0-based, in the conversation) where it can no longer hold, the state there and what the
    part's automaton allowed instead. ``constraint`` None marks a step that matches no state."""

    constraint: str | None
    step: int
    message: int
    state: str | None
    allowed: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {"constraint": self.constraint, "step": self.step, "message": self.message,
                "state": self.state, "allowed": list(self.allowed)}


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

    def explain(self) -> str:
        """One sentence for a model or a person: which rule forbids the step, what is allowed."""
        now = describe_allowed(self.allowed_states, self.names)
        if self.allowed:
            return f"allowed: {self.state}"
        if self.state is None:
            return f"forbidden: this step matches no state of the policy; allowed now: {now}"
        return (f"forbidden: a {self.state} step now breaks {', '.join(self.violated)}; "
                f"allowed now: {now}")

    def to_dict(self) -> dict[str, object]:
        return {"allowed": self.allowed, "state": self.state, "violated": list(self.violated),
                "allowed_states": list(self.allowed_states)}


@dataclass(frozen=True)
class Policy:
    """A spec compiled for chat events: classifier, the whole automaton, one automaton per part."""

    spec: Spec
    automaton: Automaton
    parts: tuple[tuple[str, Automaton], ...]
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
        whole = build_automaton(s)
        named: list[tuple[str, Spec]] = []
        if s.behavior_declared:
            named.append((BEHAVIOR_NAME, replace(s, constraints=())))
        anything = any_sequence(s.names)
        named += [(n, replace(s, behavior=anything, constraints=(c,), behavior_declared=False))
                  for n, c in zip(s.constraint_names, s.constraints)]
        if len(named) == 1:
            parts: tuple[tuple[str, Automaton], ...] = ((named[0][0], whole),)
        else:
            parts = tuple((n, build_automaton(p)) for n, p in named)
        return Policy(s, whole, parts, Classifier.build(s.states))

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

    def check(self, messages: Sequence[object]) -> ConversationReport:
        """The verdict on one conversation (a list of OpenAI-format messages)."""
        if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
            return ConversationReport("malformed", error="a conversation is a list of messages")
        if not messages:
            return ConversationReport("malformed", error="the conversation has no messages")
        try:
            events = conversation_events(messages)
        except LogError as e:
            return ConversationReport("malformed", error=e.message, error_message=e.index)
        return self.check_events(events)

    def check_events(self, events: Sequence[Event]) -> ConversationReport:
        """The verdict on a trace of events (the fast path: one table lookup per step)."""
        a = self.automaton
        index = self.classifier.index
        table = a.live_delta
        q = a.initial
        codes: list[int] = []
        for k, ev in enumerate(events):
            i = index(ev)
            codes.append(i)
            if i < 0:
                return ConversationReport(
                    "unmatched", k, self._names(codes[:-1]),
                    (Violation(None, k, ev.message, None, a.allowed(q)),))
            r = table[q][i]
            if r == DEAD:
                for ev2 in events[k + 1:]:  # the parts are judged on the whole trace
                    codes.append(index(ev2))
                return self._attribute(events, codes, "violated", k, q)
            q = r
        if a.infinite or q in a.accepting:
            return ConversationReport("ok", len(events))  # no trace: ok is the common case
        return self._attribute(events, codes, "incomplete", len(events), q)

    def _names(self, codes: Iterable[int]) -> tuple[str, ...]:
        return tuple(self.names[i] if i >= 0 else "?" for i in codes)

    def _attribute(self, events: Sequence[Event], codes: list[int], verdict: str, at: int,
                   q_whole: int) -> ConversationReport:
        """Run each part alone to say which broke where (first failure of each) and which are
        unmet at the end."""
        found: list[Violation] = []
        unmet: list[str] = []
        for name, a in self.parts:
            q = a.initial
            table = a.live_delta
            for k, i in enumerate(codes):
                if i < 0:  # a later step matches no state: the parts stop there
                    break
                r = table[q][i]
                if r == DEAD:
                    found.append(Violation(name, k, events[k].message, self.names[i],
                                           a.allowed(q)))
                    break
                q = r
            else:
                if not a.infinite and q not in a.accepting:
                    unmet.append(name)
        if verdict == "violated" and not any(v.step <= at for v in found):
            i = codes[at]
            found.append(Violation(TOGETHER, at, events[at].message, self.names[i],
                                   self.automaton.allowed(q_whole)))
        found.sort(key=lambda v: v.step)
        if verdict == "incomplete" and not unmet:
            unmet.append(TOGETHER)
        trace = self._names(codes)
        return ConversationReport(verdict, len(events), trace, tuple(found), tuple(unmet))


class PolicyCursor:
    """A conversation in progress: the whole automaton's state and each part's."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.q = policy.automaton.initial
        self.part_q = [a.initial for _, a in policy.parts]
        self.steps = 0
        self.trace: list[str | None] = []

    def copy(self) -> PolicyCursor:
        c = PolicyCursor.__new__(PolicyCursor)
        c.policy, c.q, c.part_q = self.policy, self.q, list(self.part_q)
        c.steps, c.trace = self.steps, list(self.trace)
        return c

    @property
    def is_dead(self) -> bool:
        """True once a step broke the policy: nothing is allowed from here."""
        return self.q == DEAD

    @property
    def is_complete(self) -> bool:
        a = self.policy.automaton
        return self.q != DEAD and (a.infinite or self.q in a.accepting) and self.steps > 0

    def allowed_states(self) -> tuple[str, ...]:
        return self.policy.automaton.allowed(self.q) if self.q != DEAD else ()

    def decide(self, event: Event) -> Decision:
        """Would ``event`` be allowed as the next step? (The cursor does not move.)"""
        return self._decide(self.policy.classifier.index(event))

    def _decide(self, i: int) -> Decision:
        """:meth:`decide` for a step already classified into state index ``i`` (-1: none)."""
        now = self.allowed_states()
        names = self.policy.names
        if i < 0:
            return Decision(False, None, (), now, names)
        name = names[i]
        if self.q != DEAD and self.policy.automaton.live_delta[self.q][i] != DEAD:
            return Decision(True, name, (), now, names)
        broken = tuple(n for (n, a), q in zip(self.policy.parts, self.part_q)
                       if q == DEAD or a.live_delta[q][i] == DEAD)
        return Decision(False, name, broken or (TOGETHER,), now, names)

    def push(self, event: Event) -> Decision:
        """Take ``event`` as the next step (also when it breaks the policy) and say how it went."""
        i = self.policy.classifier.index(event)
        d = self._decide(i)
        self.steps += 1
        self.trace.append(d.state)
        if i < 0:
            self.q = DEAD
            return d
        self.q = self.policy.automaton.live_delta[self.q][i] if self.q != DEAD else DEAD
        self.part_q = [a.live_delta[q][i] if q != DEAD else DEAD
                       for (_, a), q in zip(self.policy.parts, self.part_q)]
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
        here, conservatively, so that what is offered is always allowed)."""
        out: dict[str, tuple[tuple[str, str], ...]] = {}
        live = self.policy.automaton.live_delta[self.q] if self.q != DEAD else None
        if live is None:
            return out
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
            ok = [live[m.index] != DEAD for m in chain]
            catch_all = not chain[-1].args and chain[-1].contains is None
            if all(ok) and catch_all:
                out[name] = ()
            elif ok[0] and chain[0].args and chain[0].contains is None:
                out[name] = spec_states[chain[0].index].args
        return out

    def allowed_tools(self, names: Iterable[str]) -> tuple[str, ...]:
        """The tools among ``names`` whose call would be allowed now. Arguments are not known
        here: a call is classified with empty arguments, so ``(:args …)`` states do not match."""
        return tuple(n for n in names if self.decide(Event.call(n, {})).allowed)
