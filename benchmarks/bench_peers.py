"""ltlagent against llguidance and XGrammar on one ReAct turn (issue 11, part 1).

Usage: python benchmarks/bench_peers.py [--sizes 32000 128000] [--reps 20] [--markdown]

The same job in each engine (``peer_grammars.py``: the ``react-tools`` spec's language from the
start to the pause at ``Observation:``, or through ``Final Thought:``/``Answer:`` to EOS), the same
byte-level BPE tokenizers (``bench_monitor.py`` trains and caches them) and the same token sequences.
Before timing, each engine must give ltlagent's verdict on every test string, and the allowed-token
sets are compared at every step of the timed sequences (differences are counted and reported).

Per step: the engine's mask for the current state into its own form (ltlagent: the cached
:class:`~ltlagent.decode.masks.Mask`; the engines: a 32-bit-word bitmask) + consuming the sampled token.
Masks are not applied to logits here (``bench_monitor.py`` reports ``Mask.apply``). One thread.
The first pass is also timed in the thread's CPU time (a step's wall time less the time the process
was preempted), and the garbage collections during ltlagent's timed passes are listed (a gc
callback). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import codecs
import gc
import os
import statistics
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from peer_grammars import TEST_STRINGS, ebnf_grammar, lark_grammar  # noqa: E402

SEQUENCES = (  # the timed token sequences: these texts as the tokens ltlagent allows (our_tokens)
    "Thought: I should search for the capital of France first.\nAction: Search\n"
    "Action Input: capital of France\nObservation:",
    "Final Thought: Both sources agree: about 2.1 million people live in Paris.\nAnswer: About 2.1 million.",
)


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


# --- verdicts on strings -------------------------------------------------------------------------

def verdict_ltlagent(index: object, text: str) -> str:
    """"complete", "prefix" or "dead" for ``text`` written from the start (bytes, no tokens)."""
    from ltlagent.decode.machine import DONE, ENV, INF

    m = index.machine  # type: ignore[attr-defined]
    sid, _ = m.feed(index.start, text.encode())  # type: ignore[attr-defined]
    if sid < 0 or m.need(sid) >= INF:
        return "dead"
    if m.mode(sid) == ENV:
        return "complete"
    s2, _kind = m.eos(sid, False)
    return "complete" if s2 >= 0 and m.mode(s2) == DONE else "prefix"


class Llg:
    """llguidance over an HF tokenizer: compile, verdicts, bitmask steps."""

    def __init__(self, tok: object) -> None:
        import llguidance
        import llguidance.hf

        t0 = time.perf_counter()
        self.lltok = llguidance.hf.from_tokenizer(tok)
        self.tok_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.matcher = llguidance.LLMatcher(self.lltok, lark_grammar(), log_level=0)
        self.compile_s = time.perf_counter() - t0
        if self.matcher.is_error():
            raise RuntimeError(f"llguidance rejected the grammar: {self.matcher.get_error()}")
        self.words = (self.lltok.vocab_size + 31) // 32

    def fresh(self) -> object:
        return self.matcher.deep_copy()

    def verdict(self, text: str) -> str:
        m = self.fresh()
        ok = m.consume_tokens(self.lltok.tokenize_bytes(text.encode()))  # type: ignore[attr-defined]
        if not ok or m.is_error():  # type: ignore[attr-defined]
            return "dead"
        return "complete" if m.is_accepting() else "prefix"  # type: ignore[attr-defined]

    def allowed(self, m: object, size: int) -> np.ndarray:
        bits = np.frombuffer(m.compute_bitmask(), dtype=np.uint8)  # type: ignore[attr-defined]
        return np.nonzero(np.unpackbits(bits, bitorder="little")[:size])[0]


class Xgr:
    """XGrammar over an HF tokenizer: compile, verdicts, bitmask steps."""

    def __init__(self, tok: object) -> None:
        import xgrammar as xgr

        t0 = time.perf_counter()
        self.info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=len(tok))  # type: ignore[arg-type]
        self.tok_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        compiler = xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        self.compiled = compiler.compile_grammar(ebnf_grammar())
        self.compile_s = time.perf_counter() - t0
        self.xgr = xgr
        self.eos = tok.eos_token_id  # type: ignore[attr-defined]

    def fresh(self) -> object:
        return self.xgr.GrammarMatcher(self.compiled)

    def verdict(self, text: str) -> str:
        m = self.fresh()
        if not m.accept_string(text):  # type: ignore[attr-defined]
            return "dead"
        return "complete" if m.accept_token(self.eos) else "prefix"  # type: ignore[attr-defined]

    def allowed(self, m: object, size: int) -> np.ndarray:
        bm = self.xgr.allocate_token_bitmask(1, self.info.vocab_size)
        m.fill_next_token_bitmask(bm)  # type: ignore[attr-defined]
        bits = bm[0].numpy().view(np.uint8)
        return np.nonzero(np.unpackbits(bits, bitorder="little")[:size])[0]


def check_verdicts(index: object, engines: dict[str, object]) -> list[str]:
    """Disagreements with ltlagent (and with the expected verdicts) on TEST_STRINGS."""
    bad = []
    for text, want in TEST_STRINGS:
        ours = verdict_ltlagent(index, text)
        if ours != want:
            bad.append(f"ltlagent says {ours} on {text!r}, the test expects {want}")
        for name, eng in engines.items():
            got = eng.verdict(text)  # type: ignore[attr-defined]
            if got != ours:
                bad.append(f"{name} says {got} on {text!r}, ltlagent {ours}")
    return bad


def our_tokens(index: object, text: str) -> list[int]:
    """``text`` as tokens ltlagent allows: the longest allowed token at each point (its forced
    token where one is forced; the tokenizer's own encoding may split a prompt string differently,
    which ltlagent does not allow after a text ended). Both engines accept these sequences."""
    import bench_monitor as bm

    from ltlagent.decode.monitor import Monitor

    rec: list[tuple[float, object, int]] = []
    bm.write_text(Monitor(index, eos_ends_text=False), text, rec)  # type: ignore[arg-type]
    return [t for _, _, t in rec]


# --- the timed steps ------------------------------------------------------------------------------

def ours_steps(index: object, ids: list[int], reps: int, cpu_passes: list[list[float]],
               ) -> tuple[list[list[float]], list[np.ndarray]]:
    """ltlagent: per pass, the seconds of each step (pass 0 on a fresh index computes the masks),
    and the allowed ids before each token and after the last (an untimed pass); the CPU seconds of
    the thread per step are appended to ``cpu_passes`` (a step's wall time less the time the
    process was preempted)."""
    from ltlagent.decode.monitor import Monitor

    passes: list[list[float]] = []
    for _ in range(reps):
        mon = Monitor(index, eos_ends_text=False)  # type: ignore[arg-type]
        times = []
        cpu = []
        for t in ids:
            c0 = time.thread_time_ns()
            t0 = time.perf_counter_ns()
            mon._mask().forced  # noqa: B018 - the mask (and forced token) for this step
            mon.advance(t)
            times.append((time.perf_counter_ns() - t0) / 1e9)
            cpu.append((time.thread_time_ns() - c0) / 1e9)
        passes.append(times)
        cpu_passes.append(cpu)
    mon = Monitor(index, eos_ends_text=False)  # type: ignore[arg-type]
    allowed = []
    for t in ids:
        allowed.append(mon.allowed_token_ids())
        mon.advance(t)
    allowed.append(mon.allowed_token_ids())
    return passes, allowed


def llg_steps(eng: Llg, ids: list[int], reps: int, size: int, cpu_passes: list[list[float]],
              ) -> tuple[list[list[float]], list[np.ndarray]]:
    """llguidance: per pass, the seconds of each step (pass 0: a fresh copy of the compiled matcher;
    later passes: the same matcher ``reset()``); and the allowed ids per step (an untimed pass)."""
    import torch

    bm = torch.zeros(eng.words, dtype=torch.int32)
    ptr, nbytes = bm.data_ptr(), bm.numel() * 4
    passes: list[list[float]] = []
    m = eng.fresh()
    for r in range(reps):
        if r:
            m.reset()  # type: ignore[attr-defined]  # same matcher: what it learnt is kept
        times = []
        cpu = []
        for t in ids:
            c0 = time.thread_time_ns()
            t0 = time.perf_counter_ns()
            m.unsafe_compute_mask_ptr(ptr, nbytes)  # type: ignore[attr-defined]
            ok = m.consume_token(t)  # type: ignore[attr-defined]
            times.append((time.perf_counter_ns() - t0) / 1e9)
            cpu.append((time.thread_time_ns() - c0) / 1e9)
            if not ok:
                raise RuntimeError(f"llguidance refused token {t}: {m.get_error()}")  # type: ignore[attr-defined]
        passes.append(times)
        cpu_passes.append(cpu)
    m = eng.fresh()
    allowed = []
    for t in ids:
        allowed.append(eng.allowed(m, size))
        m.consume_token(t)  # type: ignore[attr-defined]
    allowed.append(eng.allowed(m, size))
    return passes, allowed


def xgr_steps(eng: Xgr, ids: list[int], reps: int, size: int, cpu_passes: list[list[float]],
              ) -> tuple[list[list[float]], list[np.ndarray]]:
    """XGrammar: as :func:`llg_steps` (pass 0 a fresh ``GrammarMatcher``, then ``reset()``)."""
    bm = eng.xgr.allocate_token_bitmask(1, eng.info.vocab_size)
    passes: list[list[float]] = []
    m = eng.fresh()
    for r in range(reps):
        if r:
            m.reset()  # type: ignore[attr-defined]
        times = []
        cpu = []
        for t in ids:
            c0 = time.thread_time_ns()
            t0 = time.perf_counter_ns()
            m.fill_next_token_bitmask(bm)  # type: ignore[attr-defined]
            ok = m.accept_token(t)  # type: ignore[attr-defined]
            times.append((time.perf_counter_ns() - t0) / 1e9)
            cpu.append((time.thread_time_ns() - c0) / 1e9)
            if not ok:
                raise RuntimeError(f"XGrammar refused token {t}")
        passes.append(times)
        cpu_passes.append(cpu)
    m = eng.fresh()
    allowed = []
    for t in ids:
        allowed.append(eng.allowed(m, size))
        m.accept_token(t)  # type: ignore[attr-defined]
    allowed.append(eng.allowed(m, size))
    return passes, allowed


def utf8_ok(data: bytes) -> bool:
    """``data`` is valid UTF-8 or a prefix of it."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
        return True
    except UnicodeDecodeError:
        return False


