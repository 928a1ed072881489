"""JSON schemas read on values (issue 30): soundness (oneOf, booleans), ECMA-262 patterns, the
keywords real schemas use (annotations, formats, additional/pattern properties, missing types,
number bounds), each checked against the ``jsonschema`` package on texts sampled from the automaton.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ltlagent.errors import SchemaError
from ltlagent.text import jsontype
from ltlagent.text.bytetable import sample_text
from ltlagent.text.content import pattern_dfa, regex_dfa
from ltlagent.text.jsonschema import description_table, parse_schema, schema_dfa, schema_table
from ltlagent.text.jsontype import JsonInteger, JsonNumber

jsonschema = pytest.importorskip("jsonschema")
from jsonschema import validators  # noqa: E402

NODE = shutil.which("node")


def _valid(schema: Any, value: object) -> bool:
    cls = validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return bool(cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(value))


def _samples_validate(schema: Any, n: int = 60, seed: int = 0) -> list[object]:
    """``n`` texts sampled from the schema's automaton, each valid for ``jsonschema``."""
    table = schema_table(schema)
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        text = sample_text(table, rng).decode("utf-8")
        value = json.loads(text)
        assert _valid(schema, value), (schema, text)
        out.append(value)
    return out


# --- soundness -----------------------------------------------------------------------------------

def test_one_of_overlapping_on_values_is_refused() -> None:
    """``1.0`` and ``0e9035755`` are integers on values, though only the number branch's automaton
    accepts their texts: "exactly one automaton accepts" let both through."""
    with pytest.raises(SchemaError, match="oneOf"):
        parse_schema({"oneOf": [{"type": "number"}, {"type": "integer"}]})
    two_objects = {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}},
                             {"type": "object", "properties": {"b": {"type": "integer"}}}]}
    d = schema_dfa(two_objects)  # each branch only where the other's declared value is not there
    assert not d.matches(b'{"a":1}') and not d.matches(b"{}")  # valid for both
    assert not d.matches(b'{"a":1,"b":2}')
    assert d.matches(b'{"a":1,"b":"x"}')  # only the first branch
    _samples_validate(two_objects)


def test_one_of_other_branches_are_read_as_supersets() -> None:
    """The branch ``{"maxLength": 3}`` is written as strings (its type read from the keyword), but
    every integer satisfies it too: against the other branches it counts as all it allows, so no
    integer is written (each is valid for both branches)."""
    schema = {"oneOf": [{"type": "integer"}, {"maxLength": 3}]}
    d = schema_dfa(schema)
    assert not d.matches(b"1") and not d.matches(b"-20") and d.matches(b'"abc"')
    _samples_validate(schema)


