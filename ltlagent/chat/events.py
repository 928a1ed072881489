"""OpenAI-format chat messages as a trace of events (docs/design.md §2.5).

Each message is one step, except an assistant message, which gives one step for its text (when
its ``content`` is non-empty after stripping :data:`BLANK`) followed by one step per tool call, in order; an
assistant message with neither still gives one (empty) text step, so that no message vanishes
from the trace. ``developer`` messages count as ``system`` and legacy ``function`` messages as
``tool``. A call's ``text`` is its arguments as written (the JSON string).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ltlagent.errors import LogError

__all__ = ["Event", "message_events", "conversation_events", "message_text", "AUTHOR_OF_ROLE",
           "BLANK"]

#: What "blank" means for an assistant message's text: the ASCII characters ``str.isspace`` knows.
#: Text that is blank after stripping these is no step; the decoder (``decode/chat.py``) uses the
#: same set, so what it lets a model write and what the log checker reads agree.
BLANK = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"

#: The author of a message by its ``role``.
AUTHOR_OF_ROLE = {"system": "system", "developer": "system", "user": "user",
                  "assistant": "assistant", "tool": "tool", "function": "tool"}


class Event(NamedTuple):
    """One step of a conversation: a message's text or one tool call (immutable; a named tuple,
    because a log checker makes one per message and a dataclass costs several times more)."""

    message: int  # the message's 0-based index in its conversation (-1: not from a log)
    author: str  # system | user | assistant | tool
    kind: str  # "text" | "call"
    text: str  # the message text; for a call, its arguments as written
    tool: str | None = None  # a call's function name
    arguments: Mapping[str, object] | None = None  # a call's parsed JSON arguments
    call_id: str | None = None

    @staticmethod
    def call(name: str, arguments: Mapping[str, object] | str | None = None, message: int = -1,
             call_id: str | None = None) -> Event:
        """A tool call event; ``arguments`` as a mapping or as JSON text (must be an object)."""
        if isinstance(arguments, str):
            raw = arguments
            parsed = _parse_arguments(raw, message)
        else:
            parsed = dict(arguments or {})
            raw = json.dumps(parsed, ensure_ascii=False)
        return Event(message, "assistant", "call", raw, name, parsed, call_id)

    @staticmethod
    def say(author: str, text: str, message: int = -1) -> Event:
        """A text event written by ``author``."""
        if author not in AUTHOR_OF_ROLE.values():
            raise LogError(f"unknown author {author!r}", index=message if message >= 0 else None)
        return Event(message, author, "text", text)

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {"message": self.message, "author": self.author, "kind": self.kind}
        if self.kind == "call":
            d["tool"] = self.tool
            d["arguments"] = dict(self.arguments or {})
        else:
            d["text"] = self.text
        return d


def _parse_arguments(raw: str, index: int) -> dict[str, object]:
    if raw == "{}":
        return {}
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as e:
        raise LogError(f"tool call arguments are not JSON ({e.msg} at character {e.pos}): "
                       f"{raw[:80]!r}", index=index if index >= 0 else None) from None
    if not isinstance(value, dict):
        raise LogError(f"tool call arguments must be a JSON object, found {type(value).__name__}",
                       index=index if index >= 0 else None)
    return value


def message_text(content: object, index: int) -> str:
    """A message's ``content`` as text: a string, null, or a list of parts with ``text``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out: list[str] = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, Mapping):
                text = part.get("text")
                if isinstance(text, str):
                    out.append(text)
                elif text is not None:
                    raise LogError("a content part's 'text' must be a string", index=index)
            else:
                raise LogError("content parts must be objects with 'text'", index=index)
        return "\n".join(out)
    raise LogError(f"'content' must be a string, null or a list of parts, found "
                   f"{type(content).__name__}", index=index)


def message_events(message: object, index: int) -> list[Event]:
    """The events of one OpenAI-format message (raises :class:`LogError` with ``index``)."""
    if not isinstance(message, Mapping):
        raise LogError(f"a message must be a JSON object, found {type(message).__name__}",
                       index=index)
    role = message.get("role")
    if role is None:
        raise LogError("message has no 'role'", index=index)
    author = AUTHOR_OF_ROLE.get(role) if isinstance(role, str) else None
    if author is None:
        raise LogError(f"unknown role {role!r}", index=index,
                       hint="roles are system, developer, user, assistant, tool")
    content = message.get("content")
    text = content if isinstance(content, str) else message_text(content, index)
    if author != "assistant":
        return [Event(index, author, "text", text)]
    calls = message.get("tool_calls") or []
    legacy = message.get("function_call")
    if legacy:
        calls = [*calls, {"function": legacy}] if isinstance(calls, list) else calls
    if not isinstance(calls, list):
        raise LogError("'tool_calls' must be a list", index=index)
    out: list[Event] = []
    if text.strip(BLANK) or not calls:
        out.append(Event(index, "assistant", "text", text))
    for call in calls:
        fn = call.get("function") if isinstance(call, Mapping) else None
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if not isinstance(name, str) or not name:
            raise LogError("a tool call needs 'function': {'name': …, 'arguments': …}", index=index)
        assert isinstance(fn, Mapping) and isinstance(call, Mapping)
        args = fn.get("arguments", "")
        call_id = call.get("id")
        cid = call_id if isinstance(call_id, str) else None
        if isinstance(args, Mapping):  # some logs store the object, not its JSON text
            out.append(Event.call(name, args, index, cid))
        elif isinstance(args, str):
            out.append(Event(index, "assistant", "call", args, name,
                             _parse_arguments(args, index), cid))
        elif args is None:
            out.append(Event.call(name, {}, index, cid))
        else:
            raise LogError("tool call 'arguments' must be a JSON string", index=index)
    return out


def conversation_events(messages: Sequence[object]) -> list[Event]:
    """The trace of a whole conversation, in order."""
    out: list[Event] = []
    for i, m in enumerate(messages):
        out.extend(message_events(m, i))
    return out
