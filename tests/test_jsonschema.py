"""JSON schema → byte DFA (ltlagent/text/jsonschema.py), judged by the ``jsonschema`` package.

The DFA must accept a text iff the text is in the generation language's lexical policy (at most one
space, after ``:`` and ``,`` only; the escapes of the module docstring), ``json.loads`` reads it,
and it validates against the schema under the language's reading: integers are written as
integers, ``enum``/``const`` compare with their type, object properties appear in declared order
and only declared ones. :func:`judge` states exactly that, independently of the compiler.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from collections.abc import Iterator, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltlagent.errors import SchemaError, UsageError
from ltlagent.text import jsonschema as jsonschema_module
from ltlagent.text import jsontype, numbertext, schemaread
from ltlagent.text.arraytable import array_table
from ltlagent.text.bytetable import ByteTable, literal_table, trim
from ltlagent.text.content import DEAD, ByteNFA, ContentDFA, as_dfa
from ltlagent.text.formats import FORMATS
from ltlagent.text.glue import Nested
from ltlagent.text.jsonschema import (
    _EXIT,
    _PLAIN,
    _STEP_ESC,
    _STEP_U,
    _STEP_U0,
    _STEP_U00,
    _STEP_U000,
    _STEP_U001,
    MAX_ITEMS,
    _mealy_minimal,
    _plain_string_table,
    _plain_template,
    _string_template,
    clear_caches,
    emit,
    integer_regex,
    parse_schema,
    row_successors,
    schema_block,
    schema_dfa,
    schema_table,
    template_rows,
)
from ltlagent.text.jsontype import JsonArray, JsonObject, JsonString, pairwise_disjoint
from ltlagent.text.objecttable import Member, object_table
from ltlagent.text.uniontable import union_table

jsonschema = pytest.importorskip("jsonschema")
from jsonschema import Draft202012Validator, validators  # noqa: E402
from jsonschema.exceptions import ValidationError  # noqa: E402

from tests.test_schema_semantics import number_schema  # noqa: E402

# --- the judge ---------------------------------------------------------------------------------


def _strict_equal(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


def _enum(v: Any, enums: list[object], instance: object,
          schema: Mapping[str, object]) -> Iterator[ValidationError]:
    if not any(_strict_equal(instance, e) for e in enums):
        yield ValidationError(f"{instance!r} not in {enums!r}")


def _const(v: Any, const: object, instance: object,
           schema: Mapping[str, object]) -> Iterator[ValidationError]:
    if not _strict_equal(instance, const):
        yield ValidationError(f"{instance!r} is not {const!r}")


_TYPE = Draft202012Validator.VALIDATORS["type"]


def _type(v: Any, types: object, instance: object, schema: Mapping[str, object]) -> Iterator[ValidationError]:
    yield from _TYPE(v, types, instance, schema)
    names = [types] if isinstance(types, str) else list(types)  # type: ignore[call-overload]
    free = not schema.get("properties") and schema.get("additionalProperties") is not False
    if isinstance(instance, dict) and "object" in names and not free:  # {"type": "object"}: any keys
        declared = iter(schema.get("properties", {}))
        if not all(k in declared for k in instance):  # a subsequence of the declared order
            yield ValidationError(f"keys {list(instance)} out of declared order or undeclared")


def ecma_search(pattern: str, s: str) -> bool:
    """ECMA-262's search for the test patterns (ASCII, no escapes): ``$`` only at the very end,
    ``.`` no line terminator."""
    rx = re.sub(r"\$$", r"\\Z", pattern)
    rx = re.sub(r"(?<!\\)\.", lambda _m: "[^\n\r\u2028\u2029]", rx)
    return re.search(rx, s) is not None


def _pattern(v: Any, pattern: str, instance: object,
             schema: Mapping[str, object]) -> Iterator[ValidationError]:
    if isinstance(instance, str) and not ecma_search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r} (ECMA-262)")


_CHECKER = Draft202012Validator.TYPE_CHECKER.redefine(
    "integer", lambda _c, x: isinstance(x, int) and not isinstance(x, bool))
Judge = validators.extend(Draft202012Validator, validators={"enum": _enum, "const": _const, "type": _type,
                                                        "pattern": _pattern},
                          type_checker=_CHECKER)
#: The same judge on values only: any key order, undeclared keys where the schema allows them (the
#: text-level restriction of ``_type`` is what the tables write when exact, not what is valid).
ValueJudge = validators.extend(Draft202012Validator, validators={"enum": _enum, "const": _const,
                                                                 "pattern": _pattern},
                               type_checker=_CHECKER)


def in_policy(text: str) -> bool:
    """The lexical policy: whitespace only as one space after ``:`` or ``,`` (outside strings);
    in strings only the escapes ``\\" \\\\ \\/ \\b \\f \\n \\r \\t`` and ``\\u00XX`` of a control."""
    i, n, prev = 0, len(text), ""
    while i < n:
        ch = text[i]
        if ch == '"':
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\\":
                    nxt = text[i + 1: i + 2]
                    if nxt and nxt in '"\\/bfnrt':
                        i += 2
                        continue
                    if nxt == "u" and re.fullmatch("00[01][0-9a-fA-F]", text[i + 2: i + 6]):
                        i += 6
                        continue
                    return False
                i += 1
            prev = '"'
            i += 1
            continue
        if ch in " \t\r\n":
            if ch != " " or prev not in (":", ","):
                return False
        prev = ch
        i += 1
    return True


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    d = dict(pairs)
    if len(d) != len(pairs):
        raise ValueError("duplicate key")
    return d


def _no_constant(name: str) -> object:
    raise ValueError(name)


def judge(data: bytes, schema: Mapping[str, object], judge: type = Judge) -> bool:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if not in_policy(text):
        return False
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except ValueError:
        return False
    return bool(judge(schema).is_valid(value))


# --- random schemas and documents ------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "id", "date", "a/b", 'q"t', "é", "x y", "n\\"])
PATTERNS = ["^[a-z]+$", "[A-Z]", "ab", "^x", "[0-9]{2}$", "^(?:yes|no)$", "é", "^.{2,3}$", "a|b", "c$"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-20, 20),
                    st.text(alphabet="ab/\"\\\n\té\x01", max_size=4))


@st.composite
def leaf_schemas(draw: st.DrawFn) -> dict[str, object]:
    kind = draw(st.sampled_from(["string", "integer", "number", "boolean", "null", "enum", "const",
                                 "nullable"]))
    if kind == "string":
        s: dict[str, object] = {"type": "string"}
        if draw(st.booleans()):
            s["minLength"] = draw(st.integers(0, 3))
        if draw(st.booleans()):
            s["maxLength"] = draw(st.integers(int(str(s.get("minLength", 0))), 5))
        if draw(st.booleans()):
            s["pattern"] = draw(st.sampled_from(PATTERNS))
        return s
    if kind == "integer":
        s = {"type": "integer"}
        for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if draw(st.integers(0, 3)) == 0:
                s[k] = draw(st.integers(-120, 120))
        lo = max([int(str(s[k])) + (k == "exclusiveMinimum")
                  for k in ("minimum", "exclusiveMinimum") if k in s], default=None)
        hi = min([int(str(s[k])) - (k == "exclusiveMaximum")
                  for k in ("maximum", "exclusiveMaximum") if k in s], default=None)
        if lo is not None and hi is not None and lo > hi:
            return {"type": "integer"}
        return s
    if kind == "enum":
        values = draw(st.lists(SCALARS, min_size=1, max_size=4))
        out: list[object] = []
        for v in values:
            if not any(_strict_equal(v, w) for w in out):
                out.append(v)
        return {"enum": out}
    if kind == "const":
        return {"const": draw(SCALARS)}
    if kind == "nullable":
        return {"type": ["string", "null"], "maxLength": draw(st.integers(0, 3))}
    return {"type": kind}


def schemas(depth: int = 2) -> st.SearchStrategy[dict[str, object]]:
    if depth == 0:
        return leaf_schemas()
    sub = schemas(depth - 1)

    @st.composite
    def objects(draw: st.DrawFn) -> dict[str, object]:
        names = draw(st.lists(NAMES, min_size=0, max_size=4, unique=True))
        props = {n: draw(sub) for n in names}
        req = [n for n in names if draw(st.booleans())]
        s: dict[str, object] = {"type": "object", "properties": props, "required": req}
        if draw(st.booleans()):
            s["additionalProperties"] = draw(st.booleans())
        return s

    @st.composite
    def arrays(draw: st.DrawFn) -> dict[str, object]:
        s: dict[str, object] = {"type": "array", "items": draw(sub)}
        if draw(st.booleans()):
            s["minItems"] = draw(st.integers(0, 2))
        if draw(st.booleans()):
            s["maxItems"] = draw(st.integers(int(str(s.get("minItems", 0))), 3))
        return s

    @st.composite
    def unions(draw: st.DrawFn) -> dict[str, object]:
        return {draw(st.sampled_from(["anyOf", "oneOf"])): draw(st.lists(sub, min_size=2, max_size=3))}

    return st.one_of(leaf_schemas(), objects(), arrays(), unions())


def _encode_string(s: str, rng: random.Random) -> str:
    out = []
    for ch in s:
        o = ord(ch)
        alts = [json.dumps(ch, ensure_ascii=False)[1:-1]]
        if ch == "/":
            alts.append("\\/")
        if o < 0x20:
            h = f"{o:04x}"
            alts += ["\\u" + h, "\\u" + h.upper()]
        out.append(rng.choice(alts))
    return '"' + "".join(out) + '"'


