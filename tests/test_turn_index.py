"""The turn index's first visits (issue 18; docs/design.md §14): the byte-trie walk gives every
token the same end state as walking every token's bytes over the padded matrix, on random states of
real turn languages and several tokenizers; the vectorised distances equal a plain breadth-first
search; free text refuses bytes that leave it invalid UTF-8 unless told not to."""

from __future__ import annotations

import random
import sys
from collections import deque
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from ltlagent.decode import chat
from ltlagent.decode.chat import Period, TokenBytes, TurnCursor, TurnIndex, TurnLanguage, TurnRule
from ltlagent.decode.vocab import vocab_from_bytes, vocab_from_tokenizer
from ltlagent.text.bytetable import row_edges

from . import tiny

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "booking"))
from domain import TOOLS

SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}  # type: ignore[index]
NAMES = frozenset(SCHEMAS)
#: tools with long strings (character counts with periods), one in an unbounded array (re-entered)
LONG: dict[str, dict[str, object]] = {
    "note": {"type": "object", "properties": {
        "summary": {"type": "string", "maxLength": 90},
        "who": {"type": "array", "maxItems": 2, "items": {"type": "string", "minLength": 2, "maxLength": 40}},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 30}}},
        "required": ["summary"]},
    "mail": {"type": "object", "properties": {"body": {"type": "string", "maxLength": 60}}},
}
RULES = [TurnRule(True, NAMES, NAMES), TurnRule(False, frozenset({"book"}), frozenset()),
         TurnRule(True, frozenset(), frozenset({"find_user", "cancel_booking"}))]
TOKENIZERS = {"byte-level": lambda: tiny.byte_level(), "byte-level-2k": lambda: tiny.byte_level(2000),
              "sentencepiece": tiny.sentencepiece, "straddle": tiny.straddle}


@pytest.fixture(scope="module")
def languages() -> dict[tuple[int, str], TurnLanguage]:
    return {(i, fmt): TurnLanguage.build(rule, SCHEMAS, fmt)  # type: ignore[arg-type]
            for i, rule in enumerate(RULES) for fmt in ("hermes", "json")}


@pytest.mark.parametrize("tok", sorted(TOKENIZERS))
def test_trie_walk_equals_the_matrix_walk(tok: str, languages: dict[tuple[int, str], TurnLanguage]
                                          ) -> None:
    tokens = TokenBytes.of(vocab_from_tokenizer(TOKENIZERS[tok]()))
    rng = random.Random(7)
    for lang in languages.values():
        index = TurnIndex(lang, tokens, shift_min=10**9)  # every first visit walks the trie
        states = [*range(min(lang.dead, 30)), *rng.sample(range(lang.dead + 1), min(lang.dead + 1, 120))]
        for s in states:
            assert np.array_equal(index.ends(s), index.walk_tokens(s)), (tok, s)
        assert index.derived == 0


def _distance(lang: TurnLanguage) -> np.ndarray:
    """Fewest bytes to acceptance by a breadth-first search over Python sets (the reference)."""
    n = lang.trans.shape[0]
    far = np.iinfo(np.int32).max // 2
    rev: list[set[int]] = [set() for _ in range(n)]
    for q in range(n - 1):
        for r in set(lang.trans[q].tolist()):
            rev[r].add(q)
    dist = np.full(n, far, dtype=np.int64)
    dist[lang.accepting] = 0
    todo = deque(int(q) for q in np.nonzero(lang.accepting)[0])
    while todo:
        r = todo.popleft()
        for q in rev[r]:
            if dist[q] == far:
                dist[q] = dist[r] + 1
                todo.append(q)
    dist[lang.dead] = far
    return dist


def test_distance_is_the_breadth_first_distance(languages: dict[tuple[int, str], TurnLanguage]) -> None:
    for key in [(1, "hermes"), (2, "json")]:
        lang = languages[key]
        assert np.array_equal(lang.distance, _distance(lang)), key


def test_budget_shortcut_gives_the_same_masks(languages: dict[tuple[int, str], TurnLanguage]) -> None:
    """``allowed_within`` skips the pass over the vocabulary when every allowed token leaves
    enough room; the masks are those of the pass (computed here directly)."""
    tokens = TokenBytes.of(vocab_from_tokenizer(tiny.byte_level()))
    lang = languages[0, "hermes"]
    index = TurnIndex(lang, tokens)
    rng = random.Random(3)
    for s in rng.sample(range(lang.dead), 60):
        for budget in (1, 3, 8, 40, 400, 4000):
            mask = index.allowed(s)
            ok = mask & (index.need[index.ends(s)] <= budget - 2)
            if lang.accepting[s]:
                ok[tokens.eos] = True
            want = ok if ok.any() else mask
            assert np.array_equal(index.allowed_within(s, budget), want), (s, budget)


def _run(lang: TurnLanguage, data: bytes) -> int:
    s = lang.initial
    for b in data:
        s = int(lang.trans[s, b])
    return s


