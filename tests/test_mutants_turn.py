"""The turn language and its token index (``ltlagent.decode.chat``) on two small tools and a small
explicit vocabulary: which turns are words, which tokens each state allows (against a plain
reference walk), budget steering and the cursor. Fast (no tokenizer, no model), so that a mutation
run can use it as its selection (issue 31; docs/mutation.md, "decode/chat.py")."""

from __future__ import annotations

import random
from collections import deque
from unittest import mock

import numpy as np
import pytest

from ltlagent.decode import chat
from ltlagent.decode.chat import TokenBytes, TurnCursor, TurnIndex, TurnLanguage, TurnRule
from ltlagent.decode.vocab import vocab_from_bytes
from ltlagent.text.jsonschema import schema_table

SCHEMAS: dict[str, dict[str, object]] = {
    "ping": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    "note": {"type": "object", "properties": {"text": {"type": "string", "maxLength": 20}}}}
PING = '{"name": "ping", "arguments": {"n": 1}}'
NOTE = '{"name": "note", "arguments": {"text": "hé"}}'
FIRST_PING = TurnRule(True, frozenset({"ping"}), frozenset({"note"}))


def lang(rule: TurnRule = FIRST_PING, fmt: str = "hermes", utf8: bool = True) -> TurnLanguage:
    # built in each test, never cached across tests or at import: a mutation tool runs for a
    # mutant only the tests it saw calling the mutated function
    return TurnLanguage.build(rule, SCHEMAS, fmt, utf8=utf8)


def hermes(call: str) -> str:
    return f"<tool_call>\n{call}\n</tool_call>"


def run(lg: TurnLanguage, data: bytes | str) -> int:
    s = lg.initial
    for b in data.encode() if isinstance(data, str) else data:
        s = int(lg.trans[s, b])
    return s


def accepts(lg: TurnLanguage, data: bytes | str) -> bool:
    return bool(lg.accepting[run(lg, data)])


# -- the language -----------------------------------------------------------------------------------
@pytest.mark.parametrize("text,ok", [
    ("Hello", True),
    ("", False),  # a turn is not empty
    ("  \n", False),  # nor blank
    (hermes(PING), True),  # a call first: ping
    ("  " + hermes(PING), True),  # blanks before a call are not text
    ("\u00a0" + hermes(PING), False),  # a no-break space is text (as the log reader reads it)
    (hermes(NOTE), False),  # note only after text
    ("Sure. " + hermes(NOTE), True),
    ("Sure. " + hermes(PING), False),  # ping only first
    (hermes(PING) + " more", False),  # nothing after the call
    ("<tool_call", True),  # a pending marker is text
    ("a <tool_cal> b", True),
    ("<<tool_call>\n" + NOTE + "\n</tool_call>", True),  # the first '<' is text: note is allowed
    ("<<tool_call>\n" + PING + "\n</tool_call>", False),
    ("x <<tool_call>\n" + NOTE + "\n</tool_call>", True),
    ("<tool_call>\n" + PING.replace("1", '"1"') + "\n</tool_call>", False),  # not its schema
    ("<tool_call>\n" + PING.replace("ping", "pong") + "\n</tool_call>", False),
    ("<tool_<tool_call>\n" + NOTE + "\n</tool_call>", True),  # KMP: the marker restarts inside
    ("€ and 😀 and \U0010ffff", True),
])
def test_hermes_turns(text: str, ok: bool) -> None:
    assert accepts(lang(), text) == ok
    assert accepts(lang(utf8=False), text) == ok


@pytest.mark.parametrize("text,ok", [
    (PING, True), ("  " + PING, True), ("Hi", True), ("Hi {", True),
    ("Hi " + PING, True),  # text: a json call is only at the start
    (NOTE, False), ("{", False), ("{x", False),
])
def test_json_turns(text: str, ok: bool) -> None:
    assert accepts(lang(fmt="json"), text) == ok


def test_without_text_only_the_first_tools() -> None:
    lg = lang(TurnRule(False, frozenset({"ping"}), frozenset()))
    assert accepts(lg, hermes(PING)) and accepts(lg, "\n" + hermes(PING))
    assert not accepts(lg, "Hi") and not accepts(lg, "<tool")
    assert run(lg, "H") == lg.dead and run(lg, "<x") == lg.dead
    none = lang(TurnRule(False, frozenset(), frozenset()))
    assert none.call_start == (-1, -1)
    assert not none.accepting.any()
    assert {b for b in range(256) if none.trans[0, b] != none.dead} == {ord(c) for c in " \t\n\r<"} | {
        b for b in range(256) if none.trans[0, b] == 0}
    assert run(none, "<tool_call>") == none.dead


