"""The ``ltlagent`` command line: argument parsing, dispatch, and turning errors into messages.

Each subcommand lives in the module of its concept and exposes ``add_arguments(parser)`` and
``main(args) -> int``; this module only wires them up. Exit codes: 0 success, 1 a negative
verdict (violation, not equivalent, rejected trace), 2 usage or spec errors. Never a traceback
for a user's mistake.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from . import __version__
from .errors import CompileError, LtlAgentError, SpecError

__all__ = ["main", "build_parser"]

#: (command, module, one-line help). The module provides add_arguments() and main().
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("show", "ltlagent.show", "print a spec's states, formula and automaton (text, DOT, HOA, JSON)"),
    ("check-trace", "ltlagent.show", "check whether a sequence of states is accepted by a spec"),
    ("validate", "ltlagent.validate", "check the few-shot examples in prompt files against a spec"),
    ("check-equiv", "ltlagent.equiv", "check whether two specs accept the same traces"),
    ("run", "ltlagent.runcli", "run a constrained agent on a task with a Hugging Face model"),
)

EPILOG = """\
specs: a path to a .sexp file, or the name of a bundled spec (react, react-ablation,
chain-of-thought, reflexion, chat-bot, react-bounded, react-tools, react-constrained).
exit status: 0 ok, 1 negative verdict, 2 usage or spec error.
"""


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with a one-line message, like the rest of our errors."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ltlagent", description=__doc__.splitlines()[0] if __doc__ else None,
                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.description = ("Formally specified LLM agents: one s-expression spec, one Spot "
                          "automaton, constrained decoding, prompt validation, equivalence.")
    parser.add_argument("--version", action="version", version=f"ltlagent {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module, help_ in COMMANDS:
        try:
            mod = importlib.import_module(module)
        except ImportError:  # a command whose module is not part of this install
            continue
        p = sub.add_parser(name, help=help_, description=help_[0].upper() + help_[1:] + ".",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        adder = getattr(mod, f"add_{name.replace('-', '_')}_arguments", None) or mod.add_arguments
        adder(p)
        p.set_defaults(_main=getattr(mod, f"{name.replace('-', '_')}_main", None) or mod.main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ltlagent`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_main", None):
        parser.print_help()
        return 2
    try:
        return int(args._main(args) or 0)
    except SpecError as e:
        print(e.render(), file=sys.stderr)
        return 2
    except CompileError as e:
        print(f"ltlagent: internal error (please report): {e}", file=sys.stderr)
        return 2
    except LtlAgentError as e:
        print(f"ltlagent: error: {e.render()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ltlagent: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
