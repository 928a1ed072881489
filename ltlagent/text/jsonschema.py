"""JSON schemas as byte automata: the JSON texts a tool's arguments may be, for the decoding monitor.

:func:`parse_schema` (:mod:`ltlagent.text.schemaread`, re-exported here) reads a JSON-schema dict
into a frozen description of a set of *values* (:mod:`ltlagent.text.jsontype`), refusing what it
cannot describe with a :class:`~ltlagent.errors.SchemaError` naming the keyword and its JSON
pointer; :func:`emit` writes the texts of a description into a
:class:`~ltlagent.text.content.ByteNFA`; :func:`schema_dfa` makes the
:class:`~ltlagent.text.content.ContentDFA` of it. :mod:`ltlagent.text.toolcall` composes the same
pieces into whole tool calls.

The language (docs/design.md §5.1) is a *generation* language: every text it accepts is JSON whose
value validates against the schema, and every value in the description has at least one text in
it (the description itself may leave out valid values where §5.1 says so), written

- with no whitespace except at most one space after each ``:`` and ``,`` (none at the ends);
- with object properties in the schema's declared order, each at most once; optional ones may be
  left out; undeclared keys after them, any number, where a pattern or a schema in
  ``additionalProperties`` (or no ``properties`` at all) says what their values are;
- strings as raw UTF-8 (any character but ``"``, ``\\`` and controls) or the escapes ``\\"``,
  ``\\\\``, ``\\/``, ``\\b``, ``\\f``, ``\\n``, ``\\r``, ``\\t`` and ``\\u00XX`` for the controls
  U+0000–U+001F only (hex digits in either case): no other ``\\u`` escape, no surrogates;
  ``minLength``/``maxLength`` count decoded characters, ``pattern`` is found (ECMA-262) in the
  decoded string;
- integers without fraction or exponent (``-0`` allowed); numbers in the full JSON number syntax,
  or without exponent where they have bounds;
- ``enum``/``const`` values in the same forms (0 also as ``-0``; floats, arrays and objects as
  their compact JSON text).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Generic, NamedTuple, TypeVar

import numpy as np

from ltlagent.errors import SchemaError, UsageError
from ltlagent.graph import cells, run_starts
from ltlagent.text import jsontype, numbertext
from ltlagent.text.arraytable import array_table
from ltlagent.text.bytetable import ByteTable, Rim, literal_table, trie
from ltlagent.text.content import (
    DEAD,
    ByteNFA,
    ContentDFA,
    as_dfa,
    byte_classes,
    live_table_of,
    minimize_table,
    predecessors,
    product_table,
    refine,
)
from ltlagent.text.glue import Block, Glue
from ltlagent.text.jsontype import (
    ANY_TEXT,
    LIBRARY_REGEXES,
    NEVER,
    JsonAny,
    JsonArray,
    JsonConst,
    JsonInteger,
    JsonNumber,
    JsonObject,
    JsonProperty,
    JsonString,
    JsonType,
    JsonUnion,
    Unsupported,
    is_never,
    meet,
    pattern_language,
)
from ltlagent.text.numbertext import integer_dfa, integer_regex, number_parts
from ltlagent.text.objecttable import Member, object_table
from ltlagent.text.schemaread import ANY_DEPTH, MAX_DEPTH, MAX_ITEMS, MAX_STRING_LENGTH, narrow, parse_schema
from ltlagent.text.uniontable import union_table

__all__ = [
    "JsonConst", "JsonInteger", "JsonNumber", "JsonString", "JsonArray", "JsonProperty",
    "JsonObject", "JsonUnion", "JsonAny", "JsonType", "parse_schema", "narrow", "emit", "schema_dfa",
    "schema_table", "schema_block", "description_table", "string_texts", "integer_regex", "clear_caches",
    "MAX_DEPTH", "MAX_ITEMS", "MAX_STRING_LENGTH", "MAX_JSON_STATES", "ANY_DEPTH", "number_parts",
]

#: Largest automaton built for one schema or tool-call format.
MAX_JSON_STATES = 50_000
#: Objects whose keys are each written one way and that write no undeclared keys get their tables
#: written directly (:mod:`ltlagent.text.objecttable`); off: every object's glue is determinised.
DIRECT_OBJECTS = True
#: Arrays get their tables written directly from their item's (:mod:`ltlagent.text.arraytable`);
#: off: every array's glue is determinised.
DIRECT_ARRAYS = True
#: Constants (``const``, ``enum``) written in whole texts get their tables written as the trie of
#: their texts (:func:`~ltlagent.text.bytetable.literal_table`); off: the glue of their literals.
DIRECT_CONSTS = True
#: Unions whose branches begin with different bytes (``["string", "null"]``) get their tables
#: written directly from their branches' (:mod:`ltlagent.text.uniontable`); off: their glue.
DIRECT_UNIONS = True
#: Bounded integers get their DFA written digit by digit (:func:`~ltlagent.text.numbertext.integer_dfa`)
#: and, as a member or item, used as their table; off: compiled from their regex and glued.
DIRECT_INTEGERS = True
_SHORT_ESCAPES = {ord('"'): '"', ord("\\"): "\\", ord("/"): "/", 8: "b", 12: "f", 10: "n",
                  13: "r", 9: "t"}


def clear_caches() -> None:
    """Forget the DFAs built for patterns and schema parts, the number automata and the
    string-meet verdicts (every cache of what schemas built: kept across calls, by value). The
    library's constants stay: the automata of formats, of any text and of JSON numbers, which
    depend on no schema (:data:`~ltlagent.text.jsontype.LIBRARY_REGEXES`), and the tables of any
    array and any object (:data:`LIBRARY_STRUCTURES`) and of strings in formats alone or free, of
    any length or non-empty (:func:`_of_library`)."""
    jsontype.clear_caches()
    numbertext.clear_caches()
    _string_language.schema.cache_clear()
    _minimal.schema.cache_clear()
    _value_table.schema.cache_clear()
    _string_template.schema.cache_clear()
    _template_graph.schema.cache_clear()
    _extra_keys.cache_clear()


# --- writing the automaton -------------------------------------------------------------------

_Lang = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]


def _lang(t: JsonString) -> _Lang:
    """What a string's decoded text must be, as a hashable key (patterns, fullmatch, avoid, excluded)."""
    return t.patterns, t.fullmatch, t.avoid, t.excluded


#: A DFA as :func:`_build_string_language` chains them: its live table (``int64 [n, 256]``,
#: :attr:`~ltlagent.text.content.ContentDFA.live_table`), accepting states and source.
_Part = tuple[np.ndarray, frozenset[int], str]


def _part(d: ContentDFA) -> _Part:
    return d.live_table, d.accepting, d.source


def _complement(t: np.ndarray, accepting: frozenset[int], source: str) -> _Part:
    """The UTF-8 texts a DFA (its live table, accepting states, source) rejects."""
    n = t.shape[0]
    trans = np.full((n + 1, 256), n, dtype=np.int64)  # n: the sink, now accepting
    trans[:n] = np.where(t >= 0, t, n)
    acc = set(range(n + 1)) - accepting
    return _meet((live_table_of(trans, acc), frozenset(acc), f"not ({source})"),
                 _part(pattern_language(ANY_TEXT, False, False)))


