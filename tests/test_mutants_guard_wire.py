"""What crosses the wire, read in-process (``ltlagent.guard.wire``: strict JSON and server-sent
events as the MCP guard reads them; ``ltlagent.guard.stream``: the chat-completions stream the
proxy assembles into replies). No server, so a mutation run can use this file as the fast
selection of both modules (issue 31; docs/mutation.md, "guard/wire.py and guard/stream.py").
Outputs are compared whole (bytes, messages, error texts), so that a mutant changing any part of
them fails."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest

from ltlagent.guard import stream as stream_mod
from ltlagent.guard.stream import DONE, MAX_CHOICES, ReplyAssembler, sse, sse_events
from ltlagent.guard.wire import MAX_DEPTH, MAX_EVENT_BYTES, SseEvent, SseReader, dumps, sse_bytes, strict_json


def _error(fn: Any, *args: Any, **kwargs: Any) -> str:
    """The text of the ``ValueError`` that ``fn(*args)`` raises."""
    with pytest.raises(ValueError) as info:
        fn(*args, **kwargs)
    return str(info.value)


# -- wire.strict_json, wire.dumps -----------------------------------------------------------------
def test_the_limits_are_the_documented_ones() -> None:
    assert (MAX_DEPTH, MAX_EVENT_BYTES, MAX_CHOICES) == (64, 16 * 1024 * 1024, 128)
    assert DONE == b"data: [DONE]\n\n"


def test_strict_json_nests_exactly_max_depth_deep() -> None:
    for open_, close in (("[", "]"), ('{"a":', "}")):
        ok = (open_ * MAX_DEPTH + "1" + close * MAX_DEPTH).encode()
        value = strict_json(ok)
        for _ in range(MAX_DEPTH):
            value = value[0] if isinstance(value, list) else value["a"]  # type: ignore[index]
        assert value == 1
        deep = (open_ * (MAX_DEPTH + 1) + "1" + close * (MAX_DEPTH + 1)).encode()
        assert _error(strict_json, deep) == "nested deeper than 64"
    # the nesting of a later sibling counts too, not only the first value's
    assert _error(strict_json, b'{"a": 1, "b": ' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}") == \
        "nested deeper than 64"
    inner: list[object] = []
    for _ in range(MAX_DEPTH - 2):
        inner = [inner]
    assert strict_json(b'{"a": 1, "b": ' + b"[" * (MAX_DEPTH - 1) + b"]" * (MAX_DEPTH - 1) + b"}") == \
        {"a": 1, "b": inner}
    # deeper than Python's parser recurses: the same error, not a RecursionError
    assert _error(strict_json, b"[" * 100_000 + b"]" * 100_000) == "nested deeper than 64"


def test_strict_json_refuses_with_a_reason() -> None:
    assert _error(strict_json, b"[NaN]") == "NaN is not JSON"
    assert _error(strict_json, b"[-Infinity]") == "-Infinity is not JSON"
    assert _error(strict_json, b'{"a": 1, "b": 2, "a": 3}') == "duplicate key 'a'"
    assert _error(strict_json, b'{"x": {"b": 1, "b": 1}}') == "duplicate key 'b'"
    with pytest.raises(UnicodeDecodeError):
        strict_json(b'"\xff"')
    assert strict_json('{"é": "ü", "b": [1.5, true, null]}'.encode()) == {"é": "ü", "b": [1.5, True, None]}
    assert list(strict_json(b'{"z": 1, "a": 2}')) == ["z", "a"]  # type: ignore[arg-type]


def test_dumps_is_compact_utf8_and_refuses_nan() -> None:
    assert dumps({"a": [1, "é"], "b": None}) == '{"a":[1,"é"],"b":null}'.encode()
    with pytest.raises(ValueError):
        dumps(float("nan"))


# -- wire.SseReader, wire.sse_bytes ---------------------------------------------------------------
def _read(chunks: Iterable[bytes], end: bool = True) -> list[SseEvent | None]:
    reader = SseReader()
    out: list[SseEvent | None] = []
    for c in chunks:
        out += reader.feed(c)
    if end:
        out += reader.feed(b"", end=True)
    return out


def _shape(events: list[SseEvent | None]) -> list[object]:
    return [None if e is None else (e.event, e.id, e.data, e.retry, e.size) for e in events]


def test_sse_fields_as_a_browser_reads_them() -> None:
    text = (b"data:no space\ndata:  two spaces\ndata\nevent:e\nid:7\nretry:15\nfoo: bar\n\n"
            b"id: x\0y\nretry: 1a\ndata: \xff\n\n"
            b"id: only\n\n"
            b"event: only\n\n"
            b"retry: 3\n\n"
            b"\n\n"
            b": a comment\n"
            b":\n")
    assert _shape(_read([text])) == [
        ("e", "7", ["no space", " two spaces", ""], "15", 9 + 12 + 1),
        (None, None, ["\ufffd"], None, 2),
        (None, "only", [], None, 0),
        ("only", None, [], None, 0),
        (None, None, [], "3", 0),
        None, None]


def test_sse_lines_end_with_cr_lf_or_crlf_even_split_between_chunks() -> None:
    assert _shape(_read([b"data: a\r", b"\ndata: b\r\n\r\n"])) == [(None, None, ["a", "b"], None, 4)]
    assert _shape(_read([b"data: a\r", b"\rdata: b\n\n"])) == [(None, None, ["a"], None, 2),
                                                                (None, None, ["b"], None, 2)]
    assert _shape(_read([b"data: a\n\rdata: b\r\n\n"])) == [(None, None, ["a"], None, 2),
                                                           (None, None, ["b"], None, 2)]
    # a CR that ends the stream ends its line
    assert _shape(_read([b"data: a\n\r"])) == [(None, None, ["a"], None, 2)]
    # without the end, a line not yet ended is not read
    assert _read([b"data: a\n\ndata: b"], end=False)[0] is not None
    assert len(_read([b"data: a\n\ndata: b\n"], end=False)) == 1
    r = SseReader()
    assert r.feed(b"data: a\r") == [] and r.buffer == b"data: a\r"


def test_a_byte_order_mark_is_skipped_only_at_the_start() -> None:
    bom = b"\xef\xbb\xbf"
    for split in range(0, 4):
        got = _read([(bom + b"data: a\n\n")[:split], (bom + b"data: a\n\n")[split:]])
        assert _shape(got) == [(None, None, ["a"], None, 2)], split
    r = SseReader()
    assert r.feed(b"\xef") == [] and r.feed(b"\xbb") == [] and not r.started
    # a second mark is a field named "\ufeffdata" (ignored), not skipped
    assert _shape(_read([bom + bom + b"data: a\n\n"])) == []
    # bytes that only begin like a mark are not dropped
    assert _shape(_read([b"\xef" + b"\n:x\n"])) == [None]
    r = SseReader()
    assert r.feed(b"\xef\xbb", end=True) == [] and r.started and r.buffer == b"\xef\xbb"


def test_an_event_at_the_limit_is_read_and_one_byte_more_is_not() -> None:
    r = SseReader()
    (ev,) = r.feed(b"data: " + b"x" * (MAX_EVENT_BYTES - 1) + b"\n\n")
    assert ev is not None and ev.size == MAX_EVENT_BYTES
    r = SseReader()
    assert r.feed(b"data: " + b"x" * (MAX_EVENT_BYTES - 1) + b"\n") == []
    assert _error(r.feed, b"d") == f"an event over {MAX_EVENT_BYTES} bytes"
    r = SseReader()
    assert r.feed(b"x" * MAX_EVENT_BYTES) == []  # a line not ended yet counts too
    assert _error(r.feed, b"x") == "an event over 16777216 bytes"


def test_sse_bytes_writes_back_what_was_read() -> None:
    assert sse_bytes(None, None) == b":\n\n"
    assert sse_bytes(None, "x") == b":\n\n"
    ev = SseEvent(data=["a", "b"], event="message", id="4", retry="10")
    assert sse_bytes(ev, None) == b"event: message\nid: 4\nretry: 10\ndata: a\ndata: b\n\n"
    assert sse_bytes(ev, "x\ny") == b"event: message\nid: 4\nretry: 10\ndata: x\ndata: y\n\n"
    assert sse_bytes(SseEvent(id="1"), None) == b"id: 1\n\n"
    assert sse_bytes(SseEvent(id="1"), "") == b"id: 1\ndata: \n\n"
    assert sse_bytes(SseEvent(data=[""]), None) == b"data: \n\n"
    assert sse_bytes(SseEvent(event="", id="", retry=""), None) == b"event: \nid: \nretry: \n\n"
    # read back, the same event
    assert _shape(_read([sse_bytes(ev, None)])) == [("message", "4", ["a", "b"], "10", 4)]


# -- stream.sse, stream.sse_events ----------------------------------------------------------------
def test_sse_writes_one_compact_data_event() -> None:
    assert sse({"a": [1, "é"]}) == b'data: {"a":[1,"\\u00e9"]}\n\n'


async def _pieces(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for c in chunks:
        yield c


def _events(chunks: list[bytes], max_bytes: int = 1000, max_line: int = 1000) -> list[str]:
    async def run() -> list[str]:
        return [e async for e in sse_events(_pieces(chunks), max_bytes, max_line)]
    return asyncio.run(run())


def test_sse_events_yields_the_data_payloads() -> None:
    assert _events([b"data: a\n", b": c\nevent: x\nda", b"ta:  b \n\ndata:c"]) == ["a", "b", "c"]
    assert _events([b"data: a\nid: 1"]) == ["a"]
    assert _events([b"data:\xc3", b"\xa9\n"]) == ["é"]
    with pytest.raises(UnicodeDecodeError):
        _events([b"data: \xff\n"])
    with pytest.raises(UnicodeDecodeError):
        _events([b"data: \xff"])


def test_sse_events_bounds_the_stream_and_its_lines() -> None:
    assert _events([b"data: 12\n", b"data: 3\n"], max_bytes=17) == ["12", "3"]
    with pytest.raises(ValueError) as info:
        _events([b"data: 12\n", b"data: 3\n"], max_bytes=16)
    assert str(info.value) == "the stream is longer than 16 bytes"
    assert _events([b"data: 12345", b"\n"], max_line=11) == ["12345"]
    with pytest.raises(ValueError) as info:
        _events([b"data: 123456", b"\n"], max_line=11)
    assert str(info.value) == "a line of the stream is longer than 11 bytes"
    assert _events([b"data: 12345\ndata: 1234567890"], max_line=16) == ["12345", "1234567890"]


# -- stream.ReplyAssembler ------------------------------------------------------------------------
HEAD = {"id": "c1", "object": "chat.completion.chunk", "created": 5, "model": "m",
        "system_fingerprint": "fp", "service_tier": "t"}


def chunk(*choices: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**HEAD, "choices": list(choices), **extra}


def test_text_and_the_assistant_role_are_forwarded_at_once_with_the_chunk_keys() -> None:
    asm = ReplyAssembler()
    out = asm.feed(chunk({"index": 0, "delta": {"role": "assistant", "content": "Hi", "reasoning": "r",
                                                "reasoning_content": "", "refusal": "no"},
                          "logprobs": {}}, extra="dropped"))
    assert out == [{**HEAD, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi",
                                                                "reasoning": "r"},
                                         "finish_reason": None}]}]
    out = asm.feed({"choices": [{"index": 0, "delta": {"content": " there"},
                                 "logprobs": {"content": [1]}}], "id": "c1"})
    assert out == [{"id": "c1", "choices": [{"index": 0, "delta": {"content": " there"},
                                             "finish_reason": None, "logprobs": {"content": [1]}}]}]
    assert asm.feed(chunk({"index": 0, "delta": {"content": ""}})) == []
    assert asm.feed(chunk({"index": 0, "delta": {"content": None}})) == []
    assert asm.feed(chunk({"index": 0, "delta": None})) == []
    assert asm.feed(chunk({"index": 0})) == []
    assert asm.feed(chunk({"index": 0, "delta": {"role": "user"}})) == []
    assert asm.text(0) == "Hi there" and asm.text(1) == ""
    assert asm.template == {"id": "c1", "object": "chat.completion.chunk", "created": 5, "model": "m"}
    assert asm.messages({}) == {0: {"role": ["assistant", "user"], "content": "Hi there"}}
    assert asm.messages({0: "Before. "}) == {0: {"role": ["assistant", "user"],
                                                  "content": "Before. Hi there"}}


def test_the_template_comes_from_the_first_chunk_only() -> None:
    asm = ReplyAssembler()
    asm.feed({"model": "a", "choices": []})
    asm.feed({"id": "x", "model": "b", "choices": []})
    assert asm.template == {"model": "a"}
    assert asm.feed({"choices": [{"delta": {"content": "x"}}]}) == [
        {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}]


def test_usage_is_kept_when_it_is_an_object() -> None:
    asm = ReplyAssembler()
    asm.feed(chunk(usage={"total_tokens": 3}))
    asm.feed(chunk(usage=None))
    asm.feed(chunk(usage=[1]))
    assert asm.usage == {"total_tokens": 3}


def test_a_repeated_role_is_kept_once() -> None:
    asm = ReplyAssembler()
    asm.feed(chunk({"index": 0, "delta": {"role": "assistant"}}))
    assert asm.feed(chunk({"index": 0, "delta": {"role": "assistant"}})) != []
    assert asm.messages({})[0]["role"] == "assistant"
    asm = ReplyAssembler()
    asm.feed(chunk({"index": 0, "delta": {"role": "tool"}}))
    assert asm.messages({})[0] == {"role": "tool", "content": None}


def test_streamed_calls_are_assembled_per_index_and_in_order() -> None:
    asm = ReplyAssembler()
    deltas = [
        {"tool_calls": [{"index": 1, "id": "b", "type": "function", "function": {"name": "bo"}}]},
        {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "find", "arguments": "{\"e\""}}]},
        {"tool_calls": [{"index": 1, "function": {"name": "ok", "arguments": "{}"}}]},
        {"tool_calls": [{"index": 0, "id": None, "type": None,
                         "function": {"name": None, "arguments": ":1}"}}]},
        {"tool_calls": [{"function": {"name": "_user"}}]},
        {"tool_calls": None},
    ]
    for d in deltas:
        assert asm.feed(chunk({"index": 0, "delta": d})) == []
    assert asm.messages({}) == {0: {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": None, "function": {"name": "find_user", "arguments": "{\"e\":1}"}},
        {"id": "b", "type": "function", "function": {"name": "book", "arguments": "{}"}}]}}


def test_pieces_that_are_not_text_are_kept_as_they_came() -> None:
    asm = ReplyAssembler()
    for d in ({"tool_calls": [{"index": 0, "function": {"name": 5, "arguments": {"a": 1}}}]},
              {"tool_calls": [{"index": 0, "function": {"name": "x", "arguments": "y"}}]},
              {"tool_calls": [{"index": 1, "function": "f"}]},
              {"tool_calls": [{"index": 2, "custom": {"input": "i"}, "function": None}]},
              {"tool_calls": [{"index": 2, "custom": "again"}]},
              {"tool_calls": [{"index": 3, "function": {"name": "a"}}]},
              {"tool_calls": [{"index": 3, "function": {"name": ["b"]}}]}):
        asm.feed(chunk({"delta": d}))
    assert asm.messages({})[0]["tool_calls"] == [
        {"id": None, "type": None, "function": {"name": [5, "x"], "arguments": [{"a": 1}, "y"]}},
        {"id": None, "type": None, "function": "f"},
        {"id": None, "type": None, "function": {"name": "", "arguments": ""}, "custom": "again"},
        {"id": None, "type": None, "function": {"name": ["a", ["b"]], "arguments": ""}}]


def test_a_tool_calls_delta_that_is_not_a_list_is_kept_to_be_refused() -> None:
    asm = ReplyAssembler()
    asm.feed(chunk({"delta": {"tool_calls": {"name": "book"}}}))
    asm.feed(chunk({"delta": {"tool_calls": [{"index": 0, "function": {"name": "x"}}]}}))
    asm.feed(chunk({"delta": {"tool_calls": "second"}}))
    assert asm.messages({})[0] == {"role": "assistant", "content": None, "tool_calls": {"name": "book"}}


def test_a_legacy_function_call_is_assembled() -> None:
    asm = ReplyAssembler()
    for d in ({"function_call": {"name": "bo", "arguments": "{"}}, {"function_call": None},
              {"function_call": {"name": "ok", "arguments": "}"}}):
        asm.feed(chunk({"delta": d}))
    assert asm.messages({})[0] == {"role": "assistant", "content": None,
                                   "function_call": {"name": "book", "arguments": "{}"}}
    asm = ReplyAssembler()
    asm.feed(chunk({"delta": {"function_call": "odd"}}))
    assert asm.messages({})[0] == {"role": "assistant", "content": None, "function_call": "odd"}
    asm = ReplyAssembler()
    asm.feed(chunk({"delta": {"function_call": {"name": "a", "id": "ignored", "type": "t"}}}))
    assert asm.messages({})[0]["function_call"] == {"name": "a", "arguments": ""}


def test_choices_are_kept_apart_and_finish_each() -> None:
    asm = ReplyAssembler()
    assert not asm.finished
    asm.feed(chunk({"index": 1, "delta": {"content": "b"}}, {"index": 0, "delta": {"content": "a"}}))
    assert not asm.finished
    asm.feed(chunk({"index": 1, "delta": {}, "finish_reason": "stop"}))
    assert not asm.finished and asm.finish_reason(1) == "stop" and asm.finish_reason(0) is None
    assert asm.finish_reason(5) is None
    asm.feed(chunk({"index": 0, "delta": {}, "finish_reason": ""}))
    assert not asm.finished
    asm.feed(chunk({"index": 0, "delta": {}, "finish_reason": 7}))
    assert asm.finished and asm.finish_reason(0) == "7"
    assert asm.messages({1: "x"}) == {0: {"role": "assistant", "content": "a"},
                                      1: {"role": "assistant", "content": "xb"}}
    assert list(asm.messages({})) == [0, 1]
    done = ReplyAssembler(done=True)
    assert done.finished
    assert ReplyAssembler().messages({0: "t", 1: "u"}) == {0: {"role": "assistant", "content": "t"}}
    assert ReplyAssembler().messages({}) == {0: {"role": "assistant", "content": None}}


def test_chunks_that_cannot_be_read_are_refused_with_a_reason() -> None:
    asm = ReplyAssembler()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"choices": None}, "a chunk without a choices list"),
        ({}, "a chunk without a choices list"),
        ({"choices": [1]}, "a choice that is not an object"),
        ({"choices": [{"index": MAX_CHOICES}]}, "a choice index that is not an integer from 0 to 127"),
        ({"choices": [{"index": -1}]}, "a choice index that is not an integer from 0 to 127"),
        ({"choices": [{"index": True}]}, "a choice index that is not an integer from 0 to 127"),
        ({"choices": [{"index": "0"}]}, "a choice index that is not an integer from 0 to 127"),
        ({"choices": [{"delta": []}]}, "a delta that is not an object"),
        ({"choices": [{"delta": {"content": 1}}]}, "a delta whose content is not text"),
        ({"choices": [{"delta": {"reasoning": ["x"]}}]}, "a delta whose reasoning is not text"),
        ({"choices": [{"delta": {"tool_calls": ["x"]}}]}, "a tool-call delta that is not an object"),
        ({"choices": [{"delta": {"tool_calls": [{"index": 1024}]}}]}, "a tool-call delta without an index"),
        ({"choices": [{"delta": {"tool_calls": [{"index": -1}]}}]}, "a tool-call delta without an index"),
        ({"choices": [{"delta": {"tool_calls": [{"index": False}]}}]}, "a tool-call delta without an index"),
        ({"choices": [{"delta": {"tool_calls": [{"index": None}]}}]}, "a tool-call delta without an index"),
    ]
    for bad, reason in cases:
        assert _error(asm.feed, bad) == reason, bad
    last = {"index": MAX_CHOICES - 1, "delta": {"tool_calls": [{"index": 1023}]}}
    assert asm.feed({"choices": [last]}) == []
    assert list(asm.choices[MAX_CHOICES - 1].calls) == [1023]


def test_the_chunks_written_carry_the_reply_s_id_and_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream_mod.time, "time", lambda: 1234.9)
    fresh = ReplyAssembler()
    assert fresh.chunk({"content": "x"}) == {
        "id": "chatcmpl-guard", "object": "chat.completion.chunk", "created": 1234, "model": "",
        "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}
    asm = ReplyAssembler()
    asm.feed(chunk())
    assert asm.chunk({}, "stop", 2) == {
        "id": "c1", "object": "chat.completion.chunk", "created": 5, "model": "m",
        "choices": [{"index": 2, "delta": {}, "finish_reason": "stop"}]}
    kept = {"role": "assistant", "content": "t",
            "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                           {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}],
            "function_call": {"name": "h", "arguments": "{}"}}
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 5, "model": "m"}
    assert asm.call_chunks(kept, 1) == [
        {**body, "choices": [{"index": 1, "finish_reason": None, "delta": {"tool_calls": [
            {"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}]},
        {**body, "choices": [{"index": 1, "finish_reason": None, "delta": {"tool_calls": [
            {"index": 1, "id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}}]},
        {**body, "choices": [{"index": 1, "finish_reason": None, "delta": {
            "function_call": {"name": "h", "arguments": "{}"}}}]}]
    assert asm.call_chunks({"tool_calls": None, "function_call": "x"}) == []
    assert asm.call_chunks({"function_call": {"name": "h"}})[0]["choices"][0]["index"] == 0


def test_a_null_in_a_delta_skips_that_key_only() -> None:
    """``content: null`` or ``function_call: null`` before other keys of the same delta: those
    keys are still read (a call after a null text is held and judged, not lost)."""
    asm = ReplyAssembler()
    out = asm.feed(chunk({"delta": {"content": None, "tool_calls": [{"index": 0, "function": {"name": "a"}}],
                                    "reasoning": "r"}}))
    assert out == [{**HEAD, "choices": [{"index": 0, "delta": {"reasoning": "r"}, "finish_reason": None}]}]
    out = asm.feed(chunk({"delta": {"function_call": None, "content": "x"}}))
    assert out == [{**HEAD, "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}]
    assert asm.messages({})[0] == {"role": "assistant", "content": "x", "tool_calls": [
        {"id": None, "type": None, "function": {"name": "a", "arguments": ""}}]}
