"""The agent runner's cost per token and its KV-cache reuse, on random GPT-2 models (offline).

For each model size: ReAct runs (Calculator, sampling, seeds 0..N-1) through ``Agent.run``, timed
as a whole and split into the model's forward passes and the rest (monitor masks and advance,
sampling, bookkeeping, tools); and a plain sampling loop over the same model with the same KV cache
and no monitor, for the baseline tokens/s. "re-encode" is the number of tokens a runner that
re-encodes the whole context at every environment turn would feed, against what this one feeds.

    LTLAGENT_CACHE_DIR=off python benchmarks/bench_agent.py --runs 5

"index build" is ``build_index`` (vocabulary reading and tables; masks are then computed lazily
during the runs and memoised, inside the runner's time).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

from ltlagent.agent.kvcache import cache_arg, cache_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build(n_embd: int, n_layer: int, vocab: int):  # type: ignore[no-untyped-def]
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    text = ["Thought: I need to compute it.\nAction: Calculator\nAction Input: 17 * 23 + 4\n"
            "Observation: 395\nFinal Thought: the result is 395\nAnswer: 395\nQuestion: What is it?\n"] * 20
    # pseudo-words from syllables, so that BPE finds enough merges for a realistic vocabulary size
    rng = random.Random(0)
    syl = [a + b for a in "bcdfghjklmnprstvwz" for b in "aeiou"] + ["th", "ng", "st", "er", "ion"]
    words = ["".join(rng.choice(syl) for _ in range(rng.randint(1, 4))) for _ in range(60000)]
    text += [" ".join(words[i:i + 20]) + ".\n" for i in range(0, len(words), 20)] * (1 + vocab // 4000)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                      show_progress=False))
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=len(hf), n_positions=2048, n_embd=n_embd, n_layer=n_layer,
                     n_head=max(1, n_embd // 64), eos_token_id=hf.eos_token_id, bos_token_id=hf.eos_token_id)
    return GPT2LMHeadModel(cfg).eval(), hf


def plain_loop(model, ids: list[int], n: int, seed: int) -> float:  # type: ignore[no-untyped-def]
    """Tokens/s of sampling ``n`` tokens with the KV cache and no monitor."""
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([ids]), use_cache=True)
        past, logits = cache_of(out), out.logits[0, -1]
        t = time.perf_counter()
        for _ in range(n):
            tok = int(torch.multinomial(torch.softmax(logits.float(), -1), 1, generator=g))
            out = model(input_ids=torch.tensor([[tok]]), use_cache=True, **cache_arg(model, past))
            past, logits = cache_of(out), out.logits[0, -1]
        return n / (time.perf_counter() - t)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--max-new-tokens", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    import torch

    from ltlagent.agent.runner import Agent
    from ltlagent.agent.tools import Calculator

    torch.set_num_threads(args.threads)
    sizes = [(32, 2, 400), (32, 2, 32000), (256, 4, 32000), (768, 12, 32000)]
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.runs} runs per row, "
          f"max_new_tokens={args.max_new_tokens}, max_state_tokens=16\n")
    print("| model (d_model × layers, vocab) | params | runner tok/s | plain loop tok/s | forward share "
          "| runner overhead ms/token | index build s | tool calls/run | forward tokens | re-encode |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for d, n_layer, vocab in sizes:
        model, tok = build(d, n_layer, vocab)
        params = sum(p.numel() for p in model.parameters())
        agent = Agent.from_spec("react", model, tok, tools=[Calculator()])
        fwd_time = [0.0]
        inner = agent._forward

        def timed(ids, past, _inner=inner, _acc=fwd_time):  # type: ignore[no-untyped-def]
            t = time.perf_counter()
            out = _inner(ids, past)
            _acc[0] += time.perf_counter() - t
            return out

        agent._forward = timed  # type: ignore[method-assign]
        t = time.perf_counter()
        _ = agent.index
        index_s = time.perf_counter() - t
        rates, shares, overheads, calls, fed, reenc = [], [], [], [], [], []
        for seed in range(args.runs):
            fwd_time[0] = 0.0
            t = time.perf_counter()
            r = agent.run("What is 17 * 23 + 4?", temperature=1.0, seed=seed,
                          max_new_tokens=args.max_new_tokens, max_state_tokens=16)
            wall = time.perf_counter() - t - r.timing["env_s"]
            n = r.usage["generated_tokens"]
            rates.append(n / wall)
            shares.append(fwd_time[0] / wall)
            overheads.append(1000 * (wall - fwd_time[0]) / n)
            obs = [s for s in r.steps if s.state == "Observation"]
            calls.append(len(obs))
            fed.append(r.usage["forward_tokens"])
            # a runner that re-encodes everything at each turn feeds the whole context per turn
            ctx, total, seen = r.usage["prompt_tokens"], 0, 0
            for s in r.steps:
                seen += s.tokens
                if s.state == "Observation":
                    total += ctx + seen
            reenc.append(total + ctx + seen)
        base = plain_loop(model, tok.encode(agent.prompt("What is 17 * 23 + 4?")), 100, 0)
        med = statistics.median
        print(f"| {d} × {n_layer}, {len(tok)} | {params / 1e6:.1f} M | {med(rates):.0f} | {base:.0f} "
              f"| {100 * med(shares):.0f} % | {med(overheads):.2f} | {index_s:.2f} | {med(calls):.0f} "
              f"| {med(fed):.0f} | {med(reenc):.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
