"""``ltlagent check-equiv``: the issue's cases, lassos, state-table differences, shortest traces."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from ltlagent.chat.events import conversation_events
from ltlagent.checks.equiv import EquivResult, check_equivalence, compact, is_first_order
from ltlagent.cli import main
from ltlagent.errors import SpecError, UsageError
from ltlagent.logic.compiled import compile_spec
from ltlagent.logic.policy import Policy
from ltlagent.spec.syntax import Spec, load_spec, parse_spec

DATA = Path(__file__).parent / "data"
EQ = DATA / "equiv"
IBM = DATA / "ibm-reference"
#: booking-policy without its first-order rule: check-equiv compares propositional policies
BOOKING = DATA / "booking-propositional.sexp"
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


# -- event specs: conversations, each step in the first state that matches it (issue 27) ----------

def _booking_swapped() -> Spec:
    """The booking policy with ``User`` declared above ``Confirm``: Confirm never gets a step."""
    a = load_spec(BOOKING)
    text = a.text.replace(
        '   (Confirm (:from user) (:contains "(?i)\\\\byes\\\\b"))\n   (User (:from user))\n',
        '   (User (:from user))\n   (Confirm (:from user) (:contains "(?i)\\\\byes\\\\b"))\n')
    assert text != a.text
    return parse_spec(text, "swapped.sexp")


def _ok(policy: Policy, messages: Sequence[Mapping[str, object]]) -> bool:
    return policy.check(list(messages)).ok


def test_reordered_policy_differs_by_a_shortest_conversation(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = load_spec(BOOKING), _booking_swapped()
    r = check_equivalence(a, b, label_a="booking", label_b="swapped")
    assert not r.holds and r.decided and r.events
    (ce,) = r.counterexamples  # every conversation the swapped policy accepts, the original does
    assert ce.accepted_by == "a" and ce.messages is not None and len(ce.messages) == 3
    pa, pb = Policy.load(a), Policy.load(b)
    assert _ok(pa, ce.messages) and not _ok(pb, ce.messages)
    assert ce.trace == ("Confirm", "Lookup", "Write") or ce.trace == ("Lookup", "Confirm", "Write")
    confirm = ce.trace.index("Confirm")
    assert ce.rejected_states is not None and ce.rejected_states[confirm] == "User"
    assert ce.messages[confirm] == {"role": "user", "content": "yes"}
    assert [m.get("tool_calls", [{}])[0].get("function", {}).get("name")  # type: ignore[index]
            for m in ce.messages if m["role"] == "assistant"] == ["find_user", "book"]
    # shortest: no conversation of one or two messages of these kinds tells the policies apart
    pool = _witnesses(a, b)
    for n in (1, 2):
        for conv in itertools.product(pool, repeat=n):
            assert _ok(pa, conv) == _ok(pb, conv), conv
    assert [(d.state, d.field) for d in r.state_differences] == [("Confirm", "never-matched")]
    p = tmp_path / "swapped.sexp"
    p.write_text(b.text)
    code, out, err = cli(capsys, "check-equiv", str(BOOKING), str(p))
    assert code == 1 and out.startswith(f"not equivalent: {BOOKING} and ")
    assert 'user: "yes"' in out and f"[Confirm in {BOOKING}, User in {p}]" in out
    assert "assistant calls book({})" in out
    assert err.startswith(f"{p}:9:5: warning: state 'Confirm' can never match")
    code, out, _ = cli(capsys, "check-equiv", str(BOOKING), str(p), "--format", "json")
    obj = json.loads(out)
    assert code == 1 and obj["compared"] == "conversations"
    assert obj["counterexamples"][0]["messages"][confirm] == {"role": "user", "content": "yes"}
    assert obj["counterexamples"][0]["states"]["b"][confirm] == "User"


def _witnesses(a: Spec, b: Spec) -> list[Mapping[str, object]]:
    from ltlagent.checks.regions import step_alphabet

    return [x.message for x in step_alphabet(a.states, b.states).letters]


def test_equivalent_policies_stay_equivalent(capsys: pytest.CaptureFixture[str]) -> None:
    a = load_spec(BOOKING)
    assert check_equivalence(a, a).holds
    # states that share no step, declared in another order
    moved = parse_spec(a.text.replace(
        '   (Lookup (:call "find_user"))\n   (Write (:call "book" "change_booking" "cancel_booking"))\n',
        '   (Write (:call "book" "change_booking" "cancel_booking"))\n   (Lookup (:call "find_user"))\n'))
    assert moved.names != a.names
    r = check_equivalence(a, moved)
    assert r.holds and not r.state_differences
    # a state renamed everywhere: the same conversations are accepted (the verdict is about
    # conversations; the renaming is reported beside it)
    renamed = parse_spec(a.text.replace("Confirm", "Yes"), "renamed.sexp")
    r = check_equivalence(a, renamed, label_a="booking", label_b="renamed")
    assert r.holds and [(d.state, d.field, d.b) for d in r.state_differences] == [
        ("Confirm", "renamed", "Yes")]
    assert "Confirm in booking is Yes in renamed: they take the same steps" in r.render()


_ROOMS = ('(define p (:states (W (:call "book") (:args (room (:regex "{}")))) (C (:call)) '
          '(U (:from user))) (:constraints (always (not W))))')


def test_argument_regexes_get_a_witness_value() -> None:
    a, b = parse_spec(_ROOMS.format("Oak|Elm")), parse_spec(_ROOMS.format("Oak|Elm|Ash"))
    r = check_equivalence(a, b)
    (ce,) = r.counterexamples
    assert ce.accepted_by == "a" and ce.trace == ("C",) and ce.rejected_states == ("W",)
    call = ce.messages[0]["tool_calls"][0]["function"]  # type: ignore[index]
    assert call["name"] == "book" and json.loads(call["arguments"]) == {"room": "Ash"}
    assert check_equivalence(a, b, implies=True).holds is False
    assert check_equivalence(b, a, implies=True).holds
    # regexes that accept the same values are the same test
    assert check_equivalence(a, parse_spec(_ROOMS.format("(Oak|Elm)"))).holds
    assert check_equivalence(a, parse_spec(_ROOMS.format("Elm|Oak"))).holds
    # a call's text is its arguments as written: a (:contains …) on it against an argument test
    by_text = parse_spec(_ROOMS.replace('(:args (room (:regex "{}")))',
                                        '(:contains "^\\\\{{\\"room\\"")'))
    by_key = parse_spec(_ROOMS.format(".*"))
    r = check_equivalence(by_text, by_key)
    (ce,) = r.counterexamples  # a room after another argument: by_key's W, not by_text's
    assert ce.accepted_by == "a" and ce.trace == ("C",) and ce.messages is not None
    assert Policy.load(by_text).check(list(ce.messages)).ok
    assert not Policy.load(by_key).check(list(ce.messages)).ok


def test_cannot_decide_is_said(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    q = ('(define q (:states (Y (:from user) (:contains "{}")) (U (:from user)) (C (:call))) '
         '(:constraints (always (implies C (previously Y)))))')
    pa, pb = tmp_path / "a.sexp", tmp_path / "b.sexp"
    pa.write_text(q.format("(?i)\\\\byes\\\\b"))
    pb.write_text(q.format("(?i)\\\\b(yes)\\\\b"))  # the same regex, written otherwise
    assert check_equivalence(load_spec(pa), load_spec(pb)).holds
    pb.write_text(q.format("(?i)\\\\byes(?=\\\\W|$)"))  # the same steps, but no DFA can show it
    r = check_equivalence(load_spec(pa), load_spec(pb))
    assert not r.holds and not r.decided and not r.counterexamples
    code, out, _ = cli(capsys, "check-equiv", str(pa), str(pb))
    assert code == 2 and out.startswith("cannot decide: ")
    assert "user messages that" in out
    # exact regexes are decided either way
    pb.write_text(q.format("yes"))
    pa.write_text(q.format("(yes)"))
    assert cli(capsys, "check-equiv", str(pa), str(pb))[0] == 0
    pa.write_text(q.format("yes!"))
    code, out, _ = cli(capsys, "check-equiv", str(pa), str(pb))
    assert code == 1 and "every conversation of" in out  # "yes!" implies "yes": proved


def test_event_specs_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "check-equiv", str(BOOKING), "react")
    assert code == 2 and "cannot be compared" in err
    a = load_spec(BOOKING)
    fo = load_spec("booking-policy")  # its user-from-lookup rule binds values (design §2.6)
    assert is_first_order(fo) and not is_first_order(a)
    with pytest.raises(UsageError, match="first-order"):
        check_equivalence(a, fo)


# -- random event specs: verdicts and conversations checked by the policy engine ------------------

_TEXT_OPTIONS = ['(:contains "yes")', '(:contains "(?i)yes")', '(:contains "no")', None, None]
_CALL_OPTIONS = ['(:args (room (:regex "Oak|Elm")))', '(:args (room (:regex "[A-Z][a-z]+")))',
                 '(:args (id (:regex "u[0-9]+")))', None, None]


def _random_state(rng: random.Random) -> str:
    if rng.random() < 0.5:
        who = rng.choice(["user", "assistant", None])
        opts = [f"(:from {who})" if who else "", rng.choice(_TEXT_OPTIONS) or ""]
        return " ".join(o for o in opts if o) or "(:from tool)"
    tools = rng.sample(["book", "find"], rng.randint(0, 2))
    return " ".join(o for o in ["(:call " + " ".join(f'"{t}"' for t in tools) + ")",
                                rng.choice(_CALL_OPTIONS)] if o)


def _random_pair(rng: random.Random) -> tuple[str, str]:
    n = rng.randint(3, 5)
    states = [_random_state(rng) for _ in range(n)] + ["(:from user)", "(:from assistant)",
                                                       "(:call)", "(:from tool)"]
    names = [f"S{k}" for k in range(len(states))]
    i, j = rng.sample(range(len(states)), 2)
    rule = rng.choice([f"(always (implies {names[i]} (once {names[j]})))",
                       f"(always (not {names[i]}))", f"(eventually {names[i]})"])
    other = list(zip(names, states))
    k = rng.randrange(len(other) - 1)
    if rng.random() < 0.7:  # two neighbours swapped
        other[k], other[k + 1] = other[k + 1], other[k]
    else:  # one state's options changed
        other[k] = (other[k][0], _random_state(rng))

    def spec(decl: list[tuple[str, str]]) -> str:
        return ("(define r (:states " + " ".join(f"({n} {s})" for n, s in decl) +
                f") (:constraints {rule}))")
    return spec(list(zip(names, states))), spec(other)


_MIXED = ['(A (:call "f") (:args (k (:regex "x"))))', '(B (:call "f") (:args (k (:regex "x.*"))))',
          '(Y (:contains "yes"))', '(N (:from user) (:contains "no"))', '(U (:from user))',
          '(C (:call))', '(T (:from tool))']


def test_letters_are_exactly_the_steps_the_engine_sees() -> None:
    """Each letter's message is, for the policy engine, a step in the letter's two states; and
    every message of a varied pool is a step in the two states of some letter."""
    from ltlagent.checks.regions import step_alphabet

    def spec(decl: list[str]) -> Spec:
        return parse_spec(f"(define m (:states {' '.join(decl)}) (:constraints (always true)))")

    rng = random.Random(5)
    pairs = [(load_spec(BOOKING), _booking_swapped()),
             (spec(_MIXED), spec([_MIXED[k] for k in (1, 0, 3, 2, 4, 6, 5)]))]
    while len(pairs) < 20:
        ta, tb = _random_pair(rng)
        pairs.append((parse_spec(ta, "a"), parse_spec(tb, "b")))
    pool = [*_POOL, *({"role": "assistant", "content": None, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "f", "arguments": json.dumps(args)}}]}
        for args in ({"k": "x"}, {"k": "xy"}, {"k": "yx"}, {"k": 1}))]
    for k, (a, b) in enumerate(pairs):
        pa, pb = Policy.load(replace(a, constraints=())), Policy.load(replace(b, constraints=()))
        alphabet = step_alphabet(a.states, b.states)
        assert k > 1 or not alphabet.undecided  # exact regexes, or one regex a class: all decided
        named = set()
        for x in alphabet.letters:
            (ev,) = conversation_events([x.message])
            want = (a.states[x.a].name if x.a >= 0 else None,
                    b.states[x.b].name if x.b >= 0 else None)
            assert (pa.state_of(ev), pb.state_of(ev)) == want, (a.text, b.text, x)
            named.add(want)
        named |= {(a.states[u.a].name if u.a >= 0 else None,
                   b.states[u.b].name if u.b >= 0 else None) for u in alphabet.undecided}
        for m in pool:
            (ev,) = conversation_events([m])
            assert (pa.state_of(ev), pb.state_of(ev)) in named, (a.text, b.text, m)


_POOL: list[Mapping[str, object]] = [
    *({"role": r, "content": t} for r in ("user", "assistant", "tool", "system")
      for t in ("hi", "yes", "YES", "no yes")),
    *({"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function",
       "function": {"name": n, "arguments": json.dumps(args)}}]}
      for n in ("book", "find", "zap") for args in ({}, {"room": "Oak"}, {"room": "Ash"},
                                                   {"id": "u1", "room": "yes"}))]


def test_random_policies_against_the_engine() -> None:
    rng = random.Random(2027)
    extra = _POOL
    seen = {"equivalent": 0, "not": 0, "undecided": 0}
    for _ in range(24):
        ta, tb = _random_pair(rng)
        try:
            a, b = parse_spec(ta, "a"), parse_spec(tb, "b")
            r = check_equivalence(a, b)
        except SpecError:  # a rule that no trace satisfies
            continue
        pa, pb = Policy.load(a), Policy.load(b)
        if not r.decided:
            seen["undecided"] += 1
            continue
        for ce in r.counterexamples:
            yes, no = (pa, pb) if ce.accepted_by == "a" else (pb, pa)
            assert ce.messages is not None
            assert yes.check(list(ce.messages)).ok and not no.check(list(ce.messages)).ok, (ta, tb)
        witnesses = _witnesses(a, b)
        pool = [*witnesses, *extra]
        events = [conversation_events([m])[0] for m in pool]
        differ = None
        for n in (1, 2, 3):  # three steps: the witnesses alone (each kind of step once)
            for conv in itertools.product(range(len(pool) if n < 3 else len(witnesses)), repeat=n):
                evs = [events[k] for k in conv]
                if pa.check_events(evs).ok != pb.check_events(evs).ok:
                    differ = n
                    break
            if differ:
                break
        if r.holds:
            seen["equivalent"] += 1
            assert differ is None, (ta, tb)
        else:
            seen["not"] += 1
            assert differ is not None and min(len(c.messages or ()) for c in r.counterexamples) \
                <= differ, (ta, tb)
    assert seen["equivalent"] >= 4 and seen["not"] >= 4, seen



def test_too_many_matchers_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    many = " ".join(f'(I{k} (:from user) (:contains "w{k}"))' for k in range(15))
    p = tmp_path / "many.sexp"
    p.write_text(f"(define m (:states {many} (U (:from user))) (:constraints (always true)))")
    code, _, err = cli(capsys, "check-equiv", str(p), str(p))
    assert code == 2 and "cannot decide: the states of the two specs test 15 different matchers "\
        "on user messages" in err


def test_conversations_of_infinite_and_finite_policies() -> None:
    """A log is finite and holds at least one message: an infinite policy accepts each
    conversation that keeps it alive, and the empty trace (alive, for it) is no conversation."""
    states = "(:states (U (:from user)) (R (:from assistant)))"
    forever = parse_spec(f"(define a {states} (:behavior (always (or U R))))")
    some = parse_spec(f"(define b {states} (:behavior (repeat (or U R) :min 1)))")
    r = check_equivalence(forever, some)
    assert r.holds and r.infinite == (True, False)
    pairs = parse_spec(f"(define c {states} (:behavior (always (next U R))))")
    (ce,) = check_equivalence(pairs, some).counterexamples
    assert ce.accepted_by == "b" and ce.messages is not None and len(ce.messages) == 1
    assert ce.messages[0]["role"] == "assistant"  # R first: pairs is dead, some is not
