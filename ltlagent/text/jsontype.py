"""JSON values described by small frozen descriptions, and the algebra the schema reader needs.

A :data:`JsonType` (``JsonConst``, ``JsonInteger``, ``JsonNumber``, ``JsonString``, ``JsonArray``,
``JsonObject``, ``JsonUnion``, ``JsonAny``) denotes a set of JSON *values*; :mod:`ltlagent.text.
jsonschema` writes the texts of those values (docs/design.md §5.1). On values, exactly:

- :func:`admits` (is a value in the set: for ``enum``/``const`` under other keywords),
- :func:`meet` (the intersection: ``allOf`` and keywords beside ``$ref``/``anyOf``/``oneOf``),
- :func:`disjoint` (no value in both, *proven*: ``oneOf`` is compiled as a union only when its
  branches are pairwise disjoint, since a value valid for two branches is invalid for ``oneOf``).

``disjoint`` may answer False for sets that are in fact disjoint (it is conservative); ``meet``
raises :class:`Unsupported` where the intersection has no description. :mod:`ltlagent.text.
schemaread` reads JSON-schema dicts into descriptions.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from dataclasses import dataclass, field
from fractions import Fraction

from ltlagent.errors import UsageError
from ltlagent.text.content import ContentDFA, pattern_dfa
from ltlagent.text.formats import FORMATS

__all__ = [
    "JsonConst", "JsonInteger", "JsonNumber", "JsonString", "JsonArray", "JsonProperty",
    "JsonObject", "JsonUnion", "JsonAny", "JsonType", "NEVER", "Unsupported", "admits", "meet",
    "disjoint", "pattern_language", "library_language", "LIBRARY_REGEXES", "ANY_TEXT", "INTEGER_RE",
    "NUMBER_RE", "NATURAL_RE", "DECIMAL_RE", "is_never", "Scalar", "json_equal", "key_schemas",
    "undeclared_schema", "make_object", "clear_caches", "array_of", "integer_in", "number_in", "kinds",
    "pairwise_disjoint", "multiples_in", "complement", "of_kind",
]

Scalar = str | int | bool | None


class Unsupported(Exception):
    """An intersection or check outside what descriptions can say (the reader adds the path)."""


#: Any UTF-8 text, as a fullmatch regex.
ANY_TEXT = "(?s:.*)"
#: JSON's integer and number texts (RFC 8259 §6), and its natural numbers, as fullmatch regexes.
INTEGER_RE = r"-?(?:0|[1-9][0-9]*)"
NUMBER_RE = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
NATURAL_RE = "0|[1-9][0-9]*"
#: Non-negative decimals without exponent (what bounded numbers are written as).
DECIMAL_RE = r"(?:0|[1-9][0-9]*)(?:\.[0-9]+)?"
#: The fullmatch regexes the library writes itself, whatever the schema: any text, JSON numbers
#: and every format's (:data:`~ltlagent.text.formats.FORMATS`). Their DFAs are constants of the
#: library, built once per process on first use and kept by :func:`clear_caches`, which forgets
#: only what schemas built (their patterns, bounds and the rest).
LIBRARY_REGEXES: frozenset[str] = frozenset(
    {ANY_TEXT, INTEGER_RE, NUMBER_RE, NATURAL_RE, DECIMAL_RE,
     *(rx for rxs in FORMATS.values() for rx in rxs)})


def pattern_language(rx: str, search: bool = True, ecma: bool = True) -> ContentDFA:
    """The DFA of a schema ``pattern`` (ECMA-262, ``search``) or of a fullmatch regex (``ecma``
    False: Python's dialect, for spec ``:regex`` narrowing and :mod:`ltlagent.text.formats`);
    one of :data:`LIBRARY_REGEXES` from the constants, any other from the schemas' cache."""
    if not search and not ecma and rx in LIBRARY_REGEXES:
        return library_language(rx)
    return _pattern_language(rx, search, ecma)


@functools.cache
def library_language(rx: str) -> ContentDFA:
    """The DFA of one of :data:`LIBRARY_REGEXES` (fullmatched, Python's dialect): a constant,
    never forgotten (the set is fixed, so is this cache's size)."""
    if rx not in LIBRARY_REGEXES:
        raise ValueError(f"not one of the library's own regexes: {rx!r}")
    return pattern_dfa(rx, search=False, ecma=False)


@functools.lru_cache(maxsize=256)
def _pattern_language(rx: str, search: bool, ecma: bool) -> ContentDFA:
    """:func:`pattern_language` of a regex a schema (or a spec's narrowing) wrote."""
    return pattern_dfa(rx, search=search, ecma=ecma)


def clear_caches() -> None:
    """Forget the pattern DFAs and string-meet verdicts kept across calls (by value); the
    library's constants (:func:`library_language`) stay."""
    _pattern_language.cache_clear()
    _string_empty_meet.cache_clear()


# --- the descriptions ------------------------------------------------------------------------

@dataclass(frozen=True)
class JsonConst:
    """One of a few values: scalars in ``values`` (``null``, booleans, integers, strings), other
    values (non-integer numbers, arrays, objects) as their compact JSON ``texts``. ``kinds``
    (filled in) keeps ``True``/``1`` and ``False``/``0``, equal in Python, apart in comparisons and
    hashes."""

    values: tuple[Scalar, ...]
    texts: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "kinds", tuple(_type_of(v) for v in self.values))

    def all_values(self) -> list[object]:
        """Every value, the texts read back."""
        return [*self.values, *(json.loads(t) for t in self.texts)]


