"""Tool-calling experiment (issue 18): the booking domain, scripted users, three arms.

    python validation/chat_experiment.py --model smollm2-135m --tasks 40 --out /tmp/chat-exp
    python validation/chat_experiment.py --model react-tiny --tasks 4 --max-turns 3 --out /tmp/smoke
    python validation/chat_experiment.py --from /tmp/none /tmp/format /tmp/policy --out DIR

Each task is a user with a goal in the example booking domain (``examples/booking``): book a
room, move or cancel a booking, a user who never says yes, one who wants a human. The scripted
user states the goal; to the assistant's next two text turns it answers with the details, then
with a yes when the task has them say yes (a refusal otherwise), and then ends the conversation
(at once after a hand-off). Before each task the model sees one worked conversation (``EXAMPLES``:
a lookup, a question, a yes, a booking), outside the transcript. Arms, greedy, the turns of all
conversations of an arm written as one batch (``validation/chat_batch.py``):

- ``none``: native tool calls unconstrained, parsed afterwards (a malformed call is an error
  result, counted; a broken policy is noted and the conversation goes on);
- ``format``: names and argument schemas constrained;
- ``policy``: format + ``specs/booking-policy.sexp`` enforced while the model writes.

Per arm, with 95 % intervals (Wilson for rates, a t interval for means): malformed calls per
task, policy violations (``Policy.check`` on the transcript, as ``check-log`` does), task
success (the database ends as the task wants), tokens and seconds. Writes ``summary.json``,
``results.md`` and ``episodes.jsonl`` under ``--out``; refuses to overwrite a folder that holds
results unless ``--force``.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "booking"))
sys.path.insert(0, str(ROOT))

from domain import BOOKINGS, ROOMS, TOOLS, USERS, Database  # noqa: E402

ARMS = ("none", "format", "policy")


def _call(name: str, arguments: Mapping[str, object], cid: str) -> dict[str, object]:
    return {"role": "assistant", "content": None, "tool_calls": [{
        "id": cid, "type": "function", "function": {"name": name,
                                                     "arguments": json.dumps(arguments)}}]}


#: One worked conversation shown to the model before each task (every arm alike; not part of the
#: transcript the policy checks). Without it SmolLM2-135M-Instruct never began a call in a pilot.
EXAMPLES: tuple[Mapping[str, object], ...] = (
    {"role": "user", "content": "Hello, this is Di Kaur. Please book the Oak room on 2026-12-30 "
                                "for 2."},
    _call("find_user", {"query": "Di Kaur"}, "c1"),
    {"role": "tool", "tool_call_id": "c1", "content": json.dumps(
        {"user_id": "u4", "name": "Di Kaur", "email": "di@example.com", "bookings": []})},
    {"role": "assistant", "content": "I found you, Di Kaur (u4). Shall I book the Oak room on "
                                     "2026-12-30 for 2 guests? Please say yes to confirm."},
    {"role": "user", "content": "Yes."},
    _call("book", {"user_id": "u4", "room": "Oak", "date": "2026-12-30", "guests": 2}, "c2"),
    {"role": "tool", "tool_call_id": "c2", "content": json.dumps(
        {"booking_id": "b103", "user": "u4", "room": "Oak", "date": "2026-12-30", "guests": 2})},
    {"role": "assistant", "content": "Done: booking b103, the Oak room on 2026-12-30 for 2 "
                                     "guests."},
)
SYSTEM = ("You are the booking assistant of the Grove Inn. Before booking, changing or "
          "cancelling, look the user up with find_user, list the details and ask for an explicit "
          "yes. Hand the conversation to a human when the user asks for one.")


@dataclass(frozen=True)
class Task:
    """A user's goal, what they say, and what the database must look like at the end."""

    id: str
    kind: str  # book | change | cancel | never-yes | human
    first: str
    details: str
    says_yes: bool
    want: Mapping[str, object] = field(default_factory=dict)

    def success(self, db: Database, messages: Sequence[Mapping[str, object]]) -> bool:
        if self.kind == "book":
            return any(all(b.get(k) == v for k, v in self.want.items())
                       for b in db.bookings.values())
        if self.kind == "change":
            bid = str(self.want["booking"])
            return db.bookings.get(bid, {}).get("date") == self.want["date"]
        if self.kind == "cancel":
            return str(self.want["booking"]) not in db.bookings
        unchanged = db.bookings == Database.fresh().bookings
        if self.kind == "never-yes":
            return unchanged
        handed = any(c["function"]["name"] == "transfer_to_human"  # type: ignore[index]
                     for m in messages for c in m.get("tool_calls") or [])  # type: ignore[attr-defined]
        return handed and unchanged


