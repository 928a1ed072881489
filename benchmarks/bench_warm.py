"""Warm masks (issue 11, part 3): the first visit to a state in a new process, with the masks of
earlier processes on disk (``ltlagent.decode.warm``) and without.

Usage: python benchmarks/bench_warm.py [--sizes 32000 128000] [--repeat 3]

Each figure comes from a fresh process (``--child``) with ``LTLAGENT_CACHE_DIR`` pointing at a
temporary directory: *all cold* (empty cache), *index warm, masks cold* (the index entry is there,
the masks file deleted: what every new process paid before this issue), *warm* (both there). The
child builds the index for ``react-tools`` and writes the two-turn ReAct transcript of
``bench_monitor.py`` through a monitor; a step is mask lookup + advance, so the first visits'
mask computations are inside the steps. Medians over ``--repeat`` rounds; figures printed, never
asserted. One thread.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def child(size: int) -> dict[str, float]:
    import bench_monitor as bm
    import numpy as np
    import torch

    from ltlagent.decode import warm
    from ltlagent.decode.monitor import build_index
    from ltlagent.logic.compiled import compile_spec

    torch.set_num_threads(1)
    tok = bm.fresh_tokenizer(size)
    compiled = compile_spec("react-tools")
    t0 = time.perf_counter()
    index = build_index(compiled, tok)
    build_s = time.perf_counter() - t0
    loaded = len(index._memo.masks)
    steps = bm.run_transcript(index, bm.TRANSCRIPT)
    st = np.asarray([s for s, _, _ in steps])
    t0 = time.perf_counter()
    path = warm.save_masks(index)
    save_s = time.perf_counter() - t0
    return {"build_ms": 1e3 * build_s, "loaded": loaded, "masks": len(index._memo.masks),
            "steps": int(st.size),
            "med_us": 1e6 * float(np.median(st)), "p99_us": 1e6 * float(np.percentile(st, 99)),
            "max_us": 1e6 * float(st.max()), "sum_ms": 1e3 * float(st.sum()),
            "save_ms": 1e3 * save_s if path is not None else 0.0,
            "file_kb": path.stat().st_size / 1024 if path is not None else 0.0}


def run_child(size: int, cache_dir: str) -> dict[str, float]:
    env = dict(os.environ, LTLAGENT_CACHE_DIR=cache_dir, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    out = subprocess.run([sys.executable, __file__, "--child", str(size)], env=env, capture_output=True,
                         text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[32000, 128000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    import bench_monitor as bm

    print("| vocab | new process with | build_index | masks loaded | first pass per step: median, p99, max | "
          "first pass total | masks saved (file) |")
    print("|---|---|---:|---:|---|---:|---|")
    for size in args.sizes:
        bm.tokenizer(size)  # trained and cached once
        rounds: dict[str, list[dict[str, float]]] = {"all cold": [], "index warm, masks cold": [], "warm": []}
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as d:
                rounds["all cold"].append(run_child(size, d))
                for f in Path(d, "index").glob("*.masks*.npz"):
                    f.unlink()
                rounds["index warm, masks cold"].append(run_child(size, d))
                rounds["warm"].append(run_child(size, d))
        for name, rs in rounds.items():
            med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
            saved = f"{med['save_ms']:.0f} ms ({med['file_kb']:.0f} kB)" if med["file_kb"] else "nothing new"
            print(f"| {size} | {name} | {med['build_ms']:.0f} ms | {med['loaded']:.0f} | "
                  f"{med['med_us']:.1f} µs, {med['p99_us']:.0f} µs, {med['max_us']:.0f} µs | "
                  f"{med['sum_ms']:.1f} ms | {saved} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
