"""The monitor as a ``transformers.LogitsProcessor`` and ``StoppingCriteria`` (docs/design.md §5).

Usable with a plain ``model.generate(..., logits_processor=[proc], stopping_criteria=[proc.stopping])``:
greedy, sampling, batches with left padding, beam search. Each row has its own
:class:`~ltlagent.decode.monitor.Monitor`, found by the row's token prefix (a row continues a fork of its
parent's), never by call order, so beam reordering is harmless.

Under ``generate``, EOS ends a row: it is allowed only where the trace is complete. Entering an
``:env-input`` state stops the row (the stopping criteria); append the environment's text to the
output and call ``generate`` again with the same processor: a row whose input starts with a paused
row's sequence continues that trace (the appended tokens are the environment text). Any other input
starts a new trace, so one processor can be reused across calls.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from transformers import LogitsProcessor, StoppingCriteria

from ltlagent.decode.masks import apply_rows, numpy_view
from ltlagent.decode.monitor import Monitor, TokenIndex, build_index
from ltlagent.errors import UsageError
from ltlagent.logic.compiled import CompiledSpec
from ltlagent.spec.syntax import Spec

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
        self._paused: dict[bytes, Monitor] = {}
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
        self._states: dict[bytes, Monitor] = {}
        # the rows of the last call and their cursors: a call whose rows are the same, or each one
        # token longer (no beam reordering), steps every cursor in place (_continue)
        self._last: np.ndarray | None = None
        self._mons: list[Monitor] = []
        self._distinct = False  # the cursors of _mons are distinct objects (no two rows share one)
        self._stale = False  # _states lags behind _last/_mons (rebuilt when the slow path needs it)

    def _continue(self, ids: np.ndarray) -> list[Monitor] | None:
        """The cursors of ``ids`` when its rows are those of the last call, or each one token longer
        (the common case: no beams, or beams in place): every cursor follows its row's new token,
        taking a fast step where it can; else None (the rows are found by prefix)."""
        last = self._last
        if last is None or ids.shape[0] != last.shape[0]:
            return None
        n = last.shape[1]
        if ids.shape[1] == n:
            return self._mons if ids.tobytes() == last.tobytes() else None
        if ids.shape[1] != n + 1 or ids[:, :n].tobytes() != last.tobytes():
            return None
        mons = self._mons
        if not self._distinct:  # equal rows share a cursor: each gets its own before they part
            seen: set[int] = set()
            for i, mon in enumerate(mons):
                if id(mon) in seen:
                    mons[i] = mon.fork()
                seen.add(id(mon))
            self._distinct = True
        for i in Monitor.follow_rows(mons, ids[:, n].tolist()):
            self._pause(ids[i], mons[i])
        self._last = ids
        self._stale = True
        return mons

    def _continue_one(self, ids: np.ndarray) -> Monitor | None:
        """:meth:`_continue` for a batch of one row (a few calls fewer): the row of the last call
        (the stopping criteria stepped it already), or that row one token longer."""
        last = self._last
        if last is None or last.shape[0] != 1:
            return None
        row = ids[0]
        if ids.shape[1] == last.shape[1]:
            return self._mons[0] if row.tobytes() == last.tobytes() else None
        if ids.shape[1] != last.shape[1] + 1 or row[:-1].tobytes() != last.tobytes():
            return None
        mon = self._mons[0]
        if mon.follow(int(row[-1])):
            self._pause(row, mon)
        self._last = ids
        self._stale = True
        return mon

    def _remember(self, ids: np.ndarray, mons: list[Monitor]) -> None:
        self._last, self._mons = ids, mons
        self._distinct = len({id(m) for m in mons}) == len(mons)

    def _state_map(self) -> dict[bytes, Monitor]:
        """The cursors by their rows' token prefixes (rebuilt after steps taken in place)."""
        if self._stale and self._last is not None:
            last = self._last
            self._states = {last[i].tobytes(): mon for i, mon in enumerate(self._mons)}
            self._stale = False
        return self._states

    # -- per-row cursors
    def _strip(self, row: np.ndarray) -> np.ndarray:
        if self.pad_token_id is None:
            return row
        nz = np.nonzero(row != self.pad_token_id)[0]
        return row[nz[0]:] if nz.size else row[:0]

    def _initial(self, row: np.ndarray) -> Monitor:
        """The cursor of a row at the start of a call: a paused row's continuation (the tokens
        after it are the environment's text), or a fresh trace."""
        full = self._strip(row)
        data = full.tobytes()
        best: Monitor | None = None
        best_len = -1
        for seq, mon in self._paused.items():
            if len(seq) > best_len and data.startswith(seq):
                best, best_len = mon, len(seq)
        if best is None:
            mon = Monitor(self.index, eos_ends_text=False)
        else:
            mon = best.fork()
            v = self.index.vocab
            mon.feed_env([int(t) for t in full[best_len // 8:] if 0 <= t < v.size and v.is_text[t]])
        mon.set_remaining(self.max_new_tokens)
        return mon

    def _monitor(self, row: np.ndarray, sole: bool = False) -> Monitor:
        """The cursor after the row's generated tokens.

        Cursors are memoised by the row's whole token prefix (prompt included), so rows are told
        apart by content, not by position: beam reordering and batches need no bookkeeping. A row
        continues a fork of its parent's cursor (a beam's parent may have several children), or,
        when the caller knows it is its parent's ``sole`` child, takes the parent's cursor over."""
        assert self._start is not None
        states = self._state_map()
        full = row.tobytes()  # row[:j].tobytes() is full[:8 * j] (int64 ids)
        mon = states.get(full)
        if mon is not None:
            return mon
        n = row.shape[0]
        j = n - 1
        parent = states.get(full[:8 * j])
        while parent is None and j > self._start:
            j -= 1
            parent = states.get(full[:8 * j])
        if parent is None:
            j = self._start
            parent = states[full[:8 * j]] = self._initial(row[:j])
            mon = parent.fork()
        elif sole and j == n - 1:
            mon = states.pop(full[:8 * j])  # nobody else continues it: no copy
        else:
            mon = parent.fork()
        waiting = mon.waiting_for_env
        for k in range(j, n):
            mon.follow(int(row[k]))  # after a stop, what follows (padding) is ignored
            if not waiting and mon.waiting_for_env:
                self._pause(row[:k + 1], mon)
                waiting = True
        states[full] = mon
        return mon

    def _monitors(self, ids: np.ndarray) -> list[Monitor]:
        """The cursors of all rows of ``ids`` (a row that is its parent's only child in the batch
        takes the parent's cursor over)."""
        mons = self._continue(ids)
        if mons is not None:
            return mons
        if ids.shape[0] == 1:
            mons = [self._monitor(ids[0], True)]
        else:
            parents = Counter(ids[i, :-1].tobytes() for i in range(ids.shape[0]))
            mons = [self._monitor(ids[i], parents[ids[i, :-1].tobytes()] == 1) for i in range(ids.shape[0])]
        self._remember(ids, mons)
        return mons

    def _pause(self, seq: np.ndarray, mon: Monitor) -> None:
        if len(self._paused) >= _MAX_PAUSED:
            self._paused.pop(next(iter(self._paused)))
        self._paused[self._strip(seq).tobytes()] = mon

    def _rows(self, input_ids: torch.Tensor) -> np.ndarray:
        try:  # CPU ids: their own memory (about 1 µs less than detach().cpu() on every call)
            ids = input_ids.numpy()
        except (TypeError, RuntimeError):  # on an accelerator
            ids = input_ids.detach().cpu().numpy()
        if ids.dtype != np.int64:
            ids = ids.astype(np.int64)
        if ids.ndim != 2:
            raise ValueError(f"expected input_ids of shape (batch, length), got {tuple(ids.shape)}")
        return ids

    # -- the processor
    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        ids = self._rows(input_ids)
        length = ids.shape[1]
        if length == self._last_len + 1 and ids.shape[0] == 1 and not self.strict:
            # one row on the CPU, one token longer (greedy or sampled generation of one sequence):
            # the shortest path, a few µs
            arr = numpy_view(scores)
            if arr is not None and arr.ndim == 2 and arr.shape[0] == 1:
                mon = self._continue_one(ids)
                if mon is not None:
                    self._last_len = length
                    mon.current_mask().apply_numpy(arr[0])
                    return scores
        if scores.dim() != 2 or scores.shape[0] != ids.shape[0]:
            raise ValueError(f"expected scores of shape ({ids.shape[0]}, vocab), got {tuple(scores.shape)}")
        monitors = self._continue(ids) if length == self._last_len + 1 else None
        if monitors is None:
            states = self._state_map()
            new_call = self._start is None or length != self._last_len + 1 or any(
                ids[i, :-1].tobytes() not in states and ids[i].tobytes() not in states
                for i in range(ids.shape[0]))
            if new_call:
                self._start = length
                self._states = {}
                self._last = None
            monitors = self._monitors(ids)
        self._last_len = length
        if self.strict:
            # a token the mask forbids: beam search keeps -inf candidates when too few are allowed;
            # anything else means another logits processor overrode the mask
            dead = next((i for i, mon in enumerate(monitors) if mon.is_dead), None)
            if dead is not None:
                raise UsageError(f"row {dead} holds a token the monitor forbids; another logits "
                                 "processor may have overridden the mask")
        masks = Monitor.masks_of(monitors)
        if scores.is_contiguous():
            apply_rows(masks, scores)  # all rows in a fixed number of tensor operations (or numpy)
        else:
            for i, mk in enumerate(masks):
                mk.apply(scores[i])
        # keep only the current rows (their children are looked up next step)
        self._last, self._stale = ids, True
        return scores

    def row_monitor(self, row_ids: torch.Tensor | np.ndarray) -> Monitor:
        """The cursor of one row (full input ids) of the current generation."""
        row = row_ids.detach().cpu().numpy() if hasattr(row_ids, "detach") else np.asarray(row_ids)
        return self._monitor(row.astype(np.int64))

    def row_state(self, row_ids: torch.Tensor | np.ndarray) -> int:
        """The machine state of one row (full input ids) of the current generation."""
        return self.row_monitor(row_ids).machine_state


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
        done = Monitor.stopped_of(p._monitors(ids))
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


def logits_processor(spec: CompiledSpec | Spec | str | Path, tokenizer: object, *,
                     tool_names: Sequence[str] | None = None, max_new_tokens: int | None = None,
                     cache: bool = True) -> LtlLogitsProcessor:
    """Shorthand for :meth:`LtlLogitsProcessor.from_spec`."""
    return LtlLogitsProcessor.from_spec(spec, tokenizer, tool_names=tool_names,
                                        max_new_tokens=max_new_tokens, cache=cache)