def make_tasks(n: int, seed: int = 18) -> list[Task]:
    """``n`` tasks, the kinds in a fixed proportion (book 3, change 2, cancel 2, never-yes 2,
    human 1 in 10), details drawn from the example database."""
    rng = random.Random(seed)
    kinds = ["book", "book", "book", "change", "change", "cancel", "cancel", "never-yes",
             "never-yes", "human"]
    out: list[Task] = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        uid = rng.choice(sorted(USERS))
        name = str(USERS[uid]["name"])
        date = f"2026-12-{rng.randint(10, 28):02d}"
        if kind in ("book", "never-yes"):
            room, guests = rng.choice(ROOMS), rng.randint(1, 4)
            first = f"Hi, I'm {name}. I'd like to book the {room} room on {date} for {guests}."
            details = f"{name}, {room}, {date}, {guests} guests."
            want = {"user": uid, "room": room, "date": date, "guests": guests}
        elif kind in ("change", "cancel"):
            bid = rng.choice(sorted(BOOKINGS))
            owner = str(USERS[str(BOOKINGS[bid]["user"])]["name"])
            if kind == "change":
                first = f"This is {owner}. Please move my booking {bid} to {date}."
                details = f"{owner}, booking {bid}, new date {date}."
                want = {"booking": bid, "date": date}
            else:
                first = f"This is {owner}. Please cancel my booking {bid}."
                details = f"{owner}, booking {bid}."
                want = {"booking": bid}
        else:
            first = f"I'm {name} and I want to speak to a human about a refund."
            details = "A human, please."
            want = {}
        out.append(Task(f"{kind}-{i + 1}", kind, first, details, kind not in ("never-yes", "human"),
                        want))
    return out


def scripted_user(task: Task):  # type: ignore[no-untyped-def]
    """The user: details once when the assistant asks anything, yes when the task says yes (or a
    refusal otherwise), then goodbye; nothing after a hand-off."""
    state = {"turn": 0}

    def user(messages: Sequence[Mapping[str, object]]) -> str | None:
        if any(c["function"]["name"] == "transfer_to_human"  # type: ignore[index]
               for m in messages for c in m.get("tool_calls") or []):  # type: ignore[attr-defined]
            return None
        state["turn"] += 1
        t = state["turn"]
        if t == 1:
            return task.details
        if t == 2:
            return "Yes, please go ahead." if task.says_yes else "Hmm, I'm not sure. Don't do it."
        return None

    return user


def _wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (0.0, 0.0)
    z, p = 1.96, k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def _mean_ci(xs: Sequence[float]) -> tuple[float, float, float]:
    if not xs:
        return (0.0, 0.0, 0.0)
    m = statistics.fmean(xs)
    if len(xs) < 2:
        return (m, m, m)
    h = 1.96 * statistics.stdev(xs) / math.sqrt(len(xs))
    return (m, m - h, m + h)


def run(args: argparse.Namespace) -> dict[str, object]:
    from ltlagent.agent.chat import ChatAgent
    from ltlagent.agent.loader import load_model
    from ltlagent.logic.policy import Policy
    from validation.chat_batch import run_conversations

    loaded = load_model(args.model)
    policy = Policy.load("booking-policy")
    tasks = make_tasks(args.tasks)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    episodes = out / "episodes.jsonl"
    rows: list[dict[str, object]] = []
    with episodes.open("w", encoding="utf-8") as f:
        for arm in args.arms:
            # one agent per arm: its turn indexes (call automata, token masks) serve every task
            agent = ChatAgent(loaded.model, loaded.tokenizer, TOOLS, Database.fresh().call,
                              policy=policy, mode=arm, system=SYSTEM, examples=EXAMPLES,
                              parallel_tool_calls=False)  # as measured (validation/README.md)
            for lo in range(0, len(tasks), args.batch):
                chunk = tasks[lo:lo + args.batch]
                dbs = [Database.fresh() for _ in chunk]
                t0 = time.perf_counter()
                jobs = [functools.partial(_episode, task, args) for task in chunk]
                results = run_conversations(agent, jobs, [db.call for db in dbs])
                seconds = (time.perf_counter() - t0) / len(chunk)  # wall time, shared
                for i, (task, db, r) in enumerate(zip(chunk, dbs, results)):
                    report = policy.check(r.messages)
                    row = {"arm": arm, "task": task.id, "kind": task.kind,
                           "malformed": r.malformed, "calls": r.calls,
                           "violated": report.verdict == "violated", "verdict": report.verdict,
                           "violations": [v.to_dict() for v in report.violations],
                           "success": task.success(db, r.messages), "tokens": r.tokens,
                           "seconds": round(seconds, 2), "turns": r.turns,
                           "stop_reason": r.stop_reason, "notes": r.notes,
                           "messages": r.messages}
                    rows.append(row)
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
                    f.flush()
                    print(f"[{arm} {lo + i + 1}/{len(tasks)}] {task.id}: calls {r.calls}, "
                          f"malformed {r.malformed}, {report.verdict}, success {row['success']}, "
                          f"{r.tokens} tokens", file=sys.stderr)
    summary = summarise(rows, args)
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    (out / "results.md").write_text(render(summary), encoding="utf-8")
    return summary


def _episode(task: Task, args: argparse.Namespace, agent: Any) -> Any:
    return agent.run(scripted_user(task), task.first, max_turns=args.max_turns,
                     max_new_tokens=args.max_new_tokens)


