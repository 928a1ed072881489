"""The guard as an HTTP proxy: an OpenAI-compatible server in front of another one (issue 20;
docs/design.md §13).

An existing agent points its ``base_url`` at the proxy. ``POST /v1/chat/completions`` is forwarded
upstream; every choice of the reply is judged (:func:`ltlagent.guard.screen.screen`, with the
request's declared ``tools``: the one fail-closed reading of a reply's shape) after the
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
``GET /v1/models`` is passed through. Limits are enforced while reading (the body's size as it
arrives, strict JSON, a whole stream's deadline). Errors are the API's JSON (``{"error": {...}}``):
a bad request 400 (413 too long), an upstream that cannot be reached or answers what the guard
cannot judge 502, one that is too slow 504 (for a stream that already began, an ``error`` event,
then the stream ends).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ltlagent.errors import LogError, UsageError
from ltlagent.guard.screen import (
    Refusal,
    Screening,
    declared_tools,
    reask_messages,
    refusal_text,
    screen,
    settle,
    strict_json,
)
from ltlagent.guard.stream import DONE, MAX_CHOICES, ReplyAssembler, sse, sse_events
from ltlagent.logic.policy import Policy, PolicyCursor

__all__ = ["ProxyConfig", "build_app", "ON_FORBIDDEN", "MAX_BODY_BYTES"]

#: What the proxy may do with a reply that proposes a forbidden call.
ON_FORBIDDEN = ("refuse", "reask")

#: The largest request body accepted (a conversation of a few MB is already very long), and the
#: largest upstream reply read (a whole plain reply, or a whole stream).
MAX_BODY_BYTES = 32 << 20

#: The longest line of an upstream stream (one event).
MAX_EVENT_BYTES = 4 << 20

#: Headers passed on to the upstream (the key the client holds is the upstream's key).
FORWARDED_HEADERS = ("authorization", "openai-organization", "openai-project")

Message = dict[str, object]


@dataclass(frozen=True)
class ProxyConfig:
    """What one proxy serves: the compiled policy, the upstream base URL (``…/v1``), the reaction
    to a forbidden call, the bound on re-asks, the upstream timeouts (seconds: ``timeout`` for the
    whole of a plain reply and for each read of a stream, ``stream_timeout`` for the whole of a
    streamed request, re-asks included) and the largest request body (bytes)."""

    policy: Policy
    upstream: str
    on_forbidden: str = "refuse"
    max_retries: int = 2
    timeout: float = 60.0
    connect_timeout: float = 5.0
    stream_timeout: float = 600.0
    max_body_bytes: int = MAX_BODY_BYTES

    def __post_init__(self) -> None:
        if self.on_forbidden not in ON_FORBIDDEN:
            raise UsageError(f"on_forbidden must be one of {', '.join(ON_FORBIDDEN)}, "
                             f"not {self.on_forbidden!r}")
        if self.max_retries < 0 or min(self.timeout, self.connect_timeout, self.stream_timeout) <= 0:
            raise UsageError("max_retries must be ≥ 0 and the timeouts > 0")
        if self.max_body_bytes <= 0:
            raise UsageError("max_body_bytes must be > 0")
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


def _bad_reply(why: str) -> ApiError:
    """An upstream reply the guard cannot judge: 502, never a pass."""
    return ApiError(502, f"the upstream reply cannot be judged: {why}", "upstream_error",
                    "upstream_bad_reply")


def _upstream_failure(e: Exception) -> ApiError:
    """A transport failure talking to the upstream, as the error the client gets."""
    if isinstance(e, (httpx.TimeoutException, asyncio.TimeoutError)):
        return ApiError(504, f"the upstream did not answer in time ({type(e).__name__})",
                        "upstream_error", "upstream_timeout")
    return ApiError(502, f"the upstream could not be reached: {type(e).__name__}: {e}",
                    "upstream_error", "upstream_unreachable")


async def _upstream_status_error(resp: httpx.Response) -> ApiError:
    """A non-2xx upstream answer: its own 4xx errors are the client's to see; anything else is 502."""
    body = b""
    async for piece in resp.aiter_bytes():  # the first 4000 bytes, however long the body
        body += piece
        if len(body) >= 4000:
            break
    body = body[:4000]
    try:
        detail = strict_json(body)
    except ValueError:
        detail = None
    if 400 <= resp.status_code < 500 and isinstance(detail, dict) and isinstance(detail.get("error"), dict):
        err = detail["error"]
        code, param = err.get("code"), err.get("param")
        return ApiError(resp.status_code, str(err.get("message", "")), str(err.get("type") or
                        "invalid_request_error"), code if isinstance(code, str) else None,
                        param if isinstance(param, str) else None)
    text = body.decode("utf-8", "replace").strip()
    return ApiError(502, f"the upstream answered {resp.status_code}: {text[:500]}", "upstream_error",
                    "upstream_status")


