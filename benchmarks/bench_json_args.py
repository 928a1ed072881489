"""JSON-argument tool calls (issue 18): automaton size and build time for a booking domain's tools,
and the per-token cost of writing a call under the turn index (``decode/chat.py``), first visit and
warm, beside llguidance's JSON schema on the same schema and tokenizer.

Usage: python benchmarks/bench_json_args.py [--sizes 49152 131072] [--reps 10]

Size 3072 is the bundled react-tiny tokenizer; other sizes are byte-level BPEs trained and cached
by ``bench_monitor.py`` (the first run trains them). Two languages per engine: ``book``'s arguments
alone (ours: ``TurnLanguage.of_table(schema_table(...))``; llguidance: ``grammar_from_json_schema``)
and a whole hermes call of one of the five tools with no text before it (ours:
``TurnLanguage.build``; llguidance: a Lark grammar around ``%json`` of an ``anyOf`` of the five
``{name, arguments}`` objects). Before any timing both engines must give the same verdict
(complete, prefix, dead) on every string of ``SAME``; ``DIFFER`` lists strings where the languages
differ on purpose (whitespace policy, ``\\u`` escapes), printed with both verdicts. Figures are
printed, never asserted; one thread.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ltlagent.decode.chat import TokenBytes, TurnCursor, TurnIndex, TurnLanguage, TurnRule  # noqa: E402
from ltlagent.decode.vocab import vocab_from_tokenizer  # noqa: E402
from ltlagent.text.jsonschema import schema_table  # noqa: E402
from ltlagent.text.toolcall import ToolCall, call_table, clear_caches, render_call  # noqa: E402

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
#: a call whose argument is long free text (a first visit at every count of the summary)
HANDOFF = ToolCall("transfer_to_human", {"summary": (
    "The customer wants to move her flight AB1234 of 14 March to the next day, keep seat 12C, and "
    "asks whether the voucher from her cancelled trip in January can pay the fare difference; she "
    "was told twice that it could, and is upset that the website says otherwise.")})
ARGS = json.dumps(dict(CALL.arguments), ensure_ascii=False)  # json.dumps's default style
ALL = frozenset(TOOLS)
CALL_RULE = TurnRule(False, ALL, frozenset())  # the turn is one call of any of the five tools


def _args(**change: object) -> str:
    a = dict(CALL.arguments)
    a.update(change)
    return json.dumps({k: v for k, v in a.items() if v is not None}, ensure_ascii=False)


def _call(name: str, args: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'


PAX = [{"name": "Ada Lovelace", "age": 36}]
#: (language, text, verdict both engines must give): documents, prefixes, invalid texts
SAME: list[tuple[str, str, str]] = [
    ("args", ARGS, "complete"),
    ("args", json.dumps(dict(CALL.arguments), separators=(",", ":")), "complete"),
    ("args", _args(passengers=[{"name": "Zoë Ünal", "age": 7, "seat": None}]), "complete"),
    ("args", _args(insurance=None), "complete"),
    ("args", ARGS[:1], "prefix"), ("args", ARGS[:40], "prefix"), ("args", ARGS[:-1], "prefix"),
    ("args", _args(user_id="X123456"), "dead"), ("args", _args(flight="A1234"), "dead"),
    ("args", _args(date="2026-13-01"), "dead"), ("args", _args(passengers=[]), "dead"),
    ("args", _args(passengers=PAX * 5), "dead"),
    ("args", _args(passengers=[{"name": "x" * 41, "age": 3}]), "dead"),
    ("args", _args(passengers=[{"name": "Ada", "age": 121}]), "dead"),
    ("args", _args(payment="cash"), "dead"), ("args", _args(insurance="yes"), "dead"),
    ("args", _args(payment=None), "dead"),
    ("args", json.dumps(dict(reversed(list(CALL.arguments.items())))), "dead"),
    ("args", ARGS[:-1] + ', "bags": 2}', "dead"),
    ("args", " " + ARGS, "dead"),  # no whitespace before the document in either
    ("args", _args(passengers=[{"name": "Zo\\u00eb", "age": 7}]).replace("\\\\u", "\\u"), "dead"),
    ("call", render_call(CALL), "complete"),
    ("call", _call("cancel_booking", '{"booking_id": "BK123456", "reason": "ill"}'), "complete"),
    ("call", _call("find_user", '{"email":"ada@example.org"}'), "complete"),
    ("call", render_call(CALL)[:30], "prefix"), ("call", render_call(CALL)[:-3], "prefix"),
    ("call", _call("bok", ARGS), "dead"), ("call", _call("cancel_booking", ARGS), "dead"),
    ("call", '<tool_call>\n{"arguments": ' + ARGS + ', "name": "book"}\n</tool_call>', "dead"),
    ("call", render_call(CALL) + "x", "dead"),
    ("call", render_call(HANDOFF), "complete"),
    ("call", render_call(ToolCall("transfer_to_human", {"summary": "x" * 301})), "dead"),
]
#: where the languages differ on purpose (ours: at most one space after ``:`` and ``,``, no other
#: whitespace; llguidance by default: any run of JSON whitespace between tokens)
DIFFER: list[tuple[str, str]] = [
    ("args", json.dumps(dict(CALL.arguments), indent=1)),
    ("args", ARGS.replace('"card"', ' "card"').replace(": ", ":  ", 1)),
    ("call", render_call(CALL).replace('{"name"', '{ "name"')),
]


def timed(fn: Callable[[], object], reps: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(reps):
        clear_caches()
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def build_figures() -> None:
    print("| automaton | states | build (best of 3, caches cleared) |\n| --- | ---: | ---: |")
    for name, schema in TOOLS.items():
        s, d = timed(lambda schema=schema: schema_table(schema))
        print(f"| {name} arguments | {d.num_states} | {s * 1e3:.0f} ms |")  # type: ignore[attr-defined]
    for fmt in ("hermes", "json"):
        s, d = timed(lambda fmt=fmt: call_table(TOOLS, fmt))
        print(f"| {fmt} call, 5 tools | {d.num_states} | {s * 1e3:.0f} ms |")  # type: ignore[attr-defined]
    s, d = timed(lambda: call_table(TOOLS, "hermes", {"book": {"flight": "AB[0-9]+"}}))
    print(f"| hermes call, book's flight narrowed | {d.num_states} | {s * 1e3:.0f} ms |")  # type: ignore[attr-defined]
    s, d = timed(lambda: call_table(TOOLS, "hermes").content)
    print(f"| hermes call as a ContentDFA (`call_dfa`) | {d.num_states} | {s * 1e3:.0f} ms |")  # type: ignore[attr-defined]
    rule = TurnRule(True, ALL, frozenset({"book", "cancel_booking"}))
    s, d = timed(lambda: TurnLanguage.build(rule, TOOLS).distance)
    print(f"| turn: text, then 5 tools or 2 after text (+ distances) | {d.size - 1} | {s * 1e3:.0f} ms |")  # type: ignore[attr-defined]
    rules = [TurnRule(True, frozenset(x), frozenset(x)) for x in
             (ALL, ALL - {"book"}, {"find_user", "search_flights"}, {"transfer_to_human"})]
    s, _ = timed(lambda: [TurnLanguage.build(r, TOOLS) for r in rules])
    print(f"| 4 rules of a conversation (shared parts) | | {s * 1e3:.0f} ms |")


def tokenizer(size: int) -> object:
    from transformers import PreTrainedTokenizerFast

    if size == 3072:
        path = ROOT / "ltlagent" / "models" / "react-tiny" / "tokenizer.json"
        return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token="<|endoftext|>")
    import bench_monitor as bm

    bm.tokenizer(size)
    return bm.fresh_tokenizer(size)


def verdict_ours(lang: TurnLanguage, text: str) -> str:
    s = lang.initial
    for b in text.encode():
        s = int(lang.trans[s, b])
    if s == lang.dead:
        return "dead"
    return "complete" if lang.accepting[s] else "prefix"


class Llg:
    """llguidance's matcher for one grammar over an HF tokenizer."""

    def __init__(self, lltok: object, grammar: str) -> None:
        import llguidance

        self.compile_s = float("inf")
        for _ in range(3):  # best of 3, as ours
            t0 = time.perf_counter()
            self.matcher = llguidance.LLMatcher(lltok, grammar, log_level=0)
            self.compile_s = min(self.compile_s, time.perf_counter() - t0)
        if self.matcher.is_error():
            raise RuntimeError(f"llguidance rejected the grammar: {self.matcher.get_error()}")
        self.lltok = lltok

    def verdict(self, text: str) -> str:
        m = self.matcher.deep_copy()
        ok = m.consume_tokens(self.lltok.tokenize_bytes(text.encode()))  # type: ignore[attr-defined]
        if not ok or m.is_error():
            return "dead"
        return "complete" if m.is_accepting() else "prefix"


