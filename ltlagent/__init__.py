"""ltlagent: formally specify the high-level behaviour of LLM agents.

Write an agent's behaviour once as an s-expression spec; get a Spot automaton, a token-level
constrained decoder for Hugging Face causal LMs, a few-shot prompt validator and an equivalence
checker from it (docs/design.md §1, §10).

The public API is what ``__all__`` lists. The spec side (parse, compile, check) is imported
eagerly; the rest loads on first use, so that ``import ltlagent`` stays free of torch and
transformers (a test checks it): the validator and the equivalence checker need only Spot, the
token index, monitor, logits processor and agent need the ``llm`` extra.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING

from ltlagent.chat.events import Event
from ltlagent.errors import (
    CompileError,
    LogError,
    LtlAgentError,
    SpecError,
    SpecErrors,
    UsageError,
)
from ltlagent.logic.automaton import Automaton, Verdict
from ltlagent.logic.compiled import CompiledSpec, compile_spec
from ltlagent.logic.policy import ConversationReport, Decision, Policy, PolicyCursor
from ltlagent.spec.syntax import Spec, State, bundled_specs, load_spec, parse_spec
from ltlagent.version import __version__

if TYPE_CHECKING:  # the lazily loaded names, for type checkers and editors
    from ltlagent.agent.runner import Agent, RunResult
    from ltlagent.agent.tools import Calculator, DocumentStore, Tool, ToolError, tool
    from ltlagent.checks.equiv import EquivResult, check_equivalence
    from ltlagent.checks.validate import FileReport, Validator
    from ltlagent.decode.monitor import Monitor, TokenIndex, build_index
    from ltlagent.decode.processor import LtlLogitsProcessor, LtlStoppingCriteria, logits_processor


#: name -> module, for the names loaded on first use.
_LAZY = {
    "Validator": "ltlagent.checks.validate", "FileReport": "ltlagent.checks.validate",
    "check_equivalence": "ltlagent.checks.equiv", "EquivResult": "ltlagent.checks.equiv",
    "TokenIndex": "ltlagent.decode.monitor", "build_index": "ltlagent.decode.monitor",
    "Monitor": "ltlagent.decode.monitor",
    "LtlLogitsProcessor": "ltlagent.decode.processor", "LtlStoppingCriteria": "ltlagent.decode.processor",
    "logits_processor": "ltlagent.decode.processor",
    "Agent": "ltlagent.agent.runner", "RunResult": "ltlagent.agent.runner",
    "Tool": "ltlagent.agent.tools", "tool": "ltlagent.agent.tools", "Calculator": "ltlagent.agent.tools",
    "DocumentStore": "ltlagent.agent.tools", "ToolError": "ltlagent.agent.tools",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name == "compile":  # the old name of compile_spec, which shadowed the builtin
        warnings.warn("ltlagent.compile is deprecated: use ltlagent.compile_spec",
                      DeprecationWarning, stacklevel=2)
        return compile_spec
    raise AttributeError(f"module 'ltlagent' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    # specs: read, compile, check
    "Spec", "State", "parse_spec", "load_spec", "bundled_specs", "compile_spec", "CompiledSpec",
    "Automaton", "Verdict", "Validator", "FileReport", "check_equivalence", "EquivResult",
    # policies over chat events
    "Policy", "PolicyCursor", "Decision", "ConversationReport", "Event",
    # decoding and agents (llm extra)
    "TokenIndex", "build_index", "Monitor", "LtlLogitsProcessor", "LtlStoppingCriteria",
    "logits_processor", "Agent", "RunResult", "Tool", "tool", "Calculator", "DocumentStore",
    # errors
    "LtlAgentError", "SpecError", "SpecErrors", "UsageError", "CompileError", "ToolError",
    "LogError",
    "__version__",
]
