"""First visits of the turn index (issue 30; docs/design.md §14): the pruned trie walk
(``TurnIndex._walk``: subtrees whose bytes all loop, tokens written only where they end elsewhere
than most, few-node levels in Python, sparse results) gives every token the end state of the
token-by-token walk (``walk_tokens``), on random byte tables with loops, dead and accepting states
over random vocabularies with multi-byte UTF-8 and special tokens, under every setting of the
walk's thresholds, and on real JSON Schema tables."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltlagent.decode import chat, triewalk, turnlang
from ltlagent.decode.chat import TokenBytes, TurnIndex, TurnLanguage, TurnRule
from ltlagent.decode.vocab import vocab_from_bytes, vocab_from_tokenizer
from ltlagent.text.jsonschema import schema_table

from . import tiny

#: the bytes tokens are made of: letters, JSON's quote and backslash, a newline, a two-byte and a
#: three-byte character, a lone continuation byte
PIECES = [b"a", b"b", b"c", b" ", b'"', b"\\", b"\n", "é".encode(), "€".encode(), b"\x80", b"{", b"1"]

#: (DENSE_LOOPS, SMALL_LEVEL, FINISH_TOKENS, COMPILED_WALK): the defaults (the compiled walk, where
#: numba is installed), every state dense by the compiled walk, then the Python walk: its defaults,
#: everything by levels at once, everything node by node, every state dense, long paths finished
#: token by token
KNOBS = [(chat.DENSE_LOOPS, chat.SMALL_LEVEL, chat.FINISH_TOKENS, True), (1, 0, 0, True),
         (chat.DENSE_LOOPS, chat.SMALL_LEVEL, chat.FINISH_TOKENS, False), (32, 0, 0, False),
         (32, 10**6, 0, False), (1, 10**6, 10**6, False), (1, 0, 0, False), (200, 3, 2, False)]


@contextmanager
def knobs(dense: int, small: int, finish: int, compiled: bool) -> Iterator[None]:
    with mock.patch.object(chat, "DENSE_LOOPS", dense), mock.patch.object(chat, "SMALL_LEVEL", small), \
            mock.patch.object(chat, "FINISH_TOKENS", finish), \
            mock.patch.object(chat, "COMPILED_WALK", compiled):
        yield


def random_language(rng: random.Random, n: int) -> TurnLanguage:
    """``n`` states: each loops on a share of the bytes (none, half, nearly all), sends a share to
    one favourite state (a string's first character), the rest to random states or the dead row."""
    dead = n
    trans = np.full((n + 1, 256), dead, dtype=np.int32)
    for q in range(n):
        loop, fav = rng.choice([(0.0, 0.0), (0.5, 0.2), (0.95, 0.0), (0.0, 0.9), (0.3, 0.0)])
        favourite = rng.randrange(n)
        for b in range(256):
            x = rng.random()
            if x < loop:
                trans[q, b] = q
            elif x < loop + fav:
                trans[q, b] = favourite
            elif rng.random() < 0.6:
                trans[q, b] = rng.randrange(n)
    accepting = np.array([rng.random() < 0.3 for _ in range(n)] + [False])
    return TurnLanguage(trans, accepting, (0, -1), TurnRule(False, frozenset(), frozenset()), "json")


def random_tokens(rng: random.Random, size: int) -> TokenBytes:
    """``size`` tokens of 1–14 pieces (shared prefixes, repeats), every single byte of the pieces,
    a special token and EOS."""
    toks: list[bytes | None] = sorted({p[:1] for p in PIECES})
    for _ in range(size):
        if toks and rng.random() < 0.4:  # extend an earlier token: deep shared prefixes
            base = rng.choice([t for t in toks if t]) or b""
        else:
            base = b""
        toks.append(base + b"".join(rng.choice(PIECES) for _ in range(rng.randint(1, 14))))
    if rng.random() < 0.5:
        toks.append(toks[-1])  # two ids with the same bytes
    toks += [None, None]
    return TokenBytes.of(vocab_from_bytes(toks, eos_ids=[len(toks) - 1]))


def same_as_walk(index: TurnIndex, states: list[int]) -> None:
    """Every token's end state, the mask and a few steps agree with the token-by-token walk."""
    lang, rng = index.lang, random.Random(len(states))
    for s in states:
        fresh = TurnIndex(lang, index.tokens, shift_min=index.shift_min)
        want = fresh.walk_tokens(s)
        mask = fresh.allowed(s)  # the mask first: a sparse visit builds it from its live tokens
        expect = want != lang.dead
        if lang.accepting[s]:
            expect[index.tokens.eos] = True
        assert np.array_equal(mask, expect), s
        for tok in rng.sample(range(index.vocab.size), min(20, index.vocab.size)):
            if tok not in index.vocab.eos_ids:
                assert fresh.advance(s, tok) == want[tok], (s, tok)
        assert np.array_equal(fresh.ends(s), want), s
        assert np.array_equal(index.ends(s), want), s


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**20), n=st.integers(1, 9), size=st.integers(0, 150),
       knob=st.sampled_from(KNOBS))
