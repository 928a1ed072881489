"""The byte language of one assistant turn of a tool-calling chat (issue 18; docs/design.md §14).

A turn is free text, or free text followed by one tool call in the model's call format, then the
end of the turn. Which of these the policy allows *now* is a :class:`TurnRule`: may the turn be
text (an assistant text step is allowed), and which tools may be called with no text before the
call and which after some text (a text step moves the policy, so the two can differ). A rule
becomes one byte DFA (:class:`TurnLanguage`): a text phase that watches for the call marker
(``<tool_call>`` for ``hermes``; a ``{`` at the very start for ``json``) with a
Knuth–Morris–Pratt failure function, then the DFA of the allowed calls (names and argument
schemas, :func:`ltlagent.text.toolcall.call_table`; with value rules, :func:`value_call_table`).
Text that would complete the marker while no tool may be called is impossible, so is a call to a
tool the policy forbids now, and so are arguments outside the tool's schema; by default the text
stays valid UTF-8. The language also carries what every vocabulary's index reads of it once
(distances, edges, checked :class:`Period` s, loops, single live bytes, content steps), so that
:class:`~ltlagent.decode.chat.TurnIndex` compiles it for a vocabulary without reading the whole
table again.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ltlagent.chat.events import BLANK
from ltlagent.decode.machine import UTF8, UTF8_BAD
from ltlagent.decode.trie import byte_bits
from ltlagent.decode.triewalk import compiled_passes
from ltlagent.errors import UsageError
from ltlagent.graph import csr, levels, run_spans
from ltlagent.text.bytetable import ByteTable, Periods
from ltlagent.text.glue import Block, Glue, Nested
from ltlagent.text.jsonschema import (
    MAX_JSON_STATES,
    JsonArray,
    JsonConst,
    JsonInteger,
    JsonNumber,
    JsonObject,
    JsonProperty,
    JsonString,
    JsonType,
    JsonUnion,
    _Emitter,
    description_table,
    emit,
    extra_keys,
    narrow,
    parse_schema,
)
from ltlagent.text.toolcall import FORMATS, call_table, glue_calls
from ltlagent.text.values import MAX_VALUE_STATES, ValueBudgetExceeded, ValueTerm, restrict_field

__all__ = ["TurnRule", "TurnLanguage", "Period", "CALL_MARKERS", "CONTENT_ASCII", "ValueRules",
           "value_call_table"]

#: The text that begins a call in each format (``json``: a ``{`` as the turn's first byte).
CALL_MARKERS = {"hermes": "<tool_call>", "json": "{"}


#: Per tool (sorted), its argument keys (spec spelling, ``a.b`` nested) and their value terms.
ValueRules = tuple[tuple[str, tuple[tuple[str, ValueTerm], ...]], ...]


@dataclass(frozen=True)
class TurnRule:
    """What the policy allows in the next assistant turn."""

    text: bool  # may the turn contain (non-blank) text, and end after it
    tools_first: frozenset[str]  # tools that may be called with no text before
    tools_after_text: frozenset[str]  # tools that may be called after some text
    #: per phase (first, after text), tool → argument regexes its call must match (``(:args …)``)
    narrow: tuple[tuple[tuple[str, tuple[tuple[str, str], ...]], ...], ...] = ((), ())
    #: per phase, tool → (argument key, term of the values the policy allows there now) (issue 28)
    values: tuple[ValueRules, ...] = ((), ())
    #: tools whose values a rule constrains outside the fragment enforced token by token: written
    #: unconstrained by value and judged once written (design §14.1)
    judged: frozenset[str] = frozenset()
    #: the turn so far ends with a complete call (issue 30): no text, only blank bytes and then
    #: another call of ``tools_first`` (``tools_after_text`` empty); ``end``: whether the turn may
    #: end here instead (the results of its calls may come next)
    after_call: bool = False
    end: bool = True


#: A language's per-state passes by one compiled loop where numba is installed
#: (:func:`~ltlagent.decode.triewalk.compiled_passes`); off (or without numba): numpy's passes.
COMPILED_PASSES = True


@dataclass(frozen=True)
class TurnLanguage:
    """One turn as a byte DFA: ``trans[s, b]`` (``dead`` is the sink row), ``accepting[s]``.

    States ``0 … 2m-1`` are the text phase between characters (``k`` marker bytes matched, text
    seen or not), then (with UTF-8 checked) the text inside a multi-byte character, 7 states per
    "seen" (:data:`ltlagent.decode.machine.UTF8`), then the states of the call DFA for
    ``tools_first``, then those for ``tools_after_text``.
    """

    trans: np.ndarray = field(repr=False)  # int32 [n + 1, 256]
    accepting: np.ndarray = field(repr=False)  # bool [n + 1]
    call_start: tuple[int, int]  # first state of each call DFA (-1: no such DFA)
    rule: TurnRule
    format: str
    #: ranges of states that repeat with a period (strings' character counts; ``ByteTable.periods``)
    periods: Periods = ()
    #: (tool, key, why) of the value terms of ``rule.values`` left to the argument's schema (the
    #: call is then judged once written): over the budget, or a shape not enforced by value
    unenforced: tuple[tuple[str, str, str], ...] = ()

    @property
    def dead(self) -> int:
        return int(self.trans.shape[0] - 1)

    @functools.cached_property
    def distance(self) -> np.ndarray:
        """Fewest bytes from each state to an accepting one (a large number where none is
        reachable): budget steering keeps a turn completable in the tokens left. One vectorised
        backward breadth-first search over :attr:`edges` (as :func:`ltlagent.text.bytetable.distance_to`)."""
        far = np.iinfo(np.int32).max // 2
        src, dst = self.edges
        seeds = np.flatnonzero(self.accepting[:-1]).astype(np.int64)
        dist = levels(*csr(dst, src, self.dead), seeds)
        return np.concatenate([np.where(dist >= 0, dist, far), [far]]).astype(np.int64)

    @functools.cached_property
    def runs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every row's runs of equal successors (:func:`ltlagent.graph.run_spans`; the dead row
        left out) as ``int64`` arrays: source, first byte, length, target, sources ascending and
        each row's runs in byte order. One pass over the table, shared by :attr:`edges`,
        :attr:`single` and :attr:`loop_count` (a row has a few runs, not 256 bytes)."""
        t = self.trans[:-1]
        src, lo, end = run_spans(t)
        return src, lo, end - lo, t[src, lo].astype(np.int64)

    @functools.cached_property
    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """The edges between live states as (source, target) arrays, one per run of equal
        successors in a row (:attr:`runs`), sources ascending: shared by :attr:`distance` and
        :attr:`checked_periods`."""
        src, _lo, _n, dst = self.runs
        keep = dst != self.dead
        return src[keep], dst[keep]

    @functools.cached_property
    def checked_periods(self) -> tuple[Period, ...]:
        """The hinted periods whose rows do repeat (:meth:`Period.check`), shared by the indexes
        of every vocabulary."""
        if not self.periods:
            return ()
        src, dst = self.edges
        spans = sorted((a, b) for a, b, _k in self.periods)
        entries: list[int | None] = [None] * len(self.periods)
        if all(0 <= a < b <= self.dead for a, b in spans) and all(
                b1 <= a2 for (_a1, b1), (a2, _b2) in itertools.pairwise(spans)):
            # disjoint ranges: every period's highest state entered from outside it, in one pass
            pid = np.full(self.dead + 1, -1, dtype=np.int64)
            for i, (a, b, _k) in enumerate(self.periods):
                pid[a:b] = i
            p_dst = pid[dst]
            into = (p_dst >= 0) & (p_dst != pid[src])
            top = np.full(len(self.periods), -1, dtype=np.int64)
            np.maximum.at(top, p_dst[into], dst[into])
            entries = [int(e) if e >= 0 else a - 1 for e, (a, _b, _k) in zip(top.tolist(), self.periods)]
        found = (Period.check(self, a, b, k, src, dst, entry)
                 for (a, b, k), entry in zip(self.periods, entries))
        return tuple(p for p in found if p is not None)

    @functools.cached_property
    def _passes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """:attr:`loops`, :attr:`loop_count`, :attr:`single` and :attr:`content_step` in one read
        of the table by a compiled loop (:func:`~ltlagent.decode.triewalk.compiled_passes`: 30 µs
        where numpy's passes took 0.19 ms for a median schema's 380 states), or None without it."""
        passes = compiled_passes() if COMPILED_PASSES else None
        t = self.trans
        if passes is None or t.dtype != np.int32 or not t.flags.c_contiguous:  # (its one signature)
            return None
        n = t.shape[0]
        out = (np.empty((n, 4), dtype=np.uint64), np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64),
               np.empty(n, dtype=np.int64))
        passes(t, self.dead, *out)
        return out

    @functools.cached_property
    def loops(self) -> np.ndarray:
        """Per state, the bytes that lead back to it, a 256-bit set (``uint64 [n + 1, 4]``,
        :func:`ltlagent.decode.trie.byte_bits`): a first visit does not walk a trie subtree whose
        bytes all loop (a string's characters), every token below ends where the subtree starts.
        One pass over the table, like :meth:`of_table`'s, shared by the indexes of every vocabulary."""
        if self._passes is not None:
            return self._passes[0]
        return byte_bits(self.trans == np.arange(self.trans.shape[0], dtype=np.int32)[:, None])

    @functools.cached_property
    def content_step(self) -> np.ndarray:
        """Per state, where every printable ASCII byte of JSON-string content leads
        (:data:`CONTENT_ASCII`) if they all lead there and every control byte (< 0x20) leads to
        ``dead``, else -1: the ASCII half of a content chain's row check
        (:meth:`~ltlagent.decode.chat.TurnIndex._steps`). One pass over the table, shared by the
        indexes of every vocabulary."""
        if self._passes is not None:
            return self._passes[3]
        t = self.trans
        to = t[:, 0x61]
        same = t[:, 0x20:0x80] == to[:, None]
        same[:, [0x22 - 0x20, 0x5C - 0x20]] = True
        ok = same.all(axis=1) & (t[:, :0x20] == self.dead).all(axis=1)
        return np.where(ok, to, -1).astype(np.int64)

    @functools.cached_property
    def single(self) -> np.ndarray:
        """Per state, its only live byte where exactly one byte does not lead to ``dead`` (a
        key's, a literal's next byte), else -1: a first visit follows such states down the trie
        one node at a time (:meth:`~ltlagent.decode.chat.TurnIndex._walk`). One pass over the
        table, shared by the indexes of every vocabulary."""
        if self._passes is not None:
            return self._passes[2]
        src, lo, n, dst = self.runs
        live = dst != self.dead
        count = np.bincount(src[live], weights=n[live], minlength=self.dead + 1)
        byte = np.full(self.dead + 1, -1, dtype=np.int64)
        byte[src[live]] = lo[live]  # read where a state has one live byte: its only live run's
        return np.where(count == 1, byte, -1)

    @functools.cached_property
    def loop_count(self) -> np.ndarray:
        """Per state, how many bytes lead back to it (the bits of :attr:`loops`, counted from
        :attr:`runs`; the dead row loops on every byte)."""
        if self._passes is not None:
            return self._passes[1]
        src, _lo, n, dst = self.runs
        own = src == dst
        count = np.bincount(src[own], weights=n[own], minlength=self.dead + 1).astype(np.int64)
        count[self.dead] = 256
        return count

    @property
    def initial(self) -> int:
        return 0

    def in_call(self, s: int) -> bool:
        return s >= min(x for x in (*self.call_start, self.dead) if x >= 0)

    @staticmethod
    def of_table(table: Block, format: str = "json") -> TurnLanguage:
        """A turn that is exactly one text of ``table`` and nothing else (a JSON document such as a
        tool's arguments or a response format; :func:`ltlagent.text.jsonschema.schema_block`). A
        table kept as its parts is written here, into this array, once
        (:meth:`~ltlagent.text.glue.Nested.write`): not made flat first and then copied."""
        n = table.num_states
        trans = np.empty((n + 1, 256), dtype=np.int32)
        trans[n] = n
        rows = trans[:n].view(np.uint32)
        # dead (-1) becomes n in one pass without a temporary: as unsigned, -1 is the largest
        if isinstance(table, Nested):
            table.write(trans[:n])
            np.minimum(rows, n, out=rows)
        else:
            np.minimum(table.trans.view(np.uint32), n, out=rows)
        acc = np.zeros(n + 1, dtype=bool)
        acc[:n] = table.accepting
        return TurnLanguage(trans, acc, (0, -1), TurnRule(False, frozenset(), frozenset()), format,
                            table.periods)

    @staticmethod
    def build(rule: TurnRule, schemas: Mapping[str, Mapping[str, object]], format: str = "hermes",
              fields: Mapping[str, Mapping[str, str]] | None = None, *,
              utf8: bool = True, budget: int = MAX_VALUE_STATES) -> TurnLanguage:
        """The DFA of one turn under ``rule``; ``schemas`` maps every tool to its argument schema,
        ``fields`` narrows string arguments by regex (``(:args …)``), ``rule.values`` restricts
        bound arguments to the values the policy allows (:func:`value_call_table`, each
        restriction within ``budget`` states or left to the schema). With ``utf8`` (the default)
        the text must stay valid UTF-8: a byte no UTF-8 text can have next (a lone continuation
        byte, an overlong form, a surrogate) is refused, and the turn cannot end or begin a call
        inside a character (as ``build_index(utf8=True)`` does for spec monitors)."""
        if format not in FORMATS:
            raise ValueError(f"unknown tool-call format {format!r}")
        if rule.after_call and (rule.text or rule.tools_after_text):
            raise ValueError("a turn after a call has no text: after_call needs text=False and no "
                             "tools_after_text")
        marker = CALL_MARKERS[format].encode()
        m = len(marker)
        calls: list[ByteTable | None] = []
        unenforced: dict[tuple[str, str, str], None] = {}
        for phase, tools in enumerate((rule.tools_first, rule.tools_after_text)):
            chosen = {t: schemas[t] for t in sorted(tools) if t in schemas}
            narrowed = {t: dict(f) for t, f in (fields or {}).items() if t in chosen}
            for tool, pairs in (rule.narrow[phase] if phase < len(rule.narrow) else ()):
                if tool in chosen and pairs:
                    narrowed.setdefault(tool, {}).update(dict(pairs))
            values = rule.values[phase] if phase < len(rule.values) else ()
            table: ByteTable | None = None
            if chosen:
                table, left = value_call_table(chosen, format, narrowed, values, budget=budget)
                unenforced.update(dict.fromkeys(left))
            calls.append(table if table is not None and not table.empty else None)
        n_mid = UTF8_BAD - 1 if utf8 else 0  # UTF-8 states inside a character
        n_text = 2 * m + 2 * n_mid
        starts: list[int] = []
        n = n_text
        for c in calls:
            starts.append(n if c is not None else -1)
            n += c.num_states if c is not None else 0
        dead = n
        trans = np.full((n + 1, 256), dead, dtype=np.int32)
        acc = np.zeros(n + 1, dtype=bool)
        for c, base in zip(calls, starts):
            if c is None:
                continue
            trans[base:base + c.num_states] = np.where(c.trans >= 0, c.trans + base, dead)
            acc[base:base + c.num_states] = c.accepting
        fail = _kmp(marker)
        ws = np.zeros(256, dtype=bool)
        ws[[ord(c) for c in BLANK]] = True

        def text(seen: int, k: int, u: int) -> int:
            """The text state: ``k`` marker bytes pending, UTF-8 state ``u`` (0 when ``k`` > 0)."""
            return seen * m + k if u == 0 else 2 * m + seen * n_mid + u - 1

        for seen in (0, 1):
            call = calls[seen]
            enter = _feed(call, marker) if call is not None else -1
            enter_state = starts[seen] + enter if enter >= 0 else dead
            for u in range(1, n_mid + 1):  # inside a character: only its continuation bytes
                s = text(seen, 0, u)
                for b in range(256):
                    u2 = UTF8[u][b]
                    if u2 != UTF8_BAD and rule.text:
                        trans[s, b] = text(1, 0, u2)
            for k in range(m):
                s = text(seen, k, 0)
                # the turn may end in the text phase once there is text (pending bytes are text);
                # after a call, before any byte of the next one (blank bytes are no text) if ``end``
                acc[s] = (rule.text and bool(seen or k > 0)) or \
                    (rule.after_call and rule.end and not seen and k == 0)
                for b in range(256):
                    if b == marker[k] and not (format == "json" and seen):
                        if k + 1 == m:
                            trans[s, b] = enter_state  # the call begins
                        else:
                            trans[s, b] = s + 1  # pending: these bytes may begin a call
                        continue
                    # a mismatch: the pending bytes (all non-blank) and maybe b become text
                    now_seen = bool(seen or k > 0 or not ws[b])
                    if now_seen and not rule.text:
                        continue  # text is not allowed now: dead
                    j = k
                    while j > 0 and marker[j] != b:
                        j = fail[j - 1]
                    j = j + 1 if format != "json" and marker[j] == b else 0
                    u2 = UTF8[0][b] if utf8 and j == 0 else 0  # b is text (the marker is ASCII)
                    if u2 != UTF8_BAD:
                        trans[s, b] = text(int(now_seen), j, u2)
        periods = tuple((a + base, b + base, k) for c, base in zip(calls, starts) if c is not None
                        for a, b, k in c.periods)
        return TurnLanguage(trans, acc, (starts[0], starts[1]), rule, format, periods,
                            tuple(unenforced))