def dump(v: object, rng: random.Random) -> str:
    """A JSON text of ``v`` in the lexical policy, whitespace and escapes chosen at random."""
    def sp() -> str:
        return rng.choice(["", " "])
    if isinstance(v, dict):
        return "{" + ("," + sp()).join(_encode_string(k, rng) + ":" + sp() + dump(x, rng)
                                       for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ("," + sp()).join(dump(x, rng) for x in v) + "]"
    if isinstance(v, str):
        return _encode_string(v, rng)
    if isinstance(v, float):
        return rng.choice([repr(v), f"{v:e}"])
    if v == 0 and not isinstance(v, bool) and rng.random() < 0.3:
        return "-0"
    return json.dumps(v)


def values(schema: Mapping[str, object], draw: st.DrawFn) -> object:
    """A value that usually validates against ``schema`` (the judge decides)."""
    if "enum" in schema:
        return draw(st.sampled_from(list(schema["enum"])))  # type: ignore[arg-type]
    if "const" in schema:
        return schema["const"]
    for comb in ("anyOf", "oneOf"):
        if comb in schema:
            return values(draw(st.sampled_from(list(schema[comb]))), draw)  # type: ignore[arg-type]
    t = schema["type"]
    if isinstance(t, list):
        t = draw(st.sampled_from(t))
    if t == "null":
        return None
    if t == "boolean":
        return draw(st.booleans())
    if t == "integer":
        lo = schema.get("minimum", schema.get("exclusiveMinimum", -200))
        hi = schema.get("maximum", schema.get("exclusiveMaximum", 200))
        return draw(st.integers(min(lo, hi), max(lo, hi)))  # type: ignore[type-var]
    if t == "number":
        return draw(st.one_of(st.integers(-1000, 1000), st.floats(allow_nan=False, allow_infinity=False)))
    if t == "string":
        if "pattern" in schema:
            s = draw(st.from_regex(str(schema["pattern"])))
        else:
            s = draw(st.text(max_size=6))
        return s[: int(str(schema["maxLength"]))] if "maxLength" in schema else s
    if t == "array":
        n = draw(st.integers(int(str(schema.get("minItems", 0))), int(str(schema.get("maxItems", 3)))))
        return [values(schema["items"], draw) for _ in range(n)]  # type: ignore[arg-type]
    props: Mapping[str, Mapping[str, object]] = schema.get("properties", {})  # type: ignore[assignment]
    req = schema.get("required", [])
    return {k: values(s, draw) for k, s in props.items() if k in req or draw(st.booleans())}  # type: ignore[operator]


@st.composite
def documents(draw: st.DrawFn, schema: Mapping[str, object]) -> object:
    return values(schema, draw)


MUTATION_CHARS = ' ",:{}[]0123456789-.eEaltrufn\\\t\n/é'


def mutate(text: str, rng: random.Random) -> bytes:
    data = text.encode("utf-8")
    k = rng.randrange(4)
    i = rng.randrange(len(data) + 1)
    if k == 0 and data:
        return data[: min(i, len(data) - 1)] + data[min(i, len(data) - 1) + 1:]
    if k == 3:
        return data[:i] + bytes([rng.randrange(256)]) + data[i:]
    c = rng.choice(MUTATION_CHARS).encode()
    if k == 1:
        return data[:i] + c + data[i:]
    return data[:i] + c + data[i + 1:]


SLOW = settings(max_examples=80, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


@SLOW
@given(schemas(), st.data(), st.randoms(use_true_random=False))
def test_dfa_accepts_exactly_the_valid_texts(schema: dict[str, object], data: st.DataObject,
                                             rng: random.Random) -> None:
    try:
        dfa = schema_dfa(schema)
    except SchemaError:  # a random oneOf/enum mix may be refused (e.g. no value of the type)
        return
    Judge.check_schema(schema)
    exact = not _overlapping_one_of(schema)  # else a subset: each branch without the others' values
    for _ in range(6):
        v = data.draw(documents(schema))
        text = dump(v, rng)
        b = text.encode("utf-8")
        for x in (b, *(mutate(text, rng) for _ in range(5))):
            if exact:
                assert dfa.matches(x) == judge(x, schema), (schema, x)
            elif dfa.matches(x):  # sound: a valid value (a branch may write undeclared keys)
                assert judge(x, schema, ValueJudge), (schema, x)


def _overlapping_one_of(schema: object) -> bool:
    """Some ``oneOf`` in ``schema`` has two branches not proven disjoint on values."""
    if isinstance(schema, list):
        return any(_overlapping_one_of(x) for x in schema)
    if not isinstance(schema, dict):
        return False
    if "oneOf" in schema:
        try:
            if pairwise_disjoint([parse_schema(b) for b in schema["oneOf"]]) is not None:
                return True
        except SchemaError:
            return True
    return any(_overlapping_one_of(x) for x in schema.values())


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), st.integers(-1500, 1500)), st.one_of(st.none(), st.integers(-1500, 1500)))
def test_integer_regex_is_exact(lo: int | None, hi: int | None) -> None:
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    rx = re.compile(integer_regex(lo, hi))
    for n in [*range(-2100, 2100, 7), 0, 9, 10, 99, 100, 999, 1000, -9, -10, -100, 123456, -123456]:
        ok = (lo is None or n >= lo) and (hi is None or n <= hi)
        assert bool(rx.fullmatch(str(n))) == ok, (lo, hi, n)
    assert bool(rx.fullmatch("-0")) == ((lo is None or lo <= 0) and (hi is None or hi >= 0))
    assert not rx.fullmatch("01") and not rx.fullmatch("+1") and not rx.fullmatch("1.0")


_BOUNDS = st.one_of(st.none(), st.integers(-1500, 1500), st.sampled_from(
    [0, 1, -1, 9, 10, 99, 100, 65535, 32767, 2147483647, -2147483648, 10**12]))


@settings(max_examples=200, deadline=None)
@given(_BOUNDS, _BOUNDS)
def test_integer_dfa_is_the_integer_regex_s_language(lo: int | None, hi: int | None) -> None:
    """``integer_dfa`` (written digit by digit) accepts exactly the texts of ``integer_regex``
    (compiled from the regex, the reference): the same language by a search over pairs of states,
    every integer in a window around the bounds and zero by value, ``-0`` where 0 is in range,
    and no text with a leading zero, a sign but ``-``, or no digit."""
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    d = numbertext.integer_dfa(lo, hi)
    ref = jsontype.pattern_language(integer_regex(lo, hi), False, False)
    assert _equivalent(d, ref)
    near = {0, 1, -1, 9, 10, 11, 99, 100, 101, -9, -10, -11, -100}
    for b in (lo, hi):
        if b is not None:
            near |= {b + k for k in range(-12, 13)} | {b * 10, b // 10}
    for n in near:
        ok = (lo is None or n >= lo) and (hi is None or n <= hi)
        assert d.matches(str(n).encode()) == ok, (lo, hi, n)
    assert d.matches(b"-0") == ((lo is None or lo <= 0) and (hi is None or hi >= 0))
    for bad in (b"", b"-", b"01", b"-01", b"00", b"+1", b"1.0", b"1e3", b"0-", b"--1"):
        assert not d.matches(bad), (lo, hi, bad)


_DECIMALS = st.builds(Fraction, st.integers(0, 3000), st.sampled_from([1, 2, 4, 5, 10, 100]))
_MAGNITUDE_BOUND = st.one_of(st.none(), st.tuples(st.one_of(st.sampled_from(
    [Fraction(0), Fraction(1), Fraction(1, 2), Fraction(100), Fraction(99), Fraction(1, 10),
     Fraction(101, 100)]), _DECIMALS), st.booleans()))
_DECIMAL_TEXTS = ["".join(t) for n in range(1, 5) for t in itertools.product("0159.", repeat=n)]


@settings(max_examples=150, deadline=None)
@given(_MAGNITUDE_BOUND, _MAGNITUDE_BOUND)
def test_magnitudes_written_digit_by_digit_are_the_regexes_language(
        lo: tuple[Fraction, bool] | None, hi: tuple[Fraction, bool] | None) -> None:
    """A bounded number's magnitude written digit by digit (``_magnitude_digits``) accepts exactly
    what its regexes' intersection does (``_magnitude_regex``, the reference; where the regex is
    empty and refused, nothing), and by value every short text of digits and points: a decimal
    ``I(.F)?`` inside the bounds, open or closed."""
    if lo is not None and hi is not None and lo[0] > hi[0]:
        lo, hi = hi, lo
    d = numbertext._magnitude_digits(lo, hi)
    try:
        ref = numbertext._magnitude_regex(lo, hi)
    except UsageError:
        assert 0 not in d.live
    else:
        assert _equivalent(d, ref)
    decimal = re.compile(jsontype.DECIMAL_RE)
    for text in _DECIMAL_TEXTS:
        want = bool(decimal.fullmatch(text))
        if want:
            v = Fraction(text)
            want = ((lo is None or (v > lo[0] if lo[1] else v >= lo[0]))
                    and (hi is None or (v < hi[0] if hi[1] else v <= hi[0])))
        assert d.matches(text.encode()) == want, (lo, hi, text)


_NUMBER_BOUND = st.one_of(st.none(), st.builds(Fraction, st.integers(-300, 300),
                                                st.sampled_from([1, 2, 4, 10])))


@settings(max_examples=60, deadline=None)
@given(_NUMBER_BOUND, _NUMBER_BOUND, st.booleans(), st.booleans())
def test_bounded_numbers_written_digit_by_digit_keep_their_language(
        lo: Fraction | None, hi: Fraction | None, lo_open: bool, hi_open: bool) -> None:
    """A bounded number's table, its magnitudes written digit by digit (``DIRECT_NUMBERS``), has
    the language of the one built from the regexes, both signs and ``-0`` included."""
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    schema = number_schema(lo, hi, lo_open, hi_open)
    try:
        clear_caches()
        direct = schema_table(schema)
        with mock.patch.object(numbertext, "DIRECT_NUMBERS", False):
            clear_caches()
            regexes = schema_table(schema)
    except SchemaError:
        return
    finally:
        clear_caches()
    assert _equivalent(direct.content, regexes.content)


def test_whitespace_and_order_policy() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
              "required": ["a"]}
    d = schema_dfa(schema)
    for ok in ['{"a":1}', '{"a": 1}', '{"a":1, "b":"x"}', '{"a": -0,"b": ""}']:
        assert d.matches(ok.encode()), ok
    for bad in ['{"b":"x","a":1}', '{ "a":1}', '{"a" :1}', '{"a":1 }', '{"a":  1}', ' {"a":1}',
                '{"a":1}\n', '{"a":1.0}', '{"a":1,"a":2}', '{"a":1,"c":2}', '{"b":"x"}']:
        assert not d.matches(bad.encode()), bad


