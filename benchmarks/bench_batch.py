"""The logits processor on batches (issue 11, part 2): per-step time at batch 1, 8, 64 and 256, and
its share of a decode step of the bundled model.

Usage: python benchmarks/bench_batch.py [--batches 1 8 64 256] [--steps 48] [--sizes 128000]

Each row writes its own ReAct text (``Thought: …`` to ``Observation:`` or ``Final Thought: …`` to
``Answer: …``, random words, different lengths), as tokens the monitor allows (the longest allowed
token at each point), so at any step the rows sit in different states: free text, forced prompt
strings, paused for the environment. A step is one ``LtlLogitsProcessor.__call__`` on
``(batch, length)`` input ids and ``(batch, vocab)`` scores: each row's state from its tokens, its
mask, and all masks applied at once (:func:`ltlagent.decode.masks.apply_rows`); the rows' masks applied
one row at a time (``Mask.apply``) are timed on the same masks for comparison. Timings are of the
second pass (masks already computed; the first pass is reported too). The floor is one bare
``masked_fill_`` over the same ``(batch, vocab)`` logits, timed in the same run: the step's own
masks as one boolean tensor built beforehand (issue 19's yardstick). The decode step is one
forward of the bundled model (``ltlagent/models/react-tiny``, Llama 6×160, vocab 3072) on one new
token per row with a KV cache of 64 tokens. One thread; figures printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from ltlagent.agent.kvcache import cache_arg, cache_of

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

BUNDLED = ROOT / "ltlagent" / "models" / "react-tiny"
WORDS = ("the", "capital", "of", "France", "is", "Paris", "I", "need", "to", "search", "for", "population",
         "2023", "about", "million", "check", "answer", "café", "Lookup", "first", "then", "so")


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def row_texts(n: int, seed: int = 0) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        w = lambda k: " ".join(rnd.choices(WORDS, k=k))  # noqa: E731
        if i % 3 == 2:
            out.append(f"Final Thought: {w(rnd.randint(2, 30))}\nAnswer: {w(rnd.randint(1, 20))}")
        else:
            out.append(f"Thought: {w(rnd.randint(1, 25))}\nAction: {rnd.choice(['Search', 'Lookup'])}\n"
                       f"Action Input: {w(rnd.randint(1, 8))}\nObservation:")
    return out


def row_tokens(index: object, text: str, steps: int, pad: int) -> list[int]:
    """``text`` as the monitor's own tokens, cut or padded (``pad``: what generate appends to a
    stopped row) to ``steps``."""
    import bench_monitor as bm

    from ltlagent.decode.monitor import Monitor

    rec: list[tuple[float, object, int]] = []
    bm.write_text(Monitor(index, eos_ends_text=False), text, rec)  # type: ignore[arg-type]
    toks = [t for _, _, t in rec][:steps]
    return toks + [pad] * (steps - len(toks))


def bench_processor(index: object, prompt: list[int], batch: int, steps: int, width: int,
                    ) -> dict[str, float]:
    import torch

    from ltlagent.decode.masks import apply_rows
    from ltlagent.decode.processor import LtlLogitsProcessor

    pad = index.eos_token_ids[0]  # type: ignore[attr-defined]
    rows = [row_tokens(index, t, steps, pad) for t in row_texts(batch)]
    ids = torch.tensor([prompt + r for r in rows])
    proc = LtlLogitsProcessor(index)  # type: ignore[arg-type]
    scores = torch.randn(batch, width)
    passes: list[list[float]] = []
    for _ in range(2):
        proc.reset()
        times = []
        for k in range(steps):
            x = ids[:, : len(prompt) + k]
            s = scores.clone()
            t0 = time.perf_counter_ns()
            proc(x, s)
            times.append((time.perf_counter_ns() - t0) / 1e9)
        passes.append(times)
    # an untimed third pass: each step's masks (every row's cursor after the call) and its output
    recorded: list[list[object]] = []
    outputs: list[torch.Tensor] = []
    proc.reset()
    for k in range(steps):
        x = ids[:, : len(prompt) + k]
        outputs.append(proc(x, scores.clone()))
        recorded.append([proc.row_monitor(x[i]).current_mask() for i in range(batch)])
    batched, by_row, floor = [], [], []
    for masks, out in zip(recorded, outputs):
        s = scores.clone()
        apply_rows(masks, s)  # type: ignore[arg-type]
        if not torch.equal(s, out):
            raise RuntimeError("the processor's output is not its rows' masks applied")
        bare = torch.isneginf(s)  # the floor: one masked_fill_ of this step's masks, made beforehand
        s = scores.clone()
        t0 = time.perf_counter_ns()
        s.masked_fill_(bare, float("-inf"))
        floor.append((time.perf_counter_ns() - t0) / 1e9)
        s = scores.clone()
        t0 = time.perf_counter_ns()
        apply_rows(masks, s)  # type: ignore[arg-type]
        batched.append((time.perf_counter_ns() - t0) / 1e9)
        s2 = scores.clone()
        t0 = time.perf_counter_ns()
        for i, mk in enumerate(masks):
            mk.apply(s2[i])  # type: ignore[attr-defined]
        by_row.append((time.perf_counter_ns() - t0) / 1e9)
        if not torch.equal(s, s2):
            raise RuntimeError("batched and row-by-row masks differ")
    return {"first_ms": 1e3 * statistics.median(passes[0]), "med_ms": 1e3 * statistics.median(passes[1]),
            "p99_ms": 1e3 * pct(passes[1], 99), "apply_ms": 1e3 * statistics.median(batched),
            "by_row_ms": 1e3 * statistics.median(by_row), "floor_ms": 1e3 * statistics.median(floor)}


def decode_step_ms(model: object, batch: int, context: int = 64, reps: int = 5) -> float:
    import torch

    torch.manual_seed(0)
    vocab = model.config.vocab_size  # type: ignore[attr-defined]
    x = torch.randint(1, vocab, (batch, context))
    with torch.no_grad():
        out = model(x, use_cache=True)  # type: ignore[operator]
        past = cache_of(out)
        nxt = torch.randint(1, vocab, (batch, 1))
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            out = model(nxt, use_cache=True, **cache_arg(model, past))  # type: ignore[operator]
            times.append(time.perf_counter() - t0)
            past = cache_of(out)
    return 1e3 * statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 64, 256])
    ap.add_argument("--steps", type=int, default=48)
    ap.add_argument("--sizes", type=int, nargs="*", default=[128000],
                    help="also time the processor on these trained byte-level BPEs (no model)")
    args = ap.parse_args()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ltlagent.decode import cache
    from ltlagent.decode.monitor import build_index
    from ltlagent.logic.compiled import compile_spec

    torch.set_num_threads(1)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    cache.disable_cache()  # cold indexes, nothing persisted
    compiled = compile_spec("react")
    tok = AutoTokenizer.from_pretrained(str(BUNDLED))
    model = AutoModelForCausalLM.from_pretrained(str(BUNDLED)).eval()
    setups = [("bundled react-tiny", tok, model)]
    for size in args.sizes:
        import bench_monitor as bm

        setups.append((f"byte-level BPE {size // 1000}k", bm.tokenizer(size)[0], None))
    print("| tokenizer (vocab) | batch | processor per step: median, p99 (first pass median) | "
          "of which masks applied: all rows at once / row by row | bare masked_fill_ (floor) | "
          "processor / floor | bundled model decode step | processor share of a step |")
    print("|---|---:|---|---|---:|---:|---:|---:|")
    for name, t, m in setups:
        index = build_index(compiled, t, cache=False)
        prompt = t.encode("Question: how many people live in Paris?\n")  # type: ignore[attr-defined]
        width = m.config.vocab_size if m is not None else index.vocab_size
        for b in args.batches:
            r = bench_processor(index, prompt, b, args.steps, width)
            if m is not None:
                dec = decode_step_ms(m, b)
                share = f"{r['med_ms'] / (dec + r['med_ms']):.1%}"
                dec_s = f"{dec:.2f} ms"
            else:
                share = dec_s = "–"
            print(f"| {name} ({index.vocab_size}) | {b} | {r['med_ms']:.3f} ms, {r['p99_ms']:.3f} ms "
                  f"({r['first_ms']:.3f} ms) | {r['apply_ms']:.3f} ms / {r['by_row_ms']:.3f} ms | "
                  f"{r['floor_ms']:.3f} ms | {r['med_ms'] / r['floor_ms']:.2f} | {dec_s} | "
                  f"{share} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
