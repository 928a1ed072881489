"""Constrained decoding of one assistant turn of a tool-calling chat (issue 18; docs/design.md §14):
the token index of the turn's byte language (:mod:`ltlagent.decode.turnlang`, whose names are
re-exported here) and the per-turn cursor.

A turn is free text, or free text followed by one tool call in the model's call format, then the
end of the turn. Which of these the policy allows *now* is a :class:`TurnRule`: may the turn be
text (an assistant text step is allowed), and which tools may be called with no text before the
call and which after some text (a text step moves the policy, so the two can differ). Several
calls in one turn (issue 30) are one language per call: when a call is complete, a
:class:`TurnCursor` given a :data:`Chain` asks it for the index of what may follow (a rule with
``after_call``: blank text, then another call of the tools the policy allows after the calls so
far, or the end of the turn where ``end`` says so) and goes on in that index. A rule
becomes one byte DFA (:class:`TurnLanguage`): a text phase that watches for the call marker
(``<tool_call>`` for ``hermes``; a ``{`` at the very start for ``json``) with a
Knuth–Morris–Pratt failure function, then the DFA of the allowed calls (names and argument
schemas, :func:`ltlagent.text.toolcall.call_table`). Text that would complete the marker while no
tool may be called is impossible, so is a call to a tool the policy forbids now, and so are
arguments outside the tool's schema; by default the text stays valid UTF-8.

:class:`TurnIndex` compiles a language for a vocabulary: per DFA state (lazily, cached) the tokens
whose bytes keep the DFA alive, and EOS where the turn may end. Inside a JSON string whose content
characters all move the state alike (a free string, a character count) they follow from the chain
of states and each token's character count (:class:`ContentTokens`, :meth:`TurnIndex._chain`);
elsewhere they are found by walking the vocabulary's byte trie from the state (or, in a string's
character count, from the same position at a lower count: :class:`Period`). :class:`TurnCursor`
is the per-turn runtime.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ltlagent.decode.budget import byte_preference, finish_tokens
from ltlagent.decode.trie import VocabTrie, ranges, trie_of
from ltlagent.decode.triewalk import (
    TriePreorder,
    compiled_chain,
    compiled_passes,
    compiled_run,
    compiled_walk,
    trie_preorder,
)
from ltlagent.decode.turnlang import (  # the turn's language, re-exported: where users have met it
    CALL_MARKERS,
    Period,
    TurnLanguage,
    TurnRule,
    ValueRules,
    value_call_table,
)
from ltlagent.decode.vocab import Vocab

__all__ = ["TurnRule", "TurnLanguage", "TokenBytes", "TurnIndex", "TurnCursor", "Period", "CALL_MARKERS",
           "ValueRules", "value_call_table", "Chain"]


@dataclass(frozen=True, eq=False)
class TokenBytes:
    """A vocabulary's token bytes as a padded matrix, for walking every token at once: built once
    per vocabulary and shared by the turn indexes of all its rules."""

    vocab: Vocab
    matrix: np.ndarray = field(repr=False)  # uint8 [size, longest]
    columns: tuple[np.ndarray, ...] = field(repr=False)  # per byte position: tokens that long
    text: np.ndarray = field(repr=False)  # bool [size]: tokens with text (not special, not empty)
    eos: np.ndarray = field(repr=False)  # int64: the EOS ids in range

    @functools.cached_property
    def silent(self) -> np.ndarray:
        """The ids of the tokens without text (special, empty): no byte walk reaches them."""
        return np.flatnonzero(~self.text)

    @staticmethod
    def of(vocab: Vocab) -> TokenBytes:
        lens = vocab.lengths.astype(np.int64)
        width = int(lens.max()) if lens.size else 0
        mat = np.zeros((vocab.size, max(width, 1)), dtype=np.uint8)
        flat = np.frombuffer(vocab.flat, dtype=np.uint8)
        columns = tuple(np.nonzero(lens > j)[0] for j in range(width))
        for j, rows in enumerate(columns):
            mat[rows, j] = flat[vocab.offsets[rows] + j]
        eos = np.array([e for e in vocab.eos_ids if 0 <= e < vocab.size], dtype=np.int64)
        tb = TokenBytes(vocab, mat, columns, vocab.is_text & (lens > 0), eos)
        tb.token_nodes  # noqa: B018 - the trie built now, with the vocabulary, not on a decoding step
        tb.preference  # noqa: B018 - likewise the byte order of budget witnesses (TurnIndex.need)
        tb.silent  # noqa: B018
        tb.content  # noqa: B018 - likewise the string-content classes of the tokens (TurnIndex._chain)
        tb.level_bytes  # noqa: B018
        for lv in tb.trie.levels:  # likewise each level's arrays as memoryviews (sparse first visits)
            lv.views  # noqa: B018
        for _after, ct, _level, _node in tb.quoted:  # likewise each prefix's members' classes in a row
            ct.member_chars  # noqa: B018
        if tb.quoted_both is not None:
            tb.quoted_both[0].member_chars  # noqa: B018
        for _first, ct in tb.numbers:
            ct.member_chars  # noqa: B018
        tb.byte_sets  # noqa: B018 - likewise the bytes of each token (TurnIndex._class)
        tb.first_at  # noqa: B018
        tb.lengths8  # noqa: B018
        if COMPILED_WALK and compiled_walk() is not None:  # the compiled walk, compiled now (per process)
            tb.preorder  # noqa: B018 - and the trie in the order it reads
            compiled_run()
            compiled_chain()
            compiled_passes()  # (a language's, TurnLanguage.loops and the others)
        return tb

    @functools.cached_property
    def trie(self) -> VocabTrie:
        """The vocabulary's byte trie (built once per vocabulary, shared with the spec monitors)."""
        return trie_of(self.vocab)

    @functools.cached_property
    def preorder(self) -> TriePreorder:
        """The trie's nodes in depth-first preorder, for the compiled walk of a first visit
        (:mod:`ltlagent.decode.triewalk`; once per vocabulary)."""
        return trie_preorder(self.trie)

    @functools.cached_property
    def walk_lists(self) -> threading.local:
        """Per thread, the compiled walk's output lists (:meth:`TurnIndex._walked`), shared by the
        indexes of this vocabulary: a walk's lists are copied out before the next walk, and an
        index's first visit, right after its language was built, finds them made."""
        return threading.local()

    @functools.cached_property
    def preference(self) -> np.ndarray:
        """The bytes in the order budget witnesses prefer them
        (:func:`ltlagent.decode.budget.byte_preference`), once per vocabulary."""
        return byte_preference(self.vocab)

    @functools.cached_property
    def level_bytes(self) -> tuple[bytes, ...]:
        """Per trie level, its nodes' bytes as one ``bytes`` (children of a node are found in it
        with ``bytes.find``: :meth:`TurnIndex._live_children`)."""
        return tuple(lv.byte.astype(np.uint8).tobytes() for lv in self.trie.levels)

    @functools.cached_property
    def flat(self) -> np.ndarray:
        """``Vocab.flat`` as an array of bytes."""
        return np.frombuffer(self.vocab.flat, dtype=np.uint8)

    @functools.cached_property
    def quoted(self) -> tuple[tuple[bytes, ContentTokens, int, int], ...]:
        """Per prefix that opens a JSON string (:data:`STRING_OPENERS`) that some token begins
        with: the classes of those tokens by what follows it, and the prefix's trie node (level,
        node), once per vocabulary (a sparse state's first visit settles that subtree along the
        string's chain: :meth:`TurnIndex._walk`)."""
        out = []
        trie, levels = self.trie, self.level_bytes
        for after in STRING_OPENERS:
            node = trie.root.item(after[0])
            for d in range(1, len(after)):
                if node < 0 or d >= len(levels):
                    node = -1
                    break
                lv = trie.levels[d - 1]
                node = levels[d].find(after[d], lv.child_lo.item(node), lv.child_hi.item(node))
            if node >= 0:
                out.append((after, ContentTokens.of(self.vocab, after), len(after) - 1, node))
        return tuple(out)

    @functools.cached_property
    def quoted_both(self) -> tuple[ContentTokens, int, int] | None:
        """The two string openers of :attr:`quoted` at once (where both lead to one string
        state, one chain settles both subtrees: :meth:`TurnIndex._walk`): the classes of the tokens
        that begin with either by what follows, and the nodes of ``"`` (level 0) and `` "``
        (level 1); None unless both are in the trie."""
        q = dict((after, node) for after, _ct, _level, node in self.quoted)
        if set(q) != set(STRING_OPENERS):
            return None
        return ContentTokens.of(self.vocab, STRING_OPENERS), q[b'"'], q[b' "']

    @functools.cached_property
    def numbers(self) -> tuple[tuple[bytes, ContentTokens], ...]:
        """Per set of first digits (:data:`NUMBER_STARTS`: any digit; 1–9, where a JSON number's
        leading zero parts ways), the classes of the tokens that begin with one of them by the
        digits that follow, once per vocabulary (:meth:`TurnIndex._walk`)."""
        return tuple((first, ContentTokens.of(self.vocab, first=first, digits=True))
                     for first in NUMBER_STARTS)

    @functools.cached_property
    def content(self) -> ContentTokens:
        """Which tokens are JSON-string content and how many characters each has (once per
        vocabulary: :meth:`TurnIndex._chain`)."""
        return ContentTokens.of(self.vocab)

    @functools.cached_property
    def byte_sets(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per text token in the trie's order (``VocabTrie.order``: by first byte, so the tokens
        that begin in a run of bytes are one slice, :attr:`first_at`), the ASCII bytes it holds
        as two 64-bit sets (``uint64``: bytes 0x00–0x3F, 0x40–0x7F; byte 0x00 also stands for
        every byte from 0x80, which no class of :meth:`TurnIndex._class` holds) and its length
        (``uint8``, 255 for 255 bytes or more), once per vocabulary: the tokens of a slice whose
        bytes all lie in a class are then two masks and a comparison away."""
        size = self.vocab.size
        lo, hi = np.zeros(size, dtype=np.uint64), np.zeros(size, dtype=np.uint64)
        one = np.uint64(1) << (np.arange(256, dtype=np.uint64) & np.uint64(63))
        one[0x80:] = 1
        low = np.where(np.arange(256) < 0x40, one, 0).astype(np.uint64)
        low[0x80:] = 1
        high = np.where((np.arange(256) >= 0x40) & (np.arange(256) < 0x80), one, 0).astype(np.uint64)
        for j, rows in enumerate(self.columns):
            col = self.matrix[rows, j]
            lo[rows] |= low[col]
            hi[rows] |= high[col]
        order = self.trie.order
        return lo[order], hi[order], self.lengths8[order]

    @functools.cached_property
    def lengths8(self) -> np.ndarray:
        """Each token's length, 255 for 255 bytes or more (``uint8``)."""
        return np.minimum(self.vocab.lengths, 255).astype(np.uint8)

    @functools.cached_property
    def _classes(self) -> dict[bytes, ClassTokens]:
        return {}

    def class_tokens(self, has: np.ndarray) -> ClassTokens:
        """The tokens by the class ``has`` (:class:`ClassTokens`), built on the class's first
        visit and kept with the vocabulary: a class recurs (the characters of a pattern, a
        hostname's, a date's digits) in every state of its chain, every text, every schema; the
        :data:`CLASS_KEPT` most recent are kept."""
        key = has.tobytes()
        got = self._classes.get(key)
        if got is None:
            got = ClassTokens.of(self, has)
            while len(self._classes) >= CLASS_KEPT:
                del self._classes[next(iter(self._classes))]
            self._classes[key] = got
        return got

    @functools.cached_property
    def first_at(self) -> np.ndarray:
        """Per byte ``x`` (and 256), where the tokens that begin with a byte ``>= x`` start in the
        trie's token order (``VocabTrie.order``: by first byte, so the tokens that begin with
        a byte in ``[a, b]`` are ``order[first_at[a]:first_at[b + 1]]``), once per vocabulary."""
        trie = self.trie
        if not trie.levels:
            return np.zeros(257, dtype=np.int64)
        lv = trie.levels[0]
        k = np.searchsorted(lv.byte, np.arange(257))
        return np.concatenate([lv.span_lo, [trie.order.size]]).astype(np.int64)[k]

    @functools.cached_property
    def token_nodes(self) -> tuple[np.ndarray, ...]:
        """Per trie level, the node each of its tokens ends at (in the order of ``tokens``)."""
        return tuple(np.repeat(np.arange(lv.parent.size), lv.tok_hi - lv.tok_lo) for lv in self.trie.levels)


