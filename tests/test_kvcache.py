"""The KV cache goes in and comes out under the name the installed transformers uses (5.24 renamed
``past_key_values`` to ``cache`` and warns on the old keyword, which this suite turns into an
error), and a real model's cache round-trips through both helpers."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ltlagent.agent.kvcache import cache_arg, cache_of


class Old:
    def forward(self, input_ids: Any, past_key_values: Any = None, use_cache: bool = True) -> Any:
        return SimpleNamespace(past_key_values=past_key_values)


class New:
    def forward(self, input_ids: Any, cache: Any = None, use_cache: bool = True) -> Any:
        return SimpleNamespace(cache=cache)


def test_the_keyword_follows_the_forward_signature() -> None:
    assert cache_arg(Old(), 1) == {"past_key_values": 1}
    assert cache_arg(New(), 2) == {"cache": 2}
    assert cache_of(Old().forward(0, **cache_arg(Old(), 3))) == 3
    assert cache_of(New().forward(0, **cache_arg(New(), 4))) == 4


def test_a_real_model_continues_from_its_cache_without_warnings() -> None:
    torch = pytest.importorskip("torch")
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=32, n_embd=16, n_layer=1, n_head=2,
                                       bos_token_id=0, eos_token_id=0)).eval()
    with torch.no_grad():
        whole = model(input_ids=torch.tensor([[1, 2, 3, 4]])).logits[0, -1]
        first = model(input_ids=torch.tensor([[1, 2, 3]]), use_cache=True)
        step = model(input_ids=torch.tensor([[4]]), use_cache=True,
                     **cache_arg(model, cache_of(first)))
    assert torch.allclose(step.logits[0, -1], whole, atol=1e-5)
