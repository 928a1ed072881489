"""JSON numbers as regular languages: integer ranges, and numbers between decimal bounds over their
fixed-point texts, as DFAs written digit by digit, and as regexes (the reference they are tested
against, and what the reference NFA embeds) (docs/design.md §5.1)."""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np

from ltlagent.errors import UsageError
from ltlagent.text.content import ContentDFA, as_dfa, intersect, minimize, minimize_table
from ltlagent.text.jsontype import DECIMAL_RE, INTEGER_RE, NATURAL_RE, NUMBER_RE, JsonNumber, pattern_language

__all__ = ["integer_regex", "integer_dfa", "number_parts", "multiples_dfa", "clear_caches", "INTEGER_RE",
           "NUMBER_RE", "MAX_STEP"]


def _same_length(x: str, y: str) -> list[str]:
    """Regexes for the digit strings of len(x) between x and y (x <= y, same length)."""
    if x == y:
        return [x]
    i = 0
    while x[i] == y[i]:
        i += 1
    p, x, y = x[:i], x[i:], y[i:]
    if len(x) == 1:
        return [f"{p}[{x}-{y}]"]
    rest = len(x) - 1
    if x[1:] == "0" * rest and y[1:] == "9" * rest:
        return [f"{p}[{x[0]}-{y[0]}][0-9]{{{rest}}}"]
    out = [p + x[0] + r for r in _same_length(x[1:], "9" * rest)]
    if int(y[0]) - int(x[0]) >= 2:
        out.append(f"{p}[{int(x[0]) + 1}-{int(y[0]) - 1}][0-9]{{{rest}}}")
    out += [p + y[0] + r for r in _same_length("0" * rest, y[1:])]
    return out


def _naturals(a: int, b: int | None) -> list[str]:
    """Regexes for the canonical decimals of a..b (a >= 0; b None: unbounded)."""
    la = len(str(a))
    top = len(str(b)) if b is not None else la
    out: list[str] = []
    for n in range(la, top + 1):
        lo = max(a, 10 ** (n - 1) if n > 1 else 0)
        hi = 10 ** n - 1 if b is None else min(b, 10 ** n - 1)
        if lo <= hi:
            out += _same_length(str(lo), str(hi))
    if b is None:
        out.append(f"[1-9][0-9]{{{la},}}")
    return out


def integer_regex(lo: int | None, hi: int | None) -> str:
    """A regex fullmatching exactly the JSON integer texts (``-0`` included) of values in [lo, hi]."""
    if lo is None and hi is None:
        return INTEGER_RE
    alts: list[str] = []
    if hi is None or hi >= 0:
        alts += _naturals(max(lo, 0) if lo is not None else 0, hi)
    if lo is None or lo < 0:
        top = -lo if lo is not None else None
        low = max(1, -hi) if hi is not None else 1
        if top is None or low <= top:
            alts += ["-" + r for r in _naturals(low, top)]
    if (lo is None or lo <= 0) and (hi is None or hi >= 0):
        alts.append("-0")
    return "(?:" + "|".join(alts) + ")"


class _Edges:
    """A DFA being written as edges (state, byte, target), its states numbered from 0."""

    def __init__(self) -> None:
        self.n = 1
        self.src: list[int] = []
        self.byte: list[int] = []
        self.dst: list[int] = []
        self.acc: set[int] = set()

    def new(self) -> int:
        self.n += 1
        return self.n - 1

    def edge(self, q: int, b: int, r: int) -> None:
        self.src.append(q)
        self.byte.append(b)
        self.dst.append(r)

    def table(self) -> np.ndarray:
        t = np.full((self.n, 256), -1, dtype=np.int64)
        t[self.src, self.byte] = self.dst
        return t