#: One content character: such an ASCII byte or a whole multi-byte UTF-8 character.
_CONTENT_CHAR = (rb"[\x20\x21\x23-\x5b\x5d-\x7f]|[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]"
                 rb"|[\xe1-\xec\xee\xef][\x80-\xbf]{2}|\xed[\x80-\x9f][\x80-\xbf]"
                 rb"|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2}")
_CONTENT_RUN = re.compile(rb"(?:" + _CONTENT_CHAR + rb")*")
_DIGIT_RUN = re.compile(rb"[0-9]*")
_DIGITS = np.arange(0x30, 0x3A, dtype=np.int64)
#: The most characters a token is counted by (:attr:`ContentTokens.chars`; 255 marks the others).
MOST_CHARS = 254
#: The chain is checked for multi-byte characters over its first this many rows only: a token with
#: such a character further in goes along the chain up to it and is walked from there.
MOST_WIDE = 12


@dataclass(frozen=True, eq=False)
class ContentTokens:
    """A vocabulary's tokens as JSON-string content, for first visits along a chain of states
    that every content character moves the same way (:meth:`TurnIndex._chain`): a *pure* token is
    content characters only (bytes of :data:`CONTENT_ASCII`, whole multi-byte UTF-8 characters);
    every other text token has a pure prefix and then a byte that is a control byte (< 0x20: a
    JSON string refuses it), or something else (a quote, a backslash, a partial or invalid
    character: walked from the prefix's end). Built once per vocabulary."""

    #: per token, a pure token's characters (1 … MOST_CHARS); 255 for every other token
    chars: np.ndarray = field(repr=False)  # uint8 [size]
    #: the text tokens to walk from the end of their pure prefix, by the prefix's characters
    walk: np.ndarray = field(repr=False)  # int64
    walk_chars: np.ndarray = field(repr=False)  # int64, ascending
    #: each walked token's row: tokens with the same prefix characters and the same bytes after
    #: the prefix share one walk
    walk_row: np.ndarray = field(repr=False)  # int64
    #: per row, the prefix characters (ascending), and where in ``Vocab.flat`` its bytes after the
    #: prefix begin and end
    row_chars: np.ndarray = field(repr=False)  # int64
    row_at: np.ndarray = field(repr=False)  # int64
    row_end: np.ndarray = field(repr=False)  # int64
    #: the rows' distinct (prefix characters, first byte) pairs, ascending
    pair_chars: np.ndarray = field(repr=False)  # int64
    pair_byte: np.ndarray = field(repr=False)  # int64
    #: the rows' distinct (prefix characters, first byte, second byte or -1) triples, ascending: the
    #: pair of each, its second byte, its rows ``tri_lo … tri_hi-1`` (contiguous)
    tri_chars: np.ndarray = field(repr=False)  # int64
    tri_pair: np.ndarray = field(repr=False)  # int64
    tri_byte: np.ndarray = field(repr=False)  # int64
    tri_lo: np.ndarray = field(repr=False)  # int64
    tri_hi: np.ndarray = field(repr=False)  # int64
    #: the most characters any token reads as content (pure tokens, prefixes): the chain's rows
    longest: int
    #: the rows checked for multi-byte characters: one past the furthest such character a token
    #: reads along the chain (at most :data:`MOST_WIDE`)
    wide: int
    #: with a prefix (``of(vocab, after)``): the ids of the tokens that begin with it; None: all
    members: np.ndarray | None = field(default=None, repr=False)
    #: the class of digits (a number's), not of JSON-string content
    digits: bool = False

    @functools.cached_property
    def member_chars(self) -> np.ndarray | None:
        """``chars`` of the :attr:`members`, in their order (None: all tokens): a visit that marks
        a prefix's tokens reads these few bytes in a row, not a byte per member across ``chars``."""
        return None if self.members is None else self.chars[self.members]

    @staticmethod
    def of(vocab: Vocab, after: bytes | tuple[bytes, ...] = b"", first: bytes = b"",
           digits: bool = False) -> ContentTokens:
        """The classes of ``vocab``'s tokens; with ``after`` (or ``first``), of the tokens that
        begin with those bytes (one of those prefixes; with one of those bytes), by what follows
        (the prefix alone: pure, no character), the others marked 255 and not walked
        (:attr:`members`). With ``digits`` the characters are the digits 0–9 and every other byte
        is walked (a number's digits)."""
        afters = after if isinstance(after, tuple) else (after,) if after else ()
        flat, off, text = vocab.flat, vocab.offsets.tolist(), vocab.is_text.tolist()
        chars = np.full(vocab.size, 255, dtype=np.uint8)
        walk: list[tuple[int, int, int, int]] = []  # (prefix characters, id, at, end)
        longest = wide = 0
        match = (_DIGIT_RUN if digits else _CONTENT_RUN).match
        skip = bool(afters or first)
        members: list[int] = []
        for i in range(vocab.size):
            a, b = off[i], off[i + 1]
            if not text[i] or a == b:
                continue
            if skip:
                if afters:
                    k = next((len(x) for x in afters if flat.startswith(x, a, b)), 0)
                else:
                    k = 1 if flat[a] in first else 0
                if not k:
                    continue
                members.append(i)
                a += k
                if a == b:
                    chars[i] = 0
                    continue
            e = match(flat, a, b).end()  # type: ignore[union-attr] # a run of none matches too
            n = e - a
            if not flat[a:e].isascii():
                run = flat[a:e].decode("utf-8")
                n = len(run)
                wides = [k for k, c in enumerate(run) if c >= "\x80"]
                late = [k for k in wides if k >= MOST_WIDE]
                if late and n <= MOST_CHARS:  # the chain up to the first late character, then walked
                    n, e = late[0], a + len(run[:late[0]].encode("utf-8"))
                    wides = [k for k in wides if k < n]
            else:
                wides = []
            if n > MOST_CHARS:  # walked whole from the state
                walk.append((0, i, a, b))
                continue
            if wides:
                wide = max(wide, wides[-1] + 1)
            longest = max(longest, n)
            if e == b:
                chars[i] = n
            elif digits or flat[e] >= 0x20:
                walk.append((n, i, e, b))
        walk.sort()
        where: dict[tuple[int, bytes], tuple[int, int]] = {}  # one walk per (prefix characters, bytes after)
        for n, _i, e, b in walk:
            where.setdefault((n, flat[e:b]), (e, b))
        keys = sorted(where)  # by prefix characters, then bytes: shared first bytes are contiguous
        number = {k: r for r, k in enumerate(keys)}
        row = np.array([number[n, flat[e:b]] for n, _i, e, b in walk], dtype=np.int64)
        cols = np.array(walk, dtype=np.int64).reshape(-1, 4).T
        spans = np.array([where[k] for k in keys], dtype=np.int64).reshape(-1, 2)
        pairs = sorted({(n, x[0]) for n, x in keys})
        pair_of = {k: j for j, k in enumerate(pairs)}
        firsts: dict[tuple[int, int, int], list[int]] = {}  # (prefix characters, 1st, 2nd byte or -1): rows
        for r, (n, x) in enumerate(keys):
            firsts.setdefault((n, x[0], x[1] if len(x) > 1 else -1), []).append(r)
        tri = sorted(firsts.items())
        ints = functools.partial(np.array, dtype=np.int64)
        return ContentTokens(
            chars, cols[1].copy(), cols[0].copy(), row, ints([n for n, _x in keys]),
            spans[:, 0].copy(), spans[:, 1].copy(),
            ints([n for n, _x in pairs]), ints([x for _n, x in pairs]),
            ints([n for (n, _x, _y), _r in tri]), ints([pair_of[n, x] for (n, x, _y), _r in tri]),
            ints([y for (_n, _x, y), _r in tri]), ints([r[0] for _k, r in tri]),
            ints([r[-1] + 1 for _k, r in tri]),
            longest, wide, ints(members) if skip else None, digits)


@dataclass(frozen=True, eq=False)
class ClassTokens:
    """A vocabulary's tokens by one class of ASCII bytes (:meth:`TurnIndex._class`), the same for
    every state of that class: the *pure* tokens (every byte in the class) over the vocabulary,
    the longest one's length, and the other tokens that begin in the class with the position of
    their first byte out of it (they are walked from there). Built on a class's first visit
    and kept by the vocabulary (:meth:`TokenBytes.class_tokens`)."""

    pure: np.ndarray = field(repr=False)  # bool [size]
    longest: int
    walk: np.ndarray = field(repr=False)  # int64 token ids
    walk_at: np.ndarray = field(repr=False)  # int64

    @staticmethod
    def of(tokens: TokenBytes, has: np.ndarray) -> ClassTokens:
        """The tokens of ``tokens`` by the class ``has`` (per byte, whether it is in it; bytes
        0x20–0x7F only): two masks over the byte sets of the slices of the tokens that begin in
        each run of the class (:attr:`TokenBytes.byte_sets`)."""
        lo, hi, lens = tokens.byte_sets
        bits = int.from_bytes(np.packbits(has[:0x80], bitorder="little").tobytes(), "little")
        off0, off1 = np.uint64(~bits & (2**64 - 1)), np.uint64(~(bits >> 64) & (2**64 - 1))
        first, order = tokens.first_at, tokens.trie.order
        pure = np.zeros(tokens.vocab.size, dtype=bool)
        longest = 0
        walks: list[np.ndarray] = []
        for a, b in _runs(tuple(np.flatnonzero(has).tolist())):
            i, j = first.item(a), first.item(b + 1)
            if i == j:
                continue
            ok = ((lo[i:j] & off0) | (hi[i:j] & off1)) == 0
            pure[order[i:j][ok]] = True
            longest = max(longest, int(lens[i:j][ok].max(initial=0)))
            walks.append(order[i:j][~ok])
        walk = _cat(walks)
        at = np.argmin(has[tokens.matrix[walk]], axis=1).astype(np.int64)  # the padding's 0 is out too
        pure.flags.writeable = False
        return ClassTokens(pure, longest, walk, at)


#: Prefixes that open a JSON string, whose tokens a sparse first visit settles along the string's
#: chain (:attr:`TokenBytes.quoted`): a quote, and a space and a quote.
STRING_OPENERS = (b'"', b' "')

#: Sets of first bytes whose tokens a sparse first visit settles along a chain of digits
#: (:attr:`TokenBytes.numbers`): any digit (a date's, a fraction's), and 1–9 (a number's first).
NUMBER_STARTS = (b"0123456789", b"123456789")

#: First visits along content chains (:meth:`TurnIndex._chain`); off: every state walks the trie.
CONTENT_CHAINS = True

#: First visits of states with one live byte down the trie alone (:meth:`TurnIndex._single`); off:
#: they take the general walk.
SINGLE_FIRST = True

#: First visits along class chains (:meth:`TurnIndex._class`); off: such states walk the trie.
CLASS_CHAINS = True

#: A dense first visit by the compiled walk keeps the tokens that end elsewhere than most as a list
#: (:class:`_Except`) while they are at most this share of the vocabulary (1/8), else an array
EXCEPT_SHARE = 8