def test_string_escapes_count_decoded_characters() -> None:
    d = schema_dfa({"type": "string", "minLength": 2, "maxLength": 2, "pattern": "^a.$"})
    for ok in ['"a\\""', '"a\\\\"', '"a\\/"', '"a/"', '"a\\u001F"', '"a\\u0000"', '"aé"', '"a😀"']:
        assert d.matches(ok.encode()), ok
    for bad in ['"a"', '"abc"', '"b\\n"', '"a\\u0041"', '"a\\ud83d\\ude00"', '"a\\x"', '"a\n"', '"a\\n"']:
        assert not d.matches(bad.encode()), bad


def test_narrowed_field() -> None:
    schema = {"type": "object", "properties": {
        "date": {"type": "string", "pattern": "^2026-"}, "n": {"type": ["integer", "null"]},
        "kind": {"enum": ["flight", "hotel", 3]}}}
    d = schema_dfa(schema, {"date": "2026-0[1-3]-[0-9]{2}", "kind": "h.*"})
    assert d.matches(b'{"date":"2026-02-11","kind":"hotel"}')
    assert not d.matches(b'{"date":"2026-05-11","kind":"hotel"}')
    assert not d.matches(b'{"date":"2026-02-11","kind":"flight"}')
    assert not d.matches(b'{"kind":"hotel"}')  # a narrowed key is required
    with pytest.raises(SchemaError, match="/properties/n"):
        schema_dfa(schema, {"n": "1"})
    with pytest.raises(SchemaError, match="not a declared property"):
        schema_dfa(schema, {"zzz": "1"})


@pytest.mark.parametrize(("schema", "path", "what"), [
    (False, "/", "allows no value"),
    ({"type": "string", "format": "color"}, "/format", "format"),
    ({"type": "object", "properties": {"a": {"type": "string", "allOf": [{"propertyNames": {}}]}}},
     "/properties/a/allOf/0/propertyNames", "not supported"),
    ({"type": "object", "patternProperties": {"a": {"type": "object", "patternProperties": {"y": True}}},
      "allOf": [{"properties": {"ab": {"type": "object", "patternProperties": {"x": True}}}}]},
     "/allOf/0", "both have patternProperties"),
    ({"type": "array", "items": {"type": "string"}, "contains": {}}, "/contains", "not supported"),
    ({"type": "array", "items": {"type": "string"}, "minItems": MAX_ITEMS + 1}, "/minItems", "above"),
    ({"type": "array", "prefixItems": []}, "/prefixItems", "not supported"),
    ({"type": "integer", "multipleOf": 1001}, "/multipleOf", "supported up to"),
    ({"type": "number", "multipleOf": 0.7}, "/multipleOf", "too far"),
    ({"type": "string", "pattern": "(a)\\1"}, "/pattern", "backreference"),
    ({"type": "string", "pattern": "a\\Z"}, "/pattern", "ECMA-262"),
    ({"$ref": "https://example.com/s.json"}, "/$ref", "local"),
    ({"type": "object", "minProperties": 2, "properties": {"a": {}}}, "/", "minProperties"),
    ({"oneOf": [{"type": "integer", "minimum": i} for i in range(7)]}, "/oneOf", "branches 0 and 1"),
    ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, "/", "allows no value"),
    ({"type": "thing"}, "/type", "unknown type"),
    ({"type": "object", "properties": {"ok": {}, "\u00e9\ud800": {}}}, "/properties/\u00e9\ud800",
     "lone surrogate"),
    ({"type": "object", "properties": {"\udfff": {}}}, "/properties/\udfff", "lone surrogate"),
])
def test_refused_keywords_name_the_path(schema: object, path: str, what: str) -> None:
    with pytest.raises(SchemaError) as e:
        parse_schema(schema)
    assert f"JSON schema at {path}:" in str(e.value)
    assert what in str(e.value)


def test_refs_resolve() -> None:
    schema = {"$defs": {"d": {"type": "string", "maxLength": 1}},
              "type": "object", "properties": {"x": {"$ref": "#/$defs/d"}, "y": {"$ref": "#/$defs/d"}}}
    d = schema_dfa(schema)
    assert d.matches(b'{"x":"a","y":""}') and not d.matches(b'{"x":"ab"}')


def test_one_of_is_compiled_only_when_disjoint() -> None:
    """A branch's texts are not all the texts of its values (keys in one order, integers without
    fraction), so "exactly one branch's automaton accepts" let ``1.0`` through for number/integer:
    oneOf is a union of branches proven disjoint on values, or refused."""
    overlap = schema_dfa({"oneOf": [{"type": "integer", "maximum": 10}, {"type": "integer", "minimum": 5}]})
    written = [x for x in range(0, 16) if overlap.matches(str(x).encode())]
    assert written == [0, 1, 2, 3, 4, 11, 12, 13, 14, 15]  # 5..10: valid for both
    d = schema_dfa({"oneOf": [{"type": "integer", "maximum": 4}, {"type": "integer", "minimum": 5}]})
    assert d.matches(b"3") and d.matches(b"11")


def test_booleans_and_integers_stay_apart() -> None:
    """``False == 0`` in Python: the cache of built parts must not confuse their constants."""
    assert schema_dfa({"type": "array", "items": {"enum": [0]}}).matches(b"[0]")
    d = schema_dfa({"type": "array", "items": {"enum": [False]}})
    assert d.matches(b"[false]") and not d.matches(b"[0]")


NARROWING = ["[a-c]+", "ab?", "é.*", "x|yy", ".{2}", "[^/]*"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["a", "b", "c"]), st.sampled_from(NARROWING), st.data(),
       st.randoms(use_true_random=False))
def test_narrowing_is_schema_and_fullmatch(key: str, rx: str, data: st.DataObject,
                                           rng: random.Random) -> None:
    schema = {"type": "object", "properties": {
        "a": {"type": "string", "maxLength": 3, "pattern": "^[a-z]"},
        "b": {"enum": ["ab", "a", "yy", 3, None, "é/"]},
        "c": {"type": ["string", "null"]}}}
    try:
        dfa = schema_dfa(schema, {key: rx})
    except SchemaError:
        return  # nothing the schema allows there fullmatches rx
    for _ in range(8):
        v = data.draw(documents(schema))
        assert isinstance(v, dict)
        if rng.random() < 0.5:
            v[key] = data.draw(st.from_regex(rx, fullmatch=True))
            v = {k: v[k] for k in ("a", "b", "c") if k in v}  # declared order
        text = dump(v, rng)
        for b in [text.encode(), mutate(text, rng)]:
            want = judge(b, schema)
            if want:
                got = json.loads(b)
                want = isinstance(got.get(key), str) and re.fullmatch(rx, got[key]) is not None
            assert dfa.matches(b) == want, (key, rx, b)


# --- the numpy construction (text/bytetable.py) against independent references ------------------

#: Byte pieces from which every short text is written: quotes, escapes, a two-byte character and
#: its parts (a lone lead byte, a lone continuation byte), a control, plain letters.
PIECES = [b'"', b"\\", b"u", b"0", b"1", b"a", "é".encode(), b"\xc3", b"\xa9", b"\n", b"n"]


@pytest.mark.parametrize("schema", [
    {"type": "string", "maxLength": 2},
    {"type": "string", "minLength": 1, "maxLength": 3},
    {"type": "string", "minLength": 2},
    {"type": "string", "maxLength": 2, "pattern": "^a"},
    {"type": "string", "pattern": "é"},
    {"type": "string", "minLength": 1, "maxLength": 1, "pattern": "^[^\\n]$"},
])
def test_short_strings_exhaustively(schema: dict[str, object]) -> None:
    """Every text of up to 5 pieces, the string's table against the judge: the count × template
    product (``_string_table``) counts decoded characters, escapes and UTF-8 exactly."""
    dfa = schema_dfa(schema)
    for n in range(6):
        for parts in itertools.product(PIECES, repeat=n):
            text = b"".join(parts)
            assert dfa.matches(text) == judge(text, schema), (schema, text)


def _equivalent(a: ContentDFA, b: ContentDFA) -> bool:
    """Whether two DFAs accept the same bytes (a breadth-first search over pairs of states)."""
    seen = {(0, 0)}
    todo = [(0, 0)]
    while todo:
        p, q = todo.pop()
        if (p >= 0 and p in a.accepting) != (q >= 0 and q in b.accepting):
            return False
        for x in range(256):
            nxt = (a.step(p, x), b.step(q, x))
            if nxt != (DEAD, DEAD) and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return True


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas())
def test_blocks_determinise_like_the_copied_nfa(schema: dict[str, object]) -> None:
    """The subset construction over table blocks (``Glue``) gives the language of copying every
    part into one NFA and determinising that (``ByteNFA.determinize``, independent code)."""
    try:
        fast = schema_dfa(schema)
    except SchemaError:
        return
    nfa = ByteNFA()
    start, final = nfa.new(), nfa.new()
    emit(nfa, parse_schema(schema), start, final)
    trans, acc = nfa.determinize(start, final, 50_000, "schema", "")
    assert _equivalent(fast, as_dfa(trans, acc, "copied"))


def _direct_and_glued(schema: dict[str, object], knob: str) -> tuple[ByteTable, ByteTable] | None:
    """The table of ``schema`` as compiled, and with ``knob`` (a direct construction) off: the
    glue's; None where the schema is refused."""
    try:
        direct = schema_table(schema)
    except SchemaError:
        return None
    try:
        with mock.patch.object(jsonschema_module, knob, False):
            clear_caches()
            glued = schema_table(schema)
    finally:
        clear_caches()
    return direct, glued