def test_one_of_separated_by_required_names() -> None:
    """Each branch leaves out a name the other requires: a value with both is in neither."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "source": {"type": "string"},
                                               "dist": {"type": "string"}},
              "oneOf": [{"required": ["name", "source"]}, {"required": ["name", "dist"]}]}
    d = schema_dfa(schema)
    assert d.matches(b'{"name":"a","source":"s"}') and d.matches(b'{"name":"a","dist":"d"}')
    assert not d.matches(b'{"name":"a","source":"s","dist":"d"}')
    _samples_validate(schema)


def test_subsets_for_unique_items_dependencies_min_properties() -> None:
    unique = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    assert schema_dfa(unique).matches(b"[1]") and not schema_dfa(unique).matches(b"[1,1]")
    deps = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                                             "c": {"type": "string"}},
            "required": ["a"], "dependencies": {"a": ["b"], "c": ["a"]}}
    d = schema_dfa(deps)
    assert d.matches(b'{"a":1,"b":2}') and not d.matches(b'{"a":1}')
    assert not d.matches(b'{"a":1,"b":2,"c":"x"}')  # an optional trigger is not written
    nonempty = {"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 1}
    assert not schema_dfa(nonempty).matches(b"{}") and schema_dfa(nonempty).matches(b'{"a":1}')
    for schema in (unique, deps, nonempty):
        _samples_validate(schema)


def test_one_of_disjoint_branches_compile_as_a_union() -> None:
    by_kind = schema_dfa({"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]})
    assert by_kind.matches(b'"x"') and by_kind.matches(b"3") and by_kind.matches(b"null")
    tagged = {"type": "object", "oneOf": [
        {"properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
        {"properties": {"kind": {"const": "b"}, "y": {"type": "string"}}, "required": ["kind"]}]}
    d = schema_dfa(tagged)
    assert d.matches(b'{"kind":"a","x":1}') and d.matches(b'{"kind":"b","y":"s"}')
    assert not d.matches(b'{"kind":"a","y":"s"}')
    _samples_validate(tagged)


def test_boolean_schemas_anywhere() -> None:
    anything = schema_dfa(True)
    for text in (b"1", b"-2.5e3", b'"x"', b"null", b"[]", b'{"a":null, "b":[]}', b'[{}, 1]'):
        assert anything.matches(text), text
    with pytest.raises(SchemaError, match="allows no value"):
        parse_schema(False)
    d = schema_dfa({"type": "object", "properties": {"a": False, "b": {"type": "integer"}}})
    assert d.matches(b'{"b":1}') and not d.matches(b'{"a":1,"b":1}')
    assert schema_dfa({"type": "array", "items": False}).matches(b"[]")
    assert not schema_dfa({"type": "array", "items": False}).matches(b"[1]")
    with pytest.raises(SchemaError, match="allows no value"):
        parse_schema({"type": "object", "properties": {"a": False}, "required": ["a"]})


@pytest.mark.parametrize("schema", [
    {"if": {"type": "string", "pattern": "^a"}, "then": {"type": "integer", "minimum": -20, "maximum": 40},
     "else": {"type": "string", "pattern": "^a"}},  # found unseeded (make test-explore): sides exclusive
    {"type": "string", "pattern": "^a", "not": {"pattern": "^a"}},
    {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": "^b", "not": {"pattern": "b"}}},
])
def test_a_schema_no_value_satisfies_is_refused_once_its_table_is_empty(schema: Any) -> None:
    """Contradictions the description does not show (patterns, if/then/else) leave the table
    empty: refused as allowing no value, not compiled into a tool that can never be called; a
    part that is empty where it is optional is left out, as before."""
    with pytest.raises(SchemaError, match="allows no value"):
        schema_table(schema)
    for s in (schema_table({"type": "object", "properties": {"x": schema, "y": {"const": 1}}}),
              schema_table({"type": "array", "items": schema})):
        assert not s.empty
    assert schema_dfa({"type": "object", "properties": {"x": schema, "y": {"const": 1}}}).matches(b'{"y":1}')
    assert description_table(parse_schema(schema)).empty  # (the parts' table: empty, not refused)
    item = {"type": "object", "required": ["b"], "properties": {"b": schema}}
    nested = {"type": "object", "required": ["a"],
              "properties": {"a": {"type": "array", "minItems": 1, "items": item}}}
    with pytest.raises(SchemaError, match=r"in property 'a' › items › property 'b'( › items)?\)"):
        schema_table(nested)


# --- ECMA-262 patterns ---------------------------------------------------------------------------

def _string(pattern: str) -> Any:
    return schema_dfa({"type": "string", "pattern": pattern})


def test_dollar_is_the_end_of_input() -> None:
    d = _string("^[A-Z]{2}[0-9]{6}$")
    assert d.matches(b'"HS525965"') and not d.matches(b'"HS525965\\n"')


def test_classes_over_code_points() -> None:
    assert _string(r"^\S+$").matches('"é"'.encode())
    assert _string(r"^\D$").matches('"٣"'.encode())  # ECMA-262's \d is [0-9] only
    assert _string(r"^[^\d]$").matches('"é"'.encode())
    assert _string(r"^\W$").matches('"é"'.encode())
    assert not _string(r"^\w$").matches('"é"'.encode())
    for space in ("\u00a0", "\ufeff", "\u2028", "\u3000"):
        assert _string(r"^\s$").matches(json.dumps(space, ensure_ascii=False).encode()), space
        assert not _string(r"^\S$").matches(json.dumps(space, ensure_ascii=False).encode()), space
    assert not _string("^.$").matches('"\u2028"'.encode()) and _string("^.$").matches('"é"'.encode())


@pytest.mark.parametrize("pattern", [r"a\Z", "(?i)a", "(?P<n>a)", "a{,3}", "[]a", "[^]", r"\a"])
def test_python_only_syntax_is_refused(pattern: str) -> None:
    with pytest.raises(SchemaError, match="ECMA-262"):
        parse_schema({"type": "string", "pattern": pattern})


def test_spec_regexes_keep_python_semantics() -> None:
    """The spec's ``:regex`` (content.py's default dialect) is unchanged: Python's ``$`` in a
    search, and classes that never match non-ASCII characters."""
    assert pattern_dfa("a$", search=True).matches(b"a\n")
    assert not regex_dfa(r"\S+").matches("é".encode())


PATTERNS = [r"^\d+$", r"^\D+$", r"^\w+$", r"^\W$", r"^\s$", r"^\S+$", r"^[^a-c]+$", r"^.$", r"^.+$",
            "^abc$", "b", "^[A-Z]{2}[0-9]{2}$", r"^[\s\S]$", r"^(?:x|yz)*$", r"é$", "^[^\\d\\s]$",
            r"^a.c$", r"^\u00e9$", "^$|^[a-z]+$", "^dev|alpha|beta$", "^(a|b)$|c", "^[a-z]{1,300}$"]
STRINGS = ["123", "abc", "abc\n", "é", "٣", "\u00a0", "\ufeff", "\u2028", "\r", "\n", " ", "a\u2029c",
           "AB12", "AB12\n", "xyzx", "x", "", "_", "😀", "a\rc", "devx", "xbeta", "betax", "xa", "cc"]


@pytest.mark.skipif(NODE is None, reason="node (the ECMA-262 reference) is not installed")
def test_patterns_agree_with_ecma262() -> None:
    """Our search DFAs against JavaScript's ``RegExp(p, "u").test(s)``."""
    pairs = [(p, s) for p in PATTERNS for s in STRINGS]
    code = ("let d='';process.stdin.on('data',c=>d+=c).on('end',()=>{const ps=JSON.parse(d);"
            "console.log(JSON.stringify(ps.map(([p,s])=>new RegExp(p,'u').test(s))))})")
    got = subprocess.run([str(NODE), "-e", code], input=json.dumps(pairs), capture_output=True,
                         text=True, timeout=60, check=True)
    for (p, s), want in zip(pairs, json.loads(got.stdout)):
        assert pattern_dfa(p, search=True, ecma=True).matches(s.encode()) == want, (p, s)


