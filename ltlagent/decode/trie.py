"""A byte trie of the vocabulary, level by level, for walking every token from a machine state at
once (docs/design.md §5: first visits).

Computing the mask of a machine state means feeding every token's bytes to the byte machine. Tokens
share prefixes (a 128k byte-level BPE has about twice as many trie nodes as tokens, and most of its
bytes sit in shared prefixes), and once the machine rejects a prefix every token below it is
rejected too: llguidance's approach is a depth-first walk of the token trie that prunes a whole
subtree at the first rejected byte. Here the walk is breadth-first and vectorised with numpy: level
``d`` holds the trie nodes at depth ``d`` sorted by (parent, byte), so the children of the live
nodes of level ``d - 1`` are contiguous ranges, gathered with one ``repeat``/``cumsum``; one table
lookup steps them all through the machine, and the nodes whose byte was rejected drop out with
their subtrees.

Each node also knows the bytes on the edges below it (a 256-bit set), its height, and its
subtree's span of a depth-first order of the tokens (``VocabTrie.order``): a first visit of a turn
state (``ltlagent.decode.chat.TurnIndex``) settles a whole subtree at once when its bytes all loop
on the state, writing its tokens as one slice (issue 30; docs/design.md §14).

Built once per vocabulary, independent of the spec.
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass, field

import numpy as np

from ltlagent.decode.machine import UTF8, UTF8_BAD
from ltlagent.decode.vocab import Vocab

__all__ = ["TrieLevel", "VocabTrie", "byte_bits", "ranges", "trie_of", "vocab_trie"]


@dataclass(frozen=True, eq=False)
class TrieLevel:
    """The trie nodes at one depth. Node ``i`` is reached from node ``parent[i]`` of the level above
    by byte ``byte[i]``; its children in the level below are ``child_lo[i]:child_hi[i]``; the tokens
    that end at it are ``tokens[tok_lo[i]:tok_hi[i]]``."""

    parent: np.ndarray  # int64
    byte: np.ndarray  # int64 (indexes the machine's byte columns directly)
    child_lo: np.ndarray  # int64
    child_hi: np.ndarray  # int64
    tok_lo: np.ndarray  # int64
    tok_hi: np.ndarray  # int64
    tokens: np.ndarray = field(repr=False)  # int64 token ids, grouped by node
    #: the bytes on the edges strictly below each node, a 256-bit set per node (:func:`byte_bits`)
    below: np.ndarray = field(repr=False)  # uint64 [nodes, 4]
    #: every token of the node's subtree (its own and its descendants'), ``VocabTrie.order[span_lo:span_hi]``
    span_lo: np.ndarray = field(repr=False)  # int64
    span_hi: np.ndarray = field(repr=False)  # int64
    #: the node's own tokens: ``VocabTrie.order[span_lo:own_hi]`` (they come first in its span)
    own_hi: np.ndarray = field(repr=False)  # int64
    #: how many levels the node's subtree reaches below it (0: a leaf)
    height: np.ndarray = field(repr=False)  # int64
    #: whether every token under the node goes on from it in whole UTF-8 characters
    whole: np.ndarray = field(repr=False)  # bool

    @functools.cached_property
    def views(self) -> tuple[memoryview, memoryview, memoryview, memoryview, memoryview, memoryview]:
        """``span_lo``, ``own_hi``, ``child_lo``, ``child_hi``, ``span_hi``, ``height`` as
        memoryviews: a sparse first visit reads them node by node, and indexing a memoryview costs
        half of ``ndarray.item``."""
        return (self.span_lo.data, self.own_hi.data, self.child_lo.data,
                self.child_hi.data, self.span_hi.data, self.height.data)


@dataclass(frozen=True, eq=False)
class VocabTrie:
    """Every text token of a vocabulary in a byte trie; ``levels[d - 1]`` is depth ``d``. The root's
    children are ``levels[0]`` (all of them: the root has no level of its own)."""

    levels: tuple[TrieLevel, ...]
    #: the text tokens in the trie's depth-first order (a node's own tokens, then its children's
    #: subtrees by byte), so that each subtree's tokens are one slice (``TrieLevel.span_lo``)
    order: np.ndarray = field(repr=False)  # int64
    #: the root's child by each byte (-1: no token begins with the byte)
    root: np.ndarray = field(repr=False)  # int64 [256]

    @property
    def num_nodes(self) -> int:
        return sum(lv.parent.size for lv in self.levels)


def ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The integers of every ``[lo[i], hi[i])`` concatenated, and for each the ``i`` it came from."""
    cnt = hi - lo
    total = int(cnt.sum())
    if total == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    owner = np.repeat(np.arange(lo.size, dtype=np.int64), cnt)
    starts = np.cumsum(cnt) - cnt  # where each range begins in the output
    idx = np.arange(total, dtype=np.int64) - starts[owner] + lo[owner]
    return idx, owner


