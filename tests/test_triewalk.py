"""The compiled loops of a first visit (issue 30; ``ltlagent.decode.triewalk``, docs/design.md §14):
the trie in preorder is the trie's depth-first order; the compiled walk, token runs and content
chains give every state of random and JSON Schema languages the same end states as the Python
walk and as the token-by-token walk, in each of the forms a visit keeps (few live tokens, the
exceptions of a dense visit, a whole array); each loop is compiled once, for one signature, at a
vocabulary's set-up; without numba the Python walk runs."""

from __future__ import annotations

import importlib.util
import random
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltlagent.decode import chat, triewalk
from ltlagent.decode.chat import TokenBytes, TurnIndex, TurnLanguage, TurnRule
from ltlagent.decode.vocab import vocab_from_bytes, vocab_from_tokenizer
from ltlagent.text.jsonschema import schema_table

from . import tiny
from .test_turn_walk import SCHEMAS, random_language, random_tokens, same_as_walk, string_language

#: where numba is installed its loops must compile (a compile that fails would leave them off and
#: these tests would otherwise be skipped)
needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba is not installed")


def _preorder_by_recursion(tokens: TokenBytes) -> list[tuple[int, int, int, int, int, int]]:
    """The trie's nodes depth first, children by byte, as (depth, byte, span_lo, own_hi, span_hi,
    subtree size), walked from the levels' child ranges (the reference for ``trie_preorder``)."""
    levels = tokens.trie.levels
    out: list[tuple[int, int, int, int, int, int]] = []

    def visit(d: int, i: int) -> int:
        lv = levels[d]
        at = len(out)
        out.append((d, int(lv.byte[i]), int(lv.span_lo[i]), int(lv.own_hi[i]), int(lv.span_hi[i]), 0))
        size = 1
        if d + 1 < len(levels):
            below = levels[d + 1].byte
            kids = sorted(range(int(lv.child_lo[i]), int(lv.child_hi[i])), key=lambda c: int(below[c]))
            for c in kids:
                size += visit(d + 1, c)
        out[at] = (*out[at][:5], size)
        return size

    for i in sorted(range(levels[0].byte.size), key=lambda i: int(levels[0].byte[i])) if levels else []:
        visit(0, i)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_preorder_is_the_tries_depth_first_order(seed: int) -> None:
    """Each row is the node the recursive walk meets there; ``AFTER`` is the row past its subtree;
    ``at`` finds each level's node; the bytes below and ``whole`` are the node's."""
    tokens = random_tokens(random.Random(seed), 40 + 30 * seed)
    pre = triewalk.trie_preorder(tokens.trie)
    want = _preorder_by_recursion(tokens)
    nodes = pre.nodes.tolist()
    assert len(nodes) == len(want) == tokens.trie.num_nodes
    for k, (row, (d, b, lo, own, hi, size)) in enumerate(zip(nodes, want)):
        assert row[:5] == [d, b, lo, own, hi], k
        assert row[triewalk.AFTER] == k + size, k
    for d, lv in enumerate(tokens.trie.levels):
        at = pre.at[d]
        assert pre.nodes[at, triewalk.DEPTH].tolist() == [d] * lv.byte.size
        assert pre.nodes[at, triewalk.BYTE].tolist() == lv.byte.tolist()
        assert pre.nodes[at, triewalk.SPAN_LO].tolist() == lv.span_lo.tolist()
        assert np.array_equal(pre.below[at], lv.below) and np.array_equal(pre.whole[at], lv.whole)


def _both_walks(lang: TurnLanguage, tokens: TokenBytes, states: list[int]) -> None:
    """Every state's end states and mask by the compiled walk equal the Python walk's, and both
    equal the token-by-token walk (``same_as_walk``)."""
    for s in states:
        got = {}
        for compiled in (True, False):
            with mock.patch.object(chat, "COMPILED_WALK", compiled):
                index = TurnIndex(lang, tokens)
                got[compiled] = (index.allowed(s).copy(), index.ends(s).copy())
        assert np.array_equal(got[True][0], got[False][0]), s
        assert np.array_equal(got[True][1], got[False][1]), s
    with mock.patch.object(chat, "COMPILED_WALK", True):
        same_as_walk(TurnIndex(lang, tokens), states)


