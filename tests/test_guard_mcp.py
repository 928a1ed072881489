"""The MCP guard (``ltlagent guard --mcp``, issue 29) between the official ``mcp`` SDK's client and
a real ``MCPServer`` (the SDK's server: tools ``lookup`` and ``book``), all on 127.0.0.1: an allowed
call reaches the server, a forbidden one never does (the server's own record of what ran and of
every message it received), the refusal is a tool result with ``isError`` and the rule; results
are read (from SSE, from JSON answers, from a resumed GET stream) so rules about them apply;
sessions are independent, end with ``DELETE``, are minted for a server without them, and ten
concurrent calls of one session cannot race past the judge; and from the attacker's side, every
shape of call the proxy cannot judge — batches, malformed ids, methods, names (and names the server
does not list), arguments, duplicate keys, ``NaN``, deep nesting, an endless chunked body, no
session, the stateless 2026 revision — is refused without reaching the server. README's MCP
command and client run as written (ports changed)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("mcp")

from mcp.client import Client  # noqa: E402
from mcp.server.mcpserver import Context, MCPServer  # noqa: E402
from mcp.server.streamable_http import EventMessage, EventStore  # noqa: E402

from ltlagent import parse_spec  # noqa: E402
from ltlagent.guard.mcp import MAX_BODY_BYTES, McpProxyConfig, build_mcp_app, result_text  # noqa: E402
from ltlagent.guard.screen import REFUSAL_MARK  # noqa: E402
from ltlagent.guard.wire import MAX_DEPTH, SseReader, strict_json  # noqa: E402
from ltlagent.logic.policy import Policy  # noqa: E402
from tests.standin import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

#: Book only a flight a lookup said was available, after a lookup, once per session.
SPEC = r"""
(define mcp-bookings
 (:states
   (Lookup (:call "lookup"))
   (Book (:call "book"))
   (Call (:call))
   (Available (:from tool) (:contains "available"))
   (Result (:from tool))
   (Text (:from user)))
 (:constraints
   (lookup-before-book (always (implies Book (once Lookup))))
   (book-what-was-available (always (implies Book (once Available))))
   (one-booking (always (implies Book (weak-next (always (not Book))))))))
"""

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy.load(parse_spec(SPEC, "mcp-bookings"))


@dataclass
class Upstream:
    """The MCP server, what its tools ran, and every JSON-RPC message it was sent."""

    url: str
    ran: list[tuple[str, str]] = field(default_factory=list)
    received: list[Any] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)  # the Mcp-Session-Id headers it was sent
    content_types: list[str] = field(default_factory=list)

    def methods(self) -> list[str]:
        out = []
        for body in self.received:
            for m in body if isinstance(body, list) else [body]:
                out.append(m.get("method", "") if isinstance(m, dict) else "?")
        return out


@contextmanager
def serve_app(app: Any) -> Iterator[str]:
    """An ASGI app under uvicorn on a free loopback port, its socket made with ``IPPROTO_TCP`` so
    that asyncio sets ``TCP_NODELAY`` (else each answer waits on a delayed ACK, ~40 ms); yields
    ``http://127.0.0.1:PORT``."""
    import threading

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="on",
                                           timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the app did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


