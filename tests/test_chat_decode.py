"""Tool calls enforced while the model writes (issue 18; docs/design.md §14): the turn language
against the call parser and ``jsonschema`` on random walks, and multi-turn chats of a random model
sampled at temperature 1 whose every call parses, matches its schema, and whose every transcript
passes the policy."""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ltlagent.chat.events import BLANK
from ltlagent.decode.chat import TurnLanguage, TurnRule
from ltlagent.logic.policy import Policy
from ltlagent.spec.syntax import parse_spec
from ltlagent.text.toolcall import ToolCallError, parse_call

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "booking"))
from domain import TOOLS, Database

SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}  # type: ignore[index]
NAMES = sorted(SCHEMAS)
_LANGS: dict[tuple[TurnRule, str], TurnLanguage] = {}


def _lang(rule: TurnRule, fmt: str) -> TurnLanguage:
    if (rule, fmt) not in _LANGS:
        _LANGS[rule, fmt] = TurnLanguage.build(rule, SCHEMAS, fmt)  # type: ignore[arg-type]
    return _LANGS[rule, fmt]


def _walk(lang: TurnLanguage, rng: random.Random, budget: int) -> bytes | None:
    """A random word of the language within ``budget`` bytes (None if the start is dead)."""
    s, out = 0, bytearray()
    dist = lang.distance
    while True:
        left = budget - len(out)
        if lang.accepting[s] and (rng.random() < 0.15 or left <= 0):
            return bytes(out)
        options = [b for b in range(256) if lang.trans[s, b] != lang.dead
                   and dist[lang.trans[s, b]] <= left - 1]
        if not options:
            return bytes(out) if lang.accepting[s] else None
        # prefer printable ASCII so that texts look like texts, but keep every byte possible
        nice = [b for b in options if 32 <= b < 127 or b == 10]
        b = rng.choice(nice if nice and rng.random() < 0.9 else options)
        out.append(b)
        s = int(lang.trans[s, b])


def _judge(data: bytes, rule: TurnRule, fmt: str) -> None:
    # free text may hold any bytes (UTF-8 is not enforced there yet); the call must be UTF-8
    text = data.decode("utf-8", errors="surrogateescape")
    marker = "<tool_call>" if fmt == "hermes" else "{"
    at = text.find(marker) if fmt == "hermes" else \
        (len(text) - len(text.lstrip(BLANK)) if text.lstrip(BLANK).startswith("{") else -1)
    if at < 0:
        assert rule.text and text.strip(BLANK), text
        return
    before = text[:at]
    assert not before.strip(BLANK) or rule.text, text
    call = parse_call(data[len(before.encode("utf-8", errors="surrogateescape")):].decode(), fmt)
    allowed = rule.tools_first if not before.strip(BLANK) else rule.tools_after_text
    assert call.name in allowed, (text, allowed)
    jsonschema.validate(dict(call.arguments), SCHEMAS[call.name])


@settings(max_examples=25, deadline=None)
@given(st.booleans(), st.sets(st.sampled_from(NAMES)), st.sets(st.sampled_from(NAMES)),
       st.sampled_from(("hermes", "json")), st.integers(0, 10**6))
def test_every_word_of_a_turn_is_allowed_text_or_a_valid_allowed_call(
        text: bool, first: set[str], after: set[str], fmt: str, seed: int) -> None:
    rule = TurnRule(text, frozenset(first), frozenset(after) if text else frozenset())
    lang = _lang(rule, fmt)
    rng = random.Random(seed)
    for _ in range(5):
        w = _walk(lang, rng, 400)
        if w is None:
            assert not text and not first  # nothing at all is allowed
            return
        _judge(w, rule, fmt)


def _accepts(lang: TurnLanguage, text: str) -> bool:
    s = 0
    for b in text.encode():
        s = int(lang.trans[s, b])
    return bool(lang.accepting[s])


CALL = '<tool_call>\n{"name": "cancel_booking", "arguments": {"booking_id": "b1"}}\n</tool_call>'


