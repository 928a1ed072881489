"""The text-format (ReAct) guard on an API (issue 20): stop sequences from the automaton, the reply
re-parsed with the spec's lexer and cut before a label the spec forbids, the environment writing
its states, bounded retries — against the stand-in server's ``/v1/completions`` on localhost."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("openai")

from ltlagent.errors import UsageError
from ltlagent.guard.react import TextGuard, TextStep, react_tools
from ltlagent.logic.compiled import compile_spec
from tests.standin import Reply, StandIn

REACT = compile_spec("react")


def _stopped(text: str, stop: list[str] | None) -> str:
    """What a server that honours ``stop`` returns: the text up to the first stop sequence."""
    cut = min((text.find(s) for s in stop or [] if s in text), default=len(text))
    return text[:cut]


def _model(intended: str, honour_stop: bool) -> Any:
    """A completions "model" that means to write ``intended`` after the question: it continues
    from where the prompt's trace stands (the last prompt string in it, and the text after it; after
    an observation, from the end of its own made-up one), so it is a function of the request."""
    def brain(body: dict[str, Any]) -> Reply:
        trace = body["prompt"].split("\n", 1)[1]  # after the question line
        found = list(REACT.lexer.finditer(trace))
        if not found:
            pos = len(trace)
        else:
            last = found[-1]
            label = REACT.lexer.keywords[last.index]
            n = sum(1 for m in found if m.index == last.index)
            at = [m for m in REACT.lexer.finditer(intended) if m.index == last.index]
            end = at[n - 1].end if len(at) >= n else len(intended)
            if label == "Observation:":
                pos = intended.find("\n", end) + 1
            else:
                pos = end + len(trace) - last.end
        text = intended[pos:]
        return Reply({"content": _stopped(text, body.get("stop")) if honour_stop else text})
    return brain


SCRIPT = ("Thought: I should look it up.\nAction: Search\nAction Input: capital of France\n"
          "Observation: (made up by the model)\nFinal Thought: the search says Paris.\n"
          "Answer: Paris\nQuestion: next one")


@pytest.mark.parametrize("honour_stop", [True, False], ids=["server-stops", "server-ignores-stop"])
def test_the_environment_writes_observations_and_the_trace_is_accepted(honour_stop: bool) -> None:
    searched: list[str] = []

    def search(q: str) -> str:
        searched.append(q)
        return "Paris is the capital of France."
    with StandIn(_model(SCRIPT, honour_stop)) as s:
        g = TextGuard(REACT, react_tools({"Search": search}), base_url=s.url, model="standin")
        run = g.run("Question: what is the capital of France?\n")
        stops = [r.get("stop") for r in s.requests]
    assert searched == ["capital of France"]  # the model's made-up observation was never used
    assert run.outcome == "complete" and run.verdict.accepted, run
    assert run.trace == ("Thought", "Action", "Action-Input", "Observation", "Final-Thought", "Answer")
    obs = next(st for st in run.steps if st.state == "Observation")
    assert obs == TextStep("Observation", "Paris is the capital of France.", "environment")
    assert "(made up" not in run.text
    assert run.steps[-1].content.startswith("Paris")
    # the first request may not write Observation (environment) nor Answer (not allowed yet)
    assert {"Observation:", "Action:", "Action Input:", "Answer:"} == set(stops[0])


def test_a_forbidden_label_is_cut_and_the_only_allowed_one_is_written() -> None:
    def brain(body: dict[str, Any]) -> Reply:
        p = body["prompt"]
        if p.endswith("Action:"):  # the guard wrote the forced label; the model goes on
            return Reply({"content": " Search\nAction Input: x\n"})
        if "Observation:" in p:
            return Reply({"content": "Final Thought: ok\nAnswer: 42"})
        return Reply({"content": "Thought: I know!\nAnswer: 42"})  # Answer may not follow Thought
    with StandIn(brain) as s:
        g = TextGuard(REACT, react_tools({"Search": lambda q: "nothing"}), base_url=s.url,
                      model="standin")
        run = g.run("Question: q\n")
    assert run.cuts >= 1 and run.verdict.accepted
    assert run.steps[1] == TextStep("Action", "Search", "guard")  # its label written for the model
    assert run.trace == ("Thought", "Action", "Action-Input", "Observation", "Final-Thought", "Answer")
    assert "I know!\nAnswer" not in run.text


def test_no_progress_ends_after_the_retries() -> None:
    with StandIn(lambda body: Reply({"content": "Answer: now"})) as s:  # always forbidden here
        g = TextGuard(REACT, react_tools({}), base_url=s.url,
                      model="standin", max_retries=2)
        run = g.run("Question: q\n")
    assert run.outcome == "retries" and not run.verdict.accepted
    assert run.requests == 3 and run.steps == ()
    assert "Answer" not in run.trace


def test_event_specs_and_bad_settings_are_refused() -> None:
    with pytest.raises(UsageError, match="event states"):
        TextGuard(_booking(), react_tools({}), model="m",
                  base_url="http://127.0.0.1:9/v1")
    with pytest.raises(UsageError):
        TextGuard(REACT, react_tools({}), model="m", base_url="http://127.0.0.1:9/v1", max_retries=-1)


def _booking() -> Any:
    from pathlib import Path

    return Path(__file__).resolve().parents[1] / "specs" / "booking-policy.sexp"
