"""The llguidance and XGrammar grammars of the peer benchmark (benchmarks/peer_grammars.py) describe
ltlagent's language: the same verdict as the react-tools monitor on every test string (issue 11).
Skipped where the engine is not installed (``pip install -e .[bench]``)."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from benchmarks.peer_grammars import TEST_STRINGS, avoid_rules
from ltlagent.decode.machine import DONE, ENV, INF
from ltlagent.decode.monitor import TokenIndex, build_index
from ltlagent.logic.compiled import compile_spec
from tests import tiny


def ltlagent_verdict(index: TokenIndex, text: str) -> str:
    m = index.machine
    sid, _ = m.feed(index.start, text.encode())
    if sid < 0 or m.need(sid) >= INF:
        return "dead"
    if m.mode(sid) == ENV:
        return "complete"
    s2, _kind = m.eos(sid, False)
    return "complete" if s2 >= 0 and m.mode(s2) == DONE else "prefix"


@pytest.fixture(scope="module")
def index() -> TokenIndex:
    return build_index(compile_spec("react-tools"), tiny.byte_level(), cache=False)


@pytest.mark.parametrize(("text", "want"), TEST_STRINGS)
def test_the_expected_verdicts_are_ltlagents(index: TokenIndex, text: str, want: str) -> None:
    assert ltlagent_verdict(index, text) == want


@pytest.mark.parametrize("engine", ["llguidance", "xgrammar"])
def test_engine_agrees_with_ltlagent_on_every_test_string(index: TokenIndex, engine: str) -> None:
    pytest.importorskip(engine)
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from benchmarks.bench_peers import Llg, Xgr

    eng = Llg(tiny.byte_level()) if engine == "llguidance" else Xgr(tiny.byte_level())
    wrong = [(text, eng.verdict(text), ltlagent_verdict(index, text)) for text, _ in TEST_STRINGS
             if eng.verdict(text) != ltlagent_verdict(index, text)]
    assert wrong == []


def test_avoid_rules_forbid_exactly_the_keywords() -> None:
    """The right-linear rules for XGrammar, run as an automaton, reject exactly the texts that
    contain a keyword or an excluded character (against a brute-force check)."""
    import itertools
    import re

    kws = ("ab:", "b:", "ca")
    rules = avoid_rules("t", kws, "\n")
    table: dict[int, dict[str, int]] = {}
    for line in rules:
        head, alts = line.split(" ::= ")
        k = int(head.split("_")[1])
        table[k] = {}
        for alt in alts.split(" | "):
            m = re.fullmatch(r'"(.)" t_(\d+)', alt)
            if m:
                table[k][m.group(1)] = int(m.group(2))

    def accepts(s: str) -> bool:
        st = 0
        for c in s:
            if c == "\n":
                return False
            if c in table[st]:
                st = table[st][c]
            elif c in "ab:c":
                return False  # a keyword character with no transition: a keyword completed
            else:
                st = 0
        return True

    for n in range(6):
        for chars in itertools.product("ab:cx\n", repeat=n):
            s = "".join(chars)
            assert accepts(s) == (not any(k in s for k in kws) and "\n" not in s), s
