"""Warm masks: the masks a token index computed on first visits, kept on disk beside its cache entry.

A :class:`~ltlagent.decode.monitor.TokenIndex` computes the mask of a machine state the first time a
sequence reaches it (a vectorised walk over the candidate tokens: up to several ms at 128k tokens),
in every new process. With the on-disk cache on (:mod:`ltlagent.decode.cache`), :func:`attach` loads the
masks an earlier process stored and arranges for the ones computed in this process to be stored
when the index is garbage-collected or the interpreter exits (:func:`save_masks` does it now).

Masks are stored under the index's own cache key (spec, vocabulary hash, ltlagent and Spot
versions) plus a suffix for the variant (``newline`` separator on or off), through
:func:`ltlagent.decode.cache.save_entry` (temporary file + ``os.replace``: nothing half-written). Machine
states are interned in visiting order, so entries are keyed by the machine key tuple, not the state
id. A missing, damaged or inconsistent file is ignored (the masks are computed as usual);
``LTLAGENT_CACHE_DIR=off`` turns loading and saving off. Budget-steering masks are not stored.
"""

from __future__ import annotations

import hashlib
import weakref
from pathlib import Path
from typing import Protocol

import numpy as np

from ltlagent.decode import cache as disk
from ltlagent.decode.machine import Key, SpecTables
from ltlagent.decode.masks import Mask
from ltlagent.decode.memo import IndexMemo

__all__ = ["MaskedIndex", "attach", "load_masks", "mask_entry_key", "save_masks"]


class MaskedIndex(Protocol):
    """What this module needs of a :class:`~ltlagent.decode.monitor.TokenIndex` (which imports this
    module; this one does not import it back)."""

    @property
    def memo(self) -> IndexMemo: ...

    @property
    def vocab_size(self) -> int: ...

    @property
    def tables(self) -> SpecTables: ...

    @property
    def mutation(self) -> str | None: ...

_KEY_WIDTH = len(Key._fields)  # machine key (mode, q, cur, node, content, stop, pre, sep, u)
_FORMAT = 2


def mask_entry_key(index_key: str, newline: bool, boundaries: tuple[bytes, ...] = (),
                   utf8: bool = False) -> str:
    """The cache entry name of the masks of the index stored under ``index_key``: per variant of the
    byte machine (the newline separator, the example boundaries, UTF-8 checked or not), whose states
    the masks are of."""
    tag = f"-b{hashlib.sha256(repr(boundaries).encode()).hexdigest()[:12]}" if boundaries else ""
    return f"{index_key}.masks{_FORMAT}-nl{int(newline)}{tag}{'-u8' if utf8 else ''}"


def _arrays(memo: IndexMemo, size: int) -> dict[str, np.ndarray]:
    """The base masks of ``memo`` as flat arrays (see :func:`_decode`)."""
    keys = memo.machine.keys
    items = sorted(memo.masks.items())
    n = len(items)
    rows = np.zeros((n, _KEY_WIDTH + 1), dtype=np.int64)
    kind = np.zeros(n, dtype=np.int8)  # 1: allowed ids stored, 0: forbidden ids stored
    need = np.full(n, -1, dtype=np.int64)
    quiet = np.zeros(n, dtype=bool)
    lengths = np.zeros(n, dtype=np.int64)
    parts: list[np.ndarray] = []
    for i, ((sid, ends_text), mk) in enumerate(items):
        rows[i, :_KEY_WIDTH] = keys[sid]
        rows[i, _KEY_WIDTH] = int(ends_text)
        ids = mk._allowed if mk._allowed is not None else mk._forbidden
        assert ids is not None
        kind[i] = mk._allowed is not None
        need[i] = -1 if mk.max_need is None else mk.max_need
        quiet[i] = mk.quiet
        lengths[i] = ids.size
        parts.append(ids.astype(np.int32))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    ids_all = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
    return {"format": np.asarray(_FORMAT), "size": np.asarray(size), "keys": rows, "kind": kind,
            "max_need": need, "quiet": quiet, "offsets": offsets, "ids": ids_all}


def _decode(entry: dict[str, np.ndarray], size: int) -> list[tuple[Key, bool, Mask]] | None:
    """Masks from a stored entry, or None when it does not hold together (damaged, other vocabulary)."""
    try:
        if int(entry["format"]) != _FORMAT or int(entry["size"]) != size:
            return None
        rows, kind, need, quiet = entry["keys"], entry["kind"], entry["max_need"], entry["quiet"]
        offsets, ids = entry["offsets"], entry["ids"]
    except (KeyError, TypeError, ValueError):
        return None
    n = rows.shape[0] if rows.ndim == 2 else -1
    if (n < 0 or rows.shape[1] != _KEY_WIDTH + 1 or kind.shape != (n,) or need.shape != (n,)
            or quiet.shape != (n,) or offsets.shape != (n + 1,) or ids.ndim != 1):
        return None
    if n and (offsets[0] != 0 or offsets[-1] != ids.size or np.any(np.diff(offsets) < 0)):
        return None
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= size):
        return None
    if n and (int(rows[:, 0].min()) < 0 or int(rows[:, 0].max()) > 3):  # mode FREE..DONE
        return None
    out = []
    for i in range(n):
        part = ids[offsets[i]:offsets[i + 1]].astype(np.int64)
        mk = Mask(size, allowed=part) if kind[i] else Mask(size, forbidden=part)
        mk.max_need = None if need[i] < 0 else int(need[i])
        mk.quiet = bool(quiet[i])
        out.append((Key(*(int(x) for x in rows[i, :_KEY_WIDTH])), bool(rows[i, _KEY_WIDTH]), mk))
    return out


def load_masks(index: MaskedIndex, entry_key: str) -> int:
    """Put the masks stored under ``entry_key`` into ``index``'s memo; returns how many."""
    entry = disk.load_entry(entry_key)
    if entry is None:
        return 0
    masks = _decode(entry, index.vocab_size)
    if masks is None:
        return 0
    memo = index.memo
    m = memo.machine
    for key, ends_text, mk in masks:
        memo.masks.setdefault((m.intern(key), ends_text), mk)
    return len(masks)


def _save(memo: IndexMemo, size: int, entry_key: str, loaded: int) -> Path | None:
    if len(memo.masks) <= loaded:
        return None
    return disk.save_entry(entry_key, _arrays(memo, size))


def save_masks(index: MaskedIndex) -> Path | None:
    """Store ``index``'s masks now (when it was attached and computed new ones); returns the file."""
    warm = index.memo.warm
    if warm is None:
        return None
    entry_key, loaded = warm
    path = _save(index.memo, index.vocab_size, entry_key, loaded)
    if path is not None:
        index.memo.warm = (entry_key, len(index.memo.masks))
    return path


def _finalize(memo: IndexMemo, size: int) -> None:
    warm = memo.warm
    if warm is not None:
        _save(memo, size, *warm)


def attach(index: MaskedIndex, index_key: str) -> int:
    """Load ``index``'s stored masks and store new ones when it dies or the process exits.
    Returns how many masks were loaded (0 with the cache off)."""
    if not disk.cache_enabled() or index.mutation is not None:
        return 0
    entry_key = mask_entry_key(index_key, index.tables.newline, index.tables.boundaries, index.tables.utf8)
    n = load_masks(index, entry_key)
    memo = index.memo
    memo.warm = (entry_key, len(memo.masks))
    memo.disk_key = index_key
    # the callback holds the memo, not the index, so the index can still be collected
    weakref.finalize(index, _finalize, memo, index.vocab_size)
    return n