@pytest.mark.parametrize("fmt", ["hermes", "json"])
def test_free_text_stays_utf8(fmt: str) -> None:
    """By default a turn's text is valid UTF-8: a lone continuation byte, an overlong form or a
    surrogate is refused, and the turn cannot end (EOS) or begin a call inside a character;
    ``utf8=False`` allows any bytes."""
    rule = TurnRule(True, NAMES, NAMES)
    strict = TurnLanguage.build(rule, SCHEMAS, fmt)  # type: ignore[arg-type]
    loose = TurnLanguage.build(rule, SCHEMAS, fmt, utf8=False)  # type: ignore[arg-type]
    for bad in [b"ok \x80", b"\x80", b"caf\xc3\xa9\xa9", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf5"]:
        assert _run(strict, bad) == strict.dead, bad
        assert _run(loose, bad) != loose.dead, bad
    for good in ["café ", "日本 😀", "naïve"]:
        s = _run(strict, good.encode())
        assert s != strict.dead and strict.accepting[s], good
    half = _run(strict, "ok é".encode()[:-1])  # inside a character
    assert half != strict.dead and not strict.accepting[half]
    assert _run(strict, "ok é".encode()[:-1] + CALL_MARK[fmt]) == strict.dead
    assert loose.accepting[_run(loose, "ok é".encode()[:-1])]
    # at the token level: the lone continuation byte's token is masked out after text
    tokens = TokenBytes.of(vocab_from_tokenizer(tiny.byte_level()))
    cont = [i for i in range(tokens.vocab.size) if tokens.vocab.token_bytes(i) == b"\x80"]
    assert cont
    for lang, allowed in [(strict, False), (loose, True)]:
        cur = TurnCursor(TurnIndex(lang, tokens))
        for b in b"ok":
            cur.advance(tokens.vocab.single_byte_tokens()[b])
        assert bool(cur.allowed()[cont[0]]) == allowed


CALL_MARK = {"hermes": b"<tool_call>", "json": b"{"}


@pytest.mark.parametrize("chains", [False, True])
@pytest.mark.parametrize("tok", ["byte-level-2k", "straddle", "sentencepiece"])
def test_first_visits_from_a_lower_count_equal_the_walk(tok: str, chains: bool) -> None:
    """Inside a string's character count a first visit follows from a lower count (``Period``);
    with ``shift_min=1`` nearly every such visit does, and each equals the walk of every token.
    With content chains on (the default), most of them follow from the chain instead."""
    tokens = TokenBytes.of(vocab_from_tokenizer(TOKENIZERS[tok]()))
    rng = random.Random(11)
    for key in ["hermes", "json"]:
        lang = TurnLanguage.build(TurnRule(True, frozenset(LONG), frozenset(LONG)), LONG, key)
        assert lang.periods
        with mock.patch.object(chat, "CONTENT_CHAINS", chains):
            index = TurnIndex(lang, tokens, shift_min=1)
            assert len(index.periods) == len(lang.periods)  # every hint checks out here
            inside = [s for p in index.periods for s in range(p.a, p.b)]
            states = sorted(rng.sample(inside, 150)) + rng.sample(inside, 150)
            for s in states:
                assert np.array_equal(index.ends(s), index.walk_tokens(s)), (tok, key, s)
        if chains:  # the counts and the insides of characters; escapes still from a lower count
            assert index.chained > 50 and index.chained + index.derived > 100
        else:
            assert index.derived > 100 and not index.chained


def test_a_wrong_period_hint_is_refused() -> None:
    lang = TurnLanguage.build(TurnRule(False, frozenset(LONG), frozenset()), LONG)
    a, b, k = lang.periods[0]
    src, dst = row_edges(lang.trans[:-1])
    assert Period.check(lang, a, b, k, src, dst) is not None
    assert Period.check(lang, a, b, k + 1, src, dst) is None
    assert Period.check(lang, a, b, k - 1, src, dst) is None


def test_tokens_that_leave_a_string_and_come_back_are_not_moved() -> None:
    """Tokens that close an array item and open the next one (``a", "bc``) re-enter the same
    string at a low count: their ends must not move with the count (the period's threshold)."""
    pieces = [bytes([b]) for b in range(256)] + [b'a", "bc', b'", "ab', b'x", "', b'", "abcd', b"abcdefgh",
                                                 b'ab"]}', b'a"], "tags": ["xy']
    tokens = TokenBytes.of(vocab_from_bytes([*pieces, None], eos_ids=[len(pieces)]))
    lang = TurnLanguage.build(TurnRule(False, frozenset(LONG), frozenset()), LONG, "json")
    for chains in (False, True):
        with mock.patch.object(chat, "CONTENT_CHAINS", chains):
            index = TurnIndex(lang, tokens, shift_min=1)
            for s in [s for p in index.periods for s in range(p.a, p.b)]:  # every state, counts rising
                assert np.array_equal(index.ends(s), index.walk_tokens(s)), s
        assert (index.chained if chains else index.derived) > 100
