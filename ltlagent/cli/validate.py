"""``ltlagent validate``: check the few-shot examples of prompt files against a spec and print
the diagnostics (:class:`ltlagent.checks.validate.Validator`)."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from ltlagent.checks.validate import DEFAULT_CONTEXT_LABELS, Validator
from ltlagent.errors import UsageError

__all__ = ["add_arguments", "main", "collect_files"]


def collect_files(paths: Sequence[str], patterns: Sequence[str]) -> list[Path]:
    """Files named on the command line, and the matching files under named directories (sorted)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if str(p) == "-":
            out.append(p)
        elif p.is_dir():
            found = sorted({f for pat in patterns for f in p.rglob(pat)
                            if f.is_file() and not any(x.startswith(".") for x in
                                                       f.relative_to(p).parts)})
            if not found:
                raise UsageError(f"{p}: no files matching {' '.join(patterns)} in this directory")
            out += found
        elif p.exists() and not p.is_file():
            raise UsageError(f"{p}: not a file or directory")
        else:
            out.append(p)  # a missing file is reported per file (exit 2)
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = textwrap.fill(
        "Check the few-shot examples in prompt files against a spec. Each run of prompt strings "
        "is replayed through the spec's automaton; problems are reported as FILE:LINE:COL. "
        "The instructions block that describes the format is recognised and not checked. "
        "Exit 0: every example is valid; 1: a violation, or no example at all; 2: a usage, spec "
        "or file error (not UTF-8, a NUL byte: UTF-16).")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="prompt files or directories ('-' reads standard input)")
    p.add_argument("--spec", required=True, help="spec file or bundled spec name (e.g. react)")
    p.add_argument("--strict", action="store_true",
                   help="also report turns handed to the wrong side: an :env-input prompt string "
                        "that does not begin a line, an :env-input step without text, and a "
                        "prompt string on the same line as an :env-input step's text")
    p.add_argument("--tools", action="append", default=[], metavar="NAMES",
                   help="comma-separated tool names for (:choices :tools) states "
                        "(default: any tool name is accepted)")
    p.add_argument("--context-label", action="append", default=[], metavar="LABEL",
                   help="a line starting with LABEL: introduces a new task (added to "
                        + ", ".join(DEFAULT_CONTEXT_LABELS) + ")")
    p.add_argument("--glob", action="append", default=[], metavar="PATTERN",
                   help="file patterns searched in directories (default: *.txt, *.prompt)")
    p.add_argument("--list", action="store_true", help="list every example with its trace")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="output format; json: a list with one object per file")


def main(args: argparse.Namespace) -> int:
    tools = [x.strip() for arg in args.tools for x in arg.split(",") if x.strip()]
    files = collect_files(args.paths, args.glob or ["*.txt", "*.prompt"])
    v = Validator(args.spec, tools=tools or None, strict=args.strict,
                  context_labels=args.context_label,
                  keep_examples=args.list or args.format == "json")
    code = 0
    reports = []
    for f in files:
        r = v.validate_stream(sys.stdin.buffer, "<stdin>") if str(f) == "-" else v.validate_path(f)
        code = max(code, r.exit_code)
        if args.format == "json":
            reports.append(r.to_dict())
            continue
        if r.error is not None:
            print(r.error.render(), file=sys.stderr)
            continue
        for d in r.diagnostics:
            print(d.render())
        if args.list and r.example_list:
            for e in r.example_list:
                label = "instructions" if e.index is None else f"example {e.index}: {e.status}"
                print(f"{r.file}:{e.line}:{e.column}: {label}: {' '.join(e.trace)}")
        print(r.summary())
    if args.format == "json":
        print(json.dumps(reports, indent=2, ensure_ascii=False))
    return code