class _Unenforced(Exception):
    """A bound argument whose values are not restricted token by token (the reason)."""


@dataclass(frozen=True)
class _Block:
    """A bound argument's restricted texts: the whole value, or (``items``) each item of a list."""

    table: ByteTable
    items: bool


def _scalar(t: JsonType) -> bool:
    """Whether every value of ``t`` is a string, number, boolean or null (binds itself)."""
    if isinstance(t, JsonString | JsonInteger | JsonNumber):
        return True
    if isinstance(t, JsonConst):
        return not any(x.startswith(("[", "{")) for x in t.texts)
    if isinstance(t, JsonUnion):
        return all(_scalar(b) for b in t.branches)
    return False


def _value_block(args: JsonType, key: str, term: ValueTerm, budget: int, limit: int) -> _Block | None:
    """The restricted texts of the argument at ``key`` (``a.b``: property ``b`` of object ``a``);
    None when the schema never writes that key (it then binds nothing). :class:`_Unenforced` for a
    shape not enforced by value (an object value, a list of lists or objects, a union with a list,
    a key the schema lets through as an undeclared property), ``ValueBudgetExceeded`` beyond
    ``budget``."""
    node = args
    parts = key.split(".")
    for i, part in enumerate(parts):
        if not isinstance(node, JsonObject):
            raise _Unenforced(f"{'.'.join(parts[:i]) or 'the arguments'} may be other than an object")
        prop = next((p for p in node.properties if p.name == part), None)
        if prop is None:
            if extra_keys(node):
                raise _Unenforced(f"{part!r} may be written as an undeclared property")
            return None
        node = prop.schema
    if isinstance(node, JsonArray):
        if not _scalar(node.items):
            raise _Unenforced("a list whose items may be lists or objects")
        return _Block(restrict_field(description_table(node.items, limit), term, budget=budget), True)
    if not _scalar(node):
        raise _Unenforced("a value that may be a list or an object")
    return _Block(restrict_field(description_table(node, limit), term, budget=budget), False)


