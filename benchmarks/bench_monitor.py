"""The decoding monitor's cost (issue 4): compile, per step, mask application, generate overhead,
and outlines-core side by side on the same tokenizer.

Usage: python benchmarks/bench_monitor.py [--sizes 32000 128000] [--markdown] [--quick]

Byte-level BPE tokenizers of 32k and 128k tokens are trained offline on the Python source files of
this interpreter (standard library, then site-packages) and cached under ``benchmarks/.cache/``
(git-ignored; the 128k one takes about a minute the first time). Figures are printed, never
asserted. Everything runs on one thread (``torch.set_num_threads(1)``).
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "benchmarks" / ".cache"
sys.path.insert(0, str(ROOT))

TRANSCRIPT = [  # (who, text): the model's text, or the environment's after an :env-input state
    ("model", "Thought: I need the population of the capital of France, so I should look it up.\n"),
    ("model", "Action: Search\nAction Input: capital of France population\nObservation:"),
    ("env", " Paris is the capital of France; its population is about 2.1 million (2023).\n"),
    ("model", "Thought: The answer is in the observation; let me double-check the figure with "
              "another query before answering.\n"),
    ("model", "Action: Lookup\nAction Input: Paris population 2023\nObservation:"),
    ("env", " 2,102,650 inhabitants (INSEE, 1 January 2023).\n"),
    ("model", "Final Thought: Both sources agree: about 2.1 million people live in Paris.\n"),
    ("model", "Answer: About 2.1 million.\n"),
]
ONE_TURN = ("Thought: I should search for the capital of France first.\nAction: Search\n"
            "Action Input: capital of France\nObservation:")
ONE_TURN_REGEX = r"Thought:[^\n]*\nAction: (Search|Lookup|Calculator)\nAction Input:[^\n]*\nObservation:"


def source_texts(limit: int) -> list[str]:
    """Python source of this interpreter: the standard library first, then site-packages."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    site = Path(sysconfig.get_paths()["purelib"])
    files = sorted(f for f in glob.glob(str(lib / "**" / "*.py"), recursive=True) if "site-packages" not in f)
    files += sorted(glob.glob(str(site / "**" / "*.py"), recursive=True))
    out, n = [], 0
    for f in files:
        try:
            t = Path(f).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        out.append(t)
        n += len(t)
        if n >= limit:
            break
    return out


