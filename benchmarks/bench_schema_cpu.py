"""Our compile alone, in CPU time, schema by schema: for before/after comparisons of two versions.

Run from the root of the version to measure (its ``ltlagent`` is imported from the working
directory, so another checkout is measured with this script: ``cd /tmp/base && python
<this checkout>/benchmarks/bench_schema_cpu.py``). For each selected schema of JSONSchemaBench's
development sample (``../shared/data/jsonschemabench/schemas.jsonl``): ``clear_caches()`` (what
schemas built; the library's constants stay, docs/design.md §5.1) then ``schema_table``, timed
by ``time.process_time``, best of ``--repeat``; refusals are recorded by class. ``--formats`` times
``{"type": "string", "format": F}`` for each supported format instead.
``--hashes`` also records a sha1 of each table (``trans``, ``accepting``, ``periods``) or its
refusal, so that two versions can be checked to build the same tables. ``--out`` writes
``{id: {"cpu": s | null, "hash": …}}`` as JSON; two such files are compared with ``--compare A B``.
Figures are printed, never asserted.

    python benchmarks/bench_schema_cpu.py [--every K] [--base FILE --min-ms X --max-ms Y] [--repeat 2]
        [--timeout 10] [--hashes] [--out FILE]
    python benchmarks/bench_schema_cpu.py --compare BEFORE.json AFTER.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path.cwd()))

from timelimit import Overtime, time_limit

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "jsonschemabench" / "schemas.jsonl"
if not DATA.exists():
    DATA = Path("/work/shared/data/jsonschemabench/schemas.jsonl")
FORMATS = ("date", "time", "date-time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid", "uri")


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def _summary(name: str, xs: list[float]) -> str:
    if not xs:
        return f"{name}: none"
    return (f"{name}: {len(xs)} compiled; CPU median {1000 * statistics.median(xs):.2f} ms, "
            f"p90 {1000 * _pct(xs, 0.9):.1f} ms, p99 {1000 * _pct(xs, 0.99):.1f} ms, total {sum(xs):.2f} s")


def _measure(schemas: list[tuple[str, Any]], repeat: int, hashes: bool, timeout: float
             ) -> dict[str, dict[str, Any]]:
    from ltlagent.errors import SchemaError, UsageError
    from ltlagent.text import jsonschema as js

    out: dict[str, dict[str, Any]] = {}
    for sid, schema in schemas:
        best: float | None = None
        digest = ""
        for _ in range(repeat):
            js.clear_caches()
            t0 = time.process_time()
            try:
                with time_limit(timeout):
                    table = js.schema_table(schema)
            except (SchemaError, UsageError) as e:
                digest = f"refused {type(e).__name__}: {e}"
                best = None
                break
            except Overtime:
                digest, best = f"over {timeout:g} s", None
                break
            dt = time.process_time() - t0
            best = dt if best is None else min(best, dt)
            if hashes and not digest:
                digest = hashlib.sha1(table.trans.tobytes() + table.accepting.tobytes()
                                      + repr(table.periods).encode()).hexdigest()
        out[sid] = {"cpu": best, "hash": digest if hashes else None}
    return out


def _compare(a_path: str, b_path: str) -> int:
    a, b = json.loads(Path(a_path).read_text()), json.loads(Path(b_path).read_text())
    both = [k for k in a if k in b and a[k]["cpu"] is not None and b[k]["cpu"] is not None]
    print(_summary(f"before ({a_path}), the {len(both)} both compile", [a[k]["cpu"] for k in both]))
    print(_summary(f"after ({b_path})", [b[k]["cpu"] for k in both]))
    hashed = [k for k in a if k in b and a[k]["hash"] and b[k]["hash"]]
    if hashed:
        differ = [k for k in hashed if a[k]["hash"] != b[k]["hash"]]
        print(f"tables and refusals compared: {len(hashed)}; different: {len(differ)}")
        for k in differ[:10]:
            print(f"  DIFFERENT {k}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--every", type=int, default=1, help="every K-th schema of the sample")
    ap.add_argument("--base", help="an --out file of an earlier run: with --min-ms / --max-ms, the "
                                   "schemas it compiled in that range of CPU time only")
    ap.add_argument("--min-ms", type=float, default=0.0,
                    help="only schemas whose --base CPU time was this or more")
    ap.add_argument("--max-ms", type=float, default=float("inf"),
                    help="only schemas whose --base CPU time was this or less (with --min-ms: a band, "
                         "e.g. the median-class schemas)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per schema; the best is kept")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per compile, then refused")
    ap.add_argument("--formats", action="store_true", help="time the supported formats alone instead")
    ap.add_argument("--hashes", action="store_true", help="record a sha1 of each table (or its refusal)")
    ap.add_argument("--out", help="write the per-schema figures here (JSON)")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two --out files")
    args = ap.parse_args(argv)
    if args.compare:
        return _compare(*args.compare)
    if args.formats:
        schemas: list[tuple[str, Any]] = [(f, {"type": "string", "format": f}) for f in FORMATS]
    else:
        rows = [json.loads(line) for line in DATA.read_text().splitlines()][::args.every]
        schemas = [(r["id"], r["schema"]) for r in rows]
        if args.base:
            base = json.loads(Path(args.base).read_text())
            schemas = [(i, s) for i, s in schemas
                       if i in base and base[i]["cpu"] is not None
                       and args.min_ms <= 1000 * base[i]["cpu"] <= args.max_ms]
    got = _measure(schemas, args.repeat, args.hashes, args.timeout)
    if args.formats:
        for f, d in got.items():
            shown = "refused" if d["cpu"] is None else f"{1000 * d['cpu']:.1f} ms"
            print(f"format {f}: {shown}")
    print(_summary(f"ours ({Path.cwd()})", [d["cpu"] for d in got.values() if d["cpu"] is not None]))
    if args.out:
        Path(args.out).write_text(json.dumps(got))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
