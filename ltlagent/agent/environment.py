"""What writes the environment's states, and the prompt an agent starts from.

Environment states (``:env-input``) are written by callables that see an :class:`EnvContext`:
ReAct's Observation by :class:`ToolEnvironment` (the tool named by the last Action, called with the
last Action Input, in a thread with a timeout; errors become text), Reflexion's Evaluator and the
chat-bot's User by the user's own callables. Prompt templates carry ``{{task}}``,
``{{tool_labels}}``, ``{{tool_descriptions}}`` and ``{{examples}}`` (bundled worked examples for the
agent's tools); :func:`neutralise` keeps environment text from
containing a prompt string of the spec.
"""

from __future__ import annotations

import inspect
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltlagent.agent.tools import Tool
from ltlagent.errors import UsageError
from ltlagent.logic.compiled import CompiledSpec
from ltlagent.spec.syntax import Spec

if TYPE_CHECKING:
    from ltlagent.agent.record import Step
    from ltlagent.agent.roles import Roles

__all__ = ["EnvContext", "EnvReply", "EnvFn", "call_environment", "ToolEnvironment", "prompt_template",
           "prompt_examples", "render_prompt", "neutralise", "PROMPTS", "ZWSP", "check_task", "read_prompt"]

PROMPTS = Path(__file__).parent.parent / "prompts"
#: Inserted before the last character of a prompt string found in environment text, so that the
#: environment can never make the trace take a step (the text reads the same).
ZWSP = "\u200b"
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_]+)\s*\}\}")


# --- environment -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class EnvContext:
    """What an environment callable sees: the task, the env state to write, the steps so far."""

    task: str
    state: str
    steps: tuple[Step, ...]

    def last(self, state: str) -> str | None:
        """Text of the most recent step in ``state``, or None."""
        for s in reversed(self.steps):
            if s.state == state:
                return s.text
        return None

    @property
    def last_model_text(self) -> str:
        return next((s.text for s in reversed(self.steps) if s.source == "model"), "")


@dataclass(frozen=True)
class EnvReply:
    """An environment's answer: its text, the tool it called, and an error tag when it failed."""

    text: str | None  # None: the environment has nothing more to say (the run ends: "env_ended")
    tool: str | None = None
    error: str | None = None


EnvFn = Callable[[EnvContext], "str | EnvReply | None"]


def call_environment(handlers: Mapping[str, EnvFn], ctx: EnvContext) -> EnvReply:
    """The reply of the handler of ``ctx.state`` (no handler, or end of input: text None, which
    ends the run); both runners (transformers, vLLM) take environment turns through this."""
    try:
        got = handlers[ctx.state](ctx) if ctx.state in handlers else None
    except EOFError:
        got = None
    return got if isinstance(got, EnvReply) else EnvReply(None if got is None else str(got))


