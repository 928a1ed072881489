"""Examples as ReAct traces, the tool environment that writes their Observations, and prompts.

A trace is a tuple of ``(state name, content)`` steps with the state names and prompt strings of
``specs/react.sexp``. Observations are produced by calling the project's real tools
(:mod:`ltlagent.agent.tools`) through :class:`ToolEnv`, so the model learns their exact output format.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .world import World

__all__ = ["Example", "ToolEnv", "KEYWORDS", "TASKS", "TASK_TOOLS", "instruction", "render_trace",
           "render_example", "build_prompt", "question_prefix", "stable_hash"]

#: Prompt string of each state of specs/react.sexp.
KEYWORDS = {"Thought": "Thought:", "Action": "Action:", "Action-Input": "Action Input:",
            "Observation": "Observation:", "Final-Thought": "Final Thought:", "Answer": "Answer:"}

TASKS = ("arithmetic", "kbqa", "fever")
#: The tools each task's agent gets (and the order of their labels in the prompt).
TASK_TOOLS = {"arithmetic": ("Calculator",), "kbqa": ("Search", "Lookup"), "fever": ("Search", "Lookup")}
_ANSWER_HINT = {"arithmetic": "the final answer to the original input question",
                "kbqa": "the final answer to the original input question",
                "fever": "this should be one of [SUPPORTS, REFUTES, NOT ENOUGH INFO]"}
FEVER_LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")


def stable_hash(text: str) -> int:
    """A hash that does not change between processes (Python's ``hash`` does)."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


@dataclass(frozen=True)
class Example:
    """One question with its gold answer and a gold ReAct trace (Observations filled by the tools)."""

    task: str
    uid: str
    question: str
    answer: str
    steps: tuple[tuple[str, str], ...]
    split: str
    kind: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"task": self.task, "uid": self.uid, "question": self.question, "answer": self.answer,
                "steps": [list(s) for s in self.steps], "split": self.split, "kind": self.kind}


class ToolEnv:
    """The tools of all tasks over one knowledge base; ``call`` is the one place tools are invoked."""

    def __init__(self, world: World | None = None, kb_path: str | None = None, *,
                 store: object = None) -> None:
        from ltlagent.agent.tools import Calculator, Document, DocumentStore, wikipedia_style_tools

        if store is None:
            if kb_path is not None:
                store = DocumentStore.from_path(kb_path)
            elif world is not None:
                store = DocumentStore([Document(p["title"], p["text"]) for p in world.pages()])
            else:
                raise ValueError("ToolEnv needs a world, a kb_path or a store")
        self.store = store
        search, lookup = wikipedia_style_tools(store)
        self.tools = {"Calculator": Calculator(), "Search": search, "Lookup": lookup}

    def fork(self) -> ToolEnv:
        """Fresh tools over the same document store (Search/Lookup keep per-episode state)."""
        return ToolEnv(store=self.store)

    def reset(self) -> None:
        """Forget the last page searched (each trace starts fresh)."""
        for t in self.tools.values():
            t.reset()

    def call(self, action: str, action_input: str) -> str:
        """The Observation text for one tool call (errors become text, as in the agent runner)."""
        tool = self.tools.get(action.strip())
        if tool is None:
            return f"Unknown tool {action.strip()!r}."
        try:
            return tool.invoke(action_input)
        except ValueError as e:
            return str(e)

    def tool_objects(self, task: str) -> list[object]:
        return [self.tools[n] for n in TASK_TOOLS[task]]


def question_prefix(task: str) -> str:
    """``Claim:`` for the Fever-like task (as in the paper's Figure 6), ``Question:`` otherwise."""
    return "Claim:" if task == "fever" else "Question:"


def instruction(task: str, tool_descriptions: list[str] | None = None) -> str:
    """The instruction block of the paper's prompts (Figures 6–8), tool placeholders filled in."""
    names = TASK_TOOLS[task]
    if tool_descriptions is None:
        from ltlagent.agent.tools import Calculator, Lookup, Search

        cls = {"Calculator": Calculator, "Search": Search, "Lookup": Lookup}
        tool_descriptions = [f"{n}: {' '.join(cls[n].description.split())}" for n in names]
    return ("Answer the following questions as best you can. You have access to the following tools:\n"
            + "\n".join(tool_descriptions) + "\n"
            "Use the following format:\n"
            "Question: the input question you must answer\n"
            "Thought: you should always think about what to do\n"
            f"Action: the action to take, should be one of [{', '.join(names)}]\n"
            "Action Input: the input to the action\n"
            "Observation: the result of the action\n"
            "(this Thought/Action/Action Input/Observation can repeat N times)\n"
            "Final Thought: this is the last thought\n"
            f"Answer: {_ANSWER_HINT[task]}\n")


def render_trace(steps: tuple[tuple[str, str], ...]) -> str:
    """The trace text: one ``Keyword: content`` line per step."""
    return "".join(f"{KEYWORDS[name]} {content}\n" for name, content in steps)


def render_example(ex: Example) -> str:
    """Question line plus trace, as a few-shot example or a training document."""
    return f"{question_prefix(ex.task)} {ex.question}\n" + render_trace(ex.steps)


def build_prompt(task: str, exemplars: list[Example], question: str, with_instruction: bool = True) -> str:
    """The full prompt the model continues: instructions, k examples, then the question line."""
    parts = []
    if with_instruction:
        parts.append(instruction(task))
        if exemplars:
            parts.append("Here are some examples.\n")
    parts.extend(render_example(e) for e in exemplars)
    parts.append(f"{question_prefix(task)} {question}\n")
    return "".join(parts)
