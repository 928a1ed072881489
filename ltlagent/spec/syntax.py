"""The spec language: parsed, checked, immutable.

A spec declares states (prompt string, flags, content constraints) and a behaviour pattern over
them (docs/design.md §2). This module turns source text into a :class:`Spec` and reports every
static error it can find with ``file:line:col`` (§11): whatever a later stage would refuse is
refused here, so ``show``, ``validate`` and ``run`` agree on which specs are valid. To that end it
asks Spot to parse raw ``(ltl "…")`` strings (through :mod:`ltlagent.spotlib`) and builds each
content DFA once (imported lazily); the translation itself is :mod:`ltlagent.logic.ltl` and
:mod:`ltlagent.logic.automaton`.
"""

from __future__ import annotations

import difflib
import errno
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NoReturn

from ltlagent import spotlib
from ltlagent.errors import Location, SpecError, SpecErrors, UsageError
from ltlagent.spec.sexp import Atom, Node, SList, read_sexps
from ltlagent.text.toolcall import FORMATS

__all__ = [
    "State", "Pattern", "Visit", "Next", "Until", "Always", "Or", "Repeat", "Formula", "Spec",
    "parse_spec", "load_spec", "bundled_specs", "resolve_spec_path", "unrolled_size",
    "TOOLS_CHOICES", "MAX_UNROLLED_STEPS", "ROLES", "ENV_ROLES", "AUTHORS", "PAST_OPERATORS",
    "BEHAVIOR_NAME", "any_sequence", "QUANTIFIERS", "MENTIONS", "value_keys", "has_past",
    "has_future",
]

#: Sentinel for ``(:choices :tools)``: the Action state's choices are the names of the agent's tools.
TOOLS_CHOICES = ":tools"

#: The roles a state may declare with ``(:role NAME)``: what the agent runner does with it
#: (:mod:`ltlagent.agent.roles`).
ROLES = ("action", "action-input", "observation", "evaluator", "user", "answer")
#: Roles of states the environment writes (they need ``(:flags :env-input)``).
ENV_ROLES = ("observation", "evaluator", "user")

#: Most steps a behaviour may have once every bounded repetition is written out (docs/design.md
#: §3.3): the automaton needs about one state per unrolled step, and Spot's translation time grows
#: about quadratically with them (2000 steps: about a second; 5000: ten).
MAX_UNROLLED_STEPS = 2500
#: Most states a spec may declare (the lexer's table grows with their prompt texts, 256 entries a byte).
MAX_STATES = 4096


@dataclass(frozen=True)
class State:
    """One declared state: its prompt string, who writes it, and what its content may be."""

    name: str
    text: str
    env_input: bool = False
    choices: tuple[str, ...] | None = None
    regex: str | None = None
    stop: tuple[str, ...] = ()
    max_tokens: int | None = None
    role: str | None = None  # (:role NAME), one of ROLES
    # event options (docs/design.md §2.5): what the state matches in a chat log
    author: str | None = None  # (:from user|assistant|tool|system)
    calls: tuple[str, ...] | None = None  # (:call "NAME" …); () is (:call), any tool
    args: tuple[tuple[str, str], ...] = ()  # (:args (KEY (:regex "…")) …): fullmatch per key
    #: (:args (KEY ?var) …): the argument at KEY (``a.b``: nested) binds ``?var`` (design §2.6)
    binds: tuple[tuple[str, str], ...] = ()
    contains: str | None = None  # (:contains "REGEX"): Python re.search on the text
    loc: Location | None = field(default=None, compare=False)

    @property
    def is_event(self) -> bool:
        """True for a state declared by what it matches in a chat log, not by a prompt string."""
        return self.author is not None or self.calls is not None or self.contains is not None

    @property
    def tool_choices(self) -> bool:
        """True when the choices are filled in from the agent's tools at run time."""
        return self.choices == (TOOLS_CHOICES,)

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {"name": self.name, "text": self.text, "env_input": self.env_input}
        if self.choices is not None:
            d["choices"] = list(self.choices)
        if self.regex is not None:
            d["regex"] = self.regex
        if self.stop:
            d["stop"] = list(self.stop)
        if self.max_tokens is not None:
            d["max_tokens"] = self.max_tokens
        if self.role is not None:
            d["role"] = self.role
        if self.author is not None:
            d["from"] = self.author
        if self.calls is not None:
            d["call"] = list(self.calls)
        if self.args:
            d["args"] = {k: r for k, r in self.args}
        if self.binds:
            d["binds"] = {k: v for k, v in self.binds}
        if self.contains is not None:
            d["contains"] = self.contains
        if self.is_event:
            del d["text"], d["env_input"]
        return d


# --- behaviour patterns -----------------------------------------------------------------------

@dataclass(frozen=True)
class Visit:
    """``S``: one visit to state ``name``, the leaf of a pattern (a run's step is
    :class:`ltlagent.agent.runner.Step`)."""

    name: str
    loc: Location | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Next:
    """``(next P1 … Pn)``: P1 then P2 … then Pn."""

    parts: tuple[Pattern, ...]
    loc: Location | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Until:
    """``(until P Q)``: P between ``min`` and ``max`` times (None: unbounded), then Q."""

    body: Pattern
    then: Pattern
    min: int = 0
    max: int | None = None
    loc: Location | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Always:
    """``(always P)``: P repeated forever (P^ω, iterations non-empty); only in last position."""

    body: Pattern
    loc: Location | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Or:
    """``(or P Q …)``: one of the alternatives."""

    parts: tuple[Pattern, ...]
    loc: Location | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Repeat:
    """``(repeat P :min m :max n)`` and ``(optional P)`` (= ``:min 0 :max 1``)."""

    body: Pattern
    min: int = 0
    max: int | None = None
    loc: Location | None = field(default=None, compare=False)


Pattern = Visit | Next | Until | Always | Or | Repeat


@dataclass(frozen=True)
class Formula:
    """An LTL constraint as a tree: ``op`` is a state name (``args`` empty), an operator, or
    ``"ltl"`` with the raw Spot string in ``raw``.

    First-order rules (design §2.6): a state with ``var`` is ``(State ?x)``, a step in State that
    binds the value of ``?x``; ``mentions`` (one state argument, ``var``) is ``(mentions State
    ?x)``; ``forall``/``exists`` quantify ``vars`` over the values bound so far."""

    op: str
    args: tuple[Formula, ...] = ()
    raw: str | None = None
    is_state: bool = False
    loc: Location | None = field(default=None, compare=False)
    #: a top-level constraint's name, ``(:constraints (NAME FORMULA) …)``; None when unnamed
    name: str | None = None
    #: the variable of a value atom ``(State ?x)`` or ``(mentions State ?x)``
    var: str | None = None
    #: the variables a ``forall``/``exists`` binds
    vars: tuple[str, ...] = ()

    @property
    def is_first_order(self) -> bool:
        """Whether the formula quantifies or compares values (design §2.6)."""
        return self.var is not None or bool(self.vars) or any(a.is_first_order for a in self.args)


