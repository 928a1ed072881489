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
                 width: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """One engine step: mask random logits, sample each row from its allowed tokens, append.
    float32 logits are masked through numpy, bfloat16 ones through torch."""
    logits = torch.randn(n, width).to(dtype)
    batch.apply(logits)
    for i in range(n):
        ok = torch.nonzero(torch.isfinite(logits[i])).flatten().tolist()
        if i in outputs and ok:
            outputs[i].append(rnd.choice(ok))
    return logits


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_masks_follow_rows_through_swaps_moves_and_removals(dtype: torch.dtype) -> None:
    """A random schedule of batch updates; every row's mask equals that of a Monitor fed the row's own
    tokens, wherever the row sits in the batch (on both ways of masking CPU logits)."""
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
        logits = _sample_step(batch, outputs, n, rnd, width, dtype)
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


# --- chat turns (TurnOptions) and Model Runner V2 ----------------------------------------------

def _booking() -> tuple[dict[str, Any], Any]:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "booking"))
    from domain import TOOLS

    return {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}, TOOLS


def _turn_extra(tok: Any, rule: Any = None) -> dict[str, Any]:
    from ltlagent.decode.chat import TurnRule
    from ltlagent.decode.vllm_processor import TurnOptions

    schemas, _ = _booking()
    rule = rule or TurnRule(True, frozenset({"find_user"}), frozenset({"cancel_booking"}),
                            ((("find_user", (("query", "[a-z]+"),)),), ()))
    return {"ltlagent": TurnOptions.encode(rule, schemas, "hermes", None, [tok.eos_token_id])}


def test_turn_options_round_trip_and_are_checked() -> None:
    from ltlagent.decode.chat import TurnRule
    from ltlagent.decode.vllm_processor import TurnOptions

    tok = tiny.byte_level()
    rule = TurnRule(False, frozenset({"book"}), frozenset(), ((("book", (("room", "Oak"),)),), ()))
    extra = _turn_extra(tok, rule)
    got = TurnOptions.parse(extra)
    assert got is not None and got.rule == rule and got.eos == (tok.eos_token_id,)
    import json

    assert TurnOptions.parse({"ltlagent": json.dumps(extra["ltlagent"])}) == got  # vllm_xargs: JSON
    assert TurnOptions.parse({"ltlagent": "react"}) is None and TurnOptions.parse(None) is None
    schemas, _ = _booking()
    for bad in ({"schemas": schemas, "first": ["nope"]}, {"schemas": schemas, "format": "xml"},
                {"schemas": [1]}, {"schemas": schemas, "eos": [-1]}, {"schemas": schemas, "x": 1}):
        with pytest.raises(UsageError):
            TurnOptions.parse({"ltlagent": {"turn": bad}})


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_turn_row_masks_as_the_turn_cursor_with_its_budget(dtype: torch.dtype) -> None:
    """A chat-turn request: each step's allowed tokens are the TurnCursor's with the tokens left
    (max_tokens - written) as budget, the transformers loop's; the turn ends as a valid turn."""
    from ltlagent.decode.chat import TokenBytes, TurnCursor
    from ltlagent.decode.vllm_processor import TurnOptions
    from ltlagent.decode.vocab import vocab_from_tokenizer

    tok = tiny.byte_level()
    extra = _turn_extra(tok)
    opts = TurnOptions.parse(extra)
    assert opts is not None
    batch = MonitorBatch(tok, cache=False)
    out: list[int] = []
    batch.update(Update(1, added=[(0, Params(extra, max_tokens=70), [1], out)]))
    ref = TurnCursor(opts.build(TokenBytes.of(vocab_from_tokenizer(tok, [tok.eos_token_id]))))
    rnd = random.Random(1)
    width = len(tok) + 3
    for n in range(70):
        logits = _sample_step(batch, {0: out}, 1, rnd, width, dtype)
        want = ref.allowed(budget=70 - n)
        got = torch.isfinite(logits[0]).numpy()
        assert got[:len(want)].tolist() == want.tolist() and not got[len(want):].any(), n
        ref.advance(out[-1])
        if ref.ended:
            break
    assert ref.ended and ref.can_end, bytes(ref.data)


class _Buf:
    """Stand-in of Model Runner V2's per-slot buffers (``.gpu`` tensor, ``.np`` array)."""

    def __init__(self, t: torch.Tensor) -> None:
        self.gpu = t
        self.np = t.numpy()


def test_the_v2_adapter_keys_rows_by_slot_and_reads_tokens_from_the_buffer() -> None:
    """Model Runner V2's interface (stand-ins): requests in recycled slots, rows reordered every
    step; each row's mask equals the V1 batch's for the same request and tokens."""
    from ltlagent.decode.vllm_processor import LtlLogitsProcessorV2

    tok = tiny.straddle()
    width = len(tok) + 5
    slots, ctx_len = 6, 400
    all_ids = _Buf(torch.zeros(slots, ctx_len, dtype=torch.int32))
    prompt_len = _Buf(torch.zeros(slots, dtype=torch.int32))
    total_len = _Buf(torch.zeros(slots, dtype=torch.int32))
    v2 = LtlLogitsProcessorV2.__new__(LtlLogitsProcessorV2)
    v2.batch = MonitorBatch(tok, cache=False)
    v2.states = type("S", (), {"all_token_ids": all_ids, "prompt_len": prompt_len,
                               "total_len": total_len})()
    v2.new, v2.outputs = {}, {}
    ref = MonitorBatch(tok, cache=False)
    rnd = random.Random(5)
    live: dict[int, Params] = {}
    outs: dict[int, list[int]] = {}
    for step in range(40):
        if step % 8 == 0:  # a request arrives in a (recycled) slot
            slot = rnd.randrange(slots)
            p = Params(_opts(rnd.choice(["react-tools", "chain-of-thought"])) if step % 16 else None)
            prompt = [1, 2, 3][: 1 + step % 3]
            all_ids.gpu[slot, :len(prompt)] = torch.tensor(prompt)
            prompt_len.np[slot] = len(prompt)
            total_len.gpu[slot] = len(prompt)
            assert v2.add_request(slot, p) == (p.extra_args is not None)
            live[slot], outs[slot] = p, []
            ref.update(Update(slots, added=[(slot, p, prompt, outs[slot])]))
        order = list(live)
        rnd.shuffle(order)
        logits = torch.randn(len(order), width)
        want = logits.clone()
        ctx = type("C", (), {"expanded_idx_mapping": torch.tensor(order)})()
        v2.apply(logits, ctx)
        ref.apply(want, order)
        assert torch.equal(torch.isfinite(logits), torch.isfinite(want)), step
        for r, slot in enumerate(order):  # sample, and commit as the runner does
            ok = torch.nonzero(torch.isfinite(logits[r])).flatten().tolist()
            t = rnd.choice(ok)
            outs[slot].append(t)
            all_ids.gpu[slot, int(total_len.gpu[slot])] = t
            total_len.gpu[slot] += 1
