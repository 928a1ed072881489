"""First visits along content chains (issue 30; docs/design.md §14): a state whose JSON-string
content characters all move it alike (a free string, its first character, a character count of a
``maxLength``, a fixed length of free characters, the inside of a multi-byte character) gets its
pure tokens' ends from the chain of states and walks only the others (``TurnIndex._chain``). Every
token's end, the mask and ``advance`` must equal the token-by-token walk (``walk_tokens``), on
random schemas (lengths, fixed-length patterns, formats, escapes, non-ASCII text) over vocabularies
with quotes, backslashes, control bytes, partial and invalid UTF-8 and tokens longer than the
chain; the per-vocabulary classes are checked against a plain definition."""

from __future__ import annotations

import functools
import random
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ltlagent.decode import chat
from ltlagent.decode.chat import MOST_CHARS, MOST_WIDE, ContentTokens, TokenBytes, TurnIndex, TurnLanguage
from ltlagent.decode.vocab import vocab_from_bytes, vocab_from_tokenizer
from ltlagent.errors import SchemaError, UsageError
from ltlagent.text.jsonschema import schema_table

from . import tiny

#: pieces of string content and of what ends or escapes it
PIECES = [b"a", b"b", b"Z", b"0", b" ", b"~", b"\x7f", b'"', b"\\", b"\\n", b"\\u00e9", b'\\"', b"\n", b"\t",
          "é".encode(), "€".encode(), "😀".encode(), b"\xc3", b"\xa9", b"\x80", b"\xe2\x82", b"\xff", b",",
          b":", b"}", b"]", b"-", b"@", b".", b"1", b"9", b"12", b"2024", b"e", b"E+"]


def piece_tokens(seed: int, size: int) -> TokenBytes:
    """Every single byte, ``size`` random tokens of 1–12 pieces, long runs of letters (one longer
    than :data:`MOST_CHARS`, walked whole), tokens that open a string after a space, two special
    tokens (the last EOS)."""
    rng = random.Random(seed)
    toks: list[bytes | None] = [bytes([b]) for b in range(256)]
    for _ in range(size):
        toks.append(b"".join(rng.choice(PIECES) for _ in range(rng.randint(1, 12))))
    toks += [b"ab" * k for k in (3, 9, 20)] + [b"x" * (MOST_CHARS + 3), "é".encode() * 30 + b'"',
                                                b"y" * 20 + "é".encode() + b"z" * 5, "€".encode() * 14]
    toks += [b' "', b' "ab', b' "a",', b' "\\"', ' "é'.encode(), b' "' + b"x" * 30, b' ""',
             b' "a\n']  # `` "``
    toks += [None, None]
    return TokenBytes.of(vocab_from_bytes(toks, eos_ids=[len(toks) - 1]))


@functools.cache
def vocabulary(name: str) -> TokenBytes:
    if name.startswith("pieces"):
        return piece_tokens(int(name[6:]), 400)
    make = {"byte-level-2k": lambda: tiny.byte_level(2000), "sentencepiece": tiny.sentencepiece,
            "straddle": tiny.straddle}[name]
    return TokenBytes.of(vocab_from_tokenizer(make()))


VOCABULARIES = ["pieces1", "pieces2", "byte-level-2k", "sentencepiece", "straddle"]

_leaf = st.one_of(
    st.just({"type": "string"}),
    st.builds(lambda n, lo: {"type": "string", "maxLength": n, "minLength": min(lo, n)},
              st.integers(0, 24), st.integers(0, 4)),
    st.builds(lambda n: {"type": "string", "pattern": f"^.{{{n}}}$"}, st.integers(1, 12)),
    st.builds(lambda n: {"type": "string", "pattern": f"^[^,]{{{n}}}x$"}, st.integers(1, 6)),
    st.sampled_from([{"type": "string", "format": f}
                     for f in ("date", "email", "uuid", "date-time", "time")]),
    st.just({"enum": ['a"b', "é\\n", "x\ny", "€uro", "\u00e9\u00e9\u00e9"]}),
    st.just({"const": "ü€😀 \"q\" \\ end"}),
    st.just({"type": "integer"}),
)
SCHEMAS = st.one_of(
    _leaf,
    st.builds(lambda item, n: {"type": "array", "items": item, "maxItems": n}, _leaf, st.integers(1, 3)),
    st.builds(lambda props, extra: {"type": "object", "properties": dict(zip("pqr", props)),
                                    "additionalProperties": extra},
              st.lists(_leaf, min_size=1, max_size=3),
              st.sampled_from([False, {"type": "string", "maxLength": 5}])),
)