@dataclass(frozen=True)
class Spec:
    """A parsed, statically checked spec."""

    name: str
    states: tuple[State, ...]
    behavior: Pattern
    constraints: tuple[Formula, ...] = ()
    source: str = "<string>"
    text: str = field(default="", compare=False, repr=False)
    #: False when the spec has no (:behavior …): any sequence of its states, the constraints decide
    behavior_declared: bool = True
    #: how the model writes its (:call …) steps, ``(:format hermes|json)``; None: not said (the
    #: decoder's default, ``hermes``)
    call_format: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.states)

    @property
    def is_event_spec(self) -> bool:
        """True when the states are event states (matched in chat logs), not prompt strings."""
        return any(s.is_event for s in self.states)

    @property
    def constraint_names(self) -> tuple[str, ...]:
        """Each constraint's name: its own, or ``constraint-N`` when unnamed, N its 1-based
        position unless another constraint is named so (then the next N that no name takes)."""
        taken = {f.name for f in self.constraints if f.name}
        out: list[str] = []
        for i, f in enumerate(self.constraints):
            name = f.name
            if not name:
                n = i + 1
                while f"constraint-{n}" in taken:
                    n += 1
                name = f"constraint-{n}"
                taken.add(name)
            out.append(name)
        return tuple(out)

    def state(self, name: str) -> State:
        for s in self.states:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def is_first_order(self) -> bool:
        """True when a state binds values or a constraint quantifies over them (design §2.6)."""
        return any(s.binds for s in self.states) or any(c.is_first_order for c in self.constraints)

    @property
    def is_infinite(self) -> bool:
        """True when the behaviour ends in ``always`` (traces are infinite)."""
        p = self.behavior
        while isinstance(p, Next):
            p = p.parts[-1]
        return isinstance(p, Always)

    def used_states(self) -> set[str]:
        """Names mentioned in the behaviour or the constraints."""
        out: set[str] = set()
        todo: list[Pattern] = [self.behavior]
        while todo:
            p = todo.pop()
            if isinstance(p, Visit):
                out.add(p.name)
            elif isinstance(p, Next | Or):
                todo.extend(p.parts)
            elif isinstance(p, Until):
                todo += [p.body, p.then]
            else:
                todo.append(p.body)
        ftodo = list(self.constraints)
        while ftodo:
            f = ftodo.pop()
            if f.is_state:
                out.add(f.op)
            ftodo.extend(f.args)
        return out


# --- parsing ---------------------------------------------------------------------------------

_STATE_OPTIONS = (":text", ":flags", ":choices", ":regex", ":stop", ":max-tokens", ":role",
                  ":from", ":call", ":args", ":contains")
#: Options of prompt-string states that mean nothing for an event state.
_TEXT_ONLY_OPTIONS = ("env_input", "choices", "regex", "stop", "max_tokens", "role")
#: Authors an event state may name with (:from …) (docs/design.md §2.5).
AUTHORS = ("system", "user", "assistant", "tool")
#: The name under which violations of the (:behavior …) pattern are reported.
BEHAVIOR_NAME = "behavior"
_SECTIONS = (":states", ":behavior", ":constraints", ":format")
_PATTERN_OPS = ("next", "until", "always", "or", "optional", "repeat")
_UNTIL_BOUNDED = re.compile(r"^until_(\d+)(?:_(\d+))?$")
_LTL_UNARY = {"not": "!", "next": "X[!]", "weak-next": "X", "always": "G", "eventually": "F",
              "previously": "Y", "once": "O", "historically": "H"}
_LTL_BINARY = {"until": "U", "release": "R", "implies": "->", "iff": "<->", "since": "S"}
#: Past-time operators (docs/design.md §3.5): translated through fresh propositions.
PAST_OPERATORS = ("previously", "once", "historically", "since")
_LTL_NARY = {"and": "&", "or": "|"}
#: First-order constructs (docs/design.md §2.6).
QUANTIFIERS = ("forall", "exists")
MENTIONS = "mentions"
_VARIABLE = re.compile(r"^\?[A-Za-z_][A-Za-z0-9_-]*$")