@pytest.mark.parametrize("knob", ["DIRECT_OBJECTS", "DIRECT_CONSTS", "DIRECT_UNIONS"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas())
def test_objects_constants_and_unions_written_directly_are_the_glue_s_tables(
        knob: str, schema: dict[str, object]) -> None:
    """An object's table written directly (``objecttable``; ``DIRECT_OBJECTS``), a constant's
    written as the trie of its texts (``literal_table``; ``DIRECT_CONSTS``) and a union's from its
    branches' (``uniontable``; ``DIRECT_UNIONS``) have the states and the language of the subset
    construction over their glue (the knob off): the same table but its numbering."""
    both = _direct_and_glued(schema, knob)
    if both is None:
        return
    direct, glued = both
    assert direct.num_states == glued.num_states
    assert _equivalent(direct.content, glued.content)


def test_unions_written_directly_choose_their_branch_by_the_first_byte() -> None:
    """``union_table`` joins branches that begin with different bytes (a start row of theirs side
    by side, each branch accepting where it did) and declines branches that may begin alike (the
    glue decides), one that enters its start, fewer than two, and more states than the limit;
    a nullable value takes it, its constants in one trie (one final state, as the glue's literals);
    an integer or a number, a string or a string constant do not."""
    a = _table([(0, ord("a"), 1)], 2, [1])
    b = _table([(0, ord("b"), 1), (1, ord("c"), 2)], 3, [1, 2])
    joined = union_table([a, b], "t", 100)
    assert isinstance(joined, Nested) and joined.num_states == 4
    d = joined.table().content
    assert [d.matches(x) for x in (b"a", b"b", b"bc", b"", b"ab", b"c", b"bcc")] == [True] * 3 + [False] * 4
    assert union_table([a, _table([(0, ord("a"), 1), (1, ord("x"), 2)], 3, [2])], "t", 100) is None
    assert union_table([a, _table([(0, ord("b"), 1), (1, ord("c"), 0)], 2, [1])], "t", 100) is None
    assert union_table([a, _table([(0, ord("b"), 1)], 2, [0, 1])], "t", 100) is None
    assert union_table([a], "t", 100) is None
    assert union_table([a, b], "t", 3) is None
    limit = 50_000
    clear_caches()
    for schema in ({"type": ["string", "null"], "maxLength": 2},
                   {"anyOf": [{"type": "boolean"}, {"type": "string", "pattern": "^a"}, {"enum": [1, "x"]}]}):
        t = parse_schema(schema)
        assert isinstance(t, jsontype.JsonUnion)
        assert isinstance(jsonschema_module._value_table(t, limit), Nested)
    consts = jsonschema_module._branch_tables(
        jsontype.JsonUnion((jsontype.JsonConst((None,)), jsontype.JsonUnion((jsontype.JsonConst((True,)),
                                                                                JsonString())))), limit)
    assert len(consts) == 2 and consts[0].content.matches(b"true") and consts[0].content.matches(b"null")
    for schema in ({"anyOf": [{"type": "integer", "minimum": 5}, {"type": "number", "maximum": 2}]},
                   {"anyOf": [{"type": "string"}, {"enum": ["a"]}]}):
        t = parse_schema(schema)
        assert isinstance(t, jsontype.JsonUnion)
        assert union_table(jsonschema_module._branch_tables(t, limit), "t", limit) is None
    clear_caches()


def test_objects_written_directly_only_where_keys_have_one_text() -> None:
    """Keys with an escape (``/`` may be ``\\/``, a control character ``\\u00XX`` in either case)
    and objects that write undeclared keys go through the glue; plain keys, non-ASCII ones
    included, are written directly."""
    direct = jsonschema_module._object_table
    plain = parse_schema({"type": "object", "properties": {"a": {}, "é b": {"type": "integer"}},
                          "required": ["a"]})
    assert isinstance(plain, JsonObject) and isinstance(direct(plain, 50_000), Nested)
    for schema in ({"type": "object", "properties": {"a/b": {"type": "integer"}}},
                   {"type": "object", "properties": {"a\tb": {"type": "integer"}}},
                   {"type": "object", "properties": {"a": {"type": "integer"}},
                    "patternProperties": {"^x": {"type": "string"}}},
                   {"type": "object", "properties": {}}):
        t = parse_schema(schema)
        assert isinstance(t, JsonObject) and direct(t, 50_000) is None, schema
    assert schema_dfa({"type": "object", "properties": {"a/b": {"type": "integer"}}}).matches(b'{"a\\/b":1}')


def test_objects_over_the_limit_are_refused_as_the_glue_refuses_them() -> None:
    """An object whose keys' tries would pass the state limit (each optional property's lane has
    the trie of the keys after it) is refused with the glue's error, not built past the limit."""
    schema = {"type": "object", "properties": {f"property{i:03d}": {"type": "integer"} for i in range(120)}}
    messages = _refusals_at_1000(schema, "DIRECT_OBJECTS")
    assert messages[0] == messages[1] and "1000" in messages[0]
    assert schema_table(schema, limit=200_000).num_states > 1_000


def _refusals_at_1000(schema: dict[str, object], knob: str) -> list[str]:
    """The errors of compiling ``schema`` within 1,000 states, with ``knob`` (a direct
    construction) on and off."""
    messages = []
    for direct in (True, False):
        with mock.patch.object(jsonschema_module, knob, direct):
            clear_caches()
            with pytest.raises(UsageError) as e:
                schema_table(schema, limit=1_000)
            messages.append(str(e.value))
    clear_caches()
    return messages


def _table(trans: list[tuple[int, int, int]], n: int, accepting: list[int]) -> ByteTable:
    t = np.full((n, 256), DEAD, dtype=np.int32)
    for q, b, r in trans:
        t[q, b] = r
    acc = np.zeros(n, dtype=bool)
    acc[accepting] = True
    return ByteTable(t, acc)


def test_objects_not_written_directly_where_a_value_cannot_be_joined() -> None:
    """``object_table`` declines a value whose table accepts at its start or leads back to it, begins
    with a space, or goes on by ``,`` or ``}`` after it may end (the glue then decides); a plain
    value is joined."""
    good = _table([(0, ord("x"), 1)], 2, [1])
    assert isinstance(object_table([Member(b'"a"', True, good)], False, "t", 100), Nested)
    for bad in (_table([(0, ord("x"), 1), (1, ord("y"), 0)], 2, [1]),
                _table([(0, ord("x"), 1)], 2, [0, 1]),
                _table([(0, ord(" "), 1)], 2, [1]),
                _table([(0, ord("x"), 1), (1, ord(","), 1)], 2, [1]),
                _table([(0, ord("x"), 1), (1, ord("}"), 2)], 3, [1, 2])):
        assert object_table([Member(b'"a"', True, bad)], False, "t", 100) is None


@pytest.mark.parametrize("knob", ["DIRECT_ARRAYS", "DIRECT_INTEGERS"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas())
def test_arrays_and_integers_written_directly_are_the_glue_s_language(knob: str, schema: dict[str, object]
                                                                      ) -> None:
    """An array's table written directly (``arraytable``; ``DIRECT_ARRAYS``) and a bounded
    integer's written digit by digit (``integer_dfa``; ``DIRECT_INTEGERS``) have the language of
    the subset construction over the glue (the knob off) and no more states: the glue copies the
    item once after ``[`` and once after ``,``, the direct table enters one copy from both; the
    integer's regex is determinised, not minimised."""
    both = _direct_and_glued(schema, knob)
    if both is None:
        return
    direct, glued = both
    assert direct.num_states <= glued.num_states
    assert _equivalent(direct.content, glued.content)


def test_constants_written_as_a_trie_write_their_other_values_too() -> None:
    """A constant's non-integer numbers, arrays and objects (its ``texts``) are in its trie beside
    its scalars."""
    t = parse_schema({"enum": [1.5, [1, 2], {"a": 1}, "x", 7]})
    clear_caches()
    table = jsonschema_module._value_table(t, 50_000)
    assert isinstance(table, ByteTable)
    for text in (b"1.5", b"[1,2]", b'{"a":1}', b'"x"', b"7"):
        assert table.content.matches(text), text
    assert not table.content.matches(b"1")
    clear_caches()


def test_literal_table_shares_the_final_state_of_texts_nothing_continues() -> None:
    """``literal_table``: a text that another continues accepts where it ends and goes on; every
    other text ends in one final state; nothing else is accepted."""
    t = literal_table([b"1", b"10", b"-0", b"0", b'"ab"'])
    for text in (b"1", b"10", b"-0", b"0", b'"ab"'):
        assert t.content.matches(text), text
    for text in (b"", b"-", b"100", b"01", b'"a"', b'"ab', b"00"):
        assert not t.content.matches(text), text
    finals = [q for q in np.flatnonzero(t.accepting).tolist() if (t.trans[q] < 0).all()]
    assert len(finals) == 1
    assert t.num_states == 7  # start, 1 (accepting, goes on), -, ", a, b, final


@pytest.mark.parametrize(("values", "direct"), [
    ((0, 1, None, True), True), (("a", "é", "日本", 'q"', "\x01"), True), (("a/b",), False),
    (("tab\t",), False)])
def test_constants_written_as_a_trie_only_in_whole_texts(values: tuple[object, ...], direct: bool) -> None:
    r"""Numbers, literals and strings whose characters have one spelling each (an escaped quote,
    ``\u0001``) are written as a trie; a string with a character of several spellings (``/`` or
    ``\/``, ``\t`` or ``\u0009``) goes through the glue, which shares what follows that character."""
    t = parse_schema({"enum": list(values)})
    clear_caches()
    assert isinstance(jsonschema_module._value_table(t, 50_000), ByteTable) is direct
    clear_caches()


@pytest.mark.parametrize(("bounds", "good", "bad"), [
    ({}, [b"[]", b'["ab"]', b'["ab","cd"]', b'["ab", "cd","ef"]'], [b'[,"ab"]', b'["ab",]', b'["a"]']),
    ({"minItems": 2}, [b'["ab","cd"]', b'["ab", "cd", "ef"]'], [b"[]", b'["ab"]']),
    ({"minItems": 1, "maxItems": 2}, [b'["ab"]', b'["ab", "cd"]'], [b"[]", b'["ab","cd","ef"]']),
    ({"maxItems": 0}, [b"[]"], [b'["ab"]']),
])
def test_arrays_written_directly_count_their_items(bounds: dict[str, int], good: list[bytes],
                                                   bad: list[bytes]) -> None:
    """A direct array writes ``minItems`` to ``maxItems`` items, each after ``[`` or ``,`` and an
    optional space, and ``]`` once enough are written; an unbounded array is one copy of its item."""
    clear_caches()
    t = schema_table({"type": "array", "items": {"type": "string", "minLength": 2}, **bounds})
    for text in good:
        assert t.content.matches(text), text
    for text in bad:
        assert not t.content.matches(text), text
    if not bounds:  # [, ], after , and after its space; the item's states but its start
        item = schema_table({"type": "string", "minLength": 2})
        assert t.num_states == 5 + item.num_states - 1


def test_arrays_not_written_directly_where_the_item_cannot_be_joined() -> None:
    """``array_table`` declines an item whose table accepts at its start or leads back to it,
    begins with a space, or goes on by ``,`` or ``]`` after it may end, and more states than the
    limit (the glue then decides)."""
    good = _table([(0, ord("x"), 1)], 2, [1])
    assert isinstance(array_table(good, 0, None, "t", 100), Nested)
    assert array_table(good, 60, None, "t", 100) is None
    for bad in (_table([(0, ord("x"), 1), (1, ord("y"), 0)], 2, [1]),
                _table([(0, ord("x"), 1)], 2, [0, 1]),
                _table([(0, ord(" "), 1)], 2, [1]),
                _table([(0, ord("x"), 1), (1, ord(","), 1)], 2, [1]),
                _table([(0, ord("x"), 1), (1, ord("]"), 2)], 3, [1, 2])):
        assert array_table(bad, 0, None, "t", 100) is None


def test_arrays_over_the_limit_are_refused_as_the_glue_refuses_them() -> None:
    """An array whose copies of its item would pass the state limit is refused with the glue's
    error, not built past the limit."""
    schema = {"type": "array", "items": {"type": "string", "maxLength": 30}, "minItems": 50}
    messages = _refusals_at_1000(schema, "DIRECT_ARRAYS")
    assert messages[0] == messages[1] and "1000" in messages[0]
    assert schema_table(schema, limit=200_000).num_states > 1_000


@pytest.mark.parametrize("schema", [
    {"type": "string", "minLength": 2, "maxLength": 6, "pattern": "^[0-9]{4}$"},
    {"type": "string", "maxLength": 9, "pattern": "^(ab)*$"},
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 2, "pattern": "^.{3}"},
                                      "b": {"type": "integer"}}},
    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}},
                                      "b": {"type": "array", "items": {"type": "string"},
                                            "minItems": 1}},
     "required": ["b"]},
    {"type": "array", "items": {"type": "string", "maxLength": 1, "pattern": "^ab"}, "maxItems": 3},
])
def test_tables_come_trimmed(schema: dict[str, object]) -> None:
    """The tables are built without a search over them (liveness decided on the glue NFA and on
    the string template, reachability from where blocks are entered), yet every state is reachable
    and can still reach acceptance (the decoder's guarantee): trimming again removes nothing."""
    t = schema_table(schema)
    trans, _acc = trim(t.trans, t.accepting)
    assert trans.shape == t.trans.shape


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas())
def test_generated_tables_come_trimmed(schema: dict[str, object]) -> None:
    """:func:`test_tables_come_trimmed` on generated schemas."""
    try:
        t = schema_table(schema)
    except SchemaError:
        return
    trans, _acc = trim(t.trans, t.accepting)
    assert trans.shape == t.trans.shape


