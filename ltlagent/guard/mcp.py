"""The guard in front of an MCP tool server (issue 29; docs/design.md §13): a proxy over MCP's
Streamable HTTP transport that asks the policy before each ``tools/call`` reaches the server.

An MCP client points at the proxy's endpoint instead of the server's. Every JSON-RPC message the
client posts is read whole (bounded) and strictly (no duplicate keys, no ``NaN``, bounded nesting),
then forwarded as the proxy re-serialises it, so the server runs exactly what was judged:

* a ``tools/call`` is a step :meth:`Event.call(name, arguments)
  <ltlagent.chat.events.Event.call>` of the session's :class:`~ltlagent.logic.policy.PolicyCursor`;
  allowed, it is pushed and forwarded; forbidden, the client gets an MCP tool result with
  ``isError: true`` and the refusal (which rule forbids it, what is allowed now), and the server
  never sees it. A call the proxy cannot read completely (no id, no name, arguments that are not an
  object, an unknown field, a name the server did not list) is refused the same way, never
  forwarded unjudged; a JSON-RPC batch that carries one is refused whole;
* a call's result, as the client receives it (a JSON body or an event of an SSE stream, the POST's
  own or a resumed one), is pushed as a ``tool`` text step (:func:`result_text`), so rules about
  what earlier results said apply; an SSE stream is re-emitted event by event as parsed, so the
  client reads what the policy read;
* everything else (``initialize``, ``tools/list``, notifications, responses to the server's own
  requests, the GET stream) passes through, never blocked by the policy.

One cursor per MCP session (``Mcp-Session-Id``): made when the server answers ``initialize``,
dropped when the session ends (``DELETE``, or the server says it is gone: 404). A server that
issues no session id gets one minted by the proxy (stripped before forwarding). The 2026-07-28
stateless revision has no session to hold a cursor: the proxy answers ``server/discover`` with
"method not found", so SDK clients fall back to the ``initialize`` handshake, and refuses a call
outside a session.
"""

from __future__ import annotations

import json
import re
import unicodedata
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ltlagent.chat.events import Event
from ltlagent.errors import LogError, UsageError
from ltlagent.guard.screen import REFUSAL_MARK, Refusal
from ltlagent.guard.wire import MAX_DEPTH, MAX_EVENT_BYTES, SseEvent, SseReader, dumps, sse_bytes, strict_json
from ltlagent.logic.policy import Policy, PolicyCursor

__all__ = ["McpProxyConfig", "McpSession", "build_mcp_app", "result_text", "MAX_BODY_BYTES",
           "MAX_PENDING", "MAX_PAGES", "MAX_DEPTH", "MAX_EVENT_BYTES"]

#: The largest request body the proxy reads (answers and SSE events: ``wire.MAX_EVENT_BYTES``).
MAX_BODY_BYTES = 8 << 20
#: The most calls of one session awaiting their results.
MAX_PENDING = 1024
#: The most pages of tools/list the guard reads when it lists a server's tools itself.
MAX_PAGES = 100
#: The characters MCP allows in a tool name (2025-11-25: "SHOULD"), 1 to 128 of them.
TOOL_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
#: What a tools/call's params may hold; anything else (a task, a 2026 input response) is refused.
CALL_PARAMS = frozenset({"name", "arguments", "_meta"})

SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
#: The revisions with an ``initialize`` handshake (and sessions); later ones are stateless.
HANDSHAKE_VERSIONS = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})
MINTED_PREFIX = "ltlagent-"
#: JSON-RPC error codes.
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INTERNAL_ERROR = -32700, -32600, -32601, -32603
#: Not forwarded either way: hop-by-hop headers, and the encoding (the proxy asks for plain bodies
#: and passes on what it decoded).
HOP_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "keep-alive",
                         "te", "trailer", "upgrade", "proxy-authorization", "proxy-connection",
                         "accept-encoding", "content-encoding"})

RequestKey = tuple[str, str]  # a JSON-RPC id as (type, text): 3 and "3" are different requests