# --- coverage ------------------------------------------------------------------------------------

def test_annotations_and_unknown_keywords_are_ignored() -> None:
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "id": "http://x/y", "title": "T",
              "type": "object", "x-kubernetes-group": "g", "readonly": True, "links": [],
              "properties": {"a": {"type": "string", "example": "e", "_format": "z", "self": {}}}}
    d = schema_dfa(schema)
    assert d.matches(b'{"a":"x"}')


@pytest.mark.parametrize(("fmt", "good", "bad"), [
    ("date", ["2024-02-29", "1999-12-31"], ["2023-02-29", "2024-13-01", "2024-1-01"]),
    ("time", ["23:59:59Z", "01:02:03.5+05:30"], ["24:00:00Z", "12:00:00"]),
    ("date-time", ["2024-02-29T12:00:00Z"], ["2024-02-29 12:00:00Z"]),
    ("duration", ["P1Y2M3DT4H5M6S", "PT1S", "P2W"], ["P", "PT", "P1H"]),
    ("email", ["a.b@example.com"], ["a@@b", "@b.c", "a..b@c.d"]),
    ("hostname", ["example.com", "a-b.c"], ["-a.com", "a_b.com", "a..b"]),
    ("ipv4", ["192.168.0.1"], ["256.1.1.1", "01.1.1.1", "1.1.1"]),
    ("ipv6", ["::1", "2001:db8::8a2e:370:7334", "::ffff:1.2.3.4"], ["1:::2", "12345::"]),
    ("uuid", ["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000"]),
    ("uri", ["https://example.com/a?b=c#d", "urn:isbn:0451450523"], ["//example.com", "a b:c"]),
])
def test_formats(fmt: str, good: list[str], bad: list[str]) -> None:
    schema = {"type": "string", "format": fmt}
    d = schema_dfa(schema)
    for s in good:
        assert d.matches(json.dumps(s).encode()), s
    for s in bad:
        assert not d.matches(json.dumps(s).encode()), s
    _samples_validate(schema, n=40)


