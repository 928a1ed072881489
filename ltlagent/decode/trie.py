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

Built once per vocabulary (about 0.1 s at 128k tokens), independent of the spec.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from ltlagent.decode.vocab import Vocab

__all__ = ["TrieLevel", "VocabTrie", "ranges", "trie_of", "vocab_trie"]


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


@dataclass(frozen=True, eq=False)
class VocabTrie:
    """Every text token of a vocabulary in a byte trie; ``levels[d - 1]`` is depth ``d``. The root's
    children are ``levels[0]`` (all of them: the root has no level of its own)."""

    levels: tuple[TrieLevel, ...]

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
    levels: list[TrieLevel] = []
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
        levels.append(TrieLevel(parent, (uniq & 255).astype(np.int64), child_lo, child_hi, tok_lo, tok_hi,
                                ids[order]))
    return VocabTrie(tuple(levels))


_TRIES: weakref.WeakKeyDictionary[Vocab, VocabTrie] = weakref.WeakKeyDictionary()


def trie_of(vocab: Vocab) -> VocabTrie:
    """:func:`vocab_trie` of ``vocab``, built once while the vocabulary lives (the indexes of several
    specs, and an index's variants, share one vocabulary)."""
    hit = _TRIES.get(vocab)
    if hit is None:
        hit = _TRIES[vocab] = vocab_trie(vocab)
    return hit