class _ValueEmitter(_Emitter):
    """Writes a tool's arguments with the bound keys' blocks in place of their schemas: the objects
    on the way to a bound key inline (their other members as usual), a bound list's items as the
    restricted item block."""

    def __init__(self, glue: Glue, limit: int, blocks: Mapping[str, _Block]) -> None:
        super().__init__(glue, limit)
        self.blocks = {tuple(k.split(".")): b for k, b in blocks.items()}
        self.path: tuple[str, ...] = ()
        self.items: tuple[JsonType, ByteTable] | None = None

    def _below(self, path: tuple[str, ...]) -> bool:
        return any(len(k) > len(path) and k[:len(path)] == path for k in self.blocks)

    def value(self, t: JsonType, start: int, end: int) -> None:
        if self.items is not None and t is self.items[0]:
            self.part(self.items[1], start, end)
        elif isinstance(t, JsonObject) and self._below(self.path):
            self.object(t, start, end)
        else:
            super().value(t, start, end)

    def member(self, p: JsonProperty, start: int, end: int) -> None:
        path = (*self.path, p.name)
        block = self.blocks.get(path)
        if block is None and not self._below(path):
            super().member(p, start, end)
            return
        nfa = self.nfa
        k, c = nfa.new(), nfa.new()
        self.const(p.name, start, k)
        nfa.literal(b":", k, c)
        at = self.ws(c)
        if block is None:  # an object on the way to a bound key
            self.path = path
            self.value(p.schema, at, end)
            self.path = path[:-1]
        elif block.items and isinstance(p.schema, JsonArray):
            self.items = (p.schema.items, block.table)
            self.array(p.schema, at, end)
            self.items = None
        else:
            self.part(block.table, at, end)


