"""The agent runner (docs/design.md §6): a spec, a causal LM and tools make an agent obeying the spec.

``Agent.from_spec("react", model, tokenizer, tools=[Calculator()])`` then ``agent.run(task)``. The
runner owns the generation loop: the prompt is encoded once, every generated token goes through the
decoding :class:`~ltlagent.decode.monitor.Monitor`, and environment text (tool output, an evaluator's
verdict, the user's turn) is appended as token ids so that the KV cache is reused across turns.
Mistakes of the model or of a tool (unknown tool, exception, timeout, oversized output) become the
environment's text, never a crash.
"""

from __future__ import annotations

import inspect
import re
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltlagent.agent.environment import (
    EnvContext,
    EnvFn,
    EnvReply,
    ToolEnvironment,
    _call_flexible,
    call_environment,
    check_task,
    neutralise,
    prompt_examples,
    prompt_template,
    read_prompt,
    render_prompt,
)
from ltlagent.agent.kvcache import cache_arg, cache_of
from ltlagent.agent.record import RunResult, Step, StepLog, run_notes
from ltlagent.agent.roles import Roles
from ltlagent.agent.tools import Tool
from ltlagent.errors import UsageError
from ltlagent.logic.compiled import CompiledSpec, compile_spec
from ltlagent.spec.syntax import Spec
from ltlagent.text.lexer import CONTEXT_LABELS

if TYPE_CHECKING:
    import torch

    from ltlagent.decode.monitor import Monitor, TokenIndex

__all__ = [
    "Agent", "Step", "RunResult", "RunStream", "EnvContext", "EnvReply", "ToolEnvironment",
    "render_prompt", "prompt_template", "prompt_examples", "neutralise", "BUNDLED_MODEL", "STOP_REASONS",
    "Roles", "StepLog",
]

#: The bundled tiny model (trained on ReAct traces); used when no model is given.
BUNDLED_MODEL = Path(__file__).parent.parent / "models" / "react-tiny"
CHAT_TEMPLATE_MODES = ("auto", "on", "off")
STOP_REASONS = ("complete", "max_new_tokens", "max_steps", "context_full", "env_ended", "finished")


class RunStream:
    """Iterator over the steps of a run as they complete; ``.result`` once it is exhausted."""

    def __init__(self, gen: Generator[Step, None, RunResult]) -> None:
        self._gen = gen
        self.result: RunResult | None = None

    def __iter__(self) -> Iterator[Step]:
        return self

    def __next__(self) -> Step:
        try:
            return next(self._gen)
        except StopIteration as stop:
            self.result = stop.value
            raise

    def close(self) -> None:
        self._gen.close()


# --- model loading -----------------------------------------------------------------------------------

def _load_model(model: object, tokenizer: object) -> tuple[Any, Any]:
    """Objects pass through; names, paths and GGUF files go through :func:`ltlagent.agent.loader.load_model`;
    None is the default model (SmolLM2-135M-Instruct)."""
    if model is None or isinstance(model, str | Path):
        from ltlagent.agent.loader import load_model
        loaded = load_model(model, tokenizer=tokenizer)
        return loaded.model, loaded.tokenizer
    if isinstance(tokenizer, str | Path):
        from transformers import AutoTokenizer
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))
        except (OSError, ValueError) as e:
            raise UsageError(f"cannot load tokenizer {str(tokenizer)!r}: {e}") from None
    if tokenizer is None:
        raise UsageError("a tokenizer is needed with a model object (tokenizer=…)")
    if hasattr(model, "eval"):
        model.eval()
    return model, tokenizer


def _constant(text: str) -> EnvFn:
    return lambda ctx: text


def _evaluator(fn: Callable[..., str | None], answer_state: str | None) -> EnvFn:
    """Reflexion's Evaluator: ``fn(answer[, ctx])`` on the text of the last answer."""
    def call(ctx: EnvContext) -> str | None:
        answer = ctx.last(answer_state) if answer_state else ctx.last_model_text
        return _call_flexible(fn, answer or "", ctx)
    return call