#: Per byte, the 256 bytes with only it set (a one-byte visit's first bytes: ``_single``)
_ONE_BYTE = np.eye(256, dtype=bool)
_ONE_BYTE.flags.writeable = False

#: The compiled walk's output lists hold this many tokens until a walk writes more (48 kB: from the
#: heap, where lists over a 128k vocabulary were 1.5 MB mapped fresh on an index's first visit)
FEW_LISTED = 4096

#: A first visit's loops compiled (:mod:`ltlagent.decode.triewalk`: the trie walk, a chain's token
#: runs, rows and check) where numba is installed; off (or without numba): the Python walk by levels
#: (:meth:`TurnIndex._levels`) and the chains in Python and numpy.
COMPILED_WALK = True
#: A state is tried for a class chain when at least this many bytes live, and its class holds
#: at least this many ASCII bytes; the bytes live outside it are walked, at most :data:`LIVE_LOOKUPS`.
CLASS_MIN = 10

#: The bytes whose targets are tried as a state's class (:meth:`TurnIndex._class`): ``a``, ``0``, ``A``.
CLASS_PROBES = (0x61, 0x30, 0x41)
#: The classes a vocabulary keeps (:meth:`TokenBytes.class_tokens`).
CLASS_KEPT = 64

#: A state with at least this many bytes that loop back to it is walked as dense: tokens are
#: written where they do not end at the state (:meth:`TurnIndex._walk`).
DENSE_LOOPS = 32
#: A level of a first visit with at most this many nodes is walked node by node (:meth:`TurnIndex._walk`).
SMALL_LEVEL = 12
#: Once the nodes left to walk have at most this many tokens below per level their subtrees reach,
#: they are finished token by token (a level at once costs about as much as this many tokens).
FINISH_TOKENS = 12
#: ... and at most this many in all (tokens that die at their next bytes cost less by levels).
FINISH_MOST = 256
#: In a sparse walk, up to this many nodes of a level are each followed alone while their states
#: have one live byte (:meth:`TurnIndex._follow`).
FOLLOW_MOST = 64
#: In a sparse walk, a node's children are found in Python, by the state's live bytes or by
#: stepping each child, when either is at most this many (:meth:`TurnIndex._live_children`).
LIVE_LOOKUPS = 24


_ASCII = (1 << 128) - 1  # the bytes below 0x80 in a 256-bit set (``byte_bits``) read as an int

#: Every multi-byte UTF-8 character as byte ranges: lead bytes, then the continuation bytes' ranges.
_CONT = range(0x80, 0xC0)
_UTF8_SEQUENCES: tuple[tuple[tuple[int, ...], tuple[range, ...]], ...] = (
    (tuple(range(0xC2, 0xE0)), (_CONT,)),
    ((0xE0,), (range(0xA0, 0xC0), _CONT)),
    ((*range(0xE1, 0xED), 0xEE, 0xEF), (_CONT, _CONT)),
    ((0xED,), (range(0x80, 0xA0), _CONT)),
    ((0xF0,), (range(0x90, 0xC0), _CONT, _CONT)),
    ((0xF1, 0xF2, 0xF3), (_CONT, _CONT, _CONT)),
    ((0xF4,), (range(0x80, 0x90), _CONT, _CONT)),
)


def _runs(xs: tuple[int, ...]) -> list[tuple[int, int]]:
    """Sorted integers as runs of consecutive ones, ``(first, last)``."""
    out: list[tuple[int, int]] = []
    for x in xs:
        if out and out[-1][1] + 1 == x:
            out[-1] = (out[-1][0], x)
        else:
            out.append((x, x))
    return out


@dataclass(frozen=True)
class _Utf8Steps:
    """:data:`_UTF8_SEQUENCES` as arrays for stepping every range at once: the lead bytes, per
    lead the column of its range's first lead, per range its first lead's column; then per
    continuation step (2nd, 3rd, 4th byte) which of the 64 continuation bytes each range takes
    (``valid`` [groups, 64]), the first of them, and which ranges have that many bytes."""

    leads: np.ndarray
    lead_first: np.ndarray
    group_first: np.ndarray
    cont: np.ndarray
    steps: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]

    @staticmethod
    def of(seqs: tuple[tuple[tuple[int, ...], tuple[range, ...]], ...]) -> _Utf8Steps:
        leads = [b for lead, _rest in seqs for b in lead]
        starts = np.cumsum([0] + [len(lead) for lead, _rest in seqs[:-1]])
        lead_first = np.repeat(starts, [len(lead) for lead, _rest in seqs])
        steps = []
        for k in range(max(len(rest) for _lead, rest in seqs)):
            valid = np.zeros((len(seqs), 64), dtype=bool)
            grows = np.zeros(len(seqs), dtype=bool)
            for g, (_lead, rest) in enumerate(seqs):
                r = rest[min(k, len(rest) - 1)]  # a range done stays put: its last range again, unused
                valid[g, r.start - 0x80:r.stop - 0x80] = k < len(rest)
                grows[g] = k < len(rest)
            first = np.array([int(np.argmax(v)) if v.any() else 0 for v in valid], dtype=np.int64)
            steps.append((valid, first, grows))
        return _Utf8Steps(np.array(leads, dtype=np.int64), lead_first.astype(np.int64),
                          starts.astype(np.int64), np.arange(0x80, 0xC0, dtype=np.int64), tuple(steps))


_UTF8_STEPS = _Utf8Steps.of(_UTF8_SEQUENCES)
#: :data:`_UTF8_SEQUENCES` with the lead bytes as runs ``[a, b)``.
_UTF8_SPANS: tuple[tuple[tuple[tuple[int, int], ...], tuple[range, ...]], ...] = tuple(
    (tuple((a, b + 1) for a, b in _runs(leads)), rest) for leads, rest in _UTF8_SEQUENCES)


def _utf8_arrays() -> tuple[np.ndarray, ...]:
    """:data:`_UTF8_SPANS` as the compiled chain check reads it
    (:func:`~ltlagent.decode.triewalk.compiled_chain`): the lead bytes' runs (first, end) and the
    sequence of each, then per sequence its continuation ranges (first, end) and how many."""
    runs = [(a, b, k) for k, (spans, _rest) in enumerate(_UTF8_SPANS) for a, b in spans]
    most = max(len(rest) for _spans, rest in _UTF8_SPANS)
    rest_a = np.zeros((len(_UTF8_SPANS), most), dtype=np.int64)
    rest_b = np.zeros((len(_UTF8_SPANS), most), dtype=np.int64)
    for k, (_spans, rest) in enumerate(_UTF8_SPANS):
        rest_a[k, :len(rest)] = [r.start for r in rest]
        rest_b[k, :len(rest)] = [r.stop for r in rest]
    cols = np.array(runs, dtype=np.int64).T
    return (cols[0].copy(), cols[1].copy(), cols[2].copy(), rest_a, rest_b,
            np.array([len(rest) for _spans, rest in _UTF8_SPANS], dtype=np.int64))


_UTF8_ARRAYS = _utf8_arrays()
#: A content chain of more rows than this inside a period is checked from its first row
#: (:meth:`TurnIndex._periodic`).
PERIOD_ROWS = 4
#: Up to this many states are checked for UTF-8 row by row (:meth:`TurnIndex._utf8_row`), more at once.
UTF8_ROWS = 3


def _whole(b: bytes) -> bool:
    """Whether ``b`` is whole UTF-8 characters (Python's strict decoder rejects what
    :data:`ltlagent.decode.machine.UTF8` rejects)."""
    if b.isascii():
        return True
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _cat(parts: list[np.ndarray], dtype: type = np.int64) -> np.ndarray:
    """``parts`` as one array (none: empty of ``dtype``)."""
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def _ints(xs: np.ndarray | list[int]) -> list[int]:
    return xs.tolist() if isinstance(xs, np.ndarray) else xs


class _Listed:
    """Tokens a first visit listed (``ids``) with their end states (``to``), looked up one at a
    time (``advance``) through a dict built on the first lookup."""

    ids: np.ndarray
    to: np.ndarray
    _map: dict[int, int] | None

    def _lookup(self, token: int) -> int | None:
        """The end state listed for ``token``, or None where it is not listed."""
        if self._map is None:
            self._map = dict(zip(self.ids.tolist(), self.to.tolist()))
        return self._map.get(token)


class _Few(_Listed):
    """The end states of the few tokens that live from a state (``ids``, ``to``); every other
    token dies."""

    def __init__(self, ids: np.ndarray, to: np.ndarray) -> None:
        self.ids, self.to = ids, to
        self._map: dict[int, int] | None = None

    def dense(self, size: int, dead: int) -> np.ndarray:
        ends = np.full(size, dead, dtype=np.int32)
        ends[self.ids] = self.to
        return ends

    def mask(self, size: int) -> np.ndarray:
        mask = np.zeros(size, dtype=bool)
        mask[self.ids] = True
        return mask

    def mark(self, mask: np.ndarray) -> None:
        mask[self.ids] = True

    def get(self, token: int, dead: int) -> int:
        got = self._lookup(token)
        return dead if got is None else got


class _Spans:
    """:class:`_Few` as spans of the trie's token order, each with its end state (a sparse walk
    that wrote only whole spans): the mask from the slices, the token arrays only when asked."""

    __slots__ = ("_map", "hi", "lo", "order", "to", "view")

    def __init__(self, order: np.ndarray, lo: list[int], hi: list[int], to: list[int],
                 view: memoryview | None = None) -> None:
        self.order, self.lo, self.hi, self.to = order, lo, hi, to
        self.view = order.data if view is None else view  # ``order`` read token by token
        self._map: dict[int, int] | None = None

    def dense(self, size: int, dead: int) -> np.ndarray:
        ends = np.full(size, dead, dtype=np.int32)
        for a, b, t in zip(self.lo, self.hi, self.to):
            ends[self.order[a:b]] = t
        return ends

    def mask(self, size: int) -> np.ndarray:
        mask = np.zeros(size, dtype=bool)
        self.mark(mask)
        return mask

    def mark(self, mask: np.ndarray) -> None:
        """Set the spans' tokens in ``mask``: a span of a few tokens token by token (a key's path
        down the trie: most spans of a sparse visit are one or two tokens), a longer one at once."""
        order, view = self.order, self.view
        for a, b in zip(self.lo, self.hi):
            if b - a <= 4:
                for k in range(a, b):
                    mask[view[k]] = True
            else:
                mask[order[a:b]] = True

    def get(self, token: int, dead: int) -> int:
        if self._map is None:
            self._map = {i: t for a, b, t in zip(self.lo, self.hi, self.to) for i in self.order[a:b].tolist()}
        return self._map.get(token, dead)


class _Chain(_Listed):
    """The end states of a first visit along a content chain (:meth:`TurnIndex._chain`): a pure
    token of ``c`` characters ends at ``ext[c]`` (``ext[c]`` is dead past the last live count
    ``most`` and at 255, every other token's mark), the walked tokens at ``to``."""

    def __init__(self, chars: np.ndarray, ext: np.ndarray, most: int, ids: np.ndarray, to: np.ndarray,
                 dead: int, members: np.ndarray | None = None,
                 member_chars: np.ndarray | None = None) -> None:
        self.chars, self.ext, self.most, self.ids, self.to, self.dead = chars, ext, most, ids, to, dead
        self.members = members  # the tokens with the class's prefix (None: all)
        # their ``chars``, in a row (ContentTokens.member_chars); all of ``chars`` without members
        if member_chars is None:
            member_chars = chars if members is None else chars[members]
        self.member_chars: np.ndarray = member_chars
        self._map: dict[int, int] | None = None

    def mask(self, size: int) -> np.ndarray:
        if self.members is not None:
            mask = np.zeros(size, dtype=bool)
            self.mark(mask)
            return mask
        mask = self.chars <= self.most
        mask[self.ids[self.to != self.dead]] = True
        return mask

    def mark(self, mask: np.ndarray) -> None:
        """Set the tokens that live to True in ``mask`` (those of a prefix: :class:`_Joined`)."""
        if self.members is None:
            mask |= self.chars <= self.most
        else:
            mask[self.members[self.member_chars <= self.most]] = True
        mask[self.ids[self.to != self.dead]] = True

    def fill(self, ends: np.ndarray) -> None:
        """Write the ends of this part's tokens into ``ends`` (dead there before)."""
        if self.members is None:
            ends[:] = self.ext[self.chars]
        else:
            ends[self.members] = self.ext[self.member_chars]
        ends[self.ids] = self.to

    def dense(self, size: int, dead: int) -> np.ndarray:
        ends = self.ext[self.chars]
        ends[self.ids] = self.to
        return ends

    def get(self, token: int, dead: int) -> int:
        got = self._lookup(token)
        return int(self.ext[self.chars[token]]) if got is None else got


