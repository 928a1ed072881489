"""Spec → the formula handed to Spot (DESIGN §3).

States are letters of one alphabet, encoded for Spot as a binary code over ⌈log2(n+1)⌉
propositions ``b0, b1, …`` (code 0 means "the trace has ended"). The same builder produces two
strings: a readable one in state names (what ``show`` prints) and the coded one Spot gets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .spec import Always, Formula, Next, Or, Pattern, Repeat, Spec, Step, Until

__all__ = ["Encoding", "Formulas", "encode", "build_formulas", "sere", "constraint_ltl",
           "ALIVE", "MARK", "MAX_SERE_BOUND"]

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


def _ranges(lo: int, hi: int | None) -> list[tuple[int, int | None]]:
    """``[*lo..hi]`` as a chain of ranges whose bounds Spot accepts (each ≤ 254)."""
    out: list[tuple[int, int | None]] = []
    if hi is None:
        while lo > MAX_SERE_BOUND:
            out.append((MAX_SERE_BOUND, MAX_SERE_BOUND))
            lo -= MAX_SERE_BOUND
        return [*out, (lo, None)]
    while hi > 0:
        h = min(hi, MAX_SERE_BOUND)
        lo_i = min(lo, h)
        out.append((lo_i, h))
        lo -= lo_i
        hi -= h
    return out or [(0, 0)]


def _repeat(body: str, lo: int, hi: int | None) -> str:
    """``{body}[*lo..hi]`` spelled so that Spot keeps its meaning.

    Spot 2.13 simplifies ``{r}[*0..n]`` wrongly when every word of ``r`` has length ≥ 2 (e.g.
    ``{a[*2..]}[*0..1]`` becomes ``a[*]``, which accepts ``a``); found by our differential test.
    So a chunk that may repeat zero times is written ``{[*0] | {r}[*1..n]}``, which Spot keeps.
    """
    parts = []
    for a, b in _ranges(lo, hi):
        if b == 0:
            parts.append("[*0]")
        elif a == 0:
            parts.append("{[*0] | {" + body + "}" + ("[+]" if b is None else f"[*1..{b}]") + "}")
        elif b is None:
            parts.append("{" + body + "}" + f"[*{a}..]")
        else:
            parts.append("{" + body + "}" + (f"[*{a}]" if a == b else f"[*{a}..{b}]"))
    return ";".join(parts)


def sere(p: Pattern, atom: Callable[[str], str]) -> str:
    """The SERE (regular expression over letters) of a finite pattern (no ``always``)."""
    if isinstance(p, Step):
        return atom(p.name)
    if isinstance(p, Next):
        return "{" + ";".join(sere(q, atom) for q in p.parts) + "}"
    if isinstance(p, Or):
        return "{" + " | ".join(sere(q, atom) for q in p.parts) + "}"
    if isinstance(p, Until):
        return "{" + _repeat(sere(p.body, atom), p.min, p.max) + ";" + sere(p.then, atom) + "}"
    if isinstance(p, Repeat):
        return "{" + _repeat(sere(p.body, atom), p.min, p.max) + "}"
    raise TypeError(f"'always' cannot occur inside a finite pattern: {p!r}")


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


def constraint_ltl(f: Formula, atom: Callable[[str], str]) -> str:
    """A constraint as an LTL string; raw ``(ltl "…")`` text is passed through with state names
    (quoted or bare) replaced by ``atom``."""
    if f.is_state:
        return atom(f.op)
    if f.op in ("true", "false"):
        return f.op
    if f.op == "ltl":
        return _substitute_raw(f.raw or "", atom)
    if f.op in _UN:
        return f"{_UN[f.op]}({constraint_ltl(f.args[0], atom)})"
    return "(" + f" {_BIN[f.op]} ".join(constraint_ltl(a, atom) for a in f.args) + ")"


def _substitute_raw(raw: str, atom: Callable[[str], str]) -> str:
    """Replace the atomic propositions of a Spot LTL string by ``atom(name)``."""
    import spot

    f = spot.formula(raw)

    def sub(g: spot.formula) -> spot.formula:
        if g.kind() == spot.op_ap:
            return spot.formula(atom(g.ap_name()))
        return g.map(sub)

    return str(sub(f))


@dataclass(frozen=True)
class Formulas:
    """The formula of a spec in two spellings: ``readable`` (state names) and ``coded`` (Spot)."""

    readable: str
    coded: str
    infinite: bool
    constraints_readable: tuple[str, ...] = ()


def build_formulas(spec: Spec) -> Formulas:
    """Build the whole formula: pattern, trace-end/alphabet axioms, and constraints."""
    enc = encode(spec)
    prefix, body = split_always(spec.behavior)
    readable = _build(spec, prefix, body, _quote, None)
    coded = _build(spec, prefix, body, enc.state_cube, enc)
    cons = tuple(constraint_ltl(c, _quote) for c in spec.constraints)
    return Formulas(readable, coded, body is not None, cons)


def _build(spec: Spec, prefix: list[Pattern], body: Pattern | None,
           atom: Callable[[str], str], enc: Encoding | None) -> str:
    import spot

    if body is None:
        pat = sere(prefix[0] if len(prefix) == 1 else Next(tuple(prefix)), atom)
        parts = [f"({{{pat}}}<>=> G!{ALIVE})", ALIVE, f"({ALIVE} U G!{ALIVE})"]
        if enc is not None:
            parts += [f"G({ALIVE} -> {enc.valid()})", f"G(!{ALIVE} -> {enc.cube(0)})"]
        for c in spec.constraints:
            parts.append(str(spot.from_ltlf(spot.formula(constraint_ltl(c, atom)), ALIVE)))
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
        parts.append("(" + constraint_ltl(c, atom) + ")")
    return " & ".join(parts)