@dataclass(frozen=True)
class JsonInteger:
    """An integer in [lo, hi] (None: unbounded on that side)."""

    lo: int | None = None
    hi: int | None = None


@dataclass(frozen=True)
class JsonNumber:
    """A number between ``lo`` and ``hi`` (None: unbounded), each bound closed unless ``*_open``;
    with ``multiple_of`` (a positive integer), only the integers in that range it divides (what
    ``multipleOf`` is written as: see :func:`multiples_in`)."""

    lo: Fraction | None = None
    hi: Fraction | None = None
    lo_open: bool = False
    hi_open: bool = False
    multiple_of: int | None = None


@dataclass(frozen=True)
class JsonString:
    """A string of ``min_length``..``max_length`` code points in which every ECMA-262 ``patterns``
    is found and none of ``avoid`` is, which fullmatches each of ``fullmatch`` (Python's dialect:
    narrowing regexes, formats) and is none of ``excluded``."""

    min_length: int = 0
    max_length: int | None = None
    patterns: tuple[str, ...] = ()
    fullmatch: tuple[str, ...] = ()
    avoid: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()


@dataclass(frozen=True)
class JsonArray:
    items: JsonType
    min_items: int = 0
    max_items: int | None = None


@dataclass(frozen=True)
class JsonProperty:
    name: str
    schema: JsonType
    required: bool


@dataclass(frozen=True)
class JsonObject:
    """An object: the declared ``properties`` (written in this order; one whose schema is
    :data:`NEVER` is a name that must not appear); an undeclared key's value
    satisfies the schema of every ``patterns`` entry whose ECMA-262 regex it matches, or
    ``additional`` if none does. Undeclared keys are written (after the declared ones) where they
    match a pattern, and where they match none only if ``write_additional``."""

    properties: tuple[JsonProperty, ...]
    patterns: tuple[tuple[str, JsonType], ...] = ()
    additional: JsonType = field(default_factory=lambda: JsonAny(0))
    write_additional: bool = False
    #: 0 or 1 beyond the required ones: 1 writes no empty object
    min_properties: int = 0
    max_properties: int | None = None


@dataclass(frozen=True)
class JsonUnion:
    """Any of the branches (``anyOf``, type lists); ``exclusive``: proven pairwise disjoint (a
    ``oneOf``); no branches: no value (the schema ``false``)."""

    branches: tuple[JsonType, ...]
    exclusive: bool = False


@dataclass(frozen=True)
class JsonAny:
    """Any JSON value (``{}``, ``true``); written with arrays and objects nested at most ``depth``
    deep (0: scalars, ``[]`` and ``{}`` only)."""

    depth: int = 0


JsonType = JsonConst | JsonInteger | JsonNumber | JsonString | JsonArray | JsonObject | JsonUnion | JsonAny
#: No value (the schema ``false``).
NEVER = JsonUnion(())


def is_never(t: JsonType) -> bool:
    """``t`` has no value (as far as its structure shows)."""
    return isinstance(t, JsonUnion) and not t.branches


def _type_of(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):  # a tuple: a union (int | float) is built at each call
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


# --- values ----------------------------------------------------------------------------------

def json_equal(a: object, b: object) -> bool:
    """JSON Schema's equality: numbers by value (``1 == 1.0``), booleans apart from numbers."""
    ka, kb = _type_of(a), _type_of(b)
    if ka != kb:
        return False
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return a == b