def test_unknown_formats_refused_or_ignored_by_option() -> None:
    with pytest.raises(SchemaError, match="format"):
        parse_schema({"type": "string", "format": "int32"})
    assert parse_schema({"type": "string", "format": "int32"}, unknown_formats="ignore")
    assert parse_schema({"type": "integer", "format": "int32"})  # format constrains strings only


def test_additional_and_pattern_properties() -> None:
    schema = {"type": "object", "properties": {"id": {"type": "integer"}},
              "patternProperties": {"^x-": {"type": "string"}},
              "additionalProperties": {"type": "boolean"}}
    d = schema_dfa(schema)
    assert d.matches(b'{"id":1,"x-a":"s","flag":true}')
    assert not d.matches(b'{"x-a":true}') and not d.matches(b'{"flag":"s"}')
    assert not d.matches(b'{"id":true}')  # a declared key never takes the additional schema
    _samples_validate(schema)
    free = schema_dfa({"type": "object"})
    assert free.matches(b'{"a":[1,{}],"c":"d"}')
    assert not free.matches(b'{"a":[[[]]]}')  # deeper than ANY_DEPTH below the object


def test_missing_type_read_from_keywords() -> None:
    d = schema_dfa({"properties": {"a": {"maxLength": 2}}, "required": ["a"]})
    assert d.matches(b'{"a":"xy"}') and not d.matches(b'{"a":"xyz"}')
    assert schema_dfa({"minimum": 3}).matches(b"3.5")


def test_all_of_and_siblings_intersect() -> None:
    schema = {"$defs": {"base": {"type": "object", "properties": {"id": {"type": "integer"}},
                                 "required": ["id"]}},
              "allOf": [{"$ref": "#/$defs/base"}, {"properties": {"name": {"type": "string"}}}],
              "properties": {"id": {"minimum": 0}}}
    d = schema_dfa(schema)
    assert d.matches(b'{"id":3,"name":"n"}') and not d.matches(b'{"id":-3}')
    assert not d.matches(b'{"name":"n"}')
    _samples_validate(schema)


def test_draft04_exclusive_bounds() -> None:
    d = schema_dfa({"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer",
                    "minimum": 0, "exclusiveMinimum": True})
    assert not d.matches(b"0") and d.matches(b"1")


def number_schema(lo: Any, hi: Any, lo_open: bool, hi_open: bool) -> dict[str, Any]:
    """``{"type": "number"}`` with these bounds (None: none), each exclusive where open."""
    schema: dict[str, Any] = {"type": "number"}
    if lo is not None:
        schema["exclusiveMinimum" if lo_open else "minimum"] = float(lo)
    if hi is not None:
        schema["exclusiveMaximum" if hi_open else "maximum"] = float(hi)
    return schema


BOUNDS = st.one_of(st.none(), st.decimals(min_value=-30, max_value=30, places=2, allow_nan=False))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(BOUNDS, BOUNDS, st.booleans(), st.booleans(),
       st.lists(st.decimals(min_value=-40, max_value=40, places=3, allow_nan=False), max_size=12))
def test_number_bounds_are_exact(lo: Any, hi: Any, lo_open: bool, hi_open: bool, xs: list[Any]) -> None:
    schema = number_schema(lo, hi, lo_open, hi_open)
    try:
        d = schema_dfa(schema)
    except SchemaError:
        assert lo is not None and hi is not None and lo >= hi
        return
    for x in xs:
        text = format(x, "f")
        f = Fraction(text)
        a = None if lo is None else Fraction(repr(float(lo)))
        b = None if hi is None else Fraction(repr(float(hi)))
        want = ((a is None or f > a or (not lo_open and f == a))
                and (b is None or f < b or (not hi_open and f == b)))
        assert d.matches(text.encode()) == want, (schema, text)


REAL = [
    {"type": "object", "properties": {"port": {"type": "integer", "minimum": 1, "maximum": 65535},
                                      "host": {"type": "string", "format": "hostname"},
                                      "tags": {"type": "array", "items": {"type": "string"},
                                               "maxItems": 3},
                                      "meta": {"type": "object",
                                               "additionalProperties": {"type": "string"}}},
     "required": ["port"]},
    {"anyOf": [{"type": "string", "pattern": "^[a-z]+$"}, {"type": "number", "maximum": 0}]},
    {"type": "array", "items": {"$ref": "#"}, "maxItems": 2},
    {"type": ["string", "null"], "enum": ["a", None, 3], "title": "t"},
    {"enum": [1.5, [1, 2], {"a": "b"}]},
]