class _Parser:
    """Collects errors instead of stopping at the first, where later checks stay meaningful."""

    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.errors: list[SpecError] = []
        #: names of every state declared, also those refused (so that using one is no error)
        self.named: set[str] = set()
        #: the declared states by name (for first-order checks in constraints)
        self.state_map: dict[str, State] = {}

    def err(self, message: str, loc: Location | None, hint: str | None = None) -> None:
        self.errors.append(SpecError(message, loc, self.text, hint))

    def fail(self) -> None:
        """Raise the errors found so far, if any."""
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise SpecErrors(self.errors)

    def abort(self, message: str, loc: Location | None, hint: str | None = None) -> NoReturn:
        """Report an error that later checks cannot get past, with those found so far."""
        self.err(message, loc, hint)
        self.fail()
        raise AssertionError("unreachable: fail() raises once an error is recorded")

    # -- top level
    def spec(self, nodes: list[Node]) -> Spec:
        if not nodes:
            self.abort("empty spec: expected (define NAME (:states …) (:behavior …))",
                       Location(self.source, 1, 1))
        root = nodes[0]
        for extra in nodes[1:]:
            self.err("unexpected text after the (define …) form", extra.loc,
                     "a spec file holds exactly one (define …)")
        if not isinstance(root, SList) or root.head() != "define":
            self.abort("expected (define NAME (:states …) (:behavior …))", root.loc)
        items = root.items
        name_atom = items[1] if len(items) >= 2 else None
        if not isinstance(name_atom, Atom) or name_atom.is_string:
            self.abort("(define …) needs a name", root.loc)
        name = name_atom.value
        sections: dict[str, SList] = {}
        for sec in items[2:]:
            head = sec.head() if isinstance(sec, SList) else None
            if not isinstance(sec, SList) or head is None:
                self.err(f"expected a section like (:states …), found {_show(sec)}", sec.loc)
                continue
            if head not in _SECTIONS:
                self.err(f"unknown keyword {head!r}", sec.items[0].loc,
                         _suggest(head, _SECTIONS) or f"sections are {', '.join(_SECTIONS)}")
                continue
            if head in sections:
                self.err(f"duplicate section {head}", sec.loc)
                continue
            sections[head] = sec
        if ":states" not in sections:
            self.err("missing (:states …)", root.loc)
        self.fail()
        n_states = len(sections[":states"].items) - 1
        if n_states > MAX_STATES:  # refused before the lexer and automaton, whose size grows with it
            self.abort(f"(:states …) declares {n_states} states; at most {MAX_STATES} are supported",
                       sections[":states"].items[0].loc, "an agent spec names its steps, not its data")
        states = self.states(sections[":states"])
        self.state_map = {st.name: st for st in states}
        declared = {s.name for s in states} | self.named  # a refused state is reported once
        behavior: Pattern | None = None
        beh = sections.get(":behavior")
        if beh is None:  # any sequence of the declared states: the constraints alone decide
            behavior = any_sequence(tuple(s.name for s in states), root.loc)
        elif len(beh.items) != 2:
            self.err("(:behavior …) takes exactly one pattern", beh.loc)
        else:
            behavior = self.pattern(beh.items[1], declared, depth=0)
        constraints: list[Formula] = []
        if ":constraints" in sections:
            named: dict[str, Node] = {}
            for node in sections[":constraints"].items[1:]:
                f = self.constraint(node, declared)
                if f is None:
                    continue
                if f.name is not None:
                    if f.name in named:
                        self.err(f"duplicate constraint name {f.name!r} (first at "
                                 f"{_at(named[f.name].loc)})", node.loc)
                    named[f.name] = node
                constraints.append(f)
        if behavior is not None and beh is not None:
            self.check_always(behavior, last=True)
            self.check_size(behavior)
        call_format = self.call_format(sections[":format"], states) \
            if ":format" in sections else None
        fo = [c for c in constraints if c.is_first_order]
        if fo and not any(st.is_event for st in states):
            self.err("first-order rules ((State ?x), mentions, forall, exists) need event "
                     "states: values are bound from tool-call arguments", fo[0].loc)
        self.fail()
        assert behavior is not None
        return Spec(name, tuple(states), behavior, tuple(constraints), self.source, self.text,
                    behavior_declared=beh is not None, call_format=call_format)

    def call_format(self, sec: SList, states: Sequence[State]) -> str | None:
        """``(:format hermes|json)``: how the model writes the spec's tool calls while decoding."""
        formats = ", ".join(FORMATS)
        if len(sec.items) != 2 or not isinstance(sec.items[1], Atom) or sec.items[1].is_string:
            self.err(f"(:format …) takes one tool-call format: {formats}", sec.loc)
            return None
        value = sec.items[1]
        if value.value not in FORMATS:
            self.err(f"unknown tool-call format {value.value!r}", value.loc,
                     _suggest(value.value, tuple(FORMATS)) or f"formats are {formats}")
            return None
        if not any(s.calls is not None for s in states):
            self.err("(:format …) says how (:call …) steps are written, and this spec has none",
                     sec.loc)
            return None
        return value.value

    # -- states
    def states(self, sec: SList) -> list[State]:
        out: list[State] = []
        seen: dict[str, State] = {}
        texts: dict[str, State] = {}
        roles: dict[str, State] = {}
        for node in sec.items[1:]:
            st = self.state(node)
            if st is None:
                continue
            if st.name in seen:
                self.err(f"duplicate state {st.name!r} (first declared at "
                         f"{_at(seen[st.name].loc)})", st.loc)
                continue
            if st.text and st.text in texts:
                self.err(f"state {st.name!r} has the same prompt text {st.text!r} as "
                         f"{texts[st.text].name!r}", st.loc,
                         "prompt texts signal transitions, so each must be distinct")
                continue
            if st.role is not None and st.role in roles:
                self.err(f"states {roles[st.role].name!r} and {st.name!r} both declare (:role {st.role})",
                         st.loc, "a role belongs to one state")
            elif st.role is not None:
                roles[st.role] = st
            seen[st.name] = st
            texts[st.text] = st
            out.append(st)
        if not sec.items[1:]:
            self.err("(:states …) declares no state", sec.loc)
        events = [st for st in out if st.is_event]
        if events and len(events) != len(out):
            prompt = next(st for st in out if not st.is_event)
            self.err(f"state {prompt.name!r} has a prompt string while {events[0].name!r} is an "
                     "event state: a spec's states are either all prompt-string states or all "
                     "event states", prompt.loc,
                     "event states are matched in chat logs by (:from …), (:call …), (:contains …)")
        for a, b in _texts_inside([st for st in out if st.text]):
            where = "a proper prefix" if b.text.startswith(a.text) else "inside"
            self.err(f"prompt text {a.text!r} of {a.name!r} is {where} of {b.text!r} "
                     f"({b.name!r}): the transition it signals would be ambiguous", a.loc,
                     "make the texts distinct, e.g. end each with ':' "
                     "(a text may end with another one: the longest match wins)")
        return out

    def state(self, node: Node) -> State | None:
        if not isinstance(node, SList) or not node.items:
            self.err(f"expected a state (NAME (:text \"…\") …), found {_show(node)}", node.loc)
            return None
        nm = node.items[0]
        if not isinstance(nm, Atom) or nm.is_string or nm.value.startswith(":"):
            self.err(f"expected a state name, found {_show(nm)}", nm.loc)
            return None
        self.named.add(nm.value)
        text: str | None = None
        opts: dict[str, object] = {}
        given: dict[str, Location] = {}
        for opt in node.items[1:]:
            key = opt.head() if isinstance(opt, SList) else None
            if key is None:
                self.err(f"expected a state option like (:text \"…\"), found {_show(opt)}",
                         opt.loc)
                continue
            assert isinstance(opt, SList)
            if key in given:  # not "the last one wins": the spec says two different things
                self.err(f"({key} …) given twice in state {nm.value!r} (first at {_at(given[key])})",
                         opt.loc, "give each option once")
                continue
            given[key] = opt.loc
            args = opt.items[1:]
            if key not in _STATE_OPTIONS:
                self.err(f"unknown keyword {key!r} in state {nm.value!r}", opt.items[0].loc,
                         _suggest(key, _STATE_OPTIONS)
                         or f"state options are {', '.join(_STATE_OPTIONS)}")
            elif key == ":text":
                if len(args) != 1 or not isinstance(args[0], Atom) or not args[0].is_string:
                    bad = args[0] if args else opt
                    self.err(f":text of {nm.value!r} must be one string, found "
                             f"{_show(bad) if args else 'nothing'}", bad.loc,
                             'write it in double quotes, e.g. (:text "Thought:")')
                elif not args[0].value.strip():
                    self.err(f":text of {nm.value!r} is empty", args[0].loc)
                else:
                    text = args[0].value
            elif key == ":flags":
                for a in args:
                    if isinstance(a, Atom) and a.value == ":env-input":
                        opts["env_input"] = True
                    else:
                        self.err(f"unknown flag {_show(a)}", a.loc, "the flag is :env-input")
            elif key == ":choices":
                strings = [a for a in args if isinstance(a, Atom) and a.is_string]
                if len(args) == 1 and isinstance(args[0], Atom) and args[0].value == TOOLS_CHOICES \
                        and not args[0].is_string:
                    opts["choices"] = (TOOLS_CHOICES,)
                elif not args or len(strings) != len(args):
                    self.err(":choices takes one or more strings, or :tools", opt.loc)
                elif self.check_content(opt, choices=tuple(a.value for a in strings)):
                    opts["choices"] = tuple(a.value for a in strings)
            elif key == ":regex":
                if len(args) != 1 or not isinstance(args[0], Atom) or not args[0].is_string:
                    self.err(":regex takes one string", opt.loc)
                elif self.check_regex(args[0]):
                    opts["regex"] = args[0].value
            elif key == ":stop":
                stops = [a.value for a in args if isinstance(a, Atom) and a.is_string and a.value]
                if not args or len(stops) != len(args):
                    self.err(":stop takes one or more non-empty strings", opt.loc)
                else:
                    opts["stop"] = tuple(stops)
            elif key == ":max-tokens":
                n = _int(args[0]) if len(args) == 1 else None
                if n is None or n < 1:
                    self.err(":max-tokens takes one positive integer", opt.loc)
                else:
                    opts["max_tokens"] = n
            elif key == ":from":
                who = args[0] if len(args) == 1 and isinstance(args[0], Atom) else None
                if who is None:
                    self.err(":from takes one author", opt.loc, f"authors are {', '.join(AUTHORS)}")
                elif who.value not in AUTHORS:
                    self.err(f"unknown author {who.value!r}", who.loc,
                             _suggest(who.value, AUTHORS) or f"authors are {', '.join(AUTHORS)}")
                else:
                    opts["author"] = who.value
            elif key == ":call":
                names = [a for a in args if isinstance(a, Atom) and a.is_string and a.value]
                if len(names) != len(args):
                    self.err(':call takes tool names as strings, e.g. (:call "book"); (:call) '
                             "alone matches any tool call", opt.loc)
                else:
                    opts["calls"] = tuple(a.value for a in names)
            elif key == ":args":
                parsed = self.call_args(opt)
                if parsed is not None:
                    if parsed[0]:
                        opts["args"] = parsed[0]
                    if parsed[1]:
                        opts["binds"] = parsed[1]
            elif key == ":contains":
                if len(args) != 1 or not isinstance(args[0], Atom) or not args[0].is_string:
                    self.err(':contains takes one regex string, e.g. (:contains "(?i)\\byes\\b")',
                             opt.loc)
                else:
                    try:
                        re.compile(args[0].value)
                    except re.error as e:
                        at = _inside(args[0], e.pos, 1, self.text) if e.pos is not None \
                            else args[0].loc
                        self.err(f"bad :contains regex: {e.msg}", at,
                                 ":contains uses Python's re.search (flags such as (?i) and "
                                 "\\b are allowed)")
                    else:
                        opts["contains"] = args[0].value
            elif key == ":role":
                role = args[0] if len(args) == 1 and isinstance(args[0], Atom) and not args[0].is_string \
                    else None
                if role is None:
                    self.err(":role takes one role name", opt.loc, f"the roles are {', '.join(ROLES)}")
                elif role.value not in ROLES:
                    self.err(f"unknown role {role.value!r}", role.loc,
                             _suggest(role.value, ROLES) or f"the roles are {', '.join(ROLES)}")
                else:
                    opts["role"] = role.value
        event = any(k in opts for k in ("author", "calls", "contains"))
        if ("args" in opts or "binds" in opts) and "calls" not in opts:
            self.err(f"state {nm.value!r} has (:args …) but no (:call …): arguments belong to "
                     "tool calls", node.loc)
        if "calls" in opts and opts.get("author", "assistant") != "assistant":
            self.err(f"state {nm.value!r} is a tool call (:call …) from {opts['author']!r}: only "
                     "the assistant calls tools", node.loc)
        if event:
            if text is not None:
                self.err(f"state {nm.value!r} has both (:text …) and event options: an event "
                         "state is matched in chat logs, it has no prompt string", node.loc)
            text_only = [k for k in _TEXT_ONLY_OPTIONS if k in opts]
            if text_only:
                self.err(f"state {nm.value!r} is an event state: "
                         f"{', '.join(':' + k.replace('_', '-') for k in text_only)} "
                         "apply to prompt-string states only", node.loc)
            return State(nm.value, "", loc=nm.loc, **opts)  # type: ignore[arg-type]
        if text is None:
            if not any(isinstance(o, SList) and o.head() == ":text" for o in node.items[1:]):
                self.err(f"state {nm.value!r} has no (:text \"…\") and no event option",
                         node.loc, "a state is a prompt string (:text \"…\") or an event "
                         "matched in chat logs: (:from …), (:call …), (:contains …)")
            return None
        if opts.get("role") in ENV_ROLES and not opts.get("env_input"):
            self.err(f"state {nm.value!r} declares (:role {opts['role']}) but the model writes it", node.loc,
                     "that role belongs to a state the environment writes: add (:flags :env-input)")
        choices, regex = opts.get("choices"), opts.get("regex")
        if isinstance(choices, tuple) and choices != (TOOLS_CHOICES,) and isinstance(regex, str):
            self.check_content(node, choices=choices, regex=regex)  # some choice must match
        if opts.get("env_input") and ("choices" in opts or "regex" in opts):
            self.err(f"state {nm.value!r} is :env-input: content constraints apply only to text "
                     "the model writes", node.loc)
        # each value in opts has its field's type (set above); a dict of mixed values cannot say so
        return State(nm.value, text, loc=nm.loc, **opts)  # type: ignore[arg-type]

    def call_args(self, opt: SList) -> tuple[tuple[tuple[str, str], ...],
                                              tuple[tuple[str, str], ...]] | None:
        """``(:args (KEY (:regex "…")) (KEY ?var) …)``: per argument key, a regex its value must
        fullmatch (the ASCII subset of :mod:`ltlagent.text.content`, so decoding can enforce it
        too), or a variable the value binds (design §2.6; ``a.b`` is a nested key)."""
        out: list[tuple[str, str]] = []
        binds: list[tuple[str, str]] = []
        ok = True
        for item in opt.items[1:]:
            key = item.items[0] if isinstance(item, SList) and item.items else None
            rx = item.items[1] if isinstance(item, SList) and len(item.items) == 2 else None
            if isinstance(key, Atom) and isinstance(rx, Atom) and not rx.is_string \
                    and rx.value.startswith("?"):
                if not _VARIABLE.match(rx.value):
                    self.err(f"bad variable name {rx.value!r}", rx.loc,
                             "a variable is ? then a name, e.g. ?dest")
                    ok = False
                elif any(k == key.value for k, _ in binds):
                    self.err(f"argument {key.value!r} binds twice in (:args …)", key.loc)
                    ok = False
                elif not key.value or any(not part for part in key.value.split(".")):
                    self.err(f"bad argument key {key.value!r}", key.loc,
                             "a key is a name, or names joined by '.' for a nested key")
                    ok = False
                else:
                    binds.append((key.value, rx.value))
                continue
            if key is None or not isinstance(key, Atom) or not isinstance(rx, SList) \
                    or rx.head() != ":regex" or len(rx.items) != 2 \
                    or not isinstance(rx.items[1], Atom) or not rx.items[1].is_string:
                self.err('expected (KEY (:regex "…")) or (KEY ?var) in (:args …), found '
                         + _show(item), item.loc,
                         'e.g. (:args (user_id (:regex "u[0-9]+"))) or (:args (recipient ?dest))')
                ok = False
                continue
            pattern = rx.items[1]
            assert isinstance(pattern, Atom)
            if any(k == key.value for k, _ in out):
                self.err(f"argument {key.value!r} given twice in (:args …)", key.loc)
                ok = False
            elif self.check_regex(pattern):
                out.append((key.value, pattern.value))
            else:
                ok = False
        if not opt.items[1:]:
            self.err("(:args …) needs at least one (KEY (:regex \"…\")) or (KEY ?var)", opt.loc)
            return None
        return (tuple(out), tuple(binds)) if ok else None

    def constraint(self, node: Node, declared: set[str]) -> Formula | None:
        """One item of (:constraints …): a formula, or ``(NAME FORMULA)`` naming it."""
        if isinstance(node, SList) and len(node.items) == 2 and isinstance(node.items[0], Atom) \
                and not node.items[0].is_string:
            head = node.items[0].value
            known = (*_LTL_UNARY, *_LTL_BINARY, *_LTL_NARY, "ltl", *QUANTIFIERS, MENTIONS)
            if head not in known and head not in declared and not head.startswith(":"):
                close = difflib.get_close_matches(head, list(known), n=1, cutoff=0.75)
                if close:
                    self.err(f"unknown operator {head!r} (or a constraint named so)",
                             node.items[0].loc, f"did you mean {close[0]!r}? A constraint's "
                             "name must not look like an operator")
                    return None
                if head == BEHAVIOR_NAME:
                    self.err(f"{head!r} names the (:behavior …) pattern in reports; choose "
                             "another constraint name", node.items[0].loc)
                    return None
                f = self.formula(node.items[1], declared, (), prenex=True)
                return None if f is None else replace(f, name=head)
        return self.formula(node, declared, (), prenex=True)

    def check_regex(self, atom: Atom) -> bool:
        """A ``:regex`` must be valid Python syntax *and* within what the decoding monitor
        compiles (no backreferences, lookaround, ``\\b``, inline flags other than ``(?s)``/``(?a)``,
        bounded size): checked now, so that ``show`` and ``validate`` refuse what ``run`` would."""
        try:
            re.compile(atom.value)
        except re.error as e:
            at = _inside(atom, e.pos, 1, self.text) if e.pos is not None else atom.loc
            self.err(f"bad :regex: {e.msg}", at)
            return False
        return self.check_content(atom, regex=atom.value)

    def check_content(self, where: Node, choices: tuple[str, ...] | None = None,
                      regex: str | None = None) -> bool:
        """Build the content DFA the monitor will use (choices, a regex, or both: the choices the
        regex matches); its refusal becomes a spec error at ``where``."""
        from ltlagent.text.content import content_dfa  # content needs the automaton module

        try:
            content_dfa(choices, regex)
        except UsageError as e:
            self.err(str(e), where.loc, e.hint)
            return False
        return True

    # -- patterns
    def pattern(self, node: Node, declared: set[str], depth: int) -> Pattern | None:
        if isinstance(node, Atom):
            if node.is_string:
                self.err(f"expected a state name, found the string {node.value!r}", node.loc)
                return None
            if node.value not in declared:
                self.err(f"unknown state {node.value!r} in :behavior", node.loc,
                         _suggest(node.value, sorted(declared))
                         or f"declared states: {', '.join(sorted(declared))}")
                return None
            return Visit(node.value, node.loc)
        op = node.head()
        if op is None:
            self.err(f"expected a pattern, found {_show(node)}", node.loc,
                     "patterns are STATE or (next …), (until P Q), (always P), (or …), "
                     "(optional P), (repeat P :min m :max n)")
            return None
        items = node.items[1:]
        if op == "repeat":  # its keywords and their values are read by repeat()
            items = tuple(a for k, a in enumerate(items) if not _repeat_option(items, k))
        args = [self.pattern(a, declared, depth + 1) for a in items]
        pats = [a for a in args if a is not None]
        if len(pats) != len(args):
            return None
        bounded = _UNTIL_BOUNDED.match(op)
        if op == "next":
            if not pats:
                self.err("(next) needs at least one pattern", node.loc)
                return None
            return pats[0] if len(pats) == 1 else Next(tuple(pats), node.loc)
        if op == "or":
            if not pats:
                self.err("(or) needs at least one pattern", node.loc)
                return None
            return pats[0] if len(pats) == 1 else Or(tuple(pats), node.loc)
        if op == "until" or bounded:
            if len(pats) != 2:
                self.err(f"({op} P Q) takes exactly two patterns, found {len(pats)}", node.loc)
                return None
            lo, hi = 0, None
            if bounded:
                a, b = int(bounded.group(1)), bounded.group(2)
                lo, hi = (a, int(b)) if b is not None else (0, a)
                if lo > hi:
                    self.err(f"{op}: lower bound {lo} exceeds upper bound {hi}", node.loc)
                    return None
            return Until(pats[0], pats[1], lo, hi, node.loc)
        if op in ("always", "optional"):
            if len(pats) != 1:
                self.err(f"({op} P) takes exactly one pattern, found {len(pats)}", node.loc)
                return None
            return Always(pats[0], node.loc) if op == "always" else Repeat(pats[0], 0, 1, node.loc)
        if op == "repeat":
            return self.repeat(node, pats)
        self.err(f"unknown keyword {op!r} in :behavior", node.items[0].loc,
                 _suggest(op, _PATTERN_OPS) or f"pattern operators are {', '.join(_PATTERN_OPS)}"
                 ", until_N, until_M_N")
        return None

    def repeat(self, node: SList, pats: list[Pattern]) -> Pattern | None:
        if len(pats) != 1:
            self.err(f"(repeat P :min m :max n) takes exactly one pattern, found {len(pats)}",
                     node.loc)
            return None
        lo, hi = 0, None
        items = list(node.items[1:])
        given: dict[str, Location] = {}
        for i, a in enumerate(items):
            if isinstance(a, Atom) and not a.is_string and a.value in (":min", ":max"):
                if a.value in given:
                    self.err(f"{a.value} given twice in repeat (first at {_at(given[a.value])})",
                             a.loc, "give each bound once")
                    return None
                given[a.value] = a.loc
                v = _int(items[i + 1]) if i + 1 < len(items) else None
                if v is None:
                    found = f", found {_show(items[i + 1])}" if i + 1 < len(items) else ""
                    self.err(f"{a.value} takes a non-negative integer{found}",
                             items[i + 1].loc if found else a.loc, "e.g. (repeat P :min 1 :max 3)")
                    return None
                if a.value == ":min":
                    lo = v
                else:
                    hi = v
            elif isinstance(a, Atom) and not a.is_string and a.value.startswith(":"):
                self.err(f"unknown keyword {a.value!r} in repeat", a.loc, "use :min and :max")
                return None
        if hi is not None and lo > hi:
            self.err(f"repeat: :min {lo} exceeds :max {hi}", node.loc)
            return None
        if hi == 0:
            self.err("repeat with :max 0 matches nothing useful", node.loc)
            return None
        return Repeat(pats[0], lo, hi, node.loc)

    def check_always(self, p: Pattern, last: bool) -> None:
        """``always`` may only be the last part of the behaviour (it never ends)."""
        if isinstance(p, Always):
            if not last:
                self.err("'always' must be the last part of the behaviour: nothing can follow "
                         "a pattern that repeats forever", p.loc)
            self.check_always(p.body, last=False)
        elif isinstance(p, Next):
            for i, q in enumerate(p.parts):
                self.check_always(q, last and i == len(p.parts) - 1)
        elif isinstance(p, Or):
            for q in p.parts:
                self.check_always(q, last=False)
        elif isinstance(p, Until):
            self.check_always(p.body, last=False)
            self.check_always(p.then, last=False)
        elif isinstance(p, Repeat):
            self.check_always(p.body, last=False)

    def check_size(self, p: Pattern) -> None:
        """Bounded repetitions must not unroll past :data:`MAX_UNROLLED_STEPS` (reported at the
        repetition that contributes most, before Spot is asked)."""
        total = unrolled_size(p)
        if total <= MAX_UNROLLED_STEPS:
            return
        worst: tuple[int, Pattern] = (0, p)
        todo = [p]
        while todo:
            q = todo.pop()
            if isinstance(q, Until | Repeat):
                worst = max(worst, (unrolled_size(q), q), key=lambda t: t[0])
            todo.extend(_children(q))
        size, culprit = worst
        what = (f"this repetition unrolls to {size} steps (the whole behaviour to {total})"
                if size else f"the behaviour has {total} steps")  # no repetition: wide (or …)s
        self.err(f"{what}, more than the limit of {MAX_UNROLLED_STEPS}", culprit.loc,
                 "each repetition is written out for Spot, whose automaton needs about one state "
                 "per step and whose translation time grows quadratically with them; use an "
                 "unbounded (until P Q) or (repeat P) where the exact count does not matter")

    # -- constraints
    def formula(self, node: Node, declared: set[str], bound: tuple[str, ...] = (),
                prenex: bool = False) -> Formula | None:
        """One constraint formula. ``bound``: the variables of the enclosing quantifiers;
        ``prenex``: whether a quantifier may stand here (only first in a constraint, §2.6)."""
        if isinstance(node, Atom):
            if node.is_string:
                self.err("expected an LTL formula, found a string; raw Spot syntax goes in "
                         "(ltl \"…\")", node.loc)
                return None
            if node.value in ("true", "false"):
                return Formula(node.value, loc=node.loc)
            if node.value.startswith("?"):
                self.err(f"a variable ({node.value}) is not a formula", node.loc,
                         f"compare it with a state's value, e.g. (State {node.value}), or "
                         f"(mentions State {node.value})")
                return None
            if node.value not in declared:
                self.err(f"unknown state {node.value!r} in :constraints", node.loc,
                         _suggest(node.value, sorted(declared)))
                return None
            return Formula(node.value, is_state=True, loc=node.loc)
        op = node.head()
        args = node.items[1:]
        if op == "ltl":
            if len(args) != 1 or not isinstance(args[0], Atom) or not args[0].is_string:
                self.err('(ltl "…") takes one string in Spot syntax', node.loc)
                return None
            if not self.check_raw_ltl(args[0], declared):
                return None
            return Formula("ltl", raw=args[0].value, loc=node.loc)
        if op in QUANTIFIERS:
            return self.quantifier(node, op, declared, bound, prenex)
        if op == MENTIONS:
            if len(args) != 2 or not isinstance(args[0], Atom) or args[0].is_string \
                    or not isinstance(args[1], Atom) or args[1].is_string:
                self.err("(mentions State ?x) takes a state and a variable", node.loc)
                return None
            st = self.state_ref(args[0], declared)
            var = self.variable(args[1], bound)
            if st is None or var is None:
                return None
            return Formula(MENTIONS, (st,), loc=node.loc, var=var)
        if op is not None and op in declared and op not in _LTL_UNARY and op not in _LTL_BINARY \
                and op not in _LTL_NARY:
            return self.value_atom(node, op, bound)
        arity = 1 if op in _LTL_UNARY else 2 if op in _LTL_BINARY else -1 if op in _LTL_NARY \
            else None
        if arity is None or op is None:
            self.err(f"unknown keyword {op!r} in :constraints", node.loc,
                     _suggest(op or "", [*_LTL_UNARY, *_LTL_BINARY, *_LTL_NARY, "ltl",
                                         *QUANTIFIERS, MENTIONS]))
            return None
        if (arity > 0 and len(args) != arity) or (arity < 0 and not args):
            self.err(f"({op} …) takes {arity if arity > 0 else 'one or more'} argument(s), "
                     f"found {len(args)}", node.loc)
            return None
        subs = [f for f in (self.formula(a, declared, bound) for a in args) if f is not None]
        if len(subs) != len(args):
            return None
        f = Formula(op, tuple(subs), loc=node.loc)
        if op in PAST_OPERATORS and bound and has_future(f):
            self.err(f"a future operator inside ({op} …) in a first-order rule", node.loc,
                     "a first-order rule's past operators are evaluated step by step: write "
                     "future operators outside them")
            return None
        return f

    def quantifier(self, node: SList, op: str, declared: set[str], bound: tuple[str, ...],
                   prenex: bool) -> Formula | None:
        """``(forall (?x …) φ)`` / ``(exists (?x …) φ)``, only first in a constraint."""
        args = node.items[1:]
        if not prenex:
            self.err(f"({op} …) must come first in a constraint (or right inside another "
                     "quantifier)", node.loc,
                     "write the quantifiers first, e.g. (forall (?x) (always (implies (A ?x) "
                     "(once (B ?x)))))")
            return None
        if len(args) != 2 or not isinstance(args[0], SList) or not args[0].items:
            self.err(f"({op} (?x …) φ) takes a list of variables and a formula", node.loc)
            return None
        names: list[str] = []
        for v in args[0].items:
            if not isinstance(v, Atom) or v.is_string or not _VARIABLE.match(v.value):
                self.err(f"expected a variable such as ?x, found {_show(v)}", v.loc)
                return None
            if v.value in bound or v.value in names:
                self.err(f"variable {v.value} is already bound", v.loc,
                         "give each quantified variable its own name")
                return None
            names.append(v.value)
        body = self.formula(args[1], declared, (*bound, *names), prenex=True)
        if body is None:
            return None
        return Formula(op, (body,), loc=node.loc, vars=tuple(names))

    def state_ref(self, atom: Atom, declared: set[str]) -> Formula | None:
        if atom.value not in declared:
            self.err(f"unknown state {atom.value!r} in :constraints", atom.loc,
                     _suggest(atom.value, sorted(declared)))
            return None
        return Formula(atom.value, is_state=True, loc=atom.loc)

    def variable(self, atom: Atom, bound: tuple[str, ...]) -> str | None:
        if not _VARIABLE.match(atom.value):
            self.err(f"expected a variable such as ?x, found {atom.value!r}", atom.loc)
            return None
        if atom.value not in bound:
            self.err(f"variable {atom.value} is not bound by a forall or exists", atom.loc,
                     f"e.g. (forall ({atom.value}) …) around the rule")
            return None
        return atom.value

    def value_atom(self, node: SList, state: str, bound: tuple[str, ...]) -> Formula | None:
        """``(State ?x)``: a step in State that binds the value of ``?x``."""
        args = node.items[1:]
        if len(args) != 1 or not isinstance(args[0], Atom) or args[0].is_string:
            self.err(f"({state} ?x) compares one variable with the value the step binds",
                     node.loc)
            return None
        var = self.variable(args[0], bound)
        if var is None:
            return None
        st = self.state_map.get(state)
        if st is not None and not value_keys(st, var):
            binds = sorted({v for _, v in st.binds})
            self.err(f"state {state!r} binds " + (f"{', '.join(binds)}, not {var}" if binds
                     else "no value"), node.loc,
                     f"bind it in the state, e.g. (:args (KEY {var})); a state that binds one "
                     "variable may be compared under any name")
            return None
        return Formula(state, is_state=True, loc=node.loc, var=var)

    def check_raw_ltl(self, atom: Atom, declared: set[str]) -> bool:
        """A raw ``(ltl "…")`` string must parse in Spot, be plain LTL (``from_ltlf`` refuses
        SEREs and PSL) and name only declared states: checked here, so that a typo is a
        ``file:line:col`` error instead of a failure deep in the translation."""
        raw = atom.value
        try:
            info = spotlib.inspect_ltl(raw)
        except spotlib.LtlSyntaxError as e:  # positioned at Spot's caret
            self.err(f"bad LTL in (ltl \"…\"): {e.message}",
                     _inside(atom, e.column, e.width, self.text),
                     "Spot syntax: !, &, |, ->, <->, X, F, G, U, R, W, M; quote state names "
                     "that are not plain identifiers, e.g. \"Action-Input\"")
            return False
        if not info.is_ltl:
            self.err("(ltl \"…\") takes an LTL formula; SEREs ({…}, [*]) and PSL operators are "
                     "not supported in constraints", atom.loc,
                     "write sequences in the :behavior pattern instead")
            return False
        ok = True
        for ap in sorted(info.atomic_propositions):
            if ap in declared:
                continue
            ok = False
            # Spot reads an unquoted name that starts with F, G or X as operators: "Foo" is F(oo)
            glued = re.search(r"(?<![\w\"-])([FGX]+)" + re.escape(ap) + r"(?![\w-])", raw)
            at = glued.start() if glued else raw.find(ap)
            width = glued.end() - glued.start() if glued else len(ap)
            if glued:
                word = glued.group(0)
                hint: str | None = (f"Spot reads {word} as {' '.join(glued.group(1))} {ap}: "
                                    f"quote state names in raw LTL, e.g. \\\"{word}\\\"")
            else:
                hint = _suggest(ap, sorted(declared)) or \
                    f"declared states: {', '.join(sorted(declared))}"
            self.err(f"unknown state {ap!r} in (ltl \"…\")", _inside(atom, at, width, self.text),
                     hint)
        return ok