def classify(ours: list[np.ndarray], theirs: list[np.ndarray], before: list[bytes], vocab: object,
             name: str) -> dict[str, int]:
    """Count the steps whose allowed sets are equal, and sort the others: ``utf8`` (the engine
    allows a subset, and every token only ltlagent allows breaks UTF-8 there), ``forced`` (ltlagent
    forces one token, which the engine allows among others), ``other`` (printed to stderr)."""
    out = {"steps": 0, "equal": 0, "utf8": 0, "forced": 0, "other": 0}
    for k, (a, b) in enumerate(zip(ours, theirs)):
        out["steps"] += 1
        if a.size == b.size and np.array_equal(a, b):
            out["equal"] += 1
            continue
        extra, missing = np.setdiff1d(a, b), np.setdiff1d(b, a)
        tb = vocab.token_bytes  # type: ignore[attr-defined]
        if missing.size == 0 and not any(utf8_ok(before[k] + tb(int(t))) for t in extra):
            out["utf8"] += 1
        elif a.size == 1 and extra.size == 0:
            out["forced"] += 1
        else:
            out["other"] += 1
            print(f"  {name} step {k} after {before[k][-30:]!r}: only ltlagent allows {extra.size} "
                  f"{[tb(int(t)) for t in extra[:6]]}, only {name} allows {missing.size} "
                  f"{[tb(int(t)) for t in missing[:6]]}", file=sys.stderr)
    return out


