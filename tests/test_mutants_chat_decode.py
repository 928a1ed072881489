"""The token index of ``ltlagent.decode.chat`` over a vocabulary large enough that its trie's levels
are walked at once (numpy) as well as node by node, and with long tokens inside strings: every
token's end state, from states all over a turn, against a plain byte-by-byte reference. Fast (no
tokenizer, no model), for the mutation run of issue 31 (docs/mutation.md, "decode/chat.py");
``tests/test_mutants_turn.py`` has the small-vocabulary tests."""

from __future__ import annotations

import random
from unittest import mock

import numpy as np
import pytest

from ltlagent.decode import chat
from ltlagent.decode.chat import TokenBytes, TurnCursor, TurnIndex, TurnLanguage, TurnRule
from ltlagent.decode.vocab import vocab_from_bytes

SCHEMAS: dict[str, dict[str, object]] = {
    "ping": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    "note": {"type": "object", "properties": {"text": {"type": "string", "maxLength": 40}}}}
TURNS = [
    'Hi, a note é € 😀 <tool_call>\n{"name": "note", "arguments": {"text": "abc dé€😀 xyz aaaa bbbb"}}'
    '\n</tool_call>',
    '<tool_call>\n{"name": "ping", "arguments": {"n": 12}}\n</tool_call>',
    '{"name": "ping", "arguments": {"n": -7}}',
]
PIECES = ["a", "b", "é", "€", "😀", " ", '"', "{", "}", ":", ",", "<", "\n", "1", "x", "\\", "n",
          "tool", "call", "_", ">", "/", "name", "note", "ping", "text", "arguments"]


def vocabulary(seed: int = 0, n: int = 1000) -> list[bytes | None]:
    """Every byte, then ``n`` random tokens of 1 to 12 pieces (shared prefixes: wide trie levels),
    a few long runs of one letter (longer than a period's cover), broken UTF-8, then EOS."""
    rng = random.Random(seed)
    words: set[bytes] = set()
    while len(words) < n:
        words.add("".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 13))).encode())
    for k in (17, 23, 30, 38, 45):
        words.update({b"a" * k, b"b" * k + b'"', b"a" * k + "é".encode()})
    words.update({b"\xe2\x82", b"\xac\x80", b"a\xc3", b"\xa9b"})
    return [bytes([b]) for b in range(256)] + sorted(words) + [None]


def states(lg: TurnLanguage, seed: int, n: int = 8) -> list[int]:
    """States on the way of each of ``TURNS`` and of random byte walks."""
    out = {lg.initial, lg.dead}
    for t in TURNS:
        s = lg.initial
        for b in t.encode():
            s = int(lg.trans[s, b])
            out.add(s)
    rng = random.Random(seed)
    for _ in range(n):
        s = lg.initial
        for _ in range(rng.randrange(1, 80)):
            nxt = np.flatnonzero(lg.trans[s] != lg.dead)
            if not nxt.size:
                break
            s = int(lg.trans[s, int(rng.choice(nxt.tolist()))])
            out.add(s)
    return sorted(out)


def reference_ends(lg: TurnLanguage, s: int, tokens: list[bytes | None]) -> list[int]:
    out = []
    for t in tokens:
        q = s if t else lg.dead
        for b in t or b"":
            q = int(lg.trans[q, b])
        out.append(q)
    return out


@pytest.mark.parametrize("chains", [False, True])
@pytest.mark.parametrize("fmt,shift_min", [("hermes", 16), ("hermes", 1), ("json", 1)])
def test_every_token_ends_where_its_bytes_lead(fmt: str, shift_min: int, chains: bool) -> None:
    tokens = vocabulary()
    eos = len(tokens) - 1
    lg = TurnLanguage.build(TurnRule(True, frozenset({"ping", "note"}), frozenset({"note"})), SCHEMAS, fmt)
    with mock.patch.object(chat, "CONTENT_CHAINS", chains):
        idx = TurnIndex(lg, TokenBytes.of(vocab_from_bytes(tokens, eos_ids=[eos])), shift_min=shift_min)
        seen = states(lg, 7)
        for s in seen:  # first visits in the order of a turn: counts derived from lower counts
            want = reference_ends(lg, s, tokens)
            ends = idx.ends(s)
            assert ends.tolist()[:eos] == want[:eos], s
            mask = idx.allowed(s)
            assert (mask[:eos] == (np.array(want[:eos]) != lg.dead)).all(), s
            assert bool(mask[eos]) == bool(lg.accepting[s]), s
    if shift_min == 1 and fmt == "hermes" and not chains:
        assert idx.derived > 0
    assert bool(idx.chained) == chains  # counts and free strings go along their chains


