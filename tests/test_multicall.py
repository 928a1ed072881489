"""Several tool calls in one assistant turn (issue 30; docs/design.md §14): each call judged by the
policy after the ones before it while the model writes (the allowed tools and values change from
call to call), the turn ending only where the calls' results may come, in both call formats;
``parallel_tool_calls=False`` never yields two calls; transcripts with several calls per message
read back by ``Policy.check`` and ``check-log`` with the decoder's verdict; vLLM's driver (when
vLLM is installed: ``make test-vllm``) writes the same turns as the transformers loop."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ltlagent.agent.chat import ChatAgent, ChatResult, Conversation
from ltlagent.decode.chat import TurnCursor, TurnLanguage, TurnRule
from ltlagent.logic.policy import Policy
from ltlagent.spec.syntax import parse_spec
from ltlagent.text.toolcall import ToolCall, ToolCallError, parse_calls, render_call, render_calls

A = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
     "required": ["n"], "additionalProperties": False}
B = {"type": "object", "properties": {"s": {"type": "string", "maxLength": 3}},
     "required": ["s"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": n, "parameters": s}} for n, s in (("a", A), ("b", B))]

#: After a user message the assistant calls ``a``; right after ``a`` comes ``b`` (before a's result:
#: in the same turn), and ``b`` only right after ``a``. So a turn after a user message is exactly
#: the calls a then b, and b then a is never allowed.
TWO = """(define two-calls
 (:states
   (User (:from user))
   (A (:call "a"))
   (B (:call "b"))
   (Tool (:from tool))
   (Reply (:from assistant)))
 (:format FORMAT)
 (:constraints
   (a-after-user (always (implies User (weak-next A))))
   (b-right-after-a (always (implies A (next B))))
   (b-only-after-a (always (implies B (previously A))))))"""

#: Any calls in any order, but after a user message the first step is a call.
LOOSE = """(define loose
 (:states (User (:from user)) (Call (:call)) (Tool (:from tool)) (Reply (:from assistant)))
 (:format FORMAT)
 (:constraints (call-after-user (always (implies User (weak-next Call))))))"""

PAY = {"type": "object", "properties": {
    "recipient": {"type": "string", "maxLength": 8},
    "amount": {"type": "integer", "minimum": 1, "maximum": 99}},
    "required": ["recipient", "amount"], "additionalProperties": False}
LOOK = {"type": "object", "properties": {"iban": {"type": "string", "maxLength": 8}},
        "required": ["iban"], "additionalProperties": False}
PAY_TOOLS = [{"type": "function", "function": {"name": n, "parameters": s}}
             for n, s in (("send_money", PAY), ("lookup", LOOK))]
#: A payment goes to a destination the user named or one looked up earlier (a first-order rule,
#: enforced by value: issue 28).
NAMED = """(define named
 (:states
   (User (:from user))
   (Tool (:from tool))
   (Pay (:call "send_money") (:args (recipient ?d)))
   (Look (:call "lookup") (:args (iban ?d)))
   (Reply (:from assistant)))
 (:format FORMAT)
 (:constraints
   (named (forall (?d) (always (implies (Pay ?d) (or (once (mentions User ?d)) (once (Look ?d)))))))))"""


def _policy(spec: str, fmt: str) -> Policy:
    return Policy.load(parse_spec(spec.replace("FORMAT", fmt), "t.sexp"))


def _tiny() -> tuple[Any, Any]:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from . import tiny

    tok = tiny.byte_level(500)
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=len(tok) + 3, n_embd=32, n_layer=1, n_head=2, n_positions=4096,
                     bos_token_id=0, eos_token_id=tok.eos_token_id)
    return GPT2LMHeadModel(cfg).eval(), tok


_MODEL: list[tuple[Any, Any]] = []


def _model() -> tuple[Any, Any]:
    if not _MODEL:
        _MODEL.append(_tiny())
    return _MODEL[0]


def _agent(spec: str, fmt: str, *, tools: Sequence[Mapping[str, object]] = TOOLS, mode: str = "policy",
           parallel: bool = True, call_tool: Callable[[str, dict[str, object]], str] | None = None
           ) -> ChatAgent:
    model, tok = _model()
    return ChatAgent(model, tok, tools, call_tool or (lambda name, args: f"{name} done"),
                     policy=_policy(spec, fmt), mode=mode, parallel_tool_calls=parallel)


def _writable(agent: ChatAgent, conv: Conversation, text: str, budget: int = 0) -> bool:
    """Whether the decoder lets ``text`` be the next assistant turn of ``conv``: every token of it
    allowed in turn, calls chained as the agent's loop chains them, and then the end of the turn."""
    rule = agent.turn_rule(conv)
    assert rule is not None
    cur = TurnCursor(agent.index(rule), agent.chain(conv))
    toks = agent.tokenizer(text, add_special_tokens=False).input_ids
    for k, t in enumerate(toks):
        left = budget - k if budget else 0
        if cur.is_dead or not cur.allowed(left)[t]:
            return False
        cur.advance(t)
    return bool(cur.allowed(budget - len(toks) if budget else 0)[agent.vocab.eos_ids[0]])


