"""The guard proxy (``ltlagent guard``, issue 20) served by uvicorn on localhost in front of a real
stand-in OpenAI-compatible server (``tests/standin.py``), driven through the official ``openai``
client and raw HTTP: no forbidden call ever reaches the client, in either mode, streamed or not;
every conversation the client keeps passes ``Policy.check``; errors are the API's JSON with the
right status (400, 404, 405, 502, 504), and the proxy keeps serving after an upstream dies."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from ltlagent.guard.proxy import ProxyConfig, build_app  # noqa: E402
from ltlagent.guard.screen import REFUSAL_MARK  # noqa: E402
from ltlagent.logic.policy import Policy  # noqa: E402
from tests.standin import Reply, StandIn, booking_brain, free_port, serve_app  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "specs" / "booking-policy.sexp"
RESULTS = {"find_user": {"user_id": "bob"}, "book": {"booking": "B-2"}}
TOOLS = [{"type": "function", "function": {"name": name, "description": name,
                                           "parameters": {"type": "object", "properties": {}}}}
         for name in ("find_user", "book", "change_booking", "cancel_booking", "transfer_to_human")]


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy.load(SPEC)


_CLIENTS: list[Any] = []


def _client(url: str) -> Any:
    """An ``openai`` client, closed when the module's tests are done (not left to the GC)."""
    client = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
    _CLIENTS.append(client)
    return client