def value_call_table(tools: Mapping[str, Mapping[str, object]], format: str,
                     fields: Mapping[str, Mapping[str, str]] | None, values: ValueRules = (), *,
                     limit: int = MAX_JSON_STATES, budget: int = MAX_VALUE_STATES
                     ) -> tuple[ByteTable, tuple[tuple[str, str, str], ...]]:
    """:func:`ltlagent.text.toolcall.call_table` with bound arguments restricted to the values
    ``values`` allows (per tool, key → term; :func:`ltlagent.text.values.restrict_field`, so the
    schema still holds), and the (tool, key, why) of those left to their schema: over ``budget``,
    or a shape not enforced by value. Built once per (tools, format, narrowing, terms)."""
    terms = tuple((t, pairs) for t, pairs in values if t in tools and pairs)
    if not terms:
        return call_table(tools, format, fields, limit=limit), ()
    parsed: list[tuple[str, JsonType]] = []
    for name, schema in tools.items():
        t = parse_schema(schema)
        if fields and name in fields:
            t = narrow(t, fields[name])
        parsed.append((name, t))
    return _value_call_table(tuple(parsed), format, terms, limit, budget)


@functools.lru_cache(maxsize=16)
def _value_call_table(tools: tuple[tuple[str, JsonType], ...], format: str, terms: ValueRules,
                      limit: int, budget: int) -> tuple[ByteTable, tuple[tuple[str, str, str], ...]]:
    """The call table of parsed tools, bound arguments restricted (a pure function of frozen
    descriptions and terms, hence cached: equal terms share a table)."""
    left: list[tuple[str, str, str]] = []
    blocks: dict[str, dict[str, _Block]] = {}
    schema_of = dict(tools)
    for name, pairs in terms:
        got = blocks.setdefault(name, {})
        for key, term in pairs:
            try:
                block = _value_block(schema_of[name], key, term, budget, limit)
            except (_Unenforced, ValueBudgetExceeded) as e:
                left.append((name, key, str(e)))
                continue
            if block is not None:
                got[key] = block
    while True:
        try:
            return _glued(tools, format, blocks, limit), tuple(left)
        except UsageError:  # the whole call table over ``limit``: drop the largest block, retry
            sized = [(b.table.num_states, name, key) for name, got in blocks.items()
                     for key, b in got.items()]
            if not sized:
                raise
            _, name, key = max(sized)
            del blocks[name][key]
            left.append((name, key, f"the call table would exceed {limit:,} states"))


