"""JSON schemas of typed Python functions: what ``@tool`` tells the model and the decoder.

:func:`type_schema` maps a type hint to a JSON schema (``str``, ``int``, ``float``, ``bool``,
``None``, ``Literal[…]``, ``Enum`` subclasses, ``list[…]``/``tuple[X, ...]``, ``Optional``/unions,
``TypedDict`` and dataclasses to :data:`MAX_TYPE_DEPTH` levels; ``dict`` and ``Any`` become the
unconstrained schemas they are, which the JSON-schema compiler refuses when asked to constrain
them). :func:`function_parameters` makes the OpenAI ``parameters`` object of a function: one
property per argument in signature order, described by the docstring, required unless it has a
default. :func:`openai_tool` wraps a name, description and parameters as
``{"type": "function", "function": {…}}`` for ``apply_chat_template(tools=…)`` and the OpenAI API.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence

from ltlagent.errors import LtlAgentError

__all__ = ["SignatureError", "type_schema", "function_parameters", "openai_tool", "coarse_type",
           "MAX_TYPE_DEPTH"]

#: Deepest nesting of TypedDicts, dataclasses and lists in a tool's argument types.
MAX_TYPE_DEPTH = 5
_SCALARS: dict[object, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                               type(None): "null"}


class SignatureError(LtlAgentError, ValueError):
    """A type hint that has no JSON schema here (named with where it occurs)."""


def _literal_schema(values: Sequence[object], where: str) -> dict[str, object]:
    for v in values:
        if not (v is None or isinstance(v, str | int | bool)):
            raise SignatureError(f"{where}: the literal {v!r} is not a string, integer, boolean or None")
    out: dict[str, object] = {"enum": list(values)}
    kinds = {_SCALARS[type(v)] for v in values}
    if len(kinds) == 1:
        out = {"type": kinds.pop(), **out}
    return out


def type_schema(hint: object, where: str = "type", depth: int = 0) -> dict[str, object]:
    """The JSON schema of ``hint``; :class:`SignatureError` (saying ``where``) for types without one."""
    if depth > MAX_TYPE_DEPTH:
        raise SignatureError(f"{where}: nested deeper than {MAX_TYPE_DEPTH} levels (or recursive)")
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if hint is None:
        return {"type": "null"}
    if hint is typing.Any:
        return {}
    if origin is typing.Annotated:
        return type_schema(args[0], where, depth)
    if origin is typing.Literal:
        return _literal_schema(args, where)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _literal_schema([m.value for m in hint], where)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        subs = [type_schema(a, where, depth) for a in rest]
        nullable = len(rest) < len(args)
        if nullable and len(subs) == 1 and set(subs[0]) == {"type"} and isinstance(subs[0]["type"], str):
            return {"type": [subs[0]["type"], "null"]}
        return {"anyOf": subs + ([{"type": "null"}] if nullable else [])}
    if origin in (list, Sequence, tuple) or hint in (list, tuple):
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            raise SignatureError(f"{where}: only tuple[X, ...] is supported (a list of X)")
        if not args:  # a bare list: any items (the JSON-schema compiler refuses to constrain it)
            return {"type": "array"}
        return {"type": "array", "items": type_schema(args[0], f"{where}[]", depth + 1)}
    if hint is dict or origin is dict:
        return {"type": "object"}
    if typing.is_typeddict(hint):
        hints = typing.get_type_hints(hint)
        required = getattr(hint, "__required_keys__", frozenset(hints))
        return {"type": "object",
                "properties": {k: type_schema(t, f"{where}.{k}", depth + 1) for k, t in hints.items()},
                "required": [k for k in hints if k in required], "additionalProperties": False}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        fields = dataclasses.fields(hint)
        return {"type": "object",
                "properties": {f.name: type_schema(hints[f.name], f"{where}.{f.name}", depth + 1)
                               for f in fields},
                "required": [f.name for f in fields if f.default is dataclasses.MISSING
                             and f.default_factory is dataclasses.MISSING],
                "additionalProperties": False}
    raise SignatureError(f"{where}: the type {hint!r} has no JSON schema here (use str, int, float, "
                         "bool, Literal, an Enum, list[...], Optional, a TypedDict or a dataclass)")


def function_parameters(fn: Callable[..., object], descriptions: Mapping[str, str] | None = None
                        ) -> dict[str, object]:
    """The ``parameters`` object schema of ``fn``: a property per argument (signature order) with
    its docstring description, required unless it has a default."""
    hints = typing.get_type_hints(fn, include_extras=True)
    props: dict[str, object] = {}
    required: list[str] = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise SignatureError(f"{fn.__name__}: *args/**kwargs have no JSON schema; name each input")
        if p.name not in hints:
            raise SignatureError(f"{fn.__name__}: argument {p.name!r} needs a type hint")
        schema = type_schema(hints[p.name], f"{fn.__name__}({p.name})")
        if descriptions and descriptions.get(p.name):
            schema = {**schema, "description": descriptions[p.name]}
        props[p.name] = schema
        if p.default is p.empty:
            required.append(p.name)
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def coarse_type(schema: Mapping[str, object]) -> str:
    """The one type name (``string``, ``integer``, …, or ``any``) a schema's values all have."""
    t = schema.get("type")
    if isinstance(t, list):
        rest = [x for x in t if x != "null"]
        t = rest[0] if len(rest) == 1 else None
    if isinstance(t, str) and t != "null":
        return t
    if "enum" in schema:
        kinds = {_SCALARS[type(v)] for v in typing.cast(list[object], schema["enum"]) if v is not None}
        if len(kinds) == 1:
            return kinds.pop()
    if "anyOf" in schema:
        subs = [coarse_type(s) for s in typing.cast(list[Mapping[str, object]], schema["anyOf"])
                if s.get("type") != "null"]
        if len(set(subs)) == 1:
            return subs[0]
    return "any"


def openai_tool(name: str, description: str, parameters: Mapping[str, object]) -> dict[str, object]:
    """One entry of OpenAI's (and ``apply_chat_template``'s) ``tools`` list."""
    return {"type": "function",
            "function": {"name": name, "description": description, "parameters": dict(parameters)}}
