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

from .automaton import Automaton, Verdict
from .compiled import CompiledSpec, compile_spec
from .errors import CompileError, LtlAgentError, SpecError, SpecErrors, UsageError
from .spec import Spec, State, bundled_specs, load_spec, parse_spec

if TYPE_CHECKING:  # the lazily loaded names, for type checkers and editors
    from .agent import Agent, RunResult
    from .equiv import EquivResult, check_equivalence
    from .monitor import Monitor, TokenIndex, build_index
    from .processor import LtlLogitsProcessor, LtlStoppingCriteria, logits_processor
    from .tools import Calculator, DocumentStore, Tool, ToolError, tool
    from .validate import FileReport, Validator

__version__ = "0.1.0"

#: name -> module, for the names loaded on first use.
_LAZY = {
    "Validator": "ltlagent.validate", "FileReport": "ltlagent.validate",
    "check_equivalence": "ltlagent.equiv", "EquivResult": "ltlagent.equiv",
    "TokenIndex": "ltlagent.monitor", "build_index": "ltlagent.monitor", "Monitor": "ltlagent.monitor",
    "LtlLogitsProcessor": "ltlagent.processor", "LtlStoppingCriteria": "ltlagent.processor",
    "logits_processor": "ltlagent.processor",
    "Agent": "ltlagent.agent", "RunResult": "ltlagent.agent",
    "Tool": "ltlagent.tools", "tool": "ltlagent.tools", "Calculator": "ltlagent.tools",
    "DocumentStore": "ltlagent.tools", "ToolError": "ltlagent.tools",
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
    # decoding and agents (llm extra)
    "TokenIndex", "build_index", "Monitor", "LtlLogitsProcessor", "LtlStoppingCriteria",
    "logits_processor", "Agent", "RunResult", "Tool", "tool", "Calculator", "DocumentStore",
    # errors
    "LtlAgentError", "SpecError", "SpecErrors", "UsageError", "CompileError", "ToolError",
    "__version__",
]
