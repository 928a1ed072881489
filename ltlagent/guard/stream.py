"""Server-sent events of the chat-completions API: reading an upstream stream into one reply, and
writing chunks (docs/design.md §13).

The proxy forwards a streamed reply's text as it comes (the guard does not gate text) but holds its
tool calls back: their deltas (``delta.tool_calls[i]``: an ``index``, then the ``id``, the
function's ``name`` and pieces of its ``arguments``) are assembled here, and only once the upstream
has finished is each call judged and, if allowed, emitted whole in one chunk.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["ReplyAssembler", "sse", "DONE"]

#: The last event of a completed stream.
DONE = b"data: [DONE]\n\n"


def sse(payload: Mapping[str, object]) -> bytes:
    """One ``data:`` event."""
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


@dataclass
class _Call:
    id: str | None = None
    type: str = "function"
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class ReplyAssembler:
    """Reads the chunks of one streamed choice; :meth:`feed` says what may be forwarded at once."""

    content: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish_reason: str | None = None
    done: bool = False  # ``[DONE]`` was read
    usage: dict[str, object] | None = None
    template: dict[str, object] = field(default_factory=dict)  # id, object, created, model

    def feed(self, chunk: Mapping[str, object]) -> list[dict[str, object]]:
        """Take one chunk; return the chunks to forward now (the same chunk without its tool-call
        deltas, when anything else is left in it). Raises ``ValueError`` for a malformed chunk."""
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
            if ch.get("index", 0) != 0:
                raise ValueError("more than one choice in a stream")
            delta = ch.get("delta") or {}
            if not isinstance(delta, dict):
                raise ValueError("a delta that is not an object")
            text = delta.get("content")
            if isinstance(text, str):
                self.content.append(text)
            for tc in delta.get("tool_calls") or []:
                self._call_delta(tc)
            if ch.get("finish_reason"):
                self.finish_reason = str(ch["finish_reason"])
            rest = {k: v for k, v in delta.items() if k != "tool_calls"}
            if any(v not in (None, "") for v in rest.values()):
                out_choices.append({"index": 0, "delta": rest, "finish_reason": None,
                                    **({"logprobs": ch["logprobs"]} if ch.get("logprobs") else {})})
        if out_choices:
            return [{**chunk, "choices": out_choices}]
        return []

    def _call_delta(self, tc: object) -> None:
        if not isinstance(tc, dict) or not isinstance(tc.get("index", 0), int):
            raise ValueError("a tool-call delta without an index")
        call = self.calls.setdefault(tc.get("index", 0), _Call())
        if tc.get("id"):
            call.id = str(tc["id"])
        if tc.get("type"):
            call.type = str(tc["type"])
        fn = tc.get("function") or {}
        if not isinstance(fn, dict):
            raise ValueError("a tool-call delta whose function is not an object")
        if fn.get("name"):
            call.name += str(fn["name"])
        if isinstance(fn.get("arguments"), str):
            call.arguments.append(fn["arguments"])

    @property
    def finished(self) -> bool:
        """The upstream said the reply is complete (a finish reason, or ``[DONE]``)."""
        return self.finish_reason is not None or self.done

    def text(self) -> str:
        return "".join(self.content)

    def tool_calls(self) -> list[dict[str, object]]:
        """The assembled tool calls, in index order, in the shape of a non-streamed message."""
        return [{"id": c.id or f"call_{i}", "type": c.type,
                 "function": {"name": c.name, "arguments": "".join(c.arguments)}}
                for i, c in sorted(self.calls.items())]

    # -- writing
    def chunk(self, delta: Mapping[str, object], finish_reason: str | None = None) -> dict[str, object]:
        """A chunk of this reply (same id, model, created) with one choice."""
        base = {"id": "chatcmpl-guard", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": "", **self.template}
        return {**base, "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish_reason}]}

    def call_chunks(self, calls: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
        """Each call emitted whole, renumbered from 0 (the client sees only the calls let through)."""
        return [self.chunk({"tool_calls": [{"index": i, **c}]}) for i, c in enumerate(calls)]