@pytest.mark.parametrize("schema", REAL)
def test_sampled_texts_validate(schema: Any) -> None:
    _samples_validate(schema, n=80)


def test_recursion_followed_once_when_twice_is_too_big() -> None:
    """A recursive schema is followed twice inside itself; when that needs more states than the
    limit, once (a smaller subset: children are not written)."""
    tree = {"$defs": {"n": {"type": "object", "properties": {
        "v": {"type": "string", "maxLength": 20},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 3}}}},
        "$ref": "#/$defs/n"}
    deep = b'{"v":"a","kids":[{"v":"b","kids":[]}]}'
    assert schema_dfa(tree).matches(deep)
    assert not schema_dfa(tree).matches(b'{"kids":[{"kids":[{}]}]}')  # followed twice, then cut
    small = schema_table(tree, limit=600)
    assert small.content.matches(b'{"v":"a","kids":[]}') and not small.content.matches(deep)
    _samples_validate(tree)


def test_mutual_recursion_is_read_once_per_multiset_of_refs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reading depends on how often each ``$ref`` was followed, not in which order: four
    definitions that all refer to one another are read once per multiset of refs followed (681
    readings; keyed by the order, 9,206: a recursive schema of expressions took 0.3 s to read), and
    the recursion is still cut after the second time a ref is followed, whatever the path."""
    from ltlagent.text import schemaread
    names = "abcd"
    schema = {"$defs": {n: {"type": "object", "properties": {m: {"$ref": f"#/$defs/{m}"} for m in names}}
                        for n in names}, "$ref": "#/$defs/a"}
    calls = [0]
    fresh = schemaread._Reader.read_fresh

    def counted(self: Any, *args: Any) -> Any:
        calls[0] += 1
        return fresh(self, *args)

    monkeypatch.setattr(schemaread._Reader, "read_fresh", counted)
    t = parse_schema(schema)
    assert calls[0] <= 1000
    monkeypatch.undo()
    d = schema_dfa(t)
    assert d.matches(b'{"b":{"a":{"b":{}}}}') and d.matches(b'{"c":{"d":{"c":{"d":{}}}}}')
    assert not d.matches(b'{"b":{"a":{"b":{"a":{}}}}}')  # a followed a third time: cut
    assert not d.matches(b'{"b":{"c":{"b":{"c":{"b":{}}}}}}')  # b a third time, by another path


# --- not, if/then/else, oneOf by complements, multipleOf, closed intersections ---------------------

def _nested_unions(d: int) -> Any:
    """Unions of two objects, each with ``x`` the same again ``d - 1`` deep: an intersection of two
    of them meets every pair of branches at every level (4^d meets)."""
    if d == 0:
        return {"type": "string"}
    return {"anyOf": [{"type": "object", "properties": {"x": _nested_unions(d - 1), "a": {"const": 1}}},
                      {"type": "object", "properties": {"x": _nested_unions(d - 1), "b": {"const": 2}}}]}


def test_an_intersection_too_large_to_describe_is_refused_in_bounded_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An intersection of unions nested in objects distributes at every level: the work grows as
    the product of the unions down the nesting (vega's schema took minutes and more than 6 GB
    before a ``MemoryError``). Past ``MEET_WORK`` meets of parts it is refused with its path, a
    ``SchemaError``, not computed; below it, read as before. Fails when the budget is not shared
    down the recursion (each meet would start a new one) or not spent."""
    small = {"allOf": [_nested_unions(4), _nested_unions(4)]}
    assert not schema_table(small).empty
    monkeypatch.setattr(jsontype, "MEET_WORK", 2_000)
    with pytest.raises(SchemaError, match=r"at /allOf/1: an intersection .* more than 2,000 intersections"):
        parse_schema({"allOf": [_nested_unions(7), _nested_unions(7)]})
    assert not schema_table(small).empty  # 4^4 meets: within even this budget


