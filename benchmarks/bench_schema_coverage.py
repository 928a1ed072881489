"""JSON-schema coverage, soundness and compile time on JSONSchemaBench's development sample (issue 30).

For each of the 2,589 schemas of ``../shared/data/jsonschemabench/schemas.jsonl``: ours compiles it
(``schema_block``: parse and determinised table) or refuses it (``SchemaError``/``UsageError``, counted by the
refusal's first words), or crashes (any other exception: must be 0). For every compiled schema,
``--samples`` random texts of its automaton (``bytetable.sample_text``) are read with ``json.loads``
and validated with the ``jsonschema`` package (the schema's own draft, formats checked); patterns
are judged in place by ECMA-262 itself (``node``, in batches: validation is repeated until every
pattern it reaches has a verdict) where node is installed, else by Python's ``re.search`` (then
differences in ``$`` and the classes may show as false alarms); ``patternProperties`` keys are
matched by the ``jsonschema`` package's own ``re.search``. A value that does not validate is
*wrongly accepted* (must be 0).

Compile time is the wall time and the CPU time (``time.process_time``: this process's CPU, every
thread, so a loaded machine weighs less on it) of parse + table per schema (``schema_block``: the
table kept as its parts, which the decoder writes into its own array and a tool-call table embeds;
the time to write it out as one array, ``schema_table``, is reported on its own line; the caches of what
schemas built cleared before each, the library's constants kept: format, number and any-text
automata and the tables of any array, any object and arrays of plain scalars, built once per
process, docs/design.md §5.1); llguidance
(``grammar_from_json_schema`` + ``validate_grammar_with_warnings``: the schema compiled to its
grammar and lexer, no tokenizer) and XGrammar (``GrammarCompiler.compile_json_schema`` over a
256-byte vocabulary, cache off) are timed on the same schemas in the same process when importable
(``pip install llguidance xgrammar``), and skipped otherwise. Both peers without flexible
whitespace, as ours. A last line reads the times against issue 30's targets: our CPU median over
llguidance's, and our CPU p99 beside XGrammar's CPU and wall p99, each over what the engine compiles.

    PYTHONPATH=$PWD python benchmarks/bench_schema_coverage.py [--limit N] [--every K] [--samples K]
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timelimit import Overtime, time_limit

from ltlagent.errors import SchemaError, UsageError
from ltlagent.text import jsonschema as js
from ltlagent.text.bytetable import sample_text

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "jsonschemabench" / "schemas.jsonl"
if not DATA.exists():
    DATA = Path("/work/shared/data/jsonschemabench/schemas.jsonl")


def _reason(e: Exception) -> str:
    """A short class of refusal: the keyword named, or the message's first words."""
    text = str(e)
    m = re.search(r"keyword '([^']*)'|the format '([^']*)'", text)
    if m:
        return f"keyword {m.group(1)}" if m.group(1) else f"format {m.group(2)}"
    text = text.split(": ", 1)[-1]
    return " ".join(text.split()[:6])


def _validator(schema: Any, known: dict[tuple[str, str], bool], missing: set[tuple[str, str]]) -> Any:
    """The schema's own draft's validator, formats checked, ``pattern`` judged by ``known``
    (ECMA-262 verdicts); a pair not known yet is added to ``missing`` and passes for now."""
    import jsonschema
    from jsonschema import validators
    from jsonschema.exceptions import ValidationError

    base = validators.validator_for(schema, default=jsonschema.Draft202012Validator)

    def pattern(_v: Any, rx: str, instance: object, _s: Any) -> Any:
        if not isinstance(instance, str):
            return
        verdict = known.get((rx, instance))
        if verdict is None:
            missing.add((rx, instance))
        elif not verdict:
            yield ValidationError(f"{instance!r} does not match {rx!r} (ECMA-262)")

    cls = validators.extend(base, {"pattern": pattern})
    return cls(schema, format_checker=base.FORMAT_CHECKER)


