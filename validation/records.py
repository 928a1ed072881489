"""What the experiment stores and the report reads: the paper's figures beside which the report
sets ours (:data:`PAPER`, :data:`PAPER_NAMES`) and a cell's episode records (:func:`load_records`).
Its own module, below both :mod:`validation.experiment` and :mod:`validation.report`, so that
neither imports the other for it (no import cycle)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

__all__ = ["PAPER", "PAPER_NAMES", "load_records"]

#: The paper's Table 1 (MPT instruct models), accuracy % as (ablated, constrained).
PAPER = {
    ("MPT-7b", 0): {"kbqa": (0.2, 1.6), "fever": (10.2, 29.8), "arithmetic": (2.6, 3.9)},
    ("MPT-7b", 1): {"kbqa": (2.8, 10.0), "fever": (44.8, 45.0), "arithmetic": (5.6, 6.4)},
    ("MPT-7b", 2): {"kbqa": (5.8, 8.8), "fever": (53.4, 53.0), "arithmetic": (5.1, 6.1)},
    ("MPT-7b", 3): {"kbqa": (7.8, 12.4), "fever": (44.2, 43.4), "arithmetic": (3.5, 6.6)},
    ("MPT-30b", 0): {"kbqa": (3.8, 7.2), "fever": (34.0, 36.4), "arithmetic": (12.1, 14.4)},
    ("MPT-30b", 1): {"kbqa": (12.0, 13.8), "fever": (48.4, 49.2), "arithmetic": (19.0, 24.2)},
    ("MPT-30b", 2): {"kbqa": (14.4, 15.2), "fever": (45.0, 45.2), "arithmetic": (23.4, 28.1)},
    ("MPT-30b", 3): {"kbqa": (15.4, 16.8), "fever": (49.8, 50.8), "arithmetic": (25.5, 29.9)},
}
PAPER_NAMES = {"kbqa": "HotpotQA", "fever": "Fever", "arithmetic": "GSM8K"}


def load_records(path: Path) -> list[dict]:
    """A cell's episodes (``runs/NAME.jsonl.gz``); [] when the file is missing."""
    if not path.is_file():
        return []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