def summarise(rows: Sequence[Mapping[str, object]], args: argparse.Namespace) -> dict[str, object]:
    arms: dict[str, object] = {}
    for arm in args.arms:
        rs = [r for r in rows if r["arm"] == arm]
        n = len(rs)
        mal = [float(r["malformed"]) for r in rs]  # type: ignore[arg-type]
        with_mal = sum(1 for x in mal if x > 0)
        viol = sum(1 for r in rs if r["violated"])
        succ = sum(1 for r in rs if r["success"])
        kept = sum(1 for r in rs if r["success"] and not r["violated"])
        arms[arm] = {
            "n": n,
            "tasks_with_malformed_calls": [with_mal, *_wilson(with_mal, n)],
            "malformed_per_task": list(_mean_ci(mal)),
            "violations": [viol, *_wilson(viol, n)],
            "success": [succ, *_wilson(succ, n)],
            "success_within_policy": [kept, *_wilson(kept, n)],
            "calls_per_task": list(_mean_ci([float(r["calls"]) for r in rs])),  # type: ignore[arg-type]
            "tokens": list(_mean_ci([float(r["tokens"]) for r in rs])),  # type: ignore[arg-type]
            "seconds": list(_mean_ci([float(r["seconds"]) for r in rs])),  # type: ignore[arg-type]
        }
    return {"model": args.model, "tasks": args.tasks, "max_turns": args.max_turns,
            "max_new_tokens": args.max_new_tokens, "decoding": "greedy", "arms": arms}


def render(s: Mapping[str, object]) -> str:
    lines = [f"# Tool-calling experiment: {s['model']}, {s['tasks']} tasks, greedy", "",
             "| arm | tasks with a malformed call | violations (check-log) | task success | "
             "success without a violation | calls/task | tokens/task | s/task |",
             "|---|---|---|---|---|---|---|---|"]
    arms = s["arms"]
    assert isinstance(arms, Mapping)
    def rate(v: Sequence[float], n: object) -> str:
        return f"{int(v[0])}/{n} [{100 * v[1]:.0f}–{100 * v[2]:.0f} %]"

    def mean(v: Sequence[float]) -> str:
        return f"{v[0]:.1f} [{v[1]:.1f}, {v[2]:.1f}]"

    for arm, a in arms.items():
        n = a["n"]
        lines.append(f"| {arm} | {rate(a['tasks_with_malformed_calls'], n)} | "
                     f"{rate(a['violations'], n)} | {rate(a['success'], n)} | "
                     f"{rate(a['success_within_policy'], n)} | "
                     f"{mean(a['calls_per_task'])} | "
                     f"{mean(a['tokens'])} | {mean(a['seconds'])} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    ap.add_argument("--max-turns", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=80, help="tokens per assistant turn "
                    "(default 80; a booking call takes about 45 of SmolLM2's)")
    ap.add_argument("--batch", type=int, default=20, help="conversations whose turns are written "
                    "together (one forward pass per token for all; default 20, about 3 GB of KV "
                    "cache with SmolLM2)")
    ap.add_argument("--out", required=True, help="folder for summary.json, results.md, "
                                                 "episodes.jsonl")
    ap.add_argument("--force", action="store_true", help="overwrite results already in --out")
    ap.add_argument("--from", dest="sources", nargs="+", metavar="DIR", help="run nothing: "
                    "summarise the episodes of earlier runs (e.g. one per arm, run side by side) "
                    "into --out")
    args = ap.parse_args(argv)
    if (Path(args.out) / "summary.json").exists() and not args.force:
        print(f"{args.out} already holds results; pass --force to overwrite them", file=sys.stderr)
        return 2
    try:
        summary = combine(args.sources, Path(args.out)) if args.sources else run(args)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(render(summary))
    return 0


def combine(sources: Sequence[str], out: Path) -> dict[str, object]:
    """One summary of the episodes of several runs made with the same settings."""
    rows: list[dict[str, object]] = []
    settings: dict[str, object] | None = None
    arms: list[str] = []
    for src in sources:
        summary = json.loads((Path(src) / "summary.json").read_text(encoding="utf-8"))
        these = {k: summary[k] for k in ("model", "tasks", "max_turns", "max_new_tokens")}
        if settings is not None and these != settings:
            raise ValueError(f"{src} was run with {these}, not {settings}")
        settings = these
        arms += [a for a in summary["arms"] if a not in arms]
        rows += [json.loads(line) for line in
                 (Path(src) / "episodes.jsonl").read_text(encoding="utf-8").splitlines()]
    assert settings is not None
    args = argparse.Namespace(arms=arms, **settings)
    out.mkdir(parents=True, exist_ok=True)
    (out / "episodes.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n"
                                                for r in rows), encoding="utf-8")
    summary = summarise(rows, args)
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    (out / "results.md").write_text(render(summary), encoding="utf-8")
    return summary


if __name__ == "__main__":
    raise SystemExit(main())
