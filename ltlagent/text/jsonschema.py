"""JSON schemas as byte automata: the JSON texts a tool's arguments may be, for the decoding monitor.

:func:`parse_schema` reads a JSON-schema dict into a small frozen description (:data:`JsonType`),
refusing every keyword it cannot compile exactly with a :class:`~ltlagent.errors.SchemaError` that
names the keyword and its JSON pointer; :func:`emit` writes a description into a
:class:`~ltlagent.text.content.ByteNFA`; :func:`schema_dfa` makes the minimal
:class:`~ltlagent.text.content.ContentDFA` of it. :mod:`ltlagent.text.toolcall` composes the same
pieces into whole tool calls.

The language (docs/design.md §5.1) is a *generation* language: every text it accepts is JSON that
validates against the schema, and every value that validates has at least one text in it, written

- with no whitespace except at most one space after each ``:`` and ``,`` (none at the ends);
- with object properties in the schema's declared order, each at most once; optional ones may be
  left out; only declared properties are written, whatever ``additionalProperties`` says (``false``,
  ``true`` or absent; a schema there is refused; an object without ``properties`` is refused unless
  ``additionalProperties`` is ``false``, when it is ``{}``);
- strings as raw UTF-8 (any character but ``"``, ``\\`` and controls) or the escapes ``\\"``,
  ``\\\\``, ``\\/``, ``\\b``, ``\\f``, ``\\n``, ``\\r``, ``\\t`` and ``\\u00XX`` for the controls
  U+0000–U+001F only (hex digits in either case): no other ``\\u`` escape, no surrogates;
  ``minLength``/``maxLength`` count decoded characters, ``pattern`` is searched (``re.search``, as
  JSON Schema says) in the decoded string;
- integers without fraction or exponent (``-0`` allowed); numbers in the full JSON number syntax;
- ``enum``/``const`` values (strings, integers, booleans, null) in the same forms (0 also as ``-0``).

Refused: an empty or ``true`` schema (any value), ``allOf``, ``not``, ``if``, ``format``,
``multipleOf``, bounds on non-integer numbers, ``prefixItems``, ``uniqueItems: true``,
``patternProperties``, recursive ``$ref`` and refs outside the document's ``$defs``/``definitions``,
floats and compound values in ``enum``/``const``, lengths above :data:`MAX_STRING_LENGTH`, item
counts above :data:`MAX_ITEMS`, nesting deeper than :data:`MAX_DEPTH`.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ltlagent.errors import SchemaError, UsageError
from ltlagent.text.content import (
    DEAD,
    ByteNFA,
    ContentDFA,
    as_dfa,
    intersect,
    minimize,
    pattern_dfa,
)

__all__ = [
    "JsonConst", "JsonInteger", "JsonNumber", "JsonString", "JsonArray", "JsonProperty",
    "JsonObject", "JsonUnion", "JsonType", "parse_schema", "narrow", "emit", "schema_dfa",
    "string_texts", "integer_regex", "clear_caches", "MAX_DEPTH", "MAX_ITEMS", "MAX_STRING_LENGTH",
    "MAX_JSON_STATES",
]

#: Deepest nesting of arrays and objects compiled.
MAX_DEPTH = 10
#: Largest ``minItems``/``maxItems``: the items are written out one by one.
MAX_ITEMS = 64
#: Largest ``minLength``/``maxLength``: the automaton counts characters up to it.
MAX_STRING_LENGTH = 1000
#: Largest automaton built for one schema or tool-call format.
MAX_JSON_STATES = 50_000
#: Keywords that carry no constraint and are passed over.
ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated",
                         "readOnly", "writeOnly", "$schema", "$id", "$defs", "definitions"})
_TYPE_KEYWORDS = {
    "string": frozenset({"minLength", "maxLength", "pattern"}),
    "integer": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}),
    "number": frozenset(),
    "boolean": frozenset(),
    "null": frozenset(),
    "array": frozenset({"items", "minItems", "maxItems", "uniqueItems"}),
    "object": frozenset({"properties", "required", "additionalProperties"}),
}
_HINT = ("supported: type (object, string, integer, number, boolean, null, array or a list of these), "
         "properties, required, additionalProperties false/true, enum, const, anyOf, oneOf, items, "
         "minItems, maxItems, minLength, maxLength, pattern, integer minimum/maximum, local $ref")
_INTEGER_RE = r"-?(?:0|[1-9][0-9]*)"
_NUMBER_RE = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_SHORT_ESCAPES = {ord('"'): '"', ord("\\"): "\\", ord("/"): "/", 8: "b", 12: "f", 10: "n",
                  13: "r", 9: "t"}


# --- the description -------------------------------------------------------------------------

@dataclass(frozen=True)
class JsonConst:
    """One of a few scalar values (``null``, booleans, ``enum``, ``const``). ``kinds`` (filled in)
    keeps ``True``/``1`` and ``False``/``0``, equal in Python, apart in comparisons and hashes."""

    values: tuple[str | int | bool | None, ...]
    kinds: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "kinds", tuple(_type_of(v) for v in self.values))


@dataclass(frozen=True)
class JsonInteger:
    """An integer in [lo, hi] (None: unbounded on that side)."""

    lo: int | None = None
    hi: int | None = None


@dataclass(frozen=True)
class JsonNumber:
    """Any JSON number."""


@dataclass(frozen=True)
class JsonString:
    """A string of ``min_length``..``max_length`` characters in which ``pattern`` is found and
    which fullmatches each of ``fullmatch`` (the narrowing regexes of :func:`narrow`)."""

    min_length: int = 0
    max_length: int | None = None
    pattern: str | None = None
    fullmatch: tuple[str, ...] = ()


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
    """The declared properties, in the order they are written."""

    properties: tuple[JsonProperty, ...]


@dataclass(frozen=True)
class JsonUnion:
    """``anyOf`` (``exclusive=False``) or ``oneOf`` (exactly one branch matches)."""

    branches: tuple[JsonType, ...]
    exclusive: bool = False


JsonType = JsonConst | JsonInteger | JsonNumber | JsonString | JsonArray | JsonObject | JsonUnion


# --- reading a schema ------------------------------------------------------------------------

def _pointer(path: str, key: str | int) -> str:
    return f"{path}/{str(key).replace('~', '~0').replace('/', '~1')}"


class _Reader:
    def __init__(self, root: Mapping[str, object]) -> None:
        self.root = root

    def refuse(self, path: str, message: str) -> SchemaError:
        return SchemaError(message, path, hint=_HINT)

    def count(self, schema: Mapping[str, object], key: str, path: str, cap: int) -> int | None:
        v = schema.get(key)
        if v is None:
            return None
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise self.refuse(_pointer(path, key), f"{key} must be a non-negative integer, got {v!r}")
        if v > cap:
            raise self.refuse(_pointer(path, key), f"{key} {v} is above the supported {cap}")
        return v

    def resolve(self, ref: object, path: str) -> tuple[Mapping[str, object], str]:
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise self.refuse(_pointer(path, "$ref"), f"only local refs (#/$defs/…) are supported, "
                                                       f"got {ref!r}")
        node: object = self.root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                raise self.refuse(_pointer(path, "$ref"), f"the ref {ref!r} points at nothing")
            node = node[part]
        if not isinstance(node, Mapping):
            raise self.refuse(_pointer(path, "$ref"), f"the ref {ref!r} is not a schema")
        return node, ref[1:]

    def read(self, schema: object, path: str, depth: int, refs: tuple[str, ...]) -> JsonType:
        if schema is True or schema == {}:
            raise self.refuse(path, "a schema that allows any value cannot be compiled (give a type)")
        if schema is False:
            raise self.refuse(path, "the schema false allows nothing")
        if not isinstance(schema, Mapping):
            raise self.refuse(path, f"a schema must be an object, got {schema!r}")
        if depth > MAX_DEPTH:
            raise self.refuse(path, f"nesting deeper than {MAX_DEPTH} levels")
        keys = set(schema) - ANNOTATIONS
        for k in sorted(keys, key=str):
            if not isinstance(k, str):
                raise self.refuse(path, f"keys must be strings, got {k!r}")
        if "$ref" in schema:
            extra = keys - {"$ref"}
            if extra:
                raise self.refuse(_pointer(path, min(extra)), f"{min(extra)} beside $ref is not supported")
            target, where = self.resolve(schema["$ref"], path)
            if where in refs:
                raise self.refuse(_pointer(path, "$ref"), f"the ref {schema['$ref']!r} is recursive")
            return self.read(target, where, depth, (*refs, where))
        for comb in ("anyOf", "oneOf"):
            if comb in schema:
                extra = keys - {comb}
                if extra:
                    raise self.refuse(_pointer(path, min(extra)), f"{min(extra)} beside {comb} is not "
                                                                   "supported (move it into the branches)")
                branches = schema[comb]
                if not isinstance(branches, list) or not branches:
                    raise self.refuse(_pointer(path, comb), f"{comb} must be a non-empty list")
                return JsonUnion(tuple(self.read(b, _pointer(_pointer(path, comb), i), depth, refs)
                                       for i, b in enumerate(branches)), exclusive=comb == "oneOf")
        types_ = schema.get("type")
        names: list[str]
        if types_ is None:
            names = []
        elif isinstance(types_, str):
            names = [types_]
        elif isinstance(types_, list) and types_ and all(isinstance(t, str) for t in types_):
            names = list(dict.fromkeys(types_))
        else:
            raise self.refuse(_pointer(path, "type"), f"type must be a name or a list of names, "
                                                       f"got {types_!r}")
        for t in names:
            if t not in _TYPE_KEYWORDS:
                raise self.refuse(_pointer(path, "type"), f"unknown type {t!r}")
        if "enum" in schema or "const" in schema:
            return self.constants(schema, keys, names, path)
        if not names:
            raise self.refuse(path, "a schema without type, enum, const, anyOf, oneOf or $ref "
                                    "allows any value and cannot be compiled")
        allowed = set().union(*(_TYPE_KEYWORDS[t] for t in names))
        for k in sorted(keys - allowed - {"type"}):
            what = ("is not supported" if not any(k in kw for kw in _TYPE_KEYWORDS.values())
                    else f"does not apply to type {'/'.join(names)}")
            raise self.refuse(_pointer(path, k), f"the keyword {k!r} {what}")
        out = [self.typed(t, schema, path, depth, refs) for t in names]
        return out[0] if len(out) == 1 else JsonUnion(tuple(out))

    def constants(self, schema: Mapping[str, object], keys: set[str], names: list[str],
                  path: str) -> JsonType:
        extra = keys - {"enum", "const", "type"}
        if extra:
            k = min(extra)
            raise self.refuse(_pointer(path, k), f"{k} beside enum/const is not supported")
        if "enum" in schema and "const" in schema:
            raise self.refuse(_pointer(path, "const"), "enum and const together are not supported")
        key = "enum" if "enum" in schema else "const"
        raw = schema[key]
        if key == "enum":
            if not isinstance(raw, list) or not raw:
                raise self.refuse(_pointer(path, "enum"), "enum must be a non-empty list")
            values = list(raw)
        else:
            values = [raw]
        out: list[str | int | bool | None] = []
        for i, v in enumerate(values):
            where = _pointer(path, "enum") + (f"/{i}" if key == "enum" else "")
            if key == "const":
                where = _pointer(path, "const")
            if isinstance(v, float) and not isinstance(v, bool):
                raise self.refuse(where, f"the value {v!r} is a non-integer number (only strings, "
                                         "integers, booleans and null are supported)")
            if not (v is None or isinstance(v, str | int)):
                raise self.refuse(where, f"the value {v!r} is not a scalar (only strings, integers, "
                                         "booleans and null are supported)")
            if isinstance(v, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in v):
                raise self.refuse(where, "a string with a lone surrogate cannot be written")
            if not names or _type_of(v) in names or (_type_of(v) == "integer" and "number" in names):
                if not any(_same(v, w) for w in out):
                    out.append(v)
        if not out:
            raise self.refuse(path, "no value of enum/const has the declared type")
        return JsonConst(tuple(out))

    def typed(self, t: str, schema: Mapping[str, object], path: str, depth: int,
              refs: tuple[str, ...]) -> JsonType:
        if t == "null":
            return JsonConst((None,))
        if t == "boolean":
            return JsonConst((True, False))
        if t == "number":
            return JsonNumber()
        if t == "integer":
            return self.integer(schema, path)
        if t == "string":
            lo = self.count(schema, "minLength", path, MAX_STRING_LENGTH) or 0
            hi = self.count(schema, "maxLength", path, MAX_STRING_LENGTH)
            pattern = schema.get("pattern")
            if pattern is not None:
                if not isinstance(pattern, str):
                    raise self.refuse(_pointer(path, "pattern"), "pattern must be a string")
                try:
                    _pattern(pattern)
                except UsageError as e:
                    raise SchemaError(str(e), _pointer(path, "pattern"), hint=e.hint) from None
            return JsonString(lo, hi, pattern)
        if t == "array":
            if schema.get("uniqueItems", False) is not False:
                raise self.refuse(_pointer(path, "uniqueItems"), "uniqueItems true is not supported")
            if "items" not in schema:
                raise self.refuse(path, "an array needs items (a schema for every item)")
            items = self.read(schema["items"], _pointer(path, "items"), depth + 1, refs)
            lo = self.count(schema, "minItems", path, MAX_ITEMS) or 0
            hi = self.count(schema, "maxItems", path, MAX_ITEMS)
            if hi is None and lo == MAX_ITEMS:
                raise self.refuse(_pointer(path, "minItems"), f"minItems above {MAX_ITEMS - 1} "
                                                              "without maxItems is not supported")
            return JsonArray(items, lo, hi)
        return self.object(schema, path, depth, refs)

    def integer(self, schema: Mapping[str, object], path: str) -> JsonInteger:
        lo: int | None = None
        hi: int | None = None
        for key in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
            v = schema.get(key)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise self.refuse(_pointer(path, key), f"{key} must be a finite number, got {v!r}")
            if key == "minimum":
                b = math.ceil(v)
            elif key == "exclusiveMinimum":
                b = math.floor(v) + 1
            elif key == "maximum":
                b = math.floor(v)
            else:
                b = math.ceil(v) - 1
            if key in ("minimum", "exclusiveMinimum"):
                lo = b if lo is None else max(lo, b)
            else:
                hi = b if hi is None else min(hi, b)
        if lo is not None and hi is not None and lo > hi:
            raise self.refuse(path, f"no integer lies in [{lo}, {hi}]")
        return JsonInteger(lo, hi)

    def object(self, schema: Mapping[str, object], path: str, depth: int,
               refs: tuple[str, ...]) -> JsonObject:
        extra = schema.get("additionalProperties", False)
        if extra is not False and extra is not True:
            raise self.refuse(_pointer(path, "additionalProperties"),
                              "additionalProperties must be false or true (a schema is not supported)")
        if "properties" not in schema and schema.get("additionalProperties") is not False:
            raise self.refuse(path, "an object without properties allows any keys, which cannot be "
                                    "compiled (declare properties, or additionalProperties false for {})")
        props = schema.get("properties", {})
        if not isinstance(props, Mapping):
            raise self.refuse(_pointer(path, "properties"), "properties must be an object")
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise self.refuse(_pointer(path, "required"), "required must be a list of names")
        for r in required:
            if r not in props:
                raise self.refuse(_pointer(path, "required"), f"the required property {r!r} is not "
                                                              "declared in properties")
        ppath = _pointer(path, "properties")
        out = []
        for name, sub in props.items():
            if any(0xD800 <= ord(c) <= 0xDFFF for c in name):
                raise self.refuse(_pointer(ppath, name), "a name with a lone surrogate")
            out.append(JsonProperty(name, self.read(sub, _pointer(ppath, name), depth + 1, refs),
                                    name in required))
        return JsonObject(tuple(out))


def _type_of(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    return "string"


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


def clear_caches() -> None:
    """Forget the DFAs built for patterns and schema parts (kept across calls, by value)."""
    _pattern.cache_clear()
    _string_language.cache_clear()
    _minimal.cache_clear()


def parse_schema(schema: Mapping[str, object]) -> JsonType:
    """The description of ``schema``; :class:`SchemaError` (with the JSON pointer) for anything
    outside the supported subset (module docstring)."""
    return _Reader(schema).read(schema, "", 0, ())


def narrow(t: JsonType, fields: Mapping[str, str]) -> JsonType:
    """``t`` (an object) where each key of ``fields`` is required and its value is a string that
    fullmatches the regex given for it (issue 17's ``(:args (KEY (:regex "…")))``), intersected with
    what the schema allows there."""
    if not fields:
        return t
    if not isinstance(t, JsonObject):
        raise SchemaError("argument regexes need an object schema", "")
    props = list(t.properties)
    for key, rx in fields.items():
        where = _pointer("/properties", key)
        try:
            _pattern(rx, search=False)
        except UsageError as e:
            raise SchemaError(str(e), where, hint=e.hint) from None
        for i, p in enumerate(props):
            if p.name == key:
                sub = _narrow_value(p.schema, rx)
                if sub is None:
                    raise SchemaError(f"no string value of {key!r} allowed by the schema fullmatches "
                                      f"{rx!r}", where)
                props[i] = JsonProperty(key, sub, True)
                break
        else:
            raise SchemaError(f"the argument {key!r} is not a declared property", where)
    return JsonObject(tuple(props))


def _narrow_value(t: JsonType, rx: str) -> JsonType | None:
    if isinstance(t, JsonString):
        return replace(t, fullmatch=(*t.fullmatch, rx))
    if isinstance(t, JsonConst):
        d = _pattern(rx, search=False)
        kept = tuple(v for v in t.values if isinstance(v, str) and d.matches(v.encode()))
        return JsonConst(kept) if kept else None
    if isinstance(t, JsonUnion):
        bs = tuple(b for b in (_narrow_value(b, rx) for b in t.branches) if b is not None)
        return JsonUnion(bs, t.exclusive) if bs else None
    return None


# --- integers as regexes ---------------------------------------------------------------------

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
        return _INTEGER_RE
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


# --- writing the automaton -------------------------------------------------------------------

@functools.lru_cache(maxsize=256)
def _pattern(rx: str, search: bool = True) -> ContentDFA:
    return pattern_dfa(rx, search=search)


@functools.lru_cache(maxsize=64)
def _string_language(pattern: str | None, fullmatch: tuple[str, ...]) -> ContentDFA:
    """What the decoded string must be (as UTF-8 bytes)."""
    d = _pattern(pattern) if pattern is not None else _pattern("(?s:.*)", search=False)
    for rx in fullmatch:
        d = intersect(d, _pattern(rx, search=False))
    return as_dfa(*minimize([list(r) for r in d.trans], set(d.accepting)), d.source)


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
    def __init__(self, nfa: ByteNFA, limit: int) -> None:
        self.nfa = nfa
        self.limit = limit

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
        self.sequence(_const_texts(v), start, end)

    def value(self, t: JsonType, start: int, end: int) -> None:
        nfa = self.nfa
        if isinstance(t, JsonConst):
            for v in t.values:
                self.const(v, start, end)
        elif isinstance(t, JsonInteger):
            nfa.embed(_pattern(integer_regex(t.lo, t.hi), search=False), start, end)
        elif isinstance(t, JsonNumber):
            nfa.embed(_pattern(_NUMBER_RE, search=False), start, end)
        elif isinstance(t, JsonString | JsonArray | JsonObject):
            nfa.embed(_minimal(t, self.limit), start, end)
        elif t.exclusive:
            nfa.embed(_exactly_one([schema_dfa(b, limit=self.limit) for b in t.branches],
                                   self.limit), start, end)
        else:
            for b in t.branches:
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
        for s in (empty, some):
            if s is not None:
                nfa.literal(b"}", s, end)

    def member(self, p: JsonProperty, start: int, end: int) -> None:
        nfa = self.nfa
        k = nfa.new()
        self.const(p.name, start, k)
        c = nfa.new()
        nfa.literal(b":", k, c)
        self.value(p.schema, self.ws(c), end)

    def string(self, t: JsonString, start: int, end: int) -> None:
        """The JSON string whose decoded text has the length and is in the language of ``t``: a
        transducer stepping the decoded text's DFA on the bytes each escape stands for."""
        nfa = self.nfa
        pat = _string_language(t.pattern, t.fullmatch)
        lo, hi = t.min_length, t.max_length
        cap = hi if hi is not None else lo
        nodes: dict[tuple[int, int, int], int] = {}
        todo: list[tuple[int, int, int]] = []

        def node(key: tuple[int, int, int]) -> int:
            n = nodes.get(key)
            if n is None:
                n = nodes[key] = nfa.new()
                todo.append(key)
            return n

        def inc(c: int) -> int | None:
            if hi is None:
                return min(c + 1, cap)
            return c + 1 if c + 1 <= hi else None

        ranges = [_raw_ranges(pat, p) for p in range(pat.num_states)]
        escapes = [any(pat.step(p, d) >= 0 for d in (*_SHORT_ESCAPES, *range(0x20)))
                   for p in range(pat.num_states)]  # not inside a multi-byte character
        nfa.literal(b'"', start, node((0, 0, 0)))
        while todo:
            key = todo.pop()
            p, c, step = key
            u = nodes[key]
            edges = nfa.edges[u]
            if step == 0:
                if p in pat.accepting and c >= lo:
                    edges.append((0x22, 0x22, end))
                c1 = inc(c)
                for b0, b1, p2 in ranges[p]:
                    c2 = c if 0x80 <= b0 < 0xC0 else c1  # a continuation byte: no new character
                    if c2 is not None:
                        edges.append((b0, b1, node((p2, c2, 0))))
                if c1 is not None and escapes[p]:
                    edges.append((0x5C, 0x5C, node((p, c, _STEP_ESC))))
                continue
            c2 = inc(c)
            if c2 is None:  # not reached: an escape begins only where a character fits
                continue
            if step == _STEP_ESC:
                for dec, letter in _SHORT_ESCAPES.items():
                    p2 = pat.step(p, dec)
                    if p2 >= 0:
                        edges.append((ord(letter), ord(letter), node((p2, c2, 0))))
                edges.append((ord("u"), ord("u"), node((p, c, _STEP_U))))
            elif step in (_STEP_U, _STEP_U0):
                edges.append((0x30, 0x30, node((p, c, step + 1))))
            elif step == _STEP_U00:
                edges.append((0x30, 0x30, node((p, c, _STEP_U000))))
                edges.append((0x31, 0x31, node((p, c, _STEP_U001))))
            else:
                base = 0 if step == _STEP_U000 else 16
                for h in range(16):
                    p2 = pat.step(p, base + h)
                    if p2 < 0:
                        continue
                    for ch in dict.fromkeys(f"{h:x}{h:X}"):
                        edges.append((ord(ch), ord(ch), node((p2, c2, 0))))


_RAW_CUTS = (0x20, 0x22, 0x23, 0x5C, 0x5D, 0x80, 0xC0, 0x100)


def _raw_ranges(pat: ContentDFA, p: int) -> tuple[tuple[int, int, int], ...]:
    """The raw bytes a JSON string may hold at state ``p`` of ``pat`` (not ``"``, ``\\`` or a
    control), as (lo, hi, successor) ranges that do not straddle 0x80 or 0xC0."""
    out: list[tuple[int, int, int]] = []
    row = pat.trans[p]
    for lo0, hi0 in itertools.pairwise(_RAW_CUTS):
        if lo0 in (0x22, 0x5C):
            continue
        b = lo0
        while b < hi0:
            r = row[b]
            e = b
            while e + 1 < hi0 and row[e + 1] == r:
                e += 1
            if r >= 0 and r in pat.live:
                out.append((b, e, r))
            b = e + 1
    return tuple(out)


def _exactly_one(dfas: list[ContentDFA], limit: int) -> ContentDFA:
    """The product automaton accepting where exactly one of ``dfas`` accepts (``oneOf``)."""
    start = tuple(0 for _ in dfas)
    ids = {start: 0}
    order = [start]
    trans: list[list[int]] = []
    acc: set[int] = set()
    i = 0
    while i < len(order):
        cur = order[i]
        if sum(1 for d, q in zip(dfas, cur) if q in d.accepting) == 1:
            acc.add(i)
        row = [DEAD] * 256
        for b in range(256):
            nxt = tuple(d.step(q, b) for d, q in zip(dfas, cur))
            if all(q < 0 for q in nxt):
                continue
            j = ids.get(nxt)
            if j is None:
                j = ids[nxt] = len(order)
                order.append(nxt)
                if len(order) > limit:
                    raise UsageError(f"oneOf needs more than {limit} automaton states")
            row[b] = j
        trans.append(row)
        i += 1
    return as_dfa(*minimize(trans, acc), "oneOf")


@functools.lru_cache(maxsize=256)
def _minimal(t: JsonString | JsonArray | JsonObject, limit: int) -> ContentDFA:
    """The DFA of a string, array or object, its parts embedded as DFAs built the same way, so the
    NFA of a structure stays the size of its parts whatever their nesting. Strings are minimised
    (their escapes and multi-byte characters leave equivalent states); arrays and objects, whose
    parts are, only determinised: minimising them costs seconds (Hopcroft over a few hundred byte
    classes) for a few per cent of states."""
    nfa = ByteNFA()
    start, final = nfa.new(), nfa.new()
    em = _Emitter(nfa, limit)
    if isinstance(t, JsonString):
        em.string(t, start, final)
    elif isinstance(t, JsonArray):
        em.array(t, start, final)
    else:
        em.object(t, start, final)
    trans, acc = nfa.determinize(start, final, limit, "the JSON schema",
                                 "simplify the schema (fewer optional properties, shorter bounds)")
    if isinstance(t, JsonString):
        trans, acc = minimize(trans, acc)
    return as_dfa(trans, acc, "json schema")


def emit(nfa: ByteNFA, t: JsonType, start: int, end: int, limit: int = MAX_JSON_STATES) -> None:
    """Write the texts of ``t`` into ``nfa`` between ``start`` and ``end``."""
    _Emitter(nfa, limit).value(t, start, end)


def schema_dfa(schema: Mapping[str, object] | JsonType, fields: Mapping[str, str] | None = None,
               *, limit: int = MAX_JSON_STATES) -> ContentDFA:
    """The DFA of the JSON texts of ``schema`` (a dict or a parsed description), with ``fields``
    narrowing top-level string properties (:func:`narrow`). Built from minimal parts (strings,
    scalars), not minimised as a whole (see :func:`_minimal`)."""
    t = parse_schema(schema) if isinstance(schema, Mapping) else schema
    if fields:
        t = narrow(t, fields)
    if isinstance(t, JsonString | JsonArray | JsonObject):
        return _minimal(t, limit)
    nfa = ByteNFA()
    start, final = nfa.new(), nfa.new()
    emit(nfa, t, start, final, limit)
    trans, acc = nfa.determinize(start, final, limit, "the JSON schema",
                                 "simplify the schema (fewer optional properties, shorter bounds)")
    return as_dfa(trans, acc, "json schema")