class MemoryEvents(EventStore):
    """Resumability for the server: every event kept, replayed after the one a client names."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []  # (event id, stream id, message)

    async def store_event(self, stream_id: str, message: Any) -> str:
        self.events.append((str(len(self.events)), stream_id, message))
        return self.events[-1][0]

    async def replay_events_after(self, last_event_id: str, send_callback: Any) -> str | None:
        stream = next((st for eid, st, _ in self.events if eid == last_event_id), None)
        for eid, st, message in self.events[int(last_event_id) + 1:]:
            if st == stream and message is not None:
                await send_callback(EventMessage(message, eid))
        return stream


@contextmanager
def mcp_server(json_response: bool = False, stateless: bool = False,
               resumable: bool = False) -> Iterator[Upstream]:
    """An ``MCPServer`` with ``lookup`` and ``book`` on a free loopback port; ``resumable``: with an
    event store, and ``lookup`` closes its SSE stream before it answers (the client resumes it
    with a GET and ``Last-Event-ID``, and the answer comes on that stream)."""
    server = MCPServer("bookings", log_level="WARNING")
    up = Upstream("")

    @server.tool()
    async def lookup(city: str, ctx: Context) -> str:
        """Flights to a city."""
        up.ran.append(("lookup", city))
        if resumable:
            await ctx.close_sse_stream()
            await asyncio.sleep(0.2)
        return "LX12 available" if city == "Bern" else "no flights"

    @server.tool()
    def book(flight: str) -> str:
        """Book a flight."""
        up.ran.append(("book", flight))
        return f"booked {flight}"

    app = server.streamable_http_app(json_response=json_response, stateless_http=stateless,
                                     event_store=MemoryEvents() if resumable else None,
                                     retry_interval=50 if resumable else None)

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        up.sessions.update(v.decode() for k, v in scope["headers"] if k.lower() == b"mcp-session-id")
        up.content_types += [v.decode() for k, v in scope["headers"] if k.lower() == b"content-type"]
        messages, body = [], b""
        while True:
            m = await receive()
            messages.append(m)
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        try:
            up.received.append(json.loads(body))
        except ValueError:
            up.received.append(body)
        replay = iter(messages)

        async def again() -> Any:
            return next(replay, None) or await receive()

        return await app(scope, again, send)

    with serve_app(recording) as base:
        up.url = base + "/mcp"
        yield up


@contextmanager
def guarded(policy: Policy, upstream: Upstream) -> Iterator[str]:
    """The guard in front of ``upstream``; yields the URL the MCP client connects to."""
    with serve_app(build_mcp_app(McpProxyConfig(policy, upstream.url, timeout=10))) as base:
        yield base + "/mcp"


@pytest.fixture(scope="module", params=["sse", "json"])
def upstream(request: pytest.FixtureRequest) -> Iterator[Upstream]:
    with mcp_server(json_response=request.param == "json") as up:
        yield up


@pytest.fixture
def guard(policy: Policy, upstream: Upstream) -> Iterator[str]:
    upstream.ran.clear()
    upstream.received.clear()
    with guarded(policy, upstream) as url:
        yield url


@pytest.fixture(scope="module")
def sse_upstream() -> Iterator[Upstream]:
    """For the attacker's tests: what they send never depends on how results come back."""
    with mcp_server() as up:
        yield up


@pytest.fixture(scope="module")
def sse_guard(policy: Policy, sse_upstream: Upstream) -> Iterator[str]:
    with guarded(policy, sse_upstream) as url:
        yield url


@pytest.fixture
def attacked(sse_guard: str, sse_upstream: Upstream) -> tuple[str, Upstream]:
    """The guard and its server for one test (one guard for all: each test opens its own session)."""
    sse_upstream.ran.clear()
    sse_upstream.received.clear()
    return sse_guard, sse_upstream


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


async def call(client: Client, name: str, **args: str) -> tuple[bool, str]:
    r = await client.call_tool(name, args)
    return bool(r.is_error), "\n".join(getattr(c, "text", "") for c in r.content)