class _Class(_Listed):
    """The end states of the tokens that begin with a byte of a class along its chain
    (:meth:`TurnIndex._class`): a *pure* token (``pure``: every byte in the class, shared by the
    class's states: :class:`ClassTokens`) of ``n <= limit`` bytes (``lens``) ends at ``ext[n]``,
    a longer one dies; the walked ones (``ids``) end at ``to``; no other token is this part's."""

    def __init__(self, has: np.ndarray, pure: np.ndarray, lens: np.ndarray, ext: np.ndarray, limit: int,
                 ids: np.ndarray, to: np.ndarray, dead: int, vocab: Vocab) -> None:
        self.has = has  # the class: per byte, whether it is in it
        self.pure, self.lens, self.ext, self.limit = pure, lens, ext, limit
        self.ids, self.to, self.dead, self.vocab = ids, to, dead, vocab
        self._map: dict[int, int] | None = None

    def _live(self) -> np.ndarray:
        """The pure tokens that live (at most ``limit`` bytes), over the vocabulary."""
        return self.pure if self.limit >= 255 else self.pure & (self.lens <= self.limit)

    def mask(self, size: int) -> np.ndarray:
        mask = self._live().copy() if self.limit >= 255 else self._live()
        mask[self.ids[self.to != self.dead]] = True
        return mask

    def mark(self, mask: np.ndarray) -> None:
        """Set the tokens that live to True in ``mask``."""
        mask |= self._live()
        mask[self.ids[self.to != self.dead]] = True

    def fill(self, ends: np.ndarray) -> None:
        """Write the ends of this part's tokens into ``ends`` (dead there before)."""
        live = self._live()
        ends[live] = self.ext[self.lens[live]]
        ends[self.ids] = self.to

    def get(self, token: int, dead: int) -> int:
        got = self._lookup(token)
        if got is not None:
            return got
        data = self.vocab.token_bytes(token)  # pure past ``limit``: ``ext`` dead there, or walked
        if data and all(self.has.item(x) for x in data):
            return self.ext.item(min(len(data), 255))
        return dead


class _Joined:
    """A sparse walk's few live tokens and the subtrees it left to string chains (``parts``, the
    tokens that begin with a string opener: :attr:`TokenBytes.quoted`); no token is in two."""

    def __init__(self, base: _Few | _Spans, parts: list[_Chain], cls: _Class | None = None) -> None:
        self.base, self.parts, self.cls = base, parts, cls

    def mask(self, size: int) -> np.ndarray:
        if self.cls is None:
            mask = self.base.mask(size)
        else:  # the class's mask over the vocabulary, the few others set in it
            mask = self.cls.mask(size)
            self.base.mark(mask)
        for p in self.parts:
            p.mark(mask)
        return mask

    def dense(self, size: int, dead: int) -> np.ndarray:
        ends = self.base.dense(size, dead)
        for p in self.parts:
            p.fill(ends)
        if self.cls is not None:
            self.cls.fill(ends)
        return ends

    def get(self, token: int, dead: int) -> int:
        got = self.base.get(token, dead)
        for p in self.parts:
            if got != dead:
                break
            got = p.get(token, dead)
        if got == dead and self.cls is not None:
            got = self.cls.get(token, dead)
        return got


class _Except(_Listed):
    """The end states of a dense first visit (:meth:`TurnIndex._compiled`): every text token ends
    at ``usual`` but the few listed (``ids``, ``to``; dead among them); a token without text dies."""

    def __init__(self, usual: int, ids: np.ndarray, to: np.ndarray, text: np.ndarray, dead: int) -> None:
        self.usual, self.ids, self.to, self.text, self.dead = usual, ids, to, text, dead
        self._map: dict[int, int] | None = None

    def dense(self, size: int, dead: int) -> np.ndarray:
        ends = np.where(self.text, np.int32(self.usual), np.int32(dead))
        ends[self.ids] = self.to
        return ends

    def mask(self, size: int) -> np.ndarray:
        mask = self.text.copy()
        mask[self.ids[self.to == self.dead]] = False
        return mask

    def get(self, token: int, dead: int) -> int:
        got = self._lookup(token)
        if got is not None:
            return got
        return self.usual if self.text.item(token) else dead


#: A first visit's end states, as first computed: over the vocabulary, or in one of the forms above
_Ends = np.ndarray | _Few | _Spans | _Chain | _Joined | _Except


class _Writes:
    """The tokens a first visit writes: spans of the trie's token order (``VocabTrie.order``) and
    the state each ends in, as arrays (from whole levels) and as lists (from single nodes)."""

    __slots__ = ("arrays_", "hi", "lo", "to")

    def __init__(self) -> None:
        self.arrays_: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.lo: list[int] = []
        self.hi: list[int] = []
        self.to: list[int] = []

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        parts = list(self.arrays_)
        if self.lo:
            parts.append((np.array(self.lo, dtype=np.int64), np.array(self.hi, dtype=np.int64),
                          np.array(self.to, dtype=np.int32)))
        if len(parts) == 1:
            return parts[0]
        if not parts:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z.astype(np.int32)
        return tuple(np.concatenate(x) for x in zip(*parts))  # type: ignore[return-value]


