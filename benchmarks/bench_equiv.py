"""check-equiv timing: the paper's specs, and a generated 30-state stress pair (issue 3).

Run: python benchmarks/bench_equiv.py [--repeat 5]
Prints one row per pair: verdict, counterexample lengths, median wall time of check_equivalence
(parse + both Spot translations + the product search + Spot's cross-check).
"""

from __future__ import annotations

import argparse
import itertools
import random
import re
import statistics
import sys
import time
from pathlib import Path

from ltlagent.checks.equiv import check_equivalence
from ltlagent.logic.automaton import build_automaton
from ltlagent.spec.syntax import Spec, load_spec, parse_spec

ROOT = Path(__file__).resolve().parent.parent
EQ = ROOT / "tests" / "data" / "equiv"


def stress_pair(n_states: int = 30, depth: int = 4, seed: int = 30) -> tuple[str, str, str]:
    """A random spec over ``n_states`` states of nesting depth ``depth``, the same behaviour
    written differently (``until P Q`` as ``(next (repeat P) Q)``, states declared in reverse),
    and a near miss (one repeat bound one higher)."""
    rng = random.Random(seed)
    names = itertools.cycle([f"S{i}" for i in range(n_states)])

    def gen(d: int) -> tuple[str, str]:
        if d == 0:
            s = next(names)
            return s, s
        op = rng.choice(["next", "until", "or", "repeat"])
        if op in ("next", "or"):
            parts = [gen(d - 1) for _ in range(rng.randint(2, 3))]
            return (f"({op} {' '.join(p[0] for p in parts)})",
                    f"({op} {' '.join(p[1] for p in parts)})")
        if op == "until":
            (p, p2), (q, q2) = gen(d - 1), gen(d - 1)
            return f"(until {p} {q})", f"(next (repeat {p2}) {q2})"
        (p, p2) = gen(d - 1)
        hi = rng.randint(1, 3)
        return f"(repeat {p} :max {hi})", f"(repeat {p2} :min 0 :max {hi})"

    body, rewritten = gen(depth)
    while len(set(body.replace("(", " ").replace(")", " ").split()) & {f"S{i}" for i in
                                                                      range(n_states)}) < n_states:
        extra, extra2 = gen(depth - 1)
        body, rewritten = f"(next {body} {extra})", f"(next {rewritten} {extra2})"
    states = [f'(S{i} (:text "S{i}:"))' for i in range(n_states)]

    def spec(name: str, beh: str, order: list[str]) -> str:
        return f"(define {name} (:states {' '.join(order)}) (:behavior {beh}))"

    a = spec("stress-a", body, states)
    near = a
    for m in re.finditer(r":max (\d)", body):  # the first bound whose change is visible
        cand = spec("stress-near", body[:m.start(1)] + str(int(m.group(1)) + 1)
                    + body[m.end(1):], states)
        if not check_equivalence(parse_spec(a), parse_spec(cand)).holds:
            near = cand
            break
    return a, spec("stress-b", rewritten, states[::-1]), near


def timed(a: Spec, b: Spec, repeat: int) -> tuple[float, object]:
    times, res = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = check_equivalence(a, b)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    sa, sb, sn = stress_pair()
    pairs = [
        ("react / react-until-next", load_spec("react"), load_spec(EQ / "react-until-next.sexp")),
        ("react / react-bounded", load_spec("react"), load_spec("react-bounded")),
        ("react / react-ablation", load_spec("react"), load_spec("react-ablation")),
        ("react / react-constrained", load_spec("react"), load_spec("react-constrained")),
        ("react / reflexion", load_spec("react"), load_spec("reflexion")),
        ("chat-bot / reordered", load_spec("chat-bot"), load_spec(EQ / "chat-bot-reordered.sexp")),
        ("chat-opt-user / GF User", load_spec(EQ / "chat-opt-user.sexp"),
         load_spec(EQ / "chat-opt-user-gf.sexp")),
        ("stress 30 states: rewritten", parse_spec(sa, "a"), parse_spec(sb, "b")),
        ("stress 30 states: near miss", parse_spec(sa, "a"), parse_spec(sn, "near")),
    ]
    print(f"{'pair':<30} {'states a/b':>10} {'verdict':<15} {'counterexamples':<16} "
          f"{'median ms':>10}")
    for label, a, b in pairs:
        sec, r = timed(a, b, args.repeat)
        ces = ", ".join(f"{c.accepted_by}:{c.length}" for c in r.counterexamples) or "-"
        verdict = "equivalent" if r.holds else "not equivalent"
        sizes = f"{build_automaton(a).num_states}/{build_automaton(b).num_states}"
        print(f"{label:<30} {sizes:>10} {verdict:<15} {ces:<16} {sec * 1000:>10.1f}")
    print(f"\n(python {sys.version.split()[0]}; states: automaton states of each spec; "
          "counterexamples: side that accepts it : length)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
