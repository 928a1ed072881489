"""The monitor under plain ``model.generate``: batches with left padding, greedy, sampling, beam
search, reuse across calls, continuing after an ``:env-input`` state, logits wider than the vocabulary."""

from __future__ import annotations

import pytest
import torch

from ltlagent.decode.machine import ENV
from ltlagent.decode.monitor import build_index
from ltlagent.decode.processor import LtlLogitsProcessor, logits_processor
from ltlagent.logic.compiled import compile_spec

from . import tiny

torch.set_num_threads(1)

PROMPTS = ["Question: what is the capital of France?\n", "Q: x\n", "Hello there, how are you today?\n"]


def _setup(tok_name: str, spec: str, max_new_tokens: int | None) -> tuple[object, object, LtlLogitsProcessor]:
    tok = tiny.TOKENIZERS[tok_name]()
    tok.padding_side = "left"
    model = tiny.tiny_model("llama" if tok_name == "sentencepiece" else "gpt2", len(tok))
    proc = logits_processor(compile_spec(spec), tok, tool_names=["Search", "Lookup"],
                            max_new_tokens=max_new_tokens, cache=False)
    return tok, model, proc


def _traces(tok: object, proc: LtlLogitsProcessor, out: torch.Tensor,
            start: int) -> list[tuple[list[str], str]]:
    """Each row's trace (lexed from the token bytes) and its verdict."""
    c = proc.index.compiled
    res = []
    for row in out:
        gen = row[start:].tolist()
        assert all(t < len(tok) for t in gen), "an id beyond the vocabulary was generated"
        data = b"".join(proc.index.vocab.token_bytes(t) for t in gen)
        trace = [c.spec.states[m.index].name for m in c.lexer.finditer(data)]
        res.append((trace, c.automaton.run(trace).status))
    return res


@pytest.mark.parametrize("mode", ["greedy", "sample", "beam"])
@pytest.mark.parametrize("tok_name", ["straddle", "sentencepiece"])
def test_batch_left_padding(mode: str, tok_name: str) -> None:
    tok, model, proc = _setup(tok_name, "react-tools", 50)
    enc = tok(PROMPTS, return_tensors="pt", padding=True)
    kw = {"greedy": {"do_sample": False}, "sample": {"do_sample": True, "temperature": 1.0, "top_k": 0},
          "beam": {"num_beams": 3, "do_sample": False}}[mode]
    torch.manual_seed(1)
    out = model.generate(**enc, max_new_tokens=50, logits_processor=[proc], stopping_criteria=[proc.stopping],
                         pad_token_id=tok.pad_token_id, **kw)
    for trace, status in _traces(tok, proc, out, enc["input_ids"].shape[1]):
        # complete, or a correct prefix stopped to wait for the environment (Observation)
        ok = status == "accepted" or (status == "incomplete" and trace[-1] == "Observation")
        assert ok, (trace, status)


def test_finite_spec_without_environment_always_completes() -> None:
    tok, model, proc = _setup("byte-level", "chain-of-thought", 40)
    enc = tok(PROMPTS * 2, return_tensors="pt", padding=True)
    torch.manual_seed(0)
    out = model.generate(**enc, max_new_tokens=40, logits_processor=[proc], stopping_criteria=[proc.stopping],
                         do_sample=True, temperature=1.0, top_k=0, pad_token_id=tok.pad_token_id)
    assert [s for _, s in _traces(tok, proc, out, enc["input_ids"].shape[1])] == ["accepted"] * 6


def _tokens_for(index: object, text: str) -> list[int]:
    """Token ids that write ``text`` under the monitor (longest allowed token at each step)."""
    from ltlagent.decode.monitor import Monitor

    mon = Monitor(index, eos_ends_text=False)  # type: ignore[arg-type]
    v = mon.index.vocab
    data, out = text.encode(), []
    while data:
        fits = [t for t in mon.allowed_token_ids().tolist()
                if v.token_bytes(t) and data.startswith(v.token_bytes(t))]
        t = max(fits, key=lambda t: len(v.token_bytes(t)))
        mon.advance(t)
        out.append(t)
        data = data[len(v.token_bytes(t)):]
    return out


def test_rows_are_derived_from_their_tokens_not_their_position() -> None:
    """Rows reordered between steps (as beam search does) get the masks of their own tokens."""
    tok, model, _ = _setup("straddle", "react", None)
    index = build_index(compile_spec("react"), tok, cache=False)
    gens = [_tokens_for(index, g) for g in ("Thought: a b c d e f g h", "Final Thought: b\nAns",
                                            "Thought: c\nAction: d\nAction Input: e")]
    n = min(len(g) for g in gens)
    prompt = tok.encode("Go:")
    x = torch.tensor([prompt + g[:n] for g in gens])
    start = len(prompt)
    vocab_width = model.config.vocab_size
    perm = [2, 0, 1]

    def run(order_last: list[int]) -> torch.Tensor:
        proc = LtlLogitsProcessor(index)
        for k in range(start, x.shape[1]):
            proc(x[:, :k], torch.zeros(3, vocab_width))
        return proc(x[order_last], torch.zeros(3, vocab_width))

    straight, shuffled = run([0, 1, 2]), run(perm)
    assert torch.equal(shuffled, straight[perm])
    assert not torch.equal(straight[0], straight[1])  # the rows really are in different states
    assert torch.isinf(straight[:, len(tok):]).all()  # padded embedding rows are never allowed


