"""A Hugging Face model's KV cache across ``transformers`` versions: 5.24 renamed the forward
pass's ``past_key_values`` keyword (and output field) to ``cache``, and the old keyword now warns
(FutureWarning, to be removed in 5.40). The runners pass and read the cache through these."""

from __future__ import annotations

import functools
import inspect
from typing import Any

__all__ = ["cache_arg", "cache_of"]


@functools.cache
def _keyword(cls: Any) -> str:
    try:
        params = inspect.signature(cls.forward).parameters
    except (AttributeError, TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def cache_arg(model: Any, past: Any) -> dict[str, Any]:
    """The keyword argument that hands ``past`` to ``model``'s forward pass."""
    cls: Any = type(model)
    return {_keyword(cls): past}


def cache_of(output: Any) -> Any:
    """The KV cache a forward pass returned, under either name."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values