def _in_bounds(x: Fraction, lo: Fraction | None, hi: Fraction | None, lo_open: bool,
               hi_open: bool) -> bool:
    return ((lo is None or x > lo or (x == lo and not lo_open))
            and (hi is None or x < hi or (x == hi and not hi_open)))


def _string_ok(t: JsonString, v: str) -> bool:
    n = len(v)
    if n < t.min_length or (t.max_length is not None and n > t.max_length) or v in t.excluded:
        return False
    try:
        data = v.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: never written
        return False
    return (all(pattern_language(p).matches(data) for p in t.patterns)
            and not any(pattern_language(p).matches(data) for p in t.avoid)
            and all(pattern_language(r, False, False).matches(data) for r in t.fullmatch))


def key_schemas(t: JsonObject, key: str) -> JsonType:
    """The schema a value under ``key`` must satisfy in ``t`` (declared, patterns or additional)."""
    for p in t.properties:
        if p.name == key:
            return p.schema
    return undeclared_schema(t, key)


def undeclared_schema(t: JsonObject, key: str) -> JsonType:
    """The schema of an undeclared ``key``: its patterns' meet, or ``additional``."""
    data = key.encode("utf-8", "surrogatepass")
    hits = [s for rx, s in t.patterns if pattern_language(rx).matches(data)]
    if not hits:
        return t.additional
    out: JsonType = JsonAny(0)
    for s in hits:
        out = meet(out, s)
    return out


