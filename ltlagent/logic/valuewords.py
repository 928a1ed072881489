"""Why a value was refused, in words: the argument, the value, the condition it failed and the
values that would be allowed now (docs/design.md §2.6).

A first-order rule of the fragment the decoder enforces (:mod:`ltlagent.logic.valueterms`),

    (forall (?x) (always (implies TRIGGER CONDITION)))

breaks at a trigger step whose value ``v`` fails CONDITION. The refusal then reads as the rule
means it: ``recipient 'US13…' was not mentioned by the user; mentioned by the user: 'Pay my rent to
DE89…'``. The argument key is the one the call bound ``v`` at; the failed condition is CONDITION's
own words (its conjuncts that are false for ``v``, when it is a conjunction); the values allowed now
are CONDITION's value term after the steps so far (:func:`condition_term`): a finite set listed, the
texts a ``mentions`` atom reads shown in short (with the id-like words in them), truncated. Any
other rule shape gives None, and the caller keeps its generic wording (the values of the instance).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ltlagent.logic.composite import StepValues
from ltlagent.logic.valueterms import ANY, NONE, condition_term, fragment
from ltlagent.spec.syntax import MENTIONS, Formula, Spec, value_keys
from ltlagent.text.values import ValueAnd, ValueEnum, ValueNot, ValueOr, ValueSubstrings, ValueTerm

__all__ = ["value_reason", "holds", "excerpt", "MAX_SHOWN"]

#: Most values, texts and id-like words an explanation lists (then "and N more").
MAX_SHOWN = 5
_VALUE_CHARS = 40  # a value longer than this is cut, with "…"
_TEXT_CHARS = 60  # an excerpt of a longer text
_AUTHORS = {"user": "the user", "tool": "a tool result", "assistant": "the assistant",
            "system": "the system prompt"}
#: Separators of the words an excerpt lists: a word with a digit or an @ in it is id-like (an
#: IBAN, an e-mail address, a bill or user id), the kind of value rules about provenance compare.
_SPLIT = re.compile(r"""[\s"'`,;:()<>\[\]{}]+""")


def holds(term: ValueTerm, value: str) -> bool:
    """Whether ``value`` is in the set ``term`` denotes (``mentions`` as Python's ``in``)."""
    if isinstance(term, ValueEnum):
        return value in term.values
    if isinstance(term, ValueSubstrings):
        return any(value in t for t in term.texts)
    if isinstance(term, ValueNot):
        return not holds(term.term, value)
    if isinstance(term, ValueAnd):
        return all(holds(t, value) for t in term.terms)
    if isinstance(term, ValueOr):
        return any(holds(t, value) for t in term.terms)
    raise TypeError(f"expected a value term, got {type(term).__name__}")


def _cut(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n - 1] + "…"


def _quote(value: str) -> str:
    return repr(_cut(value, _VALUE_CHARS))


def _listed(items: Sequence[str], what: str) -> str:
    shown = ", ".join(items[:MAX_SHOWN])
    more = len(items) - MAX_SHOWN
    return shown + (f" and {more} more {what}" if more > 0 else "")


def _ids(text: str) -> list[str]:
    """The id-like words of a text, in order, without repeats."""
    out: dict[str, None] = {}
    for w in _SPLIT.split(text):
        w = w.rstrip(".!?")
        if len(w) >= 2 and any(c.isdigit() or c == "@" for c in w):
            out.setdefault(w, None)
    return list(out)


def excerpt(texts: Sequence[str]) -> str:
    """The texts a ``mentions`` atom reads, in short: each quoted whole when short, else its start
    and the id-like words in it (the last texts first: the latest is the likeliest meant)."""
    shown: list[str] = []
    for t in reversed(texts):
        flat = " ".join(t.split())
        if len(flat) <= _TEXT_CHARS:
            shown.append(repr(flat))
            continue
        ids = _ids(flat)
        words = f" (with {_listed([_quote(w) for w in ids], 'words')})" if ids else ""
        shown.append(repr(_cut(flat, _TEXT_CHARS)) + words)
    return _listed(shown, "texts")


def _describe(term: ValueTerm) -> str:
    """A value term in words (for a condition that is not one positive set)."""
    if term == ANY:
        return "any value"
    if term == NONE:
        return "no value"
    if isinstance(term, ValueEnum):
        return "one of " + _listed([_quote(v) for v in term.values], "values")
    if isinstance(term, ValueSubstrings):
        return "a part of " + excerpt(term.texts)
    if isinstance(term, ValueNot):
        return "not " + _describe(term.term)
    if isinstance(term, ValueAnd):
        return " and ".join(_describe(t) for t in term.terms)
    if isinstance(term, ValueOr):
        return " or ".join(_describe(t) for t in term.terms)
    raise TypeError(f"expected a value term, got {type(term).__name__}")


