"""Chat-log files as conversations (docs/design.md §12).

Accepted layouts: a JSON array of messages (one conversation); a JSON object holding them; a JSON
array of such conversations; JSON Lines, one conversation per line (streamed: constant memory).
The message list of an object is found under ``messages_key`` (default ``messages``; without that
key, the one list-valued field whose items have a ``role``). Malformed JSON is a
:class:`LogError` at ``file:line:col``; in JSON Lines it spoils only its own line.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ltlagent.errors import LogError

__all__ = ["RawRecord", "LogRecord", "iter_raw", "parse_record", "read_conversations"]


@dataclass(frozen=True)
class RawRecord:
    """One conversation before parsing: its 0-based ordinal in the file, the line it starts on,
    and either its JSON text (a JSON Lines line) or its already parsed value."""

    index: int
    line: int
    text: str | None = None
    value: object = None


@dataclass(frozen=True)
class LogRecord:
    """One conversation: its id (the record's ``id`` if it has one, else its ordinal), the line it
    starts on, and its messages, or the error that makes it unreadable."""

    index: int
    id: object
    line: int
    messages: list[object] | None
    error: LogError | None = None


def _open(path: str) -> IO[str]:
    if path == "-":
        return io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8-sig", errors="strict")
    try:
        return open(path, encoding="utf-8-sig", errors="strict")
    except IsADirectoryError:
        raise LogError("is a directory, not a log file", source=path) from None
    except FileNotFoundError:
        raise LogError("no such file", source=path) from None
    except OSError as e:
        raise LogError(f"cannot read: {e.strerror}", source=path) from None


def _json_error(e: json.JSONDecodeError, source: str, line_offset: int = 0) -> LogError:
    return LogError(f"malformed JSON: {e.msg}", source=source, line=e.lineno + line_offset,
                    column=e.colno)


def iter_raw(path: str) -> Iterator[RawRecord]:
    """The conversations of a log file, unparsed where it is JSON Lines (so that workers parse
    them), parsed where the file is one JSON document. Raises :class:`LogError` for a file that
    cannot be read or one malformed JSON document. ``path`` ``-`` is standard input."""
    with _open(path) as f:
        try:
            lineno = 0
            first = ""
            for first in f:
                lineno += 1
                if first.strip():
                    break
            if not first.strip():
                return
            head = _json_or_none(first)
            if isinstance(head, list) and head and not _is_messages(head):
                rest = f.read()  # an array of conversations written on one line
                if not rest.strip():
                    yield from _split_document(head)
                    return
                whole = "\n" * (lineno - 1) + first + rest
            elif head is not None:  # JSON Lines: one conversation per line, streamed
                yield RawRecord(0, lineno, text=first)
                k = 1
                for line in f:
                    lineno += 1
                    if line.strip():
                        yield RawRecord(k, lineno, text=line)
                        k += 1
                return
            else:
                whole = "\n" * (lineno - 1) + first + f.read()
        except UnicodeDecodeError as e:
            raise LogError(f"not UTF-8 text (byte 0x{e.object[e.start]:02x})", source=path) \
                from None
    try:
        value = json.loads(whole)
    except json.JSONDecodeError as e:
        raise _json_error(e, path) from None
    yield from _split_document(value)


def _json_or_none(line: str) -> object:
    """The JSON value of a line, or None when the line is not a whole JSON value (or is null)."""
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return None


def _is_messages(value: list[object]) -> bool:
    return all(isinstance(m, Mapping) and "role" in m for m in value)


def _split_document(value: object) -> Iterator[RawRecord]:
    if isinstance(value, list) and value and _is_messages(value):
        yield RawRecord(0, 1, value=value)  # one conversation: an array of messages
    elif isinstance(value, list):
        for k, conv in enumerate(value):
            yield RawRecord(k, 1, value=conv)
    else:
        yield RawRecord(0, 1, value=value)


def parse_record(raw: RawRecord, source: str, messages_key: str | None = None) -> LogRecord:
    """Parse one conversation (JSON text if needed) and find its message list."""
    value = raw.value
    if raw.text is not None:
        try:
            value = json.loads(raw.text.rstrip("\r\n"))
        except json.JSONDecodeError as e:
            return LogRecord(raw.index, raw.index, raw.line, None,
                             _json_error(e, source, raw.line - 1))
    rid: object = raw.index
    if isinstance(value, Mapping):
        if isinstance(value.get("id"), str | int):
            rid = value["id"]
        try:
            messages = _messages_of(value, messages_key)
        except LogError as e:
            return LogRecord(raw.index, rid, raw.line, None, e)
        return LogRecord(raw.index, rid, raw.line, messages)
    if isinstance(value, list):
        return LogRecord(raw.index, rid, raw.line, value)
    return LogRecord(raw.index, rid, raw.line, None,
                     LogError(f"a conversation is a list of messages or an object holding one, "
                              f"found {type(value).__name__}"))


def _messages_of(obj: Mapping[str, object], key: str | None) -> list[object]:
    if key is not None:
        found = obj.get(key)
        if not isinstance(found, list):
            raise LogError(f"no list of messages under {key!r}",
                           hint="name the field with --messages-key KEY")
        return found
    if isinstance(obj.get("messages"), list):
        return obj["messages"]  # type: ignore[return-value]
    lists = [k for k, v in obj.items()
             if isinstance(v, list) and v and isinstance(v[0], Mapping) and "role" in v[0]]
    if len(lists) == 1:
        found = obj[lists[0]]
        assert isinstance(found, list)
        return found
    if not lists:
        raise LogError("no list of messages in this record (no 'messages' field, and no "
                       "list whose items have a 'role')",
                       hint="name the field with --messages-key KEY")
    raise LogError(f"several lists of messages in this record ({', '.join(lists)})",
                   hint="name the one to check with --messages-key KEY")


def read_conversations(path: str | Path, messages_key: str | None = None) -> Iterator[LogRecord]:
    """Every conversation of a log file, parsed (streamed for JSON Lines)."""
    for raw in iter_raw(str(path)):
        yield parse_record(raw, str(path), messages_key)
