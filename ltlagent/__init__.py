"""ltlagent: formally specify the high-level behaviour of LLM agents.

Write an agent's behaviour once as an s-expression spec; get a Spot automaton, a token-level
constrained decoder for Hugging Face causal LMs, a few-shot prompt validator and an equivalence
checker from it. Heavy dependencies (torch, transformers) are imported only where needed.
"""

from __future__ import annotations

from .automaton import Automaton, Verdict, compile_spec
from .compiled import CompiledSpec, compile
from .errors import LtlAgentError, PromptError, SpecError, UsageError
from .lexer import Lexer, build_lexer
from .spec import Spec, State, bundled_specs, load_spec, parse_spec

__version__ = "0.1.0"

__all__ = [
    "Automaton", "CompiledSpec", "Lexer", "LtlAgentError", "PromptError", "Spec", "SpecError",
    "State", "UsageError", "Verdict", "build_lexer", "bundled_specs", "compile", "compile_spec",
    "load_spec", "parse_spec", "__version__",
]
