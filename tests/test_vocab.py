"""Token id → bytes for the three tokenizer kinds (byte-level BPE, SentencePiece with byte fallback,
a vocabulary straddling prompt strings), special and added tokens, and the lookup helpers."""

from __future__ import annotations

import numpy as np
import pytest

from ltlagent.decode.vocab import (
    bytes_to_unicode,
    first_byte_index,
    read_tokenizer,
    tokenizer_fingerprint,
    tokens_containing,
    vocab_from_bytes,
    vocab_from_tokenizer,
)

from . import tiny

TEXTS = [
    "Thought: I need to search.\nAction: Search\nAction Input: café 日本\nObservation: ok\n",
    "Final Thought: 中文 ü ñ 😀 Ωmega\nAnswer: 42\n",  # characters outside the training alphabets
    "  leading spaces\tand tabs\n\n\nAction Input:Action:Thought:",
]


@pytest.mark.parametrize("name", sorted(tiny.TOKENIZERS))
@pytest.mark.parametrize("text", TEXTS)
def test_token_bytes_spell_the_text(name: str, text: str) -> None:
    """Concatenating the bytes of the tokens of a text gives the text's UTF-8 (SentencePiece adds
    the one leading space its decoder strips)."""
    tok = tiny.TOKENIZERS[name]()
    v = vocab_from_tokenizer(tok)
    ids = tok.encode(text, add_special_tokens=False)
    got = b"".join(v.token_bytes(i) for i in ids)
    want = text.encode()
    assert got == want or (v.kind == "sentencepiece" and got == b" " + want), (name, got, want)
    assert all(v.is_text[i] for i in ids)


def test_kinds_and_specials() -> None:
    bl, sp, st = (vocab_from_tokenizer(tiny.TOKENIZERS[k]())
                  for k in ("byte-level", "sentencepiece", "straddle"))
    assert (bl.kind, sp.kind, st.kind) == ("byte-level", "sentencepiece", "byte-level")
    assert bl.eos_ids == (0,) and not bl.is_text[0] and bl.token_bytes(0) == b""
    assert sp.eos_ids == (2,) and not sp.is_text[0] and not sp.is_text[1]  # <unk>, <s>
    # byte-fallback tokens are single bytes, fragments of multi-byte characters included
    tok = tiny.sentencepiece()
    assert sp.token_bytes(tok.convert_tokens_to_ids("<0xE4>")) == b"\xe4"
    assert sp.token_bytes(tok.convert_tokens_to_ids("<0x0A>")) == b"\n"
    # added tokens: a plain one is its content, a special one is not text
    t = tiny.straddle()
    assert st.token_bytes(t.convert_tokens_to_ids("Action Input")) == b"Action Input"
    assert st.token_bytes(t.convert_tokens_to_ids(" Act")) == b" Act"
    special = t.convert_tokens_to_ids("<|im_start|>")
    assert not st.is_text[special] and st.token_bytes(special) == b""
    # ids past the vocabulary have no bytes
    assert st.token_bytes(st.size + 5) == b""


def test_multibyte_fragments_exist_and_are_bytes() -> None:
    """Byte-level BPE has tokens that are a fragment of a UTF-8 character; they read as raw bytes."""
    v = vocab_from_tokenizer(tiny.byte_level())
    frags = []
    for i in range(v.size):
        b = v.token_bytes(i)
        try:
            b.decode("utf-8")
        except UnicodeDecodeError:
            frags.append(b)
    assert len(frags) > 50
    assert bytes([0xE6]) in frags  # the lead byte of 日
    enc = bytes_to_unicode()
    assert len(set(enc.values())) == 256 and enc[ord(" ")] == "Ġ" and enc[ord("\n")] == "Ċ"


def test_straddling_vocabulary() -> None:
    """The straddle tokenizer really has tokens that contain or straddle prompt strings."""
    v = vocab_from_tokenizer(tiny.straddle())
    toks = {v.token_bytes(i) for i in range(v.size)}
    assert b":\n" in toks and b" Act" in toks and b"Action Input" in toks
    assert any(b"Thought: " in t for t in toks)  # a whole prompt string plus content
    assert any(t.startswith(b"\nAction") for t in toks)  # separator + prompt


def test_decoded_fallback_wordpiece() -> None:
    """A tokenizer without a byte-level or SentencePiece decoder is read by decoding."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "[SEP]": 1, "act": 2, "##ion": 3, "a": 4, "b": 5, "##b": 6, ":": 7}
    wp = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wp.decoder = decoders.WordPiece()
    tok = PreTrainedTokenizerFast(tokenizer_object=wp, unk_token="[UNK]", sep_token="[SEP]",
                                  eos_token="[SEP]")
    v = vocab_from_tokenizer(tok)
    assert v.kind == "decoded"
    assert v.token_bytes(3) == b"ion" and v.token_bytes(2) == b" act" and not v.is_text[1]


def test_vocab_from_bytes_and_lookups() -> None:
    toks = [b"a", b"ab", b"abc", None, b"b", b"Thought:", b"x Thought: y", b"\xe6", b"", b"ab"]
    v = vocab_from_bytes(toks, eos_ids=[3])
    assert v.size == len(toks) and list(v.is_text) == [bool(t) for t in toks]
    assert tokens_containing(v, [b"Thought:"]).tolist() == [5, 6]
    assert tokens_containing(v, [b"b"]).tolist() == [1, 2, 4, 9]
    fb = first_byte_index(v)
    assert sorted(fb.with_prefix(b"ab").tolist()) == [1, 2, 9]
    assert sorted(fb.with_prefix(b"a").tolist()) == [0, 1, 2, 9]
    assert fb.with_prefix(b"abcd").tolist() == []
    assert fb.longest_prefix_of(b"abcz") == [2, 1, 9, 0]  # longest first, then by id
    assert fb.longest_prefix_of(b"z") == []
    live = np.zeros(256, dtype=bool)
    live[ord("b")] = live[0xE6] = True
    assert sorted(fb.first_bytes(live).tolist()) == [4, 7]


def test_lookups_match_brute_force_on_a_real_vocabulary() -> None:
    v = vocab_from_tokenizer(tiny.straddle())
    fb = first_byte_index(v)
    allb = v.all_bytes()
    for prefix in (b"A", b"Act", b"\nA", b": ", b"Thought", b"\xe6"):
        want = sorted(i for i, b in enumerate(allb) if v.is_text[i] and b.startswith(prefix))
        assert sorted(fb.with_prefix(prefix).tolist()) == want
    data = b"\nAction Input: x"
    got = fb.longest_prefix_of(data)
    want = sorted((i for i, b in enumerate(allb) if v.is_text[i] and b and data.startswith(b)),
                  key=lambda i: (-len(allb[i]), i))
    assert got == want
    assert tokens_containing(v, [b"Action"]).tolist() == [i for i, b in enumerate(allb)
                                                          if v.is_text[i] and b"Action" in b]


def test_fingerprint_tracks_the_vocabulary() -> None:
    a = tokenizer_fingerprint(tiny.byte_level())
    assert a == tokenizer_fingerprint(tiny.byte_level())
    assert a != tokenizer_fingerprint(tiny.byte_level(), eos_token_ids=[0, 5])
    assert a != tokenizer_fingerprint(tiny.byte_level(400))
    r = read_tokenizer(tiny.straddle())
    assert vocab_from_tokenizer(tiny.straddle()).fingerprint == r.fingerprint()
