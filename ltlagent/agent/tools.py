"""Tools an agent can call from its Action state, and the bundled ones: Calculator, Search, Lookup.

A :class:`Tool` has a name, a description, typed inputs and a callable (the shape smolagents users
know); its schema is checked when it is defined, not when the model first calls it. The agent hands
a tool the text of the Action Input state; :meth:`Tool.invoke` maps that text onto the tool's inputs.

OpenAI function tools (the ``tools=[…]`` of a chat agent) are checked by :func:`function_schemas`:
their shape, their names (:data:`FUNCTION_NAME`) and no name twice.

The bundled tools answer with text in a fixed format, because the bundled model is trained on traces
they produce: keep the wording of their messages stable.
"""

from __future__ import annotations

import ast
import inspect
import json
import math
import operator
import re
import sqlite3
import threading
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ltlagent.agent.signature import (
    SignatureError,
    coarse_type,
    function_parameters,
    openai_tool,
    type_schema,
)
from ltlagent.errors import LtlAgentError, UsageError

__all__ = [
    "Tool", "ToolError", "tool", "Calculator", "DocumentStore", "Document", "Search", "Lookup",
    "wikipedia_style_tools", "INPUT_TYPES", "openai_tools", "FUNCTION_NAME", "function_schemas",
]

#: JSON-schema-like type names a tool input may declare.
INPUT_TYPES = ("string", "integer", "number", "boolean", "object", "array", "any")

_PY_TYPES: dict[object, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                                dict: "object", list: "array", typing.Any: "any"}
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
#: What an OpenAI function tool's name may be (OpenAI's rule, fullmatched): ASCII letters, digits,
#: ``_`` and ``-``, 1 to 64 of them. So no empty name, no whitespace, no ``<`` (``</tool_call>``
#: would end a hermes call early), no quote or backslash, and no look-alike letters (Cyrillic
#: ``о`` for ``o``) that show the model, or a person reading the transcript, another tool's name.
FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class ToolError(LtlAgentError, ValueError):
    """A tool definition is malformed (raised when the tool is defined, not when it is called)."""


# --- the Tool type ---------------------------------------------------------------------------

