"""Validation throughput (MB/s of prompt text) on large generated prompts (issue 3).

Run: python benchmarks/bench_validate.py [--mb 50]
Each scenario writes a prompt of about --mb megabytes to a temporary file (deterministically) and
times ``Validator.validate_path`` on it: streaming from disk, the shared keyword lexer and the
automaton table, as ``ltlagent validate`` does. Peak RSS is measured in a fresh subprocess per
scenario so that it shows what validation itself holds.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOTPOT = (ROOT / "validation" / "prompts" / "hotpotqa.txt").read_text(encoding="utf-8")
WORDS = ("the plains rise in elevation from around feet orogeny sector colorado search result "
         "mountain building episode area surrounding region distinct land high great").split()


def _example(rng: random.Random, obs_words: int) -> str:
    loops = rng.randint(1, 4)
    out = [f"Question: {' '.join(rng.choices(WORDS, k=12))}?"]
    for _ in range(loops):
        out += [f"Thought: {' '.join(rng.choices(WORDS, k=10))}",
                f"Action: {rng.choice(['Search', 'Lookup'])}",
                f"Action Input: {' '.join(rng.choices(WORDS, k=3))}",
                "Observation: " + "\n".join(" ".join(rng.choices(WORDS, k=10))
                                            for _ in range(max(1, obs_words // 10)))]
    out += [f"Final Thought: {' '.join(rng.choices(WORDS, k=8))}", "Answer: 1,800 to 7,000 ft"]
    return "\n".join(out) + "\n"


def write_prompt(path: Path, mb: float, kind: str) -> int:
    """Write a prompt of about ``mb`` MB: the paper's instructions, then generated examples."""
    rng = random.Random(3)
    head = HOTPOT.split("Here are some examples.\n")[0] + "Here are some examples.\n"
    target = int(mb * 1_000_000)
    with open(path, "w", encoding="utf-8") as f:
        n = f.write(head)
        if kind == "one-huge-observation":
            n += f.write("Question: q?\nThought: t\nAction: Search\nAction Input: x\nObservation: ")
            line = " ".join(rng.choices(WORDS, k=14)) + "\n"
            while n < target:
                n += f.write(line * 1000)
            n += f.write("Final Thought: f\nAnswer: a\n")
            return n
        obs = 10 if kind == "dense" else 300
        block = "".join(_example(rng, obs) for _ in range(200))
        while n < target:
            n += f.write(block)
    return path.stat().st_size


CHILD = textwrap.dedent("""
    import json, resource, sys, time
    from ltlagent.checks.validate import Validator
    spec, path, strict = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    v = Validator(spec, strict=strict)
    t0 = time.perf_counter()
    r = v.validate_path(path)
    dt = time.perf_counter() - t0
    print(json.dumps({"seconds": dt, "examples": r.examples, "exit": r.exit_code,
                      "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
""")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=50.0, help="prompt size per scenario (MB)")
    args = ap.parse_args(argv)
    scenarios = [("dense", "react", False), ("dense", "react", True),
                 ("dense", "react-tools", False), ("long observations", "react", False),
                 ("one-huge-observation", "react", False)]
    print(f"{'prompt':<22} {'spec':<12} {'strict':<6} {'MB':>6} {'examples':>9} {'s':>6} "
          f"{'MB/s':>7} {'peak RSS MB':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        files: dict[str, tuple[Path, int]] = {}
        for kind, spec, strict in scenarios:
            if kind not in files:
                p = Path(tmp) / f"{kind.replace(' ', '-')}.txt"
                files[kind] = (p, write_prompt(p, args.mb, kind.replace("long observations",
                                                                      "long")))
            path, size = files[kind]
            out = subprocess.run([sys.executable, "-c", CHILD, spec, str(path),
                                  "1" if strict else "0"], capture_output=True, text=True,
                                 check=True).stdout
            r = json.loads(out)
            mb = size / 1e6
            print(f"{kind:<22} {spec:<12} {'yes' if strict else 'no':<6} {mb:>6.1f} "
                  f"{r['examples']:>9} {r['seconds']:>6.2f} {mb / r['seconds']:>7.1f} "
                  f"{r['rss_kib'] / 1024:>12.1f}")
        base = subprocess.run([sys.executable, "-c", CHILD, "react",
                               str(ROOT / "validation" / "prompts" / "fever.txt"), "0"],
                              capture_output=True, text=True, check=True).stdout
        print(f"\n(peak RSS of the same process on the 2 kB Fever prompt: "
              f"{json.loads(base)['rss_kib'] / 1024:.1f} MB; python {sys.version.split()[0]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
