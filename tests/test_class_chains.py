"""First visits along class chains (issue 30; docs/design.md §14): a state whose bytes of one ASCII
class (``[a-z0-9-]``, ``[0-9a-f]``, a format's digits) all lead to one state, along a chain of
such states (a ``+``, a count, a fixed length), gets the ends of the tokens made of class bytes from
the chain and walks the others that begin in the class (``TurnIndex._class``). Every token's end,
the mask and ``advance`` must equal the token-by-token walk (``walk_tokens``) on random patterns,
formats and lengths, over vocabularies whose tokens mix class bytes with quotes, backslashes,
escapes, bytes of other classes, non-ASCII and control bytes, and run longer than the chains."""

from __future__ import annotations

import functools
import random
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltlagent.decode import chat
from ltlagent.decode.chat import TokenBytes, TurnIndex, TurnLanguage
from ltlagent.decode.vocab import vocab_from_bytes
from ltlagent.text.jsonschema import schema_table

from .test_content_chains import random_states, same_as_walk
from .test_content_chains import vocabulary as content_vocabulary

#: pieces of class runs and of what leaves a class
PIECES = [b"a", b"z", b"f", b"g", b"0", b"9", b"ab", b"cafe", b"0f3", b"12", b"2024", b"-", b"_", b":", b".",
          b"A", b"Z", b"QX", b" ", b"/", b"@", b'"', b'",', b'"}', b"\\", b"\\n", b"\\u0041", b"\n",
          "é".encode(), b"\xc3", b"\x80", b"~", b"\x7f", b"T", b"+", b"e"]


def class_tokens(seed: int, size: int) -> TokenBytes:
    """Every single byte, ``size`` random tokens of 1–10 pieces, runs of one class longer than the
    chains (and than 254 bytes), two special tokens (the last EOS)."""
    rng = random.Random(seed)
    toks: list[bytes | None] = [bytes([b]) for b in range(256)]
    for _ in range(size):
        toks.append(b"".join(rng.choice(PIECES) for _ in range(rng.randint(1, 10))))
    toks += [b"ab" * k for k in (2, 5, 11, 40)] + [b"7" * k for k in (3, 8, 20)] + [b"a" * 300, b"0f" * 140,
                                                                                   b"a" * 300 + b'"']
    toks += [b' "', b' "ab', b' "a-0",', b' "0f3"}', b' "\\u0041']  # a string opened after a space
    toks += [None, None]
    return TokenBytes.of(vocab_from_bytes(toks, eos_ids=[len(toks) - 1]))


@functools.cache
def vocabulary(name: str) -> TokenBytes:
    if name.startswith("classes"):
        return class_tokens(int(name[7:]), 500)
    return content_vocabulary(name)


VOCABULARIES = ["classes1", "classes2", "pieces1", "byte-level-2k", "sentencepiece"]

#: character classes: letters, digits, hex, mixed, with ``-``, ``_``, ``:``, ``.``, a space, non-ASCII
CLASSES = ["a-z", "0-9", "0-9a-f", "a-z0-9-", "A-Za-z0-9_:-", "A-Z", "a-zA-Z", r"\w", r"\w.-", "a-z0-9 ",
           "0-9A-Fa-f", "a-zé", r"\w:-", "!-~", "a-z0-9._%+-"]
