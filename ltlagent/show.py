"""``ltlagent show`` and ``ltlagent check-trace``: look at a compiled spec and replay traces on it."""

from __future__ import annotations

import argparse
import json
import sys

from .automaton import Automaton
from .compiled import CompiledSpec, compile
from .errors import UsageError

__all__ = ["describe", "add_show_arguments", "show_main", "add_check_trace_arguments",
           "check_trace_main"]


def _flags(st: object) -> str:
    from .spec import State

    assert isinstance(st, State)
    parts = []
    if st.env_input:
        parts.append(":env-input")
    if st.choices is not None:
        parts.append("choices " + ("<tools>" if st.tool_choices else " | ".join(st.choices)))
    if st.regex is not None:
        parts.append(f"regex /{st.regex}/")
    if st.stop:
        parts.append("stop " + " ".join(repr(s) for s in st.stop))
    if st.max_tokens is not None:
        parts.append(f"max-tokens {st.max_tokens}")
    return ", ".join(parts)


def warnings(c: CompiledSpec) -> list[str]:
    """Graph questions on the compiled automaton (networkx): declared states that no trace can
    visit, and automaton states that are reachable but can no longer reach acceptance."""
    import networkx as nx

    a = c.automaton
    g = a.graph()
    live = g.subgraph(a.live)  # type: ignore[attr-defined]
    reach = {a.initial} | nx.descendants(live, a.initial) if a.initial in a.live else set()
    visited = {d["label"] for _, _, d in live.subgraph(reach).edges(data=True)}
    out = [f"state {s.name!r} is declared but no trace of this spec visits it"
           for s in c.spec.states if s.name not in visited]
    dead = sorted((nx.descendants(g, a.initial) | {a.initial}) - set(a.live))
    if dead and not a.infinite:
        out.append(f"automaton states {', '.join(map(str, dead))} cannot reach acceptance: "
                   "the monitor never lets a trace enter them")
    return out


def describe(c: CompiledSpec) -> dict[str, object]:
    """Everything ``show`` prints, as JSON-ready data."""
    a = c.automaton
    return {
        "name": c.spec.name,
        "source": c.spec.source,
        "states": [s.to_dict() for s in c.spec.states],
        "infinite": a.infinite,
        "formula": a.formulas.readable,
        "constraints": list(a.formulas.constraints_readable),
        "spot_formula": a.formulas.coded,
        "codes": {n: i + 1 for i, n in enumerate(c.names)},
        "automaton": a.summary(),
        "transitions": [{"from": q, "state": c.names[i], "to": a.delta[q][i]}
                        for q in range(a.num_states) for i in a.allowed_index[q]],
        "warnings": warnings(c),
    }


def _text(c: CompiledSpec) -> str:
    a = c.automaton
    width = max(len(n) for n in c.names)
    out = [f"spec {c.spec.name}  ({c.spec.source})", "", "states:"]
    for i, s in enumerate(c.spec.states):
        fl = _flags(s)
        out.append(f"  {s.name:<{width}}  code {i + 1:<3} text {s.text!r}" + (f"  [{fl}]" if fl
                                                                                 else ""))
    out += ["", "behaviour (" + ("infinite traces" if a.infinite else "finite traces") + "):",
            f"  {a.formulas.readable}"]
    for cons in a.formulas.constraints_readable:
        out.append(f"  constraint: {cons}")
    out += ["", "formula given to Spot:", f"  {a.formulas.coded}", ""]
    summary = a.summary()
    out.append(f"automaton: {summary['states']} states ({summary['live_states']} live), "
               f"initial {a.initial}, "
               + ("Büchi-style acceptance (infinite traces)" if a.infinite else
                  f"accepting {', '.join(map(str, sorted(a.accepting)))}")
               + f"; translated in {a.translate_seconds * 1000:.1f} ms")
    out.append(f"  allowed first: {', '.join(a.allowed(a.initial))}")
    for q in range(a.num_states):
        if q not in a.live:
            continue
        moves = ", ".join(f"{c.names[i]} → {a.delta[q][i]}" for i in a.allowed_index[q])
        tag = " (accepting)" if a.is_complete(q) else ""
        out.append(f"  {q}{tag}: {moves or '(nothing further)'}")
    for w in warnings(c):
        out.append(f"warning: {w}")
    return "\n".join(out) + "\n"


def add_show_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="spec file or bundled spec name")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--dot", action="store_true", help="print the automaton as Graphviz DOT")
    g.add_argument("--hoa", action="store_true", help="print Spot's automaton in HOA format "
                   "(over the code propositions b0, b1, …)")
    g.add_argument("--format", choices=("text", "json"), default="text",
                   help="output format (default: text)")


def show_main(args: argparse.Namespace) -> int:
    c = compile(args.spec)
    if args.dot:
        sys.stdout.write(c.automaton.to_dot())
    elif args.hoa:
        sys.stdout.write(c.automaton.hoa.rstrip("\n") + "\n")
    elif args.format == "json":
        print(json.dumps(describe(c), indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(_text(c))
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
    c = compile(args.spec)
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
