"""The quickstart notebook runs from top to bottom (so it cannot rot), offline, in seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("torch")
pytest.importorskip("transformers")

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "quickstart.ipynb"


def _text(cell: object) -> str:
    out = []
    for o in getattr(cell, "outputs", []):
        if o.get("output_type") == "stream":
            out.append(o.get("text", ""))
        elif o.get("output_type") in ("execute_result", "display_data"):
            out.append(str(o.get("data", {}).get("text/plain", "")))
    return "".join(out)


def test_quickstart_notebook_executes() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    text = "\n".join(_text(c) for c in nb.cells if c.cell_type == "code")
    assert "Thought Action Final-Thought Answer" in text and "rejected" in text
    assert "prompt.txt: 2 examples, 1 valid, 1 invalid" in text
    assert "expected Action-Input after Action, found Observation" in text
    assert "digraph" in text or any(o.get("output_type") == "display_data"
                                    for c in nb.cells for o in c.get("outputs", []))
    assert text.count("trace accepted") == 2  # the constrained and the ablated agent
    assert "transcript: 1 example, 1 valid, 0 invalid" in text


def test_notebook_is_committed_without_outputs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") and c.get("execution_count") is None
               for c in nb.cells if c.cell_type == "code")
    nbformat.validate(nb)
