"""Chat conversations on vLLM (issue 18): many :class:`~ltlagent.agent.chat.ChatAgent`
conversations at once, each assistant turn one vLLM request.

``ChatAgent(llm, llm.get_tokenizer(), tools, call_tool, …).run_batch(chats)`` (``llm`` a
``vllm.LLM`` built with ``logits_processors=[LtlLogitsProcessor]``) comes here. A conversation's
next turn is submitted as soon as its previous one has been consumed (tool run, user asked), while
the others decode. A constrained turn carries its :class:`~ltlagent.decode.chat.TurnRule` as
:class:`~ltlagent.decode.vllm_processor.TurnOptions` in ``extra_args``, and the processor masks it
with the same :class:`~ltlagent.decode.chat.TurnIndex` masks (and token budget) as the
transformers loop, so greedy conversations are the same on both backends.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ltlagent.decode.vllm_processor import EXTRA_KEY, TurnOptions
from ltlagent.errors import UsageError

if TYPE_CHECKING:
    from ltlagent.agent.chat import ChatAgent, ChatResult, Conversation, UserFn

__all__ = ["run_chats", "engine_eos"]


def engine_eos(llm: Any, tokenizer: Any) -> list[int] | None:
    """Every id that ends a turn on a ``vllm.LLM``: the tokenizer's EOS and the model's generation
    config's (what :func:`~ltlagent.agent.runner.eos_token_ids` reads off a transformers model)."""
    ids: list[int] = []
    try:
        gen = llm.llm_engine.model_config.try_get_generation_config() or {}
    except AttributeError:
        gen = {}
    for v in (getattr(tokenizer, "eos_token_id", None), gen.get("eos_token_id")):
        for i in (v if isinstance(v, list | tuple) else [v]):
            if isinstance(i, int) and i >= 0 and i not in ids:
                ids.append(i)
    return ids or None


def run_chats(agent: ChatAgent, chats: Sequence[tuple[UserFn, str]], *, max_turns: int = 12,
              max_new_tokens: int = 96, temperature: float = 0.0,
              seed: int | None = None) -> list[ChatResult]:
    """Run ``chats`` (user, first message) concurrently on ``agent.model`` (a ``vllm.LLM``); one
    result per chat, in order. With a temperature and ``seed``, turn ``t`` of chat ``k`` is seeded
    by ``seed + 1000 * k + t``."""
    if max_turns < 1 or max_new_tokens < 1:
        raise UsageError("max_turns and max_new_tokens must be at least 1")
    import vllm

    engine = agent.model.llm_engine
    try:
        n_ctx: int | None = int(engine.model_config.max_model_len)
    except AttributeError:
        n_ctx = None
    eos = [int(e) for e in agent.vocab.eos_ids]
    eos_set = set(eos)
    convs: list[Conversation] = [agent.start(user, first) for user, first in chats]
    results: list[ChatResult | None] = [None] * len(convs)
    tag = uuid.uuid4().hex[:8]
    pending: dict[str, tuple[int, bool]] = {}

    def submit(k: int) -> None:
        """Send conversation ``k``'s next turn, or finish it."""
        conv = convs[k]
        if not conv.wants_turn(max_turns):
            results[k] = conv.finish()
            return
        ids = list(agent.tokenizer(agent.render(conv.messages), add_special_tokens=False).input_ids)
        left = max_new_tokens if n_ctx is None else min(max_new_tokens, n_ctx - len(ids))
        if left <= 0:
            conv.result.stop_reason = "context_full"
            conv.result.notes.append(f"the prompt has {len(ids)} tokens; the model's context "
                                     f"holds {n_ctx}")
            results[k] = conv.finish()
            return
        rule = agent.turn_rule(conv)
        extra = None if rule is None else {
            EXTRA_KEY: TurnOptions.encode(rule, agent.schemas, agent.format, agent.fields, eos)}
        kw: dict[str, Any] = {"temperature": temperature}
        if seed is not None and temperature > 0:
            kw["seed"] = seed + 1000 * k + conv.result.turns
        rid = f"ltlagent-chat-{tag}-{k}-{conv.result.turns}"
        engine.add_request(rid, {"prompt_token_ids": ids}, vllm.SamplingParams(
            max_tokens=left, stop_token_ids=eos, extra_args=extra, skip_special_tokens=True, **kw))
        pending[rid] = (k, rule is not None)

    for k in range(len(convs)):
        submit(k)
    while pending:
        for out in engine.step():
            if not out.finished or out.request_id not in pending:
                continue
            k, constrained = pending.pop(out.request_id)
            done = out.outputs[0]
            toks = [int(t) for t in done.token_ids]
            ended = bool(toks) and toks[-1] in eos_set
            used = len(toks)
            if not ended and done.finish_reason == "stop" and done.stop_reason is None:
                ended, used = True, used + 1  # an EOS the engine left out of the tokens
            if convs[k].consume(agent.turn_text(toks, constrained), used, ended):
                submit(k)
            else:
                results[k] = convs[k].finish()
    return [r if r is not None else c.finish() for r, c in zip(results, convs, strict=True)]
