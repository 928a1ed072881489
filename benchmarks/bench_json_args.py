"""JSON-argument tool calls (issue 18, compile side): automaton size and build time for a booking
domain's tools, per-token cost of writing a call under the decoding monitor, beside llguidance's
JSON schema on the same schema and tokenizer.

Usage: python benchmarks/bench_json_args.py [--sizes 3072 49152] [--reps 20]

Size 3072 is the bundled react-tiny tokenizer; other sizes are byte-level BPEs trained and cached
by ``bench_monitor.py`` (the first run trains them). The call DFA is plugged into the monitor as
the content of one spec state (``(:regex …)`` with its DFA swapped for the JSON one: the content
is then the call, leading and trailing whitespace ignored), until issue 18 wires call states into
specs. Figures are printed, never asserted; one thread.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ltlagent.text.content import stripped  # noqa: E402
from ltlagent.text.jsonschema import schema_dfa  # noqa: E402
from ltlagent.text.toolcall import ToolCall, call_dfa, clear_caches, render_call  # noqa: E402

DATE = r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$"
TOOLS: dict[str, dict[str, object]] = {
    "find_user": {"type": "object", "properties": {
        "email": {"type": "string", "pattern": r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$", "maxLength": 80}},
        "required": ["email"], "additionalProperties": False},
    "search_flights": {"type": "object", "properties": {
        "origin": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "destination": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "date": {"type": "string", "pattern": DATE},
        "cabin": {"enum": ["economy", "premium", "business", "first"]},
        "passengers": {"type": "integer", "minimum": 1, "maximum": 9}},
        "required": ["origin", "destination", "date"], "additionalProperties": False},
    "book": {"type": "object", "properties": {
        "user_id": {"type": "string", "pattern": "^U[0-9]{6}$"},
        "flight": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{3,4}$"},
        "date": {"type": "string", "pattern": DATE},
        "passengers": {"type": "array", "minItems": 1, "maxItems": 4, "items": {
            "type": "object", "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 40},
                "age": {"type": "integer", "minimum": 0, "maximum": 120},
                "seat": {"type": ["string", "null"], "pattern": "^[0-9]{1,2}[A-F]$"}},
            "required": ["name", "age"], "additionalProperties": False}},
        "payment": {"enum": ["card", "voucher", "points"]},
        "insurance": {"type": "boolean"}},
        "required": ["user_id", "flight", "date", "passengers", "payment"], "additionalProperties": False},
    "cancel_booking": {"type": "object", "properties": {
        "booking_id": {"type": "string", "pattern": "^BK[0-9]{6}$"},
        "reason": {"type": "string", "maxLength": 200}},
        "required": ["booking_id"], "additionalProperties": False},
    "transfer_to_human": {"type": "object", "properties": {
        "summary": {"type": "string", "maxLength": 300}}, "required": ["summary"],
        "additionalProperties": False},
}
CALL = ToolCall("book", {"user_id": "U123456", "flight": "AB1234", "date": "2026-03-14",
                         "passengers": [{"name": "Ada Lovelace", "age": 36, "seat": "12C"},
                                        {"name": "Charles Babbage", "age": 41}],
                         "payment": "card", "insurance": False})
SENTINEL = "JSONCALL"
SPEC = f"""(define json-call
 (:states
   (Thought (:text "Thought:") (:stop "\\n"))
   (Call (:text "Call:") (:regex "{SENTINEL}")))
 (:behavior (next Thought Call)))"""


def timed(fn: object, reps: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(reps):
        clear_caches()
        t0 = time.perf_counter()
        out = fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - t0)
    return best, out


def build_figures() -> None:
    print("| automaton | states | build (best of 3) |\n| --- | --- | --- |")
    for name, schema in TOOLS.items():
        s, d = timed(lambda schema=schema: schema_dfa(schema))
        print(f"| {name} arguments | {d.num_states} | {s * 1e3:.0f} ms |")  # type: ignore[attr-defined]
    for fmt in ("hermes", "json"):
        s, d = timed(lambda fmt=fmt: call_dfa(TOOLS, fmt))
        print(f"| {fmt} call, 5 tools | {d.num_states} | {s * 1e3:.0f} ms |")  # type: ignore[attr-defined]
    s, d = timed(lambda: call_dfa(TOOLS, "hermes", {"book": {"flight": "AB[0-9]+"}}))
    print(f"| hermes call, book's flight narrowed | {d.num_states} | {s * 1e3:.0f} ms |")  # type: ignore[attr-defined]


def tokenizer(size: int) -> object:
    from transformers import PreTrainedTokenizerFast

    if size == 3072:
        path = ROOT / "ltlagent" / "models" / "react-tiny" / "tokenizer.json"
        return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token="<|endoftext|>")
    import bench_monitor as bm

    bm.tokenizer(size)
    return bm.fresh_tokenizer(size)


def ours(size: int, reps: int) -> dict[str, float]:
    """Compile the one-state spec with the call DFA as its content, write ``Call: <call>`` token by
    token (the tokenizer's own encoding), and time mask + advance per step, first visit and warm."""
    import ltlagent.decode.machine as machine
    from ltlagent.decode.monitor import Monitor, build_index
    from ltlagent.logic.compiled import compile_spec
    from ltlagent.spec.syntax import parse_spec

    call = stripped(call_dfa(TOOLS, "hermes"), limit=100_000)
    original = machine.regex_dfa
    machine.regex_dfa = lambda rx: call if rx == SENTINEL else original(rx)  # type: ignore[assignment]
    try:
        tok = tokenizer(size)
        t0 = time.perf_counter()
        index = build_index(compile_spec(parse_spec(SPEC)), tok, cache=False)
        Monitor(index).forced_token()
        compile_s = time.perf_counter() - t0
    finally:
        machine.regex_dfa = original  # type: ignore[assignment]
    text = "Thought: book it\nCall: " + render_call(CALL)
    ids = tok.encode(text, add_special_tokens=False)  # type: ignore[attr-defined]
    passes: list[list[float]] = []
    for _ in range(reps):
        mon = Monitor(index, eos_ends_text=False)
        times = []
        for t in ids:
            t0n = time.perf_counter_ns()
            mon._mask().forced  # noqa: B018 - the mask (and forced token) for this step
            mon.advance(t)
            times.append((time.perf_counter_ns() - t0n) / 1e9)
        if not mon.is_complete:
            raise RuntimeError("the call was not complete under the monitor")
        passes.append(times)
    warm = [x for p in passes[1:] for x in p]
    return {"compile_s": compile_s, "steps": len(ids), "first_med_us": 1e6 * statistics.median(passes[0]),
            "first_max_us": 1e6 * max(passes[0]), "warm_med_us": 1e6 * statistics.median(warm)}


def llguidance_args(size: int, reps: int) -> dict[str, float] | None:
    """llguidance's JSON schema for ``book``'s arguments, same tokenizer; the argument text only."""
    try:
        import llguidance
        import llguidance.hf
        import torch
    except ImportError:
        return None
    tok = tokenizer(size)
    lltok = llguidance.hf.from_tokenizer(tok)
    t0 = time.perf_counter()
    grammar = llguidance.LLMatcher.grammar_from_json_schema(TOOLS["book"])
    m = llguidance.LLMatcher(lltok, grammar, log_level=0)
    compile_s = time.perf_counter() - t0
    if m.is_error():
        raise RuntimeError(m.get_error())
    args = json.dumps(dict(CALL.arguments), ensure_ascii=False)
    ids = tok.encode(args, add_special_tokens=False)  # type: ignore[attr-defined]
    bm = torch.zeros((lltok.vocab_size + 31) // 32, dtype=torch.int32)
    passes = []
    for r in range(reps):
        if r:
            m.reset()
        times = []
        for t in ids:
            t0n = time.perf_counter_ns()
            m.unsafe_compute_mask_ptr(bm.data_ptr(), bm.numel() * 4)
            ok = m.consume_token(t)
            times.append((time.perf_counter_ns() - t0n) / 1e9)
            if not ok:
                raise RuntimeError(f"llguidance refused token {t}: {m.get_error()}")
        passes.append(times)
    warm = [x for p in passes[1:] for x in p]
    return {"compile_s": compile_s, "steps": len(ids), "first_med_us": 1e6 * statistics.median(passes[0]),
            "first_max_us": 1e6 * max(passes[0]), "warm_med_us": 1e6 * statistics.median(warm),
            "version": llguidance.__version__}  # type: ignore[dict-item]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[3072])
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    build_figures()
    print("\n| vocab | engine | what | compile | steps | first visit: median / max per token | warm median |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for size in args.sizes:
        r = ours(size, args.reps)
        print(f"| {size} | ltlagent | spec + hermes call of 5 tools | {r['compile_s']:.2f} s | "
              f"{r['steps']:.0f} | {r['first_med_us']:.0f} / {r['first_max_us']:.0f} µs | "
              f"{r['warm_med_us']:.1f} µs |")
        g = llguidance_args(size, args.reps)
        if g is not None:
            print(f"| {size} | llguidance {g['version']} | book's arguments only | {g['compile_s']:.3f} s | "
                  f"{g['steps']:.0f} | {g['first_med_us']:.0f} / {g['first_max_us']:.0f} µs | "
                  f"{g['warm_med_us']:.1f} µs |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
