"""Event states that can never match (``ltlagent.spec.shadow``): the warning at load, its
soundness against the classifier on random specs, and what is not warned about."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from ltlagent.chat.events import Event
from ltlagent.cli import main
from ltlagent.logic.policy import Policy
from ltlagent.spec.shadow import args_regex_implies, exact_regex, shadow_warnings, shadowed_states
from ltlagent.spec.syntax import load_spec, parse_spec

BOOKING = load_spec("booking-policy")


def swapped_booking(tmp_path: Path) -> Path:
    """The booking policy with ``User`` declared above ``Confirm`` (issue 27)."""
    text = BOOKING.text.replace(
        '   (Confirm (:from user) (:contains "(?i)\\\\byes\\\\b"))\n   (User (:from user))\n',
        '   (User (:from user))\n   (Confirm (:from user) (:contains "(?i)\\\\byes\\\\b"))\n')
    assert text != BOOKING.text
    p = tmp_path / "swapped.sexp"
    p.write_text(text)
    return p


def _spec(states: str) -> str:
    return f"(define p (:states {states}) (:constraints (always true)))"


def names(states: str) -> dict[str, tuple[str, ...]]:
    """Each state that never matches, with the names of the states that take its steps."""
    return {s.state.name: tuple(x.name for x in s.by)
            for s in shadowed_states(parse_spec(_spec(states)).states)}


def test_swapped_booking_policy_warns_with_positions(tmp_path: Path) -> None:
    p = swapped_booking(tmp_path)
    assert shadow_warnings(load_spec(p)) == [
        f"{p}:9:5: warning: state 'Confirm' can never match: every step it matches is taken by "
        f"'User' (declared earlier at {p}:8:5)"]
    assert shadow_warnings(BOOKING) == []
    assert shadow_warnings(load_spec("react")) == []  # prompt-string specs: nothing to say


def test_commands_warn_on_stderr_and_keep_their_exit_code(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = swapped_booking(tmp_path)
    want = f"{p}:9:5: warning: state 'Confirm' can never match"
    log = tmp_path / "log.json"
    log.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    assert main(["show", str(p)]) == 0
    out, err = capsys.readouterr()
    assert err.startswith(want) and err.count("warning:") == 1 and "Confirm" in out
    assert main(["check-log", str(p), str(log)]) == 0
    assert capsys.readouterr().err.startswith(want)
    # the guard warns when it loads the policy, before it checks its port (an error here: exit 2)
    assert main(["guard", "--spec", str(p), "--upstream", "http://127.0.0.1:9", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(want) and "--port 0" in err
    assert main(["show", "booking-policy"]) == 0
    assert "warning" not in capsys.readouterr().err


@pytest.mark.parametrize("states, expected", [
    # broader author or no narrowing option above
    ('(U (:from user)) (Y (:from user) (:contains "yes"))', {"Y": ("U",)}),
    ('(T (:contains "x")) (Y (:from user) (:contains "x"))', {"Y": ("T",)}),
    ('(T (:contains "(?i)\\\\b(yes|ok)")) (Y (:from user) (:contains "(?i)\\\\b(?:yes|ok)"))',
     {"Y": ("T",)}),  # the same regex, written otherwise
    ('(C (:call)) (B (:call "book") (:args (room (:regex "Oak"))))', {"B": ("C",)}),
    # the earlier calls cover the later's, together
    ('(L (:call "find")) (C (:call "x")) (X (:call "x" "find"))', {"X": ("L", "C")}),
    # an argument regex that accepts every value the later one accepts (proved on DFAs)
    ('(A (:call "b") (:args (id (:regex "u[0-9]*")))) '
     '(B (:call "b") (:args (id (:regex "u1[0-9]+")) (n (:regex "[a-z]"))))', {"B": ("A",)}),
    # a text state without author covers every author, one by one
    ('(S (:from system)) (U (:from user)) (A (:from assistant)) (T (:from tool)) (Z (:contains "z"))',
     {"Z": ("S", "U", "A", "T")}),
    # nothing certain: different regexes, a narrower earlier state, disjoint tools or authors
    ('(Y (:from user) (:contains "yes")) (U (:from user))', {}),
    ('(Y (:from user) (:contains "yes")) (N (:from user) (:contains "no"))', {}),
    ('(Y (:from user) (:contains "yes")) (Z (:from user) (:contains "(?i)yes"))', {}),
    ('(A (:call "b") (:args (id (:regex "u1[0-9]+")))) (B (:call "b") (:args (id (:regex "u[0-9]*"))))',
     {}),
    ('(A (:call "b") (:args (id (:regex "[0-9]+")))) (B (:call "b"))', {}),
    ('(L (:call "find")) (W (:call "book")) (C (:call))', {}),
    ('(U (:from user)) (A (:from assistant)) (T (:contains "x"))', {}),
    ('(C (:call)) (R (:from assistant))', {}),  # a call state never takes a text step
])
def test_what_is_and_is_not_shadowed(states: str, expected: dict[str, tuple[str, ...]]) -> None:
    assert names(states) == expected


def test_args_regex_implication_is_proved_or_refused() -> None:
    assert args_regex_implies("u[0-9]+", "u\\d*") and not args_regex_implies("u\\d*", "u[0-9]+")
    assert args_regex_implies("Oak|Elm", "[A-Z][a-z]+") and not args_regex_implies("[A-Z][a-z]+", "Oak")
    # \D accepts non-ASCII characters the DFA leaves out: nothing can be proved from it
    assert not exact_regex("\\D") and not exact_regex("[^\\d]") and not exact_regex("[é\\w]")
    assert exact_regex("[^0-9]") and exact_regex("\\d+|[a-z]") and exact_regex(".")
    assert not args_regex_implies("\\D", "\\D|x")  # true, but not provable here: never claimed
    assert args_regex_implies("\\D", "\\D")


# -- soundness on random specs: a state reported never gets a step --------------------------------

_TEXTS = ["", "yes", "YES please", "no", "ok yes no", "confirm", "x"]
_TOOLS = ["book", "find", "other"]
_ARGS = [{}, {"room": "Oak"}, {"room": "Elm"}, {"room": "12"}, {"room": 12}, {"id": "u1"},
         {"room": "Oak", "id": "u12"}]
_OPTIONS = ['(:contains "yes")', '(:contains "(?i)yes")', '(:contains "no")', None]
_ARG_OPTIONS = ['(:args (room (:regex "Oak|Elm")))', '(:args (room (:regex "[A-Z][a-z]+")))',
                '(:args (room (:regex "[0-9]+")))', '(:args (id (:regex "u1[0-9]*")))', None]


def _random_state(rng: random.Random, k: int) -> str:
    if rng.random() < 0.5:
        who = rng.choice(["user", "assistant", None])
        opts = [f"(:from {who})" if who else "", rng.choice(_OPTIONS) or ""]
        if not any(opts):
            opts = ["(:from tool)"]
    else:
        tools = rng.sample(_TOOLS, rng.randint(0, 2))
        opts = ["(:call " + " ".join(f'"{t}"' for t in tools) + ")", rng.choice(_ARG_OPTIONS) or "",
                rng.choice(['(:contains "Oak")', None, None]) or ""]
    return f"(S{k} " + " ".join(o for o in opts if o) + ")"


def _events() -> list[Event]:
    out = [Event.say(a, t) for a in ("user", "assistant", "tool", "system") for t in _TEXTS]
    return out + [Event.call(t, args) for t in _TOOLS for args in _ARGS]


def test_reported_states_never_get_a_step() -> None:
    rng = random.Random(27)
    events = _events()
    reported = 0
    for _ in range(60):
        states = " ".join(_random_state(rng, k) for k in range(rng.randint(2, 6)))
        policy = Policy.load(parse_spec(_spec(states)))
        hit = {policy.state_of(ev) for ev in events}
        for s in shadowed_states(policy.spec.states):
            reported += 1
            assert s.state.name not in hit, states
    assert reported >= 10  # the random specs do exercise the warning
