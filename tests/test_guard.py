"""The guard library (issue 20) against a real HTTP server on localhost (``tests/standin.py``: a
stand-in OpenAI-compatible server whose scripted model does not know the policy), through the
official ``openai`` client: a forbidden tool call never runs, the model is told why and may try
again a bounded number of times, and every transcript passes ``Policy.check``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")

from ltlagent.chat.events import Event
from ltlagent.errors import UsageError
from ltlagent.guard import REFUSAL_MARK, FunctionTool, Guard
from ltlagent.guard.screen import screen, settle
from ltlagent.logic.policy import Policy
from tests.standin import Reply, StandIn, booking_brain

SPEC = Path(__file__).resolve().parents[1] / "specs" / "booking-policy.sexp"
OBJECT = {"type": "object", "properties": {}}
TOOLS = frozenset({"find_user", "book", "change_booking", "cancel_booking", "transfer_to_human"})


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy.load(SPEC)


@pytest.fixture(autouse=True)
def _close_clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every ``openai`` client a Guard makes here is closed after its test (not left to the GC)."""
    import openai

    made: list[Any] = []

    class Closing(openai.OpenAI):
        def __init__(self, **kw: Any) -> None:
            super().__init__(**kw)
            made.append(self)

    monkeypatch.setattr(openai, "OpenAI", Closing)
    yield
    for client in made:
        client.close()


class Desk:
    """The booking tools, recording every call that actually ran."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

    def tools(self) -> list[FunctionTool]:
        def tool(name: str, result: dict[str, Any]) -> FunctionTool:
            def run(**args: Any) -> dict[str, Any]:
                self.ran.append((name, args))
                return result
            return FunctionTool(name, f"the {name} tool", OBJECT, run)
        return [tool("find_user", {"user_id": "alice"}), tool("book", {"booking": "B-1"}),
                tool("change_booking", {"booking": "B-1"}), tool("cancel_booking", {"cancelled": True}),
                tool("transfer_to_human", {"ticket": 7})]

    def names(self) -> list[str]:
        return [n for n, _ in self.ran]


@pytest.fixture
def eager() -> Iterator[StandIn]:
    with StandIn(booking_brain(polite=False)) as s:
        yield s


@pytest.fixture
def polite() -> Iterator[StandIn]:
    with StandIn(booking_brain(polite=True)) as s:
        yield s


START = [{"role": "system", "content": "You book flights."},
         {"role": "user", "content": "Book LH123 for alice@example.com"}]


def _answered(messages: list[dict[str, Any]]) -> None:
    """Every proposed call in the model's view has exactly one tool answer (the OpenAI format)."""
    ids = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    answers = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert sorted(ids) == sorted(answers)


def test_a_forbidden_call_never_runs_and_the_transcript_passes(policy: Policy, eager: StandIn) -> None:
    desk = Desk()
    guard = Guard(policy, desk.tools(), base_url=eager.url, model="standin", max_retries=2)
    conv = guard.conversation(START)
    turn = conv.run()
    assert turn.outcome == "refused"  # three replies in a row proposed `book`: the turn ends
    assert turn.replies == 4 and len(turn.refusals) == 3
    assert desk.names() == ["find_user"]  # the look-up ran, the booking never did
    for r in turn.refusals:
        assert r.tool == "book" and r.decision.violated == ("confirm-before-write",)
        assert r.explain().startswith(REFUSAL_MARK) and "confirm-before-write" in r.explain()
    for answer in ("no, just do it", "I said book it!", "do not ask me again"):  # never a yes
        assert conv.say(answer).outcome == "refused"
    assert desk.names() == ["find_user"]
    assert policy.check(conv.transcript).verdict == "ok"
    # the model saw each refusal as the answer to its call; the transcript holds no refused call
    _answered(conv.messages)
    refusals = [m for m in conv.messages if m["role"] == "tool" and m["content"].startswith(REFUSAL_MARK)]
    assert len(refusals) == len(conv.refusals) == 12
    assert not any(c["function"]["name"] == "book" for m in conv.transcript
                   for c in m.get("tool_calls") or [])
    _answered(conv.transcript)
    # the server saw every refusal it was sent back: the model is told what is allowed now
    last = eager.requests[-1]["messages"][-1]
    assert last["role"] == "tool" and "allowed now" in last["content"].lower()


def test_a_confirmation_lets_the_booking_run(policy: Policy, polite: StandIn) -> None:
    desk = Desk()
    guard = Guard(policy, desk.tools(), base_url=polite.url, model="standin", max_retries=1)
    conv = guard.conversation(START)
    turn = conv.run()
    assert turn.outcome == "answered" and "confirm" in (turn.answer or "")
    assert desk.names() == ["find_user"] and len(turn.refusals) == 1
    turn = conv.say("yes, please")
    assert turn.outcome == "answered" and "booked" in (turn.answer or "")
    assert desk.names() == ["find_user", "book"]
    assert desk.ran[1][1] == {"user_id": "alice", "flight": "LH123"}
    assert policy.check(conv.transcript).verdict == "ok"
    assert [m["role"] for m in polite.requests[0]["messages"]] == ["system", "user"]
    assert {t["function"]["name"] for t in polite.requests[0]["tools"]} == \
        {"find_user", "book", "change_booking", "cancel_booking", "transfer_to_human"}