def test_a_rule_with_no_tool_writes_text_only() -> None:
    lg = lang(TurnRule(True, frozenset(), frozenset()))
    assert accepts(lg, "Hello <tool_cal")
    assert run(lg, "<tool_call>") == lg.dead and run(lg, "Hi <tool_call>") == lg.dead


def test_utf8_is_kept_unless_told_not_to() -> None:
    lg, raw = lang(), lang(utf8=False)
    for bad in (b"\x80", b"a\xc0\xaf", b"\xed\xa0\x80", b"\xf5", b"\xe2\x82a"):
        assert run(lg, bad) == lg.dead, bad
        assert run(raw, bad) != raw.dead, bad
    assert not accepts(lg, b"a\xe2\x82")  # cannot end inside a character
    assert accepts(lg, b"a\xe2\x82\xac") and accepts(lg, b"\xf4\x8f\xbf\xbf")
    assert run(lg, b"\xe2\x82<") == lg.dead  # nor begin anything inside one
    assert raw.trans.shape[0] < lg.trans.shape[0]


def test_in_call_and_the_states() -> None:
    lg = lang()
    assert lg.initial == 0 and lg.dead == lg.trans.shape[0] - 1 and not lg.accepting[lg.dead]
    assert (lg.trans[lg.dead] == lg.dead).all()
    assert lg.trans.dtype == np.int32 and lg.accepting.dtype == bool  # as the fields say
    a, b = lg.call_start
    assert 0 < a < b < lg.dead
    assert not lg.in_call(run(lg, "Hi <tool_call"))
    assert lg.in_call(run(lg, "<tool_call>")) and lg.in_call(run(lg, "Hi <tool_call>"))
    assert run(lg, "<tool_call>") >= a and run(lg, "Hi <tool_call>") >= b
    only_after = lang(TurnRule(True, frozenset(), frozenset({"note"})))
    assert only_after.call_start[0] == -1 and only_after.in_call(run(only_after, "Hi <tool_call>"))
    assert not only_after.in_call(run(only_after, "Hi"))


def test_distance_is_the_shortest_way_to_an_end() -> None:
    lg = lang()
    n = lg.dead
    reach = {s: 0 for s in range(n) if lg.accepting[s]}
    back: dict[int, set[int]] = {}
    for s in range(n):
        for t in set(lg.trans[s].tolist()):
            back.setdefault(t, set()).add(s)
    todo = deque(reach)
    while todo:
        t = todo.popleft()
        for s in back.get(t, ()):
            if s not in reach:
                reach[s] = reach[t] + 1
                todo.append(s)
    far = lg.distance[n]
    assert far >= 2 ** 29
    for s in range(n + 1):
        assert lg.distance[s] == reach.get(s, far), s
    assert lg.distance[0] == 1  # one byte of text


