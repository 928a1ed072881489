"""The loops of a first visit in compiled code (issue 30; docs/design.md §14, "The loops compiled").

:meth:`ltlagent.decode.chat.TurnIndex._walk` finds where each token ends from a DFA state by
walking the vocabulary's byte trie. In Python the walk goes level by level (numpy over a level's
nodes, or node by node where a level has few): each level costs a dozen numpy calls or a Python
loop, so a state whose live tokens sit deep in the trie (the digits of a bounded number at a 128k
vocabulary: 5,000 tokens four levels down) took 0.6–1 ms. Here the same walk is one depth-first
loop compiled by numba (llguidance's walk, in Rust, is the same loop): the trie's nodes in
preorder (:class:`TriePreorder`, built once per vocabulary), a node's subtree skipped at once
where its byte is rejected or where every byte below it loops on the state it reaches (every
token below ends there: a string's characters), each node's own tokens written where they end
elsewhere than most tokens do. Beside it, compiled the same way: the token runs of a content or
class chain (:func:`compiled_run`), a chain's rows and their check (:func:`compiled_chain`), and
a language's per-state passes (:func:`compiled_passes`).

Each computes exactly what the Python or numpy code it stands in for does (the tests compare the
two on every state of several languages and vocabularies); where numba is not installed, or
cannot compile a loop, the ``compiled_*`` functions give None and the Python code runs. numba
compiles each loop once per process, for one signature, when a vocabulary is set up (about a
second; read from numba's cache on disk where it can write one), not per language or state.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ltlagent.decode.trie import VocabTrie
from ltlagent.jit import compiled

__all__ = ["AFTER", "BYTE", "DEPTH", "OWN_HI", "SPAN_HI", "SPAN_LO", "TriePreorder", "compiled_chain",
           "compiled_passes", "compiled_run", "compiled_walk", "trie_preorder"]


#: The columns of :attr:`TriePreorder.nodes`
DEPTH, BYTE, SPAN_LO, OWN_HI, SPAN_HI, AFTER = range(6)


@dataclass(frozen=True, eq=False)
class TriePreorder:
    """The nodes of a :class:`~ltlagent.decode.trie.VocabTrie` in depth-first preorder (a node,
    then its children's subtrees by byte), each with what the walk reads of it, in one row (the
    walk reads nodes in order: one row is one fetch from memory, where an array per field was six)."""

    #: per node: its level (0: a token's first byte), the byte on the edge into it, its subtree's
    #: span of the trie's token order and where its own tokens end (``TrieLevel.span_lo``,
    #: ``span_hi``, ``own_hi``), and the position of the first node after its subtree
    nodes: np.ndarray = field(repr=False)  # int32 [nodes, 6]: DEPTH, BYTE, SPAN_LO, OWN_HI, SPAN_HI, AFTER
    below: np.ndarray = field(repr=False)  # uint64 [nodes, 4]: TrieLevel.below
    whole: np.ndarray = field(repr=False)  # bool: TrieLevel.whole
    #: per level, each node's position in the preorder
    at: tuple[np.ndarray, ...] = field(repr=False)
    #: per byte, the row of the level-0 node by it (-1: no token begins with it)
    root: np.ndarray = field(repr=False)  # int64 [256]

    @property
    def levels(self) -> int:
        return len(self.at)


def trie_preorder(trie: VocabTrie) -> TriePreorder:
    """The preorder of ``trie``'s nodes: sorted by their subtree's first token in the depth-first
    token order, a parent before its first child (which shares that token when the parent has
    none of its own); the first node after a subtree is the first whose span begins at or past
    the subtree's end."""
    levels = trie.levels
    if not levels:
        return TriePreorder(np.zeros((0, 6), dtype=np.int32), np.zeros((0, 4), dtype=np.uint64),
                            np.zeros(0, dtype=bool), (), np.full(256, -1, dtype=np.int64))
    depth = np.concatenate([np.full(lv.byte.size, d, dtype=np.int64) for d, lv in enumerate(levels)])
    span_lo = np.concatenate([lv.span_lo for lv in levels])
    pos = np.lexsort((depth, span_lo))  # preorder -> (level, node) flattened
    where = np.empty(pos.size, dtype=np.int64)
    where[pos] = np.arange(pos.size, dtype=np.int64)
    first = np.cumsum([0, *(lv.byte.size for lv in levels)])
    at = tuple(where[first[d]:first[d + 1]] for d in range(len(levels)))

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(lv, name) for lv in levels])[pos]

    lo = span_lo[pos]
    span_hi = cat("span_hi")
    after = np.searchsorted(lo, span_hi, side="left")
    nodes = np.stack([depth[pos], cat("byte"), lo, cat("own_hi"), span_hi, after], axis=1)
    if nodes.size and int(nodes.max()) >= 2**31:
        raise ValueError("a trie too large for the compiled walk's 32-bit rows")
    root = np.full(256, -1, dtype=np.int64)
    root[levels[0].byte] = at[0]
    return TriePreorder(np.ascontiguousarray(nodes, dtype=np.int32),
                        np.ascontiguousarray(cat("below"), dtype=np.uint64),
                        np.ascontiguousarray(cat("whole"), dtype=bool), at, root)


