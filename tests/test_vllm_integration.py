"""The processor inside a real vLLM engine on the bundled model (skipped without vLLM; ``make test-vllm``
builds the environment and runs these): random sampling obeys the spec, greedy equals the
transformers processor, different specs share a batch, a request without ltlagent arguments is
left alone, and the agent's vLLM backend runs episodes concurrently."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine in this process
os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")  # the v1 logits-processor interface
vllm = pytest.importorskip("vllm")

import torch  # noqa: E402

from ltlagent.agent.runner import BUNDLED_MODEL  # noqa: E402
from ltlagent.decode.vllm_processor import LtlLogitsProcessor  # noqa: E402
from ltlagent.logic.compiled import compile_spec  # noqa: E402

TOOLS = ["Search", "Lookup"]
PROMPTS = ["Question: what is the capital of France?\n", "Question: 12 * 7?\n", "Q: x\n",
           "Hello there, how are you today?\n"]


@pytest.fixture(scope="module")
def llm() -> object:
    # A decoder built before the engine starts, whatever order the tests run in: its compiled loops
    # load numba, and vLLM's CPU worker scans every module's globals when it starts (ltlagent.jit)
    from transformers import AutoTokenizer

    from ltlagent.decode.chat import TokenBytes
    from ltlagent.decode.vocab import vocab_from_tokenizer
    TokenBytes.of(vocab_from_tokenizer(AutoTokenizer.from_pretrained(str(BUNDLED_MODEL))))
    return vllm.LLM(model=str(BUNDLED_MODEL), logits_processors=[LtlLogitsProcessor], dtype="float32",
                    max_model_len=1024, enforce_eager=True, max_num_seqs=64, seed=0,
                    kv_cache_memory_bytes=256 << 20, gpu_memory_utilization=0.3)


def _params(spec: str | None, max_tokens: int = 80, **kw: object) -> object:
    extra = {"ltlagent": {"spec": spec, "tools": TOOLS}} if spec else None
    return vllm.SamplingParams(max_tokens=max_tokens, extra_args=extra, **kw)


def _trace(spec: str, ids: list[int]) -> tuple[list[str], str]:
    """The states a token sequence writes (lexed by the spec) and the automaton's verdict."""
    from ltlagent.decode.monitor import build_index

    c = compile_spec(spec)
    tok = _tokenizer()
    v = build_index(c, tok, tool_names=TOOLS).vocab
    data = b"".join(v.token_bytes(t) for t in ids)
    trace = [c.spec.states[m.index].name for m in c.lexer.finditer(data)]
    return trace, c.automaton.run(trace).status


def _tokenizer() -> object:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(BUNDLED_MODEL))


def _ok(spec: str, ids: list[int]) -> bool:
    trace, status = _trace(spec, ids)
    env = {st.name for st in compile_spec(spec).spec.states if st.env_input}
    return status == "accepted" or (status == "incomplete" and bool(trace) and trace[-1] in env)


def test_random_sampling_obeys_the_spec(llm: object) -> None:
    specs = ["react-tools", "chain-of-thought", "react", "reflexion"]
    reqs = [(p, s, seed) for seed in range(4) for p in PROMPTS for s in specs]
    outs = llm.generate([p for p, _, _ in reqs],  # type: ignore[attr-defined]
                        [_params(s, temperature=1.0, seed=seed) for _, s, seed in reqs], use_tqdm=False)
    for (_p, s, _seed), o in zip(reqs, outs, strict=True):
        ids = list(o.outputs[0].token_ids)
        assert _ok(s, ids), (s, _trace(s, ids), o.outputs[0].text)
        if s == "chain-of-thought":
            assert _trace(s, ids)[1] == "accepted"


def test_greedy_equals_the_transformers_processor(llm: object) -> None:
    from transformers import AutoModelForCausalLM

    from ltlagent.decode.processor import logits_processor

    tok = _tokenizer()
    model = AutoModelForCausalLM.from_pretrained(str(BUNDLED_MODEL))
    eos = set(tok.all_special_ids)
    for spec in ("react-tools", "chain-of-thought"):
        outs = llm.generate(PROMPTS, _params(spec, 60, temperature=0.0), use_tqdm=False)  # type: ignore[attr-defined]
        for prompt, o in zip(PROMPTS, outs, strict=True):
            proc = logits_processor(spec, tok, tool_names=TOOLS, max_new_tokens=60)
            x = tok(prompt, return_tensors="pt")
            with torch.inference_mode():
                ref = model.generate(**x, max_new_tokens=60, do_sample=False, logits_processor=[proc],
                                     stopping_criteria=[proc.stopping], pad_token_id=tok.pad_token_id)
            want = ref[0, x["input_ids"].shape[1]:].tolist()
            got = list(o.outputs[0].token_ids)
            while want and want[-1] in eos:
                want.pop()
            while got and got[-1] in eos:
                got.pop()
            assert got == want, (spec, prompt, tok.decode(got), tok.decode(want))


def test_mixed_batch_and_untouched_requests(llm: object) -> None:
    """Different specs and unconstrained requests in one batch; an unconstrained request decodes as
    it does in a batch with no constrained request at all."""
    specs = ["react-tools", None, "chain-of-thought", None, "react"]
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(len(specs))]
    mixed = llm.generate(prompts, [_params(s, 40, temperature=0.0) for s in specs],  # type: ignore[attr-defined]
                         use_tqdm=False)
    alone = llm.generate([p for p, s in zip(prompts, specs, strict=True) if s is None],  # type: ignore[attr-defined]
                         _params(None, 40, temperature=0.0), use_tqdm=False)
    free = iter(alone)
    for s, o in zip(specs, mixed, strict=True):
        ids = list(o.outputs[0].token_ids)
        if s is None:
            assert ids == list(next(free).outputs[0].token_ids)
        else:
            assert _ok(s, ids), (s, _trace(s, ids))


def test_agent_run_batch_matches_the_transformers_runner(llm: object) -> None:
    """ReAct episodes with a calculator through environment turns: every trace accepted or paused
    correctly; greedy episodes equal the transformers runner's (same spec, prompt and budget)."""
    from ltlagent.agent.runner import Agent
    from ltlagent.agent.tools import Calculator
    from ltlagent.agent.vllm_backend import vllm_agent

    tasks = ["What is 12 * 7?", "Natalia sold 48 clips in April and half as many in May. How many in all?",
             "What is 3 + 4?"]
    agent = vllm_agent("react", llm, tools=[Calculator()])
    results = agent.run_batch(tasks, max_new_tokens=200, max_steps=12)
    ref = Agent.from_spec("react", BUNDLED_MODEL, tools=[Calculator()])  # the model the engine serves
    for task, r in zip(tasks, results, strict=True):
        assert r.verdict != "rejected", r.trace
        want = ref.run(task, max_new_tokens=200, max_steps=12, max_state_tokens=None)
        assert r.transcript == want.transcript, (r.transcript, want.transcript)
        assert (r.trace, r.verdict, r.stop_reason) == (want.trace, want.verdict, want.stop_reason)
    sampled = agent.run_batch(tasks * 4, temperature=1.0, seed=0, max_new_tokens=150, max_steps=10)
    assert all(r.verdict != "rejected" for r in sampled)
    assert sum(r.usage["forward_calls"] for r in sampled) > len(sampled)  # environment turns happened
