"""The JSON Schema Test Suite (json-schema-org, draft 2020-12, with the optional ECMA-262 regex and
format files) against the compiled automata.

Each group is either refused (a ``SchemaError``/``UsageError`` naming its keyword) or compiled;
when compiled, no invalid instance may be accepted in any of its texts (soundness, all groups), and
on the pattern files (``pattern``, ``optional/ecmascript-regex``, ``optional/non-bmp-regex``) a
string instance is accepted exactly when it is valid, as ECMA-262 decides. Valid instances the
automaton does not write are counted and must fall under the differences docs/design.md §5.1
states (:func:`_documented`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ltlagent.errors import SchemaError, UsageError
from ltlagent.text import jsonschema as js

SUITE = Path(__file__).resolve().parents[2] / "shared" / "data" / "json-schema-test-suite" / "tests"
if not SUITE.exists():
    SUITE = Path("/work/shared/data/json-schema-test-suite/tests")
pytestmark = pytest.mark.skipif(not SUITE.exists(), reason="the JSON Schema Test Suite is not here")
DRAFT = SUITE / "draft2020-12"
PATTERN_FILES = ("pattern.json", "optional/ecmascript-regex.json", "optional/non-bmp-regex.json")
FORMAT_FILES = tuple(f"optional/format/{f}.json" for f in
                     ("date", "time", "date-time", "duration", "email", "hostname", "ipv4", "ipv6",
                      "uuid", "uri"))


def _files() -> list[str]:
    if not DRAFT.exists():
        return []
    core = sorted(p.name for p in DRAFT.glob("*.json"))
    return [*core, "optional/ecmascript-regex.json", "optional/non-bmp-regex.json", *FORMAT_FILES]


def _texts(v: Any) -> Iterator[str]:
    """Texts of ``v`` in the generation language: compact and spaced, each object's keys in
    every order (up to 5 keys; nested objects keep theirs)."""
    perms = [v]
    if isinstance(v, dict) and 1 < len(v) <= 5:
        perms = [dict(p) for p in itertools.permutations(v.items())]
    for p in perms:
        for seps in ((",", ":"), (", ", ": ")):
            yield json.dumps(p, ensure_ascii=False, separators=seps)


def _walk(v: Any) -> Iterator[Any]:
    yield v
    if isinstance(v, list):
        for x in v:
            yield from _walk(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from _walk(x)


def _documented(schema: Any, data: Any) -> bool:
    """A valid value the generation language may leave out (docs/design.md §5.1): integers written
    with a fraction or exponent, objects (undeclared keys are written only under a schema for
    them; key order), values of a type not named where ``type`` is missing (read from keywords),
    strings under a format (formats are subsets), numbers under ``multipleOf`` (integers only),
    exponents under number bounds, lone surrogates,
    arrays and objects nested deeper than ANY_DEPTH inside ``{}``."""
    values = list(_walk(data))
    if any(isinstance(x, float) and x.is_integer() for x in values):
        return True
    if any(isinstance(x, dict) and x for x in values):
        return True
    if any(isinstance(x, list) and any(isinstance(y, list | dict) for y in x) for x in values):
        return True
    subs = [x for x in _walk(schema) if isinstance(x, dict)]
    if any("type" not in x and "$ref" not in x for x in subs) or any("format" in x for x in subs):
        return True
    if any("multipleOf" in x for x in subs):  # integers only, below 2**53 for a float step
        return True
    return any(isinstance(x, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in x) for x in values)


@pytest.mark.parametrize("name", _files())
def test_suite_file(name: str) -> None:
    groups = json.loads((DRAFT / name).read_text(encoding="utf-8"))
    exact = name in PATTERN_FILES
    for g in groups:
        schema = g["schema"]
        try:
            t = js.parse_schema(schema)
            d = js.schema_table(t).content
        except (SchemaError, UsageError):
            continue
        for case in g["tests"]:
            data = case["data"]
            accepted = any(d.matches(x.encode("utf-8", "surrogatepass")) for x in _texts(data))
            where = f"{name}: {g['description']} / {case['description']}: {data!r}"
            if not case["valid"]:
                assert not accepted, f"wrongly accepted: {where}"
            elif not accepted:
                assert not (exact and isinstance(data, str)), f"valid but not written: {where}"
                assert _documented(schema, data), f"valid but not written: {where}"
