"""Token id → bytes for any Hugging Face tokenizer (DESIGN §5: the monitor works on bytes).

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

from .errors import UsageError

__all__ = [
    "SortedVocab", "Vocab", "bytes_to_unicode", "sort_vocab", "tokenizer_fingerprint", "tokens_containing",
    "vocab_from_bytes", "vocab_from_tokenizer",
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


def vocab_from_bytes(tokens: Sequence[bytes | None], eos_ids: Iterable[int] = (),
                     kind: str = "bytes") -> Vocab:
    """A vocabulary from explicit token bytes (None = special / not text); used by tests."""
    lens = np.fromiter((len(t) if t is not None else 0 for t in tokens), dtype=np.int64, count=len(tokens))
    offsets = np.zeros(len(tokens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    flat = b"".join(t for t in tokens if t is not None)
    is_text = np.fromiter((bool(t) for t in tokens), dtype=bool, count=len(tokens))
    eos = tuple(sorted(set(eos_ids)))
    for e in eos:
        if 0 <= e < len(tokens):
            is_text[e] = False
    h = hashlib.sha256()
    h.update(kind.encode())
    h.update(offsets.tobytes())
    h.update(flat)
    h.update(is_text.tobytes())
    h.update(repr(eos).encode())
    return Vocab(len(tokens), flat, offsets, is_text, eos, kind, h.hexdigest())


# --- reading a tokenizer --------------------------------------------------------------------

def _backend(tokenizer: object) -> object | None:
    """The ``tokenizers.Tokenizer`` behind ``tokenizer`` (or itself), if there is one."""
    if hasattr(tokenizer, "backend_tokenizer"):
        return tokenizer.backend_tokenizer  # type: ignore[attr-defined]
    if type(tokenizer).__module__.startswith("tokenizers") and hasattr(tokenizer, "to_str"):
        return tokenizer
    return None


def _decoder_types(backend: object | None) -> set[str]:
    if backend is None:
        return set()
    try:
        dec = json.loads(backend.to_str()).get("decoder")  # type: ignore[attr-defined]
    except Exception:  # a backend that cannot serialise: read it the generic way
        return set()
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
    if backend is not None:
        vocab = backend.get_vocab(with_added_tokens=True)  # type: ignore[attr-defined]
    else:
        vocab = tokenizer.get_vocab()  # type: ignore[attr-defined]
    added: dict[int, bool] = {}
    dec = getattr(tokenizer, "added_tokens_decoder", None)
    if dec is None and backend is not None and hasattr(backend, "get_added_tokens_decoder"):
        dec = backend.get_added_tokens_decoder()  # type: ignore[attr-defined]
    for i, t in (dec or {}).items():
        added[int(i)] = bool(getattr(t, "special", False))
    for i in getattr(tokenizer, "all_special_ids", None) or ():
        added[int(i)] = True
    n = max(vocab.values(), default=-1) + 1
    if hasattr(tokenizer, "__len__"):
        n = max(n, len(tokenizer))  # type: ignore[arg-type]
    toks: list[str | None] = [None] * n
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


def vocab_from_tokenizer(tokenizer: object, eos_token_ids: int | Sequence[int] | None = None) -> Vocab:
    """Read every token's bytes from a Hugging Face tokenizer (or a ``tokenizers.Tokenizer``).

    ``eos_token_ids`` overrides the tokenizer's EOS (e.g. a model's generation config lists more).
    """
    backend = _backend(tokenizer)
    if backend is None and not hasattr(tokenizer, "get_vocab"):
        raise UsageError(f"expected a Hugging Face tokenizer, got {type(tokenizer).__name__}")
    toks, added = _token_strings(tokenizer, backend)
    eos = _eos_ids(tokenizer, eos_token_ids)
    types = _decoder_types(backend)
    sp_bytes = "ByteFallback" in types
    if "ByteLevel" in types:
        kind = "byte-level"
        out = _read_byte_level(toks, added)
    elif "Replace▁" in types or "Metaspace" in types or sp_bytes:
        kind = "sentencepiece"
        out = _read_sentencepiece(toks, added, byte_fallback=True)
    elif backend is None and any(t is not None and "▁" in t for t in toks[:5000]):
        kind = "sentencepiece"
        out = _read_sentencepiece(toks, added, byte_fallback=True)
    else:
        kind = "decoded"
        out = _read_decoded(tokenizer, toks, added)
    v = vocab_from_bytes(out, eos, kind)
    return v


def _special(i: int, added: dict[int, bool]) -> bool:
    return added.get(i, False)


def _read_byte_level(toks: list[str | None], added: dict[int, bool]) -> list[bytes | None]:
    enc = bytes_to_unicode()
    table = {ord(u): b for b, u in enc.items()}
    out: list[bytes | None] = [None] * len(toks)
    plain = [i for i, t in enumerate(toks) if t is not None and i not in added]
    joined = "".join(toks[i] for i in plain)  # type: ignore[misc]
    lens = [len(toks[i]) for i in plain]  # type: ignore[arg-type]
    try:
        data = joined.translate(table).encode("latin-1")
        ok = len(data) == sum(lens)
    except UnicodeEncodeError:
        ok = False
    if ok:
        pos = 0
        for i, n in zip(plain, lens):
            out[i] = data[pos:pos + n]
            pos += n
    else:  # some token outside the byte alphabet: spell those in UTF-8
        for i in plain:
            s = toks[i]
            assert s is not None
            out[i] = b"".join(bytes([table[ord(c)]]) if ord(c) in table else c.encode() for c in s)
    for i, special in added.items():
        if 0 <= i < len(toks) and toks[i] is not None and not special:
            out[i] = toks[i].encode("utf-8")  # type: ignore[union-attr]
    return out


def _read_sentencepiece(toks: list[str | None], added: dict[int, bool], *,
                        byte_fallback: bool) -> list[bytes | None]:
    out: list[bytes | None] = [None] * len(toks)
    for i, s in enumerate(toks):
        if s is None:
            continue
        m = _BYTE_TOKEN.match(s) if byte_fallback and len(s) == 6 else None
        if m is not None:
            out[i] = bytes([int(m.group(1), 16)])
        elif _special(i, added):
            continue
        elif i in added:
            out[i] = s.encode("utf-8")
        else:
            out[i] = s.replace("▁", " ").encode("utf-8")
    return out


def _read_decoded(tokenizer: object, toks: list[str | None], added: dict[int, bool]) -> list[bytes | None]:
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
    return out


def tokenizer_fingerprint(tokenizer: object, eos_token_ids: int | Sequence[int] | None = None) -> str:
    """A cheap hash of the tokenizer's vocabulary and special tokens, for cache keys."""
    h = hashlib.sha256()
    backend = _backend(tokenizer)
    h.update(repr(_eos_ids(tokenizer, eos_token_ids)).encode())
    h.update(repr(sorted(getattr(tokenizer, "all_special_ids", None) or [])).encode())
    if hasattr(tokenizer, "__len__"):
        h.update(str(len(tokenizer)).encode())  # type: ignore[arg-type]
    if backend is not None:
        d = json.loads(backend.to_str())  # type: ignore[attr-defined]
        h.update(json.dumps(d.get("decoder"), sort_keys=True).encode())
        h.update(json.dumps(d.get("added_tokens"), sort_keys=True).encode())
        vocab = backend.get_vocab(with_added_tokens=True)  # type: ignore[attr-defined]
    else:
        vocab = tokenizer.get_vocab()  # type: ignore[attr-defined]
    items = sorted(vocab.items(), key=lambda kv: kv[1])
    h.update("\x00".join(k for k, _ in items).encode("utf-8", "surrogatepass"))
    h.update(np.fromiter((v for _, v in items), dtype=np.int64, count=len(items)).tobytes())
    return h.hexdigest()