def _meet(a: _Part, b: _Part) -> _Part:
    """The product of two DFAs (:func:`~ltlagent.text.content.intersect` without its tuples)."""
    table, acc = product_table(a[0], a[1], b[0], b[1], (a[2], b[2]))
    return live_table_of(table, acc), frozenset(acc), f"({a[2]}) & ({b[2]})"


def _library_only(lang: _Lang) -> bool:
    """Whether a string's language is the library's alone (no constraint, or formats): then its
    automata are constants like the regexes' (:data:`~ltlagent.text.jsontype.LIBRARY_REGEXES`),
    kept by :func:`clear_caches`."""
    patterns, fullmatch, avoid, excluded = lang
    return not (patterns or avoid or excluded) and all(rx in LIBRARY_REGEXES for rx in fullmatch)


_K = TypeVar("_K")
_T = TypeVar("_T")


class _TwoCaches(Generic[_K, _T]):
    """A function kept by value in one of two caches, chosen by its first argument: the library's
    (where ``of_library`` says the argument depends on no schema: never forgotten, a handful of
    entries) or the schemas' (``maxsize`` entries, cleared by :func:`clear_caches`)."""

    def __init__(self, build: Callable[..., _T], of_library: Callable[[_K], bool], maxsize: int) -> None:
        self.of_library = of_library
        self.library = functools.cache(build)
        self.schema = functools.lru_cache(maxsize=maxsize)(build)

    def __call__(self, key: _K, *rest: int) -> _T:
        return (self.library if self.of_library(key) else self.schema)(key, *rest)


def _build_string_language(lang: _Lang) -> ContentDFA:
    """What the decoded string must be (as UTF-8 bytes): the meet of its parts, minimised. The
    parts are met as live tables (:func:`_meet`): only the minimal DFA is made a
    :class:`ContentDFA` (a complement of hundreds of declared names has thousands of states). A
    single pattern or format is its own DFA, not minimised: its only reader that depends on
    states, the template (:func:`template_rows`), is minimised as a Mealy machine, which merges
    what the pattern's minimisation would have, numbered by first appearance all the same (the
    same templates and tables on all of JSONSchemaBench's sample; minimising cost 60 µs per
    pattern)."""
    patterns, fullmatch, avoid, excluded = lang
    # each part accepts UTF-8 texts only (patterns are compiled over code points, complements
    # are taken within the texts): the texts themselves need no intersecting
    parts = [*(_part(pattern_language(rx)) for rx in patterns),
             *(_part(pattern_language(rx, False, False)) for rx in fullmatch),
             *(_complement(*_part(pattern_language(rx))) for rx in avoid),
             *([_complement(*_trie(excluded), _choices_source(excluded))] if excluded else [])]
    if len(parts) == 1 and not (avoid or excluded):  # one pattern or format: its DFA as it is
        return pattern_language(*((patterns[0], True, True) if patterns else (fullmatch[0], False, False)))
    d = parts[0] if parts else _part(pattern_language(ANY_TEXT, False, False))
    for part in parts[1:]:
        d = _meet(d, part)
    # the live table: its dead ends already DEAD, the same minimal DFA (they go to the sink)
    return as_dfa(*minimize_table(d[0], set(d[1])), d[2])


#: What the decoded string must be (as UTF-8 bytes), from the library's cache or the schemas'.
_string_language: _TwoCaches[_Lang, ContentDFA] = _TwoCaches(_build_string_language, _library_only, 64)


def choices_exact(words: tuple[str, ...]) -> ContentDFA:
    """The DFA of exactly these texts (UTF-8)."""
    trans, acc = _trie(words)
    return as_dfa(trans, set(acc), _choices_source(words))


def _choices_source(words: tuple[str, ...]) -> str:
    return "one of " + ", ".join(map(repr, words))


def _trie(words: tuple[str, ...]) -> tuple[np.ndarray, frozenset[int]]:
    """The trie of these texts (UTF-8) as a numpy table (every state live) and its accepting
    states: a schema's declared names, which undeclared keys avoid, can be hundreds."""
    children, acc = trie(w.encode("utf-8") for w in words)
    trans = np.full((len(children), 256), DEAD, dtype=np.int64)
    for s, kids in enumerate(children):
        if kids:
            trans[s, list(kids)] = list(kids.values())
    return trans, frozenset(acc)


def string_texts(s: str) -> list[list[bytes]]:
    """For each character of ``s``, the ways the generation language writes it in a JSON string."""
    out: list[list[bytes]] = []
    for ch in s:
        o = ord(ch)
        if o in _SHORT_ESCAPES and o >= 0x20:
            alts = [b"\\" + _SHORT_ESCAPES[o].encode()]
            if ch == "/":
                alts.append(b"/")
        elif o < 0x20:
            alts = [b"\\" + _SHORT_ESCAPES[o].encode()] if o in _SHORT_ESCAPES else []
            hexes = f"{o:04x}"
            alts += list(dict.fromkeys(f"\\u{hexes[:3]}{c}".encode() for c in
                                       (hexes[3], hexes[3].upper())))
        else:
            alts = [ch.encode("utf-8")]
        out.append(alts)
    return out


def _plain_ascii(s: str) -> bool:
    """Whether each character of ``s`` is one printable ASCII byte that :func:`string_texts`
    writes as itself alone (not ``"``, ``\\`` or ``/``): then ``s``'s text is its bytes, and
    :meth:`_Emitter.sequence` of its texts is one :meth:`~ltlagent.text.content.ByteNFA.literal`
    (the same nodes, in the same order)."""
    return s.isascii() and s.isprintable() and '"' not in s and "\\" not in s and "/" not in s


def _const_texts(v: str | int | bool | None) -> list[list[bytes]]:
    """The texts of a constant, as a sequence of alternatives."""
    if v is None:
        return [[b"null"]]
    if v is True:
        return [[b"true"]]
    if v is False:
        return [[b"false"]]
    if isinstance(v, int):
        return [[str(v).encode()] + ([b"-0"] if v == 0 else [])]
    return [[b'"'], *string_texts(v), [b'"']]


_STEP_ESC, _STEP_U, _STEP_U0, _STEP_U00, _STEP_U000, _STEP_U001 = range(1, 7)


