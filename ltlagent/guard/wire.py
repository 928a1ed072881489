"""What crosses the wire between an MCP client, the guard and the server, read strictly
(docs/design.md §13): JSON that two parsers cannot read differently (:func:`strict_json`) and
server-sent event streams, parsed incrementally and written back as parsed (:class:`SseReader`,
:func:`sse_bytes`), so that what the guard judged is what the other side reads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["strict_json", "dumps", "SseEvent", "SseReader", "sse_bytes", "MAX_DEPTH", "MAX_EVENT_BYTES"]

#: The deepest JSON nesting accepted (MCP messages are a few levels deep).
MAX_DEPTH = 64
#: The largest SSE event (or whole answer) read.
MAX_EVENT_BYTES = 16 << 20
BOM = b"\xef\xbb\xbf"


def _no_constant(name: str) -> object:
    """Refuse ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON; parsers differ on them)."""
    raise ValueError(f"{name} is not JSON")


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """An object whose keys are all different (parsers differ on which of two they keep)."""
    out: dict[str, object] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def strict_json(raw: bytes) -> object:
    """``raw`` as JSON, or ``ValueError``: UTF-8 only, no ``NaN``/``Infinity``, no duplicate keys
    (two parsers could each take a different one), nesting at most :data:`MAX_DEPTH` deep."""
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_no_constant,
                           object_pairs_hook=_no_duplicates)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH}") from None
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict | list):
            if depth > MAX_DEPTH:
                raise ValueError(f"nested deeper than {MAX_DEPTH}")
            stack.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))
    return value


def dumps(value: object) -> bytes:
    """``value`` as compact UTF-8 JSON: what the guard forwards after judging it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


@dataclass
class SseEvent:
    """One event of a stream: its data lines, type, id and retry, and its size so far."""

    data: list[str] = field(default_factory=list)
    event: str | None = None
    id: str | None = None
    retry: str | None = None
    size: int = 0


class SseReader:
    """An incremental parser of a ``text/event-stream`` (the WHATWG rules: CR, LF or CRLF lines,
    ``field: value``, a blank line dispatches, ``:`` starts a comment). ``feed`` returns the whole
    events and comments seen so far; an event over :data:`MAX_EVENT_BYTES` raises ``ValueError``."""

    def __init__(self) -> None:
        self.buffer = b""
        self.current = SseEvent()
        self.started = False

    def feed(self, chunk: bytes, end: bool = False) -> list[SseEvent | None]:
        """Events (``None`` for a comment) completed by ``chunk``; ``end``: the stream ended."""
        self.buffer += chunk
        if not self.started:
            if BOM.startswith(self.buffer[:3]) and len(self.buffer) < 3 and not end:
                return []  # perhaps a byte-order mark, not whole yet
            self.buffer = self.buffer[3:] if self.buffer.startswith(BOM) else self.buffer
            self.started = True
        out: list[SseEvent | None] = []
        for line in self._lines(end):
            self._line(line, out)
        if len(self.buffer) + self.current.size > MAX_EVENT_BYTES:
            raise ValueError(f"an event over {MAX_EVENT_BYTES} bytes")
        return out

    def _lines(self, end: bool) -> Iterator[str]:
        buf = self.buffer
        start = 0
        while True:
            cr, lf = buf.find(b"\r", start), buf.find(b"\n", start)
            stop = min(i for i in (cr, lf) if i >= 0) if cr >= 0 or lf >= 0 else -1
            if stop < 0:
                break
            if buf[stop:stop + 1] == b"\r" and stop + 1 == len(buf) and not end:
                break  # a CR at the end may be half of a CRLF
            nxt = stop + 2 if buf[stop:stop + 2] == b"\r\n" else stop + 1
            yield buf[start:stop].decode("utf-8", "replace")
            start = nxt
        self.buffer = buf[start:]

    def _line(self, line: str, out: list[SseEvent | None]) -> None:
        ev = self.current
        if not line:
            if ev.data or ev.event is not None or ev.id is not None or ev.retry is not None:
                out.append(ev)
            self.current = SseEvent()
            return
        if line.startswith(":"):
            out.append(None)
            return
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            ev.data.append(value)
            ev.size += len(value) + 1
        elif name == "event":
            ev.event = value
        elif name == "id" and "\0" not in value:
            ev.id = value
        elif name == "retry" and value.isdigit():
            ev.retry = value


def sse_bytes(ev: SseEvent | None, data: str | None) -> bytes:
    """An event written back (``data`` replaces its data; ``None`` keeps it), or a comment."""
    if ev is None:
        return b":\n\n"
    lines = [f"event: {ev.event}"] if ev.event is not None else []
    if ev.id is not None:
        lines.append(f"id: {ev.id}")
    if ev.retry is not None:
        lines.append(f"retry: {ev.retry}")
    payload = data if data is not None else "\n".join(ev.data)
    if ev.data or data is not None:
        lines += [f"data: {x}" for x in payload.split("\n")]
    return ("\n".join(lines) + "\n\n").encode()
