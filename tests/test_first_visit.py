"""First visits (issue 19): masks walked through the vocabulary's byte trie and precomputed at build
time equal the earlier token-by-token walk computed on first visit, on random traces: same allowed
tokens, forced token and budget bound at every step, and the same hidden state (machine key)."""

from __future__ import annotations

import random
import sys

import numpy as np
import pytest

pytest.importorskip("transformers")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltlagent.decode.memo import ROOM, reserved_dict
from ltlagent.decode.monitor import START_MOVES, Monitor, TokenIndex, build_index
from ltlagent.decode.steering import Steering
from ltlagent.decode.trie import vocab_trie
from ltlagent.decode.vocab import vocab_from_bytes
from ltlagent.logic.compiled import compile_spec
from tests import tiny

SPECS = ("react", "react-tools", "reflexion", "chat-bot", "react-bounded")
_INDEXES: dict[tuple[str, str, bool], tuple[TokenIndex, TokenIndex]] = {}


def indexes(spec: str, tok_name: str, newline: bool) -> tuple[TokenIndex, TokenIndex]:
    """(old: token walk, masks on first visit; new: trie walk, every mask precomputed), built once."""
    key = (spec, tok_name, newline)
    hit = _INDEXES.get(key)
    if hit is None:
        compiled = compile_spec(spec)
        tok = tiny.TOKENIZERS[tok_name]()
        tools = ["Search", "Lookup"]
        old = build_index(compiled, tok, cache=False, tool_names=tools, newline=newline,
                          precompute=False).with_walker("tokens")
        new = build_index(compiled, tok, cache=False, tool_names=tools, newline=newline, precompute=True)
        hit = _INDEXES[key] = (old, new)
    return hit


def same_step(a: Monitor, b: Monitor) -> np.ndarray:
    ma, mb = a.current_mask(), b.current_mask()
    ids = ma.allowed_ids()
    assert np.array_equal(ids, mb.allowed_ids())
    assert (ma.forced, ma.max_need, ma.quiet) == (mb.forced, mb.max_need, mb.quiet)
    assert a.index.machine.keys[a.machine_state] == b.index.machine.keys[b.machine_state]
    return ids


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.sampled_from(SPECS), tok_name=st.sampled_from(sorted(tiny.TOKENIZERS)),
       seed=st.integers(0, 2**16), ends_text=st.booleans(), newline=st.booleans(),
       budget=st.sampled_from((None, 40)))
def test_trie_and_precomputed_masks_equal_the_token_walk(spec: str, tok_name: str, seed: int,
                                                         ends_text: bool, newline: bool,
                                                         budget: int | None) -> None:
    old, new = indexes(spec, tok_name, newline)
    rnd = random.Random(seed)
    a = Monitor(old, eos_ends_text=ends_text, max_new_tokens=budget)
    b = Monitor(new, eos_ends_text=ends_text, max_new_tokens=budget)
    for _ in range(80):
        if a.is_finished:
            assert b.is_finished
            break
        if a.waiting_for_env:
            text = rnd.choice([" Paris\n", " 42", "ok"])
            a.feed_env(text)
            b.feed_env(text)
            continue
        ids = same_step(a, b)
        if ids.size == 0:
            break
        # prefer text tokens: EOS would end most traces at once
        tok = int(rnd.choice(ids[:-1] if ids.size > 1 and rnd.random() < 0.9 else ids))
        assert [(e.kind, e.state, e.text) for e in a.advance(tok)] == \
            [(e.kind, e.state, e.text) for e in b.advance(tok)]
    assert a.trace == b.trace


def test_precompute_covers_a_whole_run() -> None:
    """With every reachable state precomputed, writing a transcript computes no mask."""
    _old, new = indexes("react-tools", "byte-level", False)
    n = len(new._memo.masks)
    mon = Monitor(new, eos_ends_text=False)
    rnd = random.Random(0)
    for _ in range(60):
        if mon.is_stopped:
            break
        ids = mon.allowed_token_ids()
        mon.advance(int(rnd.choice(ids)))
    assert len(new._memo.masks) == n


