"""On-disk cache of compiled token indexes (STYLE "caching": compile once, reuse across runs).

Entries are keyed by a hash of the spec (its formula, prompt strings and state options, the tool
names), the tokenizer's vocabulary hash, and the ltlagent and Spot versions, so a change to any of
them misses. Directory: ``$LTLAGENT_CACHE_DIR``, else ``$XDG_CACHE_HOME/ltlagent``, else
``~/.cache/ltlagent``. ``LTLAGENT_CACHE_DIR=off`` (or :func:`disable_cache`) turns it off;
:func:`clear_cache` empties it. Files are written atomically; a damaged entry is ignored. The masks
an index computed are stored beside its entry under the same key (:mod:`ltlagent.decode.warm`).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

__all__ = ["cache_dir", "cache_enabled", "cache_key", "cache_problem", "clear_cache", "disable_cache",
           "enable_cache", "load_entry", "save_entry"]

_ENV_DIR = "LTLAGENT_CACHE_DIR"
_OFF = ("off", "0", "none", "false")
_SUBDIR = "index"


def cache_dir() -> Path:
    """Where compiled indexes are kept."""
    env = os.environ.get(_ENV_DIR, "").strip()
    if env and env.lower() not in _OFF:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "ltlagent"


def cache_enabled() -> bool:
    return os.environ.get(_ENV_DIR, "").strip().lower() not in _OFF


def cache_problem() -> str | None:
    """Why the cache directory cannot be written (it is a file, or cannot be created or written
    to), or None when it can or the cache is off. Asked up front by commands that would otherwise
    find out only when they save, after their work."""
    if not cache_enabled():
        return None
    d = cache_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=d, prefix=".probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        what = ("is not a directory" if d.exists() and not d.is_dir()
                else f"cannot be written ({e.strerror or e})")
        return f"the cache directory {d} ({_ENV_DIR}) {what}"
    return None


def disable_cache() -> None:
    """Turn the cache off for this process (and its children): sets ``LTLAGENT_CACHE_DIR=off``."""
    os.environ[_ENV_DIR] = "off"


def enable_cache(path: str | Path | None = None) -> None:
    """Turn the cache back on, optionally at ``path``."""
    if path is not None:
        os.environ[_ENV_DIR] = str(path)
    elif os.environ.get(_ENV_DIR, "").strip().lower() in _OFF:
        del os.environ[_ENV_DIR]


def clear_cache() -> int:
    """Delete every cached index (and stored masks); returns how many files were removed."""
    d = cache_dir() / _SUBDIR
    n = 0
    if d.is_dir():
        for f in d.glob("*.npz"):
            try:
                f.unlink()
                n += 1
            except OSError:
                pass
    return n


def _versions() -> str:
    from ltlagent import spotlib
    from ltlagent.version import __version__

    try:
        spot_v = spotlib.version()
    except Exception:  # Spot missing or broken: the key still differs from a working install
        spot_v = "?"
    return f"ltlagent {__version__}; spot {spot_v}; index format 1"


def cache_key(*parts: object) -> str:
    """A hex key from JSON-able ``parts`` plus the ltlagent and Spot versions."""
    h = hashlib.sha256(_versions().encode())
    for p in parts:
        h.update(b"\x00")
        h.update(json.dumps(p, sort_keys=True, default=str).encode())
    return h.hexdigest()[:40]


def _path(key: str) -> Path:
    return cache_dir() / _SUBDIR / f"{key}.npz"


def load_entry(key: str) -> dict[str, np.ndarray] | None:
    """The arrays stored under ``key``, or None (missing, disabled, unreadable)."""
    if not cache_enabled():
        return None
    p = _path(key)
    if not p.is_file():
        return None
    try:
        with open(p, "rb") as f, np.load(f, allow_pickle=False) as z:  # our handle: closed on errors too
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):  # truncated or damaged
        return None


def save_entry(key: str, arrays: dict[str, np.ndarray]) -> Path | None:
    """Store ``arrays`` under ``key`` atomically; returns the file (None when disabled/failed)."""
    if not cache_enabled():
        return None
    p = _path(key)
    tmp: str | None = None
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, p)
        return p
    except OSError:
        if tmp is not None:  # nothing half-written stays behind
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return None
