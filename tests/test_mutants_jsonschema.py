"""Constants and enums with characters JSON escapes, through ``schema_dfa`` (behaviour only, so the
tests hold whatever the compile internals become): kills mutants of ``text/jsonschema.py`` that
the schema suites let through (issue 31; docs/mutation.md, "text/jsonschema.py")."""

from __future__ import annotations

import pytest

from ltlagent.text.jsonschema import schema_dfa


@pytest.mark.parametrize("value,yes,no", [
    ('say "hi"', [rb'"say \"hi\""'], [rb'"say "hi""', rb'"say XX\XX"hiXX\XX""']),
    ("a\\b", [rb'"a\\b"'], [rb'"a\b"', rb'"aXX\XX\b"']),
    ("a/b", [rb'"a/b"', rb'"a\/b"'], [rb'"aXX\XX/b"']),
    ("a\nb", [rb'"a\nb"', rb'"a\u000ab"', rb'"a\u000Ab"'], [b'"a\nb"', rb'"a\u000Bb"']),
    ("\x1b", [rb'"\u001b"', rb'"\u001B"'], [b'"\x1b"', rb'"\e"']),
    ("\x00", [rb'"\u0000"'], [rb'"\0"']),
])
def test_a_constant_string_is_written_in_each_of_its_escapes(value: str, yes: list[bytes],
                                                             no: list[bytes]) -> None:
    for schema in ({"const": value}, {"enum": [value, "other"]}):
        dfa = schema_dfa(schema)
        for text in yes:
            assert dfa.matches(text), (schema, text)
        for text in no:
            assert not dfa.matches(text), (schema, text)


def test_fields_narrow_a_top_level_string() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string"}, "n": {"type": "integer"}},
              "required": ["x"]}
    dfa = schema_dfa(schema, {"x": "a+"})
    assert dfa.matches(b'{"x": "aa"}') and dfa.matches(b'{"x":"a", "n": 2}')
    assert not dfa.matches(b'{"x": "b"}') and not dfa.matches(b'{"x": ""}')
    assert schema_dfa(schema).matches(b'{"x": "b"}')


def test_a_schema_over_the_limit_says_so_and_how_to_help() -> None:
    from ltlagent.errors import UsageError
    from ltlagent.text.jsonschema import schema_table

    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"},
                                               "c": {"type": "array", "items": {"type": "string"}}}}
    with pytest.raises(UsageError) as e:
        schema_table(schema, limit=20)
    assert str(e.value) == "the JSON schema needs more than 20 automaton states"
    assert e.value.hint == "simplify the schema (fewer optional properties, shorter bounds)"
    assert schema_table(schema).num_states > 20


def test_arrays_of_objects_and_nested_arrays() -> None:
    dfa = schema_dfa({"type": "array", "items": {"type": "object", "properties": {"k": {"type": "integer"}}}})
    assert dfa.matches(b'[{"k": 1}, {}]') and dfa.matches(b"[]") and dfa.matches(b'[{"k":2},{"k":-0}]')
    assert not dfa.matches(b"[1]") and not dfa.matches(b'[{"k": 1},]') and not dfa.matches(b'{"k": 1}')
    nested = schema_dfa({"type": "object", "properties": {"rows": {"type": "array", "maxItems": 2, "items": {
        "type": "array", "items": {"type": "object", "properties": {"v": {"type": "string"}}}}}}})
    assert nested.matches(b'{"rows": [[{"v": "x"}], []]}') and nested.matches(b'{"rows": []}')
    assert not nested.matches(b'{"rows": [[], [], []]}') and not nested.matches(b'{"rows": [{"v": "x"}]}')


def test_a_parsed_description_is_narrowed_and_bounded_too() -> None:
    from ltlagent.errors import UsageError
    from ltlagent.text.jsonschema import parse_schema, schema_table

    t = parse_schema({"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]})
    table = schema_table(t, {"x": "a+"})
    assert table.content.matches(b'{"x": "aa"}') and not table.content.matches(b'{"x": "b"}')
    with pytest.raises(UsageError) as e:  # an enum (not a string, array or object) over the limit
        schema_table({"enum": [f"alpha{i}" for i in range(30)]}, limit=10)
    assert str(e.value) == "the JSON schema needs more than 10 automaton states"
    assert e.value.hint == "simplify the schema (fewer optional properties, shorter bounds)"
