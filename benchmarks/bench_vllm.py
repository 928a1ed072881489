"""ltlagent inside vLLM (issue #10): throughput of 1, 8 and 64 concurrent ReAct episodes, constrained
vs unconstrained, and the processor's time per engine step.

Run in the vLLM environment: ``make bench-vllm`` (or ``VLLM_ENABLE_V1_MULTIPROCESSING=0
VLLM_USE_V2_MODEL_RUNNER=0 .venv-vllm/bin/python benchmarks/bench_vllm.py``). All figures come from
one run on one engine, so the ratios compare like with like.

* constrained: ``agent.run_batch`` of N ReAct episodes (calculator tool, sampling at temperature 1,
  engine seed), every environment turn a new request on the same prefix;
* unconstrained: N plain requests on the same prompts, no ltlagent arguments, each generating the
  constrained episodes' mean number of tokens (``ignore_eos``), in one ``generate`` call;
* matched unconstrained: the same, each request generating exactly its episode's number of tokens
  (so the batch thins out as the episodes' does: the cost of the constraint and the environment
  turns, without the tail of episodes of different lengths);
* same turns, unconstrained: the constrained run's own requests replayed without ltlagent: each
  episode's turns with the same prompt token ids (its earlier turns and the environment's text
  included) and the same number of new tokens (``ignore_eos``), each turn added when the episode's
  previous one ends, as the runner does. Same engine work, prefill of the environment turns
  included; what is left between the two is ltlagent's own cost (processor, runner's monitor).
  Both start from the same prefix cache: emptied, then holding the task prompts alone (otherwise
  the replay would find the blocks the constrained run prefilled at each turn already cached);
* each size ``--reps`` times (constrained then the three baselines, back to back): medians, and
  the range of the per-rep ratios;
* processor time: ``update_state`` + ``apply`` of the ltlagent processor, timed inside the engine,
  per engine step, for steps with at least 48 rows during the 64-episode run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine in this process (timings)
os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")

TASKS = ["What is 12 * 7?", "Natalia sold 48 clips in April and half as many in May. How many in all?",
         "What is 3 + 4 * 5?", "A shirt costs 20 dollars and is 25 percent off. What is the price?"]


def _timed_processor() -> tuple[type, list[tuple[int, float]]]:
    """The ltlagent processor with its per-step time recorded (rows, seconds)."""
    from ltlagent.decode.vllm_processor import LtlLogitsProcessor

    log: list[tuple[int, float]] = []

    class Timed(LtlLogitsProcessor):
        def update_state(self, batch_update: Any) -> None:
            t = time.perf_counter()
            super().update_state(batch_update)
            self._t = time.perf_counter() - t

        def apply(self, logits: Any) -> Any:
            t = time.perf_counter()
            out = super().apply(logits)
            log.append((int(logits.shape[0]), getattr(self, "_t", 0.0) + time.perf_counter() - t))
            self._t = 0.0
            return out

    return Timed, log


def _recording(engine: Any) -> dict[str, tuple[list[int], int]]:
    """Record every request added to ``engine`` from now on: id -> (prompt token ids, tokens it
    generated, once finished)."""
    seen: dict[str, tuple[list[int], int]] = {}
    add, step = engine.add_request, engine.step

    def add_request(request_id: str, prompt: Any, params: Any, *a: Any, **kw: Any) -> Any:
        if isinstance(prompt, dict) and "prompt_token_ids" in prompt:
            seen[request_id] = (list(prompt["prompt_token_ids"]), 0)
        return add(request_id, prompt, params, *a, **kw)

    def step_(*a: Any, **kw: Any) -> Any:
        outs = step(*a, **kw)
        for out in outs:
            if out.finished and out.request_id in seen:
                seen[out.request_id] = (seen[out.request_id][0], len(out.outputs[0].token_ids))
        return outs

    engine.add_request, engine.step = add_request, step_
    return seen


def turns_of(recorded: dict[str, tuple[list[int], int]], n: int) -> list[list[tuple[list[int], int]]]:
    """The recorded ``run_batch`` requests (ids ``ltlagent-TAG-EPISODE-TURN``) as each episode's
    turns, in order."""
    turns: list[list[tuple[int, list[int], int]]] = [[] for _ in range(n)]
    for rid, (ids, made) in recorded.items():
        parts = rid.split("-")
        if parts[0] == "ltlagent" and len(parts) == 4:
            turns[int(parts[2])].append((int(parts[3]), ids, made))
    return [[(ids, made) for _, ids, made in sorted(ep)] for ep in turns]


def fresh_cache(llm: Any, prompts: list[dict[str, list[int]]]) -> None:
    """Empty the engine's prefix cache, then prefill ``prompts`` (one token each), so that two
    runs start from the same cache."""
    import vllm

    llm.reset_prefix_cache()
    llm.generate(prompts, vllm.SamplingParams(max_tokens=1), use_tqdm=False)


def replay_turns(llm: Any, turns: list[list[tuple[list[int], int]]]) -> tuple[int, float]:
    """Each episode's turns (prompt ids, new tokens) as plain requests, a turn added when the
    episode's previous one ends (as ``run_batch`` adds them); (tokens generated, seconds)."""
    import vllm

    engine = llm.llm_engine
    pending: dict[str, tuple[int, int]] = {}
    gen = 0

    def submit(k: int, j: int) -> None:
        ids, n = turns[k][j]
        rid = f"replay-{k}-{j}"
        engine.add_request(rid, {"prompt_token_ids": ids},
                           vllm.SamplingParams(max_tokens=max(1, n), min_tokens=max(1, n), ignore_eos=True,
                                               temperature=1.0))
        pending[rid] = (k, j)

    t = time.perf_counter()
    for k in range(len(turns)):
        if turns[k]:
            submit(k, 0)
    while pending:
        for out in engine.step():
            if out.finished and out.request_id in pending:
                k, j = pending.pop(out.request_id)
                gen += len(out.outputs[0].token_ids)
                if j + 1 < len(turns[k]):
                    submit(k, j + 1)
    return gen, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None, help="model path or name (default: the bundled model)")
    ap.add_argument("--sizes", default="1,8,64")
    ap.add_argument("--reps", type=int, default=3,
                    help="repetitions per size (medians reported; ratio: median of per-rep ratios)")
    ap.add_argument("--max-new-tokens", type=int, default=200)
    ap.add_argument("--device-memory", type=float, default=0.3, help="vLLM gpu_memory_utilization")
    ap.add_argument("--block-size", type=int, default=None,
                    help="KV-cache block size (prefix caching reuses whole blocks; vLLM's CPU "
                         "default is 128)")
    ap.add_argument("--no-prefix-caching", action="store_true",
                    help="turn the engine's prefix caching off (to measure what it saves)")
    args = ap.parse_args()

    import vllm

    from ltlagent.agent.runner import BUNDLED_MODEL
    from ltlagent.agent.tools import Calculator
    from ltlagent.agent.vllm_backend import vllm_agent

    proc, log = _timed_processor()
    model = args.model or str(BUNDLED_MODEL)
    kw: dict[str, Any] = {}
    if args.model is None:  # the tiny model: eager float32 (no compile step; as in the tests)
        kw = {"kv_cache_memory_bytes": 512 << 20, "enforce_eager": True, "dtype": "float32"}
    if args.block_size is not None:
        kw["block_size"] = args.block_size
    llm = vllm.LLM(model=model, logits_processors=[proc], max_model_len=1024, max_num_seqs=64, seed=0,
                   gpu_memory_utilization=args.device_memory,
                   enable_prefix_caching=not args.no_prefix_caching, **kw)
    cache = llm.llm_engine.vllm_config.cache_config
    agent = vllm_agent("react", llm, tools=[Calculator()])
    # warm-up: the index built and its states' first visits paid (steering distances: seconds
    # each on this model), the engine warm; what follows is the steady state of a server
    agent.run_batch(TASKS * 4, temperature=1.0, max_new_tokens=args.max_new_tokens, max_steps=12)
    print(f"model: {model}; vllm {vllm.__version__}; prefix caching "
          f"{'on' if cache.enable_prefix_caching else 'off'}, block size {cache.block_size}")
    print("| concurrent episodes | constrained tok/s | requests | not rejected | prompt tokens "
          "submitted | of them cached | engine steps | ms per step | processor ms per step | "
          "unconstrained tok/s | constrained / unconstrained (min–max) | matched unconstrained tok/s | "
          "constrained / matched (min–max) | same turns unconstrained tok/s | constrained / same turns "
          "(min–max) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    recorded = _recording(llm.llm_engine)
    step_rows: list[float] = []
    for n in [int(x) for x in args.sizes.split(",")]:
        tasks = [TASKS[k % len(TASKS)] for k in range(n)]
        cs, us, ms, ts, ratios, mratios, tratios, steps_ms = [], [], [], [], [], [], [], []
        reqs = sent = cached = ok = steps = 0
        proc_s = 0.0
        prompts = [{"prompt_token_ids": agent.encode(agent.prompt(task), special=True)} for task in tasks]
        for _ in range(args.reps):  # constrained then unconstrained, back to back, each rep
            fresh_cache(llm, prompts)
            log.clear()
            recorded.clear()
            t = time.perf_counter()
            res = agent.run_batch(tasks, temperature=1.0, max_new_tokens=args.max_new_tokens,
                                  max_steps=12)
            dt = time.perf_counter() - t
            turns = turns_of(recorded, n)
            gen = sum(r.usage["generated_tokens"] for r in res)
            reqs += sum(r.usage["forward_calls"] for r in res)
            sent += sum(r.usage["forward_tokens"] for r in res)
            cached += sum(r.usage["cached_tokens"] for r in res)
            ok += sum(r.verdict != "rejected" for r in res)
            steps += len(log)
            proc_s += sum(s for _, s in log)
            steps_ms.append(dt / max(len(log), 1) * 1e3)
            if n >= 48:
                step_rows += [s for rows, s in log if rows >= 48]
            per = max(1, round(gen / n))
            sp = vllm.SamplingParams(max_tokens=per, min_tokens=per, ignore_eos=True, temperature=1.0)
            t = time.perf_counter()
            outs = llm.generate(prompts, sp, use_tqdm=False)
            du = time.perf_counter() - t
            ugen = sum(len(o.outputs[0].token_ids) for o in outs)
            # matched: each request writes exactly as many tokens as its episode did, so both runs
            # have the same tail (episodes of different lengths leave the batch at different times)
            sps = [vllm.SamplingParams(max_tokens=max(1, g), min_tokens=max(1, g), ignore_eos=True,
                                       temperature=1.0)
                   for g in (r.usage["generated_tokens"] for r in res)]
            t = time.perf_counter()
            outs = llm.generate(prompts, sps, use_tqdm=False)
            dm = time.perf_counter() - t
            mgen = sum(len(o.outputs[0].token_ids) for o in outs)
            fresh_cache(llm, prompts)
            tgen, dtt = replay_turns(llm, turns)
            cs.append(gen / dt)
            us.append(ugen / du)
            ms.append(mgen / dm)
            ts.append(tgen / dtt)
            ratios.append(cs[-1] / us[-1])
            mratios.append(cs[-1] / ms[-1])
            tratios.append(cs[-1] / ts[-1])
        r = args.reps
        print(f"| {n} | {statistics.median(cs):,.0f} | {reqs / r:.0f} | {ok}/{n * r} | {sent / r:,.0f} "
              f"| {cached / max(sent, 1):.0%} | {steps / r:.0f} | {statistics.median(steps_ms):.2f} | "
              f"{proc_s / max(steps, 1) * 1e3:.3f} | {statistics.median(us):,.0f} | "
              f"{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f}) | "
              f"{statistics.median(ms):,.0f} | "
              f"{statistics.median(mratios):.2f} ({min(mratios):.2f}–{max(mratios):.2f}) | "
              f"{statistics.median(ts):,.0f} | "
              f"{statistics.median(tratios):.2f} ({min(tratios):.2f}–{max(tratios):.2f}) |")
    if step_rows:
        med = statistics.median(step_rows) * 1e3
        print(f"\nprocessor time per engine step at batch >= 48 (update_state + apply): median {med:.3f} ms, "
              f"mean {statistics.fmean(step_rows) * 1e3:.3f} ms over {len(step_rows)} steps")


if __name__ == "__main__":
    main()
