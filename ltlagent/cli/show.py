"""``ltlagent show`` (a compiled spec as text, DOT, HOA or JSON) and ``ltlagent check-trace``
(replay a trace, or a lasso, on the spec's automaton)."""

from __future__ import annotations

import argparse
import json
import sys

from ltlagent.checks.show import (
    describe,
    describe_policy,
    render_policy_text,
    render_text,
    too_large_for_spot,
)
from ltlagent.errors import UsageError
from ltlagent.logic.automaton import Automaton
from ltlagent.logic.compiled import compile_spec
from ltlagent.logic.policy import Policy
from ltlagent.spec.shadow import shadow_warnings
from ltlagent.spec.syntax import load_spec

__all__ = ["add_show_arguments", "show_main", "add_check_trace_arguments", "check_trace_main"]


def add_show_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="spec file or bundled spec name")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--dot", action="store_true", help="print the automaton as Graphviz DOT")
    g.add_argument("--hoa", action="store_true", help="print Spot's automaton in HOA format "
                   "(over the code propositions b0, b1, …)")
    g.add_argument("--format", choices=("text", "json"), default="text",
                   help="output format (default: text)")


def show_main(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    for warning in shadow_warnings(spec):  # states that can never match
        print(warning, file=sys.stderr)
    policy = Policy.load(spec) if spec.is_event_spec and not spec.is_infinite else None
    if policy is not None and (spec.is_first_order or too_large_for_spot(policy)):
        # no single automaton to print: the rules as the monitor runs them (design §3.6)
        if args.dot or args.hoa:
            why = "first-order rules" if spec.is_first_order else "too many past subformulas"
            raise UsageError(f"spec {spec.name!r} has {why}: it has no automaton to print",
                             hint="`ltlagent show SPEC` describes its rules")
        if args.format == "json":
            print(json.dumps(describe_policy(policy), indent=2, ensure_ascii=False))
        else:
            sys.stdout.write(render_policy_text(policy))
        return 0
    c = compile_spec(spec)
    if args.dot:
        sys.stdout.write(c.automaton.to_dot())
    elif args.hoa:
        sys.stdout.write(c.automaton.hoa.rstrip("\n") + "\n")
    elif args.format == "json":
        print(json.dumps(describe(c), indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(render_text(c))
    return 0


def add_check_trace_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Check a trace (a sequence of state names) against a spec. Exit 0: accepted; exit 1: an "
        "incomplete prefix (the states allowed next are listed) or rejected (the first step "
        "that breaks the spec is named). For infinite specs a plain trace is a prefix; "
        "--lasso PREFIX CYCLE checks the ultimately periodic trace PREFIX CYCLE CYCLE ….")
    p.add_argument("spec", help="spec file or bundled spec name")
    p.add_argument("trace", nargs="*", help="state names, in order")
    p.add_argument("--lasso", nargs=2, metavar=("PREFIX", "CYCLE"),
                   help='an infinite trace: two quoted, space-separated state lists, e.g. '
                        '--lasso "" "Chat-Bot User"')
    p.add_argument("--format", choices=("text", "json"), default="text")


def _check_names(a: Automaton, names: list[str]) -> None:
    for n in names:
        if n not in a.names:
            raise UsageError(f"unknown state {n!r}; the spec's states are {', '.join(a.names)}")


def check_trace_main(args: argparse.Namespace) -> int:
    c = compile_spec(args.spec)
    a = c.automaton
    if args.lasso:
        if args.trace:
            raise UsageError("give either a trace or --lasso, not both")
        prefix, cycle = args.lasso[0].split(), args.lasso[1].split()
        if not cycle:
            raise UsageError("the cycle of --lasso must name at least one state")
        _check_names(a, prefix + cycle)
        ok = a.accepts_lasso(prefix, cycle)
        word = " ".join(prefix) + (" " if prefix else "") + "(" + " ".join(cycle) + ")^ω"
        if args.format == "json":
            print(json.dumps({"status": "accepted" if ok else "rejected", "prefix": prefix,
                              "cycle": cycle, "infinite_spec": a.infinite}))
        elif ok:
            print(f"accepted: {word}")
        else:
            why = " (this spec has finite traces only)" if not a.infinite else ""
            print(f"rejected: {word}{why}")
        return 0 if ok else 1
    trace: list[str] = args.trace
    v = a.run(trace)
    if args.format == "json":
        print(json.dumps({**v.to_dict(), "infinite_spec": a.infinite}))
    elif v.status == "accepted":
        print(f"accepted: {' '.join(trace)}")
    elif v.status == "incomplete":
        shown = " ".join(trace) or "(empty trace)"
        kind = "a viable prefix (infinite spec)" if a.infinite else "incomplete"
        print(f"{kind}: {shown}")
        print(f"  allowed next: {', '.join(v.allowed)}")
        if v.completion:
            print(f"  shortest completion: {' '.join(v.completion)}")
    else:
        i = v.failed_at or 0
        bad = trace[i]
        where = f"after {trace[i - 1]}" if i else "at the start"
        unknown = "" if bad in a.names else " (not a state of this spec)"
        print(f"rejected at step {i + 1}: {bad}{unknown} is not allowed {where}")
        print(f"  allowed there: {', '.join(v.allowed) or '(nothing: the trace was complete)'}")
    return 0 if v.status == "accepted" else 1
