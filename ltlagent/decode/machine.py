"""The monitor's byte machine: what generated text may look like, one byte at a time (docs/design.md §5).

A machine state combines everything the monitor tracks between two bytes:

``(mode, q, cur, node, content, stop, pre, sep)``

* ``mode``: ``FREE`` (the model writes the content of state ``cur``), ``END`` (the text of ``cur``
  ended, or nothing was written yet: only an allowed prompt string may follow), ``ENV`` (an
  ``:env-input`` state was entered: the environment writes next), ``DONE``;
* ``q``: the automaton state; ``cur``: the current spec state (-1 before the first);
* ``node``: the keyword lexer's DFA node — the same lexer validation uses, never reset
  artificially, so the monitor's trace is always what the lexer reads from the whole text;
* ``content``: the state of ``cur``'s content DFA (``:choices``/``:regex``), fed with the bytes the
  lexer releases from its pending keyword prefix; ``stop``: the node of ``cur``'s ``:stop`` matcher;
* ``pre``, ``sep`` (END only): how many pending bytes were written before the text ended (they may
  still turn out to be content), and whether the one allowed whitespace separator was used
  (``SEP_NEWLINE``: not yet, and it must be a newline, written next). In FREE mode ``sep`` is 1 when
  the last byte written was a newline (tracked only with ``SpecTables.newline``).

With ``newline`` (the runner's default), a text that ends (EOS, ``:stop``, ``:max-tokens``, or
environment text) without a newline is followed by one before the next prompt string, so every
prompt string begins a line. It is switched off for specs whose prompt strings contain a newline
(the separator could change what the lexer reads) and for tokenizers without a ``"\n"`` token.

Bytes that behave the same everywhere form a class; rows are computed per class, lazily, for the
states actually reached, and cached in a numpy table (``T[state, byte]``) for vectorised walks
over the vocabulary. ``need(state)`` is the fewest bytes to a complete trace (0-1 BFS over class
representatives that are single-byte tokens, so a token-level path of at most that many tokens
exists); it prunes dead ends and drives the budget.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

import numpy as np

from ltlagent.errors import UsageError
from ltlagent.logic.compiled import CompiledSpec
from ltlagent.text.content import WHITESPACE, ContentDFA, content_dfa
from ltlagent.text.lexer import ROOT, Lexer, build_lexer

__all__ = ["FREE", "END", "ENV", "DONE", "INF", "UTF8", "UTF8_BAD", "Key", "EventKind", "ByteEvent",
           "encode_event", "decode_event", "SpecTables", "Machine", "build_tables", "SEP_NEWLINE",
           "boundary_strings"]

FREE, END, ENV, DONE = 0, 1, 2, 3
INF = 1 << 30
#: END ``sep`` value: the text ended without a newline; a newline separator must be written next.
SEP_NEWLINE = 2
NL = 0x0A


class Key(NamedTuple):
    """A machine state (the module docstring says what each field means). A named tuple: hashed and
    compared as fast as a plain tuple, read by name everywhere outside this module."""

    mode: int
    q: int
    cur: int
    node: int
    content: int
    stop: int
    pre: int
    sep: int
    #: UTF-8 (with ``SpecTables.utf8``): bytes still owed by the character the model is writing
    #: (:data:`UTF8` state; 0 between characters)
    u: int = 0


#: UTF-8 as a byte DFA: ``UTF8[u][b]`` is the state after byte ``b`` in state ``u`` (``UTF8_BAD``:
#: not valid UTF-8 there). 0: between characters; 1–3: that many continuation bytes (80–BF) owed;
#: 4: after E0 (A0–BF next, then one more); 5: after ED (80–9F, then one); 6: after F0 (90–BF, then
#: two); 7: after F4 (80–8F, then two). Overlong forms, surrogates and code points past U+10FFFF
#: are rejected, as Python's and the peers' decoders do.
UTF8_BAD = 8


def _utf8_table() -> tuple[tuple[int, ...], ...]:
    rows = []
    for u in range(UTF8_BAD + 1):
        row = []
        for b in range(256):
            nxt = UTF8_BAD
            if u == 0:
                if b < 0x80:
                    nxt = 0
                elif 0xC2 <= b <= 0xDF:
                    nxt = 1
                elif b == 0xE0:
                    nxt = 4
                elif b == 0xED:
                    nxt = 5
                elif 0xE1 <= b <= 0xEF:
                    nxt = 2
                elif b == 0xF0:
                    nxt = 6
                elif 0xF1 <= b <= 0xF3:
                    nxt = 3
                elif b == 0xF4:
                    nxt = 7
            elif u in (1, 2, 3):
                nxt = u - 1 if 0x80 <= b <= 0xBF else UTF8_BAD
            elif u == 4:
                nxt = 1 if 0xA0 <= b <= 0xBF else UTF8_BAD
            elif u == 5:
                nxt = 1 if 0x80 <= b <= 0x9F else UTF8_BAD
            elif u == 6:
                nxt = 2 if 0x90 <= b <= 0xBF else UTF8_BAD
            elif u == 7:
                nxt = 2 if 0x80 <= b <= 0x8F else UTF8_BAD
            row.append(nxt)
        rows.append(tuple(row))
    return tuple(rows)


UTF8 = _utf8_table()


class EventKind(IntEnum):
    """What happened on a byte."""

    NONE = 0
    ENTER = 1  # state ``arg`` was entered (``forced``: its prompt string was written after the text ended)
    STOP = 2  # the text ended at one of the state's ``:stop`` strings
    BOUNDARY = 3  # the text ended at example boundary ``arg`` (a context label starting a line)


class ByteEvent(NamedTuple):
    """An event, decoded (:func:`decode_event`)."""

    kind: EventKind
    arg: int = 0
    forced: bool = False


def encode_event(ev: ByteEvent) -> int:
    """The int a machine row stores for ``ev``: 0 nothing, ``1 + 2k`` (``+1`` forced) state k entered,
    -1 a ``:stop`` string, ``-2 - j`` boundary j. A positive code is exactly "a state is entered",
    which the vectorised walks test on whole arrays (``Machine.E``)."""
    if ev.kind == EventKind.ENTER:
        return 1 + 2 * ev.arg + int(ev.forced)
    if ev.kind == EventKind.STOP:
        return -1
    if ev.kind == EventKind.BOUNDARY:
        return -2 - ev.arg
    return 0


def decode_event(code: int) -> ByteEvent:
    """The event coded by ``code`` (:func:`encode_event`)."""
    if code > 0:
        return ByteEvent(EventKind.ENTER, (code - 1) // 2, (code - 1) % 2 == 1)
    if code == -1:
        return ByteEvent(EventKind.STOP)
    if code < -1:
        return ByteEvent(EventKind.BOUNDARY, -2 - code)
    return ByteEvent(EventKind.NONE)


@dataclass(frozen=True, eq=False)
class SpecTables:
    """The spec in the flat form the byte machine steps through (no vocabulary yet)."""

    names: tuple[str, ...]
    delta: tuple[tuple[int, ...], ...]  # only transitions into live states; -1 otherwise
    accepting: frozenset[int]
    initial: int
    infinite: bool
    env: tuple[bool, ...]
    content: tuple[ContentDFA | None, ...]
    stops: tuple[Lexer | None, ...]
    max_tokens: tuple[int | None, ...]
    lexer: Lexer
    kw_len: tuple[int, ...]
    node_bytes: tuple[bytes, ...]
    cls_of: tuple[int, ...]  # byte → class
    reps: tuple[int, ...]  # class → representative byte (-1: no single-byte token in the class)
    newline: bool = False  # a newline separator before a prompt string that follows an ended text
    #: example boundaries (``b"\\nQuestion:"``…): matched after a state's own ``:stop`` strings by the
    #: same stop matcher, in every model-written state; ``own_stops[k]`` is how many are state k's own
    boundaries: tuple[bytes, ...] = ()
    own_stops: tuple[int, ...] = ()
    #: the model's text must stay valid UTF-8 (a token that breaks it is forbidden, as in grammars
    #: over characters); off: any bytes, the model decides
    utf8: bool = False


def _newline_possible(lexer: Lexer, single_bytes: set[int] | frozenset[int]) -> bool:
    """The newline separator cannot change what the lexer reads: no prompt string contains a
    newline, and ``"\\n"`` is a token by itself."""
    return NL in single_bytes and not any(b"\n" in kb for kb in lexer.keyword_bytes)


def boundary_strings(compiled: CompiledSpec, labels: Sequence[str]) -> tuple[bytes, ...]:
    """The example boundaries for context ``labels``: ``"\\n<label>:"``, leaving out a label whose
    string overlaps a prompt string of the spec (the lexer reads those; a spec with a ``Question``
    state keeps its own meaning)."""
    kws = compiled.lexer.keyword_bytes
    out: list[bytes] = []
    for label in labels:
        lb = label.strip().rstrip(":").strip().encode("utf-8") + b":"
        if len(lb) < 2 or any(lb in k or k in lb for k in kws):
            continue
        b = b"\n" + lb
        if b not in out:
            out.append(b)
    return tuple(out)


#: Stands for "the text begins here" in stop matchers (U+FFFF, a noncharacter no text needs).
_TEXT_START = "\uffff"


def _after_text(stop: Lexer) -> Lexer:
    """``stop`` with a new start node that waits for the first byte that is not whitespace: a
    ``:stop`` string ends a state's text only once the text has begun, so ``Action Input:``
    followed by a newline and then the input is not an empty step; an example boundary also
    matches at the start of the text (its ``_TEXT_START`` variant: the waiting node continues from
    behind the sentinel). Node 0 is the waiting node (states are entered at node 0); the old nodes
    move up by one."""
    goto = [tuple(v + 1 for v in row) for row in stop.goto]
    start = ROOT
    for b in _TEXT_START.encode("utf-8"):
        if stop.depth[stop.goto[start][b]] != stop.depth[start] + 1:
            start = ROOT  # no boundaries in this matcher
            break
        start = stop.goto[start][b]
    wait = tuple(0 if b in WHITESPACE else goto[start][b] for b in range(256))
    return Lexer(stop.keywords, (wait, *goto), (-1, *stop.emit), (0, *stop.depth))


def build_tables(compiled: CompiledSpec, tool_names: Sequence[str] | None,
                 single_bytes: set[int] | frozenset[int], newline: bool = False,
                 boundaries: Sequence[bytes] = (), utf8: bool = False) -> SpecTables:
    """Flatten ``compiled`` for the machine; ``single_bytes``: bytes that are a token by themselves.
    ``newline``: separate an ended text from the next prompt string by a newline (where possible).
    ``boundaries``: strings that end any model-written state's text as EOS would (the model began a
    new example: see :func:`boundary_strings`). ``utf8``: the model's text must stay valid UTF-8."""
    spec, aut, lexer = compiled.spec, compiled.automaton, compiled.lexer
    delta = aut.live_delta
    content: list[ContentDFA | None] = []
    for st in spec.states:
        if st.tool_choices:
            if not tool_names:
                raise UsageError(f"state {st.name} takes its choices from the agent's tools "
                                 "(:choices :tools): pass tool_names")
            content.append(content_dfa(tool_names, st.regex))
        else:  # the same conjunction as validation (content_dfa)
            content.append(content_dfa(st.choices, st.regex))
    # each boundary twice: after a newline, and at the start of the text (behind a sentinel that the
    # waiting node of _after_text stands for)
    bstrs = [b.decode("utf-8") for b in boundaries]
    bstrs += [_TEXT_START + b.decode("utf-8")[1:] for b in boundaries]
    stops = tuple(_after_text(build_lexer([*st.stop, *([] if st.env_input else bstrs)]))
                  if st.stop or (bstrs and not st.env_input) else None for st in spec.states)
    own_stops = tuple(len(st.stop) for st in spec.states)
    node_bytes = tuple(lexer.pending(n) for n in range(lexer.num_nodes))
    newline = newline and _newline_possible(lexer, single_bytes)
    # byte classes: same lexer column, same column in every content DFA and stop matcher, same
    # whitespace-ness
    sig: dict[tuple[object, ...], int] = {}
    cls_of: list[int] = []
    members: list[list[int]] = []
    for b in range(256):
        parts: list[object] = [b in WHITESPACE, newline and b == NL, tuple(row[b] for row in lexer.goto),
                               tuple(row[b] for row in UTF8) if utf8 else ()]
        for d in content:
            if d is not None:
                parts.append(tuple(row[b] for row in d.trans))
        for s in stops:
            if s is not None:
                parts.append(tuple(row[b] for row in s.goto))
        key = tuple(parts)
        c = sig.get(key)
        if c is None:
            c = sig[key] = len(members)
            members.append([])
        cls_of.append(c)
        members[c].append(b)
    reps = []
    for mem in members:
        ok = [b for b in mem if b in single_bytes]
        pref = [b for b in ok if 0x20 <= b < 0x7F or b == 0x0A]
        reps.append((pref or ok or [-1])[0])
    return SpecTables(spec.names, delta, frozenset(aut.accepting), aut.initial, aut.infinite,
                      tuple(st.env_input for st in spec.states), tuple(content), stops,
                      tuple(st.max_tokens for st in spec.states), lexer,
                      tuple(len(k) for k in lexer.keyword_bytes), node_bytes, tuple(cls_of), tuple(reps),
                      newline, tuple(boundaries), own_stops, utf8)


