"""The call skeleton of ``text/toolcall.py`` (``glue_calls``): only a space may follow a ``:`` or
``,`` of the call object, and a call table over its limit says what and how to help (issue 31;
docs/mutation.md, "text/toolcall.py")."""

from __future__ import annotations

import pytest

from ltlagent.errors import UsageError
from ltlagent.text.toolcall import call_dfa

TOOLS = {n: {"type": "object", "properties": {"x": {"enum": [1]}}} for n in ("alpha", "beta", "gamma")}


@pytest.mark.parametrize("fmt", ["json", "hermes"])
def test_only_a_space_may_follow_the_call_objects_colons_and_commas(fmt: str) -> None:
    dfa = call_dfa(TOOLS, fmt)

    def call(text: str) -> bytes:
        return (text if fmt == "json" else f"<tool_call>\n{text}\n</tool_call>").encode()
    for good in ('{"name": "alpha", "arguments": {}}', '{"name":"beta","arguments":{"x":1}}'):
        assert dfa.matches(call(good)), good
    for bad in ('{"name":!"alpha", "arguments": {}}', '{"name": "alpha",!"arguments": {}}',
                '{"name": "alpha", "arguments":!{}}', '{"name":\t"alpha", "arguments": {}}',
                '{"name":  "alpha", "arguments": {}}'):
        assert not dfa.matches(call(bad)), bad


def test_a_call_table_over_its_limit_names_the_calls_and_the_remedy() -> None:
    with pytest.raises(UsageError) as e:
        call_dfa(TOOLS, "json", limit=90)
    assert str(e.value) == "the json tool calls of alpha, beta, gamma needs more than 90 automaton states"
    assert e.value.hint == "fewer tools or simpler argument schemas"
