"""The library guard's loop (``ltlagent.guard.chat``) against a scripted in-process client (no
server, so a mutation run can use this file as its fast selection; issue 31, docs/mutation.md,
"guard/chat.py"): what is sent, what runs, what is recorded, and how a turn ends."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

openai = pytest.importorskip("openai")

from ltlagent.errors import LogError, UsageError  # noqa: E402
from ltlagent.guard.chat import MODEL_ENV, FunctionTool, Guard  # noqa: E402
from ltlagent.guard.screen import REFUSAL_MARK  # noqa: E402
from ltlagent.logic.policy import Policy  # noqa: E402
from tests.test_guard_shapes import HISTORY as SHAPE_HISTORY  # noqa: E402
from tests.test_guard_shapes import NAMES as SHAPE_TOOLS  # noqa: E402
from tests.test_guard_shapes import SHAPES, plain_body  # noqa: E402

SPEC = Path(__file__).resolve().parents[1] / "specs" / "booking-policy.sexp"
OBJECT = {"type": "object", "properties": {}}
HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You book flights."},
    {"role": "user", "content": "Book LH123 for bob@example.com"}]
BOOK = '{"user_id": "bob", "flight": "LH123"}'


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy.load(SPEC)


class Raw:
    def __init__(self, content: bytes) -> None:
        self.content = content


class Script:
    """A stand-in for ``openai.OpenAI``: ``chat.completions.with_raw_response.create`` answers
    each request with the next scripted body, and keeps the requests."""

    def __init__(self, *bodies: object) -> None:
        self.bodies = list(bodies)
        self.requests: list[dict[str, Any]] = []
        self.chat = self
        self.completions = self
        self.with_raw_response = self

    def create(self, **kw: Any) -> Raw:
        self.requests.append(json.loads(json.dumps(kw)))
        body = self.bodies.pop(0)
        return Raw(body if isinstance(body, bytes) else json.dumps(body).encode())


def said(message: dict[str, Any]) -> dict[str, Any]:
    return {"id": "x", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


def calls(*cs: tuple[str, str, str], content: str | None = None) -> dict[str, Any]:
    return said({"role": "assistant", "content": content, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for n, a, i in cs]})


def text(t: str) -> dict[str, Any]:
    return said({"role": "assistant", "content": t})


class Desk:
    """The booking tools, recording every call that ran."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

    def tool(self, name: str, result: object) -> FunctionTool:
        def run(**args: Any) -> object:
            self.ran.append((name, args))
            return result
        return FunctionTool(name, f"the {name} tool", OBJECT, run)

    def tools(self) -> list[FunctionTool]:
        return [self.tool("find_user", {"user_id": "bob"}), self.tool("book", "B-1"),
                self.tool("transfer_to_human", {"ticket": 7})]


def guard(policy: Policy, script: Script, desk: Desk, **kw: Any) -> Guard:
    return Guard(policy, desk.tools(), client=script, model="m", **kw)  # type: ignore[arg-type]


# -- tools ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["find_user", "a-b", "X9", "a_b", "_", "-", "__init__"])
def test_plain_tool_names_are_accepted(name: str) -> None:
    assert FunctionTool(name, "d", OBJECT, print).name == name


@pytest.mark.parametrize("name", ["", "a b", "a.b", "rm;ls", "a/b", "книга", "x²", "a\n"])
def test_other_tool_names_are_refused_when_made(name: str) -> None:
    with pytest.raises(UsageError, match="letters, digits, '_' and '-' only"):
        FunctionTool(name, "d", OBJECT, print)


def test_parameters_must_be_an_object_schema() -> None:
    with pytest.raises(UsageError, match="tool t: parameters must be a JSON schema of type 'object'"):
        FunctionTool("t", "d", {"type": "string"}, print)
    with pytest.raises(UsageError, match="type 'object'"):
        FunctionTool("t", "d", {}, print)


def test_a_tool_schema_is_the_request_entry() -> None:
    t = FunctionTool("find_user", "Look a user up", {"type": "object", "required": ["email"]}, print)
    assert t.schema() == {"type": "function", "function": {
        "name": "find_user", "description": "Look a user up",
        "parameters": {"type": "object", "required": ["email"]}}}


def test_a_tool_result_is_text_json_or_its_error() -> None:
    def boom(**a: Any) -> str:
        raise KeyError("email")
    assert FunctionTool("t", "d", OBJECT, lambda **a: "plain").run({}) == "plain"
    assert FunctionTool("t", "d", OBJECT, lambda **a: {"a": [1, a["x"]]}).run({"x": 2}) == \
        '{"a": [1, 2]}'
    when = datetime.date(2026, 1, 2)
    assert FunctionTool("t", "d", OBJECT, lambda **a: {"d": when}).run({}) == '{"d": "2026-01-02"}'
    assert FunctionTool("t", "d", OBJECT, boom).run({}) == "error: KeyError: 'email'"


