"""Content constraints (docs/design.md §2.2): the regex subset the monitor compiles, and its refusals.

Every refusal is a :class:`UsageError` with a hint (never a ``TypeError`` or a late surprise), and
:mod:`ltlagent.spec.syntax` turns it into a ``file:line:col`` error when the spec is read
(``tests/test_spec.py``). Whatever is accepted must agree with ``re.fullmatch``.
"""

from __future__ import annotations

import re

import pytest

from ltlagent.errors import LtlAgentError, SpecError, UsageError
from ltlagent.text.content import MAX_DFA_STATES, MAX_REGEX_REPEAT, choices_dfa, regex_dfa

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