def same_as_walk(index: TurnIndex, states: list[int]) -> None:
    """Every token's end, the mask and a few steps agree with the token-by-token walk."""
    lang, rng = index.lang, random.Random(len(states))
    for s in states:
        fresh = TurnIndex(lang, index.tokens)
        want = fresh.walk_tokens(s)
        expect = want != lang.dead
        if lang.accepting[s]:
            expect[index.tokens.eos] = True
        assert np.array_equal(fresh.allowed(s), expect), s  # the mask first, from the chain's classes
        for tok in rng.sample(range(index.vocab.size), min(30, index.vocab.size)):
            if tok not in index.vocab.eos_ids:
                assert fresh.advance(s, tok) == want[tok], (s, tok)
        assert np.array_equal(fresh.ends(s), want), s
        assert np.array_equal(index.ends(s), want), s  # one index: later counts from checked rows


def random_states(schema: Any, seed: int) -> tuple[TurnLanguage, list[int]]:
    """A drawn schema's language (a refused schema is assumed away) and up to 40 of its states,
    drawn with ``seed``: what the random chain tests compare with the walk."""
    try:
        table = schema_table(schema)
    except (SchemaError, UsageError):
        assume(False)
        raise AssertionError("unreachable") from None
    lang = TurnLanguage.of_table(table)
    rng = random.Random(seed)
    return lang, sorted(rng.sample(range(lang.dead + 1), min(lang.dead + 1, 40)))