#: Future-time operators (a raw ``(ltl "…")`` formula counts as one: it may use any).
_FUTURE_OPERATORS = ("next", "weak-next", "always", "eventually", "until", "release", "ltl")


def has_past(f: Formula) -> bool:
    """Whether a formula uses a past-time operator anywhere."""
    return f.op in PAST_OPERATORS or any(has_past(a) for a in f.args)


def has_future(f: Formula) -> bool:
    """Whether a formula uses a future-time operator anywhere (``(ltl "…")`` included)."""
    return f.op in _FUTURE_OPERATORS or any(has_future(a) for a in f.args)


def value_keys(state: State, var: str) -> tuple[str, ...]:
    """The argument keys whose values ``(state var)`` compares with: those that bind ``var``, or
    every binding key when the state binds one variable only (design §2.6)."""
    keys = tuple(k for k, v in state.binds if v == var)
    if keys:
        return keys
    if len({v for _, v in state.binds}) == 1:
        return tuple(k for k, _ in state.binds)
    return ()


def any_sequence(names: tuple[str, ...], loc: Location | None = None) -> Pattern:
    """The behaviour of a spec without (:behavior …): one or more steps in any declared states."""
    body: Pattern = Visit(names[0], loc) if len(names) == 1 else \
        Or(tuple(Visit(n, loc) for n in names), loc)
    return Repeat(body, 1, None, loc)


