"""Constants and enums with characters JSON escapes, through ``schema_dfa`` (behaviour only, so the
tests hold whatever the compile internals become): kills mutants of ``text/jsonschema.py`` that
the schema suites let through (issue 31; docs/mutation.md, "text/jsonschema.py")."""

from __future__ import annotations

import pytest

from ltlagent.text.jsonschema import clear_caches, schema_dfa


@pytest.fixture(autouse=True)
def _fresh() -> None:
    """Each test builds its automata afresh (see ``tests/test_mutants_strings.py``: the compile
    caches would hide the compile functions from a mutation run's choice of tests)."""
    clear_caches()


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


def test_a_pattern_property_may_match_only_the_empty_key() -> None:
    """A class of undeclared keys whose only key is ``""`` (its automaton: the start state alone,
    accepting) is still written (``extra_keys`` keeps a class whose start state is live)."""
    dfa = schema_dfa({"type": "object", "patternProperties": {"^$": {"type": "integer"}},
                      "additionalProperties": False})
    assert dfa.matches(b'{"": 1}') and dfa.matches(b"{}")
    assert not dfa.matches(b'{"": "x"}') and not dfa.matches(b'{"a": 1}')
    dfa = schema_dfa({"type": "object", "additionalProperties": False,
                      "patternProperties": {"^$": {"type": "integer"}, "^b": {"type": "null"}}})
    assert dfa.matches(b'{"": 1, "b": null}') and dfa.matches(b'{"bb": null, "": 2}')
    assert not dfa.matches(b'{"": null}')


def test_keys_too_many_states_apart_are_refused_naming_both_patterns() -> None:
    """Keys matching one pattern and not another: the error names the pattern and the complement
    of the other, within UTF-8 texts (a regular expression over the whole text, not a search)."""
    from ltlagent.errors import UsageError

    with pytest.raises(UsageError) as e:
        schema_dfa({"type": "object", "patternProperties": {"a.{5}": {"type": "integer"},
                                                            "b.{6}": {"type": "string"}}})
    assert str(e.value) == ("the intersection of 'search a.{5}' and '(not (search b.{6})) & "
                            "(regex (?s:.*))' needs more than 4000 automaton states")


@pytest.mark.parametrize("schema,yes,no", [
    ({"type": "string", "maxLength": 2, "pattern": "^a"}, [b'"a"', b'"ab"', b'"a\\n"'],
     [b'""', b'"abc"', b'"b"']),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
     [b"[1]", b"[1, 2]", b"[1,2,-0]"], [b"[]", b"[1,2,3,4]", b"[1,]", b'["a"]']),
    ({"type": "array", "items": {"type": "boolean"}, "minItems": 2},
     [b"[true, false]", b"[true,true,false,true]"], [b"[true]", b"[]"]),
    ({"type": "array", "maxItems": 0}, [b"[]"], [b"[1]"]),
    ({"type": "object", "properties": {"k": {"type": "string", "maxLength": 1}, "n": {"type": "null"}},
      "required": ["n"], "additionalProperties": {"type": "integer"}},
     [b'{"n": null}', b'{"k": "x", "n":null, "z": 3}', b'{"n": null,"a": 1, "b": 2}'],
     [b"{}", b'{"k": "xy", "n": null}', b'{"n": null, "z": "s"}', b'{"n": null, "n": null}']),
])
def test_the_reference_construction_writes_the_same_texts(schema: dict[str, object], yes: list[bytes],
                                                          no: list[bytes]) -> None:
    """``emit`` into a plain ``ByteNFA`` (strings copied state by state, arrays and objects written
    inline) accepts what ``schema_dfa`` accepts, on these texts."""
    from ltlagent.errors import UsageError
    from ltlagent.text.content import ByteNFA, as_dfa
    from ltlagent.text.glue import Glue
    from ltlagent.text.jsonschema import emit, parse_schema

    nfa = ByteNFA()
    start, final = nfa.new(), nfa.new()
    emit(nfa, parse_schema(schema), start, final)
    trans, acc = nfa.determinize(start, final, 50_000, "schema", "")
    copied, fast = as_dfa(trans, acc, "copied"), schema_dfa(schema)
    for text in yes:
        assert copied.matches(text) and fast.matches(text), text
    for text in no:
        assert not copied.matches(text) and not fast.matches(text), text
    if schema.get("type") in ("string", "array", "object"):  # built as a table: bounded by ``limit``
        with pytest.raises(UsageError, match="more than 2 automaton states"):
            glue = Glue()
            emit(glue, parse_schema(schema), glue.new(), glue.new(), limit=2)


def test_an_integer_constant_is_written_as_itself_and_zero_also_as_minus_zero() -> None:
    for schema in ({"const": 5}, {"enum": [5, -3]}, {"type": "object", "properties": {"n": {"const": 5}}}):
        dfa = schema_dfa(schema)
        five = b'{"n": 5}' if "properties" in schema else b"5"
        assert dfa.matches(five), schema
        for bad in (b"-0", b"0", b"-5", b"5.0", b'{"n": -0}'):
            assert not dfa.matches(bad), (schema, bad)
    zero = schema_dfa({"enum": [0, True]})
    assert zero.matches(b"0") and zero.matches(b"-0") and zero.matches(b"true")
    assert not zero.matches(b"1") and not zero.matches(b"false") and not zero.matches(b"-1")
