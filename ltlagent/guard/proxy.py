"""The guard as an HTTP proxy: an OpenAI-compatible server in front of another one (issue 20;
docs/design.md §13).

An existing agent points its ``base_url`` at the proxy. ``POST /v1/chat/completions`` is forwarded
upstream; the reply's tool calls are judged (:func:`ltlagent.guard.screen.screen`) after the
conversation the client sent — the messages are the trace, so the proxy keeps no state between
requests and any number of conversations share it. When the reply proposes a forbidden call, the
proxy, by ``on_forbidden``:

* ``"refuse"``: answers with the reply's text, the allowed calls, and one line per refused call
  saying which rule forbids it and what is allowed now (assistant text the client can act on);
* ``"reask"``: shows upstream its proposal with a ``tool`` message refusing each forbidden call and
  asks again, at most ``max_retries`` times, then refuses as above.

Either way the client's history stays one that the policy accepts: a forbidden call never reaches
it. Streaming (``"stream": true``): text is forwarded as it comes, tool-call deltas are held until
the upstream finishes, then each call is judged and the allowed ones are emitted whole.
``GET /v1/models`` is passed through. Errors are the API's JSON (``{"error": {...}}``): a bad request
400, an upstream that cannot be reached or answers nonsense 502, one that is too slow 504 (for a
stream that already began, an ``error`` event, then the stream ends).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ltlagent.errors import LogError, UsageError
from ltlagent.guard.screen import REFUSAL_MARK, Refusal, Screening, refusal_text, screen, settle
from ltlagent.guard.stream import DONE, ReplyAssembler, sse
from ltlagent.logic.policy import Policy, PolicyCursor

__all__ = ["ProxyConfig", "build_app", "ON_FORBIDDEN", "MAX_BODY_BYTES"]

#: What the proxy may do with a reply that proposes a forbidden call.
ON_FORBIDDEN = ("refuse", "reask")

#: The largest request body accepted (a conversation of a few MB is already very long).
MAX_BODY_BYTES = 32 << 20

#: Headers passed on to the upstream (the key the client holds is the upstream's key).
FORWARDED_HEADERS = ("authorization", "openai-organization", "openai-project")

Message = dict[str, object]


@dataclass(frozen=True)
class ProxyConfig:
    """What one proxy serves: the compiled policy, the upstream base URL (``…/v1``), the reaction
    to a forbidden call, the bound on re-asks, and the upstream timeout (seconds: the whole of a
    non-streamed reply, each read of a streamed one)."""

    policy: Policy
    upstream: str
    on_forbidden: str = "refuse"
    max_retries: int = 2
    timeout: float = 60.0
    connect_timeout: float = 5.0

    def __post_init__(self) -> None:
        if self.on_forbidden not in ON_FORBIDDEN:
            raise UsageError(f"on_forbidden must be one of {', '.join(ON_FORBIDDEN)}, "
                             f"not {self.on_forbidden!r}")
        if self.max_retries < 0 or self.timeout <= 0 or self.connect_timeout <= 0:
            raise UsageError("max_retries must be ≥ 0 and the timeouts > 0")
        if not self.upstream.startswith(("http://", "https://")):
            raise UsageError(f"upstream {self.upstream!r}: expected an http:// or https:// URL "
                             "(the base URL, e.g. http://127.0.0.1:8000/v1)")


class ApiError(Exception):
    """An error answered as the API's JSON with an HTTP status."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.code, self.param = status, message, kind, code, param

    def payload(self) -> dict[str, object]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param,
                          "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.payload(), status_code=self.status)


def _upstream_failure(e: Exception) -> ApiError:
    """A transport failure talking to the upstream, as the error the client gets."""
    if isinstance(e, (httpx.TimeoutException, asyncio.TimeoutError)):
        return ApiError(504, f"the upstream did not answer in time ({type(e).__name__})",
                        "upstream_error", "upstream_timeout")
    return ApiError(502, f"the upstream could not be reached: {type(e).__name__}: {e}",
                    "upstream_error", "upstream_unreachable")


