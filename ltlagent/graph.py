"""Reachability on transition tables (``delta[q][letter]``, -1 = none): shared by the spec
automaton and the content DFAs, and free of both so that neither depends on the other."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["coreachable", "coreachable_table", "reachable", "row_edges", "run_starts", "run_spans", "cells",
           "csr", "levels"]


def coreachable(delta: Sequence[Sequence[int]], targets: Iterable[int]) -> frozenset[int]:
    """States of ``delta`` that can reach one of ``targets`` (the targets included)."""
    rev: dict[int, list[int]] = {}
    for q, row in enumerate(delta):
        for r in set(row):
            if r >= 0:
                rev.setdefault(r, []).append(q)
    seen = set(targets)
    todo = list(seen)
    while todo:
        r = todo.pop()
        for q in rev.get(r, ()):
            if q not in seen:
                seen.add(q)
                todo.append(q)
    return frozenset(seen)


def reachable(delta: Sequence[Sequence[int]], start: int) -> frozenset[int]:
    """States of ``delta`` reachable from ``start`` (itself included; nothing when it is -1)."""
    if start < 0:
        return frozenset()
    seen, todo = {start}, [start]
    while todo:
        for r in delta[todo.pop()]:
            if r >= 0 and r not in seen:
                seen.add(r)
                todo.append(r)
    return frozenset(seen)


def csr(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    return ptr, dst[order]


#: Below this many edges a breadth-first search runs as a Python loop (cheap per edge), above it one
#: vectorised step per level (cheap per level: long chains of states, such as a string's
#: characters, make many levels of few states)
_PY_BFS_EDGES = 60_000


def levels(ptr: np.ndarray, adj: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """Breadth-first search from ``seeds`` over a CSR graph: each node's distance from the seeds
    (-1 where none reaches it)."""
    if adj.size <= _PY_BFS_EDGES:
        return _levels_loop(ptr, adj, seeds)
    dist = np.full(ptr.size - 1, -1, dtype=np.int64)
    dist[seeds] = 0
    slot = np.zeros(ptr.size - 1, dtype=np.int64)  # for removing repeats within a level
    front = np.asarray(seeds, dtype=np.int64)
    level = 0
    while front.size:
        lo, hi = ptr[front], ptr[front + 1]
        cnt = hi - lo
        total = int(cnt.sum())
        if not total:
            break
        owner_start = np.repeat(lo - (np.cumsum(cnt) - cnt), cnt)
        nxt = adj[np.arange(total, dtype=np.int64) + owner_start]
        nxt = nxt[dist[nxt] < 0]
        if not nxt.size:
            break
        here = np.arange(nxt.size, dtype=np.int64)
        slot[nxt] = here
        nxt = nxt[slot[nxt] == here]  # one of each (the last written wins)
        level += 1
        dist[nxt] = level
        front = nxt
    return dist


def _levels_loop(ptr: np.ndarray, adj: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """:func:`levels` as a Python loop over the edges (small graphs)."""
    p, a = ptr.tolist(), adj.tolist()
    dist = [-1] * (len(p) - 1)
    front = []
    for s in np.asarray(seeds).tolist():
        if dist[s] < 0:
            dist[s] = 0
            front.append(s)
    level = 0
    while front:
        level += 1
        nxt = []
        for u in front:
            for v in a[p[u]:p[u + 1]]:
                if dist[v] < 0:
                    dist[v] = level
                    nxt.append(v)
        front = nxt
    return np.array(dist, dtype=np.int64)


def cells(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The row and column (``int64``) of each true entry of a 2-D mask, row by row: what
    ``np.nonzero`` gives, from ``np.flatnonzero`` (about ten times faster on rows of 256)."""
    rows, cols = np.divmod(np.flatnonzero(mask), mask.shape[1])
    return rows, cols


def run_starts(trans: np.ndarray) -> np.ndarray:
    """Where each run of equal successors in a row begins (``bool``, the shape of ``trans``): a
    row of 256 bytes has a few runs, and the tables' passes read one entry per run."""
    first = np.ones(trans.shape, dtype=bool)
    first[:, 1:] = trans[:, 1:] != trans[:, :-1]
    return first


def run_spans(trans: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every run of equal successors of every row (:func:`run_starts`), row by row and in byte
    order within a row, as ``int64`` arrays: its row, its first byte and the byte after its last
    (a row's last run ends at the row's end)."""
    src, lo = cells(run_starts(trans))
    end = np.empty_like(lo)
    end[:-1] = lo[1:]
    end[np.r_[src[1:] != src[:-1], True][:src.size]] = trans.shape[1]
    return src, lo, end


def row_edges(trans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The edges of a table as (source, target) arrays, one per run of equal successors in a row
    (a row has a few runs, not 256 edges)."""
    src, col = cells(run_starts(trans) & (trans >= 0))
    return src.astype(np.int64), trans[src, col].astype(np.int64)


def coreachable_table(trans: np.ndarray, targets: Iterable[int]) -> frozenset[int]:
    """:func:`coreachable` of a numpy table (``int [n, k]``): one backward breadth-first search over
    the edges of each row's runs of equal successors (:func:`row_edges`: a row of 256 bytes has a
    few), in numpy (:func:`levels`)."""
    n = int(trans.shape[0])
    src, dst = row_edges(trans)
    seeds = np.array(sorted(set(targets)), dtype=np.int64)
    return frozenset(np.flatnonzero(levels(*csr(dst, src, n), seeds) >= 0).tolist())
