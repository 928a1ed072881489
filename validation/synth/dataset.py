"""Training documents, few-shot exemplars and held-out evaluation sets, all from one seed.

A training document is a list of ``(text, trained)`` segments: instructions, question lines and
Observation contents are context (no loss); what the agent writes (prompt strings and contents of
Thought, Action, Action Input, Final Thought, Answer, and the ``Observation:`` keyword itself) is
trained. Some documents carry the instruction block and k = 0..3 exemplars before the target.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .arithmetic import make_arithmetic
from .core import KEYWORDS, TASKS, Example, ToolEnv, instruction, question_prefix
from .kbqa import make_fever, make_kbqa
from .world import World

__all__ = ["Segment", "example_segments", "prompt_segments", "make_split", "training_documents",
           "exemplars", "heldout", "DatasetConfig"]

Segment = tuple[str, bool]


@dataclass(frozen=True)
class DatasetConfig:
    """How many training examples of each task, and how the few-shot contexts are drawn."""

    seed: int = 0
    n_train: tuple[tuple[str, int], ...] = (("arithmetic", 5000), ("kbqa", 5000), ("fever", 2500))
    bare_fraction: float = 0.5       # documents with no instruction block at all
    max_k: int = 3
    copy_docs: int = 0               # short copy drills ("Copy: x y z" twice), which teach in-context copying


def example_segments(ex: Example, target: bool = True) -> list[Segment]:
    """An example as segments; the question line and Observation contents are never trained."""
    segs: list[Segment] = [(f"{question_prefix(ex.task)} {ex.question}\n", False)]
    for name, content in ex.steps:
        if name == "Observation":
            segs += [(KEYWORDS[name], target), (f" {content}\n", False)]
        else:
            segs.append((f"{KEYWORDS[name]} {content}\n", target))
    return segs


def prompt_segments(task: str, shots: list[Example]) -> list[Segment]:
    """Instruction block and exemplars; exemplar traces are trained like targets (they are traces)."""
    segs: list[Segment] = [(instruction(task), False)]
    if shots:
        segs.append(("Here are some examples.\n", False))
    for s in shots:
        segs += example_segments(s)
    return segs


def make_split(task: str, env: ToolEnv, world: World, split: str, n: int, seed: int) -> list[Example]:
    """``n`` examples of one task and split (``train`` or ``test``)."""
    if task == "arithmetic":
        return make_arithmetic(env, split, n, seed)
    if task == "kbqa":
        return make_kbqa(env, world, split, n, seed)
    if task == "fever":
        return make_fever(env, world, split, n, seed)
    raise ValueError(f"unknown task {task!r}; expected one of {', '.join(TASKS)}")


def training_documents(cfg: DatasetConfig, env: ToolEnv, world: World) -> list[list[Segment]]:
    """The training corpus in a fixed order (documents then get bucketed by the trainer)."""
    rng = random.Random(f"docs:{cfg.seed}")
    docs: list[list[Segment]] = []
    for task, n in cfg.n_train:
        pool = make_split(task, env, world, "train", n, cfg.seed)
        for i, ex in enumerate(pool):
            if rng.random() < cfg.bare_fraction:
                docs.append(example_segments(ex))
                continue
            k = rng.randrange(cfg.max_k + 1)
            shots = [pool[j] for j in rng.sample(range(len(pool)), k + 1) if j != i][:k]
            docs.append(prompt_segments(task, shots) + example_segments(ex))
    return docs + copy_drills(cfg, world)


def copy_drills(cfg: DatasetConfig, world: World) -> list[list[Segment]]:
    """Copy drills: a line of training-split names, places and numbers, then the same line again (the
    second one trained). A tiny model learns to copy from its context (induction) much sooner with
    them, and copying names and numbers from the question is what the agent's traces need."""
    rng = random.Random(f"copy:{cfg.seed}")
    pool = [p.name for p in world.people if p.split == "train"] + [c.name for c in world.cities] + [
        o.name for o in world.orgs if o.split == "train"]
    docs: list[list[Segment]] = []
    for _ in range(cfg.copy_docs):
        items = [rng.choice(pool) if rng.random() < 0.6 else str(rng.randrange(1, 1000))
                 for _ in range(rng.randrange(2, 8))]
        line = " ".join(items)
        docs.append([(f"Copy: {line}\n", False), (f"Copy: {line}\n", True)])
    return docs


def exemplars(task: str, env: ToolEnv, world: World, seed: int = 0) -> list[Example]:
    """The fixed few-shot exemplars of the evaluation prompts (training split, own seed): three
    examples of different kinds, so k = 1, 2, 3 take the first k."""
    pool = make_split(task, env, world, "train", 60, seed + 1000)
    out: list[Example] = []
    for ex in pool:
        if ex.kind not in {e.kind for e in out}:
            out.append(ex)
        if len(out) == 3:
            break
    return out


def heldout(task: str, env: ToolEnv, world: World, n: int, seed: int = 0) -> list[Example]:
    """``n`` held-out questions (test split: never in a training document)."""
    return make_split(task, env, world, "test", n, seed + 2000)