async def _upstream_status_error(resp: httpx.Response) -> ApiError:
    """A non-2xx upstream answer: its own 4xx errors are the client's to see; anything else is 502."""
    body = (await resp.aread())[:4000]
    try:
        detail = json.loads(body)
    except ValueError:
        detail = None
    if 400 <= resp.status_code < 500 and isinstance(detail, dict) and isinstance(detail.get("error"), dict):
        err = detail["error"]
        return ApiError(resp.status_code, str(err.get("message", "")), str(err.get("type") or
                        "invalid_request_error"), err.get("code"), err.get("param"))
    text = body.decode("utf-8", "replace").strip()
    return ApiError(502, f"the upstream answered {resp.status_code}: {text[:500]}", "upstream_error",
                    "upstream_status")


def _strip(message: Mapping[str, object]) -> Message:
    """An assistant message reduced to what may be sent back upstream."""
    out: Message = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    return out


def _reask_messages(proposal: Mapping[str, object], s: Screening) -> list[Message]:
    """The proposal and one ``tool`` answer per call: the refusal, or for an allowed call proposed
    with a forbidden one, that it was not run either (the proxy runs no tools)."""
    out = [_strip(proposal)]
    refused = {r.position: r for r in s.refusals}
    calls = proposal.get("tool_calls")
    for k, call in enumerate(calls if isinstance(calls, list) else []):
        text = (refused[k].explain() if k in refused else
                f"{REFUSAL_MARK} not run: it was proposed together with a forbidden call; "
                "propose it again if it is still needed")
        out.append({"role": "tool", "tool_call_id": call.get("id") if isinstance(call, dict) else None,
                    "content": text})
    return out


def _refused_content(content: str, refusals: Sequence[Refusal]) -> str:
    return (content.rstrip() + "\n\n" if content.strip() else "") + refusal_text(refusals)