class TurnIndex:
    """A turn language compiled for a vocabulary: token masks per DFA state, computed on first
    visit and kept. A first visit walks the vocabulary's byte trie from the state; inside a
    string's character count (:class:`Period`) the end states follow from those of the same
    position at a lower count already computed (one array operation), and only tokens longer than
    that argument covers are walked. ``shift_min``: the shortest such cover worth using."""

    def __init__(self, lang: TurnLanguage, tokens: TokenBytes, *, shift_min: int = 16) -> None:
        self.lang = lang
        self.tokens = tokens
        self.vocab = tokens.vocab
        self.shift_min = shift_min
        self._eos = tokens.eos
        self._masks: dict[int, np.ndarray] = {}
        self._ends: dict[int, _Ends] = {}
        self._worst: dict[int, int] = {}
        self.derived = 0  # first visits answered from a lower count (for benchmarks and tests)
        self._dead = lang.dead
        self._skips: dict[int, bytes] = {}  # per state, 1 at the bytes that leave it (``_finish``)
        self._closed: dict[int, bool] = {}  # per state, whether UTF-8 characters lead back to it
        self._wides: dict[int, bytes] = {}  # per such state, 1 at the ASCII bytes that leave it (``_finish``)
        self._step: dict[int, int] = {}  # per state, where its content bytes lead (-1: apart; ``_chain``)
        self._step8: dict[int, bool] = {}  # per state, whether every multi-byte character leads there too
        self._digit_step: dict[int, bool] = {}  # per state, whether the ten digits lead alike
        self.chained = 0  # first visits along a content chain (for benchmarks and tests)
        self.opened = 0  # string openers' subtrees settled along a chain in sparse visits (likewise)
        self.classed = 0  # first visits whose tokens in a class went along its chain (likewise)
        self._lives: dict[int, bytes] = {}  # per state, its live bytes (``_live_children``)
        # the arrays a sparse first visit reads entry by entry, as memoryviews (half the cost of
        # ``ndarray.item`` per read: :meth:`_follow`)
        self._trans_view = lang.trans.data
        self._single_view = lang.single.data
        self._count_view = lang.loop_count.data
        self._order_view = tokens.trie.order.data
        self._root_view = tokens.trie.root.data
        self._accepting_view = lang.accepting.data
        self._size = tokens.vocab.size
        self._level_views = tuple(lv.views for lv in tokens.trie.levels)
        self.lang.checked_periods  # noqa: B018 - checked now, not on a decoding step
        self.lang.loops  # noqa: B018 - likewise the loops of every state (one pass over the table)
        self.lang.loop_count  # noqa: B018 - and how many bytes loop (from the rows' runs)
        self.lang.single  # noqa: B018 - likewise the states with one live byte
        self.lang.content_step  # noqa: B018 - likewise where each state's content bytes lead

    @property
    def periods(self) -> tuple[Period, ...]:
        return self.lang.checked_periods

    def ends(self, s: int) -> np.ndarray:
        """The state after each token from ``s`` (``dead`` where it dies), computed once."""
        e = self._found(s)
        if not isinstance(e, np.ndarray):
            e = self._ends[s] = e.dense(self.vocab.size, self._dead)
        return e

    def _found(self, s: int) -> _Ends:
        """:meth:`ends` of ``s`` as first computed: all tokens, or the few that live."""
        e = self._ends.get(s)
        if e is None:
            e = self._ends[s] = self._derive(s)
        return e

    def _derive(self, s: int) -> _Ends:
        """:meth:`ends` of a state not seen before: along a content chain where every content
        character moves it alike, else from a lower count when a period allows, else walked; a
        state with one live byte down the trie alone first (:meth:`_single`)."""
        x = self._single_view[s]
        if x >= 0 and SINGLE_FIRST and not (CONTENT_CHAINS and self._opens(s, x)):
            return self._single(s, x)
        if CONTENT_CHAINS:
            chain = self._chain(s)
            if chain is not None:
                self.chained += 1
                return chain
        for p in self.periods:
            if not p.a < s < p.b:
                continue
            for base in range(s - p.k, p.a - 1, -p.k):  # the nearest known state at a lower count
                if base in self._ends:
                    self.ends(base)  # all tokens
                    n = p.longest(s, base)
                    if n >= self.shift_min:
                        return self._shifted(s, base, n, p)
                    break
        return self._walk(s)

    def _chain(self, s: int, ct: ContentTokens | None = None) -> _Chain | None:
        """:meth:`ends` of ``s`` along its content chain, or None where the chain does not hold.

        The chain: ``g[0] = s``, ``g[j + 1]`` where ``a`` leads from ``g[j]``, until a state loops
        on ``a`` (a free string), ``dead`` (the last count of a ``maxLength``) or
        :attr:`ContentTokens.longest` rows. It holds when every row ``g[j]`` sends every byte of
        :data:`CONTENT_ASCII` to ``g[j + 1]``, every control byte to ``dead`` and, for ``j <
        ContentTokens.wide``, every multi-byte UTF-8 character to ``g[j + 1]`` too (checked once
        per state, rows at once: :meth:`_steps`). Then a pure token of ``c`` characters ends at
        ``g[c]`` (one array operation over the vocabulary), a token with a control byte after a
        pure prefix dies, and the rest (a quote, a backslash, a partial character after the
        prefix: a small share) are walked from ``g[prefix]`` (:meth:`_run`). A free string's
        state, its first character's, a character count's (``maxLength``, a fixed length of
        free characters) and the inside of a multi-byte character (whose chain is ``s, dead``)
        have one; a state whose content bytes part ways (a key, a literal, ``[a-z]``) has no
        :attr:`TurnLanguage.content_step` and is walked (or goes along its class: :meth:`_class`)."""
        trans, dead = self.lang.trans, self._dead
        if s == dead:
            return None
        if ct is None:
            ct = self.tokens.content
        if ct.digits:
            guess = 0x30
            if trans.item(s, 0x35) != trans.item(s, 0x30) or trans.item(s, 0x39) != trans.item(s, 0x30):
                return None
        else:
            guess, a = 0x61, self.lang.content_step.item(s)
            if a < 0:  # the content bytes part ways (a key, a literal, a class)
                return None
            if a == dead:  # no content: only the inside of a character, where continuation bytes live
                if trans.item(s, 0x80) == dead or trans.item(s, 0xBF) == dead:
                    return None
        chain = compiled_chain() if COMPILED_WALK else None
        if chain is not None:  # the chain and its check by the compiled loop
            rows = np.empty(MOST_CHARS + 4, dtype=np.int64)  # this call's own (a walk releases the GIL)
            got = chain(trans, self.lang.content_step, int(s), int(dead), guess, ct.longest, ct.digits,
                        ct.wide, *_UTF8_ARRAYS, rows)
            if got < 0:
                return None
            g: np.ndarray | list[int] = rows[:got >> 1]
            loop = bool(got & 1)
        else:
            g, loop = self._chain_python(s, guess, ct)
            if not g:
                return None
        ext = np.full(256, dead, dtype=np.int32)
        if loop:
            most = MOST_CHARS
            ext[:len(g)] = g
            ext[len(g):MOST_CHARS + 1] = g[-1]
        else:
            most = len(g) - 1 if g[-1] != dead else len(g) - 2
            ext[:most + 1] = g[:most + 1]
        hi = int(np.searchsorted(ct.walk_chars, most, side="right"))
        return _Chain(ct.chars, ext, most, ct.walk[:hi], self._rows(ext, most, ct)[ct.walk_row[:hi]], dead,
                      ct.members, ct.member_chars)

    def _chain_python(self, s: int, guess: int, ct: ContentTokens) -> tuple[list[int], bool]:
        """:meth:`_chain`'s chain from ``s`` and whether it loops, checked row by row in Python
        (empty where a row fails)."""
        trans, dead = self.lang.trans, self._dead
        g = [s]
        loop = False
        while True:
            q = g[-1]
            if q == dead or len(g) > ct.longest:
                rows = g[:-1]
                break
            n = trans.item(q, guess)
            if n == q:
                rows, loop = g, True
                break
            g.append(n)
        if not ct.digits and self.periods:
            self._periodic(rows)
        if not (self._digit_steps(rows) if ct.digits else self._steps(rows, ct.wide)):
            return [], False
        return g, loop

    def _class(self, s: int, row: np.ndarray, live: np.ndarray) -> tuple[_Class, np.ndarray] | None:
        """The tokens from ``s`` that begin with a byte of its *class* along the class's chain, and
        the live bytes outside the class (their tokens are walked); None where there is no class.

        The class: the printable ASCII bytes (0x20–0x7F) that lead from ``s`` to the state most
        of them lead to (``[a-z0-9-]``, ``[0-9a-f]``: a pattern's, a format's character), at
        least :data:`CLASS_MIN` of them. Its chain: ``g[0] = s``, ``g[j + 1]`` the state every
        byte of the class leads to from ``g[j]``, until a state loops on the class (a ``+`` or
        ``*``), ``dead`` (a count's last), or a row sends the class's bytes apart (``cut``). Then a
        *pure* token (every byte in the class: :attr:`TokenBytes.byte_sets`, two masks over the
        vocabulary) of ``n`` bytes ends at ``g[n]``, and the others that begin in the class (a
        quote, a byte of another class or a non-ASCII byte further in; pure ones past a cut) are
        walked from ``s`` (:meth:`_run`)."""
        trans, dead = self.lang.trans, self._dead
        r = row[0x20:0x80]
        best, t = 0, dead
        for x in CLASS_PROBES:  # the class of a letter, a digit or a capital: the largest
            q = row.item(x)
            if q != dead and q != t:
                n = int(np.count_nonzero(r == q))
                if n > best:
                    best, t = n, q
        if best < CLASS_MIN:
            return None
        has = np.zeros(256, dtype=bool)
        has[0x20:0x80] = r == t
        others = live[~has[live]]
        if others.size > LIVE_LOOKUPS:
            return None
        members = np.flatnonzero(has)
        runs = _runs(tuple(members.tolist()))
        c0 = runs[0][0]
        w = trans.itemsize
        g = [s]
        q, most = t, -1  # most: the longest pure token known to end on the chain (-1: any)
        while True:
            g.append(q)
            if len(g) > MOST_CHARS:
                most = len(g) - 1
                break
            u = trans.item(q, c0)
            line = trans[q].tobytes()
            one = line[w * c0:w * c0 + w]
            if any(line[w * a:w * (b + 1)] != one * (b + 1 - a) for a, b in runs):
                most = len(g) - 1  # cut: longer pure tokens are walked
                break
            if u == q or u == dead:
                break
            q = u
        ext = np.full(256, dead, dtype=np.int32)
        ext[:len(g)] = g
        if most < 0 and trans.item(g[-1], c0) == g[-1]:
            ext[len(g):] = g[-1]  # a loop: every longer pure token stays there
        ct = self.tokens.class_tokens(has)
        lens = self.tokens.lengths8
        walk, at = ct.walk, ct.walk_at
        if 0 <= most < ct.longest:  # pure tokens past the cut: walked from the cut
            past = np.flatnonzero(ct.pure & (lens > most))
            walk = np.concatenate([walk, past])
            at = np.concatenate([at, np.full(past.size, most, dtype=np.int64)])
        ends = np.full(walk.size, dead, dtype=np.int32)
        if walk.size:  # from the first byte out of the class, on the chain (past a cut: from ``s``)
            at = np.where(at < (len(g) if most >= 0 else 256), at, 0)
            off = self.vocab.offsets
            self._run(np.arange(walk.size), ext[at], off[walk] + at, off[walk + 1], ends)
        limit = 255 if most < 0 and ext[255] != dead else min(most if most >= 0 else len(g) - 1, 255)
        self.classed += 1
        return _Class(has, ct.pure, lens, ext, limit if limit < ct.longest else 255, walk, ends, dead,
                      self.vocab), others

    def _rows(self, ext: np.ndarray, most: int, ct: ContentTokens) -> np.ndarray:
        """The end of each walked row of :class:`ContentTokens` whose prefix has at most ``most``
        characters, from ``ext[prefix characters]``: the first two bytes by the rows' distinct
        (characters, first byte) pairs and (…, second byte) triples, the rest of the rows whose
        triple lives (:meth:`_run`). By the compiled loop where there is one, every row from its
        first byte (:func:`~ltlagent.decode.triewalk.compiled_run`)."""
        trans, dead = self.lang.trans, self._dead
        n = int(np.searchsorted(ct.row_chars, most, side="right"))
        if COMPILED_WALK and compiled_run() is not None:
            out = np.empty(n, dtype=np.int32)
            self._run(np.arange(n, dtype=np.int64), ext[ct.row_chars[:n]], ct.row_at[:n], ct.row_end[:n], out)
            return out
        out = np.full(n, dead, dtype=np.int32)
        p = int(np.searchsorted(ct.pair_chars, most, side="right"))
        one = trans[ext[ct.pair_chars[:p]], ct.pair_byte[:p]]  # after each pair's first byte
        t = int(np.searchsorted(ct.tri_chars, most, side="right"))
        q1 = one[ct.tri_pair[:t]]
        second = ct.tri_byte[:t]
        short = second < 0  # a row of one byte: its own triple
        rows = ct.tri_lo[:t]
        out[rows[short]] = q1[short]
        q2 = trans[q1, np.maximum(second, 0)]
        live = np.flatnonzero((q2 != dead) & ~short)
        if live.size:
            ids, owner = ranges(ct.tri_lo[live], ct.tri_hi[live])
            self._run(ids, q2[live][owner], ct.row_at[ids] + 2, ct.row_end[ids], out)
        return out

    def _digit_steps(self, rows: list[int]) -> bool:
        """Whether every state of ``rows`` sends the ten digits where ``0`` leads (:meth:`_steps`
        for the class of digits); each state checked once, kept."""
        step = self._digit_step
        new = [q for q in dict.fromkeys(rows) if q not in step]
        if new:
            t = self.lang.trans[new][:, _DIGITS]
            for q, good in zip(new, (t == t[:, :1]).all(axis=1).tolist()):
                step[q] = good
        return all(step[q] for q in rows)

    def _steps(self, rows: list[int], wide: int) -> bool:
        """Whether every state of ``rows`` sends the content bytes (:data:`CONTENT_ASCII`) where
        ``a`` leads and the control bytes to ``dead`` (:attr:`TurnLanguage.content_step`), and the
        first ``wide`` rows every multi-byte character there too; each state checked once (all new
        ones at once), kept."""
        step, step8 = self._step, self._step8
        content = self.lang.content_step
        for q in rows:
            if q not in step:
                step[q] = content.item(q)
            if step[q] < 0:
                return False
        new = [q for q in dict.fromkeys(rows[:wide]) if q not in step8]
        if new:
            for q, good in zip(new, self._utf8_to(new).tolist()):
                step8[q] = good
        return all(step8[q] for q in rows[:wide])

    def _utf8_to(self, qs: list[int]) -> np.ndarray:
        """Whether every multi-byte UTF-8 character leads each state of ``qs`` where its content
        bytes do (``_step``): the character ranges of :data:`_UTF8_SEQUENCES` stepped all at once
        (:class:`_Utf8Steps`), each byte's states one per row and range."""
        u = _UTF8_STEPS
        trans = self.lang.trans
        if len(qs) <= UTF8_ROWS:  # few rows (a free string's): row by row, slices of their bytes
            return np.array([self._utf8_row(q, self._step[q]) for q in qs], dtype=bool)
        to = np.array([self._step[q] for q in qs], dtype=np.int64)
        got = trans[qs][:, u.leads]  # [rows, leads]
        ok = (got == got[:, u.lead_first]).all(axis=1)
        p = got[:, u.group_first]  # [rows, groups]: the state after each range's lead
        for valid, first, grows in u.steps:
            got = trans[p[:, :, None], u.cont]  # [rows, groups, 64]
            q = got[:, np.arange(first.size), first]  # [rows, groups]
            ok &= ((got == q[:, :, None]) | ~valid).all(axis=(1, 2))
            p = np.where(grows, q, p)
        return ok & (p == to[:, None]).all(axis=1)

    def _utf8_row(self, q: int, to: int, seen: set[int] | None = None) -> bool:
        """:meth:`_utf8_to` of one state: each range's bytes compared as one slice of the row's
        bytes against its first state repeated. ``seen``: where it holds, gets ``q`` and the
        states inside the characters (every row read)."""
        trans = self.lang.trans
        w = trans.itemsize
        rows: dict[int, bytes] = {}
        for spans, rest in _UTF8_SPANS:
            row = rows.get(q)
            if row is None:
                row = rows[q] = trans[q].tobytes()
            lo = spans[0][0]
            one = row[w * lo:w * lo + w]
            if any(row[w * a:w * b] != one * (b - a) for a, b in spans):
                return False
            p = trans.item(q, lo)
            for r in rest:
                row = rows.get(p)
                if row is None:
                    row = rows[p] = trans[p].tobytes()
                one = row[w * r.start:w * r.start + w]
                if row[w * r.start:w * r.stop] != one * len(r):
                    return False
                p = trans.item(p, r.start)
            if p != to:
                return False
        if seen is not None:
            seen.update(rows)
        return True

    def _periodic(self, rows: list[int]) -> None:
        """Check the rows of a long content chain inside a :class:`Period` (a ``maxLength``'s
        counts) from its first row: where row ``g[0]`` sends the content bytes and every
        multi-byte character to ``g[1] = g[0] + k`` and the control bytes to ``dead``, through
        states inside the characters that stay in ``[a, b)``, row ``g[j]`` does the same, shifted
        by ``j * k``, as long as each of those states shifted stays below ``b`` (the rows of
        ``s`` and ``s + k`` agree, moved by ``k``, for ``s < b - k``). Those rows are marked
        checked (``_step``, ``_step8``) without reading them; the others are left to
        :meth:`_steps`."""
        if len(rows) <= PERIOD_ROWS:
            return
        found = next(((i, p) for i, q in enumerate(rows[:PERIOD_ROWS]) if q not in self._step
                      for p in self.periods if p.a <= q < p.b), None)
        if found is None:
            return
        i, p = found
        rows = rows[i:]  # the rows above are checked already, or left to :meth:`_steps`
        q0 = rows[0]
        if len(rows) < 2 or rows[1] != q0 + p.k:
            return
        if not self._steps([q0], 0) or self._step[q0] != rows[1]:
            return
        seen: set[int] = set()
        if not self._utf8_row(q0, rows[1], seen) or min(seen) < p.a:
            return
        self._step8[q0] = True
        top = max(seen | {rows[1]})
        step, step8 = self._step, self._step8
        for j in range(1, len(rows)):
            q = q0 + j * p.k
            if rows[j] != q or top + j * p.k >= p.b:
                break
            step[q] = q + p.k
            step8[q] = True

    def _run(self, ids: np.ndarray, cur: np.ndarray, at: np.ndarray, end: np.ndarray,
             out: np.ndarray) -> None:
        """``out[ids[i]]``: the state after the bytes ``Vocab.flat[at[i]:end[i]]`` from ``cur[i]``
        (``at[i] <= end[i]``), each: byte columns at once while many live, then token by token (by
        the compiled loop where there is one: :func:`~ltlagent.decode.triewalk.compiled_run`)."""
        trans, dead = self.lang.trans, self._dead
        run = compiled_run() if COMPILED_WALK else None
        if run is not None:
            run(trans, int(dead), self.tokens.flat, ids.astype(np.int64, copy=False),
                cur.astype(np.int32, copy=False), at.astype(np.int64, copy=False),
                end.astype(np.int64, copy=False), out)
            return
        flat = self.tokens.flat
        done = at >= end
        out[ids[done]] = cur[done]
        live = np.flatnonzero(~done)
        walk = np.stack([ids[live], cur[live], at[live], end[live]])  # live rows: id, state, next byte, end
        while walk.shape[1] > SMALL_LEVEL:
            q = walk[1] = trans[walk[1], flat[walk[2]]]
            walk[2] += 1
            done = walk[2] == walk[3]
            out[walk[0, done]] = q[done]
            walk = walk[:, (q != dead) & ~done]
        if walk.size:  # token by token, over the runs of bytes that loop on a state at once
            data, count, skips, view = self.vocab.flat, self._count_view, self._skips, self._trans_view
            for i, q, p, e in walk.T.tolist():
                while p < e:
                    if count[q] >= DENSE_LOOPS:
                        skip = skips.get(q)
                        if skip is None:  # 1 at the bytes that leave q
                            skip = skips[q] = (trans[q] != q).view(np.uint8).tobytes()
                        k = data[p:e].translate(skip).find(1)
                        if k < 0:
                            break
                        p += k
                    q = view[q, data[p]]
                    if q == dead:
                        break
                    p += 1
                out[i] = q

    def _shifted(self, s: int, base: int, n: int, p: Period) -> np.ndarray:
        low = self.ends(base)
        e = np.where((low >= p.threshold(n)) & (low < p.b), low + (s - base), low).astype(np.int32)
        cols = self.tokens.columns
        if n < len(cols):  # tokens longer than n bytes: walked from s
            rows = cols[n]
            cur = np.full(rows.size, s, dtype=np.int32)
            lens = self.vocab.lengths[rows]
            trans, mat, dead = self.lang.trans, self.tokens.matrix, self.lang.dead
            live = np.arange(rows.size)
            for j in range(len(cols)):
                live = live[(lens[live] > j) & (cur[live] != dead)]
                if not live.size:
                    break
                cur[live] = trans[cur[live], mat[rows[live], j]]
            e[rows] = np.where(self.tokens.text[rows], cur, dead)
        self.derived += 1
        return e

    def _walk(self, s: int) -> _Ends:
        """The DFA state after each token from ``s`` (``dead`` where it dies), by walking the
        vocabulary's byte trie level by level (:mod:`ltlagent.decode.trie`). A node leaves the walk
        with its whole subtree when its byte is rejected (every token below dies: in a JSON call
        most bytes are rejected in most states) or when every byte below it loops on its state
        (every token below ends there: a string's characters). Tokens are written only where they
        end elsewhere than most tokens do (:meth:`_usual`). A level with many nodes is stepped at
        once, one table lookup; a level with few node by node in Python, where numpy's call
        overhead would cost more than the work."""
        lang = self.lang
        trans, dead = lang.trans, lang.dead
        row = trans[s]
        single = lang.single
        x = single.item(s)
        live = np.array([x]) if x >= 0 else np.flatnonzero(row != dead)
        cls = self._class(s, row, live) if CLASS_CHAINS and live.size >= CLASS_MIN else None
        part: _Class | None = None
        if cls is not None:  # the tokens that begin in the class along its chain, the others walked
            part, live = cls
            usual = dead
        else:
            usual = self._usual(s, row, live)
            if usual < 0:
                return self._walk_levels(s)
        trie = self.tokens.trie
        levels = trie.levels
        if not levels:
            return np.full(self.vocab.size, dead, dtype=np.int32)
        if usual != dead:
            kids: np.ndarray | list[int] = np.arange(levels[0].byte.size)
        else:  # the root's children by the live bytes
            root = trie.root
            kids = []
            for b in live.tolist():
                i = root.item(b)
                if i >= 0:
                    kids.append(i)
        parts: list[_Chain] = []  # subtrees that open a string, settled along its chain
        skip = -1  # such a subtree's node at level 1
        if usual == dead and CONTENT_CHAINS:
            both = self.tokens.quoted_both
            quoted = self.tokens.quoted
            if both is not None and (part is None or not (part.has[0x22] or part.has[0x20])):
                q = trans.item(s, 0x22)
                if q != dead and q == trans.item(trans.item(s, 0x20), 0x22):  # both openers: one chain
                    chain = self._chain(q, both[0])
                    if chain is not None:
                        parts.append(chain)
                        kids = [i for i in kids if i != both[1]]
                        skip = both[2]
                        quoted = ()
            for after, ct, level, node in quoted:
                if part is not None and part.has[after[0]]:
                    continue  # its tokens begin in the class: the class's part
                q = s
                for x in after:
                    q = trans.item(q, x)
                    if q == dead:
                        break
                chain = self._chain(q, ct) if q != dead else None
                if chain is None:
                    continue
                parts.append(chain)
                if level:
                    skip = node
                else:
                    kids = [i for i in kids if i != node]
            for first, ct in self.tokens.numbers:  # a number's digits, or a date's
                q = trans.item(s, first[0])
                if q == dead or any(trans.item(s, x) != q for x in first):
                    continue
                if part is not None and any(part.has[x] for x in first):
                    break  # its tokens begin in the class: the class's part
                chain = self._chain(q, ct)
                if chain is None:
                    continue
                parts.append(chain)
                kids = [i for i in kids if self.tokens.level_bytes[0][i] not in first]
                break
            self.opened += len(parts)
        wrap = usual if usual != dead and self.utf8_closed(usual) else -1
        walk = compiled_walk() if COMPILED_WALK else None
        if walk is not None:  # the same walk, compiled (:mod:`ltlagent.decode.triewalk`)
            joined = bool(parts) or part is not None
            got = self._compiled(walk, s, kids, usual, wrap, skip, joined)
            if not joined:
                return got
            assert isinstance(got, _Few)
            return _Joined(got, parts, part)
        if usual != dead:
            ends = np.full(self.vocab.size, usual, dtype=np.int32)
            ends[self.tokens.silent] = dead
        out = _Writes()
        cur = row[levels[0].byte[np.asarray(kids, dtype=np.int64)]]  # the state after each kid's byte
        self._levels(0, kids, cur, {}, usual, wrap, skip, out)
        if usual == dead and not out.arrays_:  # a few spans: kept as spans, arrays when asked
            few: _Few | _Spans = _Spans(trie.order, out.lo, out.hi, out.to, self._order_view)
            return _Joined(few, parts, part) if parts or part is not None else few
        lo, hi, to = out.arrays()
        if usual == dead:  # the few live tokens, without an array over the vocabulary
            idx, owner = ranges(lo, hi)
            few = _Few(trie.order[idx], to[owner])
            return _Joined(few, parts, part) if parts or part is not None else few
        if lo.size:
            idx, owner = ranges(lo, hi)
            ends[trie.order[idx]] = to[owner]
        return ends

    def _compiled(self, walk: Callable[..., int], s: int, kids: np.ndarray | list[int], usual: int,
                  wrap: int, skip: int, joined: bool = False) -> _Few | _Except | np.ndarray:
        """:meth:`_walk`'s trie walk from ``s`` by the compiled loop (:func:`compiled_walk`): the
        level-0 nodes ``kids`` and, below them, all but the level-1 node ``skip``. The tokens that
        end elsewhere than ``usual`` come back listed (:class:`_Few` where ``usual`` is dead; a
        dense visit's as :class:`_Except`, or an array over the vocabulary where they are many): a
        fresh array over a 128k vocabulary is 125 pages the system must fault in (170 µs), most of
        a first visit's time, where the list has a few hundred entries."""
        pre = self.tokens.preorder
        first_ok = np.zeros(256, dtype=bool)
        first_ok[self.tokens.trie.levels[0].byte[np.asarray(kids, dtype=np.int64)]] = True
        first_ok.flags.writeable = False  # read-only, as _ONE_BYTE's rows: one signature
        at = int(pre.at[1][skip]) if skip >= 0 and pre.levels > 1 else -1
        return self._listed(*self._walked(walk, s, usual, wrap, first_ok, at), usual, joined)

    def _walked(self, walk: Callable[..., int], s: int, usual: int, wrap: int, first_ok: np.ndarray,
                at: int) -> tuple[np.ndarray, np.ndarray, int]:
        """The compiled walk from ``s``: its lists of token ids and end states, and how many it
        wrote (:meth:`_compiled`). The lists are the calling thread's own (a walk releases the GIL:
        two threads may walk one index at once), kept for its next walk
        (:attr:`TokenBytes.walk_lists`): :data:`FEW_LISTED` tokens at first (most visits write a
        few; from the heap, not fresh pages), over the vocabulary once a walk has more to write
        (then walked again)."""
        pre = self.tokens.preorder
        mine = self.tokens.walk_lists
        while True:
            lists = getattr(mine, "lists", None)
            if lists is None:
                size = min(self._size, FEW_LISTED)
                lists = mine.lists = (np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int32))
            ids, to = lists
            n = walk(self.lang.trans, int(s), self._dead, int(usual), int(wrap), first_ok, at, pre.root,
                     pre.nodes, pre.below, pre.whole, self.lang.loops, self.lang.loop_count,
                     self.tokens.trie.order, pre.levels, ids, to)
            if n >= 0:
                return ids, to, int(n)
            mine.lists = (np.empty(self._size, dtype=np.int64), np.empty(self._size, dtype=np.int32))

    def _listed(self, ids: np.ndarray, to: np.ndarray, n: int, usual: int,
                joined: bool) -> _Few | _Except | np.ndarray:
        """The first ``n`` entries of a walk's lists as :meth:`_compiled` returns them (``joined``:
        as a :class:`_Few` however many, to be joined with a sparse visit's chains)."""
        few = n <= self._size // EXCEPT_SHARE
        if usual == self._dead and (few or joined):
            return _Few(ids[:n].copy(), to[:n].copy())
        if few:
            return _Except(usual, ids[:n].copy(), to[:n].copy(), self.tokens.text, self._dead)
        ends = np.full(self._size, usual, dtype=np.int32)
        ends[self.tokens.silent] = self._dead
        ends[ids[:n]] = to[:n]
        return ends

    def _levels(self, d: int, kids: np.ndarray | list[int], cur: np.ndarray | list[int],
                pending: dict[int, tuple[list[int], list[int]]], usual: int, wrap: int, skip: int,
                out: _Writes) -> None:
        """The level walk of :meth:`_walk` from level ``d``: nodes ``kids`` reached in states
        ``cur``, and the nodes where paths followed alone stopped (``pending``, per level), their
        tokens written to ``out``."""
        dead, single, levels = self._dead, self._single_view, self.tokens.trie.levels
        while d < len(levels):
            more = pending.pop(d, None)
            if more is not None:
                kids, cur = _ints(kids) + more[0], _ints(cur) + more[1]
            if usual == dead and 0 < len(kids) <= FOLLOW_MOST:  # one live byte: followed alone
                rest: list[int] = []
                rest_states: list[int] = []
                for n, t in zip(_ints(kids), _ints(cur)):
                    if single[t] < 0:
                        rest.append(n)
                        rest_states.append(t)
                    else:
                        self._follow(d, n, t, skip, out, pending)
                kids, cur = rest, rest_states
            if len(kids):
                if len(kids) > SMALL_LEVEL:
                    nodes, states = self._level(d, np.asarray(kids), np.asarray(cur, dtype=np.int32), usual,
                                                wrap, out)
                else:
                    nodes, states = self._level_small(d, _ints(kids), _ints(cur), usual, wrap, out)
                if not len(nodes) or d + 1 == len(levels):
                    kids, cur = [], []
                elif usual != dead and self._few_below(d, nodes):  # few tokens, many levels: one by one
                    self._finish(d, _ints(nodes), _ints(states), usual, wrap, out)
                    break
                else:
                    kids, cur = self._children(d, nodes, states, usual)
                    if not d and skip >= 0:
                        if isinstance(kids, np.ndarray):
                            keep = kids != skip
                            kids, cur = kids[keep], np.asarray(cur)[keep]
                        else:
                            cur = [t for i, t in zip(kids, _ints(cur)) if i != skip]
                            kids = [i for i in kids if i != skip]
            if not len(kids) and not pending:
                break
            d += 1

    def _opens(self, s: int, x: int) -> bool:
        """Whether the one live byte ``x`` of ``s`` may open a string whose tokens :meth:`_walk`
        settles along a chain (:attr:`TokenBytes.quoted`): a space, or a quote into a state whose
        content bytes move alike (:attr:`TurnLanguage.content_step`; a key's quote is not one).
        A digit's chains (:attr:`TokenBytes.numbers`) need several live digits: never here."""
        if x == 0x20:
            return True
        return x == 0x22 and self.lang.content_step.item(self._trans_view[s, 0x22]) >= 0

    def _single(self, s: int, x: int) -> _Spans | _Few:
        """:meth:`_walk` of a state with one live byte ``x`` that opens no string (:meth:`_opens`; a
        key's or a literal's byte: most first visits inside arguments): the trie's path along
        the states' bytes while they have one live byte (as :meth:`_follow`, each node's own
        tokens a span), then the level walk from the node where a state has more (a token that
        crosses into a value: :meth:`_levels`). The general walk's set-up is not paid. By the
        compiled walk where there is one (from ``x`` alone: :meth:`_compiled`)."""
        walk = compiled_walk() if COMPILED_WALK else None
        if walk is not None and self._level_views:
            got = self._listed(*self._walked(walk, s, self._dead, -1, _ONE_BYTE[x], -1), self._dead, True)
            assert isinstance(got, _Few)
            return got
        out = _Writes()
        n = self._root_view[x] if self._level_views else -1
        if n >= 0:
            pending: dict[int, tuple[list[int], list[int]]] = {}
            self._follow(0, n, self._trans_view[s, x], -1, out, pending)
            if pending:
                self._levels(min(pending), [], [], pending, self._dead, -1, -1, out)
        order = self.tokens.trie.order
        if not out.arrays_:
            return _Spans(order, out.lo, out.hi, out.to, self._order_view)
        lo, hi, to = out.arrays()
        idx, owner = ranges(lo, hi)
        return _Few(order[idx], to[owner])

    def _follow(self, d: int, n: int, t: int, skip: int, out: _Writes,
                pending: dict[int, tuple[list[int], list[int]]]) -> None:
        """Node ``n`` of level ``d`` reached in ``t``, a state with one live byte (a key's, a
        literal's), followed down the trie alone: each node's own tokens written as a span, then
        its child by that byte, while the states have one live byte; the node where a state has
        more is left in ``pending`` for the level walk (``skip``: the level-1 node of a subtree
        settled apart)."""
        trans, single, views = self._trans_view, self._single_view, self._level_views
        below = self.tokens.level_bytes
        lo, hi, to = out.lo, out.hi, out.to
        last = len(views) - 1
        while True:
            x = single[t]
            if x < 0:
                more = pending.setdefault(d, ([], []))
                more[0].append(n)
                more[1].append(t)
                return
            span_lo, own_hi, child_lo, child_hi, _span_hi, _height = views[d]
            a, b = span_lo[n], own_hi[n]
            if b > a:
                lo.append(a)
                hi.append(b)
                to.append(t)
            if d == last:
                return
            c = below[d + 1].find(x, child_lo[n], child_hi[n])
            if c < 0 or (not d and c == skip):
                return
            n, t, d = c, trans[t, x], d + 1

    def _usual(self, s: int, row: np.ndarray, live: np.ndarray) -> int:
        """Where most tokens from ``s`` end: ``s`` when many bytes loop on it; the state most live
        bytes lead to when that one does (a string's first character); ``dead`` otherwise, and
        -1 where many bytes live and none of these hold (a character count: no subtree loops, the
        dense level walk is cheaper)."""
        count = self.lang.loop_count
        if count.item(s) >= DENSE_LOOPS:
            return s
        if live.size < DENSE_LOOPS:
            return self._dead
        to, times = np.unique(row[live], return_counts=True)
        best = int(to[times.argmax()])
        return best if count[best] >= DENSE_LOOPS else -1

    def _level(self, d: int, nodes: np.ndarray, cur: np.ndarray, usual: int, wrap: int,
               out: _Writes) -> tuple[np.ndarray | list[int], np.ndarray | list[int]]:
        """Nodes of level ``d`` reached in states ``cur``, at once: their tokens written where they
        do not end at ``usual`` (``out``), and the nodes to walk on (live, not every byte below
        looping)."""
        lang = self.lang
        dead = lang.dead
        lv = self.tokens.trie.levels[d]
        live = cur != dead
        if not live.all():
            if usual != dead:
                gone = nodes[~live]
                out.arrays_.append((lv.span_lo[gone], lv.span_hi[gone],
                                    np.full(gone.size, dead, dtype=np.int32)))
            nodes, cur = nodes[live], cur[live]
        left = lv.below[nodes] & ~lang.loops[cur]  # bytes below that do not loop
        covered = ~left.any(axis=1)
        if wrap >= 0:  # or only bytes of multi-byte characters, whole, which lead back to ``wrap``
            covered |= ~left[:, :2].any(axis=1) & lv.whole[nodes] & (cur == wrap)
        put = cur != usual
        if put.any():
            w = nodes[put]
            out.arrays_.append((lv.span_lo[w], np.where(covered[put], lv.span_hi[w], lv.own_hi[w]), cur[put]))
        nodes, cur = nodes[~covered], cur[~covered]
        if nodes.size <= SMALL_LEVEL:
            return nodes.tolist(), cur.tolist()
        return nodes, cur

    def _level_small(self, d: int, nodes: list[int], cur: list[int], usual: int, wrap: int,
                     out: _Writes) -> tuple[list[int], list[int]]:
        """:meth:`_level` node by node, for few nodes."""
        lang = self.lang
        dead, loops = self._dead, lang.loops
        lv = self.tokens.trie.levels[d]
        span_lo, own_hi, _lo, _hi, span_hi, height = self._level_views[d]
        below = lv.below
        count = self._count_view
        lo_w, hi_w, to_w = out.lo, out.hi, out.to
        walk: list[int] = []
        walk_states: list[int] = []
        for i, t in zip(nodes, cur):
            if t == dead:
                if usual != dead:
                    lo_w.append(span_lo[i])
                    hi_w.append(span_hi[i])
                    to_w.append(dead)
                continue
            if not count[t]:  # nothing loops (a key, a literal): only a leaf is settled here
                covered = not height[i]
            else:
                left = int.from_bytes(below[i].tobytes(), "little") \
                    & ~int.from_bytes(loops[t].tobytes(), "little")
                covered = not left or (t == wrap and not left & _ASCII and lv.whole.item(i))
            if t != usual:
                lo_w.append(span_lo[i])
                hi_w.append((span_hi if covered else own_hi)[i])
                to_w.append(t)
            if not covered:
                walk.append(i)
                walk_states.append(t)
        return walk, walk_states

    def utf8_closed(self, t: int) -> bool:
        """Whether every multi-byte UTF-8 character read from ``t`` leads back to ``t`` (a JSON
        string's characters): then a trie subtree whose ASCII bytes loop on ``t`` and whose tokens
        go on in whole characters ends at ``t`` too. The states after each byte of each character
        range, as sets (``np.unique``), once per state."""
        hit = self._closed.get(t)
        if hit is None and self._utf8_row(t, t):  # each range's bytes alike, back to t: closed
            hit = self._closed[t] = True
        if hit is None:
            trans = self.lang.trans
            hit = True
            for leads, rest in _UTF8_SEQUENCES:
                qs = np.unique(trans[t, list(leads)])
                for r in rest:
                    qs = np.unique(trans[qs, r.start:r.stop])
                if qs.size != 1 or qs.item(0) != t:
                    hit = False
                    break
            self._closed[t] = hit
        return hit

    def _few_below(self, d: int, nodes: np.ndarray | list[int]) -> bool:
        """Whether ``nodes`` (level ``d``) have at most :data:`FINISH_TOKENS` tokens below per
        level their subtrees reach: cheaper finished one by one (:meth:`_finish`) than by levels."""
        lv = self.tokens.trie.levels[d]
        if isinstance(nodes, np.ndarray):
            below = int((lv.span_hi[nodes] - lv.own_hi[nodes]).sum())
            deep = int(lv.height[nodes].max())
        else:
            _lo, own_hi, _clo, _chi, span_hi, height = self._level_views[d]
            below = sum(span_hi[i] - own_hi[i] for i in nodes)
            deep = max(height[i] for i in nodes)
        return below <= min(FINISH_TOKENS * deep, FINISH_MOST)

    def _finish(self, d: int, nodes: list[int], cur: list[int], usual: int, wrap: int, out: _Writes) -> None:
        """The tokens below ``nodes`` (level ``d``, in states ``cur``), each from its byte
        ``d + 1`` on, jumping over the bytes that loop on the state it is in (one search per
        state change: the long runs of a long token cost nothing); in ``wrap`` (a state whole
        UTF-8 characters lead back to, :meth:`utf8_closed`) over whole characters too."""
        trans, dead = self.lang.trans, self._dead
        lv = self.tokens.trie.levels[d]
        flat, offsets, order = self.vocab.flat, self.vocab.offsets, self.tokens.trie.order
        idx, owner = ranges(lv.own_hi[nodes], lv.span_hi[nodes])
        toks = order[idx]
        starts, stops = (offsets[toks] + (d + 1)).tolist(), offsets[toks + 1].tolist()
        skips = self._skips
        lo_w, hi_w, to_w = out.lo, out.hi, out.to
        wide = self._wide(wrap) if wrap >= 0 else b""
        for p, o, a, b in zip(idx.tolist(), owner.tolist(), starts, stops):
            rest = flat[a:b]
            q, k = cur[o], 0
            while True:
                if q == wrap:  # the next ASCII byte that leaves, if the characters before are whole
                    j = rest.translate(wide).find(1, k)
                    if _whole(rest[k:] if j < 0 else rest[k:j]):
                        if j < 0:
                            break
                        k = j
                skip = skips.get(q)
                if skip is None:  # 1 at the bytes that leave q
                    skip = skips[q] = (trans[q] != q).view(np.uint8).tobytes()
                k = rest.translate(skip).find(1, k)
                if k < 0:
                    break
                q = trans.item(q, rest[k])
                if q == dead:
                    break
                k += 1
            if q != usual:
                lo_w.append(p)
                hi_w.append(p + 1)
                to_w.append(q)

    def _wide(self, t: int) -> bytes:
        """1 at the ASCII bytes that leave ``t`` (0 at every other byte), for ``bytes.translate``:
        :meth:`_finish`'s jump over whole characters in a UTF-8-closed state, built once per state."""
        got = self._wides.get(t)
        if got is None:
            got = self._wides[t] = (self.lang.trans[t] != t).view(np.uint8).tobytes()[:128] + bytes(128)
        return got

    def _children(self, d: int, nodes: np.ndarray | list[int], cur: np.ndarray | list[int],
                  usual: int) -> tuple[np.ndarray | list[int], np.ndarray | list[int]]:
        """The children of ``nodes`` (level ``d``, in states ``cur``) and the states their bytes
        lead to; where every rejected byte's tokens die anyway (``usual`` dead), only the live ones."""
        trans, dead = self.lang.trans, self._dead
        lv, nxt = self.tokens.trie.levels[d], self.tokens.trie.levels[d + 1]
        if isinstance(nodes, np.ndarray):
            kids, owner = ranges(lv.child_lo[nodes], lv.child_hi[nodes])
            states = trans[np.asarray(cur)[owner], nxt.byte[kids]]
        elif usual == dead:
            return self._live_children(d, nodes, _ints(cur))
        elif sum(self._level_views[d][3][i] - self._level_views[d][2][i] for i in nodes) <= SMALL_LEVEL:
            _lo, _own, child_lo, child_hi, _hi, _height = self._level_views[d]
            view, below = self._trans_view, self.tokens.level_bytes[d + 1]
            few: list[int] = []
            few_states: list[int] = []
            for i, t in zip(nodes, cur):
                for c in range(child_lo[i], child_hi[i]):
                    q = view[t, below[c]]
                    if q != dead or usual != dead:
                        few.append(c)
                        few_states.append(q)
            return few, few_states
        else:
            parts: list[tuple[np.ndarray, np.ndarray]] = []
            for i, t in zip(nodes, cur):
                a, b = lv.child_lo.item(i), lv.child_hi.item(i)
                parts.append((np.arange(a, b), trans[t, nxt.byte[a:b]]))
            if len(parts) == 1:
                kids, states = parts[0]
            else:
                kids = np.concatenate([p[0] for p in parts])
                states = np.concatenate([p[1] for p in parts])
        if usual == dead:
            keep = states != dead
            kids, states = kids[keep], states[keep]
        return kids, states

    def _live_children(self, d: int, nodes: list[int], cur: list[int]) -> tuple[list[int], list[int]]:
        """:meth:`_children` of few nodes where only the live ones count (a sparse state: keys,
        literals), in Python: per node, its children stepped where they are few, else the state's
        live bytes looked up among them (``bytes.find`` in the level's bytes: a node's children
        are sorted by byte) where those are few; a node with many of both at once in numpy."""
        trans, dead = self.lang.trans, self._dead
        view = self._trans_view
        below = self.tokens.level_bytes[d + 1]
        _span_lo, _own_hi, child_lo, child_hi, _span_hi, _height = self._level_views[d]
        lives = self._lives
        few: list[int] = []
        few_states: list[int] = []
        for i, t in zip(nodes, cur):
            a, b = child_lo[i], child_hi[i]
            if a == b:
                continue
            if b - a <= LIVE_LOOKUPS:  # few children: each stepped
                for c in range(a, b):
                    q = view[t, below[c]]
                    if q != dead:
                        few.append(c)
                        few_states.append(q)
                continue
            live = lives.get(t)
            if live is None:
                live = lives[t] = np.flatnonzero(trans[t] != dead).astype(np.uint8).tobytes()
            if len(live) <= LIVE_LOOKUPS:  # few live bytes: each looked up among the children
                for x in live:
                    c = below.find(x, a, b)
                    if c >= 0:
                        few.append(c)
                        few_states.append(view[t, x])
            else:
                states = trans[t, self.tokens.trie.levels[d + 1].byte[a:b]]
                keep = np.flatnonzero(states != dead)
                few += (keep + a).tolist()
                few_states += states[keep].tolist()
        return few, few_states

    def _walk_levels(self, s: int) -> _Ends:
        """:meth:`_walk` where many bytes live and no subtree loops (a string's character count):
        every node of a level stepped at once while many live (the dead row maps dead to dead, so
        nothing is filtered), then only the live nodes' children."""
        trans, dead = self.lang.trans, self.lang.dead
        levels = self.tokens.trie.levels
        walk = compiled_walk() if COMPILED_WALK else None
        if walk is not None and levels:  # the live tokens by the compiled walk
            return self._compiled(walk, s, np.arange(levels[0].byte.size), dead, -1, -1)
        ends = np.full(self.vocab.size, dead, dtype=np.int32)
        if not levels:
            return ends
        owners = self.tokens.token_nodes
        cur = trans[s, levels[0].byte]  # every node of the level (dense) or the live ones (sparse)
        nodes: np.ndarray | None = None  # sparse: which nodes ``cur`` is about
        for d, lv in enumerate(levels):
            if d and nodes is None:
                cur = trans[cur[lv.parent], lv.byte]
            elif d:
                above = levels[d - 1]
                nodes, owner = ranges(above.child_lo[nodes], above.child_hi[nodes])
                cur = trans[cur[owner], lv.byte[nodes]]
            if nodes is None:
                live = np.flatnonzero(cur != dead)
                if not live.size:
                    break
                ends[lv.tokens] = cur[owners[d]]
                if 4 * live.size < cur.size:  # few live nodes: only their children from here
                    nodes, cur = live, cur[live]
                continue
            alive = cur != dead
            nodes, cur = nodes[alive], cur[alive]
            if not nodes.size:
                break
            tok, owner = ranges(lv.tok_lo[nodes], lv.tok_hi[nodes])
            ends[lv.tokens[tok]] = cur[owner]
        return ends

    def walk_tokens(self, s: int) -> np.ndarray:
        """:meth:`_walk` by the other method: every token's bytes at once over the padded byte
        matrix (one gather per byte position). Kept to test that both give the same states."""
        cur = np.full(self.vocab.size, s, dtype=np.int32)
        trans, mat = self.lang.trans, self.tokens.matrix
        for j, rows in enumerate(self.tokens.columns):
            cur[rows] = trans[cur[rows], mat[rows, j]]
        cur[~self.tokens.text] = self.lang.dead
        return cur

    def allowed(self, s: int) -> np.ndarray:
        """Boolean mask over the vocabulary: the tokens allowed in state ``s`` (EOS included where
        the turn may end)."""
        mask = self._masks.get(s)
        if mask is None:
            e = self._found(s)
            mask = e != self._dead if isinstance(e, np.ndarray) else e.mask(self._size)
            if self._accepting_view[s] and self._eos.size:
                mask[self._eos] = True
            self._masks[s] = mask
        return mask

    @functools.cached_property
    def need(self) -> np.ndarray:
        """Per state, tokens that surely suffice to end the turn from it (EOS not counted): the
        fewest tokens spelling a shortest completion (:func:`ltlagent.decode.budget.finish_tokens`),
        computed once per index, on the first step with a budget."""
        return finish_tokens(self.lang.trans, self.lang.distance, self.tokens.trie, self.tokens.preference)

    def allowed_within(self, s: int, budget: int) -> np.ndarray:
        """:meth:`allowed`, narrowed to the tokens after which the turn can surely still end within
        ``budget`` tokens in all (this one and EOS included), counted in tokens (:attr:`need`).
        Sound for every vocabulary: a state the turn may enter has a witness of that many tokens,
        whose first token the next step allows."""
        mask = self.allowed(s)
        if budget <= 0:
            return mask
        need = self.need
        worst = self._worst.get(s)
        if worst is None:  # the most tokens any allowed token leaves to the end of the turn
            ends = self.ends(s)
            left = need[ends[ends != self.lang.dead]]
            worst = self._worst[s] = int(left.max()) if left.size else 0
        if worst <= budget - 2:
            return mask  # every allowed token leaves enough (most steps: no pass over the vocabulary)
        ok = mask & (need[self.ends(s)] <= budget - 2)
        if self.lang.accepting[s] and self._eos.size:
            ok[self._eos] = True
        return ok if ok.any() else mask

    def advance(self, s: int, token: int) -> int:
        """The state after ``token`` (``dead`` if the token was not allowed; EOS ends the turn and
        keeps the state)."""
        if token in self.vocab.eos_ids:
            return s if self.lang.accepting[s] else self.lang.dead
        e = self._found(s)
        return int(e[token]) if isinstance(e, np.ndarray) else e.get(token, self._dead)

    @property
    def states_visited(self) -> int:
        return len(self._masks)