def _digits(a: int, b: int | None, out: _Edges, first: int) -> None:
    """Write into ``out`` the states that read the canonical decimals of ``a``..``b`` (``a >= 0``;
    ``b`` None: unbounded) from state ``first``. A state is the digits read so far as (their number
    ``n``, how they compare with ``a``'s first ``n`` digits, with ``b``'s: -1, 0, 1), one state
    once they outnumber ``a``'s and no ``b`` bounds them (every longer text is then above ``a``):
    the text is in range where ``n`` and the comparisons say so. A leading ``0`` is the text ``0``
    alone. Dead ends are left for the minimisation to trim."""
    sa, sb = str(a), (str(b) if b is not None else None)
    la = len(sa)
    lb = len(sb) if sb is not None else None
    ids: dict[tuple[int, int, int], int] = {}
    todo: list[tuple[int, int, int]] = []

    def state(key: tuple[int, int, int]) -> int:
        got = ids.get(key)
        if got is None:
            got = ids[key] = out.new()
            todo.append(key)
            n, ca, cb = key
            if (n > la or (n == la and ca >= 0)) and (lb is None or n < lb or (n == lb and cb <= 0)):
                out.acc.add(got)
        return got

    def steps(key: tuple[int, int, int], q: int) -> None:
        n, ca0, cb0 = key
        if lb is not None and n >= lb:
            return  # no more digits than ``b`` has
        if lb is None and n >= la:  # every longer text is in range: one state, looping (n >= 1)
            nxt = state((la + 1, 1, 0))
            for d in range(0x30, 0x3A):
                out.edge(q, d, nxt)
            return
        da = int(sa[n]) if n < la and ca0 == 0 else None
        db = int(sb[n]) if sb is not None and cb0 == 0 else None
        for d in range(0 if n else 1, 10):
            ca = ca0 if da is None else (d > da) - (d < da)
            if n >= la:
                ca = 1  # (more digits than ``a``: above it whatever they are)
            cb = cb0 if db is None else (d > db) - (d < db)
            out.edge(q, 0x30 + d, state((n + 1, ca, cb)))

    if a == 0:
        zero = out.new()
        out.acc.add(zero)
        out.edge(first, 0x30, zero)
    steps((0, 0, 0), first)
    while todo:
        key = todo.pop()
        steps(key, ids[key])


@functools.lru_cache(maxsize=256)
def integer_dfa(lo: int | None, hi: int | None) -> ContentDFA:
    """The minimal DFA of :func:`integer_regex`'s texts (the JSON integers in ``[lo, hi]``,
    ``-0`` where 0 is in range), written digit by digit (:func:`_digits`) instead of compiled
    from the regex: a range such as ``0..2147483647`` cost two milliseconds through the regex.
    ``tests/test_jsonschema.py`` checks both are the same language."""
    out = _Edges()
    if hi is None or hi >= 0:
        _digits(max(lo, 0) if lo is not None else 0, hi, out, 0)
    if lo is None or lo <= 0:  # ``-`` and the magnitudes of the negatives in range; ``-0``
        minus = out.new()
        out.edge(0, 0x2D, minus)
        top = -lo if lo is not None else None
        low = max(1, -hi) if hi is not None else 1
        if top is None or low <= top:
            _digits(low, top, out, minus)
        if hi is None or hi >= 0:
            zero = out.new()
            out.acc.add(zero)
            out.edge(minus, 0x30, zero)
    trans, acc = minimize_table(out.table(), out.acc)
    return as_dfa(trans, acc, f"integers in [{lo}, {hi}]")


def _decimal(c: Fraction) -> tuple[int, str] | None:
    """A non-negative bound as (integer part, fraction digits without trailing zeros); None when
    it has no finite decimal expansion."""
    q = c.denominator
    for p in (2, 5):
        while q % p == 0:
            q //= p
    if q != 1:
        return None
    ip = c.numerator // c.denominator
    frac = c - ip
    digits = ""
    while frac:
        frac *= 10
        d = frac.numerator // frac.denominator
        digits += str(d)
        frac -= d
    return ip, digits


def _frac_cmp(g: str, greater: bool, strict: bool) -> str:
    """A regex for the fraction digit strings f (maybe empty) with 0.f >= 0.g (``greater``) or
    <= 0.g, strictly if ``strict``."""
    alts = []
    for i, ch in enumerate(g):
        d = int(ch)
        if greater and d < 9:
            alts.append(f"{g[:i]}[{d + 1}-9][0-9]*")
        if not greater and d > 0:
            alts.append(f"{g[:i]}[0-{d - 1}][0-9]*")
        if not greater:
            alts.append(f"{g[:i]}0*")
    if greater:
        alts.append(f"{g}[0-9]*[1-9][0-9]*" if strict else f"{g}[0-9]*")
    elif not strict:
        alts.append(f"{g}0*")
    return "(?:" + "|".join(alts) + ")" if alts else "(?!)"


#: Bounded numbers' magnitudes written digit by digit (:func:`_magnitude_digits`); off: compiled
#: from regexes and intersected (:func:`_magnitude_regex`, the reference the tests compare with).
DIRECT_NUMBERS = True


def _magnitude(lo: tuple[Fraction, bool] | None, hi: tuple[Fraction, bool] | None) -> ContentDFA:
    """Non-negative decimals ``I(.F)?`` (no exponent) between the bounds (value, open)."""
    return (_magnitude_digits if DIRECT_NUMBERS else _magnitude_regex)(lo, hi)


