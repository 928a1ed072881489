"""Differential test (docs/design.md §9): the spec's automaton against the independent reference evaluator.

Random patterns (next/until/always/or/optional/repeat, nesting depth up to 5, up to 8 states) and
random finite and lasso traces, some drawn from the pattern's own language and then perturbed.
The test must be able to fail: ``test_mutation_is_caught`` runs the same property against
the textbook-LTL reading of ``until`` (handed to Spot as a constraint) and requires a
counterexample. The number of examples and their randomness come from the Hypothesis profile
(tests/conftest.py): ``ci`` is derandomised, ``explore`` draws many more.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ltlagent.errors import SpecError
from ltlagent.logic.automaton import Automaton, build_automaton
from ltlagent.spec.syntax import (
    Always,
    Formula,
    Next,
    Or,
    Pattern,
    Repeat,
    Spec,
    State,
    Until,
    Visit,
    any_sequence,
)

from . import reference

NAMES = tuple(f"S{i}" for i in range(8))
#: examples per property: the profile's (100 under ``ci``, 2000 under ``explore``)
EXAMPLES = settings().max_examples
SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def finite_patterns(draw: st.DrawFn, names: tuple[str, ...], depth: int) -> Pattern:
    """A pattern whose first child reaches exactly ``depth`` levels of nesting."""
    if depth == 0:
        return Visit(draw(st.sampled_from(names)))
    op = draw(st.sampled_from(("next", "until", "or", "optional", "repeat")))
    main = draw(finite_patterns(names, depth - 1))

    def other() -> Pattern:
        return draw(finite_patterns(names, draw(st.integers(0, min(1, depth - 1)))))

    if op == "next":
        parts = [main] + [other() for _ in range(draw(st.integers(1, 2)))]
        return Next(tuple(draw(st.permutations(parts))))
    if op == "or":
        return Or((main, other()))
    if op == "until":
        lo = draw(st.integers(0, 2))
        hi = draw(st.one_of(st.none(), st.integers(max(lo, 1), lo + 2)))
        return Until(main, other(), lo, hi) if draw(st.booleans()) else Until(other(), main, lo, hi)
    if op == "optional":
        return Repeat(main, 0, 1)
    lo = draw(st.integers(0, 2))
    return Repeat(main, lo, draw(st.one_of(st.none(), st.integers(max(lo, 1), lo + 2))))


@st.composite
def specs(draw: st.DrawFn, infinite: bool | None = None) -> Spec:
    n = draw(st.integers(2, 8))
    names = NAMES[:n]
    depth = draw(st.integers(1, 5))
    pat = draw(finite_patterns(names, depth))
    if infinite is None:
        infinite = draw(st.booleans())
    if infinite:
        body = draw(finite_patterns(names, draw(st.integers(0, 2))))
        pat = Always(body) if draw(st.booleans()) else Next((pat, Always(body)))
    states = tuple(State(nm, f"<{nm}>") for nm in names)
    return Spec("random", states, pat)


def sample_word(p: Pattern, rng: random.Random) -> list[str]:
    """A word of the finite pattern ``p``, drawn by random choices (independent of Spot)."""
    if isinstance(p, Visit):
        return [p.name]
    if isinstance(p, Next):
        return [x for q in p.parts for x in sample_word(q, rng)]
    if isinstance(p, Or):
        return sample_word(rng.choice(p.parts), rng)
    hi = p.max if isinstance(p, Until | Repeat) and p.max is not None else p.min + 3  # type: ignore[union-attr]
    k = rng.randint(p.min, hi)  # type: ignore[union-attr]
    out = [x for _ in range(k) for x in sample_word(p.body, rng)]  # type: ignore[union-attr]
    return out + (sample_word(p.then, rng) if isinstance(p, Until) else [])


def perturb(word: list[str], names: tuple[str, ...], rng: random.Random) -> list[str]:
    w = list(word)
    kind = rng.randrange(4)
    if kind == 0 and w:
        del w[rng.randrange(len(w))]
    elif kind == 1:
        w.insert(rng.randrange(len(w) + 1), rng.choice(names))
    elif kind == 2 and w:
        w[rng.randrange(len(w))] = rng.choice(names)
    elif w:
        w = w[: rng.randrange(len(w))]
    return w


def split(p: Pattern) -> tuple[Pattern | None, Pattern | None]:
    if isinstance(p, Always):
        return None, p.body
    if isinstance(p, Next) and isinstance(p.parts[-1], Always):
        return p.parts[0], p.parts[-1].body  # type: ignore[union-attr]
    return p, None


def check_agreement(spec: Spec, aut: Automaton, seed: int) -> None:
    """Every verdict of the automaton equals the reference's, on many traces."""
    rng = random.Random(seed)
    names = spec.names
    pre, body = split(spec.behavior)
    words: list[list[str]] = []
    for _ in range(12):
        w = (sample_word(pre, rng) if pre is not None else []) + (
            [x for _ in range(rng.randint(0, 3)) for x in sample_word(body, rng)]
            if body is not None else [])
        words += [w, perturb(w, names, rng)]
    words += [[rng.choice(names) for _ in range(rng.randint(0, 8))] for _ in range(10)]
    for w in words:
        w = w[:40]
        v = aut.run(w)
        for i in range(len(w) + 1):  # every prefix: viable iff the automaton has not rejected it
            ref_viable = reference.viable(spec.behavior, w[:i])
            got = aut.run(w[:i]).status != "rejected"
            assert got == ref_viable, (spec.behavior, w[:i], "viable", ref_viable)
        if v.status != "rejected":
            want_allowed = {s for s in names if reference.viable(spec.behavior, [*w, s])}
            assert set(v.allowed) == want_allowed, (spec.behavior, w, want_allowed, v.allowed)
        if not aut.infinite:
            assert (v.status == "accepted") == reference.accepts(spec.behavior, w), (spec.behavior, w)
    if aut.infinite:
        assert body is not None
        for _ in range(12):
            prefix = (sample_word(pre, rng) if pre is not None else [])
            cycle = [x for _ in range(rng.randint(1, 2)) for x in sample_word(body, rng)]
            lassos = [(prefix, cycle), (perturb(prefix, names, rng), cycle),
                      (prefix, perturb(cycle, names, rng)),
                      ([rng.choice(names) for _ in range(rng.randint(0, 3))],
                       [rng.choice(names) for _ in range(rng.randint(1, 3))])]
            for u, c in lassos:
                if not c:
                    continue
                ref = reference.accepts_lasso(spec.behavior, tuple(u), tuple(c))
                assert aut.accepts_lasso(u, c) == ref, (spec.behavior, u, c, ref)