class GcLog:
    """The garbage collections while installed (``with``): (generation, ms) each."""

    def __init__(self) -> None:
        self.done: list[tuple[int, float]] = []
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.done.append((info["generation"], 1e3 * (time.perf_counter() - self._began)))

    def __enter__(self) -> GcLog:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


def summary(passes: list[list[float]], cpu: list[list[float]] | None = None) -> dict[str, float]:
    """Pass 0 (first), the later passes, and the first step of each later pass, in µs; with
    ``cpu`` (the same passes in thread CPU time) the first pass's p99 and max in CPU time too."""
    later = [t for p in passes[1:] for t in p]
    firsts = [p[0] for p in passes[1:]]
    out = {"cold_med_us": 1e6 * statistics.median(passes[0]), "cold_p99_us": 1e6 * pct(passes[0], 99),
           "cold_max_us": 1e6 * max(passes[0]),
           "med_us": 1e6 * statistics.median(later), "p99_us": 1e6 * pct(later, 99),
           "step0_us": 1e6 * statistics.median(firsts)}
    if cpu is not None:
        out["cold_cpu_p99_us"] = 1e6 * pct(cpu[0], 99)
        out["cold_cpu_max_us"] = 1e6 * max(cpu[0])
    return out


def run(size: int, reps: int, precompute: bool = True) -> dict[str, object]:
    import bench_monitor as bm

    from ltlagent.decode.monitor import build_index
    from ltlagent.logic.compiled import compile_spec

    tok, _ = bm.tokenizer(size)
    t0 = time.perf_counter()
    compiled = compile_spec("react-tools")
    spot_s = time.perf_counter() - t0
    index = build_index(compiled, bm.fresh_tokenizer(size), cache=False)  # for checks and sequences
    res: dict[str, object] = {"size": size, "spot_s": spot_s}
    engines: dict[str, object] = {}
    if package_version("llguidance"):
        engines["llguidance"] = Llg(tok)
    if package_version("xgrammar"):
        engines["xgrammar"] = Xgr(tok)
    for missing in {"llguidance", "xgrammar"} - set(engines):
        print(f"{missing} is not installed (pip install -e .[bench]): left out", file=sys.stderr)
    res["disagreements"] = check_verdicts(index, engines)
    seqs = [our_tokens(index, s) for s in SEQUENCES]
    v = index.vocab
    before = [b"".join(v.token_bytes(t) for t in ids[:k]) for ids in seqs for k in range(len(ids) + 1)]
    ours_allowed: list[np.ndarray] = []
    for label, pre in (("ltlagent", precompute), ("ltlagent-lazy", False)):
        if label == "ltlagent-lazy" and not precompute:
            continue
        # a fresh tokenizer object (nothing memoised), kept alive while its index decodes, as in
        # any program: dropped right after the build, its 128k entries are freed just before the
        # first pass, and the allocator sorts those frees inside the first pass's mallocs
        # (0.1-0.6 ms each for the first few, measured with a malloc probe)
        ours_tok = bm.fresh_tokenizer(size)
        t0 = time.perf_counter()
        # fresh: pass 0 computes the masks (or finds them computed at build, with precompute)
        timed = build_index(compiled, ours_tok, cache=False, precompute=pre)
        our_compile = time.perf_counter() - t0
        ours_first: list[float] = []
        ours_rest: list[list[float]] = []
        cpu_first: list[float] = []
        allowed_here: list[np.ndarray] = []
        with GcLog() as gcs:  # collections during the timed passes
            for ids in seqs:
                cpu: list[list[float]] = []
                ps, a = ours_steps(timed, ids, reps + 1, cpu)
                ours_first += ps[0]
                ours_rest += ps[1:]
                cpu_first += cpu[0]
                allowed_here += a
        ours_allowed = ours_allowed or allowed_here
        res[label] = {"compile_s": our_compile, **summary([ours_first, *ours_rest], [cpu_first]),
                      "gc": gcs.done}
    for name, eng in engines.items():
        fn = llg_steps if name == "llguidance" else xgr_steps
        passes: list[list[float]] = []
        cpus: list[list[float]] = []
        allowed: list[np.ndarray] = []
        for ids in seqs:
            ps, a = fn(eng, ids, reps + 1, index.vocab_size, cpus)  # type: ignore[operator]
            passes += ps  # each sequence's passes: pass 0 of both sequences counted as first passes
            allowed += a
        firsts = [p for i, p in enumerate(passes) if i % (reps + 1) == 0]
        rest = [p for i, p in enumerate(passes) if i % (reps + 1) != 0]
        cpu_firsts = [t for i, p in enumerate(cpus) if i % (reps + 1) == 0 for t in p]
        res[name] = {"version": package_version(name), "tok_s": eng.tok_s,  # type: ignore[attr-defined]
                     "compile_s": eng.compile_s,  # type: ignore[attr-defined]
                     **summary([[t for p in firsts for t in p], *rest], [cpu_firsts]),
                     "masks": classify(ours_allowed, allowed, before, v, name)}
    return res