def _fraction(v: object) -> Fraction | None:
    """A number as the decimal it is written as (a float's shortest repr: see schemaread._number)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return Fraction(repr(v)) if isinstance(v, float) else Fraction(v)


def admits(t: JsonType, v: object) -> bool:
    """``v`` (a value as ``json.loads`` gives it) is in ``t``."""
    if isinstance(t, JsonAny):
        return True
    if isinstance(t, JsonUnion):
        return any(admits(b, v) for b in t.branches)
    if isinstance(t, JsonConst):
        return any(json_equal(v, w) for w in t.all_values())
    kind = _type_of(v)
    if isinstance(t, JsonInteger):
        if kind != "number" or (isinstance(v, float) and not v.is_integer()):
            return False
        x = _fraction(v)
        return x is not None and _in_bounds(x, None if t.lo is None else Fraction(t.lo),
                                            None if t.hi is None else Fraction(t.hi), False, False)
    if isinstance(t, JsonNumber):
        x = _fraction(v)
        if x is None or not _in_bounds(x, t.lo, t.hi, t.lo_open, t.hi_open):
            return False
        return t.multiple_of is None or (x.denominator == 1 and x.numerator % t.multiple_of == 0)
    if isinstance(t, JsonString):
        return isinstance(v, str) and _string_ok(t, v)
    if isinstance(t, JsonArray):
        return (isinstance(v, list) and len(v) >= t.min_items
                and (t.max_items is None or len(v) <= t.max_items) and all(admits(t.items, x) for x in v))
    if not isinstance(v, dict):
        return False
    if any(p.required and p.name not in v for p in t.properties):
        return False
    if len(v) < t.min_properties or (t.max_properties is not None and len(v) > t.max_properties):
        return False
    return all(admits(key_schemas(t, k), x) for k, x in v.items())


# --- intersection ----------------------------------------------------------------------------

def _lower(a: tuple[Fraction | None, bool], b: tuple[Fraction | None, bool]) -> tuple[Fraction | None, bool]:
    """The tighter of two lower bounds (value, open)."""
    if a[0] is None:
        return b
    if b[0] is None or a[0] > b[0]:
        return a
    if b[0] > a[0]:
        return b
    return a[0], a[1] or b[1]


def _upper(a: tuple[Fraction | None, bool], b: tuple[Fraction | None, bool]) -> tuple[Fraction | None, bool]:
    """The tighter of two upper bounds."""
    if a[0] is None:
        return b
    if b[0] is None or a[0] < b[0]:
        return a
    if b[0] < a[0]:
        return b
    return a[0], a[1] or b[1]


def integer_in(lo: Fraction | None, hi: Fraction | None, lo_open: bool, hi_open: bool) -> JsonType:
    """The integers between two bounds, or :data:`NEVER`."""
    a = None if lo is None else (math.floor(lo) + 1 if lo_open else math.ceil(lo))
    b = None if hi is None else (math.ceil(hi) - 1 if hi_open else math.floor(hi))
    if a is not None and b is not None and a > b:
        return NEVER
    return JsonInteger(a, b)


def number_in(lo: Fraction | None, hi: Fraction | None, lo_open: bool, hi_open: bool) -> JsonType:
    """The numbers between two bounds, or :data:`NEVER`."""
    if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_open or hi_open))):
        return NEVER
    return JsonNumber(lo, hi, lo_open, hi_open)


def multiples_in(lo: Fraction | None, hi: Fraction | None, lo_open: bool, hi_open: bool,
                 step: int) -> JsonType:
    """The integers between two bounds that ``step`` divides, or :data:`NEVER` (bounds made the
    closest multiples inside)."""
    r = integer_in(lo, hi, lo_open, hi_open)
    if not isinstance(r, JsonInteger):
        return NEVER
    a = None if r.lo is None else -((-r.lo) // step) * step
    b = None if r.hi is None else (r.hi // step) * step
    if a is not None and b is not None and a > b:
        return NEVER
    return JsonNumber(None if a is None else Fraction(a), None if b is None else Fraction(b),
                      False, False, step)


def _union(branches: list[JsonType], exclusive: bool = False) -> JsonType:
    kept = [b for b in branches if not is_never(b)]
    return kept[0] if len(kept) == 1 else JsonUnion(tuple(kept), exclusive)


def _meet_objects(a: JsonObject, b: JsonObject, work: list[int]) -> JsonType:
    trivial_a = not a.patterns and isinstance(a.additional, JsonAny)
    trivial_b = not b.patterns and isinstance(b.additional, JsonAny)
    if not trivial_a and not trivial_b:
        if a.patterns and b.patterns:
            raise Unsupported("an intersection of two objects that both have patternProperties")
        if b.patterns:
            a, b = b, a
        # an undeclared key's value: a's patterns' or additional schema, and b's additional one
        return _meet_closed(a, b, work)
    props = _meet_properties(a, b, work)
    if props is None:
        return NEVER
    rest = b if trivial_a else a
    lo = max(a.min_properties, b.min_properties)
    his = [h for h in (a.max_properties, b.max_properties) if h is not None]
    return make_object(props, rest.patterns, rest.additional,
                       rest.write_additional if (trivial_a != trivial_b) else
                       a.write_additional and b.write_additional, lo, min(his) if his else None)


def _meet_properties(a: JsonObject, b: JsonObject, work: list[int]) -> list[JsonProperty] | None:
    """The declared properties of both objects, each name's schema the meet of what either says of
    it (a forbidden name keeps a NEVER schema: never written); None when a required one is NEVER."""
    names = list(dict.fromkeys([p.name for p in a.properties] + [p.name for p in b.properties]))
    req = {p.name for p in (*a.properties, *b.properties) if p.required}
    props: list[JsonProperty] = []
    for name in names:
        s = meet(key_schemas(a, name), key_schemas(b, name), work)
        if is_never(s) and name in req:
            return None
        props.append(JsonProperty(name, s, name in req))
    return props


def _meet_closed(a: JsonObject, b: JsonObject, work: list[int]) -> JsonType:
    """Two objects that both constrain undeclared keys, ``b`` without patterns: an undeclared key's
    value satisfies ``a``'s schema for it (a pattern's or additional) and ``b.additional``."""
    props = _meet_properties(a, b, work)
    if props is None:
        return NEVER
    patterns = tuple((rx, meet(s, b.additional, work)) for rx, s in a.patterns)
    lo = max(a.min_properties, b.min_properties)
    his = [h for h in (a.max_properties, b.max_properties) if h is not None]
    return make_object(props, patterns, meet(a.additional, b.additional, work),
                       a.write_additional and b.write_additional, lo, min(his) if his else None)


def make_object(props: list[JsonProperty], patterns: tuple[tuple[str, JsonType], ...],
                additional: JsonType, write_additional: bool, min_properties: int = 0,
                max_properties: int | None = None) -> JsonType:
    """An object description, or :data:`NEVER`; :class:`Unsupported` for property counts the
    generation language cannot keep (``minProperties`` above the required ones, ``maxProperties``
    below what may be written)."""
    if any(p.required and is_never(p.schema) for p in props):
        return NEVER
    required = sum(p.required for p in props)
    if max_properties is not None and required > max_properties:
        return NEVER
    if min_properties > max(required, 1):  # 1: the emitter writes no empty object
        raise Unsupported(f"minProperties {min_properties} above the {required} required properties")
    writes_extra = bool(patterns) or (write_additional and not is_never(additional))
    written = sum(not is_never(p.schema) for p in props)
    if max_properties is not None and (writes_extra or written > max_properties):
        raise Unsupported(f"maxProperties {max_properties} below the properties that may be written")
    return JsonObject(tuple(props), patterns, additional, write_additional and not is_never(additional),
                      min_properties, max_properties)


#: The meets of parts one intersection may take (its own, its members', its branches'): an
#: intersection of unions nested in objects distributes at every level, so the work grows with the
#: product of the unions' sizes down the nesting (a real schema, vega's, needs millions and more than
#: 6 GB); the largest of the JSONSchemaBench sample's other schemas takes 16,442.
MEET_WORK = 200_000


def meet(a: JsonType, b: JsonType, work: list[int] | None = None) -> JsonType:
    """The values in both ``a`` and ``b``; :class:`Unsupported` where no description says it, or
    where saying it takes more than :data:`MEET_WORK` meets of parts (``work``: what is left of
    that budget, shared down the recursion; a new one when not given)."""
    if isinstance(a, JsonAny) or is_never(b):
        return b
    if isinstance(b, JsonAny) or is_never(a):
        return a
    if work is None:
        work = [MEET_WORK]
    work[0] -= 1
    if work[0] < 0:
        raise Unsupported(f"an intersection (allOf, or keywords beside a $ref) of unions nested in "
                          f"objects that takes more than {MEET_WORK:,} intersections of parts to "
                          f"describe")
    if isinstance(a, JsonUnion):
        return _union([meet(x, b, work) for x in a.branches], a.exclusive)
    if isinstance(b, JsonUnion):
        return _union([meet(a, x, work) for x in b.branches], b.exclusive)
    if isinstance(b, JsonConst):
        a, b = b, a
    if isinstance(a, JsonConst):
        kept = [v for v in a.values if admits(b, v)]
        texts = [t for t in a.texts if admits(b, json.loads(t))]
        return JsonConst(tuple(kept), tuple(texts)) if kept or texts else NEVER
    if isinstance(a, JsonInteger | JsonNumber) and isinstance(b, JsonInteger | JsonNumber):
        lo = _lower(_bound_lo(a), _bound_lo(b))
        hi = _upper(_bound_hi(a), _bound_hi(b))
        steps = [t.multiple_of for t in (a, b) if isinstance(t, JsonNumber) and t.multiple_of]
        if steps:
            return multiples_in(lo[0], hi[0], lo[1], hi[1], math.lcm(*steps))
        if isinstance(a, JsonInteger) or isinstance(b, JsonInteger):
            return integer_in(lo[0], hi[0], lo[1], hi[1])
        return number_in(lo[0], hi[0], lo[1], hi[1])
    if isinstance(a, JsonString) and isinstance(b, JsonString):
        his = [h for h in (a.max_length, b.max_length) if h is not None]
        lo_n, hi_n = max(a.min_length, b.min_length), (min(his) if his else None)
        if hi_n is not None and lo_n > hi_n:
            return NEVER
        return JsonString(lo_n, hi_n, _merge(a.patterns, b.patterns), _merge(a.fullmatch, b.fullmatch),
                          _merge(a.avoid, b.avoid), _merge(a.excluded, b.excluded))
    if isinstance(a, JsonArray) and isinstance(b, JsonArray):
        items = meet(a.items, b.items, work)
        his = [h for h in (a.max_items, b.max_items) if h is not None]
        lo_n, hi_n = max(a.min_items, b.min_items), (min(his) if his else None)
        return array_of(items, lo_n, hi_n)
    if isinstance(a, JsonObject) and isinstance(b, JsonObject):
        return _meet_objects(a, b, work)
    return NEVER  # different kinds of value


def array_of(items: JsonType, lo: int, hi: int | None) -> JsonType:
    """An array description, or :data:`NEVER` (no items possible but some required)."""
    if is_never(items):
        if lo > 0:
            return NEVER
        hi = 0
    if hi is not None and lo > hi:
        return NEVER
    return JsonArray(items, lo, hi)


def _merge(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*a, *b)))


def _bound_lo(t: JsonInteger | JsonNumber) -> tuple[Fraction | None, bool]:
    if isinstance(t, JsonInteger):
        return (None if t.lo is None else Fraction(t.lo)), False
    return t.lo, t.lo_open


def _bound_hi(t: JsonInteger | JsonNumber) -> tuple[Fraction | None, bool]:
    if isinstance(t, JsonInteger):
        return (None if t.hi is None else Fraction(t.hi)), False
    return t.hi, t.hi_open


# --- disjointness ----------------------------------------------------------------------------

def kinds(t: JsonType) -> frozenset[str]:
    """The JSON kinds of ``t``'s values (integers are numbers)."""
    if isinstance(t, JsonAny):
        return frozenset({"null", "boolean", "number", "string", "array", "object"})
    if isinstance(t, JsonUnion):
        return frozenset().union(*(kinds(b) for b in t.branches))
    if isinstance(t, JsonConst):
        return frozenset(_type_of(v) for v in t.all_values())
    if isinstance(t, JsonInteger | JsonNumber):
        return frozenset({"number"})
    if isinstance(t, JsonString):
        return frozenset({"string"})
    return frozenset({"array" if isinstance(t, JsonArray) else "object"})