def test_pruned_walk_equals_the_token_walk_on_random_tables(seed: int, n: int, size: int,
                                                            knob: tuple[int, int, int, bool]) -> None:
    rng = random.Random(seed)
    lang = random_language(rng, n)
    tokens = random_tokens(rng, size)
    with knobs(*knob):
        same_as_walk(TurnIndex(lang, tokens), list(range(n + 1)))


def literal_language(rng: random.Random, word: bytes) -> TurnLanguage:
    """A key's bytes: states ``0 … len(word) - 1`` each with one live byte, along ``word``, into a
    state with several (a value's start: some bytes back to 0, to itself or to a last accepting
    state that may go on by one byte)."""
    k = len(word)
    n = k + 2
    dead = n
    trans = np.full((n + 1, 256), dead, dtype=np.int32)
    for q, b in enumerate(word):
        trans[q, b] = q + 1
    for b in rng.sample(sorted({p[0] for p in PIECES}), 4):
        trans[k, b] = rng.choice([0, k, k + 1])
    trans[k + 1, word[0]] = rng.choice([0, dead])
    accepting = np.zeros(n + 1, dtype=bool)
    accepting[k + 1] = True
    return TurnLanguage(trans, accepting, (0, -1), TurnRule(False, frozenset(), frozenset()), "json")


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**20), size=st.integers(0, 150), first=st.booleans())
def test_one_live_byte_goes_down_the_trie_alone(seed: int, size: int, first: bool) -> None:
    """A state with one live byte (``TurnIndex._single``, or the general walk with it off) gives
    every token the token-by-token walk's end state: tokens along the key, tokens that cross into
    the value's state (where the path gives way to the level walk), tokens that die; and so does
    ``_single`` called on each of the key's states directly."""
    rng = random.Random(seed)
    word = b"".join(rng.choice([b"a", b"b", b'"', b"c", b"{", b"1"]) for _ in range(rng.randint(1, 9)))
    lang = literal_language(rng, word)
    pieces = [word[i:j] for i in range(len(word)) for j in range(i + 1, len(word) + 1)]
    toks: list[bytes | None] = sorted({p[:1] for p in PIECES} | set(pieces))
    for _ in range(size):  # pieces of the key, some going on past it
        toks.append(rng.choice(pieces) + b"".join(rng.choice(PIECES) for _ in range(rng.randint(0, 2))))
    toks += [None, None]
    tokens = TokenBytes.of(vocab_from_bytes(toks, eos_ids=[len(toks) - 1]))
    for compiled in (True, False):
        with mock.patch.object(chat, "SINGLE_FIRST", first), \
                mock.patch.object(chat, "COMPILED_WALK", compiled):
            same_as_walk(TurnIndex(lang, tokens), list(range(lang.trans.shape[0])))
    for q, b in enumerate(word):  # alone down the trie, the level walk where a token crosses
        for compiled in (True, False):
            index = TurnIndex(lang, tokens)
            if not index._opens(q, b):
                with mock.patch.object(chat, "COMPILED_WALK", compiled):
                    got = index._single(q, b).dense(index.vocab.size, lang.dead)
                assert np.array_equal(got, index.walk_tokens(q)), (q, word, compiled)