@needs_numba
@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**20), n=st.integers(1, 9), size=st.integers(0, 150),
       dense=st.sampled_from([1, 32]), few=st.sampled_from([1, 3, chat.FEW_LISTED]))
def test_compiled_and_python_walks_agree_on_random_tables(seed: int, n: int, size: int, dense: int,
                                                          few: int) -> None:
    """... with output lists that start short (``FEW_LISTED``: a walk that has more to write
    stops, and is walked again with lists over the vocabulary)."""
    rng = random.Random(seed)
    lang = random_language(rng, n)
    tokens = random_tokens(rng, size)
    with mock.patch.object(chat, "DENSE_LOOPS", dense), mock.patch.object(chat, "FEW_LISTED", few):
        _both_walks(lang, tokens, list(range(n + 1)))


@needs_numba
@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**20), size=st.integers(20, 200), broken=st.booleans())
def test_compiled_walk_settles_whole_characters_as_the_python_walk(seed: int, size: int,
                                                                    broken: bool) -> None:
    """A string's inside whose multi-byte characters come back to it (or, ``broken``, not all):
    the subtrees settled whole there (``wrap``) are the Python walk's."""
    rng = random.Random(seed)
    _both_walks(string_language(rng, broken), random_tokens(rng, size), list(range(11)))


@needs_numba
@pytest.mark.parametrize("tok", ["byte-level-2k", "sentencepiece", "straddle"])
def test_compiled_and_python_walks_agree_on_schema_tables(tok: str) -> None:
    make = {"byte-level-2k": lambda: tiny.byte_level(2000), "sentencepiece": tiny.sentencepiece,
            "straddle": tiny.straddle}[tok]
    tokens = TokenBytes.of(vocab_from_tokenizer(make()))
    rng = random.Random(4)
    for schema in [*SCHEMAS, {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3,
                                                                     "maximum": 4071},
                                                               "s": {"type": "string", "maxLength": 40}}}]:
        lang = TurnLanguage.of_table(schema_table(schema))
        _both_walks(lang, tokens, sorted(rng.sample(range(lang.dead + 1), min(lang.dead + 1, 50))))


def _dense_language(exceptions: int) -> TurnLanguage:
    """State 0 loops on every byte but the first ``exceptions`` bytes from 0x21 on, which die; state
    1 is dead-ended (nothing lives)."""
    trans = np.full((3, 256), 2, dtype=np.int32)
    trans[0] = 0
    trans[0, 0x21:0x21 + exceptions] = 2
    return TurnLanguage(trans, np.array([True, False, False]), (0, -1),
                        TurnRule(False, frozenset(), frozenset()), "json")


@needs_numba
@pytest.mark.parametrize("exceptions", [1, 40, 200])
def test_a_dense_visit_keeps_its_exceptions_or_an_array(exceptions: int) -> None:
    """A dense visit's tokens that do not end where most do are kept as a list while few
    (``_Except``: its mask, ``get`` and ``dense`` are the walk's), as an array over the vocabulary
    when many; both are the token-by-token walk's."""
    toks: list[bytes | None] = [bytes([b]) for b in range(256)] + [bytes([b, b]) for b in range(0x20, 0x7F)]
    toks += [None, None]
    tokens = TokenBytes.of(vocab_from_bytes(toks, eos_ids=[len(toks) - 1]))
    lang = _dense_language(exceptions)
    index = TurnIndex(lang, tokens)
    found = index._found(0)
    many = 2 * exceptions > tokens.vocab.size // chat.EXCEPT_SHARE
    assert isinstance(found, np.ndarray) if many else isinstance(found, chat._Except), type(found)
    want = index.walk_tokens(0)
    assert [index.advance(0, t) for t in range(tokens.vocab.size - 2)] == want[:-2].tolist()
    dying = {t for t, b in enumerate(toks) if b and 0x21 <= b[0] < 0x21 + exceptions}
    assert set(np.flatnonzero(want == lang.dead).tolist()) == dying | {len(toks) - 2, len(toks) - 1}
    same_as_walk(index, [0, 1, 2])