def _inside(atom: Atom, index: int, width: int, text: str) -> Location:
    """The location of characters ``index…index+width`` of a string atom's value (``index`` may be
    the end: the closing quote), when the source spells the value without escapes; else the
    atom's own location."""
    loc = atom.loc
    if text[loc.offset + 1 : loc.end - 1] != atom.value or not 0 <= index <= len(atom.value):
        return loc
    off = loc.offset + 1 + index
    return Location(loc.source, loc.line, loc.column + 1 + index, off, off + max(1, width))


def _children(p: Pattern) -> tuple[Pattern, ...]:
    if isinstance(p, Visit):
        return ()
    if isinstance(p, Next | Or):
        return p.parts
    if isinstance(p, Until):
        return (p.body, p.then)
    return (p.body,)


def unrolled_size(p: Pattern) -> int:
    """Steps of ``p`` with every bounded repetition written out (an unbounded one counts its
    minimum plus one iteration): the size that Spot's automaton and translation time follow."""
    if isinstance(p, Visit):
        return 1
    if isinstance(p, Next | Or):
        return sum(unrolled_size(q) for q in p.parts)
    if isinstance(p, Until | Repeat):
        times = max(1, p.max if p.max is not None else p.min + 1)
        return unrolled_size(p.body) * times + (unrolled_size(p.then) if isinstance(p, Until) else 0)
    return unrolled_size(p.body)


