"""ChatAgent on vLLM (issue 18; skipped without vLLM, ``make test-vllm`` runs it): greedy
conversations in the booking domain on the bundled model equal the transformers backend's, in
every mode, and every policy-mode transcript passes ``Policy.check``."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine in this process
os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")  # the v1 logits-processor interface
vllm = pytest.importorskip("vllm")

from ltlagent.agent.chat import ChatAgent, ChatResult  # noqa: E402
from ltlagent.agent.runner import BUNDLED_MODEL  # noqa: E402
from ltlagent.decode.vllm_processor import LtlLogitsProcessor  # noqa: E402
from ltlagent.logic.policy import Policy  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "booking"))
from domain import TOOLS, Database  # noqa: E402

#: The rendered booking tools take ~1,100 tokens of the tiny model; its RoPE positions go further.
CONTEXT = 4096
#: The booking policy, plus: after a user turn the assistant's first step is a tool call (as in
#: tests/test_chat_decode.py), so that the tiny model, which writes text, is made to call tools.
FORCING = (Path(__file__).resolve().parent.parent / "specs" / "booking-policy.sexp").read_text(
    encoding="utf-8").replace("(:constraints", "(:constraints\n   (call-after-user (always (implies "
                              "(or User Confirm) (weak-next (or Lookup Write Handoff Call)))))", 1)
FIRSTS = ["Hi, I need a room.", "Please cancel booking b100 for Ann Lee.",
          "Book Oak on 2026-12-24 for 2 guests, I am Bo Chen."]


@pytest.fixture(scope="module")
def llm() -> object:
    return vllm.LLM(model=str(BUNDLED_MODEL), logits_processors=[LtlLogitsProcessor], dtype="float32",
                    max_model_len=CONTEXT, hf_overrides={"max_position_embeddings": CONTEXT},
                    enforce_eager=True, max_num_seqs=16, seed=0,
                    kv_cache_memory_bytes=256 << 20, gpu_memory_utilization=0.3)


def _user(k: int) -> Callable[[Sequence[Mapping[str, object]]], str | None]:
    """A scripted user: says its lines in order, then ends the conversation."""
    lines = iter([["yes", "thanks"], ["yes please", "bye"], ["ok", "yes"]][k % 3])

    def user(messages: Sequence[Mapping[str, object]]) -> str | None:
        return next(lines, None)

    return user


def _agent(model: object, tokenizer: object, mode: str, policy: str) -> ChatAgent:
    from ltlagent.spec.syntax import parse_spec

    pol = Policy.load(parse_spec(FORCING, "forcing.sexp")) if policy == "forcing" else \
        Policy.load(policy) if mode != "none" else None
    return ChatAgent(model, tokenizer, TOOLS, Database.fresh().call, policy=pol, mode=mode)


def _transcript(r: ChatResult) -> tuple[object, ...]:
    return (r.messages, r.turns, r.calls, r.malformed, r.tokens, r.stop_reason, r.notes,
            r.report.verdict if r.report else None)


@pytest.mark.parametrize("mode, policy", [("none", "booking-policy"), ("format", "booking-policy"),
                                          ("policy", "booking-policy"), ("policy", "forcing")])
def test_greedy_chats_equal_the_transformers_backend(llm: object, mode: str, policy: str) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(BUNDLED_MODEL))
    model = AutoModelForCausalLM.from_pretrained(str(BUNDLED_MODEL)).eval()
    kw = {"max_turns": 4, "max_new_tokens": 96 if policy == "forcing" else 64}
    chats = [(_user(k), first) for k, first in enumerate(FIRSTS)]
    got = _agent(llm, llm.get_tokenizer(), mode, policy).run_batch(chats, **kw)  # type: ignore[attr-defined]
    want = [_agent(model, tok, mode, policy).run(_user(k), first, **kw)
            for k, first in enumerate(FIRSTS)]
    assert sum(r.turns for r in got) > len(FIRSTS)  # conversations went on past a first turn
    if policy == "forcing":
        assert sum(r.calls for r in got) > 0  # tool calls were written (and results read)
    for g, w in zip(got, want, strict=True):
        assert _transcript(g) == _transcript(w), (g.messages, w.messages)
        if mode == "policy":
            assert g.report is not None and g.report.verdict == "ok", g.report
            assert Policy.load("booking-policy").check(g.messages).verdict == "ok"
    if mode != "none":
        assert all(r.malformed == 0 for r in got)


def test_a_bad_turn_option_is_refused_when_the_request_arrives(llm: object) -> None:
    bad = vllm.SamplingParams(max_tokens=4, extra_args={"ltlagent": {"turn": {
        "schemas": {"a": {"type": "object"}}, "first": ["b"]}}})
    from vllm.exceptions import VLLMValidationError

    with pytest.raises((ValueError, VLLMValidationError), match="first"):
        llm.generate(["hi"], bad, use_tqdm=False)  # type: ignore[attr-defined]