def _shown(term: ValueTerm) -> str | None:
    """The allowed values of a positive term (a finite set, texts, their union), shown; None for
    a term with a negation or a conjunction in it."""
    if isinstance(term, ValueEnum):
        return _listed([_quote(v) for v in term.values], "values")
    if isinstance(term, ValueSubstrings):
        return excerpt(term.texts)
    if isinstance(term, ValueOr):
        parts = [_shown(t) for t in term.terms]
        return None if any(p is None for p in parts) else "; ".join(p for p in parts if p)
    return None


class _Words:
    """A rule's condition in words, for one spec."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec

    def who(self, name: str) -> str:
        """A step in state ``name`` as a reader says it: "the user", "a find_user call"."""
        st = self.spec.state(name)
        if st.calls is not None:
            base = "a tool call" if not st.calls else \
                "a " + " or ".join(st.calls) + " call"
        elif st.author is not None:
            base = _AUTHORS.get(st.author, f"a {st.author} message")
        else:
            base = "a message"
        narrowed = st.contains is not None or bool(st.args)
        return f"{base} ({name})" if narrowed else base

    def core(self, g: Formula) -> str:
        """What a value satisfying ``g`` is, as a past participle phrase ("mentioned by the user")."""
        if g.op == MENTIONS:
            return f"mentioned by {self.who(g.args[0].op)}"
        if g.is_state and g.var is not None:
            return f"named in {self.who(g.op)}"
        if g.op == "once":
            return self.core(g.args[0])
        if g.op == "historically":
            return f"always {self.core(g.args[0])}"
        if g.op == "previously":
            return f"{self.core(g.args[0])} at the step before"
        if g.op == "not":
            return f"not {self.core(g.args[0])}"
        if g.op == "since":
            return f"{self.core(g.args[1])}, and {self.core(g.args[0])} ever since"
        if g.op in ("and", "or"):
            valued = [a for a in g.args if a.is_first_order]
            plain = [a for a in g.args if not a.is_first_order]
            words = f" {g.op} ".join(self.core(a) for a in valued)
            if not valued:
                return self.qualifier(g)
            if plain and g.op == "and":
                words += " " + " and ".join(self.qualifier(a) for a in plain)
            elif plain:
                words += " or " + " or ".join(self.qualifier(a) for a in plain)
            return words
        if g.op == "implies":
            return f"{self.core(g.args[1])} where {self.qualifier(g.args[0])}"
        return self.qualifier(g)

    def qualifier(self, g: Formula) -> str:
        """A condition on the steps, not the value ("right after a find_user call")."""
        if g.is_state and g.var is None:
            return f"at {self.who(g.op)}"
        if g.op == "previously" and g.args[0].is_state and g.args[0].var is None:
            return f"right after {self.who(g.args[0].op)}"
        if g.op == "once" and g.args[0].is_state and g.args[0].var is None:
            return f"after {self.who(g.args[0].op)}"
        return f"where {_sexp(g)} holds"


def _sexp(g: Formula) -> str:
    """A formula written back as the spec writes it (for conditions without words of their own)."""
    if g.op == "ltl":
        return f'(ltl "{g.raw}")'
    if g.op == MENTIONS:
        return f"(mentions {g.args[0].op} {g.var})"
    if g.is_state:
        return f"({g.op} {g.var})" if g.var else g.op
    if not g.args:
        return g.op
    return f"({g.op} {' '.join(_sexp(a) for a in g.args)})"


def value_reason(rule: Formula, spec: Spec, state: int, step: StepValues,
                 history: Sequence[StepValues], binding: Sequence[tuple[str, str]]) -> str | None:
    """Why the step ``step`` (in state index ``state``, after ``history``) breaks ``rule`` for the
    values ``binding``, in words; None when the rule is outside the fragment or the step is not
    one of its triggers (the caller then names the values only)."""
    parts = fragment(rule)
    if parts is None:
        return None
    var, triggers, cond = parts
    if spec.names[state] not in triggers:
        return None
    value = dict(binding).get(var)
    if value is None:
        return None
    allowed = condition_term(cond, var, spec, history, state)
    if allowed is None or holds(allowed, value):
        return None
    keys = value_keys(spec.states[state], var)
    key = next((k for k in keys if value in step.keyed.get(k, ())), keys[0] if keys else var)
    words = _Words(spec)

    def failed(g: Formula) -> str:
        """Why ``g`` is false for the value: its false conjuncts (each in its own words, so that
        a failed negation reads "was …" even when every conjunct fails), a negation undone."""
        if g.op == "and":
            terms = [condition_term(a, var, spec, history, state) for a in g.args]
            false = [a for a, t in zip(g.args, terms) if t is not None and not holds(t, value)]
            if false:
                return " and ".join(failed(a) for a in false)
        if g.op == "not":
            return f"was {words.core(g.args[0])}"
        if not g.is_first_order:
            return f"was not written {words.qualifier(g)}"
        return f"was not {words.core(g)}"

    head = f"{key} {_quote(value)} {failed(cond)}"
    shown = _shown(allowed)
    if allowed == NONE:
        return f"{head}; no value is allowed there now"
    if shown is not None:
        return f"{head}; {words.core(cond)}: {shown}"
    return f"{head}; allowed now: {_describe(allowed)}"
