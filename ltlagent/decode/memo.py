"""The mutable memo inside a compiled token index (docs/design.md §5): what the index computed so far.

A :class:`~ltlagent.decode.monitor.TokenIndex` is immutable as far as its users can tell; the
machine rows, masks and per-token steps it computes are kept here, deterministically (the same
for every order of computation), so one index serves many cursors. :mod:`ltlagent.decode.warm`
stores the masks on disk and loads them back; it works on this memo, not on the index, so neither
module imports the other.
"""

from __future__ import annotations

from ltlagent.decode.machine import ByteEvent, Machine
from ltlagent.decode.masks import Mask

__all__ = ["IndexMemo", "Move", "TokenStep"]

#: A text token fed from a machine state: (next state or -1, events with the byte offset after each).
TokenStep = tuple[int, tuple[tuple[ByteEvent, int], ...]]
#: What a cursor needs of a token in a state, whatever its count: (next state, events, whether a
#: state is entered, why the text ended, the ``:max-tokens`` of the free text it leads to).
Move = tuple[int, tuple[tuple[ByteEvent, int], ...], bool, "str | None", "int | None"]


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
