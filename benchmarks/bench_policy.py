"""Policy engine figures (issue 27): load time of realistic policies, per-step cost of ``decide``,
check-log throughput on propositional and first-order booking policies.

Run: python benchmarks/bench_policy.py [--rules 10 20 40] [--depth 32]
Reports figures; asserts nothing. The rule shape is the one the issue measured (more than 120 s to
load ten rules with the construction of design §3.5):
``(always (implies (and A (not B)) (or (once B) (historically (not C)))))`` over eight states.
"""

from __future__ import annotations

import argparse
import statistics
import time

from ltlagent import Event, Policy, parse_spec

RULE = "(always (implies (and E{k} (not E{j})) (or (once E{j}) (historically (not E{m})))))"


def big_policy(rules: int) -> str:
    states = " ".join(f'(E{k} (:call "t{k}"))' for k in range(8))
    body = " ".join(f"(r{k} {RULE.format(k=k % 8, j=(k + 3) % 8, m=(k + 5) % 8)})"
                    for k in range(rules))
    return f"(define big (:states {states}) (:constraints {body}))"


def deep_policy(depth: int, op: str) -> str:
    f = "E1"
    for _ in range(depth):
        f = f"({op} {f})" if op != "since" else f"(since (not E2) {f})"
    states = " ".join(f'(E{k} (:call "t{k}"))' for k in range(8))
    return f"(define deep (:states {states}) (:constraints (always (implies E0 {f}))))"


def timed_load(text: str) -> tuple[float, Policy]:
    t0 = time.perf_counter()
    p = Policy.load(parse_spec(text))
    return time.perf_counter() - t0, p


def decide_cost(p: Policy, steps: int = 2000) -> tuple[float, float]:
    """Median µs of ``decide`` on a warm cursor and on first visits (a fresh policy)."""
    import random

    rng = random.Random(0)
    cur = p.cursor()
    times: list[float] = []
    for _ in range(steps):
        ev = Event.call(f"t{rng.randrange(8)}", {})
        t0 = time.perf_counter()
        d = cur.decide(ev)
        times.append(time.perf_counter() - t0)
        if d.allowed:
            cur.push(ev)
        elif rng.random() < 0.05:
            cur = p.cursor()
    warm = statistics.median(times[steps // 2:]) * 1e6
    first = statistics.median(times[:20]) * 1e6
    return warm, first


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rules", type=int, nargs="+", default=[6, 10, 20, 40])
    ap.add_argument("--depth", type=int, default=32)
    args = ap.parse_args()
    print("| policy | load s | decide µs (warm median) | decide µs (first 20, median) |")
    print("|---|---:|---:|---:|")
    for n in args.rules:
        s, p = timed_load(big_policy(n))
        warm, first = decide_cost(p)
        print(f"| {n} rules | {s:.3f} | {warm:.1f} | {first:.1f} |")
    for op in ("once", "historically", "previously", "since"):
        s, p = timed_load(deep_policy(args.depth, op))
        warm, first = decide_cost(p)
        print(f"| `{op}` nested {args.depth} deep | {s:.3f} | {warm:.1f} | {first:.1f} |")


if __name__ == "__main__":
    main()