def _compile_or_none(spec: Spec) -> Automaton | None:
    try:
        return build_automaton(spec)
    except SpecError:  # empty language: the reference must agree that nothing is viable
        return None


@SETTINGS
@given(spec=specs(), seed=st.integers(0, 2**16))
def test_automaton_agrees_with_reference(spec: Spec, seed: int) -> None:
    aut = _compile_or_none(spec)
    assert aut is not None, "random patterns always have a non-empty language"
    check_agreement(spec, aut, seed)


@settings(max_examples=max(10, EXAMPLES * 2 // 5), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(spec=specs(infinite=True), seed=st.integers(0, 2**16))
def test_infinite_specs_agree_with_reference(spec: Spec, seed: int) -> None:
    aut = _compile_or_none(spec)
    assert aut is not None
    check_agreement(spec, aut, seed)


def _all_words(names: tuple[str, ...], up_to: int) -> list[list[str]]:
    words: list[list[str]] = [[]]
    frontier: list[list[str]] = [[]]
    for _ in range(up_to):
        frontier = [[*w, n] for w in frontier for n in names]
        words += frontier
    return words


A, B = Visit("S0"), Visit("S1")
NULLABLE_BODIES = [  # repeats and untils whose body matches the empty trace (Spot mis-simplified
    # the star of {[*0] | a[*2..]} to a[*]; found by test_automaton_agrees_with_reference)
    Until(Repeat(Repeat(A, min=2)), B),
    Repeat(Repeat(A, min=2), min=1),
    Repeat(Repeat(A, min=2, max=3), min=2, max=4),
    Until(Repeat(Next((A, A)), max=2), B, min=1, max=3),
    Repeat(Next((Repeat(A, min=2), Repeat(B, min=0, max=1))), min=0, max=3),
    Until(Or((Repeat(A, min=3), Repeat(B, min=2))), A),
    Next((Repeat(Repeat(A, min=2)), B)),
]


@pytest.mark.parametrize("pattern", NULLABLE_BODIES, ids=str)
def test_repeating_a_nullable_body(pattern: Pattern) -> None:
    spec = Spec("nullable", (State("S0", "A:"), State("S1", "B:")), pattern)
    aut = _compile_or_none(spec)
    assert aut is not None
    for w in _all_words(spec.names, 7):
        assert (aut.run(w).status == "accepted") == reference.accepts(pattern, w), (pattern, w)
        assert (aut.run(w).status != "rejected") == reference.viable(pattern, w), (pattern, w)


# --- shapes Spot's SERE simplifier got wrong (docs/design.md §3.2): ltlagent compiles patterns itself

S0, S3 = Visit("S0"), Visit("S3")
SPOT_SERE_BUGS = [
    # issue 27: accepted the one-step trace S3 (every run of S3 has length >= 2)
    Until(Repeat(S3, min=2), Repeat(Repeat(S3, min=2), min=0)),
    # README's {r}[*0..n] family: every word of r has two letters or more ({a[*2..]}[*0..1] became a[*])
    Repeat(Repeat(S3, min=2), min=0, max=1),
    Repeat(Repeat(S3, min=2), min=0, max=3),
    Repeat(Repeat(S3, min=2, max=3), min=0, max=2),
    Repeat(Next((S3, S0)), min=0, max=2),
    Until(Repeat(Next((S3, S3)), min=0, max=1), S0),
    # nested repeats, nullable and not
    Repeat(Repeat(Repeat(S3, min=2), min=0), min=0),
    Repeat(Repeat(Repeat(S3, min=2), min=1), min=1, max=2),
    Until(Repeat(Repeat(S3, min=2)), Repeat(Repeat(S3, min=3))),
    Next((Repeat(Repeat(S3, min=2), min=0, max=1), Repeat(Repeat(S0, min=2), min=0, max=1))),
    Or((Repeat(Repeat(S3, min=2), min=0, max=1), Repeat(S0, min=3, max=3))),
]


def _two_states(pattern: Pattern) -> Spec:
    return Spec("sere-bug", (State("S0", "<S0>"), State("S3", "<S3>")), pattern)


def test_issue_27_one_step_is_not_a_run_of_two() -> None:
    """The issue's case: ``S3`` alone is not a trace of the pattern, and ``S3 S3`` is."""
    aut = build_automaton(_two_states(SPOT_SERE_BUGS[0]))
    assert aut.run(["S3"]).status == "incomplete"
    assert aut.run(["S3", "S3"]).accepted and aut.run(["S3"] * 5).accepted


@pytest.mark.parametrize("pattern", SPOT_SERE_BUGS, ids=str)
def test_sere_bug_shapes_are_exact(pattern: Pattern) -> None:
    """Every trace up to length 8: accepted and viable exactly as the reference says."""
    aut = _compile_or_none(_two_states(pattern))
    assert aut is not None
    for w in _all_words(("S0", "S3"), 8):
        assert (aut.run(w).status == "accepted") == reference.accepts(pattern, w), (pattern, w)
        assert (aut.run(w).status != "rejected") == reference.viable(pattern, w), (pattern, w)


@pytest.mark.parametrize("pattern", SPOT_SERE_BUGS, ids=str)
def test_sere_bug_shapes_are_exact_under_always(pattern: Pattern) -> None:
    """The same shapes as the body of ``always`` and as the prefix before one, on every lasso
    with a prefix up to 3 and a cycle up to 3 letters."""
    for behavior in (Always(pattern), Next((pattern, Always(Or((S0, S3)))))):
        aut = _compile_or_none(_two_states(behavior))
        assert aut is not None
        for u in _all_words(("S0", "S3"), 3):
            for c in _all_words(("S0", "S3"), 3)[1:]:
                want = reference.accepts_lasso(behavior, tuple(u), tuple(c))
                assert aut.accepts_lasso(u, c) == want, (behavior, u, c)


# --- the mutation: `until` read as textbook LTL U (docs/design.md §2.1 explains why that is wrong) -----

def textbook_ltl(p: Pattern, atom: object) -> str:
    """The literal LTL reading: next = the paper's ○⟨…⟩ chain, until = U."""
    a = atom  # type: ignore[assignment]
    if isinstance(p, Visit):
        return a(p.name)  # type: ignore[operator]
    if isinstance(p, Next):
        head, *rest = p.parts
        h = textbook_ltl(head, a)
        if not rest:
            return h
        tail = Next(tuple(rest)) if len(rest) > 1 else rest[0]
        return f"({h} & X[!]{textbook_ltl(tail, a)})"
    if isinstance(p, Until):
        return f"({textbook_ltl(p.body, a)} U {textbook_ltl(p.then, a)})"
    if isinstance(p, Or):
        return "(" + " | ".join(textbook_ltl(q, a) for q in p.parts) + ")"
    if isinstance(p, Repeat):
        return f"(true U {textbook_ltl(p.body, a)})"
    raise TypeError(p)


def textbook(spec: Spec) -> Spec:
    """The mutant: the behaviour read as textbook LTL, handed to Spot as a raw constraint (LTLf)
    on "any non-empty sequence of states"."""
    quote = '"{}"'.format
    return Spec(spec.name, spec.states, any_sequence(spec.names),
                (Formula("ltl", raw=textbook_ltl(spec.behavior, quote)),))


def test_mutation_is_caught() -> None:
    """The property fails on the textbook reading: on the ReAct loop, and under hypothesis."""
    from ltlagent import load_spec

    react = load_spec("react")
    mutant = build_automaton(textbook(react))
    loop = ["Thought", "Action", "Action-Input", "Observation", "Final-Thought", "Answer"]
    assert reference.accepts(react.behavior, loop)
    assert mutant.run(loop).status == "rejected"  # the mutant cannot run the loop even once

    @settings(max_examples=150, deadline=None, database=None, report_multiple_bugs=False,
              phases=[Phase.generate],  # a counterexample is all we need: no shrinking
              suppress_health_check=[HealthCheck.too_slow])
    @given(spec=specs(infinite=False), seed=st.integers(0, 2**16))
    def property_on_mutant(spec: Spec, seed: int) -> None:
        aut = _compile_or_none(textbook(spec))
        if aut is None:
            assert not reference.viable(spec.behavior, [])
            return
        check_agreement(spec, aut, seed)

    with pytest.raises(AssertionError):
        property_on_mutant()


# --- bounds above Spot's 8-bit limit are split (docs/design.md §3.3): the split must stay exact ---

A, B, C = Visit("S0"), Visit("S1"), Visit("S2")


@pytest.mark.parametrize("pattern", [
    Repeat(A, 0, 300),
    Repeat(A, 250, 520),
    Next((Repeat(A, 254, 509), C)),
    Until(Or((A, Next((A, B)))), C, 253, 300),
    Until(Repeat(A, 0, 1), C, 0, 260),  # a body that matches the empty word
    Repeat(Next((A, B)), 0, 260),  # every word has length >= 2: the Spot simplification pitfall
    Repeat(Next((A, B)), 255, None),
])
def test_large_bounds_agree_with_reference(pattern: Pattern) -> None:
    spec = Spec("big", tuple(State(n, f"<{n}>") for n in ("S0", "S1", "S2")), pattern)
    aut = build_automaton(spec)
    rng = random.Random(0)
    lengths = {0, 1, 2, 252, 253, 254, 255, 256, 259, 260, 261, 299, 300, 301, 508, 509, 510, 519,
               520, 521}
    words = [["S0"] * k for k in sorted(lengths)]
    words += [[*w, "S2"] for w in words]
    words += [[x for _ in range(k) for x in ("S0", "S1")] for k in (253, 254, 255, 256)]
    words += [[rng.choice(("S0", "S0", "S0", "S1")) for _ in range(k)] + ["S2"]
              for k in (253, 254, 255, 299, 300, 301)]
    for w in words:
        assert (aut.run(w).status == "accepted") == reference.accepts(pattern, w), (pattern, len(w))