@functools.lru_cache(maxsize=4096)
def _string_empty_meet(a: JsonString, b: JsonString) -> bool:
    """No string satisfies both (lengths ignored past their ranges; patterns by automaton)."""
    from ltlagent.text.content import intersect, meets  # products of the decoded-text DFAs

    lo = max(a.min_length, b.min_length)
    his = [h for h in (a.max_length, b.max_length) if h is not None]
    if his and lo > min(his):
        return True
    parts = [pattern_language(p) for p in (*a.patterns, *b.patterns)]
    parts += [pattern_language(r, False, False) for r in (*a.fullmatch, *b.fullmatch)]
    if not parts:
        return False
    d = parts[0]
    try:
        for x in parts[1:-1]:
            d = intersect(d, x)
        # the last product only searched for a text both accept (no table built)
        return not meets(d, parts[-1]) if len(parts) > 1 else 0 not in d.live
    except UsageError:
        return False


def disjoint(a: JsonType, b: JsonType) -> bool:
    """No value is in both ``a`` and ``b`` (True only when proven)."""
    if is_never(a) or is_never(b):
        return True
    if not kinds(a) & kinds(b):
        return True
    if isinstance(a, JsonAny) or isinstance(b, JsonAny):
        return False
    if isinstance(a, JsonUnion):
        return all(disjoint(x, b) for x in a.branches)
    if isinstance(b, JsonUnion):
        return all(disjoint(a, x) for x in b.branches)
    if isinstance(b, JsonConst):
        a, b = b, a
    if isinstance(a, JsonConst):
        return not any(admits(b, v) for v in a.all_values())
    if isinstance(a, JsonInteger | JsonNumber) and isinstance(b, JsonInteger | JsonNumber):
        m = meet(a, b)
        return is_never(m)
    if isinstance(a, JsonString) and isinstance(b, JsonString):
        return _string_empty_meet(a, b)
    if isinstance(a, JsonArray) and isinstance(b, JsonArray):
        lo = max(a.min_items, b.min_items)
        his = [h for h in (a.max_items, b.max_items) if h is not None]
        return bool(his and lo > min(his)) or (lo > 0 and disjoint(a.items, b.items))
    if isinstance(a, JsonObject) and isinstance(b, JsonObject):
        for x, y in ((a, b), (b, a)):
            for p in x.properties:
                if p.required and disjoint(p.schema, key_schemas(y, p.name)):
                    return True
    return False