def _a(n: int) -> ToolCall:
    return ToolCall("a", {"n": n})


def _b(s: str) -> ToolCall:
    return ToolCall("b", {"s": s})


# --- the calls of a turn, judged in order -----------------------------------------------------------

@pytest.mark.parametrize("fmt", ["hermes", "json"])
def test_a_second_call_is_judged_after_the_first(fmt: str) -> None:
    agent = _agent(TWO, fmt)
    assert agent.format == fmt and agent.parallel_tool_calls
    conv = agent.start(lambda m: None, "go")
    assert _writable(agent, conv, render_calls([_a(1), _b("x")], fmt))  # b is allowed after a
    assert _writable(agent, conv, render_call(_a(1), fmt) + "\n \n" + render_call(_b("xy"), fmt))
    assert not _writable(agent, conv, render_calls([_b("x"), _a(1)], fmt))  # b first: never
    assert not _writable(agent, conv, render_call(_a(1), fmt))  # a's result may not come before b
    assert not _writable(agent, conv, render_calls([_a(1), _b("x"), _a(2)], fmt))  # then a again
    assert not _writable(agent, conv, render_calls([_a(1), _a(2)], fmt))
    assert not _writable(agent, conv, render_call(_a(1), fmt) + "\nok " + render_call(_b("x"), fmt))
    # no chain (one call per turn): the turn ends after a, as before
    single = _agent(TWO, fmt, parallel=False)
    sconv = single.start(lambda m: None, "go")
    assert single.chain(sconv) is None
    assert _writable(single, sconv, render_call(_a(1), fmt))
    assert not _writable(single, sconv, render_calls([_a(1), _b("x")], fmt))


@pytest.mark.parametrize("fmt", ["hermes", "json"])
def test_the_second_call_s_values_are_those_the_policy_allows_after_the_first(fmt: str) -> None:
    agent = _agent(NAMED, fmt, tools=PAY_TOOLS)
    conv = agent.start(lambda m: None, "pay DE1 please")

    def pay(to: str) -> ToolCall:
        return ToolCall("send_money", {"recipient": to, "amount": 5})

    look = ToolCall("lookup", {"iban": "QQ7"})
    assert _writable(agent, conv, render_call(pay("DE1"), fmt))  # the user named it
    assert not _writable(agent, conv, render_call(pay("QQ7"), fmt))  # nobody named it yet
    assert _writable(agent, conv, render_calls([look, pay("QQ7")], fmt))  # looked up just before
    assert _writable(agent, conv, render_calls([look, pay("DE1")], fmt))
    assert not _writable(agent, conv, render_calls([look, pay("ZZ9")], fmt))
    assert not _writable(agent, conv, render_calls([pay("QQ7"), look], fmt))
    # the restriction is by value, token by token (issue 28), in the rule of the second call
    rule = agent.next_call(conv, render_call(look, fmt), 0)
    assert rule is not None and rule.after_call and rule.end
    assert dict(rule.values[0]).get("send_money") and not rule.judged


