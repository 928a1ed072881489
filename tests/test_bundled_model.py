"""The bundled models: load offline with the standard from_pretrained from the local path, stay
within the size budget, generate ReAct text, and match the recorded training metadata."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the bundled model needs the llm extra (torch)")
transformers = pytest.importorskip("transformers", reason="the bundled model needs the llm extra")

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "ltlagent" / "models"
NAMES = ("react-tiny", "react-tiny-early")
BUDGET = 25 * 1024 * 1024


@pytest.fixture(scope="module", autouse=True)
def offline():
    old = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def final():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = MODELS / "react-tiny"
    return AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def test_files_and_size_budget():
    total = 0
    for name in NAMES:
        d = MODELS / name
        for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                  "training.json"):
            assert (d / f).is_file(), f"{d / f} is missing"
        total += sum(p.stat().st_size for p in d.iterdir())
    total += (ROOT / "ltlagent" / "data" / "kb.jsonl").stat().st_size
    assert total <= BUDGET, f"bundled model files take {total / 2**20:.1f} MiB (budget 25 MiB)"


@pytest.mark.parametrize("name", NAMES)
def test_loads_with_from_pretrained_offline(name):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = MODELS / name
    model = AutoModelForCausalLM.from_pretrained(str(path))
    tok = AutoTokenizer.from_pretrained(str(path))
    assert model.config.model_type in ("llama", "gpt2")
    meta = json.loads((path / "training.json").read_text())
    assert sum(p.numel() for p in model.parameters()) == meta["parameters"]
    assert model.config.vocab_size == len(tok)
    assert tok.eos_token_id is not None and tok.decode(tok("Action Input: 48 / 2\n")["input_ids"]) == \
        "Action Input: 48 / 2\n"


def test_the_two_strengths_differ():
    early = json.loads((MODELS / "react-tiny-early" / "training.json").read_text())
    final = json.loads((MODELS / "react-tiny" / "training.json").read_text())
    assert early["step"] < final["step"]
    assert early["loss_ema"] > final["loss_ema"]


def test_generates_react_text(final):
    from validation.synth import ToolEnv, build_prompt, heldout, make_world

    model, tok = final
    world = make_world(0)
    q = heldout("arithmetic", ToolEnv(world), world, 1)[0]
    ids = tok(build_prompt("arithmetic", [], q.question), return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=40, do_sample=False, pad_token_id=tok.eos_token_id)
    text = tok.decode(out[0, ids["input_ids"].shape[1]:])
    assert text.startswith("Thought:"), text
    assert "\nAction: Calculator\nAction Input: " in text, text