def test_not_of_simple_forms() -> None:
    """``not`` is a subset of the complement of a superset of its schema: patterns, constants,
    required names, types and numbers bounds exactly; what it cannot say is not written."""
    name = {"type": "string", "minLength": 1, "not": {"pattern": "^[.,*\\\\\\-\\s]+$"}}
    d = schema_dfa(name)
    assert d.matches(b'"Ann"') and not d.matches(b'"--"') and not d.matches(b'" "')
    port = {"type": "integer", "minimum": 1024, "maximum": 65535, "not": {"enum": [6379, 6380]}}
    d = schema_dfa(port)
    assert d.matches(b"6381") and d.matches(b"1024") and not d.matches(b"6379")
    assert not d.matches(b"6380") and not d.matches(b"1023")
    both = {"type": "object", "properties": {"body": {"type": "string"}, "bodyValue": {"type": "string"}},
            "not": {"required": ["body", "bodyValue"]}}
    d = schema_dfa(both)
    assert d.matches(b'{"body":"x"}') and d.matches(b'{"bodyValue":"x"}')
    assert not d.matches(b'{"body":"x","bodyValue":"y"}')
    not_array = {"not": {"type": "array"}}
    d = schema_dfa(not_array)
    assert d.matches(b"1") and d.matches(b'"x"') and d.matches(b"{}") and not d.matches(b"[]")
    reserved = {"type": "object", "properties": {"a": {"type": "integer"}},
                "patternProperties": {"^(links)$": {"not": {}}}}
    assert not schema_dfa(reserved).matches(b'{"a":1,"links":1}')
    names = {"type": "string", "pattern": "^[a-z]+$", "not": {"enum": ["test", "include"]}}
    d = schema_dfa(names)
    assert d.matches(b'"tests"') and not d.matches(b'"test"')
    for schema in (name, port, both, not_array, reserved, names):
        _samples_validate(schema)


def test_if_then_else_on_a_discriminator() -> None:
    """``if`` on a property's constant: (if ∧ then) ∪ (¬if ∧ else), the other side exact."""
    schema = {"type": "object", "properties": {"type": {"enum": ["a", "b", "c"]}, "x": {"type": "integer"},
                                               "y": {"type": "string"}},
              "required": ["type"],
              "if": {"properties": {"type": {"const": "a"}}},
              "then": {"required": ["x"]}, "else": {"required": ["y"]}}
    d = schema_dfa(schema)
    assert d.matches(b'{"type":"a","x":1}') and not d.matches(b'{"type":"a","y":"s"}')
    assert d.matches(b'{"type":"b","y":"s"}') and not d.matches(b'{"type":"b","x":1}')
    no_else = {"type": "object", "properties": {"kind": {"type": "string"}, "serve": {"type": "string"}},
               "if": {"properties": {"kind": {"const": "static"}}, "required": ["kind"]},
               "then": {"required": ["serve"]}}
    d = schema_dfa(no_else)
    assert d.matches(b'{"kind":"static","serve":"x"}') and not d.matches(b'{"kind":"static"}')
    assert d.matches(b'{"kind":"other"}') and d.matches(b"{}")
    for s in (schema, no_else):
        _samples_validate(s)


def test_one_of_apart_by_complements() -> None:
    """Branches that overlap are each written without the others' values."""
    area = {"type": "object", "properties": {"radius": {"type": "number"}, "length": {"type": "number"},
                                             "width": {"type": "number"}},
            "oneOf": [{"required": ["radius"]}, {"required": ["length", "width"]}]}
    d = schema_dfa(area)
    assert d.matches(b'{"radius":1}') and d.matches(b'{"length":1,"width":2}')
    assert not d.matches(b'{"radius":1,"length":1,"width":2}')
    editor = {"oneOf": [{"enum": ["nano", "vim"]}, {}]}  # the enum's values are valid for both
    d = schema_dfa(editor)
    assert not d.matches(b'"vim"') and d.matches(b'"emacs"') and d.matches(b"1")
    promo = {"type": "object", "oneOf": [
        {"properties": {"category": {"enum": ["mot"]}}, "required": ["url"]},
        {"properties": {"category": {"enum": ["organ"]}}, "required": ["url"]}],
        "properties": {"url": {"type": "string"}}}
    d = schema_dfa(promo)
    assert d.matches(b'{"url":"u","category":"mot"}') and d.matches(b'{"url":"u","category":"organ"}')
    assert not d.matches(b'{"url":"u"}')  # no category: valid for both
    for s in (area, editor, promo):
        _samples_validate(s)


