"""The guard's judgement of a reply (``ltlagent.guard.screen``), tried in-process as an attacker
would shape a reply: each test kills mutants that survived the guard's suite (issue 31;
docs/mutation.md, "guard/screen.py"). No server: every test here runs in milliseconds, so that a
mutation run can use this file as its fast selection."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ltlagent.errors import LogError
from ltlagent.guard.screen import (
    MAX_DEPTH,
    REFUSAL_MARK,
    ProposedCall,
    Refusal,
    declared_tools,
    read_calls,
    reask_messages,
    refusal_text,
    screen,
    settle,
    strict_json,
)
from ltlagent.logic.policy import Decision, Policy, PolicyCursor

SPEC = Path(__file__).resolve().parents[1] / "specs" / "booking-policy.sexp"
TOOLS = frozenset({"find_user", "book", "transfer_to_human"})
#: The user asked, the agent looked the user up; the user never said yes: ``book`` is forbidden.
HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You book flights."},
    {"role": "user", "content": "Book LH123 for bob@example.com"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "f0", "type": "function", "function": {"name": "find_user",
                                                      "arguments": '{"email": "bob@example.com"}'}}]},
    {"role": "tool", "tool_call_id": "f0", "content": '{"user_id": "bob"}'}]
BOOK = '{"user_id": "bob", "flight": "LH123"}'


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy.load(SPEC)


@pytest.fixture
def cursor(policy: Policy) -> PolicyCursor:
    c = policy.cursor()
    c.push_messages(HISTORY)
    return c


def call(name: object = "book", args: object = BOOK, cid: object = "c1", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
    out.update(extra)
    return out


def reply(*calls: object, content: object = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": content, **extra}
    if calls:
        out["tool_calls"] = list(calls)
    return out


# -- strict_json: what two parsers could read differently is refused --------------------------------
@pytest.mark.parametrize("text", ["NaN", '{"a": Infinity}', "[-Infinity]"])
def test_non_finite_constants_are_not_json(text: str) -> None:
    with pytest.raises(ValueError, match="is not JSON"):
        strict_json(text)


def test_a_number_too_large_for_a_float_is_out_of_range() -> None:
    with pytest.raises(ValueError, match="1e999 is out of range"):
        strict_json('{"amount": 1e999}')
    assert strict_json('{"amount": 1.5e3}') == {"amount": 1500.0}


def test_a_key_twice_is_refused_and_named() -> None:
    # the smuggling shape: one parser sees "find_user", another "book"
    with pytest.raises(ValueError, match="the key 'name' appears twice in one object"):
        strict_json('{"name": "find_user", "x": 1, "name": "book"}')
    with pytest.raises(ValueError, match="'k' appears twice"):
        strict_json('[{"a": {"k": 1, "k": 1}}]')
    with pytest.raises(ValueError, match="the key 'name' appears twice"):  # not the first key
        strict_json('{"id": "c1", "name": "find_user", "name": "book"}')
    assert strict_json('{"a": 1, "b": {"a": 2}}') == {"a": 1, "b": {"a": 2}}


def test_nesting_is_bounded_exactly_at_max_depth() -> None:
    assert strict_json("[" * 3 + "]" * 3, max_depth=3) == [[[]]]
    with pytest.raises(ValueError, match="nested deeper than 3 levels"):
        strict_json("[" * 4 + "]" * 4, max_depth=3)
    with pytest.raises(ValueError, match="nested deeper than 3 levels"):
        strict_json('{"a": [{"b": []}]}', max_depth=3)
    assert strict_json('{"a": [{"b": 1}]}', max_depth=3) == {"a": [{"b": 1}]}
    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert strict_json(ok) is not None
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_DEPTH} levels"):
        strict_json("[" + ok + "]")


def test_nesting_past_the_interpreter_stack_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_DEPTH} levels"):
        strict_json("[" * 100_000 + "]" * 100_000)


def test_bytes_that_are_not_utf8_are_refused() -> None:
    with pytest.raises(ValueError, match="not UTF-8"):
        strict_json(b'{"a": "\xff"}')
    assert strict_json('{"a": "é"}'.encode()) == {"a": "é"}


# -- declared_tools: the only names a call may have ---------------------------------------------
def test_declared_tools_reads_function_tools_and_legacy_functions_only() -> None:
    request = {"tools": [
        {"type": "function", "function": {"name": "lookup"}},
        {"type": "custom", "custom": {"name": "shell"}},
        {"type": "function", "function": {"name": 7}},
        {"type": "function", "function": "delete_everything"},
        {"function": {"name": "untyped"}},
        "book",
    ], "functions": [{"name": "legacy"}, {"name": None}, "x"]}
    assert declared_tools(request) == frozenset({"lookup", "legacy"})
    assert declared_tools({"tools": {"type": "function", "function": {"name": "a"}},
                           "functions": {"name": "b"}}) == frozenset()
    assert declared_tools({"functions": [{"name": "only_legacy"}]}) == frozenset({"only_legacy"})
    assert declared_tools({}) == frozenset()


# -- read_calls: every shape a client could run, each with why it cannot --------------------------
def problems(message: dict[str, Any], tools: frozenset[str] = TOOLS) -> list[str | None]:
    return [c.problem for c in read_calls(message, tools)[0]]


DECLARED = "(declared: book, find_user, transfer_to_human)"


@pytest.mark.parametrize("entry,why", [
    ("book", "a tool call must be an object, found str"),
    (None, "a tool call must be an object, found NoneType"),
    ({"id": "c", "type": "custom", "custom": {"name": "book", "input": "x"}},
     "custom tool calls are not judged by the guard"),
    ({"id": "c", "type": "custom", "custom": "rm -rf /"}, "custom tool calls are not judged by the guard"),
    ({"id": "c", "type": "function", "custom": {"name": "book"},
      "function": {"name": "find_user", "arguments": "{}"}},
     "a call with both 'function' and 'custom' is ambiguous"),
    (call(type="code_interpreter"), "a tool call must be of type 'function', not 'code_interpreter'"),
    ({"id": "c", "function": {"name": "find_user", "arguments": "{}"}},
     "a tool call must be of type 'function', not None"),
    (call("find_user", "{}", cid=5), "a tool call's id must be a string"),
    ({"id": "c", "type": "function", "function": "find_user"}, "a tool call needs a 'function' object"),
    ({"id": "c", "type": "function"}, "a tool call needs a 'function' object"),
    (call(None, "{}"), "a tool call needs a name"),
    (call("", "{}"), "a tool call needs a name"),
    (call(["book"], "{}"), "its name must be a string, found list"),
    (call("delete_everything", "{}"), f"'delete_everything' is not one of the request's tools {DECLARED}"),
    (call("Book"), f"'Book' is not one of the request's tools {DECLARED}"),
    (call("book "), f"'book ' is not one of the request's tools {DECLARED}"),
    (call("find_user", {"email": "bob@example.com"}), "its arguments must be a JSON string"),
    (call("find_user", "[1, 2]"), "its arguments must be a JSON object, found list"),
    (call("find_user", "null"), "its arguments must be a JSON object, found NoneType"),
    (call("find_user", '"x"'), "its arguments must be a JSON object, found str"),
    (call("find_user", '{"email": NaN}'),
     """its arguments are not JSON (NaN is not JSON): '{"email": NaN}'"""),
    (call("find_user", '{"a": 1, "a": 2}'),
     """its arguments are not JSON (the key 'a' appears twice in one object): '{"a": 1, "a": 2}'"""),
])
def test_each_unfit_call_is_read_with_its_reason(entry: object, why: str) -> None:
    # exactly these words: the model is shown them to correct its call
    calls, whole = read_calls(reply(entry), TOOLS)
    assert whole is None
    assert len(calls) == 1 and calls[0].position == 0
    assert calls[0].problem == why


def test_unreadable_arguments_are_quoted_cut_at_80_characters() -> None:
    raw = "{" + "x" * 200
    (c,), _ = read_calls(reply(call("find_user", raw)), TOOLS)
    assert c.problem is not None and c.problem.endswith(": " + repr(raw[:80]))


def test_a_well_formed_call_is_read_as_written() -> None:
    (c,), whole = read_calls(reply(call("find_user", ' {"email": "a@b"} ', "id9")), TOOLS)
    assert whole is None
    assert c == ProposedCall(0, "id9", "find_user", ' {"email": "a@b"} ', None, False)
    (blank,), _ = read_calls(reply(call("find_user", "  ")), TOOLS)
    assert blank.problem is None and blank.arguments == "  "
    (absent,), _ = read_calls(reply({"id": "z", "type": "function",
                                     "function": {"name": "find_user"}}), TOOLS)
    assert absent.problem is None and absent.arguments == ""


def test_an_unfit_call_keeps_what_can_be_shown_of_it() -> None:
    (c,), _ = read_calls(reply(call("delete_everything", '{"all": true}', "d1")), TOOLS)
    assert (c.call_id, c.name, c.arguments) == ("d1", "delete_everything", '{"all": true}')
    (custom,), _ = read_calls(reply({"id": "k", "type": "custom",
                                     "custom": {"name": "shell", "input": "rm -rf /"}}), TOOLS)
    assert custom.name == "shell" and custom.call_id == "k"
    (both,), _ = read_calls(reply({"id": "k", "type": "function", "custom": {"name": "shell"},
                                   "function": {"name": "find_user"}}), TOOLS)
    assert both.name == "find_user"
    (bad,), _ = read_calls(reply(17), TOOLS)
    assert (bad.call_id, bad.name, bad.arguments, bad.legacy) == (None, "", "", False)
    (odd,), _ = read_calls(reply(call(3, 4, 5)), TOOLS)
    assert (odd.call_id, odd.name, odd.arguments) == (None, "", "")


def test_no_declared_tools_refuses_every_name() -> None:
    assert problems(reply(call("find_user", "{}")), frozenset()) == [
        "'find_user' is not one of the request's tools (declared: none)"]


def test_the_legacy_function_call_comes_after_the_tool_calls() -> None:
    m = reply(call("find_user", "{}", "a"), call("book", BOOK, "b"),
              function_call={"name": "transfer_to_human", "arguments": "{}"})
    calls, whole = read_calls(m, TOOLS)
    assert whole is None
    assert [(c.position, c.name, c.legacy, c.call_id) for c in calls] == [
        (0, "find_user", False, "a"), (1, "book", False, "b"), (2, "transfer_to_human", True, None)]
    only, _ = read_calls(reply(function_call={"name": "nope", "arguments": "{}"}), TOOLS)
    assert only[0].position == 0 and only[0].legacy and only[0].problem is not None
    none, _ = read_calls(reply(function_call=None), TOOLS)
    assert none == []
    # a legacy call needs no 'type' and no id
    legacy, _ = read_calls(reply(function_call={"name": "find_user", "arguments": "{}", "id": 3}),
                           TOOLS)
    assert legacy[0].problem is None and legacy[0].call_id is None


def test_a_reply_not_from_the_assistant_fails_every_call() -> None:
    m = reply(call("find_user", "{}"), call("nope", "{}"))
    m["role"] = "tool"
    calls, whole = read_calls(m, TOOLS)
    assert whole == "a reply must come from the assistant, not 'tool'"
    assert calls[0].problem == whole  # a well-formed call gets the reply's problem
    assert calls[1].problem is not None and "not one of the request's tools" in calls[1].problem
    assert (calls[0].name, calls[0].arguments, calls[0].position, calls[0].call_id, calls[0].legacy) \
        == ("find_user", "{}", 0, "c1", False)
    legacy = {"role": "user", "function_call": {"name": "find_user", "arguments": "{}"}}
    (fc,), whole = read_calls(legacy, TOOLS)
    assert fc.problem == whole and fc.legacy is True and fc.name == "find_user"


def test_tool_calls_that_is_not_a_list_fails_the_reply() -> None:
    calls, whole = read_calls(reply(tool_calls={"0": call("find_user", "{}")}), TOOLS)
    assert calls == [] and whole == "'tool_calls' must be a list of calls, found dict"
    m = {"role": "user", "tool_calls": "x"}
    assert read_calls(m, TOOLS)[1] == "a reply must come from the assistant, not 'user'"
    assert read_calls(reply(tool_calls=None), TOOLS) == ([], None)


# -- refusals: what the model and the user are told ---------------------------------------------
NOW = Decision(False, None, (), ("Reply", "Result"))


@pytest.mark.parametrize("tool,shown", [
    ("find_user", "find_user"), ("a.b:c-d_9", "a.b:c-d_9"),
    ("book now", "'book now'"), ("x\ny", "'x\\ny'"), ("книга", "'книга'")])
def test_a_tool_name_is_shown_bare_only_when_plain(tool: str, shown: str) -> None:
    r = Refusal(0, "c", tool, "{}", NOW, "why")
    assert r.explain() == f"{REFUSAL_MARK} {shown} was not run: why; allowed now: Reply, Result"


def test_refusals_without_a_name_or_of_the_whole_reply_say_so() -> None:
    assert Refusal(1, None, "", "", NOW, "no name").explain() == \
        f"{REFUSAL_MARK} a call without a name was not run: no name; allowed now: Reply, Result"
    nothing = Decision(False, None, (), ())
    assert Refusal(-1, None, "", "", nothing, "bad role").explain() == \
        f"{REFUSAL_MARK} the reply was not passed: bad role; allowed now: nothing further"


def test_a_policy_refusal_carries_the_decision(cursor: PolicyCursor) -> None:
    s = screen(cursor, reply(call("book", BOOK, "b1")), 4, tools=TOOLS)
    (r,) = s.refusals
    assert r.explain().startswith(f"{REFUSAL_MARK} book was not run: ")
    assert r.explain().endswith(r.decision.explain())
    d = r.to_dict()
    assert d == {"position": 0, "call_id": "b1", "tool": "book", "arguments": BOOK,
                 "state": "Write", "violated": ["confirm-before-write"], "malformed": None,
                 "allowed_states": list(r.decision.allowed_states), "explanation": r.explain()}
    assert "Write" not in r.decision.allowed_states and "Lookup" in r.decision.allowed_states
    json.dumps(d)


def test_refusal_text_is_one_line_per_refusal() -> None:
    a = Refusal(0, None, "a", "", NOW, "one")
    b = Refusal(1, None, "b", "", NOW, "two")
    assert refusal_text([a, b]) == a.explain() + "\n" + b.explain()
    assert refusal_text([]) == ""


# -- screen: the decision --------------------------------------------------------------------------
def test_an_undeclared_tool_is_refused_whatever_the_policy(cursor: PolicyCursor) -> None:
    s = screen(cursor, reply(call("delete_everything", "{}", "d")), 4, tools=TOOLS)
    assert not s.ok and s.allowed == () and s.tool_calls() == []
    (r,) = s.refusals
    assert (r.position, r.call_id, r.tool, r.malformed is not None) == (0, "d", "delete_everything", True)
    assert r.decision.allowed is False and r.decision.state is None
    assert r.decision.allowed_states == cursor.allowed_states()
    assert s.executed() is None  # nothing of the reply remains


def test_a_refused_call_does_not_advance_the_cursor(cursor: PolicyCursor) -> None:
    before = cursor.allowed_states()
    m = reply(call("book", BOOK, "b"), call("find_user", '{"email": "x@y"}', "f"),
              call("nope", "{}", "n"), content="Booking now.")
    s = screen(cursor, m, 4, tools=TOOLS)
    assert cursor.allowed_states() == before  # the caller's cursor is untouched
    assert s.allowed == (1,)
    assert s.arguments == {1: {"email": "x@y"}}
    assert [r.position for r in s.refusals] == [0, 2]
    assert s.refusals[0].decision.state == "Write" and s.refusals[1].malformed is not None
    # the screening's cursor has seen the text and the lookup, not the refused book
    fresh = cursor.copy()
    fresh.push_message({"role": "assistant", "content": "Booking now.",
                        "tool_calls": [call("find_user", '{"email": "x@y"}', "f")]}, 4)
    assert s.cursor.allowed_states() == fresh.allowed_states()
    assert s.kept() == {"role": "assistant", "content": "Booking now.",
                        "tool_calls": [call("find_user", '{"email": "x@y"}', "f")]}


def test_blank_arguments_are_an_empty_object(cursor: PolicyCursor) -> None:
    s = screen(cursor, reply(call("find_user", "", "f")), 4, tools=TOOLS)
    assert s.ok and s.allowed == (0,) and s.arguments == {0: {}}


def test_a_confirmed_booking_passes(policy: Policy) -> None:
    c = policy.cursor()
    c.push_messages([*HISTORY, {"role": "assistant", "content": "Book LH123 for bob?"},
                     {"role": "user", "content": "yes"}])
    s = screen(c, reply(call("book", BOOK, "b")), 6, tools=TOOLS)
    assert s.ok and s.allowed == (0,) and s.arguments == {0: {"user_id": "bob", "flight": "LH123"}}
    assert s.tool_calls() == [call("book", BOOK, "b")]
    assert s.executed() == {"role": "assistant", "content": None, "tool_calls": [call("book", BOOK, "b")]}


def test_a_reply_that_cannot_be_judged_raises_with_its_index(cursor: PolicyCursor) -> None:
    with pytest.raises(LogError, match="must be a JSON object, found list") as e:
        screen(cursor, [reply()], 7, tools=TOOLS)
    assert e.value.index == 7
    with pytest.raises(LogError) as e:
        screen(cursor, "hi", tools=TOOLS)
    assert e.value.index is None
    with pytest.raises(LogError) as e:
        screen(cursor, reply(content=5), 3, tools=TOOLS)
    assert e.value.index == 3
    with pytest.raises(LogError) as e:
        settle(cursor, reply(content=5), 3, tools=TOOLS)
    assert e.value.index == 3


def test_a_reply_from_another_role_is_refused_as_a_whole(cursor: PolicyCursor) -> None:
    m = reply(call("find_user", "{}", "f"), content="hi")
    m["role"] = "user"
    s = screen(cursor, m, 4, tools=TOOLS)
    assert s.allowed == ()
    assert [r.position for r in s.refusals] == [-1, 0]
    assert s.refusals[0].malformed == "a reply must come from the assistant, not 'user'"
    assert s.refusals[0].call_id is None and s.refusals[0].tool == ""


def test_text_only_and_empty_replies_are_steps(cursor: PolicyCursor) -> None:
    s = screen(cursor, reply(content="Hello"), 4, tools=TOOLS)
    assert s.ok and s.calls == () and s.executed() == {"role": "assistant", "content": "Hello"}
    assert s.cursor.allowed_states() != cursor.allowed_states() or s.cursor.trace != cursor.trace
    empty = screen(cursor, reply(), 4, tools=TOOLS)
    assert empty.executed() == {"role": "assistant", "content": None}
    # all calls refused and no text: no step is recorded
    gone = screen(cursor, reply(call("nope", "{}"), content="  "), 4, tools=TOOLS)
    assert gone.executed() is None
    assert gone.cursor.trace == cursor.trace
    kept_text = screen(cursor, reply(call("nope", "{}"), content="Sorry."), 4, tools=TOOLS)
    assert kept_text.executed() == {"role": "assistant", "content": "Sorry."}


def test_an_allowed_legacy_call_is_kept_as_function_call(cursor: PolicyCursor) -> None:
    m = reply(call("find_user", "{}", "f"),
              function_call={"name": "transfer_to_human", "arguments": '{"why": "x"}'})
    s = screen(cursor, m, 4, tools=TOOLS)
    assert s.allowed == (0, 1)
    assert s.tool_calls() == [call("find_user", "{}", "f")]
    assert s.kept("new text") == {
        "role": "assistant", "content": "new text", "tool_calls": [call("find_user", "{}", "f")],
        "function_call": {"name": "transfer_to_human", "arguments": '{"why": "x"}'}}
    only = screen(cursor, reply(function_call={"name": "find_user", "arguments": "{}"}), 4,
                  tools=TOOLS)
    assert only.kept() == {"role": "assistant", "content": None,
                           "function_call": {"name": "find_user", "arguments": "{}"}}


# -- settle and reask ---------------------------------------------------------------------------
def test_settle_drops_until_nothing_is_refused(cursor: PolicyCursor) -> None:
    m = reply(call("book", BOOK, "b"), call("find_user", "{}", "f"), call("nope", "{}", "n"))
    s, dropped = settle(cursor, m, 4, tools=TOOLS)
    assert s.ok and [c.name for c in s.calls] == ["find_user"]
    assert [(r.position, r.tool) for r in dropped] == [(0, "book"), (2, "nope")]
    clean, none = settle(cursor, reply(call("find_user", "{}", "f")), 4, tools=TOOLS)
    assert clean.ok and none == []


def test_reask_shows_each_named_call_its_answer(cursor: PolicyCursor) -> None:
    m = reply(call("book", BOOK, "b"), call("find_user", "{}", "f"), call("", "{}", "e"),
              call("transfer_to_human", "{}", None), content="On it.")
    s = screen(cursor, m, 4, tools=TOOLS)
    out = reask_messages(s, {1: "found bob"})
    assert out[0] == {"role": "assistant", "content": "On it.", "tool_calls": [
        call("book", BOOK, "b"), call("find_user", "{}", "f"),
        {"id": "call_3", "type": "function", "function": {"name": "transfer_to_human",
                                                          "arguments": "{}"}}]}
    assert out[1] == {"role": "tool", "tool_call_id": "b", "content": s.refusals[0].explain()}
    assert out[2] == {"role": "tool", "tool_call_id": "f", "content": "found bob"}
    assert out[3]["tool_call_id"] == "call_3" and str(out[3]["content"]).startswith(REFUSAL_MARK)
    assert out[3]["content"] == (f"{REFUSAL_MARK} not run: it was proposed together with a refused "
                                 "call; propose it again if it is still needed")
    # the call without a name cannot carry its refusal: it goes to the user message
    assert out[4] == {"role": "user", "content": refusal_text(
        [r for r in s.refusals if r.position == 2])}
    assert len(out) == 5


def test_reask_without_results_and_with_legacy_calls(cursor: PolicyCursor) -> None:
    m = reply(function_call={"name": "nope", "arguments": "{}"})
    s = screen(cursor, m, 4, tools=TOOLS)
    out = reask_messages(s)
    assert out == [{"role": "assistant", "content": None},
                   {"role": "user", "content": refusal_text(s.refusals)}]
    ran = screen(cursor, reply(function_call={"name": "find_user", "arguments": "{}"}), 4, tools=TOOLS)
    out = reask_messages(ran, {0: "bob"})
    assert out == [{"role": "assistant", "content": None,
                    "function_call": {"name": "find_user", "arguments": "{}"}},
                   {"role": "function", "name": "find_user", "content": "bob"}]
    assert reask_messages(ran) == [{"role": "assistant", "content": None}]


def test_unfit_refusals_read_as_data(cursor: PolicyCursor) -> None:
    m = reply(call("delete_everything", '{"all": true}', "d"), content="x")
    m["role"] = "tool"
    s = screen(cursor, m, 4, tools=TOOLS)
    whole, bad = s.refusals
    assert whole.to_dict() == {
        "position": -1, "call_id": None, "tool": "", "arguments": "", "state": None, "violated": [],
        "malformed": "a reply must come from the assistant, not 'tool'",
        "allowed_states": list(cursor.allowed_states()), "explanation": whole.explain()}
    assert bad.to_dict() == {
        "position": 0, "call_id": "d", "tool": "delete_everything", "arguments": '{"all": true}',
        "state": None, "violated": [], "malformed": bad.malformed,
        "allowed_states": list(cursor.allowed_states()), "explanation": bad.explain()}
    assert bad.decision == Decision(False, None, (), cursor.allowed_states())


def test_the_first_message_keeps_its_index_zero(cursor: PolicyCursor) -> None:
    with pytest.raises(LogError) as e:
        screen(cursor, "book", 0, tools=TOOLS)
    assert e.value.index == 0
