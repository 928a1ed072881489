"""UTF-8 (issue 19): by default the monitor forbids tokens that leave the text invalid UTF-8, as
grammar engines over characters do; ``utf8=False`` allows any bytes."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

pytest.importorskip("transformers")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltlagent.decode.machine import FREE, UTF8, UTF8_BAD
from ltlagent.decode.monitor import Monitor, TokenIndex, build_index
from ltlagent.logic.compiled import compile_spec
from tests import tiny

_INDEXES: dict[tuple[str, str, bool], TokenIndex] = {}


def index_of(spec: str, tok_name: str, utf8: bool) -> TokenIndex:
    key = (spec, tok_name, utf8)
    if key not in _INDEXES:
        _INDEXES[key] = build_index(compile_spec(spec), tiny.TOKENIZERS[tok_name](), cache=False,
                                    tool_names=["Search", "Lookup"], utf8=utf8)
    return _INDEXES[key]


_CONT = (0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF)  # continuation bytes at the edges of every range


def valid_prefix(data: bytes) -> bool:
    """Some continuation makes ``data`` valid UTF-8 (Python's incremental decoder alone is more
    lenient: it holds ``ED A0`` back instead of rejecting the surrogate)."""
    for k in range(4):
        for tail in itertools.product(_CONT, repeat=k):
            try:
                (data + bytes(tail)).decode("utf-8")
                return True
            except UnicodeDecodeError:
                pass
    return False


def test_utf8_table_is_pythons_decoder() -> None:
    """The machine's UTF-8 DFA accepts exactly the byte strings Python's decoder does (all strings
    of up to 3 bytes over the bytes where the classes change, and every character's encoding)."""
    edges = sorted({0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0,
                    0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF})

    def run(data: bytes) -> int:
        u = 0
        for b in data:
            u = UTF8[u][b]
        return u

    for a in edges:
        for b in edges:
            for c in edges:
                for data in (bytes([a]), bytes([a, b]), bytes([a, b, c])):
                    assert (run(data) != UTF8_BAD) == valid_prefix(data), data
    for cp in [*range(0, 0x800, 7), 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF]:
        assert run(chr(cp).encode()) == 0


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.sampled_from(("react", "react-tools", "chat-bot")),
       tok_name=st.sampled_from(sorted(tiny.TOKENIZERS)), seed=st.integers(0, 2**16))
def test_every_text_stays_valid_utf8(spec: str, tok_name: str, seed: int) -> None:
    """Random tokens under the default monitor (biased to non-ASCII ones): the text is a valid UTF-8
    prefix after every token, and complete UTF-8 whenever a state is entered or the trace ends."""
    index = index_of(spec, tok_name, True)
    rnd = random.Random(seed)
    mon = Monitor(index, eos_ends_text=rnd.random() < 0.5)
    v = index.vocab
    for _ in range(60):
        if mon.is_stopped:
            break
        ids = mon.allowed_token_ids()
        wide = [t for t in ids.tolist() if v.token_bytes(t) and not v.token_bytes(t).isascii()]
        tok = int(rnd.choice(wide if wide and rnd.random() < 0.6 else ids.tolist()))
        events = mon.advance(tok)
        assert valid_prefix(mon.text_bytes), mon.text_bytes
        if any(e.kind in ("enter", "finished") for e in events):
            mon.text_bytes.decode("utf-8")  # nothing left unfinished


def test_the_switch_allows_any_bytes() -> None:
    """After ``Thought: café`` the default forbids every lone continuation byte; ``utf8=False``
    allows them, and otherwise the same tokens."""
    allowed = {}
    for utf8 in (True, False):
        index = index_of("react-tools", "byte-level", utf8)
        mon = Monitor(index, eos_ends_text=False)
        data = "Thought: café".encode()
        while data:
            ok = set(mon.allowed_token_ids().tolist())
            tok = next(t for t in index.buckets.longest_prefix_of(data) if t in ok)
            mon.advance(tok)
            data = data[len(index.vocab.token_bytes(tok)):]
        assert index.machine.keys[mon.machine_state].mode == FREE
        allowed[utf8] = (mon.allowed_token_ids(), mon.text_bytes, index)
    on, text, index = allowed[True]
    off = allowed[False][0]
    tb = index.vocab.token_bytes
    lone = [t for t in off.tolist() if tb(t) and 0x80 <= tb(t)[0] < 0xC0]
    assert lone and not set(lone) & set(on.tolist())
    keep = [t for t in off.tolist() if not tb(t) or valid_prefix(text + tb(t))]
    assert np.array_equal(on, np.asarray(keep))


def test_unfinished_character_cannot_end_the_text() -> None:
    """Mid-character, EOS (which would end the text) and prompt strings are forbidden."""
    index = index_of("react", "byte-level", True)
    mon = Monitor(index, eos_ends_text=True)
    for tok in index.buckets.longest_prefix_of(b"Thought:")[:1]:
        mon.advance(tok)
    while mon.state != "Thought":
        mon.advance(int(mon.allowed_token_ids()[0]))
    single = index.vocab.single_byte_tokens()
    mon.advance(single[0xC3])  # the first byte of "é"
    ids = set(mon.allowed_token_ids().tolist())
    assert index.eos_token_ids[0] not in ids
    assert all(0x80 <= index.vocab.token_bytes(t)[0] < 0xC0 for t in ids)
    mon.advance(single[0xA9])
    assert index.eos_token_ids[0] in set(mon.allowed_token_ids().tolist())
