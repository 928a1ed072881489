"""Past-time operators and named constraints (docs/design.md §3.5): the Spot table of a spec
with random LTLf constraints, past operators included, against the reference evaluator on every
trace up to a length, and fixed cases whose meaning a wrong translation would change."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltlagent.errors import SpecError
from ltlagent.logic.automaton import Automaton, build_automaton
from ltlagent.spec.syntax import Formula, Spec, State, any_sequence, parse_spec

from . import reference

NAMES = ("A", "B", "C")
UNARY = ("not", "next", "weak-next", "always", "eventually", "previously", "once", "historically")
BINARY = ("and", "or", "implies", "until", "since", "release")
PAST = {"previously", "once", "historically", "since"}


@st.composite
def formulas(draw: st.DrawFn, depth: int) -> Formula:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return Formula(draw(st.sampled_from(NAMES)), is_state=True)
    if draw(st.booleans()):
        return Formula(draw(st.sampled_from(UNARY)), (draw(formulas(depth - 1)),))
    op = draw(st.sampled_from(BINARY))
    return Formula(op, (draw(formulas(depth - 1)), draw(formulas(depth - 1))))


def _uses_past(f: Formula) -> bool:
    return f.op in PAST or any(_uses_past(a) for a in f.args)


def _spec(*constraints: Formula) -> Spec:
    states = tuple(State(n, f"{n}:") for n in NAMES)
    return Spec("t", states, any_sequence(NAMES), tuple(constraints))


def _traces(n: int) -> list[tuple[str, ...]]:
    return [t for k in range(1, n + 1) for t in itertools.product(NAMES, repeat=k)]


TRACES = _traces(5)


def _agree(a: Automaton, f: Formula) -> None:
    for t in TRACES:
        want = reference.holds(f, t)
        got = a.run(t).status == "accepted"
        assert got == want, (t, f)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(formulas(4))
def test_random_constraints_agree_with_the_reference(f: Formula) -> None:
    try:
        a = build_automaton(_spec(f))
    except SpecError:  # the constraint admits no trace: then the reference must agree
        assert not any(reference.holds(f, t) for t in TRACES)
        return
    _agree(a, f)


@pytest.mark.parametrize("text, accepted, rejected", [
    ("(next (previously A))", ["A A", "A B C"], ["A", "B A"]),
    ("(always (implies B (previously A)))", ["A B", "C", "A B A B"], ["B", "C B", "A B B"]),
    ("(always (implies B (once A)))", ["A C B", "C A B B"], ["B A", "C B"]),
    ("(always (implies B (historically (not C))))", ["A B", "B B"], ["C B", "A C A B"]),
    ("(always (implies C (since (not B) A)))", ["A C", "A A C", "A C C"], ["C", "A B C", "B C"]),
    ("(eventually (and C (once (and A (previously B)))))", ["B A C", "B A B C"],
     ["A C", "B C A"]),
])
def test_fixed_past_cases(text: str, accepted: list[str], rejected: list[str]) -> None:
    spec = parse_spec(f"(define t (:states (A (:text \"A:\")) (B (:text \"B:\")) "
                      f"(C (:text \"C:\"))) (:constraints {text}))")
    a = build_automaton(spec)
    for t in accepted:
        assert a.run(t.split()).status == "accepted", t
    for t in rejected:
        assert a.run(t.split()).status != "accepted", t
    f = spec.constraints[0]
    _agree(a, f)


def test_past_constraint_inside_an_infinite_spec() -> None:
    spec = parse_spec('(define t (:states (A (:text "A:")) (B (:text "B:"))) '
                      "(:behavior (always (or A B))) "
                      "(:constraints (always (implies B (previously A)))))")
    a = build_automaton(spec)
    assert a.accepts_lasso(["A"], ["A", "B"])
    assert not a.accepts_lasso(["B"], ["A"])
    assert not a.accepts_lasso([], ["A", "B", "B"])


def test_named_constraints() -> None:
    spec = parse_spec('(define t (:states (A (:text "A:")) (B (:text "B:"))) '
                      "(:constraints (b-after-a (always (implies B (once A)))) "
                      "(eventually B)))")
    assert spec.constraint_names == ("b-after-a", "constraint-2")
    assert not spec.behavior_declared


@pytest.mark.parametrize("text, message", [
    ("(alwyas (implies A B))", "did you mean 'always'"),
    ("(behavior (eventually A))", "names the (:behavior …) pattern"),
    ("(x (eventually A)) (x (eventually B))", "duplicate constraint name 'x'"),
    ("(previously A B)", "takes 1 argument"),
    ("(since A)", "takes 2 argument"),
])
def test_constraint_errors(text: str, message: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_spec(f'(define t (:states (A (:text "A:")) (B (:text "B:"))) (:constraints {text}))')
    assert message in str(e.value) + str(e.value.hint)


def test_yesterday_is_false_at_the_first_step() -> None:
    spec = parse_spec('(define t (:states (A (:text "A:"))) (:constraints (previously A)))')
    with pytest.raises(SpecError, match="admits no trace"):
        build_automaton(spec)