def test_precompute_gives_up_over_the_limit() -> None:
    compiled = compile_spec("react")
    index = build_index(compiled, tiny.byte_level(), cache=False, precompute=False)
    assert index.precompute(limit=5) == 0
    assert index._memo.masks == {}
    assert index.precompute() > 5


def test_trie_walk_equals_the_token_walk_on_every_state() -> None:
    """Steering.walk_vocab against Steering.walk over all text tokens, state by state."""
    index = build_index(compile_spec("react-tools"), tiny.straddle(), cache=False, precompute=False)
    m = index.machine
    steer: Steering = index.steering
    sids = m.reachable((False, True), 100_000)
    assert sids is not None
    text = np.nonzero(index.vocab.is_text & (index.vocab.lengths > 0))[0]
    for sid in sids:
        if m.keys[sid].mode >= 2:  # ENV, DONE: no bytes
            continue
        got = steer.walk_vocab(sid)
        want = steer.walk(sid, text)
        ga, wa = np.argsort(got[0]), np.argsort(want[0])
        for g, w in zip(got, want):
            assert np.array_equal(g[ga], w[wa]), m.describe(sid)


def test_trie_holds_every_token_once() -> None:
    toks = [b"", b"a", b"ab", b"abc", b"b", b"ba", b"abd", None, b"\xff\x00"]
    vocab = vocab_from_bytes(toks, eos_ids=[7])
    trie = vocab_trie(vocab)
    found: dict[int, bytes] = {}
    paths: list[list[bytes]] = [[bytes([int(b)]) for b in trie.levels[0].byte]]
    for d, lv in enumerate(trie.levels):
        if d:
            paths.append([paths[d - 1][int(p)] + bytes([int(b)]) for p, b in zip(lv.parent, lv.byte)])
        for i in range(lv.parent.size):
            for t in lv.tokens[lv.tok_lo[i]:lv.tok_hi[i]].tolist():
                found[t] = paths[d][i]
            if d + 1 < len(trie.levels):
                below = trie.levels[d + 1].parent[lv.child_lo[i]:lv.child_hi[i]]
                assert (below == i).all()
    assert found == {i: t for i, t in enumerate(toks) if t}


def test_the_start_steps_are_taken_at_build() -> None:
    """A precomputed index has taken every cursor's first step at build time: each token the start
    allows is a fast step there, with the same events and state as the slow path gives."""
    old, new = indexes("react-tools", sorted(tiny.TOKENIZERS)[0], False)
    start_row = new.memo.fast[False][new.start]
    allowed = new.mask(new.start).allowed_ids().tolist()
    assert allowed and set(start_row) == set(allowed[:START_MOVES])
    for tok in allowed[:START_MOVES]:
        a, b = Monitor(old, eos_ends_text=False), Monitor(new, eos_ends_text=False)
        assert a.advance(tok) == b.advance(tok)
        same_step(a, b)


def test_reserved_dicts_do_not_resize_within_their_room() -> None:
    """The per-step memos are made with room for ROOM insertions (no table allocated during a
    first pass); the room is real on this interpreter, and the dicts behave as dicts."""
    for room in (1, 10, ROOM):
        d = reserved_dict(room)
        assert d == {} and len(d) == 0
        size = sys.getsizeof(d)
        for i in range(room):
            d[(i, -i)] = i
        assert sys.getsizeof(d) == size and len(d) == room and d[(room - 1, 1 - room)] == room - 1
    memo = build_index(compile_spec("react"), tiny.TOKENIZERS[sorted(tiny.TOKENIZERS)[0]](), cache=False,
                       precompute=False).memo
    for d in (memo.steps, memo.moves, memo.token_bytes, memo.fast[False], memo.fast[True]):
        assert sys.getsizeof(d) >= sys.getsizeof(reserved_dict(ROOM)) or len(d) > ROOM
