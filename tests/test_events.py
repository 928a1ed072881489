"""Chat messages as events (``chat/events.py``, docs/design.md §2.5) at their edges: calls whose
arguments are not a JSON object (an error when strict, a call of that name with ``error`` when
lenient), content parts that are not text, and tool calls on a message that is not the
assistant's (errors of that message, never dropped)."""

from __future__ import annotations

import json

import pytest

from ltlagent.chat.events import Event, conversation_events, message_events
from ltlagent.errors import LogError


def _call(arguments: object, name: str = "book") -> dict[str, object]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}]}


BROKEN = [
    ('{"room": "Oak"', "not JSON"),
    ("[1, 2]", "must be a JSON object, found list"),
    ('"Oak"', "must be a JSON object, found str"),
    ("[" * 100_000, "nested too deep"),  # no RecursionError: an error of the message
    (5, "must be a JSON string, found int"),
]


@pytest.mark.parametrize("arguments, error", BROKEN)
def test_strict_reading_refuses_a_call_whose_arguments_are_not_an_object(arguments: object,
                                                                          error: str) -> None:
    with pytest.raises(LogError) as e:
        message_events(_call(arguments), 3)
    assert error in e.value.message and e.value.index == 3


@pytest.mark.parametrize("arguments, error", BROKEN)
def test_lenient_reading_keeps_the_call_and_its_name(arguments: object, error: str) -> None:
    (ev,) = message_events(_call(arguments), 3, lenient=True)
    assert (ev.message, ev.author, ev.kind, ev.tool, ev.arguments, ev.call_id) == \
        (3, "assistant", "call", "book", None, "c1")
    assert ev.error is not None and error in ev.error
    assert ev.text == (arguments if isinstance(arguments, str) else json.dumps(arguments))
    assert ev.to_dict()["error"] == ev.error and ev.to_dict()["arguments"] is None


def test_lenient_reading_changes_nothing_else() -> None:
    calls: list[object] = [
        {"id": "a", "function": {"name": "find_user", "arguments": '{"q": "x"}'}},
        {"id": "b", "function": {"name": "book", "arguments": "{oops"}},
        {"id": "c", "function": {"name": "book", "arguments": {"room": "Oak"}}}]
    msgs: list[object] = [{"role": "user", "content": "hi"},
                          {"role": "assistant", "content": "let me see", "tool_calls": calls}]
    strict_ok: list[object] = [msgs[0], {"role": "assistant", "content": "let me see",
                                         "tool_calls": [calls[0], calls[2]]}]
    lenient = conversation_events(msgs, lenient=True)
    assert [(e.kind, e.tool, e.error is None) for e in lenient] == [
        ("text", None, True), ("text", None, True), ("call", "find_user", True),
        ("call", "book", False), ("call", "book", True)]
    assert [e for e in lenient if e.error is None] == conversation_events(strict_ok)
    with pytest.raises(LogError, match="not JSON") as e:
        conversation_events(msgs)
    assert e.value.index == 1
    # a well-formed event has no error, and its fields are as they were
    assert Event.call("book", {"room": "Oak"}).error is None
    assert "error" not in Event.call("book", {"room": "Oak"}).to_dict()


@pytest.mark.parametrize("part, error", [
    ({"type": "tool_use", "id": "t1", "name": "book", "input": {"room": "Oak"}}, "'tool_use'"),
    ({"type": "function_call", "name": "book", "arguments": "{}"}, "'function_call'"),
    ({"type": "tool_result", "tool_use_id": "t1", "content": "done"}, "'tool_result'"),
    ({"type": "thinking", "thinking": "hmm"}, "'thinking' is neither text nor media"),
    ({"type": "text"}, "'text' must be a string"),
    ({"type": "refusal"}, "'refusal' must be a string"),
    ({"image_url": {"url": "x"}}, "'text' must be a string"),  # no type: must be text
    ({"type": 3, "text": "x"}, "neither text nor media"),
    (7, "content parts must be objects"),
])
@pytest.mark.parametrize("role", ["user", "assistant", "tool"])
def test_content_parts_that_are_not_text_are_errors_of_their_message(part: object, error: str,
                                                                     role: str) -> None:
    msg = {"role": role, "content": [{"type": "text", "text": "ok"}, part]}
    with pytest.raises(LogError) as e:
        conversation_events([{"role": "user", "content": "hi"}, msg], lenient=True)
    assert error in e.value.message and e.value.index == 1


def test_text_refusal_and_media_parts() -> None:
    (ev,) = message_events({"role": "user", "content": [
        {"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}},
        {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}},
        {"type": "input_text", "text": "at this"}, "and this"]}, 0)
    assert (ev.author, ev.kind, ev.text) == ("user", "text", "look\nat this\nand this")
    (ev,) = message_events({"role": "user", "content": [{"type": "image_url",
                                                         "image_url": {"url": "x"}}]}, 0)
    assert (ev.author, ev.text) == ("user", "")  # an image alone: still the user's step
    (ev,) = message_events({"role": "assistant", "content": [
        {"type": "refusal", "refusal": "I cannot book that."}]}, 0)
    assert (ev.kind, ev.text) == ("text", "I cannot book that.")


@pytest.mark.parametrize("role", ["user", "system", "developer", "tool", "function"])
@pytest.mark.parametrize("field, value", [
    ("tool_calls", [{"id": "1", "function": {"name": "book", "arguments": "{}"}}]),
    ("function_call", {"name": "book", "arguments": "{}"}),
])
def test_tool_calls_on_a_message_not_the_assistants_are_errors(role: str, field: str,
                                                               value: object) -> None:
    msg = {"role": role, "content": "hi", field: value}
    with pytest.raises(LogError, match="carries tool calls") as e:
        conversation_events([{"role": "user", "content": "x"}, msg], lenient=True)
    assert e.value.index == 1


def test_empty_tool_calls_on_other_messages_are_fine() -> None:
    evs = conversation_events([{"role": "user", "content": "a", "tool_calls": []},
                               {"role": "tool", "content": "b", "tool_calls": None,
                                "function_call": None, "tool_call_id": "1"}])
    assert [(e.author, e.text) for e in evs] == [("user", "a"), ("tool", "b")]
