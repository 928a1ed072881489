"""The subset construction over table blocks (``text/glue.py``, over ``text/bytetable.py``'s tables)
against independent references.

The compile-time work of issue 30 (literal runs followed without the stack, byte classes cut by a
sweep, a block's rows read as runs all at once, blocks copied in place) must not change a language:
each helper is checked against the plain definition it replaces, and whole tables against the
reference construction (every part copied into one ``ByteNFA``, determinised by independent code)
on real schemas of JSONSchemaBench's sample (where the data is present) and on schemas made to
exercise literal runs (enums and keys sharing prefixes, constants inside unions). Tables kept as
their parts (``Nested``) are checked against the eager construction, state for state.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ltlagent.errors import SchemaError, UsageError
from ltlagent.text import jsonschema
from ltlagent.text.bytetable import ByteTable, _row_runs, _table_runs, runs, trim
from ltlagent.text.content import ByteNFA, as_dfa
from ltlagent.text.glue import Block, Glue, Nested, _classes, _Map, _write
from ltlagent.text.jsonschema import clear_caches, emit, parse_schema, schema_table
from tests.test_jsonschema import _equivalent

BENCH = Path(__file__).resolve().parents[2] / "shared" / "data" / "jsonschemabench" / "schemas.jsonl"
if not BENCH.exists():
    BENCH = Path("/work/shared/data/jsonschemabench/schemas.jsonl")


def _naive_classes(es: list[tuple[int, int, int]]) -> list[tuple[int, int, frozenset[int]]]:
    """Byte classes by their definition: between consecutive range ends, the targets of every range
    that covers the whole stretch."""
    cuts = sorted({*(lo for lo, _h, _v in es), *(hi + 1 for _l, hi, _v in es)})
    out = []
    for lo, nxt in itertools.pairwise(cuts):
        vs = frozenset(v for a, b, v in es if a <= lo and nxt - 1 <= b)
        if vs:
            out.append((lo, nxt - 1, vs))
    return out


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 255), st.integers(0, 40), st.integers(0, 5)),
                min_size=1, max_size=9))
def test_byte_classes_sweep_is_the_definition(ranges: list[tuple[int, int, int]]) -> None:
    """``_classes`` (a sweep over the ranges' ends) cuts overlapping ranges, repeated targets
    included, into the same classes as the definition."""
    es = sorted((lo, min(255, lo + w), v) for lo, w, v in ranges)
    assert _classes(es) == _naive_classes(es)


def test_row_runs_are_runs() -> None:
    """A row's runs read by numpy (one row, or a whole table at once) are :func:`runs`."""
    rng = np.random.default_rng(0)
    t = rng.integers(-1, 4, (120, 256)).astype(np.int32)
    t[::4] = -1
    t[1::4].sort(axis=1)
    t[5] = 2
    t[9, 200:] = 3
    ptr, lo, hi, to = _table_runs(t)
    for q in range(t.shape[0]):
        want = runs(t[q].tolist())
        assert _row_runs(t[q], 0) == want
        assert list(zip(lo[ptr[q]:ptr[q + 1]], hi[ptr[q]:ptr[q + 1]], to[ptr[q]:ptr[q + 1]])) == want
        assert _row_runs(t[q], 7) == [(a, b, r + 7) for a, b, r in want]
    table = ByteTable(t, np.zeros(t.shape[0], dtype=bool))
    assert [table.row_runs(q) for q in range(t.shape[0])] == [runs(r) for r in t.tolist()]
    assert table.runs == (ptr, lo, hi, to)  # found once; rows read from them from now on
    assert [table.row_runs(q) for q in range(t.shape[0])] == [runs(r) for r in t.tolist()]


def _reference_agrees(schema: object) -> bool:
    """Whether ``schema_table`` and the reference construction accept the same texts (both
    refusing counts as agreeing)."""
    try:
        table = schema_table(schema)  # type: ignore[arg-type]
    except (SchemaError, UsageError):
        return True
    nfa = ByteNFA()
    start, final = nfa.new(), nfa.new()
    emit(nfa, parse_schema(schema), start, final)  # type: ignore[arg-type]
    trans, acc = nfa.determinize(start, final, 200_000, "schema", "")
    return _equivalent(table.content, as_dfa(trans, acc, "copied"))


@pytest.mark.parametrize("schema", [
    {"enum": ["alpha", "alphabet", "alpine", "beta", "bet", ""]},
    {"type": "object", "properties": {"name": {"type": "string"}, "names": {"type": "integer"},
                                      "nam": {"enum": ["x", "xy"]}}},
    {"anyOf": [{"const": "status"}, {"const": "stat"}, {"type": "string", "maxLength": 3}]},
    {"type": "object", "properties": {"kind": {"const": "a"}, "value": {"type": "integer"}},
     "required": ["kind"], "additionalProperties": {"type": "boolean"}},
    {"type": "array", "items": {"enum": ["on", "off", "one"]}, "maxItems": 3},
    {"anyOf": [{"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
               {"type": "object", "properties": {"id": {"type": "integer"}, "idx": {"type": "null"}}}]},
    # objects met in lockstep: the same property blocks in both branches (Glue.nested's groups),
    # which leave them for different continuations (b required in one branch only)
    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "maxLength": 3}},
                                      "b": {"type": "string", "maxLength": 2}},
     "anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
    {"anyOf": [{"type": "object", "properties": {"k": {"type": "string", "maxLength": 4}, "x": {"const": 1}},
                "required": ["k", "x"]},
               {"type": "object", "properties": {"k": {"type": "string", "maxLength": 4}, "y": {"const": 2}},
                "required": ["k"]}]},
])
def test_literal_runs_keep_the_language(schema: object) -> None:
    """Literal runs (keys, constants) followed without the stack, where alternatives share
    prefixes and meet blocks: the same language as the reference construction."""
    assert _reference_agrees(schema)


