"""Static errors: every bad spec gets ``file:line:col: message`` (and exit 2 from the CLI)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ltlagent import compile_spec, load_spec, parse_spec
from ltlagent.errors import SpecError
from ltlagent.spec.sexp import MAX_DEPTH
from ltlagent.spec.syntax import MAX_UNROLLED_STEPS, Next, Repeat, Until, unrolled_size

from .test_content import UNSUPPORTED

DATA = Path(__file__).parent / "data"

STATES = '''(:states
    (Thought (:text "Thought:"))
    (Action (:text "Action:"))
    (Answer (:text "Answer:")))'''


def spec(behavior: str, states: str = STATES, extra: str = "") -> str:
    return f"(define t\n  {states}\n  (:behavior {behavior}){extra})\n"


def error_of(text: str) -> SpecError:
    with pytest.raises(SpecError) as ei:
        compile_spec(parse_spec(text, "t.sexp"))
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
    c = compile_spec(parse_spec(text))
    assert c.automaton.run(["A"] * depth + ["B"]).accepted


def test_operator_like_state_names_are_fine() -> None:
    text = spec("(until X (next F G Finish))", states='''(:states
        (X (:text "X:")) (F (:text "F:")) (G (:text "G:")) (Finish (:text "Finish:")))''')
    a = compile_spec(parse_spec(text)).automaton
    assert a.run(["X", "X", "F", "G", "Finish"]).accepted
    assert not a.run(["F", "Finish"]).accepted


def test_suffix_texts_are_allowed_infix_texts_are_not() -> None:
    ok = STATES.replace('"Action:"', '"Final Thought:"')  # "Thought:" is a suffix: fine
    compile_spec(parse_spec(spec("(next Thought Action Answer)", ok)))
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
    c = compile_spec(parse_spec(spec("(until (or Thought Action) Answer)",
                                extra='\n (:constraints (always (implies Thought (next Action)))'
                                      ' (ltl "F Answer"))')))
    a = c.automaton
    assert a.run(["Thought", "Action", "Answer"]).accepted
    assert a.run(["Thought", "Answer"]).status == "rejected"


def test_reference_specs_of_the_paper_authors_compile() -> None:
    files = sorted((DATA / "ibm-reference").glob("*.txt"))  # copied verbatim from their repository
    assert len(files) == 8
    for f in files:
        c = compile_spec(f)
        assert c.automaton.allowed(c.automaton.initial) == (c.spec.states[0].name,), f


# --- issue 12: nothing the later stages refuse gets past the reader ------------------------------

def regex_spec(regex: str) -> str:
    escaped = regex.replace("\\", "\\\\").replace('"', '\\"')
    return spec("(next Thought Answer)", STATES.replace('(:text "Answer:")',
                                                        f'(:text "Answer:") (:regex "{escaped}")'))


@pytest.mark.parametrize(("regex", "words"), UNSUPPORTED)
def test_unsupported_regex_is_refused_when_the_spec_is_read(regex: str, words: str) -> None:
    """``show`` used to accept these (exit 0); the monitor then crashed with a TypeError."""
    with pytest.raises(SpecError) as ei:
        parse_spec(regex_spec(regex), "t.sexp")
    e = ei.value
    assert words in e.message and e.hint, e.render()
    assert e.loc is not None and (e.loc.line, e.loc.column) == (5, 39), e.render()  # the string


def test_regex_syntax_error_points_into_the_string() -> None:
    with pytest.raises(SpecError) as ei:
        parse_spec(regex_spec("ab[0-9"), "t.sexp")
    e = ei.value
    assert "unterminated character set" in e.message
    assert e.loc is not None and (e.loc.line, e.loc.column) == (5, 39 + 1 + 2), e.render()


def constraint_spec(raw: str, states: str = STATES) -> str:
    return spec("(next Thought Answer)", states, f'\n  (:constraints (ltl "{raw}"))')


@pytest.mark.parametrize(("raw", "col", "needle", "hint"), [
    ("G(", 25, "missing closing parenthesis", "Spot syntax"),
    ("G Thought &", 34, 'missing right operand for "and operator"', "Spot syntax"),
    ("F(Answer))", 32, "unexpected closing parenthesis", "Spot syntax"),
    ("Thought[*2]", 30, "unexpected opening bracket", "Spot syntax"),
    ("G(Thought -> X Answr)", 38, "unknown state 'Answr'", "did you mean 'Answer'?"),
    ("{Thought;Answer}", 22, "SEREs", "in the :behavior pattern"),
])
def test_malformed_raw_ltl_is_a_positional_error(raw: str, col: int, needle: str, hint: str) -> None:
    """``(ltl "G(")`` used to print Spot's warning and a Python traceback."""
    with pytest.raises(SpecError) as ei:
        parse_spec(constraint_spec(raw), "t.sexp")
    e = ei.value
    assert needle in e.message and e.hint is not None and hint in e.hint, e.render()
    assert e.loc is not None and (e.loc.line, e.loc.column) == (7, col), e.render()


