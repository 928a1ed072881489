"""The ``ltlagent`` command line: argument parsing, dispatch, and turning errors into messages.

:data:`COMMANDS` is the dispatch table: one :class:`Command` per subcommand, whose module in this
package adds its arguments and runs it (``show.py``: show and check-trace, ``validate.py``,
``equiv.py``, ``checklog.py``, ``run.py``, ``guard.py``). The domain modules know nothing of
argparse. Exit codes: 0 success, 1 a negative verdict (violation, not equivalent, rejected trace),
2 usage or spec errors. Never a traceback for a user's mistake. torch and transformers load only
inside ``run``; starlette, uvicorn and httpx only inside ``guard``.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn

from ltlagent.errors import CompileError, LtlAgentError, SpecError

from .. import __version__
from . import checklog, equiv, guard, run, show, validate

__all__ = ["main", "build_parser", "Command", "COMMANDS"]


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, one-line help, argument declarations and entry point."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    main: Callable[[argparse.Namespace], int]


#: Every subcommand, in the order ``ltlagent --help`` lists them.
COMMANDS: tuple[Command, ...] = (
    Command("show", "print a spec's states, formula and automaton (text, DOT, HOA, JSON)",
            show.add_show_arguments, show.show_main),
    Command("check-trace", "check whether a sequence of states is accepted by a spec",
            show.add_check_trace_arguments, show.check_trace_main),
    Command("validate", "check the few-shot examples in prompt files against a spec",
            validate.add_arguments, validate.main),
    Command("check-equiv", "check whether two specs accept the same traces",
            equiv.add_arguments, equiv.main),
    Command("check-log", "check the conversations in chat logs against a policy spec",
            checklog.add_arguments, checklog.main),
    Command("run", "run a constrained agent on a task with a Hugging Face model",
            run.add_run_arguments, run.run_main),
    Command("guard", "serve a proxy that checks each tool call against a policy before it runs",
            guard.add_arguments, guard.main),
)

def _epilog() -> str:
    """The help's closing lines: what a spec argument may be (every bundled spec, by name) and the
    exit statuses."""
    from ltlagent.spec.syntax import bundled_specs

    names = textwrap.fill(", ".join(bundled_specs()), width=88, initial_indent="  ", subsequent_indent="  ",
                          break_on_hyphens=False)
    return ("specs: a path to a .sexp file, or the name of a bundled spec (a bare name always means\n"
            "the bundled one; write ./NAME for a local file of that name):\n"
            f"{names}\n"
            "exit status: 0 ok, 1 negative verdict, 2 usage or spec error.\n")


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with a one-line message, like the rest of our errors."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand in :data:`COMMANDS`."""
    parser = _Parser(prog="ltlagent", epilog=_epilog(),
                     description="Formally specified LLM agents: one s-expression spec, one Spot "
                                 "automaton, constrained decoding, prompt validation, equivalence.",
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"ltlagent {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for cmd in COMMANDS:
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help[0].upper() + cmd.help[1:] + ".",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        cmd.add_arguments(p)
        p.set_defaults(_command=cmd)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ltlagent`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    cmd: Command | None = getattr(args, "_command", None)
    if cmd is None:
        parser.print_help()
        return 2
    try:
        return int(cmd.main(args) or 0)
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
