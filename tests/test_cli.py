"""``ltlagent show`` and ``ltlagent check-trace`` from the outside: output, exit codes, no tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ltlagent import load_spec
from ltlagent.cli import main

DATA = Path(__file__).parent / "data"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:
        main(["--help"])
    assert ei.value.code == 0
    out = capsys.readouterr().out
    for cmd in ("show", "check-trace"):
        assert cmd in out


def test_show_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", "react")
    assert code == 0
    assert "Action-Input" in out and "'Action Input:'" in out and ":env-input" in out
    assert '"Final-Thought"' in out  # the readable formula
    assert "given to Spot (the constraints; ltlagent compiles the behaviour):\n  (none)" in out
    assert "allowed first: Thought, Final-Thought" in out


def test_show_dot_hoa_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", "react", "--dot")
    assert code == 0 and out.startswith("digraph") and 'label="Action-Input"' in out
    code, out, _ = run(capsys, "show", "react", "--hoa")
    assert code == 0 and out.startswith("HOA: v1")
    code, out, _ = run(capsys, "show", "chat-bot", "--format", "json")
    d = json.loads(out)
    assert d["infinite"] and d["automaton"]["initially_allowed"] == ["Chat-Bot"]
    assert {s["name"] for s in d["states"]} == {"Chat-Bot", "User"}


@pytest.mark.parametrize(("argv", "code", "needle"), [
    (["react", "Thought", "Action", "Action-Input", "Observation", "Final-Thought", "Answer"], 0,
     "accepted"),
    (["react", "Thought", "Action", "Action-Input", "Observation"], 1,
     "allowed next: Thought, Final-Thought"),
    (["react", "Thought", "Action", "Final-Thought", "Answer"], 1,
     "rejected at step 3: Final-Thought is not allowed after Action"),
    (["chat-bot", "--lasso", "", "Chat-Bot User"], 0, "accepted"),
    (["chat-bot", "--lasso", "", "Chat-Bot"], 1, "rejected"),
    (["chat-bot", "Chat-Bot", "User", "Chat-Bot"], 1, "viable prefix"),
])
def test_check_trace(capsys: pytest.CaptureFixture[str], argv: list[str], code: int, needle: str) -> None:
    got, out, _ = run(capsys, "check-trace", *argv)
    assert got == code and needle in out, out


def test_check_trace_unknown_state_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check-trace", "react", "Thought", "Actoin")
    assert code == 1 and "not a state of this spec" in out
    code, _, err = run(capsys, "check-trace", "chat-bot", "--lasso", "", "Bot")
    assert code == 2 and "unknown state 'Bot'" in err


def test_bad_spec_gets_file_line_col_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "show", str(DATA / "figure3.sexp"))
    assert code == 2 and out == ""
    assert err.startswith(f"{DATA / 'figure3.sexp'}:2:2: error: missing ')'")
    assert "Traceback" not in err


def test_missing_spec_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "show", "no-such-spec")
    assert code == 2 and "no such file or bundled spec" in err


@pytest.mark.parametrize("content", [b"", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 20,
                                     b"(define x (:states (A (:text \"A\"))) (:behavior " + b"(next " * 5000])
def test_console_script_never_prints_a_traceback(tmp_path: Path, content: bytes) -> None:
    f = tmp_path / "bad.sexp"
    f.write_bytes(content)
    proc = subprocess.run([sys.executable, "-m", "ltlagent.cli", "show", str(f)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and f"{f}:1:" in proc.stderr


def test_core_imports_without_the_llm_extras() -> None:
    """Validating and checking specs must not pull torch or transformers."""
    code = ("import sys\n"
            "sys.modules['torch'] = None\nsys.modules['transformers'] = None\n"
            "import ltlagent, ltlagent.cli, ltlagent.checks.show\n"
            "from ltlagent.cli import main\n"
            "raise SystemExit(main(['check-trace', 'react', 'Final-Thought', 'Answer']))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_public_api_resolves_and_spec_side_stays_torch_free() -> None:
    """Every name in ``ltlagent.__all__`` resolves; the validator and the equivalence checker
    load without torch and transformers."""
    import ltlagent

    for name in ltlagent.__all__:
        assert getattr(ltlagent, name) is not None, name
    code = ("import sys\n"
            "sys.modules['torch'] = None\nsys.modules['transformers'] = None\n"
            "import ltlagent\n"
            "v, eq = ltlagent.Validator, ltlagent.check_equivalence\n"
            "r = eq(ltlagent.load_spec('react'), ltlagent.load_spec('react'))\n"
            "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(("case", "needle"), [
    ('(:regex "(?i)yes")', "inline flag (?i)"),
    ('(:regex "\\\\bfoo")', "word boundary"),
    ("(ltl \"G(\")", "missing closing parenthesis"),
    ("(:max 100000)", "limit of 2500"),
])
def test_bad_input_is_exit_2_with_file_line_col(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  case: str, needle: str) -> None:
    """Before: a TypeError traceback at run time (regex), exit 0 from show (regex), a traceback
    (raw LTL), over a minute of silence (large bound)."""
    regex = case if case.startswith("(:regex") else ""
    constraints = f"\n  (:constraints {case})" if case.startswith("(ltl") else ""
    behavior = "(next Thought (repeat Answer :max 100000))" if ":max" in case \
        else "(next Thought Answer)"
    f = tmp_path / "bad.sexp"
    f.write_text(f'(define t\n  (:states (Thought (:text "Thought:"))\n'
                 f'    (Answer (:text "Answer:") {regex}))\n  (:behavior {behavior}){constraints})\n')
    code, out, err = run(capsys, "show", str(f))
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.startswith(f"{f}:") and ": error: " in err and needle in err and "^" in err, err


def test_one_name_per_bundled_spec_and_help_lists_them_all(capsys: pytest.CaptureFixture[str]) -> None:
    """A bundled spec's (define NAME …) is the name it is asked for by (``show react`` printed
    ``spec react-agent``), and ``--help`` lists every bundled spec, react-agent (run's default) too."""
    from ltlagent.spec.syntax import bundled_specs

    for name in bundled_specs():
        assert load_spec(name).name == name
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    for name in bundled_specs():
        assert f" {name}," in out or f" {name} " in out, name
    assert "react-agent" in out
