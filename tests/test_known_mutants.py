"""Tests that catch the bugs a developer could plausibly make (issue 21): each names the small
change of code (the *mutant*) that the rest of the suite let through, and fails on it. They are
fixed cases, not random ones, so they fail every time.

How each was checked: the mutant was applied by hand, this file run (the test failed), the
change reverted.
"""

from __future__ import annotations

import ast
import itertools

import pytest
import torch

from ltlagent import compile_spec, parse_spec
from ltlagent.agent import tools
from ltlagent.checks.validate import Validator
from ltlagent.decode.monitor import Monitor, build_index
from ltlagent.decode.vllm_processor import MonitorBatch
from ltlagent.text.content import regex_dfa

from . import reference, tiny
from .test_vllm_processor import Move, Params, Update  # the stand-ins of vLLM's interface

torch.set_num_threads(1)


# --- logic/ltl.py -------------------------------------------------------------------------------

def test_nullable_until_respects_its_minimum() -> None:
    """Mutant: ``nullable(Until)`` ignoring ``min`` (``(until_1_2 A (optional B))`` needs one A, so
    it is not nullable; read as nullable, the repeat around it may run zero times and ``C`` alone
    is accepted)."""
    text = ('(define n (:states (A (:text "A:")) (B (:text "B:")) (C (:text "C:")))'
            ' (:behavior (next C (repeat (until_1_2 A (optional B)) :min 2))))')
    spec = parse_spec(text)
    aut = compile_spec(spec).automaton
    assert aut.run(["C"]).status != "accepted"
    for n in range(6):
        for w in itertools.product(spec.names, repeat=n):
            assert (aut.run(list(w)).status == "accepted") == reference.accepts(spec.behavior, w), w


STATES_AB = '(:states (A (:text "A:")) (B (:text "B:")))'


def test_constraints_have_finite_trace_semantics() -> None:
    """Mutant: constraints of a finite spec handed to Spot as plain LTL (no LTLf translation). On a
    finite trace ``weak-next`` holds at the last step, and ``always`` looks only at the trace:
    read as LTL over the infinite word, the first is false at the end and the second empty."""
    weak = compile_spec(parse_spec(f'(define w {STATES_AB} (:behavior (next A (optional B)))'
                                   ' (:constraints (always (implies A (weak-next B)))))')).automaton
    assert weak.run(["A"]).status == "accepted"
    assert weak.run(["A", "B"]).status == "accepted"
    strong = compile_spec(parse_spec(f'(define s {STATES_AB} (:behavior (next A (optional B)))'
                                     ' (:constraints (always (implies A (next B)))))')).automaton
    assert strong.run(["A"]).status != "accepted" and strong.run(["A", "B"]).status == "accepted"
    either = compile_spec(parse_spec(f'(define e {STATES_AB} (:behavior (next A B))'
                                     ' (:constraints (always (or A B))))')).automaton
    assert either.run(["A", "B"]).status == "accepted"


# --- text/content.py ------------------------------------------------------------------------------

def test_dot_matches_a_newline_only_under_the_s_flag() -> None:
    """Mutant: ``.`` matching ``\\n`` without ``(?s)``."""
    assert not regex_dfa("a.b").matches(b"a\nb")
    assert regex_dfa("a.b").matches(b"a-b")
    assert regex_dfa("(?s)a.b").matches(b"a\nb")
    assert not regex_dfa("a(?s:.)b.c").matches(b"a\nb\nc") and regex_dfa("a(?s:.)b.c").matches(b"a\nbxc")


@pytest.mark.parametrize(("regex", "content", "ok"), [
    (r"\d+", "١٢٣", False), (r"\d+", "123", True),
    (r"\w+", "é", False), (r"\w+", "a_1", True),
    (r"[^\d]+", "٣", False), (r"[^\d]+", "x-y", True),
    (r"[\w.]+", "é", False), (r"[^\W]+", "é", False),
    (r"\D+", "é", False), (r"\W+", "é", False), (r"\S+", "é", False),
])
def test_class_categories_are_clipped_to_ascii(regex: str, content: str, ok: bool) -> None:
    """Mutant: classes with ``\\d``/``\\w`` not clipped to ASCII (Python's ``\\d`` matches ``٣``; a
    negated class ``[^\\d]`` would match every non-ASCII character)."""
    assert regex_dfa(regex).matches(content.encode()) is ok


# --- decode: EOS --------------------------------------------------------------------------------