@pytest.mark.parametrize("stopping", [True, False])
def test_reuse_across_calls_and_continue_after_environment(stopping: bool) -> None:
    """Without the stopping criteria the one-row path steps the cursor and must remember the row
    that paused at Observation, or the continuation would start a new trace."""
    tok, model, proc = _setup("straddle", "react-tools", None)
    ids = tok.encode("Question: what?\n", add_special_tokens=False)
    for seed in range(20):  # find a run that stops at Observation
        torch.manual_seed(seed)
        out = model.generate(torch.tensor([ids]), max_new_tokens=80, logits_processor=[proc],
                             stopping_criteria=[proc.stopping] if stopping else None, do_sample=True,
                             temperature=1.0, top_k=0, pad_token_id=tok.pad_token_id)
        (trace, status), = _traces(tok, proc, out, len(ids))
        assert status != "rejected"
        if trace[-1:] == ["Observation"]:
            break
    else:
        pytest.fail("no run stopped at Observation")
    assert proc.index.machine.mode(proc.row_state(out[0])) == ENV
    gen = out[0, len(ids):].tolist()
    while gen and gen[-1] == tok.pad_token_id:  # the stopped row's padding
        gen.pop()
    env = tok.encode(" Paris\n", add_special_tokens=False)
    cont = ids + gen + env
    torch.manual_seed(7)
    out2 = model.generate(torch.tensor([cont]), max_new_tokens=40, logits_processor=[proc],
                          stopping_criteria=[proc.stopping], do_sample=True, temperature=1.0, top_k=0,
                          pad_token_id=tok.pad_token_id)
    (trace2, status2), = _traces(tok, proc, out2, len(ids))
    assert trace2[: len(trace)] == trace and len(trace2) > len(trace)
    assert proc.row_monitor(out2[0]).trace[: len(trace)] == trace  # the cursor went on, not a new one
    assert status2 != "rejected", trace2
    # a fresh prompt with the same processor starts a new trace
    out3 = model.generate(torch.tensor([tok.encode("Another one:\n")]), max_new_tokens=40,
                          logits_processor=[proc], stopping_criteria=[proc.stopping], do_sample=False,
                          pad_token_id=tok.pad_token_id)
    (trace3, status3), = _traces(tok, proc, out3, len(tok.encode("Another one:\n")))
    assert trace3 and trace3[0] in ("Thought", "Final-Thought") and status3 != "rejected"


def test_strict_mode_reports_an_overridden_mask() -> None:
    tok = tiny.straddle()
    index = build_index(compile_spec("react"), tok, cache=False)
    proc = LtlLogitsProcessor(index, strict=True)
    x = torch.tensor([tok.encode("Go:")])
    proc(x, torch.zeros(1, len(tok)))
    bad = torch.tensor([[*x[0].tolist(), tok.encode("x", add_special_tokens=False)[0]]])  # START forbids "x"
    with pytest.raises(Exception, match=r"forbids|overridden"):
        proc(bad, torch.zeros(1, len(tok)))
    lenient = LtlLogitsProcessor(index)
    lenient(x, torch.zeros(1, len(tok)))
    row = lenient(bad, torch.zeros(1, len(tok)))[0]
    assert torch.isfinite(row).sum() == len(index.eos_token_ids)  # stopped: EOS only
    assert bool(lenient.stopping(bad, row[None])[0])


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("extra", [0, 7])
@pytest.mark.parametrize("size", [6000, 3000])
def test_apply_rows_equals_row_by_row(extra: int, size: int, dtype: str) -> None:
    """The batched application gives exactly the row-by-row result, for every kind of mask (few
    allowed, few forbidden, dense bias), shared masks, and logits wider than the vocabulary; CPU
    float32 and float16 logits take the numpy path (sparse fills and dense boolean fills on the
    tensor's memory), bfloat16 the torch path (with 3000 logits the 15 rows take the stacked
    boolean rows, ``DENSE_LIMIT``, with 6000 the sparse operations); single rows too."""
    import numpy as np
    import torch

    from ltlagent.decode.masks import Mask, apply_rows

    dt = getattr(torch, dtype)

    rng = np.random.default_rng(0)
    masks = [Mask(size, allowed=np.asarray([5])), Mask(size, allowed=rng.choice(size, 900, replace=False)),
             Mask(size, forbidden=rng.choice(size, 300, replace=False)),
             Mask(size, allowed=rng.choice(size, 2500, replace=False)),  # dense: bias
             Mask(size, forbidden=np.zeros(0, dtype=np.int64))]
    rows = [masks[i % len(masks)] for i in range(13)] + [masks[2], masks[2]]
    scores = torch.randn(len(rows), size + extra).to(dt)
    want = scores.clone()
    for i, mk in enumerate(rows):
        mk.apply(want[i])
    reference = torch.full_like(scores, float("-inf"))  # independent: kept where allowed_ids says
    for i, mk in enumerate(rows):
        ids = torch.as_tensor(mk.allowed_ids())
        reference[i, ids] = scores[i, ids]
    assert torch.equal(want, reference)
    apply_rows(rows, scores)
    assert torch.equal(scores, want)
    for mk in masks:  # and it is the mask: -inf exactly where forbidden, one row at a time too
        r = torch.randn(1, size + extra).to(dt)
        apply_rows([mk], r)
        assert torch.isfinite(r[0]).nonzero().flatten().tolist() == mk.allowed_ids().tolist()
        assert torch.isneginf(r[0]).sum() == size + extra - mk.allowed_ids().size