_class = st.sampled_from(CLASSES)
_leaf = st.one_of(
    st.builds(lambda c: {"type": "string", "pattern": f"^[{c}]+$"}, _class),
    st.builds(lambda c, n: {"type": "string", "pattern": f"^[{c}]{{{n}}}$"}, _class, st.integers(1, 12)),
    st.builds(lambda c, lo, n: {"type": "string", "pattern": f"^[{c}]{{{lo},{lo + n}}}$"}, _class,
              st.integers(0, 3), st.integers(0, 20)),
    st.builds(lambda c, n: {"type": "string", "pattern": f"^[{c}]+$", "maxLength": n}, _class,
              st.integers(1, 30)),
    st.builds(lambda c, d: {"type": "string", "pattern": f"^[{c}]+[.][{d}]{{2,3}}$"}, _class, _class),
    st.builds(lambda c, d: {"type": "string", "pattern": f"^[{c}]*-[{d}]+$"}, _class, _class),
    st.builds(lambda c: {"type": "string", "pattern": f"^[^{c}]+$"}, st.sampled_from(["/", '"', "a-z", ","])),
    st.sampled_from([{"type": "string", "format": f}
                     for f in ("hostname", "date", "time", "date-time", "uuid", "ipv4", "email")]),
    st.just({"type": "string", "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}$"}),
    st.builds(lambda c, d, n: {"type": "string", "pattern": f"^[{c}]{{{n}}}[{d}]+$"}, _class, _class,
              st.integers(1, 4)),
    st.just({"type": "integer"}),
)
SCHEMAS = st.one_of(
    _leaf,
    st.builds(lambda item, n: {"type": "array", "items": item, "maxItems": n}, _leaf, st.integers(1, 3)),
    st.builds(lambda props: {"type": "object", "properties": dict(zip("pqr", props)),
                             "additionalProperties": False}, st.lists(_leaf, min_size=1, max_size=3)),
)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(schema=SCHEMAS, name=st.sampled_from(VOCABULARIES), seed=st.integers(0, 2**20),
       kept=st.sampled_from([chat.CLASS_KEPT, 1]))
def test_class_chains_equal_the_token_walk_on_random_schemas(schema: Any, name: str, seed: int,
                                                            kept: int) -> None:
    lang, states = random_states(schema, seed)
    tokens = vocabulary(name)
    with mock.patch.object(chat, "CLASS_KEPT", kept):  # classes kept by the vocabulary, or the last only
        index = TurnIndex(lang, tokens)
        same_as_walk(index, states)


def _chain(pattern: str, first: bytes, **extra: Any) -> tuple[TurnLanguage, list[int]]:
    """A string of ``pattern``'s language and the states after ``"`` then each byte of ``first``."""
    lang = TurnLanguage.of_table(schema_table({"type": "string", "pattern": pattern, **extra}))
    states = [int(lang.trans[0, ord('"')])]
    for x in first:
        states.append(int(lang.trans[states[-1], x]))
    return lang, states


@pytest.mark.parametrize("name", VOCABULARIES)
@pytest.mark.parametrize("pattern,text,extra,apart", [
    ("^[a-z0-9-]+$", b"ab-9", {}, 0),  # a loop on the class
    ("^[0-9a-f]{6}$", b"0f3a9", {}, 0),  # a count: the last row's class leads to ``"`` only
    ("^[A-Za-z0-9_:-]{1,20}$", b"Ab_:-9", {}, 0),  # a count with a quote from the second row
    ("^[a-z]+$", b"abc", {"maxLength": 9}, 0),  # a class and a maxLength: counted
    ("^[a-z][a-z0-9]*$", b"a0b", {}, 0),  # the first row's class is narrower than the next rows'
    ("^[0-9]{4}-[0-9]{2}$", b"2024-0", {}, 1),  # a date's digits: chains cut at ``-`` (its state apart)
    ("^[a-z]{2}[a-f0-9]+$", b"ab0", {}, 0),  # the third row sends ``g``–``z`` apart: cut there
    ("^[0-9a-f]{2}[0-9]{3}$", b"a01", {}, 0),  # likewise ``a``–``f``, the class's first byte kept
])
def test_class_states_go_along_their_chain(name: str, pattern: str, text: bytes, extra: dict[str, int],
                                           apart: int) -> None:
    """Each state of a class string (after the quote and each byte; ``apart`` of them not) is a
    class chain's, and equals the walk: ends, masks, ``advance`` of sampled tokens."""
    tokens = vocabulary(name)
    lang, states = _chain(pattern, text, **extra)
    index = TurnIndex(lang, tokens)
    same_as_walk(index, states)
    fresh = TurnIndex(lang, tokens)
    for s in states:
        fresh.allowed(s)
    assert fresh.classed == len(set(states)) - apart, fresh.classed