# -- the guard's settings -----------------------------------------------------------------------
def test_settings_are_checked_when_made(policy: Policy, monkeypatch: pytest.MonkeyPatch) -> None:
    d = Desk()
    with pytest.raises(UsageError, match="duplicate tool names"):
        Guard(policy, [d.tool("a", 1), d.tool("a", 2)], client=Script(), model="m")  # type: ignore[arg-type]
    with pytest.raises(UsageError) as e:
        guard(policy, Script(), d, max_retries=-1)
    assert str(e.value) == "max_retries must be ≥ 0 and max_turns ≥ 1"
    with pytest.raises(UsageError, match="max_turns ≥ 1"):
        guard(policy, Script(), d, max_turns=0)
    g = guard(policy, Script(), d, max_retries=0, max_turns=1)
    assert (g.max_retries, g.max_turns, g.model) == (0, 1, "m")
    monkeypatch.delenv(MODEL_ENV, raising=False)
    with pytest.raises(UsageError, match=r"no model: pass model=… or set \$OPENAI_MODEL"):
        Guard(policy, d.tools(), client=Script())  # type: ignore[arg-type]
    monkeypatch.setenv(MODEL_ENV, "from-env")
    assert Guard(policy, d.tools(), client=Script()).model == "from-env"  # type: ignore[arg-type]
    assert Guard(SPEC, client=Script(), model="m").policy.spec.name == policy.spec.name  # type: ignore[arg-type]
    assert set(g.tools) == {"find_user", "book", "transfer_to_human"}
    default = guard(policy, Script(), d)
    assert (default.max_retries, default.max_turns) == (3, 16)  # the defaults a caller relies on


