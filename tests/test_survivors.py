"""Fixed tests for the mutants that survived the whole suite (issue 31): each docstring names the
one-line change of code (the *mutant*) it kills. Like tests/test_known_mutants.py, these are
fixed inputs, not random ones, so they fail every time the mutant is in.

How each was checked: the mutant was applied by hand in a worktree, this file run (the test
failed), the change reverted (the test passed). The policy tests use only the public API
(``Policy.load``/``check``, ``PolicyCursor.decide``/``push``/``copy``/``allowed_states``/...), so
they hold across rewrites of the policy engine's internals.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ltlagent import Policy, parse_spec
from ltlagent.chat.events import BLANK, message_events
from ltlagent.decode.chat import TurnLanguage, TurnRule
from ltlagent.guard.screen import screen
from ltlagent.text.jsonschema import schema_dfa
from ltlagent.text.toolcall import ToolCall, ToolCallError, parse_call, render_call


def _call(name: str, args: object = None) -> dict[str, object]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": name, "arguments": json.dumps(args or {})}}]}


LOOKUP_ONLY = ('(define lookup-only (:states (User (:from user)) (Lookup (:call "lookup"))'
               ' (Result (:from tool)) (Reply (:from assistant))))')


# --- guard/screen.py: a tool the policy does not declare ----------------------------------------

def test_the_guard_refuses_a_tool_the_policy_does_not_declare() -> None:
    """Mutants: ``Classifier.index`` skipping the ``(:call …)`` name test (any call is a Lookup),
    or ``PolicyCursor.decide`` allowing a step that matches no state. Under a policy whose only
    call state is ``(:call "lookup")``, ``delete_everything`` must not run, while ``lookup`` may."""
    policy = Policy.load(parse_spec(LOOKUP_ONLY))
    cursor = policy.cursor()
    cursor.push(message_events({"role": "user", "content": "delete my files"}, 0)[0])
    tools = {"delete_everything", "lookup"}  # the request declares both: the policy decides
    bad = screen(cursor, _call("delete_everything"), 1, tools=tools)
    assert not bad.ok and bad.allowed == ()
    assert [r.tool for r in bad.refusals] == ["delete_everything"]
    assert not bad.refusals[0].decision.allowed and bad.refusals[0].decision.state is None
    assert not cursor.decide(message_events(_call("delete_everything"), 1)[0]).allowed
    good = screen(cursor, _call("lookup", {"q": "x"}), 1, tools=tools)
    assert good.ok and good.allowed == (0,)


# --- logic/policy.py ------------------------------------------------------------------------------

def test_an_infinite_behaviour_is_ok_at_any_live_point() -> None:
    """Mutant: ``Policy.check`` asking ``q in accepting`` without ``a.infinite or`` (an ω-automaton
    has no accepting states in the finite sense): a conversation under ``(:behavior (always …))``
    that broke nothing would be reported ``incomplete`` instead of ``ok``."""
    policy = Policy.load(parse_spec(
        '(define loop (:states (User (:from user)) (Reply (:from assistant)))'
        ' (:behavior (always (next User Reply))))'))
    user, reply = {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}
    for conv in ([user], [user, reply], [user, reply, user, reply]):
        report = policy.check(conv)
        assert report.verdict == "ok", (conv, report)
    assert policy.check([reply]).verdict == "violated"
    cursor = policy.cursor()
    cursor.push(message_events(user, 0)[0])
    cursor.push(message_events(reply, 1)[0])
    assert cursor.is_complete and not cursor.is_dead


def test_a_copied_cursor_shares_nothing_with_the_original() -> None:
    """Mutant: ``PolicyCursor.copy`` handing the copy the original's ``trace`` list (or any other
    mutable record) instead of its own: the guard screens a reply on a copy, and what it tried
    must not show in the conversation's cursor."""
    policy = Policy.load("booking-policy")
    cursor = policy.cursor()
    cursor.push(message_events({"role": "user", "content": "book me in"}, 0)[0])
    before = (list(cursor.trace), cursor.allowed_states(), cursor.is_dead, cursor.is_complete)
    copy = cursor.copy()
    write = message_events(_call("book", {"room": "Oak"}), 1)[0]
    copy.push(write)  # breaks the policy (no confirmation, no lookup): the copy is dead
    copy.push(message_events({"role": "tool", "content": "{}", "tool_call_id": "c1"}, 2)[0])
    assert copy.is_dead and list(copy.trace) == ["User", "Write", "Result"]
    assert (list(cursor.trace), cursor.allowed_states(), cursor.is_dead, cursor.is_complete) == before
    assert list(cursor.trace) == ["User"]
    # and the other way round: the original moves on without the copy
    cursor.push(message_events({"role": "assistant", "content": "who are you?"}, 1)[0])
    assert list(copy.trace) == ["User", "Write", "Result"]


