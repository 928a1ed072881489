"""Tool calls as byte languages: the formats a model writes a native tool call in, as one DFA.

Two formats (docs/design.md §5.1):

- ``hermes`` (Hermes, Qwen2.5/3 chat templates): ``<tool_call>\\n{"name": "NAME", "arguments":
  ARGS}\\n</tool_call>``;
- ``json``: the bare object ``{"name": "NAME", "arguments": ARGS}``.

NAME ranges over the allowed tools and ARGS over the texts of that tool's argument schema
(:mod:`ltlagent.text.jsonschema`; the name decides which schema follows, since ``name`` comes
first). The object itself follows the same lexical policy as the arguments: keys in this order, at
most one space after ``:`` and ``,``. ``fields`` narrows a tool's string arguments by regex (issue
17's ``(:args (KEY (:regex "…")))``). :func:`parse_call` reads a call back, for round trips and for
reading what an unconstrained model wrote.

Several calls in one turn (issue 30) are written one after another with only blank text between
them, in both formats: hermes blocks as the Hermes and Qwen templates render them
(``</tool_call>\n<tool_call>``), and for ``json`` one object after the other (one per line as
:func:`render_calls` writes them), not a JSON array: a turn's first call is then the same text
whether or not another follows, and each call is a whole JSON value the moment it closes, which is
when the decoder judges it. :func:`parse_calls` reads such a sequence back.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ltlagent.errors import LtlAgentError, UsageError
from ltlagent.text import jsonschema
from ltlagent.text.bytetable import ByteTable
from ltlagent.text.content import ContentDFA
from ltlagent.text.glue import Glue
from ltlagent.text.jsonschema import (
    MAX_JSON_STATES,
    JsonConst,
    JsonType,
    emit,
    narrow,
    parse_schema,
    schema_block,
)

__all__ = ["FORMATS", "ToolCall", "ToolCallError", "call_dfa", "call_table", "clear_caches", "parse_call",
           "find_calls", "render_call", "glue_calls", "parse_calls", "render_calls", "CALL_GAP"]

#: The call formats, each as (text before the JSON object, text after it).
FORMATS: dict[str, tuple[str, str]] = {"hermes": ("<tool_call>\n", "\n</tool_call>"), "json": ("", "")}
_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
#: What :func:`render_calls` writes between two calls of one turn.
CALL_GAP = "\n"


class ToolCallError(LtlAgentError, ValueError):
    """A text is not a well-formed tool call (a model's mistake, meant to be recorded as data)."""


@dataclass(frozen=True)
class ToolCall:
    """A parsed call: the tool's name and its arguments (a JSON object)."""

    name: str
    arguments: Mapping[str, object] = field(default_factory=dict)


def _format(name: str) -> tuple[str, str]:
    if name not in FORMATS:
        raise UsageError(f"unknown tool-call format {name!r}", hint=f"use one of {', '.join(FORMATS)}")
    return FORMATS[name]


def clear_caches() -> None:
    """Forget the call tables and schema parts built so far (:func:`jsonschema.clear_caches`)."""
    _call_table.cache_clear()
    jsonschema.clear_caches()


def call_dfa(tools: Mapping[str, Mapping[str, object] | JsonType], format: str = "hermes",
             fields: Mapping[str, Mapping[str, str]] | None = None, *,
             limit: int = MAX_JSON_STATES) -> ContentDFA:
    """The DFA of the calls, in ``format``, of the tools ``tools`` maps (name → argument
    schema, a JSON-schema dict or a parsed description); ``fields`` maps a tool name to its
    narrowing regexes (argument → regex the string value must fullmatch)."""
    return call_table(tools, format, fields, limit=limit).content


def call_table(tools: Mapping[str, Mapping[str, object] | JsonType], format: str = "hermes",
               fields: Mapping[str, Mapping[str, str]] | None = None, *,
               limit: int = MAX_JSON_STATES) -> ByteTable:
    """:func:`call_dfa` as a numpy :class:`ByteTable`, built once per (tools, format, narrowing):
    the schemas are read into frozen descriptions, and the table of those is cached."""
    _format(format)
    if not tools:
        raise UsageError("a tool-call automaton needs at least one tool")
    for name in fields or {}:
        if name not in tools:
            raise UsageError(f"argument regexes for {name!r}, which is not among the tools "
                             f"{', '.join(tools)}")
    parsed: list[tuple[str, JsonType]] = []
    for name, schema in tools.items():
        t = parse_schema(schema) if isinstance(schema, Mapping | bool) else schema
        if fields and name in fields:
            t = narrow(t, fields[name])
        try:  # (its parts are cached: the call table below reuses them)
            schema_block(t, limit=limit)
        except UsageError as e:  # a tool that could never be called, or one the decoder cannot write
            raise UsageError(f"tool {name!r}: {e}", hint=e.hint) from e
        parsed.append((name, t))
    return _call_table(tuple(parsed), format, limit)


@functools.lru_cache(maxsize=16)  # a 5-tool call table is ~11 MB
def _call_table(tools: tuple[tuple[str, JsonType], ...], format: str, limit: int) -> ByteTable:
    """The call table of parsed tools (a pure function of frozen descriptions, hence cached)."""
    glue = Glue()

    def arguments(name: str, t: JsonType, at: int, to: int) -> None:
        emit(glue, t, at, to, limit)

    names = ", ".join(name for name, _t in tools)
    table = glue_calls(glue, tools, format, arguments, limit, f"the {format} tool calls of {names}")
    return ByteTable(table.trans, table.accepting, f"{format} calls: {names}", table.periods)


def glue_calls(glue: Glue, tools: tuple[tuple[str, JsonType], ...], format: str,
               arguments: Callable[[str, JsonType, int, int], None], limit: int,
               what: str) -> ByteTable:
    """The calls of ``tools`` in ``format``, determinised: the name decides the arguments, which
    ``arguments(name, schema, at, to)`` writes into ``glue`` between two of its states (the
    schema's automaton, or one narrowed further by the decoder's value rules)."""
    before, after = _format(format)
    nfa = glue.nfa
    start, final = nfa.new(), nfa.new()
    head = nfa.new()
    nfa.literal(before.encode() + b'{"name":', start, head)
    name_at = nfa.new()
    nfa.eps[head].append(name_at)
    nfa.edges[head].append((0x20, 0x20, name_at))
    tail = nfa.new()
    nfa.literal(b"}" + after.encode(), tail, final)
    for name, t in tools:
        n, c, key, a, args = (nfa.new() for _ in range(5))
        emit(glue, JsonConst((name,)), name_at, n)
        nfa.literal(b",", n, c)
        nfa.eps[c].append(key)
        nfa.edges[c].append((0x20, 0x20, key))
        nfa.literal(b'"arguments":', key, a)
        nfa.eps[a].append(args)
        nfa.edges[a].append((0x20, 0x20, args))
        arguments(name, t, args, tail)
    return glue.determinize(start, final, limit, what, "fewer tools or simpler argument schemas")


def _from_object(body: str) -> ToolCall:
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        raise ToolCallError(f"the call is not valid JSON: {e.msg} at character {e.pos}") from None
    return _from_value(obj)


def _from_value(obj: object) -> ToolCall:
    """The call a decoded JSON value is (:class:`ToolCallError` if it is none)."""
    if not isinstance(obj, dict):
        raise ToolCallError("the call must be a JSON object with name and arguments")
    name, args = obj.get("name"), obj.get("arguments", {})
    if not isinstance(name, str):
        raise ToolCallError("the call has no name (a string)")
    if isinstance(args, str):  # some models write the arguments as a JSON string, as OpenAI logs do
        try:  # an empty string is no arguments, as everywhere a call is read (docs/design.md §12)
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            raise ToolCallError(f"the arguments of {name!r} are not a JSON object") from None
    if not isinstance(args, dict):
        raise ToolCallError(f"the arguments of {name!r} are not a JSON object")
    extra = set(obj) - {"name", "arguments"}
    if extra:
        raise ToolCallError(f"the call has unexpected keys {sorted(extra)}")
    return ToolCall(name, args)


def parse_call(text: str, format: str = "hermes") -> ToolCall:
    """The call ``text`` is (surrounding whitespace ignored); :class:`ToolCallError` if it is none."""
    _format(format)
    body = text.strip()
    if format == "hermes":
        m = _HERMES.fullmatch(body)
        if m is None:
            raise ToolCallError("a hermes call is <tool_call>{…}</tool_call>")
        body = m.group(1)
    return _from_object(body)


def _skip(text: str, at: int) -> int:
    """The first position from ``at`` that is not whitespace."""
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def parse_calls(text: str, format: str = "hermes") -> list[ToolCall]:
    """The calls ``text`` is, in order: one or more calls of ``format`` with only whitespace before,
    between and after them (:class:`ToolCallError` otherwise). Each call's JSON object is read
    with ``json.JSONDecoder.raw_decode``, so a string argument may hold ``</tool_call>``."""
    _format(format)
    decoder = json.JSONDecoder()
    out: list[ToolCall] = []
    at = _skip(text, 0)
    open_, close = "<tool_call>", "</tool_call>"
    while at < len(text) or not out:
        where = f"call {len(out) + 1}"
        if format == "hermes":
            if not text.startswith(open_, at):
                raise ToolCallError(f"{where}: a hermes call is <tool_call>{{…}}</tool_call>, and only "
                                    "blank text may separate calls")
            at = _skip(text, at + len(open_))
        elif not text.startswith("{", at):
            raise ToolCallError(f"{where}: a json call is an object {{…}}, and only blank text may "
                                "separate calls")
        try:
            obj, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError as e:
            raise ToolCallError(f"{where} is not valid JSON: {e.msg} at character {e.pos}") from None
        except RecursionError:
            raise ToolCallError(f"{where} is nested too deep to read") from None
        out.append(_from_value(obj))
        at = _skip(text, at)
        if format == "hermes":
            if not text.startswith(close, at):
                raise ToolCallError(f"{where}: a hermes call ends with </tool_call>")
            at = _skip(text, at + len(close))
    return out


def find_calls(text: str) -> list[ToolCall | ToolCallError]:
    """Every ``<tool_call>…</tool_call>`` block of a message, in order, parsed or the error."""
    out: list[ToolCall | ToolCallError] = []
    for m in _HERMES.finditer(text):
        try:
            out.append(_from_object(m.group(1)))
        except ToolCallError as e:
            out.append(e)
    return out


def render_call(call: ToolCall, format: str = "hermes") -> str:
    """The text of ``call`` as chat templates write it (``json.dumps`` with ``ensure_ascii=False``;
    in the language of :func:`call_dfa` when the arguments follow the schema in declared order)."""
    before, after = _format(format)
    return before + json.dumps({"name": call.name, "arguments": dict(call.arguments)},
                               ensure_ascii=False) + after


def render_calls(calls: Sequence[ToolCall], format: str = "hermes") -> str:
    """The text of several calls of one turn (:func:`render_call` each, :data:`CALL_GAP` between):
    what :func:`parse_calls` reads back."""
    return CALL_GAP.join(render_call(c, format) for c in calls)