class _Emitter:
    """Writes a description into a glue NFA; strings, arrays and objects go in as whole tables
    (blocks of a :class:`Glue`, or copied state by state into a plain :class:`ByteNFA`)."""

    def __init__(self, glue: Glue | ByteNFA, limit: int) -> None:
        self.glue = glue
        self.nfa = glue.nfa if isinstance(glue, Glue) else glue
        self.limit = limit

    def part(self, t: Block, start: int, end: int) -> None:
        if isinstance(self.glue, Glue):
            self.glue.table(t, start, end)
        else:
            self.nfa.embed(t.table().content, start, end)

    def ws(self, start: int) -> int:
        """After a ``:`` or ``,``: nothing or one space; returns the node after it."""
        t = self.nfa.new()
        self.nfa.eps[start].append(t)
        self.nfa.edges[start].append((0x20, 0x20, t))
        return t

    def sequence(self, parts: Sequence[Sequence[bytes]], start: int, end: int) -> None:
        s = start
        for k, alts in enumerate(parts):
            t = end if k == len(parts) - 1 else self.nfa.new()
            for a in alts:
                self.nfa.literal(a, s, t)
            s = t

    def const(self, v: str | int | bool | None, start: int, end: int) -> None:
        if isinstance(v, str) and _plain_ascii(v):  # most keys: one text, one byte per character
            self.nfa.literal(b'"' + v.encode("ascii") + b'"', start, end)
            return
        self.sequence(_const_texts(v), start, end)

    def value(self, t: JsonType, start: int, end: int) -> None:
        nfa = self.nfa
        if isinstance(t, JsonConst):
            for v in t.values:
                self.const(v, start, end)
            for text in t.texts:
                nfa.literal(text.encode("utf-8"), start, end)
        elif isinstance(t, JsonInteger):  # (the reference NFA keeps the regex: tests compare them)
            nfa.embed(integer_dfa(t.lo, t.hi) if isinstance(self.glue, Glue) and DIRECT_INTEGERS
                      else pattern_language(integer_regex(t.lo, t.hi), False, False), start, end)
        elif isinstance(t, JsonNumber):
            for sign, d in number_parts(t):
                s = nfa.new()
                nfa.literal(sign, start, s)
                nfa.embed(d, s, end)
        elif isinstance(t, JsonAny):
            self.value(any_value(t.depth), start, end)
        elif isinstance(t, JsonString) or (isinstance(t, JsonArray | JsonObject)
                                           and isinstance(self.glue, Glue)):
            self.part(_minimal(t, self.limit), start, end)
        elif isinstance(t, JsonArray):  # a plain NFA: structures inline, Thompson-style
            self.array(t, start, end)
        elif isinstance(t, JsonObject):
            self.object(t, start, end)
        else:  # a union (oneOf only when its branches are disjoint: jsontype.disjoint)
            # two or more objects are written in place, not as blocks: their properties are then
            # the same blocks (cached by value), which the glue follows in lockstep while the
            # branches agree (Glue.nested's groups), not a product of two whole objects' tables
            inline = isinstance(self.glue, Glue) and sum(isinstance(b, JsonObject) for b in t.branches) > 1
            for b in t.branches:
                if inline and isinstance(b, JsonObject):
                    self.object(b, start, end)
                else:
                    self.value(b, start, end)

    def array(self, t: JsonArray, start: int, end: int) -> None:
        nfa = self.nfa
        s = nfa.new()
        nfa.literal(b"[", start, s)
        if t.min_items == 0:
            nfa.literal(b"]", s, end)
        if t.max_items == 0:
            return
        k, cur = 1, nfa.new()
        self.value(t.items, s, cur)
        unroll = t.max_items if t.max_items is not None else max(t.min_items, 1)
        while True:
            if k >= t.min_items:
                nfa.literal(b"]", cur, end)
            if k == unroll:
                if t.max_items is None:  # any number more
                    c = nfa.new()
                    nfa.literal(b",", cur, c)
                    self.value(t.items, self.ws(c), cur)
                break
            c = nfa.new()
            nfa.literal(b",", cur, c)
            nxt = nfa.new()
            self.value(t.items, self.ws(c), nxt)
            k, cur = k + 1, nxt

    def object(self, t: JsonObject, start: int, end: int) -> None:
        nfa = self.nfa
        first = nfa.new()
        nfa.literal(b"{", start, first)
        empty: int | None = first  # nothing written yet (None: a required property was)
        some: int | None = None  # a property written: the next one needs a comma
        for p in t.properties:
            if is_never(p.schema):  # a forbidden name (never required)
                continue
            key = nfa.new()  # where this property's key begins, from either lane
            if empty is not None:
                nfa.eps[empty].append(key)
            if some is not None:
                c = nfa.new()
                nfa.literal(b",", some, c)
                nfa.eps[self.ws(c)].append(key)
            new_some = nfa.new()
            self.member(p, key, new_some)
            new_empty = None
            if not p.required:  # left out
                if empty is not None:
                    new_empty = nfa.new()
                    nfa.eps[empty].append(new_empty)
                if some is not None:
                    nfa.eps[some].append(new_some)
            empty, some = new_empty, new_some
        classes = extra_keys(t)
        if classes:  # undeclared keys after the declared ones, any number of them
            more = nfa.new()
            for names, schema in classes:
                for s, first_member in ((empty, True), (some, False), (more, False)):
                    if s is None:
                        continue
                    k = nfa.new()
                    if first_member:
                        nfa.eps[s].append(k)
                    else:
                        c = nfa.new()
                        nfa.literal(b",", s, c)
                        nfa.eps[self.ws(c)].append(k)
                    self.member_of(names, schema, k, more)
            nfa.literal(b"}", more, end)
        for s in (empty if t.min_properties == 0 else None, some):
            if s is not None:
                nfa.literal(b"}", s, end)

    def member_of(self, key: JsonString, schema: JsonType, start: int, end: int) -> None:
        """A member whose key is any string of ``key``."""
        nfa = self.nfa
        k = nfa.new()
        self.value(key, start, k)
        c = nfa.new()
        nfa.literal(b":", k, c)
        self.value(schema, self.ws(c), end)

    def member(self, p: JsonProperty, start: int, end: int) -> None:
        nfa = self.nfa
        k = nfa.new()
        self.const(p.name, start, k)
        c = nfa.new()
        nfa.literal(b":", k, c)
        self.value(p.schema, self.ws(c), end)

def any_value(depth: int) -> JsonType:
    """Every JSON value with arrays and objects nested at most ``depth`` deep, as a union."""
    inner = any_value(depth - 1) if depth > 0 else NEVER
    return JsonUnion((JsonConst((None, True, False)), JsonNumber(), JsonString(),
                      JsonArray(inner, 0, None if depth > 0 else 0),
                      JsonObject((), (), inner, depth > 0)))


def extra_keys(t: JsonObject) -> list[tuple[JsonString, JsonType]]:
    """The undeclared keys an object writes, as classes of keys with their value's schema: per
    non-empty subset of the patterns, the keys matching exactly those (their schemas met); and,
    with ``write_additional``, the keys matching none. Declared names are excluded. Kept per
    object (:func:`clear_caches`): the direct table asks first, then the glue that writes them."""
    if not t.patterns and not t.write_additional:
        return []
    return list(_extra_keys(t))


@functools.lru_cache(maxsize=4096)
def _extra_keys(t: JsonObject) -> tuple[tuple[JsonString, JsonType], ...]:
    names = tuple(p.name for p in t.properties)
    rxs = [rx for rx, _s in t.patterns]
    out: list[tuple[JsonString, JsonType]] = []
    for r in range(1, len(rxs) + 1):
        for subset in itertools.combinations(range(len(rxs)), r):
            schema: JsonType = JsonAny(0)
            try:
                for i in subset:
                    schema = meet(schema, t.patterns[i][1])
            except Unsupported:  # keys matching these patterns together are not written
                continue
            if is_never(schema):
                continue
            key = JsonString(patterns=tuple(rxs[i] for i in subset),
                             avoid=tuple(rx for i, rx in enumerate(rxs) if i not in subset),
                             excluded=names)
            out.append((key, schema))
    if t.write_additional and not is_never(t.additional):
        out.append((JsonString(avoid=tuple(rxs), excluded=names), t.additional))
    return tuple((k, s) for k, s in out if 0 in _string_language(_lang(k)).live)


_EXIT = -2  # in a string template: the closing quote


