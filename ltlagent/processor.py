"""The monitor as a ``transformers.LogitsProcessor`` and ``StoppingCriteria`` (docs/design.md §5).

Usable with a plain ``model.generate(..., logits_processor=[proc], stopping_criteria=[proc.stopping])``:
greedy, sampling, batches with left padding, beam search. The state of each row is re-derived from
the row's own generated tokens (looked up by its token prefix), never from call order, so beam
reordering is harmless.

Under ``generate``, EOS ends a row: it is allowed only where the trace is complete. Entering an
``:env-input`` state stops the row (the stopping criteria); append the environment's text to the
output and call ``generate`` again with the same processor: a row whose input starts with a paused
row's sequence continues that trace (the appended tokens are the environment text). Any other input
starts a new trace, so one processor can be reused across calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from transformers import LogitsProcessor, StoppingCriteria

from .compiled import CompiledSpec
from .errors import UsageError
from .machine import DONE, ENV
from .masks import Mask, apply_rows
from .monitor import TokenIndex, build_index
from .spec import Spec

if TYPE_CHECKING:
    import torch

__all__ = ["LtlLogitsProcessor", "LtlStoppingCriteria", "logits_processor"]

_MAX_PAUSED = 4096


class LtlLogitsProcessor(LogitsProcessor):
    """Masks each row's logits so that every generated trace obeys the spec.

    ``max_new_tokens``: pass the same value as to ``generate``; the processor then leaves room to
    reach a complete trace (finite specs end complete instead of being cut off).
    ``pad_token_id``: stripped from the left of rows when matching paused rows across calls.
    ``strict``: raise when a row holds a token the mask forbids (off by default: beam search keeps
    -inf candidates when fewer than ``num_beams`` tokens are allowed; such rows are stopped).
    """

    def __init__(self, index: TokenIndex, *, max_new_tokens: int | None = None,
                 pad_token_id: int | None = None, strict: bool = False) -> None:
        self.index = index
        self.strict = strict
        self.max_new_tokens = max_new_tokens
        self.pad_token_id = pad_token_id
        self.stopping = LtlStoppingCriteria(self)
        self._paused: dict[bytes, tuple[int, int]] = {}
        self.reset()

    @classmethod
    def from_spec(cls, spec: CompiledSpec | Spec | str | Path, tokenizer: object, *,
                  tool_names: Sequence[str] | None = None, max_new_tokens: int | None = None,
                  cache: bool = True) -> LtlLogitsProcessor:
        """Build the index for ``spec`` and ``tokenizer`` (cached on disk) and wrap it."""
        index = build_index(spec, tokenizer, tool_names=tool_names, cache=cache)
        return cls(index, max_new_tokens=max_new_tokens,
                   pad_token_id=getattr(tokenizer, "pad_token_id", None))

    def reset(self) -> None:
        """Forget the current generation (paused rows are kept for continuation)."""
        self._start: int | None = None
        self._last_len = -1
        self._states: dict[bytes, tuple[int, int]] = {}

    # -- per-row state
    def _strip(self, row: np.ndarray) -> np.ndarray:
        if self.pad_token_id is None:
            return row
        nz = np.nonzero(row != self.pad_token_id)[0]
        return row[nz[0]:] if nz.size else row[:0]

    def _initial(self, row: np.ndarray) -> tuple[int, int]:
        """State of a row at the start of a call: a paused row's continuation, or a fresh trace."""
        full = self._strip(row)
        data = full.tobytes()
        best: tuple[int, int] | None = None
        best_len = -1
        for seq, st in self._paused.items():
            if len(seq) > best_len and data.startswith(seq):
                best, best_len = st, len(seq)
        if best is None:
            return (self.index.start, 0)
        env_ids = full[best_len // 8:]
        v = self.index.vocab
        env = b"".join(v.token_bytes(int(t)) for t in env_ids if 0 <= t < v.size and v.is_text[t])
        return (self.index.machine.after_env(best[0], env), 0)

    def _state(self, row: np.ndarray) -> tuple[int, int]:
        """(machine state, tokens in the current state's text) after the row's generated tokens.

        States are memoised by the row's whole token prefix (prompt included), so rows are told
        apart by content, not by position: beam reordering and batches need no bookkeeping."""
        assert self._start is not None
        states = self._states
        st = states.get(row.tobytes())
        if st is not None:
            return st
        n = row.shape[0]
        j = n - 1
        while j > self._start and row[:j].tobytes() not in states:
            j -= 1
        st = states.get(row[:j].tobytes())
        if st is None:
            j = self._start
            st = states[row[:j].tobytes()] = self._initial(row[:j])
        m = self.index.machine
        for k in range(j, n):
            tok = int(row[k])
            # after a stop, what follows (padding) is not text; a dead row stays dead
            if st[0] >= 0 and m.mode(st[0]) not in (ENV, DONE):
                sid, count, _evs, _reason = self.index.advance(st[0], st[1], tok, False)
                st = (sid, count)
                if sid >= 0 and m.mode(sid) == ENV:
                    self._pause(row[:k + 1], st)
            states[row[:k + 1].tobytes()] = st
        return st

    def _pause(self, seq: np.ndarray, st: tuple[int, int]) -> None:
        if len(self._paused) >= _MAX_PAUSED:
            self._paused.pop(next(iter(self._paused)))
        self._paused[self._strip(seq).tobytes()] = st

    def _rows(self, input_ids: torch.Tensor) -> np.ndarray:
        ids = input_ids.detach().cpu().numpy().astype(np.int64, copy=False)
        if ids.ndim != 2:
            raise ValueError(f"expected input_ids of shape (batch, length), got {tuple(ids.shape)}")
        return ids

    # -- the processor
    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        ids = self._rows(input_ids)
        length = ids.shape[1]
        new_call = self._start is None or length != self._last_len + 1 or any(
            ids[i, :-1].tobytes() not in self._states for i in range(ids.shape[0]))
        if new_call:
            self._start = length
            self._states = {}
        self._last_len = length
        if scores.dim() != 2 or scores.shape[0] != ids.shape[0]:
            raise ValueError(f"expected scores of shape ({ids.shape[0]}, vocab), got {tuple(scores.shape)}")
        remaining = None if self.max_new_tokens is None else self.max_new_tokens - (length - self._start)
        states = [self._state(ids[i]) for i in range(ids.shape[0])]
        masks: list[Mask] = []
        for i, (sid, count) in enumerate(states):
            if sid < 0:
                # a token the mask forbids: beam search keeps -inf candidates when too few are
                # allowed; anything else means another processor overrode the mask
                if self.strict:
                    raise UsageError(f"row {i} holds a token the monitor forbids; another logits "
                                     "processor may have overridden the mask")
                masks.append(self._dead_mask())
                continue
            masks.append(self.index.mask(sid, False, remaining, None, count))
        if scores.is_contiguous():
            apply_rows(masks, scores)  # all rows in a fixed number of tensor operations
        else:
            for i, mk in enumerate(masks):
                mk.apply(scores[i])
        # keep only the current rows (their children are looked up next step)
        self._states = {ids[i].tobytes(): st for i, st in enumerate(states)}
        return scores

    def _dead_mask(self) -> Mask:
        return self.index.mask(self.index.machine.intern((DONE, 0, -1, 0, 0, 0, 0, 0)))

    def row_state(self, row_ids: torch.Tensor | np.ndarray) -> int:
        """The machine state of one row (full input ids) of the current generation."""
        row = row_ids.detach().cpu().numpy() if hasattr(row_ids, "detach") else np.asarray(row_ids)
        return self._state(row.astype(np.int64))[0]


class LtlStoppingCriteria(StoppingCriteria):
    """Stops a row when its trace is finished or waits for the environment."""

    def __init__(self, processor: LtlLogitsProcessor) -> None:
        self.processor = processor

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: object) -> torch.Tensor:
        import torch

        p = self.processor
        if p._start is None:
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        ids = p._rows(input_ids)
        m = p.index.machine
        done = []
        for i in range(ids.shape[0]):
            sid, _ = p._state(ids[i])
            done.append(sid < 0 or m.mode(sid) in (ENV, DONE) or (m.complete(sid) and not m.allowed_next(sid)
                                                         and not p.index.eos_token_ids))
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


def logits_processor(spec: CompiledSpec | Spec | str | Path, tokenizer: object, *,
                     tool_names: Sequence[str] | None = None, max_new_tokens: int | None = None,
                     cache: bool = True) -> LtlLogitsProcessor:
    """Shorthand for :meth:`LtlLogitsProcessor.from_spec`."""
    return LtlLogitsProcessor.from_spec(spec, tokenizer, tool_names=tool_names,
                                        max_new_tokens=max_new_tokens, cache=cache)