#: What may follow a complete call of a turn (issue 30): given the turn's bytes so far and the tokens
#: left (EOS included; 0: no bound), the index of the rest of the turn (a language of a rule with
#: ``after_call``), or None when the turn ends after the call.
Chain = Callable[[bytes, int], "TurnIndex | None"]


class TurnCursor:
    """One assistant turn being written: the DFA state and the bytes so far. With ``then``, a turn
    of several calls: when a call is complete, the next :meth:`allowed` (which knows the tokens
    left) asks ``then`` what may follow and goes on in that index; ``starts`` are the offsets in
    ``data`` where each index took over."""

    def __init__(self, index: TurnIndex, then: Chain | None = None) -> None:
        self.index = index
        self.state = index.lang.initial
        self.data = bytearray()
        self.ended = False
        self.then = then
        self.starts: list[int] = [0]
        self._call_done = False  # a call was just completed and ``then`` not asked yet

    def _chain(self, budget: int) -> None:
        """Ask ``then`` what follows the call just completed, and go on there."""
        self._call_done = False
        assert self.then is not None
        nxt = self.then(bytes(self.data), budget)
        if nxt is not None:
            self.index, self.state = nxt, nxt.lang.initial
            self.starts.append(len(self.data))

    def allowed(self, budget: int = 0) -> np.ndarray:
        """The tokens allowed now; with ``budget`` (tokens left, EOS included) only those after
        which the turn can still end in time."""
        if self._call_done:
            self._chain(budget)
        if budget > 0:
            return self.index.allowed_within(self.state, budget)
        return self.index.allowed(self.state)

    def advance(self, token: int) -> None:
        if self._call_done:
            self._chain(0)
        if token in self.index.vocab.eos_ids:
            self.ended = True
        else:
            self.data += self.index.vocab.token_bytes(token)
        self.state = self.index.advance(self.state, token)
        lang = self.index.lang
        if self.then is not None and not self.ended and lang.in_call(self.state) \
                and lang.accepting[self.state]:
            self._call_done = True  # a call is complete: what follows is asked with the budget

    @property
    def is_dead(self) -> bool:
        return self.state == self.index.lang.dead

    @property
    def can_end(self) -> bool:
        return bool(self.index.lang.accepting[self.state])
