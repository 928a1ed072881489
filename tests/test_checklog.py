"""``ltlagent check-log`` (docs/design.md §12): the example logs (every planted violation found at
its message, nothing else), the log layouts, malformed input, exit codes, JSON output, and the
process pool giving the same answers as one process."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import SupportsIndex

import pytest

from ltlagent.chat.logs import read_conversations
from ltlagent.checks.logcheck import check_logs
from ltlagent.cli import main
from ltlagent.logic.policy import Policy

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "booking"
LOG = EXAMPLE / "conversations.jsonl"
POLICY = Policy.load("booking-policy")

MSGS = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
BAD = [{"role": "user", "content": "book"},
       {"role": "assistant", "content": None, "tool_calls": [
           {"id": "1", "type": "function", "function": {"name": "book", "arguments": "{}"}}]}]


def _generate() -> list[dict[str, object]]:
    spec = importlib.util.spec_from_file_location("booking_generate", EXAMPLE / "generate.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out: list[dict[str, object]] = mod.generate()
    return out


def test_example_log_is_what_the_generator_writes() -> None:
    lines = [json.loads(x) for x in LOG.read_text(encoding="utf-8").splitlines()]
    assert lines == _generate()


def test_every_planted_violation_is_found_at_its_message_and_nothing_else() -> None:
    planted: dict[object, list[dict[str, object]]] = {
        rec["id"]: rec["planted"] for rec in _generate()}  # type: ignore[misc]
    results = list(check_logs(POLICY, [str(LOG)]))
    assert len(results) == len(planted) >= 50
    broken = {str(p["constraint"]) for ps in planted.values() for p in ps}
    assert broken == {"confirm-before-write", "lookup-before-write", "after-handoff-only-replies",
                      "user-from-lookup"}
    for r in results:
        want = sorted((str(p["constraint"]), int(p["message"]))  # type: ignore[call-overload]
                      for p in planted[r.conversation])
        got = sorted((v.constraint, v.message) for v in r.report.violations)
        assert got == want, r.conversation
        assert r.report.verdict == ("violated" if want else "ok"), r.conversation


def test_cli_text_json_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-log", "booking-policy", str(LOG)]) == 1
    out = capsys.readouterr().out
    assert "confirm-before-write: broken at step" in out and "checked 55 conversations" in out
    assert main(["check-log", "booking-policy", str(LOG), "--format", "json"]) == 1
    cap = capsys.readouterr()
    rows = [json.loads(x) for x in cap.out.splitlines()]
    assert len(rows) == 55 and {"conversation", "verdict", "violations"} <= rows[0].keys()
    assert all({"constraint", "step", "message"} <= v.keys() for r in rows for v in r["violations"])
    summary = json.loads(cap.err.strip().splitlines()[-1])["summary"]
    assert summary["conversations"] == 55 and summary["verdicts"]["violated"] > 0


def test_all_ok_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "ok.json"
    f.write_text(json.dumps(MSGS))
    assert main(["check-log", "booking-policy", str(f)]) == 0
    assert "1 ok" in capsys.readouterr().out


@pytest.mark.parametrize("content, n", [
    (json.dumps(MSGS), 1),  # an array of messages
    (json.dumps({"messages": MSGS}, indent=2), 1),  # an object holding them, pretty-printed
    (json.dumps([{"messages": MSGS}, MSGS, {"id": "x", "turns": MSGS}]), 3),  # array of those
    ("\n".join(json.dumps({"messages": MSGS}) for _ in range(4)) + "\n\n", 4),  # JSON Lines
    (json.dumps([MSGS, MSGS], indent=1), 2),
])
def test_log_layouts(tmp_path: Path, content: str, n: int) -> None:
    f = tmp_path / "log.json"
    f.write_text(content)
    recs = list(read_conversations(f))
    assert len(recs) == n and all(r.messages == MSGS for r in recs)


def test_messages_key_and_ambiguous_records(tmp_path: Path) -> None:
    f = tmp_path / "log.jsonl"
    f.write_text(json.dumps({"id": 7, "a": MSGS, "b": MSGS}) + "\n")
    (rec,) = read_conversations(f)
    assert rec.messages is None and rec.error is not None and "several lists" in str(rec.error)
    (rec,) = read_conversations(f, messages_key="b")
    assert rec.messages == MSGS and rec.id == 7
    (rec,) = read_conversations(f, messages_key="nope")
    assert rec.messages is None


def test_a_malformed_line_spoils_only_itself(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "log.jsonl"
    f.write_text("\n".join([json.dumps({"messages": MSGS}), '{"messages": [{"role": "user",',
                            json.dumps({"messages": BAD}),
                            json.dumps({"messages": [{"role": "user"}, {"role": "bot"}]}),
                            json.dumps({"messages": [{"content": "no role"}]})]) + "\n")
    assert main(["check-log", "booking-policy", str(f)]) == 2
    out = capsys.readouterr().out
    assert f"{f}:2:31: malformed JSON: Expecting property name" in out
    assert "conversation 2: violated" in out  # the next lines are still checked
    assert "unknown role 'bot' (message 1)" in out and "no 'role' (message 0)" in out
    assert "1 ok, 1 violated, 3 malformed" in out


def test_a_malformed_document_is_a_file_line_col_error(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "log.json"
    f.write_text('[\n  {"role": "user", "content": "x"},\n  {"role": }\n]\n')
    assert main(["check-log", "booking-policy", str(f)]) == 2
    err = capsys.readouterr().err
    assert f"{f}:3:12: malformed JSON" in err and "Traceback" not in err


@pytest.mark.parametrize("args, message", [
    (["nosuch.jsonl"], "no such file"),
    (["--jobs", "0", "x"], "--jobs"),
])
def test_usage_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-log", "booking-policy", *args]) == 2
    assert message in capsys.readouterr().err


def test_bad_spec_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = tmp_path / "p.sexp"
    s.write_text("(define p (:states (A (:from usr))))")
    assert main(["check-log", str(s), str(LOG)]) == 2
    assert "p.sexp:1:30: error: unknown author 'usr'" in capsys.readouterr().err


def test_jobs_give_the_same_answers_in_order(tmp_path: Path) -> None:
    f = tmp_path / "many.jsonl"
    lines = LOG.read_text(encoding="utf-8").splitlines() * 12  # > several chunks of 256
    f.write_text("\n".join(lines) + "\n")
    one = [r.to_dict() for r in check_logs(POLICY, [str(f)])]
    two = [r.to_dict() for r in check_logs(POLICY, [str(f)], jobs=2)]
    assert one == two and len(one) == len(lines)


def test_stdin_and_console_script() -> None:
    p = subprocess.run([sys.executable, "-m", "ltlagent", "check-log", "booking-policy", "-",
                        "--format", "json"], input=json.dumps({"messages": BAD}),
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 1, p.stderr
    row = json.loads(p.stdout)
    assert row["verdict"] == "violated" and row["violations"][0]["message"] == 1


# --- issue 27: reading at the edges -------------------------------------------------------------

OK_LINE = json.dumps({"messages": MSGS})
BROKEN_BOOK = [BAD[0], {"role": "assistant", "content": None, "tool_calls": [
    {"id": "1", "type": "function", "function": {"name": "book", "arguments": '{"room": "Oak'}}]}]


def test_a_forbidden_call_with_broken_arguments_is_violated_and_reported() -> None:
    report = POLICY.check(BROKEN_BOOK)
    assert report.verdict == "violated"
    assert sorted((v.constraint, v.message) for v in report.violations) == [
        ("confirm-before-write", 1), ("lookup-before-write", 1)]
    assert "not JSON" in json.dumps(report.to_dict())  # the malformed arguments are reported


@pytest.mark.parametrize("where", [0, 1, 2])
def test_a_line_nested_thousands_deep_spoils_only_itself(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], where: int) -> None:
    lines = [OK_LINE, OK_LINE]
    lines.insert(where, "[" * 100_000)
    f = tmp_path / "deep.jsonl"
    f.write_text("\n".join(lines) + "\n")
    assert main(["check-log", "booking-policy", str(f)]) == 2
    cap = capsys.readouterr()
    assert f"{f}:{where + 1}:1: JSON nested too deep to read" in cap.out
    assert "2 ok, 1 malformed" in cap.out and "Traceback" not in cap.out + cap.err


def test_a_message_nested_too_deep_in_a_document_is_a_file_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "deep.json"
    f.write_text('[\n  {"role": "user", "content": ' + "[" * 5000 + "]" * 5000 + "}\n]\n")
    assert main(["check-log", "booking-policy", str(f)]) == 2
    err = capsys.readouterr().err
    assert f"{f}:1:1: JSON nested too deep to read" in err and "Traceback" not in err


@pytest.mark.parametrize("where", [0, 1, 2])
def test_a_byte_that_is_not_utf8_spoils_only_its_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], where: int) -> None:
    bad = OK_LINE.replace("hello", "h\u00e9llo").encode("latin-1")  # é as one byte, 0xe9
    lines = [OK_LINE.encode(), OK_LINE.encode()]
    lines.insert(where, bad)
    f = tmp_path / "latin1.jsonl"
    f.write_bytes(b"\r\n".join(lines) + b"\r\n")
    assert main(["check-log", "booking-policy", str(f)]) == 2
    out = capsys.readouterr().out
    col = bad.index(b"\xe9") + 1
    assert f"{f}:{where + 1}:{col}: not UTF-8 text (byte 0xe9)" in out
    assert "2 ok, 1 malformed" in out


def test_utf8_text_a_bom_and_a_bad_byte_in_a_document(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "ok.jsonl"
    f.write_bytes(b"\xef\xbb\xbf" + OK_LINE.replace("hi", "h\u00ef \u2603").encode() + b"\n")
    assert main(["check-log", "booking-policy", str(f)]) == 0
    assert "1 ok" in capsys.readouterr().out
    f = tmp_path / "doc.json"
    f.write_bytes(b'[\n  {"role": "user", "content": "caf\xe9"}\n]\n')
    assert main(["check-log", "booking-policy", str(f)]) == 2
    assert f"{f}:2:35: not UTF-8 text (byte 0xe9)" in capsys.readouterr().err


def test_non_text_parts_and_misplaced_tool_calls_are_errors_of_their_message(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hidden = {"role": "assistant", "content": [
        {"type": "text", "text": "booking"},
        {"type": "tool_use", "id": "t", "name": "book", "input": {"room": "Oak"}}]}
    from_user = {"role": "user", "content": "x", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "book", "arguments": "{}"}}]}
    f = tmp_path / "hidden.jsonl"
    f.write_text("\n".join(json.dumps({"messages": [MSGS[0], m]})
                           for m in (hidden, from_user)) + "\n")
    assert main(["check-log", "booking-policy", str(f), "--format", "json"]) == 1
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(r["verdict"], r["message"]) for r in rows] == [("malformed", 1), ("malformed", 1)]
    assert "'tool_use'" in rows[0]["error"] and "carries tool calls" in rows[1]["error"]


@pytest.mark.parametrize("content", ["", "\n  \n", "[\n]\n"])
def test_a_log_with_no_conversations_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            content: str) -> None:
    f = tmp_path / "empty.json"
    f.write_text(content)
    assert main(["check-log", "booking-policy", str(f)]) == 2
    assert f"{f}: no conversations" in capsys.readouterr().err
    g = tmp_path / "ok.jsonl"  # beside a log that has some, still an error, after the others
    g.write_text(OK_LINE + "\n")
    assert main(["check-log", "booking-policy", str(g), str(f)]) == 2
    cap = capsys.readouterr()
    assert "1 ok" in cap.out and f"{f}: no conversations" in cap.err


def test_jobs_are_capped_at_the_usable_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing
    import os

    def no_pool(*args: object, **kwargs: object) -> None:
        raise AssertionError("a process pool was started with one usable core")

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    monkeypatch.setattr(multiprocessing, "get_context", no_pool)
    results = list(check_logs(POLICY, [str(LOG)], jobs=64))
    assert len(results) == 55


def test_a_record_too_deep_to_pickle_is_checked_in_the_parent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ltlagent.chat.logs import RawRecord
    from ltlagent.checks import logcheck

    class Deep(list[object]):
        """Messages nested deeper than pickle can go (as a parsed JSON document's may be)."""

        def __reduce_ex__(self, protocol: SupportsIndex) -> str | tuple[object, ...]:
            raise RecursionError("maximum recursion depth exceeded while pickling an object")

    def records(file: str) -> list[RawRecord]:
        return [RawRecord(0, 1, value=MSGS), RawRecord(1, 1, value=Deep(BAD)),
                RawRecord(2, 1, value=MSGS)]

    monkeypatch.setattr(logcheck, "iter_raw", records)
    monkeypatch.setattr(logcheck, "usable_cores", lambda: 2, raising=False)  # a pool even on 1
    monkeypatch.setattr(logcheck, "CHUNK", 1)
    verdicts = [r.report.verdict for r in check_logs(POLICY, ["x.json"], jobs=2)]
    assert verdicts == ["ok", "violated", "ok"]


def test_an_unnamed_constraint_never_takes_a_name_given_explicitly(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = tmp_path / "p.sexp"
    s.write_text("(define p (:states (Hi (:from user)) (Bye (:from assistant)))"
                 " (:constraints (always Hi) (always (not Bye)) (constraint-1 (eventually Hi))"
                 " (constraint-3 (always (or Hi Bye)))))")
    policy = Policy.load(str(s))
    assert policy.spec.constraint_names == (
        "constraint-2", "constraint-4", "constraint-1", "constraint-3")
    f = tmp_path / "log.json"
    f.write_text(json.dumps(MSGS))
    assert main(["check-log", str(s), str(f)]) == 1
    out = capsys.readouterr().out
    assert "constraint-2: broken at step 1" in out and "constraint-4: broken at step 1" in out
    assert "constraint-1:" not in out and "constraint-3:" not in out


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_line_ends_are_read_as_text_mode_reads_them(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    eol: str) -> None:
    f = tmp_path / "log.jsonl"
    f.write_bytes(eol.join([OK_LINE, "", json.dumps({"messages": BAD}), '{"messages": [',
                            OK_LINE]).encode() + b"\r")
    assert main(["check-log", "booking-policy", str(f)]) == 2
    out = capsys.readouterr().out
    assert f"{f}:3: conversation 1: violated" in out and f"{f}:5: conversation 3: ok" in out
    assert f"{f}:4:15: malformed JSON" in out
    d = tmp_path / "log.json"
    d.write_bytes(eol.join(["[", '  {"role": "user", "content": "x"},', '  {"role": }', "]"])
                  .encode())
    assert main(["check-log", "booking-policy", str(d)]) == 2
    assert f"{d}:3:12: malformed JSON" in capsys.readouterr().err
