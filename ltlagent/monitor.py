"""The token-level decoding monitor (DESIGN §5): compile once (:class:`TokenIndex`), step cheaply
(:class:`Monitor`, one cursor per sequence).

Public API (stable; the agent runner and the ``transformers`` processor are built on it):

* :func:`build_index` — spec + tokenizer → frozen :class:`TokenIndex` (expensive, cached on disk).
* :class:`Monitor` — runtime cursor: ``mask_into`` / ``allowed_token_ids`` / ``forced_token`` say
  what the model may write next; ``advance`` consumes a token and returns :class:`Event` s;
  ``feed_env`` appends environment text after an ``:env-input`` state was entered.

Semantics: generated text is lexed by the spec's keyword lexer (the same one validation uses).
In a free-text state every token is allowed except those that would make the lexer recognise the
prompt string of a state the automaton forbids next, or break the state's content constraint.
When the state's text ends without a prompt string (EOS, a ``:stop`` string, ``:max-tokens``)
only tokens that begin an allowed prompt string are allowed; once one prompt string is determined
the rest is forced. ``:env-input`` states pause. A complete trace lets EOS through and finishes.
With ``max_new_tokens`` the monitor steers onto a shortest completion when the budget only just
suffices, so finite specs always end complete.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .compiled import CompiledSpec

if TYPE_CHECKING:
    import numpy as np
    import torch

__all__ = ["Event", "StateText", "TokenIndex", "Monitor", "build_index"]


@dataclass(frozen=True)
class Event:
    """Something that happened while consuming a token or environment text.

    ``kind`` is one of:

    * ``"enter"``: state ``state`` was entered (its prompt string was completed); ``forced`` is True
      when the monitor chose or forced the prompt string (text ended, or budget steering) rather
      than the model writing it freely in running text.
    * ``"end"``: the text of ``state`` ended without a prompt string; ``reason`` is ``"eos"``,
      ``"stop"`` or ``"max-tokens"``; from now on only allowed prompt strings may be written.
    * ``"env"``: ``state`` is an ``:env-input`` state just entered; the caller must call
      :meth:`Monitor.feed_env` before generating again.
    * ``"text"``: ``text`` was appended to the generated text (the decoded delta of one token;
      incomplete UTF-8 sequences are held back until complete).
    * ``"finished"``: the trace is complete and EOS was consumed (or nothing more can be written).
    """

    kind: str
    state: str | None = None
    forced: bool = False
    reason: str | None = None
    text: str = ""


@dataclass(frozen=True)
class StateText:
    """One visited state and its content (text between its prompt and the next, stripped)."""

    state: str
    text: str
    by_env: bool = False
    forced: bool = False


class TokenIndex:
    """Spec × tokenizer, compiled: vocabulary bytes, keyword/stop candidate sets, byte machine.

    Immutable as far as its users can tell; masks for the (automaton state, lexer node, content
    state) combinations actually visited are computed on first use and memoised inside.
    Build it with :func:`build_index`.
    """

    compiled: CompiledSpec
    tool_names: tuple[str, ...] | None

    @property
    def vocab_size(self) -> int:
        """Number of token ids the index knows (masks cover at least this many logits)."""
        raise NotImplementedError

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        """Token ids that end generation."""
        raise NotImplementedError


def build_index(compiled: CompiledSpec, tokenizer: object, *, tool_names: Sequence[str] | None = None,
                cache: bool = True) -> TokenIndex:
    """Compile ``compiled`` (a :class:`CompiledSpec`; a spec path or bundled name also works) for
    ``tokenizer`` (any Hugging Face tokenizer, or a ``tokenizers.Tokenizer``).

    ``tool_names`` fills states declared ``(:choices :tools)``. With ``cache`` the compiled index is
    read from / written to the on-disk cache (:mod:`ltlagent.cache`), keyed by the spec, the
    vocabulary hash and the ltlagent and Spot versions.
    """
    raise NotImplementedError


class Monitor:
    """Runtime cursor over a :class:`TokenIndex`: one per generated sequence.

    ``max_new_tokens``: the number of tokens the model may still generate (environment text does
    not count); when given, the monitor keeps enough room to reach a complete trace.
    ``eos_ends_text``: EOS in a state that is not complete ends that state's text (the model then
    picks the next prompt string) instead of being forbidden; the EOS token is not text and the
    caller should not append it to the model input (``advance`` returns an ``"end"`` event).
    """

    def __init__(self, index: TokenIndex, *, max_new_tokens: int | None = None,
                 eos_ends_text: bool = True) -> None:
        raise NotImplementedError

    # -- what may come next
    def allowed_token_ids(self) -> np.ndarray:
        """Sorted ids of the tokens allowed now (for tests and debugging; slow-ish at 128k)."""
        raise NotImplementedError

    def mask_into(self, logits_row: torch.Tensor) -> None:
        """Set the logits of forbidden tokens to -inf in place (1-D tensor, any width ≥ 1).

        Picks the cheapest method by sparsity: ``index_fill_`` of few forbidden ids, -inf plus a copy
        of few allowed ids, or ``add_`` of a cached 0/-inf bias. Ids beyond the vocabulary are
        always forbidden.
        """
        raise NotImplementedError

    def forced_token(self) -> int | None:
        """The single allowed token when the continuation is forced, else None (skip the forward
        pass and feed it directly)."""
        raise NotImplementedError

    def allowed_next_states(self) -> tuple[str, ...]:
        """Spec states whose prompt string may come next (equals ``Automaton.allowed(q)`` as long
        as the current content can still be completed)."""
        raise NotImplementedError

    # -- consuming
    def advance(self, token_id: int) -> list[Event]:
        """Consume one generated token; raises ``UsageError`` if it is not allowed."""
        raise NotImplementedError

    def feed_env(self, text_or_token_ids: str | Sequence[int]) -> list[Event]:
        """Append environment text (a string, or token ids of the same tokenizer) for the
        ``:env-input`` state just entered; afterwards the model must write an allowed prompt
        string. Raises ``UsageError`` when not waiting for the environment or when the text
        contains a prompt string."""
        raise NotImplementedError

    def reset(self) -> None:
        """Start a new trace (same index and budget)."""
        raise NotImplementedError

    # -- where we are
    @property
    def state(self) -> str | None:
        """Name of the current spec state, or None before the first prompt string."""
        raise NotImplementedError

    @property
    def trace(self) -> list[str]:
        """Names of the states visited so far, in order."""
        raise NotImplementedError

    @property
    def steps(self) -> list[StateText]:
        """Visited states with their contents (the last one possibly still growing)."""
        raise NotImplementedError

    @property
    def text(self) -> str:
        """All text so far: generated tokens and environment text, decoded."""
        raise NotImplementedError

    @property
    def waiting_for_env(self) -> bool:
        """An ``:env-input`` state was just entered: call :meth:`feed_env` next."""
        raise NotImplementedError

    @property
    def is_finished(self) -> bool:
        """EOS was consumed in a complete state, or nothing more can be written."""
        raise NotImplementedError

    @property
    def is_complete(self) -> bool:
        """The trace so far is accepted by the spec (finite specs)."""
        raise NotImplementedError

    @property
    def tokens_generated(self) -> int:
        """Tokens consumed by :meth:`advance` since the start or the last reset."""
        raise NotImplementedError