def _moore_classes(tgt: list[list[int]], inc: list[list[int]]) -> int:
    """How many classes of states no input tells apart (Moore's rounds, the reference for
    ``_mealy_minimal``)."""
    block = [0] * len(tgt)
    while True:
        sig: dict[tuple[object, ...], int] = {}
        new = [sig.setdefault((block[q], tuple(block[r] if r >= 0 else r for r in tgt[q]),
                               tuple(inc[q])), len(sig)) for q in range(len(tgt))]
        if len(sig) == len(set(block)):
            return len(sig)
        block = new


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 12).flatmap(lambda n: st.tuples(
    st.lists(st.lists(st.integers(-2, n - 1), min_size=4, max_size=4), min_size=n, max_size=n),
    st.lists(st.lists(st.integers(0, 1), min_size=4, max_size=4), min_size=n, max_size=n))))
def test_template_minimisation_is_exact(machine: tuple[list[list[int]], list[list[int]]]) -> None:
    """Hopcroft's refinement of a string template (``_mealy_minimal``) keeps what every input
    writes (successors, counts, where the quote may close) and merges as much as Moore's rounds."""
    rows, ups = machine
    n = len(rows)
    tgt = np.full((n, 256), DEAD, dtype=np.int64)
    inc = np.zeros((n, 256), dtype=np.int64)
    for q in range(n):
        for c in range(4):
            tgt[q, 0x30 + c] = rows[q][c]
            inc[q, 0x30 + c] = ups[q][c] if rows[q][c] >= 0 else 0
    small, small_inc = _mealy_minimal(tgt, inc)
    assert small.shape[0] == _moore_classes(tgt.tolist(), inc.tolist())

    def outputs(t: np.ndarray, u: np.ndarray, word: tuple[int, ...]) -> list[tuple[int, int]]:
        s, out = 0, []
        for c in word:
            r = int(t[s, 0x30 + c])
            out.append((min(r, 0), int(u[s, 0x30 + c])))
            if r < 0:
                break
            s = r
        return out

    for k in range(5):
        for word in itertools.product(range(4), repeat=k):
            assert outputs(tgt, inc, word) == outputs(small, small_inc, word)


@pytest.mark.parametrize("lang", [
    ((), (), (), ()),
    (("^[a-z]+$",), (), ("x",), ("ab", "cd")),
    (("^[0-9a-f]{2,6}$",), (), (), ()),
    ((), ("[^\\x00-\\x1f]*",), (), ()),
])
def test_string_templates_are_minimal(lang: tuple[tuple[str, ...], ...]) -> None:
    """On real templates (many byte classes, escape chains): as many states as Moore's rounds give,
    and the same outputs on random inputs."""
    tgt, inc = template_rows(lang)  # type: ignore[arg-type]
    small, small_inc = _mealy_minimal(tgt, inc)
    assert small.shape[0] == _moore_classes(tgt.tolist(), inc.tolist())
    rng = random.Random(0)
    for _ in range(300):
        s, t = 0, 0
        for _k in range(12):
            b = rng.choice(b'"\\u001fAbcx0/\xc3\xa9')
            r, r2 = int(tgt[s, b]), int(small[t, b])
            assert (min(r, 0), int(inc[s, b])) == (min(r2, 0), int(small_inc[t, b]))
            if r < 0:
                break
            s, t = r, r2


def test_plain_template_is_the_general_construction() -> None:
    """The template of a string with no constraint on its text, written directly
    (``_plain_template``), is the general construction's, state for state."""
    tgt, inc = _plain_template()
    want_tgt, want_inc = _mealy_minimal(*template_rows(_PLAIN))
    assert np.array_equal(tgt, want_tgt)
    assert np.array_equal(inc, want_inc)


def test_plain_string_table_is_the_general_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    """``{"type": "string"}``'s table, written directly, is the count × template product's (the
    general construction, with the plain language's shortcuts turned off), state for state."""
    fast = _plain_string_table()
    clear_caches()
    _string_template.library.cache_clear()  # the plain template is a library constant
    monkeypatch.setattr(jsonschema_module, "_PLAIN", ("no", "shortcut"))
    general = jsonschema_module._string_table(JsonString(), 50_000)
    clear_caches()
    _string_template.library.cache_clear()
    assert np.array_equal(fast.trans, general.trans)
    assert np.array_equal(fast.accepting, general.accepting)
    assert fast.periods == general.periods