def test_the_refusal_lists_the_allowed_states_when_half_are_allowed() -> None:
    """Mutant: ``describe_allowed`` with ``<=`` for ``<`` (``len(rest) < len(allowed)``): with
    exactly half the states allowed the refusal would say "anything but C, D"; the list of what is
    allowed is as short and says it directly."""
    def refusal_after_d(behaviour: str) -> str:
        policy = Policy.load(parse_spec(
            '(define w (:states (A (:from user) (:contains "a")) (B (:from user) (:contains "b"))'
            f' (C (:from user) (:contains "c")) (D (:from user))) (:behavior {behaviour}))'))
        cursor = policy.cursor()
        cursor.push(message_events({"role": "user", "content": "d"}, 0)[0])
        d = cursor.decide(message_events({"role": "user", "content": "d"}, 1)[0])
        assert not d.allowed
        return d.explain()

    # exactly half of the four states allowed: the list
    assert refusal_after_d("(next D (or A B))").endswith("; allowed now: A, B")
    # three of four: what is not allowed is shorter
    assert refusal_after_d("(next D (or A B C))").endswith("; allowed now: anything but D")
    # one of four: the list
    assert refusal_after_d("(next D A)").endswith("; allowed now: A")


# --- text/toolcall.py -------------------------------------------------------------------------

@pytest.mark.parametrize("around", [
    ("Sure. ", ""), ("", " Done."), ("", "\n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>"),
    ("I will call it:\n", "\n")])
def test_parse_call_refuses_text_around_a_hermes_block(around: tuple[str, str]) -> None:
    """Mutant: ``parse_call`` using ``_HERMES.search`` for ``fullmatch``: text before or after the
    block, or a second call, would be dropped silently and the first call run."""
    block = render_call(ToolCall("a", {"x": 1}))
    assert parse_call(block) == ToolCall("a", {"x": 1})
    assert parse_call("  \n" + block + "\n ") == ToolCall("a", {"x": 1})  # whitespace is fine
    with pytest.raises(ToolCallError):
        parse_call(around[0] + block + around[1])


# --- chat/events.py and decode/chat.py: what "blank" is -------------------------------------------

SCHEMAS: dict[str, dict[str, object]] = {"a": {"type": "object", "properties": {}},
                                         "b": {"type": "object", "properties": {}}}
#: Characters Python's ``str.isspace`` knows that are not ASCII: text, for the log and the decoder.
NON_ASCII_SPACES = "\u00a0\u0085\u1680\u2000\u2003\u200a\u2028\u2029\u202f\u205f\u3000"


def _decoder_reads_as_blank(lang: TurnLanguage, prefix: str) -> bool:
    """Does the turn language let ``prefix`` + a call of ``a`` through (``a`` is allowed only with
    no text before it, ``b`` only after text)?"""
    def accepted(data: bytes) -> bool:
        s = lang.initial
        for byte in data:
            s = int(lang.trans[s, byte])
        return bool(lang.accepting[s])
    first = accepted((prefix + render_call(ToolCall("a"))).encode())
    after = accepted((prefix + render_call(ToolCall("b"))).encode())
    assert first != after, prefix  # exactly one of the two readings
    return first