def test_blocks_of_one_table_in_lockstep_are_copied_once() -> None:
    """Two blocks of one table entered at once and left for different literals (the same property
    in two ``anyOf`` branches) are followed as one group: the table is copied once for the pair
    and only its accepting state's row is built in Python, not a row per pair of states (fails
    with the groups off); and the language is the reference construction's (fails when a group's
    accepting row leaves by one block's end only)."""
    leaf = schema_table({"type": "string", "maxLength": 20})
    assert leaf.num_states > 40 and int(leaf.accepting.sum()) == 1
    glue = Glue()
    s, f, a, x1, x2 = (glue.new() for _ in range(5))
    glue.nfa.literal(b"<", s, a)
    glue.table(leaf, a, x1)
    glue.table(leaf, a, x2)
    glue.nfa.literal(b"!", x1, f)
    glue.nfa.literal(b"?", x2, f)
    t = glue.nested(s, f, 10_000, "lockstep", "")
    assert isinstance(t, Nested) and t.rows.size <= 6 and len(t.parts) == 1
    nfa = ByteNFA()
    start, final, at, y1, y2 = (nfa.new() for _ in range(5))
    nfa.literal(b"<", start, at)
    nfa.embed(leaf.content, at, y1)
    nfa.embed(leaf.content, at, y2)
    nfa.literal(b"!", y1, final)
    nfa.literal(b"?", y2, final)
    trans, acc = nfa.determinize(start, final, 10_000, "reference", "")
    assert _equivalent(t.table().content, as_dfa(trans, acc, "copied"))
    assert t.table().content.matches(b'<"ab"!') and t.table().content.matches(b'<"ab"?')


def test_anyof_objects_share_their_property_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Objects of a union are written in place (not as blocks), so two ``anyOf`` branches that
    differ in what they require share their properties' blocks and meet them in lockstep: the
    union's table (1,591 states) has a few dozen rows built in Python, not one per state of the
    product of two object tables (fails with the objects written as blocks, or the groups off);
    the language is the reference construction's."""
    made: list[Block] = []
    nested = Glue.nested

    def recorded(self: Glue, *args: object, **kwargs: object) -> Block:
        made.append(nested(self, *args, **kwargs))  # type: ignore[arg-type]
        return made[-1]

    monkeypatch.setattr(Glue, "nested", recorded)
    schema = {"type": "object", "properties": {
        "a": {"type": "array", "items": {"type": "string", "maxLength": 30}},
        "b": {"type": "string", "maxLength": 30}}, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}
    clear_caches()
    table = schema_table(schema)
    top = made[-1]
    assert isinstance(top, Nested) and top.num_states == table.num_states > 1000
    assert top.rows.size < 100
    monkeypatch.undo()
    assert _reference_agrees(schema)


