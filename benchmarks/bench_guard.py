"""The guard proxy under load and faults, on localhost only (issue 20).

Processes: the stand-in OpenAI-compatible server (``python -m tests.standin``, a booking agent's
model that never asks for confirmation) and the proxy (``python -m ltlagent guard``), each in a
process of its own; this process drives N concurrent conversations with ``httpx`` (asyncio).

Load: every conversation asks to book a flight for its own user; the model looks the user up (the
agent runs ``find_user``), then proposes ``book`` (refused: no confirmation), the user answers —
"yes" in even-numbered conversations, "no" in the others — and the model proposes ``book`` again:
allowed after the yes, refused after the no. Checked for every conversation: the booking reached
the agent exactly when the user said yes, every tool call names the conversation's own user, and
the conversation passes ``Policy.check`` (state is never mixed between conversations: the proxy
has none). Latency is per request; the same number of requests is also sent straight to the
stand-in at the same concurrency, and "added" is the difference of the percentiles.

Faults: M slow streams are in flight through the proxy when the upstream process is killed
(SIGKILL); every client must get an error (an ``error`` event or a broken stream) within the
timeout, and the proxy must then answer the next requests (502 while the upstream is down, 200
once a new upstream is up on the same port).

Command: ``python benchmarks/bench_guard.py [--conversations 500] [--streams 50]``. Loopback
addresses only, every loop bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ltlagent.logic.policy import Policy  # noqa: E402

SPEC = ROOT / "specs" / "booking-policy.sexp"
#: The tools every request declares (the guard refuses a call of any other name).
TOOLS = [{"type": "function", "function": {"name": n, "description": n,
                                           "parameters": {"type": "object", "properties": {}}}}
         for n in ("find_user", "book")]
RESULTS = {"find_user": lambda email: {"user_id": email.split("@")[0]},
           "book": lambda email: {"booking": "B-" + email.split("@")[0]}}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spawn(args: list[str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                                        if p)}
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _wait(url: str, proc: subprocess.Popen[bytes], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def _standin(port: int, brain: str = "eager") -> subprocess.Popen[bytes]:
    proc = _spawn(["-m", "tests.standin", "--port", str(port), "--brain", brain])
    _wait(f"http://127.0.0.1:{port}/v1", proc)
    return proc


def _proxy(upstream: str, port: int, timeout: float = 120) -> subprocess.Popen[bytes]:
    proc = _spawn(["-m", "ltlagent", "guard", "--spec", str(SPEC), "--upstream", upstream,
                   "--port", str(port), "--timeout", str(timeout)])
    _wait(f"http://127.0.0.1:{port}/v1", proc)
    return proc


async def _request(client: httpx.AsyncClient, url: str, messages: list[dict[str, Any]],
                   stream: bool, times: list[float]) -> dict[str, Any]:
    t0 = time.perf_counter()
    body = {"model": "standin", "messages": messages, "stream": stream, "tools": TOOLS}
    if not stream:
        r = await client.post(f"{url}/chat/completions", json=body)
        if r.status_code != 200:
            raise RuntimeError(f"{r.status_code}: {r.text[:300]}")
        msg = r.json()["choices"][0]["message"]
        times.append(time.perf_counter() - t0)
        return {"role": "assistant", "content": msg.get("content"),
                **({"tool_calls": msg["tool_calls"]} if msg.get("tool_calls") else {})}
    text, calls = "", {}  # type: ignore[var-annotated]
    async with client.stream("POST", f"{url}/chat/completions", json=body) as r:
        if r.status_code != 200:
            raise RuntimeError(f"{r.status_code}: {(await r.aread())[:300]!r}")
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                raise RuntimeError(chunk["error"]["message"])
            for ch in chunk["choices"]:
                d = ch["delta"]
                text += d.get("content") or ""
                for tc in d.get("tool_calls") or []:  # deltas: the id and name, then argument pieces
                    c = calls.setdefault(tc["index"], {"id": tc.get("id"), "type": "function",
                                                       "function": {"name": "", "arguments": ""}})
                    c["function"]["name"] += tc.get("function", {}).get("name") or ""
                    c["function"]["arguments"] += tc.get("function", {}).get("arguments") or ""
    times.append(time.perf_counter() - t0)
    return {"role": "assistant", "content": text or None,
            **({"tool_calls": [calls[k] for k in sorted(calls)]} if calls else {})}


async def _conversation(client: httpx.AsyncClient, url: str, n: int, stream: bool,
                        times: list[float]) -> tuple[list[dict[str, Any]], list[str], str]:
    email = f"user{n}@example.com"
    answer = "yes, go ahead" if n % 2 == 0 else "no, not like that"
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You book flights."},
                                  {"role": "user", "content": f"Book LH123 for {email}"}]
    ran: list[str] = []
    answered = False
    for _ in range(6):  # bounded
        reply = await _request(client, url, msgs, stream, times)
        msgs.append(reply)
        for call in reply.get("tool_calls") or []:
            name = call["function"]["name"]
            args = json.loads(call["function"]["arguments"])
            ran.append(f"{name}:{args.get('email') or args.get('user_id')}")
            msgs.append({"role": "tool", "tool_call_id": call["id"],
                         "content": json.dumps(RESULTS[name](email))})
        if not reply.get("tool_calls"):
            if answered:
                break
            msgs.append({"role": "user", "content": answer})
            answered = True
    return msgs, ran, email


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] * 1000


async def _load(url: str, n: int, stream: bool) -> tuple[list[Any], list[float], float]:
    times: list[float] = []
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(timeout=180, limits=limits) as client:
        t0 = time.perf_counter()
        out = await asyncio.gather(*(_conversation(client, url, k, stream, times) for k in range(n)))
        wall = time.perf_counter() - t0
    return list(out), times, wall


async def _sequential(url: str, k: int) -> list[float]:
    """``k`` requests one at a time (no queueing): the latency of one request alone."""
    times: list[float] = []
    body = [{"role": "system", "content": "You book flights."},
            {"role": "user", "content": "Book LH123 for solo@example.com"}]
    async with httpx.AsyncClient(timeout=60) as client:
        for _ in range(k):
            await _request(client, url, body, False, times)
    return times


def _serve_minimal(port: int, nodelay: bool) -> None:
    """A Starlette app under uvicorn that answers one JSON line, on a socket bound as
    ``ltlagent guard`` binds it (``nodelay``) or as it did before issue 29 (no ``IPPROTO_TCP``)."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from ltlagent.cli.guard import listen_socket

    async def answer(request: Request) -> JSONResponse:
        await request.body()
        return JSONResponse({"ok": True})

    if nodelay:
        sock = listen_socket("127.0.0.1", port)
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
    app = Starlette(routes=[Route("/v1/models", answer, methods=["GET", "POST"])])
    uvicorn.Server(uvicorn.Config(app, log_level="error")).run(sockets=[sock])