def table(results: list[dict[str, object]]) -> str:
    """Markdown: timings (ours / theirs from the same run) and how the masks compare."""
    out = ["| vocab | engine | compile | compile, ours / theirs (grammar only; with their tokenizer "
           "preparation) | per step, later passes: median, p99 | ours / theirs | "
           "first step of a later pass (median) | per step, first pass: median, p99 | ours / theirs |",
           "|---|---|---|---|---|---|---:|---|---|"]
    masks = ["| vocab | engine | steps | masks equal to ltlagent's | differ only by tokens that break UTF-8 "
             "(ltlagent allows them) | ltlagent forces one token, the engine allows it among others "
             "| other |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        o: dict[str, float] = r["ltlagent"]  # type: ignore[assignment]
        out.append(f"| {r['size']} | ltlagent (react-tools spec) | {o['compile_s']:.3f} s (+ Spot "
                   f"{1e3 * float(r['spot_s']):.0f} ms) | – | "  # type: ignore[arg-type]
                   f"{o['med_us']:.1f} µs, {o['p99_us']:.1f} µs | – | "
                   f"{o['step0_us']:.1f} µs | {o['cold_med_us']:.1f} µs, {o['cold_p99_us']:.0f} µs | – |")
        lz: dict[str, float] | None = r.get("ltlagent-lazy")  # type: ignore[assignment]
        if lz is not None:
            out.append(f"| {r['size']} | ltlagent, masks on first visit (trie walk) | "
                       f"{lz['compile_s']:.3f} s | – | {lz['med_us']:.1f} µs, {lz['p99_us']:.1f} µs | – | "
                       f"{lz['step0_us']:.1f} µs | {lz['cold_med_us']:.1f} µs, "
                       f"{lz['cold_p99_us']:.0f} µs | – |")
        for name in ("llguidance", "xgrammar"):
            e: dict[str, object] | None = r.get(name)  # type: ignore[assignment]
            if e is None:
                continue
            f: dict[str, float] = e  # type: ignore[assignment]
            ours_c = o["compile_s"] + float(r["spot_s"])  # type: ignore[arg-type]
            out.append(f"| {r['size']} | {name} {e['version']} | {f['compile_s']:.3f} s (+ tokenizer "
                       f"{f['tok_s']:.2f} s) | {ours_c / f['compile_s']:.3g}; "
                       f"{ours_c / (f['compile_s'] + f['tok_s']):.2f} | "
                       f"{f['med_us']:.1f} µs, {f['p99_us']:.1f} µs | "
                       f"{o['med_us'] / f['med_us']:.2f}, {o['p99_us'] / f['p99_us']:.2f} | "
                       f"{f['step0_us']:.1f} µs | {f['cold_med_us']:.1f} µs, {f['cold_p99_us']:.0f} µs | "
                       f"{o['cold_med_us'] / f['cold_med_us']:.2f}, "
                       f"{o['cold_p99_us'] / f['cold_p99_us']:.2f} |")
            m: dict[str, int] = e["masks"]  # type: ignore[assignment]
            masks.append(f"| {r['size']} | {name} | {m['steps']} | {m['equal']} | {m['utf8']} | "
                         f"{m['forced']} | {m['other']} |")
    first = ["| vocab | engine | first pass per step: p99, max (wall) | p99, max (thread CPU time) | "
             "garbage collections during the timed passes |", "|---|---|---|---|---|"]
    for r in results:
        for name, label in (("ltlagent", "ltlagent"), ("llguidance", "llguidance"), ("xgrammar", "XGrammar")):
            entry = r.get(name)
            if entry is None:
                continue
            d: dict[str, object] = entry  # type: ignore[assignment]
            gcs = d.get("gc")
            gcs_s = "–" if gcs is None else (", ".join(f"gen {g}: {ms:.2f} ms" for g, ms in gcs)  # type: ignore[attr-defined]
                                             or "none")
            out_first = (f"| {r['size']} | {label} | {d['cold_p99_us']:.0f} µs, {d['cold_max_us']:.0f} µs | "
                         f"{d['cold_cpu_p99_us']:.0f} µs, {d['cold_cpu_max_us']:.0f} µs | {gcs_s} |")
            first.append(out_first)
    return "\n".join(out) + "\n\n" + "\n".join(masks) + "\n\n" + "\n".join(first)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[32000, 128000])
    ap.add_argument("--reps", type=int, default=20, help="passes over the token sequences")
    ap.add_argument("--markdown", action="store_true", help="(tables are always markdown)")
    ap.add_argument("--lazy", action="store_true",
                    help="ltlagent computes masks on first visit only (no precompute at build, no lazy row)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    results = []
    for size in args.sizes:
        r = run(size, args.reps, not args.lazy)
        results.append(r)
        for d in r["disagreements"]:  # type: ignore[attr-defined]
            print(f"[{size}] DISAGREEMENT: {d}", file=sys.stderr)
        print(f"[{size}] {r}", file=sys.stderr)
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
