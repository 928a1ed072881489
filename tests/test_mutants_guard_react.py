"""The text-format guard (``ltlagent.guard.react``) against a scripted in-process completions
client: no server, so that a mutation run reaches it in milliseconds (issue 31; docs/mutation.md,
"guard/proxy.py, guard/mcp.py, guard/react.py"). The same scenarios over HTTP are in
``tests/test_guard_react.py``; here runs are compared whole (text, steps, outcome, counts)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("openai")

from ltlagent.errors import UsageError
from ltlagent.guard.react import TextGuard, TextStep, react_tools
from tests.test_guard_react import REACT, SCRIPT, _model


class Scripted:
    """A stand-in for ``openai.OpenAI``: ``completions.create`` asks ``brain`` (a function of the
    request, as in ``tests/test_guard_react.py``) and records each request."""

    def __init__(self, brain: Any, finish: str | None = "stop") -> None:
        self.brain, self.finish, self.requests = brain, finish, []
        self.completions = self

    def create(self, **body: Any) -> Any:
        self.requests.append(body)
        text = self.brain(body).message["content"]
        return SimpleNamespace(choices=[SimpleNamespace(text=text, finish_reason=self.finish)])


def guard(brain: Any, tools: Any = None, **kw: Any) -> tuple[TextGuard, Scripted]:
    client = Scripted(brain)
    return TextGuard(REACT, react_tools(tools or {}), client=client, model="m", **kw), client  # type: ignore[arg-type]


def test_a_run_writes_the_observation_and_ends_complete() -> None:
    g, client = guard(_model(SCRIPT, True), {"Search": lambda q: f"found {q}"}, temperature=0)
    run = g.run("Question: what is the capital of France?\n")
    assert run.outcome == "complete" and run.verdict.accepted and run.cuts == 0
    assert run.steps == (
        TextStep("Thought", "I should look it up.", "model"), TextStep("Action", "Search", "guard"),
        TextStep("Action-Input", "capital of France", "model"),
        TextStep("Observation", "found capital of France", "environment"),
        TextStep("Final-Thought", "the search says Paris.", "model"),
        TextStep("Answer", "Paris\nQuestion: next one", "guard"))
    assert run.text == ("Thought: I should look it up.\nAction: Search\nAction Input: capital of France\n"
                        "Observation: found capital of France\nFinal Thought: the search says Paris.\n"
                        "Answer: Paris\nQuestion: next one")
    assert run.requests == len(client.requests) == 4
    assert all(r["model"] == "m" and r["temperature"] == 0 for r in client.requests)
    assert client.requests[0]["prompt"] == "Question: what is the capital of France?\n"
    assert [r["stop"] for r in client.requests] == [
        ["Observation:", "Action:", "Action Input:", "Answer:"],
        ["Observation:", "Thought:", "Action:", "Final Thought:"],
        ["Observation:", "Action:", "Action Input:", "Answer:"],
        ["Observation:", "Thought:", "Action:", "Action Input:"]]


def test_a_model_that_ignores_stop_is_cut_where_the_spec_forbids() -> None:
    g, _ = guard(_model(SCRIPT, False), {"Search": lambda q: "Paris"})
    run = g.run("Question: q\n")
    assert run.outcome == "complete" and run.verdict.accepted and run.cuts == 1
    assert run.trace == ("Thought", "Action", "Action-Input", "Observation", "Final-Thought", "Answer")


def test_the_stop_list_is_capped_environment_first() -> None:
    g, _ = guard(_model(SCRIPT, True))
    q = g.compiled.automaton.initial
    assert g.stop_for(q) == ["Observation:", "Action:", "Action Input:", "Answer:"]
    g1, _ = guard(_model(SCRIPT, True), max_stop=1)
    assert g1.stop_for(q) == ["Observation:"]
    g3, _ = guard(_model(SCRIPT, True), max_stop=None)
    assert g3.stop_for(q)[:4] == g.stop_for(q) and len(g3.stop_for(q)) >= 4


def test_no_progress_ends_after_the_retries() -> None:
    g, client = guard(lambda body: SimpleNamespace(message={"content": "Answer: now"}), max_retries=2)
    run = g.run("Question: q\n")
    assert (run.outcome, run.requests, run.steps, run.cuts, run.text) == ("retries", 3, (), 3, "")
    assert not run.verdict.accepted and len(client.requests) == 3


def test_a_reply_cut_by_length_is_continued_then_gives_up() -> None:
    client = Scripted(lambda body: SimpleNamespace(message={"content": ""}), finish="length")
    g = TextGuard(REACT, react_tools({}), client=client, model="m", max_retries=1)  # type: ignore[arg-type]
    run = g.run("Q\n")
    assert (run.outcome, run.requests) == ("retries", 2)


def test_max_steps_bounds_a_run() -> None:
    g, _ = guard(lambda body: SimpleNamespace(message={"content": "Thought: more"}), max_steps=1)
    run = g.run("Q\n")
    assert run.outcome == "max-steps" and run.trace == ("Thought", "Action") and run.requests == 1
    g, _ = guard(lambda body: SimpleNamespace(message={"content": " "}), max_steps=2, max_retries=10)
    run = g.run("Q\n")
    assert run.outcome == "max-steps" and run.requests == 4 and run.steps == ()


def test_a_run_whose_last_reply_was_cut_by_length_ends_complete() -> None:
    """The answer written, the reply cut by its length: the trace may stop there, so the run is
    complete without another request."""
    client = Scripted(_model(SCRIPT, True))
    client.finish = None
    brain = client.brain

    def finish_by_length(body: Any) -> Any:
        client.finish = "length" if body["prompt"].endswith("Answer:") else "stop"
        return brain(body)
    client.brain = finish_by_length
    g = TextGuard(REACT, react_tools({"Search": lambda q: "Paris"}), client=client, model="m")  # type: ignore[arg-type]
    run = g.run("Question: q\n")
    assert (run.outcome, run.requests) == ("complete", 4) and run.verdict.accepted


def test_react_tools_observations() -> None:
    def boom(_: str) -> str:
        raise KeyError("k")
    obs = react_tools({"Search": lambda q: q.upper(), "Boom": boom, "Num": lambda q: 3})  # type: ignore[dict-item]
    steps = [TextStep("Action", " Search ", "model"), TextStep("Action-Input", "x", "model")]
    assert obs("Observation", steps) == "X"
    assert obs("Observation", [TextStep("Action", "Boom", "model")]) == "error: KeyError: 'k'"
    assert obs("Observation", [TextStep("Action", "Num", "model")]) == "3"
    assert obs("Observation", [TextStep("Action", "Nope", "model")]) == \
        "unknown tool 'Nope'; tools: Search, Boom, Num"
    assert obs("Observation", []) == "unknown tool ''; tools: Search, Boom, Num"
    later = [*steps, TextStep("Action", "Num", "model"), TextStep("Action-Input", "y", "model")]
    assert obs("Observation", later) == "3"
    own = react_tools({"Search": lambda q: q}, action="Act", action_input="In")
    assert own("Observation", [TextStep("Act", "Search", "model"), TextStep("In", "z", "model"),
                               TextStep("Action-Input", "no", "model")]) == "z"


def test_settings_are_checked_when_made(monkeypatch: pytest.MonkeyPatch) -> None:
    client = Scripted(None)
    for kw in ({"max_retries": -1}, {"max_steps": 0}, {"max_stop": 0}):
        with pytest.raises(UsageError) as e:
            TextGuard(REACT, react_tools({}), client=client, model="m", **kw)  # type: ignore[arg-type]
        assert str(e.value) == "max_retries must be ≥ 0, max_steps and max_stop ≥ 1"
    TextGuard(REACT, react_tools({}), client=client, model="m", max_retries=0, max_steps=1,  # type: ignore[arg-type]
              max_stop=1)
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    with pytest.raises(UsageError) as e:
        TextGuard(REACT, react_tools({}), client=client)  # type: ignore[arg-type]
    assert str(e.value) == "no model: pass model=… or set $OPENAI_MODEL"
    monkeypatch.setenv("OPENAI_MODEL", "from-env")
    assert TextGuard(REACT, react_tools({}), client=client).model == "from-env"  # type: ignore[arg-type]
    assert TextGuard(REACT, react_tools({}), client=client, model="m").model == "m"  # type: ignore[arg-type]


def test_a_spec_with_event_states_is_refused_naming_them() -> None:
    from tests.test_mutants_guard import SPEC

    with pytest.raises(UsageError) as e:
        TextGuard(SPEC, react_tools({}), client=Scripted(None), model="m")  # type: ignore[arg-type]
    assert str(e.value) == ("System, Confirm, User, Lookup, Write, Handoff, Call, Result, Reply: event "
                            "states have no prompt string; a chat policy is guarded by "
                            "ltlagent.guard.Guard (tool calls), not TextGuard")