def test_real_schemas_keep_the_language() -> None:
    """A seeded sample of JSONSchemaBench's schemas whose tables are small enough for the product
    search: each table accepts what the reference construction accepts."""
    if not BENCH.exists():
        pytest.skip("JSONSchemaBench's sample is not present")
    rows = [json.loads(line) for line in BENCH.read_text().splitlines()]
    rng = random.Random(30)
    checked = 0
    for r in rng.sample(rows, 120):
        clear_caches()
        try:
            table = schema_table(r["schema"])
        except (SchemaError, UsageError):
            continue
        if table.num_states > 1500:
            continue
        assert _reference_agrees(r["schema"]), r["id"]
        checked += 1
        if checked == 25:
            break
    assert checked >= 15


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 7).flatmap(lambda n: st.tuples(
    st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n),
    st.lists(st.tuples(st.integers(0, n - 1), st.sampled_from(b"ab"), st.integers(0, n - 1)),
             max_size=2 * n),
    st.just(n))))
def test_glue_closures_with_epsilon_cycles(graph: tuple[list[tuple[int, int]],
                                                        list[tuple[int, int, int]], int]) -> None:
    """Random glue NFAs, epsilon cycles and chains included, with a string block between two
    nodes: ``Glue.determinize`` (closures kept per node and united, literal runs followed) accepts
    what the reference determinisation of the same NFA with the block copied in accepts."""
    eps, edges, n = graph
    block = schema_table({"type": "string", "maxLength": 1})
    glue = Glue()
    plain = ByteNFA()
    for _ in range(n):
        glue.new()
        plain.new()
    for u, v in eps:
        glue.nfa.eps[u].append(v)
        plain.eps[u].append(v)
    for u, b, v in edges:
        glue.nfa.edges[u].append((b, b, v))
        plain.edges[u].append((b, b, v))
    glue.table(block, 0, n - 1)
    plain.embed(block.content, 0, n - 1)
    fast = glue.determinize(0, n - 1, 10_000, "glue", "")
    trans, acc = plain.determinize(0, n - 1, 10_000, "glue", "")
    assert _equivalent(fast.content, as_dfa(trans, acc, "copied"))


def _reachable_from_start(t: np.ndarray) -> np.ndarray:
    """Plain breadth-first search over a table's rows (the definition the trim relies on)."""
    seen = np.zeros(t.shape[0], dtype=bool)
    seen[0] = True
    todo = [0]
    while todo:
        for r in set(t[todo.pop()].tolist()):
            if r >= 0 and not seen[r]:
                seen[r] = True
                todo.append(r)
    return seen


def test_unsealed_block_states_reached_only_through_a_built_row_are_left_out() -> None:
    """A block whose accepting state goes on (not sealed: ``ab`` where ``a`` alone also ends it)
    followed by glue that reads the same byte: after ``a`` the row is built in Python (the block's
    accepting state with the glue after it), and its ``b`` leads to a mixed subset, so the block's
    own state after ``b`` is reached by no row. The search must not follow the block's edge out of a
    row built in Python: every state of the result is reachable, none is removed twice."""
    from ltlagent.text.bytetable import ByteTable

    t = np.full((3, 256), -1, dtype=np.int32)
    t[0, ord("a")], t[1, ord("b")] = 1, 2
    block = ByteTable(t, np.array([False, True, True]))
    assert not block.sealed
    glue = Glue()
    start, mid, final = glue.new(), glue.new(), glue.new()
    glue.table(block, start, mid)
    glue.nfa.literal(b"b", mid, final)
    glue.nfa.eps[mid].append(final)
    got = glue.determinize(start, final, 100, "test", "")
    assert _reachable_from_start(got.trans).all()
    d = got.content
    assert [w for w in (b"", b"a", b"ab", b"abb", b"b", b"aab") if d.matches(w)] == [b"a", b"ab", b"abb"]
    assert got.num_states == 4  # start, after a, after ab (block's end and glue's b met), after abb