def test_clear_caches_forgets_what_schemas_built() -> None:
    """``clear_caches`` empties every cache of what schemas built, the number automata and the
    string-meet verdicts included (a compile timed after it starts from the library's constants
    alone), and keeps those constants: the DFAs of formats, any text and JSON numbers, and the
    string templates of formats (the same objects before and after)."""
    schema_table({"type": "object", "properties": {
        "a": {"type": "number", "multipleOf": 3},
        "b": {"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}]},
        "c": {"type": "string", "pattern": "x"},
        "d": {"type": "string", "format": "date"}, "e": {"type": "number"}}})
    caches = [jsontype._pattern_language, jsontype._string_empty_meet, numbertext.number_parts,
              numbertext.multiples_dfa, _string_template.schema, jsonschema_module._template_graph.schema,
              jsonschema_module._string_language.schema, jsonschema_module._minimal.schema]
    assert all(c.cache_info().currsize for c in caches)
    date = (jsontype.pattern_language(FORMATS["date"][0], False, False),
            _string_template(((), FORMATS["date"], (), ())),
            jsontype.pattern_language(jsontype.NUMBER_RE, False, False))
    clear_caches()
    assert not any(c.cache_info().currsize for c in caches)
    assert date[0] is jsontype.pattern_language(FORMATS["date"][0], False, False)
    assert date[1] is _string_template(((), FORMATS["date"], (), ()))
    assert date[2] is jsontype.pattern_language(jsontype.NUMBER_RE, False, False)


def test_any_array_and_object_tables_are_library_constants() -> None:
    """The tables of any array and any object, as a schema reads them and as any value writes
    them, and of arrays of plain strings, integers, numbers or booleans, are kept by
    ``clear_caches`` (the same blocks after it); an object with a property, an array with bounds
    or of a schema's items is a schema's, forgotten."""
    from ltlagent.text.jsonschema import LIBRARY_STRUCTURES, _minimal, any_value
    limit = 50_000
    read = [parse_schema(s) for s in ({"type": "object"}, {"type": "array"},
                                      {"type": "object", "additionalProperties": {}},
                                      *({"type": "array", "items": {"type": t}}
                                        for t in ("string", "integer", "number", "boolean")))]
    inside = [b for d in (0, 1) for b in any_value(d).branches  # type: ignore[attr-defined]
              if isinstance(b, JsonArray | JsonObject)]
    assert len(inside) == 4 and set(read) | set(inside) <= LIBRARY_STRUCTURES
    kept = [_minimal(t, limit) for t in [*read, *inside]]
    schemas = [parse_schema(s) for s in (
        {"type": "object", "properties": {"a": {}}}, {"type": "array", "maxItems": 3},
        {"type": "array", "items": {"type": "string", "maxLength": 5}})]
    assert not set(schemas) & LIBRARY_STRUCTURES
    built = [_minimal(t, limit) for t in schemas]
    clear_caches()
    assert all(b is _minimal(t, limit) for b, t in zip(kept, [*read, *inside], strict=True))
    assert all(b is not _minimal(t, limit) for b, t in zip(built, schemas, strict=True))
    assert schema_dfa({"type": "object"}).matches(b'{"a": [1, {}]}')


def test_member_value_tables_of_no_schema_are_library_constants() -> None:
    """The member tables of the unconstrained number, integer, boolean and null, alone or with
    null, of any value, and of the non-negative and positive integers and non-negative numbers, as
    schemas read them, are kept by ``clear_caches``; another bounded integer's or number's or an
    enum's is a schema's, forgotten; a string's is its ``_minimal`` table."""
    from ltlagent.text.jsonschema import LIBRARY_VALUES, _value_table
    limit = 50_000
    read = [parse_schema({"type": t}) for t in ("number", "integer", "boolean", "null")]
    read += [parse_schema({"type": [t, "null"]}) for t in ("string", "number", "integer", "boolean")]
    read += [parse_schema({}), parse_schema(True)]
    read += [parse_schema(s) for s in ({"type": "integer", "minimum": 0}, {"type": "integer", "minimum": 1},
                                       {"type": "integer", "exclusiveMinimum": 0},
                                       {"type": "number", "minimum": 0})]
    assert set(read) <= LIBRARY_VALUES
    kept = [_value_table(t, limit) for t in read]
    natural = _value_table(parse_schema({"type": "integer", "minimum": 1}), limit).table().content
    assert natural.matches(b"1") and natural.matches(b"20") and not natural.matches(b"0")
    assert not natural.matches(b"-1") and not natural.matches(b"01")
    schemas = [parse_schema(s) for s in ({"type": "integer", "minimum": 2}, {"enum": ["a", "b"]},
                                         {"type": "integer", "minimum": 0, "maximum": 9},
                                         {"type": "number", "minimum": 0, "exclusiveMaximum": 1})]
    assert not set(schemas) & LIBRARY_VALUES
    built = [_value_table(t, limit) for t in schemas]
    clear_caches()
    assert all(b is _value_table(t, limit) for b, t in zip(kept, read, strict=True))
    assert all(b is not _value_table(t, limit) for b, t in zip(built, schemas, strict=True))
    text = parse_schema({"type": "string", "maxLength": 3})
    assert _value_table(text, limit) is jsonschema_module._minimal(text, limit)


def test_tables_of_strings_in_formats_alone_are_library_constants() -> None:
    """A string of any length, or of at least one character, in formats alone (``format: email``)
    or free keeps its table across ``clear_caches`` (the same block); with a length bound above,
    ``minLength`` 2, a pattern or an excluded name its table is a schema's, forgotten; the kept
    tables still write the format, and the non-empty ones no empty string."""
    limit = 50_000
    read = [parse_schema({"type": "string", "format": f}) for f in ("email", "date-time", "hostname")]
    read += [parse_schema({"type": "string", "minLength": 1}),
             parse_schema({"type": "string", "format": "email", "minLength": 1})]
    assert all(isinstance(t, JsonString) for t in read)
    kept = [jsonschema_module._minimal(t, limit) for t in read]
    schemas = [parse_schema(s) for s in (
        {"type": "string", "format": "email", "maxLength": 64},
        {"type": "string", "minLength": 1, "maxLength": 64},
        {"type": "string", "minLength": 2},
        {"type": "string", "format": "email", "minLength": 2},
        {"type": "string", "format": "email", "pattern": "a"},
        {"type": "string", "format": "email", "not": {"enum": ["a@b.c"]}})]
    assert all(isinstance(t, JsonString) for t in schemas)
    built = [jsonschema_module._minimal(t, limit) for t in schemas]
    clear_caches()
    assert all(b is jsonschema_module._minimal(t, limit) for b, t in zip(kept, read, strict=True))
    assert all(b is not jsonschema_module._minimal(t, limit) for b, t in zip(built, schemas, strict=True))
    d = schema_dfa({"type": "object", "properties": {"e": {"type": "string", "format": "email"},
                                                     "n": {"type": "string", "minLength": 1}},
                    "required": ["e", "n"]})
    assert d.matches(b'{"e": "a@b.co", "n": "x"}') and d.matches('{"e": "a@b.co", "n": "é"}'.encode())
    assert not d.matches(b'{"e": "ab.co", "n": "x"}') and not d.matches(b'{"e": "a@b.co", "n": ""}')


def test_string_language_avoids_excluded_names_and_patterns() -> None:
    """A string's language met from live tables (a trie's complement, an avoided pattern's, a
    pattern) is, text by text over a small alphabet, exactly what it says: the pattern found, the
    avoided pattern not, no excluded text (the empty one included)."""
    excluded = ("", "a", "ab", "é", "bé")
    lang = (("b|é",), (), ("^aa",), excluded)
    d = jsonschema_module._string_language(lang)
    assert "one of" in d.source and "not" in d.source
    for n in range(4):
        for chars in itertools.product("abé", repeat=n):
            text = "".join(chars)
            want = bool(re.search("b|é", text)) and not text.startswith("aa") and text not in excluded
            assert d.matches(text.encode()) == want, text


def test_library_constants_are_the_library_regexes_only() -> None:
    """Only the library's own regexes, fullmatched in Python's dialect, are kept as constants: a
    schema's pattern with the same text (searched, ECMA-262) or any other regex goes to the
    schemas' cache, and ``library_language`` refuses a regex outside the set; a string language
    with a schema's pattern, an excluded text or an avoided pattern beside a format is a schema's."""
    clear_caches()
    rx = jsontype.NATURAL_RE
    assert jsontype.pattern_language(rx) is not jsontype.library_language(rx)
    assert jsontype.pattern_language(rx, False) is not jsontype.library_language(rx)
    assert jsontype._pattern_language.cache_info().currsize == 2
    with pytest.raises(ValueError, match="not one of the library's own regexes"):
        jsontype.library_language("[a-z]+")
    dates = FORMATS["date"]
    assert jsonschema_module._library_only(((), dates, (), ()))
    assert jsonschema_module._library_only(((), (), (), ()))
    for lang in [(("x",), dates, (), ()), ((), dates, ("y",), ()), ((), dates, (), ("z",)),
                 ((), (*dates, "[0-9]+"), (), ())]:
        assert not jsonschema_module._library_only(lang)
    tgt, inc = _string_template(((), dates, (), ()))
    assert not tgt.flags.writeable and not inc.flags.writeable


def test_enum_keeps_one_of_each_value_by_type() -> None:
    """``enum`` duplicates are dropped by (type, value) in one pass (a set, not a scan per value:
    a schema with thousands of constants read in quadratic time): ``True``/``1``, ``False``/``0``,
    ``1.0``/``1`` as JSON types differ or agree, and a string ``"[1]"`` is not the array ``[1]``."""
    t = parse_schema({"enum": [1, 1.0, True, 1, "1", True, False, 0, None, None, "[1]", [1], [1],
                               {"a": 1}, {"a": 1}, 2.5, 2.5]})
    assert isinstance(t, jsonschema_module.JsonConst)
    assert t.values == (1, True, "1", False, 0, None, "[1]")
    assert [type(v) for v in t.values] == [int, bool, str, bool, int, type(None), str]
    assert t.texts == ("[1]", '{"a":1}', "2.5")
    many = parse_schema({"enum": [f"v{i}" for i in range(3000)] * 2})
    assert isinstance(many, jsonschema_module.JsonConst) and len(many.values) == 3000


def test_compile_pauses_the_collector_and_restores_it() -> None:
    """The cyclic collector is off while a schema compiles and as it was afterwards, on success and
    on a refusal alike (never left off, never turned on by the compile)."""
    import gc

    seen: list[bool] = []
    original = jsonschema_module._block

    def spy(t: object, limit: int) -> object:
        seen.append(gc.isenabled())
        return original(t, limit)  # type: ignore[arg-type]

    was = gc.isenabled()
    try:
        jsonschema_module._block = spy  # type: ignore[assignment]
        gc.enable()
        schema_table({"type": "integer"})
        assert seen == [False] and gc.isenabled()
        with pytest.raises(SchemaError):
            schema_table({"type": "integer", "minimum": 5, "maximum": 1})
        assert gc.isenabled()
        gc.disable()
        schema_table({"type": "string"})
        assert not gc.isenabled()
    finally:
        jsonschema_module._block = original  # type: ignore[assignment]
        if was:
            gc.enable()


# --- the numpy template and the parse memo against what they replaced -------------------------

def _template_rows_reference(lang: tuple[tuple[str, ...], ...]) -> tuple[np.ndarray, np.ndarray]:
    """The Python ``template_rows`` the numpy one replaced: the same states in the same order."""
    pat = jsonschema_module._string_language(lang)
    ranges = [_raw_ranges_reference(pat, p) for p in range(pat.num_states)]
    escapes = [any(pat.step(p, d) >= 0 for d in (*jsonschema_module._SHORT_ESCAPES, *range(0x20)))
               for p in range(pat.num_states)]  # not inside a multi-byte character
    ids: dict[tuple[int, int], int] = {(0, 0): 0}
    order = [(0, 0)]
    tgt: list[list[int]] = []
    inc: list[list[int]] = []

    def to(key: tuple[int, int]) -> int:
        j = ids.get(key)
        if j is None:
            j = ids[key] = len(order)
            order.append(key)
        return j

    i = 0
    while i < len(order):
        p, step = order[i]
        row, up = [DEAD] * 256, [0] * 256
        if step == 0:
            if p in pat.accepting:
                row[0x22] = _EXIT
            for b0, b1, p2 in ranges[p]:
                row[b0:b1 + 1] = [to((p2, 0))] * (b1 + 1 - b0)
                if not 0x80 <= b0 < 0xC0:  # a continuation byte adds no character
                    up[b0:b1 + 1] = [1] * (b1 + 1 - b0)
            if escapes[p]:
                row[0x5C] = to((p, _STEP_ESC))
        elif step == _STEP_ESC:
            for dec, letter in jsonschema_module._SHORT_ESCAPES.items():
                p2 = pat.step(p, dec)
                if p2 >= 0:
                    row[ord(letter)], up[ord(letter)] = to((p2, 0)), 1
            row[ord("u")] = to((p, _STEP_U))
        elif step in (_STEP_U, _STEP_U0):
            row[0x30] = to((p, step + 1))
        elif step == _STEP_U00:
            row[0x30], row[0x31] = to((p, _STEP_U000)), to((p, _STEP_U001))
        else:
            base = 0 if step == _STEP_U000 else 16
            for h in range(16):
                p2 = pat.step(p, base + h)
                if p2 >= 0:
                    for ch in dict.fromkeys(f"{h:x}{h:X}"):
                        row[ord(ch)], up[ord(ch)] = to((p2, 0)), 1
        tgt.append(row)
        inc.append(up)
        i += 1
    return np.array(tgt, dtype=np.int64), np.array(inc, dtype=np.int64)


_RAW_CUTS_REFERENCE = (0x20, 0x22, 0x23, 0x5C, 0x5D, 0x80, 0xC0, 0x100)


def _raw_ranges_reference(pat: ContentDFA, p: int) -> tuple[tuple[int, int, int], ...]:
    """The raw bytes a JSON string may hold at state ``p`` of ``pat`` (not ``"``, ``\\`` or a
    control), as (lo, hi, successor) ranges that do not straddle 0x80 or 0xC0."""
    out: list[tuple[int, int, int]] = []
    row = pat.trans[p]
    for lo0, hi0 in itertools.pairwise(_RAW_CUTS_REFERENCE):
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


def _pattern_langs() -> list[tuple[tuple[str, ...], ...]]:
    """String languages with patterns, formats, exclusions and escapes that matter."""
    langs: list[tuple[tuple[str, ...], ...]] = [
        _PLAIN, (("^[a-z]+$",), (), ("x",), ("ab", "cd")), (("^[0-9a-f]{2,6}$",), (), (), ()),
        ((), ("[^\\x00-\\x1f]*",), (), ()), (("é|\\\\u|\"",), (), (), ()),
        (("^[\\x00-\\x1f\\\\/]{1,3}$",), (), (), ()), (("^\\\\[bfnrt]$",), (), (), ()),
        (("^[\\u0000-\\u001f\\u00e9]+$",), (), ("\\n",), ()), (("[\\u0800-\\uffff]",), (), (), ()),
        # each short escape leads to a state of its own: their order of discovery shows
        (("^(\\t1|\\n22|\"333|/4444|\\\\55555|\\x08b|\\x0cf|\\rr)$",), (), (), ()),
    ]
    for fmt in ("email", "hostname", "ipv4", "uuid", "date-time", "uri"):
        t = parse_schema({"type": "string", "format": fmt})
        assert isinstance(t, JsonString)
        langs.append((t.patterns, t.fullmatch, t.avoid, t.excluded))
    return langs


def test_template_rows_are_the_python_construction_state_for_state() -> None:
    """``template_rows`` (the pattern's rows read in numpy, the order of discovery decided on each
    row's distinct successors) gives the Python construction's arrays: same states, same order,
    same counts; fails on a changed discovery order (the backslash before the raw bytes, ``\\/``
    before ``\\\\``), a continuation byte counted or a missing closing quote."""
    for lang in _pattern_langs():
        tgt, inc = template_rows(lang)  # type: ignore[arg-type]
        want_tgt, want_inc = _template_rows_reference(lang)
        assert np.array_equal(tgt, want_tgt), lang
        assert np.array_equal(inc, want_inc), lang


_MEMO_SCHEMAS: list[object] = [
    {"$defs": {"a": {}}, "type": "object",
     "properties": {"x": {"$ref": "#/$defs/a"}, "y": {"type": "array", "items": {"$ref": "#/$defs/a"}}}},
    {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                          "kids": {"type": "array",
                                                                   "items": {"$ref": "#/$defs/node"}}}}},
     "$ref": "#/$defs/node"},
    {"$defs": {"s": {"type": "string", "pattern": "^a"}, "t": {"type": "string", "pattern": "^b"}},
     "oneOf": [{"$ref": "#/$defs/s"}, {"$ref": "#/$defs/t"}, {"type": "integer"}]},
    {"$defs": {"s": {"type": "string", "maxLength": 3}},
     "anyOf": [{"$ref": "#/$defs/s"}, {"not": {"$ref": "#/$defs/s"}, "type": "string"}]},
    {"$defs": {"o": {"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]}},
     "if": {"$ref": "#/$defs/o"}, "then": {"$ref": "#/$defs/o"},
     "else": {"type": "object", "properties": {"z": {"$ref": "#/$defs/o"}}}},
    {"$defs": {"bad": {"type": "string", "pattern": "(?<=x)y"}},
     "if": {"$ref": "#/$defs/bad"}, "then": {"type": "string"},
     "properties": {"p": {"$ref": "#/$defs/bad"}}},
    {"$defs": {"r": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"$ref": "#/$defs/r"}}]}},
     "type": "object", "properties": {"a": {"$ref": "#/$defs/r"}, "b": {"$ref": "#/$defs/r"}}},
    # d and e met at the same depth under different refs: unrolled to different lengths
    {"$defs": {"d": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"k": {"const": 1}},
                                                    "required": ["k"]}, {"$ref": "#/$defs/e"}]},
               "e": {"anyOf": [{"type": "boolean"}, {"$ref": "#/$defs/d"}]}},
     "anyOf": [{"$ref": "#/$defs/d"}, {"$ref": "#/$defs/e"}]},
    # each branch read as a subset, then as a superset (not left out): the readings differ
    {"oneOf": [{"type": "string", "not": {"const": "a"}}, {"type": "string", "const": "a"}]},
    {"oneOf": [{"type": "string", "not": {"const": "a"}, "maxLength": 3}, {"type": "integer"},
               {"type": "string", "minLength": 2, "not": {"const": "ab"}}]},
]


