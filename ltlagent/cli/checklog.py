"""``ltlagent check-log SPEC LOG…``: conversations in chat logs checked against a policy
(:mod:`ltlagent.checks.logcheck`)."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
import time

from ltlagent.checks.logcheck import LogResult, Summary, check_logs
from ltlagent.errors import LogError, UsageError
from ltlagent.logic.policy import VERDICTS, Policy, describe_allowed
from ltlagent.spec.shadow import shadow_warnings

__all__ = ["add_arguments", "main"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = textwrap.fill(
        "Check the conversations in chat logs against a policy spec whose states are chat "
        "events ((:from …), (:call …), (:contains …)). A log is a JSON array of OpenAI-format "
        "messages, a JSON object holding one, a JSON array of those, or JSON Lines with one "
        "conversation per line (streamed). Each conversation is ok, violated (the first failure of "
        "each named constraint, with its step and message index), incomplete (an eventuality "
        "unmet at the end), unmatched (a step matches no declared state) or malformed. "
        "Exit 0: all ok; 1: any other verdict; 2: bad spec, an unreadable log or record, or a "
        "log with no conversations.")
    p.add_argument("spec", help="policy spec file or bundled spec name (e.g. booking-policy)")
    p.add_argument("logs", nargs="+", metavar="LOG", help="log files (- for standard input)")
    p.add_argument("--messages-key", metavar="KEY",
                   help="the field holding each record's messages (default: 'messages', else the "
                        "one list field whose items have a 'role')")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="check in N worker processes (default 1; at most the number of cores "
                        "this process may use)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text, or one JSON object per conversation (JSON Lines) with the summary "
                        "on stderr")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="text format: print only conversations that are not ok, and the summary")


def _render(r: LogResult, names: tuple[str, ...]) -> str:
    rep = r.report
    head = f"{r.file}:{r.line}: conversation {r.conversation}: {rep.verdict}"
    lines = [head]
    if rep.verdict == "malformed":
        where = f" (message {rep.error_message})" if rep.error_message is not None else ""
        lines[0] += f": {rep.error}{where}"
    for v in rep.violations:
        allowed = describe_allowed(v.allowed, names).replace("nothing further", "nothing")
        if v.constraint is None:
            lines.append(f"  step {v.step} (message {v.message}) matches no state of the policy; "
                         f"allowed there: {allowed}")
        elif v.reason:  # a first-order rule of the enforced fragment: the value in words
            lines.append(f"  {v.constraint}: broken at step {v.step} (message {v.message}), a "
                         f"{v.state} step: {v.reason}")
        elif v.binding:  # another first-order rule: the values of the instance that broke
            values = ", ".join(f"{var} = {value!r}" for var, value in v.binding)
            lines.append(f"  {v.constraint}: broken at step {v.step} (message {v.message}), a "
                         f"{v.state} step for {values}")
        else:
            lines.append(f"  {v.constraint}: broken at step {v.step} (message {v.message}), a "
                         f"{v.state} step; allowed there: {allowed}")
    if rep.unmet:
        lines.append(f"  unmet at the end: {', '.join(rep.unmet)}")
    return "\n".join(lines)


def _summary_text(s: Summary, seconds: float) -> str:
    counts = ", ".join(f"{s.verdicts[v]} {v}" for v in VERDICTS if s.verdicts[v])
    rate = f", {s.messages / seconds:,.0f} messages/s" if seconds > 0 and s.messages else ""
    out = f"checked {s.conversations} conversations ({s.messages} messages) in {seconds:.2f} s" \
          f"{rate}: {counts or 'none'}"
    if s.constraints:
        out += "\nby constraint: " + ", ".join(f"{k} {n}" for k, n in s.constraints.most_common())
    return out


def main(args: argparse.Namespace) -> int:
    if args.jobs < 1:
        raise UsageError("--jobs takes a positive number of processes")
    if args.logs.count("-") > 1:
        raise UsageError("standard input (-) can be read only once")
    policy = Policy.load(args.spec)
    for warning in shadow_warnings(policy.spec):  # states that can never match
        print(warning, file=sys.stderr)
    summary = Summary()
    t0 = time.perf_counter()
    unreadable = False
    seen: set[str] = set()
    try:
        for r in check_logs(policy, args.logs, args.messages_key, args.jobs):
            summary.add(r)
            seen.add(r.file)
            if r.json_error is not None:
                unreadable = True
                if args.format == "json":
                    print(r.json_error, file=sys.stderr)
            if args.format == "json":
                print(json.dumps(r.to_dict(), ensure_ascii=False))
            elif not (args.quiet and r.report.ok):
                print(_render(r, policy.names))
    except LogError as e:
        sys.stdout.flush()
        print(f"ltlagent: error: {e.render()}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - t0
    empty = [LogError("no conversations (the log is empty, blank or an empty array)", source=f)
             for f in dict.fromkeys(args.logs) if f not in seen]
    if summary.conversations == 0:
        for err in empty:
            print(f"ltlagent: error: {err.render()}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps({"summary": summary.to_dict(), "seconds": round(seconds, 3)}),
              file=sys.stderr)
    else:
        print(_summary_text(summary, seconds))
    for err in empty:
        print(f"ltlagent: error: {err.render()}", file=sys.stderr)
    if unreadable or empty:
        return 2
    return 0 if summary.all_ok else 1
