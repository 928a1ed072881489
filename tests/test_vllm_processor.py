"""The vLLM processor's core without vLLM: batch updates from a stand-in of vLLM's v1 interface
(removed, added, moved: swap and one-way), per-row masks equal to a lone Monitor's, untouched rows,
different specs in one batch, and continuing a trace after environment text."""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from ltlagent.decode.monitor import Monitor
from ltlagent.decode.vllm_processor import MonitorBatch, RequestOptions
from ltlagent.errors import UsageError

from . import tiny

torch.set_num_threads(1)


class Move(enum.Enum):
    """Stand-in of ``vllm.v1.sample.logits_processor.MoveDirectionality``."""

    UNIDIRECTIONAL = enum.auto()
    SWAP = enum.auto()


@dataclass
class Params:
    """Stand-in of ``SamplingParams`` (the fields the processor reads)."""

    extra_args: dict[str, Any] | None = None
    max_tokens: int | None = 40


@dataclass
class Update:
    """Stand-in of ``BatchUpdate``."""

    batch_size: int
    removed: list[int] = field(default_factory=list)
    added: list[tuple[int, Params, list[int] | None, list[int]]] = field(default_factory=list)
    moved: list[tuple[int, int, Move]] = field(default_factory=list)


def _opts(spec: str = "react-tools", **kw: Any) -> dict[str, Any]:
    return {"ltlagent": {"spec": spec, "tools": ["Search", "Lookup"], **kw}}


def _sample_step(batch: MonitorBatch, outputs: dict[int, list[int]], n: int, rnd: random.Random,
                 width: int) -> torch.Tensor:
    """One engine step: mask random logits, sample each row from its allowed tokens, append."""
    logits = torch.randn(n, width)
    batch.apply(logits)
    for i in range(n):
        ok = torch.nonzero(torch.isfinite(logits[i])).flatten().tolist()
        if i in outputs and ok:
            outputs[i].append(rnd.choice(ok))
    return logits


def test_masks_follow_rows_through_swaps_moves_and_removals() -> None:
    """A random schedule of batch updates; every row's mask equals that of a Monitor fed the row's own
    tokens, wherever the row sits in the batch."""
    tok = tiny.straddle()
    width = len(tok) + 5
    batch = MonitorBatch(tok, cache=False)
    rnd = random.Random(3)
    outputs: dict[int, list[int]] = {}
    params: dict[int, Params] = {}
    specs = ["react-tools", "chain-of-thought", None]
    for k in range(4):
        outputs[k] = []
        params[k] = Params(_opts(specs[k % 3]) if specs[k % 3] else None)
    batch.update(Update(4, added=[(k, params[k], [1, 2], outputs[k]) for k in range(4)]))
    n = 4
    for step in range(30):
        logits = _sample_step(batch, outputs, n, rnd, width)
        for i in range(n):
            p = params[i]
            if p.extra_args is None:
                assert torch.isfinite(logits[i]).all(), "an unconstrained row was masked"
                continue
            ref = Monitor(batch.index_for(RequestOptions.parse(p.extra_args)), max_new_tokens=40,
                          eos_ends_text=False)
            for t in outputs[i][:-1]:
                ref.advance(t)
            want = torch.zeros(width)
            if ref.is_finished or ref.waiting_for_env:
                want.fill_(float("-inf"))
                want[list(ref.index.eos_token_ids)] = 0
            else:
                ref.mask_into(want)
            assert torch.equal(torch.isfinite(logits[i]), torch.isfinite(want)), (step, i)
        # reshuffle: a swap, a one-way move into a removed slot, a new request
        if step % 5 == 1:
            a, b = rnd.sample(range(n), 2)
            batch.update(Update(n, moved=[(a, b, Move.SWAP)]))
            outputs[a], outputs[b] = outputs[b], outputs[a]
            params[a], params[b] = params[b], params[a]
        elif step % 5 == 3 and n > 2:
            gone = rnd.randrange(n - 1)
            batch.update(Update(n - 1, removed=[gone], moved=[(n - 1, gone, Move.UNIDIRECTIONAL)]))
            outputs[gone], params[gone] = outputs.pop(n - 1), params.pop(n - 1)
            n -= 1
        elif step % 5 == 4:
            outputs[n], params[n] = [], Params(_opts(rnd.choice(["react", "react-tools"])))
            batch.update(Update(n + 1, added=[(n, params[n], [5], outputs[n])]))
            n += 1
        assert set(batch.rows) == {i for i in range(n) if params[i].extra_args is not None}


