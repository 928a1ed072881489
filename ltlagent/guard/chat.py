"""The guarded chat loop: a tool-calling agent on any OpenAI-compatible endpoint, with the policy
asked before each tool call runs (issue 20; docs/design.md §13).

:class:`Guard` holds what is shared (the compiled :class:`~ltlagent.logic.policy.Policy`, the
tools, the client and the model); :class:`GuardedConversation` is one conversation, the only
mutable thing: the messages the model sees, the transcript of what happened, and the policy cursor
over that transcript. Each reply is judged by :func:`ltlagent.guard.screen.screen`:

* an allowed call runs; its result is appended as a ``tool`` message;
* a forbidden call does not run; a ``tool`` message answers it with the rule that forbids it and
  what is allowed now, so the model can try again; after ``max_retries`` refused replies in a row
  the turn ends with the outcome ``"refused"``.

Two message lists are kept because the OpenAI format wants every proposed call answered: the model
sees its refused proposals and their refusals (:attr:`GuardedConversation.messages`), while the
transcript (:attr:`GuardedConversation.transcript`) holds what was executed — the history, each
reply's text and its allowed calls, their results. The transcript is an OpenAI-format message list
that ``Policy.check`` (``ltlagent check-log``) passes whenever the history and the texts do: the
guard decides calls, not text.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ltlagent.errors import LogError, UsageError
from ltlagent.guard.screen import Refusal, Screening, reask_messages, screen, strict_json
from ltlagent.logic.policy import Policy, PolicyCursor

if TYPE_CHECKING:
    from openai import OpenAI

__all__ = ["FunctionTool", "Guard", "GuardedConversation", "TurnResult", "MODEL_ENV"]

#: The environment variable naming the model when none is given (``OPENAI_BASE_URL`` and
#: ``OPENAI_API_KEY`` are read by the ``openai`` client itself).
MODEL_ENV = "OPENAI_MODEL"

Message = dict[str, object]

#: A function tool's name as the chat-completions API takes it (ASCII letters, digits, ``_``, ``-``).
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class FunctionTool:
    """A tool the model may call natively: its OpenAI function schema and the Python callable.

    ``function`` receives the call's JSON arguments as keyword arguments; what it returns becomes
    the ``tool`` message (strings as they are, anything else as JSON). An exception it raises is the
    tool's mistake, not ours: its message becomes the result and the conversation goes on."""

    name: str
    description: str
    parameters: Mapping[str, object]
    function: Callable[..., object] = field(compare=False)

    def __post_init__(self) -> None:
        if not _TOOL_NAME.fullmatch(self.name):
            raise UsageError(f"tool name {self.name!r}: letters, digits, '_' and '-' only")
        if self.parameters.get("type") != "object":
            raise UsageError(f"tool {self.name}: parameters must be a JSON schema of type 'object'")

    def schema(self) -> dict[str, object]:
        """The entry of the request's ``tools`` list."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": dict(self.parameters)}}

    def run(self, arguments: Mapping[str, object]) -> str:
        """Call the tool; its result (or its error) as the text of a ``tool`` message."""
        try:
            out = self.function(**arguments)
        except Exception as e:  # the tool's failure is data for the model, not a crash of the loop
            return f"error: {type(e).__name__}: {e}"
        return out if isinstance(out, str) else json.dumps(out, default=str)


@dataclass(frozen=True)
class TurnResult:
    """How a turn (model replies until it answers in text) ended.

    ``outcome``: ``"answered"`` (a reply without tool calls), ``"refused"`` (``max_retries`` + 1
    replies in a row proposed a forbidden call), ``"max-turns"`` (the model kept calling tools)."""

    outcome: str
    replies: int
    refusals: tuple[Refusal, ...]
    answer: str | None  # the last reply's text


class Guard:
    """The policy guard in front of an OpenAI-compatible chat-completions endpoint.

    ``client``: an ``openai.OpenAI`` (or compatible) client; without one, it is made from
    ``base_url`` and ``api_key``, which default to the ``openai`` client's own environment
    variables (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``; a key is not required by local servers).
    ``model`` defaults to ``$OPENAI_MODEL``. ``completion_args`` are passed to every request
    (temperature, max_tokens, …)."""

    def __init__(self, policy: Policy | str | Path, tools: Sequence[FunctionTool] = (), *,
                 client: OpenAI | None = None, model: str | None = None,
                 base_url: str | None = None, api_key: str | None = None,
                 max_retries: int = 3, max_turns: int = 16, **completion_args: object) -> None:
        self.policy = policy if isinstance(policy, Policy) else Policy.load(policy)
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            raise UsageError(f"duplicate tool names: {names}")
        self.tools: dict[str, FunctionTool] = {t.name: t for t in tools}
        if max_retries < 0 or max_turns < 1:
            raise UsageError("max_retries must be ≥ 0 and max_turns ≥ 1")
        self.max_retries = max_retries
        self.max_turns = max_turns
        model = model or os.environ.get(MODEL_ENV)
        if not model:
            raise UsageError("no model: pass model=… or set $" + MODEL_ENV)
        self.model = model
        self.completion_args = completion_args
        if client is None:
            from openai import OpenAI

            key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
            client = OpenAI(base_url=base_url, api_key=key)
        self.client = client

    def conversation(self, messages: Iterable[Mapping[str, object]] = ()) -> GuardedConversation:
        """A new conversation starting from ``messages`` (system prompt, user turns, …)."""
        return GuardedConversation(self, [dict(m) for m in messages])

    def run(self, messages: Iterable[Mapping[str, object]]) -> GuardedConversation:
        """Start a conversation and run one turn; the conversation holds the result."""
        conv = self.conversation(messages)
        conv.run()
        return conv

    def complete(self, messages: Sequence[Mapping[str, object]]) -> Message:
        """One chat completion: the first choice's message exactly as the endpoint sent it (read
        with :func:`~ltlagent.guard.screen.strict_json`, not through the SDK's models, which would
        reshape what the guard must judge). Only that choice is ever run: the others are dropped.

        Raises :class:`~ltlagent.errors.LogError` for a reply that is not a chat completion."""
        args: dict[str, object] = dict(self.completion_args)
        if self.tools:
            args["tools"] = [t.schema() for t in self.tools.values()]
        raw = self.client.chat.completions.with_raw_response.create(  # type: ignore[call-overload]
            model=self.model, messages=messages, **args)
        try:
            data = strict_json(raw.content)
        except ValueError as e:
            raise LogError(f"the reply is not JSON: {e}") from None
        choices = data.get("choices") if isinstance(data, dict) else None
        message = choices[0].get("message") if isinstance(choices, list) and choices and \
            isinstance(choices[0], dict) else None
        if not isinstance(message, dict):
            raise LogError("the reply is not a chat completion (no choices[0].message object)")
        return message


class GuardedConversation:
    """One guarded conversation: what the model sees, what was executed, and the policy cursor.

    ``messages`` is the model's context (refused proposals and their refusals included);
    ``transcript`` is what happened (history, texts, allowed calls and their results), the list to
    give ``Policy.check``; ``refusals`` every call that was not run, in order."""

    def __init__(self, guard: Guard, history: list[Message]) -> None:
        self.guard = guard
        self.messages: list[Message] = list(history)
        self.transcript: list[Message] = list(history)
        self.refusals: list[Refusal] = []
        self.cursor: PolicyCursor = guard.policy.cursor()
        self.cursor.push_messages(history)

    def add(self, message: Mapping[str, object]) -> None:
        """Append a message written outside the model (a user turn, a system note)."""
        m = dict(message)
        self.cursor.push_message(m, len(self.transcript))
        self.messages.append(m)
        self.transcript.append(m)

    def say(self, text: str) -> TurnResult:
        """The user says ``text``; the model answers (one turn)."""
        self.add({"role": "user", "content": text})
        return self.run()

    def run(self) -> TurnResult:
        """Let the model reply, running its allowed calls, until it answers without calling a tool,
        or ``max_retries`` + 1 replies in a row were refused, or ``max_turns`` replies were made."""
        g = self.guard
        refused_in_a_row = 0
        turn_refusals: list[Refusal] = []
        answer: str | None = None
        for n in range(1, g.max_turns + 1):
            reply = g.complete(self.messages)
            s = screen(self.cursor, reply, len(self.transcript), tools=g.tools.keys())
            content = reply.get("content")
            answer = content if isinstance(content, str) else None
            self._record(s)
            turn_refusals.extend(s.refusals)
            if not s.calls and s.ok:
                return TurnResult("answered", n, tuple(turn_refusals), answer)
            refused_in_a_row = refused_in_a_row + 1 if s.refusals else 0
            if refused_in_a_row > g.max_retries:
                return TurnResult("refused", n, tuple(turn_refusals), answer)
        return TurnResult("max-turns", g.max_turns, tuple(turn_refusals), answer)

    def _record(self, s: Screening) -> None:
        """Run the reply's allowed calls and record them; show the model its reply with each call
        answered (its result or its refusal: :func:`~ltlagent.guard.screen.reask_messages`, the
        reply in the one shape the guard passes on, since the raw reply may not even be a message
        that can be sent back)."""
        executed = s.executed()
        if executed is not None:
            self.transcript.append(executed)
        self.cursor = s.cursor
        results: dict[int, str] = {}
        for k in s.allowed:  # every allowed call names one of the tools (screen checks it)
            call = s.calls[k]
            results[k] = self.guard.tools[call.name].run(s.arguments[k])
            result: Message = ({"role": "function", "name": call.name, "content": results[k]}
                               if call.legacy else {"role": "tool", "content": results[k],
                                                    "tool_call_id": call.as_tool_call()["id"]})
            self.cursor.push_message(result, len(self.transcript))
            self.transcript.append(result)
        self.messages.extend(reask_messages(s, results))
        self.refusals.extend(s.refusals)

    def report(self) -> object:
        """``Policy.check`` of the transcript (its ``verdict``, ``violations``)."""
        return self.guard.policy.check(self.transcript)