def test_block_with_states_left_out_inside_is_renumbered() -> None:
    """A block whose start is never a state of its own (entered beside the glue's ``x``) and whose
    state after ``ab`` is reached only through a row built in Python: the states kept inside it
    (after ``a`` and after ``c``) are not one run, so its rows are renumbered one by one; dead stays dead
    and every target is a kept state's new number."""
    from ltlagent.text.bytetable import ByteTable

    t = np.full((4, 256), -1, dtype=np.int32)
    t[0, ord("a")], t[1, ord("b")], t[0, ord("c")], t[3, ord("e")] = 1, 2, 3, 1
    block = ByteTable(t, np.array([False, True, True, False]))
    glue = Glue()
    start, mid, final = glue.new(), glue.new(), glue.new()
    glue.table(block, start, mid)
    glue.nfa.literal(b"x", start, final)  # the start's subset mixes the glue and the block
    glue.nfa.literal(b"b", mid, final)
    glue.nfa.eps[mid].append(final)
    got = glue.determinize(start, final, 100, "test", "")
    assert _reachable_from_start(got.trans).all()
    assert ((got.trans >= -1) & (got.trans < got.num_states)).all()
    words = [b"a", b"ab", b"abb", b"x", b"ce", b"ceb", b"cebb",
             b"c", b"b", b"xb", b"abbb", b"cea", b"cxx", b"cax"]
    assert [w for w in words if got.content.matches(w)] == [b"a", b"ab", b"abb", b"x", b"ce", b"ceb", b"cebb"]


