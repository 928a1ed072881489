"""``ltlagent check-equiv``: compare two specs' behaviours and print the verdict
(:func:`ltlagent.checks.equiv.check_equivalence`)."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

from ltlagent.checks.equiv import check_equivalence
from ltlagent.spec.shadow import shadow_warnings
from ltlagent.spec.syntax import load_spec

__all__ = ["add_arguments", "main"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = textwrap.fill(
        "Check whether two specs accept the same traces. Prompt-string specs compare traces of "
        "state names (states matched by name); event specs (chat policies) compare the "
        "conversations they accept, each step in the first declared state that matches it, and "
        "a difference is shown as a conversation of OpenAI-format messages. Prints a shortest "
        "trace that one accepts and the other does not, in both directions; differences in "
        "state texts or flags are listed separately. Exit 0: equivalent; 1: not; 2: error, or "
        "cannot decide (a kind of message that could be neither built nor ruled out, said which).")
    p.add_argument("a", help="spec file or bundled spec name")
    p.add_argument("b", help="spec file or bundled spec name")
    p.add_argument("--implies", action="store_true",
                   help="check containment instead: every trace of A is a trace of B")
    p.add_argument("--format", choices=("text", "json"), default="text")


def main(args: argparse.Namespace) -> int:
    a, b = load_spec(args.a), load_spec(args.b)
    for warning in (*shadow_warnings(a), *shadow_warnings(b)):
        print(warning, file=sys.stderr)
    r = check_equivalence(a, b, implies=args.implies, label_a=args.a, label_b=args.b)
    if args.format == "json":
        print(json.dumps(r.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(r.render())
    return r.exit_code

