"""The s-expression reader: string escapes mean what was written (docs/design.md §2.4), positions
count every kind of line end, and errors name the real culprit."""

from __future__ import annotations

import re

import pytest

from ltlagent import parse_spec
from ltlagent.errors import SpecError
from ltlagent.spec.sexp import Atom, SList, read_sexps


def string_of(source: str) -> str:
    """The value of the one string literal in ``source`` (written as it would be in a file)."""
    (node,) = read_sexps(source)
    assert isinstance(node, Atom) and node.is_string
    return node.value


@pytest.mark.parametrize(("source", "value"), [
    (r'"a\\b"', "a\\b"),
    (r'"say \"hi\""', 'say "hi"'),
    (r'"\n\t\r"', "\n\t\r"),
    (r'"caf\u00e9"', "café"),
    (r'"\x41\x7e"', "A~"),
    # regex escapes are kept with their backslash: "\d+" means the regex \d+, not d+
    (r'"\d+"', "\\d+"),
    (r'"\w\s\b\B\A\Z\S\D\W"', r"\w\s\b\B\A\Z\S\D\W"),
    (r'"\.\(\)\[\]\{\}\*\+\?\|\^\$\/"', r"\.\(\)\[\]\{\}\*\+\?\|\^\$\/"),
    # … and the doubled spelling means the same regex (issue 17's example)
    (r'"(?i)\\byes\\b"', r"(?i)\byes\b"),
    (r'"\\d+"', "\\d+"),
])
def test_escapes_mean_what_was_written(source: str, value: str) -> None:
    assert string_of(source) == value


def test_both_spellings_of_a_regex_escape_compile_to_the_same_regex() -> None:
    for pattern in (r'"[0-9]\d"', r'"[0-9]\\d"'):
        rx = re.compile(string_of(pattern))
        assert rx.fullmatch("12") and not rx.fullmatch("1d")


@pytest.mark.parametrize(("source", "col", "needle"), [
    (r'(a "\z")', 5, r"unknown escape '\z'"),
    (r'(a "ok\q")', 7, r"unknown escape '\q'"),
    (r'(a "\1")', 5, r"unknown escape '\1'"),
    (r'(a "\u12")', 5, r"\u takes exactly 4 hex digits"),
    (r'(a "\xg1")', 5, r"\x takes exactly 2 hex digits"),
    (r'(a "\ud800")', 5, "surrogate"),
    (r'(a "\x00")', 5, "NUL"),
])
def test_other_escapes_are_errors_at_the_backslash(source: str, col: int, needle: str) -> None:
    with pytest.raises(SpecError) as ei:
        read_sexps(source, "t.sexp")
    e = ei.value
    assert e.loc is not None and (e.loc.line, e.loc.column) == (1, col)
    assert needle in e.message
    if "unknown escape" in needle:
        assert e.hint is not None and r"\uXXXX" in e.hint and r"\\" in e.hint


def test_a_backslash_at_the_end_of_the_file_is_named() -> None:
    with pytest.raises(SpecError) as ei:
        read_sexps('(a "abc\\', "t.sexp")
    assert "ends in a backslash" in ei.value.message
    assert ei.value.loc is not None and ei.value.loc.column == 8


@pytest.mark.parametrize("source", [
    '(s (:text "C:\\") (:stop "x"))\n',  # the string goes on to the quote of "x"
    '(s (:text "C:\\"))\n',  # the string goes on to the end of the file
])
def test_a_trailing_backslash_is_named_not_a_later_quote(source: str) -> None:
    with pytest.raises(SpecError) as ei:
        read_sexps(source, "t.sexp")
    e = ei.value
    assert e.loc is not None and e.loc.column == source.index("\\") + 1
    assert "backslash escapes the quote" in e.message
    assert e.hint is not None and "trailing backslash" in e.hint


def test_an_escaped_quote_inside_a_closed_string_is_not_blamed() -> None:
    with pytest.raises(SpecError) as ei:
        read_sexps('(a "say \\"hi\\"") (b "never closed)', "t.sexp")
    assert ei.value.message == "unterminated string"
    assert ei.value.loc is not None and ei.value.loc.column == 21


def test_cr_only_line_endings_are_line_ends() -> None:
    """An old Mac file: a comment ends at the CR (it used to swallow the rest of the file), and
    errors are positioned on the right line."""
    source = ('; a comment\r(define t\r  (:states (A (:text "A:")) (B (:text "B:")))\r'
              '  (:behavior (next A Bee)))\r')
    with pytest.raises(SpecError) as ei:
        parse_spec(source, "t.sexp")
    e = ei.value
    assert "unknown state 'Bee'" in e.message
    assert e.loc is not None and (e.loc.line, e.loc.column) == (4, 22)
    assert "(:behavior (next A Bee)))" in e.render()
    nodes = read_sexps("; c\r(a\r\nb)\r")
    assert isinstance(nodes[0], SList) and nodes[0].items[1].loc.line == 3


def test_a_form_feed_inside_a_line_does_not_shift_the_source_line_shown() -> None:
    source = '(define t (:states (A (:text "A:\f"))) (:behavior (next A Bee)))\n'
    with pytest.raises(SpecError) as ei:
        parse_spec(source, "t.sexp")
    assert "(next A Bee)" in ei.value.render()