# -- through the SDK -----------------------------------------------------------------------------
def test_allowed_calls_reach_the_server_and_forbidden_ones_never_do(guard: str, upstream: Upstream) -> None:
    async def session() -> list[tuple[bool, str]]:
        async with Client(guard) as client:
            tools = await client.list_tools()
            assert sorted(t.name for t in tools.tools) == ["book", "lookup"]
            return [await call(client, "book", flight="LX12"),      # no lookup yet
                    await call(client, "lookup", city="Oz"),
                    await call(client, "book", flight="LX12"),      # no result said available
                    await call(client, "lookup", city="Bern"),
                    await call(client, "book", flight="LX12"),      # allowed
                    await call(client, "book", flight="LX13")]      # one booking only

    out = run(session())
    assert upstream.ran == [("lookup", "Oz"), ("lookup", "Bern"), ("book", "LX12")]
    assert [e for e, _ in out] == [True, False, True, False, False, True]
    assert out[1][1] == "no flights" and out[3][1] == "LX12 available" and out[4][1] == "booked LX12"
    for k, rule in ((0, "lookup-before-book"), (2, "book-what-was-available"), (5, "one-booking")):
        assert out[k][1].startswith(f"{REFUSAL_MARK} book was not run: forbidden: a Book step now "
                                    "breaks "), out[k]
        assert rule in out[k][1] and "allowed now:" in out[k][1]
    assert upstream.methods().count("tools/call") == 3  # the refused calls never reached it


def test_sessions_are_independent_and_end_with_the_session(guard: str, upstream: Upstream) -> None:
    async def two() -> tuple[list[tuple[bool, str]], list[tuple[bool, str]]]:
        async with Client(guard) as a, Client(guard) as b:
            a_out = [await call(a, "lookup", city="Bern")]
            b_out = [await call(b, "book", flight="LX12")]  # a looked up, b did not
            a_out.append(await call(a, "book", flight="LX12"))
            b_out += [await call(b, "lookup", city="Bern"), await call(b, "book", flight="LX12")]
            return a_out, b_out

    a_out, b_out = run(two())
    assert [e for e, _ in a_out] == [False, False] and [e for e, _ in b_out] == [True, False, False]
    assert upstream.ran == [("lookup", "Bern"), ("book", "LX12"), ("lookup", "Bern"), ("book", "LX12")]


def test_concurrent_calls_of_one_session_cannot_race_past_the_judge(guard: str, upstream: Upstream) -> None:
    """Ten bookings at once after one lookup: one-booking lets exactly one through."""
    async def race() -> list[tuple[bool, str]]:
        async with Client(guard) as client:
            await call(client, "lookup", city="Bern")
            return list(await asyncio.gather(*(call(client, "book", flight=f"LX{k}") for k in range(10))))

    out = run(race())
    assert sum(not e for e, _ in out) == 1 and [r[0] for r in upstream.ran] == ["lookup", "book"]
    assert all("one-booking" in text for e, text in out if e)


def test_a_session_ended_by_delete_leaves_no_cursor_behind(attacked: tuple[str, Upstream]) -> None:
    guard, upstream = attacked
    with httpx.Client(headers=HEADERS, timeout=10) as http:
        sid = _initialize(http, guard)
        assert _call(http, guard, sid, "lookup", {"city": "Bern"})["result"]["isError"] is False
        assert http.delete(guard, headers={"mcp-session-id": sid}).status_code == 200
        after = _call(http, guard, sid, "book", {"flight": "LX12"})
    assert after["result"]["isError"] is True and "did not begin through the guard" in _text(after)
    assert [r[0] for r in upstream.ran] == ["lookup"]


def test_what_is_not_a_tool_call_passes_even_when_every_call_is_forbidden(policy: Policy) -> None:
    rule = "(:constraints\n   (no-calls (always (not (or Lookup Book Call))))"
    dead = Policy.load(parse_spec(SPEC.replace("(:constraints", rule, 1), "no-calls"))
    with mcp_server() as up, guarded(dead, up) as url:
        async def session() -> tuple[list[str], tuple[bool, str]]:
            async with Client(url, mode="legacy") as client:
                names = [t.name for t in (await client.list_tools()).tools]
                return names, await call(client, "lookup", city="Bern")

        names, refused = run(session())
    assert names == ["lookup", "book"] and refused[0] and "no-calls" in refused[1]
    assert up.ran == [] and {"initialize", "notifications/initialized", "tools/list"} <= set(up.methods())