def _ecma(pairs: list[tuple[str, str]]) -> tuple[list[bool], str]:
    """Whether each (pattern, string) pair matches under ECMA-262: node's ``RegExp(p, "u")``, or
    without the ``u`` flag where the pattern is no ``u`` pattern (``\\_``); Python's
    ``re.search`` where node is not installed."""
    node = shutil.which("node")
    if node is None:
        return [re.search(p, s) is not None for p, s in pairs], "Python re.search (node not installed)"
    if not pairs:
        return [], "ECMA-262 (node)"
    code = ("let d='';process.stdin.on('data',c=>d+=c).on('end',()=>{const ps=JSON.parse(d);"
            "console.log(JSON.stringify(ps.map(([p,s])=>{let r;try{r=new RegExp(p,'u')}"
            "catch(e){r=new RegExp(p)}return r.test(s)})))})")
    out = subprocess.run([node, "-e", code], input=json.dumps(pairs), capture_output=True, text=True,
                         timeout=600, check=True)
    return [bool(x) for x in json.loads(out.stdout)], "ECMA-262 (node)"


def _judge(samples: list[tuple[str, Any, str, object]]) -> tuple[list[tuple[str, str, str]], int, str]:
    """The samples that do not validate: validated until every pattern they reach is known."""
    known: dict[tuple[str, str], bool] = {}
    how = "ECMA-262 (node)"
    while True:
        missing: set[tuple[str, str]] = set()
        wrong = []
        for sid, schema, text, value in samples:
            errors = list(_validator(schema, known, missing).iter_errors(value))
            if errors:
                wrong.append((sid, text, errors[0].message[:200]))
        if not missing:
            return wrong, len(known), how
        pairs = sorted(missing)
        verdicts, how = _ecma(pairs)
        known.update(zip(pairs, verdicts))


