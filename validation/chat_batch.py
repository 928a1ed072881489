"""Many :class:`~ltlagent.agent.chat.ChatAgent` conversations on one ``transformers`` model, their
turns batched (issue 18's experiment on a CPU).

A small model's decoding step on a CPU is bound by reading its weights and KV cache, so a batch of 40
rows costs far less than 40 single rows. :func:`run_conversations` runs each conversation in a
thread of its own, unchanged
(``ChatAgent.run``: policy cursor, tools, scripted user), with the agent's ``generate`` replaced
by :meth:`TurnBatcher.submit`; the batcher waits until every live conversation has asked for its
next turn, then writes all those turns together: one left-padded prefill, then one forward pass
per token for the rows still writing, each row's token picked by its own turn cursor with
``ChatAgent.generate``'s own :func:`~ltlagent.agent.chat.next_token`. The prompt prefix all rows
share (system message, tools, examples: about 1,000 tokens) is prefilled once and its KV cache
copied into each batch. Turn-synchronous, so which rows share a batch is fixed by the tasks, and
reruns give the same transcripts. Greedy only.
"""

from __future__ import annotations

import copy
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ltlagent.agent.chat import next_token
from ltlagent.agent.kvcache import cache_arg, cache_of
from ltlagent.decode.chat import TurnCursor

__all__ = ["TurnBatcher", "run_conversations"]


@dataclass
class _Request:
    ids: list[int]
    index: Any  # TurnIndex | None
    max_new_tokens: int
    then: Any = None  # what may follow a call (ChatAgent.chain): a turn of several calls
    order: int = 0  # the conversation's number: a batch's rows are in this order
    result: tuple[str, int, bool] | None = None
    out: list[int] = field(default_factory=list)


