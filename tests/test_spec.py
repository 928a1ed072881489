"""Static errors: every bad spec gets ``file:line:col: message`` (and exit 2 from the CLI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ltlagent import compile, load_spec, parse_spec
from ltlagent.errors import SpecError
from ltlagent.sexp import MAX_DEPTH
from ltlagent.spec import Next, Repeat, Until

DATA = Path(__file__).parent / "data"

STATES = '''(:states
    (Thought (:text "Thought:"))
    (Action (:text "Action:"))
    (Answer (:text "Answer:")))'''


def spec(behavior: str, states: str = STATES, extra: str = "") -> str:
    return f"(define t\n  {states}\n  (:behavior {behavior}){extra})\n"


def error_of(text: str) -> SpecError:
    with pytest.raises(SpecError) as ei:
        compile(parse_spec(text, "t.sexp"))
    return ei.value


def test_figure3_as_printed_reports_the_missing_parenthesis() -> None:
    with pytest.raises(SpecError) as ei:
        load_spec(DATA / "figure3.sexp")
    e = ei.value
    assert e.loc is not None and (e.loc.line, e.loc.column) == (2, 2)  # the "(:states"
    assert "missing ')'" in e.message
    assert e.hint is not None and "before line 9" in e.hint  # where (:behavior starts
    rendered = e.render()
    assert "figure3.sexp:2:2: error:" in rendered and "^" in rendered


@pytest.mark.parametrize(("text", "line", "col", "needle"), [
    (spec("(next Thought Acton Answer)"), 6, 28, "unknown state 'Acton'"),
    (spec("(next Thought Answer)", STATES.replace("(Answer", "(Thought")), 5, 6, "duplicate state 'Thought'"),
    (spec("(next Thought Answer)", STATES.replace('"Answer:"', '"Thought:"')), 5, 6, "same prompt text"),
    (spec("(next Thought Answer)", STATES.replace('"Action:"', '"Thought"')), 4, 6, "proper prefix"),
    (spec("(next (always Thought) Answer)"), 6, 20, "'always' must be the last part"),
    (spec("(next Thought Answer)", extra="\n  (:constraints (eventually Action) (always (not Action)))"),
     6, 14, "admits no trace"),
    (spec("(nxt Thought Answer)"), 6, 15, "unknown keyword 'nxt'"),
    (spec("(next Thought Answer)", STATES.replace('(:text "Action:")', "(:text Action)")), 4, 20,
     ":text of 'Action' must be one string"),
    (spec("(next Thought Answer)", STATES.replace("(:text", "(:txt", 1)), 3, 15, "unknown keyword ':txt'"),
    ("", 1, 1, "empty spec"),
])
def test_static_errors_point_at_the_source(text: str, line: int, col: int, needle: str) -> None:
    e = error_of(text)
    assert needle in e.message, e.render()
    assert e.loc is not None and e.loc.source == "t.sexp"
    assert (e.loc.line, e.loc.column) == (line, col), e.render()


def test_suggestions_for_typos() -> None:
    assert error_of(spec("(next Thought Acton Answer)")).hint == "did you mean 'Action'?"
    assert error_of(spec("(nxt Thought Answer)")).hint == "did you mean 'next'?"


def test_several_errors_are_reported_together() -> None:
    e = error_of(spec("(next Thougt Acton Answer)"))
    assert "Thougt" in str(e) and "Acton" in str(e)


def test_binary_and_non_utf8_files(tmp_path: Path) -> None:
    binary = tmp_path / "model.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(SpecError) as ei:
        load_spec(binary)
    assert "UTF-8" in ei.value.message or "binary" in ei.value.message
    nul = tmp_path / "nul.sexp"
    nul.write_bytes(b"(define x\x00)")
    with pytest.raises(SpecError, match="binary"):
        load_spec(nul)


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    deep = "(define t (:states (A (:text \"A:\"))) (:behavior " + "(next " * 5000 + "A" + ")" * 5000 + "))"
    with pytest.raises(SpecError, match=f"deeper than {MAX_DEPTH}"):
        parse_spec(deep, "deep.sexp")


def test_moderate_nesting_compiles() -> None:
    depth = 60
    text = "(define t (:states (A (:text \"A:\")) (B (:text \"B:\"))) (:behavior " \
        + "(next A " * depth + "B" + ")" * depth + "))"
    c = compile(parse_spec(text))
    assert c.automaton.run(["A"] * depth + ["B"]).accepted


def test_operator_like_state_names_are_fine() -> None:
    text = spec("(until X (next F G Finish))", states='''(:states
        (X (:text "X:")) (F (:text "F:")) (G (:text "G:")) (Finish (:text "Finish:")))''')
    a = compile(parse_spec(text)).automaton
    assert a.run(["X", "X", "F", "G", "Finish"]).accepted
    assert not a.run(["F", "Finish"]).accepted


def test_suffix_texts_are_allowed_infix_texts_are_not() -> None:
    ok = STATES.replace('"Action:"', '"Final Thought:"')  # "Thought:" is a suffix: fine
    compile(parse_spec(spec("(next Thought Action Answer)", ok)))
    bad = STATES.replace('"Action:"', '"A Thought: B"')
    assert "inside" in error_of(spec("(next Thought Action Answer)", bad)).message
    both = STATES.replace('"Thought:"', '":"').replace('"Action:"', '"::"')  # prefix and suffix
    assert "proper prefix" in error_of(spec("(next Thought Action Answer)", both)).message


def test_extensions_parse() -> None:
    s = parse_spec(spec("(next (repeat Thought :min 1 :max 3) (optional Action) Answer)"))
    assert isinstance(s.behavior, Next)
    r, o, _ = s.behavior.parts
    assert isinstance(r, Repeat) and (r.min, r.max) == (1, 3)
    assert isinstance(o, Repeat) and (o.min, o.max) == (0, 1)
    s2 = parse_spec(spec("(until_2_4 Thought Answer)"))
    assert isinstance(s2.behavior, Until) and (s2.behavior.min, s2.behavior.max) == (2, 4)


def test_state_options() -> None:
    st = '''(:states (Thought (:text "Thought:") (:stop "\\n") (:max-tokens 64))
        (Action (:text "Action:") (:choices "Search" "Lookup"))
        (Answer (:text "Answer:") (:regex "[0-9]+")))'''
    s = parse_spec(spec("(next Thought Action Answer)", st))
    assert s.state("Thought").stop == ("\n",) and s.state("Thought").max_tokens == 64
    assert s.state("Action").choices == ("Search", "Lookup")
    assert s.state("Answer").regex == "[0-9]+"
    tools = parse_spec(spec("(next Thought Action Answer)", st.replace('"Search" "Lookup"', ":tools")))
    assert tools.state("Action").tool_choices
    assert "bad :regex" in error_of(spec("(next Thought Answer)", st.replace("[0-9]+", "[0-9"))).message


def test_constraints_raw_and_sexp() -> None:
    c = compile(parse_spec(spec("(until (or Thought Action) Answer)",
                                extra='\n (:constraints (always (implies Thought (next Action)))'
                                      ' (ltl "F Answer"))')))
    a = c.automaton
    assert a.run(["Thought", "Action", "Answer"]).accepted
    assert a.run(["Thought", "Answer"]).status == "rejected"


def test_reference_specs_of_the_paper_authors_compile() -> None:
    files = sorted((DATA / "ibm-reference").glob("*.txt"))  # copied verbatim from their repository
    assert len(files) == 8
    for f in files:
        c = compile(f)
        assert c.automaton.allowed(c.automaton.initial) == (c.spec.states[0].name,), f
