"""The keyword lexer's two engines (regex for whole texts, byte DFA for streams) agree."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ltlagent.text.lexer import ROOT, build_lexer

REACT = ["Thought:", "Action:", "Action Input:", "Observation:", "Final Thought:", "Answer:"]


def test_longest_match_and_mid_line() -> None:
    lx = build_lexer(REACT)
    text = "Thought: a\nAction: Search\nAction Input: x\nObservation: y. Final Thought: z\nAnswer: 1"
    got = [lx.keywords[m.index] for m in lx.finditer(text)]
    assert got == ["Thought:", "Action:", "Action Input:", "Observation:", "Final Thought:", "Answer:"]
    segs = list(lx.segments(text))
    assert text[segs[1].content_start:segs[1].content_end].strip() == "Search"


def test_dfa_matches_regex_on_react_text() -> None:
    lx = build_lexer(REACT)
    text = "Final Thought: é ü Thought:Action Input:Action:Answer:".encode()
    node, events = lx.feed(ROOT, text)
    assert [(lx.keywords[k], e) for k, e in events] == [
        (lx.keywords[m.index], m.end) for m in lx.finditer(text)]
    assert node == ROOT


def test_pending_bytes() -> None:
    lx = build_lexer(REACT)
    node, _ = lx.feed(ROOT, b"blah Final Tho")
    assert lx.pending(node) == b"Final Tho"


ALPHABET = st.sampled_from(["Thought:", "Action", "Action:", " Input:", "Final ", "Thought", ":",
                            "Answer:", "Obs", "ervation:", "x", " ", "\n", "é", "A", "ction Input:"])


@settings(max_examples=300, deadline=None)
@given(st.lists(ALPHABET, max_size=30), st.integers(1, 7))
def test_engines_agree_on_any_text_and_any_chunking(pieces: list[str], chunk: int) -> None:
    lx = build_lexer(REACT)
    data = "".join(pieces).encode()
    want = [(m.index, m.end) for m in lx.finditer(data)]
    node, got = ROOT, []
    for off in range(0, len(data), chunk):  # feed in chunks: state carries across boundaries
        node, ev = lx.feed(node, data[off:off + chunk])
        got += [(k, off + e) for k, e in ev]
    assert got == want


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet="ab:c ", min_size=1, max_size=4), min_size=1, max_size=4, unique=True),
       st.text(alphabet="ab:c ", max_size=40))
def test_engines_agree_for_random_keyword_sets(keywords: list[str], text: str) -> None:
    # keep only sets that the spec checker accepts: no keyword inside another except as a suffix
    for a in keywords:
        for b in keywords:
            if a != b and a in b and b.find(a) != len(b) - len(a):
                return
    lx = build_lexer(keywords)
    data = text.encode()
    _, events = lx.feed(ROOT, data)
    assert [(k, e) for k, e in events] == [(m.index, m.end) for m in lx.finditer(data)]


def test_segments_are_every_keyword_with_its_content_span() -> None:
    """Found by mutation testing (issue 21): each segment names its keyword and spans exactly the
    text up to the next keyword (the last one to the end); finditer starts at ``pos``."""
    lx = build_lexer(REACT)
    text = "pre Thought: a b\nAction:Search\nAnswer: 42 "
    segs = list(lx.segments(text))
    assert [(lx.keywords[s.index], text[s.start:s.content_start], text[s.content_start:s.content_end])
            for s in segs] == [("Thought:", "Thought:", " a b\n"), ("Action:", "Action:", "Search\n"),
                               ("Answer:", "Answer:", " 42 ")]
    assert list(lx.segments("no keyword here")) == []
    assert [lx.keywords[m.index] for m in lx.finditer(text, text.index("Action"))] == ["Action:", "Answer:"]
    assert [m.start for m in lx.finditer(text.encode(), 5)] == [text.encode().index(b"Action:"),
                                                                text.encode().index(b"Answer:")]