class Tool:
    """A function the agent can call: ``name``, ``description``, ``inputs``, ``output_type``.

    Either subclass it (class attributes plus a ``forward`` method) or build one directly:
    ``Tool(name="Echo", description="…", inputs={"text": {"type": "string", "description": "…"}},
    function=fn)``. ``inputs`` maps each argument name to ``{"type": …, "description": …}``
    (``"nullable": True`` makes it optional). ``parameters`` is the full JSON schema of the
    arguments (an object schema), for tools defined elsewhere or richer types than ``inputs`` says:
    ``@tool`` fills it from the type hints; without it :meth:`json_schema` derives one from
    ``inputs``; given alone, ``inputs`` is derived from it.
    """

    name: str = ""
    description: str = ""
    inputs: dict[str, dict[str, object]]
    output_type: str = "string"
    parameters: dict[str, object] | None = None
    _function: Callable[..., object] | None = None

    def __init__(self, name: str | None = None, description: str | None = None,
                 inputs: Mapping[str, Mapping[str, object]] | None = None,
                 function: Callable[..., object] | None = None, output_type: str | None = None,
                 parameters: Mapping[str, object] | None = None) -> None:
        if name is not None:
            self.name = name
        if description is not None:
            self.description = description
        if parameters is not None:
            self.parameters = _check_parameters(parameters, self.name)
            if inputs is None:
                inputs = _inputs_of(self.parameters)
        declared = inputs if inputs is not None else getattr(self, "inputs", {})
        if not isinstance(declared, Mapping):
            raise ToolError(f"tool {self.name!r}: inputs must be a dict of name -> {{'type', 'description'}}")
        self.inputs = {k: dict(v) if isinstance(v, Mapping) else v for k, v in declared.items()}
        if output_type is not None:
            self.output_type = output_type
        self._function = function
        self.validate()

    # -- definition-time checks --
    def validate(self) -> None:
        """Check the schema now, so a bad tool fails where it is written."""
        who = f"tool {self.name!r}" if self.name else f"tool class {type(self).__name__}"
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise ToolError(f"{who}: the name must be a non-empty identifier (letters, digits, _ or -), "
                            f"got {self.name!r}")
        if not isinstance(self.description, str) or not self.description.strip():
            raise ToolError(f"{who}: a description is required (it is shown to the model)")
        if "\n\n" in self.description.strip():
            raise ToolError(f"{who}: the description must be one paragraph (no blank lines)")
        if not isinstance(self.inputs, dict):
            raise ToolError(f"{who}: inputs must be a dict of name -> {{'type', 'description'}}")
        for arg, schema in self.inputs.items():
            if not isinstance(arg, str) or not arg.isidentifier():
                raise ToolError(f"{who}: input name {arg!r} is not an identifier")
            if not isinstance(schema, dict) or set(schema) - {"type", "description", "nullable"}:
                raise ToolError(f"{who}: input {arg!r} must be a dict with keys 'type', 'description' "
                                f"(and optional 'nullable'), got {schema!r}")
            if schema.get("type") not in INPUT_TYPES:
                raise ToolError(f"{who}: input {arg!r} has type {schema.get('type')!r}; expected one of "
                                f"{', '.join(INPUT_TYPES)}")
            if not isinstance(schema.get("description"), str) or not str(schema["description"]).strip():
                raise ToolError(f"{who}: input {arg!r} needs a description")
        if self.output_type not in INPUT_TYPES:
            raise ToolError(f"{who}: output_type {self.output_type!r} is not one of {', '.join(INPUT_TYPES)}")
        fn = self._function if self._function is not None else self.forward
        if self._function is None and type(self).forward is Tool.forward:
            raise ToolError(f"{who}: give a function= or define forward() in a subclass")
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return  # builtins without a signature: trust the declared inputs
        params = [p for p in sig.parameters.values()
                  if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values()):
            return
        names = [p.name for p in params]
        if set(names) != set(self.inputs):
            raise ToolError(f"{who}: the function's arguments {names} do not match the declared inputs "
                            f"{list(self.inputs)}")

    # -- calling --
    def forward(self, *args: object, **kwargs: object) -> object:
        """The tool's work; subclasses override this (or pass ``function=``)."""
        if self._function is None:
            raise NotImplementedError
        return self._function(*args, **kwargs)

    def __call__(self, *args: object, **kwargs: object) -> object:
        return self.forward(*args, **kwargs)

    def reset(self) -> None:
        """Forget per-run state (Lookup's last page, say); the agent calls this at the start of a run."""

    def invoke(self, text: str) -> str:
        """Call the tool with the text the model wrote in Action Input; return its answer as text.

        One input: the whole text (converted to the input's type). Several inputs: the text must be a
        JSON object. A malformed input raises :class:`ValueError` with a message meant for the model.
        """
        text = text.strip()
        if not self.inputs:
            out = self.forward()
        elif len(self.inputs) == 1:
            arg, schema = next(iter(self.inputs.items()))
            out = self.forward(**{arg: _convert(text, str(schema["type"]), arg)})
        else:
            try:
                obj = json.loads(text)
            except json.JSONDecodeError:
                obj = None
            if not isinstance(obj, dict):
                raise ValueError(f"{self.name} takes a JSON object with keys {', '.join(self.inputs)}")
            unknown = set(obj) - set(self.inputs)
            if unknown:
                raise ValueError(f"{self.name} has no input {sorted(unknown)[0]!r}")
            missing = [k for k, s in self.inputs.items() if k not in obj and not s.get("nullable")]
            if missing:
                raise ValueError(f"{self.name} needs the input {missing[0]!r}")
            out = self.forward(**{k: _convert(v, str(self.inputs[k]["type"]), k) for k, v in obj.items()})
        return _to_text(out)

    def describe(self) -> str:
        """One line for the prompt's ``{{tool_descriptions}}``: ``Name: description``."""
        return f"{self.name}: {' '.join(self.description.split())}"

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "description": self.description, "inputs": self.inputs,
                "output_type": self.output_type}

    def json_schema(self) -> dict[str, object]:
        """The JSON schema of the arguments (an object): ``parameters``, else derived from ``inputs``
        (a nullable input is optional and may be null; ``any`` has no type)."""
        if self.parameters is not None:
            return self.parameters
        props: dict[str, object] = {}
        required: list[str] = []
        for arg, spec in self.inputs.items():
            t = str(spec["type"])
            schema: dict[str, object] = {} if t == "any" else {"type": t}
            if spec.get("nullable"):
                if t != "any":
                    schema["type"] = [t, "null"]
            else:
                required.append(arg)
            schema["description"] = spec["description"]
            props[arg] = schema
        return {"type": "object", "properties": props, "required": required,
                "additionalProperties": False}

    def to_openai(self) -> dict[str, object]:
        """This tool as an entry of OpenAI's ``tools`` list (and ``apply_chat_template(tools=…)``)."""
        return openai_tool(self.name, self.description, self.json_schema())

    def __repr__(self) -> str:
        return f"<Tool {self.name}>"