def test_raw_ltl_state_names_that_spot_reads_as_operators() -> None:
    """Unquoted, ``Finish`` is Spot's ``F inish``: say so instead of failing on 'inish'."""
    states = STATES.replace("(Action", "(Finish").replace('"Action:"', '"Finish:"')
    with pytest.raises(SpecError) as ei:
        parse_spec(constraint_spec("G Finish", states), "t.sexp")
    e = ei.value
    assert e.hint is not None and "Spot reads Finish as F inish" in e.hint, e.render()
    quoted = compile_spec(parse_spec(constraint_spec('F \\"Finish\\"', states).replace(
        "(next Thought Answer)", "(next Thought (optional Finish) Answer)")))
    assert quoted.automaton.run(["Thought", "Finish", "Answer"]).accepted
    assert not quoted.automaton.run(["Thought", "Answer"]).accepted


@pytest.mark.parametrize(("behavior", "size"), [
    ("(repeat Thought :max 100000)", 100000),
    ("(next Thought (until_5000 Action Answer))", 5001),
    ("(repeat (next Thought Action) :min 1500)", 3002),
    ("(repeat (repeat Thought :max 100) :max 100)", 10000),
])
def test_bounds_past_the_limit_are_refused_early(behavior: str, size: int) -> None:
    """``:max 100000`` used to run past a minute with no output."""
    t0 = time.perf_counter()
    with pytest.raises(SpecError) as ei:
        parse_spec(spec(behavior), "t.sexp")
    assert time.perf_counter() - t0 < 5
    e = ei.value
    assert f"unrolls to {size} steps" in e.message and f"limit of {MAX_UNROLLED_STEPS}" in e.message
    assert e.hint is not None and "quadratically" in e.hint
    assert e.loc is not None and e.loc.line == 6


def test_unrolled_size() -> None:
    def size(b: str) -> int:
        return unrolled_size(parse_spec(spec(b)).behavior)

    assert size("Thought") == 1
    assert size("(next Thought (or Action Answer))") == 3
    assert size("(until_300 (next Thought Action) Answer)") == 601
    assert size("(until Thought Answer)") == 2
    assert size("(repeat Thought :min 4)") == 5
    assert size("(optional (next Thought Action))") == 2


def test_a_bound_of_2000_compiles_in_seconds() -> None:
    """``(repeat A :max 2000)`` took 113 s: its split into 8-bit Spot bounds was ambiguous."""
    t0 = time.perf_counter()
    a = compile_spec(parse_spec(spec(f"(next (repeat Thought :max {MAX_UNROLLED_STEPS - 1}) Answer)"))
                ).automaton
    assert time.perf_counter() - t0 < 30
    assert a.run(["Thought"] * (MAX_UNROLLED_STEPS - 1) + ["Answer"]).accepted
    assert a.run(["Thought"] * MAX_UNROLLED_STEPS + ["Answer"]).status == "rejected"


# --- no silent change of meaning (issue 21) -------------------------------------------------------

TWO = '(define t (:states (A (:text "A:"){a}) (B (:text "B:"))) (:behavior {beh}))'


def two(a: str = "", beh: str = "(next A B)") -> str:
    return TWO.format(a=a, beh=beh)


@pytest.mark.parametrize(("first", "second"), [
    (None, '(:text "A2:")'), ('(:stop "x")', '(:stop "y")'), ('(:regex "a")', '(:regex "b")'),
    ('(:choices "a")', '(:choices "b")'), ("(:max-tokens 3)", "(:max-tokens 9)"),
    ("(:role answer)", "(:role answer)"), ("(:flags :env-input)", "(:flags :env-input)")])
def test_an_option_given_twice_is_an_error_at_the_second(first: str | None, second: str) -> None:
    text = two(f" {first} {second}" if first else f" {second}")
    e = error_of(text)
    assert "given twice in state 'A'" in e.message, e.render()
    assert e.loc is not None and e.loc.column == text.rindex(second) + 1
    assert "unknown state" not in e.render()


@pytest.mark.parametrize(("beh", "needle", "at"), [
    ("(repeat A :max 2 :max 3)", ":max given twice in repeat", ":max 3"),
    ("(repeat A :min 1 :min 2)", ":min given twice in repeat", ":min 2"),
    ("(repeat A :max -1)", ":max takes a non-negative integer, found '-1'", "-1"),
    ("(repeat A :max 1e3)", ":max takes a non-negative integer, found '1e3'", "1e3"),
    ("(repeat A :min ²)", ":min takes a non-negative integer, found '²'", "²"),
])
def test_repeat_bounds_are_read_once_and_as_written(beh: str, needle: str, at: str) -> None:
    text = two(beh=f"(next {beh} B)")
    e = error_of(text)
    assert needle in e.message and "unknown state" not in e.render()
    assert e.loc is not None and e.loc.column == text.index(at) + 1


