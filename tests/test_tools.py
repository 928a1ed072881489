"""Tools: schema checks at definition, the @tool decorator, Calculator, Search/Lookup over FTS5."""

from __future__ import annotations

import json
import typing

import pytest

from ltlagent.agent.tools import (
    Calculator,
    Document,
    DocumentStore,
    Lookup,
    Search,
    Tool,
    ToolError,
    split_sentences,
    tool,
    wikipedia_style_tools,
)
from ltlagent.errors import UsageError

# --- Tool and @tool ----------------------------------------------------------------------------


def test_tool_decorator_reads_hints_and_docstring() -> None:
    @tool
    def Multiply(a: int, b: int) -> int:
        """Multiply two integers.

        Args:
            a: the first factor
            b: the second factor
        """
        return a * b

    assert isinstance(Multiply, Tool)
    assert Multiply.name == "Multiply"
    assert Multiply.description == "Multiply two integers."
    assert Multiply.inputs == {"a": {"type": "integer", "description": "the first factor"},
                               "b": {"type": "integer", "description": "the second factor"}}
    assert Multiply.output_type == "integer"
    assert Multiply(3, 4) == 12
    assert Multiply.invoke('{"a": 6, "b": "7"}') == "42"
    assert Multiply.describe() == "Multiply: Multiply two integers."
    json.dumps(Multiply.to_dict())


def test_tool_decorator_with_name_and_optional_argument() -> None:
    @tool(name="Greet")
    def greet(who: str, punctuation: typing.Optional[str] = None) -> str:  # noqa: UP045
        """Say hello.

        Args:
            who: whom to greet
            punctuation (str): what to end with
        """
        return f"Hello {who}{punctuation or '!'}"

    assert greet.name == "Greet"
    assert greet.inputs["punctuation"].get("nullable") is True
    assert greet.invoke('{"who": "Ada"}') == "Hello Ada!"


def test_single_input_gets_whole_text_converted() -> None:
    @tool
    def Square(x: float) -> float:
        """Square a number.

        Args:
            x: the number
        """
        return x * x

    assert Square.invoke(" 3 ") == "9.0"
    with pytest.raises(ValueError, match="must be of type number"):
        Square.invoke("three")


@pytest.mark.parametrize("build, message", [
    (lambda: Tool(name="bad name", description="d", inputs={}, function=lambda: 1), "identifier"),
    (lambda: Tool(name="T", description="", inputs={}, function=lambda: 1), "description is required"),
    (lambda: Tool(name="T", description="d", inputs={"x": {"type": "str", "description": "x"}},
                  function=lambda x: x), "has type 'str'"),
    (lambda: Tool(name="T", description="d", inputs={"x": {"type": "string"}},
                  function=lambda x: x), "needs a description"),
    (lambda: Tool(name="T", description="d", inputs={"x": {"type": "string", "description": "x"}},
                  function=lambda y: y), "do not match"),
    (lambda: Tool(name="T", description="d", inputs={}), "forward"),
])
def test_bad_tool_definitions_fail_at_definition(build: typing.Callable[[], Tool], message: str) -> None:
    with pytest.raises(ToolError, match=message):
        build()


def test_decorator_refuses_undocumented_or_untyped_arguments() -> None:
    def no_doc(x: str) -> str:
        return x

    def untyped(x):  # type: ignore[no-untyped-def]
        """Doc.

        Args:
            x: thing
        """
        return x

    def undocumented(x: str) -> str:
        """Doc without args."""
        return x

    with pytest.raises(ToolError, match="docstring"):
        tool(no_doc)
    with pytest.raises(ToolError, match="type hint"):
        tool(untyped)
    with pytest.raises(ToolError, match="not described"):
        tool(undocumented)


# --- Calculator --------------------------------------------------------------------------------

@pytest.mark.parametrize("expr, answer", [
    ("17 * 23 + 4", "395"),
    ("(2 + 3) * 4", "20"),
    ("7 / 2", "3.5"),
    ("8 / 2", "4"),
    ("7 // 2", "3"),
    ("-7 % 3", "2"),
    ("2 ** 10", "1024"),
    ("2^8", "256"),
    ("1 / 3", "0.333333333333"),
    ("1e3 + 1", "1001"),
    ("  12 * 12 = ", "144"),
])
def test_calculator_arithmetic(expr: str, answer: str) -> None:
    assert Calculator()(expr) == answer


@pytest.mark.parametrize("expr, message", [
    ("__import__('os')", "function calls are not allowed"),
    ("9**9**9", "exponent is too large"),
    ("2 ** 5000", "digits"),
    ("1e999999", "number is too large"),
    ("x + 1", "names are not allowed ('x')"),
    ("(1).real", "attribute access is not allowed"),
    ("'a' * 3", "only numbers are allowed"),
    ("1 < 2", "comparisons"),
    ("[1][0]", "indexing is not allowed"),
    ("1 +", "cannot read"),
    ("(-8) ** 0.5", "not a real number"),
    ("", "empty"),
    ("1+" * 150 + "1", "too long"),
    ("(" * 100 + "1" + ")" * 100, "too long"),
])
def test_calculator_refuses_with_a_message(expr: str, message: str) -> None:
    out = Calculator()(expr)
    assert isinstance(out, str)
    assert message in out, out