def byte_bits(rows: np.ndarray) -> np.ndarray:
    """Boolean rows over the 256 bytes as 256-bit sets: ``uint64 [..., 4]``, byte ``b`` at bit
    ``b % 64`` of word ``b // 64`` (the layout of :attr:`TrieLevel.below`)."""
    packed = np.packbits(np.ascontiguousarray(rows, dtype=bool), axis=-1, bitorder="little")
    return packed.view("<u8").astype(np.uint64)


_ONE_BYTE = byte_bits(np.eye(256, dtype=bool))  # [256, 4]: the set of each byte alone
_ONE_BYTE.flags.writeable = False


def vocab_trie(vocab: Vocab) -> VocabTrie:
    """The trie of ``vocab``'s text tokens (one ``np.unique`` per depth over the tokens that long)."""
    lengths = vocab.lengths.astype(np.int64)
    text = np.nonzero(vocab.is_text & (lengths > 0))[0].astype(np.int64)
    text = text[np.argsort(-lengths[text], kind="stable")]  # longest first: "at least d long" is a prefix
    ln = lengths[text]
    off = vocab.offsets[text]
    flat = np.frombuffer(vocab.flat, dtype=np.uint8)
    maxlen = int(ln[0]) if ln.size else 0
    counts = np.bincount(ln, minlength=maxlen + 1)
    longer = ln.size - np.cumsum(counts)  # longer[d]: tokens longer than d bytes
    node = np.zeros(ln.size, dtype=np.int64)  # each active token's node at the current depth
    raw: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (keys, token ids ending, their nodes)
    for d in range(1, maxlen + 1):
        n = int(longer[d - 1])  # tokens at least d long
        key = node[:n] * 256 + flat[off[:n] + d - 1]
        uniq, inv = np.unique(key, return_inverse=True)
        node[:n] = inv
        m = int(longer[d])  # tokens[m:n] end here
        raw.append((uniq, text[m:n], inv[m:n]))
    shape: list[tuple[np.ndarray, ...]] = []
    for d, (uniq, ids, nodes) in enumerate(raw):
        parent = uniq >> 8
        order = np.argsort(nodes, kind="stable")
        tok_nodes = nodes[order]
        here = np.arange(uniq.size, dtype=np.int64)
        tok_lo = np.searchsorted(tok_nodes, here, side="left").astype(np.int64)
        tok_hi = np.searchsorted(tok_nodes, here, side="right").astype(np.int64)
        if d + 1 < len(raw):
            below = raw[d + 1][0] >> 8
            child_lo = np.searchsorted(below, here, side="left").astype(np.int64)
            child_hi = np.searchsorted(below, here, side="right").astype(np.int64)
        else:
            child_lo = child_hi = np.zeros(uniq.size, dtype=np.int64)
        shape.append((parent, (uniq & 255).astype(np.int64), child_lo, child_hi, tok_lo, tok_hi, ids[order]))
    return _with_spans(shape, int(text.size))


