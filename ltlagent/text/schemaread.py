"""JSON-schema dicts read into frozen descriptions (:mod:`ltlagent.text.jsontype`).

:func:`parse_schema` reads every draft from 04 to 2020-12 into a :data:`~ltlagent.text.jsontype.
JsonType` whose values all validate against the schema, refusing what it cannot describe with a
:class:`~ltlagent.errors.SchemaError` that names the keyword and its JSON pointer. Keywords that
are not in :data:`ASSERTIONS` are annotations and are ignored, as the specification says of unknown
keywords (draft-04's ``id``, ``title``, ``x-*``, ``readOnly``, ``links``, …). Where a reading
restricts the values (a missing ``type`` read from the keywords present, ``maxLength`` above
:data:`MAX_STRING_LENGTH` capped, recursion cut at :data:`MAX_RECURSION`, ``multipleOf`` as
integers, ``not``/``if``/overlapping ``oneOf`` through complements of supersets) it restricts to
a subset, never widens (docs/design.md §5.1). :func:`narrow` makes string arguments fullmatch
regexes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from fractions import Fraction

from ltlagent.errors import SchemaError, UsageError
from ltlagent.text.formats import FORMATS
from ltlagent.text.jsontype import (
    MAX_PIECES,
    NEVER,
    JsonAny,
    JsonConst,
    JsonInteger,
    JsonNumber,
    JsonObject,
    JsonProperty,
    JsonString,
    JsonType,
    JsonUnion,
    Scalar,
    Unsupported,
    array_of,
    complement,
    disjoint,
    integer_in,
    is_never,
    make_object,
    meet,
    multiples_in,
    number_in,
    pattern_language,
    undeclared_schema,
)
from ltlagent.text.numbertext import MAX_STEP

__all__ = ["parse_schema", "narrow", "ASSERTIONS", "ANY_DEPTH", "MAX_DEPTH", "MAX_ITEMS",
           "MAX_STRING_LENGTH", "MAX_RECURSION", "MAX_PATTERN_PROPERTIES"]

#: Deepest nesting of arrays and objects compiled.
MAX_DEPTH = 10
#: Largest ``minItems``; a larger ``maxItems`` is capped here (the items are written out one by one).
MAX_ITEMS = 64
#: Largest ``minLength``; a larger ``maxLength`` is capped here (the automaton counts characters).
MAX_STRING_LENGTH = 1000
#: Nesting of the values written for ``{}``/``true`` (and objects without properties).
ANY_DEPTH = 1
#: How often one ``$ref`` may recur inside itself before the innermost is read as ``false``.
MAX_RECURSION = 2
#: Most ``patternProperties`` of one object (a key class per subset of them).
MAX_PATTERN_PROPERTIES = 3
#: Most ``oneOf`` branches made disjoint by complements (each is met with every other's).
MAX_APART = 6
#: The keywords that constrain values (every draft, 04 to 2020-12); all others are annotations.
ASSERTIONS = frozenset({
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "format", "items", "additionalItems",
    "prefixItems", "maxItems", "minItems", "uniqueItems", "contains", "maxProperties",
    "minProperties", "required", "properties", "patternProperties", "additionalProperties",
    "propertyNames", "dependencies", "dependentRequired", "dependentSchemas", "allOf", "anyOf",
    "oneOf", "not", "if", "$ref", "$dynamicRef", "$recursiveRef", "unevaluatedItems",
    "unevaluatedProperties"})
#: Assertions refused wherever they appear (``then``/``else`` without ``if``, ``minContains``
#: without ``contains`` and ``additionalItems`` beside a schema ``items`` constrain nothing).
_REFUSED = frozenset({"contains", "propertyNames", "$dynamicRef", "$recursiveRef",
                      "unevaluatedItems", "unevaluatedProperties", "prefixItems"})
_TYPE_KEYWORDS = {
    "string": frozenset({"minLength", "maxLength", "pattern", "format"}),
    "number": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}),
    "array": frozenset({"items", "minItems", "maxItems", "uniqueItems", "additionalItems"}),
    "object": frozenset({"properties", "required", "additionalProperties", "patternProperties",
                         "minProperties", "maxProperties", "dependencies", "dependentRequired",
                         "dependentSchemas"}),
}
_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
#: Every type but integer (which number includes), and every keyword that restricts some type:
#: a schema with all those types and none of those keywords is any value.
_ANY_TYPES = frozenset(_TYPES) - {"integer"}
_ANY_KEYWORDS = frozenset().union(*_TYPE_KEYWORDS.values())
_TYPE_ONLY = frozenset({"type"})
#: What ``{"type": T}`` with no other assertion reads as, for the scalar types T (in either mode:
#: the same descriptions :meth:`_Reader.typed` builds; ``test_scalar_leaves_read_as_the_general_reading``)
_SCALARS: dict[str, JsonType] = {
    "string": JsonString(), "integer": JsonInteger(), "number": JsonNumber(),
    "boolean": JsonConst((True, False)), "null": JsonConst((None,))}
_HINT = ("the compiler writes every value the schema allows except where docs/design.md §5.1 says "
         "otherwise; refused: contains, propertyNames, prefixItems, multipleOf above 1000, "
         "non-local $ref, oneOf of more than 6 branches that may overlap")


def _pointer(path: str, key: str | int) -> str:
    return f"{path}/{str(key).replace('~', '~0').replace('/', '~1')}"


def _number(v: object) -> Fraction | None:
    """A bound as the decimal it is written as (``0.1`` is 1/10, not the nearest double: a text
    above the decimal reads as a double at or above the bound's double, so either reading holds)."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return Fraction(repr(v)) if isinstance(v, float) else Fraction(v)


#: A parse's readings: (schema id, depth, refs, superset mode, recursion bound) -> (the schema
#: object, kept alive so its id is not reused, its reading).
_Memo = dict[tuple[int, int, tuple[str, ...], bool, int], tuple[object, JsonType]]


class _Reader:
    def __init__(self, root: object, unknown_formats: str, over: bool = False,
                 max_recursion: int = MAX_RECURSION, memo: _Memo | None = None) -> None:
        self.root = root
        self.max_recursion = max_recursion
        self.unknown_formats = unknown_formats
        #: read a superset of the valid values instead of a subset (for oneOf's other branches):
        #: what the subset reading refuses or restricts is read as any value or left unrestricted
        self.over = over
        #: the schema objects read so far in this parse (shared by the readers one parse makes)
        self.memo: _Memo = {} if memo is None else memo

    def sub_reader(self, max_recursion: int) -> _Reader:
        """A reader of supersets for the same parse (its memo shared: keys tell the modes apart)."""
        return _Reader(self.root, self.unknown_formats, over=True, max_recursion=max_recursion,
                       memo=self.memo)

    def refuse(self, path: str, message: str) -> SchemaError:
        return SchemaError(message, path, hint=_HINT)

    def count(self, schema: Mapping[str, object], key: str, path: str) -> int | None:
        v = schema.get(key)
        if v is None:
            return None
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise self.refuse(_pointer(path, key), f"{key} must be a non-negative integer, got {v!r}")
        return v

    def resolve(self, ref: object, path: str) -> tuple[object, str]:
        if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
            raise self.refuse(_pointer(path, "$ref"), f"only local refs (#/$defs/…) are supported, "
                                                       f"got {ref!r}")
        node: object = self.root
        for part in ref[2:].split("/") if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
                continue
            if not isinstance(node, Mapping) or part not in node:
                raise self.refuse(_pointer(path, "$ref"), f"the ref {ref!r} points at nothing")
            node = node[part]
        return node, ref[1:]

    def any_value(self, depth: int) -> JsonAny:
        return JsonAny(max(0, min(ANY_DEPTH, MAX_DEPTH - depth)))

    def meet(self, a: JsonType, b: JsonType, path: str) -> JsonType:
        try:
            return meet(a, b)
        except Unsupported as e:
            raise self.refuse(path, str(e)) from None

    def read(self, schema: object, path: str, depth: int, refs: tuple[str, ...]) -> JsonType:
        """A subset of the values valid for ``schema`` (``over``: a superset)."""
        if not self.over:
            return self.read_exactly(schema, path, depth, refs)
        try:
            return self.read_exactly(schema, path, depth, refs)
        except SchemaError:  # what cannot be described: any value is a superset
            return JsonAny(0)

    def cut(self) -> JsonType:
        """What a cut (recursion, depth) reads as: nothing (subset) or anything (superset)."""
        return JsonAny(0) if self.over else NEVER

    def read_exactly(self, schema: object, path: str, depth: int, refs: tuple[str, ...]) -> JsonType:
        """:meth:`read` without the superset fallback. A schema object read again at the same
        depth, under the same refs (kept sorted: a multiset) and in the same mode (a ``$ref``
        target met twice, oneOf's branches read for the disjointness checks) gives its first
        reading: the result depends on nothing else (``path`` only names the place in errors, and
        failures are not kept, so each is raised again with its own path). The memo holds the
        schema object too, so its ``id`` stays its own while the parse lasts."""
        if not (isinstance(schema, dict) or isinstance(schema, Mapping)):  # (a dict: no ABC check)
            return self.read_fresh(schema, path, depth, refs)
        key = (id(schema), depth, refs, self.over, self.max_recursion)
        got = self.memo.get(key)
        if got is not None:
            return got[1]
        out = self.read_fresh(schema, path, depth, refs)
        self.memo[key] = (schema, out)
        return out

    def read_fresh(self, schema: object, path: str, depth: int, refs: tuple[str, ...]) -> JsonType:
        """:meth:`read_exactly`, computed (not looked up)."""
        if schema is True:
            return self.any_value(depth)
        if schema is False:
            return NEVER
        if not (isinstance(schema, dict) or isinstance(schema, Mapping)):
            raise self.refuse(path, f"a schema must be an object or a boolean, got {schema!r}")
        if depth > MAX_DEPTH:  # values nested deeper are not written (a subset)
            return self.cut()
        keys = {k for k in schema if k in ASSERTIONS}
        if keys == _TYPE_ONLY:  # ``{"type": "string"}`` and its annotations: most leaves of a schema
            name = schema["type"]
            got = _SCALARS.get(name) if isinstance(name, str) else None
            if got is not None:
                return got
        for k in sorted(keys & _REFUSED):
            raise self.refuse(_pointer(path, k), f"the keyword {k!r} is not supported")
        parts: list[tuple[JsonType, str]] = []
        if "$ref" in keys:
            target, where = self.resolve(schema["$ref"], path)
            if refs.count(where) >= self.max_recursion:  # recursion cut: a subset of the values
                return self.cut()
            # the refs followed, sorted: a reading depends on how often each was followed, not in
            # which order, so the memo's key is the same for every order (a recursive schema's
            # definitions reached along many paths are read once per multiset, not per path)
            parts.append((self.read(target, where, depth, tuple(sorted((*refs, where)))),
                          _pointer(path, "$ref")))
        for comb in ("allOf", "anyOf", "oneOf"):
            if comb in keys:
                branches = schema[comb]
                if not isinstance(branches, list) or not branches:
                    raise self.refuse(_pointer(path, comb), f"{comb} must be a non-empty list")
        if "allOf" in keys:
            for i, b in enumerate(schema["allOf"]):
                where = _pointer(_pointer(path, "allOf"), i)
                parts.append((self.read(b, where, depth, refs), where))
        if "anyOf" in keys:
            where = _pointer(path, "anyOf")
            parts.append((JsonUnion(tuple(self.read(b, _pointer(where, i), depth, refs)
                                          for i, b in enumerate(schema["anyOf"]))),
                          where))
        if not self.over:  # a superset leaves both out
            if "not" in keys:
                where = _pointer(path, "not")
                parts.append((self.outside(schema["not"], where, depth, refs), where))
            if "if" in keys:
                parts.append((self.conditional(schema, path, depth, refs), _pointer(path, "if")))
        out = self.base(schema, keys, path, depth, refs)
        for p, where in parts:
            out = self.meet(out, p, where)
        if "oneOf" in keys:
            out = self.one_of(schema, out, path, depth, refs)
        return out

    def outside(self, schema: object, path: str, depth: int, refs: tuple[str, ...]) -> JsonType:
        """A subset of the values ``schema`` rejects: the complement of a superset of its values
        (:func:`~ltlagent.text.jsontype.complement`)."""
        over = self.sub_reader(self.max_recursion)
        return complement(over.read(schema, path, depth, refs), self.any_value(depth).depth)

    def conditional(self, schema: Mapping[str, object], path: str, depth: int,
                    refs: tuple[str, ...]) -> JsonType:
        """``if``/``then``/``else`` as the union of (a subset of ``if``) ∧ ``then`` and (a subset of
        the values ``if`` rejects) ∧ ``else``; where ``if`` cannot be read, its side is not written."""
        where = _pointer(path, "if")
        try:
            yes = self.read(schema["if"], where, depth, refs)
        except SchemaError:
            yes = NEVER
        sides = []
        for side, cond in (("then", yes), ("else", self.outside(schema["if"], where, depth, refs))):
            at = _pointer(path, side)
            body = self.read(schema[side], at, depth, refs) if side in schema else JsonAny(0)
            sides.append(self.meet(cond, body, at))
        return JsonUnion(tuple(b for b in sides if not is_never(b)))

    def apart(self, a: JsonType, other: JsonType, depth: int) -> JsonType | None:
        """A subset of ``a`` outside ``other``: ``a`` met with each piece of ``other``'s complement
        that it can be met with (None: none can)."""
        c = complement(other, self.any_value(depth).depth)
        kept: list[JsonType] = []
        for piece in c.branches if isinstance(c, JsonUnion) else (c,):
            try:
                kept.append(meet(a, piece))
            except Unsupported:
                continue
        if not kept and not is_never(c):
            return None
        flat = [x for k in kept for x in (k.branches if isinstance(k, JsonUnion) else (k,))]
        return JsonUnion(tuple(flat[:MAX_PIECES]))  # fewer: a subset still

    def one_of(self, schema: Mapping[str, object], out: JsonType, path: str, depth: int,
               refs: tuple[str, ...]) -> JsonType:
        """``oneOf`` as a union of branches each disjoint from a superset of every other branch
        (read by an ``over`` reader, met with a superset of the keywords beside it), where needed
        made so by forbidding a name the other requires (a subset); refused otherwise."""
        where = _pointer(path, "oneOf")
        raw = schema["oneOf"]
        if not isinstance(raw, list):  # checked by read_exactly already
            raise self.refuse(where, "oneOf must be a non-empty list")
        branches = [self.meet(out, self.read(b, _pointer(where, i), depth, refs), _pointer(where, i))
                    for i, b in enumerate(raw)]
        if self.over:
            return JsonUnion(tuple(branches))
        over = self.sub_reader(MAX_RECURSION)
        ctx = over.read({k: v for k, v in schema.items() if k != "oneOf"}, path, depth, refs)
        supersets: list[JsonType] = []
        for i, b in enumerate(raw):
            sup = over.read(b, _pointer(where, i), depth, refs)
            try:
                sup = meet(ctx, sup)
            except Unsupported:
                pass
            supersets.append(sup)
        for i in range(len(branches)):
            for j in range(len(branches)):
                if i == j or disjoint(branches[i], supersets[j]):
                    continue
                apart = _forbid_required(branches[i], supersets[j])
                if (apart is None or not disjoint(apart, supersets[j])) and len(raw) <= MAX_APART:
                    apart = self.apart(branches[i], supersets[j], depth)
                if apart is None:
                    raise self.refuse(where, f"branches {i} and {j} may both match a value (oneOf "
                                             "would reject it): only oneOf with provably disjoint "
                                             "branches is supported (different types, consts, or a "
                                             "required property whose values differ); use anyOf if "
                                             "overlaps are meant")
                branches[i] = apart
        return JsonUnion(tuple(b for b in branches if not is_never(b)), exclusive=True)

    def base(self, schema: Mapping[str, object], keys: set[str], path: str, depth: int,
             refs: tuple[str, ...]) -> JsonType:
        """The schema's own keywords, without ``$ref`` and the combinators."""
        types_ = schema.get("type")
        names: list[str]
        if types_ is None:
            names = [t for t in ("string", "number", "array", "object") if _TYPE_KEYWORDS[t] & keys]
            if not names or self.over:
                names = list(_TYPES)
        elif isinstance(types_, str):
            names = [types_]
        elif isinstance(types_, list) and types_ and all(isinstance(t, str) for t in types_):
            names = list(dict.fromkeys(types_))
        else:
            raise self.refuse(_pointer(path, "type"), f"type must be a name or a list of names, "
                                                       f"got {types_!r}")
        for t in names:
            if t not in _TYPES:
                raise self.refuse(_pointer(path, "type"), f"unknown type {t!r}")
        if "integer" in names and "number" in names:
            names.remove("integer")
        if len(names) == len(_ANY_TYPES) and set(names) == _ANY_TYPES and not keys & _ANY_KEYWORDS:
            typed: JsonType = self.any_value(depth)
        else:
            out = [self.typed(t, schema, path, depth, refs) for t in names]
            typed = out[0] if len(out) == 1 else JsonUnion(tuple(b for b in out if not is_never(b)))
        if "enum" in keys or "const" in keys:
            return self.meet(self.constants(schema, path), typed, path)
        return typed

    def constants(self, schema: Mapping[str, object], path: str) -> JsonType:
        out: JsonType = JsonAny(0)
        for key in ("enum", "const"):
            if key not in schema:
                continue
            raw = schema[key]
            if key == "enum" and (not isinstance(raw, list) or not raw):
                raise self.refuse(_pointer(path, "enum"), "enum must be a non-empty list")
            values = raw if isinstance(raw, list) else [raw]
            scalars: list[Scalar] = []
            texts: list[str] = []
            seen: set[tuple[type, object]] = set()  # (type, value): True and 1 kept apart
            seen_texts: set[str] = set()
            for i, v in enumerate(values):
                try:
                    text = json_text(v)
                except ValueError as e:
                    where = _pointer(path, "enum") + f"/{i}" if key == "enum" else _pointer(path, "const")
                    raise self.refuse(where, str(e)) from None
                if isinstance(v, float) and v.is_integer():
                    v = int(v)
                if v is None or isinstance(v, str | int):
                    if (type(v), v) not in seen:
                        seen.add((type(v), v))
                        scalars.append(v)
                elif text not in seen_texts:
                    seen_texts.add(text)
                    texts.append(text)
            out = self.meet(out, JsonConst(tuple(scalars), tuple(texts)), _pointer(path, key))
        return out

    def typed(self, t: str, schema: Mapping[str, object], path: str, depth: int,
              refs: tuple[str, ...]) -> JsonType:
        if t == "null":
            return JsonConst((None,))
        if t == "boolean":
            return JsonConst((True, False))
        if t in ("integer", "number"):
            return self.numeric(t, schema, path)
        if t == "string":
            return self.string(schema, path)
        if t == "array":
            return self.array(schema, path, depth, refs)
        return self.read_object(schema, path, depth, refs)

    def numeric(self, t: str, schema: Mapping[str, object], path: str) -> JsonType:
        lo: Fraction | None = None
        hi: Fraction | None = None
        lo_open = hi_open = False
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            v = schema.get(key)
            if v is None or isinstance(v, bool):  # draft-04's booleans are read with their bound
                continue
            b = _number(v)
            if b is None:
                raise self.refuse(_pointer(path, key), f"{key} must be a finite number, got {v!r}")
            is_lo = key in ("minimum", "exclusiveMinimum")
            is_open = key.startswith("exclusive") or schema.get(
                "exclusiveMinimum" if is_lo else "exclusiveMaximum") is True
            if is_lo and (lo is None or b > lo or (b == lo and is_open)):
                lo, lo_open = b, is_open
            elif not is_lo and (hi is None or b < hi or (b == hi and is_open)):
                hi, hi_open = b, is_open
        step = schema.get("multipleOf")
        if step is not None and not self.over:  # a superset leaves it out
            p, cap = self.step(step, _pointer(path, "multipleOf"))
            if cap is not None:
                lo, lo_open = (lo, lo_open) if lo is not None and lo > -cap else (Fraction(-cap), False)
                hi, hi_open = (hi, hi_open) if hi is not None and hi < cap else (Fraction(cap), False)
            if p != 1:
                return multiples_in(lo, hi, lo_open, hi_open, p)
            t = "integer"
        if t == "integer":
            return integer_in(lo, hi, lo_open, hi_open)
        return number_in(lo, hi, lo_open, hi_open)

    def step(self, step: object, where: str) -> tuple[int, int | None]:
        """``multipleOf`` as the integer whose multiples are written (an integer is a multiple of
        p/q, in lowest terms, exactly when p divides it) and the largest magnitude written (None:
        any). The ``jsonschema`` package divides by a float step in floating point: an integer x
        below 2**53 with x/step = M below 2**53 then reads as exactly M only where the step's
        double is within 2**-54 of it (relative), else the step is refused."""
        k = _number(step)
        if k is None or k <= 0:
            raise self.refuse(where, f"multipleOf must be a positive number, got {step!r}")
        if k.numerator > MAX_STEP:
            raise self.refuse(where, f"the keyword 'multipleOf' is supported up to {MAX_STEP} "
                                     f"(integers it divides are written), got {step!r}")
        if not isinstance(step, float):
            return k.numerator, None
        if abs(k / Fraction(step) - 1) >= Fraction(1, 2 ** 54):
            raise self.refuse(where, f"the keyword 'multipleOf' {step!r}: its double is too far "
                                     "from the decimal for a floating-point division to be exact")
        top = 2 ** 53 - 1
        return k.numerator, min(top, math.floor(top * k))

    def string(self, schema: Mapping[str, object], path: str) -> JsonType:
        lo = self.count(schema, "minLength", path) or 0
        if lo > MAX_STRING_LENGTH:
            raise self.refuse(_pointer(path, "minLength"), f"minLength {lo} is above the supported "
                                                           f"{MAX_STRING_LENGTH}")
        hi = self.count(schema, "maxLength", path)
        if hi is not None and hi > MAX_STRING_LENGTH:
            hi = hi if self.over else MAX_STRING_LENGTH  # longer strings are not written (a subset)
        if hi is not None and lo > hi:
            return NEVER
        patterns: tuple[str, ...] = ()
        pattern = schema.get("pattern")
        if pattern is not None:
            if not isinstance(pattern, str):
                raise self.refuse(_pointer(path, "pattern"), "pattern must be a string")
            try:
                pattern_language(pattern)
            except UsageError as e:
                raise SchemaError(str(e), _pointer(path, "pattern"), hint=e.hint) from None
            patterns = (pattern,)
        fullmatch: tuple[str, ...] = ()
        fmt = schema.get("format")
        if fmt is not None:
            if self.over:  # the format regexes are subsets
                pass
            elif isinstance(fmt, str) and fmt in FORMATS:
                fullmatch = FORMATS[fmt]
            elif self.unknown_formats != "ignore":
                raise self.refuse(_pointer(path, "format"), f"the format {fmt!r} is not supported "
                                                            f"(supported: {', '.join(FORMATS)})")
        return JsonString(lo, hi, patterns, fullmatch)

    def array(self, schema: Mapping[str, object], path: str, depth: int, refs: tuple[str, ...]) -> JsonType:
        raw = schema.get("items", True)
        if isinstance(raw, list):
            raise self.refuse(_pointer(path, "items"), "items as a list (a tuple) is not supported")
        items = self.read(raw, _pointer(path, "items"), depth + 1, refs)
        lo = self.count(schema, "minItems", path) or 0
        hi = self.count(schema, "maxItems", path)
        if lo > MAX_ITEMS:
            raise self.refuse(_pointer(path, "minItems"), f"minItems {lo} is above the supported "
                                                          f"{MAX_ITEMS}")
        if hi is not None and hi > MAX_ITEMS:
            hi = hi if self.over else MAX_ITEMS  # longer arrays are not written (a subset)
        if schema.get("uniqueItems", False) is True and (hi is None or hi > 1) and not self.over:
            hi = 1  # at most one item is always unique (a subset)
        return array_of(items, lo, hi)

    def read_object(self, schema: Mapping[str, object], path: str, depth: int,
               refs: tuple[str, ...]) -> JsonType:
        props = schema.get("properties", {})
        if not (isinstance(props, dict) or isinstance(props, Mapping)):
            raise self.refuse(_pointer(path, "properties"), "properties must be an object")
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise self.refuse(_pointer(path, "required"), "required must be a list of names")
        raw_patterns = schema.get("patternProperties", {})
        if not (isinstance(raw_patterns, dict) or isinstance(raw_patterns, Mapping)):
            raise self.refuse(_pointer(path, "patternProperties"), "patternProperties must be an object")
        ppath = _pointer(path, "patternProperties")
        patterns: list[tuple[str, JsonType]] = []
        for rx, sub in raw_patterns.items():
            try:
                pattern_language(rx)
            except UsageError as e:
                raise SchemaError(str(e), _pointer(ppath, rx), hint=e.hint) from None
            patterns.append((rx, self.read(sub, _pointer(ppath, rx), depth + 1, refs)))
        if len(patterns) > MAX_PATTERN_PROPERTIES:
            raise self.refuse(ppath, f"more than {MAX_PATTERN_PROPERTIES} patternProperties")
        if "additionalProperties" in schema:
            additional = self.read(schema["additionalProperties"], _pointer(path, "additionalProperties"),
                                   depth + 1, refs)
        else:
            additional = self.any_value(depth + 1)
        shell = JsonObject((), tuple(patterns), additional)
        ppath = _pointer(path, "properties")
        out: list[JsonProperty] = []
        for name, sub in props.items():
            if not name.isascii() and any(0xD800 <= ord(c) <= 0xDFFF for c in name):
                raise self.refuse(_pointer(ppath, name), "a name with a lone surrogate")
            s = self.read(sub, _pointer(ppath, name), depth + 1, refs)
            for rx, ps in patterns:
                if pattern_language(rx).matches(name.encode("utf-8")):
                    s = self.meet(s, ps, _pointer(ppath, name))
            out.append(JsonProperty(name, s, name in required))
        for r in dict.fromkeys(required):
            if r not in props:
                out.append(JsonProperty(r, self.meet(JsonAny(0), undeclared_schema(shell, r),
                                                     _pointer(path, "required")), True))
        kept = out if self.over else self.dependencies(schema, out, shell, path, depth, refs)
        if kept is None:
            return NEVER
        write = (not isinstance(additional, JsonAny)) or (not props and not patterns)
        lo = self.count(schema, "minProperties", path) or 0
        hi = self.count(schema, "maxProperties", path)
        if self.over:
            lo, hi = 0, None
        try:
            return make_object(kept, tuple(patterns), additional, write, lo, hi)
        except Unsupported as e:
            raise self.refuse(path, str(e)) from None


    def dependencies(self, schema: Mapping[str, object], props: list[JsonProperty], shell: JsonObject,
                     path: str, depth: int, refs: tuple[str, ...]) -> list[JsonProperty] | None:
        """``dependencies``/``dependentRequired``/``dependentSchemas`` on the declared properties
        (None: no object possible). A required trigger brings its dependencies (names made
        required, schemas met); an optional one is forbidden (a subset: it is never written)."""
        deps: dict[str, tuple[object, str]] = {}
        for key in ("dependencies", "dependentRequired", "dependentSchemas"):
            entries: object = schema.get(key, {})
            if not isinstance(entries, Mapping):
                raise self.refuse(_pointer(path, key), f"{key} must be an object")
            for name, dep in entries.items():
                where = _pointer(_pointer(path, key), name)
                if name in deps:
                    raise self.refuse(where, f"{name!r} has two dependency entries")
                if isinstance(dep, list) and not all(isinstance(d, str) for d in dep):
                    raise self.refuse(where, "a dependency must be a list of names or a schema")
                deps[name] = (dep, where)
        if not deps:
            return props
        required = {p.name for p in props if p.required}
        done: set[str] = set()
        extra: list[tuple[JsonType, str]] = []
        while True:  # required names bring theirs, transitively
            todo = [n for n in deps if n in required and n not in done]
            if not todo:
                break
            for name in todo:
                done.add(name)
                dep, where = deps[name]
                if isinstance(dep, list):
                    required |= set(dep)
                else:
                    extra.append((self.read(dep, where, depth, refs), where))
        declared = {p.name for p in props}
        out = [JsonProperty(p.name, NEVER if p.name in deps and p.name not in required else p.schema,
                            p.name in required) for p in props]
        out += [JsonProperty(n, NEVER, False) for n in deps if n not in declared and n not in required]
        out += [JsonProperty(n, undeclared_schema(shell, n), True)
                for n in sorted(required - declared)]
        if any(p.required and is_never(p.schema) for p in out):
            return None
        obj: JsonType = make_object(out, (), JsonAny(0), False)
        for sub, where in extra:
            obj = self.meet(obj, sub, where)
        if is_never(obj):
            return None
        if not isinstance(obj, JsonObject):
            raise self.refuse(path, "a dependent schema that is not only about objects")
        return list(obj.properties)


def _forbid_required(a: JsonType, other: JsonType) -> JsonType | None:
    """``a`` (an object) without a name every object of ``other`` requires and ``a`` does not
    (a subset of ``a`` outside ``other``'s objects); None when there is none."""
    if not isinstance(a, JsonObject):
        return None
    objects = [b for b in (other.branches if isinstance(other, JsonUnion) else (other,))
               if isinstance(b, JsonObject)]
    if not objects:
        return None
    needed = set.intersection(*({p.name for p in o.properties if p.required} for o in objects))
    needed -= {p.name for p in a.properties if p.required}
    if not needed:
        return None
    return meet(a, JsonObject((JsonProperty(min(needed), NEVER, False),)))


def _check_json(x: object) -> None:
    """``ValueError`` if ``x`` holds what JSON cannot hold or the generation language cannot write
    (:func:`json_text`; a module function: a nested recursive one is a reference cycle per call)."""
    if isinstance(x, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in x):
        raise ValueError("a string with a lone surrogate cannot be written")
    if isinstance(x, float) and not math.isfinite(x):
        raise ValueError(f"the value {x!r} is not JSON")
    if isinstance(x, list):
        for y in x:
            _check_json(y)
    elif isinstance(x, dict):
        for k, y in x.items():
            _check_json(k)
            _check_json(y)
    elif not (x is None or isinstance(x, str | int | float | list | dict)):
        raise ValueError(f"the value {x!r} is not JSON")


def json_text(v: object) -> str:
    """The compact JSON text a constant is written as (``ValueError`` for what JSON cannot hold or
    the generation language cannot write: NaN, lone surrogates)."""
    import json

    _check_json(v)
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def parse_schema(schema: object, *, unknown_formats: str = "refuse",
                 max_recursion: int = MAX_RECURSION) -> JsonType:
    """The description of ``schema`` (a dict or a boolean); :class:`SchemaError` (with the JSON
    pointer) for anything outside the supported subset (docs/design.md §5.1) and for a schema that
    allows no value. ``unknown_formats="ignore"`` reads a ``format`` outside
    :data:`~ltlagent.text.formats.FORMATS` as an annotation (as JSON Schema 2020-12 does by
    default) instead of refusing it. ``max_recursion``: how often a ``$ref`` is followed inside
    itself before it reads as ``false`` (1: not at all)."""
    if unknown_formats not in ("refuse", "ignore"):
        raise UsageError(f"unknown_formats must be 'refuse' or 'ignore', got {unknown_formats!r}")
    t = _Reader(schema, unknown_formats, max_recursion=max_recursion).read(schema, "", 0, ())
    if is_never(t):
        raise SchemaError("the schema allows no value (false, or contradictory keywords)", "",
                          hint=_HINT)
    return t


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
            pattern_language(rx, False, False)
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
    return replace(t, properties=tuple(props))


def _narrow_value(t: JsonType, rx: str) -> JsonType | None:
    if isinstance(t, JsonString):
        return replace(t, fullmatch=(*t.fullmatch, rx))
    if isinstance(t, JsonAny):
        return JsonString(fullmatch=(rx,))
    if isinstance(t, JsonConst):
        d = pattern_language(rx, False, False)
        kept = tuple(v for v in t.values if isinstance(v, str) and d.matches(v.encode()))
        return JsonConst(kept) if kept else None
    if isinstance(t, JsonUnion):
        bs = tuple(b for b in (_narrow_value(b, rx) for b in t.branches) if b is not None)
        return JsonUnion(bs, t.exclusive) if bs else None
    return None

