"""Chat conversations on vLLM (issue 18): many :class:`~ltlagent.agent.chat.ChatAgent`
conversations at once, each assistant turn one vLLM request.

``ChatAgent(llm, llm.get_tokenizer(), tools, call_tool, …).run_batch(chats)`` (``llm`` a
``vllm.LLM`` built with ``logits_processors=[LtlLogitsProcessor]``) comes here with its started
conversations. This module sits below :mod:`ltlagent.agent.chat` (which imports it): it knows the
agent and its conversations only as the protocols :class:`ChatEngine` and :class:`ChatTurns`
state (docs/design.md §10: no import cycles). A conversation's
next turn is submitted as soon as its previous one has been consumed (tool run, user asked), while
the others decode. A constrained turn carries its :class:`~ltlagent.decode.chat.TurnRule` as
:class:`~ltlagent.decode.vllm_processor.TurnOptions` in ``extra_args``, and the processor masks it
with the same :class:`~ltlagent.decode.chat.TurnIndex` masks (and token budget) as the
transformers loop, so greedy conversations are the same on both backends.

A turn of several calls (issue 30) is several requests: the engine cannot ask the conversation
what the policy allows after a call, so a request's language ends at a complete call (EOS is then
the only token allowed: forced, not the model's choice, and not counted), and the driver asks
:meth:`ChatEngine.next_call` for the rule of what follows, submitting it as a new request whose
prompt is the turn's prompt and tokens so far (vLLM's prefix cache holds them), with the tokens left.
Its first token is sampled from the logits after the call, as the transformers loop samples it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ltlagent.decode.vllm_processor import EXTRA_KEY, TurnOptions
from ltlagent.errors import UsageError

if TYPE_CHECKING:
    from ltlagent.decode.chat import TurnRule
    from ltlagent.decode.vocab import Vocab

__all__ = ["run_chats", "engine_eos", "ChatEngine", "ChatTurns", "TurnRecord"]


class TurnRecord(Protocol):
    """What :func:`run_chats` writes into a conversation's result
    (:class:`~ltlagent.agent.chat.ChatResult`)."""

    turns: int
    stop_reason: str
    notes: list[str]


class ChatTurns(Protocol):
    """A conversation between turns, as :func:`run_chats` drives it
    (:class:`~ltlagent.agent.chat.Conversation`)."""

    @property
    def messages(self) -> Sequence[Mapping[str, object]]: ...
    @property
    def result(self) -> TurnRecord: ...
    def wants_turn(self, max_turns: int) -> bool: ...
    def consume(self, text: str, used: int, ended: bool) -> bool: ...
    def finish(self) -> object: ...


C = TypeVar("C", bound=ChatTurns)
C_contra = TypeVar("C_contra", bound=ChatTurns, contravariant=True)


class ChatEngine(Protocol[C_contra]):
    """What :func:`run_chats` needs of the agent (:class:`~ltlagent.agent.chat.ChatAgent`)."""

    @property
    def model(self) -> Any: ...
    @property
    def tokenizer(self) -> Any: ...
    @property
    def vocab(self) -> Vocab: ...
    @property
    def schemas(self) -> Mapping[str, Mapping[str, object]]: ...
    @property
    def format(self) -> str: ...
    @property
    def fields(self) -> Mapping[str, Mapping[str, str]] | None: ...
    def render(self, messages: Sequence[Mapping[str, object]]) -> str: ...
    def turn_rule(self, conv: C_contra) -> TurnRule | None: ...
    def next_call(self, conv: C_contra, text: str, budget: int) -> TurnRule | None: ...
    def split(self, text: str) -> tuple[str, str | None]: ...
    def turn_text(self, tokens: Sequence[int], constrained: bool) -> str: ...


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


@dataclass(frozen=True)
class _Part:
    """One request of a turn: its conversation, whether it is constrained, the turn's prompt ids,
    the tokens the turn wrote before this request, the turn's token budget, its number."""

    conv: int
    constrained: bool
    ids: list[int]
    before: list[int]
    left: int
    number: int = 0