def tokenizer(size: int) -> tuple[object, float | None]:
    """The byte-level BPE of ``size`` tokens (trained and cached on first use), and the training
    time when it was trained now."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    path = CACHE / f"bpe-{size}.json"
    took = None
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tr = trainers.BpeTrainer(vocab_size=size, special_tokens=["<|endoftext|>"], show_progress=False,
                                 initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        texts = source_texts(90_000_000 if size > 64000 else 25_000_000)
        t0 = time.perf_counter()
        tok.train_from_iterator(texts, tr)
        took = time.perf_counter() - t0
        tok.save(str(path))
    return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>"), took


def fresh_tokenizer(size: int) -> object:
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_file=str(CACHE / f"bpe-{size}.json"), eos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>")


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


# --- compile -----------------------------------------------------------------------------------

def bench_compile(size: int, spec: str, reps: int) -> dict[str, float]:
    from ltlagent.decode import cache
    from ltlagent.decode.monitor import Monitor, build_index
    from ltlagent.logic.compiled import compile_spec

    t0 = time.perf_counter()
    compiled = compile_spec(spec)
    spot_s = time.perf_counter() - t0
    cold, warm = [], []
    with tempfile.TemporaryDirectory(dir=CACHE) as d:
        for _ in range(reps):
            tok = fresh_tokenizer(size)
            cache.disable_cache()
            t0 = time.perf_counter()
            mon = Monitor(build_index(compiled, tok))
            mon.forced_token()  # the first mask is ready
            cold.append(time.perf_counter() - t0)
        cache.enable_cache(d)
        build_index(compiled, fresh_tokenizer(size))  # writes the entry
        for _ in range(reps):
            tok = fresh_tokenizer(size)
            t0 = time.perf_counter()
            idx = build_index(compiled, tok)
            mon = Monitor(idx)
            mon.forced_token()
            warm.append(time.perf_counter() - t0)
            assert idx.from_cache
        cache.disable_cache()
    return {"spot_s": spot_s, "cold_s": statistics.median(cold), "warm_s": statistics.median(warm)}


# --- per step ----------------------------------------------------------------------------------

def write_text(mon: object, text: str, steps: list[tuple[float, object, int]]) -> None:
    """Write ``text`` through the monitor, the longest allowed token at a time (forced tokens where
    forced); record (seconds for mask lookup + advance, the mask, the token) per step."""
    idx = mon.index  # type: ignore[attr-defined]
    v = idx.vocab
    data = text.encode()
    while data:
        t0 = time.perf_counter_ns()
        mask = mon._mask()  # type: ignore[attr-defined]
        forced = mask.forced
        t1 = time.perf_counter_ns()
        if forced is not None:
            tok = forced
        else:
            tok = next((t for t in idx.buckets.longest_prefix_of(data[:256]) if mask.allows(t)), None)
            if tok is None:
                raise RuntimeError(f"cannot write {data[:40]!r} under the monitor")
        b = v.token_bytes(tok)
        if not data.startswith(b):
            raise RuntimeError(f"forced {b!r} but the transcript has {data[:20]!r}")
        t2 = time.perf_counter_ns()
        mon.advance(tok)  # type: ignore[attr-defined]
        t3 = time.perf_counter_ns()
        steps.append(((t1 - t0 + t3 - t2) / 1e9, mask, tok))
        data = data[len(b):]


def run_transcript(index: object, turns: list[tuple[str, str]]) -> list[tuple[float, object, int]]:
    from ltlagent.decode.monitor import Monitor

    mon = Monitor(index, eos_ends_text=False)  # type: ignore[arg-type]
    steps: list[tuple[float, object, int]] = []
    for who, text in turns:
        if who == "env":
            mon.feed_env(text)
        else:
            write_text(mon, text, steps)
    eos = index.eos_token_ids[0]  # type: ignore[attr-defined]
    t0 = time.perf_counter_ns()
    mask = mon._mask()
    mon.advance(eos)
    steps.append(((time.perf_counter_ns() - t0) / 1e9, mask, eos))
    assert mon.is_finished and mon.is_complete, mon.trace
    return steps


def replay(index: object, toks: list[int], reps: int) -> list[float]:
    """The monitor's own cost per step in a tight loop: mask lookup + advance, the transcript's
    tokens replayed (environment text fed where the trace waits for it)."""
    from ltlagent.decode.monitor import Monitor

    envs = [text for who, text in TRANSCRIPT if who == "env"]
    out: list[float] = []
    for _ in range(reps):
        mon = Monitor(index, eos_ends_text=False)  # type: ignore[arg-type]
        k = 0
        for t in toks:
            if mon.waiting_for_env:
                mon.feed_env(envs[k])
                k += 1
            t0 = time.perf_counter_ns()
            mon._mask().forced  # noqa: B018 - the mask (and forced token) for this step
            mon.advance(t)
            out.append((time.perf_counter_ns() - t0) / 1e9)
    return out


def bench_steps(size: int, spec: str) -> dict[str, float]:
    import torch

    from ltlagent.decode.monitor import build_index
    from ltlagent.decode.processor import LtlLogitsProcessor
    from ltlagent.logic.compiled import compile_spec

    tok = fresh_tokenizer(size)
    index = build_index(compile_spec(spec), tok, cache=False)
    cold = run_transcript(index, TRANSCRIPT)  # masks computed on first visit
    warm = replay(index, [t for _, _, t in cold], 20)
    width = index.vocab_size
    row = torch.randn(width)
    apply_t = []
    for _ in range(3):
        for _, mask, _ in cold:
            r = row.clone()
            t0 = time.perf_counter_ns()
            mask.apply(r)  # type: ignore[attr-defined]
            apply_t.append((time.perf_counter_ns() - t0) / 1e9)
    # the whole processor call (row state from the tokens, mask, apply), batch 1
    prompt = tok.encode("Question: how many people live in Paris?\n")
    toks = prompt + [t for _, _, t in cold]
    proc = LtlLogitsProcessor(index)
    proc_t = []
    for _ in range(3):
        proc.reset()
        for k in range(len(prompt), len(toks)):
            x = torch.tensor([toks[:k]])
            s = torch.randn(1, width)
            t0 = time.perf_counter_ns()
            proc(x, s)
            proc_t.append((time.perf_counter_ns() - t0) / 1e9)
    cs = [s for s, _, _ in cold]
    ws = warm
    return {"steps": len(cold), "cold_med_us": 1e6 * statistics.median(cs), "cold_p99_us": 1e6 * pct(cs, 99),
            "cold_max_us": 1e6 * max(cs), "warm_med_us": 1e6 * statistics.median(ws),
            "warm_p99_us": 1e6 * pct(ws, 99), "apply_med_us": 1e6 * statistics.median(apply_t),
            "apply_p99_us": 1e6 * pct(apply_t, 99), "proc_med_us": 1e6 * statistics.median(proc_t),
            "proc_p99_us": 1e6 * pct(proc_t, 99), "forced": sum(m.forced is not None for _, m, _ in cold)}


# --- outlines-core on the one-turn regex ---------------------------------------------------------

def bench_outlines(size: int) -> dict[str, float] | None:
    from importlib.metadata import version

    try:
        import outlines_core
    except ImportError:
        return None
    import torch

    from ltlagent.decode.monitor import build_index
    from ltlagent.decode.vocab import vocab_from_tokenizer
    from ltlagent.logic.compiled import compile_spec

    tok = fresh_tokenizer(size)
    v = vocab_from_tokenizer(tok)
    groups: dict[bytes, list[int]] = {}
    for i in np.nonzero(v.is_text)[0].tolist():
        groups.setdefault(v.token_bytes(i), []).append(i)
    eos = v.eos_ids[0]
    t0 = time.perf_counter()
    vocab = outlines_core.Vocabulary(eos, groups)
    index = outlines_core.Index(ONE_TURN_REGEX, vocab)
    compile_s = time.perf_counter() - t0
    ids = tok.encode(ONE_TURN)
    words = (v.size + 31) // 32
    bitmask = torch.zeros(words, dtype=torch.int32)
    steps = []
    for _ in range(20):
        guide = outlines_core.Guide(index)
        for t in ids:
            t0 = time.perf_counter_ns()
            guide.advance(t, return_tokens=False)
            guide.write_mask_into(bitmask.data_ptr(), bitmask.numel(), 4)
            steps.append((time.perf_counter_ns() - t0) / 1e9)
    # ours, same tokenizer, same one-turn job (react-tools: Action restricted to the tool names)
    tok = fresh_tokenizer(size)
    t0 = time.perf_counter()
    compiled = compile_spec("react-tools")
    t1 = time.perf_counter()
    ours_idx = build_index(compiled, tok, cache=False)
    ours_compile, ours_spot = time.perf_counter() - t1, t1 - t0
    from ltlagent.decode.monitor import Monitor

    st: list[tuple[float, object, int]] = []
    write_text(Monitor(ours_idx, eos_ends_text=False), ONE_TURN, st)  # fills the memo
    ours = replay(ours_idx, [t for _, _, t in st], 20)
    return {"oc_compile_s": compile_s, "oc_med_us": 1e6 * statistics.median(steps),
            "oc_p99_us": 1e6 * pct(steps, 99), "our_compile_s": ours_compile, "our_spot_s": ours_spot,
            "our_med_us": 1e6 * statistics.median(ours), "our_p99_us": 1e6 * pct(ours, 99),
            "oc_version": version("outlines-core")}


# --- generate ---------------------------------------------------------------------------------

def bench_generate(size: int, new_tokens: int, reps: int) -> dict[str, float]:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LogitsProcessor

    from ltlagent.decode.monitor import build_index
    from ltlagent.decode.processor import LtlLogitsProcessor
    from ltlagent.logic.compiled import compile_spec

    tok = fresh_tokenizer(size)
    # ~100M parameters: GPT-2 small at 32k; fewer, narrower layers at 128k (the embedding is 82M)
    ends = {"bos_token_id": tok.eos_token_id, "eos_token_id": tok.eos_token_id}
    cfg = (GPT2Config(vocab_size=len(tok), n_embd=768, n_layer=12, n_head=12, n_positions=512, **ends)
           if size <= 64000 else
           GPT2Config(vocab_size=len(tok), n_embd=640, n_layer=6, n_head=10, n_positions=512, **ends))
    torch.manual_seed(0)
    model = GPT2LMHeadModel(cfg).eval()
    params = sum(p.numel() for p in model.parameters()) / 1e6
    index = build_index(compile_spec("react"), tok, cache=False)
    ids = torch.tensor([tok.encode("Question: how many people live in Paris?\n")])
    kw = {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens, "do_sample": False,
          "pad_token_id": tok.pad_token_id}

    class Noop(LogitsProcessor):  # control: what any logits processor costs inside generate
        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
            return scores

    def run(kind: str) -> float:
        procs = {"ltl": lambda: [LtlLogitsProcessor(index, max_new_tokens=new_tokens)],
                 "noop": lambda: [Noop()], "none": lambda: []}[kind]()
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(ids, logits_processor=procs, **kw)
        return (time.perf_counter() - t0) / (out.shape[1] - ids.shape[1])

    first = run("ltl")  # masks computed on first visit (index memo cold)
    run("none")
    times: dict[str, list[float]] = {"ltl": [], "noop": [], "none": []}
    for _ in range(reps):
        for kind in times:
            times[kind].append(run(kind))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"params_m": params, "tokens": new_tokens, "unc_ms": 1e3 * med["none"], "con_ms": 1e3 * med["ltl"],
            "ratio": med["ltl"] / med["none"], "noop_ratio": med["noop"] / med["none"],
            "first_ratio": first / med["none"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[32000, 128000])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, shorter generation")
    ap.add_argument("--markdown", action="store_true", help="print markdown tables")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    reps = 2 if args.quick else 5
    rows_c, rows_s, rows_o, rows_g = [], [], [], []
    for size in args.sizes:
        tok, took = tokenizer(size)
        if took is not None:
            print(f"trained the {size} byte-level BPE in {took:.1f} s", file=sys.stderr)
        longest = max(len(b) for b in (tok.convert_ids_to_tokens(i) for i in range(len(tok))) if b)
        for spec in ("react", "react-tools"):
            c = bench_compile(size, spec, reps)
            s = bench_steps(size, spec)
            rows_c.append((size, spec, c, longest))
            rows_s.append((size, spec, s))
            print(f"[{size} {spec}] compile {c} steps {s}", file=sys.stderr)
        o = bench_outlines(size)
        if o is not None:
            rows_o.append((size, o))
            print(f"[{size}] outlines-core {o}", file=sys.stderr)
        g = bench_generate(size, 24 if args.quick else 48, 2 if args.quick else 5)
        rows_g.append((size, g))
        print(f"[{size}] generate {g}", file=sys.stderr)
    bar = "|" if args.markdown else " "
    print(f"\n{bar} vocab {bar} spec {bar} Spot compile {bar} index cold {bar} index warm (disk cache) {bar}")
    if args.markdown:
        print("|---|---|---|---|---|")
    for size, spec, c, _ in rows_c:
        print(f"{bar} {size} {bar} {spec} {bar} {c['spot_s'] * 1e3:.0f} ms {bar} "
              f"{c['cold_s'] * 1e3:.0f} ms {bar} {c['warm_s'] * 1e3:.0f} ms {bar}")
    print(f"\n{bar} vocab {bar} spec {bar} steps (forced) {bar} monitor/step warm median, p99 {bar} "
          f"cold (first visits) median, p99, max {bar} mask apply median, p99 {bar} "
          f"processor call median, p99 {bar}")
    if args.markdown:
        print("|---|---|---|---|---|---|---|")
    for size, spec, s in rows_s:
        print(f"{bar} {size} {bar} {spec} {bar} {s['steps']} ({s['forced']}) {bar} "
              f"{s['warm_med_us']:.1f} µs, {s['warm_p99_us']:.1f} µs {bar} "
              f"{s['cold_med_us']:.1f} µs, {s['cold_p99_us']:.0f} µs, {s['cold_max_us']:.0f} µs {bar} "
              f"{s['apply_med_us']:.1f} µs, {s['apply_p99_us']:.1f} µs {bar} "
              f"{s['proc_med_us']:.1f} µs, {s['proc_p99_us']:.1f} µs {bar}")
    if rows_o:
        print(f"\n{bar} vocab {bar} one ReAct turn {bar} compile {bar} per step median, p99 {bar}")
        if args.markdown:
            print("|---|---|---|---|")
        for size, o in rows_o:
            print(f"{bar} {size} {bar} outlines-core {o['oc_version']} (regex) {bar} "
                  f"{o['oc_compile_s']:.2f} s {bar} {o['oc_med_us']:.1f} µs, {o['oc_p99_us']:.1f} µs {bar}")
            print(f"{bar} {size} {bar} ltlagent (react-tools spec) {bar} {o['our_compile_s']:.2f} s "
                  f"(+ Spot {o['our_spot_s'] * 1e3:.0f} ms) {bar} "
                  f"{o['our_med_us']:.1f} µs, {o['our_p99_us']:.1f} µs {bar}")
    print(f"\n{bar} vocab {bar} model {bar} new tokens {bar} unconstrained ms/token {bar} "
          f"constrained ms/token {bar} ratio {bar} no-op processor ratio (control) {bar} "
          f"ratio, first run (cold memo) {bar}")
    if args.markdown:
        print("|---|---|---|---|---|---|---|---|")
    for size, g in rows_g:
        print(f"{bar} {size} {bar} GPT-2 {g['params_m']:.0f}M, random {bar} {g['tokens']} {bar} "
              f"{g['unc_ms']:.1f} {bar} {g['con_ms']:.1f} {bar} {g['ratio']:.3f} {bar} "
              f"{g['noop_ratio']:.3f} {bar} {g['first_ratio']:.3f} {bar}")
    longest = {size: lg for size, _, _, lg in rows_c}
    print(f"\nlongest token (characters of the byte alphabet): {longest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
