"""The tool-calling experiment (issue 18): batched turns give the transcripts of one-at-a-time runs,
the tasks' success is judged on the database, and results are never overwritten silently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from validation.chat_experiment import EXAMPLES, Task, main, make_tasks


def _episodes(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


def test_batched_turns_give_the_transcripts_of_single_runs(tmp_path: Path) -> None:
    common = ["--model", "react-tiny", "--tasks", "3", "--arms", "none", "policy",
              "--max-turns", "2", "--max-new-tokens", "24"]
    assert main([*common, "--batch", "1", "--out", str(tmp_path / "one")]) == 0
    assert main([*common, "--batch", "3", "--out", str(tmp_path / "three")]) == 0
    one, three = _episodes(tmp_path / "one"), _episodes(tmp_path / "three")
    assert len(one) == len(three) == 6
    assert [e["messages"] for e in one] == [e["messages"] for e in three]
    for e in three:  # the worked example is shown to the model, never part of the transcript
        assert e["messages"][1] == {"role": "user", "content": e["messages"][1]["content"]}
        assert all(m not in e["messages"] for m in EXAMPLES)  # type: ignore[operator]
    summary = json.loads((tmp_path / "three" / "summary.json").read_text())
    assert set(summary["arms"]) == {"none", "policy"}
    assert main([*common, "--out", str(tmp_path / "three")]) == 2  # results are kept


def test_success_is_read_off_the_database() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "booking"))
    from domain import Database

    tasks = {t.kind: t for t in make_tasks(10)}
    db = Database.fresh()
    book: Task = tasks["book"]
    assert not book.success(db, [])
    db.call("book", {"user_id": book.want["user"], "room": book.want["room"],
                     "date": book.want["date"], "guests": book.want["guests"]})
    assert book.success(db, [])
    assert tasks["never-yes"].success(Database.fresh(), [])
    assert not tasks["never-yes"].success(db, [])
    handoff = [{"role": "assistant", "tool_calls": [{"function": {"name": "transfer_to_human"}}]}]
    assert tasks["human"].success(Database.fresh(), handoff)
    assert not tasks["human"].success(Database.fresh(), [])