def test_added_request_replaces_a_row_and_unconstrained_rows_are_untouched() -> None:
    tok = tiny.straddle()
    batch = MonitorBatch(tok, cache=False)
    batch.update(Update(2, added=[(0, Params(_opts()), [1], []), (1, Params(None), [1], [])]))
    logits = torch.randn(2, len(tok))
    before = logits.clone()
    batch.apply(logits)
    assert torch.equal(logits[1], before[1])
    assert not torch.isfinite(logits[0]).all()
    # an unconstrained request added over a constrained one frees the row
    batch.update(Update(2, added=[(0, Params({"other": 1}), [1], [])]))
    assert batch.rows == {}
    logits = torch.randn(2, len(tok))
    before = logits.clone()
    assert torch.equal(batch.apply(logits), before)


def test_continuing_after_environment_text_replays_the_prefix() -> None:
    """A request whose prompt holds a trace paused at Observation plus the environment's text gets
    the mask a Monitor has after ``feed_env``; env ranges that do not fit make the row EOS-only."""
    tok = tiny.straddle()
    batch = MonitorBatch(tok, cache=False)
    index = batch.index_for(RequestOptions.parse(_opts()))  # type: ignore[arg-type]
    from .test_processor import _tokens_for

    gen = _tokens_for(index, "Thought: x\nAction: Search\nAction Input: y\nObservation:")
    env = tok.encode(" Paris\n", add_special_tokens=False)
    prompt = tok.encode("Q:\n", add_special_tokens=False)
    ids = prompt + gen + env
    ranges = [[len(prompt) + len(gen), len(ids)]]
    batch.update(Update(2, added=[(0, Params(_opts(prompt_tokens=len(prompt), env=ranges)), ids, []),
                                  (1, Params(_opts(prompt_tokens=len(prompt), env=[[0, 1]])), ids, [])]))
    ref = Monitor(index, eos_ends_text=False)
    for t in gen:
        ref.advance(t)
    assert ref.waiting_for_env
    ref.feed_env(env)
    ref.set_remaining(40)  # the request's max_tokens
    assert batch.mask_of(0).allowed_ids().tolist() == ref.allowed_token_ids().tolist()
    assert batch.mask_of(1).allowed_ids().tolist() == sorted(index.eos_token_ids)


def test_options_are_checked() -> None:
    assert RequestOptions.parse(None) is None and RequestOptions.parse({"x": 1}) is None
    assert RequestOptions.parse({"ltlagent": "react"}) == RequestOptions("react")
    as_json = RequestOptions.parse({"ltlagent": '{"spec": "react", "tools": ["Search"], "env": [[3, 5]]}'})
    assert as_json == RequestOptions("react", ("Search",), env=((3, 5),))
    for bad in ({"spec": 3}, {"spec": "react", "budget": -1}, {"spec": "react", "tools": "Search"},
                {"spec": "react", "env": [[5, 2]]}, {"spec": "react", "colour": 1}, ["react"], "{bad json"):
        with pytest.raises(UsageError):
            RequestOptions.parse({"ltlagent": bad})


def test_spec_text_and_budget_steering_reach_a_complete_trace() -> None:
    """Spec text in the request; with ``max_tokens`` the finite spec ends complete (EOS or budget),
    whatever the logits."""
    tok = tiny.byte_level()
    text = tiny_spec_text()
    batch = MonitorBatch(tok, cache=False)
    out: list[int] = []
    batch.update(Update(1, added=[(0, Params({"ltlagent": {"spec": text}}, max_tokens=30), [1], out)]))
    rnd = random.Random(0)
    eos = set(tok.all_special_ids)
    for _ in range(30):
        _sample_step(batch, {0: out}, 1, rnd, len(tok))
        if out[-1] in eos:
            break
    batch.mask_of(0)  # catch up with the last token
    mon = batch.rows[0].monitor
    assert mon.is_finished and mon.is_complete, mon.text


def tiny_spec_text() -> str:
    from ltlagent.spec.syntax import load_spec

    return load_spec("chain-of-thought").text


def test_a_spec_that_cannot_be_built_ends_the_request_not_the_engine() -> None:
    """validate_params rejects unknown specs up front; one that slips through (here: added directly)
    gets an EOS-only row instead of an exception inside the engine."""
    tok = tiny.straddle()
    with pytest.raises(UsageError):
        RequestOptions("no-such-spec").check_spec()
    RequestOptions("react").check_spec()
    batch = MonitorBatch(tok, cache=False)
    batch.update(Update(1, added=[(0, Params({"ltlagent": "no-such-spec"}), [1], [])]))
    logits = batch.apply(torch.zeros(1, len(tok) + 3))
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [tok.eos_token_id]
