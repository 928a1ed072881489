"""A set of allowed token ids, and applying it to a row of logits cheaply (docs/design.md §5).

Measured here (2 cores, torch CPU, 128k logits): ``masked_fill_`` with a bool mask 160 µs, ``add_``
of a cached 0/−inf bias 19 µs, ``index_fill_`` of 300 forbidden ids 9 µs, −inf plus a copy of 20
allowed logits 37 µs. Free-text states forbid few tokens and prompt-string states allow few, so
:meth:`Mask.apply` picks the method by sparsity and caches the index tensors per device.

:class:`Steering` holds the vectorised walks of the vocabulary that budget and step-limit steering
need (what state every allowed token leads to, how many states it enters).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .machine import FREE, INF

if TYPE_CHECKING:
    import torch

__all__ = ["Mask", "Steering", "SPARSE_LIMIT", "ALLOWED_LIMIT", "apply_rows"]

#: Up to this many forbidden ids ``index_fill_`` beats a dense bias, up to this many allowed ids
#: -inf plus a copy does (measured here on 128k float32 logits: index_fill_ of 1000 ids 3.4 µs, of
#: 4000 10 µs; fill + copy of 10 ids 19 µs, of 1000 15 µs; add_ of a bias 12 µs; masked_fill_ 47 µs).
SPARSE_LIMIT = 4096
ALLOWED_LIMIT = 1024


def _complement(ids: np.ndarray, size: int) -> np.ndarray:
    """The sorted ids in ``range(size)`` not in ``ids`` (a bool scatter: far cheaper than setdiff1d)."""
    keep = np.ones(size, dtype=bool)
    keep[ids[(ids >= 0) & (ids < size)]] = False
    return np.nonzero(keep)[0].astype(np.int64)


def _normalise(ids: np.ndarray, size: int) -> np.ndarray:
    """Sorted, unique ids within ``range(size)``."""
    if ids.size < 64:
        ids = np.unique(ids.astype(np.int64))
        return ids[(ids >= 0) & (ids < size)]
    keep = np.zeros(size, dtype=bool)
    keep[ids[(ids >= 0) & (ids < size)]] = True
    return np.nonzero(keep)[0].astype(np.int64)


class Mask:
    """Allowed token ids out of ``size``, stored as whichever of allowed/forbidden is smaller.

    ``forced`` is the only allowed token when exactly one is allowed. ``max_need`` (set by the
    index) bounds the bytes still needed after any allowed token, for the budget.
    """

    __slots__ = ("_allowed", "_forbidden", "_set", "_tensors", "forced", "max_need", "n_allowed", "quiet",
                 "size")

    def __init__(self, size: int, *, allowed: np.ndarray | None = None,
                 forbidden: np.ndarray | None = None) -> None:
        self.size = size
        if allowed is not None:
            allowed = _normalise(allowed, size)
            self.n_allowed = int(allowed.size)
            if allowed.size * 2 > size:
                forbidden, allowed = _complement(allowed, size), None
        else:
            assert forbidden is not None
            forbidden = _normalise(forbidden, size)
            self.n_allowed = size - int(forbidden.size)
            if forbidden.size * 2 > size:
                allowed, forbidden = _complement(forbidden, size), None
        self._allowed = allowed
        self._forbidden = forbidden
        self.forced: int | None = int(allowed[0]) if allowed is not None and allowed.size == 1 else None
        self.max_need: int | None = None
        self.quiet = False  # free text: tokens outside the candidates are allowed unchecked
        self._set: frozenset[int] | None = None
        self._tensors: dict[object, object] = {}

    def allowed_ids(self) -> np.ndarray:
        """Sorted allowed ids."""
        if self._allowed is not None:
            return self._allowed
        return _complement(self._forbidden, self.size)  # type: ignore[arg-type]

    def allows(self, tok: int) -> bool:
        if tok < 0 or tok >= self.size:
            return False
        if self._set is None:
            self._set = frozenset((self._allowed if self._allowed is not None else self._forbidden).tolist())
        return (tok in self._set) == (self._allowed is not None)

    def _bias(self, dtype: object, device: object, width: int) -> torch.Tensor:
        """A cached 0/-inf row of ``width`` logits (ids beyond the vocabulary: -inf)."""
        import torch

        key = ("b", dtype, device, width)
        bias = self._tensors.get(key)
        if bias is None:
            b = torch.full((width,), float("-inf"), dtype=dtype, device=device)  # type: ignore[arg-type]
            a = self.allowed_ids()
            b[torch.as_tensor(a[a < width], device=device)] = 0  # type: ignore[arg-type]
            bias = self._tensors[key] = b
        return bias  # type: ignore[return-value]

    def apply(self, row: torch.Tensor) -> None:
        """Set forbidden logits of ``row`` (1-D, any width) to -inf in place."""
        import torch

        if row.dim() != 1:
            raise ValueError(f"expected a 1-D row of logits, got shape {tuple(row.shape)}")
        width = row.shape[0]
        key = (row.device, width)
        if self._allowed is not None and self._allowed.size <= ALLOWED_LIMIT:
            idx = self._tensors.get(("a", *key))
            if idx is None:
                a = self._allowed[self._allowed < width]
                idx = self._tensors[("a", *key)] = torch.as_tensor(a, device=row.device)
            vals = row.index_select(0, idx)  # type: ignore[arg-type]
            row.fill_(float("-inf"))
            row.index_copy_(0, idx, vals)  # type: ignore[arg-type]
            return
        if self._forbidden is not None and self._forbidden.size <= SPARSE_LIMIT:
            idx = self._tensors.get(("f", *key))
            if idx is None:
                f = self._forbidden[self._forbidden < width]
                idx = self._tensors[("f", *key)] = torch.as_tensor(f, device=row.device)
            row.index_fill_(0, idx, float("-inf"))  # type: ignore[arg-type]
            if width > self.size:
                row[self.size:] = float("-inf")
            return
        bkey = ("b", row.dtype, *key)
        bias = self._tensors.get(bkey)
        if bias is None:
            b = torch.full((width,), float("-inf"), dtype=row.dtype, device=row.device)
            a = self.allowed_ids()
            b[torch.as_tensor(a[a < width], device=row.device)] = 0
            bias = self._tensors[bkey] = b
        row.add_(bias)  # type: ignore[arg-type]


def apply_rows(masks: Sequence[Mask], scores: torch.Tensor) -> None:
    """Apply ``masks[i]`` to row ``i`` of ``scores`` (2-D, any width) in place, for all rows at once.

    Rows that share a mask are handled together and every kind of mask takes one batched operation
    whatever the batch size: the forbidden entries of all rows with few forbidden ids are set in one
    ``index_fill_`` over the flattened scores; rows with few allowed ids keep those logits through one
    gather, one row fill and one scatter; the remaining rows (rare: neither few allowed nor few
    forbidden ids) get one ``index_add_`` of a cached 0/-inf bias per distinct mask. Ids beyond a
    mask's size are forbidden. Same result as ``masks[i].apply(scores[i])`` row by row, which costs
    a few tensor operations per row (DESIGN §5: batches).
    """
    import torch

    if scores.dim() != 2 or scores.shape[0] != len(masks):
        raise ValueError(f"expected scores of shape ({len(masks)}, vocab), got {tuple(scores.shape)}")
    if not scores.is_contiguous():
        raise ValueError("expected contiguous scores (a view of the flattened rows is filled in place)")
    width = scores.shape[1]
    dev = scores.device
    if len(masks) == 1:
        masks[0].apply(scores[0])
        return
    groups: dict[int, tuple[Mask, list[int]]] = {}
    for i, mk in enumerate(masks):
        groups.setdefault(id(mk), (mk, []))[1].append(i)
    # flat indices are built with numpy (cheaper than small tensor ops) and moved once
    fill: list[np.ndarray] = []  # flat indices to set to -inf
    keep: list[np.ndarray] = []  # flat indices to keep in rows filled with -inf
    keep_rows: list[int] = []
    dense: list[tuple[Mask, list[int]]] = []
    for mk, rows in groups.values():
        if mk._allowed is not None and mk._allowed.size <= ALLOWED_LIMIT:
            ids = mk._allowed
            keep.append((np.asarray(rows, dtype=np.int64)[:, None] * width + ids[ids < width]).ravel())
            keep_rows += rows
        elif mk._forbidden is not None and mk._forbidden.size <= SPARSE_LIMIT:
            ids = mk._forbidden
            fill.append((np.asarray(rows, dtype=np.int64)[:, None] * width + ids[ids < width]).ravel())
        else:
            dense.append((mk, rows))
    flat = scores.view(-1)
    inf = float("-inf")
    kidx = vals = None
    if keep:
        kidx = torch.from_numpy(np.concatenate(keep)).to(dev)
        vals = flat.index_select(0, kidx)
        scores.index_fill_(0, torch.from_numpy(np.asarray(keep_rows, dtype=np.int64)).to(dev), inf)
    if fill:
        flat.index_fill_(0, torch.from_numpy(np.concatenate(fill)).to(dev), inf)
    for mk, rows in dense:  # rare (neither few allowed nor few forbidden ids): one add per distinct mask
        bias = mk._bias(scores.dtype, dev, width)
        ridx = torch.from_numpy(np.asarray(rows, dtype=np.int64)).to(dev)
        scores.index_add_(0, ridx, bias.expand(len(rows), width))
    if kidx is not None and vals is not None:
        flat.index_copy_(0, kidx, vals)
    sizes = {mk.size for mk, _ in groups.values()}
    if len(sizes) == 1:  # one index: ids it does not know (wider logits) are forbidden in every row
        size = sizes.pop()
        if width > size:
            scores[:, size:] = inf
    else:
        for mk, rows in groups.values():
            if width > mk.size:
                scores[torch.from_numpy(np.asarray(rows, dtype=np.int64)).to(dev), mk.size:] = inf


class Steering:
    """Vocabulary walks for budget and step-limit steering, mixed into ``monitor.TokenIndex``.

    Uses the index's ``_memo``, ``vocab``, ``tables``, ``_flat``, ``_lengths``, ``_eos_mask``,
    ``_free_candidates`` and ``_eos_allowed``; everything computed is memoised in ``_memo``.
    """

    def _ends_next(self, sid: int, count: int) -> bool:
        """The next text token ends the current state's text by ``:max-tokens``."""
        key = self._memo.machine.keys[sid]
        if key[0] != FREE:
            return False
        mt = self.tables.max_tokens[key[2]]
        return mt is not None and count + 1 >= mt

    def _after(self, sid: int, ends_text: bool, base: Mask) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every allowed token that keeps a completion reachable, the machine state after it, and
        how many states it enters (for steering)."""
        memo = self._memo
        hit = memo.after.get((sid, ends_text))
        if hit is not None:
            return hit
        m = memo.machine
        allowed = base.allowed_ids()
        is_eos = self._eos_mask[allowed]  # type: ignore[attr-defined]
        if base.quiet:  # free text: walk only the candidates; quiet tokens by where they leave the lexer
            _mode, q, cur, node, _c, sn = m.keys[sid][:6]
            cand = self._free_candidates(sid)
            ids, ends, ent = self._walk(sid, cand)
            quiet = self.vocab.is_text.copy()
            quiet[cand] = False
            qids = np.nonzero(quiet)[0].astype(np.int64)
            where = self._quiet_where(node, cur, sn, m.keys[sid][7], qids)
            ids = np.concatenate([ids, qids])
            ends = np.concatenate([ends, self._quiet_sids(q, cur)[where]])
            ent = np.concatenate([ent, np.zeros(qids.size, dtype=np.int64)])
        else:
            ids, ends, ent = self._walk(sid, allowed[~is_eos])
        if is_eos.any():
            n = int(is_eos.sum())
            ids = np.concatenate([ids, allowed[is_eos]])
            ends = np.concatenate([ends, np.full(n, m.eos(sid, ends_text)[0], dtype=np.int64)])
            ent = np.concatenate([ent, np.zeros(n, dtype=np.int64)])
        keep = self._needs(ends) < INF
        hit = memo.after[(sid, ends_text)] = (ids[keep], ends[keep], ent[keep])
        return hit

    def _metric(self, sid: int, ends_text: bool, base: Mask, ending: bool) -> tuple[np.ndarray, np.ndarray]:
        """For the tokens of :meth:`_after`: the bytes still needed after each, and the states
        entered by it plus those still needed after it (``ending``: the text ends
        after it by ``:max-tokens``)."""
        memo = self._memo
        hit = memo.metric.get((sid, ends_text, ending))
        if hit is None:
            m = memo.machine
            _ids, ends, ent = self._after(sid, ends_text, base)
            if ending:
                uniq, inv = np.unique(ends, return_inverse=True)
                ended = (m.end_text(e) for e in uniq.tolist())
                mapped = np.fromiter(ended, dtype=np.int64, count=uniq.size)[inv]
                ends = np.where(ent == 0, mapped, ends)  # a token that enters a state starts a new text
            hit = memo.metric[(sid, ends_text, ending)] = (self._needs(ends), ent + self._needs(ends, True))
        return hit

    def _max_step_cost(self, sid: int, ends_text: bool, base: Mask) -> int:
        """Upper bound of (states entered + states still needed) over the tokens ``base`` allows."""
        memo = self._memo
        hit = memo.step_max.get((sid, ends_text))
        if hit is None:
            m = memo.machine
            if base.quiet:  # candidates walked, quiet tokens bounded by every state they can reach
                _mode, q, cur = m.keys[sid][:3]
                _ids, ends, ent = self._walk(sid, self._free_candidates(sid))
                costs = ent + self._needs(ends, True)
                quiet = self._quiet_needs(q, cur, True)
                parts = [int(costs[costs < INF].max(initial=0)), int(quiet[quiet < INF].max(initial=0))]
                if self._eos_allowed(sid, ends_text):
                    parts.append(m.need_steps(m.eos(sid, ends_text)[0]))
                hit = max(parts)
            else:
                costs = self._metric(sid, ends_text, base, False)[1]
                hit = int(costs.max(initial=0))
            memo.step_max[(sid, ends_text)] = hit
        return hit

    def _walk(self, sid: int, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Feed every candidate token from ``sid`` at once: (surviving ids, their end states, how
        many states each enters)."""
        m = self._memo.machine
        flat, lengths = self._flat, self._lengths  # type: ignore[attr-defined]
        ids = cand.astype(np.int64)
        st = np.full(ids.size, sid, dtype=np.int64)
        off = self.vocab.offsets[ids]
        ln = lengths[ids]
        ent = np.zeros(ids.size, dtype=np.int64)
        out_i: list[np.ndarray] = []
        out_s: list[np.ndarray] = []
        out_e: list[np.ndarray] = []
        j = 0
        while ids.size:
            m.ensure(st)
            byte = flat[off + j]
            ent += m.E[st, byte]
            st = m.T[st, byte].astype(np.int64)
            j += 1
            keep = st >= 0
            fin = keep & (ln == j)
            if fin.any():
                out_i.append(ids[fin])
                out_s.append(st[fin])
                out_e.append(ent[fin])
                keep &= ~fin
            ids, st, off, ln, ent = ids[keep], st[keep], off[keep], ln[keep], ent[keep]
        if not out_i:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z
        return np.concatenate(out_i), np.concatenate(out_s), np.concatenate(out_e)

    def _needs(self, ends: np.ndarray, steps: bool = False) -> np.ndarray:
        """``need`` (or ``need_steps``) of every machine state in ``ends``."""
        m = self._memo.machine
        if ends.size == 0:
            return np.zeros(0, dtype=np.int64)
        fn = m.need_steps if steps else m.need
        uniq, inv = np.unique(ends, return_inverse=True)
        nu = np.fromiter((fn(s) for s in uniq.tolist()), dtype=np.int64, count=uniq.size)
        return nu[inv]

    def _quiet_needs(self, q: int, cur: int, steps: bool = False) -> np.ndarray:
        """``need`` (or ``need_steps``) of every state of :meth:`_quiet_sids`."""
        hit = self._memo.quiet.get((q, cur, steps))
        if hit is None:
            hit = self._memo.quiet[(q, cur, steps)] = self._needs(self._quiet_sids(q, cur), steps)
        return hit

    def _quiet_sids(self, q: int, cur: int) -> np.ndarray:
        """The free-text states (q, cur) for every lexer node × stop-matcher node × last byte a
        newline (with ``newline``): where a quiet token (no event inside it) can leave the machine;
        indexed by :meth:`_quiet_where`."""
        hit = self._memo.quiet_sids.get((q, cur))
        if hit is None:
            m = self._memo.machine
            stop = self.tables.stops[cur]
            nstop = stop.num_nodes if stop is not None else 1
            nls = (0, 1) if self.tables.newline else (0,)
            hit = np.asarray([m.intern((FREE, q, cur, node, 0, sn, 0, nl))
                              for node in range(self.tables.lexer.num_nodes) for sn in range(nstop)
                              for nl in nls], dtype=np.int64)
            self._memo.quiet_sids[(q, cur)] = hit
        return hit

    def _quiet_where(self, node: int, cur: int, sn: int, nl: int, qids: np.ndarray) -> np.ndarray:
        """Index into :meth:`_quiet_sids` of the state after each quiet token in ``qids``."""
        where = self._dfa_final(("lex", node), self.tables.lexer.goto, node)[qids].astype(np.int64)
        stop = self.tables.stops[cur]
        if stop is not None:
            where = where * stop.num_nodes + self._dfa_final(("stop", cur, sn), stop.goto, sn)[qids]
        if self.tables.newline:
            ln = self._lengths[qids]  # type: ignore[attr-defined]
            last = self._flat[self.vocab.offsets[qids] + np.maximum(ln - 1, 0)]  # type: ignore[attr-defined]
            where = where * 2 + np.where(ln > 0, last == 0x0A, bool(nl))
        return where

    def _by_length(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Text tokens longest first, their offsets, and how many are longer than j bytes (per j)."""
        hit = self._memo.by_length
        if hit is None:
            lengths = self._lengths  # type: ignore[attr-defined]
            ids = np.nonzero(lengths > 0)[0]
            ids = ids[np.argsort(-lengths[ids], kind="stable")]
            ln = lengths[ids]
            counts = np.bincount(ln, minlength=int(ln.max(initial=0)) + 1)
            active = np.concatenate([ln.size - np.cumsum(counts), [0]])  # active[j]: longer than j
            hit = self._memo.by_length = (ids, self.vocab.offsets[ids], active)
        return hit

    def _dfa_final(self, key: object, goto: Sequence[Sequence[int]], start: int) -> np.ndarray:
        """For every token: the node of a byte DFA after its bytes from ``start`` (vectorised; only
        meaningful for tokens that trigger nothing in it). Cached under ``key``."""
        memo = self._memo.dfa_final
        hit = memo.get(key)
        if hit is not None:
            return hit
        table = np.asarray(goto, dtype=np.int32)
        flat = self._flat  # type: ignore[attr-defined]
        ids, off, active = self._by_length()
        out = np.zeros(self.vocab.size, dtype=np.int32)
        st = np.full(ids.size, start, dtype=np.int32)
        # tokens sorted by length, longest first: at byte j the live ones are a prefix, no compaction
        for j in range(active.size - 1):
            n, n_next = active[j], active[j + 1]
            st = table[st[:n], flat[off[:n] + j]]
            if n_next < n:
                out[ids[n_next:n]] = st[n_next:n]
        memo[key] = out
        return out
