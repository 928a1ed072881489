"""Judging one proposed assistant reply against a policy before any of its tool calls runs.

This is the decision the library guard (:mod:`ltlagent.guard.chat`) and the proxy
(:mod:`ltlagent.guard.proxy`) share. A reply is classified into steps exactly as ``check-log``
classifies a logged message (:func:`ltlagent.chat.events.message_events`: its text, then one step
per tool call, in order); the text is not gated (the guard cannot unsay it), each call is asked of
the policy cursor *before it runs* (:meth:`PolicyCursor.decide`). An allowed call advances the
cursor, a forbidden one does not: the calls after it are judged as if it had never been proposed,
which is what the transcript will hold, since a forbidden call is never executed nor recorded as
executed. So a transcript made of the history, the reply's text and its allowed calls is one the
policy accepts step by step (docs/design.md §13).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ltlagent.chat.events import message_events
from ltlagent.errors import LogError
from ltlagent.logic.policy import Decision, PolicyCursor

__all__ = ["Refusal", "Screening", "screen", "settle", "refusal_text", "call_arguments", "REFUSAL_MARK"]

#: How every refusal the guard writes begins, so that a reader (or a test) can tell it apart.
REFUSAL_MARK = "[ltlagent guard]"


@dataclass(frozen=True)
class Refusal:
    """A proposed tool call that was not run: the policy forbids it at this point, or (``malformed``
    set) it is not a call at all (arguments that are not a JSON object: the model's mistake, which
    it is told about like a refusal)."""

    position: int  # its index in the reply's tool_calls
    call_id: str | None
    tool: str
    arguments: str  # as the model wrote them (a JSON string)
    decision: Decision
    malformed: str | None = None

    def explain(self) -> str:
        """What the model and the user are told: the call, the rule that forbids it, what is allowed."""
        if self.malformed is not None:
            now = ", ".join(self.decision.allowed_states) or "nothing further"
            return f"{REFUSAL_MARK} {self.tool} was not run: {self.malformed}; allowed now: {now}"
        return f"{REFUSAL_MARK} {self.tool} was not run: {self.decision.explain()}"

    def to_dict(self) -> dict[str, object]:
        return {"position": self.position, "call_id": self.call_id, "tool": self.tool,
                "arguments": self.arguments, "state": self.decision.state,
                "violated": list(self.decision.violated), "malformed": self.malformed,
                "allowed_states": list(self.decision.allowed_states), "explanation": self.explain()}


@dataclass(frozen=True)
class Screening:
    """The verdict on one reply: which of its ``tool_calls`` may run, and the refusals."""

    message: Mapping[str, object]  # the reply as proposed
    allowed: tuple[int, ...]  # indices into the reply's tool_calls, in order
    refusals: tuple[Refusal, ...]
    cursor: PolicyCursor = field(repr=False, compare=False)  # after the text and the allowed calls

    @property
    def ok(self) -> bool:
        """No call was refused."""
        return not self.refusals

    def tool_calls(self) -> list[Mapping[str, object]]:
        """The reply's allowed tool calls, as written."""
        calls = _calls(self.message)
        return [calls[i] for i in self.allowed]

    def executed(self) -> dict[str, object] | None:
        """The reply as it will be recorded: its text and its allowed calls only; ``None`` when
        nothing of it remains (it proposed calls, all were refused, and it has no text). A reply
        with neither text nor calls is kept: it is a (empty) step of the trace."""
        out = {k: v for k, v in self.message.items() if k != "tool_calls"}
        calls = self.tool_calls()
        if calls:
            out["tool_calls"] = calls
        content = out.get("content")
        has_text = (isinstance(content, str) and content.strip()) or (isinstance(content, list) and content)
        return out if calls or has_text or not _calls(self.message) else None


def _calls(message: Mapping[str, object]) -> list[Mapping[str, object]]:
    calls = message.get("tool_calls")
    return list(calls) if isinstance(calls, Sequence) and not isinstance(calls, str) else []