def test_advance_and_masks_agree_on_a_first_visit() -> None:
    """``advance`` before ``allowed``/``ends`` (the few-tokens answer of a first visit)."""
    tokens = vocabulary(1, 400)
    eos = len(tokens) - 1
    lg = TurnLanguage.build(TurnRule(True, frozenset({"ping"}), frozenset({"note"})), SCHEMAS)
    tb = TokenBytes.of(vocab_from_bytes(tokens, eos_ids=[eos]))
    for s in states(lg, 3):
        idx = TurnIndex(lg, tb)
        want = reference_ends(lg, s, tokens)
        got = [idx.advance(s, t) for t in range(eos)]
        assert got == want[:eos], s
        assert idx.advance(s, eos) == (s if lg.accepting[s] else lg.dead)


def test_a_cursor_writes_a_whole_turn_with_large_tokens() -> None:
    tokens = vocabulary(2, 600)
    eos = len(tokens) - 1
    lg = TurnLanguage.build(TurnRule(True, frozenset({"ping", "note"}), frozenset({"note"})), SCHEMAS)
    idx = TurnIndex(lg, TokenBytes.of(vocab_from_bytes(tokens, eos_ids=[eos])), shift_min=1)
    rng = random.Random(5)
    for budget in (0, 60, 25):
        c, left = TurnCursor(idx), budget
        for _ in range(200):
            if c.ended:
                break
            mask = c.allowed(left)
            assert mask.any() and not c.is_dead
            ok = np.flatnonzero(mask)
            c.advance(int(rng.choice(ok.tolist())) if rng.random() < 0.9 or not mask[eos] else eos)
            left -= 1 if budget else 0
        if budget:
            assert c.ended and left >= 0
        s = lg.initial
        for b in bytes(c.data):
            s = int(lg.trans[s, b])
        assert s == c.state


# -- several calls per turn (issue 30): the cursor asks what follows a complete call ------------------
BYTES = [bytes([b]) for b in range(256)] + [None]


def test_a_complete_call_hands_over_to_what_follows() -> None:
    tb = TokenBytes.of(vocab_from_bytes(BYTES, eos_ids=[256]))
    first = TurnIndex(TurnLanguage.build(TurnRule(False, frozenset({"ping"}), frozenset()), SCHEMAS), tb)
    rest = TurnIndex(TurnLanguage.build(TurnRule(True, frozenset(), frozenset()), SCHEMAS), tb)
    call = b'<tool_call>\n{"name": "ping", "arguments": {"n": 1}}\n</tool_call>'
    for budget in (0, 9):
        asked: list[tuple[bytes, int]] = []

        def then(data: bytes, left: int, asked: list[tuple[bytes, int]] = asked) -> TurnIndex | None:
            asked.append((data, left))
            return rest if len(asked) == 1 else None

        c = TurnCursor(first, then)
        assert c.starts == [0] and c.then is then
        for b in call:
            c.advance(b)
        assert c.index is first and not asked and c.can_end
        if budget:
            mask = c.allowed(budget)  # asked with the tokens left
            assert (mask == rest.allowed_within(rest.lang.initial, budget)).all()
        c.advance(ord("H"))  # or asked on the next token
        assert asked == [(call, budget)]
        assert c.index is rest and c.starts == [0, len(call)]
        assert c.state == int(rest.lang.trans[rest.lang.initial, ord("H")])
        assert bytes(c.data) == call + b"H" and c.can_end
        c.advance(256)
        assert c.ended and len(asked) == 1


def test_without_a_follower_the_turn_ends_after_the_call() -> None:
    tb = TokenBytes.of(vocab_from_bytes(BYTES, eos_ids=[256]))
    first = TurnIndex(TurnLanguage.build(TurnRule(False, frozenset({"ping"}), frozenset()), SCHEMAS), tb)
    c = TurnCursor(first, lambda data, left: None)
    for b in b'<tool_call>\n{"name": "ping", "arguments": {"n": 1}}\n</tool_call>':
        c.advance(b)
    mask = c.allowed(5)
    assert c.index is first and c.starts == [0] and np.flatnonzero(mask).tolist() == [256]
    c.advance(256)
    assert c.ended and c.can_end


