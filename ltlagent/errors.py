"""The error hierarchy: every failure a user can cause is one of these, and the CLI prints them.

Every error may carry a ``hint`` (what to do about it): the CLI prints it under the message, and
it is attached as an exception note, so an uncaught error shows it in its traceback too.
Positional errors carry a source name, line and column (1-based) and render the offending source
line with a caret, like a compiler (modelled on lark's ``get_context``). docs/design.md §11.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "LtlAgentError",
    "Location",
    "SpecError",
    "SpecErrors",
    "LogError",
    "UsageError",
    "CompileError",
    "SchemaError",
]


class LtlAgentError(Exception):
    """Root of every error ltlagent raises on purpose; ``hint`` says what to do about it."""

    def __init__(self, message: str = "", *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint
        if hint and hasattr(self, "add_note"):  # Python ≥ 3.11
            self.add_note(f"hint: {hint}")

    def render(self) -> str:
        """The message, then the hint on its own line (what the CLI prints)."""
        return str(self) + (f"\n    hint: {self.hint}" if self.hint else "")


@dataclass(frozen=True)
class Location:
    """A span in a source text: 1-based line and column, 0-based byte/char offsets."""

    source: str
    line: int
    column: int
    offset: int = 0
    end: int = 0

    def __str__(self) -> str:
        return f"{self.source}:{self.line}:{self.column}"


#: Line ends as the spec reader counts lines (not ``str.splitlines``, which also splits at form
#: feeds, U+2028 and others that the reader leaves inside a line).
_EOL = re.compile(r"\r\n|\r|\n")
#: Most characters of a source line shown (the caret line is cut to the same window).
_SHOWN = 160


def caret_context(text: str, loc: Location, width: int = 1) -> str:
    """The source line of ``loc`` followed by a caret line under its column (the carets end at
    the end of the line shown: a span over many lines or megabytes is not drawn whole)."""
    lines = _EOL.split(text)
    if not 1 <= loc.line <= len(lines):
        return ""
    src = lines[loc.line - 1].expandtabs(1)
    if len(src) > _SHOWN:  # keep the caret in view on very long lines
        start = max(0, loc.column - _SHOWN // 2)
        src = ("…" if start else "") + src[start : start + _SHOWN] + \
            ("…" if start + _SHOWN < len(src) else "")
        col = loc.column - start + (1 if start else 0)
    else:
        col = loc.column
    width = max(1, min(width, len(src) - col + 1))
    return f"    {src}\n    {' ' * (col - 1)}{'^' * width}"


class SpecError(LtlAgentError, ValueError):
    """A problem in a spec file, pointing at the place in the source that causes it."""

    def __init__(self, message: str, loc: Location | None = None, text: str | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.message = message
        self.loc = loc
        self.text = text

    @property
    def code(self) -> str:
        return "spec-error"

    def __str__(self) -> str:
        return f"{self.loc}: error: {self.message}" if self.loc else f"error: {self.message}"

    def render(self) -> str:
        """The message plus the source line and a caret, when the source is known."""
        out = str(self)
        if self.loc is not None and self.text is not None:
            ctx = caret_context(self.text, self.loc, max(1, self.loc.end - self.loc.offset))
            if ctx:
                out += "\n" + ctx
        if self.hint:
            out += f"\n    hint: {self.hint}"
        return out

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {"message": self.message, "code": self.code}
        if self.loc is not None:
            d.update(file=self.loc.source, line=self.loc.line, column=self.loc.column)
        if self.hint:
            d["hint"] = self.hint
        return d


class SpecErrors(SpecError):
    """Several independent spec errors found in one pass; reported together."""

    def __init__(self, errors: list[SpecError]) -> None:
        first = errors[0]
        super().__init__(first.message, first.loc, first.text, first.hint)
        self.errors = list(errors)

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)

    def render(self) -> str:
        return "\n".join(e.render() for e in self.errors)


class CompileError(LtlAgentError):
    """Spot failed on a formula we built: a bug in ltlagent, reported with the formula."""


class UsageError(LtlAgentError, ValueError):
    """Bad command-line or API usage (missing file, unknown bundled spec, bad option)."""


class LogError(LtlAgentError, ValueError):
    """A chat log that cannot be read as conversations: malformed JSON (with its ``file:line:col``)
    or a message that is not in the OpenAI chat format (with its index in the conversation)."""

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None,
                 column: int | None = None, index: int | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.message = message
        self.source = source
        self.line = line
        self.column = column
        self.index = index  # the message's 0-based index in its conversation

    def __str__(self) -> str:
        where = ":".join(str(x) for x in (self.source, self.line, self.column) if x is not None)
        at = f"message {self.index}: " if self.index is not None else ""
        return f"{where}: {at}{self.message}" if where else f"{at}{self.message}"


class SchemaError(UsageError):
    """A JSON schema uses a feature the byte-automaton compiler refuses (or is malformed); ``path``
    is the JSON pointer of the offending keyword in the schema (``""`` for the root)."""

    def __init__(self, message: str, path: str = "", *, hint: str | None = None) -> None:
        super().__init__(f"JSON schema at {path or '/'}: {message}", hint=hint)
        self.path = path