def test_parallel_calls_are_judged_one_by_one(policy: Policy) -> None:
    desk = Desk()
    with StandIn(booking_brain(polite=True, parallel=True)) as s:
        conv = Guard(policy, desk.tools(), base_url=s.url, model="standin").run(START)
    # find_user and book in one reply: the look-up runs, the booking (no confirmation) does not
    assert desk.names() == ["find_user"]
    first = conv.transcript[2]
    assert [c["function"]["name"] for c in first["tool_calls"]] == ["find_user"]
    assert [c["function"]["name"] for c in conv.messages[2]["tool_calls"]] == ["find_user", "book"]
    assert policy.check(conv.transcript).verdict == "ok"
    _answered(conv.messages)
    _answered(conv.transcript)


def test_screen_after_a_handoff(policy: Policy) -> None:
    history = [*START, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "h", "type": "function", "function": {"name": "transfer_to_human", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "h", "content": "queued"}]
    cursor = policy.cursor()
    cursor.push_messages(history)
    reply = {"role": "assistant", "content": "A colleague will take over.", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "find_user", "arguments": '{"email": "a@b"}'}},
        {"id": "b", "type": "function", "function": {"name": "cancel_booking", "arguments": "{}"}}]}
    s = screen(cursor, reply, len(history), tools=TOOLS)
    assert not s.ok and s.allowed == () and [r.tool for r in s.refusals] == ["find_user", "cancel_booking"]
    assert all("after-handoff-only-replies" in r.decision.violated for r in s.refusals)
    assert s.executed() == {"role": "assistant", "content": "A colleague will take over."}
    assert policy.check([*history, s.executed()]).verdict == "ok"
    # the cursor it was given is unchanged: the same call is judged the same again
    assert not cursor.decide(Event.call("find_user", {"email": "a@b"})).allowed
    final, dropped = settle(cursor, {**reply, "content": "refused"}, len(history), tools=TOOLS)
    assert final.ok and final.tool_calls() == [] and len(dropped) == 2


def test_screen_keeps_allowed_calls_after_a_refused_one(policy: Policy) -> None:
    cursor = policy.cursor()
    cursor.push_messages(START)
    calls = [{"id": "b", "type": "function", "function": {"name": "book", "arguments": "{}"}},
             {"id": "f", "type": "function", "function": {"name": "find_user",
                                                          "arguments": json.dumps({"email": "x"})}}]
    s = screen(cursor, {"role": "assistant", "content": None, "tool_calls": calls}, 2, tools=TOOLS)
    assert s.allowed == (1,) and [r.tool for r in s.refusals] == ["book"]
    assert {"confirm-before-write", "lookup-before-write"} <= set(s.refusals[0].decision.violated)
    executed = s.executed()
    assert executed is not None and executed["tool_calls"] == [calls[1]]


def test_tools_and_settings_are_checked_when_made(policy: Policy) -> None:
    with pytest.raises(UsageError):
        FunctionTool("bad name", "", OBJECT, print)
    with pytest.raises(UsageError):
        FunctionTool("t", "", {"type": "string"}, print)
    t = FunctionTool("t", "", OBJECT, lambda: 1 / 0)
    assert t.run({}).startswith("error: ZeroDivisionError")
    with pytest.raises(UsageError):
        Guard(policy, [t, t], base_url="http://127.0.0.1:9/v1", model="m")
    with pytest.raises(UsageError):
        Guard(policy, [], base_url="http://127.0.0.1:9/v1", model="m", max_retries=-1)


def test_a_call_with_broken_arguments_is_refused_not_a_crash(policy: Policy) -> None:
    desk = Desk()

    def brain(body: dict[str, Any]) -> Reply:
        if body["messages"][-1]["role"] == "tool":
            return Reply({"content": "Sorry, I could not do that."})
        return Reply({"content": None, "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "find_user", "arguments": "{oops"}},
            {"id": "y", "type": "function", "function": {"name": "find_user",
                                                         "arguments": '{"email": "a@b"}'}}]})
    with StandIn(brain) as s:
        conv = Guard(policy, desk.tools(), base_url=s.url, model="standin").run(START)
    assert desk.names() == ["find_user"] and desk.ran[0][1] == {"email": "a@b"}
    [r] = conv.refusals
    assert r.position == 0 and r.malformed and "not JSON" in r.malformed
    assert "allowed now" in r.explain()
    assert policy.check(conv.transcript).verdict == "ok"
    _answered(conv.messages)


def test_an_empty_reply_is_a_step_and_is_kept(policy: Policy) -> None:
    cursor = policy.cursor()
    cursor.push_messages(START)
    s = screen(cursor, {"role": "assistant", "content": ""}, 2, tools=TOOLS)
    assert s.ok and s.executed() == {"role": "assistant", "content": ""}
    refused = screen(cursor, {"role": "assistant", "content": "", "tool_calls": [
        {"id": "b", "type": "function", "function": {"name": "book", "arguments": "{}"}}]}, 2, tools=TOOLS)
    assert refused.executed() is None  # nothing of it remains, and it gave the cursor no step
    assert refused.cursor.decide(Event.call("find_user", {})).allowed_states == \
        cursor.decide(Event.call("find_user", {})).allowed_states
