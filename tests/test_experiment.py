"""The experiment harness resumes and grows cells without re-running or losing episodes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from validation.experiment import main, questions_to_add


def _qs(n: int) -> list[SimpleNamespace]:
    return [SimpleNamespace(uid=f"q{i}") for i in range(n)]


def test_a_cell_grows_by_the_questions_it_lacks() -> None:
    done = [{"uid": "q0"}, {"uid": "q1"}]
    assert [q.uid for q in questions_to_add(done, _qs(5))] == ["q2", "q3", "q4"]
    assert questions_to_add(done, _qs(2)) == []
    assert questions_to_add(done, _qs(1)) == []  # a larger saved cell is kept as it is
    assert [q.uid for q in questions_to_add([], _qs(2))] == ["q0", "q1"]


def test_a_cell_of_other_questions_is_refused() -> None:
    with pytest.raises(SystemExit, match="not the first of this run's"):
        questions_to_add([{"uid": "q1"}], _qs(3))


def _episodes(out: Path) -> list[dict]:
    path = out / "runs" / "react-tiny.arithmetic.k0.constrained.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.mark.slow
def test_extend_runs_only_the_questions_a_cell_lacks(tmp_path: Path) -> None:
    args = ["--models", "react-tiny", "--tasks", "arithmetic", "--ks", "0", "--agents", "constrained",
            "--max-new-tokens", "48", "--out", str(tmp_path)]
    assert main([*args, "--n", "2"]) == 0
    first = _episodes(tmp_path)
    first[0]["text"] = "kept, not re-run"  # mark a saved episode: a re-run would overwrite it
    path = tmp_path / "runs" / "react-tiny.arithmetic.k0.constrained.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in first)
    assert main([*args, "--n", "3", "--resume"]) == 0  # --resume keeps the saved cell as it is
    assert _episodes(tmp_path) == first
    assert main([*args, "--n", "3", "--extend"]) == 0
    grown = _episodes(tmp_path)
    assert [r["uid"] for r in grown] == [r["uid"] for r in first] + ["arith-test-2000-2"]
    assert grown[:2] == first
    cell = json.loads((tmp_path / "runs" / "react-tiny.arithmetic.k0.constrained.json").read_text())
    assert cell["n"] == 3
    assert not list((tmp_path / "runs").glob("*.tmp"))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [r["n"] for r in summary["results"]] == [3]


def test_the_shipped_results_are_not_overwritten_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    """``python validation/experiment.py`` wrote into the tracked validation/results/ within 90 s,
    with n = 300 (over a day): now it writes a git-ignored scratch folder, with n = 20, and the
    shipped folder needs --resume/--extend (which keep its cells) or --overwrite."""
    import validation.experiment as exp

    assert (exp.SHIPPED / "summary.json").is_file()
    with pytest.raises(SystemExit):
        main(["--out", str(exp.SHIPPED), "--models", "react-tiny", "--tasks", "arithmetic", "--ks", "0"])
    assert "holds the results that ship" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "default 20" in help_text and "validation/results/tmp/run" in help_text
    assert exp.SCRATCH.is_relative_to(exp.SHIPPED / "tmp")  # /validation/results/tmp/ is git-ignored
