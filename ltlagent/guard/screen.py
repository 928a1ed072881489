"""Judging one proposed assistant reply against a policy before any of its tool calls runs.

This is the decision the library guard (:mod:`ltlagent.guard.chat`) and the proxy
(:mod:`ltlagent.guard.proxy`) share, and the one place where a reply's shape is read
(docs/design.md §13, "fail closed"). :func:`read_calls` turns a reply into the calls a client could
run — every entry of ``tool_calls`` and a legacy ``function_call`` — and says for each why it cannot
run whatever the policy says (a shape the guard does not judge, a name that is not exactly one of
the request's declared tools, arguments that are not a JSON object); :func:`screen` then classifies
the reply into steps exactly as ``check-log`` classifies a logged message
(:func:`ltlagent.chat.events.message_events`: its text, then one step per call, in order); the text
is not gated (the guard cannot unsay it), each well-formed call is asked of the policy cursor
*before it runs* (:meth:`PolicyCursor.decide`). An allowed call advances the cursor, a refused one
does not: the calls after it are judged as if it had never been proposed, which is what the
transcript will hold, since a refused call is never executed nor recorded as executed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from ltlagent.chat.events import message_events, message_text
from ltlagent.errors import LogError
from ltlagent.logic.policy import Decision, PolicyCursor

__all__ = ["Refusal", "Screening", "ProposedCall", "screen", "settle", "read_calls",
           "declared_tools", "reask_messages", "refusal_text", "strict_json", "REFUSAL_MARK",
           "MAX_DEPTH"]

#: How every refusal the guard writes begins, so that a reader (or a test) can tell it apart.
REFUSAL_MARK = "[ltlagent guard]"

#: The deepest nesting of arrays and objects the guard reads (a request, a reply, arguments).
MAX_DEPTH = 100

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.:-]+")


def strict_json(data: str | bytes, max_depth: int = MAX_DEPTH) -> object:
    """JSON as the guard reads it: no ``NaN``/``Infinity``, no key twice in an object (parsers
    disagree on which one wins), at most ``max_depth`` levels. Raises ``ValueError``."""
    def constant(name: str) -> object:
        raise ValueError(f"{name} is not JSON")

    def pairs(items: list[tuple[str, object]]) -> dict[str, object]:
        out = dict(items)
        if len(out) != len(items):
            seen: set[str] = set()
            for k, _ in items:
                if k in seen:
                    raise ValueError(f"the key {k!r} appears twice in one object")
                seen.add(k)
        return out

    def finite(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(f"{text} is out of range")
        return value

    try:
        value = json.loads(data, parse_constant=constant, object_pairs_hook=pairs,
                           parse_float=finite)
    except RecursionError:
        raise ValueError(f"nested deeper than {max_depth} levels") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8 ({e.reason})") from None
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth >= max_depth:
                raise ValueError(f"nested deeper than {max_depth} levels")
            stack.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node)
                         if isinstance(v, (dict, list)))
    return value


def declared_tools(request: Mapping[str, object]) -> frozenset[str]:
    """The names of the function tools a chat request declares (``tools`` entries of type
    ``function``, and the legacy ``functions``): the only names a call of its reply may have."""
    names: set[str] = set()
    tools = request.get("tools")
    for t in tools if isinstance(tools, list) else ():
        fn = t.get("function") if isinstance(t, Mapping) and t.get("type") == "function" else None
        if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
            names.add(fn["name"])
    functions = request.get("functions")
    for f in functions if isinstance(functions, list) else ():
        if isinstance(f, Mapping) and isinstance(f.get("name"), str):
            names.add(f["name"])
    return frozenset(names)


@dataclass(frozen=True)
class ProposedCall:
    """One call a client could run from a reply, as read: ``problem`` says why it cannot run
    whatever the policy says (``None``: well formed, the policy decides). ``legacy``: the
    message's ``function_call``, not an entry of its ``tool_calls``."""

    position: int  # its index in the reply's tool_calls (the legacy call: after them)
    call_id: str | None
    name: str  # "" when it has none that is a string
    arguments: str  # as written ("" when absent)
    problem: str | None = None
    legacy: bool = False

    def as_tool_call(self) -> dict[str, object]:
        """The call in the one shape the guard passes on (an entry of ``tool_calls``)."""
        return {"id": self.call_id or f"call_{self.position}", "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}


def _parsed_arguments(raw: str) -> str | None:
    """Why ``raw`` is not a JSON object of arguments (``None``: it is one). Blank is ``{}``, as
    ``check-log`` reads it."""
    if not raw.strip():
        return None
    try:
        value = strict_json(raw)
    except ValueError as e:
        return f"its arguments are not JSON ({e}): {raw[:80]!r}"
    return None if isinstance(value, dict) else \
        f"its arguments must be a JSON object, found {type(value).__name__}"


def _read_call(position: int, call: object, tools: Collection[str], legacy: bool) -> ProposedCall:
    """One entry of ``tool_calls`` (or the legacy ``function_call``) as the guard reads it."""
    if not isinstance(call, Mapping):
        return ProposedCall(position, None, "", "", f"a tool call must be an object, found "
                            f"{type(call).__name__}")
    if legacy:
        fn: object = call
        cid: object = None
    else:
        fn, cid = call.get("function"), call.get("id")
    name = fn.get("name") if isinstance(fn, Mapping) else None
    raw = fn.get("arguments") if isinstance(fn, Mapping) else None
    shown = name if isinstance(name, str) else ""
    args = raw if isinstance(raw, str) else ""
    call_id = cid if isinstance(cid, str) else None

    def bad(why: str) -> ProposedCall:
        return ProposedCall(position, call_id, shown, args, why, legacy)

    if not legacy:
        if "custom" in call:
            custom = call.get("custom")
            cname = custom.get("name") if isinstance(custom, Mapping) else None
            shown = cname if isinstance(cname, str) and not shown else shown
            if "function" in call:
                return bad("a call with both 'function' and 'custom' is ambiguous")
            return bad("custom tool calls are not judged by the guard")
        if call.get("type") != "function":
            return bad(f"a tool call must be of type 'function', not {call.get('type')!r}")
        if cid is not None and not isinstance(cid, str):
            return bad("a tool call's id must be a string")
    if not isinstance(fn, Mapping):
        return bad("a tool call needs a 'function' object")
    if name is None or name == "":
        return bad("a tool call needs a name")
    if not isinstance(name, str):
        return bad(f"its name must be a string, found {type(name).__name__}")
    if name not in tools:
        known = ", ".join(sorted(tools)) or "none"
        return bad(f"{name!r} is not one of the request's tools (declared: {known})")
    if raw is not None and not isinstance(raw, str):
        return bad("its arguments must be a JSON string")
    return ProposedCall(position, call_id, name, args, _parsed_arguments(args), legacy)


def read_calls(message: Mapping[str, object],
               tools: Collection[str]) -> tuple[list[ProposedCall], str | None]:
    """Every call a client could run from ``message`` — each entry of ``tool_calls``, then the
    legacy ``function_call`` — and why the reply as a whole cannot pass (``None``: it may): a
    ``tool_calls`` that is not a list, a role other than ``assistant``. The one reading of a reply's
    shape: ``tools`` are the names declared to the model (:func:`declared_tools`)."""
    role = message.get("role")
    problem = None if role == "assistant" else f"a reply must come from the assistant, not {role!r}"
    calls: list[ProposedCall] = []
    raw = message.get("tool_calls")
    if isinstance(raw, list):
        calls = [_read_call(k, c, tools, False) for k, c in enumerate(raw)]
    elif raw is not None:
        problem = problem or f"'tool_calls' must be a list of calls, found {type(raw).__name__}"
    if "function_call" in message and message["function_call"] is not None:
        calls.append(_read_call(len(calls), message["function_call"], tools, True))
    if problem is not None:
        calls = [c if c.problem else ProposedCall(c.position, c.call_id, c.name, c.arguments,
                                                  problem, c.legacy) for c in calls]
    return calls, problem


def _shown(name: str) -> str:
    return name if _PLAIN_NAME.fullmatch(name) else repr(name)


@dataclass(frozen=True)
class Refusal:
    """A proposed tool call that was not run: the policy forbids it at this point, or (``malformed``
    set) it cannot run whatever the policy says (arguments that are not a JSON object, a name the
    request did not declare, a shape the guard does not judge: the model's mistake, which it is told
    about like a refusal). ``position`` -1: the reply as a whole (``malformed`` says why)."""

    position: int  # its index in the reply's tool_calls (the legacy function_call: after them)
    call_id: str | None
    tool: str
    arguments: str  # as the model wrote them (a JSON string)
    decision: Decision
    malformed: str | None = None

    def explain(self) -> str:
        """What the model and the user are told: the call, the rule that forbids it, what is allowed."""
        what = "the reply" if self.position < 0 else \
            (_shown(self.tool) if self.tool else "a call without a name")
        if self.malformed is not None:
            now = ", ".join(self.decision.allowed_states) or "nothing further"
            verb = "was not passed" if self.position < 0 else "was not run"
            return f"{REFUSAL_MARK} {what} {verb}: {self.malformed}; allowed now: {now}"
        return f"{REFUSAL_MARK} {what} was not run: {self.decision.explain()}"

    def to_dict(self) -> dict[str, object]:
        return {"position": self.position, "call_id": self.call_id, "tool": self.tool,
                "arguments": self.arguments, "state": self.decision.state,
                "violated": list(self.decision.violated), "malformed": self.malformed,
                "allowed_states": list(self.decision.allowed_states), "explanation": self.explain()}


@dataclass(frozen=True)
class Screening:
    """The verdict on one reply: every call read from it, which of them may run, the refusals."""

    message: Mapping[str, object]  # the reply as proposed
    calls: tuple[ProposedCall, ...]  # as read by read_calls
    allowed: tuple[int, ...]  # indices into calls, in order
    refusals: tuple[Refusal, ...]
    cursor: PolicyCursor = field(repr=False, compare=False)  # after the text and the allowed calls
    arguments: Mapping[int, Mapping[str, object]] = field(default_factory=dict, repr=False,
                                                          compare=False)  # of each allowed call

    @property
    def ok(self) -> bool:
        """Nothing was refused."""
        return not self.refusals

    def text(self) -> str:
        """The reply's text (its ``content``)."""
        return message_text(self.message.get("content"), -1)

    def tool_calls(self) -> list[dict[str, object]]:
        """The allowed entries of ``tool_calls``, in the one shape the guard passes on."""
        return [self.calls[i].as_tool_call() for i in self.allowed if not self.calls[i].legacy]

    def kept(self, content: str | None = None) -> dict[str, object]:
        """The reply reduced to what may pass: an assistant message with the text (or ``content``)
        and the allowed calls (an allowed legacy call as ``function_call``)."""
        text = self.text() if content is None else content
        out: dict[str, object] = {"role": "assistant", "content": text or None}
        calls = self.tool_calls()
        if calls:
            out["tool_calls"] = calls
        for i in self.allowed:
            if self.calls[i].legacy:
                out["function_call"] = {"name": self.calls[i].name,
                                        "arguments": self.calls[i].arguments}
        return out

    def executed(self) -> dict[str, object] | None:
        """The reply as it will be recorded: its text and its allowed calls only; ``None`` when
        nothing of it remains (it proposed calls, all were refused, and it has no text). A reply
        with neither text nor calls is kept: it is a (empty) step of the trace."""
        out = self.kept()
        if out["content"] is None:
            out["content"] = self.message.get("content")
        has_calls = "tool_calls" in out or "function_call" in out
        return out if has_calls or self.text().strip() or not self.calls else None


def screen(cursor: PolicyCursor, message: object, index: int = -1, *,
           tools: Collection[str]) -> Screening:
    """Judge ``message`` (a reply in the OpenAI format) after the history ``cursor`` has seen;
    ``cursor`` itself is not changed. ``index`` is the message's position in the conversation,
    ``tools`` the names the request declared (a call of any other name is refused).

    A call :func:`read_calls` finds unfit is refused as malformed (the model's mistake, not a step
    of the conversation). Raises :class:`ltlagent.errors.LogError` for a reply that cannot be judged
    at all (not an object, a content that is not text)."""
    if not isinstance(message, Mapping):
        raise LogError(f"a reply message must be a JSON object, found {type(message).__name__}",
                       index=index if index >= 0 else None)
    calls, problem = read_calls(message, tools)
    text = message_text(message.get("content"), index)  # LogError: not text
    good = [c for c in calls if c.problem is None]
    c = cursor.copy()
    if calls and not good and not text.strip():
        events = []  # nothing of the reply remains: no step (the transcript will omit it)
    else:
        valid: dict[str, object] = {"role": "assistant", "content": text}
        if good:
            valid["tool_calls"] = [g.as_tool_call() for g in good]
        events = message_events(valid, index)
    allowed: list[int] = []
    arguments: dict[int, Mapping[str, object]] = {}
    refusals: dict[int, Refusal] = {}
    positions = iter(good)
    for event in events:
        if event.kind != "call":
            c.push(event)
            continue
        k = next(positions).position
        d = c.decide(event)
        if d.allowed:
            c.push(event)
            allowed.append(k)
            arguments[k] = event.arguments or {}
        else:
            refusals[k] = Refusal(k, event.call_id, event.tool or "", event.text, d)
    now = Decision(False, None, (), c.allowed_states())
    for p in calls:
        if p.problem is not None:
            refusals[p.position] = Refusal(p.position, p.call_id, p.name, p.arguments, now, p.problem)
    if problem is not None:
        refusals[-1] = Refusal(-1, None, "", "", now, problem)
    return Screening(message, tuple(calls), tuple(allowed),
                     tuple(refusals[k] for k in sorted(refusals)), c, arguments)


def refusal_text(refusals: Sequence[Refusal]) -> str:
    """One line per refusal: the text the proxy's refusal reply carries."""
    return "\n".join(r.explain() for r in refusals)


def settle(cursor: PolicyCursor, message: Mapping[str, object], index: int = -1, *,
           tools: Collection[str]) -> tuple[Screening, list[Refusal]]:
    """The reply ``message`` (an assistant message as :meth:`Screening.kept` makes them) reduced
    to the point where nothing in it is refused: a changed text is a changed step (it may be
    classified differently), so the calls are judged again after it until none is dropped (at most
    as many rounds as calls). Returns the final screening and every call dropped on the way."""
    dropped: list[Refusal] = []
    current: Mapping[str, object] = message
    while True:
        s = screen(cursor, current, index, tools=tools)
        if s.ok:
            return s, dropped
        dropped.extend(s.refusals)
        current = s.kept()


def reask_messages(s: Screening, results: Mapping[int, str] | None = None) -> list[dict[str, object]]:
    """What the model is shown of its reply: the reply as it could be sent back (its text and its
    calls that have a name, in the one shape the guard passes on), one answer per such call — its
    result from ``results`` (by position: the calls that ran), its refusal, or for an allowed call
    that did not run, that it was proposed together with a refused one — and the refusals no call
    can carry (the reply's own shape, a call without a name) as one ``user`` message."""
    results = results or {}
    refused = {r.position: r for r in s.refusals}
    shown = [p for p in s.calls if p.name and (not p.legacy or p.position in results)]
    proposal: dict[str, object] = {"role": "assistant", "content": s.text() or None}
    calls = [p.as_tool_call() for p in shown if not p.legacy]
    if calls:
        proposal["tool_calls"] = calls
    out = [proposal]
    for p in shown:
        text = (results[p.position] if p.position in results else
                refused[p.position].explain() if p.position in refused else
                f"{REFUSAL_MARK} not run: it was proposed together with a refused call; "
                "propose it again if it is still needed")
        if p.legacy:
            proposal["function_call"] = {"name": p.name, "arguments": p.arguments}
            out.append({"role": "function", "name": p.name, "content": text})
        else:
            out.append({"role": "tool", "tool_call_id": p.as_tool_call()["id"], "content": text})
    answered = {p.position for p in shown}
    rest = [r for r in s.refusals if r.position not in answered]
    if rest:
        out.append({"role": "user", "content": refusal_text(rest)})
    return out

