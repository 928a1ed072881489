"""What a run of :class:`~ltlagent.agent.runner.Agent` produced (docs/design.md §6): its steps
(:class:`Step`), the result (:class:`RunResult`), the notes a reader should know
(:func:`run_notes`), and :class:`StepLog`, which formats steps from the monitor's record.

Shared by the transformers loop (:mod:`ltlagent.agent.runner`), the vLLM backend
(:mod:`ltlagent.agent.vllm_backend`) and the environment's context (:mod:`ltlagent.agent.environment`),
so it sits below all three and imports none of them (no import cycles, §10).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ltlagent.decode.monitor import Monitor
    from ltlagent.spec.syntax import Spec

__all__ = ["Step", "RunResult", "StepLog", "run_notes"]


# --- results -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """One visited state: its content and who wrote it.

    ``text`` is the content (between this state's prompt string and the next one, stripped);
    ``source`` is ``"model"`` or ``"env"``; ``forced`` says the prompt string was chosen by the
    monitor (the model's text had ended) rather than written freely; ``segments`` is the raw text
    of the step, prompt string included, as ``(text, kind)`` pieces with kind ``"model"``,
    ``"forced"`` (tokens the monitor forced) or ``"env"``. ``tool`` / ``error`` describe a tool call.
    ``boundary`` is the context label (``"Question:"``…) at which the model began a new example
    inside this step: the step's text ends before it (``segments`` keep what was written).
    """

    index: int
    state: str
    text: str
    source: str
    tokens: int
    forced: bool = False
    segments: tuple[tuple[str, str], ...] = ()
    tool: str | None = None
    error: str | None = None
    seconds: float = 0.0
    boundary: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"index": self.index, "state": self.state, "text": self.text, "source": self.source,
                "tokens": self.tokens, "forced": self.forced, "segments": [list(s) for s in self.segments],
                "tool": self.tool, "error": self.error, "seconds": round(self.seconds, 6),
                "boundary": self.boundary}


@dataclass(frozen=True)
class RunResult:
    """Everything a run produced; :meth:`to_dict` is JSON-serialisable."""

    task: str
    answer: str | None
    steps: tuple[Step, ...]
    prompt: str
    transcript: str  # the text after the prompt: generated and environment text
    stop_reason: str
    verdict: str  # "accepted" | "incomplete" | "rejected" (the trace under the spec's automaton)
    spec: str
    usage: dict[str, int] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)
    settings: dict[str, object] = field(default_factory=dict)
    #: what a reader of the result should know and the trace does not show: ``"boundary"`` (the
    #: model began a new example and its text was cut there), ``"repeated_tool_call"`` (the same
    #: tool with the same input again), ``"empty_answer"``
    notes: tuple[str, ...] = ()

    @property
    def trace(self) -> tuple[str, ...]:
        return tuple(s.state for s in self.steps)

    @property
    def accepted(self) -> bool:
        return self.verdict == "accepted"

    @property
    def full_text(self) -> str:
        """Prompt plus transcript: the whole text the model saw."""
        return self.prompt + self.transcript

    def to_dict(self) -> dict[str, object]:
        return {"task": self.task, "answer": self.answer, "stop_reason": self.stop_reason,
                "verdict": self.verdict, "spec": self.spec, "trace": list(self.trace),
                "steps": [s.to_dict() for s in self.steps], "prompt": self.prompt,
                "transcript": self.transcript, "usage": dict(self.usage),
                "timing": {k: round(v, 6) for k, v in self.timing.items()}, "settings": dict(self.settings),
                "notes": list(self.notes)}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)


def run_notes(steps: Sequence[Step], answer: str | None, answer_state: str | None = "Answer"
              ) -> tuple[str, ...]:
    """What the trace does not show: a new example begun (and cut), the same tool call again, an
    empty answer (``answer_state``: the state that holds it, :attr:`Roles.answer`)."""
    notes: list[str] = []
    if any(s.boundary for s in steps):
        notes.append("boundary")
    calls: set[tuple[str, str]] = set()
    repeated = False
    for i, s in enumerate(steps):
        if s.source == "env" and s.tool:
            arg = next((p.text for p in reversed(steps[:i]) if p.source == "model"), "")
            repeated |= (s.tool, arg) in calls
            calls.add((s.tool, arg))
    if repeated:
        notes.append("repeated_tool_call")
    if any(s.state == answer_state for s in steps) and not (answer or "").strip():
        notes.append("empty_answer")
    return tuple(notes)


class StepLog:
    """Steps from the monitor's record: the monitor says which states were visited, where their
    text lies and how it ended (the text is lexed once, by the monitor); the log adds what only the
    runner knows (who wrote each piece of text, when each step began, the tool calls) and formats
    :class:`Step` s."""

    def __init__(self, mon: Monitor, spec: Spec) -> None:
        self.mon = mon
        self.spec = spec
        self.runs: list[tuple[int, str]] = []  # (start byte, kind) of each piece of text
        self.started: list[float] = []  # when each step began
        self.info: dict[int, tuple[str | None, str | None, float]] = {}  # env step -> tool, error, s
        self.emitted = 0
        self.done: dict[int, Step] = {}  # steps handed out, frozen as they were

    def wrote(self, events: Sequence[Any], kind: str) -> None:
        """The monitor's events after text of ``kind`` (``model``, ``forced``, ``env``) was consumed."""
        for e in events:
            if e.kind == "text" and e.text and (not self.runs or self.runs[-1][1] != kind):
                self.runs.append((e.at, kind))
        while len(self.started) < len(self.mon.segments):
            self.started.append(time.perf_counter())

    def step(self, i: int) -> Step:
        if i in self.done:
            return self.done[i]
        mon = self.mon
        segs = mon.segments
        seg = segs[i]
        data = mon.text_bytes
        end = segs[i + 1].prompt if i + 1 < len(segs) else mon.settled
        pieces: list[tuple[str, str]] = []
        for r, (rs, kind) in enumerate(self.runs):
            re_ = self.runs[r + 1][0] if r + 1 < len(self.runs) else mon.settled
            lo, hi = max(rs, seg.prompt), min(re_, end)
            if lo < hi:
                pieces.append((data[lo:hi].decode("utf-8", "replace"), kind))
        tool, error, secs = self.info.get(i, (None, None, 0.0))
        if not secs:
            nxt = self.started[i + 1] if i + 1 < len(self.started) else time.perf_counter()
            secs = nxt - self.started[i]
        # a new example begun inside the step: its content ends where the context label starts
        cut = seg.end if seg.ended == "boundary" and seg.end is not None else end
        state = self.spec.states[seg.state]
        text = data[seg.start:min(end, cut)].decode("utf-8", "replace").strip()
        return Step(index=i, state=state.name, text=text,
                    source="env" if state.env_input else "model", tokens=mon.segment_tokens(i),
                    forced=seg.forced, segments=tuple(pieces), tool=tool, error=error, seconds=secs,
                    boundary=seg.label)

    def take(self, upto: int) -> list[Step]:
        """Steps ``emitted … upto-1``, now complete, to hand out."""
        out = [self.step(i) for i in range(self.emitted, upto)]
        for s in out:
            self.done[s.index] = s
        self.emitted = max(self.emitted, upto)
        return out

    def steps(self) -> tuple[Step, ...]:
        return tuple(self.step(i) for i in range(len(self.mon.segments)))

    @property
    def text(self) -> str:
        """The transcript: the text reported so far."""
        return self.mon.text_bytes[:self.mon.settled].decode("utf-8", "replace")