@pytest.mark.parametrize("a", ['(:text "")', '(:text "  ")', "(:text)", '(:text "A:" "B")'])
def test_a_refused_state_is_not_also_an_unknown_state(a: str) -> None:
    e = error_of(TWO.replace('(:text "A:"){a}', a).format(beh="(next A B)"))
    assert ":text of 'A'" in e.message and "unknown state" not in e.render(), e.render()


@pytest.mark.parametrize("regex", [r"[^\\s\\S]", r"\\s+", "\\u00a0"])
def test_a_regex_that_matches_nothing_is_a_spec_error(regex: str) -> None:
    text = two(f' (:regex "{regex}")')
    e = error_of(text)
    assert "matches no content" in e.message
    assert e.loc is not None and e.loc.column == text.index(f'"{regex}"') + 1


def test_wide_alternatives_past_the_size_limit_say_the_real_size_and_cap_the_carets() -> None:
    n = 3_000
    text = two(beh=f"(next (or {' '.join(['A'] * n)}) B)")
    e = error_of(text)
    assert f"the behaviour has {n + 1} steps" in e.message and "0 steps" not in e.message
    rendered = e.render()
    assert len(rendered) < 1000 and rendered.count("^") <= 160


def test_a_span_over_many_lines_draws_carets_to_the_end_of_its_first_line_only() -> None:
    text = two(beh="(next (repeat A :min 3000 ; a long comment that the carets must not run past\n  ) B)")
    rendered = error_of(text).render()
    src, carets = rendered.splitlines()[1:3]
    assert len(carets) <= len(src)


# -- issue 21: size limits, linear checks, what a spec argument names ------------------------------

def _many_states(n: int) -> str:
    states = "\n".join(f'   (State-{i} (:text "State number {i}:"))' for i in range(n))
    return f"(define big\n (:states\n{states})\n (:behavior (next State-0 State-1)))\n"


def test_too_many_states_is_refused_early() -> None:
    from ltlagent.spec.syntax import MAX_STATES

    with pytest.raises(SpecError) as e:
        parse_spec(_many_states(MAX_STATES + 1), "big.sexp")
    text = e.value.render()
    assert f"declares {MAX_STATES + 1} states; at most {MAX_STATES} are supported" in text
    assert "big.sexp:2:3:" in text and len(max(text.splitlines(), key=len)) < 200  # no page of carets


def test_prompt_text_inside_another_matches_the_pairwise_check() -> None:
    """The table lookup finds exactly the pairs the quadratic pairwise check found."""
    import random

    from ltlagent.spec.syntax import State, _texts_inside

    rng = random.Random(0)
    for _ in range(300):
        texts = sorted({"".join(rng.choice("ab:") for _ in range(rng.randint(1, 5)))
                        for _ in range(rng.randint(2, 7))})
        states = [State(name=f"S{i}", text=t, loc=None) for i, t in enumerate(texts)]
        want = [(a.name, b.name) for a in states for b in states
                if a is not b and a.text in b.text and b.text.find(a.text) != len(b.text) - len(a.text)]
        assert [(a.name, b.name) for a, b in _texts_inside(states)] == want, texts


def test_a_bundled_name_is_not_shadowed_by_a_local_file(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from ltlagent.spec.syntax import bundled_specs, resolve_spec_path

    monkeypatch.chdir(tmp_path)
    (tmp_path / "react").write_text("(define mine (:states (A (:text \"A:\"))) (:behavior A))\n")
    assert resolve_spec_path("react") == bundled_specs()["react"]
    assert resolve_spec_path("./react") == Path("./react")  # a path that looks like one
    (tmp_path / "react-agent").mkdir()
    assert resolve_spec_path("react-agent") == bundled_specs()["react-agent"]


def test_symlink_loop_and_broken_link_are_named(tmp_path: Path) -> None:
    from ltlagent.errors import UsageError
    from ltlagent.spec.syntax import resolve_spec_path

    (tmp_path / "a.sexp").symlink_to(tmp_path / "b.sexp")
    (tmp_path / "b.sexp").symlink_to(tmp_path / "a.sexp")
    (tmp_path / "gone.sexp").symlink_to(tmp_path / "nowhere.sexp")
    with pytest.raises(UsageError, match="a symbolic link loop"):
        resolve_spec_path(str(tmp_path / "a.sexp"))
    with pytest.raises(UsageError, match="a broken symbolic link"):
        resolve_spec_path(str(tmp_path / "gone.sexp"))