def _user(fn: Callable[..., str | None]) -> EnvFn:
    """The chat-bot's User: ``fn(bot_text[, ctx])``; None or EOFError ends the conversation."""
    return lambda ctx: _call_flexible(fn, ctx.last_model_text, ctx)


def _context_size(model: Any) -> int | None:
    cfg = getattr(model, "config", None)
    for key in ("n_positions", "max_position_embeddings", "n_ctx", "seq_length"):
        v = getattr(cfg, key, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def eos_token_ids(model: Any, tokenizer: Any) -> list[int] | None:
    """Every id that ends generation: the tokenizer's EOS and the model's generation config's (an
    instruct model may end its turn with ``<|im_end|>`` or ``<|endoftext|>``). None: the tokenizer's."""
    ids: list[int] = []
    for v in (getattr(tokenizer, "eos_token_id", None),
              getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        for i in (v if isinstance(v, list | tuple) else [v]):
            if isinstance(i, int) and i >= 0 and i not in ids:
                ids.append(i)
    return ids or None


def chat_prompt(tokenizer: Any, text: str) -> str:
    """``text`` (instructions, examples, the task) as the user turn of the tokenizer's chat
    template, followed by the opening of the assistant turn, where the trace is written."""
    try:
        out = tokenizer.apply_chat_template([{"role": "user", "content": text.rstrip("\n")}],
                                            tokenize=False, add_generation_prompt=True)
    except Exception as e:  # a template that cannot render a single user turn
        raise UsageError(f"the tokenizer's chat template failed: {e}; use chat_template='off'") from None
    return str(out)


# --- the run ----------------------------------------------------------------------------------------

class Agent:
    """A spec, a model, a tokenizer, tools and environment handlers; :meth:`run` solves a task.

    Build it with :meth:`from_spec`. The token index (spec × tokenizer) is built on the first run
    and reused (and cached on disk by the monitor). On a CPU, small models decode fastest with
    ``torch.set_num_threads(1)`` (one token per forward pass; threads only contend): the agent does
    not change torch's settings, ``ltlagent run`` does.
    """

    def __init__(self, compiled: CompiledSpec, model: Any, tokenizer: Any, tools: Sequence[Tool] = (),
                 handlers: Mapping[str, EnvFn] | None = None, template: str | None = None,
                 max_env_chars: int = 2000, roles: Roles | None = None,
                 context_labels: Sequence[str] | None = None, chat_template: str = "off") -> None:
        if chat_template not in CHAT_TEMPLATE_MODES:
            raise UsageError(f"chat_template must be one of {', '.join(CHAT_TEMPLATE_MODES)}, "
                             f"not {chat_template!r}")
        self.compiled = compiled
        self.spec = compiled.spec
        self.model = model
        self.tokenizer = tokenizer
        self.tools: dict[str, Tool] = {t.name: t for t in tools}
        self.handlers: dict[str, EnvFn] = dict(handlers or {})
        self.template = template if template is not None else prompt_template(self.spec)
        #: the worked examples for the template's ``{{examples}}``, read once (spec and tools are fixed)
        self.examples = prompt_examples(self.spec, list(self.tools.values()))
        self.max_env_chars = max_env_chars
        self.roles = roles if roles is not None else Roles.resolve(compiled.spec)
        self.context_labels: tuple[str, ...] = (CONTEXT_LABELS if context_labels is None
                                                else tuple(context_labels))
        self.chat_template = chat_template
        self._index: TokenIndex | None = None
        self._reserve: int | None = None  # see _completion_reserve
        self.index_seconds = 0.0
        self.forward_calls = 0
        self.forward_tokens = 0
        self._forward_kw: dict[str, object] | None = None

    # -- construction
    @classmethod
    def from_spec(cls, spec: Spec | CompiledSpec | str | Path, model: object = None, tokenizer: object = None,
                  *, tools: Sequence[Tool] = (), environment: Mapping[str, EnvFn | str] | None = None,
                  evaluator: Callable[..., str | None] | None = None,
                  user_input: Callable[..., str | None] | None = None, prompt: str | Path | None = None,
                  tool_timeout: float | None = 30.0, max_env_chars: int = 2000,
                  answer_state: str | None = None, tool_state: str | None = None,
                  roles: Roles | Mapping[str, str | None] | None = None,
                  context_labels: Sequence[str] | None = None, chat_template: str = "off") -> Agent:
        """Build an agent.

        ``spec``: a path, a bundled name (``"react"``) or a spec object. ``model`` / ``tokenizer``:
        objects or ``from_pretrained`` names or paths (None: the bundled tiny model). ``tools`` fill
        the prompt's ``{{tool_labels}}`` / ``{{tool_descriptions}}`` and ``(:choices :tools)``.
        Environment states are written by ``environment[state]`` (a callable taking an
        :class:`EnvContext`, or a constant string) when given; else the evaluator state by
        ``evaluator(answer[, ctx])``, the user state by ``user_input(bot_text[, ctx])`` (None or
        EOFError ends the run), and the observation state by calling the tools.
        ``roles`` (a :class:`~ltlagent.agent.roles.Roles` or a mapping such as ``{"answer": "Final"}``)
        says which states play which role where the spec does not declare it (``(:role …)``);
        the rest default to the paper's names (``Action``, ``Action-Input``, ``Observation``,
        ``Evaluator``, ``User``, ``Answer``: :meth:`Roles.resolve`). ``answer_state`` and
        ``tool_state`` are shorthands for the answer and observation roles.
        ``prompt`` is a template file (a :class:`~pathlib.Path`, or a string naming a file) or a
        template text (a string with a ``{{placeholder}}`` or a line break; see
        :func:`~ltlagent.agent.environment.read_prompt`); default: the bundled template of the spec.
        ``tool_timeout``: seconds a tool call may take (positive), or None for no limit.
        ``model`` may also be a GGUF file, a folder with one, or a short name such as
        ``"smollm2-135m"`` (see :mod:`ltlagent.models`).

        ``context_labels``: the example boundary. Real models run on past the answer into a new
        example; a line starting with one of these labels (default
        :data:`~ltlagent.text.lexer.CONTEXT_LABELS`: ``Question:``, ``Claim:``…) inside any state ends
        that state's text as EOS would, and a complete trace then ends the run. ``()`` turns it off.
        ``chat_template``: ``"on"`` puts the prompt (instructions, examples, task) in the user turn
        of the tokenizer's chat template and the trace in the assistant turn; ``"off"`` (default)
        feeds it as plain text; ``"auto"`` uses the template when the tokenizer has one. Plain text
        is the default because SmolLM2-135M-Instruct did better with it (validation/README.md).
        """
        compiled = spec if isinstance(spec, CompiledSpec) else compile_spec(spec)
        s = compiled.spec
        tools = list(tools)
        seen: set[str] = set()
        for t in tools:
            if not isinstance(t, Tool):
                raise UsageError(f"tools must be Tool objects (use @tool on a function), got {t!r}")
            if t.name in seen:
                raise UsageError(f"two tools are named {t.name!r}")
            seen.add(t.name)
        asked: dict[str, str | None] = (dict(roles) if isinstance(roles, Mapping)
                                        else asdict(roles) if roles is not None else {})
        if answer_state is not None:
            asked["answer"] = answer_state
        if tool_state is not None:
            asked["observation"] = tool_state
        r = Roles.resolve(s, asked)
        choosing = next((st.name for st in s.states if st.tool_choices), None)
        if choosing is not None and not tools:
            raise UsageError(f"state {choosing} takes its choices from the tools (:choices :tools), "
                             "but no tools were given")
        handlers: dict[str, EnvFn] = {}
        missing: list[str] = []
        used = s.used_states()
        for st in s.states:
            if not st.env_input:
                continue
            fn: EnvFn | None = None
            if environment and st.name in environment:
                given = environment[st.name]
                fn = _constant(given) if isinstance(given, str) else given
            elif st.name == r.evaluator and evaluator is not None:
                fn = _evaluator(evaluator, r.answer)
            elif st.name == r.user and user_input is not None:
                fn = _user(user_input)
            elif tools and st.name == r.observation:
                fn = ToolEnvironment.for_roles({t.name: t for t in tools}, r, tool_timeout)
            if fn is None and st.name in used:
                missing.append(st.name)
            elif fn is not None:
                handlers[st.name] = fn
        if environment:
            unknown = sorted(set(environment) - {st.name for st in s.states if st.env_input})
            if unknown:
                raise UsageError(f"environment[{unknown[0]!r}]: not an :env-input state of {s.name}")
        if missing:
            what = {r.observation: "tools=[…]", r.evaluator: "evaluator=…", r.user: "user_input=…"}
            hint = what.get(missing[0], f"environment={{{missing[0]!r}: …}}")
            raise UsageError(f"state {missing[0]} of {s.name} is written by the environment: pass {hint}")
        if tool_timeout is not None and not tool_timeout > 0:  # NaN too
            raise UsageError(f"tool_timeout must be a positive number of seconds (or None), "
                             f"got {tool_timeout}")
        template = read_prompt(prompt) if prompt is not None else None
        m, tok = _load_model(model, tokenizer)
        return cls(compiled, m, tok, tools, handlers, template, max_env_chars, r, context_labels,
                   chat_template)

    @property
    def index(self) -> TokenIndex:
        """The spec compiled for this tokenizer (built on first use)."""
        if self._index is None:
            from ltlagent.decode.monitor import build_index
            t = time.perf_counter()
            self._index = build_index(self.compiled, self.tokenizer, tool_names=list(self.tools) or None,
                                      eos_token_ids=eos_token_ids(self.model, self.tokenizer),
                                      context_labels=self.context_labels,
                                      # its cursors end texts on EOS: masks on first visit
                                      precompute=False)
            self.index_seconds = time.perf_counter() - t
        return self._index

    @property
    def uses_chat_template(self) -> bool:
        """The prompt goes into the tokenizer's chat template (see ``chat_template``)."""
        has = bool(getattr(self.tokenizer, "chat_template", None))
        if self.chat_template == "on" and not has:
            raise UsageError("chat_template='on' but the tokenizer has no chat template")
        return has and self.chat_template != "off"

    def prompt(self, task: str) -> str:
        """The prompt a run on ``task`` starts from (in the chat template when it is used)."""
        text = render_prompt(self.template, task, list(self.tools.values()), self.examples)
        return chat_prompt(self.tokenizer, text) if self.uses_chat_template else text

    @property
    def device(self) -> Any:
        try:
            return next(self.model.parameters()).device
        except (AttributeError, StopIteration):
            return "cpu"

    # -- running
    def run(self, task: str = "", *, stream: bool = False, max_steps: int = 64, max_new_tokens: int = 512,
            max_state_tokens: int | None = 256, seed: int | None = None, temperature: float = 0.0,
            top_k: int | None = None, top_p: float | None = None,
            on_text: Callable[[str, str], None] | None = None, newline: bool = True) -> RunResult | RunStream:
        """Solve ``task``. Greedy by default (``temperature=0``, as in the paper); with a temperature,
        sampling seeded by ``seed``. ``stream=True`` returns a :class:`RunStream` of steps as they
        complete. ``on_text(text, kind)`` sees every piece of text as it is written (kind ``model``,
        ``forced`` or ``env``). ``max_new_tokens`` bounds the model's tokens and ``max_steps`` the
        states visited: the monitor steers onto a shortest completion when either only just
        suffices (environment text counts against the model's context), so finite specs still end
        complete. ``max_state_tokens`` ends a state's text after that many tokens (as EOS would: the
        model then picks the next state). ``newline``: a text that ended without a newline gets one
        before the next prompt string (so prompt strings begin lines, as ``validate --strict``
        wants)."""
        check_task(task)
        if max_steps < 1 or max_new_tokens < 1 or (max_state_tokens is not None and max_state_tokens < 1):
            raise UsageError("max_steps, max_new_tokens and max_state_tokens must be at least 1")
        if temperature < 0 or (top_p is not None and not 0 < top_p <= 1) or (top_k is not None and top_k < 1):
            raise UsageError("temperature must be >= 0, top_p in (0, 1], top_k >= 1")
        gen = self._generate(task, max_steps, max_new_tokens, max_state_tokens, seed, temperature, top_k,
                             top_p, on_text, newline)
        rs = RunStream(gen)
        if stream:
            return rs
        for _ in rs:
            pass
        assert rs.result is not None
        return rs.result

    def run_batch(self, tasks: Sequence[str], **kwargs: Any) -> list[RunResult]:
        """Run ``tasks`` concurrently on a vLLM engine (``model`` a ``vllm.LLM`` built with the ltlagent
        logits processor): see :func:`ltlagent.agent.vllm_episodes.run_batch` for the options."""
        from ltlagent.agent.vllm_episodes import run_batch

        return run_batch(self, tasks, **kwargs)

    def stream(self, task: str = "", **kwargs: Any) -> RunStream:
        """``run(task, stream=True, …)``."""
        out = self.run(task, stream=True, **kwargs)
        assert isinstance(out, RunStream)
        return out

    def encode(self, text: str, special: bool) -> list[int]:
        """``text`` as token ids of the agent's tokenizer (``special``: with its special tokens, for a
        prompt; environment text is encoded without)."""
        out = self.tokenizer.encode(text, add_special_tokens=special)
        return list(out.ids if hasattr(out, "ids") else out)

    def _forward(self, ids: list[int], past: Any) -> tuple[torch.Tensor, Any]:
        import torch
        x = torch.tensor([ids], dtype=torch.long, device=self.device)
        if self._forward_kw is None:  # ask for the last position's logits only, where supported
            params = inspect.signature(self.model.forward).parameters
            self._forward_kw = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
        kw = self._forward_kw
        with torch.inference_mode():
            out = self.model(input_ids=x, use_cache=True, **cache_arg(self.model, past), **kw)
        self.forward_calls += 1
        self.forward_tokens += len(ids)
        return out.logits[0, -1].float(), cache_of(out)

    @staticmethod
    def _sample(row: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None,
                gen: torch.Generator) -> int:
        import torch
        if temperature <= 0:
            return int(torch.argmax(row))
        row = row / temperature
        if top_k is not None and top_k < row.numel():
            kth = torch.topk(row, top_k).values[-1]
            row = row.masked_fill(row < kth, float("-inf"))
        probs = torch.softmax(row, dim=-1)
        if top_p is not None and top_p < 1:
            p, idx = torch.sort(probs, descending=True)
            keep = torch.cumsum(p, 0) - p < top_p
            probs = torch.zeros_like(probs).scatter_(0, idx[keep], p[keep])
        return int(torch.multinomial(probs, 1, generator=gen))

    def answer_of(self, steps: Sequence[Step]) -> str | None:
        """The text of the answer state's last step (Answer, or the last model step; after
        ``Answer:`` inside it when the spec has no Answer state, as for the paper's ablated agent)."""
        name = self.roles.answer
        if name is not None:
            return next((s.text for s in reversed(steps) if s.state == name), None)
        last = next((s for s in reversed(steps) if s.source == "model"), None)
        if last is None:
            return None
        m = re.search(r"Answer:\s*(.*)", last.text, flags=re.S)
        return m.group(1).strip() if m else last.text

    def env_text(self, reply: EnvReply) -> str:
        """Environment text as it is appended: truncated (said so), prompt strings neutralised,
        one leading space and a closing newline (``Observation: 395⏎``)."""
        text = (reply.text or "").strip()
        if len(text) > self.max_env_chars:
            text = (text[: self.max_env_chars].rstrip()
                    + f" … [truncated: {len(text)} characters, {self.max_env_chars} shown]")
        text, _ = neutralise(text, self.compiled)
        return " " + text + "\n" if text else "\n"

    def _completion_reserve(self) -> int:
        """Context tokens kept free when environment text is cut to fit: every prompt string of
        the spec with a line break and an end of text each, and a few more: room for the shortest way
        on to the end of a trace after the cut text (the monitor steers onto it)."""
        if self._reserve is None:
            strings = sum(len(self.encode(st.text + "\n", special=False)) + 1 for st in self.spec.states)
            self._reserve = strings + 8
        return self._reserve

    def _fit_env(self, reply: EnvReply, room: int) -> list[int] | None:
        """The tokens of ``reply``'s text cut to at most ``room`` tokens, the cut said in the text
        (``… [cut to fit the context: N characters, M shown]``); None when not even that fits."""
        text = (reply.text or "").strip()

        def cut(k: int) -> list[int]:
            shown = text[:k].rstrip()
            note = f"… [cut to fit the context: {len(text)} characters, {len(shown)} shown]"
            return self.encode(self.env_text(EnvReply((shown + " " + note).strip(), reply.tool,
                                                         reply.error)), special=False)

        if room <= 0 or len(cut(0)) > room:
            return None
        lo, hi = 0, max(0, min(len(text), self.max_env_chars - 100))  # the largest k whose cut fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if len(cut(mid)) <= room:
                lo = mid
            else:
                hi = mid - 1
        return cut(lo)

    def _generate(self, task: str, max_steps: int, max_new_tokens: int, max_state_tokens: int | None,
                  seed: int | None, temperature: float, top_k: int | None, top_p: float | None,
                  on_text: Callable[[str, str], None] | None, newline: bool = True
                  ) -> Generator[Step, None, RunResult]:
        import torch

        from ltlagent.decode.monitor import Monitor

        t0 = time.perf_counter()
        index = self.index
        t_index = time.perf_counter() - t0
        for t in self.tools.values():
            t.reset()
        prompt = self.prompt(task)
        prompt_ids = self.encode(prompt, special=not self.uses_chat_template)
        n_ctx = _context_size(self.model)
        if n_ctx is not None and len(prompt_ids) >= n_ctx:
            raise UsageError(f"the prompt has {len(prompt_ids)} tokens; the model's context holds {n_ctx}")
        budget = max_new_tokens if n_ctx is None else min(max_new_tokens, n_ctx - len(prompt_ids))
        mon: Monitor = Monitor(index, max_new_tokens=budget, max_steps=max_steps, newline=newline)
        eos = set(index.eos_token_ids)
        log = StepLog(mon, self.spec)
        gen = torch.Generator(device=self.device)
        gen.manual_seed(seed if seed is not None else int(torch.randint(0, 2**31 - 1, (1,))))
        calls0, fwd0 = self.forward_calls, self.forward_tokens
        pending: list[int] = list(prompt_ids)
        past: Any = None
        logits: torch.Tensor | None = None
        cached = 0
        env_tokens = forced_tokens = eos_tokens = 0
        t_prefill = t_env = 0.0
        stop: str | None = None
        in_state = [0, 0]  # tokens in the current state's text; 1 once its text has ended
        reserve = self._completion_reserve()
        env_cut = False  # environment text was cut to fit the context

        def spent() -> str:
            """Why the model may write no more: its own token budget, or the context."""
            return "max_new_tokens" if mon.tokens_generated >= max_new_tokens else "context_full"

        def consume(events: Sequence[Any], kind: str) -> None:
            for e in events:
                if e.kind == "enter":
                    in_state[:] = [0, 0]
                elif e.kind == "end":
                    in_state[1] = 1
                if e.kind == "text" and e.text and on_text is not None:
                    on_text(e.text, kind)
            log.wrote(events, kind)

        while True:
            if mon.is_finished:
                if mon.is_complete and not self.spec.is_infinite:
                    stop = "complete"
                elif (mon.remaining_tokens or 0) <= 0:
                    stop = spent()
                else:
                    stop = "finished"
                break
            if len(mon.segments) > max_steps:
                stop = "max_steps"
                break
            if mon.waiting_for_env:
                i = len(mon.segments) - 1
                yield from log.take(i)
                state = str(mon.state)
                te = time.perf_counter()
                reply = call_environment(
                    self.handlers, EnvContext(task, state, tuple(log.step(j) for j in range(i))))
                if reply.text is None:
                    stop = "env_ended"
                    break
                ids = self.encode(self.env_text(reply), special=False)
                left = None if n_ctx is None else n_ctx - cached - len(pending)
                if left is not None and len(ids) + reserve >= left:
                    # too long for what is left: cut it, keeping room for the rest of the trace, or
                    # with less room kept (the monitor steers by what is left) when that is too little
                    fitted = self._fit_env(reply, left - reserve)
                    if fitted is None and len(ids) >= left:
                        fitted = self._fit_env(reply, left // 2)
                        if fitted is None:
                            stop = "context_full"  # not even the marker of a cut would fit
                            break
                    if fitted is not None:
                        ids, env_cut = fitted, True
                try:
                    events = mon.feed_env(ids)
                except UsageError:  # special/unknown ids, or normalisation made a prompt string
                    ids = self.encode(self.env_text(EnvReply("(environment text withheld: the tokenizer "
                                                               "cannot write it)")), special=False)
                    events = mon.feed_env(ids)
                consume(events, "env")
                env_tokens += len(ids)
                pending += ids
                if n_ctx is not None:  # the environment's text used up context: steer by what is left
                    left = n_ctx - cached - len(pending)
                    mon.set_remaining(min(max_new_tokens - mon.tokens_generated, left))
                log.info[i] = (reply.tool, reply.error, time.perf_counter() - te)
                t_env += time.perf_counter() - te
                continue
            if (mon.remaining_tokens or 0) <= 0:
                stop = spent()
                break
            if n_ctx is not None and cached + len(pending) >= n_ctx:
                stop = "context_full"
                break
            tok = mon.forced_token()
            kind = "forced"
            if tok is None:
                kind = "model"
                if pending or logits is None:
                    tf = time.perf_counter()
                    logits, past = self._forward(pending, past)
                    if cached == 0:
                        t_prefill = time.perf_counter() - tf
                    cached += len(pending)
                    pending = []
                row = logits.clone()
                mon.mask_into(row)
                tok = None
                if max_state_tokens is not None and not in_state[1] and in_state[0] >= max_state_tokens:
                    tok = next((e for e in sorted(eos) if e < row.numel() and row[e] > float("-inf")), None)
                if tok is None:
                    tok = self._sample(row, temperature, top_k, top_p, gen)
            else:
                forced_tokens += 1
            in_state[0] += 1
            events = mon.advance(tok)
            consume(events, kind)
            if tok in eos:
                eos_tokens += 1  # ends a text or the trace: not model input
            else:
                pending.append(tok)
            yield from log.take(len(mon.segments) - 1)
        yield from log.take(len(mon.segments))
        steps = log.steps()
        answer = self.answer_of(steps) if steps else None
        total = time.perf_counter() - t0
        generated = mon.tokens_generated
        decode_s = max(total - t_index - t_prefill - t_env, 1e-9)
        return RunResult(
            task=task, answer=answer, steps=steps, prompt=prompt,
            notes=run_notes(steps, answer, self.roles.answer) + (("env_text_cut",) if env_cut else ()),
            transcript=log.text,
            stop_reason=stop or "finished", verdict=mon.verdict, spec=self.spec.name,
            usage={"prompt_tokens": len(prompt_ids), "generated_tokens": generated,
                   "forced_tokens": forced_tokens, "eos_tokens": eos_tokens, "env_tokens": env_tokens,
                   "forward_tokens": self.forward_tokens - fwd0,
                   "forward_calls": self.forward_calls - calls0},
            timing={"total_s": total, "index_s": t_index, "prefill_s": t_prefill, "env_s": t_env,
                    "decode_s": decode_s, "tokens_per_s": generated / decode_s},
            settings={"max_steps": max_steps, "max_new_tokens": max_new_tokens,
                      "max_state_tokens": max_state_tokens, "seed": seed,
                      "temperature": temperature, "top_k": top_k, "top_p": top_p,
                      "chat_template": self.uses_chat_template,
                      "context_labels": list(self.context_labels),
                      "model": str(getattr(self.model, "name_or_path", "") or type(self.model).__name__),
                      "tools": list(self.tools)})