@pytest.mark.parametrize("rule, text, ok", [
    (TurnRule(True, frozenset(), frozenset()), "Hello", True),
    (TurnRule(True, frozenset(), frozenset()), "Hi " + CALL, False),  # no tool allowed
    (TurnRule(True, frozenset(), frozenset()), "a <tool_cal> b", True),  # not the marker
    (TurnRule(False, frozenset({"cancel_booking"}), frozenset()), CALL, True),
    (TurnRule(False, frozenset({"cancel_booking"}), frozenset()), "  " + CALL, True),
    (TurnRule(False, frozenset({"cancel_booking"}), frozenset()), "Hi " + CALL, False),
    (TurnRule(False, frozenset({"cancel_booking"}), frozenset()), "Hello", False),
    (TurnRule(True, frozenset({"cancel_booking"}), frozenset()), "Hi " + CALL, False),
    (TurnRule(True, frozenset(), frozenset({"cancel_booking"})), "Hi " + CALL, True),
    (TurnRule(True, frozenset(), frozenset({"cancel_booking"})), CALL, False),
    (TurnRule(True, frozenset({"book"}), frozenset({"book"})), CALL, False),  # a forbidden tool
    (TurnRule(False, frozenset({"cancel_booking"}), frozenset()),
     CALL.replace('"booking_id": "b1"', '"booking": "b1"'), False),  # not its schema
    (TurnRule(False, frozenset({"cancel_booking"}), frozenset()), CALL + " more", False),
])
def test_fixed_turns(rule: TurnRule, text: str, ok: bool) -> None:
    assert _accepts(_lang(rule, "hermes"), text) == ok


# --- a random model through whole conversations ------------------------------------------------

#: The booking policy, plus: after a user turn the assistant's first step is a tool call, so that
#: a random model is made to call tools (text alone would be its usual answer).
FORCING = Path(__file__).resolve().parent.parent.joinpath("specs", "booking-policy.sexp") \
    .read_text(encoding="utf-8").replace(
        "(:constraints", "(:constraints\n   (call-after-user (always (implies (or User Confirm) "
        "(weak-next (or Lookup Write Handoff Call)))))", 1)


def _tiny() -> tuple[object, object]:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from . import tiny

    tok = tiny.byte_level(500)
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=len(tok) + 3, n_embd=32, n_layer=1, n_head=2, n_positions=4096,
                     bos_token_id=0, eos_token_id=tok.eos_token_id)
    model = GPT2LMHeadModel(cfg).eval()
    return model, tok


def _scripted_user() -> Callable[[Sequence[Mapping[str, object]]], str | None]:
    """Says its lines in order, and nothing after a hand-off to a human (the policy allows
    only tool results and replies then: a user who goes on would break it, not the model)."""
    lines = iter(["Book Oak for me, Ann Lee.", "yes", "ok thanks", "bye"])

    def user(messages: Sequence[Mapping[str, object]]) -> str | None:
        handed = any(c["function"]["name"] == "transfer_to_human"  # type: ignore[index]
                     for m in messages for c in m.get("tool_calls") or [])  # type: ignore[attr-defined]
        return None if handed else next(lines, None)

    return user


@pytest.mark.parametrize("mode", ["format", "policy"])
def test_random_model_at_temperature_1_keeps_every_call_valid(mode: str) -> None:
    from ltlagent.agent.chat import ChatAgent

    model, tok = _tiny()
    policy = Policy.load(parse_spec(FORCING, "forcing.sexp"))
    calls = 0
    for seed in range(2):
        db = Database.fresh()
        agent = ChatAgent(model, tok, TOOLS, db.call, policy=policy, mode=mode)
        r = agent.run(_scripted_user(), "Hi, I need a room.", max_turns=6,
                      max_new_tokens=120, temperature=1.0, seed=seed)
        assert r.malformed == 0
        for m in r.messages:
            for c in m.get("tool_calls") or []:  # type: ignore[attr-defined]
                fn = c["function"]
                jsonschema.validate(json.loads(fn["arguments"]), SCHEMAS[fn["name"]])
                calls += 1
        assert r.report is not None
        if mode == "policy":
            assert r.report.verdict == "ok", r.report
            assert Policy.load("booking-policy").check(r.messages).verdict == "ok"
        assert not any("cut at the token budget" in n for n in r.notes) or r.turns
    assert calls > 0 or mode == "format"  # text is allowed there, and a random model writes text


