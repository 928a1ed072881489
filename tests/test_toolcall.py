"""Tool-call formats as byte DFAs (ltlagent/text/toolcall.py) and tool signatures as JSON schemas
(ltlagent/agent/signature.py, Tool.json_schema / to_openai)."""

from __future__ import annotations

import dataclasses
import enum
import json
import random
from collections.abc import Mapping
from typing import Literal, Optional, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltlagent.agent.signature import SignatureError, type_schema
from ltlagent.agent.tools import Tool, ToolError, openai_tools, tool
from ltlagent.errors import SchemaError, UsageError
from ltlagent.text.toolcall import (
    FORMATS,
    ToolCall,
    ToolCallError,
    call_dfa,
    call_table,
    find_calls,
    parse_call,
    render_call,
)

from .test_jsonschema import Judge, documents, dump, in_policy, mutate

# --- a booking domain's tools, written as typed functions ---------------------------------------


class Cabin(enum.Enum):
    ECONOMY = "economy"
    BUSINESS = "business"


class Passenger(TypedDict):
    name: str
    age: int


@dataclasses.dataclass
class Window:
    start: str
    end: str
    flexible: bool = False


@tool
def find_user(email: str) -> str:
    """Look a user up by e-mail.

    Args:
        email: the user's e-mail address
    """
    return email


@tool
def book(user_id: str, flight: Literal["AB100", "AB200", "CD300"], cabin: Cabin,
         passengers: list[Passenger], when: Window, bags: Optional[int] = None) -> str:  # noqa: UP045
    """Book a flight.

    Args:
        user_id: who books
        flight: the flight number
        cabin: the cabin class
        passengers: who flies
        when: the travel window
        bags: checked bags
    """
    return user_id


@tool
def cancel_booking(booking_id: str, reason: str | None = None) -> str:
    """Cancel a booking.

    Args:
        booking_id: the booking
        reason: why
    """
    return booking_id


TOOLS = [find_user, book, cancel_booking]


SCHEMAS = {t.name: t.json_schema() for t in TOOLS}


def test_signature_schemas() -> None:
    s = book.json_schema()
    props = s["properties"]
    assert isinstance(props, dict)
    assert props["flight"] == {"type": "string", "enum": ["AB100", "AB200", "CD300"],
                               "description": "the flight number"}
    assert props["cabin"]["enum"] == ["economy", "business"]
    assert props["passengers"]["items"] == {
        "type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"], "additionalProperties": False}
    assert props["when"]["required"] == ["start", "end"]
    assert props["bags"]["type"] == ["integer", "null"]
    assert s["required"] == ["user_id", "flight", "cabin", "passengers", "when"]
    assert book.inputs["flight"]["type"] == "string" and book.inputs["bags"].get("nullable")


def test_openai_tools_list() -> None:
    tools = openai_tools(TOOLS)
    json.dumps(tools)  # serialisable as sent to the API and to apply_chat_template(tools=…)
    assert [t["type"] for t in tools] == ["function"] * 3
    fn = tools[2]["function"]
    assert isinstance(fn, dict)
    assert fn["name"] == "cancel_booking" and fn["description"] == "Cancel a booking."
    assert fn["parameters"]["required"] == ["booking_id"]


def test_tool_from_a_json_schema() -> None:
    params = {"type": "object", "properties": {"q": {"type": "string", "description": "query"},
                                               "n": {"type": "integer"}}, "required": ["q"]}
    t = Tool(name="search", description="Search.", parameters=params, function=lambda q, n=3: q)
    assert t.json_schema() == params
    assert t.inputs == {"q": {"type": "string", "description": "query"},
                        "n": {"type": "integer", "description": "n", "nullable": True}}
    with pytest.raises(ToolError, match="type object"):
        Tool(name="bad", description="Bad.", parameters={"type": "string"}, function=lambda: 1)


def test_type_schema_refuses_what_has_none() -> None:
    with pytest.raises(SignatureError, match="set"):
        type_schema(set[int])
    with pytest.raises(SignatureError, match="tuple"):
        type_schema(tuple[int, str])
    with pytest.raises(ToolError, match="argument 'x'"):
        @tool
        def f(x: complex) -> str:
            """F.

            Args:
                x: a number
            """
            return ""


# --- the call automaton -------------------------------------------------------------------------


def call_judge(data: bytes, fmt: str, schemas: Mapping[str, Mapping[str, object]]) -> bool:
    """An independent reading of the call language: the format's fixed text around one JSON object
    ``{"name": …, "arguments": …}`` in the lexical policy, a known name, valid arguments."""
    before, after = (x.encode() for x in FORMATS[fmt])
    if not (data.startswith(before) and data.endswith(after)) or len(data) < len(before) + len(after):
        return False
    try:
        body = data[len(before): len(data) - len(after)].decode("utf-8")
    except UnicodeDecodeError:
        return False
    if not in_policy(body):
        return False
    try:
        obj = json.loads(body, object_pairs_hook=lambda p: p)
    except ValueError:
        return False
    if not isinstance(obj, list) or [k for k, _ in obj] != ["name", "arguments"]:
        return False
    name = obj[0][1]
    if not isinstance(name, str) or name not in schemas:
        return False
    try:
        args = json.loads(body, object_pairs_hook=_unique)["arguments"]
    except ValueError:
        return False
    return bool(Judge(schemas[name]).is_valid(args))