def test_eos_cannot_end_a_text_its_content_constraint_refuses() -> None:
    """Mutant: decode allowing EOS where it cannot end the text. Right after ``Q:`` the content is
    empty, which ``[0-9]+`` refuses: EOS must be masked (in the runner's mode, where EOS may end
    a text, as in the processor's, where it may only end a complete trace)."""
    tok = tiny.byte_level()
    spec = compile_spec(parse_spec('(define d (:states (Q (:text "Q:") (:regex "[0-9]+"))'
                                   ' (A (:text "A:"))) (:behavior (next Q A)))'))
    index = build_index(spec, tok, cache=False)
    for ends_text in (True, False):
        mon = Monitor(index, eos_ends_text=ends_text)
        for t in tok.encode("Q:"):
            mon.advance(t)
        assert mon.state == "Q"
        assert tok.eos_token_id not in set(mon.allowed_token_ids().tolist()), ends_text
        for t in tok.encode(" 7"):
            mon.advance(t)
        assert (tok.eos_token_id in set(mon.allowed_token_ids().tolist())) is ends_text


# --- checks/validate.py ----------------------------------------------------------------------------

def test_validate_columns_count_characters_not_bytes() -> None:
    """Mutant: columns counted in bytes. Non-ASCII text before the error on its line."""
    line = "Thought: naïve café 東京 Answer: 1"
    r = Validator("react").validate_text(f"Question: q\n{line}\n")
    (d,) = [d for d in r.diagnostics if d.severity == "error"]
    assert (d.line, d.column) == (2, line.index("Answer:") + 1)


# --- agent/tools.py -------------------------------------------------------------------------------

def test_calculator_refuses_a_huge_power_before_computing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutant: the size estimate before ``**`` removed (a later check catches the result, after the
    work). The refusal names the estimate, and the power is never computed."""
    def never(a: object, b: object) -> object:
        raise AssertionError(f"computed {a} ** {b}")

    monkeypatch.setitem(tools._BINOPS, ast.Pow, never)
    assert tools.Calculator()("2 ** 10000") == ("Calculator error: the result would have about "
                                                "3010 digits (at most 1000).")
    assert tools.Calculator()("-10 ** 5000") == ("Calculator error: the result would have about "
                                                 "5000 digits (at most 1000).")


# --- decode/vllm_processor.py -----------------------------------------------------------------------

CONSTRAINED = Params({"ltlagent": {"spec": "chain-of-thought"}})


def _masked_rows(batch: MonitorBatch, n: int, width: int) -> set[int]:
    logits = torch.zeros(n, width)
    batch.apply(logits)
    return {i for i in range(n) if not torch.isfinite(logits[i]).all()}


def test_a_swap_with_an_unconstrained_row_moves_the_monitor() -> None:
    """Mutant: ``MonitorBatch.move`` reading rows with ``get`` instead of ``pop``: swapped with an
    unconstrained row, the constrained row's monitor stayed behind too (and masked the other
    request)."""
    tok = tiny.straddle()
    batch = MonitorBatch(tok, cache=False)
    batch.update(Update(3, added=[(0, CONSTRAINED, [1], []), (1, Params(None), [1], []),
                                  (2, Params(None), [1], [])]))
    assert _masked_rows(batch, 3, len(tok)) == {0}
    batch.update(Update(3, moved=[(0, 1, Move.SWAP)]))
    assert set(batch.rows) == {1} and _masked_rows(batch, 3, len(tok)) == {1}
    batch.update(Update(3, moved=[(1, 2, Move.UNIDIRECTIONAL)]))
    assert set(batch.rows) == {2} and _masked_rows(batch, 3, len(tok)) == {2}


def test_batch_updates_apply_removed_then_added_then_moved() -> None:
    """vLLM documents the order of a ``BatchUpdate``: removed, then added, then moved. One update
    that frees rows 0 and 1, adds a request at 0 and moves it to row 2 ends with the new request
    at row 2 only; any other order (or a removal skipped) leaves a row elsewhere, or none."""
    tok = tiny.straddle()
    batch = MonitorBatch(tok, cache=False)
    batch.update(Update(2, added=[(0, CONSTRAINED, [1], []), (1, CONSTRAINED, [1], [])]))
    old = batch.rows[0]
    batch.update(Update(3, removed=[0, 1], added=[(0, CONSTRAINED, [1], [])],
                        moved=[(0, 2, Move.UNIDIRECTIONAL)]))
    assert set(batch.rows) == {2} and batch.rows[2] is not old
