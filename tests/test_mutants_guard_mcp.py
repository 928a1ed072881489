"""The MCP guard's parts, in-process (``ltlagent.guard.mcp``): how a session follows what the
server answered, how answers and refusals are written, how an answer is read. No server, so that
a mutation run reaches them in milliseconds (issue 31; docs/mutation.md, "guard/proxy.py,
guard/mcp.py, guard/react.py"); the end-to-end behaviour is in ``tests/test_guard_mcp.py``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from ltlagent.errors import UsageError
from ltlagent.guard import mcp
from ltlagent.guard.mcp import McpProxyConfig, McpSession, RpcFailure, result_text
from ltlagent.logic.policy import Policy
from tests.test_mutants_guard import SPEC
from tests.test_mutants_guard_proxy import _Pieces


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy.load(SPEC)


def _json(r: Any) -> Any:
    return json.loads(bytes(r.body))


def test_the_configuration_is_checked_when_made(policy: Policy) -> None:
    assert McpProxyConfig(policy, "http://h:1/mcp").path == "/mcp"
    assert McpProxyConfig(policy, "https://h").path == "/"
    for bad in ("ftp://h/mcp", "h:1/mcp"):
        with pytest.raises(UsageError) as e:
            McpProxyConfig(policy, bad)
        assert str(e.value) == (f"upstream {bad!r}: expected an http:// or https:// URL "
                                "(the MCP endpoint, e.g. http://127.0.0.1:8000/mcp)")
    for kw in ({"timeout": 0}, {"connect_timeout": -1}, {"max_sessions": 0}):
        with pytest.raises(UsageError) as e:
            McpProxyConfig(policy, "http://h/mcp", **kw)  # type: ignore[arg-type]
        assert str(e.value) == "the timeouts must be > 0 and max_sessions ≥ 1"
    McpProxyConfig(policy, "http://h/mcp", timeout=0.1, connect_timeout=0.1, max_sessions=1)


def test_a_session_turns_answers_into_steps_and_listings_into_names(policy: Policy) -> None:
    s = McpSession(policy.cursor())
    s.pending = {("i", "1"): "find_user", ("s", "2"): "book", ("s", "3"): "book", ("i", "4"): "x"}
    s.listing = {("i", "9"), ("s", "9")}
    s.observe([{"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "bob"}]}},
               {"id": "2", "error": {"message": "no seat"}},
               {"id": "3", "error": "plain"},
               {"id": 4, "method": "notifications/x"},  # a request, not an answer
               {"id": True, "result": {}},
               5,
               {"id": 9, "result": {"tools": [{"name": "a"}, {"name": 3}, "b", {"name": "c"}]}},
               {"id": "9", "result": {"tools": "not a list"}}])
    assert s.pending == {("i", "4"): "x"} and s.listing == set()
    assert s.tools == {"a", "c"}
    s.listing = {("i", "10")}
    s.observe({"id": 10, "result": {"tools": [{"name": "d"}]}})
    assert s.tools == {"a", "c", "d"}
    s.listing = {("i", "11")}
    s.observe({"id": 11, "result": [1]})
    assert s.tools == {"a", "c", "d"} and s.listing == set()


def test_a_session_records_each_answer_as_a_tool_step(policy: Policy) -> None:
    got: list[object] = []

    class Recorder:
        def push(self, event: object) -> None:
            got.append((event.kind, event.author, event.text))  # type: ignore[attr-defined]

    s = McpSession(Recorder())  # type: ignore[arg-type]
    s.pending = {("i", "1"): "a", ("s", "2"): "b", ("s", "3"): "c", ("i", "5"): "d"}
    s.observe([{"id": 1, "result": {"content": [{"type": "text", "text": "bob"}]}},
               {"id": "2", "error": {"message": "no seat"}}, {"id": "3", "error": "plain"},
               {"id": 5, "error": {"code": 1}}])
    kind = got[0][0]  # type: ignore[index]
    assert got == [(kind, "tool", "bob"), (kind, "tool", "error: no seat"), (kind, "tool", "error: plain"),
                   (kind, "tool", "error: ")]


def test_result_text_of_each_kind_of_part() -> None:
    assert result_text({"content": [{"type": "text", "text": 1}, {"type": "text", "text": "a"},
                                    "odd", {"type": "resource", "resource": {"uri": "u"}},
                                    {"type": "resource", "resource": "r"},
                                    {"type": "resource_link", "uri": 3},
                                    {"type": "image", "text": "hidden"}]}) == "a\nu"
    assert result_text({"content": [{"type": "resource", "resource": {}}]}) == ""
    assert result_text({"content": "text", "structuredContent": {"b": "é", "a": 1}}) == '{"a": 1, "b": "é"}'
    assert result_text({"structuredContent": None}) == ""
    assert result_text({"structuredContent": 0}) == "0"
    assert result_text(["é"]) == '["é"]'


def test_request_ids_as_keys() -> None:
    assert [mcp._key(x) for x in (3, "3", True, None, 1.0, [1], -2)] == [
        ("i", "3"), ("s", "3"), None, None, None, None, ("i", "-2")]


def test_a_method_a_lenient_server_might_read_as_a_call() -> None:
    for m in ("tools/call", "TOOLS/CALL", "ｔｏｏｌｓ/call", " tools/call\t", "tools/\u200bcall",
              "tools/\x00call"):
        assert mcp._looks_like_call(m), m
    for m in ("tools/list", "tools/calls", "tool/call", "toolscall"):
        assert not mcp._looks_like_call(m), m


def test_the_guard_s_own_answers() -> None:
    r = RpcFailure(413, mcp.INVALID_REQUEST, "too long", rid=7).response()
    assert r.status_code == 413 and _json(r) == {
        "jsonrpc": "2.0", "id": 7, "error": {"code": -32600, "message": "[ltlagent guard] too long"}}
    assert str(RpcFailure(400, mcp.PARSE_ERROR, "m")) == "m"
    assert (mcp.PARSE_ERROR, mcp.INVALID_REQUEST, mcp.METHOD_NOT_FOUND, mcp.INTERNAL_ERROR) == (
        -32700, -32600, -32601, -32603)
    r = asyncio.run(mcp._internal_error(None, KeyError("x")))  # type: ignore[arg-type]
    assert r.status_code == 500 and _json(r) == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32603, "message": "[ltlagent guard] internal error in the guard: KeyError"}}


def test_a_refusal_is_an_error_result() -> None:
    for version in (None, "2025-11-25", "2024-11-05", "2025-03-26", "2025-06-18"):
        r = mcp._refusal("a", "no", version)
        assert r.status_code == 200 and r.headers["x-ltlagent-guard"] == "refused"
        assert _json(r) == {"jsonrpc": "2.0", "id": "a", "result": {
            "content": [{"type": "text", "text": "no"}], "isError": True}}, version
    assert _json(mcp._refusal(1, "no", "2026-01-01"))["result"] == {
        "content": [{"type": "text", "text": "no"}], "isError": True, "resultType": "complete"}


def _resp(status: int, body: bytes, ctype: str = "application/json") -> httpx.Response:
    return httpx.Response(status, content=body, headers={"content-type": ctype})


def test_the_result_of_a_whole_answer_json_or_sse() -> None:
    ok = b'{"jsonrpc": "2.0", "id": "g1", "result": {"tools": []}}'
    assert mcp._result_of(_resp(200, ok), "g1") == {"tools": []}
    assert mcp._result_of(_resp(200, ok), "g2") is None
    assert mcp._result_of(_resp(300, ok), "g1") is None
    assert mcp._result_of(_resp(299, ok), "g1") == {"tools": []}
    assert mcp._result_of(_resp(200, b"[1, " + ok + b"]"), "g1") == {"tools": []}
    assert mcp._result_of(_resp(200, b'{"id": "g1", "result": [1]}'), "g1") is None
    sse = b"id: 0\ndata:\n\ndata: {\"id\": \"x\"}\n\nevent: message\ndata: " + ok + b"\n\n"
    for ctype in ("text/event-stream", "Text/Event-Stream; charset=utf-8", " text/event-stream"):
        assert mcp._result_of(_resp(200, sse, ctype), "g1") == {"tools": []}, ctype
    assert mcp._result_of(_resp(200, sse, "application/json"), "g1") is None
    assert mcp._result_of(_resp(200, b"data: " + b"x" * mcp.MAX_EVENT_BYTES + b"\n\n",
                                "text/event-stream"), "g1") is None
    assert mcp._result_of(_resp(200, b"not json"), "g1") is None
    assert mcp._result_of(_resp(200, b'{"id": "g1", "result": {"a": NaN}}'), "g1") is None
    big = b'{"id": "g1", "result": {"a": "' + b"x" * (mcp.MAX_EVENT_BYTES - 40) + b'"}}'
    big += b" " * (mcp.MAX_EVENT_BYTES - len(big))
    assert mcp._result_of(_resp(200, big), "g1") is not None
    assert mcp._result_of(_resp(200, big + b" "), "g1") is None


def test_upstream_headers_are_added_each_one() -> None:
    from starlette.responses import Response

    r = mcp._headed(Response(b""), [("Set-Cookie", "a=1"), ("set-cookie", "b=2"), ("X-Y", "é")])
    assert [(k, v) for k, v in r.raw_headers if k in (b"set-cookie", b"x-y")] == [
        (b"set-cookie", b"a=1"), (b"set-cookie", b"b=2"), (b"x-y", "é".encode("latin-1"))]


def test_an_answer_is_read_whole_up_to_the_limit(policy: Policy) -> None:
    g = mcp._McpGuard(McpProxyConfig(policy, "http://h/mcp"))

    def read(pieces: list[bytes], then_fail: bool = False) -> bytes:
        return asyncio.run(g._read(httpx.Response(200, stream=_Pieces(pieces, then_fail))))

    assert read([b"ab", b"c"]) == b"abc"
    assert len(read([b"x" * mcp.MAX_EVENT_BYTES])) == mcp.MAX_EVENT_BYTES
    with pytest.raises(RpcFailure) as e:
        read([b"x" * mcp.MAX_EVENT_BYTES, b"y"])
    assert (e.value.status, e.value.code, e.value.message) == (
        502, -32603, "the MCP server answered over 16777216 bytes")
    with pytest.raises(RpcFailure) as e:
        read([b"x"], then_fail=True)
    assert (e.value.status, e.value.code, e.value.message) == (
        502, -32603, "the MCP server's answer broke off: ReadError")


def test_an_event_is_written_back_as_the_guard_read_it(policy: Policy) -> None:
    from ltlagent.guard.wire import SseEvent

    g = mcp._McpGuard(McpProxyConfig(policy, "http://h/mcp"))
    s = McpSession(policy.cursor())
    s.listing = {("i", "1")}
    assert g._event(None, s) == b":\n\n"
    assert g._event(SseEvent(id="5"), s) == b"id: 5\n\n"
    assert g._event(SseEvent(data=["", ""], id="5"), s) == b"id: 5\ndata: \ndata: \n\n"
    listed = SseEvent(data=["{", '"id": 1, "result": {"tools": [{"name": "t"}]}}'], event="message")
    assert g._event(listed, s) \
        == b'event: message\ndata: {"id":1,"result":{"tools":[{"name":"t"}]}}\n\n'
    assert s.tools == {"t"}
    assert g._event(SseEvent(data=["{bad"]), s) == b""
    with pytest.raises(ValueError):  # read, but not written back as UTF-8: ``_events`` ends the stream
        g._event(SseEvent(data=['"\\ud800"']), None)
    assert g._event(SseEvent(data=["[1, 2]"]), None) == b"data: [1,2]\n\n"


def _request(headers: dict[str, str], method: str = "POST") -> Any:
    from starlette.requests import Request

    return Request({"type": "http", "method": method, "path": "/mcp", "query_string": b"",
                    "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]})


def test_the_guard_lists_the_server_s_tools_itself_page_by_page(policy: Policy) -> None:
    """What the guard sends for its own ``tools/list`` (the client's headers but the body's type
    and what it accepts; a minted session id not passed on), and how it follows the pages."""
    sent: list[tuple[dict[str, str], Any]] = []
    pages: dict[object, dict[str, Any]] = {
        None: {"tools": [{"name": "a"}, {"name": 1}, "x"], "nextCursor": "p2"},
        "p2": {"tools": [{"name": "b"}], "nextCursor": ""}}

    def upstream(req: httpx.Request) -> httpx.Response:
        body = json.loads(req.content)
        sent.append((dict(req.headers), body))
        result = pages[body["params"].get("cursor")]
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": result})

    g = mcp._McpGuard(McpProxyConfig(policy, "http://h/mcp"))
    req = _request({"Accept": "text/plain", "Content-Type": "text/plain", "Authorization": "k",
                    "Mcp-Session-Id": "s1", "Accept-Encoding": "gzip"})

    async def listed(session: McpSession) -> set[str] | None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as client:
            g.client = client
            return await g._list_tools(req, session)

    assert asyncio.run(listed(McpSession(policy.cursor()))) == {"a", "b"}
    (h1, b1), (_, b2) = sent
    assert h1["accept"] == "application/json, text/event-stream" and h1["content-type"] == "application/json"
    assert h1["authorization"] == "k" and h1["mcp-session-id"] == "s1" and h1["accept-encoding"] == "identity"
    assert b1["method"] == "tools/list" and b1["params"] == {} and b2["params"] == {"cursor": "p2"}
    assert b1["jsonrpc"] == "2.0" and b1["id"].startswith("ltlagent-guard-") and b1["id"] != b2["id"]
    sent.clear()
    assert asyncio.run(listed(McpSession(policy.cursor(), minted=True))) == {"a", "b"}
    assert "mcp-session-id" not in sent[0][0]
    # a listing that never ends is given up after MAX_PAGES pages; one without tools is no listing
    pages["p2"] = {"tools": [], "nextCursor": "p2"}
    sent.clear()
    assert asyncio.run(listed(McpSession(policy.cursor()))) is None and len(sent) == mcp.MAX_PAGES
    pages[None] = {"tools": "none"}
    assert asyncio.run(listed(McpSession(policy.cursor()))) is None
    pages[None] = {"tools": [{"name": "c"}], "nextCursor": 5}
    assert asyncio.run(listed(McpSession(policy.cursor()))) == {"c"}
    g.client = None
    assert asyncio.run(g._list_tools(req, McpSession(policy.cursor()))) is None


def test_calls_the_guard_cannot_judge_are_refused_saying_why(policy: Policy) -> None:
    g = mcp._McpGuard(McpProxyConfig(policy, "http://h/mcp"))
    g.sessions["s1"] = McpSession(policy.cursor(), tools={"find_user"})

    def call(msg: dict[str, Any], headers: dict[str, str] | None = None) -> str:
        r = asyncio.run(g._call(_request({"Mcp-Session-Id": "s1"} if headers is None else headers), msg))
        body = _json(r)
        assert r.status_code == 200 and body["id"] == msg.get("id") and body["result"]["isError"] is True
        return str(body["result"]["content"][0]["text"])

    ok = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "find_user", "arguments": {}}}
    with pytest.raises(RpcFailure) as e:
        asyncio.run(g._call(_request({}), {**ok, "id": None}))
    assert (e.value.status, e.value.code, e.value.message) == (
        400, -32600, "tools/call was not run: it has no valid id (a string or an integer)")
    mark = "[ltlagent guard]"
    assert call({**ok, "method": "tools/Call"}) == (
        f"{mark} find_user was not run: the method must be exactly 'tools/call' in JSON-RPC 2.0, "
        "not 'tools/Call'")
    assert call({**ok, "jsonrpc": "1.0"}).endswith("in JSON-RPC 2.0, not 'tools/call'")
    assert call({**ok, "params": ["x"]}) == f"{mark} the call was not run: its params are not an object"
    assert call({**ok, "params": {"name": "find_user", "task": {}, "b": 1}}) == \
        f"{mark} find_user was not run: the guard cannot judge params 'b', 'task'"
    assert call({**ok, "params": {"name": "a b"}}) == \
        f"{mark} the call was not run: the tool name 'a b' is not 1-128 of A-Z a-z 0-9 _ - ."
    assert call({**ok, "params": {"name": "find_user", "arguments": [1]}}) == \
        f"{mark} find_user was not run: its arguments are not a JSON object"
    assert call(ok, {"Mcp-Session-Id": "other"}) == (
        f"{mark} find_user was not run: no MCP session the guard knows (Mcp-Session-Id 'other' did not "
        "begin through the guard): the policy follows a session from its initialize")
    assert call(ok, {}) == (
        f"{mark} find_user was not run: no MCP session the guard knows (Mcp-Session-Id missing): "
        "the policy follows a session from its initialize")
    assert call({**ok, "params": {"name": "book"}}) == \
        f"{mark} book was not run: the guard could not list the server's tools to check the name"
    g.sessions["s1"].pending[("i", "1")] = "find_user"
    assert call(ok) == f"{mark} find_user was not run: a call with id 1 is still running"


def test_a_forwarded_call_that_cannot_reach_the_server_is_an_error_and_not_pending(policy: Policy) -> None:
    g = mcp._McpGuard(McpProxyConfig(policy, "http://h/mcp"))
    seen: list[httpx.Request] = []
    failure: list[Exception] = [httpx.ConnectError("refused")]

    def upstream(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        raise failure[0]

    async def forward(body: object, session: McpSession | None, call: Any, headers: dict[str, str]) -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as client:
            g.client = client
            await g._forward(_request(headers), body, session, call)

    s = McpSession(policy.cursor(), minted=True)
    s.pending[("s", "c7")] = "find_user"
    s.pending[("s", "c8")] = "find_user"
    body = {"jsonrpc": "2.0", "id": "c7", "method": "tools/call", "params": {"name": "find_user"}}
    with pytest.raises(RpcFailure) as e:
        asyncio.run(forward(body, s, ("s", "c7"), {"Mcp-Session-Id": "ltlagent-x", "Content-Type": "text/x",
                                                     "Accept-Encoding": "gzip", "X-Keep": "1"}))
    assert (e.value.status, e.value.code, e.value.rid, e.value.message) == (
        502, -32603, "c7", "the MCP server could not be reached: ConnectError: refused")
    assert s.pending == {("s", "c8"): "find_user"}  # the failed call is no longer awaited
    sent = seen[-1].headers
    assert sent["accept-encoding"] == "identity" and sent["content-type"] == "application/json"
    assert sent["x-keep"] == "1" and "mcp-session-id" not in sent  # a minted id is the guard's own
    assert json.loads(seen[-1].content) == body
    failure[0] = httpx.ReadTimeout("slow")
    with pytest.raises(RpcFailure) as e:
        asyncio.run(forward([body], None, ("s", "c8"), {"Mcp-Session-Id": "s2"}))
    assert (e.value.status, e.value.rid) == (504, None)
    assert seen[-1].headers["mcp-session-id"] == "s2"
    g.client = None
    with pytest.raises(RpcFailure) as e:
        asyncio.run(g._forward(_request({}), None, None))
    assert (e.value.status, e.value.message) == (503, "the proxy is not running")


def _post(g: mcp._McpGuard, payload: bytes, upstream: Any, headers: dict[str, str]) -> Any:
    from starlette.requests import Request

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": payload, "more_body": False}

    req = Request({"type": "http", "method": "POST", "path": "/mcp", "query_string": b"",
                   "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}, receive)

    async def run() -> Any:
        async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as client:
            g.client = client
            try:
                return await g._post(req)
            except RpcFailure as e:
                return e

    return asyncio.run(run())


def test_a_listing_through_the_guard_names_the_session_s_tools(policy: Policy) -> None:
    g = mcp._McpGuard(McpProxyConfig(policy, "http://h/mcp"))
    g.sessions["s1"] = s = McpSession(policy.cursor())
    answer = {"jsonrpc": "2.0", "id": 4, "result": {"tools": [{"name": "find_user"}]}}
    r = _post(g, b'{"jsonrpc": "2.0", "id": 4, "method": "tools/list"}',
              lambda req: httpx.Response(200, json=answer), {"Mcp-Session-Id": "s1"})
    assert r.status_code == 200 and json.loads(bytes(r.body)) == answer and s.tools == {"find_user"}
    # an answer that is not JSON is passed on as it came, with its status and headers
    r = _post(g, b'{"jsonrpc": "2.0", "id": 5, "method": "tools/list"}',
              lambda req: httpx.Response(202, content=b"{oops", headers={"x-up": "1"}),
              {"Mcp-Session-Id": "s1"})
    assert (r.status_code, bytes(r.body), r.headers["x-up"]) == (202, b"{oops", "1")
    # the answer to a call that is not JSON: an error, not a pass
    s.tools = {"find_user"}
    call = {"jsonrpc": "2.0", "id": 6, "method": "tools/call",
            "params": {"name": "find_user", "arguments": {"email": "bob@example.com"}}}
    e = _post(g, json.dumps(call).encode(), lambda req: httpx.Response(200, content=b"{oops"),
              {"Mcp-Session-Id": "s1"})
    assert isinstance(e, RpcFailure) and (e.status, e.code, e.rid, e.message) == (
        502, -32603, 6, "the MCP server's answer to the call is not JSON the guard can read")


def test_a_request_body_at_the_limit_is_read_and_one_byte_more_is_not(policy: Policy) -> None:
    g = mcp._McpGuard(McpProxyConfig(policy, "http://h/mcp"))
    at = b'"' + b"x" * (mcp.MAX_BODY_BYTES - 2) + b'"'
    r = _post(g, at, lambda req: httpx.Response(200, json={}), {})
    assert isinstance(r, RpcFailure) and r.status == 400  # read whole: a string is no JSON-RPC message
    e = _post(g, at + b" ", lambda req: httpx.Response(200, json={}), {})
    assert (e.status, e.code, e.message) == (413, -32600, f"request body over {mcp.MAX_BODY_BYTES} bytes")