def _bound(b: tuple[Fraction, bool] | None) -> tuple[str, str, bool] | None:
    """A bound as (integer part's digits, fraction digits without trailing zeros, open)."""
    if b is None:
        return None
    dec = _decimal(b[0])
    if dec is None:
        raise UsageError(f"the bound {b[0]} has no finite decimal expansion")
    return str(dec[0]), dec[1], b[1]


def _magnitude_digits(lo: tuple[Fraction, bool] | None, hi: tuple[Fraction, bool] | None) -> ContentDFA:
    """:func:`_magnitude` written digit by digit, minimised. The integer part's states: ``0``
    alone, or its digits read as (their number, how they compare with each bound's integer part:
    -1, 0, 1), one state once they outnumber the lower bound's and no upper bound limits them.
    After the point: (fraction digits read, capped past the bounds' own, how they compare with
    each bound's fraction digits, None where the integer part already decided that bound). A
    text is in range where the comparisons say so; a bound's fraction has no trailing zero, so a
    fraction that agrees with a shorter prefix of it is below it. Dead ends are trimmed by the
    minimisation. Two regexes and their intersection cost about a millisecond."""
    bl, bh = _bound(lo), _bound(hi)
    sa = bl[0] if bl is not None else "0"  # no lower bound: 0, below every magnitude
    sb = bh[0] if bh is not None else None
    ga, gb = (bl[1] if bl is not None else ""), (bh[1] if bh is not None else "")
    open_a, open_b = bl is not None and bl[2], bh is not None and bh[2]
    la = len(sa)
    lb = len(sb) if sb is not None else 0
    cap = max(len(ga), len(gb)) + 1  # fraction digits past both bounds' compare with zeros alike
    out = _Edges()
    ids: dict[tuple[int, int, int, int], int] = {}  # (phase, count, vs lower, vs upper) -> state
    todo: list[tuple[int, int, int, int]] = []
    free = 2  # a bound the integer part decided (in the fraction's comparisons)

    def cmp(x: int, y: int) -> int:
        return (x > y) - (x < y)

    def whole(n: int, ca: int, cb: int) -> tuple[int, int]:
        """How an integer part of ``n`` digits (0: the text ``0``) compares with each bound's."""
        if n == 0:
            return cmp(0, int(sa)), (-1 if sb is None else cmp(0, int(sb)))
        ia = 1 if n > la else -1 if n < la else ca
        ib = -1 if sb is None or n < lb else cb  # (never more digits than the upper bound's)
        return ia, ib

    def accepts(key: tuple[int, int, int, int]) -> bool:
        phase, n, ca, cb = key
        if phase == 0:  # the integer part, no point
            ia, ib = whole(n, ca, cb)
            return ((ia > 0 or (ia == 0 and not ga and not open_a))
                    and (ib < 0 or (ib == 0 and (bool(gb) or not open_b))))
        if n == 0:  # after the point: a digit must follow
            return False
        ok_a = ca == free or ca > 0 or (ca == 0 and n >= len(ga) and not open_a)
        ok_b = cb == free or cb < 0 or (cb == 0 and not (n >= len(gb) and open_b))
        return ok_a and ok_b

    def state(key: tuple[int, int, int, int]) -> int:
        got = ids.get(key)
        if got is None:
            got = ids[key] = out.new()
            todo.append(key)
            if accepts(key):
                out.acc.add(got)
        return got

    def integer_steps(n: int, ca0: int, cb0: int, q: int) -> None:
        ia, ib = whole(n, ca0, cb0)
        if ia >= 0 and ib <= 0:  # the point: the fraction decides a bound the integer part ties
            out.edge(q, 0x2E, state((1, 0, 0 if ia == 0 else free, 0 if ib == 0 else free)))
        if n == 0 or (sb is not None and n >= lb):  # ``0`` alone; no more digits than the upper bound's
            return
        if sb is None and n >= la:  # every longer integer part is above the lower bound
            nxt = state((0, la + 1, 1, -1))
            for d in range(10):
                out.edge(q, 0x30 + d, nxt)
            return
        for d in range(10):
            ca = ca0 if ca0 != 0 or n >= la else cmp(d, int(sa[n]))
            cb = cb0 if sb is None or cb0 != 0 else cmp(d, int(sb[n]))
            out.edge(q, 0x30 + d, state((0, n + 1, ca, cb)))

    def fraction_steps(k: int, fa0: int, fb0: int, q: int) -> None:
        for d in range(10):
            fa = fa0 if fa0 != 0 else cmp(d, int(ga[k]) if k < len(ga) else 0)
            fb = fb0 if fb0 != 0 else cmp(d, int(gb[k]) if k < len(gb) else 0)
            out.edge(q, 0x30 + d, state((1, min(k + 1, cap), fa, fb)))

    out.edge(0, 0x30, state((0, 0, 0, 0)))  # the integer part ``0``
    for d in range(1, 10):
        out.edge(0, 0x30 + d, state((0, 1, cmp(d, int(sa[0])), 0 if sb is None else cmp(d, int(sb[0])))))
    while todo:
        key = todo.pop()
        (integer_steps if key[0] == 0 else fraction_steps)(key[1], key[2], key[3], ids[key])
    trans, acc = minimize_table(out.table(), out.acc)
    return as_dfa(trans, acc, "decimals between bounds")


