"""Vectorised walks of the vocabulary from byte-machine states (docs/design.md §5).

:class:`Steering` answers, for a machine state, questions about every token at once: which tokens
could trigger an event in free text (the *candidates*; every other text token is *quiet*), where
each token leads and how many states it enters, and how far a complete trace is after it. The
token index uses it to compute masks, and budget and step-limit steering to pick the tokens on a
shortest way to acceptance. Everything it computes is memoised in the object itself
(deterministically, so one instance serves every monitor of an index).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ltlagent.decode.machine import FREE, INF, UTF8, UTF8_BAD, Key, Machine
from ltlagent.decode.masks import Mask
from ltlagent.decode.trie import VocabTrie, ranges, trie_of
from ltlagent.decode.vocab import FirstByteIndex, Vocab, tokens_containing

__all__ = ["Steering"]

#: Bytes walked with numpy in :meth:`Steering.walk`; the rest of the (few) longer tokens still alive
#: then go through the machine in Python, instead of one round of array operations per byte.
VECTOR_DEPTH = 24


class Steering:
    """The vocabulary side of a token index: candidate sets, walks and the steering metrics.

    Built from the byte ``machine`` (whose tables it reads), the ``vocab`` (token bytes as one
    flat array with offsets and lengths, which tokens are text, the EOS ids), the first-byte
    ``buckets`` and ``kw_tokens`` (text tokens that contain a whole prompt string).
    """

    def __init__(self, machine: Machine, vocab: Vocab, buckets: FirstByteIndex,
                 kw_tokens: np.ndarray) -> None:
        self.machine = machine
        self.tables = machine.t
        self.vocab = vocab
        self.buckets = buckets
        self.kw_tokens = kw_tokens
        self.flat = np.frombuffer(vocab.flat, dtype=np.uint8)
        self.lengths = vocab.lengths.astype(np.int64)
        eos_mask = np.zeros(vocab.size, dtype=bool)
        eos_mask[[e for e in vocab.eos_ids if 0 <= e < vocab.size]] = True
        self.eos_mask = eos_mask  # token id -> is an EOS id
        self.nontext = np.nonzero(~vocab.is_text)[0].astype(np.int64)  # special and unknown ids
        # memos
        self._kw_cand: dict[int, np.ndarray] = {}
        self._stop_cand: dict[tuple[int, int, int], np.ndarray] = {}
        self._stop_tokens: dict[int, np.ndarray] = {}
        self._after: dict[tuple[int, bool], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._metric: dict[tuple[int, bool, bool], tuple[np.ndarray, np.ndarray]] = {}
        self._step_max: dict[tuple[int, bool], int] = {}
        self._quiet: dict[tuple[int, bool], np.ndarray] = {}
        self._quiet_max: dict[int, int] = {}
        self._quiet_dest: dict[int, np.ndarray] = {}
        self._dfa_final: dict[object, np.ndarray] = {}
        self._by_length: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._utf8_bad: dict[int, np.ndarray] = {}

    @property
    def trie(self) -> VocabTrie:
        """The vocabulary's byte trie (built on first use, shared by every index of the vocabulary)."""
        return trie_of(self.vocab)

    # -- machine facts
    def eos_viable(self, sid: int, ends_text: bool) -> bool:
        """EOS in ``sid`` leads somewhere a complete trace is still reachable from."""
        m = self.machine
        s2, _kind = m.eos(sid, ends_text)
        return s2 >= 0 and m.need(s2) < INF

    def ends_next(self, sid: int, count: int) -> bool:
        """The next text token ends the current state's text by ``:max-tokens`` (``count``: tokens
        already in it)."""
        key = self.machine.keys[sid]
        if key.mode != FREE:
            return False
        mt = self.tables.max_tokens[key.cur]
        return mt is not None and count + 1 >= mt

    # -- candidates
    def candidates(self, sid: int) -> np.ndarray:
        """Tokens that could complete a prompt string or a :stop string from free-text state
        ``sid``; every other token is "quiet" there: allowed, and no event happens inside it."""
        key = self.machine.keys[sid]
        node, cur, sn = key.node, key.cur, key.stop
        kc = self._kw_cand.get(node)
        if kc is None:
            pend = self.tables.node_bytes[node]
            parts = [self.kw_tokens]
            for kb in self.tables.lexer.keyword_bytes:
                for j in range(1, min(len(kb), len(pend) + 1)):
                    if pend.endswith(kb[:j]):
                        parts.append(self.buckets.with_prefix(kb[j:]))
            kc = self._kw_cand[node] = np.unique(np.concatenate(parts))
        stop = self.tables.stops[cur]
        if stop is None:
            return kc
        sc = self._stop_cand.get((node, cur, sn))
        if sc is None:
            st = self._stop_tokens.get(cur)
            if st is None:
                st = self._stop_tokens[cur] = tokens_containing(self.vocab, stop.keyword_bytes)
            pend = stop.pending(sn)
            parts = [st]
            for kb in stop.keyword_bytes:
                for j in range(1, min(len(kb), len(pend) + 1)):
                    if pend.endswith(kb[:j]):
                        parts.append(self.buckets.with_prefix(kb[j:]))
            sc = self._stop_cand[(node, cur, sn)] = np.unique(np.concatenate([kc, *parts]))
        return sc

    # -- walks
    def walk(self, sid: int, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Feed every candidate token from ``sid`` at once: (surviving ids, their end states, how
        many states each enters)."""
        m = self.machine
        flat, lengths = self.flat, self.lengths
        ids = cand.astype(np.int64)
        st = np.full(ids.size, sid, dtype=np.int64)
        off = self.vocab.offsets[ids]
        ln = lengths[ids]
        ent = np.zeros(ids.size, dtype=np.int64)
        out_i: list[np.ndarray] = []
        out_s: list[np.ndarray] = []
        out_e: list[np.ndarray] = []
        j = 0
        while ids.size:
            if j >= VECTOR_DEPTH:  # a few long tokens (whitespace runs…): byte by byte in Python
                self._walk_rest(ids, st, off + j, ln - j, ent, out_i, out_s, out_e)
                break
            m.ensure(st)
            byte = flat[off + j]
            ent += m.E[st, byte]
            st = m.T[st, byte].astype(np.int64)
            j += 1
            keep = st >= 0
            fin = keep & (ln == j)
            if fin.any():
                out_i.append(ids[fin])
                out_s.append(st[fin])
                out_e.append(ent[fin])
                keep &= ~fin
            ids, st, off, ln, ent = ids[keep], st[keep], off[keep], ln[keep], ent[keep]
        if not out_i:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z
        return np.concatenate(out_i), np.concatenate(out_s), np.concatenate(out_e)

    def _walk_rest(self, ids: np.ndarray, st: np.ndarray, off: np.ndarray, ln: np.ndarray, ent: np.ndarray,
                   out_i: list[np.ndarray], out_s: list[np.ndarray], out_e: list[np.ndarray]) -> None:
        """Finish :meth:`walk` for tokens still alive: the remaining ``ln`` bytes from ``off``."""
        m = self.machine
        flat = self.vocab.flat
        keep_i: list[int] = []
        keep_s: list[int] = []
        keep_e: list[int] = []
        for i, s, o, n, e in zip(ids.tolist(), st.tolist(), off.tolist(), ln.tolist(), ent.tolist()):
            s2, evs = m.feed(s, flat[o:o + n])
            if s2 >= 0:
                keep_i.append(i)
                keep_s.append(s2)
                keep_e.append(e + sum(1 for ev, _ in evs if ev > 0))
        if keep_i:
            out_i.append(np.asarray(keep_i, dtype=np.int64))
            out_s.append(np.asarray(keep_s, dtype=np.int64))
            out_e.append(np.asarray(keep_e, dtype=np.int64))

    def walk_vocab(self, sid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`walk` over every text token, through the vocabulary's byte trie: a prefix the
        machine rejects prunes every token below it, and shared prefixes are stepped once
        (:mod:`ltlagent.decode.trie`). Same tokens, end states and entry counts as
        ``walk(sid, all text tokens)``, in another order."""
        m = self.machine
        levels = self.trie.levels
        out_i: list[np.ndarray] = []
        out_s: list[np.ndarray] = []
        out_e: list[np.ndarray] = []
        st = np.asarray([sid], dtype=np.int64)  # the live nodes' machine states (the root's, first)
        ent = np.zeros(1, dtype=np.int64)
        nodes = np.zeros(0, dtype=np.int64)
        for d, lv in enumerate(levels):
            if d == 0:
                idx = np.arange(lv.parent.size, dtype=np.int64)
                owner = np.zeros(idx.size, dtype=np.int64)
            else:
                above = levels[d - 1]
                idx, owner = ranges(above.child_lo[nodes], above.child_hi[nodes])
                if idx.size == 0:
                    break
            m.ensure(st)
            ps = st[owner]
            b = lv.byte[idx]
            ns = m.T[ps, b]
            keep = ns >= 0
            nodes = idx[keep]
            if nodes.size == 0:
                break
            st = ns[keep].astype(np.int64)
            ent = ent[owner[keep]] + m.E[ps[keep], b[keep]]
            tidx, towner = ranges(lv.tok_lo[nodes], lv.tok_hi[nodes])
            if tidx.size:
                out_i.append(lv.tokens[tidx])
                out_s.append(st[towner])
                out_e.append(ent[towner])
        if not out_i:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z
        return np.concatenate(out_i), np.concatenate(out_s), np.concatenate(out_e)

    def needs(self, ends: np.ndarray, steps: bool = False) -> np.ndarray:
        """``need`` (or ``need_steps``) of every machine state in ``ends``."""
        m = self.machine
        if ends.size == 0:
            return np.zeros(0, dtype=np.int64)
        fn = m.need_steps if steps else m.need
        uniq, inv = np.unique(ends, return_inverse=True)
        nu = np.fromiter((fn(s) for s in uniq.tolist()), dtype=np.int64, count=uniq.size)
        return nu[inv]

    # -- steering
    def after(self, sid: int, ends_text: bool, base: Mask) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every token ``base`` allows that keeps a completion reachable, the machine state after
        it, and how many states it enters."""
        hit = self._after.get((sid, ends_text))
        if hit is not None:
            return hit
        m = self.machine
        allowed = base.allowed_ids()
        is_eos = self.eos_mask[allowed]
        if base.quiet:  # free text: walk only the candidates; quiet tokens by where they leave the lexer
            key = m.keys[sid]
            cand = self.candidates(sid)
            ids, ends, ent = self.walk(sid, cand)
            quiet = self.vocab.is_text.copy()
            quiet[cand] = False
            if self.tables.utf8:
                quiet &= ~self.utf8_breaking(key.u)
            qids = np.nonzero(quiet)[0].astype(np.int64)
            ids = np.concatenate([ids, qids])
            ends = np.concatenate([ends, self._quiet_sids(key, self._quiet_where(key, qids))])
            ent = np.concatenate([ent, np.zeros(qids.size, dtype=np.int64)])
        else:
            ids, ends, ent = self.walk(sid, allowed[~is_eos])
        if is_eos.any():
            n = int(is_eos.sum())
            ids = np.concatenate([ids, allowed[is_eos]])
            ends = np.concatenate([ends, np.full(n, m.eos(sid, ends_text)[0], dtype=np.int64)])
            ent = np.concatenate([ent, np.zeros(n, dtype=np.int64)])
        keep = self.needs(ends) < INF
        hit = self._after[(sid, ends_text)] = (ids[keep], ends[keep], ent[keep])
        return hit

    def metric(self, sid: int, ends_text: bool, base: Mask, ending: bool) -> tuple[np.ndarray, np.ndarray]:
        """For the tokens of :meth:`after`: the bytes still needed after each, and the states
        entered by it plus those still needed after it (``ending``: the text ends after it by
        ``:max-tokens``)."""
        hit = self._metric.get((sid, ends_text, ending))
        if hit is None:
            m = self.machine
            _ids, ends, ent = self.after(sid, ends_text, base)
            if ending:
                uniq, inv = np.unique(ends, return_inverse=True)
                ended = (m.end_text(e) for e in uniq.tolist())
                mapped = np.fromiter(ended, dtype=np.int64, count=uniq.size)[inv]
                ends = np.where(ent == 0, mapped, ends)  # a token that enters a state starts a new text
            hit = self._metric[(sid, ends_text, ending)] = (self.needs(ends), ent + self.needs(ends, True))
        return hit

    def max_need(self, sid: int, base: Mask) -> int:
        """Upper bound of ``need`` after any token ``base`` allows."""
        mx = base.max_need if base.max_need is not None else INF
        if not base.quiet:
            return mx
        # a free-text mask: the candidates' bound, and every state a quiet token can lead to
        q = self._quiet_max.get(sid)
        if q is None:  # asked at every token of a cursor with a budget
            q = self._quiet_max[sid] = int(self._quiet_needs(sid).max(initial=0))
        return max(mx, q)

    def max_step_cost(self, sid: int, ends_text: bool, base: Mask) -> int:
        """Upper bound of (states entered + states still needed) over the tokens ``base`` allows."""
        hit = self._step_max.get((sid, ends_text))
        if hit is None:
            m = self.machine
            if base.quiet:  # candidates walked, quiet tokens bounded by the states they lead to
                _ids, ends, ent = self.walk(sid, self.candidates(sid))
                costs = ent + self.needs(ends, True)
                quiet = self._quiet_needs(sid, True)
                parts = [int(costs[costs < INF].max(initial=0)), int(quiet[quiet < INF].max(initial=0))]
                if self.eos_viable(sid, ends_text):
                    parts.append(m.need_steps(m.eos(sid, ends_text)[0]))
                hit = max(parts)
            else:
                costs = self.metric(sid, ends_text, base, False)[1]
                hit = int(costs.max(initial=0))
            self._step_max[(sid, ends_text)] = hit
        return hit

    # -- quiet tokens
    def _quiet_needs(self, sid: int, steps: bool = False) -> np.ndarray:
        """``need`` (or ``need_steps``) of every state a quiet token leads to from free-text state
        ``sid`` (:meth:`_quiet_dests`)."""
        hit = self._quiet.get((sid, steps))
        if hit is None:
            hit = self._quiet[(sid, steps)] = self.needs(self._quiet_dests(sid), steps)
        return hit

    def _quiet_dests(self, sid: int) -> np.ndarray:
        """The states the quiet tokens of free-text state ``sid`` lead to (those that keep UTF-8
        valid, when it is checked): the bound of budget steering is taken over these only, not
        over every lexer node × stop node × UTF-8 state, whose distances cost 8× as much with UTF-8."""
        hit = self._quiet_dest.get(sid)
        if hit is None:
            key = self.machine.keys[sid]
            quiet = self.vocab.is_text.copy()
            quiet[self.candidates(sid)] = False
            if self.tables.utf8:
                quiet &= ~self.utf8_breaking(key.u)
            where = np.unique(self._quiet_where(key, np.nonzero(quiet)[0].astype(np.int64)))
            hit = self._quiet_dest[sid] = self._quiet_sids(key, where)
        return hit

    def _quiet_sids(self, key: Key, where: np.ndarray) -> np.ndarray:
        """The free-text states of :meth:`_quiet_where`'s codes ``where`` (same spec state as
        ``key``), interned."""
        m = self.machine
        stop = self.tables.stops[key.cur]
        nstop = stop.num_nodes if stop is not None else 1
        nnl = 2 if self.tables.newline else 1
        nu = UTF8_BAD if self.tables.utf8 else 1
        uniq, inv = np.unique(where, return_inverse=True)
        out = []
        for w in uniq.tolist():
            w, u = divmod(w, nu)
            w, nl = divmod(w, nnl)
            node, sn = divmod(w, nstop)
            out.append(m.intern(Key(FREE, key.q, key.cur, node, 0, sn, 0, nl, u)))
        return np.asarray(out, dtype=np.int64)[inv.reshape(-1)] if out else np.zeros(0, dtype=np.int64)

    def _quiet_where(self, key: Key, qids: np.ndarray) -> np.ndarray:
        """A code of the state after each quiet token in ``qids`` from free-text state ``key``:
        ((lexer node × stop nodes + stop node) × 2 + last byte a newline) × UTF-8 states + UTF-8
        state (the factors present only where used; decoded by :meth:`_quiet_sids`)."""
        node, cur, sn = key.node, key.cur, key.stop
        where = self._dfa_final_of(("lex", node), self.tables.lexer.goto, node)[qids].astype(np.int64)
        stop = self.tables.stops[cur]
        if stop is not None:
            where = where * stop.num_nodes + self._dfa_final_of(("stop", cur, sn), stop.goto, sn)[qids]
        if self.tables.newline:
            ln = self.lengths[qids]
            last = self.flat[self.vocab.offsets[qids] + np.maximum(ln - 1, 0)]
            where = where * 2 + np.where(ln > 0, last == 0x0A, bool(key.sep))
        if self.tables.utf8:
            where = where * UTF8_BAD + self._dfa_final_of(("utf8", key.u), UTF8, key.u)[qids]
        return where

    def utf8_breaking(self, u: int) -> np.ndarray:
        """bool per token id: the token's bytes are not valid UTF-8 after UTF-8 state ``u``
        (:data:`~ltlagent.decode.machine.UTF8`); never true for tokens that are not text."""
        hit = self._utf8_bad.get(u)
        if hit is None:
            final = self._dfa_final_of(("utf8", u), UTF8, u)
            hit = self._utf8_bad[u] = (final == UTF8_BAD) & self.vocab.is_text
        return hit

    def _tokens_by_length(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Text tokens longest first, their offsets, and how many are longer than j bytes (per j)."""
        hit = self._by_length
        if hit is None:
            lengths = self.lengths
            ids = np.nonzero(lengths > 0)[0]
            ids = ids[np.argsort(-lengths[ids], kind="stable")]
            ln = lengths[ids]
            counts = np.bincount(ln, minlength=int(ln.max(initial=0)) + 1)
            active = np.concatenate([ln.size - np.cumsum(counts), [0]])  # active[j]: longer than j
            hit = self._by_length = (ids, self.vocab.offsets[ids], active)
        return hit

    def _dfa_final_of(self, key: object, goto: Sequence[Sequence[int]], start: int) -> np.ndarray:
        """For every token: the node of a byte DFA after its bytes from ``start`` (vectorised; only
        meaningful for tokens that trigger nothing in it). Cached under ``key``."""
        hit = self._dfa_final.get(key)
        if hit is not None:
            return hit
        table = np.asarray(goto, dtype=np.int32)
        flat = self.flat
        ids, off, active = self._tokens_by_length()
        out = np.zeros(self.vocab.size, dtype=np.int32)
        st = np.full(ids.size, start, dtype=np.int32)
        # tokens sorted by length, longest first: at byte j the live ones are a prefix, no compaction
        for j in range(active.size - 1):
            n, n_next = active[j], active[j + 1]
            st = table[st[:n], flat[off[:n] + j]]
            if n_next < n:
                out[ids[n_next:n]] = st[n_next:n]
        self._dfa_final[key] = out
        return out
