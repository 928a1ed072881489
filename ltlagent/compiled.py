"""One compiled spec: the parsed spec, its automaton table and its keyword lexer, built together.

Validation, check-trace and the decoding monitor all start from a :class:`CompiledSpec`, so they
share one automaton and one lexer (docs/design.md §10).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .automaton import Automaton, compile_spec
from .lexer import Lexer, build_lexer
from .spec import Spec, load_spec

__all__ = ["CompiledSpec", "compile"]


@dataclass(frozen=True)
class CompiledSpec:
    """Everything derived from a spec that the runtime needs; immutable and shareable."""

    spec: Spec
    automaton: Automaton
    lexer: Lexer

    @property
    def names(self) -> tuple[str, ...]:
        return self.spec.names

    def state_of_keyword(self, index: int) -> str:
        """Lexer keyword ``index`` is the prompt text of this state (same order as declared)."""
        return self.spec.states[index].name


def compile(spec: Spec | str | Path) -> CompiledSpec:
    """Compile a spec object, a spec file path or a bundled spec name."""
    s = spec if isinstance(spec, Spec) else load_spec(spec)
    return CompiledSpec(s, compile_spec(s), build_lexer([st.text for st in s.states]))
