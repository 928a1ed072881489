"""The monitor as the one per-sequence cursor (issue 12): its record, ``fork``, ``follow`` and the
dead state, the named machine keys and the event codec."""

from __future__ import annotations

from functools import cache

import pytest
import torch

from ltlagent.decode.machine import ByteEvent, EventKind, Key, decode_event, encode_event
from ltlagent.decode.monitor import Monitor, StateText, TokenIndex, build_index
from ltlagent.decode.processor import LtlLogitsProcessor
from ltlagent.errors import UsageError
from ltlagent.logic.compiled import compile_spec

from . import tiny
from .test_monitor import _drive

torch.set_num_threads(1)


@cache
def react() -> tuple[object, TokenIndex]:
    tok = tiny.straddle()
    return tok, build_index(compile_spec("react"), tok, cache=False)


def test_event_codec_round_trips() -> None:
    events = [ByteEvent(EventKind.NONE), ByteEvent(EventKind.STOP), ByteEvent(EventKind.BOUNDARY, 0),
              ByteEvent(EventKind.BOUNDARY, 5)]
    events += [ByteEvent(EventKind.ENTER, k, f) for k in range(4) for f in (False, True)]
    codes = [encode_event(e) for e in events]
    assert len(set(codes)) == len(codes)
    assert [decode_event(c) for c in codes] == events
    # a positive code is exactly "a state is entered" (the vectorised walks test it on arrays)
    assert all((c > 0) == (e.kind == EventKind.ENTER) for c, e in zip(codes, events, strict=True))


def test_machine_keys_are_named() -> None:
    _tok, index = react()
    key = index.machine.keys[index.start]
    assert isinstance(key, Key) and key.cur == -1 and key.q == index.tables.initial
    assert key == tuple(key) and hash(key) == hash(tuple(key))  # hashed as a plain tuple


def test_fork_is_independent() -> None:
    tok, index = react()
    mon = Monitor(index)
    _drive(mon, tok, "Thought: look it up\nAction: Search\nAction Input: Par")
    child = mon.fork()
    assert child.steps == mon.steps and child.text == mon.text
    assert child.machine_state == mon.machine_state and child.segments == mon.segments
    _drive(child, tok, "is\nObservation:")
    assert child.waiting_for_env and not mon.waiting_for_env
    assert mon.trace == ["Thought", "Action", "Action-Input"]
    assert child.trace == ["Thought", "Action", "Action-Input", "Observation"]
    assert mon.text.endswith("Action Input: Par") and child.text.endswith("Paris\nObservation:")
    # the parent goes on by itself, unaffected by the child
    _drive(mon, tok, "ma\nObservation:")
    assert mon.steps[2] == StateText("Action-Input", "Parma")
    assert child.steps[2] == StateText("Action-Input", "Paris")
    child.feed_env(" 2 results\n")
    assert mon.waiting_for_env and not child.waiting_for_env


def test_fork_keeps_a_held_back_utf8_sequence_apart() -> None:
    tok, index = react()
    mon = Monitor(index)
    _drive(mon, tok, "Thought: ")
    v = index.vocab
    # feed the two bytes of "ü" one token at a time where the tokenizer allows it
    first = next((t for t in mon.allowed_token_ids().tolist() if v.token_bytes(t) == "ü".encode()[:1]), None)
    if first is None:
        pytest.skip("the tiny tokenizer has no single-byte token for the first byte of ü")
    mon.advance(first)
    child = mon.fork()
    second = next(t for t in child.allowed_token_ids().tolist() if v.token_bytes(t) == "ü".encode()[1:])
    ev = child.advance(second)
    assert [e.text for e in ev if e.kind == "text"] == ["ü"]
    assert mon.settled < len(mon.text_bytes) and child.settled == len(child.text_bytes)


def test_record_says_where_steps_lie_and_how_they_ended() -> None:
    tok, index = react()
    mon = Monitor(index)
    _drive(mon, tok, "Thought: look\nAction: Search\nAction Input: Paris\nObservation:")
    mon.feed_env(tok.encode(" 2 results\n", add_special_tokens=False))
    _drive(mon, tok, "Final Thought: done\nAnswer: 42")
    assert mon.verdict == "accepted"
    mon.advance(tok.eos_token_id)
    data = mon.text_bytes
    segs = mon.segments
    assert [index.tables.names[s.state] for s in segs] == mon.trace
    for s, st in zip(segs, mon.steps, strict=True):
        assert data[s.start:s.end].decode().strip() == st.text
        assert data[s.prompt:s.start].decode() == index.compiled.spec.state(st.state).text
    assert segs[3].by_env and not any(s.by_env for s in segs[:3])
    # every consumed token (environment token ids included) counts in exactly one segment
    assert sum(mon.segment_tokens(i) for i in range(len(segs))) == mon._ntok
    assert mon.segment_tokens(3) >= len(tok.encode(" 2 results\n", add_special_tokens=False))


def test_record_marks_a_text_ended_by_eos() -> None:
    tok, index = react()
    mon = Monitor(index)
    _drive(mon, tok, "Thought: hmm")
    ev = mon.advance(tok.eos_token_id)  # EOS ends the text; the model then picks a prompt string
    assert [e.kind for e in ev] == ["end"]
    assert mon.segments[-1].ended == "eos" and mon.verdict == "incomplete"


def test_follow_never_raises_and_dies_on_a_refused_token() -> None:
    tok, index = react()
    mon = Monitor(index, eos_ends_text=False)
    _drive(mon, tok, "Thought: go\n")
    action = tok.encode("Observation:", add_special_tokens=False)
    for t in action:  # Thought may not be followed by Observation
        mon.follow(t)
    assert mon.is_dead and mon.is_finished and mon.is_stopped and mon.verdict == "rejected"
    assert mon.current_mask().allowed_ids().tolist() == [tok.eos_token_id]
    with pytest.raises(UsageError):
        mon.advance(tok.eos_token_id)


def test_follow_masked_kills_a_token_the_mask_forbids_and_one_after_the_end() -> None:
    tok, index = react()
    mon = Monitor(index, eos_ends_text=False)
    _drive(mon, tok, "Thought: go\nAction: Search\nAction Input: x\nObservation:")
    assert mon.waiting_for_env
    plain = mon.fork()
    plain.follow(tok.eos_token_id)  # unmasked: padding after the pause, ignored
    assert not plain.is_dead and plain.waiting_for_env
    mon.follow(tok.eos_token_id, masked=True)  # masked: the request should have ended
    assert mon.is_dead


def test_processor_rows_hold_monitors_and_beams_fork() -> None:
    tok, index = react()
    proc = LtlLogitsProcessor(index)
    prompt = tok.encode("Question: hi\n", add_special_tokens=False)
    rows = torch.tensor([prompt, prompt])
    proc(rows, torch.zeros(2, index.vocab_size))
    a = tok.encode("Thought:", add_special_tokens=False)
    b = tok.encode("Final Thought:", add_special_tokens=False)
    ra = torch.tensor(prompt + a)
    rb = torch.tensor(prompt + b)
    ma, mb = proc.row_monitor(ra), proc.row_monitor(rb)
    assert ma is not mb and ma.trace == ["Thought"] and mb.trace == ["Final-Thought"]
    assert proc.row_monitor(ra) is ma  # memoised by the row's tokens
