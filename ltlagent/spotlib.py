"""The one module that talks to Spot (docs/design.md §3): every Spot call ltlagent makes, typed.

Spot's SWIG bindings publish no types, so everything Spot hands back stays behind this module:
formulas go in and come out as strings, automata as the opaque :data:`TwaGraph`, letters as
strings of the state code (``ltl.Encoding.state_cube``), and answers as plain Python values. Spot
is imported on first use (``import ltlagent`` does not load it); ``import spot`` appears nowhere
else in the package.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = [
    "TwaGraph", "SpotError", "LtlSyntaxError", "LtlInfo", "EdgeTable", "version", "inspect_ltl",
    "rename_atomic_propositions", "ltlf_to_ltl", "translate_finite", "translate_infinite",
    "translate", "determinise", "initial_state", "accepting_states", "is_empty_from", "letter_edges",
    "accepting_mark_sets", "accepts_lasso", "contains", "difference_word", "to_hoa", "from_hoa",
    "CubeDfa", "finite_cube_dfa",
]

#: A Spot automaton (``spot.twa_graph``), opaque outside this module.
TwaGraph: TypeAlias = Any
#: Per automaton state, per letter: the edges whose condition admits the letter, as
#: ``(successor, acceptance marks as a bit mask)``, in Spot's edge order.
EdgeTable: TypeAlias = tuple[tuple[tuple[tuple[int, int], ...], ...], ...]

_BDD_FALSE = 0  # BuDDy's id of the constant false BDD


class SpotError(Exception):
    """Spot refused a formula ltlagent built or an operation on an automaton."""


class LtlSyntaxError(Exception):
    """A formula Spot cannot parse: the first problem's column (0-based), caret width, message."""

    def __init__(self, column: int, width: int, message: str) -> None:
        super().__init__(message)
        self.column, self.width, self.message = column, width, message


@dataclass(frozen=True)
class LtlInfo:
    """What the spec reader needs to know of a parsed raw LTL string."""

    is_ltl: bool  # plain LTL (no SERE or PSL operator)
    atomic_propositions: frozenset[str]


def _spot() -> Any:
    """The untyped ``spot`` module, imported on first use."""
    import spot

    return spot


def version() -> str:
    """Spot's version (part of the token index's cache key)."""
    return str(_spot().version())


# -- formulas ----------------------------------------------------------------------------------

def inspect_ltl(text: str) -> LtlInfo:
    """Parse ``text`` in Spot's syntax; :class:`LtlSyntaxError` positions a parse error."""
    spot = _spot()
    try:
        f = spot.formula(text)
    except SyntaxError as e:
        raise LtlSyntaxError(*_syntax_error(str(e))) from None
    aps: set[str] = set()

    def visit(g: Any) -> bool:
        if g.kind() == spot.op_ap:
            aps.add(str(g.ap_name()))
        return False  # keep descending

    f.traverse(visit)
    return LtlInfo(bool(f.is_ltl_formula()), frozenset(aps))


def _syntax_error(message: str) -> tuple[int, int, str]:
    """Column (0-based), caret width and text of a Spot parse error.

    Spot reports each problem as ``>>> FORMULA`` / a caret line / a message, the first problem
    being the parse error proper and later ones its recovery (``missing closing parenthesis,
    treating …``); the recovery messages often say more, so they are added in parentheses.
    """
    found: list[tuple[int, int, str]] = []
    lines = message.split("\n")
    for i, line in enumerate(lines[:-1]):
        caret = line.lstrip(" ")
        if caret.startswith("^") and i > 0 and lines[i - 1].startswith(">>> "):
            col = len(line) - len(caret) - len(">>> ")
            found.append((max(0, col), len(caret.rstrip()), lines[i + 1].strip()))
    if not found:
        return 0, 1, message.strip() or "syntax error"
    col, width, first = found[0]
    extra = [m.split(", treating")[0] for _, _, m in found[1:]
             if m and not m.startswith("ignoring trailing garbage")]
    return col, width, first + (f" ({'; '.join(extra)})" if extra else "")


def rename_atomic_propositions(text: str, rename: Callable[[str], str]) -> str:
    """The LTL string ``text`` with each atomic proposition ``p`` replaced by ``rename(p)``.

    Spot's C++ relabelling, not ``formula.map``: the Python ``map`` of Spot 2.13 knows no strong
    next, so ``(ltl "G(A -> X[!] B)")`` raised ``ValueError: unknown type of formula``."""
    spot = _spot()
    f = spot.formula(text)
    aps: set[str] = set()

    def visit(g: Any) -> bool:
        if g.kind() == spot.op_ap:
            aps.add(str(g.ap_name()))
        return False

    f.traverse(visit)
    relabel = spot.relabeling_map()
    for ap in aps:
        relabel[spot.formula.ap(ap)] = spot.formula(rename(ap))
    return str(spot.relabel_apply(f, relabel))


