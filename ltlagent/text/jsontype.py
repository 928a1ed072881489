"""JSON schemas read into small frozen descriptions: what the byte-automaton compiler supports.

:func:`parse_schema` reads a JSON-schema dict into a :data:`JsonType` (``JsonConst``,
``JsonInteger``, ``JsonNumber``, ``JsonString``, ``JsonArray``, ``JsonObject``, ``JsonUnion``),
refusing every keyword it cannot compile exactly with a :class:`~ltlagent.errors.SchemaError` that
names the keyword and its JSON pointer; :func:`narrow` makes string arguments fullmatch regexes.
:mod:`ltlagent.text.jsonschema` turns descriptions into automata and says which language they
denote (docs/design.md §5.1).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from ltlagent.errors import SchemaError, UsageError
from ltlagent.text.content import ContentDFA, pattern_dfa

__all__ = [
    "JsonConst", "JsonInteger", "JsonNumber", "JsonString", "JsonArray", "JsonProperty",
    "JsonObject", "JsonUnion", "JsonType", "parse_schema", "narrow", "pattern_language",
    "ANNOTATIONS", "MAX_DEPTH", "MAX_ITEMS", "MAX_STRING_LENGTH",
]

#: Deepest nesting of arrays and objects compiled.
MAX_DEPTH = 10
#: Largest ``minItems``/``maxItems``: the items are written out one by one.
MAX_ITEMS = 64
#: Largest ``minLength``/``maxLength``: the automaton counts characters up to it.
MAX_STRING_LENGTH = 1000
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

@functools.lru_cache(maxsize=256)
def pattern_language(rx: str, search: bool = True) -> ContentDFA:
    """The DFA of a ``pattern`` (``search``) or narrowing regex (fullmatch), built once per regex."""
    return pattern_dfa(rx, search=search)


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
                    pattern_language(pattern)
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
            pattern_language(rx, search=False)
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
        d = pattern_language(rx, search=False)
        kept = tuple(v for v in t.values if isinstance(v, str) and d.matches(v.encode()))
        return JsonConst(kept) if kept else None
    if isinstance(t, JsonUnion):
        bs = tuple(b for b in (_narrow_value(b, rx) for b in t.branches) if b is not None)
        return JsonUnion(bs, t.exclusive) if bs else None
    return None
