"""Time to the first mask of a new tool schema (issue 30): compile, then the first token mask, ours
against llguidance's, on JSONSchemaBench schemas both compile.

Usage: python benchmarks/bench_schema_first_mask.py [--every 5] [--vocab 49k] [--clock cpu|wall]

The issue's compile target compares compiles alone, but the engines do different work there:
ours builds the whole automaton (``schema_block``), llguidance's ``grammar_from_json_schema``
builds a grammar whose lexer automata are derived lazily, while masks are computed. What a user
waits for before the first token of a new schema is both: this benchmark times each part and
their sum. Ours: ``clear_caches()`` (what schemas built; the library's constants stay), then
``schema_block`` (the compile: the determinised table, kept as its parts), then
``TurnLanguage.of_table`` (which writes those parts into its array) + ``TurnIndex`` + the start
state's ``allowed`` (the first mask). llguidance: ``grammar_from_json_schema`` +
``validate_grammar_with_warnings`` (the compile, as ``bench_schema_coverage.py`` times it), then
``LLMatcher`` + ``compute_mask`` into a bitmask (the first mask). Neither engine with flexible
whitespace. Each vocabulary's own preparation (our ``TokenBytes``, llguidance's tokenizer) is built
once, untimed, as both engines do in use. Schemas: every ``--every``-th of
``../shared/data/jsonschemabench/schemas.jsonl`` that both compile (ours within ``--timeout``
seconds). One thread; figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_schema_visits import DATA, _pct, llg_grammar, ours_block, vocabulary  # noqa: E402

from ltlagent.text import jsonschema as js  # noqa: E402


def ours(schema: Any, tokens: Any, timeout: float, clock: Any) -> tuple[float, float] | None:
    """Seconds of our compile and of the first mask after it (None: refused or over time)."""
    from ltlagent.decode.chat import TurnIndex, TurnLanguage

    js.clear_caches()
    t0 = clock()
    table = ours_block(schema, timeout)  # None: refused or over time
    t1 = clock()
    if table is None:
        return None
    lang = TurnLanguage.of_table(table)
    mask = TurnIndex(lang, tokens).allowed(lang.initial)
    t2 = clock()
    return (t1 - t0, t2 - t1) if mask.any() else None


def theirs(schema: Any, lltok: Any, clock: Any) -> tuple[float, float] | None:
    """Seconds of llguidance's compile and of its first mask (None: refused)."""
    import llguidance

    t0 = clock()
    grammar = llg_grammar(schema)
    t1 = clock()
    if grammar is None:
        return None
    m = llguidance.LLMatcher(lltok, grammar, log_level=0)
    if m.is_error():
        return None
    words = np.zeros((lltok.vocab_size + 31) // 32, dtype=np.int32)
    m.unsafe_compute_mask_ptr(words.ctypes.data, words.nbytes)
    t2 = clock()
    return t1 - t0, t2 - t1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--every", type=int, default=5, help="every K-th schema of the sample")
    ap.add_argument("--vocab", default="49k", choices=["49k", "32k", "128k"])
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds for our compile")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="cpu",
                    help="time by this thread's CPU time (default) or by the wall clock")
    args = ap.parse_args(argv)
    clock = time.perf_counter if args.clock == "wall" else time.thread_time

    import llguidance.hf
    import torch

    from ltlagent.decode.chat import TokenBytes
    from ltlagent.decode.vocab import vocab_from_tokenizer

    torch.set_num_threads(1)
    tok = vocabulary(args.vocab)
    tokens = TokenBytes.of(vocab_from_tokenizer(tok))
    lltok = llguidance.hf.from_tokenizer(tok)
    rows = [json.loads(line) for line in DATA.read_text().splitlines()][::args.every]
    got: list[tuple[tuple[float, float], tuple[float, float]]] = []
    for n, row in enumerate(rows, 1):
        a = ours(row["schema"], tokens, args.timeout, clock)
        b = theirs(row["schema"], lltok, clock) if a is not None else None
        if a is not None and b is not None:
            got.append((a, b))
        if n % 100 == 0:
            print(f"{n}/{len(rows)} schemas", file=sys.stderr, flush=True)
    print(f"{len(got)} of {len(rows)} schemas (every {args.every}th) compiled by both; vocabulary "
          f"{args.vocab} ({len(tok):,} tokens), {args.clock} time")
    print("| engine | part | median | p90 | p99 |")
    print("|---|---|---|---|---|")
    for label, col in (("ours", 0), ("llguidance", 1)):
        for part, xs in (("compile", [g[col][0] for g in got]), ("first mask", [g[col][1] for g in got]),
                         ("both", [sum(g[col]) for g in got])):
            print(f"| {label} | {part} | {1e3 * statistics.median(xs):.2f} ms | "
                  f"{1e3 * _pct(xs, 90):.1f} ms | {1e3 * _pct(xs, 99):.1f} ms |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