def test_log_reader_and_decoder_agree_on_blank_text_before_a_call() -> None:
    """Mutant: ``message_events`` stripping with ``str.strip()`` instead of ``strip(BLANK)`` (or the
    decoder's ``ws`` row built from another set): U+00A0 before a call would be no text step in
    the log while the decoder counts it as text, so a turn the decoder allowed could be judged
    differently by check-log. Decided: blank is :data:`BLANK` (ASCII whitespace) in both; a
    non-ASCII space is text (the byte-level decoder sees it as a multi-byte character)."""
    lang = TurnLanguage.build(TurnRule(True, frozenset({"a"}), frozenset({"b"})), SCHEMAS, "hermes")
    for ch in BLANK + NON_ASCII_SPACES + "x":
        prefix = " " + ch + " "
        msg = {**_call("a"), "content": prefix}
        in_log = [e.kind for e in message_events(msg, 0)] == ["call"]
        assert in_log == _decoder_reads_as_blank(lang, prefix), repr(ch)
        assert in_log == (ch in BLANK), repr(ch)
    kinds = [e.kind for e in message_events({**_call("a"), "content": "\u00a0"}, 0)]
    assert kinds == ["text", "call"]


# --- decode/processor.py: continuing after the environment -----------------------------------------

def test_the_environment_text_is_exactly_what_follows_the_paused_row() -> None:
    """Mutant: ``LtlLogitsProcessor._initial`` feeding ``full[best_len // 8 - 1:]`` (the paused
    row's last token again) as environment text: the trace is the same, but the monitor's text
    reads ``Observation:: Paris`` (or the token repeated), so compare texts, not traces."""
    torch = pytest.importorskip("torch")
    from ltlagent.decode.processor import logits_processor
    from ltlagent.logic.compiled import compile_spec

    from . import tiny

    tok: Any = tiny.TOKENIZERS["straddle"]()
    proc = logits_processor(compile_spec("react-tools"), tok, tool_names=["Search", "Lookup"], cache=False)
    prompt = tok.encode("Question: what?\n", add_special_tokens=False)
    written = "Thought: look\nAction: Search\nAction Input: France\nObservation:"
    ids = list(prompt)
    width = len(tok) + 11  # logits wider than the vocabulary, as tiny models have
    for t in [*tok.encode(written, add_special_tokens=False), None]:
        scores = torch.zeros(1, width)
        proc(torch.tensor([ids]), scores)
        if t is None:
            break
        assert not torch.isinf(scores[0, t]), tok.decode([t])
        ids.append(t)
    assert proc.row_monitor(torch.tensor([ids])).waiting_for_env
    cont = ids + tok.encode(" Paris\n", add_special_tokens=False)
    proc(torch.tensor([cont]), torch.zeros(1, width))  # a new generate call on the longer input
    mon = proc.row_monitor(torch.tensor([cont]))
    assert mon.text == written + " Paris\n"
    assert [(s.state, s.text) for s in mon.steps][-1] == ("Observation", "Paris")


# --- decode/chat.py: every UTF-8 lead byte --------------------------------------------------------

@pytest.mark.parametrize("ch", ["\u0080", "\u07ff", "\u0800", "\u0fff", "\ud7ff", "\ue000", "\uffff",
                                "\U00010000", "\U0001f600", "\U0003ffff", "\U00040000", "\U000fffff",
                                "\U00100000", "\U0010fffd", "\U0010ffff"])
