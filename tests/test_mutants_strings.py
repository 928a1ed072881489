"""String lengths and patterns of a schema against a plain reference (``len`` and ``re.search``
on the decoded string), through ``schema_dfa`` only, so the tests hold whatever the compile
internals become: long bounds (where the character count repeats with a period) and texts with
multi-byte characters and escapes (issue 31; docs/mutation.md, "text/jsonschema.py")."""

from __future__ import annotations

import json
import random
import re

import pytest

from ltlagent.text.jsonschema import schema_dfa

CHARS = ["a", "b", "0", "é", "😀", '"', "\\", "\n", "/"]


def texts(n: int, rng: random.Random) -> list[str]:
    return ["".join(rng.choice(CHARS) for _ in range(n)) for _ in range(3)] + ["a" * n, "😀" * n]


@pytest.mark.parametrize("lo,hi", [(0, 0), (0, 1), (1, 2), (0, 5), (3, 17), (16, 40), (0, 70), (39, 41)])
@pytest.mark.parametrize("pattern", [None, "^a", "b$", "[0-9]{2}"])
def test_string_bounds_and_patterns_match_the_reference(lo: int, hi: int, pattern: str | None) -> None:
    schema: dict[str, object] = {"type": "string", "minLength": lo, "maxLength": hi}
    if pattern is not None:
        schema["pattern"] = pattern
    dfa = schema_dfa(schema)
    rng = random.Random(lo * 1000 + hi)
    for n in sorted({0, 1, lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, (lo + hi) // 2}):
        if n < 0:
            continue
        for s in texts(n, rng) + (["a" + "0" * max(n - 2, 0) + "b"] if n >= 2 else []):
            # ECMA-262's '$' is the end of the input only (Python's also matches before a final \n)
            ref = None if pattern is None else pattern.replace("$", r"\Z")
            want = lo <= len(s) <= hi and (ref is None or re.search(ref, s) is not None)
            text = json.dumps(s, ensure_ascii=False).encode()
            assert dfa.matches(text) == want, (schema, s)
