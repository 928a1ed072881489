"""A set of allowed token ids, and applying it to a row of logits cheaply (docs/design.md §5).

Measured here (2 cores, torch CPU, 128k logits): ``masked_fill_`` with a bool mask 160 µs, ``add_``
of a cached 0/−inf bias 19 µs, ``index_fill_`` of 300 forbidden ids 9 µs, −inf plus a copy of 20
allowed logits 37 µs. Free-text states forbid few tokens and prompt-string states allow few, so
:meth:`Mask.apply` picks the method by sparsity and caches the index tensors per device.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["Mask", "SPARSE_LIMIT", "ALLOWED_LIMIT", "DENSE_LIMIT", "apply_rows", "numpy_view"]

#: Up to this many forbidden ids ``index_fill_`` beats a dense bias, up to this many allowed ids
#: -inf plus a copy does (measured here on 128k float32 logits: index_fill_ of 1000 ids 3.4 µs, of
#: 4000 10 µs; fill + copy of 10 ids 19 µs, of 1000 15 µs; add_ of a bias 12 µs; masked_fill_ 47 µs).
SPARSE_LIMIT = 4096
ALLOWED_LIMIT = 1024
#: :meth:`Mask.allows` keeps the ids in a set up to this many, as packed bits beyond (a set of
#: thousands of ids took 0.1-0.3 ms to build; the first ``np.searchsorted`` of a process 3.5 ms).
SET_LIMIT = 256
#: :func:`apply_rows` on at most this many logits stacks cached boolean rows and makes one
#: ``masked_fill_`` (measured at 3072 logits: 7 µs against 12 µs sparse at 1 row, 43 against 71 µs
#: at 8 rows; from 64 rows on the sparse operations win, and at 128k logits already at 1 row).
DENSE_LIMIT = 1 << 16
#: :meth:`Mask.np_plan`'s kinds
KEEP, FILL, DENSE = 0, 1, 2


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

    __slots__ = ("_allowed", "_forbidden", "_set", "_tensors", "forced", "max_need", "n_allowed",
                 "quiet", "size")

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
        self._set: frozenset[int] | bytes | None = None  # the smaller side, as a set or packed bits
        self._tensors: dict[object, object] = {}

    def allowed_ids(self) -> np.ndarray:
        """Sorted allowed ids."""
        if self._allowed is not None:
            return self._allowed
        return _complement(self._forbidden, self.size)  # type: ignore[arg-type]

    def prepare(self) -> frozenset[int] | bytes:
        """Build the lookup :meth:`allows` uses (done on first use; precomputed indexes do it at
        build time: a 128k-token row of bits cost up to ms of fresh memory mid-decoding)."""
        s = self._set
        if s is None:
            ids = self._allowed if self._allowed is not None else self._forbidden
            assert ids is not None
            if ids.size > SET_LIMIT:  # packed bits: no set of thousands of ids
                bits = np.zeros(self.size, dtype=bool)
                bits[ids] = True
                s = self._set = np.packbits(bits, bitorder="little").tobytes()
            else:
                s = self._set = frozenset(ids.tolist())
        return s

    def allows(self, tok: int) -> bool:
        if tok < 0 or tok >= self.size:
            return False
        s = self._set
        if s is None:
            s = self.prepare()
        if isinstance(s, bytes):
            return bool(s[tok >> 3] >> (tok & 7) & 1) == (self._allowed is not None)
        return (tok in s) == (self._allowed is not None)

    def forbidden_row(self, device: object, width: int) -> torch.Tensor:
        """A cached boolean row of ``width``: True where the token is forbidden (ids beyond the
        vocabulary too)."""
        import torch

        key = ("m", device, width)
        row = self._tensors.get(key)
        if row is None:
            row = self._tensors[key] = torch.from_numpy(self._np_forbidden(width)).to(
                device)  # type: ignore[arg-type]
        return row  # type: ignore[return-value]

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

    def _np_forbidden(self, width: int) -> np.ndarray:
        """A cached numpy boolean row of ``width``: True where the token is forbidden."""
        key = ("npm", width)
        row = self._tensors.get(key)
        if row is None:
            row = self._tensors[key] = np.ones(width, dtype=bool)
            a = self.allowed_ids()
            row[a[a < width]] = False
        return row  # type: ignore[return-value]

    def np_plan(self, width: int) -> tuple[int, np.ndarray]:
        """How a numpy row of ``width`` logits is masked (cached per width): ``(KEEP, allowed ids)``
        keeps the few allowed logits, ``(FILL, ids)`` sets the few forbidden ones (ids beyond the
        vocabulary included), ``(DENSE, boolean row)`` fills where the row is True. Fancy indexing
        costs about 1 ns an id, a boolean fill about 0.3 ns a logit."""
        key = ("np", width)
        plan = self._tensors.get(key)
        if plan is None:
            if self._allowed is not None and self._allowed.size * 4 <= width:
                a = self._allowed
                plan = (KEEP, a if width >= self.size else a[a < width])
            elif self._forbidden is not None and (self._forbidden.size + max(0, width - self.size)) * 4 \
                    <= width:
                f = self._forbidden  # ids beyond the vocabulary are forbidden too
                f = np.concatenate([f, np.arange(self.size, width, dtype=np.int64)]) if width > self.size \
                    else f[f < width]
                plan = (FILL, f)
            else:
                plan = (DENSE, self._np_forbidden(width))
            self._tensors[key] = plan
        return plan  # type: ignore[return-value]

    def apply_numpy(self, row: np.ndarray) -> None:
        """:meth:`apply` on a numpy row (a CPU tensor's memory, shared through ``Tensor.numpy()``):
        numpy's indexing costs a fraction of a torch operation's dispatch on small rows."""
        kind, ids = self.np_plan(row.shape[0])
        if kind == FILL:
            row[ids] = -np.inf
        elif kind == KEEP:
            vals = row[ids]
            row.fill(-np.inf)
            row[ids] = vals
        else:
            np.copyto(row, -np.inf, where=ids)

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


def numpy_view(t: torch.Tensor) -> np.ndarray | None:
    """The numpy array on ``t``'s own memory where there is one (a CPU tensor of a dtype numpy
    knows: not bfloat16), else None."""
    if not t.is_cpu:
        return None
    try:
        return t.numpy()
    except TypeError:  # a dtype numpy does not know
        return None
    except RuntimeError:  # requires grad: the same memory, detached
        try:
            return t.detach().numpy()
        except TypeError:
            return None


def apply_rows(masks: Sequence[Mask], scores: torch.Tensor) -> None:
    """Apply ``masks[i]`` to row ``i`` of ``scores`` (2-D, any width) in place, for all rows at once.

    Rows that share a mask are handled together and every kind of mask takes one batched operation
    whatever the batch size: the forbidden entries of all rows with few forbidden ids are set in one
    ``index_fill_`` over the flattened scores; rows with few allowed ids keep those logits through one
    gather, one row fill and one scatter; the remaining rows (rare: neither few allowed nor few
    forbidden ids) get one ``index_add_`` of a cached 0/-inf bias per distinct mask. Ids beyond a
    mask's size are forbidden. Same result as ``masks[i].apply(scores[i])`` row by row, which costs
    a few tensor operations per row (docs/design.md §5: batches).

    CPU logits of a dtype numpy knows (not bfloat16) are masked row by row through numpy on the
    tensor's own memory (:meth:`Mask.apply_numpy`, about 1 µs a row; grouping the rows' indices
    was slower at 8 and 64 rows, as fast at 256 rows of 128k logits, faster only at 256 rows of
    3072: 125 against 161 µs).
    """
    import torch

    if scores.dim() != 2 or scores.shape[0] != len(masks):
        raise ValueError(f"expected scores of shape ({len(masks)}, vocab), got {tuple(scores.shape)}")
    if not scores.is_contiguous():
        raise ValueError("expected contiguous scores (a view of the flattened rows is filled in place)")
    width = scores.shape[1]
    arr = numpy_view(scores)
    if arr is not None:
        for i, mk in enumerate(masks):
            mk.apply_numpy(arr[i])
        return
    dev = scores.device
    if len(masks) * width <= DENSE_LIMIT:  # small: one masked_fill_ of cached boolean rows
        if len(masks) == 1:
            scores.masked_fill_(masks[0].forbidden_row(dev, width), float("-inf"))
        else:
            scores.masked_fill_(torch.stack([mk.forbidden_row(dev, width) for mk in masks]), float("-inf"))
        return
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