def test_every_utf8_lead_byte_is_writable_in_a_chat_turn(ch: str) -> None:
    """Mutant: the turn language's text phase built for UTF-8 states ``range(1, n_mid)`` (one too
    few): the state after lead byte 0xF4 (U+100000-U+10FFFF) has no row, so those characters
    cannot be written, while the tests wrote only 😀 (lead 0xF0). One character per lead-byte
    class of the UTF-8 table, at both ends of its range."""
    lang = TurnLanguage.build(TurnRule(True, frozenset(), frozenset()), SCHEMAS, "hermes")
    s = lang.initial
    for byte in ("ok " + ch).encode():
        s = int(lang.trans[s, byte])
        assert s != lang.dead, (ch, hex(byte))
    assert lang.accepting[s]
    for bad in (b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xed\xa0\x80", b"\xf0\x8f\xbf\xbf"):
        s = lang.initial
        for byte in b"ok " + bad:
            s = int(lang.trans[s, byte])
        assert s == lang.dead, bad


# --- text/jsonschema.py: inclusive and exclusive bounds ---------------------------------------------

def test_minimum_and_maximum_are_inclusive_and_the_exclusive_ones_are_not() -> None:
    """Mutant: ``minimum`` read as exclusive (``{"type": "integer", "minimum": 5}`` refusing ``5``);
    only a random test could find it, 2 runs in 5. The same for the other three bounds."""
    cases: list[tuple[dict[str, object], list[int], list[int]]] = [
        ({"type": "integer", "minimum": 5}, [5, 6, 50, 10**6], [4, 0, -5]),
        ({"type": "integer", "maximum": 5}, [5, 4, 0, -50], [6, 50]),
        ({"type": "integer", "exclusiveMinimum": 5}, [6, 60], [5, 4]),
        ({"type": "integer", "exclusiveMaximum": 5}, [4, -4], [5, 6]),
        ({"type": "integer", "minimum": -5, "maximum": -5}, [-5], [-4, -6, 5]),
        ({"type": "integer", "minimum": 0}, [0, 1], [-1]),
    ]
    for schema, yes, no in cases:
        dfa = schema_dfa(schema)
        for v in yes:
            assert dfa.matches(str(v).encode()), (schema, v)
        for v in no:
            assert not dfa.matches(str(v).encode()), (schema, v)


# --- found by mutmut on text/toolcall.py (issue 31's mutation run) ---------------------------------

def test_call_dfa_defaults_to_hermes_and_honours_its_state_limit() -> None:
    """Mutants (mutmut, ``x_call_dfa__mutmut_1``/``_2``/``_10``): ``call_dfa``'s default format
    changed (``"XXhermesXX"``, ``"HERMES"``: every call without a format would raise), or its
    ``limit`` not passed on (a caller's bound on the automaton's size silently ignored)."""
    from ltlagent.errors import UsageError
    from ltlagent.text.toolcall import call_dfa

    tools = {"a": {"type": "object", "properties": {"x": {"type": "string"}}}}
    assert call_dfa(tools).matches(render_call(ToolCall("a", {"x": "y"})).encode())
    with pytest.raises(UsageError, match="more than 5 automaton states"):
        call_dfa(tools, limit=5)


def test_a_call_is_read_and_refused_with_the_words_a_model_is_shown() -> None:
    """Mutants (mutmut on ``text/toolcall.py``, 27 of them): every ``ToolCallError`` and
    ``UsageError`` message emptied or changed (a model is shown these words to correct itself);
    a missing ``arguments`` read as ``None`` instead of ``{}``; an empty ``arguments`` string parsed
    as JSON (and refused); unexpected keys no longer refused; ``call_table``'s default format
    changed; a parsed schema description sent through ``parse_schema`` again."""
    from ltlagent.errors import UsageError
    from ltlagent.text.jsonschema import parse_schema
    from ltlagent.text.toolcall import call_table

    assert parse_call('{"name": "a"}', "json") == ToolCall("a", {})
    assert parse_call('{"name": "a", "arguments": ""}', "json") == ToolCall("a", {})
    refused = [
        ('{"name": "a", "arguments": {}', "json",
         "the call is not valid JSON: Expecting ',' delimiter at character 29"),
        ('["a"]', "json", "the call must be a JSON object with name and arguments"),
        ('{"arguments": {}}', "json", "the call has no name (a string)"),
        ('{"name": "a", "arguments": "[1"}', "json", "the arguments of 'a' are not a JSON object"),
        ('{"name": "a", "arguments": [1]}', "json", "the arguments of 'a' are not a JSON object"),
        ('{"name": "a", "arguments": {}, "id": 1, "type": "f"}', "json",
         "the call has unexpected keys ['id', 'type']"),
        ('{"name": "a", "arguments": {}}', "hermes", "a hermes call is <tool_call>{…}</tool_call>"),
    ]
    for text, fmt, message in refused:
        with pytest.raises(ToolCallError) as e:
            parse_call(text, fmt)
        assert str(e.value) == message, text
    with pytest.raises(UsageError) as u:
        parse_call("{}", "xml")
    assert str(u.value) == "unknown tool-call format 'xml'" and u.value.hint == "use one of hermes, json"
    with pytest.raises(UsageError) as u:
        call_table({})
    assert str(u.value) == "a tool-call automaton needs at least one tool"
    with pytest.raises(UsageError) as u:
        call_table({"a": {"type": "object"}, "c": {"type": "object"}}, "json", {"b": {"x": "y"}})
    assert str(u.value) == "argument regexes for 'b', which is not among the tools a, c"
    schema = {"type": "object", "properties": {"x": {"type": "string"}}}
    table = call_table({"a": parse_schema(schema)})  # a parsed description, and the default format
    assert table.content.matches(render_call(ToolCall("a", {"x": "é"})).encode())
    assert render_call(ToolCall("a", {"x": "é"})) == \
        '<tool_call>\n{"name": "a", "arguments": {"x": "é"}}\n</tool_call>'


# --- found by mutmut on chat/ (issue 31's mutation run) --------------------------------------------

def test_the_less_common_message_shapes_are_read_as_documented() -> None:
    """Mutants (mutmut on ``chat/events.py``): the legacy ``function_call`` dropped or misread;
    arguments given as an object, or null, or with their call id, read wrongly; a role that is not
    a string let through; the errors' words, index and hint changed."""
    from ltlagent.chat.events import Event
    from ltlagent.errors import LogError

    legacy = message_events({"role": "assistant", "content": "x",
                             "function_call": {"name": "f", "arguments": '{"a":1}'}}, 2)
    assert legacy == [Event(2, "assistant", "text", "x"),
                      Event(2, "assistant", "call", '{"a":1}', "f", {"a": 1}, None)]
    both = message_events({"role": "assistant", "content": None, "function_call": {"name": "g"},
                           "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]}, 0)
    assert [(e.tool, e.call_id) for e in both] == [("f", "c1"), ("g", None)]
    as_object = message_events({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c9", "function": {"name": "a", "arguments": {"k": 1}}}]}, 3)
    assert as_object == [Event(3, "assistant", "call", '{"k": 1}', "a", {"k": 1}, "c9")]
    null = message_events({"role": "assistant", "content": None, "tool_calls": [
        {"id": 7, "function": {"name": "a", "arguments": None}}]}, 3)
    assert null == [Event(3, "assistant", "call", "{}", "a", {}, None)]
    missing = message_events({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c2", "function": {"name": "a"}}]}, 1)
    assert missing == [Event(1, "assistant", "call", "", "a", {}, "c2")]
    bad = [(None, "a message must be a JSON object, found NoneType", None),
           ({"role": 3}, "unknown role 3", "roles are system, developer, user, assistant, tool"),
           ({"role": "assistant", "content": None,
             "tool_calls": [{"function": {"name": "a", "arguments": 5}}]},
            "tool call 'arguments' must be a JSON string, found int", None),
           ({"role": "assistant", "content": None, "tool_calls": [{"function": {"arguments": "{}"}}]},
            "a tool call needs 'function': {'name': …, 'arguments': …}", None)]
    for message, words, hint in bad:
        with pytest.raises(LogError) as e:
            message_events(message, 4)
        assert (str(e.value), e.value.index, e.value.hint) == (f"message 4: {words}", 4, hint)
