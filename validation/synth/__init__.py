"""Synthetic tasks for the bundled model and the paper's experiment (validation/experiment.py).

- :mod:`.world`: a fictional world and its knowledge base (pages for Search/Lookup);
- :mod:`.arithmetic`: GSM8K-like word problems solved with the Calculator;
- :mod:`.kbqa`: HotpotQA-like questions and Fever-like claims over the knowledge base;
- :mod:`.core`: examples as ReAct traces, the tool environment, the paper's prompt format;
- :mod:`.dataset`: training documents, few-shot exemplars, held-out sets.

Everything is a pure function of a seed. Held-out items never occur in training: arithmetic is
split by a hash of the question text, the knowledge-base tasks by entity.
"""

from .core import KEYWORDS, TASK_TOOLS, TASKS, Example, ToolEnv, build_prompt, instruction, render_example
from .dataset import DatasetConfig, exemplars, heldout, make_split, training_documents
from .world import World, make_world, write_kb

__all__ = ["KEYWORDS", "TASKS", "TASK_TOOLS", "Example", "ToolEnv", "build_prompt", "instruction",
           "render_example", "DatasetConfig", "exemplars", "heldout", "make_split", "training_documents",
           "World", "make_world", "write_kb"]
