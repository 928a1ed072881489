"""The runner's limits end in complete traces (issue 4/5 gaps): a step limit, context used up by
environment text, and a newline before a prompt string that follows an ended text (so transcripts
pass ``ltlagent validate --strict``). Each test also shows the run going wrong without the fix."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from ltlagent import compile_spec  # noqa: E402
from ltlagent.agent.runner import Agent, RunResult  # noqa: E402
from ltlagent.agent.tools import Calculator, tool  # noqa: E402
from ltlagent.checks.validate import Validator  # noqa: E402
from ltlagent.decode.monitor import Monitor  # noqa: E402

from .test_agent import SAMPLE, check_result, tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    torch.set_num_threads(1)
    return tiny_model()


def _strict_ok(r: RunResult, spec: str) -> bool:
    report = Validator(compile_spec(spec), tools=["Calculator"], strict=True).validate_text(r.transcript, "t")
    return report.exit_code == 0


@pytest.mark.parametrize("spec", ["react", "reflexion"])
def test_step_limit_ends_accepted(tiny: tuple[Any, Any], spec: str) -> None:
    model, tok = tiny
    agent = Agent.from_spec(spec, model, tok, tools=[Calculator()], evaluator=lambda a: "Try again.")
    aut = agent.compiled.automaton
    shortest = aut.distance_to_accept[aut.initial]
    for seed in range(4):
        for n in sorted({max(2, shortest), 6, 7}):
            r = agent.run("What is 2 + 2?", **SAMPLE, seed=seed, max_new_tokens=400, max_steps=n)
            assert r.accepted and r.stop_reason == "complete" and len(r.steps) <= n, (seed, n, r.trace)
            check_result(r, spec, ["Calculator"])
    # without the step steering the same runs overrun the limit
    agent._index = agent.index.mutated("steps")
    runs = [agent.run("What is 2 + 2?", **SAMPLE, seed=seed, max_new_tokens=400, max_steps=n)
            for seed in range(4) for n in (6, 7)]
    assert any(r.stop_reason == "max_steps" and not r.accepted for r in runs)


def test_environment_text_counts_against_the_context(tiny: tuple[Any, Any],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool answers at length in a small context: the monitor is told what is left after each
    Observation and steers onto a shorter completion instead of running out of context."""
    _model, tok = tiny

    @tool
    def Echo(text: str) -> str:
        """Answers at length.

        Args:
            text: ignored
        """
        return "The result is 4. " * 12

    def runs() -> list[RunResult]:
        out = []
        for seed in range(6):
            agent = Agent.from_spec("react", model, tok, tools=[Echo])
            prompt = len(tok.encode(agent.prompt("What is 2 + 2?")))
            model.config.n_positions = prompt + 150
            out.append(agent.run("What is 2 + 2?", **SAMPLE, seed=seed, max_new_tokens=140))
        return out

    model, _ = tiny_model(positions=4096)
    got = runs()
    assert all(r.accepted and r.stop_reason == "complete" for r in got), [r.stop_reason for r in got]
    assert any(r.usage["env_tokens"] > 40 for r in got)
    for r in got:
        assert r.usage["prompt_tokens"] + r.usage["env_tokens"] + r.usage["generated_tokens"] \
            - r.usage["eos_tokens"] <= model.config.n_positions
    monkeypatch.setattr(Monitor, "set_remaining", lambda self, n: None)  # the runner's update switched off
    assert any(r.stop_reason == "context_full" for r in runs())


def test_tool_output_longer_than_the_context_is_cut_to_fit() -> None:
    """A tool answers 1,500 characters where far less context is left: the Observation is cut to
    what fits and says so, the notes say so, and the finite spec still ends accepted (before, the
    run ended ``context_full``, incomplete, with an empty Observation)."""
    from . import tiny
    from .test_boundary import Scripted

    tok = tiny.byte_level()

    @tool
    def Calculator(expression: str) -> str:
        """Answers at length.

        Args:
            expression: ignored
        """
        return "1234567890 " * 136

    model = Scripted(tok, "PROMPT-END\n", "Thought: t\nAction: Calculator\nAction Input: 2*3\n")
    agent = Agent.from_spec("react", model, tok, tools=[Calculator],
                            prompt="Answer it.\nQuestion: {{task}}\nPROMPT-END")
    prompt = len(tok.encode(agent.prompt("What is 2 * 3?")))
    model.config.max_position_embeddings = prompt + 400
    r = agent.run("What is 2 * 3?", max_new_tokens=300)
    assert r.accepted and r.stop_reason == "complete", (r.stop_reason, r.trace)
    (obs,) = [s.text for s in r.steps if s.state == "Observation"]
    assert obs.startswith("1234567890 1234567890") and "[cut to fit the context: 1495 characters, " in obs
    assert "env_text_cut" in r.notes
    assert r.usage["prompt_tokens"] + r.usage["env_tokens"] + r.usage["generated_tokens"] \
        - r.usage["eos_tokens"] <= model.config.max_position_embeddings


@pytest.mark.parametrize("spec", ["react", "reflexion"])
def test_transcripts_pass_strict_validation(tiny: tuple[Any, Any], spec: str) -> None:
    model, tok = tiny
    agent = Agent.from_spec(spec, model, tok, tools=[Calculator()], evaluator=lambda a: "Wrong.")
    plain = 0
    for seed in range(8):
        r = agent.run("What is 2 + 2?", **SAMPLE, seed=seed, max_new_tokens=200, max_steps=12)
        assert r.accepted and _strict_ok(r, spec), (seed, r.transcript)
        check_result(r, spec, ["Calculator"])
        plain += not _strict_ok(agent.run("What is 2 + 2?", **SAMPLE, seed=seed, max_new_tokens=200,
                                          max_steps=12, newline=False), spec)
    assert plain > 0  # without the separator some prompt string follows text on the same line


def test_a_long_template_given_as_text_is_a_template_not_a_path() -> None:
    """A whole prompt template passed as a string is longer than a file name may be: it must be
    read as the template, not fail on the file system (ENAMETOOLONG)."""
    from ltlagent.agent.environment import read_prompt

    template = "Answer well.\n" + "An example line.\n" * 400 + "Question: {{task}}\n"
    assert read_prompt(template) == template
