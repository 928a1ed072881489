"""Spec → formulas: the behaviour in readable form, the constraints as the formula Spot translates
(docs/design.md §3).

States are letters of one alphabet, encoded for Spot as a binary code over ⌈log2(n+1)⌉
propositions ``b0, b1, …`` (code 0 means "the trace has ended"). Constraints are spelled twice
from one builder: readable (state names, what ``show`` prints) and coded (what Spot gets). The
behaviour is not given to Spot: :mod:`ltlagent.logic.pattern` compiles it (§3.2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ltlagent import spotlib
from ltlagent.errors import SpecError, UsageError
from ltlagent.spec.syntax import (
    MAX_UNROLLED_STEPS,
    Formula,
    Next,
    Or,
    Pattern,
    Repeat,
    Spec,
    Until,
    Visit,
    unrolled_size,
)

__all__ = ["Encoding", "Formulas", "encode", "build_formulas", "constraints_formula", "sere",
           "constraint_ltl", "PastProps", "ALIVE", "PAST_PREFIX"]

ALIVE = "alive"


@dataclass(frozen=True)
class Encoding:
    """The binary code of each state: state ``i`` (0-based, declaration order) has code ``i+1``."""

    names: tuple[str, ...]

    @property
    def bits(self) -> int:
        return max(1, (len(self.names)).bit_length())

    @property
    def aps(self) -> tuple[str, ...]:
        return tuple(f"b{i}" for i in range(self.bits))

    def code(self, name: str) -> int:
        return self.names.index(name) + 1

    def cube(self, code: int) -> str:
        """The conjunction of literals that spells ``code``."""
        lits = [("" if (code >> i) & 1 else "!") + f"b{i}" for i in range(self.bits)]
        return "(" + " & ".join(lits) + ")"

    def state_cube(self, name: str) -> str:
        return self.cube(self.code(name))

    def valid(self) -> str:
        """Some declared state holds (code in 1..n)."""
        return "(" + " | ".join(self.cube(i + 1) for i in range(len(self.names))) + ")"


def encode(spec: Spec) -> Encoding:
    return Encoding(spec.names)


def _quote(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _times(lo: int, hi: int | None) -> str:  # after an atom or a {…} group: never ambiguous
    """A SERE repetition suffix: ``[*]``, ``[+]``, ``[*k]``, ``[*lo..]``, ``[*lo..hi]``."""
    if hi is None:
        return "[*]" if lo == 0 else "[+]" if lo == 1 else f"[*{lo}..]"
    return f"[*{lo}]" if lo == hi else f"[*{lo}..{hi}]"


def sere(p: Pattern, atom: Callable[[str], str] = _quote) -> str:
    """A pattern in SERE notation, for people (``show``): ``;`` sequence, ``|`` choice, ``[*lo..hi]``
    repetition, ``^ω`` the final ``always`` (iterations non-empty). ltlagent compiles patterns
    itself (:mod:`ltlagent.logic.pattern`); Spot never reads this string (docs/design.md §3.2)."""
    if isinstance(p, Visit):
        return atom(p.name)
    if isinstance(p, Next):
        return "{" + ";".join(sere(q, atom) for q in p.parts) + "}"
    if isinstance(p, Or):
        return "{" + " | ".join(sere(q, atom) for q in p.parts) + "}"
    if isinstance(p, Until):
        return "{" + sere(p.body, atom) + _times(p.min, p.max) + ";" + sere(p.then, atom) + "}"
    if isinstance(p, Repeat):
        return sere(p.body, atom) + _times(p.min, p.max)
    return sere(p.body, atom) + "^ω"


_UN = {"not": "!", "next": "X[!]", "weak-next": "X", "always": "G", "eventually": "F"}
_BIN = {"until": "U", "release": "R", "implies": "->", "iff": "<->", "and": "&", "or": "|"}
#: How the readable spelling writes past operators (Spot has none; docs/design.md §3.5).
_PAST_READABLE = {"previously": "Y", "once": "O", "historically": "H", "since": "S"}
#: Prefix of the fresh propositions that stand for past subformulas.
PAST_PREFIX = "past"


class PastProps:
    """Collects the fresh propositions that stand for past subformulas while one formula is
    built, with the LTLf formulas that define them (docs/design.md §3.5).

    Each past subformula's truth at step i depends only on steps 0..i, so a fresh proposition
    ``p`` constrained by the operator's recursive definition — written with (weak) *next* — takes
    exactly that truth value on every trace; projecting ``p`` away afterwards leaves the meaning
    of the original formula. Identical subformulas share one proposition.
    """

    def __init__(self) -> None:
        self.names: dict[str, str] = {}  # coded subformula -> proposition
        self.definitions: list[str] = []

    def prop(self, op: str, args: list[str]) -> str:
        key = op + "(" + ",".join(args) + ")"
        if key in self.names:
            return self.names[key]
        p = f"{PAST_PREFIX}{len(self.names)}"
        self.names[key] = p
        if op == "previously":  # Y φ: false at the first step; then φ one step before
            phi = args[0]
            d = f"!{p} & G(({phi} -> X {p}) & (!({phi}) -> X !{p}))"
        elif op == "once":  # O φ = φ | Y O φ
            phi = args[0]
            d = f"({p} <-> ({phi})) & G(({p} -> X {p}) & (!{p} -> X({p} <-> ({phi}))))"
        elif op == "historically":  # H φ = φ & Z H φ
            phi = args[0]
            d = f"({p} <-> ({phi})) & G((!{p} -> X !{p}) & ({p} -> X({p} <-> ({phi}))))"
        else:  # φ S ψ = ψ | (φ & Y(φ S ψ))
            phi, psi = args
            d = (f"({p} <-> ({psi})) & G(({p} -> X({p} <-> (({psi}) | ({phi})))) & "
                 f"(!{p} -> X({p} <-> ({psi}))))")
        self.definitions.append(d)
        return p

    @property
    def hidden(self) -> tuple[str, ...]:
        return tuple(self.names.values())


def constraint_ltl(f: Formula, atom: Callable[[str], str], past: PastProps | None = None) -> str:
    """A constraint as an LTL string; raw ``(ltl "…")`` text is passed through with state names
    (quoted or bare) replaced by ``atom``. Past operators become fresh propositions collected in
    ``past`` (Spot's spelling); without ``past`` they are written readably (``Y``, ``O``, ``H``,
    ``S``), for people only."""
    if f.is_first_order and past is not None:
        raise UsageError("a first-order rule (values bound from arguments: (State ?x), "
                         "mentions, forall, exists) has no propositional automaton",
                         hint="check-log, the guard and Policy monitor it directly (design §2.6)")
    if f.is_state:
        return atom(f.op) + (f"({f.var})" if f.var else "")
    if f.op == "mentions":
        return f"mentions({atom(f.args[0].op)}, {f.var})"
    if f.op in ("forall", "exists"):
        q = "∀" if f.op == "forall" else "∃"
        return f"{q}{' '.join(f.vars)}. " + constraint_ltl(f.args[0], atom, past)
    if f.op in ("true", "false"):
        return f.op
    if f.op == "ltl":
        return spotlib.rename_atomic_propositions(f.raw or "", atom)
    subs = [constraint_ltl(a, atom, past) for a in f.args]
    if f.op in _PAST_READABLE:
        if past is not None:
            return past.prop(f.op, subs)
        if f.op == "since":
            return f"({subs[0]} S {subs[1]})"
        return f"{_PAST_READABLE[f.op]}({subs[0]})"
    if f.op in _UN:
        return f"{_UN[f.op]}({subs[0]})"
    return "(" + f" {_BIN[f.op]} ".join(subs) + ")"


@dataclass(frozen=True)
class Formulas:
    """A spec's formulas: the behaviour as a regular expression (``readable``, state names; ltlagent
    compiles it, docs/design.md §3.2) and the constraints, readable and as the one LTL formula
    over the state code that Spot translates (``coded``; "" when there are no constraints)."""

    readable: str
    coded: str
    infinite: bool
    constraints_readable: tuple[str, ...] = ()
    #: fresh propositions standing for past subformulas, projected away after translation
    hidden: tuple[str, ...] = ()


def build_formulas(spec: Spec) -> Formulas:
    """The behaviour's readable pattern and the constraints' formula with the trace axioms.

    A spec built in Python rather than read from a file gets the reader's size check here.
    """
    size = unrolled_size(spec.behavior)
    if size > MAX_UNROLLED_STEPS:
        raise SpecError(f"the behaviour unrolls to {size} steps, more than the limit of "
                        f"{MAX_UNROLLED_STEPS}", spec.behavior.loc, spec.text or None,
                        "see MAX_UNROLLED_STEPS in ltlagent.spec.syntax (docs/design.md §3.3)")
    past = PastProps()
    coded = constraints_formula(spec, past) if spec.constraints else ""
    cons = tuple(constraint_ltl(c, _quote) for c in spec.constraints)
    return Formulas(sere(spec.behavior), coded, spec.is_infinite, cons, past.hidden)


def constraints_formula(spec: Spec, past: PastProps) -> str:
    """The constraints as one formula over the state code, with the axioms that make its words
    traces: on finite specs LTLf through ``alive`` (a non-empty run of valid codes, then code 0
    forever), on infinite ones every letter a valid code; past subformulas become the
    propositions of ``past`` with their definitions (§3.5)."""
    enc = encode(spec)
    if not spec.is_infinite:
        parts = [ALIVE, f"({ALIVE} U G!{ALIVE})", f"G({ALIVE} -> {enc.valid()})",
                 f"G(!{ALIVE} -> {enc.cube(0)})"]
        parts += [spotlib.ltlf_to_ltl(constraint_ltl(c, enc.state_cube, past), ALIVE)
                  for c in spec.constraints]
        parts += [spotlib.ltlf_to_ltl(d, ALIVE) for d in past.definitions]
        return " & ".join(parts)
    parts = [f"G({enc.valid()})"]
    parts += ["(" + constraint_ltl(c, enc.state_cube, past) + ")" for c in spec.constraints]
    parts += ["(" + d + ")" for d in past.definitions]
    return " & ".join(parts)