def _multiples(schema: Any, lo: int, hi: int) -> set[int]:
    d = schema_dfa(schema)
    return {x for x in range(lo, hi) if d.matches(str(x).encode())}


def test_multiple_of_on_integers() -> None:
    """An integer step: the integers it divides, negative ones, 0 and -0 included, any length; never
    a fraction or an exponent (``10.0``, ``1e1`` are valid but not written)."""
    schema = {"type": "integer", "multipleOf": 7, "minimum": -30, "maximum": 50}
    assert _multiples(schema, -100, 100) == {x for x in range(-30, 51) if x % 7 == 0}
    d = schema_dfa(schema)
    assert d.matches(b"-0") and not d.matches(b"7.0") and not d.matches(b"7e0")
    big = schema_dfa({"type": "integer", "multipleOf": 12})
    for x in (10 ** 30, 10 ** 30 + 4, -(10 ** 30) - 8, 123456789012):
        assert big.matches(str(x).encode()) == (x % 12 == 0), x
    assert _multiples({"multipleOf": 1000, "type": "integer"}, -5000, 5001) == {
        x for x in range(-5000, 5001) if x % 1000 == 0}
    assert _multiples({"type": "number", "multipleOf": 2.5, "minimum": 0}, -10, 30) == {0, 5, 10, 15, 20, 25}
    with pytest.raises(SchemaError, match="multipleOf"):
        parse_schema({"type": "integer", "multipleOf": 1001})
    _samples_validate({"type": "integer", "multipleOf": 12})
    _samples_validate(schema)


def test_multiple_of_decimal_steps_sound_in_floating_point() -> None:
    """A float step is checked by the ``jsonschema`` package as ``x / step`` in floating point:
    ``0.07`` is not a multiple of ``0.01`` there. Integers below 2**53 (and whose quotient is) are
    written, each exact in floating point; steps whose double is too far from the decimal are
    refused."""
    for step in (0.01, 0.1, 0.3, 0.05, 1e-6, 0.25):
        schema = {"type": "number", "multipleOf": step}
        d = schema_dfa(schema)
        assert not d.matches(b"0.07") and not d.matches(b"1.5")
        rng = random.Random(1)
        cap = parse_schema(schema)
        assert isinstance(cap, JsonInteger | JsonNumber) and cap.hi is not None
        hi = int(cap.hi)
        xs = [0, 1, -1, 3, hi, -hi, hi - 1, *(rng.randrange(-hi, hi) for _ in range(300))]
        for x in xs:
            if d.matches(str(x).encode()):
                assert _valid(schema, x), (step, x)
        assert not d.matches(str(hi + 3).encode())
        _samples_validate(schema, n=30)
    with pytest.raises(SchemaError, match="multipleOf"):
        parse_schema({"type": "number", "multipleOf": 0.7})  # 0.7's double is 2**-53.8 off


def test_intersections_of_closed_objects() -> None:
    """Two objects that both constrain undeclared keys (one with patterns at most): an undeclared
    key must satisfy both sides."""
    schema = {"allOf": [
        {"type": "object", "properties": {"a": {"type": "integer"}},
         "additionalProperties": {"type": "integer"}},
        {"type": "object", "properties": {"a": {}, "b": {"type": "integer"}},
         "patternProperties": {"^x": {"minimum": 0}}, "additionalProperties": False}]}
    d = schema_dfa(schema)
    assert d.matches(b'{"a":1,"b":2}') and d.matches(b'{"a":1,"x1":3}')
    assert not d.matches(b'{"a":1,"x1":-3}') and not d.matches(b'{"a":1,"y":3}')
    assert not d.matches(b'{"a":1,"x1":"s"}')
    _samples_validate(schema)


@pytest.mark.parametrize("fmt", ["url", "iri", "idn-email", "byte", "regex"])
def test_more_formats(fmt: str) -> None:
    _samples_validate({"type": "string", "format": fmt}, n=40)