def pairwise_disjoint(branches: list[JsonType]) -> tuple[int, int] | None:
    """The first pair of branches not proven disjoint, or None."""
    for i, j in itertools.combinations(range(len(branches)), 2):
        if not disjoint(branches[i], branches[j]):
            return i, j
    return None


# --- complement ------------------------------------------------------------------------------

_KINDS = ("null", "boolean", "number", "string", "array", "object")
#: Most pieces one kind's complement is written as (more would copy the surrounding value as often).
MAX_PIECES = 6


def of_kind(kind: str, depth: int) -> JsonType:
    """Every value of one JSON kind, written with arrays and objects nested at most ``depth`` deep
    (0: an object's undeclared keys, though allowed, are not written)."""
    if kind == "null":
        return JsonConst((None,))
    if kind == "boolean":
        return JsonConst((True, False))
    if kind == "number":
        return JsonNumber()
    if kind == "string":
        return JsonString()
    inner = JsonAny(max(depth - 1, 0))
    if kind == "array":
        return JsonArray(inner, 0, None)
    return JsonObject((), (), inner, depth > 0)


def _flat(t: JsonType) -> list[JsonType]:
    return [x for b in t.branches for x in _flat(b)] if isinstance(t, JsonUnion) else [t]


def complement(t: JsonType, depth: int) -> JsonType:
    """A subset of the values *not* in ``t``: per JSON kind, all of it where ``t`` has none of that
    kind, else the parts of the kind outside ``t`` that a description can say (``not``, ``if``'s
    other side, a ``oneOf`` branch against the others). Exact for constants, number bounds, string
    lengths and single patterns, and an object's required names; a subset elsewhere (``not`` of a
    value that ``t`` allows is never written)."""
    branches = _flat(t)
    out: list[JsonType] = []
    for kind in _KINDS:
        piece = of_kind(kind, depth)
        for b in branches:
            if kind not in kinds(b):
                continue
            try:
                piece = meet(piece, _outside(kind, b, depth))
            except Unsupported:
                piece = NEVER
        out.append(piece)
    return _union(out)


