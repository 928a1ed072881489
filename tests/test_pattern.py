"""The pattern compiler (ltlagent/logic/pattern.py, docs/design.md §3.2) without Spot: each step
(ε-NFA, subsets, Hopcroft, product, the Büchi automaton of ``prefix · body^ω``) against the
reference evaluator or a brute-force reading of the automata it builds."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltlagent import spotlib
from ltlagent.errors import SpecError
from ltlagent.logic.automaton import behavior_dfa, build_automaton
from ltlagent.logic.pattern import (
    Dfa,
    OmegaEdges,
    determinise,
    intersect,
    minimise,
    non_empty,
    omega_edges,
    pattern_dfa,
    pattern_nfa,
    split_always,
)
from ltlagent.spec.syntax import Always, Next, Or, Pattern, Repeat, Spec, State, Until, Visit

from . import reference
from .test_differential import finite_patterns

NAMES = ("S0", "S1", "S2")
A, B, C = (Visit(n) for n in NAMES)
PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def words(letters: int, up_to: int) -> list[tuple[int, ...]]:
    return [w for n in range(up_to + 1) for w in itertools.product(range(letters), repeat=n)]


def named(w: tuple[int, ...]) -> tuple[str, ...]:
    return tuple(NAMES[i] for i in w)


def equivalent_states(d: Dfa) -> list[tuple[int, int]]:
    """Pairs of distinct states with the same language (brute force: a product search for a word
    that one accepts and the other does not)."""
    out = []
    for p, q in itertools.combinations(range(d.num_states), 2):
        seen = {(p, q)}
        todo = [(p, q)]
        differ = False
        while todo and not differ:
            x, y = todo.pop()
            if (x in d.accepting) != (y in d.accepting):
                differ = True
                break
            for a in range(d.letters):
                nx = d.delta[x][a] if x >= 0 else -1
                ny = d.delta[y][a] if y >= 0 else -1
                if (nx, ny) not in seen and (nx >= 0 or ny >= 0):
                    seen.add((nx, ny))
                    todo.append((nx, ny))
            if x < 0 or y < 0:  # one side is dead: any accepting continuation of the other differs
                live = x if x >= 0 else y
                differ = _accepts_something(d, live)
        if not differ:
            out.append((p, q))
    return out


def _accepts_something(d: Dfa, q: int) -> bool:
    seen, todo = {q}, [q]
    while todo:
        x = todo.pop()
        if x in d.accepting:
            return True
        for r in d.delta[x]:
            if r >= 0 and r not in seen:
                seen.add(r)
                todo.append(r)
    return False


@PROPERTY
@given(pattern=st.integers(1, 4).flatmap(lambda depth: finite_patterns(NAMES, depth)))
def test_minimal_dfa_is_the_pattern_language(pattern: Pattern) -> None:
    """The minimal DFA accepts exactly the pattern's non-empty words (every word up to length 6
    over three states) and no two of its states are equivalent."""
    d = pattern_dfa(pattern, NAMES)
    for w in words(3, 6):
        assert d.accepts(w) == reference.accepts(pattern, named(w)), (pattern, named(w))
    assert equivalent_states(d) == [], pattern
    assert all(_accepts_something(d, q) for q in range(d.num_states) if q != d.initial)


@PROPERTY
@given(pattern=st.integers(1, 4).flatmap(lambda depth: finite_patterns(NAMES, depth)))
def test_subsets_then_hopcroft_keep_the_language(pattern: Pattern) -> None:
    """The subset construction alone and the minimised DFA agree, the empty word included."""
    raw = determinise(pattern_nfa(pattern, NAMES))
    small = pattern_dfa(pattern, NAMES, allow_empty=True)
    assert small.num_states <= raw.num_states
    for w in words(3, 5):
        assert raw.accepts(w) == small.accepts(w), (pattern, w)
    assert small.accepts(()) == _nullable(pattern)


def _nullable(p: Pattern) -> bool:
    if isinstance(p, Visit):
        return False
    if isinstance(p, Next):
        return all(_nullable(q) for q in p.parts)
    if isinstance(p, Or):
        return any(_nullable(q) for q in p.parts)
    if isinstance(p, Until):
        return _nullable(p.then) and (p.min == 0 or _nullable(p.body))
    assert isinstance(p, Repeat)
    return p.min == 0 or p.max == 0 or _nullable(p.body)


def test_minimise_merges_equivalent_states_and_folds_dead_ones() -> None:
    """A hand-made DFA with two equivalent accepting states and a trap state."""
    # 0 -a-> 1, 0 -b-> 2 (1 and 2 accept and loop on a), 0 -c-> 3 (a trap: nothing accepted after)
    d = Dfa(3, 0, ((1, 2, 3), (1, -1, -1), (2, -1, -1), (3, 3, 3)), frozenset({1, 2}))
    m = minimise(d)
    assert m.num_states == 2 and m.delta == ((1, 1, -1), (1, -1, -1)) and m.accepting == {1}
    empty = minimise(Dfa(2, 0, ((1, 1), (0, 0)), frozenset()))
    assert empty.delta == ((-1, -1),) and not empty.accepting


def test_hopcroft_on_a_long_counter_is_exact() -> None:
    """``A{0..n}`` needs n+1 states (n+2 with the non-accepting start), no fewer: the worklist's
    choice of splitter must split every state off."""
    for n in (1, 2, 7, 300):
        d = pattern_dfa(Repeat(A, 0, n), NAMES)
        assert d.num_states == n + 1
        assert d.accepts([0] * n) and not d.accepts([0] * (n + 1)) and not d.accepts(())


def test_non_empty_adds_a_start_only_when_needed() -> None:
    star = pattern_dfa(Repeat(A), NAMES, allow_empty=True)
    assert star.num_states == 1 and star.accepts(())
    plus = non_empty(star)
    assert plus.num_states == 2 and not plus.accepts(()) and plus.accepts((0, 0))
    assert non_empty(plus) is plus


@PROPERTY
@given(p=st.integers(1, 3).flatmap(lambda d: finite_patterns(NAMES, d)),
       q=st.integers(1, 3).flatmap(lambda d: finite_patterns(NAMES, d)))
def test_product_is_the_intersection(p: Pattern, q: Pattern) -> None:
    dp, dq = pattern_dfa(p, NAMES), pattern_dfa(q, NAMES)
    both = intersect(dp, dq)
    for w in words(3, 5):
        assert both.accepts(w) == (dp.accepts(w) and dq.accepts(w)), (p, q, w)
    assert equivalent_states(both) == []


def test_a_product_over_different_alphabets_is_refused_with_both_sizes() -> None:
    """Mutant ``intersect`` 2 (the error without its words): two DFAs over different state sets
    cannot be intersected letter by letter, and the error says the two sizes."""
    with pytest.raises(ValueError, match=r"^alphabets differ: 3 and 2 letters$"):
        intersect(pattern_dfa(A, NAMES), pattern_dfa(Visit("S0"), NAMES[:2]))


def test_the_subset_construction_has_a_budget() -> None:
    """(A|B)* A (A|B){12} needs 2^13 states: past the budget it is a spec error at the pattern."""
    ab = Or((A, B))
    blowup = Next((Repeat(ab), A, Repeat(ab, 12, 12)))
    with pytest.raises(SpecError, match="more than 1000 states") as err:
        pattern_dfa(blowup, NAMES, max_states=1000)
    # the hint says why and what to do (mutant pattern_dfa 26: its words changed)
    assert err.value.hint == (
        "after an unbounded repetition of a choice, a deterministic automaton must remember "
        "which of the last k steps could start the fixed-length part that follows (up to 2^k "
        "states): shorten or restructure it")
    assert pattern_dfa(blowup, NAMES).num_states == 2 ** 13


def test_the_budget_error_points_at_the_behaviour(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through build_automaton, the error is at the pattern's line and column, with its caret."""
    from ltlagent import parse_spec
    from ltlagent.logic import pattern

    monkeypatch.setattr(pattern, "MAX_DFA_STATES", 500)
    spec = parse_spec('(define b (:states (A (:text "A:")) (B (:text "B:")))\n'
                      '  (:behavior (next (repeat (or A B)) A (repeat (or A B) :min 9 :max 9))))',
                      "blow.sexp")
    with pytest.raises(SpecError) as err:
        build_automaton(spec)
    assert str(err.value).startswith("blow.sexp:2:14: error: the behaviour's deterministic "
                                     "automaton has more than 500 states")
    assert "^^^^" in err.value.render() and "2^k" in err.value.render()