def _walk(trans: np.ndarray, s: int, dead: int, usual: int, wrap: int, first_ok: np.ndarray, skip: int,
          root: np.ndarray, nodes: np.ndarray, below: np.ndarray, whole: np.ndarray, loops: np.ndarray,
          count: np.ndarray, order: np.ndarray, levels: int, ids: np.ndarray, to: np.ndarray) -> int:
    """The walk from ``s`` (compiled by :func:`compiled_walk`): the tokens that end elsewhere than
    ``usual`` (every other text token ends there; with ``usual`` dead, the live tokens), written
    to ``ids`` and their end states to ``to``, in the trie's token order; their count returned.
    ``first_ok``: the first bytes walked (the others' subtrees are settled elsewhere), each from its
    row ``root[x]`` (-1: no token begins with it; the other bytes' rows are not read); ``skip``: a
    node whose subtree is settled elsewhere (a string opener's; -1: none); ``wrap``: a state that
    whole UTF-8 characters lead back to (-1: none), where a subtree whose ASCII bytes loop and whose
    tokens go on in whole characters ends too. ``loops``, ``count``: per state, the bytes that lead
    back to it and how many (a state with none settles only a leaf at once). -1 where the tokens
    to write are more than ``ids`` holds (the caller gives longer lists and walks again)."""
    st = np.empty(levels + 1, dtype=np.int64)
    st[0] = s
    n = 0
    cap = ids.shape[0]
    for x in range(256):  # each first byte walked: its subtree, rows root[x] … up to the row past it
        i = root[x]
        if i < 0 or not first_ok[x]:
            continue
        end = nodes[i, AFTER]
        while i < end:
            d = nodes[i, DEPTH]
            if i == skip:
                i = nodes[i, AFTER]
                continue
            q = trans[st[d], nodes[i, BYTE]]
            if q == dead:
                if usual != dead:
                    if n + nodes[i, SPAN_HI] - nodes[i, SPAN_LO] > cap:
                        return -1
                    for k in range(nodes[i, SPAN_LO], nodes[i, SPAN_HI]):
                        ids[n] = order[k]
                        to[n] = dead
                        n += 1
                i = nodes[i, AFTER]
                continue
            if count[q] == 0:  # nothing loops: only a leaf is settled at once
                covered = nodes[i, AFTER] == i + 1
            else:
                a0 = below[i, 0] & ~loops[q, 0]
                a1 = below[i, 1] & ~loops[q, 1]
                covered = (a0 | a1 | (below[i, 2] & ~loops[q, 2]) | (below[i, 3] & ~loops[q, 3])) == 0
                if not covered and q == wrap and (a0 | a1) == 0 and whole[i]:
                    covered = True
            if q != usual:
                hi = nodes[i, SPAN_HI] if covered else nodes[i, OWN_HI]
                if n + hi - nodes[i, SPAN_LO] > cap:
                    return -1
                for k in range(nodes[i, SPAN_LO], hi):
                    ids[n] = order[k]
                    to[n] = q
                    n += 1
            if covered:
                i = nodes[i, AFTER]
            else:
                st[d + 1] = q
                i += 1
    return n


