"""Compile time of specs, cold in a fresh process (Python start, Spot import and translation).

Usage: python benchmarks/bench_compile.py [--repeat N] [--markdown]
Reports, per spec: median wall time of a fresh `python -c` that imports ltlagent and compiles it,
the in-process translation time, and the automaton size. Also a generated stress spec with 30
states and nesting depth 6. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAPER = ["react", "react-ablation", "chain-of-thought", "reflexion", "chat-bot"]


def stress_spec(n_states: int = 30, depth: int = 6, seed: int = 7) -> str:
    """A deterministic random spec: ``n_states`` states, patterns nested ``depth`` deep."""
    rng = random.Random(seed)
    names = [f"S{i:02d}" for i in range(n_states)]
    unused = list(names)
    rng.shuffle(unused)

    def leaf() -> str:
        return unused.pop() if unused else rng.choice(names)

    def pat(d: int) -> str:
        if d == 0:
            return leaf()
        op = rng.choice(["next", "until", "or", "optional", "repeat"])
        main = pat(d - 1)
        if op == "next":
            return f"(next {main} {pat(rng.randint(0, 1))} {leaf()})"
        if op == "until":
            return f"(until {main} {leaf()})"
        if op == "or":
            return f"(or {main} {pat(rng.randint(0, 1))})"
        if op == "optional":
            return f"(optional {main})"
        return f"(repeat {main} :min 1 :max 2)"

    body = f"(next {pat(depth)} {pat(depth - 1)} {pat(depth - 2)})"
    while unused:  # make sure every state occurs
        body = f"(next {body} (optional {unused.pop()}))"
    states = "\n".join(f'    ({n} (:text "<{n}>"))' for n in names)
    return f"(define stress\n  (:states\n{states})\n  (:behavior {body}))\n"


PROBE = ("import time, json, sys; t=time.perf_counter(); import ltlagent; "
         "c=ltlagent.compile_spec(sys.argv[1]); "
         "print(json.dumps({'total': time.perf_counter()-t, "
         "'translate': c.automaton.translate_seconds, 'states': c.automaton.num_states}))")


def cold(spec: str, repeat: int) -> dict[str, float]:
    walls, totals, trans, states = [], [], [], 0
    for _ in range(repeat):
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", PROBE, spec], check=True, capture_output=True,
                             text=True, cwd=ROOT).stdout
        walls.append(time.perf_counter() - t)
        d = json.loads(out)
        totals.append(d["total"])
        trans.append(d["translate"])
        states = d["states"]
    return {"process_ms": statistics.median(walls) * 1000,
            "import_compile_ms": statistics.median(totals) * 1000,
            "translate_ms": statistics.median(trans) * 1000, "states": states}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stress = Path(tmp) / "stress-30x6.sexp"
        stress.write_text(stress_spec())
        rows = [(name, cold(name, args.repeat)) for name in PAPER]
        rows.append(("stress (30 states, depth 6)", cold(str(stress), args.repeat)))
    print(f"cold compile, median of {args.repeat} fresh processes "
          f"(Python {sys.version.split()[0]})\n")
    print("| spec | automaton states | whole process (ms) | import + compile (ms) | Spot translation (ms) |")
    print("|---|---:|---:|---:|---:|")
    for name, r in rows:
        print(f"| {name} | {r['states']} | {r['process_ms']:.0f} | {r['import_compile_ms']:.0f} "
              f"| {r['translate_ms']:.1f} |")


if __name__ == "__main__":
    main()
