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
