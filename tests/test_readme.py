"""README.md runs as shown (issue 21): every ``ltlagent`` command of its shell blocks (``run`` on the
bundled react-tiny instead of SmolLM2, the slow default), every spec it shows, and its Python
examples that need no vLLM, each from a folder other than the repository's where it says so. A
changed option, spec name or API that the README still shows fails here."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from ltlagent import parse_spec

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", README, flags=re.S | re.M)


def _commands() -> list[str]:
    """The ``ltlagent …`` lines of the shell blocks, continuation lines joined, comments dropped."""
    out = []
    for block in _blocks("sh"):
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith("ltlagent ") and line.split()[1] not in SERVERS:
                out.append(shlex.join(shlex.split(line, comments=True)))
    return out


#: vLLM's snippets run in tests/test_vllm_*.py (make test-vllm); the guard's need an endpoint and
#: run against a stand-in server in tests/test_guard*.py (the MCP client's: tests/test_guard_mcp.py).
SNIPPETS = [b for b in _blocks("python") if "vllm" not in b and "ltlagent.guard" not in b
            and "mcp.client" not in b]
#: What a command's exit status must be: README's own words (0 ok, 1 negative verdict; the
#: example chat log holds planted violations).
EXPECT = {"check-equiv": 1, "check-log": 1}
#: Commands that start a server (tested in tests/test_guard_proxy.py, not here).
SERVERS = ("guard",)
COMMANDS = _commands()


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "NO_COLOR": "1"}


def test_the_readme_shows_what_this_test_runs() -> None:
    assert len(COMMANDS) >= 9 and any(c.startswith("ltlagent run ") for c in COMMANDS)
    assert len(SNIPPETS) >= 3


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command(command: str, tmp_path: Path) -> None:
    words = shlex.split(command)
    if words[1] == "run":  # the default model takes a minute: the same command on the bundled one
        words += ["--model", "react-tiny", "--max-new-tokens", "160"]
    if ">" in words:  # writes a file: in a scratch folder, with a bundled spec name
        at = words.index(">")
        words, target, cwd = words[:at], tmp_path / words[at + 1], tmp_path
    else:
        target, cwd = None, ROOT  # README: "run these from the repository's root"
    p = subprocess.run([sys.executable, "-m", "ltlagent", *words[1:]], cwd=cwd, env=_env(),
                       capture_output=True, text=True, timeout=600)
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == EXPECT.get(words[1], 0) or (words[1] == "run" and p.returncode == 1), \
        (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert p.stdout.strip()
    if target is not None:
        target.write_text(p.stdout)
        assert p.stdout.startswith("digraph")


def test_readme_specs_parse() -> None:
    for block in _blocks("lisp"):
        assert parse_spec(block, "README.md").states


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_readme_python_runs_from_anywhere(index: int, tmp_path: Path) -> None:
    code = SNIPPETS[index]
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    # what the README's comments say the examples print
    if "Agent.from_spec" in code:
        assert p.stdout.splitlines()[0] == "84 complete accepted", p.stdout
    if "logits_processor(" in code:
        assert "Action: Calculator" in p.stdout, p.stdout
    if "ChatAgent(" in code:
        assert p.stdout.split()[0] == "ok", p.stdout
    if "@tool" in code:
        assert p.stdout.startswith("lookup_price: Price of an item in the shop."), p.stdout
