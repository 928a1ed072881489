"""``ltlagent validate``: replay the few-shot examples of a prompt through a spec (docs/design.md §7).

The prompt is read as bytes, in chunks, and scanned by the spec's own keyword lexer (the one the
decoding monitor uses); each prompt string found is a step in the spec's automaton table.

Examples. A *run* is a sequence of prompt strings; the text around them is content or context.
* The first prompt string of the file starts a run. A run continues while each prompt string is
  allowed next by the automaton (greedy), except that a prompt string that may also start a trace
  (allowed in the initial state) starts a new run when a *context line* lies between it and the
  previous one. A context line begins with a context label (``Question:``, ``Claim:``, ``Q:``,
  ``Task:``, ``Problem:``, ``Example:``/``Example 2:``, and any ``--context-label``): the lines
  that introduce the next task in a prompt.
* A prompt string that the automaton forbids ends the run when the run is complete (in an
  accepting state) or when a context line precedes it; the run then ends as *incomplete* if it
  was not complete (``example ends in Action; expected Action-Input``). Otherwise it is the
  first offending step (``expected Action-Input after Action, found Observation``): reported
  once per example, after which the run goes on from every automaton state where that step is
  allowed (error recovery), so the next example is still found. For infinite specs every run is
  a viable prefix, so only a context line (or the end of the file) ends it.
* A step's content is its text up to the next prompt string or the first context line.

Instructions blocks. Prompts describe the format before the examples ("Use the following format:
Question: … Thought: you should always think … Answer: …"); that text contains the prompt strings
too. A run is an instructions block, reported as a note and not checked, when
1. the text after it (up to the next run) announces examples ("Here are some examples"; a line
   ``Examples:``), or
2. the last announcement in the text before it is a format announcement ("the following format",
   "this format", "Format:") at most three lines above its first prompt string, or
3. it is the first run of the file and at least half of its steps read as placeholders
   (``{{…}}``, "you should…", "should be one of", "the input…", "the result of…", "this is…").

Content constraints. ``:choices`` requires the stripped content to be one of the choices (choices
``:tools`` take ``--tools``; without it any tool name is accepted), ``:regex`` a full match.

``--strict`` ownership. At run time the environment writes the text of an ``:env-input`` step and
the model everything else, and the turn changes only at line boundaries. Strict mode reports an
example that hands a turn to the wrong side: an ``:env-input`` step whose prompt string does not
begin a line (the model's text runs into the environment's turn), one with no text, and a prompt
string that continues the line of an ``:env-input`` step's text (the environment's text would
contain the model's next step: the paper's Fever prompt has ``…as a pilot. Final Thought:``).

Streaming: memory stays flat for any file size; only the current step's content is held (up to a
cap) and keywords straddling chunk boundaries are found because the last ``max_keyword-1`` bytes
are rescanned. Exit status: 0 all valid, 1 a violation, 2 a usage, spec or file error.
"""

from __future__ import annotations

import codecs
import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO, Protocol

from ltlagent.errors import UsageError
from ltlagent.logic.compiled import CompiledSpec, compile_spec
from ltlagent.text.content import WHITESPACE, ContentDFA, content_dfa, regex_dfa
from ltlagent.text.lexer import CONTEXT_LABELS

__all__ = ["Diagnostic", "ExampleInfo", "FileReport", "Validator", "DEFAULT_CONTEXT_LABELS"]

DEFAULT_CONTEXT_LABELS = CONTEXT_LABELS
_CHUNK = 1 << 20
_HOLD = 4 << 20  # most bytes of one step's content kept in memory
_HEAD = 64 << 10  # most bytes of a content kept for constraint checks
_TRACE_CAP = 10_000  # steps of one example kept for reports
_CONT = bytes(range(0x80, 0xC0))  # UTF-8 continuation bytes
_NONSPACE = re.compile(rb"\S")
#: What content is stripped of: the decoder's whitespace (not str.strip()'s, which also strips
#: U+00A0 and other spaces that the decoder's content automata never skip).
_STRIP = "".join(map(chr, sorted(WHITESPACE)))
_ANNOUNCE = re.compile(
    rb"(?i)(?P<fmt>\b(?:following|this|the same|same) format\b|^[ \t]{0,16}format[ \t]*:)"
    rb"|(?P<ex>\bhere (?:are|is) (?:some |a few |an? |\d+ |two |three |several )?examples?\b"
    rb"|^[ \t]{0,16}(?:few-shot )?examples[ \t]*:?[ \t]*\r?$)", re.MULTILINE)