def test_the_stateless_protocol_gets_no_call_through(guard: str, upstream: Upstream) -> None:
    async def modern() -> tuple[list[str], tuple[bool, str]]:
        async with Client(guard, mode="2026-07-28") as client:  # no initialize, no session
            names = [t.name for t in (await client.list_tools()).tools]
            return names, await call(client, "lookup", city="Bern")

    names, out = run(modern())
    assert sorted(names) == ["book", "lookup"]  # not a call: passed through
    assert out[0] and "no MCP session" in out[1] and upstream.ran == []
    assert "tools/call" not in upstream.methods()


def test_a_server_without_sessions_gets_one_minted_by_the_guard(policy: Policy) -> None:
    with mcp_server(stateless=True) as up, guarded(policy, up) as url:
        async def session() -> list[tuple[bool, str]]:
            async with Client(url, mode="legacy") as client:
                return [await call(client, "book", flight="LX12"), await call(client, "lookup", city="Bern"),
                        await call(client, "book", flight="LX12"), await call(client, "book", flight="LX1")]

        out = run(session())
    assert [e for e, _ in out] == [True, False, False, True]
    assert up.ran == [("lookup", "Bern"), ("book", "LX12")]
    assert up.sessions == set()  # the id the guard made up stays between the guard and the client


def test_a_result_that_comes_on_a_resumed_stream_is_read(policy: Policy) -> None:
    """The server cuts the call's stream; the answer arrives on the client's GET with
    Last-Event-ID, and booking (which needs a result that said "available") is allowed after it."""
    with mcp_server(resumable=True) as up, guarded(policy, up) as url:
        async def session() -> list[tuple[bool, str]]:
            async with Client(url, mode="legacy") as client:
                return [await call(client, "lookup", city="Bern"), await call(client, "book", flight="LX12")]

        out = run(session())
    assert out == [(False, "LX12 available"), (False, "booked LX12")]
    assert up.ran == [("lookup", "Bern"), ("book", "LX12")]


# -- raw HTTP: what an attacker may send ---------------------------------------------------------
def _initialize(http: Any, url: str) -> str:
    r = http.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    assert r.status_code == 200, r.text
    sid = r.headers["mcp-session-id"]
    http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
              headers={"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"})
    return str(sid)


def _answer(r: Any) -> Any:
    """The JSON-RPC answer of a POST, from a JSON body or the last event of an SSE stream."""
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        data = [ln[5:].strip() for ln in r.text.splitlines() if ln.startswith("data:") and ln[5:].strip()]
        return json.loads(data[-1])
    return r.json()


