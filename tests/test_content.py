"""Content constraints (docs/design.md §2.2): the regex subset the monitor compiles, and its refusals.

Every refusal is a :class:`UsageError` with a hint (never a ``TypeError`` or a late surprise), and
:mod:`ltlagent.spec.syntax` turns it into a ``file:line:col`` error when the spec is read
(``tests/test_spec.py``). Whatever is accepted must agree with ``re.fullmatch``.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterator

import numpy as np
import pytest

from ltlagent.errors import LtlAgentError, SpecError, UsageError
from ltlagent.graph import coreachable
from ltlagent.text.content import (
    DEAD,
    MAX_DFA_STATES,
    MAX_REGEX_REPEAT,
    ODD_SPACES,
    ContentDFA,
    as_dfa,
    byte_classes,
    choices_dfa,
    intersect,
    meets,
    minimize,
    minimize_table,
    pattern_dfa,
    refine,
    regex_dfa,
    stripped,
)

#: (regex, words the refusal must use): one per feature the monitor refuses.
UNSUPPORTED = [
    ("(?i)yes|no", "inline flag (?i)"),
    ("(?i:yes)", "inline flag (?i)"),
    ("(?m)^a", "inline flag (?m)"),
    ("(?-s:.)", "removing the flag (?s)"),
    (r"\bfoo\b", "word boundary"),
    (r"foo\B", "word boundary"),
    (r"(a)\1", "backreference"),
    (r"(?P<x>a)(?P=x)", "backreference"),
    ("(a)?(?(1)b|c)", "conditional group"),
    ("(?=a)a", "lookaround"),
    ("(?!a)b", "lookaround"),
    ("(?<=a)b", "lookaround"),
    ("(?<!a)b", "lookaround"),
    ("a*+", "possessive repetition"),
    ("a{1,3}+", "possessive repetition"),
    ("(?>ab)", "atomic group"),
    ("a^b", "anchor"),
    ("a$b", "anchor"),
    ("(^a)", "anchor"),
    (f"a{{0,{MAX_REGEX_REPEAT + 1}}}", f"repetition bound above {MAX_REGEX_REPEAT}"),
    (".{0,200}", f"more than {MAX_DFA_STATES} automaton states"),
]


@pytest.mark.parametrize(("regex", "words"), UNSUPPORTED)
def test_unsupported_regex_features_are_usage_errors_with_a_hint(regex: str, words: str) -> None:
    with pytest.raises(UsageError) as ei:
        regex_dfa(regex)
    assert words in str(ei.value), str(ei.value)
    assert ei.value.hint, "every refusal says what to do instead"


@pytest.mark.parametrize(("regex", "words"), [
    (r"^a$", ["a", " a ", "", "ab"]),
    (r"\Aab\Z", ["ab", "a"]),
    ("(?x) a b  # spaces and comments are syntax only", ["ab", "a b"]),
    ("(?s:a.b)", ["a\nb", "axb"]),
    (r"(?a)\w+", ["abc", "é"]),
    ("(?u)[0-9]+", ["12", "1a"]),
    ("(?:ab){2,3}", ["ab", "abab", "ababab", "abababab"]),
])
def test_accepted_regexes_agree_with_fullmatch(regex: str, words: list[str]) -> None:
    dfa = regex_dfa(regex)
    for w in words:
        assert dfa.matches(w.encode()) == bool(re.fullmatch(regex, w.strip())), (regex, w)


def test_anchor_in_the_middle_was_read_as_empty() -> None:
    """``a^b`` matches nothing in Python; reading ``^`` as the empty string accepted ``ab``."""
    assert re.fullmatch("a^b", "ab") is None
    with pytest.raises(UsageError, match="anchor"):
        regex_dfa("a^b")


def test_too_many_choices_is_a_usage_error() -> None:
    words = tuple(f"choice-{i:05d}-{'x' * 20}" for i in range(300))
    with pytest.raises(UsageError, match="automaton states") as ei:
        choices_dfa(words)
    assert ei.value.hint


def test_every_error_can_carry_a_hint() -> None:
    e = UsageError("bad thing", hint="do the good thing")
    assert isinstance(e, LtlAgentError) and e.hint == "do the good thing"
    assert e.render() == "bad thing\n    hint: do the good thing"
    assert "hint: do the good thing" in getattr(e, "__notes__", ["hint: do the good thing"])
    assert UsageError("plain").render() == "plain"
    s = SpecError("x", hint="y")
    assert s.hint == "y" and "hint: y" in s.render()


def _moore_size(trans: list[list[int]], acc: set[int]) -> int:
    """The number of Myhill-Nerode classes among the live states (reference: Moore refinement)."""
    d = as_dfa(trans, acc, "t")
    states = sorted(q for q in d.live)
    block = {q: q in acc for q in states}
    while True:
        sig = {q: (block[q], *(block.get(d.step(q, b), None) for b in range(4))) for q in states}
        ids: dict[object, int] = {}
        new = {q: ids.setdefault(sig[q], len(ids)) for q in states}
        if len(set(new.values())) == len(set(block.values())):
            return len(ids)
        block = new  # type: ignore[assignment]


def test_minimize_is_minimal_and_keeps_the_language() -> None:
    rng = random.Random(7)
    words = [bytes(w) for n in range(6) for w in itertools.product(range(4), repeat=n)]
    for _ in range(200):
        n = rng.randint(1, 25)
        trans = [[rng.choice([-1, *range(n)]) if b < 4 else -1 for b in range(256)] for _ in range(n)]
        acc = {q for q in range(n) if rng.random() < 0.3}
        small, small_acc = minimize(trans, acc)
        a, b = as_dfa(trans, acc, "a"), as_dfa(small, small_acc, "b")
        assert all(a.matches(w) == b.matches(w) for w in words)
        if 0 in a.live:
            assert len(small) == _moore_size(trans, acc)


def test_pattern_dfa_search_and_exact_sets() -> None:
    for p in ["^a$", "a", "^[0-9]{2}$", "x|y", "^$", "b\\Z", ".", "^.b"]:
        d = pattern_dfa(p, search=True)
        for t in ["a", "a\n", "ba", "12", "12\n", "x\n", " y ", "", "\xa0a", "\n", "ab", "\u2028b"]:
            assert d.matches(t.encode()) == bool(re.search(p, t)), (p, t)
    assert pattern_dfa("(?s:.*)").matches("\xa0 \u3000".encode())  # no stripping, Python's sets
    both = intersect(pattern_dfa("[a-c]+"), pattern_dfa("b.*"))
    assert both.matches(b"bca") and not both.matches(b"abc")
    assert stripped(pattern_dfa("ab")).matches(b"  ab\n")


# --- a fixed battery against re.fullmatch (found by mutation testing: issue 21) -------------------

#: Words over the byte lengths of UTF-8 (1-4 bytes, and the edges of each range), with the
#: whitespace the content strips.
WORDS = ["", "a", "b", "ab", "abc", "cd", "abcd", "aab", "aaab", "bbb", "a b", " ab ", "\tab\n",
         "a\nb", "a\nbxc", "\x00", "\x7f", "\x80", "é", "éü", "߿", "ࠀ", "\ud7ff", "\ue000", "\uffff",
         "日本", "𐀀", "😀", "\U0010ffff", "12", "1.5", "_x", "-", "z", "ac", "a_b", "a\x0bb",
         "\u0100", "\u0102", "\u0180", "\u0182", "\u0802", "\u0fff", "\u1000", "\u1002", "\U00010401"]


@pytest.mark.parametrize("regex", [
    "[^a]", "[^a]+", "[^a-c]+", "ab|cd", "(?:ab|cd)+", "a|bc|", "(a|bc){1,2}d?", "a.b", ".", ".+",
    "(?s).", "(?s).+", "a(?s:.)b.c", "a*?b", "a+?", "a{2,3}b", "a{2}", "(?:ab){0,2}c?",
    "[é-ü]+", "[\u0800-\uffff]+", "[^\u0000-\u007f]+", "[😀-😂]", "\ue000", "\U0010ffff",
    "[\U00010000-\U0010ffff]+", "[^\U00010000-\U0010ffff]", ".{1,3}", "[ab]*c?", "()a", "(?:)",
    "(?s)(a).b", "a(.)b", "[\u0101-\u0181]+", "[\u0801-\u1001]", "[\U00010001-\U00010400]",
])
def test_regexes_without_categories_agree_with_fullmatch_on_any_text(regex: str) -> None:
    dfa = regex_dfa(regex)
    for w in WORDS:
        want = re.fullmatch(regex, w.strip(" \t\n\r\x0b\x0c")) is not None
        assert dfa.matches(w.encode()) == want, (regex, w)


@pytest.mark.parametrize("regex", [
    r"\d+", r"\D+", r"\w+", r"\W+", r"a\s+b", r"a\sb", r"\S+", r"[\d.]+", r"[a\d]+", r"[^\d\s]+",
    r"[\w-]+", r"[^\W_]+", r"[\s\S]+", r"[^\w]", r"(?a)\w+", r"[\x7f\d]+",
])
def test_categories_agree_with_fullmatch_on_ascii_and_refuse_non_ascii(regex: str) -> None:
    dfa = regex_dfa(regex)
    for w in WORDS:
        got = dfa.matches(w.encode())
        if w.isascii():
            assert got == (re.fullmatch(regex, w.strip(" \t\n\r\x0b\x0c")) is not None), (regex, w)
        else:
            assert not got, (regex, w)  # never looser than Python; non-ASCII never in a category


def test_dfa_step_feed_and_the_dead_state() -> None:
    dfa = regex_dfa("ab")
    s = dfa.feed(0, b"a")
    assert s > 0 and s not in dfa.accepting and dfa.feed(s, b"b") in dfa.accepting
    assert dfa.step(s, ord("x")) == DEAD and dfa.step(DEAD, ord("a")) == DEAD
    assert dfa.feed(0, b"x") == DEAD and dfa.feed(0, b"xab") == DEAD
    assert not dfa.matches(b"abx") and not dfa.matches(b"a")


@pytest.mark.parametrize("choices", [("Search", "Lookup"), ("a", "ab", "abc"), ("日本", "é", "x y")])
def test_choices_are_exact_after_stripping(choices: tuple[str, ...]) -> None:
    dfa = choices_dfa(choices)
    for c in choices:
        assert dfa.matches(c.encode()) and dfa.matches(f"  {c}\n".encode())
        assert dfa.matches(c.encode()[:-1]) == (c.encode()[:-1].decode("utf-8", "replace") in choices)
        assert not dfa.matches((c + "x").encode())
        assert not dfa.matches(f"{c} {c}".encode())
    assert not dfa.matches(b"") and not dfa.matches(b"  ")


@pytest.mark.parametrize("regex", [".", ".+", "(?s).+", "[^a]+", r"[^\d]+", "[\u0080-\U0010ffff]+"])
def test_no_regex_matches_bytes_that_are_not_utf8(regex: str) -> None:
    """Lone continuation bytes, overlong forms, encoded surrogates and code points past U+10FFFF
    are never content: every range is split into well-formed UTF-8 sequences only."""
    dfa = regex_dfa(regex)
    for bad in (b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80",
                b"\xf0\x80\x80\x80", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xff"):
        assert not dfa.matches(b"x" + bad) and not dfa.matches(bad), (regex, bad)


def test_a_bounded_repetition_counts_its_optional_rounds_only() -> None:
    """The repetition limit is on ``max - min`` (the optional rounds written out), not on ``max``."""
    assert regex_dfa("a{150,160}").matches(b"a" * 155)
    with pytest.raises(UsageError, match="repetition bound"):
        regex_dfa(f"a{{0,{MAX_REGEX_REPEAT + 1}}}")


# --- the product, level by level (issue 30: compile time) -----------------------------------------


def _product_reference(a: ContentDFA, b: ContentDFA) -> tuple[list[list[int]], set[int]]:
    """The product by its definition: a queue of pairs, state by state and byte by byte."""
    ids, order, trans, acc = {(0, 0): 0}, [(0, 0)], [], set()
    i = 0
    while i < len(order):
        p, q = order[i]
        if p in a.accepting and q in b.accepting:
            acc.add(i)
        row = [DEAD] * 256
        for c in range(256):
            p2, q2 = a.step(p, c), b.step(q, c)
            if p2 >= 0 and q2 >= 0:
                row[c] = ids.setdefault((p2, q2), len(order))
                if row[c] == len(order):
                    order.append((p2, q2))
        trans.append(row)
        i += 1
    return trans, acc


PRODUCT_PATTERNS = ["^[A-Z]{2}[0-9]{6}$", "a|b|c", r"^\S+$", "^[a-z]+@[a-z]+\\.com$", "^.{3,10}$",
                    "x*y*z*", r"^\d{4}-\d{2}-\d{2}$", "é+", "[^a]{2,5}", "^$", "(ab|ba)*"]


@pytest.mark.parametrize("p", PRODUCT_PATTERNS)
def test_intersect_is_the_queue_product_state_for_state(p: str) -> None:
    """The level-by-level product numbers its states as a queue would (same table, same accepting
    states), for every pair of a battery that has dead, non-live and accepting states: an off-by-one
    in a level's numbering, a pair code that mixes up the two sides or a lost non-live check would
    differ here."""
    from ltlagent.text.jsontype import pattern_language

    a = pattern_language(p)
    for q in PRODUCT_PATTERNS:
        b = pattern_language(q)
        got = intersect(a, b)
        trans, acc = _product_reference(a, b)
        assert [list(r) for r in got.trans] == trans, (p, q)
        assert got.accepting == frozenset(acc), (p, q)


def test_intersect_limit() -> None:
    """Beyond ``limit`` states the product is refused with both sources named."""
    from ltlagent.text.jsontype import pattern_language

    a, b = pattern_language("^.{0,40}$"), pattern_language("^[a-z]*$")
    assert len(intersect(a, b).trans) > 20
    with pytest.raises(UsageError, match="needs more than 20 automaton states"):
        intersect(a, b, limit=20)


def test_intersect_leaves_out_states_that_cannot_accept() -> None:
    """A state that cannot reach acceptance (not live) is dead in the product, as ``step`` has it."""
    from ltlagent.text.jsontype import pattern_language

    trap = [[DEAD] * 256 for _ in range(3)]
    trap[0][ord("a")], trap[0][ord("b")] = 1, 2
    trap[2] = [2] * 256  # loops forever, never accepts
    d = as_dfa(trap, {1}, "a or a trap")
    assert d.live == frozenset({0, 1})
    for other in (pattern_language("^.*$"), d):
        got = intersect(d, other)
        trans, acc = _product_reference(d, other)
        assert [list(r) for r in got.trans] == trans and len(trans) == 2
        assert got.accepting == frozenset(acc)


@pytest.mark.parametrize("rx", [r"x[\x00-\x7f]y", r"x[\x1c\x1b]y", r"x[\x1a-\x1d]y", r"x[^a]y", r"x.y",
                                r"x[\x20-\x7e]y", r"x[\x1f-\x21]y", "x(\x1f|a)y", r"x[\x80-\xff]y", r"x\sy",
                                r"x[\x84-\x86]y"])
def test_stripped_content_never_matches_odd_spaces(rx: str) -> None:
    """In a :regex over stripped content no character of ODD_SPACES matches (U+001C–U+001F, NEL,
    NBSP, …: ``str.strip`` removes them, so a text holding one between words could not be written
    back the same), whatever the class; every other character matches as ``re.fullmatch`` says. The
    shortcut that skips the subtraction for ASCII ranges past U+001F must not skip a range that
    reaches U+001C–U+001F or past ASCII."""
    d = regex_dfa(rx)
    odd = [chr(c) for lo, hi in ODD_SPACES for c in range(lo, hi + 1)]
    for c in [*odd, "a", "b", " ", "~", "\x1b", "\x20", "\x21", "\x7f", "\x80", "é", "\x84", "\x86"]:
        word = f"x{c}y"
        expect = bool(re.fullmatch(rx, word)) and c not in odd
        assert d.matches(word.encode()) == expect, (rx, c)


# --- the numpy compile paths against the Python ones they replaced ---------------------------

def _minimize_reference(trans: list[list[int]], acc: set[int]) -> tuple[list[list[int]], set[int]]:
    """The Python minimisation ``minimize`` replaced (256-wide rows walked in Python): the
    numpy one must give the same table, state for state."""
    live = coreachable(trans, acc)
    if 0 not in live:
        return [[DEAD] * 256], set()
    states = sorted(live)
    idx = {q: i for i, q in enumerate(states)}
    n = len(states)  # the sink
    cols: dict[tuple[int, ...], int] = {}
    reps: list[int] = []
    for b, col in enumerate(zip(*(trans[q] for q in states))):
        if col not in cols:
            cols[col] = b
            reps.append(b)
    # inverse transitions: target -> (byte class, source) pairs (the sink included)
    pred: list[list[tuple[int, int]]] = [[] for _ in range(n + 1)]
    for q in states:
        row, i = trans[q], idx[q]
        for k, b in enumerate(reps):
            r = row[b]
            pred[idx[r] if r in idx else n].append((k, i))
    pred[n] += [(k, n) for k in range(len(reps))]
    finals = {idx[q] for q in acc if q in idx}
    rest = set(range(n + 1)) - finals
    blocks: list[set[int]] = [finals, rest] if rest else [finals]
    block_of = [0] * (n + 1)
    for i in rest:
        block_of[i] = 1
    refine(blocks, block_of, pred, [0 if len(finals) <= len(rest) or not rest else 1])
    sink = block_of[n]
    ids: dict[int, int] = {block_of[0]: 0}
    for i in range(n):
        if block_of[i] != sink:
            ids.setdefault(block_of[i], len(ids))
    out = [[DEAD] * 256 for _ in ids]
    out_acc: set[int] = set()
    done: set[int] = set()
    new_of = [DEAD] * (len(trans) + 1)  # old state -> new state; the last entry serves DEAD (-1)
    for q in states:
        b = block_of[idx[q]]
        new_of[q] = ids[b] if b != sink else DEAD
    for q in states:
        i = new_of[q]
        if i in done:
            continue
        done.add(i)
        if q in acc:
            out_acc.add(i)
        out[i] = list(map(new_of.__getitem__, trans[q]))
    return out, out_acc


def _random_tables(seed: int, count: int) -> Iterator[tuple[list[list[int]], set[int]]]:
    """Random DFAs with runs of equal bytes, dead ends and unreachable states."""
    rng = random.Random(seed)
    for _ in range(count):
        n = rng.randint(1, 30)
        trans = []
        for _q in range(n):
            row: list[int] = []
            while len(row) < 256:
                row += [rng.choice([DEAD, DEAD, *range(n)])] * rng.choice([1, 3, 40, 256])
            trans.append(row[:256])
        yield trans, {q for q in range(n) if rng.random() < 0.25}


def test_minimize_is_the_python_minimisation_state_for_state() -> None:
    """``minimize`` (numpy byte classes, predecessors and rows) numbers and fills its states as the
    Python version did, on random tables and pattern DFAs; fails on a changed numbering (first
    old state per block), a lost byte class or a wrong predecessor list."""
    cases = list(_random_tables(11, 300))
    for rx in ["^[a-z]+@[a-z]+\\.(com|org)$", "[0-9]{2,4}-x", "é|ü+", "^(ab|a)*c?$"]:
        d = pattern_dfa(rx, search=True, ecma=True)
        cases.append(([list(r) for r in d.trans], set(d.accepting)))
    for trans, acc in cases:
        want = _minimize_reference(trans, acc)
        assert minimize(trans, acc) == want
        table, table_acc = minimize_table(np.array(trans, dtype=np.int64), acc)
        assert (table.tolist(), table_acc) == want


def test_byte_classes_are_the_first_byte_of_each_column_class() -> None:
    """``byte_classes``: the first byte of each class of equal columns, ascending (fails when a
    run of equal columns or a repeated column elsewhere is split or merged wrongly)."""
    for trans, _acc in _random_tables(5, 100):
        firsts: dict[tuple[int, ...], int] = {}
        for b, col in enumerate(zip(*trans, strict=True)):
            firsts.setdefault(col, b)
        assert byte_classes(np.array(trans)).tolist() == list(firsts.values())


def test_as_dfa_from_numpy_and_intersect_keep_their_live_tables() -> None:
    """A DFA built from a numpy table (``as_dfa``, ``intersect``) carries the live table its
    tuples give, and the same live states as one built from lists (fails if the table filled in
    is not masked by the live states, or is another table)."""
    for trans, acc in _random_tables(3, 60):
        a, b = as_dfa(trans, acc, "lists"), as_dfa(np.array(trans), acc, "numpy")
        assert a == ContentDFA(b.trans, b.accepting, b.live, "lists")
        fresh = ContentDFA(b.trans, b.accepting, b.live, "fresh")
        assert np.array_equal(b.live_table, fresh.live_table)
    x = pattern_dfa("^[a-c]+x?$", search=True, ecma=True)
    y = pattern_dfa("b", search=True, ecma=True)
    p = intersect(x, y)
    assert np.array_equal(p.live_table, ContentDFA(p.trans, p.accepting, p.live).live_table)


_MEET_PATTERNS = ["^a+$", "^b+$", "a", "^[a-z]{3}$", "^[0-9]+$", "^x[0-9]*$", "^$", "é", "^[^a]*$",
                  "^(ab)+$", "^a(b|c){2,3}$", "^.{5,}$", "^[a-f0-9]{8}-[a-f0-9]{4}$", "z$"]


def test_meets_is_the_products_emptiness() -> None:
    """``meets`` (a search over row runs, stopping at the first pair both accept) says what
    ``0 in intersect(a, b).live`` says on every pair of a pattern battery, and raises past the
    limit where there is no common text (fails on a wrong run merge or acceptance test)."""
    dfas = [pattern_dfa(p, search=True, ecma=True) for p in _MEET_PATTERNS]
    for a, b in itertools.product(dfas, repeat=2):
        assert meets(a, b) == (0 in intersect(a, b).live), (a.source, b.source)
    a = pattern_dfa("^[a-z]{6}$", search=True, ecma=True)
    b = pattern_dfa("^[a-z]{1,3}$", search=True, ecma=True)  # no common text, 4 pairs
    assert not meets(a, b) and not meets(a, b, limit=4)
    for limit in (1, 3):
        with pytest.raises(UsageError):
            intersect(a, b, limit=limit)
        with pytest.raises(UsageError):
            meets(a, b, limit=limit)


def test_runs_rebuild_the_live_rows() -> None:
    """``ContentDFA.runs`` written back out byte by byte is the live table (fails on an
    off-by-one start or runs split across states)."""
    for trans, acc in _random_tables(9, 60):
        d = as_dfa(trans, acc, "t")
        rebuilt = []
        for runs in d.runs:
            row: list[int] = []
            for (b0, r), nxt in zip(runs, [*runs[1:], (256, 0)], strict=True):
                row += [r] * (nxt[0] - b0)
            rebuilt.append(row)
        assert rebuilt == d.live_table.tolist()