class Machine:
    """Interned machine states with lazily computed rows and distances.

    The only mutable part of a compiled index: a memo that grows as new states are reached
    (deterministically, so sharing it between sequences is safe).
    """

    def __init__(self, t: SpecTables) -> None:
        self.t = t
        self.keys: list[Key] = []
        self.ids: dict[Key, int] = {}
        self.rows: list[list[tuple[int, int]] | None] = []
        self.T = np.full((256, 256), -1, dtype=np.int32)
        self.E = np.zeros((256, 256), dtype=np.int8)  # 1 where the byte enters a state
        self.ready = np.zeros(256, dtype=bool)
        self._need: dict[int, int] = {}
        self._need_steps: dict[int, int] = {}
        self._next: dict[int, frozenset[int]] = {}
        self._eos: dict[tuple[int, bool], tuple[int, str]] = {}
        self._paths: dict[int, bytes] = {}
        self._viable_memo: dict[tuple[int, int, int], bool] = {}
        self._lex: dict[tuple[int, int], tuple[int, int, int, bytes]] = {}
        self._cls = np.asarray(t.cls_of, dtype=np.int64)
        self._cls_bytes = [t.reps[c] if t.reps[c] >= 0 else t.cls_of.index(c) for c in range(len(t.reps))]
        self.start = self.intern(Key(END, t.initial, -1, ROOT, 0, 0, 0, 0))

    # -- states
    def intern(self, key: Key) -> int:
        sid = self.ids.get(key)
        if sid is None:
            sid = self.ids[key] = len(self.keys)
            self.keys.append(key)
            self.rows.append(None)
            if sid >= self.T.shape[0]:
                self.reserve(self.T.shape[0] * 2)
        return sid

    def reserve(self, n: int) -> None:
        """Room in the transition tables for ``n`` states (growing them copies both: milliseconds
        at a few thousand states, better paid at build time than mid-decoding)."""
        if n <= self.T.shape[0]:
            return
        T = np.full((n, 256), -1, dtype=np.int32)
        T[: self.T.shape[0]] = self.T
        E = np.zeros((n, 256), dtype=np.int8)
        E[: self.E.shape[0]] = self.E
        ready = np.zeros(n, dtype=bool)
        ready[: self.ready.shape[0]] = self.ready
        self.T, self.E, self.ready = T, E, ready

    def mode(self, sid: int) -> int:
        return self.keys[sid].mode

    def done_state(self) -> int:
        """A DONE state: the trace is over (EOS, or a cursor that must end; every DONE state has
        the same mask)."""
        return self.intern(Key(DONE, 0, -1, ROOT, 0, 0, 0, 0))

    def complete(self, sid: int) -> bool:
        """A trace ending here is accepted (content, pending bytes included, valid)."""
        mode, q, cur, node, c, _sn, pre, _sep, u = self.keys[sid]
        t = self.t
        if mode == DONE:
            return True
        if u or t.infinite or mode not in (FREE, END) or cur < 0 or q not in t.accepting:
            return False
        if mode == END and pre < t.lexer.depth[node]:
            return False  # a prompt-string prefix written after the text ended is not content
        d = t.content[cur]
        if d is None:
            return True
        c2 = d.feed(c, t.node_bytes[node])
        return c2 >= 0 and c2 in d.accepting

    # -- one byte
    def _enter(self, q: int, cur: int, c: int, k: int, forced: bool) -> tuple[Key | None, int]:
        t = self.t
        q2 = t.delta[q][k]
        if q2 < 0:
            return None, 0
        if cur >= 0:
            d = t.content[cur]
            if d is not None and c not in d.accepting:
                return None, 0
        ev = encode_event(ByteEvent(EventKind.ENTER, k, forced))
        return Key(ENV if t.env[k] else FREE, q2, k, ROOT, 0, 0, 0, 0), ev

    def _lex_step(self, node: int, b: int) -> tuple[int, int, int, bytes]:
        """The keyword lexer on byte ``b`` at ``node``: (prompt string recognised or -1, how many
        bytes leave the pending window, the next node, those bytes). Memoised per (node, byte)."""
        hit = self._lex.get((node, b))
        if hit is None:
            t = self.t
            lx = t.lexer
            nxt = lx.goto[node][b]
            k = lx.emit[nxt]
            d = lx.depth[node]
            if k >= 0:
                nflush, node2 = d + 1 - t.kw_len[k], ROOT
            else:
                nflush, node2 = d + 1 - lx.depth[nxt], nxt
            fl = (t.node_bytes[node] + bytes((b,)))[:nflush] if nflush > 0 else b""
            hit = self._lex[(node, b)] = (k, nflush, node2, fl)
        return hit

    def _step_key(self, key: Key, b: int) -> tuple[Key | None, int]:
        mode, q, cur, node, c, sn, pre, sep, u = key
        if mode >= ENV:
            return None, 0
        t = self.t
        if t.utf8:
            u = UTF8[u][b]
            if u == UTF8_BAD:
                return None, 0
        k, nflush, node2, fl = self._lex_step(node, b)
        cd = t.content[cur] if cur >= 0 else None
        if mode == FREE:
            if cd is not None:
                if fl:
                    c = cd.feed(c, fl)
                    if c < 0:
                        return None, 0
                if k < 0 and not self._viable(cur, c, node2):
                    return None, 0
            if k >= 0:
                return self._enter(q, cur, c, k, False)
            stop = t.stops[cur]
            if stop is not None:
                sn = stop.goto[sn][b]
                hit = stop.emit[sn]
                if hit >= 0:
                    if cd is not None and not self._can_close(cd, c, node2):
                        return None, 0
                    j = hit - t.own_stops[cur]
                    ev = encode_event(ByteEvent(EventKind.STOP) if j < 0 else
                                      ByteEvent(EventKind.BOUNDARY, j % len(t.boundaries)))
                    return self._end_key(q, cur, node2, c, b == NL, u), ev
            return Key(FREE, q, cur, node2, c, sn, 0, int(t.newline and b == NL), u), 0
        # END: bytes leaving the pending window must be ones written before the end, or one
        # whitespace separator (with ``newline`` always a newline; written first with SEP_NEWLINE)
        if sep == SEP_NEWLINE:
            if b != NL:
                return None, 0
            sep = 0
        if fl:
            npre = min(pre, nflush)
            post = fl[npre:]
            if post:
                if len(post) + sep > 1 or post[0] not in WHITESPACE or (t.newline and post[0] != NL):
                    return None, 0
                sep += len(post)
            if cd is not None:
                c = cd.feed(c, fl)
                if c < 0:
                    return None, 0
            pre -= npre
        if k >= 0:
            return self._enter(q, cur, c, k, True)
        return Key(END, q, cur, node2, c, 0, pre, sep, u), 0

    def _end_key(self, q: int, cur: int, node: int, c: int, last_nl: bool, u: int = 0) -> Key:
        """The END state after the text of ``cur`` ended at lexer ``node`` with content ``c``:
        with ``newline``, a newline must come next unless the text ends in one (or the content
        would not stay valid with the pending bytes and the newline added to it)."""
        t = self.t
        sep = 0
        if t.newline and not last_nl:
            d = t.content[cur] if cur >= 0 else None
            c2 = d.feed(c, t.node_bytes[node] + b"\n") if d is not None else 0
            if d is None or (c2 >= 0 and c2 in d.accepting):
                sep = SEP_NEWLINE
        return Key(END, q, cur, node, c, 0, self.t.lexer.depth[node], sep, u)

    def _viable(self, cur: int, c: int, node: int) -> bool:
        """Content ``c`` with pending bytes ``p``: either all of ``p`` becomes content, or a prompt
        string starts inside ``p`` and the content before it is complete. Prunes the product of
        content states and lexer nodes early."""
        key = (cur, c, node)
        hit = self._viable_memo.get(key)
        if hit is None:
            cd = self.t.content[cur]
            assert cd is not None
            p = self.t.node_bytes[node]
            hit = cd.feed(c, p) >= 0 or any(
                (s := cd.feed(c, p[:i])) >= 0 and s in cd.accepting for i in range(len(p)))
            self._viable_memo[key] = hit
        return hit

    def _can_close(self, cd: ContentDFA, c: int, node: int) -> bool:
        """Content ``c`` with the pending bytes of ``node`` could still be accepted (for :stop)."""
        c2 = cd.feed(c, self.t.node_bytes[node])
        return c2 >= 0 or node != ROOT

    def row(self, sid: int) -> list[tuple[int, int]]:
        """Per byte class: (next state or -1, event)."""
        r = self.rows[sid]
        if r is not None:
            return r
        key = self.keys[sid]
        out: list[tuple[int, int]] = []
        step, intern = self._step_key, self.intern
        for b in self._cls_bytes:
            k2, ev = step(key, b)
            out.append((intern(k2), ev) if k2 is not None else (-1, 0))
        self.rows[sid] = out
        cls = self._cls
        self.T[sid] = np.fromiter((s for s, _ in out), dtype=np.int32, count=len(out))[cls]
        self.E[sid] = np.fromiter((s >= 0 and ev > 0 for s, ev in out), dtype=np.int8, count=len(out))[cls]
        self.ready[sid] = True
        return out

    def ensure(self, sids: np.ndarray) -> None:
        """Compute the rows of all ``sids`` (a numpy array) not computed yet."""
        miss = ~self.ready[sids]
        if miss.any():
            for s in np.unique(sids[miss]).tolist():
                self.row(s)

    def step(self, sid: int, b: int) -> tuple[int, int]:
        return self.row(sid)[self.t.cls_of[b]]

    def feed(self, sid: int, data: bytes) -> tuple[int, list[tuple[int, int]]]:
        """Feed ``data``: (state or -1, [(event, offset after the byte), …])."""
        cls_of, rows = self.t.cls_of, self.rows
        events: list[tuple[int, int]] = []
        for i, b in enumerate(data):
            r = rows[sid]
            if r is None:  # one transition, not the whole row (1-4 ms at 128k tokens mid-decoding)
                k2, ev = self._step_key(self.keys[sid], b)
                if k2 is None:
                    return -1, events
                sid = self.intern(k2)
            else:
                sid, ev = r[cls_of[b]]
                if sid < 0:
                    return -1, events
            if ev:
                events.append((ev, i + 1))
        return sid, events

    def eos(self, sid: int, ends_text: bool) -> tuple[int, str]:
        """EOS: ("finished" into DONE) in a complete state; else ("end" into END) when EOS may end
        a state's text; else (-1, "")."""
        hit = self._eos.get((sid, ends_text))
        if hit is not None:
            return hit
        mode, q, cur = self.keys[sid][:3]
        res: tuple[int, str] = (-1, "")
        if mode in (FREE, END) and self.complete(sid):
            res = (self.intern(Key(DONE, q, cur, ROOT, 0, 0, 0, 0)), "finished")
        elif mode == FREE and ends_text and cur >= 0:
            res = (self.end_text(sid), "end")
            if res[0] == sid:
                res = (-1, "")
        self._eos[(sid, ends_text)] = res
        return res

    def end_text(self, sid: int) -> int:
        """The state after the text of the current state ends here (``sid`` if it cannot)."""
        mode, q, cur, node, c, _sn, _pre, nl, u = self.keys[sid]
        if mode != FREE:
            return sid
        e = self.intern(self._end_key(q, cur, node, c, bool(nl), u))
        if self.need(e) >= INF and self.keys[e].sep == SEP_NEWLINE:  # no separator where it cannot be
            e = self.intern(Key(END, q, cur, node, c, 0, self.t.lexer.depth[node], 0, u))
        return e if self.need(e) < INF else sid

    def after_env(self, sid: int, data: bytes) -> int:
        """Environment text ``data`` was appended in ENV state ``sid``: the model writes next."""
        mode, q, cur = self.keys[sid][:3]
        if mode != ENV:
            raise UsageError("the monitor is not waiting for environment text")
        lx = self.t.lexer
        node, events = lx.feed(ROOT, data)
        if events:
            kw = lx.keywords[events[0][0]]
            raise UsageError(f"environment text contains the prompt string {kw!r}; the lexer would "
                             "read it as a new state (escape or rephrase it)")
        e = self.intern(self._end_key(q, cur, node, 0, data.endswith(b"\n")))
        if self.need(e) >= INF:
            e = self.intern(Key(END, q, cur, node, 0, 0, lx.depth[node], 0))
        return e

    def reachable(self, ends_text: Sequence[bool], limit: int) -> list[int] | None:
        """Every state reachable from the start, byte by byte, over EOS (with each ``ends_text``)
        and over environment text that ends at a line start or mid-line (a prompt-string prefix at
        the end of environment text, rare, is left out): the states a cursor can sit in between
        two tokens. None when there are more than ``limit``."""
        seen = {self.start}
        todo = [self.start]
        while todo:
            sid = todo.pop()
            key = self.keys[sid]
            if key.mode == DONE:
                continue
            if key.mode == ENV:
                nxt = [self.intern(self._end_key(key.q, key.cur, ROOT, 0, nl)) for nl in (False, True)]
                nxt.append(self.intern(Key(END, key.q, key.cur, ROOT, 0, 0, 0, 0)))
            else:
                nxt = [w for w, _ in self.row(sid) if w >= 0]
                nxt += [e for e in (self.eos(sid, et)[0] for et in ends_text) if e >= 0]
            for w in nxt:
                if w not in seen:
                    if len(seen) >= limit:
                        return None
                    seen.add(w)
                    todo.append(w)
        return sorted(seen)

    # -- distances
    def _edges(self, sid: int) -> list[tuple[int, int, int]]:
        """(next, cost, event) over class representatives that are single-byte tokens."""
        key = self.keys[sid]
        if key.mode == ENV:
            return [(self.intern(Key(END, key.q, key.cur, ROOT, 0, 0, 0, 0)), 0, 0)]
        if key.mode == DONE:
            return []
        reps = self.t.reps
        return [(s, 1, ev) for c, (s, ev) in enumerate(self.row(sid)) if s >= 0 and reps[c] >= 0]

    def _target(self, sid: int) -> bool:
        if self.t.infinite:  # no acceptance: progress means entering the next state
            key = self.keys[sid]
            return key.mode == ENV or (key.mode == FREE and key.node == ROOT and key.content == 0
                                       and key.stop == 0)
        return self.complete(sid)

    def need(self, sid: int) -> int:
        """Fewest bytes (= worst-case tokens) from ``sid`` to a complete trace (INF: dead end).
        For infinite specs: to the next state entered."""
        v = self._need.get(sid)
        if v is not None:
            return v
        return self._dist(sid, self._need, False)

    def need_steps(self, sid: int) -> int:
        """Fewest states still to enter from ``sid`` to a complete trace (INF: dead end; the
        automaton's ``distance_to_accept`` refined by the content and pending bytes)."""
        v = self._need_steps.get(sid)
        if v is not None:
            return v
        return self._dist(sid, self._need_steps, True)

    def _dist(self, sid: int, memo: dict[int, int], steps: bool) -> int:
        """Dijkstra backwards from the targets; edge cost one per byte, or (``steps``) one per
        state entered."""
        succ: dict[int, list[tuple[int, int, int]]] = {}
        stack = [sid]
        while stack:
            u = stack.pop()
            if u in succ:
                continue
            succ[u] = [] if self._target(u) else self._edges(u)
            for w, _c, _e in succ[u]:
                if w not in succ and w not in memo:
                    stack.append(w)
        rev: dict[int, list[tuple[int, int]]] = {}
        heap: list[tuple[int, int]] = []
        for u, edges in succ.items():
            if self._target(u):
                heap.append((0, u))
            for w, cost, ev in edges:
                rev.setdefault(w, []).append((u, (1 if ev > 0 else 0) if steps else cost))
                if w not in succ:
                    heap.append((memo[w], w))
        heapq.heapify(heap)
        dist: dict[int, int] = {}
        while heap:
            d, u = heapq.heappop(heap)
            if u in dist or d >= INF:
                continue
            dist[u] = d
            for p, cost in rev.get(u, ()):
                if p not in dist and p in succ:
                    heapq.heappush(heap, (d + cost, p))
        for u in succ:
            memo[u] = dist.get(u, INF)
        return memo[sid]

    def allowed_next(self, sid: int) -> frozenset[int]:
        """Spec states (indices) that can be entered next from ``sid`` on a path that can still
        reach a complete trace."""
        hit = self._next.get(sid)
        if hit is not None:
            return hit
        out: set[int] = set()
        seen = {sid}
        stack = [sid]
        while stack:
            u = stack.pop()
            for w, _cost, ev in self._edges(u):
                if ev > 0:
                    if self.need(w) < INF:
                        out.add(decode_event(ev).arg)
                elif w not in seen and self.need(w) < INF:
                    seen.add(w)
                    stack.append(w)
        res = frozenset(out)
        self._next[sid] = res
        return res

    def entry_path(self, sid: int) -> bytes:
        """A shortest byte string from ``sid`` that enters the next state (on a live path)."""
        hit = self._paths.get(sid)
        if hit is not None:
            return hit
        prev: dict[int, tuple[int, int]] = {sid: (-1, -1)}
        frontier = [sid]
        reps = self.t.reps
        found: tuple[int, int] | None = None
        while frontier and found is None:
            nxt: list[int] = []
            for u in frontier:
                for c, (w, ev) in enumerate(self.row(u)):
                    if w < 0 or reps[c] < 0 or self.need(w) >= INF:
                        continue
                    if ev > 0:
                        found = (u, reps[c])
                        break
                    if w not in prev:
                        prev[w] = (u, reps[c])
                        nxt.append(w)
                if found is not None:
                    break
            frontier = nxt
        if found is None:
            return b""
        out = [found[1]]
        u = found[0]
        while prev[u][0] >= 0:
            out.append(prev[u][1])
            u = prev[u][0]
        path = bytes(reversed(out))
        self._paths[sid] = path
        return path

    def describe(self, sid: int) -> str:
        mode, q, cur, node, c, sn, pre, sep, u = self.keys[sid]
        m = ("FREE", "END", "ENV", "DONE")[mode]
        st = self.t.names[cur] if cur >= 0 else "-"
        return (f"{m} q={q} state={st} pending={self.t.node_bytes[node]!r} content={c} stop={sn} "
                f"pre={pre} sep={sep}" + (f" utf8={u}" if u else ""))
