"""A small OpenAI-compatible server for the guard's tests and benchmark: a real HTTP server on
127.0.0.1 (``http.server``, one thread per connection) whose "model" is a Python function of the
request (a *brain*), not a mock of any client library. It speaks ``/v1/chat/completions`` (plain and
``stream: true`` server-sent events, tool calls split into deltas as real servers send them),
``/v1/completions`` and ``/v1/models``, and can be made slow or to drop a stream mid-way.

Also: :func:`serve_app` runs an ASGI app (the guard's proxy) under uvicorn in a thread, and the
brains of a booking agent that never asks for confirmation (``eager_booker``) and one that asks
when refused (``polite_booker``).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REFUSAL_MARK = "[ltlagent guard]"


@dataclass
class Reply:
    """What the stand-in answers: an assistant message (or completion text), after ``delay``
    seconds; streamed, the connection is dropped after ``die_after`` events."""

    message: dict[str, Any]
    delay: float = 0.0
    die_after: int | None = None
    status: int = 200
    chunk_delay: float = 0.0  # streamed: seconds between events
    body: bytes | None = None  # plain: this body, byte for byte (a crafted reply)
    events: list[bytes] | None = None  # streamed: these ``data:`` payloads, then ``[DONE]``
    ping_for: float = 0.0  # streamed: an SSE comment every 0.1 s for this long, before the reply


Brain = Callable[[dict[str, Any]], Reply]


def _chunks(message: Mapping[str, Any], cid: str) -> Iterator[dict[str, Any]]:
    """The stream of one reply: role, text in pieces, each call's id and name, then its arguments in
    pieces, then the finish reason (the shape vLLM and OpenAI send)."""
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": cid, "object": "chat.completion.chunk", "created": 0, "model": "standin",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    text = message.get("content") or ""
    for i in range(0, len(text), 7):
        yield chunk({"content": text[i:i + 7]})
    calls = message.get("tool_calls") or []
    for k, call in enumerate(calls):
        fn = call["function"]
        yield chunk({"tool_calls": [{"index": k, "id": call["id"], "type": "function",
                                     "function": {"name": fn["name"], "arguments": ""}}]})
        args = fn["arguments"]
        for i in range(0, len(args), 5):
            yield chunk({"tool_calls": [{"index": k, "function": {"arguments": args[i:i + 5]}}]})
    yield chunk({}, "tool_calls" if calls else "stop")
    yield {"id": cid, "object": "chat.completion.chunk", "created": 0, "model": "standin",
           "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the load test opens hundreds of connections at once
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-reply (the guard refusing a stream early) is no error."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class StandIn:
    """The server; ``requests`` holds every chat request body received, in order."""

    def __init__(self, brain: Brain, port: int = 0) -> None:
        self.brain = brain
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._count = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms ACK stall

            def log_message(self, *args: object) -> None:
                pass

            def _json(self, status: int, payload: object) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self._headers_buffer.append(b"\r\n" + data)  # type: ignore[attr-defined]
                self.flush_headers()  # headers and body in one write

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    self._json(200, {"object": "list", "data": [{"id": "standin", "object": "model"}]})
                else:
                    self._json(404, {"error": {"message": "not found", "type": "not_found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                if self.path not in ("/v1/chat/completions", "/v1/completions"):
                    self._json(404, {"error": {"message": "not found", "type": "not_found"}})
                    return
                with outer._lock:
                    outer.requests.append(body)
                    outer._count += 1
                    cid = f"chatcmpl-{outer._count}"
                try:
                    reply = outer.brain(body)
                except Exception as e:  # a broken script is a 500, not a dropped connection
                    self._json(500, {"error": {"message": f"brain: {e!r}", "type": "server_error"}})
                    return
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status != 200:
                    self._json(reply.status, {"error": {"message": "scripted failure",
                                                        "type": "server_error"}})
                    return
                if self.path == "/v1/completions":
                    self._json(200, {"id": cid, "object": "text_completion", "model": "standin",
                                     "choices": [{"index": 0, "text": reply.message["content"],
                                                  "finish_reason": reply.message.get("finish_reason",
                                                                                     "stop")}]})
                    return
                msg = {"role": "assistant", "content": reply.message.get("content"),
                       **({"tool_calls": reply.message["tool_calls"]}
                          if reply.message.get("tool_calls") else {})}
                if reply.body is not None and not body.get("stream"):
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(reply.body)))
                    self._headers_buffer.append(b"\r\n" + reply.body)  # type: ignore[attr-defined]
                    self.flush_headers()
                    return
                if not body.get("stream"):
                    self._json(200, {"id": cid, "object": "chat.completion", "created": 0,
                                     "model": "standin",
                                     "choices": [{"index": 0, "message": msg, "finish_reason":
                                                  "tool_calls" if msg.get("tool_calls") else "stop"}],
                                     "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                               "total_tokens": 2}})
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                until = time.monotonic() + reply.ping_for
                while time.monotonic() < until:  # comments only: no event, no byte of the reply
                    try:
                        self._chunk(b": ping\n\n")
                    except OSError:  # the reader gave up
                        return
                    time.sleep(0.1)
                if reply.events is not None:
                    for payload in reply.events:
                        self._chunk(b"data: " + payload + b"\n\n")
                    self._chunk(b"data: [DONE]\n\n")
                    self._chunk(b"")
                    return
                for n, chunk in enumerate(_chunks(msg, cid)):
                    if reply.die_after is not None and n >= reply.die_after:
                        self.connection.shutdown(socket.SHUT_RDWR)  # the server dies mid-stream
                        return
                    self._chunk(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    if reply.chunk_delay:
                        time.sleep(reply.chunk_delay)
                self._chunk(b"data: [DONE]\n\n")
                self._chunk(b"")

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

        self.server = _Server(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> StandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def serve_app(app: Any) -> Iterator[str]:
    """Run an ASGI app under uvicorn on a free loopback port; yields its base URL (``…/v1``)."""
    import uvicorn

    from ltlagent.cli.guard import listen_socket

    sock = listen_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="on",
                                           timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the app did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def free_port() -> int:
    """A loopback port nothing listens on (for an upstream that is down)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- brains: a booking agent that does not know the policy ------------------------------------------