def _run(trans: np.ndarray, dead: int, flat: np.ndarray, ids: np.ndarray, cur: np.ndarray, at: np.ndarray,
         end: np.ndarray, out: np.ndarray) -> int:
    """``out[ids[i]]``: the state after the bytes ``flat[at[i]:end[i]]`` from ``cur[i]`` (``dead``
    once a byte is rejected), compiled by :func:`compiled_run`: the tokens a content or class chain
    walks (:meth:`ltlagent.decode.chat.TurnIndex._run`). The count of rows."""
    for i in range(ids.shape[0]):
        q = cur[i]
        p = at[i]
        e = end[i]
        while p < e:
            q = trans[q, flat[p]]
            if q == dead:
                break
            p += 1
        out[ids[i]] = q
    return ids.shape[0]


def _chain(trans: np.ndarray, content_step: np.ndarray, s: int, dead: int, guess: int, longest: int,
           digits: bool, wide: int, span_a: np.ndarray, span_b: np.ndarray, span_seq: np.ndarray,
           rest_a: np.ndarray, rest_b: np.ndarray, rest_n: np.ndarray, g: np.ndarray) -> int:
    """A content chain from ``s`` and its check (compiled by :func:`compiled_chain`;
    :meth:`ltlagent.decode.chat.TurnIndex._chain` in Python): ``g[0] = s``, then where ``guess``
    leads, until a state loops on it (the chain loops), ``dead`` or more than ``longest`` rows.
    Written to ``g``; returned: ``2 * len + loop``, or -1 where a row fails its check. The rows
    (every state of a loop, all but the last otherwise): with ``digits``, the ten digits lead
    alike; else the content bytes lead alike (``content_step`` >= 0) and, in the first ``wide``
    rows, every multi-byte UTF-8 character too: per sequence (``span_seq``), its lead bytes'
    runs ``span_a … span_b - 1`` alike, then each continuation range ``rest_a … rest_b - 1`` alike
    from there, into ``content_step`` of the row."""
    n = 1
    g[0] = s
    loop = 0
    while True:
        q = g[n - 1]
        if q == dead or n > longest:
            rows = n - 1
            break
        nxt = trans[q, guess]
        if nxt == q:
            rows = n
            loop = 1
            break
        g[n] = nxt
        n += 1
    for j in range(rows):
        q = g[j]
        if digits:
            first = trans[q, 0x30]
            for b in range(0x31, 0x3A):
                if trans[q, b] != first:
                    return -1
            continue
        to = content_step[q]
        if to < 0:
            return -1
        if j >= wide:
            continue
        k = 0
        for sq in range(rest_n.shape[0]):
            p = -1
            while k < span_seq.shape[0] and span_seq[k] == sq:
                for b in range(span_a[k], span_b[k]):
                    x = trans[q, b]
                    if p < 0:
                        p = x
                    elif x != p:
                        return -1
                k += 1
            for r in range(rest_n[sq]):
                first = trans[p, rest_a[sq, r]]
                for b in range(rest_a[sq, r] + 1, rest_b[sq, r]):
                    if trans[p, b] != first:
                        return -1
                p = first
            if p != to:
                return -1
    return 2 * n + loop


