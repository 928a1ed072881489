"""The proxy's errors, in-process (``ltlagent.guard.proxy``): what a client reads when the
upstream fails, answers an error, or the guard itself fails. No server: the helpers that make the
API's JSON errors are called directly, so that a mutation run reaches them in milliseconds (issue
31; docs/mutation.md, "guard/proxy.py, guard/mcp.py, guard/react.py"). The end-to-end behaviour is
in ``tests/test_guard_proxy.py``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from ltlagent.guard import proxy
from ltlagent.guard.proxy import ApiError


class _Pieces(httpx.AsyncByteStream):
    """A response body that yields ``pieces``, then raises (a connection that breaks)."""

    def __init__(self, pieces: list[bytes], then_fail: bool = False) -> None:
        self.pieces, self.then_fail = pieces, then_fail

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for p in self.pieces:
            yield p
        if self.then_fail:
            raise httpx.ReadError("broken")


def _status_error(status: int, pieces: list[bytes], then_fail: bool = False) -> dict[str, Any]:
    resp = httpx.Response(status, stream=_Pieces(pieces, then_fail))
    err = asyncio.run(proxy._upstream_status_error(resp))
    return {"status": err.status, **err.payload()["error"]}  # type: ignore[dict-item]


def test_an_upstream_4xx_error_is_the_client_s_to_see() -> None:
    body = {"error": {"message": "bad model", "type": "invalid_request_error", "code": "model_not_found",
                      "param": "model"}}
    assert _status_error(404, [json.dumps(body).encode()]) == {
        "status": 404, "message": "bad model", "type": "invalid_request_error", "param": "model",
        "code": "model_not_found"}
    # no message, no type, a code and a param that are not strings
    assert _status_error(400, [b'{"error": {"code": 7, "param": ["x"]}}']) == {
        "status": 400, "message": "", "type": "invalid_request_error", "param": None, "code": None}
    assert _status_error(429, [b'{"error": {"message": 3, "type": "rate_limit"}}']) == {
        "status": 429, "message": "3", "type": "rate_limit", "param": None, "code": None}


def test_any_other_upstream_error_is_a_502_with_its_text() -> None:
    assert _status_error(500, [b'  {"error": {"message": "boom"}}\n']) == {
        "status": 502, "message": 'the upstream answered 500: {"error": {"message": "boom"}}',
        "type": "upstream_error", "param": None, "code": "upstream_status"}
    assert _status_error(400, [b"not json \xff"])["message"] == "the upstream answered 400: not json \ufffd"
    assert _status_error(400, [b'{"error": "text"}'])["status"] == 502
    assert _status_error(399, [b'{"error": {"message": "m"}}'])["status"] == 502
    long = _status_error(503, [b"x" * 3000, b"y" * 3000])
    assert long["message"] == "the upstream answered 503: " + "x" * 500


def test_only_the_first_4000_bytes_of_an_error_are_read() -> None:
    """An error body is read up to 4000 bytes and no further (the rest may never come)."""
    body = json.dumps({"error": {"message": "m" * 3900}}).encode()
    body += b" " * (4000 - len(body))
    assert _status_error(400, [body], then_fail=True)["message"] == "m" * 3900
    got = _status_error(400, [body + b"  "], then_fail=True)
    assert got["status"] == 400 and got["message"] == "m" * 3900
    got = _status_error(400, [body[:2000], body[2000:] + b"tail that is cut"], then_fail=True)
    assert got["status"] == 400
    assert _status_error(500, [b"z" * 4001])["message"] == "the upstream answered 500: " + "z" * 500


def test_transport_failures_say_what_failed() -> None:
    e = proxy._upstream_failure(httpx.ReadTimeout("slow"))
    assert (e.status, e.message, e.kind, e.code) == (
        504, "the upstream did not answer in time (ReadTimeout)", "upstream_error", "upstream_timeout")
    e = proxy._upstream_failure(asyncio.TimeoutError())
    assert (e.status, e.code) == (504, "upstream_timeout")
    e = proxy._upstream_failure(httpx.ConnectError("refused"))
    assert (e.status, e.message, e.kind, e.code) == (
        502, "the upstream could not be reached: ConnectError: refused", "upstream_error",
        "upstream_unreachable")


def test_a_reply_that_cannot_be_judged_is_a_502() -> None:
    e = proxy._bad_reply("no choices")
    assert e.payload() == {"error": {"message": "the upstream reply cannot be judged: no choices",
                                     "type": "upstream_error", "param": None, "code": "upstream_bad_reply"}}
    assert e.status == 502 and str(e) == "the upstream reply cannot be judged: no choices"


def test_an_api_error_is_the_api_s_json() -> None:
    e = ApiError(413, "too long")
    assert e.payload() == {"error": {"message": "too long", "type": "invalid_request_error",
                                     "param": None, "code": None}}
    r = ApiError(400, "m", "k", "c", "p").response()
    assert r.status_code == 400 and json.loads(bytes(r.body)) == {
        "error": {"message": "m", "type": "k", "param": "p", "code": "c"}}


def test_a_bug_in_the_guard_is_a_500_in_the_api_s_json() -> None:
    r = asyncio.run(proxy._internal_error(None, KeyError("x")))  # type: ignore[arg-type]
    assert r.status_code == 500 and json.loads(bytes(r.body)) == {"error": {
        "message": "internal error in the guard: KeyError", "type": "server_error", "param": None,
        "code": "internal_error"}}


def test_the_proxy_outside_its_lifespan_says_it_is_not_running() -> None:
    from ltlagent.logic.policy import Policy
    from tests.test_mutants_guard import SPEC

    g = proxy._Guarded(proxy.ProxyConfig(Policy.load(SPEC), "http://127.0.0.1:1/v1"))
    with pytest.raises(ApiError) as info:
        g._client()
    assert (info.value.status, info.value.message, info.value.kind) == (
        503, "the proxy is not running", "server_error")


def test_refused_content_keeps_the_text_whole() -> None:
    from ltlagent.guard.screen import refusal_text

    assert proxy._refused_content("said ", []) == "said \n\n" + refusal_text([])
    assert proxy._refused_content(" \n", []) == " \n" + refusal_text([])
    assert proxy._refused_content("", []) == refusal_text([])


def test_a_wrong_path_or_method_is_the_api_s_json() -> None:
    from starlette.testclient import TestClient

    from ltlagent.logic.policy import Policy
    from tests.test_mutants_guard import SPEC

    client = TestClient(proxy.build_app(proxy.ProxyConfig(Policy.load(SPEC), "http://127.0.0.1:1/v1")))
    r = client.get("/v1/nothing")
    assert r.status_code == 404 and r.json() == {"error": {
        "message": "GET /v1/nothing: Not Found", "type": "not_found_error", "param": None, "code": None}}
    r = client.delete("/v1/models")
    assert r.status_code == 405 and r.json() == {"error": {
        "message": "DELETE /v1/models: Method Not Allowed", "type": "invalid_request_error",
        "param": None, "code": None}}
    r = asyncio.run(proxy._http_error(SimpleNamespace(method="PUT", url=SimpleNamespace(path="/x")),  # type: ignore[arg-type]
                                      ValueError("v")))
    assert r.status_code == 500 and json.loads(bytes(r.body)) == {"error": {
        "message": "PUT /x: internal error", "type": "invalid_request_error", "param": None, "code": None}}


def test_the_configuration_is_checked_when_made() -> None:
    from ltlagent.errors import UsageError
    from ltlagent.logic.policy import Policy
    from tests.test_mutants_guard import SPEC

    policy = Policy.load(SPEC)
    c = proxy.ProxyConfig(policy, "https://h/v1")
    assert (c.on_forbidden, c.max_retries, c.timeout, c.connect_timeout, c.stream_timeout,
            c.max_body_bytes) == ("refuse", 2, 60.0, 5.0, 600.0, 32 * 1024 * 1024)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"on_forbidden": "drop"}, "on_forbidden must be one of refuse, reask, not 'drop'"),
        ({"max_retries": -1}, "max_retries must be ≥ 0 and the timeouts > 0"),
        ({"timeout": 0}, "max_retries must be ≥ 0 and the timeouts > 0"),
        ({"connect_timeout": 0}, "max_retries must be ≥ 0 and the timeouts > 0"),
        ({"stream_timeout": -1}, "max_retries must be ≥ 0 and the timeouts > 0"),
        ({"max_body_bytes": 0}, "max_body_bytes must be > 0"),
        ({"upstream": "ftp://h/v1"}, "upstream 'ftp://h/v1': expected an http:// or https:// URL "
                                     "(the base URL, e.g. http://127.0.0.1:8000/v1)"),
    ]
    for kw, message in cases:
        with pytest.raises(UsageError) as e:
            proxy.ProxyConfig(policy, **{"upstream": "http://h/v1", **kw})
        assert str(e.value) == message, kw
    proxy.ProxyConfig(policy, "http://h/v1", "reask", 0, 0.1, 0.1, 0.1, 1)


def test_models_are_passed_through_with_their_type() -> None:
    from starlette.requests import Request

    from ltlagent.logic.policy import Policy
    from tests.test_mutants_guard import SPEC

    answers = [httpx.Response(200, content=b"m", headers={"content-type": "application/x-models"}),
               httpx.Response(200, content=b'{"data": []}'),
               httpx.Response(401, json={"error": {"message": "no key", "type": "auth"}})]
    seen: list[httpx.Request] = []

    def upstream(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return answers[len(seen) - 1]

    g = proxy._Guarded(proxy.ProxyConfig(Policy.load(SPEC), "http://h/v1"))
    req = Request({"type": "http", "method": "GET", "path": "/v1/models", "query_string": b"",
                   "headers": [(b"authorization", b"Bearer k"), (b"x-other", b"no")]})

    async def models() -> list[Any]:
        async with httpx.AsyncClient(base_url="http://h/v1/",
                                     transport=httpx.MockTransport(upstream)) as client:
            g.client = client
            return [await g.models(req) for _ in answers]

    first, second, third = asyncio.run(models())
    assert (first.status_code, first.body) == (200, b"m")
    assert first.headers["content-type"] == "application/x-models"
    assert second.headers["content-type"] == "application/json" and second.body == b'{"data": []}'
    assert third.status_code == 401 and json.loads(bytes(third.body))["error"]["message"] == "no key"
    assert str(seen[0].url) == "http://h/v1/models" and seen[0].headers["authorization"] == "Bearer k"
    assert "x-other" not in seen[0].headers


def _streamed(on_forbidden: str, replies: list[list[Any]]) -> tuple[list[dict[str, Any]],
                                                                                  list[httpx.Request]]:
    """A streamed request through the proxy in-process (the upstream a mock answering ``replies``,
    one list of chunks per request): the chunks the client reads and the requests sent upstream."""
    from starlette.requests import Request

    from ltlagent.logic.policy import Policy
    from tests.test_guard_shapes import HISTORY, TOOLS
    from tests.test_mutants_guard import SPEC

    sent: list[httpx.Request] = []
    heads: list[dict[str, str]] = []

    def upstream(req: httpx.Request) -> httpx.Response:
        sent.append(req)
        chunks = replies[len(sent) - 1]
        body = b"".join(b"data: " + (c if isinstance(c, bytes) else json.dumps(c).encode()) + b"\n\n"
                        for c in chunks) + b"data: [DONE]\n\n"
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    g = proxy._Guarded(proxy.ProxyConfig(Policy.load(SPEC), "http://h/v1", on_forbidden, max_retries=1))
    payload = json.dumps({"model": "m", "stream": True, "messages": HISTORY, "tools": TOOLS}).encode()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": payload, "more_body": False}

    req = Request({"type": "http", "method": "POST", "path": "/v1/chat/completions", "query_string": b"",
                   "headers": [(b"authorization", b"Bearer k"), (b"content-type", b"application/json")]},
                  receive)

    async def run() -> list[dict[str, Any]]:
        async with httpx.AsyncClient(base_url="http://h/v1/", transport=httpx.MockTransport(upstream)) as c:
            g.client = c
            resp = await g.chat_completions(req)
            heads.append(dict(resp.headers))
            raw = b"".join([x if isinstance(x, bytes) else x.encode() async for x in resp.body_iterator])
        return [json.loads(e[6:]) for e in raw.decode().split("\n\n") if e.startswith("data: {")]

    chunks = asyncio.run(run())
    assert heads[0]["content-type"].startswith("text/event-stream")
    assert heads[0]["cache-control"] == "no-cache" and heads[0]["x-accel-buffering"] == "no"
    return chunks, sent


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "u1", "object": "chat.completion.chunk", "created": 9, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


BOOK_ARGS = '{"user_id": "bob", "flight": "LH123"}'
BOOK_CALL = {"tool_calls": [{"index": 0, "id": "b1", "type": "function",
                             "function": {"name": "book", "arguments": BOOK_ARGS}}]}


def test_a_streamed_reask_sends_the_client_s_headers_and_says_what_it_refused() -> None:
    chunks, sent = _streamed("reask", [[_chunk({"role": "assistant"}), _chunk(BOOK_CALL, "tool_calls")],
                                       [_chunk({"content": "Shall I book it?"}, "stop")]])
    assert len(sent) == 2 and all(r.headers["authorization"] == "Bearer k" for r in sent)
    end = chunks[-1]
    assert end["choices"] == [{"index": 0, "delta": {}, "finish_reason": "stop"}]
    assert end["ltlagent"]["attempts"] == 2 and [r["tool"] for r in end["ltlagent"]["refused"]] == ["book"]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == \
        "Shall I book it?"


def test_a_streamed_refusal_ends_with_the_reason_it_stopped() -> None:
    chunks, _ = _streamed("refuse", [[_chunk({"content": "Booking."}), _chunk(BOOK_CALL, "tool_calls")]])
    end = chunks[-1]
    assert end["choices"][0]["finish_reason"] == "stop" and end["choices"][0]["index"] == 0
    assert end["ltlagent"]["attempts"] == 1 and [r["tool"] for r in end["ltlagent"]["refused"]] == ["book"]
    allowed, _ = _streamed("refuse", [[_chunk({"content": "Hi."}, "stop")]])
    assert allowed[-1]["choices"] == [{"index": 0, "delta": {}, "finish_reason": "stop"}]
    assert "ltlagent" not in allowed[-1]


def test_a_stream_that_fails_midway_ends_with_the_error() -> None:
    def error(message: str, code: str = "upstream_bad_reply") -> dict[str, Any]:
        return {"error": {"message": message, "type": "upstream_error", "param": None, "code": code}}

    chunks, _ = _streamed("refuse", [[_chunk({"content": "a"}), {"error": {"message": "overloaded"}}]])
    assert chunks[-1] == error("the upstream failed mid-stream: overloaded", "upstream_stream_error")
    chunks, _ = _streamed("refuse", [[_chunk({"content": "a"}), {"error": "plain"}]])
    assert chunks[-1] == error("the upstream failed mid-stream: plain", "upstream_stream_error")
    chunks, _ = _streamed("refuse", [[b"[1]"]])
    assert chunks[-1] == error("the upstream reply cannot be judged: an event that is not an object")
    chunks, _ = _streamed("refuse", [[b'{"a": "\xff"}']])
    assert chunks[-1] == error("the upstream reply cannot be judged: 'utf-8' codec can't decode byte 0xff "
                               "in position 7: invalid start byte")


def test_done_completes_a_stream_whose_choices_gave_no_finish_reason() -> None:
    chunks, _ = _streamed("refuse", [[_chunk({"content": "Hi."})]])
    assert [c["choices"][0]["delta"].get("content") for c in chunks] == ["Hi.", None]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and "error" not in chunks[-1]


def test_a_plain_reply_that_keeps_an_allowed_call_still_finishes_with_tool_calls() -> None:
    from starlette.requests import Request

    from ltlagent.logic.policy import Policy
    from tests.test_guard_shapes import HISTORY, TOOLS
    from tests.test_mutants_guard import SPEC

    calls = [{"id": "f1", "type": "function", "function": {"name": "find_user",
                                                           "arguments": '{"email": "a@b.c"}'}},
             {"id": "b1", "type": "function", "function": {"name": "book", "arguments": BOOK_ARGS}}]
    reply = {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [
        {"index": 0, "finish_reason": "tool_calls",
         "message": {"role": "assistant", "content": None, "tool_calls": calls}}]}
    g = proxy._Guarded(proxy.ProxyConfig(Policy.load(SPEC), "http://h/v1"))
    payload = json.dumps({"model": "m", "messages": HISTORY, "tools": TOOLS}).encode()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": payload, "more_body": False}

    req = Request({"type": "http", "method": "POST", "path": "/v1/chat/completions", "query_string": b"",
                   "headers": [(b"authorization", b"Bearer k")]}, receive)

    async def run() -> Any:
        upstream = httpx.MockTransport(lambda r: httpx.Response(200, json=reply))
        async with httpx.AsyncClient(base_url="http://h/v1/", transport=upstream) as c:
            g.client = c
            return await g.chat_completions(req)

    r = asyncio.run(run())
    body = json.loads(bytes(r.body))
    choice = body["choices"][0]
    assert r.headers["x-ltlagent-guard"] == "refused" and choice["finish_reason"] == "tool_calls"
    assert [c["function"]["name"] for c in choice["message"]["tool_calls"]] == ["find_user"]
    assert [x["tool"] for x in body["ltlagent"]["refused"]] == ["book"] and body["ltlagent"]["attempts"] == 1


def test_a_request_the_proxy_cannot_read_is_a_400_saying_why() -> None:
    from starlette.requests import Request

    from ltlagent.logic.policy import Policy
    from tests.test_mutants_guard import SPEC

    g = proxy._Guarded(proxy.ProxyConfig(Policy.load(SPEC), "http://h/v1"))

    def read(payload: bytes) -> ApiError:
        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": payload, "more_body": False}
        req = Request({"type": "http", "method": "POST", "path": "/v1/chat/completions",
                       "query_string": b"", "headers": []}, receive)
        with pytest.raises(ApiError) as e:
            asyncio.run(g._read(req))
        return e.value

    for bad in (b'{"messages": []}', b'{"messages": {"role": "user"}}', b"{}"):
        e = read(bad)
        assert (e.status, e.message, e.param, e.code) == (
            400, "'messages' must be a non-empty list of messages", "messages", "invalid_messages")
    e = read(b'{"messages": [{"role": "user", "content": "hi"}, {"role": 5}]}')
    assert (e.status, e.param, e.code) == (400, "messages[1]", "malformed_message")
    assert e.message.startswith("messages[1]: ")