def _template(lang: _Lang) -> tuple[np.ndarray, np.ndarray]:
    """The transducer of a JSON string over the decoded text's DFA ``pat`` (:data:`_string_language`
    of the arguments), without the count: states (pattern state, escape step), ``tgt[s, b]`` the
    successor (-1 dead, :data:`_EXIT` the closing quote, allowed where ``pat`` accepts) and
    ``inc[s, b]`` 1 where byte ``b`` begins a character (raw) or completes one (an escape).
    Minimised as a Mealy machine (edges labelled by ``inc``). A string without patterns, formats
    or excluded texts (most strings) gets its template written directly
    (:func:`_plain_template`), the same arrays. Read-only: they are kept and shared."""
    tgt, inc = _plain_template() if lang == _PLAIN else _mealy_minimal(*template_rows(lang))
    tgt.setflags(write=False)
    inc.setflags(write=False)
    return tgt, inc


#: :func:`_template`, from the library's cache or the schemas' (as :data:`_string_language`).
_string_template: _TwoCaches[_Lang, tuple[np.ndarray, np.ndarray]] = _TwoCaches(_template, _library_only, 64)


_PLAIN: _Lang = ((), (), (), ())
#: The minimal template of :data:`_PLAIN`, as :func:`_mealy_minimal` numbers it: 0 between
#: characters; 1–7 inside a UTF-8 character (1: one continuation byte left; 2: after E0; 3: two
#: left; 4: after ED; 5: after F0; 6: three left; 7: after F4); 8 after a backslash; 9–11 after
#: ``\u``, ``\u0``, ``\u00``; 12 after ``\u000`` or ``\u001`` (the last hex digit completes it).
#: Rows as (first byte, last byte, target, begins or completes a character).
_PLAIN_ROWS: tuple[tuple[tuple[int, int, int, int], ...], ...] = (
    ((0x20, 0x21, 0, 1), (0x22, 0x22, _EXIT, 0), (0x23, 0x5B, 0, 1), (0x5C, 0x5C, 8, 0),
     (0x5D, 0x7F, 0, 1), (0xC2, 0xDF, 1, 1), (0xE0, 0xE0, 2, 1), (0xE1, 0xEC, 3, 1),
     (0xED, 0xED, 4, 1), (0xEE, 0xEF, 3, 1), (0xF0, 0xF0, 5, 1), (0xF1, 0xF3, 6, 1),
     (0xF4, 0xF4, 7, 1)),
    ((0x80, 0xBF, 0, 0),), ((0xA0, 0xBF, 1, 0),), ((0x80, 0xBF, 1, 0),), ((0x80, 0x9F, 1, 0),),
    ((0x90, 0xBF, 3, 0),), ((0x80, 0xBF, 3, 0),), ((0x80, 0x8F, 3, 0),),
    (*((ord(c), ord(c), 0, 1) for c in '"/\\bfnrt'), (ord("u"), ord("u"), 9, 0)),
    ((0x30, 0x30, 10, 0),), ((0x30, 0x30, 11, 0),), ((0x30, 0x31, 12, 0),),
    ((0x30, 0x39, 0, 1), (0x41, 0x46, 0, 1), (0x61, 0x66, 0, 1)),
)


def _plain_template() -> tuple[np.ndarray, np.ndarray]:
    """:data:`_string_template` of a string with no constraint on its text, from
    :data:`_PLAIN_ROWS` (``tests/test_jsonschema.py`` checks it equals the general construction)."""
    tgt = np.full((len(_PLAIN_ROWS), 256), DEAD, dtype=np.int64)
    inc = np.zeros((len(_PLAIN_ROWS), 256), dtype=np.int64)
    for q, row in enumerate(_PLAIN_ROWS):
        for lo, hi, to, up in row:
            tgt[q, lo:hi + 1] = to
            inc[q, lo:hi + 1] = up
    return tgt, inc


#: The bytes a JSON string may hold raw (not ``"``, ``\\`` or a control), ascending.
_RAW_BYTES = np.array([b for b in range(0x20, 0x100) if b not in (0x22, 0x5C)], dtype=np.int64)
#: Where a raw byte begins a character (not a continuation byte), by byte.
_BEGINS = np.array([not 0x80 <= b < 0xC0 for b in range(256)], dtype=np.int64)
#: The decoded bytes after which a backslash may come (short escapes and the controls).
_ESCAPED = np.array([*_SHORT_ESCAPES, *range(0x20)], dtype=np.int64)
_STEPS = _STEP_U001 + 1  # a template key (pattern state, step) as ``p * _STEPS + step``


def row_successors(table: np.ndarray) -> list[list[int]]:
    """Each row's distinct successors (not ``DEAD``) in the order of their first byte, read from
    the row's runs (a row of a pattern's table has a few): ``dict.fromkeys`` of the row."""
    start = run_starts(table)
    heads = table[start].tolist()
    ends = np.cumsum(start.sum(axis=1)).tolist()
    return [[r for r in dict.fromkeys(heads[e0:e1]) if r >= 0]
            for e0, e1 in itertools.pairwise([0, *ends])]


def template_rows(lang: _Lang) -> tuple[np.ndarray, np.ndarray]:
    """:data:`_string_template` before minimising: the states (pattern state, escape step)
    reachable from (0, 0), numbered breadth first in the order the successors of a state are
    met (raw bytes ascending, then the backslash; an escape's letters in :data:`_SHORT_ESCAPES`'
    order, then ``u``; hex digits ascending). The pattern's rows are read in numpy; only the
    order of discovery is decided in Python, on each row's distinct successors."""
    pat = _string_language(lang)
    live = pat.live_table
    raw = live[:, _RAW_BYTES]  # the pattern's successor on each raw byte (DEAD: refused)
    succ = row_successors(raw)
    can_escape = np.asarray((live[:, _ESCAPED] >= 0).any(axis=1))  # not inside a multi-byte character
    escapes: list[bool] = can_escape.tolist()
    rows = live[:, :0x80].tolist()  # on the ASCII bytes an escape can write
    short = [(dec, ord(letter)) for dec, letter in _SHORT_ESCAPES.items()]
    ids: dict[int, int] = {0: 0}
    order = [0]
    extra: list[tuple[int, int, int, int]] = []  # (state, byte, target, begins or completes)

    def to(key: int) -> int:
        j = ids.get(key)
        if j is None:
            j = ids[key] = len(order)
            order.append(key)
        return j

    i = 0
    while i < len(order):
        p, step = divmod(order[i], _STEPS)
        if step == 0:
            for p2 in succ[p]:
                to(p2 * _STEPS)
            if escapes[p]:
                to(p * _STEPS + _STEP_ESC)
        elif step == _STEP_ESC:
            for dec, letter in short:
                p2 = rows[p][dec]
                if p2 >= 0:
                    extra.append((i, letter, to(p2 * _STEPS), 1))
            extra.append((i, ord("u"), to(p * _STEPS + _STEP_U), 0))
        elif step in (_STEP_U, _STEP_U0):
            extra.append((i, 0x30, to(p * _STEPS + step + 1), 0))
        elif step == _STEP_U00:
            extra.append((i, 0x30, to(p * _STEPS + _STEP_U000), 0))
            extra.append((i, 0x31, to(p * _STEPS + _STEP_U001), 0))
        else:
            base = 0 if step == _STEP_U000 else 16
            for h in range(16):
                p2 = rows[p][base + h]
                if p2 >= 0:
                    j = to(p2 * _STEPS)
                    for ch in dict.fromkeys(f"{h:x}{h:X}"):
                        extra.append((i, ord(ch), j, 1))
        i += 1
    keys = np.array(order, dtype=np.int64)
    ps, steps = keys // _STEPS, keys % _STEPS
    new_of = np.full(pat.num_states * _STEPS + 1, DEAD, dtype=np.int64)  # the last entry: DEAD
    new_of[keys] = np.arange(keys.size)
    tgt = np.full((keys.size, 256), DEAD, dtype=np.int64)
    inc = np.zeros((keys.size, 256), dtype=np.int64)
    plain = np.flatnonzero(steps == 0)  # between characters: raw bytes, the quote, a backslash
    p0 = ps[plain]
    r = raw[p0]
    hit = r >= 0
    tgt[np.ix_(plain, _RAW_BYTES)] = np.where(hit, new_of[np.where(hit, r * _STEPS, -1)], DEAD)
    inc[np.ix_(plain, _RAW_BYTES)] = hit * _BEGINS[_RAW_BYTES]
    accepting = np.zeros(pat.num_states, dtype=bool)
    accepting[list(pat.accepting)] = True
    tgt[plain[accepting[p0]], 0x22] = _EXIT
    esc = can_escape[p0]
    tgt[plain[esc], 0x5C] = new_of[p0[esc] * _STEPS + _STEP_ESC]
    if extra:
        e = np.array(extra, dtype=np.int64)
        tgt[e[:, 0], e[:, 1]] = e[:, 2]
        inc[e[:, 0], e[:, 1]] = e[:, 3]
    return tgt, inc


