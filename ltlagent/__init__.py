"""ltlagent: formally specify the high-level behaviour of LLM agents.

Write an agent's behaviour once as an s-expression spec; get a Spot automaton, a token-level
constrained decoder for Hugging Face causal LMs, a few-shot prompt validator and an equivalence
checker from it. Heavy dependencies (torch, transformers) are imported only where needed.
"""

from __future__ import annotations

from .automaton import Automaton, Verdict, compile_spec
from .compiled import CompiledSpec, compile
from .errors import LtlAgentError, SpecError, UsageError
from .lexer import Lexer, build_lexer
from .spec import Spec, State, bundled_specs, load_spec, parse_spec

__version__ = "0.1.0"

# The LLM side needs torch and transformers: loaded on first use, so that `import ltlagent`
# (validation, equivalence, show) stays light.
_LAZY = {
    "Agent": "ltlagent.agent", "RunResult": "ltlagent.agent", "Tool": "ltlagent.tools",
    "tool": "ltlagent.tools", "Calculator": "ltlagent.tools", "DocumentStore": "ltlagent.tools",
    "build_index": "ltlagent.monitor", "Monitor": "ltlagent.monitor",
    "LtlLogitsProcessor": "ltlagent.processor", "LtlStoppingCriteria": "ltlagent.processor",
    "logits_processor": "ltlagent.processor",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ltlagent' has no attribute {name!r}")


__all__ = [
    "Automaton", "CompiledSpec", "Lexer", "LtlAgentError", "Spec", "SpecError",
    "State", "UsageError", "Verdict", "build_lexer", "bundled_specs", "compile", "compile_spec",
    "load_spec", "parse_spec", "__version__", *_LAZY,
]