def _glued(tools: tuple[tuple[str, JsonType], ...], format: str, blocks: Mapping[str, Mapping[str, _Block]],
           limit: int) -> ByteTable:
    """The call table of ``tools`` with ``blocks`` in place of their bound arguments' schemas."""
    glue = Glue()

    def arguments(name: str, t: JsonType, at: int, to: int) -> None:
        if blocks.get(name):  # the arguments as one block, as jsonschema builds an object's
            inner = Glue()
            s0, s1 = inner.new(), inner.new()
            _ValueEmitter(inner, limit, blocks[name]).value(t, s0, s1)
            glue.table(inner.determinize(s0, s1, limit, f"the arguments of {name}, values restricted",
                                         "a simpler argument schema"), at, to)
        else:
            emit(glue, t, at, to, limit)

    names = ", ".join(name for name, _t in tools)
    table = glue_calls(glue, tools, format, arguments, limit,
                       f"the {format} tool calls of {names}, values restricted")
    return ByteTable(table.trans, table.accepting, f"{format} calls: {names} (values restricted)",
                     table.periods)


def _feed(table: ByteTable, data: bytes) -> int:
    """The state of ``table`` after ``data`` from its start (-1 once dead)."""
    s = 0
    for b in data:
        s = int(table.trans[s, b])
        if s < 0:
            return -1
    return s


