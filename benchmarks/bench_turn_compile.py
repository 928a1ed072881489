"""Before/after figures for the turn languages of issue 18: building the hermes call automaton of
the five booking tools, building a turn language with its distances, and the first visits of
writing a call after a line of text (49k and 128k tokenizers, budget steering on).

Usage: python <this file> — run from the root of the checkout to measure (it imports ``ltlagent``
and ``benchmarks/bench_json_args.py`` from the current directory), e.g. once here and once in a
worktree of an older commit: ``(cd /tmp/base && python /path/to/benchmarks/bench_turn_compile.py)``.
Uses only interfaces both sides have. Figures are printed, never asserted; one thread.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path[:0] = [str(Path.cwd()), str(Path.cwd() / "benchmarks")]

from bench_json_args import CALL, TOOLS  # noqa: E402

from ltlagent.decode.chat import TokenBytes, TurnCursor, TurnIndex, TurnLanguage, TurnRule  # noqa: E402
from ltlagent.decode.vocab import vocab_from_tokenizer  # noqa: E402
from ltlagent.text import jsonschema, toolcall  # noqa: E402
from ltlagent.text.toolcall import call_dfa, render_call  # noqa: E402

clear: Callable[[], None] = getattr(toolcall, "clear_caches", jsonschema.clear_caches)


def best(fn: Callable[[], object], n: int = 3) -> float:
    b = float("inf")
    for _ in range(n):
        clear()
        t = time.perf_counter()
        fn()
        b = min(b, time.perf_counter() - t)
    return b


def main() -> int:
    import bench_monitor as bm
    import torch

    torch.set_num_threads(1)
    print(f"call_dfa(TOOLS, 'hermes'), best of 3: {best(lambda: call_dfa(TOOLS, 'hermes')):.3f} s")
    everything = frozenset(TOOLS)
    rule = TurnRule(True, everything, frozenset({"book", "cancel_booking"}))
    took = best(lambda: TurnLanguage.build(rule, TOOLS).distance)  # type: ignore[arg-type]
    print(f"TurnLanguage.build + distance, best of 3: {took:.3f} s")
    for size in (49152, 131072):
        bm.tokenizer(size)
        tok = bm.fresh_tokenizer(size)
        tokens = TokenBytes.of(vocab_from_tokenizer(tok))
        lang = TurnLanguage.build(TurnRule(True, everything, everything), TOOLS)  # type: ignore[arg-type]
        ids = tok.encode("Let me book that.\n" + render_call(CALL), add_special_tokens=False)  # type: ignore[attr-defined]
        cur = TurnCursor(TurnIndex(lang, tokens))
        ts = []
        for i in ids:
            t = time.perf_counter()
            ok = cur.allowed(budget=500)[i]
            ts.append(time.perf_counter() - t)
            if not ok:
                raise RuntimeError(f"token {i} refused")
            cur.advance(i)
        ts.sort()
        print(f"{size}: {len(ids)} tokens, first visits: median {1e3 * statistics.median(ts):.2f} ms, "
              f"p90 {1e3 * ts[int(0.9 * len(ts))]:.2f} ms, max {1e3 * ts[-1]:.1f} ms, total {sum(ts):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