def test_a_second_call_after_which_the_turn_could_not_end_is_not_offered() -> None:
    look = render_call(ToolCall("lookup", {"iban": "QQ7"}))
    agent = _agent(NAMED, "hermes", tools=PAY_TOOLS)
    rule = agent.next_call(agent.start(lambda m: None, "pay DE1"), look, 0)
    assert rule is not None and rule.tools_first == {"send_money", "lookup"}
    # one payment per tool result: after a lookup and a payment, two results in a row would break
    # it, so no second call is offered (the model is not led where no end is allowed)
    spec = NAMED.replace("(:constraints", "(:constraints (pay-after-result (always (implies Tool "
                         "(weak-next Pay))))", 1)
    agent = _agent(spec, "hermes", tools=PAY_TOOLS)
    conv = agent.start(lambda m: None, "pay DE1")
    assert agent.next_call(conv, look, 0) is None
    pay = ToolCall("send_money", {"recipient": "QQ7", "amount": 5})
    assert not _writable(agent, conv, render_calls([ToolCall("lookup", {"iban": "QQ7"}), pay]))


def test_the_turn_after_a_call_may_end_only_where_the_results_may_come() -> None:
    rule = TurnRule(False, frozenset({"b"}), frozenset(), after_call=True, end=False)
    lang = TurnLanguage.build(rule, {"a": A, "b": B}, "hermes")
    assert not lang.accepting[lang.initial] and lang.distance[lang.initial] > 20
    ends = TurnLanguage.build(TurnRule(False, frozenset({"b"}), frozenset(), after_call=True),
                              {"a": A, "b": B}, "hermes")
    assert ends.accepting[ends.initial]
    s = ends.initial
    for byte in b" \n\t ":
        s = int(ends.trans[s, byte])
    assert ends.accepting[s]  # blank text is no step
    assert int(ends.trans[s, ord("x")]) == ends.dead  # but text is not allowed between calls
    with pytest.raises(ValueError, match="after a call has no text"):
        TurnLanguage.build(TurnRule(True, frozenset({"b"}), frozenset(), after_call=True), {"b": B})


def test_a_call_the_budget_cannot_fit_ends_the_turn_with_a_note() -> None:
    agent = _agent(TWO, "hermes")
    conv = agent.start(lambda m: None, "go")
    first = render_call(_a(1))
    assert agent.next_call(conv, first, 0) is not None
    assert agent.next_call(conv, first, 200) is not None
    assert agent.next_call(conv, first, 20) is None  # b's call is longer than 20 bytes
    # the fit is counted in tokens (TurnIndex.need), not bytes: b's call fits in fewer tokens
    then = agent.next_call(conv, first, 0)
    assert then is not None
    index = agent.index(then)
    tokens, nbytes = int(index.need[0]), int(index.lang.distance[0])
    assert tokens < nbytes
    assert agent.next_call(conv, first, tokens + 1) is not None
    assert agent.next_call(conv, first, tokens) is None
    assert f"none fits in the {tokens} tokens left" in conv.result.notes[-1]
    # the decoder then ends the turn after a (well formed; the result will break the policy)
    assert _writable(agent, conv, first, budget=len(first) + 5)
    assert not _writable(agent, conv, render_calls([_a(1), _b("x")]), budget=len(first) + 5)


# --- a random model writes several calls per turn ---------------------------------------------------

def _lines(*said: str) -> Callable[[Sequence[Mapping[str, object]]], str | None]:
    it = iter(said)
    return lambda messages: next(it, None)


def _calls_of(messages: Sequence[Mapping[str, object]]) -> list[list[str]]:
    """Per assistant message with calls, its tools in order (and each answered by its result)."""
    out: list[list[str]] = []
    for k, m in enumerate(messages):
        calls = m.get("tool_calls") or []
        assert isinstance(calls, list)
        if not calls:
            continue
        out.append([c["function"]["name"] for c in calls])
        results = messages[k + 1:k + 1 + len(calls)]
        assert [r["role"] for r in results] == ["tool"] * len(calls)
        assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls]
    return out


