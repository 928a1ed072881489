"""The numba helper (``ltlagent.jit``): a loop is compiled for its example's signature, and what
numba loads leaves every module global readable by ``vars()``, as vLLM's CPU worker reads them when
an engine starts after a decoder was built in the same process (its kernel rebinding calls
``vars(value).get("kernel")`` on each global that has a ``__dict__``)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping

import numpy as np
import pytest

from ltlagent.jit import compiled

needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba is not installed")


def _total(a: np.ndarray) -> int:
    s = 0
    for x in a:
        s += x
    return s


@needs_numba
def test_a_loop_is_compiled_for_its_example() -> None:
    fn = compiled(_total, (np.arange(4, dtype=np.int32),))
    assert fn is not None and fn is not _total
    assert fn(np.arange(10, dtype=np.int32)) == 45
    assert len(fn.signatures) == 1


def _unreadable_globals(prefixes: tuple[str, ...]) -> list[str]:
    """The module globals under ``prefixes`` that vLLM 0.32's ``_rebind_kernels`` fails on: they
    have a ``__dict__`` and ``vars()`` of them is not a mapping."""
    bad = []
    for name, module in list(sys.modules.items()):
        if not name.startswith(prefixes):
            continue
        for attr, value in list(getattr(module, "__dict__", {}).items()):
            if hasattr(value, "__dict__") and not isinstance(vars(value), Mapping):
                bad.append(f"{name}.{attr}: vars() is {type(vars(value)).__name__}")
    return bad


@needs_numba
def test_what_numba_loads_is_readable_by_a_scan_of_globals() -> None:
    assert compiled(_total, (np.arange(4, dtype=np.int32),)) is not None
    assert "llvmlite.binding.ffi" in sys.modules
    assert _unreadable_globals(("numba", "llvmlite", "ltlagent")) == []
    # the library object still reaches the C library for its real functions
    from llvmlite import binding
    assert binding.llvm_version_info >= (1,)