class TurnBatcher:
    """Collects one turn request per live conversation and writes them as one batch."""

    def __init__(self, agent: Any, *, prefill_rows: int = 8,
                 log: Callable[[str], None] | None = None) -> None:
        self.agent = agent  # a ChatAgent: its model, tokenizer, EOS ids and turn texts
        self.model = agent.model
        self.tokenizer = agent.tokenizer
        self.eos = set(agent.vocab.eos_ids)
        pad = getattr(self.tokenizer, "pad_token_id", None)
        self.pad = int(pad) if pad is not None else int(min(self.eos))
        self.prefill_rows = prefill_rows
        self.log = log  # one line per batch: rows, tokens prefilled, steps, seconds
        self._cond = threading.Condition()
        self._pending: list[_Request] = []
        self._live = 0
        self.order: dict[int, int] = {}  # thread → conversation number
        self._prefix_ids: tuple[int, ...] = ()
        self._prefix_kv: list[Any] = []
        self.batches: list[int] = []  # rows per batch, for the record

    # -- the conversations' side
    def submit(self, prompt: str, index: Any, *, max_new_tokens: int, temperature: float = 0.0,
               rng: Any = None, then: Any = None) -> tuple[str, int, bool]:
        """``ChatAgent.generate``'s contract: the turn's text, tokens taken, ended by EOS."""
        if temperature > 0:
            raise ValueError("the turn batcher decodes greedily")
        ids = self.tokenizer(prompt, add_special_tokens=False).input_ids
        req = _Request(list(ids), index, max_new_tokens, then,
                       self.order.get(threading.get_ident(), 0))
        with self._cond:
            self._pending.append(req)
            self._cond.notify_all()
            self._cond.wait_for(lambda: req.result is not None)
        assert req.result is not None
        return req.result

    def _enter(self) -> None:
        with self._cond:
            self._live += 1

    def _leave(self) -> None:
        with self._cond:
            self._live -= 1
            self._cond.notify_all()

    # -- the batch side
    def serve(self) -> None:
        """Write turns until no conversation is live (call from the thread that owns the model)."""
        while True:
            with self._cond:
                self._cond.wait_for(lambda: len(self._pending) >= self._live)
                if self._live == 0 and not self._pending:
                    return
                batch, self._pending = sorted(self._pending, key=lambda r: r.order), []
            self._write(batch)
            with self._cond:
                self._cond.notify_all()

    def _prefix(self, ids: tuple[int, ...]) -> Any:
        """The KV cache of a prefix every row of a batch shares (the system message, tools and
        examples), computed once and kept: a turn then prefills only what follows it."""
        import torch

        if self._prefix_ids != ids:
            with torch.no_grad():
                res = self.model(input_ids=torch.tensor([ids]), use_cache=True)
            cache = cache_of(res)
            self._prefix_kv = [(cache.layers[i].keys, cache.layers[i].values)
                               for i in range(len(cache.layers))]
            self._prefix_ids = ids
        return self._prefix_kv

    def _write(self, batch: list[_Request]) -> None:
        import torch
        from transformers import DynamicCache

        self.batches.append(len(batch))
        t0 = time.perf_counter()
        common = min(len(r.ids) for r in batch) - 1  # every row keeps a token of its own
        first = batch[0].ids
        for r in batch[1:]:
            k = 0
            while k < common and r.ids[k] == first[k]:
                k += 1
            common = k
        shared = tuple(first[:common])
        prefix = self._prefix(shared) if common else []
        width = max(len(r.ids) for r in batch) - common
        ids = torch.full((len(batch), width), self.pad, dtype=torch.long)
        attn = torch.zeros((len(batch), common + width), dtype=torch.long)
        attn[:, :common] = 1
        for i, r in enumerate(batch):
            own = r.ids[common:]
            ids[i, width - len(own):] = torch.tensor(own)
            attn[i, common + width - len(own):] = 1
        pos = (attn.cumsum(1) - 1).clamp(min=0)[:, common:]
        cursors = [TurnCursor(r.index, r.then) if r.index is not None else None for r in batch]
        with torch.no_grad():
            logits_parts, caches = [], []
            for lo in range(0, len(batch), self.prefill_rows):
                hi = min(lo + self.prefill_rows, len(batch))
                past = None
                if prefix:
                    past = DynamicCache()
                    for layer, (k, v) in enumerate(prefix):
                        past.update(k.expand(hi - lo, -1, -1, -1).contiguous(),
                                    v.expand(hi - lo, -1, -1, -1).contiguous(), layer)
                res = self.model(input_ids=ids[lo:hi], attention_mask=attn[lo:hi],
                                 position_ids=pos[lo:hi], use_cache=True,
                                 **cache_arg(self.model, past))
                logits_parts.append(res.logits[:, -1].float())
                caches.append(cache_of(res))
            cache = caches[0]
            if len(caches) > 1:
                cache = DynamicCache()
                for layer in range(len(caches[0].layers)):
                    cache.update(torch.cat([c.layers[layer].keys for c in caches]),
                                 torch.cat([c.layers[layer].values for c in caches]), layer)
            logits = torch.cat(logits_parts)
            t1 = time.perf_counter()
            steps = 0
            rows = list(range(len(batch)))  # requests still writing, in cache order
            last = pos[:, -1]
            for n in range(max(r.max_new_tokens for r in batch)):
                picked: list[int] = []
                keep: list[int] = []
                for k, i in enumerate(rows):
                    r, cur = batch[i], cursors[i]
                    tok = next_token(logits[k], cur, r.max_new_tokens - n)
                    if tok is None:
                        self._finish(r, cur, ended=False)
                        continue
                    if tok in self.eos:
                        self._finish(r, cur, ended=True)
                        continue
                    r.out.append(tok)
                    if len(r.out) >= r.max_new_tokens:
                        self._finish(r, cur, ended=False)
                        continue
                    keep.append(k)
                    picked.append(tok)
                steps += 1
                if not keep:
                    break
                if len(keep) < len(rows):
                    sel = torch.tensor(keep)
                    cache.batch_select_indices(sel)
                    attn, last = attn[sel], last[sel]
                    rows = [rows[k] for k in keep]
                attn = torch.cat([attn, torch.ones((len(rows), 1), dtype=torch.long)], dim=1)
                last = last + 1
                res = self.model(input_ids=torch.tensor(picked).unsqueeze(1), attention_mask=attn,
                                 position_ids=last.unsqueeze(1), **cache_arg(self.model, cache),
                                 use_cache=True)
                cache = cache_of(res)
                logits = res.logits[:, -1].float()
        for r, cur in zip(batch, cursors):
            if r.result is None:
                self._finish(r, cur, ended=False)
        if self.log is not None:
            self.log(f"batch {len(self.batches)}: {len(batch)} rows, {ids.numel()} tokens "
                     f"prefilled after a shared prefix of {common} ({t1 - t0:.1f} s), "
                     f"{steps} steps ({time.perf_counter() - t1:.1f} s)")

    def _finish(self, r: _Request, cur: Any, *, ended: bool) -> None:
        r.result = (self.agent.turn_text(r.out, cur is not None), len(r.out) + int(ended), ended)


def run_conversations(agent: Any, jobs: Sequence[Callable[[Any], Any]],
                      tools: Sequence[Callable[[str, dict[str, object]], str]]) -> list[Any]:
    """Run ``jobs[i](agent_i)`` for every i at once, where ``agent_i`` is ``agent`` with the tools
    ``tools[i]`` (its turn indexes shared) and its turns written by one :class:`TurnBatcher`."""
    batcher = TurnBatcher(agent, log=lambda line: print(line, file=sys.stderr, flush=True))
    results: list[Any] = [None] * len(jobs)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        batcher.order[threading.get_ident()] = i
        try:
            results[i] = jobs[i](mine[i])
        except BaseException as e:  # re-raised by the caller's thread
            errors.append(e)
        finally:
            batcher._leave()

    mine = []
    for call_tool in tools:
        a = copy.copy(agent)  # shares the tokenizer's bytes and the turn indexes
        a.call_tool = call_tool
        a.generate = batcher.submit
        mine.append(a)
    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(len(jobs))]
    for _ in threads:
        batcher._enter()
    for t in threads:
        t.start()
    batcher.serve()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results