# -- the table of value-restricted calls (issue 28) --------------------------------------------------
def test_a_value_table_names_its_tools_and_gives_way_to_the_limit() -> None:
    from ltlagent.decode.chat import value_call_table
    from ltlagent.errors import UsageError
    from ltlagent.text.values import ValueEnum
    tools = {"book": {"type": "object", "properties": {"user_id": {"type": "string"}, "x": {"type": "string"},
                                                       "k": {"enum": ["a", [1]]}},
                      "additionalProperties": False}}
    terms = (("book", (("user_id", ValueEnum(("bob", "ann", "carla", "dmitri", "eve"))),
                       ("k", ValueEnum(("a",))))),)
    table, left = value_call_table(tools, "hermes", None, terms)
    assert table.source == "hermes calls: book (values restricted)"
    assert left == (("book", "k", "a value that may be a list or an object"),)  # a const list
    small, left = value_call_table(tools, "hermes", None, terms, limit=table.num_states - 2)
    assert left[-1] == ("book", "user_id", f"the call table would exceed {table.num_states - 2:,} states")
    assert small.num_states < table.num_states
    with pytest.raises(UsageError, match="the hermes tool calls of book, values restricted needs more"):
        value_call_table(tools, "hermes", None, terms, limit=table.num_states // 2 + 10)


def test_few_nodes_inside_a_string_end_where_their_bytes_lead() -> None:
    """Inside a string most bytes loop; a level of few nodes is walked node by node, and a node
    whose bytes below all loop ends with its whole subtree. Tokens of whole and of broken UTF-8
    characters (their bit set read in the wrong byte order would look like looping ASCII)."""
    e, c = "é".encode(), b"\xc3"
    # many tokens below one node of few (the level is walked, not finished token by token)
    # (only bytes C2 to DF and 80 to BF below that node: read backwards they would be ASCII that loops)
    words = [e + e + chr(x).encode() for x in range(0xC0, 0x100) if x != 0xE4]
    words += [e + e, e + c, e + e + c, e + e + e, e]
    words += ["è".encode() + b"\x01", "è".encode() + b"a\x01"]  # a control byte: dead
    tokens: list[bytes | None] = [bytes([b]) for b in range(256)] + words + [None]
    eos = len(tokens) - 1
    free = {"note": {"type": "object", "properties": {"text": {"type": "string"}}}}  # no count
    lg = TurnLanguage.build(TurnRule(True, frozenset({"note"}), frozenset()), free)
    idx = TurnIndex(lg, TokenBytes.of(vocab_from_bytes(tokens, eos_ids=[eos])))
    text = '<tool_call>\n{"name": "note", "arguments": {"text": "'
    for tail in ("", "x", "é", "aa"):
        s = lg.initial
        for b in (text + tail).encode():
            s = int(lg.trans[s, b])
        assert idx.ends(s).tolist()[:eos] == reference_ends(lg, s, tokens)[:eos], tail

    # a vocabulary whose every token loops on the string's state: nothing to write
    loops = TurnIndex(lg, TokenBytes.of(vocab_from_bytes([b"a", b"bc", None], eos_ids=[2])))
    assert loops.ends(s).tolist()[:2] == [s, s]


@pytest.mark.parametrize("chains", [False, True])
@pytest.mark.parametrize("most", [24, 9])
def test_counts_derived_from_lower_counts_over_a_list_of_strings(most: int, chains: bool) -> None:
    """A string's character count (:class:`Period`) whose range a token can leave and come back
    into (the next item of a list); long tokens and tokens that run past the highest count."""
    tools = {"tag": {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string", "maxLength": most}}}, "required": ["tags"]}}
    lg = TurnLanguage.build(TurnRule(False, frozenset({"tag"}), frozenset()), tools)
    assert lg.checked_periods
    rng = random.Random(most)
    words = {b"a" * k for k in range(2, 30)} | {b'", "' + b"a" * k for k in range(0, 12)}
    words |= {b"a" * k + b'", "' + b"b" * j for k in range(0, 8) for j in range(0, 8)}
    words |= {b"a" * k + b'"]}' for k in range(0, 12)} | {"é".encode() * k for k in range(1, 8)}
    words |= {bytes(rng.choice(b'ab", ]}') for _ in range(rng.randrange(2, 16))) for _ in range(300)}
    tokens: list[bytes | None] = [bytes([b]) for b in range(256)] + sorted(words) + [None]
    eos = len(tokens) - 1
    tb = TokenBytes.of(vocab_from_bytes(tokens, eos_ids=[eos]))
    with mock.patch.object(chat, "CONTENT_CHAINS", chains):  # off: from lower counts; on: along chains
        idx = TurnIndex(lg, tb, shift_min=1)
        s = lg.initial
        for b in b'<tool_call>\n{"name": "tag", "arguments": {"tags": ["':
            s = int(lg.trans[s, b])
        for ch in "a" * (most // 2) + "é" * (most - most // 2) + '", "' + "b" * most:
            for b in ch.encode():
                assert idx.ends(s).tolist()[:eos] == reference_ends(lg, s, tokens)[:eos], s
                s = int(lg.trans[s, b])
    assert (idx.chained if chains else idx.derived) > 0


def test_a_period_is_checked_on_the_rows() -> None:
    """:meth:`Period.check` on a chain of states (1 → 2 → … on ``a``, entered from 0, state 6
    going back to 1 on ``b``): the range it accepts and the steps it measures."""
    from ltlagent.decode.chat import Period
    from ltlagent.text.bytetable import row_edges
    n = 8  # states 0 … 7, 8 dead
    trans = np.full((n + 1, 256), n, dtype=np.int32)
    for q in range(n):
        trans[q, ord("a")] = q + 1
    trans[6, ord("b")] = 1
    acc = np.zeros(n + 1, dtype=bool)
    acc[n - 1] = True
    lg = TurnLanguage(trans, acc, (0, -1), TurnRule(False, frozenset(), frozenset()), "json")
    src, dst = row_edges(np.where(trans[:-1] < n, trans[:-1], -1))
    assert Period.check(lg, 1, 6, 1, src, dst) == Period(1, 6, 1, 1, 0, 1)
    assert Period.check(lg, 0, 6, 1, src, dst) == Period(0, 6, 1, 1, 0, 1)
    assert Period.check(lg, 1, 3, 1, src, dst) == Period(1, 3, 1, 1, 0, 1)
    for a, b, k in ((1, 2, 1), (1, 10, 1), (-1, 6, 1), (1, 6, 0), (0, 9, 2)):
        assert Period.check(lg, a, b, k, src, dst) is None, (a, b, k)
    trans2 = trans.copy()
    trans2[3, ord("c")] = 1  # a step back inside the range
    lg2 = TurnLanguage(trans2, acc, (0, -1), lg.rule, "json")
    src2, dst2 = row_edges(np.where(trans2[:-1] < n, trans2[:-1], -1))
    assert Period.check(lg2, 1, 6, 1, src2, dst2) is None  # row 4 does not go back to 2


def test_no_budget_is_every_allowed_token_even_where_the_turn_may_end() -> None:
    lg = TurnLanguage.build(TurnRule(True, frozenset({"ping"}), frozenset()), SCHEMAS)
    idx = TurnIndex(lg, TokenBytes.of(vocab_from_bytes(BYTES, eos_ids=[256])))
    s = int(lg.trans[lg.initial, ord("H")])
    assert lg.accepting[s] and idx.allowed(s).sum() > 1
    for budget in (0, -3):
        assert (idx.allowed_within(s, budget) == idx.allowed(s)).all()


@pytest.mark.parametrize("single", [True, False])
def test_a_narrowed_ascii_string_and_a_vocabulary_without_single_bytes(single: bool) -> None:
    """A string narrowed to ASCII letters loops on many bytes but not on multi-byte characters
    (not UTF-8-closed); without the single-byte tokens the trie's first child is not byte 0."""
    tokens = vocabulary(4, 600)
    if not single:
        tokens = tokens[256:]
    eos = len(tokens) - 1
    free = {"note": {"type": "object", "properties": {"text": {"type": "string"}}}}
    lg = TurnLanguage.build(TurnRule(True, frozenset({"note"}), frozenset()), free,
                            fields={"note": {"text": "[a-zA-Z0-9 ]*"}})
    idx = TurnIndex(lg, TokenBytes.of(vocab_from_bytes(tokens, eos_ids=[eos])))
    s = lg.initial
    for b in b'<tool_call>\n{"name": "note", "arguments": {"text": "ab':
        assert idx.ends(s).tolist()[:eos] == reference_ends(lg, s, tokens)[:eos], s
        s = int(lg.trans[s, b])
    assert idx.ends(s).tolist()[:eos] == reference_ends(lg, s, tokens)[:eos], s


def test_a_vocabulary_of_empty_tokens_writes_nothing() -> None:
    lg = TurnLanguage.build(TurnRule(True, frozenset({"ping"}), frozenset()), SCHEMAS)
    idx = TurnIndex(lg, TokenBytes.of(vocab_from_bytes([b"", None], eos_ids=[1])))
    assert idx.ends(lg.initial).tolist() == [lg.dead, lg.dead]
    assert idx.allowed(lg.initial).tolist() == [False, False]


def test_build_keeps_its_rule_and_utf8_and_refuses_text_after_a_call() -> None:
    rule = TurnRule(True, frozenset({"ping"}), frozenset())
    lg = TurnLanguage.build(rule, SCHEMAS)
    assert lg.rule == rule and lg.format == "hermes"
    s = lg.initial
    for b in b"Hi \x80":  # UTF-8 unless told not to
        s = int(lg.trans[s, b])
    assert s == lg.dead
    bad = TurnRule(False, frozenset({"ping"}), frozenset({"note"}), after_call=True)
    with pytest.raises(ValueError, match=r"after_call needs text=False and no tools_after_text$"):
        TurnLanguage.build(bad, SCHEMAS)


def test_value_terms_of_other_tools_and_the_limit_without_terms() -> None:
    from ltlagent.decode.chat import value_call_table
    from ltlagent.errors import UsageError
    from ltlagent.text.values import ValueEnum
    terms = (("ghost", (("n", ValueEnum(("1",))),)),)  # a tool that is not offered: no terms
    table, left = value_call_table({"ping": SCHEMAS["ping"]}, "hermes", None, terms)
    assert left == () and "values restricted" not in table.source
    with pytest.raises(UsageError):
        value_call_table({"ping": SCHEMAS["ping"]}, "hermes", None, (), limit=5)


def test_a_character_of_text_leaves_no_marker_byte_pending() -> None:
    lg = TurnLanguage.build(TurnRule(True, frozenset({"ping"}), frozenset({"note"})), SCHEMAS)

    def run(text: str) -> int:
        s = lg.initial
        for b in text.encode():
            s = int(lg.trans[s, b])
        return s

    for ch in ("é", "€", "😀", "a"):
        assert not lg.in_call(run(f"Hi {ch}tool_call>\n")), ch  # only text: no '<' was written
        assert lg.in_call(run(f"Hi {ch}<tool_call>\n")), ch


def test_checked_periods_find_entries_in_one_pass() -> None:
    """:attr:`TurnLanguage.checked_periods` finds every period's entry (the highest state of its
    range entered from outside) in one pass over the edges, and each period's steps from the edges
    out of its range: the same periods as :meth:`Period.check` on every edge, one period at a time,
    on schemas with several counted strings (entered from keys, from each other, and nested in
    arrays), and with the dead state's edges left in as the reference does."""
    from ltlagent.decode.chat import Period
    from ltlagent.text.bytetable import row_edges
    from ltlagent.text.jsonschema import schema_table

    schemas = [
        {"type": "object", "properties": {k: {"type": "string", "maxLength": m} for k, m in
                                           (("a", 12), ("b", 5), ("c", 30), ("d", 9))}},
        {"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 20}, "maxItems": 3},
        {"anyOf": [{"type": "string", "maxLength": 15}, {"type": "object", "properties": {
            "x": {"type": "string", "maxLength": 25, "pattern": "^[a-f0-9]*$"}}}]},
    ]
    for schema in schemas:
        lg = TurnLanguage.of_table(schema_table(schema))
        assert len(lg.periods) >= 2, schema
        src, dst = row_edges(lg.trans[:-1])
        want = [Period.check(lg, a, b, k, src, dst) for a, b, k in lg.periods]
        assert lg.checked_periods == tuple(p for p in want if p is not None), schema
        assert any(p.entry >= p.a for p in lg.checked_periods), schema