def _magnitude_regex(lo: tuple[Fraction, bool] | None, hi: tuple[Fraction, bool] | None) -> ContentDFA:
    """Non-negative decimals ``I(.F)?`` (no exponent) between the bounds (value, open), from
    regexes: the reference :func:`_magnitude_digits` is tested against."""
    d = pattern_language(DECIMAL_RE, False, False)
    for bound, greater in ((lo, True), (hi, False)):
        if bound is None:
            continue
        c, strict = bound
        dec = _decimal(c)
        if dec is None:
            raise UsageError(f"the bound {c} has no finite decimal expansion")
        ip, g = dec
        if greater:
            rx = f"{integer_regex(ip + 1, None)}(?:\\.[0-9]+)?|{ip}(?:\\.{_frac_cmp(g, True, strict)})"
            if not g and not strict:
                rx += f"|{ip}"
        else:
            rx = f"{ip}(?:\\.{_frac_cmp(g, False, strict)})?" if g or not strict else ""
            if ip > 0:
                rx = "|".join(r for r in (f"{integer_regex(0, ip - 1)}(?:\\.[0-9]+)?", rx) if r)
        d = intersect(d, pattern_language(f"(?:{rx or '(?!)'})", False, False))
    return d


def clear_caches() -> None:
    """Forget the number automata kept across calls (by value)."""
    number_parts.cache_clear()
    multiples_dfa.cache_clear()
    integer_dfa.cache_clear()


#: Largest ``multipleOf`` step written (the digits' automaton has a state per remainder).
MAX_STEP = 1000


@functools.lru_cache(maxsize=64)
def multiples_dfa(step: int) -> ContentDFA:
    """Digit strings whose value ``step`` divides: a state per remainder, minimised (a power of
    ten's divisors need only the last digits)."""
    if not 0 < step <= MAX_STEP:
        raise UsageError(f"multipleOf {step} is above the supported {MAX_STEP}")
    trans = [[-1] * 256 for _ in range(step)]
    for r in range(step):
        for d in range(10):
            trans[r][0x30 + d] = (10 * r + d) % step
    mt, macc = minimize(trans, {0})
    return as_dfa(mt, macc, f"multiples of {step}")


@functools.lru_cache(maxsize=256)
def number_parts(t: JsonNumber) -> tuple[tuple[bytes, ContentDFA], ...]:
    """A number's texts as (sign, DFA of the rest): unbounded, the full JSON syntax; bounded,
    fixed-point texts without exponent (a subset) on each side of zero; with ``multiple_of``,
    integer texts its digits' automaton accepts."""
    if t.multiple_of is not None:
        digits = intersect(pattern_language(NATURAL_RE, False, False),
                           multiples_dfa(t.multiple_of))
        if t.lo is None and t.hi is None:
            ints: tuple[tuple[bytes, ContentDFA], ...] = ((b"", digits), (b"-", digits))
        else:
            ints = tuple((sign, intersect(d, digits)) for sign, d in
                         number_parts(JsonNumber(t.lo, t.hi, t.lo_open, t.hi_open)))
        return tuple((sign, d) for sign, d in ints if 0 in d.live)
    if t.lo is None and t.hi is None:
        return ((b"", pattern_language(NUMBER_RE, False, False)),)
    zero = Fraction(0)
    parts: list[tuple[bytes, ContentDFA]] = []
    if t.hi is None or t.hi > 0 or (t.hi == 0 and not t.hi_open):  # x >= 0
        lo = (t.lo, t.lo_open) if t.lo is not None and t.lo >= 0 else None
        hi = (t.hi, t.hi_open) if t.hi is not None else None
        parts.append((b"", _magnitude(lo, hi)))
    if t.lo is None or t.lo < 0 or (t.lo == 0 and not t.lo_open):  # x = -m <= 0
        lo2 = ((-t.hi, t.hi_open) if t.hi is not None and t.hi <= 0 else None)
        hi2 = (-t.lo, t.lo_open) if t.lo is not None else None
        if lo2 is None and t.hi is not None and t.hi == zero:
            lo2 = (zero, t.hi_open)
        parts.append((b"-", _magnitude(lo2, hi2)))
    return tuple((sign, d) for sign, d in parts if 0 in d.live)