class _Guarded:
    """The request handlers over one configuration and one upstream connection pool."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.client: httpx.AsyncClient | None = None

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        c = self.config
        timeout = httpx.Timeout(c.timeout, connect=c.connect_timeout)
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=200)
        async with httpx.AsyncClient(base_url=c.upstream.rstrip("/") + "/", timeout=timeout,
                                     limits=limits) as client:
            self.client = client
            yield
        self.client = None

    def _client(self) -> httpx.AsyncClient:
        if self.client is None:  # only outside the app's lifespan
            raise ApiError(503, "the proxy is not running", "server_error")
        return self.client

    # -- requests
    async def _read(self, request: Request) -> tuple[Message, list[Message], PolicyCursor]:
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            raise ApiError(413, f"request body over {MAX_BODY_BYTES} bytes", code="body_too_large")
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise ApiError(400, f"the request body is not JSON: {e}", code="invalid_json") from None
        if not isinstance(data, dict):
            raise ApiError(400, "the request body must be a JSON object", code="invalid_body")
        messages = data.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "'messages' must be a non-empty list of messages", param="messages",
                           code="invalid_messages")
        n = data.get("n", 1)
        if n not in (1, None):
            raise ApiError(400, "the guard serves one choice per request ('n' must be 1)", param="n",
                           code="unsupported_n")
        cursor = self.config.policy.cursor()
        try:
            cursor.push_messages(messages)
        except LogError as e:
            where = f"messages[{e.index}]" if e.index is not None else "messages"
            raise ApiError(400, f"{where}: {e}", param=where, code="malformed_message") from None
        return data, messages, cursor

    def _headers(self, request: Request) -> dict[str, str]:
        return {k: v for k, v in request.headers.items() if k.lower() in FORWARDED_HEADERS}

    async def _complete(self, body: Message, headers: Mapping[str, str]) -> Message:
        """One non-streamed completion upstream, bounded by the timeout as a whole."""
        client = self._client()
        try:
            resp = await asyncio.wait_for(client.post("chat/completions", json=body, headers=headers),
                                          self.config.timeout)
        except (httpx.HTTPError, asyncio.TimeoutError) as e:
            raise _upstream_failure(e) from None
        if resp.status_code >= 300:
            raise await _upstream_status_error(resp)
        try:
            data = resp.json()
            message = data["choices"][0]["message"]
            if not isinstance(message, dict):
                raise TypeError("message")
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise ApiError(502, f"the upstream reply is not a chat completion ({e})", "upstream_error",
                           "upstream_bad_reply") from None
        return data

    def _screen(self, cursor: PolicyCursor, message: Mapping[str, object], index: int) -> Screening:
        try:
            return screen(cursor, message, index)
        except LogError as e:
            raise ApiError(502, f"the upstream reply is not a valid chat message: {e}",
                           "upstream_error", "upstream_bad_reply") from None

    async def chat_completions(self, request: Request) -> Response:
        try:
            data, messages, cursor = await self._read(request)
            if data.get("stream"):
                return await self._stream(data, messages, cursor, self._headers(request))
            return await self._once(data, messages, cursor, self._headers(request))
        except ApiError as e:
            return e.response()

    async def _once(self, data: Message, messages: list[Message], cursor: PolicyCursor,
                    headers: Mapping[str, str]) -> Response:
        c = self.config
        asked = list(messages)
        refused: list[Refusal] = []
        attempts = 1 + (c.max_retries if c.on_forbidden == "reask" else 0)
        for attempt in range(1, attempts + 1):
            reply = await self._complete({**data, "messages": asked}, headers)
            choice = reply["choices"][0]  # type: ignore[index]
            message = choice["message"]
            s = self._screen(cursor, message, len(messages))
            if s.ok:
                if attempt > 1:
                    reply["ltlagent"] = {"refused": [r.to_dict() for r in refused], "attempts": attempt}
                return JSONResponse(reply, headers={"x-ltlagent-guard": "allowed" if attempt == 1
                                                    else "reasked"})
            refused.extend(s.refusals)
            if attempt < attempts:
                asked += _reask_messages(message, s)
        content = message.get("content")
        text = _refused_content(content if isinstance(content, str) else "", s.refusals)
        final, dropped = settle(cursor, text, s.tool_calls(), len(messages))
        if dropped:
            refused.extend(dropped)
            text = _refused_content(text, dropped)
            final, _ = settle(cursor, text, [], len(messages))
        calls = final.tool_calls()
        new: Message = {"role": "assistant", "content": text}
        if calls:
            new["tool_calls"] = calls
        choice["message"] = new
        choice["finish_reason"] = "tool_calls" if calls else "stop"
        reply["ltlagent"] = {"refused": [r.to_dict() for r in refused], "attempts": attempts}
        return JSONResponse(reply, headers={"x-ltlagent-guard": "refused"})

    async def _open(self, body: Message, headers: Mapping[str, str]) -> httpx.Response:
        """Start a streamed completion upstream; errors before the first byte are raised."""
        client = self._client()
        req = client.build_request("POST", "chat/completions", json=body, headers=headers)
        try:
            resp = await asyncio.wait_for(client.send(req, stream=True), self.config.timeout)
        except (httpx.HTTPError, asyncio.TimeoutError) as e:
            raise _upstream_failure(e) from None
        if resp.status_code >= 300:
            try:
                raise await _upstream_status_error(resp)
            finally:
                await resp.aclose()
        return resp

    async def _stream(self, data: Message, messages: list[Message], cursor: PolicyCursor,
                      headers: Mapping[str, str]) -> Response:
        first = await self._open({**data, "messages": messages}, headers)
        return StreamingResponse(self._events(first, data, messages, cursor, headers),
                                 media_type="text/event-stream",
                                 headers={"cache-control": "no-cache", "x-accel-buffering": "no"})

    async def _events(self, resp: httpx.Response, data: Message, messages: list[Message],
                      cursor: PolicyCursor, headers: Mapping[str, str]) -> AsyncIterator[bytes]:
        c = self.config
        asked = list(messages)
        before = ""  # the text the client received from earlier attempts
        attempts = 1 + (c.max_retries if c.on_forbidden == "reask" else 0)
        refused: list[Refusal] = []
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                try:
                    resp = await self._open({**data, "messages": asked}, headers)
                except ApiError as e:
                    yield sse(e.payload())
                    return
            asm = ReplyAssembler()
            try:
                async for chunk in self._chunks(resp, asm):
                    try:
                        forward = asm.feed(chunk)
                    except ValueError as e:
                        raise ApiError(502, f"the upstream sent a malformed chunk: {e}",
                                       "upstream_error", "upstream_bad_reply") from None
                    for out in forward:
                        yield sse(out)
            except ApiError as e:
                yield sse(e.payload())
                return
            finally:
                await resp.aclose()
            calls = asm.tool_calls()
            sent = before + asm.text()  # the reply's text as the client will record it
            proposal: Message = {"role": "assistant", "content": sent or None}
            if calls:
                proposal["tool_calls"] = calls
            try:
                s = self._screen(cursor, proposal, len(messages))
            except ApiError as e:
                yield sse(e.payload())
                return
            if s.ok:
                for chunk in asm.call_chunks(calls):
                    yield sse(chunk)
                end = asm.chunk({}, asm.finish_reason or ("tool_calls" if calls else "stop"))
                if refused:  # allowed after a re-ask: say what was refused on the way
                    end["ltlagent"] = {"refused": [r.to_dict() for r in refused], "attempts": attempt}
                yield sse(end)
                if asm.usage is not None:
                    yield sse({**asm.chunk({}), "choices": [], "usage": asm.usage})
                yield DONE
                return
            refused.extend(s.refusals)
            if attempt < attempts:
                asked += _reask_messages({"role": "assistant", "content": asm.text() or None,
                                          "tool_calls": calls}, s)
                before = sent
        text = sent
        full = _refused_content(text, s.refusals)
        final, dropped = settle(cursor, full, s.tool_calls(), len(messages))
        if dropped:
            full = _refused_content(full, dropped)
            final, _ = settle(cursor, full, [], len(messages))
        yield sse(asm.chunk({"content": full[len(text):]}))
        kept = final.tool_calls()
        for chunk in asm.call_chunks(kept):
            yield sse(chunk)
        end = asm.chunk({}, "tool_calls" if kept else "stop")
        end["ltlagent"] = {"refused": [r.to_dict() for r in [*refused, *dropped]], "attempts": attempts}
        yield sse(end)
        yield DONE

    async def _chunks(self, resp: httpx.Response, asm: ReplyAssembler) -> AsyncIterator[Mapping[str, object]]:
        """The JSON chunks of an upstream stream until ``[DONE]``; a broken, malformed or stalled
        stream raises :class:`ApiError` (each read is bounded by the client's read timeout)."""
        try:
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    asm.done = True
                    return
                try:
                    chunk = json.loads(payload)
                except ValueError:
                    raise ApiError(502, "the upstream sent an event that is not JSON", "upstream_error",
                                   "upstream_bad_reply") from None
                if not isinstance(chunk, dict):
                    raise ApiError(502, "the upstream sent an event that is not an object",
                                   "upstream_error", "upstream_bad_reply")
                if "error" in chunk:
                    err = chunk["error"]
                    msg = err.get("message") if isinstance(err, dict) else err
                    raise ApiError(502, f"the upstream failed mid-stream: {msg}", "upstream_error",
                                   "upstream_stream_error")
                yield chunk
        except httpx.HTTPError as e:
            raise _upstream_failure(e) from None
        if not asm.finished:
            raise ApiError(502, "the upstream stream ended before the reply was complete",
                           "upstream_error", "upstream_stream_error")

    async def models(self, request: Request) -> Response:
        client = self._client()
        try:
            resp = await asyncio.wait_for(client.get("models", headers=self._headers(request)),
                                          self.config.timeout)
        except (httpx.HTTPError, asyncio.TimeoutError) as e:
            return _upstream_failure(e).response()
        if resp.status_code >= 300:
            return (await _upstream_status_error(resp)).response()
        return Response(resp.content, status_code=resp.status_code,
                        media_type=resp.headers.get("content-type", "application/json"))


async def _internal_error(request: Request, exc: Exception) -> Response:
    """A bug in the guard is still an API error (500), never a page of HTML or a traceback."""
    return ApiError(500, f"internal error in the guard: {type(exc).__name__}", "server_error",
                    "internal_error").response()


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    kind = "not_found_error" if status == 404 else "invalid_request_error"
    return ApiError(status, f"{request.method} {request.url.path}: "
                    f"{exc.detail if isinstance(exc, HTTPException) else 'internal error'}", kind).response()


def build_app(config: ProxyConfig) -> Starlette:
    """The ASGI application of the proxy (run it with uvicorn: ``ltlagent guard``)."""
    g = _Guarded(config)
    routes = [Route("/v1/chat/completions", g.chat_completions, methods=["POST"]),
              Route("/v1/models", g.models, methods=["GET"])]
    return Starlette(routes=routes, lifespan=g.lifespan,
                     exception_handlers={HTTPException: _http_error, Exception: _internal_error})