def _with_spans(shape: list[tuple[np.ndarray, ...]], total: int) -> VocabTrie:
    """The levels of ``shape`` with each node's bytes below and its subtree's span of the
    depth-first token order: sizes and byte sets bottom-up, spans top-down."""
    depth = len(shape)
    below: list[np.ndarray] = [np.zeros((0, 4), np.uint64)] * depth
    size: list[np.ndarray] = [np.zeros(0, np.int64)] * depth
    height: list[np.ndarray] = [np.zeros(0, np.int64)] * depth
    utf8 = np.array(UTF8, dtype=np.int64)  # [UTF8_BAD + 1, 256]
    #: per level, per node and UTF-8 state before the bytes below it: are those bytes whole characters
    whole: list[np.ndarray] = [np.zeros((0, UTF8_BAD + 1), bool)] * depth
    for d in range(depth - 1, -1, -1):
        parent, byte, child_lo, child_hi, tok_lo, tok_hi, _ = shape[d]
        own = tok_hi - tok_lo
        bits = np.zeros((parent.size, 4), dtype=np.uint64)
        sub = own.copy()
        tall = np.zeros(parent.size, dtype=np.int64)
        ok = np.ones((parent.size, UTF8_BAD + 1), dtype=bool)
        ok[:, UTF8_BAD] = False
        ok[own > 0, 1:] = False  # a token that ends here must end between characters
        if d + 1 < depth:  # children are contiguous runs of the level below, grouped by parent
            kids = shape[d + 1]
            edge = below[d + 1] | _ONE_BYTE[kids[1]]
            has = np.flatnonzero(child_hi > child_lo)
            if has.size:
                bits[has] = np.bitwise_or.reduceat(edge, child_lo[has], axis=0)
                sub[has] += np.add.reduceat(size[d + 1], child_lo[has])
                tall[has] = 1 + np.maximum.reduceat(height[d + 1], child_lo[has])
                after = utf8[:, kids[1]].T  # [children, UTF-8 state before]: the state after the byte
                fine = whole[d + 1][np.arange(after.shape[0])[:, None], after]
                ok[has] &= np.logical_and.reduceat(fine, child_lo[has], axis=0)
        below[d], size[d], height[d], whole[d] = bits, sub, tall, ok
    order = np.zeros(total, dtype=np.int64)
    levels: list[TrieLevel] = []
    start = np.zeros(0, dtype=np.int64)
    for d in range(depth):
        parent, byte, child_lo, child_hi, tok_lo, tok_hi, tokens = shape[d]
        sub = size[d]
        before = np.cumsum(sub) - sub  # the subtrees of the earlier nodes of the level
        if d == 0:
            lo = before
        else:  # after the parent's own tokens and the subtrees of its earlier children
            first = shape[d - 1][2][parent]  # the parent's first child
            lo = start[parent] + (shape[d - 1][5] - shape[d - 1][4])[parent] + before - before[first]
        own_pos, _ = ranges(lo, lo + (tok_hi - tok_lo))
        order[own_pos] = tokens
        levels.append(TrieLevel(parent, byte, child_lo, child_hi, tok_lo, tok_hi, tokens, below[d], lo,
                                lo + sub, lo + (tok_hi - tok_lo), height[d], whole[d][:, 0].copy()))
        start = lo
    root = np.full(256, -1, dtype=np.int64)
    if levels:
        root[levels[0].byte] = np.arange(levels[0].byte.size)
    return VocabTrie(tuple(levels), order, root)


_TRIES: weakref.WeakKeyDictionary[Vocab, VocabTrie] = weakref.WeakKeyDictionary()


def trie_of(vocab: Vocab) -> VocabTrie:
    """:func:`vocab_trie` of ``vocab``, built once while the vocabulary lives (the indexes of several
    specs, and an index's variants, share one vocabulary)."""
    hit = _TRIES.get(vocab)
    if hit is None:
        hit = _TRIES[vocab] = vocab_trie(vocab)
    return hit