def string_language(rng: random.Random, broken: bool) -> TurnLanguage:
    """State 0 is a string's inside: a random share of ASCII loops, the rest goes to two other
    states or dies, and every multi-byte character goes through UTF-8 states 1–7 back to 0 (with
    ``broken``, one continuation byte leads elsewhere: then characters do not all come back)."""
    from ltlagent.decode.machine import UTF8, UTF8_BAD

    n = 10
    trans = np.full((n + 1, 256), n, dtype=np.int32)
    for u in range(UTF8_BAD):
        for b in range(256):
            v = UTF8[u][b]
            if u == 0 and b < 0x80:
                v = 0 if rng.random() < 0.8 else rng.choice([8, 9, n])
            trans[u, b] = n if v == UTF8_BAD else v
    trans[8:n] = np.where(np.arange(256) < 0x80, 0, n)
    if broken:
        trans[rng.randrange(1, 4), rng.randrange(0x80, 0xC0)] = 9  # 1–3: any continuation byte
    accepting = np.zeros(n + 1, dtype=bool)
    accepting[0] = True
    return TurnLanguage(trans, accepting, (0, -1), TurnRule(False, frozenset(), frozenset()), "json")


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**20), size=st.integers(20, 200), broken=st.booleans(),
       knob=st.sampled_from(KNOBS))
def test_whole_characters_come_back_to_a_string(seed: int, size: int, broken: bool,
                                                knob: tuple[int, int, int, bool]) -> None:
    rng = random.Random(seed)
    lang = string_language(rng, broken)
    tokens = random_tokens(rng, size)
    with knobs(*knob):
        index = TurnIndex(lang, tokens)
        assert index.utf8_closed(0) != broken
        same_as_walk(index, list(range(lang.dead + 1)))


def test_utf8_closed_states() -> None:
    rng = random.Random(5)
    assert TurnIndex(string_language(rng, False), random_tokens(rng, 5)).utf8_closed(0)
    assert not TurnIndex(string_language(rng, True), random_tokens(rng, 5)).utf8_closed(0)
    lang = TurnLanguage.of_table(schema_table({"type": "string"}))
    index = TurnIndex(lang, random_tokens(rng, 5))
    inside = int(lang.trans[0, ord('"')])
    assert index.utf8_closed(inside) and not index.utf8_closed(0)


SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "note": {"type": "string", "maxLength": 12},
                                      "n": {"type": "integer"}, "x": {"type": "number"}},
     "required": ["name"]},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}},
                                      "kind": {"enum": ["alpha", "beta", "gamma delta"]},
                                      "code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{3}$"},
                                      "ok": {"type": "boolean"}}},
    {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"},
                                                                  "v": {"type": ["string", "null"]}}}},
]


@pytest.mark.parametrize("tok", ["byte-level-2k", "sentencepiece", "straddle"])
@pytest.mark.parametrize("knob", KNOBS[:6])
def test_pruned_walk_equals_the_token_walk_on_schema_tables(tok: str,
                                                           knob: tuple[int, int, int, bool]) -> None:
    make = {"byte-level-2k": lambda: tiny.byte_level(2000), "sentencepiece": tiny.sentencepiece,
            "straddle": tiny.straddle}[tok]
    tokens = TokenBytes.of(vocab_from_tokenizer(make()))
    rng = random.Random(3)
    with knobs(*knob):
        for schema in SCHEMAS:
            lang = TurnLanguage.of_table(schema_table(schema))
            states = sorted(rng.sample(range(lang.dead + 1), min(lang.dead + 1, 60)))
            same_as_walk(TurnIndex(lang, tokens, shift_min=10**9), states)


def test_a_string_state_walks_few_nodes() -> None:
    """Inside a free string every token of letters ends where it began, unwalked: a vocabulary of
    long letter tokens costs no more levels than one of short ones."""
    lang = TurnLanguage.of_table(schema_table({"type": "string"}))
    inside = int(lang.trans[0, ord('"')])
    assert lang.loop_count[inside] > 90
    long = [bytes([b]) for b in range(256)] + [b"ab" * k for k in range(1, 40)] + [None]
    tokens = TokenBytes.of(vocab_from_bytes(long, eos_ids=[len(long) - 1]))
    index = TurnIndex(lang, tokens)
    with mock.patch.object(TurnIndex, "_level_small", side_effect=AssertionError("walked")), \
            mock.patch.object(TurnIndex, "_children", side_effect=AssertionError("walked")), \
            mock.patch.object(chat, "COMPILED_WALK", False):  # the Python walk's pruning
        ends = index.ends(inside)  # level 0 only: every subtree below a letter is letters
    assert np.array_equal(ends, index.walk_tokens(inside))