@settings(max_examples=50, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(schema=SCHEMAS, name=st.sampled_from(VOCABULARIES), seed=st.integers(0, 2**20),
       lookups=st.sampled_from([chat.LIVE_LOOKUPS, 0, 2, 10**6]))
def test_chains_equal_the_token_walk_on_random_schemas(schema: Any, name: str, seed: int,
                                                      lookups: int) -> None:
    lang, states = random_states(schema, seed)
    tokens = vocabulary(name)
    with mock.patch.object(chat, "LIVE_LOOKUPS", lookups):  # sparse children: numpy, lookups, steps
        index = TurnIndex(lang, tokens)
        same_as_walk(index, states)


def _count_language(max_length: int) -> tuple[TurnLanguage, list[int]]:
    """A ``maxLength`` string's language and its chain of counts (the state after ``"`` and
    each further ``a``)."""
    lang = TurnLanguage.of_table(schema_table({"type": "string", "maxLength": max_length}))
    chain = [int(lang.trans[0, ord('"')])]
    for _ in range(max_length):
        chain.append(int(lang.trans[chain[-1], ord("a")]))
    return lang, chain


@pytest.mark.parametrize("name", VOCABULARIES)
def test_every_count_of_a_string_is_chained(name: str) -> None:
    """Each count of a ``maxLength`` string but the last (only ``"`` lives there: sparse, walked),
    the free string and a character's inside go along the chain, and each equals the walk."""
    tokens = vocabulary(name)
    for max_length in (1, 7, 30):
        lang, counts = _count_language(max_length)
        index = TurnIndex(lang, tokens)
        same_as_walk(index, counts)
        assert index.chained == len(counts) - 1
        inside = int(lang.trans[counts[2 if max_length > 1 else 0], 0xE2])  # a 3-byte character's lead read
        fresh = TurnIndex(lang, tokens)
        same_as_walk(fresh, [inside])
        assert fresh.chained == 1
    lang = TurnLanguage.of_table(schema_table({"type": "object", "additionalProperties": {"type": "string"}}))
    index = TurnIndex(lang, tokens)
    same_as_walk(index, list(range(lang.dead + 1)))
    assert index.chained >= 2  # a free key and a free value


@pytest.mark.parametrize("rows", [0, 10**6])
@pytest.mark.parametrize("cell", ["ascii", "del", "control", "continuation", "lead", "last"])
def test_a_row_off_the_chain_is_walked(cell: str, rows: int) -> None:
    """A count whose row breaks the chain in one byte (a content byte, a control byte, a byte
    inside a multi-byte character) makes every lower count fall back to the walk, and the ends
    stay those of the walk; UTF-8 checked all rows at once and row by row (``UTF8_ROWS``)."""
    tokens = vocabulary("pieces1")
    lang, counts = _count_language(12)
    trans = lang.trans.copy()
    q = counts[5]
    if cell == "ascii":
        trans[q, ord("Q")] = counts[2]
    elif cell == "del":  # the last content byte
        trans[q, 0x7F] = counts[2]
    elif cell == "control":
        trans[q, 0x09] = counts[6]
    else:
        lead = int(trans[q, 0xC3])
        if cell == "continuation":
            trans[lead, 0xA9] = counts[2]
        elif cell == "lead":
            trans[q, 0xC3] = trans[q, 0xE2]
        else:  # every 4-byte character's last byte to another count
            third = int(trans[int(trans[int(trans[q, 0xF1]), 0x80]), 0x80])
            trans[third, 0x80:0xC0] = counts[2]
    broken = TurnLanguage(trans, lang.accepting, lang.call_start, lang.rule, lang.format)
    with mock.patch.object(chat, "UTF8_ROWS", rows):
        index = TurnIndex(broken, tokens)
        same_as_walk(index, counts)
    assert index.chained == len(counts) - 7  # counts 6… but the last: their chains do not reach row 5


def test_what_follows_the_string_is_walked() -> None:
    """The string's end takes any byte here (NUL included, which walks of one-byte rows must not
    read): the chain holds, and tokens that close the string end where the walk does."""
    tokens = vocabulary("pieces1")
    lang, counts = _count_language(6)
    trans = lang.trans.copy()
    close = int(trans[counts[0], ord('"')])
    trans[close] = counts[1]
    changed = TurnLanguage(trans, lang.accepting, lang.call_start, lang.rule, lang.format)
    index = TurnIndex(changed, tokens)
    same_as_walk(index, counts)
    assert index.chained == len(counts) - 1


@pytest.mark.parametrize("name", ["pieces1", "pieces2", "byte-level-2k", "straddle"])
def test_string_openers_of_a_sparse_state_go_along_the_chain(name: str) -> None:
    """Where a value may begin (after ``:``, ``[`` or ``,``: sparse), the tokens that open a string
    (``"…``, `` "…``) are settled along the string's chain (:attr:`TokenBytes.quoted`) and those
    that begin with a digit along the number's or the date's digits (:attr:`TokenBytes.numbers`),
    the rest walked; ends, masks and every such token's ``advance`` equal the walk."""
    tokens = vocabulary(name)
    assert tokens.quoted and tokens.quoted[0][0] == b'"'
    schema = {"type": "object", "properties": {
        "s": {"type": "string"}, "n": {"type": "string", "maxLength": 3},
        "u": {"type": ["string", "integer"]}, "a": {"type": "array", "items": {"type": "string"}},
        "i": {"type": "integer"}, "x": {"type": "number"}, "d": {"type": "string", "format": "date-time"},
        "p": {"type": "string", "pattern": "^[0-9][0-57-9][0-9]$"}}}  # a 6 parts ways in the 2nd row
    lang = TurnLanguage.of_table(schema_table(schema))
    opened = digits = 0
    openers = [i for i in range(tokens.vocab.size) if tokens.vocab.token_bytes(i)[:2] == b' "'
               or tokens.vocab.token_bytes(i)[:1] in (b'"', *(bytes([d]) for d in b"0123456789"))]
    for s in range(lang.dead):
        index = TurnIndex(lang, tokens)
        want = index.walk_tokens(s)
        assert all(index.advance(s, t) == want[t] for t in openers), s  # first: answered before the mask
        digits += any(c.chars is tokens.numbers[k][1].chars for c in getattr(index._found(s), "parts", [])
                      for k in range(2))
        same_as_walk(index, [s])
        opened += index.opened
    assert opened >= 8 and digits >= 3


def test_off_is_the_walk() -> None:
    """With chains off every visit walks the trie, and the ends are the same."""
    tokens = vocabulary("pieces2")
    lang, counts = _count_language(9)
    with mock.patch.object(chat, "CONTENT_CHAINS", False):
        index = TurnIndex(lang, tokens)
        same_as_walk(index, counts)
    assert index.chained == 0


def _plain(tok: bytes) -> tuple[str, int, int, int]:
    """The class of ``tok`` by its characters one by one: ("pure", characters, length),
    ("control", prefix characters, prefix bytes) or ("walk", prefix characters, prefix bytes),
    and one past the last multi-byte character read (one at or past :data:`MOST_WIDE` ends the
    prefix there, unless the run is longer than :data:`MOST_CHARS`)."""
    chars = at = wide = 0
    cut = None
    kind = "walk"  # a partial or invalid character
    while at < len(tok):
        for width in (1, 2, 3, 4):
            try:
                c = tok[at:at + width].decode("utf-8")
            except UnicodeDecodeError:
                continue
            break
        else:
            break
        if c in '"\\' or ord(c) < 0x20:
            kind = "control" if ord(c) < 0x20 else "walk"
            break
        if ord(c) >= 0x80:
            if chars >= MOST_WIDE and cut is None:
                cut = (chars, at, wide)
            if cut is None:
                wide = chars + 1
        chars, at = chars + 1, at + width
    else:
        kind = "pure"
    if cut is not None and chars <= MOST_CHARS:
        return "walk", *cut
    return kind, chars, at, wide


@pytest.mark.parametrize("name", VOCABULARIES)
def test_content_classes(name: str) -> None:
    tokens = vocabulary(name)
    vocab, ct = tokens.vocab, tokens.content
    at, end = ct.row_at[ct.walk_row], ct.row_end[ct.walk_row]
    rows = zip(ct.walk.tolist(), ct.walk_chars.tolist(), at.tolist(), end.tolist())
    walk = {i: (c, vocab.flat[a:b]) for i, c, a, b in rows}  # the row's bytes after the prefix
    assert np.array_equal(ct.row_chars[ct.walk_row], ct.walk_chars)
    assert ct.row_chars.tolist() == sorted(ct.row_chars.tolist())
    assert ct.walk_chars.tolist() == sorted(ct.walk_chars.tolist())
    longest = wide = 0
    for i in range(vocab.size):
        tok = vocab.token_bytes(i)
        if not tokens.text[i]:
            assert ct.chars[i] == 255 and i not in walk
            continue
        kind, chars, at, last = _plain(tok)
        if chars > MOST_CHARS:
            assert ct.chars[i] == 255 and walk[i] == (0, tok)
            continue
        longest, wide = max(longest, chars), max(wide, last)
        if kind == "pure":
            assert ct.chars[i] == chars and i not in walk, tok
        elif kind == "control":
            assert ct.chars[i] == 255 and i not in walk, tok
        else:
            assert ct.chars[i] == 255 and walk[i] == (chars, tok[at:]), tok
    assert (ct.longest, ct.wide) == (longest, wide)
    # the rows' first bytes: pairs and triples, each triple's rows contiguous, every row in one
    suffix = [vocab.flat[a:b] for a, b in zip(ct.row_at.tolist(), ct.row_end.tolist())]
    keys = list(zip(ct.row_chars.tolist(), suffix))
    assert keys == sorted(set(keys))
    assert list(zip(ct.pair_chars.tolist(), ct.pair_byte.tolist())) == sorted({(n, x[0]) for n, x in keys})
    covered: list[int] = []
    for n, p, y, lo, hi in zip(ct.tri_chars.tolist(), ct.tri_pair.tolist(), ct.tri_byte.tolist(),
                               ct.tri_lo.tolist(), ct.tri_hi.tolist()):
        covered += range(lo, hi)
        for r in range(lo, hi):
            assert keys[r][0] == n == ct.pair_chars[p] and keys[r][1][0] == ct.pair_byte[p]
            assert (keys[r][1][1] if len(keys[r][1]) > 1 else -1) == y
    assert covered == list(range(len(keys)))
    assert isinstance(ContentTokens.of(vocab), ContentTokens)


@pytest.mark.parametrize("name", VOCABULARIES)
def test_prefix_classes(name: str) -> None:
    """The classes of tokens after a string opener (``"``, `` "``) and after a first digit, by a
    plain definition: members are the tokens with the prefix; what follows it is pure (content
    characters; digits), or a pure run then a walked rest (for content: unless a control byte)."""
    tokens = vocabulary(name)
    vocab = tokens.vocab
    classes = [(after, ct, False) for after, ct, _level, _node in tokens.quoted]
    classes += [(first, ct, True) for first, ct in tokens.numbers]
    assert [c[0] for c in classes[-2:]] == [b"0123456789", b"123456789"]
    if tokens.quoted_both is not None:  # both openers at once
        classes.append((chat.STRING_OPENERS, tokens.quoted_both[0], False))
    for prefix, ct, digits in classes:
        assert ct.digits == digits
        rows = {i: (c, vocab.flat[ct.row_at[r]:ct.row_end[r]])
                for i, c, r in zip(ct.walk.tolist(), ct.walk_chars.tolist(), ct.walk_row.tolist())}
        members = []
        for i in range(vocab.size):
            tok = vocab.token_bytes(i)
            has = tokens.text[i] and (tok[:1] != b"" and tok[0] in prefix if digits
                                      else tok.startswith(prefix))
            if not has:
                assert ct.chars[i] == 255 and i not in rows
                continue
            members.append(i)
            openers = (prefix,) if isinstance(prefix, bytes) else prefix
            rest = tok[1:] if digits else tok[len(next(x for x in openers if tok.startswith(x))):]
            if digits:
                run = len(rest) - len(rest.lstrip(b"0123456789"))
                kind = "pure" if run == len(rest) else "walk"
                chars, at = run, run
            else:
                kind, chars, at, _last = _plain(rest)
            if kind == "pure":
                assert ct.chars[i] == chars and i not in rows, tok
            elif kind == "control":
                assert ct.chars[i] == 255 and i not in rows, tok
            else:
                assert ct.chars[i] == 255 and rows[i] == (chars, rest[at:]), tok
        assert ct.members is not None and ct.members.tolist() == members


@pytest.mark.parametrize("change", ["none", "past", "all"])
def test_rows_checked_from_the_period(change: str) -> None:
    """A ``maxLength`` chain inside its period is checked from its first row (``_periodic``): a
    change past the period's end (the count after the last in range: ``past``) or in every row
    alike (``Q`` loops on each count: the period still holds, ``all``) is seen, and the ends stay
    the walk's."""
    tokens = vocabulary("pieces1")
    lang, counts = _count_language(120)  # longer than the chains: most rows are derived
    (p,) = lang.checked_periods
    trans = lang.trans.copy()
    if change == "past":
        q = next(q for q in counts if q >= p.b and trans[q, ord("a")] != lang.dead)
        trans[q, ord("Q")] = counts[2]
    elif change == "all":
        for q in counts:
            if p.a <= q < p.b:
                trans[q, ord("Q")] = q
    changed = TurnLanguage(trans, lang.accepting, lang.call_start, lang.rule, lang.format, lang.periods)
    assert len(changed.checked_periods) == 1
    index = TurnIndex(changed, tokens)
    same_as_walk(index, counts)
    fresh = TurnIndex(changed, tokens)
    fresh.allowed(counts[3])
    assert fresh.chained == (change != "all")  # ``Q`` looping: walked
