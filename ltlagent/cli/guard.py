"""``ltlagent guard``: serve the policy proxy (:mod:`ltlagent.guard.proxy`) in front of an
OpenAI-compatible endpoint. The spec is compiled before the server starts, so a spec that cannot be
read stops it there (exit 2, ``file:line:col``); starlette, uvicorn and httpx (the ``guard`` extra)
load only here."""

from __future__ import annotations

import argparse
import socket
import sys
import textwrap

from ltlagent.errors import UsageError
from ltlagent.spec.shadow import shadow_warnings

__all__ = ["add_arguments", "listen_socket", "main"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = textwrap.fill(
        "Serve an OpenAI-compatible endpoint (/v1/chat/completions, /v1/models) that forwards to "
        "UPSTREAM and checks every tool call the model proposes against the spec before the client "
        "sees it: a forbidden call is never returned. Point an agent's base_url at "
        "http://HOST:PORT/v1. With --mcp: serve a proxy in front of an MCP server's Streamable HTTP "
        "endpoint UPSTREAM instead, which checks every tools/call against the spec before the "
        "server sees it (a refusal is a tool result with isError); point the MCP client at "
        "http://HOST:PORT/PATH, PATH being UPSTREAM's.")
    p.add_argument("--spec", required=True, help="the policy: a spec file or bundled spec name")
    p.add_argument("--upstream", required=True, metavar="URL",
                   help="the upstream's base URL, e.g. http://127.0.0.1:8000/v1 (with --mcp: the MCP "
                        "endpoint, e.g. http://127.0.0.1:8000/mcp)")
    p.add_argument("--mcp", action="store_true",
                   help="guard an MCP server (Streamable HTTP) instead of a chat-completions endpoint")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    p.add_argument("--port", type=int, default=8100, help="port to listen on (default: %(default)s)")
    p.add_argument("--on-forbidden", choices=("refuse", "reask"), default="refuse",
                   help="refuse: answer with the refusal as assistant text (and the allowed calls); "
                        "reask: tell the upstream model which rule forbids its call and ask again, "
                        "then refuse (default: %(default)s)")
    p.add_argument("--max-retries", type=int, default=2, metavar="K",
                   help="re-asks per request with --on-forbidden reask (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S",
                   help="seconds the upstream may take for a reply, or between two streamed chunks; "
                        "past it the client gets 504 (default: %(default)s)")
    p.add_argument("--stream-timeout", type=float, default=600.0, metavar="S",
                   help="seconds a streamed request may take as a whole, re-asks included, however "
                        "steadily the upstream sends (default: %(default)s)")
    p.add_argument("--log-level", default="warning",
                   choices=("critical", "error", "warning", "info", "debug"))


def listen_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` for uvicorn. Made with ``IPPROTO_TCP`` as its protocol:
    asyncio sets ``TCP_NODELAY`` only on connections of such a socket, and without it each reply,
    written in two pieces (headers, body), waits on the client's delayed ACK (about 40 ms)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def main(args: argparse.Namespace) -> int:
    from ltlagent.logic.policy import Policy

    policy = Policy.load(args.spec)  # a SpecError here is exit 2 with file:line:col
    for warning in shadow_warnings(policy.spec):  # states that can never match
        print(warning, file=sys.stderr)
    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port}: expected 1-65535")
    try:
        import uvicorn

        from ltlagent.guard.proxy import ProxyConfig, build_app
    except ImportError as e:
        raise UsageError(f"the proxy needs {e.name}", hint="pip install 'ltlagent[guard]'") from None
    if args.timeout <= 0 or args.stream_timeout <= 0:
        raise UsageError("--timeout and --stream-timeout must be > 0")
    if args.mcp:
        from ltlagent.guard.mcp import McpProxyConfig, build_mcp_app

        if args.on_forbidden != "refuse":
            raise UsageError("--on-forbidden reask: with --mcp a refused call is answered by the "
                             "refusal (there is no model to ask again)")
        app = build_mcp_app(McpProxyConfig(policy, args.upstream, args.timeout))
    else:
        app = build_app(ProxyConfig(policy, args.upstream, args.on_forbidden, args.max_retries,
                                    args.timeout, stream_timeout=args.stream_timeout))
    try:  # bound here, so that a taken port is a one-line error (exit 2), not uvicorn's exit 1
        sock = listen_socket(args.host, args.port)
    except OSError as e:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
    # keep-alive longer than clients' own pools keep an idle connection (httpx: 5 s), so that a
    # client never reuses a connection at the moment the proxy closes it (a ReadError under load)
    server = uvicorn.Server(uvicorn.Config(app, log_level=args.log_level, timeout_keep_alive=75))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return 0