def _unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
    d = dict(pairs)
    if len(d) != len(pairs):
        raise ValueError("duplicate key")
    return d


@pytest.fixture(scope="module")
def dfas() -> dict[str, object]:
    return {fmt: call_dfa(SCHEMAS, fmt) for fmt in FORMATS}


def _call_text(name: str, args: object, fmt: str, rng: random.Random) -> str:
    before, after = FORMATS[fmt]
    sp = rng.choice(["", " "])
    return (before + '{"name":' + sp + json.dumps(name) + "," + rng.choice(["", " "]) + '"arguments":'
            + rng.choice(["", " "]) + dump(args, rng) + "}" + after)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.sampled_from(sorted(SCHEMAS)), st.sampled_from(sorted(FORMATS)), st.data(),
       st.randoms(use_true_random=False))
def test_calls_round_trip_and_match_the_judge(dfas: dict[str, object], name: str, fmt: str,
                                              data: st.DataObject, rng: random.Random) -> None:
    dfa = dfas[fmt]
    args = data.draw(documents(SCHEMAS[name]))
    text = _call_text(name, args, fmt, rng)
    b = text.encode()
    ok = call_judge(b, fmt, SCHEMAS)
    assert dfa.matches(b) == ok, text  # type: ignore[attr-defined]
    if ok:
        assert parse_call(text, fmt) == ToolCall(name, args)
        assert dfa.matches(render_call(ToolCall(name, args), fmt).encode())  # type: ignore[attr-defined]
    for _ in range(10):
        m = mutate(text, rng)
        assert dfa.matches(m) == call_judge(m, fmt, SCHEMAS), m  # type: ignore[attr-defined]


def test_only_allowed_names() -> None:
    d = call_dfa({"find_user": SCHEMAS["find_user"]}, "json")
    assert d.matches(b'{"name": "find_user", "arguments": {"email": "a@b.c"}}')
    assert not d.matches(b'{"name": "book", "arguments": {"email": "a@b.c"}}')
    assert not d.matches(b'{"arguments": {"email": "a@b.c"}, "name": "find_user"}')


def test_narrowed_arguments() -> None:
    d = call_dfa(SCHEMAS, "hermes", {"cancel_booking": {"booking_id": "BK-[0-9]{4}"}})
    ok = render_call(ToolCall("cancel_booking", {"booking_id": "BK-1234"}))
    assert ok == ('<tool_call>\n{"name": "cancel_booking", "arguments": {"booking_id": "BK-1234"}}'
                  "\n</tool_call>")
    assert d.matches(ok.encode())
    assert not d.matches(render_call(ToolCall("cancel_booking", {"booking_id": "BK-12"})).encode())
    assert d.matches(render_call(ToolCall("find_user", {"email": "x"})).encode())
    with pytest.raises(UsageError, match="not among the tools"):
        call_dfa(SCHEMAS, "hermes", {"nope": {"a": "b"}})
    with pytest.raises(SchemaError, match="/properties/bags"):
        call_dfa(SCHEMAS, "hermes", {"book": {"bags": "1"}})


def test_parse_errors_are_data() -> None:
    for text in ["<tool_call>\n{\"name\": 1}\n</tool_call>", "<tool_call>{oops}</tool_call>", "no call",
                 '<tool_call>{"name": "a", "arguments": [1]}</tool_call>']:
        with pytest.raises(ToolCallError):
            parse_call(text)
    assert parse_call('{"name": "a", "arguments": "{\\"x\\": 1}"}', "json") == ToolCall("a", {"x": 1})
    found = find_calls('Sure. <tool_call>\n{"name": "a", "arguments": {}}\n</tool_call> and '
                       "<tool_call>{bad}</tool_call>")
    assert found[0] == ToolCall("a", {}) and isinstance(found[1], ToolCallError)
    with pytest.raises(UsageError, match="format"):
        call_dfa(SCHEMAS, "xml")


def test_openai_tools_go_through_apply_chat_template() -> None:
    transformers = pytest.importorskip("transformers")
    from pathlib import Path

    import ltlagent

    path = Path(ltlagent.__file__).parent / "models" / "react-tiny" / "tokenizer.json"
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token="<|endoftext|>")
    tok.chat_template = ("{% for t in tools %}<tool>{{ t | tojson }}</tool>{% endfor %}"
                         "{% for m in messages %}{{ m['content'] }}{% endfor %}")
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tools=openai_tools(TOOLS),
                                   tokenize=False)
    assert text.count("<tool>") == 3 and '"name": "book"' in text and text.endswith("hi")


def test_a_tool_no_value_satisfies_is_refused_by_the_call_table() -> None:
    """A tool whose schema allows no value (the table shows it, not the description) is refused
    with its name by the call table itself, as ``ChatAgent`` refuses it: not compiled into a branch
    the model can never take, silently, for callers that build call tables directly."""
    never = {"type": "string", "pattern": "^a", "not": {"pattern": "^a"}}
    ok = {"type": "object", "properties": {"a": {"type": "string"}}}
    with pytest.raises(UsageError, match=r"tool 'never': .*allows no value"):
        call_table({"ok": ok, "never": never})
    call = b'<tool_call>\n{"name": "ok", "arguments": {"a": "x"}}\n</tool_call>'
    assert call_table({"ok": ok}).content.matches(call)