def _passes(trans: np.ndarray, dead: int, loops: np.ndarray, count: np.ndarray, single: np.ndarray,
            step: np.ndarray) -> int:
    """A language's per-state passes in one read of its table (compiled by :func:`compiled_passes`;
    :class:`~ltlagent.decode.turnlang.TurnLanguage`'s ``loops``, ``loop_count``, ``single`` and
    ``content_step`` in numpy): per state, the bytes that lead back to it (256 bits) and how
    many, its only live byte (-1: none or several), and where every printable ASCII content byte
    leads where they all lead alike (``"`` and ``\\`` aside) and every control byte dies (-1:
    not so). The count of states."""
    n = trans.shape[0]
    for q in range(n):
        w0 = np.uint64(0)
        w1 = np.uint64(0)
        w2 = np.uint64(0)
        w3 = np.uint64(0)
        c = 0
        live = 0
        one = -1
        for b in range(256):
            t = trans[q, b]
            if t == q:
                c += 1
                bit = np.uint64(1) << np.uint64(b & 63)
                if b < 64:
                    w0 |= bit
                elif b < 128:
                    w1 |= bit
                elif b < 192:
                    w2 |= bit
                else:
                    w3 |= bit
            if t != dead:
                live += 1
                one = b
        loops[q, 0] = w0
        loops[q, 1] = w1
        loops[q, 2] = w2
        loops[q, 3] = w3
        count[q] = c
        single[q] = one if live == 1 else -1
        to = trans[q, 0x61]
        ok = True
        for b in range(0x20):
            if trans[q, b] != dead:
                ok = False
                break
        if ok:
            for b in range(0x20, 0x80):
                if b != 0x22 and b != 0x5C and trans[q, b] != to:
                    ok = False
                    break
        step[q] = to if ok else -1
    return n


@functools.cache
def compiled_passes() -> Callable[..., int] | None:
    """:func:`_passes` compiled by numba, as :func:`compiled_walk` (None without numba)."""
    i64 = np.zeros(1, dtype=np.int64)
    return compiled(_passes, (np.zeros((1, 256), dtype=np.int32), 0, np.zeros((1, 4), dtype=np.uint64), i64,
                               i64.copy(), i64.copy()))


@functools.cache
def compiled_chain() -> Callable[..., int] | None:
    """:func:`_chain` compiled by numba, as :func:`compiled_walk` (None without numba)."""
    i64, rest = np.zeros(1, dtype=np.int64), np.zeros((1, 3), dtype=np.int64)
    return compiled(_chain, (np.zeros((1, 256), dtype=np.int32), i64, 0, 0, 0x61, 1, False, 0, i64, i64, i64,
                              rest, rest.copy(), i64, np.zeros(4, dtype=np.int64)))


@functools.cache
def compiled_run() -> Callable[..., int] | None:
    """:func:`_run` compiled by numba, as :func:`compiled_walk` (None without numba)."""
    flat = np.zeros(1, dtype=np.uint8)
    flat.flags.writeable = False  # as a vocabulary's bytes (``np.frombuffer``)
    i64, i32 = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int32)
    return compiled(_run, (np.zeros((1, 256), dtype=np.int32), 0, flat, i64, i32, i64, i64 + 1, i32.copy()))


@functools.cache
def compiled_walk() -> Callable[..., int] | None:
    """:func:`_walk` compiled by numba, or None where numba is not installed or cannot compile it
    (the Python walk runs). Compiled here, once per process, for the one signature it is called
    with (from numba's cache on disk where it keeps one): a vocabulary's set-up
    (:meth:`TokenBytes.of <ltlagent.decode.chat.TokenBytes.of>`) asks for it, not a decoding step."""
    i64, u64 = np.zeros(1, dtype=np.int64), np.zeros((1, 4), dtype=np.uint64)
    first_ok = np.zeros(256, dtype=bool)
    first_ok.flags.writeable = False  # as TurnIndex passes it
    return compiled(_walk, (np.zeros((1, 256), dtype=np.int32), 0, 0, 0, -1, first_ok, -1,
                             np.full(256, -1, dtype=np.int64), np.array([[0, 0, 0, 0, 0, 1]], dtype=np.int32),
                             u64, np.zeros(1, dtype=bool), u64, i64, i64, 1, np.zeros(1, dtype=np.int64),
                             np.zeros(1, dtype=np.int32)))
