"""One compiled spec: the parsed spec, its automaton table and its keyword lexer, built together.

Validation, check-trace and the decoding monitor all start from a :class:`CompiledSpec`, so they
share one automaton and one lexer (docs/design.md §10).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from ltlagent.logic.automaton import Automaton, build_automaton
from ltlagent.spec.syntax import Spec, load_spec
from ltlagent.text.lexer import Lexer, build_lexer

__all__ = ["CompiledSpec", "compile_spec"]


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


def compile_spec(spec: Spec | str | Path) -> CompiledSpec:
    """Compile a spec object, a spec file path or a bundled spec name: automaton and lexer."""
    s = spec if isinstance(spec, Spec) else load_spec(spec)
    # event states (docs/design.md §2.5) have no prompt strings: their lexer knows no keyword
    texts = [] if s.is_event_spec else [st.text for st in s.states]
    return CompiledSpec(s, build_automaton(s), build_lexer(texts))


def __getattr__(name: str) -> object:
    if name == "compile":  # the old name of compile_spec, which shadowed the builtin
        warnings.warn("ltlagent.logic.compiled.compile is deprecated: use compile_spec",
                      DeprecationWarning, stacklevel=2)
        return compile_spec
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
