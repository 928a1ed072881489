"""Spec → the formula handed to Spot (docs/design.md §3).

States are letters of one alphabet, encoded for Spot as a binary code over ⌈log2(n+1)⌉
propositions ``b0, b1, …`` (code 0 means "the trace has ended"). The same builder produces two
strings: a readable one in state names (what ``show`` prints) and the coded one Spot gets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ltlagent import spotlib
from ltlagent.errors import SpecError, UsageError
from ltlagent.spec.syntax import (
    MAX_UNROLLED_STEPS,
    Always,
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

__all__ = ["Encoding", "Formulas", "encode", "build_formulas", "sere", "constraint_ltl",
           "PastProps", "has_past", "ALIVE", "MARK", "MAX_SERE_BOUND", "PAST_PREFIX"]

ALIVE = "alive"
MARK = "m"
#: Spot's SERE repetition bounds are 8-bit (254 at most; 255 means unbounded): larger ones are split.
MAX_SERE_BOUND = 254


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


def _repeat(body: str, lo: int, hi: int | None) -> str:
    """``{body}[*lo..hi]`` spelled so that Spot keeps its meaning and translates it quickly.

    Three things shape the spelling (docs/design.md §3.3):

    * Spot's SERE repetition bounds are 8-bit, so a bound above :data:`MAX_SERE_BOUND` is split.
      The split is *greedy*: ``r[*0..400]`` is written ``r[*0..253] | r[*254];r[*0..146]`` (the
      second block starts only once the first is full), not ``r[*0..254];r[*0..146]``. Both
      denote the same words (concatenation is associative), but the second is ambiguous: after
      k letters the translator must track every split i + j = k, and its derivative formulas grow
      with k, so the translation was cubic-like (``:max 2000`` took 113 s; greedy: about 1 s).
    * Spot 2.13 simplifies ``{r}[*0..n]`` wrongly when every word of ``r`` has length ≥ 2 (e.g.
      ``{a[*2..]}[*0..1]`` becomes ``a[*]``, which accepts ``a``); found by our differential test.
      So a block that may repeat zero times is written ``{[*0] | {r}[*1..n]}``, which Spot keeps.
    * Callers bound ``hi`` (and ``lo``) by :data:`MAX_REPEAT_BOUND` when the spec is read.
    """
    if hi is None:
        head: list[str] = []
        while lo > MAX_SERE_BOUND:  # fixed-count blocks are unambiguous: no greedy form needed
            head.append(_block(body, MAX_SERE_BOUND, MAX_SERE_BOUND))
            lo -= MAX_SERE_BOUND
        tail = "{[*0] | {" + body + "}[+]}" if lo == 0 else "{" + body + "}" + f"[*{lo}..]"
        return ";".join([*head, tail])
    if hi <= MAX_SERE_BOUND:
        return _block(body, lo, hi)
    rest = _repeat(body, max(0, lo - MAX_SERE_BOUND), hi - MAX_SERE_BOUND)
    full = _block(body, MAX_SERE_BOUND, MAX_SERE_BOUND) + ";" + rest
    if lo >= MAX_SERE_BOUND:
        return "{" + full + "}"
    return "{" + _block(body, lo, MAX_SERE_BOUND - 1) + " | {" + full + "}}"


def _block(body: str, lo: int, hi: int) -> str:
    """``{body}[*lo..hi]`` for bounds Spot accepts (``hi`` ≤ :data:`MAX_SERE_BOUND`)."""
    if hi == 0:
        return "[*0]"
    if lo == 0:
        return "{[*0] | {" + body + "}" + f"[*1..{hi}]" + "}"
    return "{" + body + "}" + (f"[*{lo}]" if lo == hi else f"[*{lo}..{hi}]")


def sere(p: Pattern, atom: Callable[[str], str]) -> str:
    """The SERE (regular expression over letters) of a finite pattern (no ``always``)."""
    if isinstance(p, Visit):
        return atom(p.name)
    if isinstance(p, Next):
        return "{" + ";".join(sere(q, atom) for q in p.parts) + "}"
    if isinstance(p, Or):
        return "{" + " | ".join(sere(q, atom) for q in p.parts) + "}"
    if isinstance(p, Until):
        return "{" + _repeat_of(p.body, p.min, p.max, atom) + ";" + sere(p.then, atom) + "}"
    if isinstance(p, Repeat):
        return "{" + _repeat_of(p.body, p.min, p.max, atom) + "}"
    raise TypeError(f"'always' cannot occur inside a finite pattern: {p!r}")


def nullable(p: Pattern) -> bool:
    """Whether a finite pattern matches the empty trace (a repeat that may run zero times, …)."""
    if isinstance(p, Visit):
        return False
    if isinstance(p, Next):
        return all(nullable(q) for q in p.parts)
    if isinstance(p, Or):
        return any(nullable(q) for q in p.parts)
    if isinstance(p, Until):
        return nullable(p.then) and (p.min == 0 or nullable(p.body))
    if isinstance(p, Repeat):
        return p.min == 0 or p.max == 0 or nullable(p.body)
    return False


def _repeat_of(body: Pattern, lo: int, hi: int | None, atom: Callable[[str], str]) -> str:
    """``{body}[*lo..hi]``. A body that matches the empty trace is repeated without it:
    ``{ε | r}[*lo..hi]`` = ``{r}[*0..hi]`` (empty rounds can be dropped), written with ``r`` as
    ``{body && [+]}``. Spot 2.13 mis-simplifies the star of a nullable body whose other words are
    all ≥ 2 letters long (``{[*0] | a[*2..]}[+]`` became ``a[*]``: the differential test found
    it with nested repeats; docs/design.md §3.3)."""
    if nullable(body):
        return _repeat("{" + sere(body, atom) + " && [+]}", 0, hi)
    return _repeat(sere(body, atom), lo, hi)


def split_always(p: Pattern) -> tuple[list[Pattern], Pattern | None]:
    """Split a behaviour into its finite prefix parts and the body of its final ``always``."""
    if isinstance(p, Always):
        return [], p.body
    if isinstance(p, Next) and _ends_in_always(p):
        prefix, body = split_always(p.parts[-1])
        return list(p.parts[:-1]) + prefix, body
    return [p], None


def _ends_in_always(p: Pattern) -> bool:
    while isinstance(p, Next):
        p = p.parts[-1]
    return isinstance(p, Always)


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


def has_past(f: Formula) -> bool:
    """Whether a constraint uses a past-time operator."""
    return f.op in _PAST_READABLE or any(has_past(a) for a in f.args)


@dataclass(frozen=True)
class Formulas:
    """The formula of a spec in two spellings: ``readable`` (state names) and ``coded`` (Spot)."""

    readable: str
    coded: str
    infinite: bool
    constraints_readable: tuple[str, ...] = ()
    #: fresh propositions standing for past subformulas, projected away after translation
    hidden: tuple[str, ...] = ()


def build_formulas(spec: Spec) -> Formulas:
    """Build the whole formula: pattern, trace-end/alphabet axioms, and constraints.

    A spec built in Python rather than read from a file gets the reader's size check here.
    """
    size = unrolled_size(spec.behavior)
    if size > MAX_UNROLLED_STEPS:
        raise SpecError(f"the behaviour unrolls to {size} steps, more than the limit of "
                        f"{MAX_UNROLLED_STEPS}", spec.behavior.loc, spec.text or None,
                        "see MAX_UNROLLED_STEPS in ltlagent.spec.syntax (docs/design.md §3.3)")
    enc = encode(spec)
    prefix, body = split_always(spec.behavior)
    readable = _build(spec, prefix, body, _quote, None, None)
    past = PastProps()
    coded = _build(spec, prefix, body, enc.state_cube, enc, past)
    cons = tuple(constraint_ltl(c, _quote) for c in spec.constraints)
    return Formulas(readable, coded, body is not None, cons, past.hidden)


def _build(spec: Spec, prefix: list[Pattern], body: Pattern | None,
           atom: Callable[[str], str], enc: Encoding | None, past: PastProps | None) -> str:
    if body is None:
        pat = sere(prefix[0] if len(prefix) == 1 else Next(tuple(prefix)), atom)
        parts = [f"({{{pat}}}<>=> G!{ALIVE})", ALIVE, f"({ALIVE} U G!{ALIVE})"]
        if enc is not None:
            parts += [f"G({ALIVE} -> {enc.valid()})", f"G(!{ALIVE} -> {enc.cube(0)})"]
        for c in spec.constraints:
            if past is None and has_past(c):  # readable only: Spot cannot parse past operators
                parts.append(f"LTLf({constraint_ltl(c, atom)})")
            else:
                parts.append(spotlib.ltlf_to_ltl(constraint_ltl(c, atom, past), ALIVE))
        for d in past.definitions if past is not None else ():
            parts.append(spotlib.ltlf_to_ltl(d, ALIVE))
        return " & ".join(parts)
    it = f"{{{{{sere(body, atom)}}} && {{(!{MARK})[*];{MARK}}}}}"
    if prefix:
        pre = sere(prefix[0] if len(prefix) == 1 else Next(tuple(prefix)), atom)
        first = f"{{{{{{{pre}}} && {{(!{MARK})[*]}}}};{it}}}!"
    else:
        first = f"{it}!"
    parts = [first, f"G({MARK} -> X{it}!)", f"GF {MARK}"]
    if enc is not None:
        parts.append(f"G({enc.valid()})")
    for c in spec.constraints:
        parts.append("(" + constraint_ltl(c, atom, past) + ")")
    for d in past.definitions if past is not None else ():
        parts.append("(" + d + ")")
    return " & ".join(parts)