@needs_numba
def test_each_loop_is_compiled_once_at_set_up() -> None:
    """A vocabulary's set-up compiles the four loops; languages and first visits of several
    state and table sizes then add no signature (a new one would be a second's compile on a
    decoding step)."""
    tokens = TokenBytes.of(vocab_from_tokenizer(tiny.byte_level(2000)))
    loops = (triewalk.compiled_walk(), triewalk.compiled_run(), triewalk.compiled_chain(),
             triewalk.compiled_passes())
    before = [len(f.signatures) for f in loops]  # type: ignore[union-attr]
    assert before == [1, 1, 1, 1]
    rng = random.Random(2)
    for schema in SCHEMAS:
        lang = TurnLanguage.of_table(schema_table(schema))
        index = TurnIndex(lang, tokens)
        for s in range(lang.dead + 1):
            index.allowed(np.int32(s) if s % 2 else s)  # type: ignore[arg-type]
    for n in (2, 7):
        lang = random_language(rng, n)
        index = TurnIndex(lang, tokens)
        for s in range(n + 1):
            index.allowed(s)
    assert [len(f.signatures) for f in loops] == before  # type: ignore[union-attr]


@needs_numba
def test_the_compiled_loops_do_the_walking() -> None:
    """With numba, a first visit does not take the Python level walk, token runs or chain
    check (which would also answer, slower)."""
    tokens = TokenBytes.of(vocab_from_tokenizer(tiny.byte_level(2000)))
    stop = AssertionError("the Python walk ran")
    with mock.patch.object(TurnIndex, "_levels", side_effect=stop), \
            mock.patch.object(TurnIndex, "_chain_python", side_effect=stop), \
            mock.patch.object(TurnIndex, "_steps", side_effect=stop), \
            mock.patch.object(TurnIndex, "_utf8_to", side_effect=stop):
        for schema in SCHEMAS:
            lang = TurnLanguage.of_table(schema_table(schema))
            same_as_walk(TurnIndex(lang, tokens), list(range(0, lang.dead + 1, 3)))


def test_a_loop_numba_cannot_compile_is_left_to_python() -> None:
    """A numba that fails on a loop (an older release) leaves it off with a warning naming it;
    the Python loops answer."""
    fake = mock.Mock()
    fake.njit.return_value = lambda fn: mock.Mock(side_effect=TypeError("no such typing"))
    with mock.patch.dict("sys.modules", {"numba": fake}), pytest.warns(RuntimeWarning, match="_walk is not"):
        assert triewalk.compiled_walk.__wrapped__() is None


def test_without_numba_the_python_walk_answers() -> None:
    """Where numba cannot be imported the loops are None and every first visit is the Python
    walk's (the token-by-token walk's)."""
    tokens = TokenBytes.of(vocab_from_tokenizer(tiny.byte_level(2000)))
    for name in ("compiled_walk", "compiled_run", "compiled_chain"):
        with mock.patch.dict("sys.modules", {"numba": None}):
            fn = getattr(triewalk, name)
            assert fn.__wrapped__() is None
    with mock.patch.object(chat, "compiled_walk", lambda: None), \
            mock.patch.object(chat, "compiled_run", lambda: None), \
            mock.patch.object(chat, "compiled_chain", lambda: None):
        for schema in SCHEMAS[:2]:
            lang = TurnLanguage.of_table(schema_table(schema))
            same_as_walk(TurnIndex(lang, tokens), list(range(0, lang.dead + 1, 2)))


