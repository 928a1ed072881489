"""The agent runner on vLLM (issue #10): ``agent = vllm_agent("react", llm, tools=[...])`` (``llm``
a ``vllm.LLM`` built with ``logits_processors=[LtlLogitsProcessor]``), then ``agent.run_batch(tasks)``
(:func:`run_batch`: many episodes at once, each turn one vLLM request; the loop lives in
:mod:`ltlagent.agent.vllm_episodes`, below the runner, so that the runner can call it without an
import cycle).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltlagent.agent.runner import Agent
from ltlagent.agent.vllm_episodes import run_batch

if TYPE_CHECKING:
    from ltlagent.agent.tools import Tool
    from ltlagent.spec.syntax import Spec

__all__ = ["vllm_agent", "run_batch"]


def vllm_agent(spec: Spec | str | Path, llm: Any, *, tools: Sequence[Tool] = (), **kwargs: Any) -> Agent:
    """An :class:`~ltlagent.agent.runner.Agent` over a ``vllm.LLM`` (its tokenizer is the engine's);
    ``kwargs`` as for :meth:`Agent.from_spec`."""
    return Agent.from_spec(spec, llm, llm.get_tokenizer(), tools=tools, **kwargs)
