"""The mutable memo inside a compiled token index (docs/design.md §5): what the index computed so far.

A :class:`~ltlagent.decode.monitor.TokenIndex` is immutable as far as its users can tell; the
machine rows, masks and per-token steps it computes are kept here, deterministically (the same
for every order of computation), so one index serves many cursors. :mod:`ltlagent.decode.warm`
stores the masks on disk and loads them back; it works on this memo, not on the index, so neither
module imports the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ltlagent.decode.machine import ByteEvent, Machine
from ltlagent.decode.masks import Mask

if TYPE_CHECKING:
    from ltlagent.decode.monitor import Event

__all__ = ["FastEnter", "FastStep", "IndexMemo", "Move", "TokenStep"]

#: A text token fed from a machine state: (next state or -1, events with the byte offset after each).
TokenStep = tuple[int, tuple[tuple[ByteEvent, int], ...]]
#: What a cursor needs of a token in a state, whatever its count: (next state, events, whether a
#: state is entered, why the text ended, the ``:max-tokens`` of the free text it leads to).
Move = tuple[int, tuple[tuple[ByteEvent, int], ...], bool, "str | None", "int | None"]
#: A state a fast step enters: (its index, where its prompt string starts and its content starts,
#: relative to the token's first byte, whether the prompt string was forced, the ``"enter"`` event).
FastEnter = tuple[int, int, int, bool, "Event"]
#: A token a cursor without budget may take in one dict lookup (text and at most a state entered,
#: no ``:max-tokens``, complete UTF-8): (next state, the token's bytes, its text, the next state's
#: base mask or None if not computed yet, the next state's row of fast steps, the state entered).
FastStep = tuple[int, bytes, str, "Mask | None", "dict[int, FastStep]", "FastEnter | None"]


class IndexMemo:
    """Machine rows (in :attr:`machine`), base and budget-steering masks, token steps, the index's
    variants (newline separator on/off), and where its masks persist."""

    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        self.masks: dict[tuple[int, bool], Mask] = {}  # (state, eos_ends_text) -> base mask
        self.steer: dict[tuple[int, bool, bool, int, int], Mask] = {}
        self.variants: dict[bool, object] = {}  # newline -> TokenIndex
        self.steps: dict[int, TokenStep] = {}  # state * vocab size + token -> step
        self.moves: dict[tuple[int, int], Move] = {}
        self.token_bytes: dict[int, bytes] = {}  # the bytes of tokens cursors consumed
        self.disk_key: str | None = None  # the index's cache key, when masks persist (ltlagent.decode.warm)
        self.warm: tuple[str, int] | None = None  # (masks entry, masks loaded or last saved)
        self.precomputed = False  # every reachable state's mask was computed (TokenIndex.precompute)
        #: eos_ends_text -> state -> token -> fast step (learnt by cursors on their slow steps)
        self.fast: dict[bool, dict[int, dict[int, FastStep]]] = {False: {}, True: {}}
        self.fast_steps = True  # cursors learn and take fast steps (off: every step the slow way; tests)
