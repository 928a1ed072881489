"""Loops compiled by numba where it is installed (docs/design.md §14, "The loops compiled").

A loop written as plain Python over numpy arrays (a first visit's trie walk, an object's own
rows) is compiled once per process, for the one signature it is always called with, by calling
it on an example of those arguments. Where numba is not installed, or cannot compile the loop (an
older release: a warning), the caller's Python code answers the same.

Importing numba loads llvmlite, whose library object answers ``vars()`` with a wrapped function
instead of a mapping. vLLM's CPU worker (0.32) scans every module's globals with ``vars(value)``
when an engine starts and fails on it, so :func:`compiled` gives that object an empty mapping
(:func:`_mappable_llvmlite`): an engine may then start after a decoder was built in the process.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any, cast

__all__ = ["compiled"]


def compiled(fn: Callable[..., Any], example: tuple[object, ...]) -> Callable[..., Any] | None:
    """``fn`` compiled by numba and called once on ``example`` (compiled now, for that
    signature), or None without numba; where numba cannot compile it, None and a warning."""
    try:
        import numba
        _mappable_llvmlite()
        jitted = numba.njit(cache=True, nogil=True)(fn)
        jitted(*example)
    except ImportError:  # not installed, or one that refuses this numpy: the Python code runs
        return None
    except Exception as e:  # whatever numba raises, the Python code stands in
        warnings.warn(f"ltlagent: {fn.__name__} is not compiled ({type(e).__name__}: {e}); the Python code "
                      "runs instead", RuntimeWarning, stacklevel=3)
        return None
    return cast(Callable[..., Any], jitted)


def _mappable_llvmlite() -> None:
    """Let ``vars()`` of llvmlite's library object be an empty mapping, as it is for objects
    without attributes of their own. The object keeps its state in slots and forwards every other
    attribute to the C library, ``__dict__`` included, so ``vars(lib)`` is a wrapped C function and
    a scan of module globals such as vLLM's kernel rebinding (``vars(value).get(...)``) raises
    ``AttributeError`` on it. Its ``__getattr__`` looks names up in its table first."""
    try:
        from llvmlite.binding import ffi
        lib = ffi.lib
        if not isinstance(vars(lib), Mapping):
            lib._fntab["__dict__"] = {}
    except Exception:  # another llvmlite: nothing to mend, or nothing this knows how to mend
        pass