def _check_log(policy: Policy, results: Sequence[ChatResult], tmp: Path) -> list[str]:
    """The verdicts ``check-log`` gives the transcripts, written as a JSON Lines log."""
    from ltlagent.checks.logcheck import check_logs

    log = tmp / "log.jsonl"
    log.write_text("".join(json.dumps({"messages": r.messages}) + "\n" for r in results), encoding="utf-8")
    return [r.report.verdict for r in check_logs(policy, [str(log)])]


@pytest.mark.parametrize("fmt", ["hermes", "json"])
def test_a_random_model_is_made_to_write_two_calls_in_one_turn(fmt: str, tmp_path: Path) -> None:
    agent = _agent(TWO, fmt)
    results = [agent.run(_lines("again", "once more"), "go", max_turns=6, max_new_tokens=160,
                         temperature=1.0, seed=seed) for seed in range(2)]
    pairs = 0
    for r in results:
        assert r.malformed == 0 and r.stop_reason in ("user", "max_turns"), r.notes
        for tools in _calls_of(r.messages):
            assert tools == ["a", "b"], tools
            pairs += 1
        assert r.report is not None and r.report.verdict == "ok", r.report
    assert pairs >= 4  # every turn after a user message
    policy = _policy(TWO, fmt)
    assert [policy.check(r.messages).verdict for r in results] == ["ok", "ok"]
    assert _check_log(policy, results, tmp_path) == ["ok", "ok"]


@pytest.mark.parametrize("fmt", ["hermes", "json"])
def test_parallel_tool_calls_false_never_yields_two_calls(fmt: str) -> None:
    counts: dict[bool, list[int]] = {True: [], False: []}
    for parallel in (True, False):
        agent = _agent(LOOSE, fmt, parallel=parallel)
        for seed in range(2):
            r = agent.run(_lines("and?"), "go", max_turns=3, max_new_tokens=220,
                          temperature=1.0, seed=seed)
            assert r.malformed == 0, r.messages
            counts[parallel] += [len(c) for c in _calls_of(r.messages)]
            assert r.report is not None and r.report.verdict == "ok", r.report
    assert counts[False] and set(counts[False]) == {1}
    assert max(counts[True]) >= 2, counts  # the same runs write several calls where they may


@pytest.mark.parametrize("fmt", ["hermes", "json"])
def test_unconstrained_several_calls_run_in_order_unless_parallel_calls_are_off(fmt: str) -> None:
    ran: list[str] = []

    def tool(name: str, args: dict[str, object]) -> str:
        ran.append(f"{name}{json.dumps(args)}")
        return f"{name} ok"

    text = render_calls([_a(1), _b("x"), _a(2)], fmt)
    for parallel in (True, False):
        ran.clear()
        agent = _agent(TWO, fmt, mode="none", parallel=parallel, call_tool=tool)
        conv = agent.start(lambda m: None, "go")
        assert conv.consume(text, 40, True)
        msg = conv.messages[-4 if parallel else -2]
        assert len(msg["tool_calls"]) == (3 if parallel else 1)  # type: ignore[arg-type]
        assert ran == ['a{"n": 1}', 'b{"s": "x"}', 'a{"n": 2}'][:3 if parallel else 1]
        assert conv.result.calls == len(ran)
        assert any("parallel_tool_calls is off" in n for n in conv.result.notes) == (not parallel)
    # calls with text between them are not calls: a malformed turn, recorded as data
    agent = _agent(TWO, fmt, mode="none")
    conv = agent.start(lambda m: None, "go")
    conv.consume(render_call(_a(1), fmt) + " then " + render_call(_b("x"), fmt), 40, True)
    assert conv.result.malformed == 1 and conv.result.calls == 0


