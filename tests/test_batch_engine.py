"""The experiment's batched engine (validation/batch_agent.py) decodes as the product's runner does:
the same episodes, step for step, whether the prompts share their few-shot prefix in one KV cache,
environment text goes in as chunks, or each question runs alone through ``Agent.run``."""

from __future__ import annotations

import pytest
import torch

from validation.experiment import ExpConfig, load_model, run_config, run_config_agent


@pytest.mark.slow
@pytest.mark.parametrize("task", ["arithmetic", "kbqa"])
def test_batch_engine_matches_the_runner(task: str) -> None:
    from ltlagent import compile_spec
    from ltlagent.agent.runner import eos_token_ids
    from ltlagent.decode.monitor import build_index
    from ltlagent.text.lexer import CONTEXT_LABELS
    from validation.experiment import KB, SPECS
    from validation.synth import TASK_TOOLS, ToolEnv, exemplars, heldout, make_world

    torch.set_num_threads(1)
    model, tok, _ = load_model("react-tiny")
    world = make_world(0)
    env = ToolEnv(kb_path=str(KB))
    shots = exemplars(task, env, world, 0)
    questions = heldout(task, env, world, 4, 0)
    react, paper = compile_spec("react"), compile_spec(SPECS["constrained"])
    compiled = {a: compile_spec(SPECS[a]) for a in SPECS}
    cfg = ExpConfig(n=4, batch=4, max_new_tokens=160)

    def index_for(agent: str, t: str) -> object:
        return build_index(compiled[agent], tok, tool_names=list(TASK_TOOLS[t]),
                           eos_token_ids=eos_token_ids(model, tok), context_labels=CONTEXT_LABELS)

    for agent in ("constrained", "ablated"):
        batched = run_config(cfg, "react-tiny", model, tok, index_for, compiled.__getitem__, task, 2, agent,
                             shots, questions, env, react, paper)
        alone = run_config_agent(cfg, "react-tiny", model, tok, compiled.__getitem__, task, 2, agent,
                                 shots, questions, env, react, paper)
        for b, a in zip(batched, alone, strict=True):
            assert (b["states"], b["pred"], b["text"]) == (a["states"], a["pred"], a["text"]), agent