def openai_tools(tools: Iterable[Tool]) -> list[dict[str, object]]:
    """The ``tools=[{"type": "function", "function": {name, description, parameters}}, …]`` list."""
    return [t.to_openai() for t in tools]


def function_schemas(tools: Iterable[Mapping[str, object]]) -> dict[str, Mapping[str, object]]:
    """Each OpenAI function tool's name and parameters schema (``{"type": "function", "function":
    {"name": …, "parameters": {…}}}``, or the inner object alone; no parameters: no arguments),
    checked where the tools are given: a :class:`~ltlagent.errors.UsageError` for another shape, a
    name :data:`FUNCTION_NAME` does not fullmatch, a name given twice (one would shadow the other),
    or parameters that are not a JSON object schema."""
    out: dict[str, Mapping[str, object]] = {}
    for k, t in enumerate(tools):
        fn = t.get("function", t) if isinstance(t, Mapping) else None
        kind = t.get("type", "function") if isinstance(t, Mapping) else None
        if not isinstance(fn, Mapping) or kind != "function" or not isinstance(fn.get("name"), str):
            raise UsageError(f"tools[{k}]: tools are OpenAI function tools: {{'type': 'function', "
                             "'function': {'name': …, 'parameters': {…}}}")
        name = str(fn["name"])
        if not FUNCTION_NAME.fullmatch(name):
            raise UsageError(f"tools[{k}]: tool name {name!r}: 1 to 64 ASCII letters, digits, '_' "
                             "and '-' only (no spaces, '<', quotes or look-alike letters)")
        if name in out:
            raise UsageError(f"tools[{k}]: tool name {name!r} given twice")
        params = fn.get("parameters")
        if params is None:
            params = {"type": "object", "properties": {}}
        if not isinstance(params, Mapping) or params.get("type", "object") != "object":
            raise UsageError(f"tool {name!r}: parameters must be a JSON schema of type 'object' "
                             f"(the arguments of a call are an object), got {params!r}")
        out[name] = params
    return out


def _check_parameters(parameters: Mapping[str, object], name: str) -> dict[str, object]:
    if not isinstance(parameters, Mapping) or parameters.get("type") != "object":
        raise ToolError(f"tool {name!r}: parameters must be a JSON schema of type object, "
                        f"got {parameters!r}")
    props = parameters.get("properties", {})
    if not isinstance(props, Mapping) or not all(isinstance(v, Mapping) for v in props.values()):
        raise ToolError(f"tool {name!r}: parameters.properties must map names to schemas")
    return dict(parameters)


def _inputs_of(parameters: Mapping[str, object]) -> dict[str, dict[str, object]]:
    """``inputs`` from a parameters schema: each property's coarse type and description."""
    props = typing.cast(Mapping[str, Mapping[str, object]], parameters.get("properties", {}))
    required = parameters.get("required", [])
    out: dict[str, dict[str, object]] = {}
    for arg, schema in props.items():
        spec: dict[str, object] = {"type": coarse_type(schema),
                                   "description": str(schema.get("description") or arg)}
        if not isinstance(required, list) or arg not in required:
            spec["nullable"] = True
        out[arg] = spec
    return out


