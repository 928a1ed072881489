"""A multi-turn, tool-calling chat agent whose tool calls a policy governs while the model writes
(issue 18; docs/design.md §13).

:class:`ChatAgent` runs one conversation: user turns come from a callable (a scripted user for
tests and experiments), assistant turns from a Hugging Face causal LM, tool results from a
dispatcher. Each assistant turn is free text, or text and tool calls in the ``hermes`` format
(``<tool_call>\\n{"name": …, "arguments": …}\\n</tool_call>``) or the ``json`` format: one call, or
with ``parallel_tool_calls`` (the default, as OpenAI's) several, one after another with only blank
text between them, each judged by the policy after the ones before it (issue 30). Three modes:

- ``none``: unconstrained; the call is parsed afterwards, and a malformed call or an unknown tool
  becomes an error result (the run goes on);
- ``format``: names and argument schemas constrained (any tool, any time);
- ``policy``: what the policy allows *now* (:class:`~ltlagent.logic.policy.PolicyCursor`): a
  forbidden tool cannot be written at all, and text only where an assistant text step is allowed.

The transcript is an OpenAI-format message list (a turn's calls: one assistant message with
several ``tool_calls``, then one ``tool`` message per call, in order), so ``check-log`` (and
:meth:`Policy.check`) re-check it; the policy cursor is carried across turns, user messages and tool
results included.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ltlagent.agent.kvcache import cache_arg, cache_of
from ltlagent.agent.runner import eos_token_ids
from ltlagent.agent.tools import function_schemas
from ltlagent.chat.events import BLANK, Event, message_events
from ltlagent.decode.chat import (
    CALL_MARKERS,
    Chain,
    TokenBytes,
    TurnCursor,
    TurnIndex,
    TurnLanguage,
    TurnRule,
    ValueRules,
)
from ltlagent.decode.vocab import Vocab, vocab_from_tokenizer
from ltlagent.errors import UsageError
from ltlagent.logic.policy import ConversationReport, Policy, PolicyCursor
from ltlagent.text.jsonschema import schema_block
from ltlagent.text.schemaread import narrow, parse_schema
from ltlagent.text.toolcall import CALL_GAP, ToolCall, ToolCallError, parse_calls, render_call
from ltlagent.text.values import ValueTerm

__all__ = ["ChatAgent", "ChatResult", "Conversation", "MODES", "UserFn", "ToolFn", "next_token"]

MODES = ("none", "format", "policy")
#: The user: given the conversation so far, the next user message, or None to end it.
UserFn = Callable[[Sequence[Mapping[str, object]]], str | None]
#: The tools: name and arguments → the result text (anything else is sent as JSON, and an exception
#: as an error result, as the guard's ``FunctionTool`` does).
ToolFn = Callable[[str, dict[str, object]], object]
_PROBE = "…"  # an assistant text used to ask the policy whether text may come now
_PROBE2 = "‽"  # another: value terms after text that differ between the two depend on the text


@dataclass
class ChatResult:
    """One conversation: the transcript and what it cost."""

    messages: list[dict[str, object]]
    mode: str
    turns: int = 0  # assistant turns
    calls: int = 0  # tool calls made
    malformed: int = 0  # calls that could not be parsed or name no tool (mode none)
    tokens: int = 0  # tokens generated
    seconds: float = 0.0
    #: "user" (the user ended it), "max_turns", "dead" (policy broken, mode policy), "refused" (a
    #: call judged once written broke the policy: not run, not in the transcript; mode policy),
    #: "user-error" (the user callable raised or answered other than text or None: see notes)
    stop_reason: str = ""
    report: ConversationReport | None = None  # the policy's verdict on the transcript
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"mode": self.mode, "turns": self.turns, "calls": self.calls,
                "malformed": self.malformed, "tokens": self.tokens,
                "seconds": round(self.seconds, 3), "stop_reason": self.stop_reason,
                "verdict": self.report.verdict if self.report else None,
                "violations": [v.to_dict() for v in self.report.violations] if self.report else [],
                "notes": self.notes, "messages": self.messages}


class ChatAgent:
    """A chat agent over one model, its tools and (optionally) a policy."""

    def __init__(self, model: Any, tokenizer: Any, tools: Sequence[Mapping[str, object]],
                 call_tool: ToolFn, *, policy: Policy | str | None = None, mode: str = "policy",
                 format: str | None = None, system: str | None = None,
                 fields: Mapping[str, Mapping[str, str]] | None = None,
                 examples: Sequence[Mapping[str, object]] = (),
                 parallel_tool_calls: bool = True) -> None:
        if mode not in MODES:
            raise UsageError(f"unknown mode {mode!r}; modes are {', '.join(MODES)}")
        self.policy = Policy.load(policy) if isinstance(policy, str) else policy
        if mode == "policy" and self.policy is None:
            raise UsageError("mode 'policy' needs a policy")
        # the call format: as given, else the spec's (:format …), else hermes
        said = self.policy.spec.call_format if self.policy is not None else None
        if format is not None and said is not None and format != said:
            raise UsageError(f"format {format!r} given, but the policy's spec says "
                             f"(:format {said})")
        format = format or said or "hermes"
        if format not in CALL_MARKERS:
            raise UsageError(f"unknown tool-call format {format!r}",
                             hint=f"use one of {', '.join(CALL_MARKERS)}")
        self.model = model
        self.tokenizer = tokenizer
        self.schemas = function_schemas(tools)
        self.tools = [dict(t) for t in tools]
        self.call_tool = call_tool
        self.mode = mode
        self.format = format
        self.system = system
        self.fields = fields
        if mode != "none":
            self._compile()
        #: few-shot messages shown to the model after the system message; not in the transcript,
        #: so the policy never sees them
        self.examples = [dict(m) for m in examples]
        #: several calls in one turn (issue 30); False: at most one (a model left unconstrained
        #: that writes more has only its first run)
        self.parallel_tool_calls = parallel_tool_calls
        if hasattr(model, "llm_engine"):  # a vllm.LLM (run_batch: ltlagent.agent.vllm_chat)
            from ltlagent.agent.vllm_chat import engine_eos

            eos = engine_eos(model, tokenizer)
        else:
            eos = eos_token_ids(model, tokenizer)
        self.vocab: Vocab = vocab_from_tokenizer(tokenizer, eos)
        self.tokens = TokenBytes.of(self.vocab)  # shared by the turn indexes of every rule
        self._indexes: dict[TurnRule, TurnIndex] = {}

    def _compile(self) -> None:
        """Compile every tool's argument schema (narrowed by ``fields``) now, so that one the
        decoder cannot enforce is refused here with its tool and JSON pointer, not when its tool
        first becomes allowed, after other tools ran (the parts are cached for the turn tables)."""
        for name in self.fields or {}:
            if name not in self.schemas:
                raise UsageError(f"fields for {name!r}, which is not among the tools "
                                 f"({', '.join(self.schemas)})")
        for name, schema in self.schemas.items():
            try:
                t = parse_schema(schema)
                if self.fields and name in self.fields:
                    t = narrow(t, self.fields[name])
                schema_block(t)
            except UsageError as e:
                raise UsageError(f"tool {name!r}: {e}", hint=e.hint) from e

    # -- prompts
    def render(self, messages: Sequence[Mapping[str, object]]) -> str:
        """The prompt text of a conversation, ending where the assistant's next turn begins.

        A chat template that knows tools gets them (``apply_chat_template(tools=…)``); otherwise the
        tools are described in the system message in the Hermes manner, calls are written as text
        in the assistant's turn and results as a ``tool`` turn (SmolLM2's template, for one, knows
        no tools; with results in a user turn it wrote ``<tool_response>`` blocks of its own); a
        template that refuses a ``tool`` role gets them as ``<tool_response>`` user turns."""
        tok = self.tokenizer
        template = getattr(tok, "chat_template", None) or ""
        if self.examples:
            lead = 1 if messages and messages[0].get("role") == "system" else 0
            messages = [*messages[:lead], *self.examples, *messages[lead:]]
        if "tool" in template:
            return str(tok.apply_chat_template(list(messages), tools=self.tools, tokenize=False,
                                               add_generation_prompt=True))
        out: list[dict[str, object]] = []
        head = self.tool_instructions()
        for m in messages:
            role, content = m.get("role"), m.get("content") or ""
            if role == "system":
                out.append({"role": "system", "content": f"{content}\n\n{head}"})
                head = ""
            elif role == "assistant" and m.get("tool_calls"):
                calls = m.get("tool_calls")
                assert isinstance(calls, list)
                text = str(content) + CALL_GAP.join(self._render_call(c) for c in calls)
                out.append({"role": "assistant", "content": text})
            elif role == "tool":
                out.append({"role": "tool", "content": str(content)})
            else:
                out.append({"role": str(role), "content": str(content)})
        if head:
            out.insert(0, {"role": "system", "content": head})
        if template:
            try:
                return str(tok.apply_chat_template(out, tokenize=False,
                                                   add_generation_prompt=True))
            except Exception:  # a template that knows only user and assistant turns
                out = [{"role": "user", "content": f"<tool_response>\n{m['content']}\n"
                        "</tool_response>"} if m["role"] == "tool" else m for m in out]
                return str(tok.apply_chat_template(out, tokenize=False,
                                                   add_generation_prompt=True))
        return "".join(f"{m['role']}: {m['content']}\n" for m in out) + "assistant: "

    def tool_instructions(self) -> str:
        """The tools and how to call them, for a chat template that knows no tools."""
        sigs = "\n".join(json.dumps(t, ensure_ascii=False) for t in self.tools)
        if self.format == "hermes":
            many = "one or more tools per turn, one <tool_call> block each" \
                if self.parallel_tool_calls else "one tool per turn"
            return (f"You may call {many}. The tools:\n<tools>\n" + sigs +
                    "\n</tools>\nTo call a tool, write\n<tool_call>\n{\"name\": NAME, "
                    "\"arguments\": {…}}\n</tool_call>")
        many = "one or more tools per turn, one JSON object per line" \
            if self.parallel_tool_calls else "one tool per turn"
        return (f"You may call {many}. The tools:\n" + sigs + "\nTo call a tool, answer "
                "with only the JSON object {\"name\": NAME, \"arguments\": {…}}")

    def _render_call(self, call: object) -> str:
        fn = call.get("function", {}) if isinstance(call, Mapping) else {}
        assert isinstance(fn, Mapping)
        args = fn.get("arguments", "{}")
        return render_call(ToolCall(str(fn.get("name")), json.loads(args) if isinstance(args, str)
                                    else args), self.format)

    # -- constraints
    def rule(self, cursor: PolicyCursor | None) -> TurnRule:
        """What the next turn may be: any text and any tool (mode format), or what the policy
        allows now (mode policy)."""
        names = tuple(self.schemas)
        if cursor is None:
            every = frozenset(names)
            return TurnRule(True, every, every)
        text_ok = cursor.decide(Event.say("assistant", _PROBE)).allowed
        first = cursor.call_options(names)
        values_first, judged = _value_rules(cursor, first)
        after: dict[str, tuple[tuple[str, str], ...]] = {}
        values_after: ValueRules = ()
        if text_ok:
            probe = cursor.copy()
            probe.push(Event.say("assistant", _PROBE))
            after = probe.call_options(names)
            values_after, judged_after = _value_rules(probe, after)
            other = cursor.copy()
            other.push(Event.say("assistant", _PROBE2))
            if _value_rules(other, after) != (values_after, judged_after):
                # the allowed values depend on what the text says: judged once written
                judged_after |= {t for t, _ in values_after}
                values_after = ()
            judged |= judged_after
        return TurnRule(text_ok, frozenset(first), frozenset(after),
                        (tuple(sorted((t, f) for t, f in first.items() if f)),
                         tuple(sorted((t, f) for t, f in after.items() if f))),
                        (values_first, values_after), frozenset(judged))

    def after_rule(self, cursor: PolicyCursor, calls: int) -> TurnRule:
        """What may follow the ``calls`` calls of a turn so far, the policy at ``cursor`` after
        them (mode policy): the turn may end if the calls' results, which come next, are allowed
        (``end``); another call of a tool the policy allows now, narrowed and restricted by value
        as a first call is, where the turn could end after it, or of any allowed tool where it
        could end after none (one call of lookahead, design §14)."""
        names = tuple(self.schemas)
        end = _may_end(cursor, calls)
        options = cursor.call_options(names)
        offered = {t: f for t, f in options.items()
                   if _may_end(_after_call(cursor, t), calls + 1)}
        if not offered and not end:
            offered = options
        values, judged = _value_rules(cursor, offered)
        return TurnRule(False, frozenset(offered), frozenset(),
                        (tuple(sorted((t, f) for t, f in offered.items() if f)), ()), (values, ()),
                        frozenset(judged), after_call=True, end=end)

    def next_call(self, conv: Conversation, text: str, budget: int) -> TurnRule | None:
        """The rule of what may follow in ``conv``'s turn being written, whose text so far ``text``
        ends with a complete call, with ``budget`` tokens left (EOS included; 0: no bound); None
        when the turn ends there (``parallel_tool_calls`` off, mode none, no tool allowed next, a
        call the policy refuses: judged when the turn is consumed). Where the policy wants another
        call but none fits in the budget, the turn ends after all, with a note (a call cut by the
        budget would be no call; the calls' results then break the policy)."""
        if not self.parallel_tool_calls or self.mode == "none":
            return None
        try:
            before, calls = self.parse_turn(text)
        except ToolCallError:
            return None
        if not calls or any(c.name not in self.schemas for c in calls):
            return None
        if self.mode == "format":
            rule = TurnRule(False, frozenset(self.schemas), frozenset(), after_call=True)
        else:
            if conv.cursor is None:
                return None
            probe = conv.cursor.copy()
            for ev in message_events(_assistant(before, calls, 0), len(conv.messages)):
                if not probe.push(ev).allowed:
                    return None
            rule = self.after_rule(probe, len(calls))
        if not rule.tools_first:
            return None
        if not rule.end and budget > 0 and int(self.index(rule).need[0]) > budget - 1:
            conv.result.notes.append(f"turn {conv.result.turns + 1}: the policy wants another call "
                                     f"after call {len(calls)}, but none fits in the {budget} "
                                     "tokens left: the turn ends")
            return None
        self._note_rule(conv, rule)
        return rule

    def chain(self, conv: Conversation) -> Chain | None:
        """What a :class:`TurnCursor` of ``conv``'s next turn asks when a call is complete
        (:meth:`next_call`, as an index); None where a turn has at most one call."""
        if not self.parallel_tool_calls or self.mode == "none":
            return None

        def then(data: bytes, budget: int) -> TurnIndex | None:
            rule = self.next_call(conv, data.decode("utf-8", errors="replace"), budget)
            return None if rule is None else self.index(rule)

        return then

    def index(self, rule: TurnRule) -> TurnIndex:
        """The turn index of ``rule``, built once per distinct rule (equal value terms share one)."""
        idx = self._indexes.get(rule)
        if idx is None:
            lang = TurnLanguage.build(rule, self.schemas, self.format, self.fields)
            idx = self._indexes[rule] = TurnIndex(lang, self.tokens)
        return idx

    # -- generation
    def generate(self, prompt: str, index: TurnIndex | None, *, max_new_tokens: int,
                 temperature: float = 0.0, rng: Any = None,
                 then: Chain | None = None) -> tuple[str, int, bool]:
        """One assistant turn: its text, the tokens it took, and whether it ended on its own
        (EOS) rather than on the budget; ``then``: what may follow a call (:meth:`chain`)."""
        import torch

        ids = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
        eos = set(self.vocab.eos_ids)
        cur = TurnCursor(index, then) if index is not None else None
        out: list[int] = []
        past = None
        step_ids = ids
        ended = False
        with torch.no_grad():
            for n in range(max_new_tokens):
                res = self.model(input_ids=step_ids, use_cache=True, **cache_arg(self.model, past))
                past = cache_of(res)
                tok = next_token(res.logits[0, -1], cur, max_new_tokens - n, temperature, rng)
                if tok is None:
                    break
                if tok in eos:
                    ended = True
                    break
                out.append(tok)
                step_ids = torch.tensor([[tok]])
        return self.turn_text(out, cur is not None), len(out) + int(ended), ended

    def split(self, text: str) -> tuple[str, str | None]:
        """A turn's text before the call marker, and the call's text (None: no call)."""
        marker = CALL_MARKERS[self.format]
        if self.format == "json":
            return ("", text) if text.lstrip(BLANK).startswith("{") else (text, None)
        at = text.find(marker)
        return (text, None) if at < 0 else (text[:at], text[at:])

    def parse_turn(self, text: str) -> tuple[str, list[ToolCall]]:
        """A turn's text before its calls, and its calls in order (none: a text turn);
        :class:`ToolCallError` where what follows the first call marker is not calls."""
        before, call_text = self.split(text)
        return before, ([] if call_text is None else parse_calls(call_text, self.format))

    # -- conversations
    def start(self, user: UserFn, first: str) -> Conversation:
        """A conversation begun by the user's ``first`` message, its first turn not yet written."""
        return Conversation(self, user, first)

    def turn_rule(self, conv: Conversation) -> TurnRule | None:
        """The rule of ``conv``'s next turn (None: unconstrained, mode ``none``)."""
        if self.mode == "policy":
            rule = self.rule(conv.cursor)
            self._note_rule(conv, rule)
            return rule
        if self.mode == "format":
            return self.rule(None)
        return None

    def _note_rule(self, conv: Conversation, rule: TurnRule) -> None:
        """Note, once per conversation, the tools of ``rule`` whose values are judged once written."""
        notes = [f"{t}: a rule constrains its arguments outside the fragment enforced token by "
                 "token; its calls are written unconstrained by value and judged once written"
                 for t in sorted(rule.judged)]
        if any(vals for vals in rule.values):
            notes += [f"{t}.{k}: not restricted by value ({why}); the call is judged once written"
                      for t, k, why in self.index(rule).lang.unenforced]
        for n in notes:
            if n not in conv.result.notes:
                conv.result.notes.append(n)

    def turn_text(self, tokens: Sequence[int], constrained: bool) -> str:
        """A turn's text from its tokens (EOS left out): the detokenised text, or for a constrained
        turn the tokens' bytes as the turn DFA read them."""
        eos = set(self.vocab.eos_ids)
        toks = [t for t in tokens if t not in eos]
        if not constrained:
            return str(self.tokenizer.decode(toks, skip_special_tokens=True))
        return b"".join(self.vocab.token_bytes(t) for t in toks).decode("utf-8", errors="replace")

    def run(self, user: UserFn, first: str, *, max_turns: int = 12, max_new_tokens: int = 96,
            temperature: float = 0.0, seed: int = 0) -> ChatResult:
        """One conversation, started by the user's ``first`` message (transformers, KV-cached; on
        a ``vllm.LLM``, :meth:`run_batch` of one)."""
        if hasattr(self.model, "llm_engine"):
            return self.run_batch([(user, first)], max_turns=max_turns,
                                  max_new_tokens=max_new_tokens, temperature=temperature,
                                  seed=seed)[0]
        import torch

        rng = torch.Generator().manual_seed(seed)
        conv = self.start(user, first)
        while conv.wants_turn(max_turns):
            rule = self.turn_rule(conv)
            index = self.index(rule) if rule is not None else None
            then = self.chain(conv) if index is not None else None
            text, used, ended = self.generate(self.render(conv.messages), index,
                                              max_new_tokens=max_new_tokens,
                                              temperature=temperature, rng=rng, then=then)
            conv.consume(text, used, ended)
        return conv.finish()

    def run_batch(self, chats: Sequence[tuple[UserFn, str]], *, max_turns: int = 12,
                  max_new_tokens: int = 96, temperature: float = 0.0,
                  seed: int | None = None) -> list[ChatResult]:
        """Many conversations (user, first message): on a ``vllm.LLM`` all at once
        (:func:`ltlagent.agent.vllm_chat.run_chats`), else one after the other with :meth:`run`."""
        if hasattr(self.model, "llm_engine"):
            from ltlagent.agent.vllm_chat import run_chats

            convs = [self.start(u, f) for u, f in chats]
            run_chats(self, convs, max_turns=max_turns, max_new_tokens=max_new_tokens,
                      temperature=temperature, seed=seed)
            return [c.result for c in convs]
        return [self.run(u, f, max_turns=max_turns, max_new_tokens=max_new_tokens,
                         temperature=temperature, seed=(seed or 0) + k)
                for k, (u, f) in enumerate(chats)]


class Conversation:
    """One conversation between turns, whatever generates them: the messages, the policy cursor
    carried across them, and what it cost; :meth:`consume` takes a finished assistant turn."""

    def __init__(self, agent: ChatAgent, user: UserFn, first: str) -> None:
        self.agent = agent
        self.user = user
        self.t0 = time.perf_counter()
        self.messages: list[dict[str, object]] = []
        if agent.system is not None:
            self.messages.append({"role": "system", "content": agent.system})
        self.messages.append({"role": "user", "content": first})
        self.result = ChatResult(self.messages, agent.mode)
        self.cursor = agent.policy.cursor() if agent.policy is not None else None
        if self.cursor is not None:
            self.cursor.push_messages(self.messages)
        self.done = False
        self._calls = 0

    def wants_turn(self, max_turns: int) -> bool:
        """Whether the assistant writes another turn (False: the conversation is over)."""
        if not self.done and self.result.turns >= max_turns:
            self.result.stop_reason = "max_turns"
            self.done = True
        return not self.done

    def consume(self, text: str, used: int, ended: bool) -> bool:
        """Take one assistant turn (its text, tokens, whether it ended on its own): split and parse
        it, run its tools in order or ask the user, and move the policy. True when the conversation
        goes on."""
        agent, result, messages = self.agent, self.result, self.messages
        result.turns += 1
        result.tokens += used
        if not ended:
            result.notes.append(f"turn {result.turns}: cut at the token budget")
        calls: list[ToolCall] = []
        error = None
        try:
            before, calls = agent.parse_turn(text)
            unknown = [c.name for c in calls if c.name not in agent.schemas]
            if unknown:
                error = f"unknown tool {unknown[0]!r}"
        except ToolCallError as e:
            before, error = text, str(e)
        if error is None and len(calls) > 1 and not agent.parallel_tool_calls:
            result.notes.append(f"turn {result.turns}: {len(calls)} calls written, but "
                                "parallel_tool_calls is off: only the first runs")
            calls = calls[:1]
        if error is not None:  # what the model wrote, as text, and an error result
            messages.append({"role": "assistant", "content": text})
            result.malformed += 1
            messages.append({"role": "tool", "content": f"error: malformed tool call: {error}"})
            if self._push(len(messages) - 2):
                self.done = True
            return not self.done
        msg = _assistant(before, calls, self._calls + 1)
        start = len(messages)
        if calls:
            admitted = self._admit(msg, calls)
            if admitted < len(calls):
                if not admitted:
                    return False
                calls = calls[:admitted]
                msg = _assistant(before, calls, self._calls + 1)
        messages.append(msg)
        for call in calls:
            self._calls += 1
            result.calls += 1
            out = self.tool_result(call)
            messages.append({"role": "tool", "tool_call_id": f"call_{self._calls}", "content": out})
        if not calls:
            reply = self._ask_user()
            if reply is None:
                result.stop_reason = result.stop_reason or "user"
                self._push(start)
                self.done = True
                return False
            messages.append({"role": "user", "content": reply})
        if self._push(start) or self.done:
            self.done = True
        return not self.done

    def tool_result(self, call: ToolCall) -> str:
        """Run ``call``'s tool: its result as the text of the ``tool`` message, as the guard's
        ``FunctionTool`` gives it: a string as it is, anything else as JSON, an exception the tool
        raised as ``error: Type: message`` (the tool's failure is data for the model, and the run
        goes on); a note says which tool did either."""
        try:
            out = self.agent.call_tool(call.name, dict(call.arguments))
        except Exception as e:
            self.result.notes.append(f"turn {self.result.turns}: tool {call.name!r} raised "
                                     f"{type(e).__name__}: {e}")
            return f"error: {type(e).__name__}: {e}"
        if isinstance(out, str):
            return out
        self.result.notes.append(f"turn {self.result.turns}: tool {call.name!r} returned "
                                 f"{type(out).__name__}, not text: sent as JSON")
        return json.dumps(out, default=str)

    def _ask_user(self) -> str | None:
        """The user's next message, or None when the conversation ends: the user ended it, or the
        user callable failed (raised, or answered other than text or None), which ends the run with
        the transcript kept (``stop_reason`` ``user-error``, the reason in a note)."""
        try:
            reply = self.user(self.messages)
        except Exception as e:
            why = f"raised {type(e).__name__}: {e}"
        else:
            if reply is None or isinstance(reply, str):
                return reply
            why = f"answered {type(reply).__name__}, not a message (str) or None"
        self.result.notes.append(f"turn {self.result.turns}: the user callable {why}")
        self.result.stop_reason = "user-error"
        return None

    def _admit(self, msg: Mapping[str, object], calls: Sequence[ToolCall]) -> int:
        """In mode ``policy``, judge the written calls before they run (a call whose values were
        not restricted while written can break a first-order rule), in order; returns how many
        may run. A call the policy refuses is not run and not put in the transcript, nor are the
        calls after it in the turn (they were judged after it); a note says why, and the run ends
        (``refused``) once the calls before it have run, as the guard refuses a call it
        forwards."""
        cursor = self.cursor
        if self.agent.mode != "policy" or cursor is None or not cursor.values:
            return len(calls)
        probe = cursor.copy()
        k = 0
        for ev in message_events(msg, len(self.messages)):
            d = probe.push(ev)
            if not d.allowed:
                what = render_call(calls[k], self.agent.format) if ev.kind == "call" else "its text"
                self.result.notes.append(f"turn {self.result.turns}: call {what!r} refused once "
                                         f"written: {d.explain()}")
                self.result.stop_reason = "refused"
                self.done = True
                return k if ev.kind == "call" else 0
            k += ev.kind == "call"
        return k

    def _push(self, start: int) -> bool:
        """Move the policy over the new messages; True (and a note) when one broke it and that ends
        the run. In mode ``policy`` the model's own steps cannot break it, except through an
        assistant-text state with ``:contains`` (decoding cannot see ahead what a text will
        contain); a user's or a tool's message can, and ends the run. In modes ``none`` and
        ``format`` the policy only watches: the first broken step is noted and the run goes on,
        as an agent without enforcement would (the verdict is :meth:`finish`'s)."""
        cursor, messages = self.cursor, self.messages
        if cursor is None:
            return False
        for k in range(start, len(messages)):
            cursor.push_message(messages[k], k)
            if cursor.is_dead:
                self.result.notes.append(f"message {k} ({messages[k].get('role')}) broke the policy")
                if self.agent.mode == "policy":
                    self.result.stop_reason = "dead"
                    return True
                self.cursor = None  # broken for good; nothing below reads it in these modes
                return False
        return False

    def finish(self) -> ChatResult:
        """The result, with the time taken and the policy's verdict on the transcript."""
        self.done = True
        self.result.seconds = time.perf_counter() - self.t0
        if self.agent.policy is not None:
            self.result.report = self.agent.policy.check(self.messages)
        return self.result


def _assistant(before: str, calls: Sequence[ToolCall], first_id: int) -> dict[str, object]:
    """The assistant message of a turn: its text (None when blank and there are calls) and its
    calls as ``tool_calls`` with ids ``call_<first_id>``, … (none: a text message)."""
    msg: dict[str, object] = {"role": "assistant",
                              "content": before if before.strip(BLANK) or not calls else None}
    if calls:
        msg["tool_calls"] = [{"id": f"call_{first_id + k}", "type": "function", "function": {
            "name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
            for k, c in enumerate(calls)]
    return msg


def _may_end(cursor: PolicyCursor, calls: int) -> bool:
    """Whether a turn of ``calls`` calls may end at ``cursor``: the calls' results, which come
    next, one per call, are allowed (probed with a neutral text)."""
    probe = cursor.copy()
    return all(probe.push(Event.say("tool", _PROBE)).allowed for _ in range(calls))


def _after_call(cursor: PolicyCursor, tool: str) -> PolicyCursor:
    """``cursor`` after a call of ``tool`` with no arguments (a probe: values are not known yet)."""
    probe = cursor.copy()
    probe.push(Event.call(tool, {}))
    return probe


def _value_rules(cursor: PolicyCursor, tools: Iterable[str]) -> tuple[ValueRules, set[str]]:
    """Per tool (sorted), the value terms of its bound arguments now (design §14.1), and the tools
    whose values a rule constrains outside that fragment (judged once written)."""
    out: list[tuple[str, tuple[tuple[str, ValueTerm], ...]]] = []
    judged: set[str] = set()
    for t in sorted(tools):
        terms = cursor.value_terms(t)
        if terms is None:
            judged.add(t)
        elif terms:
            out.append((t, tuple(sorted(terms.items()))))
    return tuple(out), judged


def next_token(logits: Any, cursor: TurnCursor | None, budget: int, temperature: float = 0.0,
               rng: Any = None) -> int | None:
    """A turn's next token from one row of logits: among the tokens ``cursor`` allows with
    ``budget`` tokens left (any token without a cursor), the most likely one (greedy) or a sample;
    the cursor is moved over it. None when the cursor allows nothing."""
    import torch

    row = logits.float()
    if cursor is not None:
        allowed = cursor.allowed(budget=budget)
        mask = torch.zeros(row.shape[0], dtype=torch.bool)
        k = min(len(allowed), row.shape[0])
        mask[:k] = torch.from_numpy(allowed[:k])
        if not bool(mask.any()):
            return None
        row = row.masked_fill(~mask, float("-inf"))
    if temperature <= 0:
        tok = int(torch.argmax(row))
    else:
        tok = int(torch.multinomial(torch.softmax(row / temperature, dim=-1), 1, generator=rng))
    if cursor is not None:
        cursor.advance(tok)
    return tok

