"""Tiny offline tokenizers and models for the monitor tests (docs/design.md §9: nothing is downloaded).

* :func:`byte_level` — GPT-2 style byte-level BPE trained from in-memory text;
* :func:`sentencepiece` — Llama-2 style: ``▁`` for spaces, ``<0xNN>`` byte-fallback tokens in the
  vocabulary, rare characters (``日本``, ``é``) only as byte fragments;
* :func:`straddle` — byte-level BPE trained without pre-tokenisation, so its vocabulary has tokens
  that contain or straddle prompt strings (``":\\n"``, ``" Action"``, ``"Action Input"``) — plus an
  added special token and an added plain token;
* :func:`tiny_model` — a randomly initialised GPT-2 or Llama whose logits are wider than the
  vocabulary (padded embedding rows).

Everything is cached per process (training takes ~0.1 s each).
"""

from __future__ import annotations

import json
import random
from functools import cache

ACTIONS = ("Search", "Lookup", "Calculator")


def corpus(n: int = 60, seed: int = 0) -> list[str]:
    """ReAct-like transcripts with multi-byte characters and some code."""
    rnd = random.Random(seed)
    words = ["the", "capital", "of", "France", "is", "Paris", "I", "need", "to", "search", "for",
             "café", "naïve", "日本", "東京", "Ωmega", "x", "=", "def", "return", "42", "3.14", "😀"]
    out = []
    for i in range(n):
        lines = []
        for _ in range(rnd.randint(0, 3)):
            lines += [f"Thought: {' '.join(rnd.choices(words, k=rnd.randint(2, 8)))}",
                      f"Action: {rnd.choice(ACTIONS)}",
                      f"Action Input: {' '.join(rnd.choices(words, k=rnd.randint(1, 4)))}",
                      f"Observation: {' '.join(rnd.choices(words, k=rnd.randint(1, 6)))}"]
        lines += [f"Final Thought: {' '.join(rnd.choices(words, k=3))}", f"Answer: {rnd.randint(0, 99)}"]
        out.append("\n".join(lines) + "\n")
        out.append(f"def f{i}(x):\n    return x * {i}\n")
    return out


def _byte_level_backend(vocab_size: int, use_regex: bool) -> object:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=use_regex)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(), trainer)
    return tok


@cache
def byte_level(vocab_size: int = 500) -> object:
    """GPT-2 style byte-level BPE (EOS ``<|endoftext|>`` = id 0)."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=_byte_level_backend(vocab_size, True),
                                   eos_token="<|endoftext|>", pad_token="<|endoftext|>")


@cache
def straddle() -> object:
    """Byte-level BPE whose merges cross spaces and newlines, plus added tokens."""
    from transformers import PreTrainedTokenizerFast

    t = PreTrainedTokenizerFast(tokenizer_object=_byte_level_backend(700, False),
                                eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    t.add_tokens(["Action Input", " Act", ":\n"])
    t.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    return t


@cache
def sentencepiece() -> object:
    """SentencePiece-style BPE: ``▁`` spaces, byte fallback, ``<s>``/``</s>``/``<unk>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    pre = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    base = Tokenizer(models.BPE(unk_token="<unk>"))
    base.pre_tokenizer = pre
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=["<unk>", "<s>", "</s>"],
                                  limit_alphabet=40, show_progress=False)
    base.train_from_iterator(corpus(), trainer)
    model = json.loads(base.to_str())["model"]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1]):
        if piece not in vocab:
            vocab[piece] = len(vocab)
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<unk>")


TOKENIZERS = {"byte-level": byte_level, "sentencepiece": sentencepiece, "straddle": straddle}


@cache
def tiny_model(kind: str, vocab_size: int, seed: int = 0, extra_rows: int = 11) -> object:
    """A randomly initialised causal LM with ``vocab_size + extra_rows`` logits."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    n = vocab_size + extra_rows
    if kind == "gpt2":
        cfg = GPT2Config(vocab_size=n, n_embd=32, n_layer=1, n_head=2, n_positions=1024,
                         bos_token_id=0, eos_token_id=0)
        model = GPT2LMHeadModel(cfg)
    else:
        cfg = LlamaConfig(vocab_size=n, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                          num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=1024,
                          bos_token_id=1, eos_token_id=2, pad_token_id=0)
        model = LlamaForCausalLM(cfg)
    model.eval()
    return model