def test_calculator_division_by_zero_in_words() -> None:
    assert Calculator()("1 / 0") == "Division by zero is undefined."
    assert Calculator()("5 % 0") == "Division by zero is undefined."
    assert Calculator()("0 ** -1") == "Division by zero is undefined."


def test_calculator_bounds_are_configurable() -> None:
    calc = Calculator(max_length=10)
    assert "too long" in calc("1 + 2 + 3 + 4")
    assert Calculator(max_digits=5)("10 ** 4") == "10000"
    assert "digits" in Calculator(max_digits=5)("10 ** 6")


# --- documents, Search, Lookup -----------------------------------------------------------------

PAGES = {
    "Colorado orogeny": ("The Colorado orogeny was an episode of mountain building (an orogeny) in "
                         "Colorado and surrounding areas. It took place from 1780 to 1650 million years "
                         "ago. The eastern sector extends into the High Plains and is called the Central "
                         "Plains orogeny. The boundary between the eastern sector and the rest is unclear."),
    "High Plains (United States)": ("The High Plains are a subregion of the Great Plains. From east to west, "
                                    "the High Plains rise in elevation from around 1,800 to 7,000 ft. "
                                    "They are dry."),
    "High Plains": "High Plains refers to one of two distinct land regions.",
    "Great Plains": "The Great Plains is a broad expanse of flatland. It lies west of the Mississippi River.",
}


@pytest.fixture()
def store() -> DocumentStore:
    return DocumentStore(PAGES)


def test_search_exact_title_gives_first_sentences(store: DocumentStore) -> None:
    search = Search(store, sentences=2)
    out = search("Colorado orogeny")
    assert out == ("The Colorado orogeny was an episode of mountain building (an orogeny) in Colorado and "
                   "surrounding areas. It took place from 1780 to 1650 million years ago.")
    assert search("high plains") == "High Plains refers to one of two distinct land regions."
    assert search("[High Plains (United States)]").startswith("The High Plains are a subregion")


def test_search_miss_lists_similar_titles(store: DocumentStore) -> None:
    out = Search(store)("plains of the west")
    assert out.startswith("Could not find plains of the west. Similar: [")
    assert "'Great Plains'" in out and "'High Plains'" in out
    assert Search(store)("zzzz") == "Could not find zzzz. Similar: []."
    assert Search(store)("!!!") == "Could not find !!!. Similar: []."


def test_search_title_containing_all_words_counts_as_the_page(store: DocumentStore) -> None:
    assert Search(store)("Colorado").startswith("The Colorado orogeny was")


def test_lookup_walks_sentences_like_react(store: DocumentStore) -> None:
    search, lookup = wikipedia_style_tools(store)
    assert lookup("eastern sector") == "Cannot use Lookup without using Search first!"
    search("Colorado orogeny")
    assert lookup("eastern sector") == ("(Result 1 / 2) The eastern sector extends into the High Plains "
                                        "and is called the Central Plains orogeny.")
    assert lookup("Eastern Sector").startswith("(Result 2 / 2) The boundary")
    assert lookup("eastern sector") == "No more results."
    assert lookup("nothing like this") == "No more results."
    search("Great Plains")
    assert lookup("mississippi") == "(Result 1 / 1) It lies west of the Mississippi River."
    search("no such page at all")
    assert lookup("plains") == "No more results."
    search.reset()
    assert lookup("plains") == "Cannot use Lookup without using Search first!"


def test_separately_built_lookup_needs_its_own_search(store: DocumentStore) -> None:
    assert Lookup(store)("x") == "Cannot use Lookup without using Search first!"


def test_store_from_jsonl_and_folder(tmp_path: typing.Any) -> None:
    jl = tmp_path / "corpus.jsonl"
    jl.write_text("\n".join(json.dumps({"title": t, "text": x}) for t, x in PAGES.items()) + "\n\n")
    s = DocumentStore.from_path(jl)
    assert len(s) == 4 and s.page("great plains") == Document("Great Plains", PAGES["Great Plains"])
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "Great_Plains.txt").write_text(PAGES["Great Plains"])
    assert DocumentStore.from_path(folder).page("Great Plains") is not None
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"title": "a", "text": "b"}\n{oops\n')
    with pytest.raises(UsageError, match=r"bad.jsonl:2:2: not valid JSON"):
        DocumentStore.from_path(bad)
    with pytest.raises(UsageError, match="no such file"):
        DocumentStore.from_path(tmp_path / "missing.jsonl")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match=r"no \.txt files"):
        DocumentStore.from_path(tmp_path / "empty")


def test_fts_query_syntax_is_neutralised(store: DocumentStore) -> None:
    for q in ['"', 'AND OR NOT', 'plains*', 'title:great', "NEAR(a b)", "'; DROP TABLE pages; --"]:
        assert isinstance(Search(store)(q), str)
    assert [d.title for d in store.search("AND")] == ["Colorado orogeny"]  # the word, not the operator


def test_split_sentences() -> None:
    assert split_sentences("A b. C d!  E?\nF") == ["A b.", "C d!", "E?", "F"]


def test_tool_output_is_text_in_invoke(store: DocumentStore) -> None:
    assert Calculator().invoke("2+2") == "4"
    assert Search(store).invoke("  Great   Plains ").startswith("The Great Plains")
