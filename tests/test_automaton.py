"""The semantics users read in the README: which traces each bundled spec accepts."""

from __future__ import annotations

import pytest

from ltlagent import Automaton, compile_spec, parse_spec
from ltlagent.errors import SpecError

T, A, I, O, FT, ANS = "Thought", "Action", "Action-Input", "Observation", "Final-Thought", "Answer"
LOOP = [T, A, I, O]


def verdict(spec: str, trace: list[str]) -> str:
    return compile_spec(spec).automaton.run(trace).status


@pytest.mark.parametrize(("trace", "status"), [
    ([FT, ANS], "accepted"),
    ([*LOOP, FT, ANS], "accepted"),
    ([*LOOP, *LOOP, FT, ANS], "accepted"),
    ([T, A, FT, ANS], "rejected"),
    ([ANS], "rejected"),
    ([], "incomplete"),  # the empty trace is not accepted
    (LOOP, "incomplete"),
])
def test_react(trace: list[str], status: str) -> None:
    assert verdict("react", trace) == status


def test_react_rejection_names_the_step_and_what_was_allowed() -> None:
    v = compile_spec("react").automaton.run([T, A, FT, ANS])
    assert v.failed_at == 2 and v.allowed == (I,)
    inc = compile_spec("react").automaton.run(LOOP)
    assert set(inc.allowed) == {T, FT} and inc.completion == (FT, ANS)


def test_reflexion() -> None:
    ev, rf, fin = "Evaluator", "Reflection", "Finish"
    assert verdict("reflexion", [fin]) == "accepted"
    assert verdict("reflexion", [FT, ANS, ev, rf, fin]) == "accepted"
    two_rounds = [*LOOP, FT, ANS, ev, rf, *LOOP, *LOOP, FT, ANS, ev, rf, fin]
    assert verdict("reflexion", two_rounds) == "accepted"
    assert verdict("reflexion", [FT, ANS, fin]) == "rejected"


def test_chat_bot_is_infinite() -> None:
    a = compile_spec("chat-bot").automaton
    assert a.infinite
    trace: list[str] = []
    for i in range(12):  # every alternating prefix is viable and none is complete
        trace.append("Chat-Bot" if i % 2 == 0 else "User")
        assert a.run(trace).status == "incomplete"
    assert a.accepts_lasso([], ["Chat-Bot", "User"])
    assert a.accepts_lasso(["Chat-Bot", "User"], ["Chat-Bot", "User"])
    assert not a.accepts_lasso([], ["Chat-Bot"])
    assert a.run(["Chat-Bot", "Chat-Bot"]).status == "rejected"
    assert not a.accepts_lasso(["Chat-Bot"], ["Chat-Bot", "User"])


def test_chain_of_thought_accepts_exactly_thought_answer() -> None:
    a = compile_spec("chain-of-thought").automaton
    assert a.run([T, ANS]).accepted
    for bad in ([T], [ANS], [T, ANS, ANS], [T, T, ANS]):
        assert not a.run(bad).accepted


def test_react_bounded_allows_at_most_three_loops() -> None:
    a = compile_spec("react-bounded").automaton
    assert a.run([*LOOP * 3, FT, ANS]).accepted
    v = a.run([*LOOP * 4, FT, ANS])
    assert v.status == "rejected" and v.failed_at == 12 and v.allowed == (FT,)


def test_react_constrained_matches_react() -> None:
    a = compile_spec("react-constrained").automaton
    for tr in ([FT, ANS], [*LOOP, FT, ANS], [*LOOP, *LOOP, FT, ANS]):
        assert a.run(tr).accepted
    assert a.run([T, A, FT, ANS]).status == "rejected"


def test_omega_power_is_exact_not_the_safety_closure() -> None:
    """(until LOOP FT)^ω must reject LOOP^ω, which the weak closure {P[*]} would accept."""
    text = '''(define w (:states (Thought (:text "Thought:")) (Action (:text "Action:"))
      (Action-Input (:text "Action Input:")) (Observation (:text "Observation:"))
      (Final-Thought (:text "Final Thought:")))
      (:behavior (always (until (next Thought Action Action-Input Observation) Final-Thought))))'''
    a = compile_spec(parse_spec(text)).automaton
    assert not a.accepts_lasso([], LOOP)
    assert a.accepts_lasso([], [*LOOP, FT])
    assert a.accepts_lasso(LOOP, [FT])