_TEMPLATE = re.compile(
    r"(?i)\{\{[^}]*\}\}|\byou (?:should|must)\b|\bshould be one of\b"
    r"|^(?:the (?:input|result|output|action|answer|final|last)\b|this (?:is|should)\b|\.\.\.)")


def _announcements(buf: bytes, lo: int, hi: int, end: int) -> list[re.Match[bytes]]:
    """Announcements starting in buf[lo:hi] (they may run on to ``end``), in order.

    Every announcement contains "format" or "example"; those words are found by a plain
    case-folded substring search and the full pattern is tried only around them (fast on MBs)."""
    low = buf[lo:end].lower()
    found: dict[int, re.Match[bytes]] = {}
    for word in (b"format", b"example"):
        i = low.find(word)
        while i >= 0:
            c = lo + i
            for m in _ANNOUNCE.finditer(buf, max(lo, c - 48), min(end, c + 32)):
                if m.start() <= c < m.end() and m.start() < hi:
                    found[m.start()] = m
            i = low.find(word, i + 1)
    return [found[k] for k in sorted(found)]


def _expect(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else "one of " + ", ".join(names) if names else "nothing"


def _show(text: str, limit: int = 60) -> str:
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return '"' + text.replace("\n", "\\n") + '"'


@dataclass(frozen=True)
class Diagnostic:
    """One finding, positioned like a compiler message (1-based line and column, in characters)."""

    file: str
    line: int
    column: int
    severity: str  # "error" | "warning" | "note"
    code: str
    message: str
    example: int | None = None
    trace: tuple[str, ...] = ()
    source_line: str = ""
    caret: int = 0  # column of the caret inside source_line (1-based; 0: no source line)
    width: int = 1
    offset: int = field(default=0, compare=False)

    def render(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}" if self.line > 0 else self.file
        out = f"{where}: {self.severity}: {self.message}"
        if self.caret:
            out += f"\n    {self.source_line}\n    {' ' * (self.caret - 1)}{'^' * self.width}"
        if self.trace and self.severity != "note":
            out += f"\n    example {self.example}: {' '.join(self.trace)}"
        return out

    def to_dict(self) -> dict[str, object]:
        return {"file": self.file, "line": self.line, "column": self.column,
                "severity": self.severity, "code": self.code, "message": self.message,
                "example": self.example, "trace": list(self.trace)}


@dataclass(frozen=True)
class ExampleInfo:
    """One run of prompt strings: an example (valid or not) or an instructions block."""

    index: int | None  # example number (None for an instructions block)
    line: int
    column: int
    status: str  # "valid" | "invalid" | "instructions"
    trace: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {"index": self.index, "line": self.line, "column": self.column,
                "status": self.status, "trace": list(self.trace)}


@dataclass(frozen=True)
class FileReport:
    """Everything validate found in one file."""

    file: str
    spec: str
    examples: int = 0
    valid: int = 0
    instructions: int = 0
    size: int = 0
    diagnostics: tuple[Diagnostic, ...] = ()
    example_list: tuple[ExampleInfo, ...] | None = None
    error: Diagnostic | None = None  # the file could not be read (not UTF-8, I/O error)

    @property
    def invalid(self) -> int:
        return self.examples - self.valid

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return 2
        return 1 if any(d.severity == "error" for d in self.diagnostics) else 0

    def summary(self) -> str:
        if self.error is not None:
            return f"{self.file}: not checked"
        ins = f", {self.instructions} instructions block{'s' * (self.instructions != 1)}" \
            if self.instructions else ""
        return (f"{self.file}: {self.examples} example{'s' * (self.examples != 1)}, "
                f"{self.valid} valid, {self.invalid} invalid{ins}")

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {
            "file": self.file, "spec": self.spec, "bytes": self.size, "examples": self.examples,
            "valid": self.valid, "invalid": self.invalid, "instructions": self.instructions,
            "ok": self.exit_code == 0, "diagnostics": [x.to_dict() for x in self.diagnostics],
            "error": self.error.to_dict() if self.error else None}
        if self.example_list is not None:
            d["example_list"] = [e.to_dict() for e in self.example_list]
        return d


@dataclass(frozen=True)
class _Regex:
    """A state's ``:regex``: its source (for messages) and the DFA the decoder steps."""

    pattern: str
    dfa: ContentDFA

    def fullmatch(self, text: str) -> bool:
        return self.dfa.matches(text.encode("utf-8"))


@dataclass(frozen=True)
class _Tables:
    """Per-spec lookup tables for the hot loop, derived once from the automaton and the states."""

    names: tuple[str, ...]
    initial: int
    delta: tuple[tuple[int, ...], ...]  # live successors only, else -1
    init_ok: tuple[bool, ...]
    complete: tuple[bool, ...]  # a run may end here (infinite specs: anywhere)
    ends: tuple[bool, ...]  # a forbidden prompt string after this state starts a new run
    resync: tuple[frozenset[int], ...]  # per state index: where it leads from any reachable state
    env: tuple[bool, ...]
    checks: tuple[tuple[tuple[str, ...] | None, _Regex | None], ...]
    checked: tuple[bool, ...]

    @classmethod
    def build(cls, c: CompiledSpec, tools: Sequence[str] | None) -> _Tables:
        a = c.automaton
        delta = a.live_delta
        seen = a.reachable | {a.initial}
        resync = tuple(frozenset(delta[q][i] for q in seen if delta[q][i] >= 0)
                       for i in range(len(a.names)))
        checks = []
        for st in c.spec.states:
            choices = st.choices
            if st.tool_choices:
                choices = tuple(tools) if tools else None
            if choices is not None and st.regex is not None:
                content_dfa(choices, st.regex)  # refuses tools of which none matches the regex
            # the decoder's own regex semantics (ASCII classes, docs/design.md §2.2), not re's
            checks.append((choices, _Regex(st.regex, regex_dfa(st.regex))
                           if st.regex is not None else None))
        return cls(a.names, a.initial, delta, tuple(r >= 0 for r in delta[a.initial]),
                   tuple(a.infinite or q in a.accepting for q in range(len(delta))),
                   tuple(not a.infinite and q in a.accepting for q in range(len(delta))), resync,
                   tuple(s.env_input for s in c.spec.states), tuple(checks),
                   tuple(ch is not None or rx is not None for ch, rx in checks))


class Validator:
    """Validates prompts against one compiled spec; reusable across files (holds no file state)."""

    def __init__(self, spec: CompiledSpec | str | Path, *, tools: Sequence[str] | None = None,
                 strict: bool = False, context_labels: Iterable[str] = (),
                 keep_examples: bool = False, chunk_size: int = _CHUNK,
                 hold_limit: int = _HOLD) -> None:
        self.compiled = spec if isinstance(spec, CompiledSpec) else compile_spec(spec)
        if self.compiled.spec.is_event_spec:
            raise UsageError(f"spec {self.compiled.spec.name!r} declares event states (chat "
                             "events, not prompt strings): validate checks text prompts",
                             hint="check chat logs against it with: ltlagent check-log SPEC LOG")
        self.tables = _Tables.build(self.compiled, tools)
        self.strict = strict
        self.keep_examples = keep_examples
        self.chunk_size = max(1, chunk_size)
        self.hold_limit = max(hold_limit, 4 * self.compiled.lexer.max_keyword_bytes + 64)
        labels = sorted({*DEFAULT_CONTEXT_LABELS, *context_labels}, key=len, reverse=True)
        alts = b"|".join(re.escape(x.strip().rstrip(":").encode()) for x in labels if x.strip())
        self.context_re = re.compile(rb"\n[ \t]{0,16}(?:" + alts + rb")[ \t]*(?:\d+[ \t]*)?:")

    def validate_path(self, path: str | Path) -> FileReport:
        """Validate one file (streamed)."""
        try:
            with open(path, "rb") as f:
                return self.validate_stream(f, str(path))
        except OSError as e:
            return FileReport(str(path), self.compiled.spec.name, error=Diagnostic(
                str(path), 0, 0, "error", "io-error", f"cannot read: {e.strerror or e}"))

    def validate_text(self, text: str | bytes, name: str = "<prompt>") -> FileReport:
        data = text.encode("utf-8") if isinstance(text, str) else text
        return self.validate_stream(io.BytesIO(data), name)

    def validate_stream(self, f: BinaryIO, name: str) -> FileReport:
        return _Scan(self, name).run(_LineEnds(f))


class _Source(Protocol):
    """What a scan reads: bytes, and a way back to re-read source lines for messages."""

    def read(self, n: int = -1, /) -> bytes: ...

    def seek(self, pos: int, whence: int = 0, /) -> int: ...

    def seekable(self) -> bool: ...


class _LineEnds:
    """A binary stream read with a lone ``\r`` (old Mac line ends) turned into ``\n``, byte for
    byte, so that offsets stay those of the file and lines are counted as the spec reader counts
    them (``\n``, ``\r\n`` or a lone ``\r``)."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        while data.endswith(b"\r"):  # is it a CRLF? the next byte tells
            more = self.f.read(1)
            if not more:
                break
            data += more
        return _LONE_CR.sub(b"\n", data) if b"\r" in data else data

    def seek(self, pos: int, whence: int = 0) -> int:
        return self.f.seek(pos, whence)

    def tell(self) -> int:
        return self.f.tell()

    def seekable(self) -> bool:
        return self.f.seekable()


_LONE_CR = re.compile(rb"\r(?!\n)")


@dataclass(slots=True)
class _Run:
    """A run of prompt strings being replayed (mutable, per file)."""

    start: int  # offset of its first prompt string
    line: int  # line and column of it (0 until needed)
    column: int
    first: bool  # the first run of the file
    format_before: bool
    q: int  # automaton state, or -1 while recovering (then ``states`` holds the candidates)
    states: frozenset[int] = frozenset()
    trace: list[int] = field(default_factory=list)
    error: bool = False
    diags: list[Diagnostic] = field(default_factory=list)
    last_k: int = -1
    last_off: int = 0
    last_where: tuple[int, int] | None = None  # (line, column) of it, once resolved
    heads: list[str] = field(default_factory=list)


@dataclass
class _GapAcc:
    """What was seen in the dropped part of the open gap (a content longer than the hold limit)."""

    upto: int
    brk: int = -1
    head: bytearray = field(default_factory=bytearray)
    nonspace: bool = False
    text_at: tuple[int, int] | None = None  # (line, column) of the first non-space character
    ann: str | None = None  # kind of the last announcement ("fmt" or "ex")
    examples: bool = False  # some announcement of examples
    lines_after: int = 0  # line breaks between the last announcement and ``upto``


def _with_sources(f: _Source, diags: list[Diagnostic], origin: int) -> list[Diagnostic]:
    """Second pass over a seekable file: quote the source line of each diagnostic."""
    want: dict[int, int] = {}
    for d in diags:
        if d.severity != "note" and d.line > 0:
            want[d.line] = max(want.get(d.line, 0), d.column)
    lines: dict[int, bytearray] = {}
    f.seek(origin)
    line, last = 1, max(want)
    while line <= last:
        chunk = f.read(_CHUNK)
        if not chunk:
            break
        pos = 0
        while pos < len(chunk) and line <= last:
            nl = chunk.find(b"\n", pos)
            end = len(chunk) if nl < 0 else nl
            if line in want:
                got = lines.setdefault(line, bytearray())
                room = 4 * want[line] + 400 - len(got)
                if room > 0:
                    got += chunk[pos: min(end, pos + room)]
            if nl < 0:
                break
            line, pos = line + 1, nl + 1
    out = []
    for d in diags:
        raw = lines.get(d.line)
        if raw is None or d.severity == "note":
            out.append(d)
            continue
        text = raw.decode("utf-8", "replace").rstrip("\r").replace("\t", " ")
        i = d.column - 1
        pre, post = text[max(0, i - 79): i], text[i: i + 80]
        pre = ("…" if i > 79 else "") + pre
        post += "…" if len(text) > i + 80 else ""
        out.append(replace(d, source_line=pre + post, caret=len(pre) + 1))
    return out


class _Scan:
    """One file's pass: buffer, positions, runs, diagnostics (mutable, per file)."""

    def __init__(self, v: Validator, name: str) -> None:
        self.v, self.t, self.name = v, v.tables, name
        self.buf = b""
        self.base = 0  # absolute offset of buf[0]
        self.origin = 0  # offset of line 1 column 1 (after a BOM)
        self.base_line, self.base_col = 1, 0
        self.cur = (0, 1, 0)  # a later position whose line/column are known
        self.gap = 0  # start of the open gap: the content of the last step (or the preamble)
        self.acc: _GapAcc | None = None
        self.run_: _Run | None = None
        self.runs = 0
        self.examples = self.valid = self.instructions = 0
        self.diags: list[Diagnostic] = []
        self.infos: list[ExampleInfo] | None = [] if v.keep_examples else None

    # -- positions -----------------------------------------------------------------------------
    def _advance(self, off: int) -> tuple[int, int]:
        """(line, chars since line start) at ``off`` (>= base, within the buffer)."""
        o, line, col = self.cur if self.cur[0] <= off else (self.base, self.base_line, self.base_col)
        b, lo, hi = self.buf, o - self.base, off - self.base
        n = b.count(b"\n", lo, hi)
        if n:
            line += n
            lo = b.rfind(b"\n", lo, hi) + 1
            col = 0
        col += len(b[lo:hi].translate(None, _CONT))
        self.cur = (off, line, col)
        return line, col

    def locate(self, off: int) -> tuple[int, int]:
        """(line, column) of an offset still in the buffer (the source line is read at the end)."""
        line, col = self._advance(max(off, self.base, self.origin))
        return line, col + 1

    def diag(self, off: int, code: str, message: str, width: int = 1, trace: Sequence[int] = (),
             where: tuple[int, int] | None = None, severity: str = "error") -> Diagnostic:
        line, col = where or self.locate(off)
        names = self.t.names
        return Diagnostic(self.name, line, col, severity, code, message, None,
                          tuple(names[i] for i in trace[:_TRACE_CAP]), width=width, offset=off)

    # -- gaps (the text between two prompt strings) ---------------------------------------------
    def gap_break(self, a: int, b: int) -> int:
        """Offset of the first context line in [a, b), else b."""
        acc = self.acc
        if acc is not None and a == self.gap:
            if acc.brk >= 0:
                return acc.brk
            a = acc.upto
        m = self.v.context_re.search(self.buf, max(0, a - 1 - self.base), b - self.base)
        return self.base + m.start() + 1 if m else b

    def gap_content(self, a: int, b: int) -> tuple[str, int, tuple[int, int] | None, bool]:
        """(content stripped, offset and, if already dropped, line and column of its first
        character, truncated) of the step in [a, b)."""
        b = self.gap_break(a, b)
        acc = self.acc if self.acc is not None and a == self.gap else None
        lo = max(a, acc.upto) if acc else a
        piece = self.buf[lo - self.base: b - self.base] if b > lo else b""
        data = bytes(acc.head) + piece if acc else piece
        trunc = len(data) > _HEAD
        data = data[:_HEAD]
        m = _NONSPACE.search(data)
        if m is None:
            return "", b, None, trunc
        if acc and m.start() < len(acc.head):
            start, where = a + m.start(), acc.text_at
        else:
            start, where = lo + m.start() - (len(acc.head) if acc else 0), None
        return data.decode("utf-8", "replace").strip(_STRIP), start, where, trunc

    def gap_announcements(self, a: int, b: int) -> tuple[bool, bool]:
        """(a format announcement ends the text near b, the text announces examples)."""
        kind, examples, lines, lo = None, False, 0, a
        acc = self.acc
        if acc is not None and a == self.gap:
            kind, examples, lines, lo = acc.ann, acc.examples, acc.lines_after, acc.upto
        last = None
        for m in _announcements(self.buf, max(0, lo - self.base), b - self.base, b - self.base):
            last = m
            examples = examples or m.lastgroup == "ex"
        if last is not None:
            kind, lines = last.lastgroup, self.buf.count(b"\n", last.end(), b - self.base)
        else:
            lines += self.buf.count(b"\n", max(0, lo - self.base), b - self.base)
        return kind == "fmt" and lines <= 3, examples

    # -- the pass --------------------------------------------------------------------------------
    def run(self, f: _Source) -> FileReport:
        lexer = self.v.compiled.lexer
        rx, groups = lexer.byte_regex, lexer.group_keywords
        keep = lexer.max_keyword_bytes - 1
        decoder = codecs.getincrementaldecoder("utf-8")()
        scan = 0  # where the keyword scan resumes
        first = True
        t, strict = self.t, self.v.strict
        delta = t.delta
        quiet = [not (t.checked[k] or (strict and t.env[k])) for k in range(len(t.names))]
        plain = [not (t.init_ok[k] or (strict and t.env[k])) for k in range(len(t.names))]
        while True:
            chunk = f.read(self.v.chunk_size)
            final = not chunk
            if first and chunk:
                while len(chunk) < 3 and not final:  # a BOM split over tiny reads
                    more = f.read(self.v.chunk_size)
                    if not more:
                        break
                    chunk += more
                if chunk.startswith(codecs.BOM_UTF8):
                    self.base = self.origin = scan = self.gap = 3
                    self.cur = (3, 1, 0)
                    chunk = chunk[3:]
                first = False
            self.buf += chunk
            try:
                decoder.decode(chunk, final)
            except UnicodeDecodeError as e:
                return self.not_utf8(len(self.buf) - len(e.object) + e.start, e)
            if len(self.buf) == len(chunk) and chunk.count(0) * 8 >= len(chunk) > 0:
                # valid UTF-8 byte for byte, but NULs between the letters: UTF-16 without a BOM (a
                # stray NUL in generated text, as a transcript may hold, is not this)
                return self.bad_byte(chunk.find(b"\x00"), "nul-byte",
                                     "NUL bytes between the characters: UTF-16 text without a BOM? "
                                     "save the prompt as UTF-8")
            limit = len(self.buf) if final else len(self.buf) - keep
            base = self.base
            for m in rx.finditer(self.buf, scan - base):
                s = m.start()
                if s >= limit:
                    break
                k = groups[m.lastindex]  # type: ignore[index]
                scan = base + m.end()
                run = self.run_
                # the hot path: an allowed step that needs no check and cannot start an example
                if run is not None and run.q >= 0 and quiet[run.last_k] and not run.first:
                    r = delta[run.q][k]
                    if r >= 0 and plain[k]:
                        run.q = r
                        if len(run.trace) < _TRACE_CAP:
                            run.trace.append(k)
                        run.last_k, run.last_off, run.last_where = k, base + s, None
                        self.gap, self.acc = scan, None
                        continue
                self.keyword(k, base + s, scan)
            if final:
                break
            scan = max(scan, base + limit)
            self.drop(scan)
        end = self.base + len(self.buf)
        run = self.run_
        if run is not None:
            self.close_step(run, self.gap, end, -1)
            self.finish(run, self.gap_announcements(self.gap, end)[1])
        if self.examples == 0:
            why = "" if self.runs else f": no prompt string of {self.v.compiled.spec.name} occurs"
            if end == self.origin:
                why = ": the file is empty"
            # nothing was checked: not a pass (a wrong spec, a wrong file, an empty one)
            self.diags.append(Diagnostic(self.name, 1, 1, "error", "no-examples",
                                         f"no examples found{why}", offset=-1))
        self.diags.sort(key=lambda d: (d.offset, d.severity != "note"))
        if f.seekable() and any(d.severity != "note" and d.line > 0 for d in self.diags):
            self.diags = _with_sources(f, self.diags, self.origin)
        return FileReport(self.name, self.v.compiled.spec.name, self.examples, self.valid,
                          self.instructions, end - self.origin, tuple(self.diags),
                          tuple(self.infos) if self.infos is not None else None)

    def not_utf8(self, pos: int, e: UnicodeDecodeError) -> FileReport:
        # pos is the index in self.buf of the first bad byte
        bad = self.buf[pos] if 0 <= pos < len(self.buf) else 0
        return self.bad_byte(pos, "not-utf8", f"not UTF-8 text: byte 0x{bad:02x} at offset "
                             f"{self.base + max(0, pos)} ({e.reason}); save the prompt as UTF-8")

    def bad_byte(self, pos: int, code: str, message: str) -> FileReport:
        """The file is not checked: ``message`` at index ``pos`` of the buffer."""
        off = self.base + max(0, pos)
        line, col = self._advance(off)
        d = Diagnostic(self.name, line, col + 1, "error", code, message, offset=off)
        return FileReport(self.name, self.v.compiled.spec.name, error=d)

    def drop(self, scan: int) -> None:
        """Forget buffered bytes no longer needed, keeping the open gap up to the hold limit."""
        end = self.base + len(self.buf)
        want = min(scan, self.gap)
        if end - want > self.v.hold_limit:
            want = max(want, end - self.v.hold_limit // 2)
        want = min(want, scan, end - 4)  # a UTF-8 character cut at the end stays in view
        if want - 1 <= self.base:
            return
        run = self.run_
        if run is not None and run.line == 0 and run.start < want:
            run.line, run.column = self.locate(run.start)
        if run is not None and run.last_where is None and run.last_off < want:
            run.last_where = self.locate(run.last_off)
        if self.gap < want:
            self.absorb(want)
        new_base = want - 1  # keep one byte before: line-start tests look behind
        self._advance(new_base)
        _, self.base_line, self.base_col = self.cur
        self.buf = self.buf[new_base - self.base:]
        self.base = new_base

    def absorb(self, upto: int) -> None:
        """Summarise the part [.., upto) of the open gap that is about to be dropped."""
        acc = self.acc or _GapAcc(self.gap)
        if acc.brk < 0 and acc.upto < upto:
            lo = acc.upto
            m = self.v.context_re.search(self.buf, max(0, lo - 1 - self.base),
                                         min(len(self.buf), upto - self.base + 64))
            if m and self.base + m.start() + 1 < upto:
                acc.brk = self.base + m.start() + 1
            stop = acc.brk if acc.brk >= 0 else upto
            piece = self.buf[lo - self.base: stop - self.base]
            m = None if acc.nonspace else _NONSPACE.search(piece)
            if m is not None:
                acc.nonspace, acc.text_at = True, self.locate(lo + m.start())
            if len(acc.head) <= _HEAD:
                acc.head += piece[: _HEAD + 1 - len(acc.head)]
        if acc.upto < upto:
            lo, last = acc.upto - self.base, None
            for m in _announcements(self.buf, lo, upto - self.base,
                                    min(len(self.buf), upto - self.base + 64)):
                last = m
                acc.examples = acc.examples or m.lastgroup == "ex"
            if last is not None:
                acc.ann, lo = last.lastgroup, min(last.end(), upto - self.base)
                acc.lines_after = 0
            acc.lines_after += self.buf.count(b"\n", lo, upto - self.base)
        acc.upto = max(acc.upto, upto)
        self.acc = acc

    # -- runs ------------------------------------------------------------------------------------
    def keyword(self, k: int, s: int, e: int) -> None:
        """Prompt string ``k`` found at [s, e)."""
        a, run, t = self.gap, self.run_, self.t
        if run is None:
            self.start(k, s, self.gap_announcements(a, s)[0])
        else:
            self.close_step(run, a, s, k)
            q = run.q
            if q >= 0:
                r = t.delta[q][k]
                if r >= 0:
                    if not (t.init_ok[k] and self.gap_break(a, s) < s):
                        run.q = r
                        self.step(run, k, s)
                        self.gap, self.acc = e, None
                        return
                elif not (t.ends[q] or (t.init_ok[k] and self.gap_break(a, s) < s)):
                    self.unexpected(run, k, s, e)
                    self.gap, self.acc = e, None
                    return
            else:
                nxt = frozenset(t.delta[p][k] for p in run.states) - {-1}
                done = any(t.ends[p] for p in run.states)
                if nxt and not (t.init_ok[k] and self.gap_break(a, s) < s):
                    self.recover(run, nxt)
                    self.step(run, k, s)
                    self.gap, self.acc = e, None
                    return
                if not nxt and not (done or (t.init_ok[k] and self.gap_break(a, s) < s)):
                    self.unexpected(run, k, s, e)
                    self.gap, self.acc = e, None
                    return
            fmt, examples = self.gap_announcements(a, s)
            self.finish(run, examples)
            self.start(k, s, fmt)
        self.gap, self.acc = e, None
        if self.t.env[k] and self.v.strict and self.run_ is not None:
            self.strict_line_start(self.run_, k, s)

    def step(self, run: _Run, k: int, s: int) -> None:
        if len(run.trace) < _TRACE_CAP:
            run.trace.append(k)
        run.last_k, run.last_off, run.last_where = k, s, None
        if self.t.env[k] and self.v.strict:
            self.strict_line_start(run, k, s)

    def start(self, k: int, s: int, format_before: bool) -> None:
        t = self.t
        run = _Run(s, 0, 0, self.runs == 0, format_before, t.delta[t.initial][k])
        self.runs += 1
        self.run_ = run
        run.trace.append(k)
        run.last_k, run.last_off = k, s
        if run.q < 0:
            allowed = [t.names[i] for i, ok in enumerate(t.init_ok) if ok]
            run.diags.append(self.diag(s, "bad-start", f"example starts with {t.names[k]}; "
                                       f"expected {_expect(allowed)}", self.kw_width(k), run.trace))
            run.error = True
            self.recover(run, t.resync[k])

    def recover(self, run: _Run, states: frozenset[int]) -> None:
        if len(states) == 1:
            run.q, run.states = next(iter(states)), frozenset()
        else:
            run.q, run.states = -1, states

    def unexpected(self, run: _Run, k: int, s: int, e: int) -> None:
        t = self.t
        if len(run.trace) < _TRACE_CAP:
            run.trace.append(k)
        if not run.error:
            run.error = True
            allowed = self.allowed(run)
            run.diags.append(self.diag(
                s, "unexpected-state", f"expected {_expect(allowed)} after {t.names[run.last_k]}, "
                f"found {t.names[k]}", self.kw_width(k), run.trace))
        if run.q >= 0:
            resync = t.resync[k]
        else:
            resync = frozenset(t.delta[p][k] for p in run.states) - {-1} or t.resync[k]
        if resync:
            self.recover(run, resync)
        run.last_k, run.last_off, run.last_where = k, s, None

    def allowed(self, run: _Run) -> list[str]:
        t = self.t
        qs = [run.q] if run.q >= 0 else sorted(run.states)
        return [n for i, n in enumerate(t.names) if any(t.delta[q][i] >= 0 for q in qs)]

    def kw_width(self, k: int) -> int:
        return len(self.v.compiled.lexer.keywords[k])

    def close_step(self, run: _Run, a: int, b: int, nxt: int) -> None:
        """The content of the last step ends at ``b`` (where prompt string ``nxt`` begins, or
        -1 at the end of the file): check it."""
        k, t = run.last_k, self.t
        if t.checked[k] or (run.first and len(run.heads) < 64) or (self.v.strict and t.env[k]):
            text, off, where, trunc = self.gap_content(a, b)
            if run.first and len(run.heads) < 64:
                run.heads.append(text[:200])
            if t.checked[k]:
                self.check_content(run, k, text, off, where, trunc)
            if self.v.strict and t.env[k]:
                if not text:
                    run.diags.append(self.diag(
                        run.last_off, "ownership", f"{t.names[k]} has no text: at run time the "
                        "environment writes it (:env-input), so this example lets the model's "
                        "next step stand in for it", self.kw_width(k), run.trace,
                        where=run.last_where))
                elif nxt >= 0 and not self.line_start(b) and self.gap_break(a, b) == b:
                    run.diags.append(self.diag(
                        b, "ownership", f"{t.names[nxt]} continues the line of {t.names[k]}'s "
                        "text, which the environment writes (:env-input): at run time the "
                        "model's turn starts after it", self.kw_width(nxt), [*run.trace, nxt]))

    def check_content(self, run: _Run, k: int, text: str, off: int,
                      where: tuple[int, int] | None, trunc: bool) -> None:
        t = self.t
        choices, rx = t.checks[k]
        name = t.names[k]
        if choices is not None and text not in choices:
            run.diags.append(self.diag(off, "choices", f"{name} content {_show(text)} is not one of "
                                       f"{', '.join(choices)}", max(1, min(len(text.split("\n")[0]), 40)),
                                       run.trace, where))
        if rx is not None and (trunc or not rx.fullmatch(text)):
            why = " (content too long to check)" if trunc else ""
            run.diags.append(self.diag(off, "regex", f"{name} content {_show(text)} does not match "
                                       f"/{rx.pattern}/{why}", max(1, min(len(text.split("\n")[0]), 40)),
                                       run.trace, where))

    def line_start(self, off: int) -> bool:
        i = off - self.base - 1
        while i >= 0 and self.buf[i] in b" \t":
            i -= 1
        return i < 0 or self.buf[i] == 0x0A or self.base + i < self.origin

    def strict_line_start(self, run: _Run, k: int, s: int) -> None:
        if not self.line_start(s) and not any(d.code == "ownership" and d.offset == s
                                              for d in run.diags):
            run.diags.append(self.diag(
                s, "ownership", f"{self.t.names[k]} begins in the middle of a line: its text is "
                "written by the environment (:env-input), so the model's text before it would "
                "run into the environment's turn", self.kw_width(k), run.trace))

    def finish(self, run: _Run, examples_after: bool) -> None:
        """The run ended: classify it and publish its diagnostics."""
        t = self.t
        template = run.first and run.heads and \
            2 * sum(1 for h in run.heads if _TEMPLATE.search(h)) >= len(run.trace)
        why = ("the examples are announced after it" if examples_after else
               "a format announcement precedes it" if run.format_before else
               "its steps hold placeholder text" if template else "")
        names = tuple(t.names[i] for i in run.trace) if why or self.infos is not None else ()
        if run.line == 0 and names:
            run.line, run.column = self.locate(run.start)
        if why:
            self.instructions += 1
            self.diags.append(Diagnostic(
                self.name, run.line, run.column, "note", "instructions",
                f"instructions block, not an example ({why}): {' '.join(names)}", None, names,
                offset=run.start))
            if self.infos is not None:
                self.infos.append(ExampleInfo(None, run.line, run.column, "instructions", names))
            self.run_ = None
            return
        self.examples += 1
        complete = t.complete[run.q] if run.q >= 0 else any(t.complete[p] for p in run.states)
        if not run.error and not complete:
            allowed = self.allowed(run)
            if run.last_where is None:
                run.last_where = self.locate(run.last_off)
            run.diags.append(self.diag(
                run.last_off, "incomplete", f"example ends in {t.names[run.last_k]}; expected "
                f"{_expect(allowed)}", self.kw_width(run.last_k), run.trace, where=run.last_where))
        bad = any(d.severity == "error" for d in run.diags)
        self.valid += not bad
        for d in run.diags:
            self.diags.append(Diagnostic(d.file, d.line, d.column, d.severity, d.code, d.message,
                                         self.examples, d.trace, d.source_line, d.caret, d.width,
                                         d.offset))
        if self.infos is not None:
            self.infos.append(ExampleInfo(self.examples, run.line, run.column,
                                          "invalid" if bad else "valid", names))
        self.run_ = None