def _kmp(p: bytes) -> list[int]:
    """The failure function: longest proper border of ``p[:i+1]``."""
    f = [0] * len(p)
    k = 0
    for i in range(1, len(p)):
        while k and p[i] != p[k]:
            k = f[k - 1]
        if p[i] == p[k]:
            k += 1
        f[i] = k
    return f


#: The ASCII bytes a JSON string holds as themselves: printable, DEL, not ``"`` nor ``\\``.
CONTENT_ASCII = np.array([b for b in range(0x20, 0x80) if b not in (0x22, 0x5C)], dtype=np.int64)
CONTENT_ASCII.flags.writeable = False


@dataclass(frozen=True)
class Period:
    """States ``a … b-1`` of a turn language whose rows repeat with period ``k``, checked: for ``s``
    in ``a … b-k-1`` the row of ``s + k`` is that of ``s`` with targets inside the range moved by
    ``k`` and the others kept (a string's character count: the same template states at the next
    count). ``jump``/``back``: the furthest one byte moves forward/backward inside the range;
    ``entry``: the highest state of the range entered from outside (``a - 1``: none).

    Then a token of at most ``n`` bytes from ``s`` ends where it ends from ``s - d`` (``d`` a
    multiple of ``k``), moved by ``d`` when that end is in ``threshold(n) … b-1``, for every ``n``
    up to :meth:`longest` (paths from ``s - d`` stay at or above the threshold and below
    ``b - d``; paths that leave the range and come back end below the threshold, as they do from
    ``s``)."""

    a: int
    b: int
    k: int
    jump: int
    back: int
    entry: int

    def threshold(self, n: int) -> int:
        return self.entry + n * self.jump + 1

    def longest(self, s: int, base: int) -> int:
        """The longest token (bytes) whose end from ``s`` follows from its end from ``base``."""
        if not (self.a <= base < s < self.b) or (s - base) % self.k:
            return 0
        return max(0, min((base - self.entry - 1) // (self.back + self.jump), (self.b - s - 1) // self.jump))

    @staticmethod
    def check(lang: TurnLanguage, a: int, b: int, k: int, src: np.ndarray, dst: np.ndarray,
              entry: int | None = None) -> Period | None:
        """The period ``(a, b, k)`` of ``lang`` if its rows do repeat (None otherwise); ``src``/``dst``
        are the language's edges, sources ascending (:func:`ltlagent.text.bytetable.row_edges`);
        ``entry``: the highest state of the range entered from outside, when the caller found it
        (:attr:`TurnLanguage.checked_periods`, all periods in one pass)."""
        if not (0 <= a and a + 2 * k <= b <= lang.dead and k > 0):
            return None
        r1, r2 = lang.trans[a:b - k], lang.trans[a + k:b]
        inside = (r1 >= a) & (r1 < b)
        if not np.where(inside, r2 == r1 + k, r2 == r1).all():
            return None
        lo, hi = np.searchsorted(src, [a, b])  # the edges out of the range
        s_in, d_in = src[lo:hi], dst[lo:hi]
        inner = (d_in >= a) & (d_in < b)
        step = d_in[inner] - s_in[inner]
        if entry is None:
            into = (dst >= a) & (dst < b) & ~((src >= a) & (src < b))
            entry = int(dst[into].max()) if into.any() else a - 1
        return Period(a, b, k, max(1, int(step.max(initial=0))), max(0, int((-step).max(initial=0))), entry)
