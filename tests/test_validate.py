"""``ltlagent validate``: the paper's prompts, broken variants, encodings, streaming, the CLI."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest

from ltlagent.checks.validate import FileReport, Validator
from ltlagent.cli import main
from ltlagent.logic.compiled import compile_spec

ROOT = Path(__file__).parent.parent
PROMPTS = ROOT / "validation" / "prompts"
DATA = Path(__file__).parent / "data"
IBM = DATA / "ibm-reference"
HOTPOT = (PROMPTS / "hotpotqa.txt").read_text(encoding="utf-8")
FEVER = (PROMPTS / "fever.txt").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def react() -> Validator:
    return Validator("react", keep_examples=True)


def errors(r: FileReport) -> list[str]:
    return [f"{d.line}:{d.column}: {d.message}" for d in r.diagnostics if d.severity == "error"]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- the paper's prompts ----------------------------------------------------------------------------

@pytest.mark.parametrize("name, loops", [("fever", 2), ("hotpotqa", 5), ("gsm8k", 2)])
def test_paper_prompts_are_valid(react: Validator, name: str, loops: int) -> None:
    r = react.validate_path(PROMPTS / f"{name}.txt")
    assert (r.examples, r.valid, r.instructions, r.exit_code) == (1, 1, 1, 0)
    assert not errors(r)
    ins, ex = r.example_list  # type: ignore[misc]
    assert ins.status == "instructions" and ins.index is None
    assert ins.trace == ("Thought", "Action", "Action-Input", "Observation", "Final-Thought",
                         "Answer")
    assert ex.status == "valid" and ex.index == 1
    assert ex.trace == ("Thought", "Action", "Action-Input", "Observation") * loops + (
        "Final-Thought", "Answer")
    note = next(d for d in r.diagnostics if d.code == "instructions")
    assert note.severity == "note" and "instructions block, not an example" in note.message


def test_paper_prompts_are_retyped_as_printed() -> None:
    fever = FEVER.splitlines()
    assert "{{tool_descriptions}}" in fever and fever[-1] == "Claim:"
    assert "originally intended as a pilot. Final Thought: Because" in fever
    assert "he äppeared in the 2009 Fox television film Virtuality; he" in fever  # sic
    gsm = (PROMPTS / "gsm8k.txt").read_text(encoding="utf-8").splitlines()
    assert gsm[-3:] == ["Answer:", "        72", "Question:"]
    assert HOTPOT.splitlines()[-1] == "Question:"


def test_fever_final_thought_mid_line_is_a_step(react: Validator) -> None:
    r = react.validate_path(PROMPTS / "fever.txt")
    assert r.example_list[1].trace[-2:] == ("Final-Thought", "Answer")  # type: ignore[index]


def test_strict_reports_the_fever_turn_change_mid_line() -> None:
    v = Validator("react", strict=True)
    r = v.validate_path(PROMPTS / "fever.txt")
    assert r.exit_code == 1
    (d,) = [d for d in r.diagnostics if d.severity == "error"]
    assert (d.line, d.column, d.code) == (43, 33, "ownership")
    assert d.message.startswith("Final-Thought continues the line of Observation's text")
    assert d.source_line.endswith("as a pilot. Final Thought: Because")
    assert d.source_line[d.caret - 1:].startswith("Final Thought:") and d.width == 14
    for name in ("hotpotqa", "gsm8k"):
        assert v.validate_path(PROMPTS / f"{name}.txt").exit_code == 0


def test_strict_reports_env_input_mid_line_and_empty() -> None:
    text = "Question: q\nThought: t\nAction: Search\nAction Input: x Observation: y\n" \
           "Final Thought: f\nAnswer: a\nQuestion: r\nThought: t\nAction: Search\n" \
           "Action Input: x\nObservation:\nThought: u\nAction: Lookup\nAction Input: z\n" \
           "Observation: w\nFinal Thought: f\nAnswer: a\n"
    assert Validator("react").validate_text(text).exit_code == 0
    r = Validator("react", strict=True).validate_text(text)
    assert errors(r) == [
        "4:17: Observation begins in the middle of a line: its text is written by the "
        "environment (:env-input), so the model's text before it would run into the "
        "environment's turn",
        "11:1: Observation has no text: at run time the environment writes it (:env-input), so "
        "this example lets the model's next step stand in for it"]
    assert [d.example for d in r.diagnostics if d.severity == "error"] == [1, 2]


# -- broken variants --------------------------------------------------------------------------------

def test_missing_action_input(react: Validator) -> None:
    text = HOTPOT.replace("Action Input: Colorado orogeny\nObservation: Cannot", "Observation: Cannot")
    r = react.validate_text(text, "p.txt")
    assert errors(r) == ["22:1: expected Action-Input after Action, found Observation"]
    d = next(d for d in r.diagnostics if d.severity == "error")
    assert d.render().splitlines() == [
        "p.txt:22:1: error: expected Action-Input after Action, found Observation",
        "    Observation: Cannot use Lookup without using Search first!",
        "    ^^^^^^^^^^^^",
        "    example 1: Thought Action Observation"]
    assert (d.code, d.example, d.trace) == ("unexpected-state", 1, ("Thought", "Action", "Observation"))
    assert (r.examples, r.valid, r.exit_code) == (1, 0, 1)


def test_swapped_steps(react: Validator) -> None:
    text = HOTPOT.replace("Action: Lookup\nAction Input: Colorado orogeny\n",
                          "Action Input: Colorado orogeny\nAction: Lookup\n", 1)
    assert errors(react.validate_text(text)) == ["21:1: expected Action after Thought, found Action-Input"]


def test_example_cut_short_then_next_example(react: Validator) -> None:
    head = HOTPOT.split("Final Thought: High Plains")[0]
    text = head + "Question: And the next one?\nThought: easy\nAction: Search\nAction Input: x\n" \
                  "Observation: y\nFinal Thought: z\nAnswer: 3\nQuestion:\n"
    r = react.validate_text(text)
    assert errors(r) == ["46:1: example ends in Observation; expected one of Thought, Final-Thought"]
    assert (r.examples, r.valid) == (2, 1)
    assert [e.status for e in r.example_list] == ["instructions", "invalid", "valid"]  # type: ignore[union-attr]


def test_example_cut_at_end_of_file(react: Validator) -> None:
    r = react.validate_text(HOTPOT.split("Observation: Cannot use")[0])
    assert errors(r) == ["22:1: example ends in Action-Input; expected Observation"]


def test_bad_start_and_recovery_finds_the_next_example(react: Validator) -> None:
    text = "Question: a\nAction: Search\nAction Input: x\nObservation: y\nFinal Thought: z\n" \
           "Answer: 1\nQuestion: b\nThought: t\nAction: Search\nAction Input: x\nObservation: y\n" \
           "Thought: t\nObservation: oops\nFinal Thought: z\nAnswer: 2\nQuestion: c\n" \
           "Final Thought: z\nAnswer: 3\n"
    r = react.validate_text(text)
    assert errors(r) == ["2:1: example starts with Action; expected one of Thought, Final-Thought",
                         "13:1: expected Action after Thought, found Observation"]
    assert [e.status for e in r.example_list] == ["invalid", "invalid", "valid"]  # type: ignore[union-attr]


def test_unknown_tool_under_react_tools() -> None:
    text = HOTPOT.replace("Action: Search\nAction Input: High Plains\n",
                          "Action: Google\nAction Input: High Plains\n")
    r = Validator("react-tools").validate_text(text)
    assert errors(r) == ['38:9: Action content "Google" is not one of Search, Lookup, Calculator']
    d = next(d for d in r.diagnostics if d.severity == "error")
    assert d.code == "choices" and d.source_line == "Action: Google" and d.width == 6
    assert Validator("react-tools").validate_path(PROMPTS / "hotpotqa.txt").exit_code == 0


def test_tool_choices_come_from_tools_and_regex_constraint() -> None:
    spec = DATA / "validate" / "react-tooled.sexp"
    assert Validator(spec).validate_path(PROMPTS / "gsm8k.txt").exit_code == 0  # any tool
    r = Validator(spec, tools=["Search", "Lookup"]).validate_path(PROMPTS / "gsm8k.txt")
    assert errors(r) == ['23:9: Action content "Calculator" is not one of Search, Lookup',
                         '28:9: Action content "Calculator" is not one of Search, Lookup']
    assert Validator(spec, tools=["Search", "Lookup"]).validate_path(
        PROMPTS / "hotpotqa.txt").exit_code == 0  # "1,800 to 7,000 ft" matches the regex
    r = Validator(spec).validate_path(PROMPTS / "fever.txt")
    assert errors(r) == ['46:9: Answer content "SUPPORTS" does not match '
                         '/[0-9][0-9,]*( to [0-9][0-9,]* ft)?/']


# -- instructions blocks ----------------------------------------------------------------------------

EXAMPLE = "Question: q?\nThought: t\nAction: Search\nAction Input: x\nObservation: o\n" \
          "Final Thought: f\nAnswer: a\n"
FORMAT = "Thought: you should always think about what to do\nAction: the action to take\n" \
         "Action Input: the input to the action\nObservation: the result of the action\n" \
         "Final Thought: this is the last thought\nAnswer: the final answer\n"
PLAIN_FORMAT = "Thought: reasoning\nAction: tool\nAction Input: its input\nObservation: result\n" \
               "Final Thought: conclusion\nAnswer: reply\n"


@pytest.mark.parametrize("text, why", [
    ("Use the following format:\nQuestion: the question\n" + PLAIN_FORMAT + "\n" + EXAMPLE,
     "a format announcement precedes it"),
    ("Answer questions.\n" + PLAIN_FORMAT + "Here are some examples.\n" + EXAMPLE,
     "the examples are announced after it"),
    ("Answer questions.\n" + FORMAT + "\n" + EXAMPLE, "its steps hold placeholder text"),
])
def test_each_instructions_rule(react: Validator, text: str, why: str) -> None:
    r = react.validate_text(text)
    assert (r.instructions, r.examples, r.valid) == (1, 1, 1)
    assert next(d for d in r.diagnostics if d.code == "instructions").message.startswith(
        f"instructions block, not an example ({why})")


def test_examples_are_not_instructions(react: Validator) -> None:
    # announcements in the wrong order or far away do not turn examples into instructions
    text = ("Use the following format, shown below.\nHere are some examples.\n" + EXAMPLE
            + EXAMPLE + "Here are some more examples.\n" + EXAMPLE)
    r = react.validate_text(text)
    assert (r.instructions, r.examples, r.valid) == (0, 3, 3)
    broken_format = "Use this format:\nThought: think\nObservation: see\nAnswer: say\n"
    r = react.validate_text(broken_format + "Here are some examples.\n" + EXAMPLE)
    assert (r.instructions, r.examples, r.exit_code) == (1, 1, 0)


def test_context_labels_split_examples(react: Validator) -> None:
    cut = "Thought: t\nAction: Search\nAction Input: x\nObservation: o\n"
    text = cut + "Input: next task\n" + EXAMPLE.split("\n", 1)[1]
    assert errors(react.validate_text(text)) == []  # one long example: Input: is not a label
    v = Validator("react", context_labels=["Input"])
    assert errors(v.validate_text(text)) == [
        "4:1: example ends in Observation; expected one of Thought, Final-Thought"]


# -- other specs ------------------------------------------------------------------------------------

def test_infinite_spec_chat_bot() -> None:
    v = Validator("chat-bot")
    r = v.validate_text("Chat Bot: Hi!\nUser: hello\nChat Bot: how can I help?\nUser: bye\n")
    assert (r.examples, r.valid) == (1, 1)
    r = v.validate_text("Chat Bot: Hi!\nChat Bot: again\n")
    assert errors(r) == ["2:1: expected User after Chat-Bot, found Chat-Bot"]


@pytest.mark.parametrize("spec", sorted(p.name for p in IBM.glob("*.txt")))
def test_ibm_reference_specs_show_and_validate(capsys: pytest.CaptureFixture[str], spec: str) -> None:
    code, out, _ = cli(capsys, "show", str(IBM / spec))
    assert code == 0 and "allowed first" in out
    c = compile_spec(IBM / spec)
    a = c.automaton
    rng = random.Random(spec)
    examples = []
    for _ in range(3):  # random accepted traces, written as bracketed prompts
        q, trace = a.initial, []
        while not (a.is_complete(q) and (not a.allowed_index[q] or rng.random() < 0.3)):
            i = rng.choice([i for i in a.allowed_index[q] if a.distance_to_accept[a.delta[q][i]] >= 0])
            trace.append(i)
            q = a.delta[q][i]
        examples.append(trace)
    texts = [s.text for s in c.spec.states]
    prompt = "Solve the task.\n\n" + "\n".join(
        "".join(f"{texts[i]} text {n}\n" for n, i in enumerate(t)) for t in examples)
    r = Validator(c).validate_text(prompt)
    assert (r.examples, r.valid) == (3, 3), [d.render() for d in r.diagnostics]
    broken = prompt.replace(texts[examples[0][-1]], "", 1) if len(examples[0]) > 1 else prompt
    if broken != prompt:
        assert Validator(c).validate_text(broken).exit_code == 1


def test_bound_over_255_in_trace_and_prompt(capsys: pytest.CaptureFixture[str]) -> None:
    spec = DATA / "validate" / "until300.sexp"
    a = compile_spec(spec).automaton
    for n, ok in ((0, True), (255, True), (256, True), (300, True), (301, False)):
        assert a.run(["step"] * n + ["done"]).accepted is ok, n
    v = Validator(spec)
    assert v.validate_text("[Step] s\n" * 300 + "[Done] d\n").exit_code == 0
    r = v.validate_text("[Step] s\n" * 301 + "[Done] d\n")
    assert errors(r) == ["301:1: expected done after step, found step"]


# -- encodings and files ----------------------------------------------------------------------------

def test_crlf_and_bom_give_the_same_positions(react: Validator) -> None:
    text = HOTPOT.replace("Action Input: Colorado orogeny\nObservation: Cannot", "Observation: Cannot")
    plain = react.validate_text(text)
    for data in (text.replace("\n", "\r\n").encode(), b"\xef\xbb\xbf" + text.encode(),
                 b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode()):
        r = react.validate_text(data)
        assert errors(r) == errors(plain) == ["22:1: expected Action-Input after Action, found "
                                              "Observation"]
        assert [d.source_line for d in r.diagnostics] == [d.source_line for d in plain.diagnostics]
    assert react.validate_text(HOTPOT.replace("\n", "\r\n")).exit_code == 0


def test_non_utf8_is_a_clear_error(react: Validator, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(HOTPOT.encode().replace(b"eastern sector of the Colorado orogeny extends into?",
                                            b"eastern \xff sector", 1))
    r = react.validate_path(bad)
    assert r.exit_code == 2 and r.error is not None
    assert (r.error.line, r.error.column, r.error.code) == (17, 9, "not-utf8")
    code, out, err = cli(capsys, "validate", str(bad), "--spec", "react")
    assert code == 2 and "Traceback" not in err
    assert err.startswith(f"{bad}:17:9: error: not UTF-8 text: byte 0xff at offset ")
    code, out, _ = cli(capsys, "validate", str(bad), "--spec", "react", "--format", "json")
    (obj,) = json.loads(out)
    assert code == 2 and obj["error"]["code"] == "not-utf8" and obj["ok"] is False


def test_empty_file(react: Validator, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    r = react.validate_path(empty)
    assert (r.examples, r.exit_code) == (0, 1)  # nothing was checked: not a pass
    assert [d.code for d in r.diagnostics] == ["no-examples"]
    code, out, _ = cli(capsys, "validate", str(empty), "--spec", "react")
    assert code == 1 and "error: no examples found: the file is empty" in out
    prose = tmp_path / "prose.txt"
    prose.write_text("Just some text.\n")
    code, out, _ = cli(capsys, "validate", str(prose), "--spec", "react")
    assert code == 1 and "error: no examples found: no prompt string of react" in out


def test_utf16_without_bom_is_a_file_error(react: Validator, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """UTF-16 without a BOM is valid UTF-8 byte for byte (NULs between the letters): an error, not 0."""
    f = tmp_path / "utf16.txt"
    f.write_bytes(EXAMPLE.encode("utf-16-le"))
    r = react.validate_path(f)
    assert r.exit_code == 2 and r.error is not None and r.error.code == "nul-byte"
    assert (r.error.line, r.error.column) == (1, 2)
    code, _, err = cli(capsys, "validate", str(f), "--spec", "react")
    assert code == 2 and "NUL bytes between the characters" in err and "Traceback" not in err


# -- streaming --------------------------------------------------------------------------------------

BROKEN = [
    HOTPOT.replace("Action Input: Colorado orogeny\nObservation: Cannot", "Observation: Cannot"),
    HOTPOT.split("Final Thought: High Plains")[0] + "Question: q\n" + EXAMPLE,
    FEVER.replace("\n", "\r\n"),
    "Question: x\n" + "Thought: é" * 3 + "\nÄction: ☃\n" + EXAMPLE * 2,
]


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 13, 64])
def test_results_do_not_depend_on_chunk_size(chunk: int) -> None:
    for strict in (False, True):
        ref = Validator("react", keep_examples=True, strict=strict)
        small = Validator("react", keep_examples=True, strict=strict, chunk_size=chunk,
                          hold_limit=0)
        for text in BROKEN:
            assert small.validate_text(text) == ref.validate_text(text)


def test_random_texts_do_not_depend_on_chunk_size() -> None:
    pieces = ["Thought:", "Act", "ion:", "Action Input:", " Input:", "\n", "Question: ", "é", " x",
              "Final Thought:", "Final ", "Observation:", "Answer:", "Here are some examples.\n",
              "Use the following format:\n", "\r\n", "Claim:", "  ", "Search", "{{tools}}"]
    rng = random.Random(11)
    ref = [Validator("react-tools", keep_examples=True, strict=s) for s in (False, True)]
    small = [Validator("react-tools", keep_examples=True, strict=s, chunk_size=c, hold_limit=0)
             for s, c in ((False, 1), (True, 3), (False, 7), (True, 16))]
    for _ in range(150):
        data = ("\ufeff" if rng.random() < 0.2 else "") + "".join(
            rng.choices(pieces, k=rng.randint(0, 60)))
        for v in small:
            assert v.validate_text(data) == ref[v.strict].validate_text(data), data


def test_example_verdicts_agree_with_the_automaton() -> None:
    pieces = ["Thought: t\n", "Action: Search\n", "Action Input: x\n", "Observation: o\n",
              "Final Thought: f\n", "Answer: a\n", "Question: q\n", "\n"]
    c = compile_spec("react")
    v = Validator(c, keep_examples=True)
    rng = random.Random(5)
    seen = set()
    for _ in range(400):
        data = "".join(rng.choices(pieces, weights=[4, 4, 4, 4, 2, 2, 1, 1], k=rng.randint(0, 40)))
        r = v.validate_text(data)
        steps = sum(len(e.trace) for e in r.example_list)  # type: ignore[union-attr]
        assert steps == len(list(c.lexer.finditer(data)))  # every prompt string is in some run
        for e in r.example_list:  # type: ignore[union-attr]
            if e.status != "instructions":
                assert c.automaton.run(list(e.trace)).accepted == (e.status == "valid"), data
                seen.add(e.status)
    assert seen == {"valid", "invalid"}


def test_long_content_beyond_the_hold_limit() -> None:
    obs = "Observation: " + ("lorem ipsum dolor sit amet " * 40 + "\n") * 200  # ~216 kB
    text = ("Question: a\nThought: t\nAction: Search\nAction Input: x\n" + obs
            + "Question: b\n" + EXAMPLE.split("\n", 1)[1])
    ref = Validator("react", keep_examples=True).validate_text(text)
    assert errors(ref) == ["5:1: example ends in Observation; expected one of Thought, Final-Thought"]
    small = Validator("react", keep_examples=True, chunk_size=4096, hold_limit=0).validate_text(text)
    assert small == ref


def _big_prompt(n_bytes: int) -> bytes:
    ex = HOTPOT.split("Here are some examples.\n")[1].rsplit("Question:", 1)[0].encode()
    return b"Here are some examples.\n" + ex * (n_bytes // len(ex))


def test_memory_stays_flat_tracemalloc() -> None:
    data = _big_prompt(3_000_000)
    v = Validator("react", chunk_size=1 << 16)
    tracemalloc.start()
    try:
        import io

        r = v.validate_stream(io.BytesIO(data), "big")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.exit_code == 0 and r.examples > 1900
    assert peak < 1_500_000, peak  # the 3 MB prompt itself is not held (BytesIO is not traced)


def test_50_mb_prompt_streams_in_flat_memory(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:
        block = _big_prompt(1 << 20)
        for _ in range(50):
            f.write(block)
    small = tmp_path / "small.txt"
    small.write_bytes(block)
    code = textwrap.dedent("""
        import resource, sys
        from ltlagent.checks.validate import Validator
        r = Validator("react").validate_path(sys.argv[1])
        print(r.examples, r.exit_code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    """)
    rss = {}
    for p in (small, big):
        out = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True,
                             check=True, timeout=120).stdout.split()
        assert out[1] == "0"
        rss[p.name] = int(out[2])  # KiB
    assert big.stat().st_size > 50_000_000
    assert rss["big.txt"] - rss["small.txt"] < 20_000, rss  # < 20 MB more for a 50x larger file


# -- command line -----------------------------------------------------------------------------------

def test_cli_directory_json_and_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "validate", str(PROMPTS), "--spec", "react")
    assert code == 0
    assert out.count("1 example, 1 valid, 0 invalid, 1 instructions block") == 3
    bad = tmp_path / "bad.txt"
    bad.write_text(HOTPOT.replace("Action Input: Colorado orogeny\nObservation: Cannot",
                                  "Observation: Cannot"))
    code, out, _ = cli(capsys, "validate", str(PROMPTS / "gsm8k.txt"), str(bad), "--spec",
                       "specs/react.sexp", "--format", "json")
    assert code == 1
    objs = json.loads(out)
    assert [o["file"] for o in objs] == [str(PROMPTS / "gsm8k.txt"), str(bad)]
    assert objs[0]["ok"] and objs[0]["examples"] == 1 and objs[0]["instructions"] == 1
    (d,) = [d for d in objs[1]["diagnostics"] if d["severity"] == "error"]
    assert d == {"file": str(bad), "line": 22, "column": 1, "severity": "error",
                 "code": "unexpected-state",
                 "message": "expected Action-Input after Action, found Observation",
                 "example": 1, "trace": ["Thought", "Action", "Observation"]}
    assert [e["status"] for e in objs[1]["example_list"]] == ["instructions", "invalid"]
    code, out, _ = cli(capsys, "validate", str(PROMPTS / "gsm8k.txt"), "--spec", "react", "--list")
    assert "example 1: valid: Thought Action" in out


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "validate", str(tmp_path / "missing.txt"), "--spec", "react")
    assert code == 2 and "cannot read" in err
    code, _, err = cli(capsys, "validate", str(PROMPTS), "--spec", "no-such-spec")
    assert code == 2 and "no such file or bundled spec" in err and "Traceback" not in err
    bad_spec = tmp_path / "bad.sexp"
    bad_spec.write_text("(define x (:states (A (:text \"A:\"))) (:behavior (next A B)))")
    code, _, err = cli(capsys, "validate", str(PROMPTS), "--spec", str(bad_spec))
    assert code == 2 and f"{bad_spec}:1:" in err
    (tmp_path / "d").mkdir()
    code, _, err = cli(capsys, "validate", str(tmp_path / "d"), "--spec", "react")
    assert code == 2 and "no files matching" in err


@pytest.mark.parametrize("end", ["\r", "\r\n", "\n"])
def test_lone_cr_line_ends_count_as_lines(end: str) -> None:
    """Old Mac line ends are lines too, as in the spec reader (issue 21): the error is at 3:9."""
    text = end.join(["Question: q", "Thought: a", "Action: Calculatr", "Action Input: 1",
                     "Observation: 1", "Final Thought: f", "Answer: 1", ""])
    r = Validator("react-tools").validate_text(text, "p.txt")
    errors = [d for d in r.diagnostics if d.severity == "error"]
    assert [(d.line, d.column) for d in errors] == [(3, 9)], r
    assert errors[0].source_line.rstrip() == "Action: Calculatr"
