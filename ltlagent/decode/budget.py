"""How many tokens surely suffice to finish a turn from each state of its byte DFA (issue 30;
docs/design.md §14: budgets).

A turn written under a token budget may only enter states from which it can still end in the tokens
left. Counting the *bytes* still needed is sound for a byte-level vocabulary (every byte is a token)
but far too strict: a 74-byte call takes about 25 tokens, and with ``max_new_tokens=64`` it could
never begin. A lower bound on tokens (bytes over the longest token) would be unsound: it may let the
turn into a state it cannot leave in time. What is needed is an *upper* bound that is a witness: a
token sequence the mask allows, from each state to acceptance.

The witness here is the state's *canonical completion*: from each state one byte on a shortest way
to acceptance (ties broken by a byte preference of the vocabulary), so the completions form a tree
(a state's completion is its byte, then its successor's completion). The bound is the fewest text
tokens that spell that completion exactly: a dynamic programme in order of byte distance, over the
prefixes of each completion that are tokens (found by walking the vocabulary's byte trie along the
completions of every state at once). Each such token keeps the DFA alive (its bytes follow the
DFA), so the mask allows it, and the state it reaches has a bound one smaller: steering that only
enters states whose bound fits the tokens left can always go on, and ends in time. Where every byte
is a token the bound is at most the byte distance, so it never refuses what the byte count allowed.
"""

from __future__ import annotations

import numpy as np

from ltlagent.decode.trie import VocabTrie
from ltlagent.decode.vocab import Vocab
from ltlagent.graph import run_spans

__all__ = ["FAR", "byte_preference", "finish_tokens"]

#: The bound of a state from which no witness was found (unreachable acceptance, or a completion
#: no tokens spell): larger than any budget.
FAR = np.iinfo(np.int32).max // 2



def byte_preference(vocab: Vocab) -> np.ndarray:
    """The 256 bytes in the order the canonical completions prefer them: bytes whose runs make long
    tokens first (a string of ``minLength`` 10 written as spaces is one or two tokens in most
    vocabularies, as ``e`` it is ten), then bytes that begin many tokens, then by value."""
    lens = vocab.lengths.astype(np.int64)
    text = np.nonzero(vocab.is_text & (lens > 0))[0]
    flat = np.frombuffer(vocab.flat, dtype=np.uint8)
    first = flat[vocab.offsets[text]].astype(np.int64)
    run = np.zeros(256, dtype=np.int64)
    if text.size:
        ln = lens[text]
        same = flat[np.repeat(vocab.offsets[text], ln) + _within(ln)] == np.repeat(first, ln)
        uniform = np.logical_and.reduceat(same, np.cumsum(ln) - ln)
        np.maximum.at(run, first[uniform], ln[uniform])
    begins = np.bincount(first, minlength=256)
    return np.lexsort((np.arange(256), -begins, -run)).astype(np.int64)


def _within(lens: np.ndarray) -> np.ndarray:
    """For segments of the given lengths laid end to end, each position's offset in its segment."""
    starts = np.cumsum(lens) - lens
    return np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(starts, lens)


def _successors(trans: np.ndarray, dist: np.ndarray, prefer: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each state's canonical step: the most preferred byte that leads one byte nearer acceptance,
    and where it leads (the dead row where none: accepting or hopeless states). Over the rows' runs
    of equal targets (a JSON state has two or three, not 256 edges), the best byte of a run by a
    range-minimum table of the preference ranks."""
    n = int(trans.shape[0]) - 1
    rows = trans[:n]
    src, lo, hi = run_spans(rows)
    dst = rows[src, lo].astype(np.int64)
    good = (dist[src] > 0) & (dist[src] < FAR) & (dist[dst] == dist[src] - 1)
    src, lo, hi, dst = src[good], lo[good], hi[good], dst[good]
    rank = np.empty(256, dtype=np.int64)
    rank[prefer] = np.arange(256)
    table = np.full((9, 256), 256, dtype=np.int64)  # table[k, i]: the best rank in i … i + 2^k - 1
    table[0] = rank
    for k in range(1, 9):
        w = 1 << (k - 1)
        table[k, :256 - 2 * w + 1] = np.minimum(table[k - 1, :256 - 2 * w + 1], table[k - 1, w:256 - w + 1])
    k = np.log2(hi - lo).astype(np.int64)
    best = np.minimum(table[k, lo], table[k, hi - (1 << k)])
    order = np.lexsort((best, src))
    src, best, dst = src[order], best[order], dst[order]
    lead = np.r_[True, src[1:] != src[:-1]]  # per state, its best run
    step_byte = np.zeros(n + 1, dtype=np.int64)
    step_to = np.full(n + 1, n, dtype=np.int64)
    step_byte[src[lead]] = prefer[best[lead]]
    step_to[src[lead]] = dst[lead]
    return step_byte, step_to


def finish_tokens(trans: np.ndarray, distance: np.ndarray, trie: VocabTrie, prefer: np.ndarray
                  ) -> np.ndarray:
    """Per state of a DFA (``trans[s, b]``, the last row the dead sink; ``distance``: fewest bytes to
    acceptance, 0 where accepting, at least :data:`FAR` where none), text tokens of ``trie``'s
    vocabulary that surely suffice to reach acceptance, EOS not counted (:data:`FAR` where no
    witness was found). ``prefer``: :func:`byte_preference`."""
    n = int(trans.shape[0]) - 1
    dist = np.minimum(np.asarray(distance, dtype=np.int64), FAR)
    need = np.where(dist == 0, 0, FAR).astype(np.int64)
    need[n] = FAR
    todo = np.nonzero((dist[:n] > 0) & (dist[:n] < FAR))[0]
    if not todo.size or not trie.levels:
        return need
    step_byte, step_to = _successors(trans, dist, prefer)
    # walk the trie along every completion at once: the prefixes that are tokens, and where they end
    owners: list[np.ndarray] = []
    targets: list[np.ndarray] = []
    origin, cur = todo, todo
    node = np.zeros(todo.size, dtype=np.int64)
    for d, lv in enumerate(trie.levels):
        keys = lv.parent * 256 + lv.byte  # sorted: the level's nodes are ordered by (parent, byte)
        want = (node * 256 if d else 0) + step_byte[cur]
        at = np.minimum(np.searchsorted(keys, want), keys.size - 1)
        hit = keys[at] == want
        origin, node, cur = origin[hit], at[hit], step_to[cur[hit]]
        ends = lv.tok_hi[node] > lv.tok_lo[node]
        owners.append(origin[ends])
        targets.append(cur[ends])
        on = dist[cur] > 0  # the completion ends at acceptance
        origin, node, cur = origin[on], node[on], cur[on]
        if not origin.size:
            break
    owner, target = np.concatenate(owners), np.concatenate(targets)
    # fewest tokens in order of byte distance: a target is nearer acceptance than its owner
    order = np.argsort(dist[owner], kind="stable")
    owner, target = owner[order], target[order]
    layer = dist[owner]
    bounds = np.flatnonzero(np.diff(layer)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, layer.size]):
        np.minimum.at(need, owner[lo:hi], np.minimum(need[target[lo:hi]] + 1, FAR))
    return need
