"""``ltlagent check-equiv``: the issue's cases, lassos, state-table differences, shortest traces."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from ltlagent.checks.equiv import EquivResult, check_equivalence, compact
from ltlagent.cli import main
from ltlagent.errors import SpecError
from ltlagent.logic.compiled import compile_spec
from ltlagent.spec.syntax import load_spec, parse_spec

DATA = Path(__file__).parent / "data"
EQ = DATA / "equiv"
IBM = DATA / "ibm-reference"
LOOP = ("Thought", "Action", "Action-Input", "Observation")


def equiv(a: str | Path, b: str | Path, implies: bool = False) -> EquivResult:
    return check_equivalence(load_spec(a), load_spec(b), implies=implies, label_a=str(a),
                             label_b=str(b))


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_react_equals_until_with_a_two_step_ending(capsys: pytest.CaptureFixture[str]) -> None:
    r = equiv("react", EQ / "react-until-next.sexp")
    assert r.holds and not r.counterexamples and not r.state_differences
    code, out, _ = cli(capsys, "check-equiv", "react", str(EQ / "react-until-next.sexp"))
    assert code == 0 and out.startswith("equivalent: ")


def test_react_against_react_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    r = equiv("react", "react-bounded")
    assert not r.holds
    (ce,) = r.counterexamples
    assert ce.accepted_by == "a" and ce.cycle is None
    assert ce.trace == LOOP * 4 + ("Final-Thought", "Answer")
    assert ce.compact() == "(Thought Action Action-Input Observation)×4 Final-Thought Answer"
    code, out, _ = cli(capsys, "check-equiv", "react", "react-bounded")
    assert code == 1
    assert "accepted by react, rejected by react-bounded (18 steps):" in out
    assert "every trace of react-bounded is accepted by react" in out
    assert equiv("react-bounded", "react", implies=True).holds
    r = equiv("react", "react-bounded", implies=True)
    assert not r.holds and r.counterexamples[0].trace == ce.trace
    assert cli(capsys, "check-equiv", "react-bounded", "react", "--implies")[0] == 0


def test_react_against_react_ablation() -> None:
    r = equiv("react", "react-ablation")
    assert not r.holds
    by = {c.accepted_by: c.trace for c in r.counterexamples}
    assert by == {"a": ("Final-Thought", "Answer"), "b": ("Final-Thought",)}
    only_a = {d.state for d in r.state_differences if d.field == "declared"}
    assert only_a == {"Action", "Action-Input", "Answer"}


def test_chat_bot_with_states_in_another_order() -> None:
    r = equiv("chat-bot", EQ / "chat-bot-reordered.sexp")
    assert r.holds and r.infinite == (True, True) and not r.state_differences


def test_constraints_against_the_pattern_they_reduce_to() -> None:
    r = equiv("react-constrained", "react")
    assert r.holds and not r.state_differences


def test_text_differences_are_reported_apart_from_behaviour(capsys: pytest.CaptureFixture[str]) -> None:
    r = equiv("react", EQ / "react-think.sexp")
    assert r.holds
    assert [(d.state, d.field, d.a, d.b) for d in r.state_differences] == [
        ("Thought", "text", "Thought:", "Think:"),
        ("Observation", "env_input", True, False)]
    code, out, _ = cli(capsys, "check-equiv", "react", str(EQ / "react-think.sexp"))
    assert code == 0
    assert "Thought: text 'Thought:' in react, 'Think:' in" in out
    assert "Observation: env-input True in react, False in" in out
    r = equiv("react", "react-tools")
    assert r.holds and {d.field for d in r.state_differences} == {"stop", "choices"}


def test_renamed_state_hint() -> None:
    r = equiv(IBM / "pass.txt", IBM / "pass_list.txt")
    assert not r.holds
    assert {c.trace for c in r.counterexamples} == {
        ("question", "plan", "summarize", "final-thought", "answer"),
        ("question", "plan", "list-results", "final-thought", "answer")}
    hint = [d for d in r.state_differences if d.field == "same-text"]
    assert [(d.state, d.a, d.b) for d in hint] == [("[Summary]", "summarize", "list-results")]


def test_ibm_bounds_compare_by_count() -> None:
    spec = (IBM / "react.txt").read_text()
    more = parse_spec(spec.replace("until_5", "until_6"), "six")
    r = check_equivalence(load_spec(IBM / "react.txt"), more)
    (ce,) = r.counterexamples
    loop = ("thought", "action", "action-input", "observation")
    assert ce.accepted_by == "b" and ce.trace == ("question", *loop * 6, "final-thought", "answer")


# -- infinite specs -------------------------------------------------------------------------------

def test_lassos_both_directions() -> None:
    r = equiv("chat-bot", EQ / "chat-user-first.sexp")
    assert {(c.accepted_by, c.trace, c.cycle) for c in r.counterexamples} == {
        ("a", (), ("Chat-Bot", "User")), ("b", (), ("User", "Chat-Bot"))}


def test_acceptance_only_difference_and_lasso_check(capsys: pytest.CaptureFixture[str]) -> None:
    # same transitions, different acceptance: only Spot's marks tell them apart
    r = equiv(EQ / "chat-opt-user.sexp", EQ / "chat-opt-user-gf.sexp")
    (ce,) = r.counterexamples
    assert (ce.accepted_by, ce.trace, ce.cycle) == ("a", (), ("Chat-Bot",))
    a = compile_spec(EQ / "chat-opt-user.sexp").automaton
    b = compile_spec(EQ / "chat-opt-user-gf.sexp").automaton
    assert a.accepts_lasso([], ["Chat-Bot"]) and not b.accepts_lasso([], ["Chat-Bot"])
    assert equiv(EQ / "chat-opt-user-gf.sexp", EQ / "chat-opt-user.sexp", implies=True).holds
    code, out, _ = cli(capsys, "check-equiv", str(EQ / "chat-opt-user.sexp"),
                       str(EQ / "chat-opt-user-gf.sexp"), "--format", "json")
    obj = json.loads(out)
    assert code == 1 and obj["counterexamples"] == [
        {"accepted_by": "a", "rejected_by": "b", "prefix": [], "cycle": ["Chat-Bot"]}]


def test_lasso_with_prefix() -> None:
    r = equiv(EQ / "chat-greet.sexp", "chat-bot")
    by = {c.accepted_by: (c.trace, c.cycle) for c in r.counterexamples}
    assert by == {"a": (("Greet", "Greet"), ("Chat-Bot", "User")), "b": ((), ("Chat-Bot", "User"))}
    assert r.counterexamples[0].words() == "Greet Greet (Chat-Bot User)^ω"


def test_finite_against_infinite(capsys: pytest.CaptureFixture[str]) -> None:
    r = equiv("chain-of-thought", "chat-bot")
    by = {c.accepted_by: (c.trace, c.cycle) for c in r.counterexamples}
    assert by == {"a": (("Thought", "Answer"), None), "b": ((), ("Chat-Bot", "User"))}
    code, out, _ = cli(capsys, "check-equiv", "chain-of-thought", "chat-bot")
    assert code == 1 and "finite against infinite traces" in out


# -- shortest counterexamples, checked by brute force ---------------------------------------------

def _random_pattern(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.3:
        return rng.choice("ABC")
    op = rng.choice(["next", "until", "or", "repeat", "optional"])
    if op in ("next", "or"):
        return f"({op} " + " ".join(_random_pattern(rng, depth - 1)
                                     for _ in range(rng.randint(2, 3))) + ")"
    if op == "until":
        return f"(until {_random_pattern(rng, depth - 1)} {_random_pattern(rng, depth - 1)})"
    if op == "optional":
        return f"(optional {_random_pattern(rng, depth - 1)})"
    lo = rng.randint(0, 2)
    return f"(repeat {_random_pattern(rng, depth - 1)} :min {lo} :max {lo + rng.randint(1, 2)})"


def _spec(pattern: str, name: str) -> object:
    return parse_spec(f'(define {name} (:states (A (:text "A:")) (B (:text "B:")) (C (:text "C:")))'
                      f' (:behavior {pattern}))', name)


def test_counterexamples_are_shortest_by_brute_force() -> None:
    rng = random.Random(7)
    words = [w for n in range(1, 8) for w in itertools.product("ABC", repeat=n)]
    checked = 0
    while checked < 16:
        pa = _random_pattern(rng, 3)
        pb = _random_pattern(rng, 3)
        if checked % 2 and ":max " in pa:  # a near miss: one bound one higher
            i = pa.index(":max ") + 5
            pb = pa[:i] + str(int(pa[i]) + 1) + pa[i + 1:]
        try:
            sa, sb = _spec(pa, "a"), _spec(pb, "b")
            ta, tb = compile_spec(sa).automaton, compile_spec(sb).automaton  # type: ignore[arg-type]
        except SpecError:  # a random pattern may admit no trace
            continue
        checked += 1
        r = check_equivalence(sa, sb)  # type: ignore[arg-type]
        acc = {w: (ta.run(w).accepted, tb.run(w).accepted) for w in words}
        for side, want in (("a", (True, False)), ("b", (False, True))):
            brute = next((w for w in words if acc[w] == want), None)
            ce = next((c for c in r.counterexamples if c.accepted_by == side), None)
            if brute is None:
                assert ce is None or len(ce.trace) > 7, (pa, pb, side)
            else:
                assert ce is not None and len(ce.trace) == len(brute), (pa, pb, side, ce, brute)
                assert acc.get(ce.trace, want) == want


def test_compact() -> None:
    assert compact(["a", "b", "a", "b", "c"]) == "(a b)×2 c"
    assert compact(["x", "x", "x"]) == "x×3"
    assert compact(["a", "b"]) == "a b"


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "check-equiv", "react", str(tmp_path / "missing.sexp"))
    assert code == 2 and "no such file or bundled spec" in err
    bad = tmp_path / "bad.sexp"
    bad.write_text("(define x (:states (A (:text \"A:\"))) (:behavior (next A")
    code, _, err = cli(capsys, "check-equiv", "react", str(bad))
    assert code == 2 and f"{bad}:1:" in err and "Traceback" not in err