def test_a_refused_call_stops_the_turn_there_and_the_calls_before_it_run() -> None:
    ran: list[str] = []
    agent = _agent(NAMED, "hermes", tools=PAY_TOOLS, call_tool=lambda n, a: ran.append(n) or "ok")
    conv = agent.start(lambda m: None, "pay DE1 please")
    look = ToolCall("lookup", {"iban": "QQ7"})
    bad = ToolCall("send_money", {"recipient": "ZZ9", "amount": 5})
    good = ToolCall("send_money", {"recipient": "DE1", "amount": 5})
    # written unconstrained (as a call judged once written is): judged in order before it runs
    assert not conv.consume(render_calls([look, bad, good]), 60, True)
    assert conv.result.stop_reason == "refused" and ran == ["lookup"]
    assert "ZZ9" in conv.result.notes[-1]
    assert [m["role"] for m in conv.messages] == ["user", "assistant", "tool"]
    assert [c["function"]["name"] for c in conv.messages[1]["tool_calls"]] == ["lookup"]  # type: ignore[index]


def test_parse_calls_reads_what_render_calls_writes_and_nothing_else() -> None:
    calls = [ToolCall("a", {"n": 1}), ToolCall("b", {"s": "</tool_call> {"})]
    for fmt in ("hermes", "json"):
        assert parse_calls(render_calls(calls, fmt), fmt) == calls
        assert parse_calls(" " + render_call(calls[0], fmt) + "\n", fmt) == calls[:1]
        for bad in ("", render_call(calls[0], fmt) + " x", render_call(calls[0], fmt) + " []"):
            with pytest.raises(ToolCallError):
                parse_calls(bad, fmt)
    with pytest.raises(ToolCallError, match="ends with </tool_call>"):
        parse_calls('<tool_call>{"name": "a", "arguments": {}}')
    with pytest.raises(ToolCallError, match="call 2"):
        parse_calls(render_call(calls[0]) + "<tool_call>{bad}</tool_call>")


# --- vLLM ---------------------------------------------------------------------------------------------

class _Engine:
    """A stand-in for a ``vllm.LLM``'s engine, for :func:`ltlagent.agent.vllm_chat.run_chats`: each
    request decoded greedily to its end on the transformers model, masked as vLLM's logits
    processor masks a chat turn (its ``TurnOptions`` parsed and built, a ``TurnCursor`` over the
    index, the tokens left as budget, EOS only where nothing is allowed), EOS in its tokens."""

    def __init__(self, model: Any, agent: ChatAgent) -> None:
        self.model, self.tokens, self.eos = model, agent.tokens, agent.vocab.eos_ids[0]
        self.queue: list[tuple[str, list[int], Any]] = []
        self.requests: list[str] = []

    def add_request(self, rid: str, prompt: Mapping[str, list[int]], params: Any) -> None:
        self.queue.append((rid, list(prompt["prompt_token_ids"]), params))
        self.requests.append(rid)

    def step(self) -> list[Any]:
        import torch

        from ltlagent.agent.chat import next_token
        from ltlagent.decode.vllm_processor import TurnOptions

        if not self.queue:
            return []
        rid, ids, params = self.queue.pop(0)
        opts = TurnOptions.parse(params.extra_args)
        cur = TurnCursor(opts.build(self.tokens)) if opts is not None else None
        out: list[int] = []
        with torch.no_grad():
            while len(out) < params.max_tokens:
                logits = self.model(input_ids=torch.tensor([ids + out])).logits[0, -1]
                tok = next_token(logits, cur, params.max_tokens - len(out))
                out.append(self.eos if tok is None else tok)
                if out[-1] == self.eos:
                    break
        ended = out[-1:] == [self.eos]
        done = SimpleNamespace(token_ids=out, finish_reason="stop" if ended else "length",
                               stop_reason=None)
        return [SimpleNamespace(request_id=rid, finished=True, outputs=[done])]


