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


# --- what the documents say, checked (issue 31) ---------------------------------------------------

DOCS = {name: (ROOT / name).read_text(encoding="utf-8")
        for name in ("README.md", "validation/README.md", "benchmarks/README.md", "docs/design.md")}


def _flat(text: str) -> str:
    """Text with its line breaks and runs of spaces as single spaces (README lines are wrapped)."""
    return " ".join(text.split())


def test_install_commands_name_extras_that_exist() -> None:
    """ltlagent is not on PyPI: installing is ``pip install -e '.[extra]'`` in a clone, and every
    extra named exists in setup.cfg."""
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    extras = set(cfg["options.extras_require"])
    for name, text in DOCS.items():
        assert "install 'ltlagent[" not in text and "install ltlagent[" not in text, name
        for found in re.findall(r"pip install -e '\.\[([a-z,-]+)\]'", text):
            assert set(found.split(",")) <= extras, (name, found)
    assert "pip install -e '.[guard]'" in README


def test_a_readme_spec_named_as_a_bundled_one_is_that_spec() -> None:
    from ltlagent import bundled_specs, load_spec

    named = [parse_spec(block, "README.md") for block in _blocks("lisp")]
    assert any(s.name == "react-agent" for s in named)
    for spec in named:
        if spec.name in bundled_specs():
            bundled = load_spec(spec.name)
            assert (spec.states, spec.behavior, spec.constraints) == \
                (bundled.states, bundled.behavior, bundled.constraints), spec.name


def test_the_refusal_line_in_the_readme_is_what_the_guard_writes() -> None:
    from ltlagent import Policy
    from ltlagent.guard.screen import screen

    cursor = Policy.load(ROOT / "specs" / "booking-policy.sexp").cursor()
    cursor.push_messages([{"role": "user", "content": "Book LH123 for alice@example.com"}])
    reply = {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function",
             "function": {"name": "book", "arguments": '{"user_id": "u1", "flight": "LH123"}'}}]}
    line = screen(cursor, reply, 1, tools={"book", "find_user"}).refusals[0].explain()
    assert line.endswith("allowed now: anything but Write"), line
    assert f"`{line}`" in _flat(README)


def test_the_layout_names_every_module() -> None:
    """README's "Layout" names every module of the package, each under its package."""
    layout = _flat(README[README.index("Layout: `ltlagent/`"):].split("\n\n")[0])
    pkg = ROOT / "ltlagent"
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg)
        if rel.name.startswith("__") or rel.parts[0] == "cli":  # cli/: "one module per command"
            continue
        if len(rel.parts) == 1:
            assert f"`{rel.stem}`" in layout, rel
        else:
            group = re.search(rf"`{rel.parts[0]}/` \(([^)]*)\)", layout)
            assert group is not None and f"`{rel.stem}`" in group.group(1), f"{rel} not in README's Layout"


def test_check_log_json_prints_its_summary_on_stderr() -> None:
    """As README says: ``--format json`` writes JSON Lines on stdout, the summary on stderr."""
    p = subprocess.run([sys.executable, "-m", "ltlagent", "check-log", "booking-policy",
                        "examples/booking/conversations.jsonl", "--format", "json"], cwd=ROOT,
                       env=_env(), capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr
    import json

    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert len(rows) == 55 and all("verdict" in r for r in rows)
    assert "summary" in json.loads(p.stderr.strip().splitlines()[-1])
    assert "the summary as one more JSON object on stderr" in _flat(README)


def test_content_parts_keyword_rules_and_empty_arguments_as_documented() -> None:
    """README and design §12: list content is its parts joined by a line break; ``(:contains …)``
    is a keyword rule ("I can't say yes yet" confirms); an empty ``arguments`` string is ``{}``
    for check-log, the guard and a model's own call alike."""
    from ltlagent import Policy
    from ltlagent.chat.events import message_events, message_text
    from ltlagent.guard.screen import read_calls
    from ltlagent.text.toolcall import ToolCall, parse_call

    assert message_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], 0) == "a\nb"
    assert "joined with a line break" in _flat(README)
    policy = Policy.load("booking-policy")
    assert policy.state_of(message_events({"role": "user", "content": "I can't say yes yet"}, 0)[0]) \
        == "Confirm"
    assert "\"I can't say yes yet\" confirms too" in _flat(README)
    call = {"id": "1", "type": "function", "function": {"name": "find_user", "arguments": ""}}
    assert message_events({"role": "assistant", "content": None, "tool_calls": [call]}, 0)[0].arguments == {}
    msg = {"role": "assistant", "content": None, "tool_calls": [call]}
    assert [(c.name, c.problem) for c in read_calls(msg, {"find_user"})[0]] == [("find_user", None)]
    blank = {"id": "1", "type": "function", "function": {"name": "find_user", "arguments": " \n"}}
    blank_msg = {"role": "assistant", "content": None, "tool_calls": [blank]}
    assert message_events(blank_msg, 0)[0].arguments == {}
    assert read_calls(blank_msg, {"find_user"})[0][0].problem is None  # the guard reads {} too
    assert parse_call('{"name": "find_user", "arguments": " "}', "json").arguments == {}
    assert parse_call('<tool_call>\n{"name": "find_user", "arguments": ""}\n</tool_call>') == \
        ToolCall("find_user", {})
    assert "an empty string counts as `{}`" in _flat(README)
    assert "An empty `arguments` string" in DOCS["docs/design.md"]


def test_validation_readme_sizes_and_default_models() -> None:
    """validation/README's file sizes are the shipped files', and its plain experiment command runs
    the models ``validation/experiment.py`` defaults to (the SmolLM2 rows need ``--models``)."""
    text = _flat(DOCS["validation/README.md"])
    weights = (ROOT / "ltlagent" / "models" / "react-tiny" / "model.safetensors").stat().st_size
    assert f"float32 safetensors of {weights / 1e6:.1f} MB each" in text
    kb = (ROOT / "ltlagent" / "data" / "kb.jsonl").stat().st_size
    assert f"`ltlagent/data/kb.jsonl`, {kb / 1e3:.0f} KB)" in text
    from validation.experiment import ExpConfig

    assert "smollm2-135m" not in ExpConfig().models
    assert "python validation/experiment.py --models smollm2-135m" in text
    assert "every cell below" not in text