def llg_grammars() -> dict[str, str]:
    import llguidance

    call = {"anyOf": [{"type": "object", "properties": {"name": {"const": n}, "arguments": s},
                       "required": ["name", "arguments"], "additionalProperties": False}
                      for n, s in TOOLS.items()]}
    lark = 'start: "<tool_call>\\n" call "\\n</tool_call>"\ncall: %json ' + json.dumps(call)
    return {"args": llguidance.LLMatcher.grammar_from_json_schema(TOOLS["book"]),
            "call": llguidance.LLMatcher.grammar_from_lark(lark)}


def stats(xs: list[float]) -> str:
    a = np.asarray(xs) * 1e6
    return f"{np.median(a):.0f} / {np.percentile(a, 99):.0f} / {a.max():.0f}"


def ours_steps(lang: TurnLanguage, tokens: TokenBytes, ids: list[int], reps: int) -> list[list[float]]:
    """Seconds per step (mask, then advance); pass 0 on a fresh index (every state a first visit),
    later passes on the same index (warm)."""
    index = TurnIndex(lang, tokens)
    passes = []
    for _ in range(reps):
        cur = TurnCursor(index)
        times = []
        for t in ids:
            t0 = time.perf_counter_ns()
            ok = bool(cur.allowed()[t])
            cur.advance(t)
            times.append((time.perf_counter_ns() - t0) / 1e9)
            if not ok:
                raise RuntimeError(f"ltlagent refused token {t}")
        if not cur.can_end:
            raise RuntimeError("the text is not complete under ltlagent")
        passes.append(times)
    return passes


