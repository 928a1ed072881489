"""String lengths and patterns of a schema against a plain reference (``len`` and ``re.search``
on the decoded string), through ``schema_dfa`` only, so the tests hold whatever the compile
internals become: long bounds (where the character count repeats with a period) and texts with
multi-byte characters and escapes (issue 31; docs/mutation.md, "text/jsonschema.py")."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest

from ltlagent.errors import SchemaError, UsageError
from ltlagent.text.jsonschema import clear_caches, description_table, parse_schema, schema_dfa, schema_table

CHARS = ["a", "b", "0", "é", "😀", '"', "\\", "\n", "/"]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    """Each test builds its automata afresh: the compile caches live as long as the process, so
    without this only the first test to build a string template would reach the code that builds
    it, and a mutation run (which runs, per mutant, the tests that reached the mutated function)
    would try every other test's texts against nothing."""
    clear_caches()


def texts(n: int, rng: random.Random) -> list[str]:
    return ["".join(rng.choice(CHARS) for _ in range(n)) for _ in range(3)] + ["a" * n, "😀" * n]


@pytest.mark.parametrize("lo,hi", [(0, 0), (0, 1), (1, 2), (0, 5), (3, 17), (16, 40), (0, 70), (39, 41)])
@pytest.mark.parametrize("pattern", [None, "^a", "b$", "[0-9]{2}"])
def test_string_bounds_and_patterns_match_the_reference(lo: int, hi: int, pattern: str | None) -> None:
    schema: dict[str, object] = {"type": "string", "minLength": lo, "maxLength": hi}
    if pattern is not None:
        schema["pattern"] = pattern
    table = description_table(parse_schema(schema))
    if table.empty:  # (``^a`` within 0 characters): the schema is refused, its table is empty
        with pytest.raises(SchemaError, match="allows no value"):
            schema_dfa(schema)
    dfa = table.content
    rng = random.Random(lo * 1000 + hi)
    for n in sorted({0, 1, lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, (lo + hi) // 2}):
        if n < 0:
            continue
        for s in texts(n, rng) + (["a" + "0" * max(n - 2, 0) + "b"] if n >= 2 else []):
            # ECMA-262's '$' is the end of the input only (Python's also matches before a final \n)
            ref = None if pattern is None else pattern.replace("$", r"\Z")
            want = lo <= len(s) <= hi and (ref is None or re.search(ref, s) is not None)
            text = json.dumps(s, ensure_ascii=False).encode()
            assert dfa.matches(text) == want, (schema, s)


@pytest.mark.parametrize("pattern,yes,no", [
    # the escaped character leads back to the pattern's start state
    ("^(a\n)*$", [b'""', b'"a\\n"', b'"a\\u000aa\\u000A"'], [b'"a"', b'"a\\n\\n"', b'"\\n"']),
    ('^(a")*$', [b'"a\\""', b'"a\\"a\\""'], [b'"a"', b'"\\""', b'"a\\u0022"']),
    ("^(a/)*$", [b'"a/a\\/"'], [b'"a\\\\"']),
    ("^(a\x01)*$", [b'"a\\u0001a\\u0001"'], [b'"a\\u0002"']),
    # \u0010 to \u001f: the second hex digit from 0 to f above 0x10
    ("^\x10\x1f$", [b'"\\u0010\\u001f"', b'"\\u0010\\u001F"'], [b'"\\u0011\\u001f"', b'"\\u0010\\u0020"']),
])
def test_escapes_that_return_to_the_start_or_name_a_high_control(pattern: str, yes: list[bytes],
                                                                 no: list[bytes]) -> None:
    for schema in ({"type": "string", "pattern": pattern},
                   {"type": "string", "pattern": pattern, "maxLength": 6}):
        dfa = schema_dfa(schema)
        for text in yes:
            assert dfa.matches(text), (schema, text)
        for text in no:
            assert not dfa.matches(text), (schema, text)


def _coreachable(trans: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """The states of a table from which an accepting state can be reached."""
    live = accepting.astype(bool).copy()
    while True:
        tgt = np.where(trans >= 0, trans, 0)
        grown = live | ((trans >= 0) & live[tgt]).any(axis=1)
        if (grown == live).all():
            return live
        live = grown


@pytest.mark.parametrize("schema", [
    {"type": "string", "minLength": 2, "maxLength": 6, "pattern": "^[0-9]{4}$"},
    {"type": "string", "maxLength": 9, "pattern": "^(ab)*$"},
    {"type": "string", "minLength": 3, "pattern": "x$"},
    {"type": "string", "maxLength": 5, "pattern": "^(a\\n)*$"},
])
def test_string_tables_come_trimmed(schema: dict[str, object]) -> None:
    """Every state of a string's table can still reach the closing quote (the decoder's guarantee:
    it never writes into a dead end), and the table is int32 bytes by 256."""
    t = schema_table(schema)
    assert t.trans.dtype == np.int32 and t.trans.shape == (t.num_states, 256)
    assert _coreachable(t.trans, t.accepting).all(), schema


def test_a_string_language_that_is_empty_is_one_dead_state() -> None:
    empty = {"type": "string", "maxLength": 1, "pattern": "^ab"}
    with pytest.raises(SchemaError, match="allows no value"):
        schema_table(empty)
    t = description_table(parse_schema(empty))
    assert t.trans.shape == (1, 256) and t.trans.dtype == np.int32 and (t.trans == -1).all()
    assert t.accepting.shape == (1,) and not t.accepting.any()
    dfa = schema_dfa({"type": "object", "properties": {"a": empty, "b": {"type": "null"}}})
    assert dfa.matches(b"{}") and dfa.matches(b'{"b": null}') and not dfa.matches(b'{"a": "a"}')


def test_a_string_table_over_the_limit_says_so_and_how_to_help() -> None:
    with pytest.raises(UsageError) as e:
        schema_table({"type": "string", "maxLength": 50}, limit=20)
    assert str(e.value) == "the JSON schema needs more than 20 automaton states"
    assert e.value.hint == "simplify the schema (fewer optional properties, shorter bounds)"
