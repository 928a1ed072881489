"""An object's own rows in one compiled loop (docs/design.md §5.1; issue 30's compile time).

:func:`~ltlagent.text.objecttable.object_table` builds the glue of an object: the keys' trie, a
state per trie node and slice of the members that may come there, the lanes after each member's
``,``, and each key's bytes past its shared prefix as a chain. In Python that is a few Python
objects per state (a median schema's objects have a few hundred). :func:`_object_rows` is the same
construction as one loop over arrays that numba compiles (where it is installed; the Python
construction stays the fallback and the tests' reference): the states numbered as the Python code
numbers them, every run one byte, the rows sorted by state. The rows of the states after each
key, its ``:`` and its space are left to the caller, which knows the values' first bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ltlagent.jit import compiled

__all__ = ["compiled_object_rows"]

_SPACE, _CLOSE, _OPEN = 0x20, 0x7D, 0x7B


def _object_rows(keys: np.ndarray, off: np.ndarray, next_required: np.ndarray, empty_closes: bool,
                 room: int, comma: np.ndarray, cap: int) -> tuple[int, np.ndarray, int]:
    """The own rows of an object of ``n`` members (keys ``keys[off[k]:off[k + 1]]``, quotes
    included), but those of states ``3 … 3 + 3n - 1``: the states, the runs sorted by state as the
    rows of a ``[4, runs]`` array (state, first byte, last byte: each run one byte, target), and
    how many runs are of states ``0 … 2``; per member the state after its ``,`` in ``comma`` (-1:
    the last member). -1 states past ``room``. The runs are gathered in arrays of ``cap`` at
    first, doubled while they do not fit."""
    n = off.shape[0] - 1
    comma[:] = -1
    # each key's longest prefix shared with another: its neighbours in byte order
    order = np.arange(n)
    for i in range(1, n):
        j = i
        while j > 0:
            x = order[j - 1]
            y = order[j]
            p = 0
            ex = off[x + 1] - off[x]  # their lengths
            ey = off[y + 1] - off[y]
            while p < ex and p < ey and keys[off[x] + p] == keys[off[y] + p]:
                p += 1
            if p == ey or (p < ex and keys[off[x] + p] > keys[off[y] + p]):  # y before x
                order[j - 1] = y
                order[j] = x
                j -= 1
            else:
                break
    alone = np.zeros(n, dtype=np.int64)
    longest = 0
    for k in range(n):
        longest = max(longest, off[k + 1] - off[k])
    for i in range(1, n):
        x = order[i - 1]
        y = order[i]
        p = 0
        while p < off[x + 1] - off[x] and p < off[y + 1] - off[y] and keys[off[x] + p] == keys[off[y] + p]:
            p += 1
        alone[x] = max(alone[x], p)
        alone[y] = max(alone[y], p)
    # the trie: per node its children in byte order (a node, or -1 - k: member k's chain), the
    # members through it (ascending) and its depth, numbered as built key by key
    cap_nodes = 1 + int(alone.sum())
    kid_b = np.empty((cap_nodes, n + 1), dtype=np.int64)
    kid_w = np.empty((cap_nodes, n + 1), dtype=np.int64)
    nkid = np.zeros(cap_nodes, dtype=np.int64)
    under = np.empty((cap_nodes, n), dtype=np.int64)
    nunder = np.zeros(cap_nodes, dtype=np.int64)
    depth = np.zeros(cap_nodes, dtype=np.int64)
    made = 1
    for k in range(n):
        v = 0
        under[0, nunder[0]] = k
        nunder[0] += 1
        for d in range(alone[k] + 1):
            b = keys[off[k] + d]
            w = -1 - k  # past the shared prefix: the key's own chain
            if d < alone[k]:
                w = -1
                for c in range(nkid[v]):
                    if kid_b[v, c] == b:
                        w = kid_w[v, c]
                        break
                if w >= 0:
                    v = w
                    under[v, nunder[v]] = k
                    nunder[v] += 1
                    continue
                w = made
                made += 1
                depth[w] = d + 1
            c = nkid[v]  # (b, w) into v's children, in byte order
            while c > 0 and kid_b[v, c - 1] > b:
                kid_b[v, c] = kid_b[v, c - 1]
                kid_w[v, c] = kid_w[v, c - 1]
                c -= 1
            kid_b[v, c] = b
            kid_w[v, c] = w
            nkid[v] += 1
            if d == alone[k]:
                break
            v = w
            under[v, nunder[v]] = k
            nunder[v] += 1
    width = max(n, longest) + 2
    states = {-1: -1}  # (node, slice) or (chain, depth) as one number -> state
    todo = np.empty((16, 4), dtype=np.int64)  # state, node (or -1 - k), a (or depth), z
    ntodo = 0
    rr = np.empty((3, max(cap, 2)), dtype=np.int64)  # runs as written: state, byte, target (grown)
    nr = 0
    none = np.zeros((4, 0), dtype=np.int64)
    after_key = 3
    counter = 3 + 3 * n
    if counter > room:
        return -1, none, 0
    buf_b = np.empty(n + 4, dtype=np.int64)
    buf_t = np.empty(n + 4, dtype=np.int64)
    rr[0, nr] = 0
    rr[1, nr] = _OPEN
    rr[2, nr] = 1
    nr += 1
    job = 0  # 0: after ``{``; 1 … n - 1: the lane after member job - 1; then the states to do
    while True:
        q = -1
        spaced = -1
        if job < n:
            v, a = 0, job
            z = min(next_required[a], n - 1) + 1
            if job == 0:
                q = 1
            else:
                q = counter
                spaced = counter + 1
                counter += 2
                if counter > room:
                    return -1, none, 0
                comma[job - 1] = q
            job += 1
        elif ntodo > 0:
            ntodo -= 1
            q, v, a, z = todo[ntodo, 0], todo[ntodo, 1], todo[ntodo, 2], todo[ntodo, 3]
            if v < 0:  # a chain: a state per byte to the closing quote, numbered in order
                k = -1 - v
                last = off[k + 1] - off[k] - 1
                if nr + last - a + 1 > rr.shape[1]:
                    grown_rr = np.empty((3, 2 * (nr + last - a + 1)), dtype=np.int64)
                    grown_rr[:, :nr] = rr[:, :nr]
                    rr = grown_rr
                while a < last:
                    r = counter
                    counter += 1
                    if counter > room:
                        return -1, none, 0
                    rr[0, nr] = q
                    rr[1, nr] = keys[off[k] + a]
                    rr[2, nr] = r
                    nr += 1
                    q = r
                    a += 1
                rr[0, nr] = q
                rr[1, nr] = keys[off[k] + last]
                rr[2, nr] = after_key + k
                nr += 1
                continue
        else:
            break
        # the edges of node v with its members a … z - 1
        first = under[v, a]
        last_m = under[v, z - 1]
        nb = 0
        for c in range(nkid[v]):
            b = kid_b[v, c]
            w = kid_w[v, c]
            if w < 0:  # member k's chain: its state at this depth, or the state after its key
                k = -1 - w
                if k < first or k > last_m:
                    continue
                a2 = depth[v] + 1
                if a2 == off[k + 1] - off[k]:  # its closing quote
                    buf_b[nb] = b
                    buf_t[nb] = after_key + k
                    nb += 1
                    continue
                z2 = -1
                key = -(k * width + a2) - 2
            else:  # the child with the members a2 … z2 - 1 of its own, those of a … z - 1 here
                a2 = 0
                while a2 < nunder[w] and under[w, a2] < first:
                    a2 += 1
                z2 = a2
                while z2 < nunder[w] and under[w, z2] <= last_m:
                    z2 += 1
                if a2 == z2:
                    continue
                key = (w * width + a2) * width + z2
            got = states.get(key, -1)
            if got < 0:  # a new state, its row to be built
                got = counter
                counter += 1
                if counter > room:
                    return -1, none, 0
                states[key] = got
                if ntodo == todo.shape[0]:
                    grown = np.empty((2 * ntodo, 4), dtype=np.int64)
                    grown[:ntodo] = todo
                    todo = grown
                todo[ntodo, 0] = got
                todo[ntodo, 1] = w
                todo[ntodo, 2] = a2
                todo[ntodo, 3] = z2
                ntodo += 1
            buf_b[nb] = b
            buf_t[nb] = got
            nb += 1
        if nr + 2 * nb + 2 > rr.shape[1]:
            grown_rr = np.empty((3, 2 * (nr + 2 * nb + 2)), dtype=np.int64)
            grown_rr[:, :nr] = rr[:, :nr]
            rr = grown_rr
        if spaced >= 0:  # a lane: ``,`` then the keys (or a space first), the space then the keys
            rr[0, nr] = q
            rr[1, nr] = _SPACE
            rr[2, nr] = spaced
            nr += 1
            for c in range(nb):
                rr[0, nr] = q
                rr[1, nr] = buf_b[c]
                rr[2, nr] = buf_t[c]
                nr += 1
            for c in range(nb):
                rr[0, nr] = spaced
                rr[1, nr] = buf_b[c]
                rr[2, nr] = buf_t[c]
                nr += 1
            continue
        for c in range(nb):
            rr[0, nr] = q
            rr[1, nr] = buf_b[c]
            rr[2, nr] = buf_t[c]
            nr += 1
        if q == 1 and empty_closes:  # ``{}``: ``}`` after the keys (bytes after ``"`` sort after it)
            rr[0, nr] = q
            rr[1, nr] = _CLOSE
            rr[2, nr] = 2
            nr += 1
    # sorted by state, each row's runs in the order written (a counting sort)
    count = np.zeros(counter + 1, dtype=np.int64)
    for r in range(nr):
        count[rr[0, r] + 1] += 1
    for s in range(counter):
        count[s + 1] += count[s]
    low = count[3]  # the runs of states 0 … 2
    out = np.empty((4, nr), dtype=np.int64)
    for r in range(nr):
        p = count[rr[0, r]]
        out[0, p] = rr[0, r]
        out[1, p] = rr[1, r]
        out[2, p] = rr[1, r]
        out[3, p] = rr[2, r]
        count[rr[0, r]] += 1
    return counter, out, low


@functools.cache
def compiled_object_rows() -> Callable[..., tuple[int, np.ndarray, int]] | None:
    """:func:`_object_rows` compiled by numba (:func:`ltlagent.jit.compiled`: once per process,
    for its one signature), or None without numba (the Python construction)."""
    keys = np.frombuffer(b'"a""b"', dtype=np.uint8)
    off, need = np.array([0, 3, 6], dtype=np.int64), np.array([2, 2, 2], dtype=np.int64)
    return compiled(_object_rows, (keys, off, need, True, 100, np.zeros(2, dtype=np.int64), 64))