def llg_steps(eng: Llg, ids: list[int], reps: int) -> list[list[float]]:
    """Seconds per step (bitmask, then consume); pass 0 on a fresh copy, later passes reset."""
    import torch

    words = (eng.lltok.vocab_size + 31) // 32  # type: ignore[attr-defined]
    bm = torch.zeros(words, dtype=torch.int32)
    ptr, nbytes = bm.data_ptr(), bm.numel() * 4
    m = eng.matcher.deep_copy()
    passes = []
    for r in range(reps):
        if r:
            m.reset()
        times = []
        for t in ids:
            t0 = time.perf_counter_ns()
            m.unsafe_compute_mask_ptr(ptr, nbytes)
            ok = m.consume_token(t)
            times.append((time.perf_counter_ns() - t0) / 1e9)
            if not ok:
                raise RuntimeError(f"llguidance refused token {t}: {m.get_error()}")
        passes.append(times)
    return passes


def run(size: int, reps: int) -> list[str]:
    rows = []
    tok = tokenizer(size)
    t0 = time.perf_counter()
    tokens = TokenBytes.of(vocab_from_tokenizer(tok))
    vocab_s = time.perf_counter() - t0
    args_s, args_lang = timed(lambda: TurnLanguage.of_table(schema_table(TOOLS["book"])))
    call_s, call_lang = timed(lambda: TurnLanguage.build(CALL_RULE, TOOLS))
    langs: dict[str, TurnLanguage] = {"args": args_lang, "call": call_lang}  # type: ignore[dict-item]
    ours_compile = {"args": args_s, "call": call_s}  # best of 3, caches cleared
    engines: dict[str, Llg] = {}
    llg_version = None
    try:
        import llguidance
        import llguidance.hf

        llg_version = llguidance.__version__
        t0 = time.perf_counter()
        lltok = llguidance.hf.from_tokenizer(tok)
        llg_tok_s = time.perf_counter() - t0
        engines = {k: Llg(lltok, g) for k, g in llg_grammars().items()}
    except ImportError:
        print("llguidance is not installed: ours only")
    for what, text, want in SAME:
        ours = verdict_ours(langs[what], text)
        if ours != want:
            raise RuntimeError(f"ltlagent says {ours} on {text!r}, expected {want}")
        if what in engines and engines[what].verdict(text) != ours:
            raise RuntimeError(f"llguidance says {engines[what].verdict(text)} on {text!r}, ltlagent {ours}")
    print(f"\n{size}: both engines agree on the {len(SAME)} test strings; differing on purpose:")
    for what, text in DIFFER:
        theirs = engines[what].verdict(text) if what in engines else "-"
        print(f"  {what} {text[:60]!r}…: ltlagent {verdict_ours(langs[what], text)}, llguidance {theirs}")
    print(f"  vocabulary: ltlagent TokenBytes.of (matrix + trie) {vocab_s:.2f} s"
          + (f", llguidance from_tokenizer {llg_tok_s:.2f} s" if engines else ""))
    texts = [("args", ARGS, "book's arguments"), ("call", render_call(CALL), "hermes call of book, 5 tools"),
             ("call", render_call(HANDOFF), "hermes call, 261-character summary")]
    for what, text, label in texts:
        ids = tok.encode(text, add_special_tokens=False)  # type: ignore[attr-defined]
        p = ours_steps(langs[what], tokens, ids, reps)
        warm = [x for q in p[1:] for x in q]
        rows.append(f"| {size} | ltlagent | {label} | {ours_compile[what]:.3f} s | {len(ids)} | "
                    f"{stats(p[0])} | {stats(warm)} |")
        if what in engines:
            q = llg_steps(engines[what], ids, reps)
            warm = [x for r in q[1:] for x in r]
            rows.append(f"| {size} | llguidance {llg_version} | {label} | {engines[what].compile_s:.3f} s | "
                        f"{len(ids)} | {stats(q[0])} | {stats(warm)} |")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[49152, 131072])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--no-build", action="store_true", help="skip the automaton build table")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    if not args.no_build:
        build_figures()
    rows = [r for size in args.sizes for r in run(size, args.reps)]
    print("\n| vocab | engine | language | compile | tokens | first pass: median / p99 / max µs "
          "| warm: median / p99 / max µs |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