@pytest.mark.parametrize(("n_rows", "stopping_first"), [(6, False), (6, True), (1, False), (1, True)])
@pytest.mark.parametrize("budget", [None, 30])
def test_rows_stepped_in_place_equal_cursors_that_follow_each_row(budget: int | None, n_rows: int,
                                                                   stopping_first: bool) -> None:
    """Issue 19: a call whose rows each grow by one token steps every cursor in place (fast steps
    where it can); the masked scores and the cursors equal those of a cursor per row that follows
    its tokens. Rows start equal (num_return_sequences) and part later; some stop (EOS,
    Observation) and go on with padding. One row takes the processor's shortest path; with
    ``stopping_first`` the stopping criteria see each new token before the processor does, as
    under ``generate``."""
    import random

    from ltlagent.decode.monitor import Monitor

    tok = tiny.TOKENIZERS["straddle"]()
    index = build_index(compile_spec("react-tools"), tok, tool_names=["Search", "Lookup"], cache=False)
    prompt = tok.encode("Question: x\n")
    eos = index.eos_token_ids[0]
    rows: list[list[int]] = []
    for r in range(n_rows):  # the tokens a sampler would pick under each row's mask
        rnd = random.Random(0 if r < 2 else r)  # rows 0 and 1 begin alike
        mon = Monitor(index, eos_ends_text=False, max_new_tokens=budget)
        row: list[int] = []
        for k in range(40):
            if mon.is_stopped or (budget is not None and k >= budget):
                row.append(eos)
                continue
            ids = mon.allowed_token_ids()
            rnd = random.Random(r) if k == 4 else rnd
            tok_id = int(rnd.choice(ids[:-1] if ids.size > 1 and rnd.random() < 0.95 else ids))
            mon.follow(tok_id)
            row.append(tok_id)
        rows.append(row)
    ids = torch.tensor([prompt + row for row in rows])
    proc = LtlLogitsProcessor(index, max_new_tokens=budget)
    scores = torch.randn(len(rows), index.vocab_size + 3)
    ref = [Monitor(index, eos_ends_text=False, max_new_tokens=budget) for _ in rows]
    for k in range(len(prompt), ids.shape[1] + 1):
        x = ids[:, :k]
        if stopping_first and k > len(prompt):
            proc.stopping(x, scores)
        got = proc(x, scores.clone())
        want = scores.clone()
        for i, mon in enumerate(ref):
            if k > len(prompt):
                mon.follow(int(x[i, -1]))
            mon.current_mask().apply(want[i])
            cur = proc.row_monitor(x[i])
            assert (cur.machine_state, cur.tokens_generated, cur.text_bytes, tuple(cur.segments),
                    cur.is_dead) == (mon.machine_state, mon.tokens_generated, mon.text_bytes,
                                     tuple(mon.segments), mon.is_dead)
        assert torch.equal(got, want)
        assert proc.stopping(x, scores).tolist() == [mon.is_stopped for mon in ref]


def test_mask_allows_as_a_set_and_as_packed_bits() -> None:
    """``Mask.allows`` answers from a set of the smaller side, or from packed bits when that side
    is large (``SET_LIMIT``): the same answers as the allowed ids."""
    import numpy as np

    from ltlagent.decode.masks import SET_LIMIT, Mask

    rng = np.random.default_rng(0)
    size = 5000
    for n in (5, SET_LIMIT + 1, 900, size // 2 + 7):
        for kind in ("allowed", "forbidden"):
            mk = Mask(size, **{kind: rng.choice(size, n, replace=False)})
            want = np.zeros(size, dtype=bool)
            want[mk.allowed_ids()] = True
            assert [mk.allows(t) for t in range(size)] == want.tolist()
            assert not mk.allows(-1) and not mk.allows(size)
