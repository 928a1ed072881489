"""What the decoding monitor reports while it consumes tokens and environment text
(:class:`Event`). Its own module, below :mod:`ltlagent.decode.monitor` (which re-exports it) and
:mod:`ltlagent.decode.memo` (whose fast steps carry one), so that neither imports the other's
module for it (no import cycles, docs/design.md §10).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Event"]


class Event(NamedTuple):
    """Something that happened while consuming a token or environment text.

    ``kind`` is one of:

    * ``"enter"``: state ``state`` was entered (its prompt string was completed); ``forced`` is True
      when the prompt string was written after the text had ended (chosen under the mask / forced)
      rather than freely in running text.
    * ``"end"``: the text of ``state`` ended without a prompt string; ``reason`` is ``"eos"``,
      ``"stop"``, ``"max-tokens"`` or ``"boundary"`` (the model began a new example: a context
      label such as ``Question:`` started a line; ``text`` is that label and ``at`` the byte
      offset in :attr:`Monitor.text_bytes` where it starts, which is where the state's content ends);
      from now on only allowed prompt strings may be written.
    * ``"env"``: ``state`` is an ``:env-input`` state just entered; the caller must call
      :meth:`Monitor.feed_env` before generating again.
    * ``"text"``: ``text`` was appended to the text (the decoded delta of one token; incomplete
      UTF-8 sequences are held back until complete); ``at`` is the byte offset in
      :attr:`Monitor.text_bytes` where it starts.
    * ``"finished"``: the trace is complete and EOS was consumed.

    A named tuple (built at every token: a frozen dataclass cost 5× as much to create).
    """

    kind: str
    state: str | None = None
    forced: bool = False
    reason: str | None = None
    text: str = ""
    at: int | None = None
