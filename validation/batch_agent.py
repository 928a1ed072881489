"""Run many constrained agents at once: one monitor per question, one batched forward per step.

The experiment runs thousands of short agent episodes of a small model on a CPU; one question at a
time, Python overhead per forward pass dominates. This engine keeps a batch of episodes of the same
spec and prompt layout in one left-padded KV cache. Each step every live row feeds exactly one
token to the model: the next queued token (environment text, or the token just chosen), so rows
can receive Observation text while other rows keep generating. The decoding itself is the
project's monitor (:mod:`ltlagent.decode.monitor`): masking, forcing, budget steering and the
``:env-input`` pause are all its own; greedy decoding picks the argmax of the masked logits.

The environment is a callable ``env(row, monitor) -> str`` returning the text to append after an
``:env-input`` prompt string (for ReAct: `` <tool output>\\n``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ltlagent.agent.kvcache import cache_arg, cache_of

__all__ = ["Episode", "run_batch"]


@dataclass
class Episode:
    """What one row produced."""

    text: str = ""
    states: list[str] = field(default_factory=list)
    steps: list[tuple[str, str, bool]] = field(default_factory=list)   # (state, content, by_env)
    tokens: int = 0
    finished: bool = False
    complete: bool = False
    error: str = ""               # "context_full" when the model's context ran out (the runner's stop)


def run_batch(model, tokenizer, index, prompts: Sequence[str],
              env: Callable[[int, object], str], *, max_new_tokens: int = 256, max_steps: int = 64,
              max_env_tokens: int = 400, share_prefix: bool = True, chunk: int = 64) -> list[Episode]:
    """Greedy, monitored generation for each prompt; returns one :class:`Episode` per prompt.

    With ``share_prefix`` the prompts' common prefix (the instructions and examples of a few-shot
    prompt) is encoded once and its KV cache copied to every row; the rows' own suffixes follow
    behind padding, so the model sees exactly the same tokens and positions as without it."""
    import torch

    from ltlagent.decode.monitor import Monitor

    n = len(prompts)
    eos_ids = set(index.eos_token_ids)
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    enc = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    shared = _common_prefix(enc) if share_prefix and n > 1 else 0
    width = max(len(e) for e in enc) - shared
    ids = torch.full((n, width), pad, dtype=torch.long)
    att = torch.zeros((n, shared + width), dtype=torch.long)
    att[:, :shared] = 1
    pos = torch.zeros((n, width), dtype=torch.long)
    for r, e in enumerate(enc):
        own = e[shared:]
        ids[r, width - len(own):] = torch.tensor(own)
        att[r, shared + width - len(own):] = 1
        pos[r, width - len(own):] = torch.arange(shared, len(e))
    n_ctx = int(getattr(model.config, "n_positions", 0) or getattr(model.config, "max_position_embeddings", 0)
                or 1 << 30)
    # as the agent runner: the budget is what the context leaves after the prompt
    # and, as the runner does by default, a newline before a prompt string after a text that ended
    monitors = [Monitor(index, max_new_tokens=max(1, min(max_new_tokens, n_ctx - len(e))),
                        max_steps=max_steps, newline=True) for e in enc]
    episodes = [Episode() for _ in range(n)]
    queues: list[list[int]] = [[] for _ in range(n)]
    live = [True] * n
    env_budget = [max_env_tokens] * n
    next_pos = pos[:, -1] + 1

    with torch.inference_mode():
        past = None
        if shared:
            past = cache_of(model(input_ids=torch.tensor([enc[0][:shared]]), use_cache=True))
            past.batch_repeat_interleave(n)
        out = model(input_ids=ids, attention_mask=att, position_ids=pos, use_cache=True,
                    **cache_arg(model, past))
        past = cache_of(out)
        logits = out.logits[:, -1, :].float()
        keep = ({"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters
                else {})
        while any(live):
            take: list[list[int]] = [[] for _ in range(n)]
            for r in range(n):
                if not live[r]:
                    continue
                if not queues[r]:
                    room = n_ctx - int(next_pos[r])      # positions left before this row's next token
                    _choose(r, monitors[r], logits[r], queues[r], episodes[r], env, env_budget,
                            tokenizer, eos_ids, room)
                    if monitors[r].is_finished or episodes[r].error or not queues[r]:
                        live[r] = False
                        continue
                fit = n_ctx - int(next_pos[r])
                if fit <= 0:
                    episodes[r].error = "context_full"
                    live[r] = False
                    continue
                # a token chosen, or a chunk of environment text (fed at once, not a token a step)
                k = min(len(queues[r]), chunk, fit)
                take[r] = queues[r][:k]
                del queues[r][:k]
            if not any(live):
                break
            w = max(len(t) for t in take)
            feed = torch.full((n, w), pad, dtype=torch.long)
            feed_att = torch.zeros((n, w), dtype=torch.long)
            feed_pos = torch.zeros((n, w), dtype=torch.long)
            for r, t in enumerate(take):
                if t:
                    feed[r, w - len(t):] = torch.tensor(t)
                    feed_att[r, w - len(t):] = 1
                    feed_pos[r, w - len(t):] = int(next_pos[r]) + torch.arange(len(t))
            att = torch.cat([att, feed_att], dim=1)
            out = model(input_ids=feed, attention_mask=att, position_ids=feed_pos,
                        use_cache=True, **cache_arg(model, past), **keep)
            past = cache_of(out)
            logits = out.logits[:, -1, :].float()
            next_pos = next_pos + feed_att.sum(dim=1)
    for r, m in enumerate(monitors):
        ep = episodes[r]
        ep.text = m.text
        ep.states = list(m.trace)
        ep.steps = [(s.state, s.text, s.by_env) for s in m.steps]
        ep.tokens = m.tokens_generated
        ep.finished = m.is_finished
        ep.complete = m.is_complete
    return episodes


def _common_prefix(enc: Sequence[Sequence[int]]) -> int:
    """Tokens every row starts with, leaving each row at least one token of its own."""
    n = min(len(e) for e in enc) - 1
    first = enc[0]
    for i in range(max(0, n)):
        if any(e[i] != first[i] for e in enc):
            return i
    return max(0, n)


def _choose(r: int, mon, row, queue: list[int], ep: Episode, env, env_budget: list[int], tokenizer,
            eos: set[int], room: int) -> None:
    """Pick this row's next token(s) from its logits under the monitor; queue what must be fed."""
    import torch

    for _ in range(8):   # EOS that only ends a state's text is not fed: pick again from the same logits
        if mon.is_finished:
            return
        forced = mon.forced_token()
        if forced is not None:
            tok = forced
        else:
            masked = row.clone()
            mon.mask_into(masked)
            if torch.isneginf(masked).all():
                ep.error = "the monitor allowed no token"
                return
            tok = int(masked.argmax())
        events = mon.advance(tok)
        fed_eos = tok in eos
        if not fed_eos:
            queue.append(tok)
        if any(e.kind == "env" for e in events):
            text = env(r, mon)
            toks = tokenizer(text, add_special_tokens=False)["input_ids"][: max(0, env_budget[r])]
            env_budget[r] -= len(toks)
            if len(queue) + len(toks) >= room:
                ep.error = "context_full"
                queue.clear()
                return
            mon.feed_env(toks)
            # the environment's text used up context: steer by what is left (as the runner)
            mon.set_remaining(min(mon.remaining_tokens, room - len(queue) - len(toks)))
            queue.extend(toks)
        if queue or mon.is_finished:
            return
    ep.error = "EOS loop"