def test_a_guard_without_a_client_makes_one(policy: Policy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    g = Guard(policy, model="m", base_url="http://127.0.0.1:9/v1")
    try:
        assert isinstance(g.client, openai.OpenAI)
        assert str(g.client.base_url) == "http://127.0.0.1:9/v1/"
        assert g.client.api_key == "EMPTY"
    finally:
        g.client.close()
    g = Guard(policy, model="m", base_url="http://127.0.0.1:9/v1", api_key="sk-1")
    try:
        assert g.client.api_key == "sk-1"
    finally:
        g.client.close()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    g = Guard(policy, model="m", base_url="http://127.0.0.1:9/v1")
    try:
        assert g.client.api_key == "sk-env"
    finally:
        g.client.close()


# -- one completion -------------------------------------------------------------------------------
def test_a_request_carries_the_model_the_tools_and_the_settings(policy: Policy) -> None:
    s = Script(text("hi"), text("hi"))
    d = Desk()
    g = guard(policy, s, d, temperature=0.5)
    assert g.complete(HISTORY) == {"role": "assistant", "content": "hi"}
    (r,) = s.requests
    assert r == {"model": "m", "messages": HISTORY, "temperature": 0.5,
                 "tools": [t.schema() for t in d.tools()]}
    bare = Guard(policy, client=s, model="m")  # type: ignore[arg-type]
    bare.complete(HISTORY)
    assert "tools" not in s.requests[1]


@pytest.mark.parametrize("body,why", [
    (b"not json", "the reply is not JSON"),
    (b'{"choices": [{"message": {"role": "assistant", "content": NaN}}]}', "the reply is not JSON"),
    (b'{"choices": [{"message": {"role": "assistant", "role": "tool"}}]}', "appears twice"),
    ([], "no choices"), ({}, "no choices"), ({"choices": []}, "no choices"),
    ({"choices": {"0": {"message": {}}}}, "no choices"), ({"choices": ["x"]}, "no choices"),
    ({"choices": [{"message": "hi"}]}, "no choices"), ({"choices": [{}]}, "no choices"),
])
def test_a_reply_that_is_not_a_completion_is_a_log_error(policy: Policy, body: object, why: str) -> None:
    g = guard(policy, Script(body), Desk())
    with pytest.raises(LogError, match=why) as e:
        g.complete(HISTORY)
    if why == "no choices":  # the whole sentence: the caller shows it
        assert str(e.value) == "the reply is not a chat completion (no choices[0].message object)"


def test_only_the_first_choice_is_judged(policy: Policy) -> None:
    body = {"choices": [{"message": {"role": "assistant", "content": "first"}},
                        {"message": {"role": "assistant", "content": "second"}}]}
    assert guard(policy, Script(body), Desk()).complete(HISTORY)["content"] == "first"


# -- the loop -------------------------------------------------------------------------------------
def test_allowed_calls_run_and_are_recorded(policy: Policy) -> None:
    s = Script(calls(("find_user", '{"email": "bob@example.com"}', "f1"), content="Looking."),
               text("Found bob."))
    d = Desk()
    conv = guard(policy, s, d).conversation(HISTORY)
    turn = conv.run()
    assert (turn.outcome, turn.replies, turn.refusals, turn.answer) == ("answered", 2, (), "Found bob.")
    assert d.ran == [("find_user", {"email": "bob@example.com"})]
    result = {"role": "tool", "content": '{"user_id": "bob"}', "tool_call_id": "f1"}
    assert conv.transcript[2:] == [
        {"role": "assistant", "content": "Looking.", "tool_calls": [
            {"id": "f1", "type": "function", "function": {
                "name": "find_user", "arguments": '{"email": "bob@example.com"}'}}]},
        result, {"role": "assistant", "content": "Found bob."}]
    assert conv.messages[3] == result
    # the second request showed the model its call and the result
    assert s.requests[1]["messages"][2:] == conv.messages[2:4]
    assert conv.report().verdict == "ok"  # type: ignore[attr-defined]
    fresh = policy.cursor()
    fresh.push_messages(conv.transcript)
    assert conv.cursor.allowed_states() == fresh.allowed_states()
    assert len(conv.cursor.trace) == len(fresh.trace)


def test_a_legacy_call_is_answered_by_a_function_message(policy: Policy) -> None:
    legacy = said({"role": "assistant", "content": None,
                   "function_call": {"name": "transfer_to_human", "arguments": "{}"}})
    d = Desk()
    conv = guard(policy, Script(legacy, text("Done.")), d).conversation(HISTORY)
    assert conv.run().outcome == "answered"
    assert d.ran == [("transfer_to_human", {})]
    assert conv.transcript[3] == {"role": "function", "name": "transfer_to_human",
                                  "content": '{"ticket": 7}'}


def test_a_forbidden_call_never_runs_and_the_model_is_told(policy: Policy) -> None:
    book = calls(("book", BOOK, "b1"))
    d = Desk()
    conv = guard(policy, Script(book, text("Please confirm.")), d).conversation(HISTORY)
    turn = conv.run()
    assert d.ran == []
    assert (turn.outcome, turn.replies, turn.answer) == ("answered", 2, "Please confirm.")
    assert [r.tool for r in turn.refusals] == ["book"] and conv.refusals == list(turn.refusals)
    refusal = conv.messages[3]
    assert refusal["role"] == "tool" and refusal["tool_call_id"] == "b1"
    assert str(refusal["content"]).startswith(REFUSAL_MARK)
    assert conv.transcript == [*HISTORY, {"role": "assistant", "content": "Please confirm."}]
    assert conv.report().verdict == "ok"  # type: ignore[attr-defined]


def test_refused_replies_in_a_row_end_the_turn(policy: Policy) -> None:
    book = calls(("book", BOOK, "b"))
    conv = guard(policy, Script(book, book, book), Desk(), max_retries=2).conversation(HISTORY)
    turn = conv.run()
    assert (turn.outcome, turn.replies, len(turn.refusals)) == ("refused", 3, 3)
    conv = guard(policy, Script(book), Desk(), max_retries=0).conversation(HISTORY)
    assert conv.run().outcome == "refused"


def test_an_allowed_reply_resets_the_refusal_count(policy: Policy) -> None:
    book = calls(("book", BOOK, "b"))
    look = calls(("find_user", "{}", "f"))
    d = Desk()
    conv = guard(policy, Script(book, look, book, text("ok")), d, max_retries=1).conversation(HISTORY)
    turn = conv.run()
    assert (turn.outcome, turn.replies, len(turn.refusals)) == ("answered", 4, 2)
    assert [n for n, _ in d.ran] == ["find_user"]


def test_a_model_that_keeps_calling_tools_stops_at_max_turns(policy: Policy) -> None:
    look = calls(("find_user", "{}", "f"))
    d = Desk()
    conv = guard(policy, Script(look, look, look), d, max_turns=3).conversation(HISTORY)
    turn = conv.run()
    assert (turn.outcome, turn.replies, turn.answer) == ("max-turns", 3, None)
    assert len(d.ran) == 3
    said_last = calls(("find_user", "{}", "f"), content="Still looking.")
    conv = guard(policy, Script(look, said_last), Desk(), max_turns=2).conversation(HISTORY)
    assert conv.run().answer == "Still looking."


def test_the_answer_is_text_or_none(policy: Policy) -> None:
    parts = said({"role": "assistant", "content": [{"type": "text", "text": "Hi"}]})
    turn = guard(policy, Script(parts), Desk()).conversation(HISTORY).run()
    assert turn.outcome == "answered" and (turn.answer is None or isinstance(turn.answer, str))


def test_a_reply_that_cannot_be_judged_names_its_index(policy: Policy) -> None:
    conv = guard(policy, Script(said({"role": "assistant", "content": 5})), Desk()).conversation(HISTORY)
    with pytest.raises(LogError) as e:
        conv.run()
    assert e.value.index == len(HISTORY)


def test_a_refused_reply_with_text_still_answers_in_the_last_turn(policy: Policy) -> None:
    bad = calls(("delete_everything", "{}", "d"), content="Deleting.")  # the answer is the last text
    conv = guard(policy, Script(bad), Desk(), max_retries=0).conversation(HISTORY)
    turn = conv.run()
    assert (turn.outcome, turn.answer) == ("refused", "Deleting.")
    assert conv.transcript[-1] == {"role": "assistant", "content": "Deleting."}


def test_say_adds_the_user_turn_and_runs(policy: Policy) -> None:
    s = Script(text("Hello."), text("Bye."))
    g = guard(policy, s, Desk())
    conv = g.run(HISTORY)
    assert conv.transcript[-1] == {"role": "assistant", "content": "Hello."}
    turn = conv.say("yes")
    assert turn.answer == "Bye."
    assert conv.transcript[-2:] == [{"role": "user", "content": "yes"},
                                    {"role": "assistant", "content": "Bye."}]
    assert s.requests[1]["messages"][-1] == {"role": "user", "content": "yes"}
    # the user's yes is on the cursor: a write is allowed now (after a lookup)
    conv.add({"role": "assistant", "content": None, "tool_calls": [
        {"id": "f", "type": "function", "function": {"name": "find_user", "arguments": "{}"}}]})
    conv.add({"role": "tool", "tool_call_id": "f", "content": '{"user_id": "bob"}'})
    conv.add({"role": "user", "content": "yes"})
    assert "Write" in conv.cursor.allowed_states()


def test_the_history_is_copied_not_shared(policy: Policy) -> None:
    history = [dict(m) for m in HISTORY]
    conv = guard(policy, Script(text("hi")), Desk()).conversation(history)
    conv.run()
    assert history == HISTORY and len(conv.transcript) == 3 and len(conv.messages) == 3
    conv.messages.append({"role": "user", "content": "x"})
    assert len(conv.transcript) == 3



# -- every attacker's shape of tests/test_guard_shapes.py, in-process -----------------------------
@pytest.mark.parametrize("name", list(SHAPES))
def test_no_shape_runs_a_forbidden_call_in_process(name: str, policy: Policy) -> None:
    shape = SHAPES[name]
    desk = Desk()
    first = shape.plain if shape.raw is not None or len(shape.choices) == 1 else \
        ("pass" if shape.choices[0] is not None else "502")  # the library runs choices[0] only
    g = Guard(policy, [desk.tool(n, {"ok": n}) for n in SHAPE_TOOLS], client=Script(plain_body(shape)),  # type: ignore[arg-type]
              model=name, max_retries=0, max_turns=1)
    conv = g.conversation(SHAPE_HISTORY)
    if first == "502":
        with pytest.raises(LogError):
            conv.run()
        return
    turn = conv.run()
    assert tuple(n for n, _ in desk.ran) == (shape.runs if len(shape.choices) == 1 else ())
    assert all(a == {"email": "bob@example.com"} or a == {} for _, a in desk.ran)
    assert (turn.refusals != ()) == (first == "refused"), turn
    assert turn.outcome == ("refused" if first == "refused" else "answered" if not desk.ran
                            else "max-turns")
    assert policy.check(conv.transcript).verdict == "ok"
    assert all(isinstance(m, dict) and m.get("role") in ("assistant", "tool", "function", "user",
                                                         "system") for m in conv.messages)
    json.dumps(conv.messages)  # what the model is shown next can be sent


def test_a_message_added_that_cannot_be_read_names_its_index(policy: Policy) -> None:
    conv = guard(policy, Script(), Desk()).conversation(HISTORY)
    with pytest.raises(LogError, match="unknown role 'robot'") as e:
        conv.add({"role": "robot", "content": "beep"})
    assert e.value.index == len(HISTORY)
