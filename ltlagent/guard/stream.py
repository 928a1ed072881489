"""Server-sent events of the chat-completions API: reading an upstream stream into replies, and
writing chunks (docs/design.md §13).

The proxy forwards a streamed reply's text as it comes (the guard does not gate text) but holds
everything else back: tool-call deltas (``delta.tool_calls[i]``: an ``index``, then the ``id``, the
function's ``name`` and pieces of its ``arguments``), legacy ``function_call`` deltas, and any key
of a delta it does not know. They are assembled here, per choice (``index``), into the message a
non-streamed reply would hold — whatever its shape, so that :func:`ltlagent.guard.screen.screen`
judges it by the one rule — and only once the upstream has finished is each choice judged and its
allowed calls emitted whole, one chunk each.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["ReplyAssembler", "sse", "sse_events", "DONE", "MAX_CHOICES"]

#: The last event of a completed stream.
DONE = b"data: [DONE]\n\n"

#: The most choices one reply may have (``n`` of a request).
MAX_CHOICES = 128

#: The keys of a chunk forwarded with its text (anything else a chunk carries is not passed on).
_CHUNK_KEYS = ("id", "object", "created", "model", "system_fingerprint", "service_tier")

#: The text-only keys of a delta, forwarded as they come (everything else is held and judged).
_TEXT_KEYS = ("content", "reasoning_content", "reasoning")


def sse(payload: Mapping[str, object]) -> bytes:
    """One ``data:`` event."""
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


async def sse_events(chunks: AsyncIterator[bytes], max_bytes: int,
                     max_line: int) -> AsyncGenerator[str, None]:
    """The ``data:`` payloads of a byte stream of server-sent events, as text; comments and other
    fields are skipped. Raises ``ValueError`` past ``max_bytes`` in all or ``max_line`` in one line
    (bounded while reading: a line is never buffered past its limit)."""
    buf = b""
    total = 0
    async for piece in chunks:
        total += len(piece)
        if total > max_bytes:
            raise ValueError(f"the stream is longer than {max_bytes} bytes")
        buf += piece
        *lines, buf = buf.split(b"\n")
        if len(buf) > max_line:
            raise ValueError(f"a line of the stream is longer than {max_line} bytes")
        for raw in lines:
            if raw.startswith(b"data:"):
                yield raw[5:].strip().decode("utf-8", "strict")
    if buf.startswith(b"data:"):
        yield buf[5:].strip().decode("utf-8", "strict")


@dataclass
class _Call:
    """One streamed call in assembly; a piece that is not a string is kept as it came, so that
    the judgement sees the shape the upstream sent."""

    id: object = None
    type: object = None
    name: object = ""
    arguments: object = ""
    function: object = None  # a 'function' that was not an object
    custom: dict[str, object] | None = None

    def take(self, tc: Mapping[str, object], legacy: bool) -> None:
        fn: object = tc if legacy else tc.get("function")
        if not legacy:
            for key in ("id", "type"):
                if tc.get(key) is not None:
                    setattr(self, key, tc[key])
            if "custom" in tc:
                self.custom = {**(self.custom or {}), "value": tc["custom"]}
        if fn is None:
            return
        if not isinstance(fn, Mapping):
            self.function = fn
            return
        for key in ("name", "arguments"):
            piece, have = fn.get(key), getattr(self, key)
            if piece is None:
                continue
            setattr(self, key, have + piece if isinstance(have, str) and isinstance(piece, str)
                    else piece if have == "" else [have, piece])

    def message(self) -> dict[str, object]:
        """The call as a non-streamed reply would hold it (an entry of ``tool_calls``)."""
        out: dict[str, object] = {"id": self.id, "type": self.type,
                                  "function": self.function if self.function is not None else
                                  {"name": self.name, "arguments": self.arguments}}
        if self.custom is not None:
            out["custom"] = self.custom["value"]
        return out


@dataclass
class _Choice:
    """One choice of a streamed reply in assembly."""

    role: object = None
    content: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    odd_calls: list[object] = field(default_factory=list)  # 'tool_calls' deltas that were not lists
    legacy: _Call | None = None
    finish_reason: str | None = None

    def message(self, before: str = "") -> dict[str, object]:
        """The choice as a non-streamed reply's message; ``before``: text sent on earlier attempts."""
        text = before + "".join(self.content)
        out: dict[str, object] = {"role": "assistant" if self.role is None else self.role,
                                  "content": text or None}
        if self.odd_calls:
            out["tool_calls"] = self.odd_calls[0]
        elif self.calls:
            out["tool_calls"] = [c.message() for _, c in sorted(self.calls.items())]
        if self.legacy is not None:
            out["function_call"] = (self.legacy.function if self.legacy.function is not None else
                                    {"name": self.legacy.name, "arguments": self.legacy.arguments})
        return out