def ltlf_to_ltl(text: str, alive: str) -> str:
    """An LTLf formula as LTL over infinite words where ``alive`` marks the finite part."""
    spot = _spot()
    return str(spot.from_ltlf(spot.formula(text), alive))


# -- translation -------------------------------------------------------------------------------

def translate_finite(formula: str, alive: str, hidden: Sequence[str] = ()) -> TwaGraph:
    """Deterministic automaton of a finite-trace formula, cut back to finite words on ``alive``;
    the propositions ``hidden`` are projected away (existentially) first."""
    spot = _spot()
    try:
        if not hidden:
            return spot.to_finite(spot.translate(formula, "deterministic", "sbacc"), alive)
        rm = spot.remove_ap()
        for ap in hidden:
            rm.add_ap(ap)
        aut = spot.postprocess(rm.strip(spot.translate(formula, "sbacc")), "deterministic",
                               "sbacc")
        return spot.to_finite(aut, alive)
    except (RuntimeError, SyntaxError) as e:  # Spot reports bad formulas as these
        raise SpotError(str(e)) from e


def translate_infinite(formula: str, hidden: str | Sequence[str]) -> TwaGraph:
    """Deterministic ω-automaton (generic acceptance) of ``formula`` with the propositions
    ``hidden`` projected away."""
    spot = _spot()
    try:
        aut = spot.translate(formula)
        rm = spot.remove_ap()
        for ap in [hidden] if isinstance(hidden, str) else hidden:
            rm.add_ap(ap)
        return spot.postprocess(rm.strip(aut), "deterministic", "generic")
    except (RuntimeError, SyntaxError) as e:
        raise SpotError(str(e)) from e


def translate(formula: str, hidden: Sequence[str] = ()) -> TwaGraph:
    """Spot's default translation of an LTL formula (for language comparisons), with the
    propositions ``hidden`` projected away."""
    spot = _spot()
    try:
        aut = spot.translate(formula)
        if hidden:
            rm = spot.remove_ap()
            for ap in hidden:
                rm.add_ap(ap)
            aut = rm.strip(aut)
        return aut
    except (RuntimeError, SyntaxError) as e:
        raise SpotError(str(e)) from e


@dataclass(frozen=True)
class CubeDfa:
    """A deterministic finite automaton whose letters are bit masks over an ordered list of
    propositions: ``edges[q]`` holds ``(successor, cubes)``, a cube ``(ones, zeros)`` admitting a
    letter ``x`` when ``x & ones == ones`` and ``x & zeros == 0``. Plain data: picklable."""

    initial: int
    accepting: frozenset[int]
    edges: tuple[tuple[tuple[int, tuple[tuple[int, int], ...]], ...], ...]

    def step(self, q: int, letter: int) -> int:
        """The successor of ``q`` on ``letter``, or -1 when no edge admits it."""
        for dst, cubes in self.edges[q]:
            for ones, zeros in cubes:
                if letter & ones == ones and not letter & zeros:
                    return dst
        return -1


def finite_cube_dfa(formula: str, alive: str, props: Sequence[str]) -> CubeDfa:
    """The deterministic automaton of a finite-trace formula (LTL over ``alive``, as
    :func:`translate_finite` takes it), its edge conditions as cubes over ``props`` (bit ``k`` is
    ``props[k]``). A proposition of the formula missing from ``props`` is an error."""
    import buddy

    aut = translate_finite(formula, alive)
    bdict = aut.get_dict()
    spot = _spot()
    bit: dict[int, int] = {}
    for ap in aut.ap():
        name = str(ap.ap_name())
        if name not in props:
            raise SpotError(f"proposition {name!r} of the automaton is not a letter bit")
        bit[bdict.varnum(spot.formula.ap(name))] = 1 << props.index(name)
    rows = []
    for q in range(aut.num_states()):
        row = []
        for e in aut.out(q):
            cubes = []
            isop = spot.minato_isop(e.cond)
            c = isop.next()
            while c != buddy.bddfalse:
                ones = zeros = 0
                x = c
                while x != buddy.bddtrue:
                    b = bit[buddy.bdd_var(x)]
                    if buddy.bdd_low(x) == buddy.bddfalse:
                        ones |= b
                        x = buddy.bdd_high(x)
                    else:
                        zeros |= b
                        x = buddy.bdd_low(x)
                cubes.append((ones, zeros))
                c = isop.next()
            row.append((int(e.dst), tuple(cubes)))
        rows.append(tuple(row))
    return CubeDfa(initial_state(aut), accepting_states(aut), tuple(rows))