def screen(cursor: PolicyCursor, message: Mapping[str, object], index: int = -1) -> Screening:
    """Judge ``message`` (an assistant reply in the OpenAI format) after the history ``cursor`` has
    seen; ``cursor`` itself is not changed. ``index`` is the message's position in the conversation.

    A call whose arguments are not a JSON object is refused as malformed (it is the model's
    mistake, not a step of the conversation). Raises :class:`ltlagent.errors.LogError` for a
    reply that is not a chat message at all (no role, a content that is not text, …)."""
    c = cursor.copy()
    calls = _calls(message)
    good: list[int] = []
    bad: dict[int, str] = {}
    for k, call in enumerate(calls):
        try:
            message_events({"role": "assistant", "content": None, "tool_calls": [call]}, index)
            good.append(k)
        except LogError as e:
            bad[k] = e.message
    valid = {**message, "tool_calls": [calls[k] for k in good]} if calls else message
    text = valid.get("content")
    if calls and not good and not (isinstance(text, str) and text.strip()):
        events = []  # nothing of the reply remains: no step (the transcript will omit it)
    else:
        events = message_events(valid if good else {k: v for k, v in valid.items()
                                                    if k != "tool_calls"}, index)
    allowed: list[int] = []
    refusals: dict[int, Refusal] = {}
    positions = iter(good)
    for event in events:
        if event.kind != "call":
            c.push(event)
            continue
        k = next(positions)
        d = c.decide(event)
        if d.allowed:
            c.push(event)
            allowed.append(k)
        else:
            refusals[k] = Refusal(k, event.call_id, event.tool or "", event.text, d)
    for k, why in bad.items():
        fn = calls[k].get("function") if isinstance(calls[k], Mapping) else None
        name = str(fn.get("name", "")) if isinstance(fn, Mapping) else ""
        raw = fn.get("arguments") if isinstance(fn, Mapping) else None
        cid = calls[k].get("id") if isinstance(calls[k], Mapping) else None
        d = Decision(False, None, (), c.allowed_states())
        refusals[k] = Refusal(k, cid if isinstance(cid, str) else None, name,
                              raw if isinstance(raw, str) else "", d, why)
    return Screening(message, tuple(allowed), tuple(refusals[k] for k in sorted(refusals)), c)


def refusal_text(refusals: Sequence[Refusal]) -> str:
    """One line per refused call: the text the proxy's refusal reply carries."""
    return "\n".join(r.explain() for r in refusals)


def settle(cursor: PolicyCursor, content: str, calls: Sequence[Mapping[str, object]],
           index: int = -1) -> tuple[Screening, list[Refusal]]:
    """The reply with this ``content`` and as many of ``calls`` as the policy allows, to the point
    where nothing in it is refused: a changed text is a changed step (it may be classified
    differently), so the calls are judged again after it until none is dropped (at most
    ``len(calls)`` rounds). Returns the final screening and every call dropped on the way."""
    dropped: list[Refusal] = []
    current = list(calls)
    while True:
        msg: dict[str, object] = {"role": "assistant", "content": content or None}
        if current:
            msg["tool_calls"] = current
        s = screen(cursor, msg, index)
        if s.ok:
            return s, dropped
        dropped.extend(s.refusals)
        current = s.tool_calls()


def call_arguments(call: Mapping[str, object]) -> tuple[str, dict[str, object]]:
    """A tool call's function name and parsed arguments (``{}`` for empty or blank arguments, as
    check-log reads them, docs/design.md §12).

    Raises ``ValueError`` for arguments that are not a JSON object."""
    fn = call.get("function")
    if not isinstance(fn, Mapping):
        raise ValueError("a tool call without a function")
    raw = fn.get("arguments")
    args = (json.loads(raw) if raw.strip() else {}) if isinstance(raw, str) else raw or {}
    if not isinstance(args, dict):
        raise ValueError("tool call arguments must be a JSON object")
    return str(fn.get("name", "")), args

