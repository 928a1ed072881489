"""The keyword lexer: text → (state, content) steps, shared by validation and decoding (docs/design.md §4).

Prompt strings are keywords over bytes (UTF-8). A keyword is recognised at the first position where
some keyword ends, the longest one ending there wins (``"Final Thought:"`` over ``"Thought:"``),
and scanning restarts after it. Because :mod:`ltlagent.spec.syntax` rejects a prompt text that occurs
inside another except as a suffix, this is also exactly leftmost-longest matching, so the same
lexer has two engines that must agree (and are tested to):

* :meth:`Lexer.finditer`: a compiled regular expression, for whole texts (validation, MB/s);
* :meth:`Lexer.step` / :attr:`Lexer.goto`: an Aho–Corasick DFA over bytes, for incremental
  tracking of generated text (the decoding monitor), one byte at a time or a token at a time.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property

__all__ = ["Lexer", "Match", "Segment", "build_lexer", "ROOT", "CONTEXT_LABELS"]

#: The DFA state with no keyword in progress.
ROOT = 0

#: Labels that begin a new example (task) on a line of their own: validation splits few-shot prompts
#: at them, and decoding ends a state's text when the model writes one (it began a new example).
CONTEXT_LABELS = ("Question", "Claim", "Q", "Task", "Problem", "Example")


@dataclass(frozen=True)
class Match:
    """Keyword ``index`` found at ``[start, end)`` (byte offsets for bytes, chars for str)."""

    index: int
    start: int
    end: int


@dataclass(frozen=True)
class Segment:
    """A recognised state with its content: the text up to the next keyword, unstripped."""

    index: int
    start: int  # start of the keyword
    content_start: int
    content_end: int


@dataclass(frozen=True)
class Lexer:
    """Keywords and the two matching engines built from them."""

    keywords: tuple[str, ...]
    goto: tuple[tuple[int, ...], ...] = field(repr=False)  # node × byte → node (after emission: ROOT)
    emit: tuple[int, ...] = field(repr=False)  # node → keyword index recognised on entering it, or -1
    depth: tuple[int, ...] = field(repr=False)  # node → bytes of the keyword prefix it stands for

    @cached_property
    def keyword_bytes(self) -> tuple[bytes, ...]:
        return tuple(k.encode("utf-8") for k in self.keywords)

    @cached_property
    def _regex(self) -> re.Pattern[str]:
        alts = sorted(range(len(self.keywords)), key=lambda i: -len(self.keywords[i]))
        first = "".join(sorted({re.escape(k[0]) for k in self.keywords}))
        # the lookahead on the first characters lets `re` skip most positions (measured: ~5x faster)
        return re.compile(f"(?=[{first}])(?:"
                          + "|".join(f"(?P<k{i}>{re.escape(self.keywords[i])})" for i in alts) + ")")

    @cached_property
    def _bregex(self) -> re.Pattern[bytes]:
        alts = sorted(range(len(self.keywords)), key=lambda i: -len(self.keyword_bytes[i]))
        first = b"".join(re.escape(bytes([b])) for b in sorted({k[0] for k in self.keyword_bytes}))
        return re.compile(b"(?=[" + first + b"])(?:"
                          + b"|".join(b"(?P<k%d>%s)" % (i, re.escape(self.keyword_bytes[i]))
                                      for i in alts) + b")")

    @cached_property
    def group_keywords(self) -> tuple[int, ...]:
        """For hot loops over the bytes regex: ``m.lastindex`` → keyword index (entry 0 unused)."""
        alts = sorted(range(len(self.keywords)), key=lambda i: -len(self.keyword_bytes[i]))
        return (-1, *alts)

    @property
    def byte_regex(self) -> re.Pattern[bytes]:
        """The compiled bytes pattern behind :meth:`finditer` (leftmost-longest keyword)."""
        return self._bregex

    @property
    def num_nodes(self) -> int:
        return len(self.emit)

    @property
    def max_keyword_bytes(self) -> int:
        return max(len(k) for k in self.keyword_bytes)

    def finditer(self, text: str | bytes, pos: int = 0) -> Iterator[Match]:
        """All keyword occurrences in ``text`` (str: char offsets; bytes: byte offsets)."""
        rx = self._bregex if isinstance(text, bytes) else self._regex
        for m in rx.finditer(text, pos):  # type: ignore[arg-type]
            yield Match(int(m.lastgroup[1:]), m.start(), m.end())  # type: ignore[index]

    def segments(self, text: str) -> Iterator[Segment]:
        """Each recognised keyword with the span of its content (up to the next keyword)."""
        prev: Match | None = None
        for m in self.finditer(text):
            if prev is not None:
                yield Segment(prev.index, prev.start, prev.end, m.start)
            prev = m
        if prev is not None:
            yield Segment(prev.index, prev.start, prev.end, len(text))

    def step(self, node: int, byte: int) -> tuple[int, int]:
        """Advance the DFA by one byte: (new node, keyword index recognised or -1)."""
        nxt = self.goto[node][byte]
        k = self.emit[nxt]
        return (ROOT, k) if k >= 0 else (nxt, -1)

    def feed(self, node: int, data: bytes) -> tuple[int, list[tuple[int, int]]]:
        """Advance over ``data``: (new node, [(keyword index, end offset in data), …])."""
        events: list[tuple[int, int]] = []
        goto, emit = self.goto, self.emit
        for i, b in enumerate(data):
            node = goto[node][b]
            k = emit[node]
            if k >= 0:
                events.append((k, i + 1))
                node = ROOT
        return node, events

    def pending(self, node: int) -> bytes:
        """The bytes of the keyword prefix the DFA is in the middle of (held back from content)."""
        return self._node_bytes[node]

    @cached_property
    def _node_bytes(self) -> tuple[bytes, ...]:
        out: list[bytes] = [b""] * self.num_nodes
        todo = deque([ROOT])
        seen = {ROOT}
        while todo:
            u = todo.popleft()
            for b in range(256):
                v = self.goto[u][b]
                if v not in seen and self.depth[v] == self.depth[u] + 1:
                    seen.add(v)
                    out[v] = out[u] + bytes([b])
                    todo.append(v)
        return tuple(out)


def build_lexer(keywords: Sequence[str]) -> Lexer:
    """Build both engines for ``keywords`` (the prompt strings, in spec state order)."""
    kws = [k.encode("utf-8") for k in keywords]
    children: list[dict[int, int]] = [{}]
    depth = [0]
    term: list[int] = [-1]
    for idx, kw in enumerate(kws):
        node = ROOT
        for b in kw:
            nxt = children[node].get(b)
            if nxt is None:
                nxt = len(children)
                children[node][b] = nxt
                children.append({})
                depth.append(depth[node] + 1)
                term.append(-1)
            node = nxt
        term[node] = idx
    n = len(children)
    fail = [ROOT] * n
    emit = [-1] * n
    goto: list[list[int]] = [[ROOT] * 256] + [[] for _ in range(n - 1)]  # rows filled below, root first
    order: deque[int] = deque()
    for b, v in children[ROOT].items():
        goto[ROOT][b] = v
        order.append(v)
    for v in list(order):
        emit[v] = term[v]
    while order:
        u = order.popleft()
        # every byte without a child goes where the failure link goes: copy its (complete, shallower)
        # row and overwrite the children, rather than 256 Python steps per node
        row = list(goto[fail[u]])
        for b, v in children[u].items():
            row[b] = v
            fail[v] = goto[fail[u]][b]
            # longest keyword ending here: our own, else the one our failure link recognises
            emit[v] = term[v] if term[v] >= 0 else emit[fail[v]]
            order.append(v)
        goto[u] = row
    return Lexer(tuple(keywords), tuple(tuple(r) for r in goto), tuple(emit), tuple(depth))
