"""Token id → bytes for any Hugging Face tokenizer (docs/design.md §5: the monitor works on bytes).

Three readings, picked from the tokenizer's decoder:

* byte-level BPE (GPT-2, Llama-3, Qwen): token strings are spelled in GPT-2's byte-to-unicode
  alphabet (``Ġ`` = space); mapped back with one ``str.translate`` over the whole vocabulary;
* SentencePiece style (Llama-2, Mistral, T5): ``▁`` is a space, ``<0xNN>`` byte-fallback tokens are
  single bytes (so tokens that are a fragment of a multi-byte character work);
* anything else: each token decoded after an anchor token, the anchor's text cut off.

Added tokens that are not special are their content in UTF-8; special tokens (EOS, pad, chat
markers) and ids with no token (logits wider than the vocabulary) have no bytes: the monitor never
allows them as text. Heavy dependencies are not imported here.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ltlagent.errors import UsageError

__all__ = [
    "FirstByteIndex", "TokenizerReading", "Vocab", "bytes_to_unicode", "first_byte_index", "read_tokenizer",
    "tokenizer_fingerprint", "tokens_containing", "vocab_from_bytes", "vocab_from_reading",
    "vocab_from_tokenizer",
]

_BYTE_TOKEN = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte → printable unicode character map (the ``Ġ`` alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


@dataclass(frozen=True, eq=False)
class Vocab:
    """The bytes of every token id, flat: token ``i`` is ``flat[offsets[i]:offsets[i+1]]``.

    ``is_text[i]`` is False for special tokens and ids without a token; their byte string is empty.
    """

    size: int
    flat: bytes = field(repr=False)
    offsets: np.ndarray = field(repr=False)  # int64, size + 1
    is_text: np.ndarray = field(repr=False)  # bool, size
    eos_ids: tuple[int, ...]
    kind: str  # "byte-level" | "sentencepiece" | "decoded" | "bytes"
    fingerprint: str

    def token_bytes(self, i: int) -> bytes:
        """The bytes of token ``i`` (empty for special tokens and unknown ids)."""
        if i < 0 or i >= self.size:
            return b""
        return self.flat[self.offsets[i]:self.offsets[i + 1]]

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def all_bytes(self) -> list[bytes]:
        """Every token's bytes as a list (index = id)."""
        f, o = self.flat, self.offsets.tolist()
        return [f[o[i]:o[i + 1]] for i in range(self.size)]

    def single_byte_tokens(self) -> dict[int, int]:
        """byte value → a text token that is exactly that byte (first such id)."""
        out: dict[int, int] = {}
        ids = np.nonzero((self.lengths == 1) & self.is_text)[0]
        for i in ids.tolist():
            out.setdefault(self.flat[self.offsets[i]], i)
        return out


