"""OpenAI-format chat messages as a trace of events (docs/design.md §2.5).

Each message is one step, except an assistant message, which gives one step for its text (when
its ``content`` is non-empty after stripping :data:`BLANK`) followed by one step per tool call, in
order; an assistant message with neither still gives one (empty) text step, so that no message
vanishes from the trace. ``developer`` messages count as ``system`` and legacy ``function``
messages as ``tool``. A call's ``text`` is its arguments as written (the JSON string).

Anything the trace could not show faithfully is a :class:`LogError` with the message's index, never
dropped: tool calls on a message that is not the assistant's, content parts that carry tool calls
or results, content parts of a type not known to be text or media. With ``lenient=True`` a call
whose arguments are not a JSON object is still a call of its name, with ``arguments`` None and the
reason in ``error`` (a log checker judges it by its name; the guard reads strictly and refuses it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ltlagent.errors import LogError

__all__ = ["Event", "message_events", "conversation_events", "message_text", "AUTHOR_OF_ROLE",
           "BLANK", "TEXT_PARTS", "MEDIA_PARTS"]

#: What "blank" means for an assistant message's text: the ASCII characters ``str.isspace`` knows.
#: Text that is blank after stripping these is no step; the decoder (``decode/chat.py``) uses the
#: same set, so what it lets a model write and what the log checker reads agree.
BLANK = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"

#: The author of a message by its ``role``.
AUTHOR_OF_ROLE = {"system": "system", "developer": "system", "user": "user",
                  "assistant": "assistant", "tool": "tool", "function": "tool"}

#: Content part types whose ``text`` is the message's text (OpenAI chat and Responses, Anthropic);
#: a part without ``type`` is read the same way. A ``refusal`` part's text is its ``refusal``.
TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
#: Content part types that carry media and no text: they add nothing to the message's text, and
#: the message stays one step of its author (a text checker cannot read an image; refusing them
#: would leave every multimodal conversation unjudged). Any other part type is an error.
MEDIA_PARTS = frozenset({"image_url", "input_image", "image", "input_audio", "audio", "file",
                         "input_file"})
#: Content part types that hold a tool call or a tool's result: the trace takes calls only from
#: an assistant's ``tool_calls`` and results only from tool messages, so these are errors.
_TOOL_PARTS = frozenset({"tool_use", "tool_result", "function_call", "function_call_output",
                         "server_tool_use", "tool_call", "custom_tool_call",
                         "custom_tool_call_output", "mcp_call"})


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
    #: a call read leniently whose arguments are not a JSON object: why (``arguments`` is None)
    error: str | None = None

    @staticmethod
    def call(name: str, arguments: Mapping[str, object] | str | None = None, message: int = -1,
             call_id: str | None = None) -> Event:
        """A tool call event; ``arguments`` as a mapping or as JSON text (must be an object)."""
        if isinstance(arguments, str):
            raw = arguments
            parsed = _parse_arguments(raw, message)
        else:
            parsed = dict(arguments or {})
            raw = _json_text(parsed, message)
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
            if self.error is not None:
                d["arguments"] = None
                d["text"] = self.text
                d["error"] = self.error
            else:
                d["arguments"] = dict(self.arguments or {})
        else:
            d["text"] = self.text
        return d


def _where(index: int) -> int | None:
    return index if index >= 0 else None


def _json_text(value: object, index: int) -> str:
    """``value`` (arguments given as an object) as the JSON text a call's ``text`` holds."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise LogError(f"tool call arguments cannot be written as JSON ({e})",
                       index=_where(index)) from None
    except RecursionError:
        raise LogError("tool call arguments are nested too deep", index=_where(index)) from None


def _parse_arguments(raw: str, index: int) -> dict[str, object]:
    if raw == "{}":
        return {}
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as e:
        raise LogError(f"tool call arguments are not JSON ({e.msg} at character {e.pos}): "
                       f"{raw[:80]!r}", index=_where(index)) from None
    except RecursionError:
        raise LogError(f"tool call arguments are not JSON (nested too deep to read): "
                       f"{raw[:80]!r}", index=_where(index)) from None
    if not isinstance(value, dict):
        raise LogError(f"tool call arguments must be a JSON object, found {type(value).__name__}",
                       index=_where(index))
    return value


def _part_text(part: object, index: int) -> str | None:
    """One content part's text; None for a media part (no text); LogError for anything else."""
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        raise LogError("content parts must be objects with 'text'", index=index)
    kind = part.get("type")
    if kind is None or kind in TEXT_PARTS:
        text = part.get("text")
        if not isinstance(text, str):
            raise LogError("a content part's 'text' must be a string", index=index)
        return text
    if kind == "refusal":
        text = part.get("refusal")
        if not isinstance(text, str):
            raise LogError("a refusal part's 'refusal' must be a string", index=index)
        return text
    if kind in MEDIA_PARTS:
        return None
    if kind in _TOOL_PARTS:
        raise LogError(f"a content part of type {kind!r} holds a tool call or result, which "
                       "the trace would not see", index=index,
                       hint="calls belong in an assistant message's 'tool_calls', results in "
                            "'tool' messages")
    raise LogError(f"a content part of type {kind!r} is neither text nor media", index=index,
                   hint=f"text parts are {', '.join(sorted(TEXT_PARTS | {'refusal'}))}; media "
                        f"parts (no text) are {', '.join(sorted(MEDIA_PARTS))}")


def message_text(content: object, index: int) -> str:
    """A message's ``content`` as text: a string, null, or a list of parts (text parts joined by
    newlines; media parts add nothing; other parts are a :class:`LogError`)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out: list[str] = []
        for part in content:
            text = _part_text(part, index)
            if text is not None:
                out.append(text)
        return "\n".join(out)
    raise LogError(f"'content' must be a string, null or a list of parts, found "
                   f"{type(content).__name__}", index=index)


def message_events(message: object, index: int, lenient: bool = False) -> list[Event]:
    """The events of one OpenAI-format message (raises :class:`LogError` with ``index``).

    ``lenient``: a call whose arguments are not a JSON object is an event with ``error`` set
    instead of an error (its name still says what was called)."""
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
        if ("tool_calls" in message or "function_call" in message) and \
                (message.get("tool_calls") or message.get("function_call")):  # `in`: the fast test
            raise LogError(f"a {role} message carries tool calls; only an assistant calls tools",
                           index=index)
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
        try:
            if isinstance(args, Mapping):  # some logs store the object, not its JSON text
                out.append(Event.call(name, args, index, cid))
            elif isinstance(args, str):
                out.append(Event(index, "assistant", "call", args, name,
                                 _parse_arguments(args, index), cid))
            elif args is None:
                out.append(Event.call(name, {}, index, cid))
            else:
                raise LogError(f"tool call 'arguments' must be a JSON string, found "
                               f"{type(args).__name__}", index=index)
        except LogError as e:
            if not lenient:
                raise
            raw = args if isinstance(args, str) else _lenient_text(args)
            out.append(Event(index, "assistant", "call", raw, name, None, cid, e.message))
    return out


def _lenient_text(args: object) -> str:
    """Arguments that are not a JSON string, as text for a leniently read call."""
    try:
        return json.dumps(args, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return f"<{type(args).__name__}>"


def conversation_events(messages: Sequence[object], lenient: bool = False) -> list[Event]:
    """The trace of a whole conversation, in order (``lenient``: see :func:`message_events`)."""
    out: list[Event] = []
    for i, m in enumerate(messages):
        out.extend(message_events(m, i, lenient))
    return out
