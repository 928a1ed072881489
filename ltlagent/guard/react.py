"""The guard for text-format (ReAct) specs on an API: stop sequences, re-parse, retry (issue 20;
docs/design.md §13).

Behind an API no logits processor can be installed, so the behaviour of the paper's released code
is reproduced with what every OpenAI-compatible ``/v1/completions`` endpoint accepts:

1. the request's ``stop`` sequences are the prompt strings of the states that may not come next
   (and of every ``:env-input`` state: the environment writes those);
2. the reply is re-parsed with the spec's own lexer (:class:`~ltlagent.text.lexer.Lexer`, the one
   validation and decoding use) and replayed through the automaton; it is cut before the first
   prompt string the spec does not allow there (a server may ignore or cap ``stop``, and a label
   allowed first may be followed by one that is not);
3. when the model stops where an ``:env-input`` state may come, the environment writes it; where
   exactly one model-written state may come, its prompt string is written for the model (as the
   decoder forces it); where the model made no progress, it is asked again, at most
   ``max_retries`` times in a row, then the run ends with the verdict so far.

The trace therefore never holds a step the spec forbids; its :class:`~ltlagent.logic.automaton.Verdict`
says whether it is complete.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ltlagent.errors import UsageError
from ltlagent.logic.automaton import Verdict
from ltlagent.logic.compiled import CompiledSpec, compile_spec
from ltlagent.spec.syntax import Spec, load_spec

if TYPE_CHECKING:
    from openai import OpenAI

__all__ = ["TextGuard", "TextRun", "TextStep", "Environment", "react_tools"]


@dataclass(frozen=True)
class TextStep:
    """One step of the trace: its state, its content (stripped), and who wrote it."""

    state: str
    content: str
    by: str  # "model" | "environment" | "guard" (a prompt string written for the model)


#: Writes an ``:env-input`` state's content from the state's name and the steps so far.
Environment = Callable[[str, Sequence[TextStep]], str]


@dataclass(frozen=True)
class TextRun:
    """A finished run: the text after the prompt, its steps, the verdict, and how it ended
    (``"complete"``, ``"retries"``: the model made no progress ``max_retries`` + 1 times in a row,
    ``"max-steps"``: ``max_steps`` steps or twice as many requests), with the number of requests
    and of cuts (labels the spec forbade there)."""

    text: str
    steps: tuple[TextStep, ...]
    verdict: Verdict
    outcome: str
    requests: int
    cuts: int

    @property
    def trace(self) -> tuple[str, ...]:
        return tuple(s.state for s in self.steps)


def react_tools(tools: Mapping[str, Callable[[str], str]], action: str = "Action",
                action_input: str = "Action-Input") -> Environment:
    """The ReAct observation: the tool named by the last ``action`` step, called with the last
    ``action_input`` step's content; an unknown tool or a tool's error becomes the text."""
    def observe(state: str, steps: Sequence[TextStep]) -> str:
        name = next((s.content for s in reversed(steps) if s.state == action), "")
        arg = next((s.content for s in reversed(steps) if s.state == action_input), "")
        tool = tools.get(name.strip())
        if tool is None:
            return f"unknown tool {name.strip()!r}; tools: {', '.join(tools)}"
        try:
            return str(tool(arg))
        except Exception as e:  # the tool's mistake is the model's observation
            return f"error: {type(e).__name__}: {e}"
    return observe


class TextGuard:
    """A text-format spec enforced on an OpenAI-compatible completions endpoint (see the module).

    ``client``/``base_url``/``api_key``/``model`` as for :class:`ltlagent.guard.chat.Guard`;
    ``max_stop`` (default 4: the OpenAI API and vLLM refuse more) caps the stop list, keeping the
    environment's prompt strings first — the re-parse still cuts whatever the cap let through."""

    def __init__(self, spec: CompiledSpec | Spec | str | Path, environment: Environment, *,
                 client: OpenAI | None = None, model: str | None = None,
                 base_url: str | None = None, api_key: str | None = None, max_retries: int = 3,
                 max_steps: int = 40, max_stop: int | None = 4,
                 **completion_args: object) -> None:
        parsed = spec.spec if isinstance(spec, CompiledSpec) else \
            spec if isinstance(spec, Spec) else load_spec(spec)
        events = [s.name for s in parsed.states if s.is_event]
        if events:
            raise UsageError(f"{', '.join(events)}: event states have no prompt string; a chat "
                             "policy is guarded by ltlagent.guard.Guard (tool calls), not TextGuard")
        if max_retries < 0 or max_steps < 1 or (max_stop is not None and max_stop < 1):
            raise UsageError("max_retries must be ≥ 0, max_steps and max_stop ≥ 1")
        self.compiled = spec if isinstance(spec, CompiledSpec) else compile_spec(parsed)
        self.environment = environment
        self.max_retries, self.max_steps, self.max_stop = max_retries, max_steps, max_stop
        self.completion_args = completion_args
        self.model = model or os.environ.get("OPENAI_MODEL") or ""
        if not self.model:
            raise UsageError("no model: pass model=… or set $OPENAI_MODEL")
        if client is None:
            from openai import OpenAI

            client = OpenAI(base_url=base_url, api_key=api_key or os.environ.get("OPENAI_API_KEY")
                            or "EMPTY")
        self.client = client
        states = self.compiled.spec.states
        self._text = {s.name: s.text for s in states}
        self._env = frozenset(s.name for s in states if s.env_input)

    def stop_for(self, q: int) -> list[str]:
        """The stop sequences at automaton state ``q``: every environment prompt string, then those
        of the states not allowed next."""
        allowed = set(self.compiled.automaton.allowed(q))
        names = self.compiled.names
        stop = [self._text[n] for n in names if n in self._env]
        stop += [self._text[n] for n in names if n not in self._env and n not in allowed]
        return stop[: self.max_stop] if self.max_stop is not None else stop

    def complete(self, prompt: str, stop: list[str]) -> tuple[str, str | None]:
        """One completion: its text and finish reason."""
        args: dict[str, object] = dict(self.completion_args)
        if stop:
            args["stop"] = stop
        resp = self.client.completions.create(model=self.model, prompt=prompt, **args)  # type: ignore[call-overload]
        choice = resp.choices[0]
        return choice.text or "", choice.finish_reason

    def run(self, prompt: str) -> TextRun:
        """Run the model on ``prompt`` under the spec until the trace is complete (or stuck)."""
        a = self.compiled.automaton
        text, q = "", a.initial
        steps: list[list[str]] = []  # [state, raw content, who]
        requests = cuts = stuck = 0
        outcome = "max-steps"
        owed = False  # a prompt string was written for the model: its content is the model's to write
        while len(steps) < self.max_steps and requests < 2 * self.max_steps:
            if a.can_stop(q) and not owed:
                outcome = "complete"
                break
            owed = False
            requests += 1
            reply, finish = self.complete(prompt + text, self.stop_for(q))
            kept, entered, q, cut = self._accept(reply, q)
            cuts += cut
            text += kept
            first = entered[0][1] if entered else len(kept)
            if steps:
                steps[-1][1] += kept[:first]
            for k, (name, _, end) in enumerate(entered):
                nxt = entered[k + 1][1] if k + 1 < len(entered) else len(kept)
                steps.append([name, kept[end:nxt], "model"])
            progressed = bool(entered) or bool(kept.strip())
            stuck = 0 if progressed else stuck + 1
            if finish == "length" and not cut:  # the model is still writing a content
                if stuck > self.max_retries:
                    outcome = "retries"
                    break
                continue
            env = [n for n in a.allowed(q) if n in self._env]
            if a.is_complete(q) and not env:
                outcome = "complete"
                break
            if env:  # the environment writes next
                view = _steps(steps)
                content = self.environment(env[0], view).strip()
                text += ("" if not text or text.endswith("\n") else "\n") + \
                    f"{self._text[env[0]]} {content}\n"
                steps.append([env[0], content, "environment"])
                q = a.step(q, env[0])
                stuck = 0
                continue
            model_next = [n for n in a.allowed(q) if n not in self._env]
            if len(model_next) == 1:  # forced, as the decoder forces it
                text += ("" if not text or text[-1].isspace() else "\n") + self._text[model_next[0]]
                steps.append([model_next[0], "", "guard"])
                q = a.step(q, model_next[0])
                stuck, owed = 0, True
                continue
            if stuck > self.max_retries:
                outcome = "retries"
                break
        view = _steps(steps)
        return TextRun(text, view, a.run([s.state for s in view]), outcome, requests, cuts)

    def _accept(self, reply: str, q: int) -> tuple[str, list[tuple[str, int, int]], int, int]:
        """The part of ``reply`` the spec allows at ``q`` — cut before the first prompt string it
        forbids there or an environment's — with the states it enters (name, start, end of the
        prompt string in the kept text), the automaton state after them, and whether it was cut."""
        a, names = self.compiled.automaton, self.compiled.names
        entered: list[tuple[str, int, int]] = []
        for m in self.compiled.lexer.finditer(reply):
            name = names[m.index]
            r = a.step(q, name)
            if name in self._env or r < 0:
                return reply[: m.start], entered, q, 1
            entered.append((name, m.start, m.end))
            q = r
        return reply, entered, q, 0


def _steps(steps: list[list[str]]) -> tuple[TextStep, ...]:
    return tuple(TextStep(name, content.strip(), by) for name, content, by in steps)
