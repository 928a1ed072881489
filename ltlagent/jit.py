"""Loops compiled by numba where it is installed (docs/design.md §14, "The loops compiled").

A loop written as plain Python over numpy arrays (a first visit's trie walk, an object's own
rows) is compiled once per process, for the one signature it is always called with, by calling
it on an example of those arguments. Where numba is not installed, or cannot compile the loop (an
older release: a warning), the caller's Python code answers the same.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, cast

__all__ = ["compiled"]


def compiled(fn: Callable[..., Any], example: tuple[object, ...]) -> Callable[..., Any] | None:
    """``fn`` compiled by numba and called once on ``example`` (compiled now, for that
    signature), or None without numba; where numba cannot compile it, None and a warning."""
    try:
        import numba
        jitted = numba.njit(cache=True, nogil=True)(fn)
        jitted(*example)
    except ImportError:  # not installed, or one that refuses this numpy: the Python code runs
        return None
    except Exception as e:  # whatever numba raises, the Python code stands in
        warnings.warn(f"ltlagent: {fn.__name__} is not compiled ({type(e).__name__}: {e}); the Python code "
                      "runs instead", RuntimeWarning, stacklevel=3)
        return None
    return cast(Callable[..., Any], jitted)
