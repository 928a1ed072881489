"""Chat-log files as conversations (docs/design.md §12).

Accepted layouts: a JSON array of messages (one conversation); a JSON object holding them; a JSON
array of such conversations; JSON Lines, one conversation per line (streamed: constant memory).
The message list of an object is found under ``messages_key`` (default ``messages``; without that
key, the one list-valued field whose items have a ``role``). Files are read as bytes and decoded as
UTF-8 line by line, so that in JSON Lines a line that is not UTF-8, not JSON, or JSON nested too
deep to read spoils only itself (a :class:`LogError` at ``file:line:col`` in its record); in a
single JSON document any of these is an error of the whole file.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ltlagent.errors import LogError

__all__ = ["RawRecord", "LogRecord", "iter_raw", "parse_record", "read_conversations"]

_BOM = b"\xef\xbb\xbf"
#: What a JSON value nested deeper than Python's reader goes is reported as.
_TOO_DEEP = "JSON nested too deep to read (Python's reader stops at about 1,000 levels)"


@dataclass(frozen=True)
class RawRecord:
    """One conversation before parsing: its 0-based ordinal in the file, the line it starts on,
    and either its bytes (a JSON Lines line, decoded and parsed by :func:`parse_record`, in a
    worker when there are several) or its already parsed value."""

    index: int
    line: int
    data: bytes | None = None
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


class _Unreadable(LogError):
    """Text that no JSON document can be read from: not UTF-8, or nested too deep."""


def _open(path: str) -> contextlib.AbstractContextManager[IO[bytes]]:
    if path == "-":
        return contextlib.nullcontext(sys.stdin.buffer)
    try:
        return open(path, "rb")
    except IsADirectoryError:
        raise LogError("is a directory, not a log file", source=path) from None
    except FileNotFoundError:
        raise LogError("no such file", source=path) from None
    except OSError as e:
        raise LogError(f"cannot read: {e.strerror}", source=path) from None


def _json_error(e: json.JSONDecodeError, source: str, line_offset: int = 0) -> LogError:
    return LogError(f"malformed JSON: {e.msg}", source=source, line=e.lineno + line_offset,
                    column=e.colno)


def _decode(data: bytes, source: str, line: int) -> str:
    """``data`` (starting on ``line``) as UTF-8 text; a :class:`LogError` at the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        start = data.rfind(b"\n", 0, e.start) + 1
        column = len(data[start:e.start].decode("utf-8", "replace")) + 1
        raise _Unreadable(f"not UTF-8 text (byte 0x{data[e.start]:02x})", source=source,
                          line=line + data.count(b"\n", 0, start), column=column) from None


def _load(data: bytes, source: str, line: int, document: bool = False) -> object:
    """The JSON value of ``data``: one line starting on ``line``, or a ``document`` padded with
    newlines to start where it does in the file."""
    text = _decode(data, source, 1 if document else line)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        err = e
        if not document:  # an error at the line's end, not at the start of the next line
            try:
                json.loads(text.rstrip("\r\n"))
            except json.JSONDecodeError as at_end:
                err = at_end
        raise _json_error(err, source, 0 if document else line - 1) from None
    except RecursionError:
        raise _Unreadable(_TOO_DEEP, source=source, line=line, column=1) from None


def iter_raw(path: str) -> Iterator[RawRecord]:
    """The conversations of a log file, unparsed where it is JSON Lines (so that workers parse
    them), parsed where the file is one JSON document. Raises :class:`LogError` for a file that
    cannot be read or one malformed JSON document. ``path`` ``-`` is standard input.

    The layout is JSON Lines when the first non-blank line is a whole JSON value (other than an
    array of conversations alone in the file), or when it cannot begin any JSON document (not
    UTF-8, nested too deep: the document reading is hopeless) and the next non-blank line is a
    whole JSON object or array."""
    with _open(path) as raw_file:
        f = _Lines(raw_file)
        lineno = 0
        first = b""
        for first in f:
            lineno += 1
            if lineno == 1 and first.startswith(_BOM):
                first = first[len(_BOM):]
            if first.strip():
                break
        if not first.strip():
            return
        start = lineno
        unreadable: LogError | None = None
        head: object = None
        try:
            head = _load(first, path, lineno)
        except _Unreadable as e:
            unreadable = e
        except LogError:
            pass
        if unreadable is not None:
            peek = b""
            for peek in f:
                lineno += 1
                if not peek.isspace():
                    break
            if peek.strip() and not isinstance(_value_or_none(peek), dict | list):
                raise unreadable
            yield RawRecord(0, start, data=first)
            if peek.strip():
                yield RawRecord(1, lineno, data=peek)
            yield from _lines(f, 2, lineno)
            return
        if isinstance(head, list) and head and not _is_messages(head):
            rest = f.rest()  # an array of conversations written on one line
            if not rest.strip():
                yield from _split_document(head)
                return
            whole = b"\n" * (start - 1) + first + rest
        elif head is not None:  # JSON Lines: one conversation per line, streamed
            yield RawRecord(0, start, data=first)
            yield from _lines(f, 1, lineno)
            return
        else:
            whole = b"\n" * (start - 1) + first + f.rest()
    if b"\r" in whole:  # count lines as text mode does: \r\n and a lone \r end one too
        whole = whole.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    yield from _split_document(_load(whole, path, start, document=True))


class _Lines:
    r"""A binary file's lines as text mode reads them: each ends in ``\n``, ``\r\n`` or a lone
    ``\r`` (a log written with old Mac line ends is still one conversation per line). Lines are
    searched for a lone ``\r`` only until one is found or the layout is known (:meth:`stream`):
    a file's line ends are its own throughout, and the search would cost JSON Lines' inner loop."""

    def __init__(self, f: IO[bytes]) -> None:
        self.f = f
        self.pending: list[bytes] = []  # the rest of a line split at lone \r, reversed
        self.lone_cr = False

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> bytes:
        if self.pending:
            return self.pending.pop()
        line = next(self.f)
        n = len(line)
        if self.lone_cr or line.find(b"\r", 0, n - 2) >= 0 or \
                (n >= 2 and line[-2] == 13 and line[-1] != 10):
            self.lone_cr = True
            parts = line.splitlines(keepends=True)
            self.pending = parts[:0:-1]
            return parts[0]
        return line

    def stream(self) -> Iterator[bytes]:
        r"""The lines not read yet: split at lone ``\r`` if the lines so far had one, else the
        file's own lines (ending in ``\n``), at the file's speed."""
        return self if self.lone_cr else self.f

    def rest(self) -> bytes:
        """Everything not read yet, as bytes."""
        return b"".join(reversed(self.pending)) + self.f.read()


def _lines(f: _Lines, k: int, lineno: int) -> Iterator[RawRecord]:
    """The remaining non-blank lines of a JSON Lines file, numbered from ``k``."""
    for line in f.stream():
        lineno += 1
        if not line.isspace():
            yield RawRecord(k, lineno, data=line)
            k += 1


def _value_or_none(line: bytes) -> object:
    """The JSON value of a line, or None when it is not one (or is null)."""
    try:
        return json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
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
    """Parse one conversation (its line's bytes if needed) and find its message list."""
    value = raw.value
    if raw.data is not None:
        try:  # the common case inline (check-log's inner loop); errors located by _load
            value = json.loads(raw.data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            try:
                value = _load(raw.data, source, raw.line)
            except LogError as e:
                return LogRecord(raw.index, raw.index, raw.line, None, e)
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