# --- the Büchi automaton of prefix · body^ω ----------------------------------------------------

def lasso_accepted(edges: OmegaEdges, prefix: tuple[int, ...], cycle: tuple[int, ...]) -> bool:
    """Brute force: some run on ``prefix · cycle^ω`` takes an accepting edge infinitely often (a
    reachable accepting edge of the product with the lasso lies on a cycle)."""
    n = len(prefix) + len(cycle)
    word = prefix + cycle

    def succ(i: int) -> int:
        return len(prefix) if i + 1 == n else i + 1

    graph: dict[tuple[int, int], list[tuple[tuple[int, int], bool]]] = {}
    todo = [(0, 0)]
    graph[(0, 0)] = []
    while todo:
        q, i = todo.pop()
        for a, r, mark in edges[q]:
            if a == word[i]:
                node = (r, succ(i))
                graph[(q, i)].append((node, mark))
                if node not in graph:
                    graph[node] = []
                    todo.append(node)

    def reaches(x: tuple[int, int], y: tuple[int, int]) -> bool:
        seen, stack = {x}, [x]
        while stack:
            u = stack.pop()
            if u == y:
                return True
            for v, _ in graph[u]:
                if v not in seen:
                    seen.add(v)
                    stack.append(v)
        return False

    return any(mark and reaches(v, u) for u, out in graph.items() for v, mark in out)