def _parse_or_refusal(schema: object) -> object:
    try:
        return parse_schema(schema)
    except SchemaError as e:
        return f"refused: {e}"


def test_parse_memo_changes_no_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    """A parse that reuses the readings of schema objects met again (same depth, refs and mode)
    reads every schema as one that reads each afresh, refusals and their messages included;
    fails if the memo's key leaves out the depth, the refs or the superset mode, or keeps a
    failure. Runs on the cases above and on every 40th benchmark schema where the data is."""
    schemas = list(_MEMO_SCHEMAS)
    bench = Path(__file__).resolve().parents[2] / "shared" / "data" / "jsonschemabench" / "schemas.jsonl"
    if not bench.exists():
        bench = Path("/work/shared/data/jsonschemabench/schemas.jsonl")
    if bench.exists():
        lines = bench.read_text().splitlines()
        schemas += [json.loads(line)["schema"] for line in lines[::40]]
    memo = [_parse_or_refusal(s) for s in schemas]
    clear_caches()
    monkeypatch.setattr(schemaread._Reader, "read_exactly", schemaread._Reader.read_fresh)
    fresh = [_parse_or_refusal(s) for s in schemas]
    clear_caches()
    assert memo == fresh


def test_row_successors_are_the_rows_distinct_successors() -> None:
    """``row_successors`` (from the rows' runs) lists each row's successors as ``dict.fromkeys``
    of the whole row does, ``DEAD`` left out (fails when a run that falls, or a row's first byte,
    starts no run)."""
    rng = np.random.default_rng(4)
    table = rng.integers(-1, 6, (200, 40))
    table[::3, 5:20] = 2  # long runs
    want = [[r for r in dict.fromkeys(row) if r >= 0] for row in table.tolist()]
    assert row_successors(table) == want


@pytest.mark.parametrize("pattern", ["^(x|yyy)$", "^(ab|c)*$", "^[a-c]{2,4}$", "^(é|ab?)+$", ""])
@pytest.mark.parametrize("bounds", [(0, None), (2, None), (3, None), (0, 3), (1, 5), (3, 3), (2, 40)])
def test_counted_string_tables_are_trimmed_and_exact(pattern: str, bounds: tuple[int, int | None]) -> None:
    """A counted string's table is built with whole runs of counts filled at once (forward, where
    counting leads back to the same entry; backward, where a count's live states are the next
    one's, down to the minimum only): every state must still be reachable and live (trimming
    removes nothing) and the table must write exactly the strings whose decoded text has a length
    within the bounds and matches the pattern (every text of up to 5 characters from the
    pattern's alphabet and a quote, as the generation language writes it, checked); and the
    table is sealed as its construction says (fails when the known value is dropped or wrong)."""
    lo, hi = bounds
    t = JsonString(lo, hi, (pattern,) if pattern else ())
    table = jsonschema_module._string_table(t, 50_000)
    trimmed, _acc = trim(table.trans, table.accepting)
    assert trimmed.shape[0] == table.num_states
    # sealed is set at construction, not computed: it must be what the table says
    assert "sealed" in table.__dict__ and table.sealed == ByteTable(table.trans, table.accepting).sealed
    rx = re.compile(pattern) if pattern else None
    for n in range(6):
        for chars in itertools.product('abcxyé"', repeat=n):
            text = "".join(chars)
            want = lo <= n and (hi is None or n <= hi) and (rx is None or rx.search(text) is not None)
            data = json.dumps(text, ensure_ascii=False)
            s = 0
            for b in data.encode():
                s = int(table.trans[s, b])
                if s < 0:
                    break
            assert (s >= 0 and bool(table.accepting[s])) == want, (pattern, bounds, data)