def test_a_table_alone_is_a_turn() -> None:
    t = schema_table({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    lg = TurnLanguage.of_table(t)
    assert accepts(lg, '{"n": 12}') and accepts(lg, '{"n":-3}')
    assert not accepts(lg, "Hi") and not accepts(lg, '{"n": 1} ') and not accepts(lg, "")
    assert lg.call_start == (0, -1) and lg.format == "json" and lg.in_call(0)
    assert lg.trans.shape == (t.num_states + 1, 256) and (lg.trans[lg.dead] == lg.dead).all()
    assert lg.trans.dtype == np.int32 and lg.accepting.dtype == bool  # as the fields say


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown tool-call format 'xml'"):
        TurnLanguage.build(FIRST_PING, SCHEMAS, "xml")


def test_a_tool_without_a_schema_is_not_callable() -> None:
    lg = TurnLanguage.build(TurnRule(True, frozenset({"ping", "ghost"}), frozenset()), SCHEMAS)
    assert accepts(lg, hermes(PING))
    assert not accepts(lg, hermes('{"name": "ghost", "arguments": {}}'))


def test_narrowed_arguments_are_enforced() -> None:
    rule = TurnRule(True, frozenset({"note"}), frozenset(),
                    narrow=((("note", (("text", "ab+"),)),), ()))
    lg = TurnLanguage.build(rule, SCHEMAS)
    assert accepts(lg, hermes('{"name": "note", "arguments": {"text": "abb"}}'))
    assert not accepts(lg, hermes('{"name": "note", "arguments": {"text": "hé"}}'))
    fields = TurnLanguage.build(TurnRule(True, frozenset({"note"}), frozenset()), SCHEMAS,
                                fields={"note": {"text": "x+"}, "ping": {"n": "1"}})
    assert accepts(fields, hermes('{"name": "note", "arguments": {"text": "xx"}}'))
    assert not accepts(fields, hermes('{"name": "note", "arguments": {"text": "ab"}}'))


# -- the index over a vocabulary ------------------------------------------------------------------
WORDS = [b"<tool_call>", b"<tool", b"_call>", b"\n{", b'{"name": "', b"ping", b"note", b'", ',
         b'"arguments": {', b'"n": ', b'"text": "', b"}}\n</tool_call>", b"}}", b"Hi", b" x",
         b"\xe2\x82", b"\xac", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"12", b"\x80\x80"]
EOS = 256 + len(WORDS)
TOKENS = [bytes([b]) for b in range(256)] + WORDS + [None, b""]


def token_bytes() -> TokenBytes:
    return TokenBytes.of(vocab_from_bytes(TOKENS, eos_ids=[EOS]))


def reference(lg: TurnLanguage, s: int) -> np.ndarray:
    out = np.zeros(len(TOKENS), dtype=bool)
    for i, t in enumerate(TOKENS):
        if t:
            out[i] = run_from(lg, s, t) != lg.dead
    out[EOS] = bool(lg.accepting[s])
    return out


def run_from(lg: TurnLanguage, s: int, data: bytes) -> int:
    for b in data:
        s = int(lg.trans[s, b])
    return s


def states(lg: TurnLanguage, seed: int, n: int = 40) -> list[int]:
    rng = random.Random(seed)
    out = [lg.initial]
    for _ in range(n):
        s = lg.initial
        for _ in range(rng.randrange(1, 60)):
            nxt = [t for t in range(256) if lg.trans[s, t] != lg.dead]
            if not nxt:
                break
            s = int(lg.trans[s, rng.choice(nxt)])
            out.append(s)
    return sorted(set(out))[:: max(1, len(set(out)) // 30)]


@pytest.mark.parametrize("fmt", ["hermes", "json"])
def test_masks_are_the_reference_walk(fmt: str) -> None:
    lg = lang(fmt=fmt)
    idx = TurnIndex(lg, token_bytes(), shift_min=1)
    assert idx.tokens.matrix.dtype == np.uint8
    for s in [*states(lg, 1), lg.dead]:
        want = reference(lg, s)
        assert (idx.allowed(s) == want).all(), s
        assert (idx.walk_tokens(s) == idx.ends(s)).all(), s
        for t in np.flatnonzero(want):
            assert idx.advance(s, int(t)) == (s if t == EOS else run_from(lg, s, TOKENS[t] or b""))
    assert idx.states_visited >= 2
    assert not idx.allowed(lg.dead).any()
    assert idx.advance(lg.dead, EOS) == lg.dead and idx.advance(0, EOS) == lg.dead
    assert idx.advance(run(lg, "Hi"), EOS) == run(lg, "Hi")
    assert idx.allowed(0)[EOS + 1] == False  # noqa: E712 - an empty token is never text


@pytest.mark.parametrize("chains", [False, True])
def test_a_string_count_is_derived_from_a_lower_count(chains: bool) -> None:
    """Counts follow from a lower count (``Period``) with content chains off, go along the chain
    with them on; both equal the reference walk."""
    rule = TurnRule(False, frozenset({"note"}), frozenset())
    long = {"note": {"type": "object", "properties": {"text": {"type": "string", "maxLength": 60}}}}
    lg = TurnLanguage.build(rule, long)
    assert lg.periods and lg.checked_periods
    tb = token_bytes()
    with mock.patch.object(chat, "CONTENT_CHAINS", chains):
        idx = TurnIndex(lg, tb, shift_min=1)
        s = run(lg, '<tool_call>\n{"name": "note", "arguments": {"text": "')
        for k in range(30):
            want = reference(lg, s)
            assert (idx.allowed(s) == want).all(), k
            s = run_from(lg, s, b"a")
        assert (idx.chained >= 30) if chains else (idx.derived > 0 and not idx.chained)
        slow = TurnIndex(lg, tb, shift_min=10 ** 6)
        s = run(lg, '<tool_call>\n{"name": "note", "arguments": {"text": "')
        for _ in range(30):
            assert (slow.allowed(s) == idx.allowed(s)).all()
            s = run_from(lg, s, b"a")
        assert slow.derived == 0


def test_budget_keeps_the_turn_completable() -> None:
    lg = lang(TurnRule(False, frozenset({"ping"}), frozenset()))
    byte_vocab = vocab_from_bytes([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
    idx = TurnIndex(lg, TokenBytes.of(byte_vocab))
    need = int(lg.distance[0]) + 1  # the bytes of the shortest call, then EOS
    for budget in (need, need + 3):
        c = TurnCursor(idx)
        left = budget
        while not c.ended:
            mask = c.allowed(left)
            assert mask.any() and not c.is_dead
            # the worst choice: the highest token allowed (EOS last)
            c.advance(int(np.flatnonzero(mask)[-1]) if not mask[256] else 256)
            left -= 1
            assert left >= 0
        assert c.can_end and accepts(lg, bytes(c.data))
    assert (idx.allowed_within(0, 0) == idx.allowed(0)).all()
    assert idx.allowed_within(0, 10 ** 6).sum() == idx.allowed(0).sum()
    assert idx.allowed_within(0, need).sum() < idx.allowed(0).sum()
    # no budget can be met: every allowed token, not none
    assert (idx.allowed_within(0, 1) == idx.allowed(0)).all()


def test_the_cursor_keeps_the_bytes_and_ends_on_eos() -> None:
    idx = TurnIndex(lang(), token_bytes())
    c = TurnCursor(idx)
    assert c.state == 0 and not c.can_end and not c.is_dead and not c.ended
    assert (c.allowed() == idx.allowed(0)).all() and (c.allowed(0) == idx.allowed(0)).all()
    c.advance(256 + WORDS.index(b"Hi"))
    assert bytes(c.data) == b"Hi" and c.can_end
    state = c.state
    c.advance(EOS)
    assert c.ended and c.state == state and bytes(c.data) == b"Hi"
    d = TurnCursor(idx)
    d.advance(256 + WORDS.index(b"\x80\x80"))
    assert d.is_dead and not d.can_end and bytes(d.data) == b"\x80\x80"


def test_a_rule_may_narrow_only_its_first_phase() -> None:
    rule = TurnRule(True, frozenset({"note"}), frozenset({"note"}),
                    narrow=((("note", (("text", "ab+"),)),),), values=((),))
    lg = TurnLanguage.build(rule, SCHEMAS)
    assert accepts(lg, hermes('{"name": "note", "arguments": {"text": "ab"}}'))
    assert not accepts(lg, hermes('{"name": "note", "arguments": {"text": "x"}}'))
    assert accepts(lg, "Hi " + hermes('{"name": "note", "arguments": {"text": "x"}}'))


# -- values the policy allows (issue 28), enforced token by token -----------------------------------
BOOK: dict[str, object] = {"type": "object", "properties": {
    "user_id": {"type": "string"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "meta": {"type": "object", "properties": {"who": {"type": "string"}, "n": {"type": "integer"}}},
    "extra": {"type": "object"},
    "rows": {"type": "array", "items": {"type": "object"}}},
    "required": ["user_id"], "additionalProperties": False}


def book(**args: object) -> str:
    import json
    return hermes(json.dumps({"name": "book", "arguments": args}))


def test_bound_arguments_take_only_the_allowed_values() -> None:
    from ltlagent.text.values import ValueEnum, ValueSubstrings
    terms = (("book", (("user_id", ValueEnum(("bob", "ann"))), ("tags", ValueEnum(("x",))),
                       ("meta.who", ValueSubstrings(("kim lee",))), ("extra", ValueEnum(("a",))),
                       ("rows", ValueEnum(("a",))), ("missing", ValueEnum(("a",))))),)
    rule = TurnRule(True, frozenset({"book"}), frozenset(), values=(terms, ()))
    lg = TurnLanguage.build(rule, {"book": BOOK})
    assert accepts(lg, book(user_id="bob")) and accepts(lg, book(user_id="ann", tags=["x", "x"]))
    assert accepts(lg, book(user_id="bob", meta={"who": "lee", "n": 3}))
    assert not accepts(lg, book(user_id="eve"))
    assert not accepts(lg, book(user_id="bob", tags=["y"]))
    assert not accepts(lg, book(user_id="bob", meta={"who": "zed"}))
    assert accepts(lg, book(user_id="bob", extra={"k": 1}))  # left to its schema
    assert {(t, k) for t, k, _ in lg.unenforced} == {("book", "extra"), ("book", "rows")}
    why = dict(((t, k), w) for t, k, w in lg.unenforced)
    assert why["book", "extra"] == "a value that may be a list or an object"
    assert why["book", "rows"] == "a list whose items may be lists or objects"
    # the same rule without values: every user id
    free = TurnLanguage.build(TurnRule(True, frozenset({"book"}), frozenset()), {"book": BOOK})
    assert accepts(free, book(user_id="eve")) and free.unenforced == ()


def test_values_and_narrowing_together_and_per_phase() -> None:
    from ltlagent.text.values import ValueEnum
    terms = (("book", (("user_id", ValueEnum(("bob", "bill"))),)),)
    rule = TurnRule(True, frozenset({"book"}), frozenset({"book"}), values=((), terms))
    lg = TurnLanguage.build(rule, {"book": BOOK}, fields={"book": {"user_id": "b.*"}})
    assert accepts(lg, book(user_id="eve")) is False  # the narrowing holds in the first phase
    assert accepts(lg, book(user_id="bea"))
    assert accepts(lg, "Hi " + book(user_id="bill")) and not accepts(lg, "Hi " + book(user_id="bea"))
    only_first = TurnRule(True, frozenset({"book"}), frozenset({"book"}), values=(terms,))
    lg1 = TurnLanguage.build(only_first, {"book": BOOK})
    assert not accepts(lg1, book(user_id="eve")) and accepts(lg1, "Hi " + book(user_id="eve"))


def test_a_key_written_as_an_undeclared_property_is_left_to_the_schema() -> None:
    from ltlagent.text.values import ValueEnum
    open_schema = {"type": "object", "properties": {"a": {"type": "string"}},
                   "additionalProperties": {"type": "string"}}
    terms = (("t", (("b", ValueEnum(("x",))), ("a", ValueEnum(("y",))))),)
    lg = TurnLanguage.build(TurnRule(True, frozenset({"t"}), frozenset(), values=(terms, ())),
                            {"t": open_schema})
    assert lg.unenforced == (("t", "b", "'b' may be written as an undeclared property"),)
    assert accepts(lg, hermes('{"name": "t", "arguments": {"a": "y"}}'))
    assert not accepts(lg, hermes('{"name": "t", "arguments": {"a": "z"}}'))


def test_bound_keys_after_a_nested_object_and_beside_an_unbound_tool() -> None:
    from ltlagent.text.values import ValueEnum
    schema = {"type": "object", "properties": {
        "meta": {"type": "object", "properties": {"who": {"type": "string"}}},
        "user_id": {"type": "string"}}, "additionalProperties": False}
    terms = (("book", (("meta.who", ValueEnum(("kim",))), ("user_id", ValueEnum(("bob",))),
                       ("user_id.x", ValueEnum(("a",))), ("meta.who.x", ValueEnum(("a",))))),)
    rule = TurnRule(True, frozenset({"book", "ping"}), frozenset(), values=(terms, ()))
    lg = TurnLanguage.build(rule, {"book": schema, "ping": SCHEMAS["ping"]})
    assert accepts(lg, book(meta={"who": "kim"}, user_id="bob"))
    assert not accepts(lg, book(meta={"who": "kim"}, user_id="eve"))  # bound after the object
    assert not accepts(lg, book(meta={"who": "ann"}, user_id="bob"))
    assert accepts(lg, hermes(PING))  # the unbound tool, written as its schema says
    assert lg.unenforced == (("book", "user_id.x", "user_id may be other than an object"),
                             ("book", "meta.who.x", "meta.who may be other than an object"))