OMEGA = [
    Always(Next((A, B))),
    Always(Repeat(Repeat(A, min=2), min=0, max=1)),  # a nullable body: iterations stay non-empty
    Always(Until(Repeat(A, min=2), Repeat(Repeat(A, min=2), min=0))),  # issue 27's shape
    Next((Repeat(C, 0, 1), Always(Or((A, Next((B, B))))))),  # a prefix that may be empty
    Next((C, Repeat(A, 2, 3), Always(Until(A, B)))),
    Next((Repeat(Repeat(A, min=2)), Always(Repeat(B, min=1)))),  # a nullable prefix, nested
]


@pytest.mark.parametrize("behavior", OMEGA, ids=str)
def test_buchi_automaton_is_the_omega_language(behavior: Pattern) -> None:
    """Every lasso with a prefix up to 3 and a cycle up to 3 letters, against the reference."""
    prefix, body = split_always(behavior)
    assert body is not None
    pre = pattern_dfa(prefix, NAMES, allow_empty=True) if prefix is not None else None
    edges = omega_edges(pre, pattern_dfa(body, NAMES))
    for u in words(3, 3):
        for c in words(3, 3)[1:]:
            want = reference.accepts_lasso(behavior, named(u), named(c))
            assert lasso_accepted(edges, u, c) == want, (behavior, named(u), named(c))


# --- the entry points the rest of ltlagent uses ------------------------------------------------

def _spec(pattern: Pattern) -> Spec:
    return Spec("p", tuple(State(n, f"<{n}>") for n in NAMES), pattern)


def test_finite_behaviours_need_no_spot_translation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without constraints a finite spec is compiled without asking Spot anything; the table's
    Spot automaton (parsed from the HOA text written from the table) agrees with the table."""
    def refuse(*args: object, **kwargs: object) -> object:
        raise AssertionError("Spot was asked")

    for name in ("translate_finite", "translate_infinite", "translate", "determinise",
                 "from_hoa", "letter_edges", "ltlf_to_ltl", "rename_atomic_propositions"):
        monkeypatch.setattr(spotlib, name, refuse)
    pattern = Next((Repeat(Next((A, B)), 0, 3), C))
    a = build_automaton(_spec(pattern))
    assert a.run(["S0", "S1", "S2"]).accepted and not a.run(["S0", "S2"]).accepted
    assert behavior_dfa(_spec(pattern)).delta == a.delta
    monkeypatch.undo()
    aut = a.spot_automaton()
    for q in range(a.num_states):
        assert spotlib.initial_state(aut) == a.initial
        for i, row in enumerate(a.letter_edges[q]):
            assert [dst for dst, _ in row] == ([a.delta[q][i]] if a.delta[q][i] >= 0 else [])
    assert spotlib.accepting_states(aut) == a.accepting


def test_behavior_dfa_refuses_infinite_specs() -> None:
    with pytest.raises(ValueError, match="infinite"):
        behavior_dfa(_spec(Always(A)))