def _vocab(flat: bytes, lens: np.ndarray, eos_ids: Iterable[int], kind: str,
           fingerprint: str | None) -> Vocab:
    offsets = np.zeros(lens.size + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    is_text = lens > 0
    eos = tuple(sorted(set(eos_ids)))
    for e in eos:
        if 0 <= e < lens.size:
            is_text[e] = False
    if fingerprint is None:
        h = hashlib.sha256()
        for part in (kind.encode(), offsets.tobytes(), flat, is_text.tobytes(), repr(eos).encode()):
            h.update(part)
        fingerprint = h.hexdigest()
    return Vocab(int(lens.size), flat, offsets, is_text, eos, kind, fingerprint)


def vocab_from_bytes(tokens: Sequence[bytes | None], eos_ids: Iterable[int] = (),
                     kind: str = "bytes", fingerprint: str | None = None) -> Vocab:
    """A vocabulary from explicit token bytes (None or empty = not text, e.g. special tokens)."""
    toks = [t if t else b"" for t in tokens]
    lens = np.fromiter(map(len, toks), dtype=np.int64, count=len(toks))
    return _vocab(b"".join(toks), lens, eos_ids, kind, fingerprint)


# --- reading a tokenizer --------------------------------------------------------------------

def _backend(tokenizer: object) -> object | None:
    """The ``tokenizers.Tokenizer`` behind ``tokenizer`` (or itself), if there is one."""
    if hasattr(tokenizer, "backend_tokenizer"):
        return tokenizer.backend_tokenizer
    if type(tokenizer).__module__.startswith("tokenizers") and hasattr(tokenizer, "to_str"):
        return tokenizer
    return None


def _decoder_json(backend: object | None) -> object:
    if backend is None:
        return None
    try:
        dec = backend.decoder  # type: ignore[attr-defined]
        return None if dec is None else json.loads(dec.__getstate__())
    except Exception:  # a decoder that cannot serialise: read the vocabulary the generic way
        return None


def _decoder_types(dec: object) -> set[str]:
    out: set[str] = set()
    todo = [dec]
    while todo:
        d = todo.pop()
        if isinstance(d, dict):
            out.add(str(d.get("type")))
            todo.extend(d.get("decoders") or [])
            if d.get("type") == "Replace" and (d.get("pattern") or {}).get("String") == "▁":
                out.add("Replace▁")
    return out


def _token_strings(tokenizer: object, backend: object | None) -> tuple[list[str | None], dict[int, bool]]:
    """Token string per id (None for holes) and the added tokens: id → special."""
    added: dict[int, bool] = {}
    dec = getattr(tokenizer, "added_tokens_decoder", None)
    if dec is None and backend is not None and hasattr(backend, "get_added_tokens_decoder"):
        dec = backend.get_added_tokens_decoder()
    for i, t in (dec or {}).items():
        added[int(i)] = bool(getattr(t, "special", False))
    for i in getattr(tokenizer, "all_special_ids", None) or ():
        added[int(i)] = True
    if backend is not None:  # id_to_token is ~2x faster than get_vocab() at 128k
        n = backend.get_vocab_size(with_added_tokens=True)  # type: ignore[attr-defined]
        if hasattr(tokenizer, "__len__"):
            n = max(n, len(tokenizer))
        n = max([n, *(i + 1 for i in added)])
        toks: list[str | None] = list(map(backend.id_to_token, range(n)))  # type: ignore[attr-defined]
    else:
        vocab = tokenizer.get_vocab()  # type: ignore[attr-defined]
        n = max(vocab.values(), default=-1) + 1
        if hasattr(tokenizer, "__len__"):
            n = max(n, len(tokenizer))
        toks = [None] * n
        for s, i in vocab.items():
            toks[i] = s
    if dec:
        for i, t in dec.items():
            if 0 <= int(i) < n:
                toks[int(i)] = str(getattr(t, "content", t))
    return toks, added


def _eos_ids(tokenizer: object, eos_token_ids: int | Sequence[int] | None) -> tuple[int, ...]:
    if eos_token_ids is not None:
        ids = [eos_token_ids] if isinstance(eos_token_ids, int) else list(eos_token_ids)
    else:
        e = getattr(tokenizer, "eos_token_id", None)
        ids = [] if e is None else ([e] if isinstance(e, int) else list(e))
    return tuple(sorted({int(i) for i in ids}))


@dataclass(frozen=True, eq=False)
class TokenizerReading:
    """What the monitor reads from a tokenizer before turning it into bytes (cheap to hash)."""

    tokenizer: object = field(repr=False)
    tokens: list[str | None] = field(repr=False)  # token string per id (None: no token)
    added: dict[int, bool] = field(repr=False)  # added token id → special
    decoder: object  # the backend decoder as JSON, if any
    eos: tuple[int, ...]

    def fingerprint(self) -> str:
        """A hash of everything :func:`vocab_from_reading` depends on."""
        h = hashlib.sha256()
        h.update(json.dumps([self.decoder, sorted(self.added.items()), self.eos], sort_keys=True).encode())
        h.update("\x00".join(t if t is not None else "\x01" for t in self.tokens)
                 .encode("utf-8", "surrogatepass"))
        return h.hexdigest()


def read_tokenizer(tokenizer: object, eos_token_ids: int | Sequence[int] | None = None) -> TokenizerReading:
    """Token strings, added tokens and decoder of a Hugging Face tokenizer (or a
    ``tokenizers.Tokenizer``); ``eos_token_ids`` overrides the tokenizer's EOS."""
    backend = _backend(tokenizer)
    if backend is None and not hasattr(tokenizer, "get_vocab"):
        raise UsageError(f"expected a Hugging Face tokenizer, got {type(tokenizer).__name__}")
    toks, added = _token_strings(tokenizer, backend)
    eos = _eos_ids(tokenizer, eos_token_ids)
    return TokenizerReading(tokenizer, toks, added, _decoder_json(backend), eos)


def vocab_from_reading(r: TokenizerReading) -> Vocab:
    """Every token's bytes, read the way the tokenizer's decoder spells them."""
    toks, added = r.tokens, r.added
    types = _decoder_types(r.decoder)
    if "ByteLevel" in types:
        kind = "byte-level"
        flat, lens = _read_byte_level(toks, added)
    elif "Replace▁" in types or "Metaspace" in types or "ByteFallback" in types or (
            r.decoder is None and any(t is not None and "▁" in t for t in toks[:5000])):
        kind = "sentencepiece"
        flat, lens = _read_sentencepiece(toks, added)
    else:
        kind = "decoded"
        flat, lens = _read_decoded(r.tokenizer, toks, added)
    return _vocab(flat, lens, r.eos, kind, r.fingerprint())


def vocab_from_tokenizer(tokenizer: object, eos_token_ids: int | Sequence[int] | None = None) -> Vocab:
    """Read every token's bytes from a Hugging Face tokenizer (or a ``tokenizers.Tokenizer``).

    ``eos_token_ids`` overrides the tokenizer's EOS (e.g. a model's generation config lists more).
    """
    return vocab_from_reading(read_tokenizer(tokenizer, eos_token_ids))


def tokenizer_fingerprint(tokenizer: object, eos_token_ids: int | Sequence[int] | None = None) -> str:
    """A hash of the tokenizer's vocabulary, special tokens and decoder, for cache keys."""
    return read_tokenizer(tokenizer, eos_token_ids).fingerprint()


def _special(i: int, added: dict[int, bool]) -> bool:
    return added.get(i, False)


Parts = tuple[bytes, np.ndarray]  # (flat bytes in id order, byte length per id)


def _plain_and_extra(toks: list[str | None], added: dict[int, bool]
                     ) -> tuple[np.ndarray, list[str], dict[int, bytes]]:
    """Ids of ordinary vocabulary tokens (sorted), their strings, and the non-special added
    tokens' bytes (their content, not spelled in the model's alphabet)."""
    plain_ids = [i for i, t in enumerate(toks) if t is not None and i not in added]
    extra = {i: toks[i].encode("utf-8") for i, sp in added.items()  # type: ignore[union-attr]
             if not sp and 0 <= i < len(toks) and toks[i]}
    return np.asarray(plain_ids, dtype=np.int64), [toks[i] for i in plain_ids], extra  # type: ignore[misc]


def _assemble(n: int, plain_ids: np.ndarray, plain_flat: bytes, plain_lens: np.ndarray,
              extra: dict[int, bytes]) -> Parts:
    """Merge the ordinary tokens' bytes with the few exceptional ones, in id order."""
    lens = np.zeros(n, dtype=np.int64)
    lens[plain_ids] = plain_lens
    if not extra:
        return plain_flat, lens
    ids = sorted(extra)
    for i in ids:
        lens[i] = len(extra[i])
    cum = np.concatenate([[0], np.cumsum(plain_lens)])
    pos = cum[np.searchsorted(plain_ids, np.asarray(ids, dtype=np.int64))].tolist()
    pieces: list[bytes] = []
    prev = 0
    for i, p in zip(ids, pos):
        pieces += [plain_flat[prev:p], extra[i]]
        prev = p
    pieces.append(plain_flat[prev:])
    return b"".join(pieces), lens


def _codepoints(strs: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """All characters of ``strs`` as code points, and each string's length in characters."""
    cps = np.frombuffer("".join(strs).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return cps, np.fromiter(map(len, strs), dtype=np.int64, count=len(strs))


def _read_byte_level(toks: list[str | None], added: dict[int, bool]) -> Parts:
    """GPT-2 alphabet → bytes with one lookup table over all characters at once."""
    plain_ids, strs, extra = _plain_and_extra(toks, added)
    cps, clens = _codepoints(strs)
    lut = np.full(0x400, -1, dtype=np.int16)
    for b, u in bytes_to_unicode().items():
        lut[ord(u)] = b
    inside = cps < lut.size
    vals = np.where(inside, lut[np.minimum(cps, lut.size - 1)], -1)
    if (vals >= 0).all():
        return _assemble(len(toks), plain_ids, vals.astype(np.uint8).tobytes(), clens, extra)
    # some token outside the byte alphabet: spell those characters in UTF-8
    table = {ord(u): b for b, u in bytes_to_unicode().items()}
    for i, s in zip(plain_ids.tolist(), strs):
        extra[i] = b"".join(bytes([table[ord(c)]]) if ord(c) in table else c.encode() for c in s)
    return _assemble(len(toks), np.zeros(0, dtype=np.int64), b"", np.zeros(0, dtype=np.int64), extra)


def _read_sentencepiece(toks: list[str | None], added: dict[int, bool]) -> Parts:
    """``▁`` → space, ``<0xNN>`` → one byte, everything else UTF-8 (vectorised lengths)."""
    plain_ids, strs, extra = _plain_and_extra(toks, added)
    keep = []
    for k, (i, s) in enumerate(zip(plain_ids.tolist(), strs)):
        m = _BYTE_TOKEN.match(s) if len(s) == 6 else None
        if m is not None:
            extra[i] = bytes([int(m.group(1), 16)])
        else:
            keep.append(k)
    for i, sp in added.items():  # byte tokens declared as special added tokens still are bytes
        tok = toks[i] if 0 <= i < len(toks) else None
        m = _BYTE_TOKEN.match(tok) if sp and tok is not None and len(tok) == 6 else None
        if m is not None:
            extra[i] = bytes([int(m.group(1), 16)])
    plain_ids = plain_ids[np.asarray(keep, dtype=np.int64)] if keep else np.zeros(0, dtype=np.int64)
    strs = [strs[k] for k in keep]
    cps, clens = _codepoints(strs)
    cps = np.where(cps == 0x2581, 0x20, cps)
    blen = 1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)
    cum = np.concatenate([[0], np.cumsum(blen)])
    starts = np.concatenate([[0], np.cumsum(clens)])
    lens = cum[starts[1:]] - cum[starts[:-1]]
    flat = "".join(strs).replace("▁", " ").encode("utf-8", "surrogatepass")
    return _assemble(len(toks), plain_ids, flat, lens.astype(np.int64), extra)


def _read_decoded(tokenizer: object, toks: list[str | None], added: dict[int, bool]) -> Parts:
    """Generic reading: decode ``[anchor, id]`` and cut the anchor's text (keeps leading spaces)."""
    decode = getattr(tokenizer, "decode", None)
    if decode is None:
        raise UsageError(f"cannot read the vocabulary of {type(tokenizer).__name__}: no decode()")
    out: list[bytes | None] = [None] * len(toks)
    anchor = next((i for i, t in enumerate(toks) if t is not None and not _special(i, added)
                   and decode([i]) == "a"), None)
    pre = decode([anchor]) if anchor is not None else ""
    for i, s in enumerate(toks):
        if s is None or _special(i, added):
            continue
        text = decode([anchor, i]) if anchor is not None else decode([i])
        out[i] = text[len(pre):].encode("utf-8") if text.startswith(pre) else text.encode("utf-8")
    extra = {i: b for i, b in enumerate(out) if b}
    return _assemble(len(toks), np.zeros(0, dtype=np.int64), b"", np.zeros(0, dtype=np.int64), extra)


@dataclass(frozen=True, eq=False)
class FirstByteIndex:
    """The text tokens grouped by their first byte: ``ids[first[b]:first[b+1]]`` start with ``b``.

    Enough for the monitor's lookups ("tokens that start with ``c``", "the longest token that is a
    prefix of ``s``") with numpy over one group, without sorting the vocabulary in Python.
    """

    vocab: Vocab = field(repr=False)
    ids: np.ndarray  # int64
    first: np.ndarray = field(repr=False)

    def group(self, b: int) -> np.ndarray:
        return self.ids[self.first[b]:self.first[b + 1]]

    def _matching(self, prefix: bytes, ids: np.ndarray) -> np.ndarray:
        """Bool over ``ids``: the token agrees with ``prefix`` on their common length."""
        flat = np.frombuffer(self.vocab.flat, dtype=np.uint8)
        off = self.vocab.offsets[ids]
        ln = self.vocab.offsets[ids + 1] - off
        ok = np.ones(ids.size, dtype=bool)
        live = np.nonzero(ln > 1)[0]  # positions still being compared
        for j in range(1, len(prefix)):
            live = live[ln[live] > j]
            if live.size == 0:
                break
            bad = flat[off[live] + j] != prefix[j]
            ok[live[bad]] = False
            live = live[~bad]
        return ok

    def with_prefix(self, prefix: bytes) -> np.ndarray:
        """Ids of the text tokens that start with ``prefix``."""
        ids = self.group(prefix[0])
        if len(prefix) == 1 or ids.size == 0:
            return ids
        ln = self.vocab.offsets[ids + 1] - self.vocab.offsets[ids]
        ids = ids[ln >= len(prefix)]
        return ids[self._matching(prefix, ids)]

    def longest_prefix_of(self, data: bytes) -> list[int]:
        """Ids of the text tokens that are a prefix of ``data``, longest first."""
        if not data:
            return []
        ids = self.group(data[0])
        ln = self.vocab.offsets[ids + 1] - self.vocab.offsets[ids]
        ids, ln = ids[ln <= len(data)], ln[ln <= len(data)]
        ok = self._matching(data, ids)
        ids, ln = ids[ok], ln[ok]
        order = np.lexsort((ids, -ln))
        return ids[order].tolist()

    def first_bytes(self, live: np.ndarray) -> np.ndarray:
        """Ids of the text tokens whose first byte is one of ``live`` (bool[256])."""
        parts = [self.group(b) for b in np.nonzero(live)[0].tolist()]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def first_byte_index(vocab: Vocab) -> FirstByteIndex:
    """Group the text tokens by first byte (one stable numpy sort)."""
    text = np.nonzero(vocab.is_text & (vocab.lengths > 0))[0].astype(np.int64)
    flat = np.frombuffer(vocab.flat, dtype=np.uint8)
    firsts = flat[vocab.offsets[text]] if text.size else np.zeros(0, dtype=np.uint8)
    order = np.argsort(firsts, kind="stable")
    first = np.searchsorted(firsts[order], np.arange(257), side="left").astype(np.int64)
    return FirstByteIndex(vocab, text[order], first)


def tokens_containing(vocab: Vocab, needles: Iterable[bytes]) -> np.ndarray:
    """Sorted ids of the text tokens that contain one of ``needles`` entirely."""
    flat = vocab.flat
    starts: list[int] = []
    lens: list[int] = []
    for nd in set(needles):
        if not nd:
            continue
        i = flat.find(nd)
        while i >= 0:
            starts.append(i)
            lens.append(len(nd))
            i = flat.find(nd, i + 1)
    if not starts:
        return np.zeros(0, dtype=np.int64)
    st = np.asarray(starts, dtype=np.int64)
    tid = np.searchsorted(vocab.offsets, st, side="right") - 1
    ok = st + np.asarray(lens, dtype=np.int64) <= vocab.offsets[tid + 1]
    ids = np.unique(tid[ok])
    return ids[vocab.is_text[ids]]