@dataclass(frozen=True)
class McpProxyConfig:
    """What one MCP proxy serves: the compiled policy, the server's Streamable HTTP endpoint (the
    full URL, e.g. ``http://127.0.0.1:8000/mcp``; the proxy serves the same path), the upstream
    timeout (seconds a POST may wait for each read; the GET stream is not bounded), and how many
    sessions are kept (the oldest beyond it is forgotten: its calls are then refused)."""

    policy: Policy
    upstream: str
    timeout: float = 120.0
    connect_timeout: float = 5.0
    max_sessions: int = 10_000

    def __post_init__(self) -> None:
        if not self.upstream.startswith(("http://", "https://")):
            raise UsageError(f"upstream {self.upstream!r}: expected an http:// or https:// URL "
                             "(the MCP endpoint, e.g. http://127.0.0.1:8000/mcp)")
        if self.timeout <= 0 or self.connect_timeout <= 0 or self.max_sessions < 1:
            raise UsageError("the timeouts must be > 0 and max_sessions ≥ 1")

    @property
    def path(self) -> str:
        """The endpoint's path, served by the proxy too."""
        return urlsplit(self.upstream).path or "/"


@dataclass
class McpSession:
    """One MCP session as the guard follows it: the policy cursor over its steps (calls forwarded,
    results received), the calls and listings awaiting an answer, and the tool names the server
    listed (``None`` until a ``tools/list`` answer is seen)."""

    cursor: PolicyCursor
    minted: bool = False  # the proxy made the id up (the server issued none)
    pending: dict[RequestKey, str] = field(default_factory=dict)  # tools/call id → tool name
    listing: set[RequestKey] = field(default_factory=set)  # tools/list ids
    tools: set[str] | None = None

    def observe(self, message: object) -> None:
        """Take what the server answered: a call's result becomes a ``tool`` step, a listing's
        names the tools known. Anything else (notifications, the server's requests) is ignored."""
        for m in message if isinstance(message, list) else [message]:
            if not isinstance(m, Mapping) or "method" in m:
                continue
            key = _key(m.get("id"))
            if key is None:
                continue
            if key in self.pending:
                del self.pending[key]
                if "result" in m:
                    text = result_text(m["result"])
                else:
                    err = m.get("error")
                    text = "error: " + str(err.get("message", "") if isinstance(err, Mapping) else err)
                self.cursor.push(Event.say("tool", text))
            elif key in self.listing:
                self.listing.discard(key)
                result = m.get("result")
                tools = result.get("tools") if isinstance(result, Mapping) else None
                if isinstance(tools, list):
                    names = {t["name"] for t in tools
                             if isinstance(t, Mapping) and isinstance(t.get("name"), str)}
                    self.tools = (self.tools or set()) | names


def result_text(result: object) -> str:
    """A ``tools/call`` result as the text of a ``tool`` step: its text parts, embedded resources'
    texts and links' URIs, one per line, then its ``structuredContent`` as JSON (sorted keys)."""
    if not isinstance(result, Mapping):
        return json.dumps(result, ensure_ascii=False)
    parts: list[str] = []
    content = result.get("content")
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        res = item.get("resource")
        if kind == "text" and isinstance(item.get("text"), str):
            parts.append(item["text"])
        elif kind == "resource" and isinstance(res, Mapping):
            text = res.get("text")
            parts.append(text if isinstance(text, str) else str(res.get("uri", "")))
        elif kind == "resource_link" and isinstance(item.get("uri"), str):
            parts.append(item["uri"])
    if result.get("structuredContent") is not None:
        parts.append(json.dumps(result["structuredContent"], ensure_ascii=False, sort_keys=True))
    return "\n".join(parts)


def _key(rid: object) -> RequestKey | None:
    """A JSON-RPC id as a dictionary key; ``None`` for what is not an id (null, bool, float, …)."""
    if isinstance(rid, bool):
        return None
    if isinstance(rid, str):
        return ("s", rid)
    if isinstance(rid, int):
        return ("i", str(rid))
    return None