def determinise(aut: TwaGraph, other: TwaGraph | None = None) -> TwaGraph:
    """A deterministic ω-automaton (generic acceptance) of the words ``aut`` accepts, and
    ``other`` too when given (their product): ltlagent's own Büchi automata go through here."""
    spot = _spot()
    try:
        if other is not None:
            aut = spot.product(aut, other)
        return spot.postprocess(aut, "deterministic", "generic")
    except RuntimeError as e:
        raise SpotError(str(e)) from e


# -- reading automata --------------------------------------------------------------------------

def initial_state(aut: TwaGraph) -> int:
    """The number of ``aut``'s initial state."""
    return int(aut.get_init_state_number())


def accepting_states(aut: TwaGraph) -> frozenset[int]:
    """The accepting states of a state-based automaton."""
    return frozenset(q for q in range(aut.num_states()) if aut.state_is_accepting(q))


def is_empty_from(aut: TwaGraph, q: int) -> bool:
    """No accepting run starts in state ``q``."""
    spot = _spot()
    a = spot.make_twa_graph(aut, spot.twa_prop_set.all())
    a.set_init_state(q)
    return bool(a.is_empty())


def _letter_bdds(aut: TwaGraph, letters: Sequence[str]) -> list[Any]:
    spot = _spot()
    bdict = aut.get_dict()
    return [spot.formula_to_bdd(spot.formula(c), bdict, aut) for c in letters]


def letter_edges(aut: TwaGraph, letters: Sequence[str]) -> EdgeTable:
    """Per state and letter (a Boolean formula over the atomic propositions), the edges whose
    condition admits the letter: ``(successor, acceptance marks as a bit mask)``."""
    bdds = _letter_bdds(aut, letters)
    rows = []
    for q in range(aut.num_states()):
        out = list(aut.out(q))
        rows.append(tuple(
            tuple((int(e.dst), sum(1 << s for s in e.acc.sets())) for e in out
                  if (e.cond & c).id() != _BDD_FALSE)
            for c in bdds))
    return tuple(rows)


def accepting_mark_sets(aut: TwaGraph) -> frozenset[int]:
    """The sets of acceptance marks (bit masks) whose infinite recurrence satisfies ``aut``'s
    acceptance condition."""
    spot = _spot()
    acc = aut.acc()
    k = acc.num_sets()
    return frozenset(m for m in range(1 << k)
                     if acc.accepting(spot.mark_t([s for s in range(k) if m >> s & 1])))


def accepts_lasso(aut: TwaGraph, prefix: Sequence[str], cycle: Sequence[str]) -> bool:
    """Does ``aut`` accept the ω-word ``prefix · cycle^ω`` (letters as Boolean formulas)?"""
    word = ";".join([*prefix, "cycle{" + ";".join(cycle) + "}"])
    return bool(aut.intersects(_spot().parse_word(word, aut.get_dict()).as_automaton()))


def contains(big: TwaGraph, small: TwaGraph) -> bool:
    """Every word ``small`` accepts is accepted by ``big``."""
    return bool(_spot().contains(big, small))


def difference_word(yes: TwaGraph, no: TwaGraph, letters: Sequence[str]
                    ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A lasso ``(prefix, cycle)`` accepted by ``yes`` and not by ``no``, each letter the index of
    the first of ``letters`` it admits (-1: none); :class:`SpotError` when there is none."""
    word = yes.intersecting_word(_spot().complement(no))
    if word is None:
        raise SpotError("no word is accepted by one automaton and rejected by the other")
    bdds = _letter_bdds(yes, letters)

    def index(letter: Any) -> int:
        return next((i for i, c in enumerate(bdds) if (letter & c).id() != _BDD_FALSE), -1)

    return tuple(index(x) for x in word.prefix), tuple(index(x) for x in word.cycle)


def to_hoa(aut: TwaGraph) -> str:
    """``aut`` in the HOA format (kept with the table for ``show --hoa`` and unpickled copies)."""
    return str(aut.to_str("hoa"))


def from_hoa(text: str) -> TwaGraph:
    """The automaton of an HOA text, with the same state numbers as the one written."""
    return _spot().automaton(text)