@pytest.fixture(scope="module", autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _CLIENTS:
        _CLIENTS.pop().close()


def _proxy(policy: Policy, upstream: str, mode: str = "refuse", retries: int = 2,
           timeout: float = 10.0) -> Any:
    return serve_app(build_app(ProxyConfig(policy, upstream, mode, retries, timeout)))


def _reply(client: Any, messages: list[dict[str, Any]], stream: bool) -> tuple[dict[str, Any], str]:
    """One assistant message as the client records it (streamed: assembled from the deltas), and
    the proxy's x-ltlagent-guard header (streamed: "stream")."""
    if not stream:
        raw = client.chat.completions.with_raw_response.create(model="standin", messages=messages,
                                                              tools=TOOLS)
        msg = raw.parse().choices[0].message
        out: dict[str, Any] = {"role": "assistant", "content": msg.content}
        if msg.tool_calls:
            out["tool_calls"] = [tc.model_dump(exclude_none=True) for tc in msg.tool_calls]
        return out, raw.headers.get("x-ltlagent-guard", "")
    text, calls = "", {}
    for chunk in client.chat.completions.create(model="standin", messages=messages, stream=True,
                                                tools=TOOLS):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        text += delta.content or ""
        for tc in delta.tool_calls or []:
            c = calls.setdefault(tc.index, {"id": tc.id, "type": "function",
                                            "function": {"name": "", "arguments": ""}})
            c["function"]["name"] += tc.function.name or ""
            c["function"]["arguments"] += tc.function.arguments or ""
    out = {"role": "assistant", "content": text or None}
    if calls:
        out["tool_calls"] = [calls[k] for k in sorted(calls)]
    return out, "stream"


def _converse(client: Any, policy: Policy, user_turns: list[str], stream: bool,
              email: str = "bob@example.com") -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """An agent behind the proxy: it runs every call it receives and records everything; the user
    speaks when the model answers in text. Returns the history, the tools run, the headers."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You book flights."},
                                  {"role": "user", "content": f"Book LH123 for {email}"}]
    ran: list[str] = []
    headers: list[str] = []
    turns = iter(user_turns)
    for _ in range(12):  # bounded
        reply, header = _reply(client, msgs, stream)
        headers.append(header)
        msgs.append(reply)
        for call in reply.get("tool_calls") or []:
            name = call["function"]["name"]
            ran.append(name)
            # the look-up returns the user it was asked for (booking-policy's user-from-lookup)
            result = {"user_id": email.split("@")[0]} if name == "find_user" else RESULTS[name]
            msgs.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})
        assert policy.check(msgs).verdict == "ok", msgs  # the client's conversation is always clean
        if not reply.get("tool_calls"):
            nxt = next(turns, None)
            if nxt is None:
                break
            msgs.append({"role": "user", "content": nxt})
    return msgs, ran, headers


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("mode", ["refuse", "reask"])
def test_a_user_who_never_says_yes_never_gets_a_booking(policy: Policy, mode: str, stream: bool) -> None:
    with StandIn(booking_brain(polite=False)) as up, _proxy(policy, up.url, mode) as url:
        client = _client(url)
        msgs, ran, headers = _converse(client, policy, ["no", "just do it", "book it now!"], stream)
    assert ran == ["find_user"]  # the booking never reached the agent
    refusals = [m for m in msgs if m["role"] == "assistant" and REFUSAL_MARK in (m["content"] or "")]
    assert len(refusals) == 4 and all("confirm-before-write" in m["content"] for m in refusals)
    assert all("tool_calls" not in m for m in refusals)
    if not stream:
        assert headers == ["allowed"] + ["refused"] * 4
    # the proxy keeps no state: the upstream saw the client's messages, plus in reask mode the
    # refused proposals and their refusals (at most max_retries re-asks per request)
    assert len(up.requests) == 1 + 4 * (3 if mode == "reask" else 1)
    if mode == "reask":
        again = up.requests[2]["messages"]
        assert again[-2]["tool_calls"][0]["function"]["name"] == "book"
        assert again[-1]["role"] == "tool" and again[-1]["content"].startswith(REFUSAL_MARK)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_reask_lets_the_model_ask_for_confirmation(policy: Policy, stream: bool) -> None:
    with StandIn(booking_brain(polite=True)) as up, _proxy(policy, up.url, "reask") as url:
        client = _client(url)
        msgs, ran, headers = _converse(client, policy, ["yes"], stream)
    assert ran == ["find_user", "book"]
    asked = [m for m in msgs if m["role"] == "assistant" and "Please confirm" in (m["content"] or "")]
    assert len(asked) == 1 and REFUSAL_MARK not in asked[0]["content"]  # the model's own words
    if not stream:
        assert headers == ["allowed", "reasked", "allowed", "allowed"]
    assert msgs[-1]["content"] == "Your flight is booked, bob@example.com."


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_allowed_calls_of_a_refused_reply_pass_in_refuse_mode(policy: Policy, stream: bool) -> None:
    with StandIn(booking_brain(polite=False, parallel=True)) as up, _proxy(policy, up.url) as url:
        client = _client(url)
        reply, _ = _reply(client, [{"role": "user", "content": "Book LH123 for bob@example.com"}], stream)
    assert [c["function"]["name"] for c in reply["tool_calls"]] == ["find_user"]
    assert reply["content"].startswith("Let me look you up.\n\n" + REFUSAL_MARK + " book was not run")


def test_streamed_text_arrives_before_the_upstream_finishes(policy: Policy) -> None:
    """Text is forwarded as it comes; only tool calls are held back."""
    def brain(body: dict[str, Any]) -> Reply:
        return Reply({"content": "x" * 700})
    with StandIn(brain) as up, _proxy(policy, up.url) as url:
        with httpx.stream("POST", f"{url}/chat/completions", timeout=10,
                          json={"model": "m", "stream": True,
                                "messages": [{"role": "user", "content": "hi"}]}) as r:
            events = [json.loads(line[6:]) for line in r.iter_lines()
                      if line.startswith("data: ") and line != "data: [DONE]"]
    texts = [e["choices"][0]["delta"].get("content") for e in events if e["choices"]]
    assert sum(1 for t in texts if t) == 100 and "".join(t or "" for t in texts) == "x" * 700
    assert events[-1]["usage"]["total_tokens"] == 2


def _post(url: str, content: bytes | str, **kw: Any) -> httpx.Response:
    return httpx.post(f"{url}/chat/completions", content=content, timeout=30,
                      headers={"content-type": "application/json"}, **kw)


def _error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert isinstance(err["message"], str) and err["message"] and "type" in err
    return err  # type: ignore[no-any-return]


def test_bad_requests_get_openai_style_errors(policy: Policy) -> None:
    with StandIn(booking_brain(polite=False)) as up, _proxy(policy, up.url) as url:
        assert _error(_post(url, b"{not json"), 400)["code"] == "invalid_json"
        assert _error(_post(url, b"\xff\xfe"), 400)["code"] == "invalid_json"
        assert _error(_post(url, "[1, 2]"), 400)["code"] == "invalid_body"
        assert _error(_post(url, json.dumps({"model": "m"})), 400)["param"] == "messages"
        bad = {"model": "m", "messages": [{"role": "user", "content": "hi"}, {"content": "no role"}]}
        assert _error(_post(url, json.dumps(bad)), 400)["param"] == "messages[1]"
        for n in (0, 129, "2", True):
            bad_n = {"model": "m", "n": n, "messages": [{"role": "user", "content": "hi"}]}
            assert _error(_post(url, json.dumps(bad_n)), 400)["param"] == "n"
        assert _error(httpx.get(f"{url}/chat/completions"), 405)
        assert _error(httpx.get(f"{url}/nowhere"), 404)
        models = httpx.get(f"{url}/models")
        assert models.status_code == 200 and models.json()["data"][0]["id"] == "standin"
        assert up.requests == []  # none of the bad requests went upstream


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_upstream_down_is_502(policy: Policy, stream: bool) -> None:
    with _proxy(policy, f"http://127.0.0.1:{free_port()}/v1") as url:
        body = {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}]}
        assert _error(_post(url, json.dumps(body)), 502)["code"] == "upstream_unreachable"
        assert _error(httpx.get(f"{url}/models"), 502)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_upstream_slow_is_504_not_a_hang(policy: Policy, stream: bool) -> None:
    def brain(body: dict[str, Any]) -> Reply:
        return Reply({"content": "late"}, delay=4.0)
    with StandIn(brain) as up, _proxy(policy, up.url, timeout=0.5) as url:
        body = {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}]}
        t0 = time.monotonic()
        assert _error(_post(url, json.dumps(body)), 504)["code"] == "upstream_timeout"
        assert time.monotonic() - t0 < 3.5


def test_upstream_errors_are_502_or_passed_on(policy: Policy) -> None:
    statuses = iter([500, 400])

    def brain(body: dict[str, Any]) -> Reply:
        return Reply({"content": ""}, status=next(statuses))
    with StandIn(brain) as up, _proxy(policy, up.url) as url:
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert _error(_post(url, body), 502)["code"] == "upstream_status"
        assert _error(_post(url, body), 400)["message"] == "scripted failure"  # the upstream's own


def test_upstream_killed_mid_stream_then_the_proxy_keeps_serving(policy: Policy) -> None:
    die = iter([3, None])

    def brain(body: dict[str, Any]) -> Reply:
        return Reply({"content": "a long answer that will not finish"}, die_after=next(die))
    with StandIn(brain) as up, _proxy(policy, up.url) as url:
        client = _client(url)
        messages = [{"role": "user", "content": "hi"}]
        with pytest.raises(openai.APIError, match="upstream"):
            for _ in client.chat.completions.create(model="m", messages=messages, stream=True):
                pass
        reply, _ = _reply(client, messages, stream=True)
        assert reply["content"] == "a long answer that will not finish"


def _guard_cli(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ltlagent", "guard", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, **kw)


def test_an_unreadable_spec_stops_the_server_at_start(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sexp"
    bad.write_text("(define p\n  (:states (A (:from user)))\n  (:constraints (c (always B)))))\n")
    proc = _guard_cli("--spec", str(bad), "--upstream", "http://127.0.0.1:9/v1")
    assert proc.returncode == 2 and f"{bad}:" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.split(":")[1].isdigit() and proc.stderr.split(":")[2].isdigit()  # file:line:col
    proc = _guard_cli("--spec", str(tmp_path / "missing.sexp"), "--upstream", "http://127.0.0.1:9/v1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    proc = _guard_cli("--spec", str(SPEC), "--upstream", "127.0.0.1:9")
    assert proc.returncode == 2 and "http://" in proc.stderr


def test_the_command_serves(policy: Policy) -> None:
    port = free_port()
    with StandIn(booking_brain(polite=False)) as up:
        proc = subprocess.Popen([sys.executable, "-m", "ltlagent", "guard", "--spec", str(SPEC),
                                 "--upstream", up.url, "--port", str(port)], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            url = f"http://127.0.0.1:{port}/v1"
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
            client = _client(url)
            msgs, ran, _ = _converse(client, policy, ["no"], stream=False)
            assert ran == ["find_user"] and REFUSAL_MARK in msgs[-1]["content"]
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=20)
    assert "Traceback" not in err


def test_a_history_that_already_breaks_the_policy_gets_no_calls(policy: Policy) -> None:
    """The client wrote a booking itself (outside the proxy): no call can mend the conversation,
    so every call is refused from then on; text still passes."""
    with StandIn(booking_brain(polite=False)) as up, _proxy(policy, up.url) as url:
        client = _client(url)
        history = [{"role": "user", "content": "Book LH123 for bob@example.com"},
                   {"role": "assistant", "content": None, "tool_calls": [
                       {"id": "b", "type": "function", "function": {"name": "book", "arguments": "{}"}}]},
                   {"role": "tool", "tool_call_id": "b", "content": "done"}]
        assert policy.check(history).verdict == "violated"
        reply, header = _reply(client, history, stream=False)
    assert header == "refused" and "tool_calls" not in reply
    assert reply["content"].startswith("Let me look you up.\n\n" + REFUSAL_MARK + " find_user was not run")


def test_concurrent_conversations_do_not_mix(policy: Policy) -> None:
    """Twenty conversations at once through one proxy, half of whose users say yes: each gets the
    booking exactly when its own user said yes, with its own user's name in every call."""
    from concurrent.futures import ThreadPoolExecutor

    def one(k: int) -> tuple[int, list[dict[str, Any]], list[str]]:
        client = _client(url)
        answer = "yes please" if k % 2 == 0 else "no thanks"
        msgs, ran, _ = _converse(client, policy, [answer], stream=bool(k % 3 == 0),
                                 email=f"user{k}@example.com")
        return k, msgs, ran

    with StandIn(booking_brain(polite=False)) as up, _proxy(policy, up.url) as url:
        with ThreadPoolExecutor(10) as pool:
            results = list(pool.map(one, range(20)))
    for k, msgs, ran in results:
        assert ran == (["find_user", "book"] if k % 2 == 0 else ["find_user"]), (k, ran)
        calls = [c for m in msgs if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        mine = {f"user{k}@example.com", f"user{k}"}
        assert all(set(json.loads(c["function"]["arguments"]).values()) & mine for c in calls), (k, calls)
        assert policy.check(msgs).verdict == "ok"


def test_a_bug_in_the_guard_is_a_500_in_the_api_format() -> None:
    class Broken:
        def cursor(self) -> None:
            raise RuntimeError("boom")
    with serve_app(build_app(ProxyConfig(Broken(), "http://127.0.0.1:9/v1"))) as url:  # type: ignore[arg-type]
        r = _post(url, json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
    assert _error(r, 500)["code"] == "internal_error" and "boom" not in r.text


def test_a_taken_port_is_a_usage_error() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        proc = _guard_cli("--spec", str(SPEC), "--upstream", "http://127.0.0.1:9/v1",
                          "--port", str(s.getsockname()[1]))
    assert proc.returncode == 2 and "cannot listen" in proc.stderr and "Traceback" not in proc.stderr