def run_chats(agent: ChatEngine[C], convs: Sequence[C], *, max_turns: int = 12,
              max_new_tokens: int = 96, temperature: float = 0.0, seed: int | None = None) -> None:
    """Run the started conversations ``convs`` concurrently on ``agent.model`` (a ``vllm.LLM``)
    until each is finished (its ``finish()`` called once, when it ends, so that its time is its
    own). With a temperature and ``seed``, turn ``t`` of conversation ``k`` is seeded by
    ``seed + 1000 * k + t`` (the request after its call ``j``, by that plus ``100 * j``)."""
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
    finished = [False] * len(convs)
    tag = uuid.uuid4().hex[:8]
    pending: dict[str, _Part] = {}

    def request(part: _Part, rule: TurnRule | None) -> None:
        """Send one request of a turn: its prompt and the turn's tokens so far, the rest of its
        budget, its rule's options."""
        conv = convs[part.conv]
        extra = None if rule is None else {
            EXTRA_KEY: TurnOptions.encode(rule, agent.schemas, agent.format, agent.fields, eos)}
        kw: dict[str, Any] = {"temperature": temperature}
        if seed is not None and temperature > 0:
            kw["seed"] = seed + 1000 * part.conv + conv.result.turns + 100 * part.number
        rid = f"ltlagent-chat-{tag}-{part.conv}-{conv.result.turns}" + \
            (f"-{part.number}" if part.number else "")
        engine.add_request(rid, {"prompt_token_ids": part.ids + part.before}, vllm.SamplingParams(
            max_tokens=part.left - len(part.before), stop_token_ids=eos, extra_args=extra,
            skip_special_tokens=True, **kw))
        pending[rid] = part

    def submit(k: int) -> None:
        """Send conversation ``k``'s next turn, or finish it."""
        conv = convs[k]
        if not conv.wants_turn(max_turns):
            conv.finish()
            finished[k] = True
            return
        ids = list(agent.tokenizer(agent.render(conv.messages), add_special_tokens=False).input_ids)
        left = max_new_tokens if n_ctx is None else min(max_new_tokens, n_ctx - len(ids))
        if left <= 0:
            conv.result.stop_reason = "context_full"
            conv.result.notes.append(f"the prompt has {len(ids)} tokens; the model's context "
                                     f"holds {n_ctx}")
            conv.finish()
            finished[k] = True
            return
        rule = agent.turn_rule(conv)
        request(_Part(k, rule is not None, ids, [], left), rule)

    for k in range(len(convs)):
        submit(k)
    while pending:
        for out in engine.step():
            if not out.finished or out.request_id not in pending:
                continue
            part = pending.pop(out.request_id)
            k = part.conv
            done = out.outputs[0]
            toks = [int(t) for t in done.token_ids]
            eos_last = bool(toks) and toks[-1] in eos_set
            body = toks[:-1] if eos_last else toks
            # an EOS the engine left out of the tokens: a stop with no stop string
            ended = eos_last or (done.finish_reason == "stop" and done.stop_reason is None)
            written = part.before + body
            if part.constrained and ended and len(written) < part.left and \
                    agent.split(agent.turn_text(body, True))[1] is not None:
                # this request wrote a call: what may follow it is another request
                rule = agent.next_call(convs[k], agent.turn_text(written, True),
                                       part.left - len(written))
                if rule is not None:
                    request(_Part(k, True, part.ids, written, part.left, part.number + 1), rule)
                    continue
            if convs[k].consume(agent.turn_text(written, part.constrained), len(written) + int(ended),
                                ended):
                submit(k)
            else:
                convs[k].finish()
                finished[k] = True
    for k, conv in enumerate(convs):
        if not finished[k]:
            conv.finish()