def test_unconstrained_mode_records_malformed_calls_as_data() -> None:
    from ltlagent.agent.chat import ChatAgent

    model, tok = _tiny()
    agent = ChatAgent(model, tok, TOOLS, Database.fresh().call, mode="none")
    assert agent.split("Hi <tool_call>\n{bad}\n</tool_call>") == ("Hi ", "<tool_call>\n{bad}\n</tool_call>")
    with pytest.raises(ToolCallError):
        parse_call("<tool_call>\n{bad}\n</tool_call>")


def test_argument_regexes_of_the_first_call_state_narrow_what_can_be_written() -> None:
    import re

    pay = {"type": "object", "properties": {"amount": {"type": "string"},
                                            "to": {"type": "string"}},
           "required": ["to"], "additionalProperties": False}
    rule = TurnRule(False, frozenset({"pay"}), frozenset(),
                    ((("pay", (("amount", "[0-9]{4,}"),)),), ()))
    lang = TurnLanguage.build(rule, {"pay": pay})
    rng = random.Random(3)
    for _ in range(30):
        w = _walk(lang, rng, 300)
        assert w is not None
        call = parse_call(w.decode())
        assert re.fullmatch("[0-9]{4,}", str(call.arguments["amount"])), w


def test_the_call_format_comes_from_the_spec_unless_given() -> None:
    from ltlagent.agent.chat import ChatAgent
    from ltlagent.errors import UsageError

    model, tok = _tiny()
    json_spec = parse_spec(FORCING.replace("(:format hermes)", "(:format json)"))
    assert ChatAgent(model, tok, TOOLS, Database.fresh().call,
                     policy=Policy.load(json_spec)).format == "json"
    assert ChatAgent(model, tok, TOOLS, Database.fresh().call, policy="booking-policy").format \
        == "hermes"
    assert ChatAgent(model, tok, TOOLS, Database.fresh().call, mode="none").format == "hermes"
    assert ChatAgent(model, tok, TOOLS, Database.fresh().call, mode="none",
                     format="json").format == "json"
    with pytest.raises(UsageError, match=r"says \(:format json\)"):
        ChatAgent(model, tok, TOOLS, Database.fresh().call, policy=Policy.load(json_spec),
                  format="hermes")
    with pytest.raises(UsageError, match="unknown tool-call format 'xml'"):
        ChatAgent(model, tok, TOOLS, Database.fresh().call, mode="none", format="xml")


@pytest.mark.parametrize("mode", ["none", "format"])
def test_without_enforcement_a_broken_policy_is_noted_and_the_run_goes_on(mode: str) -> None:
    from ltlagent.agent.chat import ChatAgent, Conversation

    model, tok = _tiny()
    db = Database.fresh()
    agent = ChatAgent(model, tok, TOOLS, db.call, policy="booking-policy", mode=mode)
    conv = Conversation(agent, lambda messages: "thanks", "Book Oak for Ann Lee on 2026-12-20.")
    booking = ('<tool_call>\n{"name": "book", "arguments": {"user_id": "u1", "room": "Oak", '
               '"date": "2026-12-20", "guests": 2}}\n</tool_call>')
    assert conv.consume(booking, 30, True)  # a write with no lookup and no yes: broken, goes on
    assert conv.result.notes == ["message 1 (assistant) broke the policy"]
    assert conv.consume("Done.", 3, True) and not conv.done
    result = conv.finish()
    assert result.stop_reason == "" and result.calls == 1
    assert result.report is not None and result.report.verdict == "violated"
    policed = ChatAgent(model, tok, TOOLS, db.call, policy="booking-policy", mode="policy")
    conv = Conversation(policed, lambda messages: "thanks", "Book Oak for Ann Lee.")
    assert not conv.consume(booking, 30, True)  # what decoding would not let through: stops
    assert conv.result.stop_reason == "refused"  # judged before it runs: never run (issue 28)
    assert [m["role"] for m in conv.messages] == ["user"] and "refused once written" in conv.result.notes[-1]