@dataclass
class ReplyAssembler:
    """Reads the chunks of one streamed reply; :meth:`feed` says what may be forwarded at once."""

    choices: dict[int, _Choice] = field(default_factory=dict)
    done: bool = False  # ``[DONE]`` was read
    usage: dict[str, object] | None = None
    template: dict[str, object] = field(default_factory=dict)  # id, object, created, model

    def feed(self, chunk: Mapping[str, object]) -> list[dict[str, object]]:
        """Take one chunk; return the chunks to forward now (its text and an assistant role only).
        Raises ``ValueError`` for a chunk that cannot be read."""
        if not self.template:
            self.template = {k: chunk[k] for k in ("id", "object", "created", "model") if k in chunk}
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            raise ValueError("a chunk without a choices list")
        out_choices = []
        for ch in choices:
            if not isinstance(ch, dict):
                raise ValueError("a choice that is not an object")
            i = ch.get("index", 0)
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < MAX_CHOICES:
                raise ValueError(f"a choice index that is not an integer from 0 to {MAX_CHOICES - 1}")
            state = self.choices.setdefault(i, _Choice())
            delta = ch.get("delta")
            if delta is None:
                delta = {}
            if not isinstance(delta, dict):
                raise ValueError("a delta that is not an object")
            forward: dict[str, object] = {}
            for key, value in delta.items():
                if key == "role":
                    state.role = value if state.role is None or state.role == value else \
                        [state.role, value]
                    if value == "assistant":
                        forward["role"] = value
                elif key in _TEXT_KEYS:
                    if value is None:
                        continue
                    if not isinstance(value, str):
                        raise ValueError(f"a delta whose {key} is not text")
                    if key == "content":
                        state.content.append(value)
                    if value:
                        forward[key] = value
                elif key == "tool_calls":
                    self._calls(state, value)
                elif key == "function_call":
                    if value is None:
                        continue
                    if state.legacy is None:
                        state.legacy = _Call()
                    if isinstance(value, Mapping):
                        state.legacy.take(value, legacy=True)
                    else:
                        state.legacy.function = value
            reason = ch.get("finish_reason")
            if reason:
                state.finish_reason = str(reason)
            if forward:
                out_choices.append({"index": i, "delta": forward, "finish_reason": None,
                                    **({"logprobs": ch["logprobs"]} if ch.get("logprobs") else {})})
        if out_choices:
            head = {k: chunk[k] for k in _CHUNK_KEYS if k in chunk}
            return [{**head, "choices": out_choices}]
        return []

    @staticmethod
    def _calls(state: _Choice, value: object) -> None:
        if value is None:
            return
        if not isinstance(value, list):  # an object or a string: kept, to be refused as it is
            state.odd_calls.append(value)
            return
        for tc in value:
            if not isinstance(tc, dict):
                raise ValueError("a tool-call delta that is not an object")
            k = tc.get("index", 0)
            if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < 1024:
                raise ValueError("a tool-call delta without an index")
            state.calls.setdefault(k, _Call()).take(tc, legacy=False)

    @property
    def finished(self) -> bool:
        """The upstream said the reply is complete (every choice's finish reason, or ``[DONE]``)."""
        return self.done or (bool(self.choices) and
                             all(c.finish_reason is not None for c in self.choices.values()))

    def messages(self, before: Mapping[int, str]) -> dict[int, dict[str, object]]:
        """Each choice as a non-streamed reply's message, ``before[i]`` prefixed to its text."""
        if not self.choices:
            return {0: _Choice().message(before.get(0, ""))}
        return {i: c.message(before.get(i, "")) for i, c in sorted(self.choices.items())}

    def text(self, i: int) -> str:
        """The text choice ``i`` sent on this stream."""
        c = self.choices.get(i)
        return "".join(c.content) if c is not None else ""

    def finish_reason(self, i: int) -> str | None:
        c = self.choices.get(i)
        return c.finish_reason if c is not None else None

    # -- writing
    def chunk(self, delta: Mapping[str, object], finish_reason: str | None = None,
              index: int = 0) -> dict[str, object]:
        """A chunk of this reply (same id, model, created) with one choice."""
        base = {"id": "chatcmpl-guard", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": "", **self.template}
        return {**base, "choices": [{"index": index, "delta": dict(delta),
                                     "finish_reason": finish_reason}]}

    def call_chunks(self, message: Mapping[str, object], index: int = 0) -> list[dict[str, object]]:
        """The calls of ``message`` (as :meth:`Screening.kept` makes it) emitted whole, renumbered
        from 0 (the client sees only the calls let through); a legacy call as ``function_call``."""
        calls = message.get("tool_calls")
        out = [self.chunk({"tool_calls": [{"index": k, **c}]}, index=index)
               for k, c in enumerate(calls if isinstance(calls, Sequence) else [])]
        legacy = message.get("function_call")
        if isinstance(legacy, Mapping):
            out.append(self.chunk({"function_call": dict(legacy)}, index=index))
        return out