@pytest.mark.parametrize("v", ["name", "", "a b~!", "a/b", 'say "hi"', "back\\slash", "tab\there",
                               "del\x7f", "café", "日本", "x\u2028y", None, True, 0, -12])
def test_plain_ascii_constants_are_one_literal(v: str | int | bool | None) -> None:
    """A constant whose characters are each one printable ASCII byte with no other text (most
    keys) is written as one literal: the same NFA, node for node, as the sequence of its
    characters' texts (fails when ``/``, ``"`` or ``\\`` or a control, which have escapes or
    alternatives, take the shortcut)."""
    got, ref = ByteNFA(), ByteNFA()
    for nfa in (got, ref):
        nfa.new(), nfa.new()
    jsonschema_module._Emitter(got, 100).const(v, 0, 1)
    jsonschema_module._Emitter(ref, 100).sequence(jsonschema_module._const_texts(v), 0, 1)
    assert got.eps == ref.eps and got.edges == ref.edges


@pytest.mark.parametrize("lang", [_PLAIN, (("^(ab|c)*$",), (), (), ()), ((), FORMATS["date"], (), ()),
                                  ((), (), ("x",), ("on", "off"))])
def test_template_bit_sets_are_the_boolean_closures(lang: tuple[tuple[str, ...], ...]) -> None:
    """The count-by-count passes of ``_string_table`` read the template's edges as bit sets per
    state (``_graph``) and close sets of states over them (``_closed``, ``_union``): the same
    edges and closures as the boolean matrices of the template, and a set already closed is
    returned itself (runs of counts are told apart by identity; fails when a closed seed is
    copied, when a bit is skipped in a union, or when successors and predecessors are swapped)."""
    tgt, inc = _string_template(lang)
    g = jsonschema_module._template_graph(lang)
    n = tgt.shape[0]
    same, up = np.zeros((n, n), dtype=bool), np.zeros((n, n), dtype=bool)
    for q, b in zip(*np.nonzero(tgt >= 0)):
        (up if inc[q, b] == 1 else same)[q, tgt[q, b]] = True

    def bits(mask: np.ndarray) -> int:
        return sum(1 << int(q) for q in np.flatnonzero(mask))

    for q in range(n):
        assert g.same[q] == bits(same[q]) and g.up[q] == bits(up[q])
        assert g.same_back[q] == bits(same[:, q]) and g.up_back[q] == bits(up[:, q])
        assert g.both[q] == bits(same[q] | up[q]) and g.both_back[q] == bits(same[:, q] | up[:, q])
    assert g.exits == bits((tgt == _EXIT).any(axis=1))
    rng = random.Random(7)
    for _ in range(40):
        seed = np.array([rng.random() < 0.2 for _ in range(n)])
        for edges, adj in ((same, g.same), (same | up, g.both), (same.T, g.same_back)):
            want = seed.copy()
            while True:
                grown = want | edges[want].any(axis=0)
                if (grown == want).all():
                    break
                want = grown
            s = jsonschema_module._States(bits(seed))
            got = jsonschema_module._closed(s, adj)
            assert got.bits == bits(want)
            assert (got is s) == bool((want == seed).all())
            assert np.array_equal(got.idx, np.flatnonzero(want))
            assert jsonschema_module._union(bits(seed), adj) == bits(edges[seed].any(axis=0))


def test_only_arrays_and_open_objects_are_looked_up_among_library_structures() -> None:
    """``_minimal`` asks :data:`LIBRARY_STRUCTURES` only about arrays and objects without declared
    properties (a string or a declared object would be hashed once more for nothing): every
    library structure is such (fails when objects, or arrays, are left out of the guard), and
    a library structure is still found there (the same table object twice, across a clear)."""
    assert all(jsonschema_module._may_be_library(t) for t in jsonschema_module.LIBRARY_STRUCTURES)
    assert not jsonschema_module._may_be_library(JsonString())
    for t in jsonschema_module.LIBRARY_STRUCTURES:
        first = jsonschema_module._minimal(t, 50_000)
        clear_caches()
        assert jsonschema_module._minimal(t, 50_000) is first


def _bench_schemas(every: int) -> list[object]:
    """Every ``every``-th schema of JSONSchemaBench's development sample, where the data is."""
    bench = Path(__file__).resolve().parents[2] / "shared" / "data" / "jsonschemabench" / "schemas.jsonl"
    if not bench.exists():
        bench = Path("/work/shared/data/jsonschemabench/schemas.jsonl")
    if not bench.exists():
        return []
    return [json.loads(line)["schema"] for line in bench.read_text().splitlines()[::every]]


_BLOCK_SCHEMAS: list[object] = [
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/p"}, "b": {"$ref": "#/$defs/p"}},
     "required": ["a"],
     "$defs": {"p": {"type": "object", "properties": {"x": {"type": "string", "maxLength": 3},
                                                      "y": {"type": "integer"}}}}},
    {"type": "array", "items": {"type": "object", "properties": {"k": {"enum": ["u", "v"]}}}, "maxItems": 3},
    {"type": "object", "properties": {"s": {"type": "string", "pattern": "^[a-c]+$"},
                                      "n": {"anyOf": [{"type": "null"}, {"type": "number"}]}}},
    {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"q": {"type": "boolean"}}}]},
    {"type": "integer", "minimum": 3, "maximum": 1200},
    {"const": {"a": [1, 2]}},
    True,
]


def test_the_decoder_writes_a_block_into_its_array_as_the_flat_table_reads() -> None:
    """The compile ends at the table kept as its parts (``schema_block``): the decoder's array is
    written from those parts directly (``Nested.write``, dead entries then renumbered to the sink
    row), and must be the array it reads from the flat table (``schema_table``), entry for entry,
    with the same accepting states and periods; the parts are not made flat on the way (the rows
    are written once). Runs on shared parts (a definition used twice), arrays, unions, scalars,
    and every 25th benchmark schema where the data is; fails when a part is left unwritten, a
    shared part is written at the wrong place, dead entries keep ``-1``, or ``of_table`` copies a
    flat table it built."""
    from ltlagent.decode.turnlang import TurnLanguage

    schemas = [*_BLOCK_SCHEMAS, *_bench_schemas(25)]
    nested = 0
    for schema in schemas:
        clear_caches()
        try:
            block = schema_block(schema)
        except (SchemaError, UsageError):
            continue
        was_flat = "flat" in block.__dict__  # (a library constant, made flat once per process)
        got = TurnLanguage.of_table(block)
        if isinstance(block, Nested) and not was_flat:
            nested += 1
            assert "flat" not in block.__dict__, "of_table made the parts flat before copying them"
        clear_caches()
        want = TurnLanguage.of_table(schema_table(schema))
        assert got.trans.shape == want.trans.shape, schema
        assert np.array_equal(got.trans, want.trans), schema
        assert np.array_equal(got.accepting, want.accepting) and got.periods == want.periods, schema
        assert int(got.trans.max()) == got.dead and int(got.trans.min()) >= 0
    assert nested >= 4  # the parts' path is the one exercised
    clear_caches()


def test_schema_block_refuses_what_schema_table_refuses() -> None:
    """The compile and the flat table agree on refusals: an empty table is refused by both."""
    schema = {"type": "string", "pattern": "^a", "not": {"pattern": "^a"}}
    for compile_ in (schema_block, schema_table):
        with pytest.raises(SchemaError, match="allows no value"):
            compile_(schema)
    assert schema_block(True).table().num_states == schema_table(True).num_states


def test_object_and_array_tables_know_their_rim_as_their_rows_say() -> None:
    """``object_table``, ``array_table`` and string tables set their rim at construction (the
    start's ``{``, ``[`` or quote, the end accepting with no row, detached): it must be the rim
    ``Nested.rim`` (``ByteTable.rim``) reads from the rows, on the objects, arrays and strings of
    the cases above and of every 25th benchmark schema (a wrong rim would copy a table wrongly
    into its parent); fails when the start's target, the end or ``detached`` is set wrongly."""
    from ltlagent.text.glue import Nested as _Nested

    computed = _Nested.rim.func  # the cached properties' own functions: from the rows
    computed_flat = ByteTable.rim.func
    schemas = [*_BLOCK_SCHEMAS, *_bench_schemas(25)]
    seen = strings = 0
    for schema in schemas:
        clear_caches()
        try:
            top = schema_block(schema)
        except (SchemaError, UsageError):
            continue
        todo: list[object] = [top]
        while todo:  # the table and every table kept as a part below it
            t = todo.pop()
            if isinstance(t, Nested):
                todo.extend(part for part, _m in t.parts)
                if "rim" in t.__dict__:
                    assert t.__dict__["rim"] == computed(t), schema
                    seen += 1
            elif isinstance(t, ByteTable) and t.source == "json string" and "rim" in t.__dict__:
                assert t.__dict__["rim"] == computed_flat(t), schema
                strings += 1
    assert seen >= 50 and strings >= 20
    for t in (jsonschema_module._string_table(JsonString(2, 5, ("^a",)), 100),
              jsonschema_module._plain_string_table()):
        assert t.__dict__["rim"] == computed_flat(t)
    clear_caches()