def _peers() -> dict[str, Any]:
    """Compile functions of llguidance and XGrammar, where installed."""
    out: dict[str, Any] = {}
    try:
        import llguidance

        def ll(schema: Any) -> bool:
            grammar = llguidance.LLMatcher.grammar_from_json_schema(
                schema, defaults={"whitespace_flexible": False})
            is_error, _warnings = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
            return not is_error

        out["llguidance"] = ll
    except ImportError:
        pass
    try:
        import xgrammar

        info = xgrammar.TokenizerInfo([bytes([b]).decode("latin-1") for b in range(256)])
        compiler = xgrammar.GrammarCompiler(info, cache_enabled=False)

        def xg(schema: Any) -> bool:
            compiler.compile_json_schema(json.dumps(schema), any_whitespace=False)
            return True

        out["xgrammar"] = xg
    except ImportError:
        pass
    return out


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=0, help="first N schemas only (0: all)")
    ap.add_argument("--every", type=int, default=1, help="every K-th schema only (after --limit)")
    ap.add_argument("--samples", type=int, default=10, help="random texts checked per compiled schema")
    ap.add_argument("--unknown-formats", choices=["refuse", "ignore"], default="refuse",
                    help="formats outside text/formats.py: refused (default) or read as annotations")
    ap.add_argument("--no-peers", action="store_true", help="skip llguidance and XGrammar")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=10.0,
                    help="seconds per compile before it counts as refused (over time)")
    args = ap.parse_args(argv)
    rows = [json.loads(line) for line in DATA.read_text().splitlines()]
    if args.limit:
        rows = rows[:args.limit]
    rows = rows[::args.every]
    rng = random.Random(args.seed)
    peers = {} if args.no_peers else _peers()
    refused: collections.Counter[str] = collections.Counter()
    crashes: list[tuple[str, str]] = []
    ours: dict[str, float] = {}
    ours_cpu: dict[str, float] = {}
    flat_cpu: dict[str, float] = {}  # schema_block and the one array written: schema_table
    peer_times: dict[str, dict[str, float]] = {k: {} for k in peers}
    peer_cpu: dict[str, dict[str, float]] = {k: {} for k in peers}
    wrong: list[tuple[str, str, str]] = []
    samples: list[tuple[str, Any, str, object]] = []
    checked = 0
    for r in rows:
        sid, schema = r["id"], r["schema"]
        js.clear_caches()
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            with time_limit(args.timeout):
                block = js.schema_block(schema, unknown_formats=args.unknown_formats)
        except (SchemaError, UsageError) as e:
            refused[_reason(e)] += 1
            block = None
        except Overtime:
            refused[f"over {args.timeout:g} s"] += 1
            block = None
        except Exception as e:  # a crash: reported, must not happen
            crashes.append((sid, f"{type(e).__name__}: {e}"))
            block = None
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        table = None
        if block is not None:  # written out as one array, timed on its own (for sampling texts)
            f0 = time.process_time()
            table = block.table()
            flat_cpu[sid] = dc + time.process_time() - f0
        print(f"{sid}\t{'compiled' if table is not None else 'refused'}\t{dt:.3f}", file=sys.stderr,
              flush=True)
        for name, fn in peers.items():
            p0, q0 = time.perf_counter(), time.process_time()
            try:
                if fn(schema):
                    peer_times[name][sid] = time.perf_counter() - p0
                    peer_cpu[name][sid] = time.process_time() - q0
            except Exception:
                pass
        if table is None or table.empty:
            continue
        ours[sid] = dt
        ours_cpu[sid] = dc
        for _ in range(args.samples):
            text = sample_text(table, rng).decode("utf-8")
            checked += 1
            try:
                value = json.loads(text)
            except ValueError as e:
                wrong.append((sid, text, f"not JSON: {e}"))
                continue
            samples.append((sid, schema, text, value))
    judged, n_patterns, judge = _judge(samples)
    wrong += judged
    n = len(rows)
    print(f"schemas: {n}; compiled {len(ours)} ({100 * len(ours) / n:.1f} %), refused "
          f"{sum(refused.values())}, crashed {len(crashes)}")
    print(f"soundness: {checked} sampled texts, {n_patterns} pattern checks by {judge}; "
          f"wrongly accepted: {len(wrong)}")
    for sid, text, why in wrong[:20]:
        print(f"  WRONG {sid}: {text[:120]!r}: {why}")
    for sid, why in crashes[:20]:
        print(f"  CRASH {sid}: {why}")
    print("refusals (most common):")
    for why, k in refused.most_common(25):
        print(f"  {k:5d}  {why}")
    def stats(got: dict[str, float], ids: set[str] | None = None) -> str:
        xs = list(got.values()) if ids is None else [got[i] for i in ids]
        if not xs:
            return "none"
        return f"median {1000 * statistics.median(xs):.1f} ms, p99 {1000 * _pct(xs, 0.99):.0f} ms"

    print(f"compile time, ours on its {len(ours)}: wall {stats(ours)}; CPU {stats(ours_cpu)}")
    print(f"  ours written out as one array too (schema_table): CPU {stats(flat_cpu, set(ours))}")
    for name, got in peer_times.items():
        print(f"{name}: compiles {len(got)} ({100 * len(got) / n:.1f} %); wall {stats(got)}; "
              f"CPU {stats(peer_cpu[name])}")
    if peers:
        common = set(ours).intersection(*(set(v) for v in peer_times.values()))
        print(f"on the {len(common)} schemas every engine compiles:")
        for name, got, cpu in [("ours", ours, ours_cpu),
                               *((k, peer_times[k], peer_cpu[k]) for k in peer_times)]:
            if common:
                print(f"  {name:10s} wall {stats(got, common)}; CPU {stats(cpu, common)}")
    if ours_cpu and peer_cpu.get("llguidance"):
        ratio = statistics.median(ours_cpu.values()) / statistics.median(peer_cpu["llguidance"].values())
        print(f"issue 30's targets, CPU, over what each engine compiles: median {ratio:.2f}x "
              f"llguidance's (target <= 2x)", end="")
        if peer_cpu.get("xgrammar"):
            ours99 = _pct(list(ours_cpu.values()), 0.99)
            for label, got in (("CPU", peer_cpu["xgrammar"]), ("wall", peer_times["xgrammar"])):
                print(f"; p99 {1000 * ours99:.0f} ms against XGrammar's {label} "
                      f"{1000 * _pct(list(got.values()), 0.99):.0f} ms", end="")
        print()
    if not peers and not args.no_peers:
        print("llguidance and XGrammar are not installed: no side-by-side times")
    return 1 if wrong or crashes else 0


if __name__ == "__main__":
    raise SystemExit(main())