def _eager() -> tuple[Any, Any]:
    """A random model that writes no blank bytes where it may write anything else (its logits of
    the tokens that begin with a blank byte lowered): greedy, it calls at once, where the random
    model writes blanks until the budget makes it call."""
    import torch

    from ltlagent.chat.events import BLANK

    model, tok = _tiny()
    vocab = ChatAgent(model, tok, TOOLS, lambda n, a: "", mode="none").vocab
    bias = torch.zeros(model.lm_head.weight.shape[0])
    for t in range(min(vocab.size, bias.shape[0])):
        b = vocab.token_bytes(t)
        if b and chr(b[0]) in BLANK:
            bias[t] = -30.0
    head = torch.nn.Linear(model.lm_head.in_features, bias.shape[0], bias=True)
    head.weight = model.lm_head.weight
    head.bias = torch.nn.Parameter(bias)
    model.lm_head = head
    return model, tok


@pytest.mark.parametrize("fmt", ["hermes", "json"])
def test_vllm_s_driver_writes_a_turn_of_two_calls_as_the_transformers_loop_does(
        fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", SimpleNamespace(SamplingParams=SimpleNamespace))
    model, tok = _eager()
    policy = _policy(TWO, fmt)
    want = ChatAgent(model, tok, TOOLS, lambda n, a: f"{n} done", policy=policy)
    engine = _Engine(model, want)
    got = ChatAgent(SimpleNamespace(llm_engine=engine), tok, TOOLS, lambda n, a: f"{n} done",
                    policy=policy)
    kw: dict[str, Any] = {"max_turns": 1, "max_new_tokens": 140}
    firsts = ["go", "start"]
    results = got.run_batch([(_lines("more"), f) for f in firsts], **kw)
    for g, first in zip(results, firsts, strict=True):
        w = want.run(_lines("more"), first, **kw)
        assert (g.messages, g.tokens, g.notes, g.stop_reason) == \
            (w.messages, w.tokens, w.notes, w.stop_reason)
        assert g.report is not None and g.report.verdict == "ok", g.report
        assert _calls_of(g.messages)[0] == ["a", "b"]
    # the first turn's a, then b in a request of its own (ltlagent-chat-TAG-K-TURN-1)
    assert sum(len(r.split("-")) == 6 for r in engine.requests) == len(firsts)


# --- vLLM ---------------------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")  # vLLM's own
def test_vllm_writes_the_turns_of_several_calls_the_transformers_loop_writes() -> None:
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
    vllm = pytest.importorskip("vllm")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ltlagent.agent.runner import BUNDLED_MODEL
    from ltlagent.decode.vllm_processor import LtlLogitsProcessor

    context = 4096
    llm = vllm.LLM(model=str(BUNDLED_MODEL), logits_processors=[LtlLogitsProcessor], dtype="float32",
                   max_model_len=context, hf_overrides={"max_position_embeddings": context},
                   enforce_eager=True, max_num_seqs=8, seed=0, kv_cache_memory_bytes=256 << 20,
                   gpu_memory_utilization=0.3)
    tok = AutoTokenizer.from_pretrained(str(BUNDLED_MODEL))
    model = AutoModelForCausalLM.from_pretrained(str(BUNDLED_MODEL)).eval()
    firsts = ["go", "start", "hello"]
    kw: dict[str, Any] = {"max_turns": 4, "max_new_tokens": 128}
    continued = 0
    for spec in (TWO, LOOSE):
        policy = _policy(spec, "hermes")
        got = ChatAgent(llm, llm.get_tokenizer(), TOOLS, lambda n, a: f"{n} done",
                        policy=policy).run_batch([(_lines("more"), f) for f in firsts], **kw)
        want = [ChatAgent(model, tok, TOOLS, lambda n, a: f"{n} done", policy=policy)
                .run(_lines("more"), f, **kw) for f in firsts]
        for g, w in zip(got, want, strict=True):
            assert (g.messages, g.tokens, g.notes, g.stop_reason) == \
                (w.messages, w.tokens, w.notes, w.stop_reason)
            assert g.report is not None and w.report is not None and g.report.verdict == w.report.verdict
        continued += sum(any("none fits" in n for n in r.notes) for r in got)
    # the bundled model writes blanks until the budget makes it call, so the policy's second call
    # does not fit: the same turns and notes on both backends (tests/test_multicall.py's fake engine
    # checks turns of two calls through the same driver)
    assert continued > 0