def _count_chain(max_length: int) -> tuple[TurnLanguage, list[int]]:
    """A ``maxLength`` string's language and its counts (after ``"``, then each ``a``)."""
    lang = TurnLanguage.of_table(schema_table({"type": "string", "maxLength": max_length}))
    counts = [int(lang.trans[0, ord('"')])]
    for _ in range(max_length):
        counts.append(int(lang.trans[counts[-1], ord("a")]))
    return lang, counts


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("row", [1, 4])
@pytest.mark.parametrize("char", ["À", "é", "ÿ", "€", "€…"])
def test_a_character_off_the_chain_in_a_later_row_is_walked(compiled: bool, row: int, char: str) -> None:
    """Count ``row`` sends one character (the first, a middle and the last continuation byte of
    a range; a 3-byte one; ``€…``: every 3-byte character with ``€``'s first two bytes, a whole
    range alike) elsewhere than the others: a chain from a lower count that reads it that far
    (tokens with it late in them: the vocabulary's ``wide`` rows) does not hold, and the ends are
    the token walk's (fails when only a chain's first rows are checked for multi-byte characters,
    a range's first byte is not, or where a character ends is not)."""
    chars = [c.encode() for c in "Àéÿ€"]
    toks: list[bytes | None] = [bytes([b]) for b in range(0x20, 0x7F)] + chars
    toks += [b"a" * k + c + b"a" * j for c in chars for k in range(6) for j in range(3)] + [None]
    tokens = TokenBytes.of(vocab_from_bytes(toks, eos_ids=[len(toks) - 1]))
    assert tokens.content.wide >= 6
    lang, counts = _count_chain(9)
    trans = lang.trans.copy()
    *lead, last = char[0].encode()
    p = counts[row]
    for b in lead:
        p = int(trans[p, b])
    if char.endswith("…"):
        trans[p, 0x80:0xC0] = counts[0]  # those characters from this count back to the first
    else:
        trans[p, last] = counts[0]  # the character from this count back to the first
    broken = TurnLanguage(trans, lang.accepting, lang.call_start, lang.rule, lang.format)
    with mock.patch.object(chat, "COMPILED_WALK", compiled):
        index = TurnIndex(broken, tokens)
        same_as_walk(index, counts)


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("digit", [b"0", b"5", b"9"])
def test_a_digit_off_the_chain_is_walked(compiled: bool, digit: bytes) -> None:
    """A number's digits from its first: at one count ``digit`` leads elsewhere than the other
    digits, so the chain of digits does not hold there (fails when a digit goes unchecked)."""
    n = 8
    dead = n
    trans = np.full((n + 1, 256), dead, dtype=np.int32)
    trans[0, ord("1"):ord("9") + 1] = 1  # a first digit, 1–9
    trans[0, ord("0")] = 6
    trans[0, ord("-")] = 0
    for q in range(1, 5):  # counts 1–4, then 5 loops
        trans[q, ord("0"):ord("9") + 1] = q + 1
    trans[5, ord("0"):ord("9") + 1] = 5
    trans[2, digit[0]] = 7  # count 2 sends this digit to a state of its own
    trans[7, ord("x")] = 6
    accepting = np.zeros(n + 1, dtype=bool)
    accepting[[1, 2, 3, 4, 5, 6, 7]] = True
    lang = TurnLanguage(trans, accepting, (0, -1), TurnRule(False, frozenset(), frozenset()), "json")
    toks: list[bytes | None] = [bytes([b]) for b in range(0x20, 0x7F)]
    toks += [bytes([a, b]) + c for a in b"159" for b in b"0591"
             for c in (b"", b"9", b"x", b"09", b"999", b"5", b"50")]
    toks += [None]
    tokens = TokenBytes.of(vocab_from_bytes(toks, eos_ids=[len(toks) - 1]))
    with mock.patch.object(chat, "COMPILED_WALK", compiled), mock.patch.object(chat, "CLASS_CHAINS", False):
        index = TurnIndex(lang, tokens)
        same_as_walk(index, list(range(n + 1)))


@needs_numba
def test_two_threads_walk_one_index() -> None:
    """The compiled walk releases the GIL: two threads taking first visits of one index at once
    each get their own lists, and every mask is the token walk's (fails with lists shared by the
    index)."""
    import threading

    tokens = TokenBytes.of(vocab_from_tokenizer(tiny.byte_level(2000)))
    lang = TurnLanguage.of_table(schema_table(SCHEMAS[-1]))
    want = {s: TurnIndex(lang, tokens).walk_tokens(s) != lang.dead for s in range(lang.dead)}
    def visit(index: TurnIndex, go: threading.Barrier, states: list[int], got: dict[int, np.ndarray]) -> None:
        go.wait()
        for s in states:
            got[s] = index.allowed(s).copy()

    states = list(range(lang.dead))
    for _round in range(20):
        index, go, got = TurnIndex(lang, tokens), threading.Barrier(2), {}
        threads = [threading.Thread(target=visit, args=(index, go, states[k::2], got)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for s in states:
            mask = got[s].copy()
            mask[tokens.eos] = False
            assert np.array_equal(mask, want[s]), s
