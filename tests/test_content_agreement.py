"""The decoder and the validator read a state's content the same way (issue 21): a state with both
``:choices`` and ``:regex`` takes the choices the regex matches, in both; ``:regex`` classes are
the documented ASCII ones (docs/design.md §2.2) in both, never Python's Unicode ones."""

from __future__ import annotations

import random

import pytest

from ltlagent.checks.validate import Validator
from ltlagent.decode.monitor import Monitor, build_index
from ltlagent.errors import SpecError, UsageError
from ltlagent.logic.compiled import compile_spec
from ltlagent.spec.syntax import parse_spec

from . import tiny

BOTH = '''(define both
  (:states
    (Q (:text "Q:") (:regex "[0-9]+"))
    (A (:text "Answer:") (:choices "yes" "no" "42" "7") (:regex "[0-9]+")))
  (:behavior (next Q A)))'''


def written_by_the_monitor(spec: str, seeds: int = 12) -> list[str]:
    """Texts a random sampler writes under the monitor (on a tiny tokenizer), complete ones."""
    index = build_index(compile_spec(parse_spec(spec)), tiny.byte_level(), cache=False)
    out = []
    for seed in range(seeds):
        rnd = random.Random(seed)
        mon = Monitor(index, max_new_tokens=rnd.choice([10, 20]))
        while not mon.is_finished:
            mon.advance(int(rnd.choice(mon.allowed_token_ids())))
        assert mon.is_complete, mon.text
        out.append(mon.text)
    return out


def test_choices_with_a_regex_mean_the_same_to_decoder_and_validator() -> None:
    texts = written_by_the_monitor(BOTH)
    answers = {t.rsplit("Answer:", 1)[1].strip() for t in texts}
    assert answers <= {"42", "7"} and answers, answers  # the decoder: choices the regex matches
    v = Validator(compile_spec(parse_spec(BOTH)))
    for t in texts:  # the validator accepts what the decoder writes …
        assert v.validate_text(t).exit_code == 0, (t, v.validate_text(t).diagnostics)
    for bad in ("yes", "no", "8"):  # … and refuses what it cannot write
        r = v.validate_text(f"Q: 1\nAnswer: {bad}\n")
        assert r.exit_code == 1 and r.diagnostics[0].code in ("choices", "regex"), bad


def test_choices_none_of_which_the_regex_matches_are_a_spec_error() -> None:
    with pytest.raises(SpecError, match=r"no choice .* matches the :regex"):
        parse_spec(BOTH.replace('"42" "7"', ""))


def test_tool_choices_none_of_which_the_regex_matches_are_refused_by_both() -> None:
    spec = compile_spec(parse_spec(BOTH.replace('"yes" "no" "42" "7"', ":tools")))
    with pytest.raises(UsageError, match="no choice"):
        build_index(spec, tiny.byte_level(), tool_names=["Search"], cache=False)
    with pytest.raises(UsageError, match="no choice"):
        Validator(spec, tools=["Search"])
    v = Validator(spec, tools=["Search", "42"])  # the tool the regex matches is the only choice
    assert v.validate_text("Q: 1\nAnswer: 42\n").exit_code == 0
    assert v.validate_text("Q: 1\nAnswer: Search\n").exit_code == 1


@pytest.mark.parametrize(("regex", "content"), [
    (r"\d+", "١٢٣"),  # Arabic-Indic digits: Python's \d matches them
    (r"\w+", "é"),
    (r"[^\d]+", "٣"),  # a negated class with a category: clipped to ASCII too
    (r"\S+", "\u00a0x"),
])
def test_regex_classes_are_ascii_in_the_validator_as_in_the_decoder(regex: str, content: str) -> None:
    escaped = regex.replace("\\", "\\\\")
    spec = compile_spec(parse_spec(f'(define t (:states (Q (:text "Q:") (:regex "{escaped}"))'
                                   f' (A (:text "A:"))) (:behavior (next Q A)))'))
    r = Validator(spec).validate_text(f"Q: {content}\nA: x\n")
    assert r.exit_code == 1 and r.diagnostics[0].code == "regex"
    index = build_index(spec, tiny.byte_level(), cache=False)
    mon = Monitor(index)
    for t in tiny.byte_level().encode("Q:"):
        mon.advance(t)
    data, pos = f" {content}".encode(), 0
    while pos < len(data):  # write the content token by token, as long as the mask allows
        fits = [t for t in mon.allowed_token_ids().tolist()
                if index.vocab.token_bytes(t) and data[pos:].startswith(index.vocab.token_bytes(t))]
        if not fits:
            return  # masked: the decoder refuses it too
        best = max(fits, key=lambda t: len(index.vocab.token_bytes(t)))
        mon.advance(best)
        pos += len(index.vocab.token_bytes(best))
    pytest.fail(f"the monitor let {content!r} be written for /{regex}/")