def _convert(value: object, type_: str, arg: str) -> object:
    """Convert an input to its declared type, with a message for the model when it cannot."""
    if type_ in ("string", "any"):
        return value if type_ == "any" or isinstance(value, str) else json.dumps(value)
    if isinstance(value, str):
        s = value.strip()
        try:
            if type_ == "integer":
                return int(s)
            if type_ == "number":
                return float(s)
            if type_ == "boolean":
                if s.lower() in ("true", "yes", "1"):
                    return True
                if s.lower() in ("false", "no", "0"):
                    return False
                raise ValueError
            parsed = json.loads(s)
        except ValueError:
            raise ValueError(f"input {arg!r} must be of type {type_}, got {s[:40]!r}") from None
        value = parsed
    kinds: dict[str, type | tuple[type, ...]] = {"integer": int, "number": (int, float),
                                                 "boolean": bool, "object": dict, "array": list}
    ok = kinds[type_]
    if not isinstance(value, ok):
        raise ValueError(f"input {arg!r} must be of type {type_}")
    return value


def _to_text(out: object) -> str:
    if out is None:
        return ""
    if isinstance(out, str):
        return out
    if isinstance(out, dict | list):
        try:
            return json.dumps(out, ensure_ascii=False)
        except (TypeError, ValueError):
            pass
    return str(out)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description (text before ``Args:``) and the per-argument descriptions of a docstring."""
    doc = inspect.cleandoc(doc)
    parts = re.split(r"^\s*(?:Args|Arguments|Parameters):\s*$", doc, maxsplit=1, flags=re.M)
    description = parts[0].strip()
    description = re.split(r"^\s*(?:Returns|Raises|Examples?):\s*$", description, maxsplit=1,
                           flags=re.M)[0].strip()
    args: dict[str, str] = {}
    if len(parts) == 2:
        section = re.split(r"^\s*(?:Returns|Raises|Examples?):\s*$", parts[1], maxsplit=1, flags=re.M)[0]
        current = None
        for line in section.splitlines():
            m = re.match(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
            if m:
                current = m.group(1)
                args[current] = m.group(2).strip()
            elif current and line.strip():
                args[current] = (args[current] + " " + line.strip()).strip()
    return " ".join(description.split()), args


def tool(function: Callable[..., object] | None = None, *, name: str | None = None
         ) -> Tool | Callable[[Callable[..., object]], Tool]:
    """Make a :class:`Tool` from a typed function whose docstring documents every argument.

    >>> @tool
    ... def Echo(text: str) -> str:
    ...     '''Repeat the text.
    ...
    ...     Args:
    ...         text: what to repeat
    ...     '''
    ...     return text

    The name is the function's name (or ``name=``); the description the docstring's first part.
    """

    def build(fn: Callable[..., object]) -> Tool:
        tname = name or fn.__name__
        if not fn.__doc__:
            raise ToolError(f"tool {tname!r}: the function needs a docstring (it becomes the description)")
        description, arg_docs = _parse_docstring(fn.__doc__)
        try:
            hints = typing.get_type_hints(fn)
        except Exception as e:  # unresolvable annotations
            raise ToolError(f"tool {tname!r}: cannot read its type hints: {e}") from None
        inputs: dict[str, dict[str, object]] = {}
        for p in inspect.signature(fn).parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise ToolError(f"tool {tname!r}: *args/**kwargs are not supported; name each input")
            if p.name not in hints:
                raise ToolError(f"tool {tname!r}: argument {p.name!r} needs a type hint")
            hint = hints[p.name]
            nullable = False
            if typing.get_origin(hint) in (typing.Union, types.UnionType):
                nullable = type(None) in typing.get_args(hint)
            try:
                type_ = coarse_type(type_schema(hint, f"argument {p.name!r}"))
            except SignatureError as e:
                raise ToolError(f"tool {tname!r}: {e}") from None
            if p.name not in arg_docs or not arg_docs[p.name]:
                raise ToolError(f"tool {tname!r}: argument {p.name!r} is not described in the docstring's "
                                "'Args:' section")
            schema: dict[str, object] = {"type": type_, "description": arg_docs[p.name]}
            if nullable or p.default is not p.empty:
                schema["nullable"] = True
            inputs[p.name] = schema
        ret = hints.get("return", str)
        out_type = _PY_TYPES.get(typing.get_origin(ret) or ret, "any")
        try:
            parameters = function_parameters(fn, arg_docs)
        except SignatureError as e:
            raise ToolError(f"tool {tname!r}: {e}") from None
        return Tool(name=tname, description=description, inputs=inputs, function=fn, output_type=out_type,
                    parameters=parameters)

    if function is not None:
        return build(function)
    return build


# --- Calculator ------------------------------------------------------------------------------

# Any: operands are whatever _eval returns (int or float), checked by _check after each step
_BINOPS: dict[type, Callable[[typing.Any, typing.Any], typing.Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[typing.Any], typing.Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class _Refused(Exception):
    """The expression is not plain bounded arithmetic; the message says why."""


class Calculator(Tool):
    """Arithmetic through an AST walker: numbers, ``+ - * / // % **``, parentheses; nothing else.

    No ``eval``: names, calls, attributes, subscripts, comparisons are refused with a message, and
    so are inputs longer than ``max_length``, numbers beyond ``max_digits`` digits and exponents
    beyond ``max_exponent``. Division by zero is answered in words. ``^`` is read as ``**``.
    """

    name = "Calculator"
    description = "Evaluate an arithmetic expression with numbers, + - * / // % ** and parentheses."
    inputs: dict[str, dict[str, object]] = {  # noqa: RUF012 (read-only; instances may override)
        "expression": {"type": "string", "description": "the expression, e.g. 17 * 23 + 4"}}

    def __init__(self, max_length: int = 200, max_digits: int = 1000, max_exponent: int = 10_000) -> None:
        self.max_length = max_length
        self.max_digits = max_digits
        self.max_exponent = max_exponent
        super().__init__()

    def forward(self, expression: str) -> str:  # type: ignore[override]
        text = expression.strip().rstrip("=").strip()
        if len(text) > self.max_length:
            return (f"Calculator error: the expression is too long ({len(text)} characters; "
                    f"at most {self.max_length}).")
        if not text:
            return "Calculator error: the expression is empty."
        text = text.replace("^", "**").replace("×", "*").replace("÷", "/").replace("−", "-")
        try:
            tree = ast.parse(text, mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return f"Calculator error: cannot read {text!r} as arithmetic."
        try:
            value = self._eval(tree.body)
        except _Refused as e:
            return f"Calculator error: {e}"
        except ZeroDivisionError:
            return "Division by zero is undefined."
        except (OverflowError, RecursionError, MemoryError):
            return "Calculator error: the result is too large."
        return self.format(value)

    @staticmethod
    def format(value: int | float) -> str:
        """Integers exactly; floats with 12 significant digits, integral ones without ``.0``."""
        if isinstance(value, float):
            if value.is_integer() and abs(value) < 1e15:
                return str(int(value))
            return f"{value:.12g}"
        return str(value)

    def _check(self, value: int | float) -> int | float:
        if isinstance(value, float):
            if math.isinf(value) or math.isnan(value):
                raise _Refused("the result is too large.")
            return value
        if value.bit_length() > self.max_digits * 3.33:  # about max_digits decimal digits
            raise _Refused(f"the result has more than {self.max_digits} digits.")
        return value

    def _eval(self, node: ast.AST) -> int | float:
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise _Refused(f"only numbers are allowed, not {type(v).__name__} {v!r}.")
            if isinstance(v, float) and math.isinf(v):
                raise _Refused("the number is too large.")
            return self._check(v)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = self._eval(node.left), self._eval(node.right)
            if isinstance(node.op, ast.Pow):
                self._check_power(left, right)
            value = _BINOPS[type(node.op)](left, right)
            if isinstance(value, complex):
                raise _Refused("the result is not a real number.")
            return self._check(value)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return self._check(_UNARY[type(node.op)](self._eval(node.operand)))
        raise _Refused(self._why(node))

    def _check_power(self, base: int | float, exp: int | float) -> None:
        if abs(exp) > self.max_exponent:
            raise _Refused(f"the exponent is too large ({Calculator.format(exp)}; "
                           f"at most {self.max_exponent}).")
        if base and abs(base) != 1 and exp > 0:
            digits = exp * math.log10(abs(base))
            if digits > self.max_digits:
                raise _Refused(f"the result would have about {int(digits)} digits "
                               f"(at most {self.max_digits}).")
        if base == 0 and exp < 0:
            raise ZeroDivisionError

    @staticmethod
    def _why(node: ast.AST) -> str:
        if isinstance(node, ast.Call):
            return "function calls are not allowed (only numbers, + - * / // % ** and parentheses)."
        if isinstance(node, ast.Name):
            return f"names are not allowed ({node.id!r}); write numbers only."
        if isinstance(node, ast.Attribute):
            return "attribute access is not allowed."
        if isinstance(node, ast.Subscript):
            return "indexing is not allowed."
        if isinstance(node, ast.Compare | ast.BoolOp):
            return "comparisons and logic are not allowed."
        if isinstance(node, ast.BinOp):
            return f"the operator {type(node.op).__name__} is not allowed (only + - * / // % **)."
        if isinstance(node, ast.UnaryOp):
            return f"the operator {type(node.op).__name__} is not allowed."
        return f"{type(node).__name__} is not arithmetic."


# --- documents, Search and Lookup -----------------------------------------------------------------

@dataclass(frozen=True)
class Document:
    """One page of a document store."""

    title: str
    text: str


_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


def split_sentences(text: str) -> list[str]:
    """Sentences of a page: split after ``.``, ``!`` or ``?`` followed by space, and at line breaks."""
    out: list[str] = []
    for para in re.split(r"\n+", text):
        out.extend(s.strip() for s in _SENTENCE_END.split(para.strip()) if s.strip())
    return out


def _norm(text: str) -> tuple[str, ...]:
    return tuple(w.lower() for w in _WORD.findall(text))


class DocumentStore:
    """Pages (title, text) indexed with SQLite FTS5 (standard library, in memory, built on first use).

    Load a JSONL file (one ``{"title": …, "text": …}`` per line) or a folder of ``.txt`` files (the
    file name is the title, underscores read as spaces) with :meth:`from_path`, or pass documents.
    """

    def __init__(self, documents: Iterable[Document | tuple[str, str]] | Mapping[str, str]) -> None:
        items = documents.items() if isinstance(documents, Mapping) else documents
        docs = [d if isinstance(d, Document) else Document(str(d[0]), str(d[1])) for d in items]
        self.documents: tuple[Document, ...] = tuple(docs)
        self._by_title: dict[tuple[str, ...], int] = {}
        for i, d in enumerate(self.documents):
            self._by_title.setdefault(_norm(d.title), i)
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_path(cls, path: str | Path) -> DocumentStore:
        """A store from a ``.jsonl`` file or a folder of ``.txt`` files; :class:`UsageError` if neither."""
        p = Path(path)
        if p.is_dir():
            files = sorted(p.rglob("*.txt"))
            if not files:
                raise UsageError(f"{p}: the folder has no .txt files")
            return cls([Document(f.stem.replace("_", " "), f.read_text(encoding="utf-8", errors="replace"))
                        for f in files])
        if not p.is_file():
            raise UsageError(f"{p}: no such file or folder")
        docs: list[Document] = []
        with p.open(encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise UsageError(f"{p}:{lineno}:{e.colno}: not valid JSON: {e.msg}") from None
                if not isinstance(obj, dict):
                    raise UsageError(f"{p}:{lineno}:1: expected an object with 'title' and 'text'")
                title = obj.get("title")
                text = next((obj[k] for k in ("text", "body", "contents", "content") if k in obj), None)
                if not isinstance(title, str) or not isinstance(text, str):
                    raise UsageError(f"{p}:{lineno}:1: expected string fields 'title' and 'text'")
                docs.append(Document(title, text))
        if not docs:
            raise UsageError(f"{p}: no documents")
        return cls(docs)

    def __len__(self) -> int:
        return len(self.documents)

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            db = sqlite3.connect(":memory:", check_same_thread=False)
            db.execute("CREATE VIRTUAL TABLE pages USING fts5(title, body, "
                       "tokenize='unicode61 remove_diacritics 2')")
            db.executemany("INSERT INTO pages(rowid, title, body) VALUES (?, ?, ?)",
                           ((i, d.title, d.text) for i, d in enumerate(self.documents)))
            self._db = db
        return self._db

    def search(self, query: str, limit: int = 5) -> list[Document]:
        """Pages ranked by BM25 (title weighted 10×) for any word of ``query``; best first."""
        words = _norm(query)[:32]
        if not words:
            return []
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in dict.fromkeys(words))
        with self._lock:
            rows = self._conn().execute(
                "SELECT rowid FROM pages WHERE pages MATCH ? ORDER BY bm25(pages, 10.0, 1.0) LIMIT ?",
                (match, limit)).fetchall()
        return [self.documents[r[0]] for r in rows]

    def page(self, query: str) -> Document | None:
        """The page ``query`` names: same title (case and punctuation ignored), else the best-ranked
        page whose title contains every word of the query; None when no page is named."""
        words = _norm(query)
        if not words:
            return None
        i = self._by_title.get(words)
        if i is not None:
            return self.documents[i]
        want = set(words)
        for d in self.search(query, limit=10):
            if want <= set(_norm(d.title)):
                return d
        return None


class _Browser:
    """The per-run state Search and Lookup share: the last page found and the lookup cursor."""

    def __init__(self, store: DocumentStore) -> None:
        self.store = store
        self.page: Document | None = None
        self.searched = False
        self.keyword: str | None = None
        self.results: list[str] = []
        self.cursor = 0

    def reset(self) -> None:
        self.page, self.searched, self.keyword, self.results, self.cursor = None, False, None, [], 0


class Search(Tool):
    """ReAct's Search: the first sentences of the page the query names, or the titles of similar
    pages (``Could not find X. Similar: ['A', 'B'].``)."""

    name = "Search"
    description = ("Search for a page by its title; returns its first sentences, or similar titles "
                   "when no page has that title.")
    inputs: dict[str, dict[str, object]] = {  # noqa: RUF012 (read-only; instances may override)
        "query": {"type": "string", "description": "the title (entity) to search for"}}

    def __init__(self, store: DocumentStore, sentences: int = 5, *, _browser: _Browser | None = None) -> None:
        self.store = store
        self.sentences = sentences
        self.browser = _browser or _Browser(store)
        super().__init__()

    def reset(self) -> None:
        self.browser.reset()

    def forward(self, query: str) -> str:  # type: ignore[override]
        query = " ".join(query.split()).strip("[]\"' ")
        b = self.browser
        b.searched = True
        b.keyword, b.results, b.cursor = None, [], 0
        page = self.store.page(query)
        if page is not None:
            b.page = page
            return " ".join(split_sentences(page.text)[: self.sentences])
        b.page = None
        similar = [d.title for d in self.store.search(query, limit=5)]
        return f"Could not find {query}. Similar: {similar}."


class Lookup(Tool):
    """ReAct's Lookup: the next sentence of the last page found by Search that contains the string,
    as ``(Result i / n) sentence``; ``No more results.`` after the last one."""

    name = "Lookup"
    description = ("Look up a string in the last page found by Search; returns the next sentence "
                   "containing it.")
    inputs: dict[str, dict[str, object]] = {  # noqa: RUF012 (read-only; instances may override)
        "keyword": {"type": "string", "description": "the string to look up"}}

    def __init__(self, store: DocumentStore, *, _browser: _Browser | None = None) -> None:
        self.store = store
        self.browser = _browser or _Browser(store)
        super().__init__()

    def reset(self) -> None:
        self.browser.reset()

    def forward(self, keyword: str) -> str:  # type: ignore[override]
        b = self.browser
        if not b.searched:
            return "Cannot use Lookup without using Search first!"
        if b.page is None:  # the last Search found no page (ReAct answers the same)
            return "No more results."
        keyword = " ".join(keyword.split()).strip("[]\"' ")
        if keyword.lower() != (b.keyword or "").lower() or b.keyword is None:
            b.keyword = keyword
            k = keyword.lower()
            b.results = [s for s in split_sentences(b.page.text) if k and k in s.lower()]
            b.cursor = 0
        if b.cursor >= len(b.results):
            return "No more results."
        b.cursor += 1
        return f"(Result {b.cursor} / {len(b.results)}) {b.results[b.cursor - 1]}"


def wikipedia_style_tools(store: DocumentStore | str | Path, sentences: int = 5) -> list[Tool]:
    """Search and Lookup over one store, sharing the last page found (as in the ReAct paper)."""
    if not isinstance(store, DocumentStore):
        store = DocumentStore.from_path(store)
    browser = _Browser(store)
    return [Search(store, sentences, _browser=browser), Lookup(store, _browser=browser)]