def _call_flexible(fn: Callable[..., Any], *args: object) -> Any:
    """Call ``fn`` with as many leading ``args`` as it accepts (``f(answer)`` or ``f(answer, ctx)``)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return fn(*args[:1])
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return fn(*args)
    n = sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    return fn(*args[:n])


def _run_with_timeout(fn: Callable[[], str], timeout: float | None
                      ) -> tuple[str | None, BaseException | None, bool]:
    """Run ``fn`` in a daemon thread: (result, exception, timed out).

    A thread that overruns cannot be killed: it is abandoned and finishes in the background.
    """
    box: list[object] = []

    def target() -> None:
        try:
            box.append(fn())
        except BaseException as e:  # the model sees it as text
            box.append(e)

    th = threading.Thread(target=target, daemon=True, name="ltlagent-tool")
    th.start()
    th.join(timeout)
    if th.is_alive():
        return None, None, True
    res = box[0] if box else None
    if isinstance(res, BaseException):
        return None, res, False
    return (res if isinstance(res, str) else str(res)), None, False


class ToolEnvironment:
    """ReAct's Observation: call the tool named by the last step in ``action_state`` with the text
    of the last step in ``input_state`` (the spec's action and action-input roles,
    :mod:`ltlagent.agent.roles`).

    With no action state in the spec (the paper's ablated agent), the call is parsed out of the
    last model text: ``Action: Name`` and ``Action Input: …`` lines, or ``Name[input]``.
    """

    def __init__(self, tools: Mapping[str, Tool], action_state: str | None, input_state: str | None,
                 timeout: float | None) -> None:
        self.tools = dict(tools)
        self.action_state = action_state
        self.input_state = input_state
        self.timeout = timeout

    @classmethod
    def for_roles(cls, tools: Mapping[str, Tool], roles: Roles, timeout: float | None) -> ToolEnvironment:
        """The tool environment of a spec whose states play ``roles`` (its action and action-input
        states; without an action state the call is read from the text)."""
        return cls(tools, roles.action, roles.action_input, timeout)

    def _find(self, name: str) -> Tool | None:
        name = name.strip().strip("[]\"'`.:").strip()
        if name in self.tools:
            return self.tools[name]
        low = {k.lower(): t for k, t in self.tools.items()}
        return low.get(name.lower())

    def parse(self, ctx: EnvContext) -> tuple[str, str] | None:
        """(tool name, input text) of the call the model asked for, or None when none is readable."""
        if self.action_state is not None:
            name = ctx.last(self.action_state)
            if name is None:
                return None
            arg = ctx.last(self.input_state) if self.input_state else ""
            return name, arg or ""
        text = ctx.last_model_text
        m = re.search(r"Action:\s*([^\n]*)", text)
        if m and m.group(1).strip():
            given = re.search(r"Action Input:\s*([^\n]*)", text[m.end():])
            return m.group(1).strip(), given.group(1).strip() if given else ""
        m = re.search(r"([A-Za-z_][\w-]*)\[([^\]\n]*)\]", text)
        if m:
            return m.group(1), m.group(2)
        return None

    def __call__(self, ctx: EnvContext) -> EnvReply:
        labels = ", ".join(self.tools)
        call = self.parse(ctx)
        if call is None:
            return EnvReply(f"Error: no action to run; name one of [{labels}] and give its input.",
                            error="parse")
        name, arg = call
        t = self._find(name)
        if t is None:
            return EnvReply(f"Error: unknown tool {name.strip()[:60]!r}; the tools are [{labels}].",
                            tool=name.strip()[:60], error="unknown-tool")
        out, exc, timed_out = _run_with_timeout(lambda: t.invoke(arg), self.timeout)
        if timed_out:
            return EnvReply(f"Error: {t.name} did not answer within {self.timeout:g} s.", tool=t.name,
                            error="timeout")
        if exc is not None:
            if isinstance(exc, ValueError):
                return EnvReply(f"Error: {exc}", tool=t.name, error="input")
            return EnvReply(f"Error: {t.name} failed: {type(exc).__name__}: {exc}", tool=t.name,
                            error="exception")
        return EnvReply(out or "(no output)", tool=t.name)


# --- prompts -----------------------------------------------------------------------------------------

def _prompt_families(spec: Spec) -> list[str]:
    """Names to look prompt files up by, most specific first: the spec's file name, then its name,
    each shortened by trailing words (``react-tools`` → ``react``)."""
    stem = Path(spec.source).stem if spec.source and spec.source != "<string>" else spec.name
    out: list[str] = []
    for base in (stem, spec.name.removesuffix("-agent")):
        parts = base.split("-")
        out += ["-".join(parts[:k]) for k in range(len(parts), 0, -1)]
    return list(dict.fromkeys(out))


def prompt_template(spec: Spec) -> str:
    """The bundled prompt template for ``spec`` (by file name, then family: ``react-tools`` → ``react``),
    or a generic one listing the states' prompt strings."""
    for family in _prompt_families(spec):
        f = PROMPTS / (family + ".txt")
        if f.is_file():
            return f.read_text(encoding="utf-8")
    lines = ["Complete the task below. You have access to the following tools:", "{{tool_descriptions}}",
             "Use the following format:"]
    for st in spec.states:
        what = "(written by the environment)" if st.env_input else "…"
        lines.append(f"{st.text} {what}")
    lines.append("Task: {{task}}")
    return "\n".join(lines) + "\n"


def prompt_examples(spec: Spec, tools: Sequence[Tool]) -> str:
    """The worked examples for a prompt's ``{{examples}}``: one bundled example trace per tool of the
    agent that has one for the spec's prompt family (``prompts/examples/react.Calculator.txt``), under
    a heading; "" when none does. Format-naive models follow the format far more often with one
    example than with none (validation/README.md, k = 0 against k = 1)."""
    found: list[str] = []
    families = _prompt_families(spec)
    for t in tools:
        for family in families:
            f = PROMPTS / "examples" / f"{family}.{t.name}.txt"
            if f.is_file():
                found.append(f.read_text(encoding="utf-8").strip("\n") + "\n")
                break
    if not found:
        return ""
    heading = "Here is an example." if len(found) == 1 else "Here are some examples."
    return heading + "\n" + "".join(found)


def check_task(task: object) -> str:
    """``task`` if it is a usable task text, else :class:`UsageError` saying why: not a ``str``
    (``None``, ``bytes``: decode them first), empty, or holding characters that are not text (a
    command-line byte that was not UTF-8 arrives as a lone surrogate)."""
    if isinstance(task, bytes | bytearray):
        raise UsageError("the task must be text (str), got bytes: decode it first, e.g. task.decode('utf-8')")
    if not isinstance(task, str):
        raise UsageError(f"the task must be text (str), got {type(task).__name__}")
    if not task.strip():
        raise UsageError("the task is empty: give the task or question to solve")
    bad = next((i for i, c in enumerate(task) if "\ud800" <= c <= "\udfff"), None)
    if bad is not None:
        byte = ord(task[bad]) - 0xDC00 if "\udc80" <= task[bad] <= "\udcff" else None
        what = f"byte 0x{byte:02x}" if byte is not None else f"U+{ord(task[bad]):04X}"
        raise UsageError(f"the task is not valid UTF-8 text ({what} at character {bad + 1})")
    return task


def _is_file(name: str) -> bool:
    """Whether ``name`` names an existing file (a whole template given as text is too long, or
    holds characters, for a path: then it names none)."""
    try:
        return Path(name).is_file()
    except (OSError, ValueError):  # ENAMETOOLONG; an embedded NUL
        return False


def read_prompt(prompt: str | Path) -> str:
    """The template a ``prompt`` argument names. A :class:`~pathlib.Path`, or a string naming an
    existing file, is a file (read as UTF-8); any other string is the template itself only when it
    looks like one (a ``{{placeholder}}`` or a line break): a string such as ``my.prompt`` that is
    neither is a missing file, not a one-line template."""
    if isinstance(prompt, str) and not _is_file(prompt):
        if _PLACEHOLDER.search(prompt) or "\n" in prompt:
            return prompt
        raise UsageError(f"{prompt}: no such prompt file (a template given as text needs a "
                         "{{task}} placeholder or a line break)")
    p = Path(prompt)
    if not p.is_file():
        raise UsageError(f"{p}: no such prompt file")
    data = p.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        utf16 = data[:2] in (b"\xff\xfe", b"\xfe\xff")
        raise UsageError(f"{p}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})"
                         + ("; it is UTF-16: save it as UTF-8" if utf16 else "; save it as UTF-8")) from None
    if "\x00" in text:
        raise UsageError(f"{p}: a NUL byte at offset {text.index(chr(0))} (UTF-16 without a BOM?); "
                         "save it as UTF-8")
    return text


def render_prompt(template: str, task: str, tools: Sequence[Tool], examples: str = "") -> str:
    """Fill ``{{task}}``, ``{{tool_labels}}``, ``{{tool_descriptions}}`` and ``{{examples}}`` (text
    that, when not empty, ends with a newline; see :func:`prompt_examples`); the result ends with a
    newline."""
    values = {"task": task.strip(),
              "tool_labels": "[" + ", ".join(t.name for t in tools) + "]",
              "tool_descriptions": "\n".join(t.describe() for t in tools) or "(no tools)",
              "examples": examples}
    unknown = sorted({m.group(1) for m in _PLACEHOLDER.finditer(template)} - set(values))
    if unknown:
        raise UsageError(f"the prompt template has an unknown placeholder {{{{{unknown[0]}}}}}; "
                         "known: {{task}}, {{tool_labels}}, {{tool_descriptions}}, {{examples}}")
    has_task = any(m.group(1) == "task" for m in _PLACEHOLDER.finditer(template))
    out = _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)
    if not has_task and task.strip():
        out = out.rstrip("\n") + "\n" + task.strip()
    return out if out.endswith("\n") else out + "\n"


def neutralise(text: str, compiled: CompiledSpec) -> tuple[str, int]:
    """Break every prompt string of the spec inside ``text`` (a zero-width space before its last
    character, which also breaks the prompt strings it ends with; a one-character prompt string
    becomes U+FFFD); returns (text, occurrences broken)."""
    lexer = compiled.lexer
    n = 0
    for _ in range(64):
        found = list(lexer.finditer(text))
        if not found:
            return text, n
        n += len(found)
        for m in reversed(found):
            if m.end - m.start <= 1:
                text = text[: m.start] + "\ufffd" + text[m.end:]
            else:
                text = text[: m.end - 1] + ZWSP + text[m.end - 1:]
    raise RuntimeError("neutralise: prompt strings keep reappearing")  # pragma: no cover