def _call(name: str, args: dict[str, Any], n: int) -> dict[str, Any]:
    return {"id": f"call_{name}_{n}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}


def _email(messages: list[dict[str, Any]]) -> str:
    for m in messages:
        if m.get("role") == "user":
            found = re.search(r"[\w.]+@[\w.]+", str(m.get("content") or ""))
            if found:
                return found.group(0)
    return "nobody@example.com"


def booking_brain(polite: bool, parallel: bool = False) -> Brain:
    """A booking agent's model that reads only the request: it looks the user up, then books, and
    says it is done once a booking result is in. ``polite``: after a refusal it asks the user to
    confirm instead of trying again; when the last user turn says yes it books. ``parallel``: it
    proposes the look-up and the booking in one reply."""
    def brain(body: dict[str, Any]) -> Reply:
        msgs = body["messages"]
        n = len(msgs)
        email = _email(msgs)
        results = [str(m.get("content") or "") for m in msgs if m.get("role") == "tool"]
        if any(r.startswith('{"booking"') for r in results):
            return Reply({"content": f"Your flight is booked, {email}."})
        looked = any(r.startswith('{"user_id"') for r in results)
        book = _call("book", {"user_id": email.split("@")[0], "flight": "LH123"}, n)
        if not looked:
            calls = [_call("find_user", {"email": email}, n)] + ([book] if parallel else [])
            return Reply({"content": "Let me look you up.", "tool_calls": calls})
        last = msgs[-1]
        refused = (last.get("role") == "tool" and str(last.get("content")).startswith(REFUSAL_MARK)) or \
            (last.get("role") == "assistant" and REFUSAL_MARK in str(last.get("content")))
        said_yes = last.get("role") == "user" and re.search(r"(?i)\byes\b", str(last.get("content")))
        if polite and refused and not said_yes:
            return Reply({"content": "I will book LH123 for you. Shall I go ahead? Please confirm."})
        return Reply({"content": None, "tool_calls": [book]})
    return brain


def main() -> None:
    """``python -m tests.standin --port P [--brain eager|polite|slow-stream]``: serve until killed
    (the benchmark runs the stand-in in a process of its own, so that it can be killed)."""
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--brain", choices=("eager", "polite", "slow-stream"), default="eager")
    args = p.parse_args()
    brain = booking_brain(polite=args.brain == "polite")
    if args.brain == "slow-stream":
        def brain(body: dict[str, Any]) -> Reply:
            return Reply({"content": "a long answer " * 20}, chunk_delay=0.05)
    StandIn(brain, args.port).server.serve_forever()


if __name__ == "__main__":
    main()