@pytest.mark.parametrize("seed", range(4))
def test_trie_spans_and_bytes_below(seed: int) -> None:
    """Each node's span of the depth-first order holds exactly the tokens under it, its own first;
    its bytes below are exactly the bytes after its prefix in those tokens."""
    tokens = random_tokens(random.Random(seed), 120)
    vocab, trie = tokens.vocab, tokens.trie
    text = {i: vocab.token_bytes(i) for i in range(vocab.size) if tokens.text[i]}
    assert sorted(trie.order.tolist()) == sorted(text)
    paths = [bytes([b]) for b in trie.levels[0].byte.tolist()]
    assert all(trie.root[p[0]] == i for i, p in enumerate(paths))
    for d, lv in enumerate(trie.levels):
        if d:
            paths = [paths[p] + bytes([b]) for p, b in zip(lv.parent.tolist(), lv.byte.tolist())]
        for i, path in enumerate(paths):
            under = trie.order[lv.span_lo[i]:lv.span_hi[i]].tolist()
            assert sorted(under) == sorted(t for t, b in text.items() if b.startswith(path))
            own = trie.order[lv.span_lo[i]:lv.own_hi[i]].tolist()
            assert sorted(own) == sorted(t for t, b in text.items() if b == path)
            bits = [int(w) for w in lv.below[i]]
            below = {b for b in range(256) if bits[b // 64] >> (b % 64) & 1}
            assert below == {x for t in under for x in text[t][len(path):]}
            rest = [text[t][len(path):] for t in under]
            assert bool(lv.whole[i]) == all(_whole_utf8(r) for r in rest), (path, rest)


def _whole_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(seed=st.integers(0, 2**20), n=st.integers(1, 40), compiled=st.booleans(), content=st.booleans())
def test_per_state_passes_from_runs_are_the_definitions(seed: int, n: int, compiled: bool,
                                                        content: bool) -> None:
    """What a language's index reads of every state, computed from the rows' runs once
    (``runs``) or by the compiled loop in one read of the table (``COMPILED_PASSES``), is the
    definition over 256 bytes: the edges between live states, the bytes that loop (the dead row's
    256 included) and their 256-bit sets, the only live byte where there is one, and where the
    content bytes all lead (fails on a run cut short at a row's end, a loop counted on a
    neighbour, a state of two one-byte runs taken as single, a bit in the wrong word, or a
    content byte or control byte left unchecked). ``content``: some states are a string's
    inside, whose content bytes lead alike, one of them maybe off by a byte."""
    rng = random.Random(seed)
    lang = random_language(rng, n)
    if content:
        for q in rng.sample(range(n), max(1, n // 2)):
            lang.trans[q, 0x20:0x80] = rng.randrange(n + 1)
            lang.trans[q, :0x20] = n
            if rng.random() < 0.5:
                lang.trans[q, rng.choice([0x00, 0x1F, 0x20, 0x21, 0x5B, 0x7F])] = rng.randrange(n)
    with mock.patch.object(turnlang, "COMPILED_PASSES", compiled):
        lang = TurnLanguage(lang.trans, lang.accepting, lang.call_start, lang.rule, lang.format)
        assert (lang._passes is not None) == (compiled and triewalk.compiled_passes() is not None)
    t, dead = lang.trans, lang.dead
    eq = t == np.arange(t.shape[0])[:, None]
    assert lang.loop_count.tolist() == eq.sum(axis=1).tolist()
    bits = [sum(1 << b for b in range(256) if eq[q, b]) for q in range(t.shape[0])]
    assert [sum(int(w) << (64 * i) for i, w in enumerate(row)) for row in lang.loops] == bits
    live = t != dead
    want = [int(np.flatnonzero(r)[0]) if r.sum() == 1 else -1 for r in live]
    assert lang.single.tolist() == want
    content_bytes = [b for b in range(0x20, 0x80) if b not in (0x22, 0x5C)]
    step = [int(r[0x61]) if all(r[b] == r[0x61] for b in content_bytes) and all(r[:0x20] == dead) else -1
            for r in t]
    assert lang.content_step.tolist() == step
    src, lo, length, dst = lang.runs
    assert int(length.sum()) == 256 * dead
    assert all(t[s, lo[i]:lo[i] + length[i]].tolist() == [dst[i]] * int(length[i])
               for i, s in enumerate(src.tolist()))
    edges = {(s, int(d)) for s in range(dead) for d in t[s] if d != dead}
    assert set(zip(lang.edges[0].tolist(), lang.edges[1].tolist())) == edges
