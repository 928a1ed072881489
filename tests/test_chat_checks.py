"""``ChatAgent``'s checks (issue 30; docs/design.md §14): tools refused where they are given (a
schema the decoder cannot enforce, with its tool and JSON pointer; names as OpenAI's rule, no name
twice), a tool's failure or non-text result turned into a result the run goes on with, as the
guard's ``FunctionTool`` does, and a failing user callable ending the run with its transcript."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from ltlagent.errors import UsageError
from ltlagent.logic.policy import Policy

from . import tiny

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "booking"))
from domain import TOOLS, Database

LOOKUP = ('<tool_call>\n{"name": "find_user", "arguments": {"query": "Ann Lee"}}\n</tool_call>')


def _tiny() -> tuple[object, object]:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = tiny.byte_level(500)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=len(tok) + 3, n_embd=32, n_layer=1, n_head=2, n_positions=4096,  # type: ignore[arg-type]
                     bos_token_id=0, eos_token_id=tok.eos_token_id)  # type: ignore[attr-defined]
    return GPT2LMHeadModel(cfg).eval(), tok


@pytest.fixture(scope="module")
def model_tok() -> tuple[object, object]:
    return _tiny()


def _fn(name: str, parameters: Mapping[str, object] | None = None) -> dict[str, object]:
    return {"type": "function", "function": {"name": name, "parameters": parameters or {
        "type": "object", "properties": {"q": {"type": "string"}}}}}


def _agent(model_tok: tuple[object, object], tools: Sequence[Mapping[str, object]], call_tool: object = None,
           **kw: object) -> object:
    from ltlagent.agent.chat import ChatAgent

    model, tok = model_tok
    return ChatAgent(model, tok, tools, call_tool or Database.fresh().call, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["format", "policy"])
@pytest.mark.parametrize(("schema", "where"), [
    ({"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}}, "/properties/x/$ref"),
    ({"type": "object", "properties": {"x": {"type": "array",
                                             "items": {"type": "string", "pattern": "(?<=a)b"}}}},
     "/properties/x/items/pattern"),
    # a required member no value satisfies (the sides of if/then/else exclude each other): the
    # tool could never be called, found only once the table is built
    ({"type": "object", "required": ["x"],
      "properties": {"x": {"if": {"type": "string", "pattern": "^a"}, "then": {"type": "integer"},
                           "else": {"type": "string", "pattern": "^a"}}}},
     "/"),
])
def test_a_schema_the_decoder_cannot_enforce_is_refused_at_construction_with_tool_and_path(
        model_tok: tuple[object, object], mode: str, schema: dict[str, object], where: str) -> None:
    tools = [*TOOLS, _fn("odd_tool", schema)]
    with pytest.raises(UsageError) as e:
        _agent(model_tok, tools, mode=mode, policy="booking-policy")
    assert "tool 'odd_tool'" in str(e.value) and f"JSON schema at {where}:" in str(e.value), str(e.value)
    assert where != "/" or "in property 'x')" in str(e.value), str(e.value)
    _agent(model_tok, tools, mode="none")  # unconstrained: nothing is compiled, nothing refused


def test_fields_are_compiled_and_must_name_a_tool(model_tok: tuple[object, object]) -> None:
    with pytest.raises(UsageError, match=r"tool 'find_user'.*lookaround"):
        _agent(model_tok, TOOLS, mode="format", fields={"find_user": {"query": "(?<=a)b"}})
    with pytest.raises(UsageError, match="fields for 'nope'"):
        _agent(model_tok, TOOLS, mode="format", fields={"nope": {"query": "a+"}})


@pytest.mark.parametrize("name", ["", " find", "find user", "find\n", "</tool_call>", "<tool_call>",
                                  "b\u043e\u043ek", "book\u200b", 'a"b', "a\\b", "x" * 65, "bo.ok"])
def test_tool_names_outside_openai_s_rule_are_refused(model_tok: tuple[object, object], name: str) -> None:
    for mode in ("none", "format"):
        with pytest.raises(UsageError, match="tool name"):
            _agent(model_tok, [*TOOLS, _fn(name)], mode=mode)


def test_a_name_given_twice_is_refused(model_tok: tuple[object, object]) -> None:
    with pytest.raises(UsageError, match="'find_user' given twice"):
        _agent(model_tok, [*TOOLS, _fn("find_user")], mode="none")
    with pytest.raises(UsageError, match="OpenAI function tools"):
        _agent(model_tok, [{"type": "retrieval", "function": {"name": "x"}}], mode="none")
    with pytest.raises(UsageError, match="type 'object'"):
        _agent(model_tok, [_fn("x", {"type": "string"})], mode="none")
    ok = _agent(model_tok, [_fn("a-b_9" + "x" * 59)], mode="format")
    assert list(ok.schemas) == ["a-b_9" + "x" * 59]  # type: ignore[attr-defined]


class Boom(RuntimeError):
    pass


@pytest.mark.parametrize(("returns", "text"), [
    (Boom("the database is down"), "error: Boom: the database is down"),
    ({"user_id": "u1"}, '{"user_id": "u1"}'),
    (7, "7"),
    (b"u1", json.dumps(b"u1", default=str)),
    (None, "null"),
])
def test_a_tool_that_raises_or_answers_other_than_text_gives_a_result_and_the_run_goes_on(
        model_tok: tuple[object, object], returns: object, text: str) -> None:
    from ltlagent.agent.chat import Conversation

    def call_tool(name: str, arguments: dict[str, object]) -> object:
        if isinstance(returns, Exception):
            raise returns
        return returns

    agent = _agent(model_tok, TOOLS, call_tool, policy="booking-policy", mode="policy")
    conv = Conversation(agent, lambda messages: "thanks", "I am Ann Lee.")  # type: ignore[arg-type]
    assert conv.consume(LOOKUP, 20, True) and not conv.done
    tool_msg = conv.messages[-1]
    assert tool_msg["role"] == "tool" and tool_msg["content"] == text
    assert f"tool 'find_user' {'raised Boom' if isinstance(returns, Exception) else 'returned'}" \
        in conv.result.notes[-1]
    assert conv.consume("Found you.", 3, True)  # the user is asked and answers: the run goes on
    result = conv.finish()
    assert result.calls == 1 and result.stop_reason == "" and result.report is not None
    json.dumps(result.to_dict())  # the transcript is JSON (every content a string)
    assert Policy.load("booking-policy").check(result.messages).verdict == "ok"


@pytest.mark.parametrize("user_says", [Boom("the script ran out"), 42])
def test_a_failing_user_callable_ends_the_run_with_the_transcript_kept(
        model_tok: tuple[object, object], user_says: object) -> None:
    from ltlagent.agent.chat import Conversation

    def user(messages: Sequence[Mapping[str, object]]) -> object:
        if isinstance(user_says, Exception):
            raise user_says
        return user_says

    agent = _agent(model_tok, TOOLS, policy="booking-policy", mode="policy")
    conv = Conversation(agent, user, "Book Oak for Ann Lee.")  # type: ignore[arg-type]
    assert conv.consume(LOOKUP, 20, True)
    assert not conv.consume("Shall I book it?", 4, True) and conv.done
    result = conv.finish()
    assert result.stop_reason == "user-error"
    assert [m["role"] for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    why = "raised Boom: the script ran out" if isinstance(user_says, Exception) else "answered int"
    assert why in result.notes[-1], result.notes


def test_run_returns_the_transcript_when_the_user_callable_raises(model_tok: tuple[object, object]) -> None:
    """Through ``run`` (a random model writing text in mode ``none``): no exception escapes."""
    def user(messages: Sequence[Mapping[str, object]]) -> str | None:
        raise Boom("no more lines")

    agent = _agent(model_tok, TOOLS, mode="none")
    result = agent.run(user, "Hi.", max_turns=2, max_new_tokens=8)  # type: ignore[attr-defined]
    assert result.stop_reason == "user-error" and result.turns == 1
    assert result.messages[0] == {"role": "user", "content": "Hi."} and len(result.messages) == 2
    assert "raised Boom: no more lines" in result.notes[-1]
