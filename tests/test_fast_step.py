"""Fast steps (issue 19): a cursor without budget takes a (state, token) pair it has seen before in
one dict lookup. On random traces, cursors with fast steps and cursors that take every step the slow
way (``IndexMemo.fast_steps`` off) return the same events and keep the same hidden state at every
step: machine state, counts, text, record, UTF-8 decoder, masks."""

from __future__ import annotations

import random

import numpy as np
import pytest

pytest.importorskip("transformers")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltlagent.decode.monitor import Monitor, TokenIndex, build_index
from ltlagent.logic.compiled import compile_spec
from tests import tiny

SPECS = ("react", "react-tools", "reflexion", "chat-bot", "react-bounded")
_INDEXES: dict[tuple[str, str, bool], tuple[TokenIndex, TokenIndex]] = {}


def indexes(spec: str, tok_name: str, utf8: bool) -> tuple[TokenIndex, TokenIndex]:
    """(slow: no fast steps, fast), built once (the fast one keeps what earlier examples taught it)."""
    key = (spec, tok_name, utf8)
    hit = _INDEXES.get(key)
    if hit is None:
        compiled = compile_spec(spec)
        tok = tiny.TOKENIZERS[tok_name]()
        slow = build_index(compiled, tok, cache=False, tool_names=["Search", "Lookup"], utf8=utf8,
                           precompute=False)
        slow.memo.fast_steps = False
        fast = build_index(compiled, tok, cache=False, tool_names=["Search", "Lookup"], utf8=utf8,
                           precompute=False)
        hit = _INDEXES[key] = (slow, fast)
    return hit


def hidden(mon: Monitor) -> tuple[object, ...]:
    """Everything a cursor keeps (the cached fast-step row and mask aside)."""
    return (mon.index.machine.keys[mon.machine_state], mon._count, mon.tokens_generated, mon._ntok,
            mon.is_dead, mon.text_bytes, tuple(mon.segments), mon._held, mon.settled,
            mon._dec.getstate(), mon.is_finished, mon.is_stopped, mon.waiting_for_env)


def same(a: Monitor, b: Monitor) -> np.ndarray:
    assert hidden(a) == hidden(b)
    ma, mb = a.current_mask(), b.current_mask()
    ids = ma.allowed_ids()
    assert np.array_equal(ids, mb.allowed_ids())
    assert ma.forced == mb.forced
    assert a.forced_token() == b.forced_token()
    return ids


def run_pair(a: Monitor, b: Monitor, rnd: random.Random, mode: str, steps: int = 60) -> None:
    """Drive both cursors with the same random tokens (``mode``: ``advance``, ``follow`` or
    ``masked``, how the token is consumed)."""
    size = a.index.vocab_size
    for _ in range(steps):
        if a.waiting_for_env and mode == "advance":
            text = rnd.choice([" Paris\n", " 42", "ok é"])
            assert a.feed_env(text) == b.feed_env(text)
            same(a, b)
            continue
        if a.is_finished:
            break
        ids = same(a, b)
        if mode != "advance" and rnd.random() < 0.1:
            tok = rnd.randrange(size)  # any token: the processors' beams and vLLM may hold these
        elif ids.size == 0:
            break
        else:  # prefer text tokens: EOS would end most traces at once
            tok = int(rnd.choice(ids[:-1] if ids.size > 1 and rnd.random() < 0.9 else ids))
        if mode == "advance":
            assert a.advance(np.int64(tok)) == b.advance(tok)
        else:
            a.follow(tok, masked=mode == "masked")
            b.follow(tok, masked=mode == "masked")
        if rnd.random() < 0.05:  # a beam that branches
            a, b = a.fork(), b.fork()
    same(a, b)
    assert a.trace == b.trace and a.steps == b.steps and a.verdict == b.verdict


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.sampled_from(SPECS), tok_name=st.sampled_from(sorted(tiny.TOKENIZERS)),
       seed=st.integers(0, 2**16), ends_text=st.booleans(), utf8=st.booleans(),
       mode=st.sampled_from(("advance", "follow", "masked")), budget=st.sampled_from((None, None, 30)))
def test_fast_steps_equal_slow_steps(spec: str, tok_name: str, seed: int, ends_text: bool, utf8: bool,
                                     mode: str, budget: int | None) -> None:
    slow, fast = indexes(spec, tok_name, utf8)
    for _rep in range(2):  # the second pass meets the steps the first one taught the index
        rnd = random.Random(seed)
        a = Monitor(fast, eos_ends_text=ends_text, max_new_tokens=budget)
        b = Monitor(slow, eos_ends_text=ends_text, max_new_tokens=budget)
        run_pair(a, b, rnd, mode)
    assert not slow.memo.fast[ends_text]  # the switch holds: nothing learnt


def test_fast_steps_are_taken_and_budget_changes_are_seen() -> None:
    slow, fast = indexes("react", "byte-level", True)
    text = "Thought: I need to search the capital of France"
    toks = tiny.byte_level().encode(text)  # type: ignore[attr-defined]
    for _rep in range(2):
        a = Monitor(fast, eos_ends_text=False)
        b = Monitor(slow, eos_ends_text=False)
        for t in toks:
            if not a.current_mask().allows(t):
                break
            assert a.advance(t) == b.advance(t)
        assert hidden(a) == hidden(b)
    learnt = sum(len(r) for r in fast.memo.fast[False].values())
    assert learnt > 0
    # a budget set mid-trace switches fast steps off and steering on, as on a slow cursor
    a.set_remaining(3)
    b.set_remaining(3)
    assert np.array_equal(a.allowed_token_ids(), b.allowed_token_ids())
    a.max_new_tokens = None
    b.max_new_tokens = None
    assert np.array_equal(a.allowed_token_ids(), b.allowed_token_ids())
    a.eos_ends_text = True
    b.eos_ends_text = True
    assert np.array_equal(a.allowed_token_ids(), b.allowed_token_ids())