def _mealy_minimal(tgt: np.ndarray, inc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge the states of a template that no input tells apart: Hopcroft's partition refinement
    over the template's byte classes, from the partition by output rows (``inc``, and where the
    closing quote may come); state 0 stays the start."""
    n = tgt.shape[0]
    cols = byte_classes(np.concatenate([tgt, inc]))  # a byte per class of bytes no state tells apart
    t_c = np.where(tgt[:, cols] >= 0, tgt[:, cols], n)  # n: no successor (a sink)
    labels: dict[bytes, list[int]] = {}
    out_rows = np.concatenate([inc[:, cols], tgt[:, cols] == _EXIT], axis=1)
    for q in range(n):
        labels.setdefault(out_rows[q].tobytes(), []).append(q)
    blocks: list[set[int]] = [set(qs) for qs in labels.values()] + [{n}]
    block_of = [0] * (n + 1)
    for i, bl in enumerate(blocks):
        for q in bl:
            block_of[q] = i
    pred = predecessors(t_c)
    # all but one block: the sink's, whose predecessors abound
    refine(blocks, block_of, pred, list(range(len(blocks) - 1)))
    block = np.array(block_of[:n], dtype=np.int64)
    # renumber blocks in order of first appearance (state 0's block first)
    _, first = np.unique(block, return_index=True)
    rank = np.full(len(blocks), -1, dtype=np.int64)
    rank[block[np.sort(first)]] = np.arange(first.size)
    reps = np.sort(first)
    t = tgt[reps]
    return np.where(t >= 0, rank[block[np.maximum(t, 0)]], t), inc[reps]


class _States:
    """A set of template states as a Python int (bit ``q``: state ``q``), for the count-by-count
    passes of :func:`_string_table`: one object per set those passes make, so that runs of counts
    are told apart by identity (a count's set repeated is the same object), and its states as an
    index array when the table is written."""

    __slots__ = ("_idx", "bits")

    def __init__(self, bits: int) -> None:
        self.bits = bits
        self._idx: np.ndarray | None = None

    @property
    def idx(self) -> np.ndarray:
        """The states, ascending (what a boolean mask of them selects)."""
        if self._idx is None:
            b = self.bits
            self._idx = np.array([q for q in range(b.bit_length()) if b >> q & 1], dtype=np.int64)
        return self._idx


class _Graph(NamedTuple):
    """A template's edges as bit sets per state (:class:`_States`' bits): successors on the edges
    within a count (``same``), on those to the next (``up``), on either (``both``); the same
    backwards (``*_back``: predecessors); and the states the closing quote leaves (``exits``)."""

    same: list[int]
    up: list[int]
    both: list[int]
    same_back: list[int]
    up_back: list[int]
    both_back: list[int]
    exits: int


def _graph(lang: _Lang) -> _Graph:
    """:class:`_Graph` of :data:`_string_template` of ``lang``: a few dozen bit sets, read by every
    string of that language (the plain template's is a library constant, as the template)."""
    tgt, inc = _string_template(lang)
    n_t = tgt.shape[0]
    src, col = cells(tgt >= 0)
    edge = np.unique((src * n_t + tgt[src, col]) * 2 + (inc[src, col] == 1))
    out = [[0] * n_t for _ in range(4)]  # same, up, same_back, up_back
    for k in edge.tolist():
        e, one = divmod(k, 2)
        q, r = divmod(e, n_t)
        out[one][q] |= 1 << r
        out[2 + one][r] |= 1 << q
    same, up, same_back, up_back = out
    exits = sum(1 << q for q in np.flatnonzero((tgt == _EXIT).any(axis=1)).tolist())
    return _Graph(same, up, [a | b for a, b in zip(same, up)], same_back, up_back,
                  [a | b for a, b in zip(same_back, up_back)], exits)


#: :func:`_graph`, from the library's cache or the schemas' (as :data:`_string_template`).
_template_graph: _TwoCaches[_Lang, _Graph] = _TwoCaches(_graph, _library_only, 64)


def _union(bits: int, adj: list[int]) -> int:
    """The union of ``adj[q]`` over the states ``q`` in ``bits``."""
    out = 0
    while bits:
        low = bits & -bits
        out |= adj[low.bit_length() - 1]
        bits ^= low
    return out


def _closed(seed: _States, adj: list[int]) -> _States:
    """The states ``adj`` (bit sets of successors per state) reaches from ``seed``: ``seed``
    itself where it is closed already."""
    r = todo = seed.bits
    while todo:
        grown = _union(todo, adj)
        todo = grown & ~r
        r |= grown
    return seed if r == seed.bits else _States(r)


def _string_table(t: JsonString, limit: int) -> ByteTable:
    """A JSON string with a decoded length in ``[min_length, max_length]`` and its decoded text in
    the string's language: the template (:data:`_string_template`) times the character count, built
    count by count with only the template states reachable at each count and able to reach the
    closing quote from it (decided on the template, count by count, so the table needs no trimming).
    A string with no constraint at all (``{"type": "string"}``) is the template between the quotes
    (:func:`_plain_string_table`)."""
    if t.min_length == 0 and t.max_length is None and _lang(t) == _PLAIN:
        return _plain_string_table()
    tgt, inc = _string_template(_lang(t))
    g = _template_graph(_lang(t))
    n_t = tgt.shape[0]
    lo, hi = t.min_length, t.max_length
    cap = hi if hi is not None else lo  # without a maximum, counts saturate at the minimum
    # forward: the template states reachable at each count; once a count leads to the entry it
    # came from, every later count below the saturated cap repeats it (the same set: one run)
    reach: list[_States] = []
    entry = _States(1)
    memo: dict[tuple[int, bool], tuple[_States, _States]] = {}
    c = 0
    while c <= cap:
        last = c == cap and hi is None
        key = (entry.bits, last)  # the counts in a run of equal entries repeat one step
        got = memo.get(key)
        if got is None:
            r = _closed(entry, g.both if last else g.same)
            got = memo[key] = (r, _States(_union(r.bits, g.up)))
        r, nxt = got
        reach.append(r)
        if not last and c < cap and nxt.bits == key[0]:
            stop = cap if hi is None else cap + 1  # the saturated cap is a count of its own
            reach.extend([r] * (stop - c - 1))
            c = stop
        else:
            entry = nxt
            c += 1
    # backward: the states from which the closing quote can still come, at each count; a count
    # whose states are those of the next repeats down to the minimum (or to 0 below it)
    live: list[_States] = [entry] * (cap + 1)  # (each count's set is written below)
    after = _States(0)  # live at the next count
    back: dict[tuple[int, bool, bool], _States] = {}
    c = cap
    while c >= 0:
        last = c == cap and hi is None
        key2 = (after.bits, c >= lo, last)
        got2 = back.get(key2)
        if got2 is None:
            seed = _States((g.exits if c >= lo else 0) | _union(after.bits, g.up_back))
            got2 = back[key2] = _closed(seed, g.both_back if last else g.same_back)
        live[c] = got2
        if not last and got2.bits == key2[0]:
            low = lo if c >= lo else 0
            live[low:c] = [got2] * (c - low)
            c = low
        after = got2
        c -= 1
    # kept: reachable and live (the same object for equal pairs, so that runs of counts show)
    kept_memo: dict[tuple[int, int], _States] = {}
    kept: list[_States] = []
    for r, v in zip(reach, live):
        got3 = kept_memo.get((id(r), id(v)))
        if got3 is None:
            got3 = kept_memo[(id(r), id(v))] = _States(r.bits & v.bits)
        kept.append(got3)
    reach = kept
    if not reach[0].bits & 1:
        return ByteTable(np.full((1, 256), DEAD, dtype=np.int32), np.zeros(1, dtype=bool),
                         "json string")
    # runs of counts with the same kept states: (first count, end, states, their number)
    count_runs: list[tuple[int, int, _States, int]] = []
    for c, r in enumerate(reach):
        if count_runs and count_runs[-1][2] is r:
            c0, _e, _r, size = count_runs[-1]
            count_runs[-1] = (c0, c + 1, r, size)
        else:
            count_runs.append((c, c + 1, r, r.bits.bit_count()))
    sizes = [size for c0, e, _r, size in count_runs for _ in range(e - c0)]
    total = 2 + sum(sizes)
    if total > limit:
        raise UsageError(f"the JSON schema needs more than {limit} automaton states",
                         hint="simplify the schema (fewer optional properties, shorter bounds)")
    final = total - 1
    idmap = np.full((cap + 1, n_t), DEAD, dtype=np.int64)
    at = 1
    for c0, e, r, size in count_runs:
        idmap[c0:e, r.idx] = np.arange(at, at + (e - c0) * size).reshape(e - c0, size)
        at += (e - c0) * size
    trans = np.full((total, 256), DEAD, dtype=np.int32)
    trans[0, 0x22] = 1  # the opening quote; (count 0, template start) is state 1
    c = 0
    while c <= cap:
        r = reach[c]
        if not sizes[c]:  # nothing reaches this count (nor any later one)
            c += 1
            continue
        rows, ups = tgt[r.idx], inc[r.idx]
        out = np.full(rows.shape, DEAD, dtype=np.int64)
        keep = (rows >= 0) & (ups == 0)
        out[keep] = idmap[c][rows[keep]]
        up_to = c + 1 if c < cap else (cap if hi is None else None)
        if up_to is not None:
            step = (rows >= 0) & (ups == 1)
            out[step] = idmap[up_to][rows[step]]
        if c >= lo:
            out[rows == _EXIT] = final
        # the next counts with the same states, and the same after them, on the same side of the
        # minimum, below the cap: the same rows, moved by whole counts (one numpy operation)
        e = c
        while (e + 1 < cap and reach[e + 1] is r and reach[e + 2] is reach[c + 1]
               and (e + 1 >= lo) == (c >= lo)):
            e += 1
        start = int(idmap[c, r.idx[0]])
        k = e - c + 1
        dst = trans[start:start + k * sizes[c]].reshape(k, sizes[c], 256)
        dst[...] = out  # written in place, once per count (a run may be megabytes)
        if k > 1:
            moved = (out >= 0) & (out != final)
            shift = (np.arange(k, dtype=np.int32) * sizes[c])[:, None, None]
            np.add(dst, shift, out=dst, where=moved[None])
        c = e + 1
    acc = np.zeros(total, dtype=bool)
    acc[final] = True
    # runs of counts with the same kept template states, the minimum reached, below the cap:
    # their rows repeat with the period of one count (a hint for token walks, checked there)
    periods = []
    c = max(lo, 1)
    while c < cap:
        e = c
        while e + 1 < cap and reach[e + 1] is reach[c]:
            e += 1
        if e - c >= 3 and sizes[c]:
            periods.append((int(idmap[c, reach[c].idx[0]]), int(idmap[e, reach[e].idx[-1]]) + 1, sizes[c]))
        c = e + 1
    # every state is reachable (forward) and reaches the closing quote (backward); and the table
    # is sealed (ByteTable.sealed, read by every glue it is a block of): no state leads back to
    # the start (counted states are numbered from 1), and the closing quote's state has no row
    table = ByteTable(trans, acc, "json string", tuple(periods))
    table.__dict__["sealed"] = True  # (the cached property, known without a pass over the table)
    table.__dict__["rim"] = Rim([(0x22, 0x22, 1)], [(final, [])], True)  # likewise: quote, end
    return table


@functools.cache
def _plain_string_table() -> ByteTable:
    """:func:`_string_table` of a string with no constraint: the opening quote, the plain template
    (every state live: each can finish its character and close), the closing quote; what the
    general construction gives when the count saturates at 0 (``tests/test_jsonschema.py``). A
    library constant, as its template: built once per process, with the views derived from it
    (:attr:`ByteTable.successors`, :attr:`ByteTable.sealed`)."""
    tgt, _inc = _string_template(_PLAIN)  # cached: built once, not per string of a schema
    n_t = tgt.shape[0]
    final = n_t + 1
    trans = np.full((n_t + 2, 256), DEAD, dtype=np.int32)
    trans[0, 0x22] = 1
    trans[1:n_t + 1] = np.where(tgt >= 0, tgt + 1, np.where(tgt == _EXIT, final, DEAD))
    acc = np.zeros(n_t + 2, dtype=bool)
    acc[final] = True
    table = ByteTable(trans, acc, "json string")
    table.__dict__["sealed"] = True  # as _string_table's: nothing leads back to 0, nor leaves the end
    table.__dict__["rim"] = Rim([(0x22, 0x22, 1)], [(final, [])], True)
    return table


def _build_minimal(t: JsonString | JsonArray | JsonObject, limit: int) -> Block:
    """The table of a string, array or object, its parts embedded as tables built the same way
    (blocks of a :class:`Glue`, not copied into the NFA), so a structure costs the glue between its
    parts whatever their nesting. Strings are built directly as a product (:func:`_string_table`);
    arrays and objects are determinised, not minimised: their parts are minimal, and minimising the
    whole costs far more than the few per cent of states it saves. An array's or object's table is
    kept as its parts (:class:`~ltlagent.text.bytetable.Nested`): each enclosing table refers to it,
    and only the schema's whole table is written out flat (:func:`_table`), every leaf's rows
    copied once whatever their depth."""
    if isinstance(t, JsonString):
        return _string_table(t, limit)
    if isinstance(t, JsonObject) and DIRECT_OBJECTS:
        direct = _object_table(t, limit)
        if direct is not None:
            return direct
    if isinstance(t, JsonArray) and DIRECT_ARRAYS and t.max_items != 0 and not is_never(t.items):
        direct = array_table(_value_table(t.items, limit), t.min_items, t.max_items, "the JSON schema", limit)
        if direct is not None:
            return direct
    glue = Glue()
    start, final = glue.new(), glue.new()
    em = _Emitter(glue, limit)
    if isinstance(t, JsonArray):
        em.array(t, start, final)
    else:
        em.object(t, start, final)
    return glue.nested(start, final, limit, "the JSON schema", _HINT)


_HINT = "simplify the schema (fewer optional properties, shorter bounds)"


def _object_table(t: JsonObject, limit: int) -> Block | None:
    """An object's table written directly (:func:`~ltlagent.text.objecttable.object_table`) where
    its keys are each written one way, it writes no undeclared keys and it has members; None
    otherwise (and where a value's table cannot be joined directly): the glue is determinised."""
    written = [p for p in t.properties if not is_never(p.schema)]  # (never: a forbidden name)
    keys: list[bytes] = []
    for p in written:
        if _plain_ascii(p.name):  # each character its own byte, one spelling
            keys.append(b'"' + p.name.encode("ascii") + b'"')
            continue
        texts = _const_texts(p.name)  # the quotes and each character's spellings
        if any(len(alts) != 1 for alts in texts):
            return None
        keys.append(b"".join(alts[0] for alts in texts))
    if extra_keys(t):
        return None
    members = [Member(k, p.required, _value_table(p.schema, limit)) for k, p in zip(keys, written)]
    return object_table(members, t.min_properties == 0 and not any(m.required for m in members),
                        "the JSON schema", limit)


def _build_value_table(t: JsonType, limit: int) -> Block:
    """A value's table as an object's member: a string's, array's or object's (:data:`_minimal`),
    or the glue of any other value (a number, a constant, a union) determinised alone."""
    if isinstance(t, JsonString | JsonArray | JsonObject):
        return _minimal(t, limit)
    if isinstance(t, JsonConst) and DIRECT_CONSTS:
        texts = _spellings(t)
        if texts is not None:
            return literal_table(texts, "the JSON schema")
    if isinstance(t, JsonInteger) and DIRECT_INTEGERS:
        d = integer_dfa(t.lo, t.hi)  # minimal, every state reachable and live: the table as it is
        acc = np.zeros(d.num_states, dtype=bool)
        acc[list(d.accepting)] = True
        return ByteTable.build(d.live_table, acc, "the JSON schema", reachable=True, live=True)
    if isinstance(t, JsonUnion) and DIRECT_UNIONS and len(t.branches) > 1:
        direct = union_table(_branch_tables(t, limit), "the JSON schema", limit)
        if direct is not None:
            return direct
    glue = Glue()
    start, final = glue.new(), glue.new()
    _Emitter(glue, limit).value(t, start, final)
    return glue.nested(start, final, limit, "the JSON schema", _HINT)


def _branch_tables(t: JsonUnion, limit: int) -> list[Block]:
    """The tables of a union's branches for :func:`~ltlagent.text.uniontable.union_table`, nested
    unions flattened: the constants as one (the glue writes every constant of a union as literals
    that end in one state; a table per constant would have a final state each), then each other
    branch's."""
    flat: list[JsonType] = []
    todo = list(reversed(t.branches))
    while todo:
        b = todo.pop()
        if isinstance(b, JsonUnion):
            todo.extend(reversed(b.branches))
        else:
            flat.append(b)
    consts = [b for b in flat if isinstance(b, JsonConst)]
    others = [_value_table(b, limit) for b in flat if not isinstance(b, JsonConst)]
    if not consts:
        return others
    one = consts[0] if len(consts) == 1 else JsonConst(
        tuple(v for c in consts for v in c.values), tuple(x for c in consts for x in c.texts))
    return [_value_table(one, limit), *others]


def _spellings(t: JsonConst) -> list[bytes] | None:
    """Every text of the values of ``t`` where each is written in whole texts (a number, ``0`` as
    ``0`` or ``-0``; a string whose characters have one spelling each); None where a character of
    a string has several (``/``, a control character): the glue's NFA then shares what follows
    it, which a trie of every spelling would not."""
    out: list[bytes] = []
    for v in t.values:
        if isinstance(v, str) and _plain_ascii(v):
            out.append(b'"' + v.encode("ascii") + b'"')
            continue
        parts = _const_texts(v)
        if len(parts) == 1:
            out.extend(parts[0])
        elif all(len(alts) == 1 for alts in parts):
            out.append(b"".join(alts[0] for alts in parts))
        else:
            return None
    out.extend(text.encode("utf-8") for text in t.texts)
    return out or None


_NULL = JsonConst((None,))
_BOOLEAN = JsonConst((True, False))
#: Values that depend on no schema, whose member tables (:data:`_value_table`) are the library's
#: constants: the unconstrained number, integer, boolean and null, each alone or with null, the
#: unconstrained string with null, any value (as ``{}`` and ``true`` read, and at depth 0), and
#: the non-negative and positive integers and the non-negative numbers (``minimum: 0`` or ``1``
#: alone: the bounds of half the bounded numbers of JSONSchemaBench's sample, whose tables cost
#: 0.2 ms for an integer and 0.9 ms for a number through their regular expressions).
LIBRARY_VALUES: frozenset[JsonType] = frozenset(
    [JsonNumber(), JsonInteger(), _BOOLEAN, _NULL, JsonAny(0), JsonAny(1),
     *(JsonUnion((v, _NULL)) for v in (JsonString(), JsonNumber(), JsonInteger(), _BOOLEAN)),
     JsonInteger(0), JsonInteger(1), JsonNumber(Fraction(0))])

#: :func:`_build_value_table`, from the library's cache (:data:`LIBRARY_VALUES`) or the schemas'.
_value_table: _TwoCaches[JsonType, Block] = _TwoCaches(_build_value_table, LIBRARY_VALUES.__contains__, 256)


def _library_structures() -> frozenset[JsonArray | JsonObject]:
    """The arrays and objects of any values, as schemas read them (``{"type": "array"}``,
    ``{"type": "object"}``, ``additionalProperties: {}``) and as :func:`any_value` writes them
    inside any value, at every depth a reading gives them (0 to ``ANY_DEPTH``); and the arrays,
    of any length, of unconstrained strings, integers, numbers or booleans (``{"type": "array",
    "items": {"type": "string"}}``: a quarter of the sample's schemas have one)."""
    out: set[JsonArray | JsonObject] = {JsonArray(x, 0, None) for x in (
        JsonString(), JsonInteger(), JsonNumber(), JsonConst((True, False)))}
    for d in range(ANY_DEPTH + 1):
        out |= {JsonArray(JsonAny(d), 0, None), JsonObject((), (), JsonAny(d), True)}
        inner = any_value(d - 1) if d > 0 else NEVER  # any value's own array and object
        out |= {JsonArray(inner, 0, None if d > 0 else 0), JsonObject((), (), inner, d > 0)}
    return frozenset(out)


#: Structures that depend on no schema: their tables are the library's constants, built once per
#: process and kept by :func:`clear_caches` (about 7 ms for all of them; any array or object of
#: any values costs 2.1–2.2 ms to build, and three schemas in four of JSONSchemaBench's sample
#: have one; an array of strings 0.12 ms).
LIBRARY_STRUCTURES = _library_structures()


def _may_be_library(t: JsonString | JsonArray | JsonObject) -> bool:
    """Whether ``t`` can be one of :data:`LIBRARY_STRUCTURES` (arrays, and objects without declared
    properties): the others are not looked up there, which would hash the whole description once
    more (descriptions do not keep their hash; the schemas' cache hashes it again)."""
    return isinstance(t, JsonArray) or (isinstance(t, JsonObject) and not t.properties)


def _of_library(t: JsonString | JsonArray | JsonObject) -> bool:
    """Whether the table of ``t`` depends on no schema: one of :data:`LIBRARY_STRUCTURES`, or a
    string of any length, or of at least one character, in formats alone or free (``{"type":
    "string", "format": "email"}``, ``"minLength": 1``: its automata are the library's already,
    and writing its table count by count cost 0.1–0.5 ms per schema that has one; a non-empty
    string is in one schema of the sample in seventeen)."""
    if isinstance(t, JsonString):
        return t.min_length <= 1 and t.max_length is None and _library_only(_lang(t))
    return _may_be_library(t) and t in LIBRARY_STRUCTURES


#: The table of a string, array or object (:func:`_build_minimal`), from the library's cache
#: (:func:`_of_library`) or the schemas'.
_minimal: _TwoCaches[JsonString | JsonArray | JsonObject, Block] = _TwoCaches(
    _build_minimal, _of_library, 256)


def emit(nfa: ByteNFA | Glue, t: JsonType, start: int, end: int, limit: int = MAX_JSON_STATES) -> None:
    """Write the texts of ``t`` into ``nfa`` between ``start`` and ``end``: into a :class:`Glue`,
    strings, arrays and objects go in as blocks (built once, cached); into a plain NFA, arrays and
    objects are written inline and strings copied state by state (the reference construction)."""
    _Emitter(nfa, limit).value(t, start, end)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a schema compiles, as it was after: a compile
    allocates hundreds of thousands of short-lived tuples, sets and lists and frees them itself, and
    each collection they trigger would walk every object the process holds (12–15 % of the compile
    time of the JSONSchemaBench sample inside the benchmark's process)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def schema_block(schema: Mapping[str, object] | bool | JsonType, fields: Mapping[str, str] | None = None,
                 *, limit: int = MAX_JSON_STATES, unknown_formats: str = "refuse") -> Block:
    """The compile of ``schema`` (a dict or a parsed description, with ``fields`` narrowing
    top-level string properties, :func:`narrow`): its determinised table, trimmed (every state
    live), as a :data:`~ltlagent.text.glue.Block`: a :class:`~ltlagent.text.glue.Nested` table kept
    as its parts is not written out as one array here, but by its reader: the decoder writes it
    into its own array once (:meth:`~ltlagent.decode.turnlang.TurnLanguage.of_table`), a tool-call
    table embeds it as a part (docs/design.md §5.1). A schema given as a dict whose recursion,
    followed twice, needs more than ``limit`` states is read again with its recursion followed once
    (a smaller subset of its values). :class:`SchemaError` for a schema that allows no value, found
    here where the description did not show it."""
    with _gc_paused():
        block, t = _schema_block(schema, fields, limit, unknown_formats)
        if not block.empty:
            return block
        # contradictions the description did not show (an if/then/else whose sides exclude every
        # value, patterns that no string meets): a tool that could never be called
        where = _why_empty(t, limit)
    raise SchemaError(f"the schema allows no value that can be written (its keywords contradict "
                      f"each other{where})", "", hint="no JSON value satisfies it as docs/design.md "
                      "§5.1 reads it; check it with a validator, or loosen the keywords that "
                      "exclude one another")


def schema_table(schema: Mapping[str, object] | bool | JsonType, fields: Mapping[str, str] | None = None,
                 *, limit: int = MAX_JSON_STATES, unknown_formats: str = "refuse") -> ByteTable:
    """:func:`schema_block` written out as one numpy :class:`ByteTable`."""
    block = schema_block(schema, fields, limit=limit, unknown_formats=unknown_formats)
    with _gc_paused():
        return block.table()


def _why_empty(t: JsonType, limit: int) -> str:
    """Where an empty table's emptiness lies, in words: down the required properties and the
    items of non-empty arrays whose own tables are empty (``""`` at the top)."""
    path: list[str] = []
    while True:
        try:
            if isinstance(t, JsonObject):
                p = next((p for p in t.properties if p.required and _block(p.schema, limit).empty), None)
                if p is None:
                    break
                path.append(f"property {p.name!r}")
                t = p.schema
            elif isinstance(t, JsonArray) and t.min_items and _block(t.items, limit).empty:
                path.append("items")
                t = t.items
            else:
                break
        except UsageError:  # (a part over the limit: named as far as it went)
            break
    return f": in {' › '.join(path)}" if path else ""


def description_table(t: JsonType, limit: int = MAX_JSON_STATES) -> ByteTable:
    """The table of a description as it is: empty where it allows no value (a part of a schema,
    such as an optional member whose value cannot be written, which :func:`schema_table` would
    refuse)."""
    with _gc_paused():
        return _block(t, limit).table()


def _schema_block(schema: Mapping[str, object] | bool | JsonType, fields: Mapping[str, str] | None,
                  limit: int, unknown_formats: str) -> tuple[Block, JsonType]:
    """The table and the description it was built from (narrowed by ``fields``)."""

    def built(t: JsonType) -> tuple[Block, JsonType]:
        mine = narrow(t, fields) if fields else t
        return _block(mine, limit), mine

    if not isinstance(schema, Mapping | bool):
        return built(schema)
    t = parse_schema(schema, unknown_formats=unknown_formats)
    try:
        return built(t)
    except SchemaError:
        raise
    except UsageError:
        once = parse_schema(schema, unknown_formats=unknown_formats, max_recursion=1)
        if once == t:
            raise
        return built(once)


def _block(t: JsonType, limit: int) -> Block:
    """The table of a description, kept as its parts where it was built so."""
    if isinstance(t, JsonString | JsonArray | JsonObject):
        return _minimal(t, limit)
    glue = Glue()
    start, final = glue.new(), glue.new()
    _Emitter(glue, limit).value(t, start, final)
    return glue.nested(start, final, limit, "the JSON schema",
                       "simplify the schema (fewer optional properties, shorter bounds)")


def schema_dfa(schema: Mapping[str, object] | bool | JsonType, fields: Mapping[str, str] | None = None,
               *, limit: int = MAX_JSON_STATES) -> ContentDFA:
    """The DFA of the JSON texts of ``schema`` (a dict or a parsed description), with ``fields``
    narrowing top-level string properties (:func:`narrow`). Built from minimal parts (strings,
    scalars), not minimised as a whole (see :func:`_minimal`)."""
    return schema_table(schema, fields, limit=limit).content