@pytest.mark.parametrize("bound", [255, 256, 300, 600])
def test_bounds_over_255_are_exact(bound: int) -> None:
    text = f'''(define b (:states (A (:text "A:")) (B (:text "B:")))
      (:behavior (until_{bound} A B)))'''
    a = compile_spec(parse_spec(text)).automaton
    assert a.run(["A"] * bound + ["B"]).accepted
    assert a.run(["A"] * (bound + 1) + ["B"]).status == "rejected"
    low = f'''(define b (:states (A (:text "A:")) (B (:text "B:")))
      (:behavior (until_{bound}_{bound + 2} A B)))'''
    b = compile_spec(parse_spec(low)).automaton
    assert b.run(["A"] * (bound - 1) + ["B"]).status == "rejected"
    assert b.run(["A"] * (bound + 2) + ["B"]).accepted


def test_unreachable_declared_state_is_reported_by_show() -> None:
    from ltlagent.checks.show import warnings

    text = '''(define u (:states (A (:text "A:")) (B (:text "B:")) (C (:text "C:")))
      (:behavior (next A B)) (:constraints (always (not C))))'''
    assert warnings(compile_spec(parse_spec(text))) == [
        "state 'C' is declared but no trace of this spec visits it"]


def test_table_agrees_with_spot_on_every_edge() -> None:
    """Each allowed transition of the table is a letter Spot's automaton reads from that state."""
    import spot

    from ltlagent.logic.ltl import Encoding

    for name in ("react", "reflexion", "react-bounded", "chat-bot"):
        a = compile_spec(name).automaton
        aut = a.spot_automaton()
        enc = Encoding(a.names)
        d = aut.get_dict()
        for q in range(a.num_states):
            for i, r in enumerate(a.delta[q]):
                cube = spot.formula_to_bdd(spot.formula(enc.state_cube(a.names[i])), d, aut)
                dsts = [e.dst for e in aut.out(q) if (e.cond & cube).id() != 0]
                assert dsts == ([r] if r >= 0 else []), (name, q, a.names[i])


