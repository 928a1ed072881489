"""Event states and policies (docs/design.md §2.4, §12): messages → events, the first-match
classifier, the booking policy's verdicts and their attribution to named constraints, the cursor
that the guard and the decoder step, pickling, and the spec errors of event states."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ltlagent import Event, LogError, Policy, SpecError, State, UsageError, load_spec, parse_spec
from ltlagent.chat.events import conversation_events, message_events
from ltlagent.checks.equiv import check_equivalence
from ltlagent.logic.policy import TOGETHER

POLICY = Policy.load("booking-policy")


def call(name: str, args: object = None, text: str | None = None) -> dict[str, object]:
    return {"role": "assistant", "content": text, "tool_calls": [
        {"id": "c", "type": "function",
         "function": {"name": name, "arguments": json.dumps(args or {})}}]}


def user(text: str) -> dict[str, object]:
    return {"role": "user", "content": text}


def tool(text: str = "{}") -> dict[str, object]:
    return {"role": "tool", "tool_call_id": "c", "content": text}


def reply(text: str) -> dict[str, object]:
    return {"role": "assistant", "content": text}


GOOD = [{"role": "system", "content": "be nice"}, user("book me in"), call("find_user", {"q": "a"}),
        tool(), reply("Oak on Friday? say yes"), user("Yes please"), call("book", {"room": "Oak"}),
        tool(), reply("done")]


# --- messages → events -------------------------------------------------------------------------

def test_an_assistant_message_is_its_text_then_one_step_per_call() -> None:
    m = {"role": "assistant", "content": "Let me look.", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "a", "arguments": '{"x": 1}'}},
        {"id": "2", "type": "function", "function": {"name": "b", "arguments": "{}"}}]}
    evs = message_events(m, 4)
    assert [(e.kind, e.tool, e.message) for e in evs] == [("text", None, 4), ("call", "a", 4),
                                                          ("call", "b", 4)]
    assert evs[1].arguments == {"x": 1} and evs[1].text == '{"x": 1}'


def test_whitespace_text_beside_calls_is_no_step_but_an_empty_reply_is_one() -> None:
    assert [e.kind for e in message_events(call("a", text="  \n"), 0)] == ["call"]
    assert [e.kind for e in message_events(reply(""), 0)] == ["text"]


def test_content_parts_developer_and_function_roles() -> None:
    evs = conversation_events([
        {"role": "developer", "content": [{"type": "text", "text": "a"},
                                          {"type": "text", "text": "b"}]},
        {"role": "function", "name": "f", "content": "r"}])
    assert [(e.author, e.text) for e in evs] == [("system", "a\nb"), ("tool", "r")]


@pytest.mark.parametrize("message, error", [
    ({"content": "x"}, "no 'role'"),
    ({"role": "robot", "content": "x"}, "unknown role 'robot'"),
    ({"role": "user", "content": 3}, "'content' must be"),
    (call("a", None) | {"tool_calls": [{"function": {"name": "a", "arguments": "{bad"}}]},
     "not JSON"),
    (call("a", None) | {"tool_calls": [{"function": {"name": "a", "arguments": "[1]"}}]},
     "must be a JSON object"),
    (call("a", None) | {"tool_calls": [{"function": {"arguments": "{}"}}]}, "needs 'function'"),
    (call("a", None) | {"tool_calls": {"a": 1}}, "must be a list"),
    ("hello", "must be a JSON object"),
])
def test_malformed_messages_name_their_index(message: object, error: str) -> None:
    with pytest.raises(LogError) as e:
        conversation_events([user("hi"), message])
    assert error in str(e.value) and e.value.index == 1


# --- classification ------------------------------------------------------------------------------

def test_first_declared_state_that_matches_wins() -> None:
    s = POLICY.state_of
    assert s(Event.say("user", "YES, go on")) == "Confirm"
    assert s(Event.say("user", "yesterday I said so")) == "User"  # \b: not a word 'yes'
    assert s(Event.call("book", {})) == "Write"
    assert s(Event.call("find_user", {})) == "Lookup"
    assert s(Event.call("anything_else", {})) == "Call"
    assert s(Event.say("assistant", "book")) == "Reply"  # text steps never match call states
    assert s(Event.say("tool", "yes")) == "Result"
    assert s(Event.say("system", "x")) == "System"


ARGS_SPEC = """(define p (:states
  (Big (:call "pay") (:args (amount (:regex "[0-9]{4,}")) (to (:regex "acct-[0-9]+"))))
  (Pay (:call "pay")) (Other (:call)) (Said (:contains "(?i)refund")) (Any (:from user))))"""


def test_arguments_and_contains() -> None:
    p = Policy.load(parse_spec(ARGS_SPEC))
    assert p.state_of(Event.call("pay", {"amount": "12000", "to": "acct-7"})) == "Big"
    assert p.state_of(Event.call("pay", {"amount": 12000, "to": "acct-7"})) == "Big"  # JSON text
    assert p.state_of(Event.call("pay", {"amount": "120", "to": "acct-7"})) == "Pay"
    assert p.state_of(Event.call("pay", {"amount": "12000"})) == "Pay"  # a key missing
    assert p.state_of(Event.call("pay", {"amount": "12000", "to": "acct-7x"})) == "Pay"  # fullmatch
    assert p.state_of(Event.call("pay", {"amount": "١٢٣٤", "to": "acct-7"})) == "Pay"  # ASCII \d
    assert p.state_of(Event.say("assistant", "no REFUND today")) == "Said"  # re.search, (?i)
    assert p.state_of(Event.say("assistant", "hello")) is None
    assert p.check([reply("hello")]).verdict == "unmatched"


# --- verdicts and attribution -------------------------------------------------------------------

def test_a_conversation_that_follows_the_policy() -> None:
    r = POLICY.check(GOOD)
    assert r.verdict == "ok" and POLICY.trace(GOOD)[-3:] == ("Write", "Result", "Reply")


def test_each_broken_constraint_is_named_at_its_first_failure() -> None:
    bad = [user("book"), call("book"), tool(), reply("ok"), call("transfer_to_human"), tool(),
           user("hello?"), call("cancel_booking")]
    r = POLICY.check(bad)
    assert r.verdict == "violated"
    got = [(v.constraint, v.step, v.message, v.state) for v in r.violations]
    assert got == [("confirm-before-write", 1, 1, "Write"), ("lookup-before-write", 1, 1, "Write"),
                   ("after-handoff-only-replies", 6, 6, "User")]
    assert r.violations[2].allowed == ("Result", "Reply")


def test_a_yes_is_spent_by_a_write_or_a_later_user_turn() -> None:
    base = [user("x"), call("find_user"), tool(), user("yes")]
    assert POLICY.check([*base, call("book")]).ok
    assert POLICY.check([*base, call("book"), tool(), call("book")]).verdict == "violated"
    assert POLICY.check([*base, user("wait"), call("book")]).verdict == "violated"
    assert POLICY.check([*base, reply("booking"), call("book")]).ok


def test_incomplete_names_the_unmet_eventuality() -> None:
    p = Policy.load(parse_spec("""(define p (:states (Ask (:from user)) (Ans (:from assistant)))
      (:constraints (answered (always (implies Ask (eventually Ans))))))"""))
    r = p.check([user("q"), reply("a"), user("q2")])
    assert r.verdict == "incomplete" and r.unmet == ("answered",)
    assert p.check([user("q"), reply("a")]).ok


def test_parts_fine_alone_but_not_together() -> None:
    p = Policy.load(parse_spec("""(define p (:states (A (:from user)) (B (:from assistant)))
      (:constraints (stay (implies A (next (always A)))) (reply (eventually B))))"""))
    r = p.check([user("a"), user("b")])
    assert r.verdict == "violated"
    assert [v.constraint for v in r.violations] == [TOGETHER]


def test_behavior_is_a_named_part_when_declared() -> None:
    p = Policy.load(parse_spec("""(define p (:states (U (:from user)) (A (:from assistant)))
      (:behavior (repeat (next U A) :min 1)) (:constraints (short (always (not (next (next A))))))
      )"""))
    r = p.check([user("a"), user("b")])
    assert r.verdict == "violated" and r.violations[0].constraint == "behavior"


def test_malformed_conversations_are_reports_not_crashes() -> None:
    assert POLICY.check([]).verdict == "malformed"
    r = POLICY.check([user("a"), {"role": "user"}, {"role": "bot"}])
    assert (r.verdict, r.error_message) == ("malformed", 2)


# --- the cursor ----------------------------------------------------------------------------------

def test_cursor_decides_before_it_moves() -> None:
    c = POLICY.cursor()
    c.push_messages(GOOD[:5])
    d = c.decide(Event.call("book", {}))
    assert not d.allowed and d.violated == ("confirm-before-write",) and d.state == "Write"
    assert d.explain() == ("forbidden: a Write step now breaks confirm-before-write; allowed now: "
                           "anything but Write")
    assert c.allowed_tools(["find_user", "book", "transfer_to_human"]) == ("find_user",
                                                                          "transfer_to_human")
    fork = c.copy()
    c.push_message(user("yes"), 5)
    assert c.decide(Event.call("book", {})).allowed
    assert not fork.decide(Event.call("book", {})).allowed  # the copy did not move
    assert c.push(Event.call("book", {})).allowed and not c.is_dead
    assert not c.push(Event.call("book", {})).allowed and c.is_dead


# --- compile side ----------------------------------------------------------------------------------

def test_policy_pickles_and_checks_the_same() -> None:
    p2 = pickle.loads(pickle.dumps(POLICY))
    assert p2.check(GOOD) == POLICY.check(GOOD)
    bad = [user("b"), call("book")]
    assert p2.check(bad) == POLICY.check(bad)


def test_prompt_string_specs_are_not_policies() -> None:
    with pytest.raises(UsageError, match="prompt-string states"):
        Policy.load("react")


@pytest.mark.parametrize("states, message", [
    ('(A (:text "A:")) (B (:from user))', "either all prompt-string states or all event states"),
    ('(A (:from user) (:args (x (:regex "1"))))', "no (:call …)"),
    ('(A (:from user) (:call "x"))', "only the assistant calls tools"),
    ('(A (:from usr))', "did you mean 'user'"),
    ('(A (:from user) (:stop "x"))', ":stop apply to prompt-string states only"),
    ('(A (:from user) (:text "A:"))', "both (:text …) and event options"),
    ('(A (:call "x") (:args (k (:regex "\\\\1"))))', ":regex"),
    ('(A (:contains "("))', "bad :contains regex"),
    ('(A)', "no event option"),
])
def test_event_state_errors(states: str, message: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_spec(f"(define p (:states {states}) (:constraints (always true)))")
    assert message in str(e.value) + str(e.value.hint)


def test_policies_compare_with_a_shortest_distinguishing_sequence() -> None:
    a = load_spec(Path(__file__).parent / "data" / "booking-propositional.sexp")
    text = a.text.replace("(since (and (not User) (not Write)) Confirm)",
                          "(since (not Write) Confirm)")
    b = parse_spec(text, "loose.sexp")
    r = check_equivalence(a, b)
    assert not r.holds
    assert [ce.trace for ce in r.counterexamples] == [("Confirm", "User", "Lookup", "Write")]
    same = parse_spec(a.text.replace("(once Lookup)", "(previously (once Lookup))"))
    assert check_equivalence(a, same).holds  # a Write is never a Lookup


# --- the classifier against a direct reading of §2.4 (hypothesis) ---------------------------------

def _reference_state(states: list[State], ev: Event) -> int:
    """First declared state whose options all match, read off docs/design.md §2.4 directly."""
    import re as _re

    for i, state in enumerate(states):
        is_call_state = state.calls is not None
        if is_call_state != (ev.kind == "call"):
            continue
        if state.author is not None and state.author != ev.author:
            continue
        if state.calls and ev.tool not in state.calls:
            continue
        ok = True
        for key, rx in state.args:
            args = ev.arguments or {}
            if key not in args:
                ok = False
                break
            v = args[key]
            if _re.fullmatch(rx, v if isinstance(v, str) else json.dumps(v), _re.ASCII) is None:
                ok = False
                break
        if ok and state.contains is not None and _re.search(state.contains, ev.text) is None:
            ok = False
        if ok:
            return i
    return -1


_TOOLS = ("a", "b", "c")
_TEXTS = ("yes", "Yes!", "no", "eyes", "", "refund please", "42")


@st.composite
def _states(draw: st.DrawFn) -> list[State]:
    out = []
    for k in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            calls = tuple(draw(st.lists(st.sampled_from(_TOOLS), max_size=2, unique=True)))
            args = tuple(draw(st.lists(st.tuples(st.sampled_from(("x", "y")),
                                                 st.sampled_from(("[0-9]+", "y.*", "1"))),
                                       max_size=2, unique_by=lambda t: t[0])))
            contains = draw(st.sampled_from((None, "1", "[xy]")))
            out.append(State(f"S{k}", "", calls=calls, args=args, contains=contains))
        else:
            author = draw(st.sampled_from((None, "user", "assistant", "tool", "system")))
            contains = draw(st.sampled_from((None, r"(?i)\byes\b", "no", "^$")))
            if author is None and contains is None:
                author = "user"
            out.append(State(f"S{k}", "", author=author, contains=contains))
    return out


@st.composite
def _events(draw: st.DrawFn) -> Event:
    if draw(st.booleans()):
        args = draw(st.dictionaries(st.sampled_from(("x", "y")),
                                    st.one_of(st.sampled_from(("1", "12", "yes", "y")),
                                              st.integers(0, 20)), max_size=2))
        return Event.call(draw(st.sampled_from((*_TOOLS, "d"))), args)
    return Event.say(draw(st.sampled_from(("user", "assistant", "tool", "system"))),
                     draw(st.sampled_from(_TEXTS)))


@settings(max_examples=300, deadline=None)
@given(_states(), st.lists(_events(), min_size=1, max_size=8))
def test_classifier_agrees_with_a_direct_reading(states: list[State], events: list[Event]) -> None:
    from ltlagent.logic.policy import Classifier

    c = Classifier.build(states)
    for ev in events:
        assert c.index(ev) == _reference_state(states, ev), (states, ev)


def test_call_options_never_offer_a_call_the_policy_would_refuse() -> None:
    p = Policy.load(parse_spec("""(define p (:states
      (Big (:call "pay") (:args (amount (:regex "[0-9]{4,}"))))
      (Pay (:call "pay")) (Ok (:from user) (:contains "approve")) (User (:from user))
      (Other (:call)) (Reply (:from assistant)))
      (:constraints (big-needs-approval (always (implies Big (previously Ok))))))"""))
    c = p.cursor()
    c.push(Event.say("user", "hi"))
    assert c.call_options(["pay", "lookup"]) == {"lookup": ()}  # Big forbidden, Pay allowed
    c.push(Event.say("user", "approve"))
    assert c.call_options(["pay", "lookup"]) == {"pay": (), "lookup": ()}
    q = Policy.load(parse_spec("""(define q (:states
      (Big (:call "pay") (:args (amount (:regex "[0-9]{4,}"))))
      (Pay (:call "pay")) (User (:from user)) (Reply (:from assistant)))
      (:constraints (only-big (always (not Pay)))))""")).cursor()
    assert q.call_options(["pay"]) == {"pay": (("amount", "[0-9]{4,}"),)}  # narrowed to Big


@pytest.mark.parametrize(("section", "message"), [
    ("(:format xml)", "1:42: error: unknown tool-call format 'xml'"),
    ('(:format "json")', "1:33: error: (:format …) takes one tool-call format: hermes, json"),
    ("(:format hermes json)", "1:33: error: (:format …) takes one tool-call format"),
    ("(:format)", "1:33: error: (:format …) takes one tool-call format"),
])
def test_call_format_section_errors(section: str, message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)):
        parse_spec(f"(define x (:states (A (:call))) {section})")


def test_call_format_is_read_and_needs_call_states() -> None:
    assert Policy.load("booking-policy").spec.call_format == "hermes"
    assert parse_spec("(define x (:states (A (:call))) (:format json))").call_format == "json"
    assert parse_spec("(define x (:states (A (:call))))").call_format is None
    with pytest.raises(SpecError, match=r"says how \(:call …\) steps are written"):
        parse_spec("(define x (:states (A (:from user))) (:format json))")
    with pytest.raises(SpecError, match="duplicate section :format"):
        parse_spec("(define x (:states (A (:call))) (:format json) (:format json))")