def _repeat_option(items: tuple[Node, ...], k: int) -> bool:
    """Whether ``items[k]`` of a ``repeat`` is a keyword (``:min``) or the value after one."""
    def keyword(a: Node) -> bool:
        return isinstance(a, Atom) and not a.is_string and a.value.startswith(":")
    return keyword(items[k]) or (k > 0 and keyword(items[k - 1]))


def _int(node: Node) -> int | None:
    if isinstance(node, Atom) and not node.is_string and node.value.isascii() and node.value.isdigit():
        return int(node.value)
    return None


def _show(node: Node) -> str:
    if isinstance(node, Atom):
        return f"the string {node.value!r}" if node.is_string else f"{node.value!r}"
    head = node.head()
    return f"({head} …)" if head else "a list"


def _at(loc: Location | None) -> str:
    return f"{loc.line}:{loc.column}" if loc else "?"


def _texts_inside(states: Sequence[State]) -> list[tuple[State, State]]:
    """Pairs (a, b), in declaration order of a then b, where a's prompt text occurs inside b's other
    than as its suffix (every such occurrence, e.g. ":" in "::", makes the transition ambiguous).
    Each substring of each text, up to the longest text's length, is looked up in a table of the
    texts: linear in the states for prompt strings of bounded length, not quadratic."""
    by_text = {st.text: i for i, st in enumerate(states)}
    longest = max((len(t) for t in by_text), default=0)
    pairs: set[tuple[int, int]] = set()
    for j, b in enumerate(states):
        t = b.text
        if "" in by_text and t:  # an empty text occurs at the start of every other one
            pairs.add((by_text[""], j))
        for start in range(len(t)):
            for end in range(start + 1, min(len(t), start + longest) + 1):
                i = by_text.get(t[start:end])
                if i is None or i == j:
                    continue
                if t.find(states[i].text) != len(t) - len(states[i].text):  # first occurrence not the suffix
                    pairs.add((i, j))
    return [(states[i], states[j]) for i, j in sorted(pairs)]