def _refused_content(content: str, refusals: Sequence[Refusal]) -> str:
    """``content`` (kept whole, so that what a stream already sent is a prefix) and the refusals."""
    return (content + "\n\n" if content.strip() else content) + refusal_text(refusals)


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
    async def _body(self, request: Request) -> bytes:
        """The request body, refused (413) as soon as it is longer than the limit: a declared
        length is checked first, and a chunked body is counted while it is read."""
        limit = self.config.max_body_bytes
        too_long = ApiError(413, f"request body over {limit} bytes", code="body_too_large")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise too_long
        parts: list[bytes] = []
        size = 0
        async for piece in request.stream():
            size += len(piece)
            if size > limit:
                raise too_long
            parts.append(piece)
        return b"".join(parts)

    async def _read(self, request: Request) -> tuple[Message, list[Message], PolicyCursor]:
        body = await self._body(request)
        try:
            data = strict_json(body)
        except ValueError as e:
            raise ApiError(400, f"the request body is not JSON the guard reads: {e}",
                           code="invalid_json") from None
        if not isinstance(data, dict):
            raise ApiError(400, "the request body must be a JSON object", code="invalid_body")
        messages = data.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "'messages' must be a non-empty list of messages", param="messages",
                           code="invalid_messages")
        n = data.get("n", 1)
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or
                              not 1 <= n <= MAX_CHOICES):
            raise ApiError(400, f"'n' must be an integer from 1 to {MAX_CHOICES}", param="n",
                           code="invalid_n")
        cursor = self.config.policy.cursor()
        try:
            cursor.push_messages(messages)
        except LogError as e:
            where = f"messages[{e.index}]" if e.index is not None else "messages"
            raise ApiError(400, f"{where}: {e}", param=where, code="malformed_message") from None
        return data, messages, cursor

    def _headers(self, request: Request) -> dict[str, str]:
        return {k: v for k, v in request.headers.items() if k.lower() in FORWARDED_HEADERS}

    async def _complete(self, body: Message, headers: Mapping[str, str]) -> tuple[Message, list[Message]]:
        """One plain completion upstream, bounded by the timeout as a whole and by the size limit
        while it is read; returns the reply and its choices (each with a message object)."""
        client = self._client()
        req = client.build_request("POST", "chat/completions", json=body, headers=headers)
        try:
            async with asyncio.timeout(self.config.timeout):
                resp = await client.send(req, stream=True)
                try:
                    if resp.status_code >= 300:
                        raise await _upstream_status_error(resp)
                    raw = bytearray()
                    async for piece in resp.aiter_bytes():
                        raw += piece
                        if len(raw) > MAX_BODY_BYTES:
                            raise _bad_reply(f"longer than {MAX_BODY_BYTES} bytes")
                finally:
                    await resp.aclose()
        except (httpx.HTTPError, TimeoutError) as e:
            raise _upstream_failure(e) from None
        try:
            data = strict_json(bytes(raw))
        except ValueError as e:
            raise _bad_reply(f"not JSON ({e})") from None
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(data, dict) or not isinstance(choices, list) or not choices:
            raise _bad_reply("not a chat completion (no choices)")
        if len(choices) > MAX_CHOICES:
            raise _bad_reply(f"more than {MAX_CHOICES} choices")
        if not all(isinstance(ch, dict) and isinstance(ch.get("message"), dict) for ch in choices):
            raise _bad_reply("a choice without a message object")
        return data, choices

    def _screen(self, cursor: PolicyCursor, message: object, index: int,
                tools: Collection[str]) -> Screening:
        try:
            return screen(cursor, message, index, tools=tools)
        except LogError as e:
            raise _bad_reply(f"not a chat message ({e})") from None

    def _settle(self, cursor: PolicyCursor, s: Screening, text: str, index: int,
                tools: Collection[str]) -> tuple[Message, list[Refusal]]:
        """The refused reply ``s`` as the client gets it: ``text``, its refusal lines, the calls
        still allowed after that text (and the refusal lines of any dropped on the way)."""
        full = _refused_content(text, s.refusals)
        final, dropped = settle(cursor, s.kept(full), index, tools=tools)
        if dropped:
            full = _refused_content(full, dropped)
            final, _ = settle(cursor, {"role": "assistant", "content": full}, index, tools=tools)
        return final.kept(full), dropped

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
        tools = declared_tools(data)
        asked = list(messages)
        refused: list[Refusal] = []
        attempts = 1 + (c.max_retries if c.on_forbidden == "reask" else 0)
        for attempt in range(1, attempts + 1):
            reply, choices = await self._complete({**data, "messages": asked}, headers)
            found = [self._screen(cursor, ch["message"], len(messages), tools) for ch in choices]
            if all(s.ok for s in found):
                if attempt > 1:
                    reply["ltlagent"] = {"refused": [r.to_dict() for r in refused], "attempts": attempt}
                return JSONResponse(reply, headers={"x-ltlagent-guard": "allowed" if attempt == 1
                                                    else "reasked"})
            for s in found:
                refused.extend(s.refusals)
            if attempt < attempts:
                asked += reask_messages(next(s for s in found if not s.ok))
        for ch, s in zip(choices, found):
            if s.ok:
                continue
            new, dropped = self._settle(cursor, s, s.text(), len(messages), tools)
            refused.extend(dropped)
            ch["message"] = new
            ch["finish_reason"] = "tool_calls" if "tool_calls" in new else \
                "function_call" if "function_call" in new else "stop"
        reply["ltlagent"] = {"refused": [r.to_dict() for r in refused], "attempts": attempts}
        return JSONResponse(reply, headers={"x-ltlagent-guard": "refused"})

    async def _open(self, body: Message, headers: Mapping[str, str], deadline: float) -> httpx.Response:
        """Start a streamed completion upstream; errors before the first byte are raised."""
        client = self._client()
        req = client.build_request("POST", "chat/completions", json=body, headers=headers)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(min(self.config.timeout, deadline - loop.time())):
                resp = await client.send(req, stream=True)
        except (httpx.HTTPError, TimeoutError) as e:
            raise _upstream_failure(e) from None
        if resp.status_code >= 300:
            try:
                raise await _upstream_status_error(resp)
            finally:
                await resp.aclose()
        return resp

    async def _stream(self, data: Message, messages: list[Message], cursor: PolicyCursor,
                      headers: Mapping[str, str]) -> Response:
        deadline = asyncio.get_running_loop().time() + self.config.stream_timeout
        first = await self._open({**data, "messages": messages}, headers, deadline)
        return StreamingResponse(self._events(first, data, messages, cursor, headers, deadline),
                                 media_type="text/event-stream",
                                 headers={"cache-control": "no-cache", "x-accel-buffering": "no"})

    async def _events(self, resp: httpx.Response, data: Message, messages: list[Message],
                      cursor: PolicyCursor, headers: Mapping[str, str],
                      deadline: float) -> AsyncIterator[bytes]:
        c = self.config
        tools = declared_tools(data)
        asked = list(messages)
        before: dict[int, str] = {}  # each choice's text the client received on earlier attempts
        attempts = 1 + (c.max_retries if c.on_forbidden == "reask" else 0)
        refused: list[Refusal] = []
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                try:
                    resp = await self._open({**data, "messages": asked}, headers, deadline)
                except ApiError as e:
                    yield sse(e.payload())
                    return
            asm = ReplyAssembler()
            try:
                async for chunk in self._chunks(resp, asm, deadline):
                    try:
                        forward = asm.feed(chunk)
                    except ValueError as e:
                        raise _bad_reply(f"a malformed chunk ({e})") from None
                    for out in forward:
                        yield sse(out)
                if not asm.choices:
                    raise _bad_reply("a stream without a choice")
                found = {i: self._screen(cursor, m, len(messages), tools)
                         for i, m in asm.messages(before).items()}
            except ApiError as e:
                yield sse(e.payload())
                return
            finally:
                await resp.aclose()
            for i in found:
                before[i] = before.get(i, "") + asm.text(i)
            if all(s.ok for s in found.values()):
                for i, s in found.items():
                    for chunk in asm.call_chunks(s.kept(), i):
                        yield sse(chunk)
                    kept = s.kept()
                    end = asm.chunk({}, asm.finish_reason(i) or ("tool_calls" if "tool_calls" in kept
                                                                 else "stop"), i)
                    if refused:  # allowed after a re-ask: say what was refused on the way
                        end["ltlagent"] = {"refused": [r.to_dict() for r in refused],
                                           "attempts": attempt}
                    yield sse(end)
                if asm.usage is not None:
                    yield sse({**asm.chunk({}), "choices": [], "usage": asm.usage})
                yield DONE
                return
            for s in found.values():
                refused.extend(s.refusals)
            if attempt < attempts:
                asked += reask_messages(next(s for s in found.values() if not s.ok))
        for i, s in found.items():
            if s.ok:
                message: Message = s.kept()
            else:
                message, dropped = self._settle(cursor, s, before[i], len(messages), tools)
                refused.extend(dropped)
                content = message.get("content")
                added = content[len(before[i]):] if isinstance(content, str) else ""
                yield sse(asm.chunk({"content": added}, index=i))
            for chunk in asm.call_chunks(message, i):
                yield sse(chunk)
            reason = "tool_calls" if "tool_calls" in message else \
                "function_call" if "function_call" in message else "stop"
            end = asm.chunk({}, reason, i)
            end["ltlagent"] = {"refused": [r.to_dict() for r in refused], "attempts": attempts}
            yield sse(end)
        yield DONE

    async def _chunks(self, resp: httpx.Response, asm: ReplyAssembler,
                      deadline: float) -> AsyncIterator[Mapping[str, object]]:
        """The JSON chunks of an upstream stream until ``[DONE]``; a broken, malformed, stalled or
        endless stream raises :class:`ApiError` (each read is bounded by the client's read timeout,
        the whole stream by ``deadline``, comments included)."""
        events = sse_events(resp.aiter_bytes(), MAX_BODY_BYTES, MAX_EVENT_BYTES)
        try:
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        payload = await anext(events)
                except StopAsyncIteration:
                    break
                if payload == "[DONE]":
                    asm.done = True
                    return
                try:
                    chunk = strict_json(payload)
                except ValueError as e:
                    raise _bad_reply(f"an event that is not JSON ({e})") from None
                if not isinstance(chunk, dict):
                    raise _bad_reply("an event that is not an object")
                if "error" in chunk:
                    err = chunk["error"]
                    msg = err.get("message") if isinstance(err, dict) else err
                    raise ApiError(502, f"the upstream failed mid-stream: {msg}", "upstream_error",
                                   "upstream_stream_error")
                yield chunk
        except TimeoutError:
            raise ApiError(504, f"the upstream stream went on past --stream-timeout "
                           f"({self.config.stream_timeout:g} s)", "upstream_error",
                           "upstream_timeout") from None
        except (httpx.HTTPError, UnicodeDecodeError, ValueError) as e:
            if isinstance(e, httpx.HTTPError):
                raise _upstream_failure(e) from None
            raise _bad_reply(str(e)) from None
        finally:
            await events.aclose()
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