@dataclass(frozen=True, eq=False)
class SortedVocab:
    """The text tokens in byte order, for prefix ranges ("tokens that start with ``c``") and for
    byte-at-a-time walks: ``ids[i]`` is the i-th smallest token, ``keys[i]`` its bytes."""

    ids: np.ndarray  # int64
    keys: list[bytes] = field(repr=False)
    first: np.ndarray = field(repr=False)  # first[b]..first[b+1]: tokens whose first byte is b

    def with_prefix(self, prefix: bytes) -> np.ndarray:
        """Ids of the text tokens that start with ``prefix`` (unsorted by id)."""
        import bisect

        lo = bisect.bisect_left(self.keys, prefix)
        hi = lo
        n = len(self.keys)
        # tokens with this prefix are contiguous; find the end by bisecting on the successor prefix
        succ = _successor(prefix)
        hi = bisect.bisect_left(self.keys, succ, lo) if succ is not None else n
        return self.ids[lo:hi]

    def first_bytes(self, live: np.ndarray) -> np.ndarray:
        """Ids of the text tokens whose first byte is one of ``live`` (bool[256])."""
        parts = [self.ids[self.first[b]:self.first[b + 1]] for b in np.nonzero(live)[0].tolist()]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with ``prefix``."""
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        return None
    p[-1] += 1
    return bytes(p)


def sort_vocab(vocab: Vocab, order: np.ndarray | None = None) -> SortedVocab:
    """Sort the text tokens by their bytes (``order``: the sorted ids, known from a cache)."""
    toks = vocab.all_bytes()
    if order is None:
        text = np.nonzero(vocab.is_text & (vocab.lengths > 0))[0]
        order = np.asarray(sorted(text.tolist(), key=toks.__getitem__), dtype=np.int64)
    ids = np.asarray(order, dtype=np.int64)
    keys = [toks[i] for i in ids.tolist()]
    firsts = np.fromiter((k[0] for k in keys), dtype=np.int64, count=len(keys))
    first = np.searchsorted(firsts, np.arange(257), side="left").astype(np.int64)
    return SortedVocab(ids, keys, first)


def tokens_containing(vocab: Vocab, needles: Iterable[bytes]) -> np.ndarray:
    """Sorted ids of the text tokens that contain one of ``needles`` entirely."""
    flat = vocab.flat
    offsets = vocab.offsets
    found: list[np.ndarray] = []
    for nd in set(needles):
        if not nd:
            continue
        starts = np.fromiter((m.start() for m in re.finditer(b"(?=" + re.escape(nd) + b")", flat)),
                             dtype=np.int64)
        if starts.size == 0:
            continue
        tid = np.searchsorted(offsets, starts, side="right") - 1
        ok = starts + len(nd) <= offsets[tid + 1]
        found.append(tid[ok])
    if not found:
        return np.zeros(0, dtype=np.int64)
    ids = np.unique(np.concatenate(found))
    return ids[vocab.is_text[ids]]