def _looks_like_call(method: str) -> bool:
    """``tools/call`` after what a lenient server might normalise (case, width, spaces, invisible
    characters): such a method is judged as a call (and refused unless it is exactly that)."""
    s = unicodedata.normalize("NFKC", method).casefold()
    return "".join(c for c in s if not (c.isspace() or unicodedata.category(c) in ("Cf", "Cc"))) \
        == "tools/call"


# -- the proxy ----------------------------------------------------------------------------------
class RpcFailure(Exception):
    """An answer the proxy gives itself: a JSON-RPC error with an HTTP status."""

    def __init__(self, status: int, code: int, message: str, rid: object = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.rid = status, code, message, rid

    def response(self) -> Response:
        return JSONResponse({"jsonrpc": "2.0", "id": self.rid,
                             "error": {"code": self.code, "message": f"{REFUSAL_MARK} {self.message}"}},
                            status_code=self.status)


def _refusal(rid: object, text: str, version: str | None) -> Response:
    """A refused call: a tool result with ``isError`` (the model reads it and can try otherwise);
    past the handshake revisions (``version``: the request's) a result says it is complete."""
    result: dict[str, object] = {"content": [{"type": "text", "text": text}], "isError": True}
    if version is not None and version not in HANDSHAKE_VERSIONS:
        result["resultType"] = "complete"
    return JSONResponse({"jsonrpc": "2.0", "id": rid, "result": result},
                        headers={"x-ltlagent-guard": "refused"})


def _result_of(resp: httpx.Response, rid: str) -> Mapping[str, object] | None:
    """The ``result`` of the answer to request ``rid`` in a whole response (JSON or SSE)."""
    if resp.status_code >= 300 or len(resp.content) > MAX_EVENT_BYTES:
        return None
    ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
    try:
        events = SseReader().feed(resp.content, end=True) if ctype == "text/event-stream" else []
    except ValueError:
        return None
    texts = ["\n".join(e.data) for e in events if e is not None] if events else [resp.text]
    values = []
    for text in texts:
        try:
            values.append(strict_json(text.encode()))
        except (ValueError, UnicodeDecodeError):
            continue  # a priming event (no data), or one that is not the answer
    for v in values:
        for m in v if isinstance(v, list) else [v]:
            if isinstance(m, Mapping) and m.get("id") == rid and isinstance(m.get("result"), Mapping):
                return m["result"]
    return None


def _headed(response: Response, headers: list[tuple[str, str]]) -> Response:
    """``response`` with the upstream's headers (each of a repeated one, e.g. ``set-cookie``)."""
    response.raw_headers.extend((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers)
    return response


async def _internal_error(request: Request, exc: Exception) -> Response:
    """A bug in the guard is a JSON-RPC error (500), never a page or a traceback; nothing of the
    request was forwarded past the point where it failed."""
    return RpcFailure(500, INTERNAL_ERROR, f"internal error in the guard: {type(exc).__name__}").response()


class _McpGuard:
    """The handlers over one configuration, one upstream connection pool and the sessions."""

    def __init__(self, config: McpProxyConfig) -> None:
        self.config = config
        self.client: httpx.AsyncClient | None = None
        self.sessions: OrderedDict[str, McpSession] = OrderedDict()

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        c = self.config
        async with httpx.AsyncClient(timeout=httpx.Timeout(c.timeout, connect=c.connect_timeout),
                                     limits=httpx.Limits(max_connections=1000)) as client:
            self.client = client
            yield
        self.client = None
        self.sessions.clear()

    async def endpoint(self, request: Request) -> Response:
        try:
            if request.method == "POST":
                return await self._post(request)
            if request.method == "DELETE":
                return await self._delete(request)
            return await self._forward(request, None, self._session(request))
        except RpcFailure as e:
            return e.response()

    def _session(self, request: Request) -> McpSession | None:
        sid = request.headers.get(SESSION_HEADER)
        return self.sessions.get(sid) if sid is not None else None

    async def _body(self, request: Request) -> object:
        """The request's JSON, read up to :data:`MAX_BODY_BYTES` (checked while reading)."""
        raw = bytearray()
        try:
            async for chunk in request.stream():
                raw += chunk
                if len(raw) > MAX_BODY_BYTES:
                    raise RpcFailure(413, INVALID_REQUEST, f"request body over {MAX_BODY_BYTES} bytes")
        except ClientDisconnect:
            raise RpcFailure(400, INVALID_REQUEST, "the client went away mid-request") from None
        try:
            return strict_json(bytes(raw))
        except (ValueError, UnicodeDecodeError) as e:
            raise RpcFailure(400, PARSE_ERROR, f"the request is not JSON the guard can read: {e}") from None

    async def _post(self, request: Request) -> Response:
        body = await self._body(request)
        batch = body if isinstance(body, list) else [body]
        if not batch:
            raise RpcFailure(400, INVALID_REQUEST, "an empty batch")
        messages: list[dict[str, object]] = []
        for m in batch:
            if not isinstance(m, dict) or ("method" in m and not isinstance(m["method"], str)):
                raise RpcFailure(400, INVALID_REQUEST, "a JSON-RPC message must be an object whose "
                                 "'method', if any, is a string")
            messages.append(m)
        calls = [m for m in messages if "method" in m and _looks_like_call(str(m["method"]))]
        if calls:
            if isinstance(body, list):
                raise RpcFailure(400, INVALID_REQUEST, "tools/call was not run: a batch that carries "
                                 "tools/call is not forwarded; send each call alone")
            return await self._call(request, calls[0])
        if not isinstance(body, list) and messages[0].get("method") == "server/discover":
            return JSONResponse({"jsonrpc": "2.0", "id": messages[0].get("id"),
                                 "error": {"code": METHOD_NOT_FOUND, "message":
                                           f"{REFUSAL_MARK} server/discover: the guard serves the "
                                           "initialize handshake only (its policy follows a session)"}})
        session = self._session(request)
        if session is not None:
            for m in messages:
                key = _key(m.get("id"))
                if m.get("method") == "tools/list" and key is not None:
                    session.listing.add(key)
        return await self._forward(request, body, session)

    async def _call(self, request: Request, msg: dict[str, object]) -> Response:
        """Judge one ``tools/call``; forward it only when the policy allows it."""
        rid = msg.get("id")
        key = _key(rid)
        if key is None:
            raise RpcFailure(400, INVALID_REQUEST, "tools/call was not run: it has no valid id "
                             "(a string or an integer)")
        params = msg.get("params")
        name = params.get("name") if isinstance(params, Mapping) else None
        label = name if isinstance(name, str) and TOOL_NAME.fullmatch(name) else "the call"

        version = request.headers.get(VERSION_HEADER)

        def refuse(why: str) -> Response:
            return _refusal(rid, f"{REFUSAL_MARK} {label} was not run: {why}", version)

        if msg.get("method") != "tools/call" or msg.get("jsonrpc") != "2.0":
            return refuse(f"the method must be exactly 'tools/call' in JSON-RPC 2.0, not "
                          f"{msg.get('method')!r}")
        if not isinstance(params, Mapping):
            return refuse("its params are not an object")
        extra = sorted(set(params) - CALL_PARAMS)
        if extra:
            return refuse(f"the guard cannot judge params {', '.join(map(repr, extra))}")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            return refuse(f"the tool name {name!r} is not 1-128 of A-Z a-z 0-9 _ - .")
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, Mapping):
            return refuse("its arguments are not a JSON object")
        session = self._session(request)
        if session is None:
            sid = request.headers.get(SESSION_HEADER)
            return refuse("no MCP session the guard knows (Mcp-Session-Id "
                          + (f"{sid!r} did not begin through the guard" if sid else "missing")
                          + "): the policy follows a session from its initialize")
        if session.tools is None or name not in session.tools:
            listed = await self._list_tools(request, session)
            if listed is None:
                return refuse("the guard could not list the server's tools to check the name")
            session.tools = (session.tools or set()) | listed
        if name not in session.tools:
            return refuse(f"the server did not list a tool named {name!r}")
        if key in session.pending:
            return refuse(f"a call with id {rid!r} is still running")
        if len(session.pending) >= MAX_PENDING:
            return refuse(f"{MAX_PENDING} calls of this session are still running")
        try:
            event = Event.call(name, dict(arguments or {}), call_id=str(rid))
        except LogError as e:
            return refuse(e.message)
        d = session.cursor.decide(event)
        if not d.allowed:
            return _refusal(rid, Refusal(0, str(rid), name, event.text, d).explain(), version)
        session.cursor.push(event)  # no await since decide: no other request came in between
        session.pending[key] = name
        judged = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
        return await self._forward(request, judged, session, call=key)

    async def _list_tools(self, request: Request, session: McpSession) -> set[str] | None:
        """The tool names the server lists in this session, asked by the guard itself (every page,
        at most :data:`MAX_PAGES`); ``None`` when the server does not answer a listing."""
        if self.client is None:
            return None
        headers = self._headers(request, session)
        headers = {k: v for k, v in headers.items() if k.lower() not in ("content-type", "accept")}
        headers.update({"content-type": "application/json", "accept": "application/json, text/event-stream"})
        names: set[str] = set()
        page: object = None
        for _ in range(MAX_PAGES):
            rid = f"ltlagent-guard-{uuid.uuid4().hex}"
            body = {"jsonrpc": "2.0", "id": rid, "method": "tools/list",
                    "params": {"cursor": page} if page is not None else {}}
            try:
                resp = await self.client.post(self.config.upstream, content=dumps(body), headers=headers)
            except httpx.HTTPError:
                return None
            result = _result_of(resp, rid)
            tools = result.get("tools") if result is not None else None
            if result is None or not isinstance(tools, list):
                return None
            names |= {t["name"] for t in tools if isinstance(t, Mapping) and isinstance(t.get("name"), str)}
            page = result.get("nextCursor")
            if not isinstance(page, str) or not page:
                return names
        return None

    async def _delete(self, request: Request) -> Response:
        sid = request.headers.get(SESSION_HEADER)
        session = self.sessions.get(sid) if sid is not None else None
        if sid is not None and session is not None and session.minted:
            del self.sessions[sid]
            return Response(status_code=200)
        return await self._forward(request, None, session)

    def _headers(self, request: Request, session: McpSession | None) -> dict[str, str]:
        out = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        if session is not None and session.minted:
            out.pop(SESSION_HEADER, None)
        out["accept-encoding"] = "identity"
        return out

    def _open(self, sid: str | None, minted: bool) -> tuple[str, McpSession]:
        """The session an ``initialize`` answer began (an id the guard already follows keeps its
        cursor: a session is never reset)."""
        if sid is None:
            sid, minted = MINTED_PREFIX + uuid.uuid4().hex, True
        if sid not in self.sessions:
            self.sessions[sid] = McpSession(self.config.policy.cursor(), minted)
            while len(self.sessions) > self.config.max_sessions:
                self.sessions.popitem(last=False)
        return sid, self.sessions[sid]

    async def _forward(self, request: Request, body: object, session: McpSession | None,
                       call: RequestKey | None = None) -> Response:
        """Send the request upstream (``body`` re-serialised) and pass the answer back, reading
        results out of it for ``session``. ``call``: the id of a forwarded ``tools/call``."""
        if self.client is None:
            raise RpcFailure(503, INTERNAL_ERROR, "the proxy is not running")
        content = dumps(body) if body is not None else None
        headers = self._headers(request, session)
        if content is not None:  # the bytes the guard wrote, labelled as what they are (no charset)
            headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
            headers["content-type"] = "application/json"
        timeout = self.client.timeout if request.method != "GET" else \
            httpx.Timeout(None, connect=self.config.connect_timeout)
        req = self.client.build_request(request.method, self.config.upstream, content=content,
                                        headers=headers, timeout=timeout)
        rid = body.get("id") if isinstance(body, dict) else None
        try:
            resp = await self.client.send(req, stream=True)
        except httpx.HTTPError as e:
            if session is not None and call is not None:
                session.pending.pop(call, None)
            status = 504 if isinstance(e, httpx.TimeoutException) else 502
            raise RpcFailure(status, INTERNAL_ERROR, f"the MCP server could not be reached: "
                             f"{type(e).__name__}: {e}", rid) from None
        back = [(k, v) for k, v in resp.headers.multi_items() if k.lower() not in HOP_HEADERS]
        sid = request.headers.get(SESSION_HEADER)
        if isinstance(body, dict) and body.get("method") == "initialize" and resp.status_code < 300:
            given = resp.headers.get(SESSION_HEADER)
            new_sid, session = self._open(given, given is None)
            back = [(k, v) for k, v in back if k.lower() != SESSION_HEADER]
            back.append((SESSION_HEADER, new_sid))
        elif sid is not None and sid in self.sessions and (
                resp.status_code == 404 or (request.method == "DELETE" and resp.status_code < 300)):
            del self.sessions[sid]  # the session is over: its cursor goes with it
        ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype == "text/event-stream":
            return _headed(StreamingResponse(self._events(resp, session), resp.status_code), back)
        if call is None and (session is None or not session.listing):
            return _headed(StreamingResponse(self._raw(resp), resp.status_code), back)
        try:
            raw = await self._read(resp)
        finally:
            await resp.aclose()
        try:
            value = strict_json(raw) if raw.strip() else None
        except (ValueError, UnicodeDecodeError):
            if call is None:
                return _headed(Response(raw, resp.status_code), back)
            raise RpcFailure(502, INTERNAL_ERROR, "the MCP server's answer to the call is not JSON "
                             "the guard can read", rid) from None
        if session is not None and value is not None:
            session.observe(value)
        return _headed(Response(dumps(value) if value is not None else raw, resp.status_code), back)

    async def _read(self, resp: httpx.Response) -> bytes:
        raw = bytearray()
        try:
            async for chunk in resp.aiter_bytes():
                raw += chunk
                if len(raw) > MAX_EVENT_BYTES:
                    raise RpcFailure(502, INTERNAL_ERROR, f"the MCP server answered over "
                                     f"{MAX_EVENT_BYTES} bytes")
        except httpx.HTTPError as e:
            raise RpcFailure(502, INTERNAL_ERROR, f"the MCP server's answer broke off: "
                             f"{type(e).__name__}") from None
        return bytes(raw)

    async def _raw(self, resp: httpx.Response) -> AsyncIterator[bytes]:
        try:
            async for chunk in resp.aiter_bytes():
                yield chunk
        except httpx.HTTPError:
            return
        finally:
            await resp.aclose()

    async def _events(self, resp: httpx.Response, session: McpSession | None) -> AsyncIterator[bytes]:
        """The upstream's SSE stream, re-emitted event by event as parsed; each event's JSON is
        observed for the session (an event whose data is not JSON is dropped: the client is
        shown only what the guard read). A malformed or oversized stream ends here."""
        reader = SseReader()
        try:
            async for chunk in resp.aiter_bytes():
                for ev in reader.feed(chunk):
                    out = self._event(ev, session)
                    if out:
                        yield out
            for ev in reader.feed(b"", end=True):
                out = self._event(ev, session)
                if out:
                    yield out
        except (httpx.HTTPError, ValueError):
            return
        finally:
            await resp.aclose()

    def _event(self, ev: SseEvent | None, session: McpSession | None) -> bytes:
        if ev is None or not "".join(ev.data):
            return sse_bytes(ev, None)
        try:
            value = strict_json("\n".join(ev.data).encode())
        except (ValueError, UnicodeDecodeError):
            return b""
        if session is not None:
            session.observe(value)
        return sse_bytes(ev, dumps(value).decode())


def build_mcp_app(config: McpProxyConfig) -> Starlette:
    """The ASGI application of the MCP proxy (run it with uvicorn: ``ltlagent guard --mcp``)."""
    g = _McpGuard(config)
    return Starlette(routes=[Route(config.path, g.endpoint, methods=["GET", "POST", "DELETE"])],
                     lifespan=g.lifespan, exception_handlers={Exception: _internal_error})