@pytest.mark.parametrize("direct", [True, False])
def test_determinize_leaves_no_garbage_cycles(direct: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A subset construction frees what it built when it returns (its nested functions refer to one
    another, a cycle that would hold every subset, closure and the glue's NFA until the cyclic
    collector ran; a compile pauses that collector, so all of it would pile up): after a compile of
    an object with 40 optional properties, almost nothing is left for the collector, whether the
    object's table is written directly (``objecttable``) or its glue determinised."""
    import gc

    monkeypatch.setattr(jsonschema, "DIRECT_OBJECTS", direct)

    schema = {"type": "object", "properties": {f"key{i}": {"type": ["integer", "null"]} for i in range(40)}
              | {"kind": {"enum": [f"k{i}" for i in range(300)]}}}  # each constant checked as JSON
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        clear_caches()
        schema_table(schema)
        left = gc.collect()
    finally:
        if was:
            gc.enable()
    assert left < 200, left


# --- tables kept as their parts (Nested) -------------------------------------------------------

def _leaf(edges: list[tuple[int, int, int, int]], accepting: list[int], n: int,
          periods: tuple[tuple[int, int, int], ...] = ()) -> ByteTable:
    """A small block: ``(state, first byte, last byte, target)`` edges."""
    t = np.full((n, 256), -1, dtype=np.int32)
    for q, lo, hi, r in edges:
        t[q, lo:hi + 1] = r
    acc = np.zeros(n, dtype=bool)
    acc[accepting] = True
    return ByteTable(t, acc, "leaf", periods)


_A, _B, _C, _E, _X = (ord(c) for c in "abcex")
#: sealed ("ab"); accepting and going on ("a", "ab"); its start entered again ("(ac)*a"); with
#: states left out inside where it meets glue ("a", "ab", "ce…"); a count with a period hint
_LEAVES = (
    _leaf([(0, _A, _A, 1), (1, _B, _B, 2)], [2], 3),
    _leaf([(0, _A, _A, 1), (1, _B, _B, 2)], [1, 2], 3),
    _leaf([(0, _A, _A, 1), (1, _C, _C, 0)], [1], 2),
    _leaf([(0, _A, _A, 1), (1, _B, _B, 2), (0, _C, _C, 3), (3, _E, _E, 1)], [1, 2], 4),
    _leaf([(0, _X, _X, 1), *((q, _A, ord("z"), q + 1) for q in range(1, 6)),
           *((q, _B, _B, 7) for q in range(2, 7))], [7], 8, ((2, 6, 1),)),
)

#: an item of an alternative: a literal, a leaf (by index) or an earlier node (by index, modulo)
_Item = tuple[str, object]
#: a node: its alternatives (sequences of items) and whether it repeats (its end back to its start)
_Node = tuple[list[list[_Item]], bool]

_literals = [b"a", b"b", b"x", b"ab", b"c", b"\xe9", b"a\xe9"]  # a byte above 127 too
_items = st.one_of(st.sampled_from(_literals).map(lambda b: ("lit", b)),
                   st.integers(0, len(_LEAVES) - 1).map(lambda i: ("leaf", i)),
                   st.integers(0, 3).map(lambda i: ("node", i)))
_nodes = st.lists(st.tuples(st.lists(st.lists(_items, min_size=1, max_size=3), min_size=1, max_size=3),
                            st.booleans()), min_size=1, max_size=4)


def _item(nodes: list[_Node], i: int, it: _Item) -> _Item:
    """An item of node ``i``, a reference to a later node (or any, for the first) read as a leaf."""
    kind, v = it
    if kind == "node" and i == 0:
        return ("leaf", int(v) % len(_LEAVES))  # type: ignore[call-overload]
    return (kind, int(v) % i if kind == "node" else v)  # type: ignore[call-overload]


def _build(nodes: list[_Node], flat: bool) -> list[Block]:
    """Each node's table through :class:`Glue` (its earlier nodes shared as blocks): kept as parts
    (``Nested``) or, ``flat``, every block made flat before its parent is built (the eager
    construction, which copies each block into each enclosing table)."""
    built: list[Block] = []
    for i, (alts, loop) in enumerate(nodes):
        glue = Glue()
        s, f = glue.new(), glue.new()
        for alt in alts:
            cur = s
            for j, it in enumerate(alt):
                nxt = f if j == len(alt) - 1 else glue.new()
                kind, v = _item(nodes, i, it)
                if kind == "lit":
                    glue.nfa.literal(v, cur, nxt)  # type: ignore[arg-type]
                else:
                    b = _LEAVES[v] if kind == "leaf" else built[v]  # type: ignore[index]
                    glue.table(b.table() if flat else b, cur, nxt)
                cur = nxt
        if loop:
            glue.nfa.eps[f].append(s)
        built.append(glue.nested(s, f, 20_000, f"node {i}", ""))
    return built


def _reference(nodes: list[_Node], i: int, nfa: ByteNFA, start: int, end: int) -> None:
    """Node ``i`` written inline into a plain NFA (leaves copied state by state)."""
    alts, loop = nodes[i]
    s, f = nfa.new(), nfa.new()
    nfa.eps[start].append(s)
    nfa.eps[f].append(end)
    for alt in alts:
        cur = s
        for j, it in enumerate(alt):
            nxt = f if j == len(alt) - 1 else nfa.new()
            kind, v = _item(nodes, i, it)
            if kind == "lit":
                nfa.literal(v, cur, nxt)  # type: ignore[arg-type]
            elif kind == "leaf":
                nfa.embed(_LEAVES[v].content, cur, nxt)  # type: ignore[index]
            else:
                _reference(nodes, v, nfa, cur, nxt)  # type: ignore[arg-type]
            cur = nxt
    if loop:
        nfa.eps[f].append(s)


def _answers_like_flat(t: Nested) -> None:
    """What a glue reads of a block kept as parts is what it would read of the flat table (written
    here without making ``t`` flat)."""
    trans = np.empty((t.num_states, 256), dtype=np.int32)
    _write(t, trans, _Map(0, t.num_states, 0), frozenset())
    flat = ByteTable(trans, t.accepting.copy())
    for q in range(t.num_states):
        assert t.row_runs(q) == runs(flat.trans[q].tolist()), q
    assert t.sealed == flat.sealed
    got, want = t.successors, flat.successors
    assert set(zip(got[0].tolist(), got[1].tolist())) == set(zip(want[0].tolist(), want[1].tolist()))


@settings(max_examples=150, deadline=None)
@given(_nodes)
@example([([[("lit", b"a")], [("lit", b"b")]], False), ([[("node", 0), ("lit", b"x")]], True)])
@example([([[("leaf", 0), ("lit", b"x")]], False), ([[("node", 0)], [("lit", b"ab")]], False),
          ([[("lit", b"c"), ("node", 1)], [("node", 1), ("node", 1)]], False)])
def test_nested_tables_are_the_eager_tables(nodes: list[_Node]) -> None:
    """Random nestings of glue (literals, alternatives, repetition) around blocks several levels
    deep, blocks shared by several parents and used twice in one: each table kept as its parts
    writes out the very table (state for state, periods included) that copying every block into
    each enclosing table gives; it accepts what the reference construction (every part copied into
    one plain NFA) accepts; it is trimmed; and every answer a parent's subset construction reads of
    it (rows, ``sealed``, ``successors``) is the flat table's. The first example keeps a block's
    states up to where an alternative leaves it (a block's states dropped inside a block); the
    second has a row of two runs to one target built in Python (read back as one run)."""
    try:
        lazy = _build(nodes, flat=False)
        eager = _build(nodes, flat=True)
    except UsageError:
        return
    for got in lazy:  # before anything is made flat (a flat part is copied whole)
        if isinstance(got, Nested):
            _answers_like_flat(got)
    for got, want in reversed(list(zip(lazy, eager))):  # the top first: written through its parts
        t, w = got.table(), want.table()
        assert np.array_equal(t.trans, w.trans)
        assert np.array_equal(t.accepting, w.accepting)
        assert t.periods == w.periods
    top = lazy[-1].table()
    assert trim(top.trans, top.accepting)[0].shape == top.trans.shape
    nfa = ByteNFA()
    start, final = nfa.new(), nfa.new()
    _reference(nodes, len(nodes) - 1, nfa, start, final)
    trans, acc = nfa.determinize(start, final, 200_000, "reference", "")
    assert _equivalent(top.content, as_dfa(trans, acc, "copied"))


def test_a_part_met_twice_is_made_flat_once() -> None:
    """A table kept as parts that is a part twice below the table being written (an array's two
    items) is made flat first and copied whole each time; one met once is written through."""
    nodes: list[_Node] = [([[("leaf", 0)], [("lit", b"x")]], False),
                          ([[("lit", b"c"), ("node", 0)]], False),
                          ([[("node", 0), ("lit", b"c"), ("node", 0), ("node", 1)]], False)]
    lazy = _build(nodes, flat=False)
    top = lazy[2]
    assert isinstance(top, Nested) and all(isinstance(b, Nested) for b in lazy)
    t = top.table()
    assert "flat" in lazy[0].__dict__ and "flat" not in lazy[1].__dict__
    assert np.array_equal(t.trans, _build(nodes, flat=True)[2].table().trans)


def test_classes_with_disjoint_wide_ranges_and_single_bytes() -> None:
    """``_classes`` cuts disjoint wide ranges at single bytes directly (a string's row beside
    keys' first bytes) and sweeps otherwise: both agree with the definition on random rows of
    each shape (single bytes inside, at the ends of and between ranges, repeated with other
    targets; wide ranges that touch, overlap or nest)."""
    rng = random.Random(7)
    for _ in range(3000):
        es: list[tuple[int, int, int]] = []
        for _k in range(rng.randint(1, 9)):
            lo = rng.randrange(256)
            hi = lo if rng.random() < 0.6 else min(255, lo + rng.randrange(40))
            es.append((lo, hi, rng.randrange(5)))
        if rng.random() < 0.5:  # make the wide ranges disjoint (the direct cut)
            wide = sorted(e for e in es if e[0] != e[1])
            keep = [w for w, nxt in itertools.zip_longest(wide, wide[1:]) if nxt is None or w[1] < nxt[0]]
            es = [e for e in es if e[0] == e[1]] + keep
        es.sort()
        if es:
            assert _classes(es) == _naive_classes(es), es


def test_renumbering_after_reached_is_the_searched_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where :meth:`Glue._reached` finds every state kept but the copies' starts, ``nested``
    numbers the copies' states and their periods by arithmetic (the i-th copy moved down by
    ``i + 1``), not by numpy over the kept mask: the same :class:`Nested`, field for field, as with
    the search and the general renumbering (fails when a copy's shift is off by one, when a period
    starting at a copy's start is kept, or when periods are dropped)."""
    schemas = [
        {"type": "object", "properties": {"a": {"type": "string", "maxLength": 12},
                                          "b": {"type": "string", "minLength": 2, "maxLength": 9},
                                          "c": {"type": "integer"}}, "required": ["a"]},
        {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
        {"type": "object", "properties": {"x": {"type": "array", "items": {"enum": ["on", "off"]}},
                                          "y": {"type": "object", "properties": {
                                              "z": {"type": "string", "maxLength": 6}}}}},
    ]

    def made(fast: bool) -> list[Nested]:
        out: list[Nested] = []
        nested, reached = Glue.nested, Glue._reached

        def recorded(self: Glue, *args: object, **kwargs: object) -> Block:
            out.append(nested(self, *args, **kwargs))  # type: ignore[arg-type]
            return out[-1]

        def counted(*args: object) -> np.ndarray | None:
            got = reached(*args)  # type: ignore[arg-type]
            hits.append(got is not None)
            return got if fast else None

        monkeypatch.setattr(Glue, "nested", recorded)
        monkeypatch.setattr(Glue, "_reached", staticmethod(counted))
        monkeypatch.setattr(jsonschema, "DIRECT_OBJECTS", False)  # the objects' glues too
        for s in schemas:
            clear_caches()
            schema_table(s)
        clear_caches()
        # a block whose hinted periods begin at its start (left out: it is no state) and after it
        t = np.full((4, 256), -1, dtype=np.int32)
        t[0, ord("a")], t[1, ord("a")], t[2, ord("a")] = 1, 2, 3
        block = ByteTable(t, np.array([False, False, False, True]), "", ((0, 3, 1), (1, 4, 1)))
        assert block.sealed
        glue = Glue()
        start, mid, final = glue.new(), glue.new(), glue.new()
        glue.nfa.literal(b"<", start, mid)
        glue.table(block, mid, final)
        glue.nested(start, final, 100, "test", "")
        monkeypatch.undo()
        return out

    hits: list[bool] = []
    fast = made(True)
    assert sum(hits) >= 4 and hits[-1]  # the shortcut is taken (the hand-made block too)
    slow = made(False)
    assert len(fast) == len(slow) and any(t.periods for t in fast)
    assert fast[-1].periods == ((2, 5, 1),)  # the hand-made block's, after the glue's two rows
    for a, b in zip(fast, slow):
        assert a.num_states == b.num_states and a.periods == b.periods
        for f in ("accepting", "rows", "src", "lo", "hi", "to"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), f
        assert [(m.lo, m.hi, m.delta, m.lookup is None) for _b, m in a.parts] == \
            [(m.lo, m.hi, m.delta, m.lookup is None) for _b, m in b.parts]


@pytest.mark.parametrize("data", [b"", b"a", b"ab", b'"key"', bytes(range(7))])
def test_literal_is_the_byte_by_byte_path(data: bytes) -> None:
    """``ByteNFA.literal`` adds its inner nodes at once: the same nodes, numbers and edges as a
    path built a byte at a time (fails when an inner node's target is off by one or the last
    byte does not reach ``end``)."""
    got, ref = ByteNFA(), ByteNFA()
    for nfa in (got, ref):
        for _ in range(3):
            nfa.new()
        nfa.edges[0].append((1, 1, 2))
    got.literal(data, 0, 1)
    s = 0
    for k, b in enumerate(data):
        t = 1 if k == len(data) - 1 else ref.new()
        ref.edges[s].append((b, b, t))
        s = t
    if not data:
        ref.eps[0].append(1)
    assert got.eps == ref.eps and got.edges == ref.edges


@pytest.mark.parametrize("n", [1, 63, 64, 65, 128, 129, 300])
def test_shifted_rows_keep_dead_entries_dead(n: int) -> None:
    """``glue._shifted`` (a block's rows moved into a flat table) is ``where(rows >= 0, rows +
    delta, -1)`` at every size: a few rows at once, more through its buffer (a chunk's last rows,
    a partial last chunk), delta 0 a plain copy; nothing outside ``out`` is written."""
    from ltlagent.text.glue import _shifted

    rng = np.random.default_rng(n)
    rows = rng.integers(-1, 5000, size=(n, 256)).astype(np.int32)
    rows[rng.random((n, 256)) < 0.5] = -1
    for delta in (0, 1, 77_777):
        big = np.full((n + 4, 256), 12345, dtype=np.int32)
        _shifted(rows, delta, big[2:n + 2])
        assert np.array_equal(big[2:n + 2], np.where(rows >= 0, rows + delta, -1))
        assert (big[:2] == 12345).all() and (big[n + 2:] == 12345).all()
