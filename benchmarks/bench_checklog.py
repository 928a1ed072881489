"""check-log throughput (issue 17): messages per second per core on synthetic conversations.

Run: python benchmarks/bench_checklog.py [--conversations 100000] [--jobs 1 2]
Writes a JSON Lines log of synthetic booking conversations (the example domain's templates,
shuffled, with fresh ids; about 8.4 messages each) to a temporary file, then times
``check_logs`` over it (reading, JSON parsing, events, classification, automata) for each
``--jobs``, and a profile of where one process spends its time. Reports figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import tempfile
import time
from pathlib import Path

from ltlagent.chat.events import conversation_events
from ltlagent.checks.logcheck import check_logs
from ltlagent.logic.policy import Policy

ROOT = Path(__file__).resolve().parent.parent


def _templates() -> list[dict[str, object]]:
    spec = importlib.util.spec_from_file_location("gen", ROOT / "examples/booking/generate.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    recs: list[dict[str, object]] = mod.generate()
    return recs


def write_log(path: Path, n: int) -> int:
    recs = _templates()
    messages = 0
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            r = recs[i % len(recs)]
            msgs = r["messages"]
            assert isinstance(msgs, list)
            messages += len(msgs)
            f.write(json.dumps({"id": f"c{i}", "messages": msgs}) + "\n")
    return messages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--conversations", type=int, default=100_000)
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    policy = Policy.load("booking-policy")
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "log.jsonl"
        messages = write_log(log, args.conversations)
        size = os.path.getsize(log)
        print(f"{args.conversations:,} conversations, {messages:,} messages, "
              f"{size / 1e6:.0f} MB; cores: {os.cpu_count()}")
        print(f"load average before: {os.getloadavg()[0]:.1f} (a busy machine slows wall time; "
              "CPU time per core is the figure that does not depend on it)")
        print("| jobs | wall s | messages/s (wall) | CPU s, this process | messages/s per CPU "
              "second (jobs 1) |")
        print("|---:|---:|---:|---:|---:|")
        verdicts: dict[str, int] = {}
        for jobs in args.jobs:
            t0, c0 = time.perf_counter(), time.process_time()
            verdicts = {}
            for r in check_logs(policy, [str(log)], jobs=jobs):
                verdicts[r.report.verdict] = verdicts.get(r.report.verdict, 0) + 1
            s, cpu = time.perf_counter() - t0, time.process_time() - c0
            per_cpu = f"{messages / cpu:,.0f}" if jobs == 1 else "–"
            print(f"| {jobs} | {s:.2f} | {messages / s:,.0f} | {cpu:.2f} | {per_cpu} |")
        print("verdicts:", verdicts)
        # where one process spends its time, stage by stage, on the first 20,000 records
        lines = log.read_text(encoding="utf-8").splitlines()[:20_000]
        n_msgs = 0
        t0 = time.process_time()
        parsed = [json.loads(x)["messages"] for x in lines]
        t1 = time.process_time()
        evs = [conversation_events(m) for m in parsed]
        t2 = time.process_time()
        for e in evs:
            policy.check_events(e)
        t3 = time.process_time()
        n_msgs = sum(len(m) for m in parsed)
        print(f"CPU time per message: JSON {1e6 * (t1 - t0) / n_msgs:.2f} µs, events "
              f"{1e6 * (t2 - t1) / n_msgs:.2f} µs, classify + automata "
              f"{1e6 * (t3 - t2) / n_msgs:.2f} µs")


if __name__ == "__main__":
    main()