def _socket_latency(k: int) -> str:
    """p50 and p99 of ``k`` requests to the minimal app, with and without TCP_NODELAY."""
    out = []
    for nodelay in (True, False):
        port = _port()
        proc = _spawn([__file__, "--serve-minimal", str(port)] + ([] if nodelay else ["--old-socket"]))
        try:
            _wait(f"http://127.0.0.1:{port}/v1", proc)
            times = []
            with httpx.Client() as client:
                for _ in range(k):
                    t0 = time.perf_counter()
                    client.post(f"http://127.0.0.1:{port}/v1/models", content=b"{}")
                    times.append(time.perf_counter() - t0)
        finally:
            proc.terminate()
            proc.wait(10)
        out.append(f"{'TCP_NODELAY' if nodelay else 'no TCP_NODELAY (the old socket)'}: p50 "
                   f"{_pct(times, .5):.2f} p99 {_pct(times, .99):.2f}")
    return f"a minimal uvicorn app, {k} requests one at a time (ms): " + "; ".join(out)


def _cpu_seconds(proc: subprocess.Popen[bytes]) -> float:
    """User + system CPU time of a child process so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _check(policy: Policy, results: list[Any], guarded: bool) -> int:
    """Every conversation is its own, and passes the policy; returns the number checked."""
    for k, (msgs, ran, email) in enumerate(results):
        user = email.split("@")[0]
        assert all(r.split(":", 1)[1] in (email, user) for r in ran), (k, ran)
        if guarded:
            assert policy.check(msgs).verdict == "ok", (k, policy.check(msgs).to_dict())
            booked = [r for r in ran if r.startswith("book:")]
            assert booked == ([f"book:{user}"] if k % 2 == 0 else []), (k, ran)
    return len(results)


async def _fault(proxy_url: str, upstream_port: int, upstream: subprocess.Popen[bytes],
                 m: int) -> dict[str, Any]:
    """Kill the upstream while ``m`` slow streams are in flight through the proxy."""
    outcomes: list[str] = []

    async def one(client: httpx.AsyncClient) -> None:
        try:
            await _request(client, proxy_url, [{"role": "user", "content": "tell me a story"}], True, [])
            outcomes.append("completed")
        except (RuntimeError, httpx.HTTPError) as e:
            outcomes.append(f"error:{type(e).__name__}")

    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=m)) as client:
        tasks = [asyncio.create_task(one(client)) for _ in range(m)]
        await asyncio.sleep(1.0)  # the streams are under way (each takes about 3 s)
        t_kill = time.perf_counter()
        upstream.send_signal(signal.SIGKILL)
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
        settle = time.perf_counter() - t_kill
        down = await client.post(f"{proxy_url}/chat/completions",
                                 json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    upstream.wait(10)
    new = _standin(upstream_port)
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            up = await client.post(f"{proxy_url}/chat/completions",
                                   json={"model": "m", "messages": [
                                       {"role": "user", "content": "Book LH1 for z@example.com"}]})
    finally:
        new.kill()
        new.wait(10)
    return {"streams": m, "errors": sum(o.startswith("error") for o in outcomes),
            "completed": outcomes.count("completed"), "all_done_s": settle,
            "while_down": down.status_code, "after_restart": up.status_code}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--conversations", type=int, default=500)
    ap.add_argument("--streams", type=int, default=50)
    ap.add_argument("--sequential", type=int, default=200, help="requests sent one at a time")
    ap.add_argument("--modes", default="plain,stream", help="comma-separated: plain, stream")
    ap.add_argument("--parts", default="sequential,load,fault",
                    help="comma-separated: socket, sequential, load, fault")
    ap.add_argument("--serve-minimal", type=int, metavar="PORT", help=argparse.SUPPRESS)
    ap.add_argument("--old-socket", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_minimal:
        _serve_minimal(args.serve_minimal, not args.old_socket)
        return
    parts = set(args.parts.split(","))
    if "socket" in parts:
        print(_socket_latency(min(args.sequential, 5000)) + "\n")
        if parts == {"socket"}:
            return
    n = min(args.conversations, 1000)
    policy = Policy.load(SPEC)
    up_port, proxy_port = _port(), _port()
    upstream = _standin(up_port)
    up_url = f"http://127.0.0.1:{up_port}/v1"
    proxy = _proxy(up_url, proxy_port)
    proxy_url = f"http://127.0.0.1:{proxy_port}/v1"
    try:
        if "sequential" in parts:
            k = min(args.sequential, 5000)
            direct_t = asyncio.run(_sequential(up_url, k))
            cpu0 = _cpu_seconds(proxy)
            proxy_t = asyncio.run(_sequential(proxy_url, k))
            cpu = (_cpu_seconds(proxy) - cpu0) / k * 1000
            print(f"{k} requests one at a time (ms): direct p50 {_pct(direct_t, .5):.2f} p99 "
                  f"{_pct(direct_t, .99):.2f}; through the proxy p50 {_pct(proxy_t, .5):.2f} p99 "
                  f"{_pct(proxy_t, .99):.2f}; added p50 {_pct(proxy_t, .5) - _pct(direct_t, .5):.2f} "
                  f"p99 {_pct(proxy_t, .99) - _pct(direct_t, .99):.2f}; the proxy's CPU per request "
                  f"{cpu:.2f} ms\n")
        if "load" in parts:
            print(f"{n} concurrent conversations, 2-core machine shared with other work; ms per request")
            print("| mode | path | requests | req/s | p50 ms | p99 ms | added p50 | added p99 | checked |")
            print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        modes = [m == "stream" for m in args.modes.split(",")]
        for stream in (modes if "load" in parts else ()):
            direct, d_times, d_wall = asyncio.run(_load(up_url, n, stream))
            _check(policy, direct, guarded=False)
            guarded, g_times, g_wall = asyncio.run(_load(proxy_url, n, stream))
            checked = _check(policy, guarded, guarded=True)
            mode = "stream" if stream else "plain"
            for label, times, wall, ok in (("direct", d_times, d_wall, "-"),
                                           ("proxy", g_times, g_wall, str(checked))):
                added = ("", "") if label == "direct" else (
                    f"{_pct(g_times, .5) - _pct(d_times, .5):.1f}",
                    f"{_pct(g_times, .99) - _pct(d_times, .99):.1f}")
                print(f"| {mode} | {label} | {len(times)} | {len(times) / wall:.0f} | "
                      f"{_pct(times, .5):.1f} | {_pct(times, .99):.1f} | {added[0]} | {added[1]} | {ok} |")
        if "fault" not in parts:
            return
        upstream.kill()
        upstream.wait(10)
        upstream = _standin(up_port, "slow-stream")
        fault = asyncio.run(_fault(proxy_url, up_port, upstream, min(args.streams, 500)))
        print(f"\nupstream killed with {fault['streams']} streams in flight: {fault['errors']} got an "
              f"error, {fault['completed']} completed, all finished {fault['all_done_s']:.2f} s after "
              f"the kill; next request while down: {fault['while_down']}, after a restart: "
              f"{fault['after_restart']}; proxy alive: {proxy.poll() is None}")
    finally:
        for p in (proxy, upstream):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:  # still draining connections: stop it
                    p.kill()
                    p.wait(10)


if __name__ == "__main__":
    main()