_LEAVES = st.sampled_from([
    {"type": "integer", "minimum": -20, "maximum": 40}, {"type": "integer", "multipleOf": 3},
    {"type": "number", "multipleOf": 0.1, "maximum": 5}, {"type": "string", "pattern": "^a"},
    {"type": "string", "maxLength": 2}, {"enum": ["a", "b", 1, None]}, {"const": 0}, {"type": "null"},
    {"type": "object", "properties": {"k": {"enum": ["x", "y"]}, "v": {"type": "integer"}},
     "required": ["k"]},
    {"properties": {"k": {"const": "x"}}}, {"required": ["v"]}, {"type": "array", "maxItems": 1},
    {"minimum": 3}, {}, {"type": ["string", "integer"]}])


def _combined(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        children.map(lambda c: {"not": c}),
        st.lists(children, min_size=2, max_size=3).map(lambda cs: {"oneOf": cs}),
        st.lists(children, min_size=2, max_size=2).map(lambda cs: {"allOf": cs}),
        st.tuples(children, children, children).map(lambda t: {"if": t[0], "then": t[1], "else": t[2]}),
        st.tuples(children, children).map(lambda t: {"if": t[0], "then": t[1]}))


def _infinite(x: object) -> bool:
    """Whether ``x`` (as ``json.loads`` read it) holds a float past a double's range."""
    if isinstance(x, float):
        return not math.isfinite(x)
    if isinstance(x, list):
        return any(_infinite(y) for y in x)
    return isinstance(x, dict) and any(_infinite(y) for y in x.values())


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.recursive(_LEAVES, _combined, max_leaves=4))
@example({"if": {"type": "string", "pattern": "^a"},
          "then": {"type": "integer", "minimum": -20, "maximum": 40},
          "else": {"type": "string", "pattern": "^a"}})  # found unseeded: no value, an empty table
@example({"not": {"allOf": [{"type": "number", "multipleOf": 0.1, "maximum": 5},
                            {"type": "string", "pattern": "^a"}]}})  # found unseeded: 6E056388605, inf
def test_combinators_sound_on_random_schemas(schema: Any) -> None:
    """Whatever ``not``/``if``/``oneOf``/``multipleOf`` combination compiles writes only values the
    ``jsonschema`` package accepts. An unbounded number may be written past a double's range
    (docs/design.md §5.1): ``json.loads`` reads it as ``inf``, on which the package's
    ``multipleOf`` raises ``OverflowError`` instead of judging; that value alone is not judged."""
    try:
        table = schema_table(schema)
    except SchemaError:
        return
    rng = random.Random(0)
    for _ in range(12):
        text = sample_text(table, rng).decode("utf-8")
        value = json.loads(text)
        try:
            ok = _valid(schema, value)
        except OverflowError:
            assert _infinite(value), (schema, text)
            continue
        assert ok, (schema, text)


@pytest.mark.parametrize("name", ["string", "integer", "number", "boolean", "null", "array", "object"])
def test_scalar_leaves_read_as_the_general_reading(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``{"type": T}`` with only annotations beside it is read from a table of the scalar types
    (most leaves of real schemas); the reading is the general reader's, in both modes (the
    subset, and the superset ``not`` and ``oneOf`` read), nested and at the root, and a leaf with
    one more assertion, a type list or a type that is not scalar still takes the general path."""
    from ltlagent.text import schemaread

    schemas: list[Any] = [
        {"type": name},
        {"type": name, "description": "d", "title": "t", "x-kind": 1},
        {"type": "object", "properties": {"v": {"type": name, "examples": [1]}}, "required": ["v"]},
        {"type": "array", "items": {"type": name}},
        {"not": {"type": name}},
        {"oneOf": [{"type": name}, {"type": "string", "minLength": 2}, {"type": "integer", "minimum": 5}]},
        {"type": name, "enum": [None, True, 0, "a"]},
        {"type": [name, "null"]},
    ]
    fast = []
    for s in schemas:
        try:
            fast.append(parse_schema(s))
        except SchemaError as e:
            fast.append(str(e))
    monkeypatch.setattr(schemaread, "_TYPE_ONLY", frozenset({"(none)"}))  # every leaf the general way
    for s, got in zip(schemas, fast):
        try:
            want: Any = parse_schema(s)
        except SchemaError as e:
            want = str(e)
        assert got == want, s