def _call(http: Any, url: str, sid: str, name: str, args: Any) -> Any:
    return _answer(http.post(url, json={"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                        "params": {"name": name, "arguments": args}},
                             headers={"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}))


def _text(answer: Any) -> str:
    return str(answer["result"]["content"][0]["text"])


CALL = '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"lookup","arguments":{"city":"Bern"}}}'
#: (what is sent, what the refusal must say): none of these may reach the server.
BAD_CALLS = {
    "batch": ("[" + CALL + "]", "batch"),
    "batch-behind-a-list": ('[{"jsonrpc":"2.0","id":8,"method":"tools/list"},' + CALL + "]", "batch"),
    "no-id": (CALL.replace('"id":9,', ""), "no valid id"),
    "null-id": (CALL.replace('"id":9', '"id":null'), "no valid id"),
    "bool-id": (CALL.replace('"id":9', '"id":true'), "no valid id"),
    "float-id": (CALL.replace('"id":9', '"id":9.5'), "no valid id"),
    "method-case": (CALL.replace("tools/call", "Tools/Call"), "exactly 'tools/call'"),
    "method-space": (CALL.replace("tools/call", "tools/call "), "exactly 'tools/call'"),
    "method-zwsp": (CALL.replace("tools/call", "tools/\\u200bcall"), "exactly 'tools/call'"),
    "no-jsonrpc": (CALL.replace('"jsonrpc":"2.0",', ""), "JSON-RPC 2.0"),
    "params-list": (CALL.replace('{"name":"lookup","arguments":{"city":"Bern"}}', '["lookup"]'),
                    "params are not an object"),
    "no-name": (CALL.replace('"name":"lookup",', ""), "tool name None"),
    "name-space": (CALL.replace('"lookup"', '" lookup"'), "tool name"),
    "name-zwsp": (CALL.replace('"lookup"', '"lookup\\u200b"'), "tool name"),
    "name-cyrillic": (CALL.replace('"lookup"', '"l\\u043eokup"'), "tool name"),
    "name-newline": (CALL.replace('"lookup"', '"lookup\\n"'), "tool name"),
    "name-case": (CALL.replace('"lookup"', '"Lookup"'), "did not list a tool named 'Lookup'"),
    "name-number": (CALL.replace('"lookup"', "7"), "tool name 7"),
    "arguments-string": (CALL.replace('{"city":"Bern"}', '"{\\"city\\":\\"Bern\\"}"'),
                         "arguments are not a JSON object"),
    "arguments-list": (CALL.replace('{"city":"Bern"}', '["Bern"]'), "arguments are not a JSON object"),
    "task": (CALL.replace('"name":"lookup"', '"task":{"ttl":1000},"name":"lookup"'), "'task'"),
    "duplicate-name": (CALL.replace('"name":"lookup"', '"name":"lookup","name":"book"'), "duplicate key"),
    "duplicate-params": (CALL.replace('"params"', '"params":{},"params"'), "duplicate key"),
    "nan": (CALL.replace('"Bern"', "NaN"), "NaN"),
    "infinity": (CALL.replace('"Bern"', "-Infinity"), "Infinity"),
    "deep": (CALL.replace('"Bern"', "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)), "nested deeper"),
    "deeper": (CALL.replace('"Bern"', "[" * 100_000 + "]" * 100_000), "nested deeper"),
    "not-json": (CALL[:-1], "not JSON"),
    "not-utf8": (CALL.replace("Bern", "B\xe9rn").encode("latin-1"), "not JSON"),
    "bom": (b"\xef\xbb\xbf" + CALL.encode(), "not JSON"),
    "not-an-object": ('"tools/call"', "must be an object"),
    "method-not-a-string": (CALL.replace('"tools/call"', '["tools/call"]'), "is a string"),
}


@pytest.mark.parametrize("case", BAD_CALLS)
def test_a_call_the_guard_cannot_judge_never_reaches_the_server(
        case: str, attacked: tuple[str, Upstream]) -> None:
    guard, upstream = attacked
    body, why = BAD_CALLS[case]
    with httpx.Client(headers=HEADERS, timeout=10) as http:
        sid = _initialize(http, guard)
        assert http.post(guard, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                         headers={"mcp-session-id": sid}).status_code == 200
        before = len(upstream.received)
        r = http.post(guard, content=body if isinstance(body, bytes) else body.encode(),
                      headers={"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"})
        forwarded = [m for m in upstream.received[before:]  # but the guard's own listing
                     if not str(m.get("id") if isinstance(m, dict) else "").startswith("ltlagent-guard-")]
        assert forwarded == []
        answer = r.json()
        said = answer["error"]["message"] if "error" in answer else _text(answer)
        assert said.startswith(REFUSAL_MARK) and why in said, (r.status_code, said)
        if "result" in answer:
            assert answer["result"]["isError"] is True and r.status_code == 200
        else:
            assert r.status_code in (400, 413)
        # the session goes on: a good call still works
        assert _call(http, guard, sid, "lookup", {"city": "Bern"})["result"]["isError"] is False
    assert upstream.ran == [("lookup", "Bern")]


@pytest.mark.parametrize("name", ["Lookup", "LOOKUP", "lookup-", "book_"])
def test_a_name_the_server_does_not_list_is_refused_though_the_client_never_listed(
        name: str, attacked: tuple[str, Upstream]) -> None:
    """The guard lists the session's tools itself (the server may be lenient about names)."""
    guard, upstream = attacked
    with httpx.Client(headers=HEADERS, timeout=10) as http:
        sid = _initialize(http, guard)
        refused = _call(http, guard, sid, name, {"city": "Bern"})
        allowed = _call(http, guard, sid, "lookup", {"city": "Bern"})
    assert refused["result"]["isError"] is True
    assert f"the server did not list a tool named {name!r}" in _text(refused)
    assert allowed["result"]["isError"] is False and upstream.ran == [("lookup", "Bern")]
    assert upstream.methods().count("tools/call") == 1 and "tools/list" in upstream.methods()


def test_the_server_reads_the_bytes_the_guard_judged(attacked: tuple[str, Upstream]) -> None:
    """The body is forwarded re-serialised, as UTF-8 JSON without the client's charset label."""
    guard, upstream = attacked
    with httpx.Client(headers=HEADERS, timeout=10) as http:
        sid = _initialize(http, guard)
        r = http.post(guard, content=CALL.replace('"Bern"', '"Bern" ').replace(",", " , "),
                      headers={"mcp-session-id": sid, "content-type": "application/json; charset=utf-16"})
    assert r.status_code == 200 and upstream.ran == [("lookup", "Bern")]
    assert set(upstream.content_types) == {"application/json"}
    assert upstream.received[-1] == json.loads(CALL)


@pytest.mark.parametrize("sid", [None, "made-up"])
def test_a_call_outside_a_session_the_guard_saw_begin_is_refused(
        sid: str | None, attacked: tuple[str, Upstream]) -> None:
    guard, upstream = attacked
    with httpx.Client(headers=HEADERS, timeout=10) as http:
        _initialize(http, guard)
        before = len(upstream.received)
        r = http.post(guard, content=CALL, headers={"mcp-session-id": sid} if sid else {})
    assert r.status_code == 200 and r.json()["result"]["isError"] is True
    assert "no MCP session the guard knows" in _text(r.json())
    assert len(upstream.received) == before and upstream.ran == []


def test_a_body_over_the_limit_is_refused_while_it_is_read(attacked: tuple[str, Upstream]) -> None:
    """A chunked body that never ends: the 413 must come while the client is still sending."""
    guard, upstream = attacked
    host, port = guard.split("//")[1].split("/")[0].split(":")
    head = (f"POST /mcp HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
            "accept: application/json, text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    piece = b"x" * (1 << 20)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.encode() + b"%x\r\n%s\r\n" % (len(CALL) - 3, CALL[:-3].encode()))
        for _ in range(MAX_BODY_BYTES // len(piece) + 2):
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        answer = sock.recv(4096)  # the body is not finished: only a limit checked while reading answers
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert upstream.received == [] and upstream.ran == []


def test_the_upstream_down_is_an_error_and_no_call_is_counted(policy: Policy) -> None:
    dead = Upstream(f"http://127.0.0.1:{free_port()}/mcp")
    with guarded(policy, dead) as url, httpx.Client(headers=HEADERS, timeout=10) as http:
        r = http.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
        assert r.status_code == 502 and r.json()["error"]["message"].startswith(REFUSAL_MARK)


# -- the parts -----------------------------------------------------------------------------------
def test_sse_reader_reads_what_a_browser_reads() -> None:
    stream = (b"\xef\xbb\xbf: ping\r\nevent: message\r\nid: 4\r\ndata: {\"a\":\r\ndata:  1}\r\r"
              b"data:x\n\nretry: 10\nid: a\0b\ndata\n\n")
    for size in (1, 2, 3, 7, len(stream)):
        reader = SseReader()
        events = []
        for i in range(0, len(stream), size):
            events += reader.feed(stream[i:i + size])
        events += reader.feed(b"", end=True)
        assert events[0] is None  # the comment
        got = [(e.event, e.id, "\n".join(e.data), e.retry) for e in events[1:] if e is not None]
        assert got == [("message", "4", '{"a":\n 1}', None), (None, None, "x", None),
                       (None, None, "", "10")], (size, got)


def test_sse_reader_bounds_an_event() -> None:
    reader = SseReader()
    with pytest.raises(ValueError, match="bytes"):
        for _ in range(40):
            reader.feed(b"data: " + b"x" * (1 << 20) + b"\n")


def test_result_text_reads_every_part() -> None:
    assert result_text({"content": [{"type": "text", "text": "a"}, {"type": "image", "data": "…"},
                                    {"type": "resource", "resource": {"uri": "u", "text": "b"}},
                                    {"type": "resource_link", "uri": "mailto:x@y.z"}],
                        "structuredContent": {"to": "x@y.z"}}) == 'a\nb\nmailto:x@y.z\n{"to": "x@y.z"}'
    assert result_text([1]) == "[1]"


def test_strict_json_refuses_what_two_parsers_may_read_differently() -> None:
    assert strict_json(b'{"a": [1, {"b": null}]}') == {"a": [1, {"b": None}]}
    for bad in (b'{"a": 1, "a": 2}', b"[NaN]", b"[Infinity]", b"\xff", b"[" * 65 + b"]" * 65):
        with pytest.raises(ValueError):
            strict_json(bad)


# -- the command and the README ------------------------------------------------------------------
def _readme_mcp() -> tuple[str, str]:
    """The README's MCP command and Python example."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("### Guarding MCP tool servers"):]
    command = next(ln for ln in re.findall(r"^```sh\n(.*?)^```", section, re.S | re.M)[0].splitlines()
                   if ln.startswith("ltlagent guard --mcp"))
    code = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)[0]
    return command, code


@contextmanager
def _served(words: list[str], stderr: list[str]) -> Iterator[subprocess.Popen[str]]:
    """``ltlagent WORDS`` running; its stderr is appended to ``stderr`` once it is stopped."""
    proc = subprocess.Popen([sys.executable, "-m", "ltlagent", *words], cwd=ROOT, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield proc
    finally:
        proc.terminate()
        stderr.append(proc.communicate(timeout=20)[1])


def _wait_for(url: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            pass
        assert proc.poll() is None, "the command stopped"
        assert time.monotonic() < deadline
        time.sleep(0.2)


def test_the_readme_command_and_client_run_as_written() -> None:
    command, code = _readme_mcp()
    port = free_port()
    server = MCPServer("bookings", log_level="WARNING")
    ran: list[str] = []

    @server.tool()
    def find_user(email: str) -> str:
        """Look a user up."""
        ran.append("find_user")
        return "alice"

    @server.tool()
    def book(user_id: str, flight: str) -> str:
        """Book a flight."""
        ran.append("book")
        return "booked"

    with serve_app(server.streamable_http_app()) as base:
        up = base
        words = command.rstrip(" &").replace("http://127.0.0.1:8000", up).replace("8100", str(port)).split()
        assert words[:2] == ["ltlagent", "guard"] and "--mcp" in words
        stderr: list[str] = []
        with _served(words[1:], stderr) as proc:
            _wait_for(f"http://127.0.0.1:{port}/mcp", proc)
            p = subprocess.run([sys.executable, "-c", code.replace("8100", str(port))], cwd=ROOT,
                               capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, p.stderr[-3000:]
    assert "Traceback" not in stderr[0], stderr[0]
    lines = p.stdout.splitlines()
    assert lines[0] == "False alice" and lines[1].startswith(f"True {REFUSAL_MARK} book was not run: ")
    assert ran == ["find_user"]


@pytest.mark.parametrize("args, says", [
    (["--on-forbidden", "reask"], "--on-forbidden reask"),
    (["--upstream", "127.0.0.1:9/mcp"], "http://"),
])
def test_the_command_refuses_what_it_cannot_serve(args: list[str], says: str) -> None:
    base = {"--upstream": "http://127.0.0.1:9/mcp", **dict(zip(args[::2], args[1::2]))}
    words = ["guard", "--mcp", "--spec", "booking-policy", *[x for kv in base.items() for x in kv]]
    p = subprocess.run([sys.executable, "-m", "ltlagent", *words], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and says in p.stderr and "Traceback" not in p.stderr