def _suggest(word: str, options: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(word, list(options), n=1)
    return f"did you mean {close[0]!r}?" if close else None


def parse_spec(text: str, source: str = "<string>") -> Spec:
    """Parse and statically check spec source text (the language question: is it well formed?).

    Emptiness of the language needs the automaton and is checked by
    :func:`ltlagent.logic.automaton.build_automaton`.
    """
    if "\x00" in text:
        raise SpecError("this looks like a binary file, not a spec (it contains NUL bytes)",
                        Location(source, 1, 1))
    return _Parser(text, source).spec(read_sexps(text, source))


def load_spec(path: str | Path) -> Spec:
    """Read a spec from a file path or a bundled spec name (``"react"``)."""
    p = resolve_spec_path(path)
    data = p.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise SpecError(f"not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
                        "is this a binary file?", Location(str(path), line, col)) from None
    return parse_spec(text, str(path))


def bundled_specs() -> dict[str, Path]:
    """The specs shipped with ltlagent, by name (file stem)."""
    for base in (Path(__file__).parent.parent / "specs", Path(__file__).parent.parent.parent / "specs"):
        if base.is_dir():
            return {p.stem: p for p in sorted(base.glob("*.sexp"))}
    return {}


def resolve_spec_path(path: str | Path) -> Path:
    """The bundled spec when ``path`` is a bare bundled name (a string such as ``"react"``: a local
    file of that name is ``./react``, so nothing shadows a bundled spec silently), else the file;
    :class:`UsageError` if neither, naming a broken or looping symbolic link as such."""
    bundled = bundled_specs()
    if isinstance(path, str) and path in bundled:
        return bundled[path]
    p = Path(path)
    if p.is_file():
        return p
    if p.is_symlink():  # exists() and is_file() say False for a dangling or looping link
        try:
            p.stat()
        except OSError as e:
            why = "a symbolic link loop" if e.errno == errno.ELOOP else "a broken symbolic link"
            raise UsageError(f"{path}: {why} ({e.strerror})") from None
    if p.exists():
        raise UsageError(f"{path}: not a file")
    hint = _suggest(str(path), bundled)
    raise UsageError(f"{path}: no such file or bundled spec"
                     + (f" ({hint})" if hint else f" (bundled: {', '.join(bundled)})"))
