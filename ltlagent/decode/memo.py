"""The mutable memo inside a compiled token index (docs/design.md §5): what the index computed so far.

A :class:`~ltlagent.decode.monitor.TokenIndex` is immutable as far as its users can tell; the
machine rows, masks and per-token steps it computes are kept here, deterministically (the same
for every order of computation), so one index serves many cursors. :mod:`ltlagent.decode.warm`
stores the masks on disk and loads them back; it works on this memo, not on the index, so neither
module imports the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ltlagent.decode.machine import ByteEvent, Machine
from ltlagent.decode.masks import Mask

if TYPE_CHECKING:
    from ltlagent.decode.events import Event

__all__ = ["FastEnter", "FastStep", "IndexMemo", "Move", "TokenStep", "ROOM", "reserved_dict"]

#: Insertions the index's per-step memos take before their first resize (a 4096-slot table, 74 kB, each).
ROOM = 1364

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


def reserved_dict(room: int) -> dict[Any, Any]:
    """An empty dict with a table that takes at least ``room`` insertions before it resizes.

    The memos below grow at the first steps over new (state, token) pairs, i.e. in a served
    request's first pass, and a resize allocates a fresh table there: right after a build has freed
    a lot of memory, such an allocation measured 0.1-0.4 ms (the C allocator sorting its free
    lists), the worst first-pass steps at 128k tokens. CPython sizes a dict made by ``fromkeys`` of
    a set for that set and keeps the table when the keys are deleted; elsewhere this is a plain dict.
    """
    size = 8
    while size // 3 < room + 1:
        size *= 2
    n = size // 3 + 1  # just over a third: fromkeys picks a table of ``size`` (usable 2/3 of it)
    d: dict[Any, Any] = dict.fromkeys(set(range(-n, 0)))
    for k in range(-n, 0):
        del d[k]
    return d


class IndexMemo:
    """Machine rows (in :attr:`machine`), base and budget-steering masks, token steps, the index's
    variants (newline separator on/off), and where its masks persist."""

    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        self.masks: dict[tuple[int, bool], Mask] = {}  # (state, eos_ends_text) -> base mask
        self.steer: dict[tuple[int, bool, bool, int, int], Mask] = {}
        self.variants: dict[bool, object] = {}  # newline -> TokenIndex
        # the per-step memos have room reserved: no resize during a first pass (reserved_dict)
        self.steps: dict[int, TokenStep] = reserved_dict(ROOM)  # state * vocab size + token -> step
        self.moves: dict[tuple[int, int], Move] = reserved_dict(ROOM)
        self.token_bytes: dict[int, bytes] = reserved_dict(ROOM)  # the bytes of tokens cursors consumed
        self.disk_key: str | None = None  # the index's cache key, when masks persist (ltlagent.decode.warm)
        self.warm: tuple[str, int] | None = None  # (masks entry, masks loaded or last saved)
        self.precomputed = False  # every reachable state's mask was computed (TokenIndex.precompute)
        #: eos_ends_text -> state -> token -> fast step (learnt by cursors on their slow steps)
        self.fast: dict[bool, dict[int, dict[int, FastStep]]] = {False: reserved_dict(ROOM),
                                                                 True: reserved_dict(ROOM)}
        self.fast_steps = True  # cursors learn and take fast steps (off: every step the slow way; tests)