def test_spot_automaton_is_kept_and_parsed_at_most_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The builder's Spot automaton is reused; a pickled copy (the table only) parses the HOA text
    once, however many Spot views are asked of it."""
    import pickle

    from ltlagent import spotlib

    parsed: list[str] = []
    real = spotlib.from_hoa

    def counting(text: str) -> object:
        parsed.append(text)
        return real(text)

    a = compile_spec("chat-bot").automaton  # (the build itself parses ltlagent's Büchi automaton)
    monkeypatch.setattr(spotlib, "from_hoa", counting)
    assert a.spot_automaton() is a.spot_automaton()
    assert a.accepts_lasso([], ["Chat-Bot", "User"]) and a.letter_edges
    assert parsed == []
    b = pickle.loads(pickle.dumps(a))
    assert b == a and hash(b) == hash(a)
    first = b.spot_automaton()
    assert b.accepts_lasso([], ["Chat-Bot", "User"]) and not b.accepts_lasso([], ["Chat-Bot"])
    assert b.letter_edges == a.letter_edges and b.accepting_marks == a.accepting_marks
    assert b.spot_automaton() is first
    assert parsed == [a.hoa]


def _hand_built() -> Automaton:
    """0 -A-> 1 -B-> 3 (accepting); 0 -B-> 2 -C-> 4: states 2 and 4 cannot reach acceptance."""
    from ltlagent.graph import coreachable
    from ltlagent.logic.ltl import Formulas

    delta = ((1, 2, -1), (-1, 3, -1), (-1, -1, 4), (-1, -1, -1), (-1, -1, -1))
    return Automaton(("A", "B", "C"), 0, delta, frozenset({3}), coreachable(delta, {3}), False,
                     Formulas("", "", False), "")


def test_derived_views_of_the_table() -> None:
    a = _hand_built()
    assert a.live == {0, 1, 3}
    assert a.live_delta == ((1, -1, -1), (-1, 3, -1), (-1, -1, -1), (-1, -1, -1), (-1, -1, -1))
    assert a.allowed_index == ((0,), (1,), (), (), ())
    assert a.reachable == {0, 1, 3}
    assert a.doomed == {2, 4}
    assert a.visited_names == {"A", "B"}
    assert a.state_cubes == ("(b0 & !b1)", "(!b0 & b1)", "(b0 & b1)")
    assert a.live_delta is a.live_delta  # computed once


def test_show_warnings_read_the_views() -> None:
    from ltlagent.checks.show import warnings
    from ltlagent.logic.compiled import CompiledSpec
    from ltlagent.text.lexer import build_lexer

    spec = parse_spec('''(define h (:states (A (:text "A:")) (B (:text "B:")) (C (:text "C:")))
      (:behavior (next A B)))''')
    c = CompiledSpec(spec, _hand_built(), build_lexer(["A:", "B:", "C:"]))
    assert warnings(c) == [
        "state 'C' is declared but no trace of this spec visits it",
        "automaton states 2, 4 cannot reach acceptance: the monitor never lets a trace enter them"]


ABC = '(:states (A (:text "A:")) (B (:text "B:")) (C (:text "C:")))'


@pytest.mark.parametrize(("constraint", "accepted", "refused"), [
    ("true", [["A", "B"], ["A", "C", "B"]], []),
    ('(ltl "G(A -> X B)")', [["A", "B"]], [["A", "C", "B"]]),
    # strong next: Spot's Python formula.map raised "unknown type of formula" on X[!]
    ('(ltl "G(A -> X[!] B)")', [["A", "B"]], [["A", "C", "B"]]),
    ('(ltl "F C")', [["A", "C", "B"]], [["A", "B"]]),
    ("(not C)", [["A", "B"], ["A", "C", "B"]], []),  # only the first step must not be C
    ("(always (not C))", [["A", "B"]], [["A", "C", "B"]]),
])
def test_constraint_constants_and_raw_ltl_are_applied(constraint: str, accepted: list[list[str]],
                                                      refused: list[list[str]]) -> None:
    """Found by mutation testing (issue 21): ``true`` and raw ``(ltl "…")`` constraints reach Spot
    as written (the differential tests draw neither)."""
    a = compile_spec(parse_spec(f"(define k {ABC} (:behavior (next A (optional C) B))"
                                f" (:constraints {constraint}))")).automaton
    for tr in accepted:
        assert a.run(tr).accepted, tr
    for tr in refused:
        assert not a.run(tr).accepted, tr


def test_a_false_constraint_leaves_no_trace() -> None:
    with pytest.raises(SpecError, match="admits no trace"):
        compile_spec(parse_spec(f"(define k {ABC} (:behavior (next A B)) (:constraints false))"))


def test_always_after_a_longer_sequence_is_the_infinite_part() -> None:
    """``(next A B (always C))``: the ``always`` is found in the last part of a sequence of three."""
    spec = parse_spec(f"(define i {ABC} (:behavior (next A B (always C))))")
    a = compile_spec(spec).automaton
    assert spec.is_infinite and a.infinite
    assert a.accepts_lasso(["A", "B"], ["C"]) and not a.accepts_lasso(["A"], ["C"])
    assert not a.accepts_lasso(["A", "B", "C"], ["B"])


@pytest.mark.parametrize("behavior", ["(repeat A)", "(optional A)",
                                      "(until (repeat (repeat A :min 2)) (optional B))"])
def test_the_empty_trace_is_never_complete(behavior: str) -> None:
    """A trace has at least one step (§2.1), even where the pattern matches the empty one: the
    initial state is not accepting, so a monitor can never stop before the first step."""
    a = compile_spec(parse_spec(f"(define e {ABC} (:behavior {behavior}))")).automaton
    assert not a.is_complete(a.initial) and a.shortest_completion(a.initial)


def test_pinned_automaton_is_the_finite_language_then_the_end() -> None:
    """check-equiv's Spot cross-check reads finite specs as ω-words: a trace, then code 0
    forever. The pinned automaton accepts exactly the complete traces so extended."""
    import itertools

    from ltlagent import spotlib

    a = compile_spec(parse_spec(f"(define e {ABC} (:behavior (next A (repeat B :max 2) C))"
                                ' (:constraints (always (implies B (next C)))))')).automaton
    pinned = a.pinned_spot_automaton()
    end = a.encoding.cube(0)
    for n in range(6):
        for w in itertools.product(a.names, repeat=n):
            cubes = [a.encoding.state_cube(x) for x in w]
            assert spotlib.accepts_lasso(pinned, cubes, [end]) == a.run(list(w)).accepted, w
    with pytest.raises(ValueError):
        compile_spec("chat-bot").automaton.pinned_spot_automaton()
