"""An object's own rows in one compiled loop (``ltlagent.text.objectrows``; issue 30's compile
time): the table ``object_table`` makes with them is the one it makes in Python, array for array
and part for part, on random objects (keys sharing prefixes of every length, any required ones,
``{}`` allowed or not, limits that refuse) and on JSONSchemaBench's objects; the loop asks for
longer arrays where its runs do not fit, and refuses past the room it is given; it is compiled
once, for one signature."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltlagent.errors import SchemaError, UsageError
from ltlagent.text import jsonschema as js
from ltlagent.text import objecttable
from ltlagent.text.glue import Nested
from ltlagent.text.objectrows import _object_rows, compiled_object_rows
from ltlagent.text.objecttable import Member, object_table

needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba is not installed")

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "jsonschemabench" / "schemas.jsonl"
if not DATA.exists():
    DATA = Path("/work/shared/data/jsonschemabench/schemas.jsonl")

#: small value tables: a string, an integer, a boolean, an array, an object of one member
VALUES = [js.schema_block(s) for s in ({"type": "string"}, {"type": "integer", "minimum": 3},
                                        {"type": "boolean"}, {"type": "array", "items": {"type": "number"}},
                                        {"type": "object", "properties": {"x": {"type": "null"}}})]


def _same(a: Nested | None, b: Nested | None) -> None:
    """Two object tables are one: the same states, rows, runs, parts (the same blocks at the same
    numbers), periods and rim."""
    assert (a is None) == (b is None)
    if a is None or b is None:
        return
    assert a.num_states == b.num_states
    for name in ("accepting", "rows", "src", "lo", "hi", "to"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert [(blk, m.lo, m.hi, m.delta) for blk, m in a.parts] == \
        [(blk, m.lo, m.hi, m.delta) for blk, m in b.parts]
    assert a.periods == b.periods
    assert a.rim == b.rim


def _both(members: list[Member], empty_closes: bool, limit: int) -> tuple[Nested | None, Nested | None]:
    out = []
    for compiled in (True, False):
        with mock.patch.object(objecttable, "COMPILED_ROWS", compiled):
            out.append(object_table(members, empty_closes, "t", limit))
    return out[0], out[1]


keys = st.lists(st.text(alphabet="ab_c", min_size=1, max_size=7), min_size=1, max_size=9, unique=True)


@needs_numba
@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(names=keys, data=st.data(), empty_closes=st.booleans(), limit=st.sampled_from([10, 40, 120, 50_000]))
def test_compiled_rows_make_the_python_table(names: list[str], data: st.DataObject, empty_closes: bool,
                                             limit: int) -> None:
    """Random objects: keys over a small alphabet (shared prefixes of every length, keys that are
    prefixes of others but for their quote), any members required, any value tables: the table
    is the Python construction's, or both refuse (past ``limit`` states)."""
    required = data.draw(st.lists(st.booleans(), min_size=len(names), max_size=len(names)))
    values = data.draw(st.lists(st.sampled_from(VALUES), min_size=len(names), max_size=len(names)))
    members = [Member(json.dumps(k).encode(), r, v) for k, r, v in zip(names, required, values)]
    _same(*_both(members, empty_closes, limit))


@needs_numba
def test_compiled_rows_make_the_python_tables_of_the_sample() -> None:
    """Every object table of every 25th JSONSchemaBench schema (the whole sample was compared
    once: 16,365 tables, all alike) is the Python construction's."""
    rows = [json.loads(line) for line in DATA.read_text().splitlines()][::25]
    seen = 0
    original = objecttable.object_table

    def both(members: list[Member], empty_closes: bool, source: str, limit: int) -> Nested | None:
        nonlocal seen
        a, b = _both(list(members), empty_closes, limit)
        _same(a, b)
        seen += 1
        return original(members, empty_closes, source, limit)

    with mock.patch.object(js, "object_table", both):
        for row in rows:
            js.clear_caches()
            try:
                js.schema_block(row["schema"], limit=5_000)
            except (SchemaError, UsageError, RecursionError):
                pass
    js.clear_caches()
    assert seen > 300


@pytest.mark.parametrize("compiled", [True, False])
def test_the_loop_grows_its_runs_and_refuses_past_its_room(compiled: bool) -> None:
    """Arrays of runs that start too short for the rows (``cap`` 2) are doubled as they fill: the
    same rows as with room to spare; more states than ``room``: -1, as the Python construction
    refuses (compiled, and the plain Python of the loop)."""
    loop = compiled_object_rows() if compiled else _object_rows
    if loop is None:
        pytest.skip("numba is not installed")
    names = [f'"{a}{b}{c}"'.encode() for a in "ab" for b in "ab" for c in "abc"]
    text = np.frombuffer(b"".join(names), dtype=np.uint8)
    off = np.cumsum([0, *map(len, names)]).astype(np.int64)
    n = len(names)
    need = np.array([next((j for j in range(i, n) if j % 3 == 2), n) for i in range(n + 1)], dtype=np.int64)
    comma = np.empty(len(names), dtype=np.int64)
    states, runs, low = loop(text, off, need, True, 50_000, comma, 2)
    again = np.empty(len(names), dtype=np.int64)
    states2, runs2, low2 = loop(text, off, need, True, 50_000, again, 10_000)
    assert states == states2 and low == low2 and np.array_equal(runs, runs2) and np.array_equal(comma, again)
    assert low == int((runs[0] < 3).sum()) and np.array_equal(runs[1], runs[2])
    assert runs.shape[1] > 2 and list(runs[0]) == sorted(runs[0]) and states > 3 + 3 * n
    assert loop(text, off, need, True, states - 1, comma, 2)[0] == -1
    assert loop(text, off, need, True, states, comma, 2)[0] == states


@needs_numba
def test_the_loop_is_compiled_once() -> None:
    """Tables of objects of every size add no signature to the loop (a new one would be a
    second's compile inside a schema's)."""
    loop = compiled_object_rows()
    assert loop is not None and len(loop.signatures) == 1  # type: ignore[attr-defined]
    for n in (1, 3, 12):
        members = [Member(f'"k{i}"'.encode(), i % 2 == 0, VALUES[i % len(VALUES)]) for i in range(n)]
        assert object_table(members, n % 2 == 1, "t", 50_000) is not None
    assert len(loop.signatures) == 1  # type: ignore[attr-defined]


def test_without_numba_the_python_construction_answers() -> None:
    """Where numba cannot be imported the loop is None and the table is built in Python."""
    with mock.patch.dict("sys.modules", {"numba": None}):
        assert compiled_object_rows.__wrapped__() is None
    members = [Member(b'"a"', True, VALUES[0]), Member(b'"ab"', False, VALUES[1])]
    with mock.patch.object(objecttable, "compiled_object_rows", lambda: None):
        got = object_table(members, False, "t", 100)
    with mock.patch.object(objecttable, "COMPILED_ROWS", False):
        want = object_table(members, False, "t", 100)
    _same(got, want)