def _outside(kind: str, t: JsonType, depth: int) -> JsonType:
    """A subset of the values of ``kind`` not in ``t`` (a description with values of that kind)."""
    if isinstance(t, JsonAny):
        return NEVER
    if isinstance(t, JsonConst):
        vals = [v for v in t.all_values() if _type_of(v) == kind]
        if kind == "boolean":
            rest = tuple(x for x in (True, False) if not any(json_equal(x, v) for v in vals))
            return JsonConst(rest) if rest else NEVER
        if kind == "string":
            return JsonString(excluded=tuple(str(v) for v in vals))
        if kind == "number":
            if any(isinstance(v, float) and not math.isfinite(v) for v in vals):
                return NEVER
            points = sorted({f for f in (_fraction(v) for v in vals) if f is not None})
            edges = [None, *points, None]
            return _union([number_in(a, b, a is not None, b is not None)
                           for a, b in itertools.pairwise(edges)])
        return NEVER  # null (the only value), arrays and objects: none written
    pieces: list[JsonType] = []
    if isinstance(t, JsonInteger | JsonNumber):
        (lo, lo_open), (hi, hi_open) = _bound_lo(t), _bound_hi(t)
        if lo is not None:
            pieces.append(number_in(None, lo, False, not lo_open))
        if hi is not None:
            pieces.append(number_in(hi, None, not hi_open, False))
    elif isinstance(t, JsonString):
        if t.min_length > 0:
            pieces.append(JsonString(0, t.min_length - 1))
        if t.max_length is not None and t.max_length < 256:
            pieces.append(JsonString(t.max_length + 1, None))
        pieces += [JsonString(avoid=(p,)) for p in t.patterns]
        pieces += [JsonString(patterns=(p,)) for p in t.avoid]
        if t.excluded:
            pieces.append(JsonConst(t.excluded))
    elif isinstance(t, JsonArray):
        inner = JsonAny(max(depth - 1, 0))
        if t.min_items > 0:
            pieces.append(JsonArray(inner, 0, t.min_items - 1))
        if t.max_items is not None and t.max_items < 8:
            pieces.append(JsonArray(inner, t.max_items + 1, None))
        pieces.append(array_of(complement(t.items, depth - 1), 1, 1))
    elif isinstance(t, JsonObject):
        inner = JsonAny(max(depth - 1, 0))

        def obj(name: str, schema: JsonType, required: bool) -> JsonType:
            return make_object([JsonProperty(name, schema, required)], (), inner, depth > 0)

        # a required name missing, a forbidden name present, a declared name's value outside
        pieces += [obj(p.name, NEVER, False) for p in t.properties if p.required]
        pieces += [obj(p.name, inner, True) for p in t.properties if is_never(p.schema)]
        consts = sorted((p for p in t.properties if not is_never(p.schema)),
                        key=lambda p: not isinstance(p.schema, JsonConst))
        for p in consts:
            other = complement(p.schema, depth - 1)
            if not is_never(other):  # (a NEVER value would forbid the name: not outside t)
                pieces.append(obj(p.name, other, True))
    kept = [p for p in pieces if not is_never(p)]
    return _union(kept[:MAX_PIECES])