def test_every_token_of_a_class_state_advances_as_walked() -> None:
    """``advance`` of every token from a class state (pure, walked, past a cut, out of the class),
    before the mask is asked (the part's lookups), equals the walk."""
    tokens = vocabulary("classes1")
    for pattern, text in (("^[0-9a-f]{4}-[0-9]+$", b"0f"), ("^[a-z0-9-]+$", b"a"), ("^[a-z]{2,5}$", b"")):
        lang, states = _chain(pattern, text)
        for s in states:
            index = TurnIndex(lang, tokens)
            want = index.walk_tokens(s)
            got = [index.advance(s, t) for t in range(tokens.vocab.size) if t not in tokens.vocab.eos_ids]
            assert got == [w for t, w in enumerate(want.tolist()) if t not in tokens.vocab.eos_ids], s
            assert np.array_equal(index.ends(s), want)


def test_off_is_the_walk() -> None:
    """With class chains off every such state walks the trie, and the ends are the same."""
    tokens = vocabulary("classes2")
    lang, states = _chain("^[a-z0-9-]{2,40}$", b"a-0b")
    with mock.patch.object(chat, "CLASS_CHAINS", False):
        index = TurnIndex(lang, tokens)
        same_as_walk(index, states)
    assert index.classed == 0


@pytest.mark.parametrize("name", VOCABULARIES)
def test_byte_sets(name: str) -> None:
    """The per-vocabulary byte sets by a plain definition: in the trie's order, each token's ASCII
    bytes (byte 0 for any non-ASCII), its length capped at 255; ``first_at`` by first bytes."""
    tokens = vocabulary(name)
    lo, hi, lens = tokens.byte_sets
    order = tokens.trie.order.tolist()
    for k, i in enumerate(order):
        tok = tokens.vocab.token_bytes(i)
        bits = 0
        for x in tok:
            bits |= 1 << (x if x < 0x80 else 0)
        assert (int(lo[k]), int(hi[k]), int(lens[k])) == (bits & (2**64 - 1), bits >> 64, min(len(tok), 255))
    firsts = [tokens.vocab.token_bytes(i)[0] for i in order]
    for x in range(257):
        assert tokens.first_at[x] == sum(f < x for f in firsts), x


@pytest.mark.parametrize("name", VOCABULARIES)
def test_class_tokens(name: str) -> None:
    """A class's tokens by a plain definition: pure (every byte in the class), the longest pure
    one's length, the others that begin in the class with their first byte out of it; kept by the
    vocabulary (the same object on the next visit), the oldest dropped past ``CLASS_KEPT``."""
    tokens = vocabulary(name)
    for chars in (b"abcdefghijklmnopqrstuvwxyz0123456789-", b"0123456789abcdef", b"0123456789", b"ABC :_"):
        has = np.zeros(256, dtype=bool)
        has[list(chars)] = True
        ct = tokens.class_tokens(has)
        assert tokens.class_tokens(has.copy()) is ct
        pure, walk = [], {}
        for i in range(tokens.vocab.size):
            tok = tokens.vocab.token_bytes(i)
            if not tokens.text[i] or not tok or tok[0] not in chars:
                continue
            out = [k for k, x in enumerate(tok) if x not in chars]
            if out:
                walk[i] = out[0]
            else:
                pure.append(i)
        assert np.flatnonzero(ct.pure).tolist() == pure, chars
        assert ct.longest == max((min(len(tokens.vocab.token_bytes(i)), 255) for i in pure), default=0)
        assert dict(zip(ct.walk.tolist(), ct.walk_at.tolist())) == walk
    with mock.patch.object(chat, "CLASS_KEPT", 2):
        first = np.zeros(256, dtype=bool)
        first[0x61] = True
        kept = tokens.class_tokens(first)
        for x in (0x62, 0x63):
            other = np.zeros(256, dtype=bool)
            other[x] = True
            tokens.class_tokens(other)
        assert tokens.class_tokens(first) is not kept and len(tokens._classes) <= 2
