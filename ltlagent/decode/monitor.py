"""The token-level decoding monitor (docs/design.md §5): compile once (:class:`TokenIndex`), step cheaply
(:class:`Monitor`, one cursor per sequence).

Public API (stable; the agent runner and the ``transformers`` processor are built on it):

* :func:`build_index` — spec + tokenizer → frozen :class:`TokenIndex` (expensive, cached on disk).
* :class:`Monitor` — runtime cursor: ``mask_into`` / ``allowed_token_ids`` / ``forced_token`` say
  what the model may write next; ``advance`` consumes a token and returns :class:`Event` s;
  ``feed_env`` appends environment text after an ``:env-input`` state was entered.

Semantics: generated text is lexed by the spec's keyword lexer (the same one validation uses).
In a free-text state every token is allowed except those that would make the lexer recognise the
prompt string of a state the automaton forbids next, or break the state's content constraint.
When the state's text ends without a prompt string (EOS, a ``:stop`` string, ``:max-tokens``)
only tokens that begin an allowed prompt string are allowed; once one prompt string is determined
the rest is forced. ``:env-input`` states pause. A complete trace lets EOS through and finishes.
With ``max_new_tokens`` (and/or ``max_steps``, states visited) the monitor steers onto a shortest
completion when the budget only just suffices, so finite specs always end complete. With
``newline`` a text that ended without a newline gets one before the next prompt string.
"""

from __future__ import annotations

import codecs
import gc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ltlagent.decode import cache as disk
from ltlagent.decode import warm
from ltlagent.decode.events import Event
from ltlagent.decode.machine import (
    DONE,
    END,
    ENV,
    FREE,
    INF,
    ByteEvent,
    EventKind,
    Machine,
    SpecTables,
    boundary_strings,
    build_tables,
    decode_event,
)
from ltlagent.decode.masks import Mask
from ltlagent.decode.memo import FastEnter, FastStep, IndexMemo, Move, TokenStep
from ltlagent.decode.steering import Steering
from ltlagent.decode.vocab import (
    FirstByteIndex,
    Vocab,
    first_byte_index,
    read_tokenizer,
    tokens_containing,
    vocab_from_reading,
)
from ltlagent.errors import CompileError, UsageError
from ltlagent.logic.compiled import CompiledSpec, compile_spec
from ltlagent.spec.syntax import Spec

if TYPE_CHECKING:
    import torch

__all__ = ["PRECOMPUTE_LIMIT", "START_MOVES", "Event", "StateText", "Segment", "TokenIndex", "Monitor",
           "build_index",
           "spec_fingerprint"]

#: :func:`build_index` computes every reachable state's mask at build time when there are at most
#: this many states (about 800 for the bundled ReAct specs: 0.6 s at 32k tokens, 1.0 s at 128k).
PRECOMPUTE_LIMIT = 4096
#: The start's tokens whose steps an index takes at build time, with the masks (:meth:`TokenIndex._warm_up`).
START_MOVES = 256


@dataclass(frozen=True)
class StateText:
    """One visited state and its content (text between its prompt and the next, stripped)."""

    state: str
    text: str
    by_env: bool = False
    forced: bool = False


class Segment(NamedTuple):
    """One visited state in a monitor's record (:attr:`Monitor.segments`), as byte offsets into
    :attr:`Monitor.text_bytes`. Replaced, never changed, when the monitor learns more about it, so
    a :meth:`Monitor.fork` shares the record's closed part."""

    state: int  # the spec state's index
    start: int  # where its content starts (just after its prompt string)
    prompt: int  # where its prompt string starts
    tokens_before: int  # tokens consumed before the one that completed its prompt string
    forced: bool = False  # its prompt string was written after the text had ended
    end: int | None = None  # where its content ends (None while it is the current state)
    by_env: bool = False  # the environment wrote its text
    ended: str | None = None  # why its text ended without a prompt string ("eos", "stop", "max-tokens"…)
    label: str | None = None  # "boundary": the context label at which the model began a new example


@dataclass(frozen=True, eq=False)
class TokenIndex:
    """Spec × tokenizer, compiled: token bytes, candidate sets, the byte machine.

    Immutable as far as its users can tell; the machine rows and masks for the (automaton state,
    lexer node, content state) combinations actually visited are computed on first use and
    memoised inside (deterministically, so one index can serve many monitors). Build it with
    :func:`build_index` (or :meth:`create` from its parts).
    """

    compiled: CompiledSpec
    tool_names: tuple[str, ...] | None
    vocab: Vocab = field(repr=False)
    buckets: FirstByteIndex = field(repr=False)
    tables: SpecTables = field(repr=False)
    kw_tokens: np.ndarray = field(repr=False)  # text tokens that contain a whole prompt string
    steering: Steering = field(repr=False)  # vocabulary walks: candidates, masks' metrics, steering
    _memo: IndexMemo = field(repr=False)
    from_cache: bool = False
    #: test-only: one masking rule switched off, to show the differential tests catch it
    #: ("keywords": free text may write forbidden prompt strings; "budget": no token-budget steering;
    #: "steps": no step-limit steering)
    mutation: str | None = None
    #: how masks walk the vocabulary outside free text: ``"trie"`` (the byte trie, pruning rejected
    #: prefixes: :meth:`Steering.walk_vocab`) or ``"tokens"`` (token by token over those with a
    #: possible first byte, the earlier way; kept to test that both give the same masks)
    walker: str = "trie"

    @classmethod
    def create(cls, compiled: CompiledSpec, tool_names: tuple[str, ...] | None, vocab: Vocab,
               buckets: FirstByteIndex, tables: SpecTables, kw_tokens: np.ndarray, *,
               from_cache: bool = False, mutation: str | None = None, walker: str = "trie") -> TokenIndex:
        """An index with a fresh byte machine, steering and memo over these parts."""
        if walker not in ("trie", "tokens"):
            raise ValueError(f"unknown walker {walker!r}")
        machine = Machine(tables)
        return cls(compiled, tool_names, vocab, buckets, tables, kw_tokens,
                   Steering(machine, vocab, buckets, kw_tokens), IndexMemo(machine), from_cache, mutation,
                   walker)

    @property
    def vocab_size(self) -> int:
        """Number of token ids the index knows (masks cover at least this many logits)."""
        return self.vocab.size

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        """Token ids that end generation."""
        return self.vocab.eos_ids

    @property
    def machine(self) -> Machine:
        return self._memo.machine

    @property
    def memo(self) -> IndexMemo:
        """What the index computed so far (machine rows, masks…; :mod:`ltlagent.decode.memo`)."""
        return self._memo

    @property
    def start(self) -> int:
        """The machine state before anything was written."""
        return self._memo.machine.start

    # -- stepping
    def is_eos(self, tok: int) -> bool:
        return tok in self.vocab.eos_ids

    def token_step(self, sid: int, tok: int) -> TokenStep:
        """Feed the bytes of text token ``tok``: (next state or -1, events with the byte offset
        after the byte that caused each)."""
        memo = self._memo.steps
        k = sid * self.vocab.size + tok
        hit = memo.get(k)
        if hit is None:
            if not (0 <= tok < self.vocab.size) or not self.vocab.is_text[tok]:
                hit = (-1, ())
            else:
                s2, evs = self._memo.machine.feed(sid, self.vocab.token_bytes(tok))
                hit = (s2, tuple((decode_event(ev), off) for ev, off in evs))
            memo[k] = hit
        return hit

    def advance(self, sid: int, count: int, tok: int, ends_text: bool
                ) -> tuple[int, int, tuple[tuple[ByteEvent, int], ...], str | None]:
        """One token for a cursor ``(sid, count)`` (count: tokens in the current state's text).

        Returns (next state or -1, next count, byte events, why the text ended or None).
        """
        if tok in self.vocab.eos_ids:
            s2, kind = self._memo.machine.eos(sid, ends_text)
            return s2, 0, (), ("eos" if kind == "end" else None)
        move = self._memo.moves.get((sid, tok))
        if move is None:
            move = self._memo.moves[(sid, tok)] = self._move(sid, tok)
        s2, evs, enters, reason, mt = move
        if s2 < 0:
            return -1, 0, evs, None
        count = 0 if enters else count + 1
        if mt is not None and count >= mt:
            s3 = self._memo.machine.end_text(s2)
            if s3 != s2:
                s2, reason = s3, "max-tokens"
        return s2, count, evs, reason

    def _move(self, sid: int, tok: int) -> Move:
        """What :meth:`advance` needs to know of text token ``tok`` in ``sid``, whatever the count:
        (next state, events, whether a state is entered, why the text ended, the ``:max-tokens`` of
        the free text it leads to)."""
        s2, evs = self.token_step(sid, tok)
        if s2 < 0:
            return -1, evs, False, None, None
        kinds = {ev.kind for ev, _ in evs}
        reason = "stop" if EventKind.STOP in kinds else "boundary" if EventKind.BOUNDARY in kinds else None
        key = self._memo.machine.keys[s2]
        mt = self.tables.max_tokens[key.cur] if key.mode == FREE else None
        return s2, evs, EventKind.ENTER in kinds, reason, mt

    # -- masks
    def mask(self, sid: int, ends_text: bool = False, remaining: int | None = None,
             steps_left: int | None = None, count: int | None = None) -> Mask:
        """The allowed tokens in machine state ``sid``. With ``remaining`` (tokens the model may still
        generate), only those after which a complete trace still fits; with ``steps_left`` (states
        that may still be entered), only those after which a complete trace needs no more states —
        each falls back to the tokens on a shortest way when nothing fits (steps first, then
        tokens). ``count``: tokens already in the current state's text, so that a token that ends
        it by ``:max-tokens`` is judged by the state after that end."""
        memo = self._memo
        base = memo.masks.get((sid, ends_text))
        if base is None:
            base = memo.masks[(sid, ends_text)] = self._compute_mask(sid, ends_text)
        if self.tables.infinite or (remaining is None and steps_left is None):
            return base
        steer = self.steering
        ending = count is not None and steer.ends_next(sid, count)
        slack = 1 + max(self.tables.kw_len) if ending else 0  # an ended text may need a separator
        b_on = (remaining is not None and self.mutation != "budget"
                and remaining - 1 < steer.max_need(sid, base) + slack)
        s_on = (steps_left is not None and self.mutation != "steps"
                and (ending or steps_left < steer.max_step_cost(sid, ends_text, base)))
        if not (b_on or s_on):
            return base
        ids = steer.after(sid, ends_text, base)[0]
        if ids.size == 0:
            return base
        sel = np.ones(ids.size, dtype=bool)
        s_thr = b_thr = -1
        if s_on and steps_left is not None:
            costs = steer.metric(sid, ends_text, base, ending)[1]
            s_thr = max(int(steps_left), int(costs.min()))
            sel = costs <= s_thr
        if b_on and remaining is not None:
            needs = steer.metric(sid, ends_text, base, ending)[0]
            b_thr = max(int(remaining) - 1, int(needs[sel].min()))
            sel &= needs <= b_thr
        key = (sid, ends_text, ending, b_thr, s_thr)
        hit = memo.steer.get(key)
        if hit is None:
            hit = memo.steer[key] = Mask(self.vocab.size, allowed=ids[sel])
        return hit

    def final_mask(self) -> Mask:
        """The mask of a sequence that must end: EOS only (every token that is not text, for a
        tokenizer without EOS)."""
        return self.mask(self._memo.machine.done_state())

    def _compute_mask(self, sid: int, ends_text: bool) -> Mask:
        m = self._memo.machine
        steer = self.steering
        key = m.keys[sid]
        mode, cur = key.mode, key.cur
        size = self.vocab.size
        eos = np.asarray(self.vocab.eos_ids, dtype=np.int64)
        if mode in (ENV, DONE):
            mk = Mask(size, allowed=eos) if eos.size else Mask(size, forbidden=steer.nontext)
            mk.max_need = 0
            return mk
        eos_ok = eos.size > 0 and steer.eos_viable(sid, ends_text)
        eos_need = m.need(m.eos(sid, ends_text)[0]) if eos_ok else 0
        if mode == FREE and self.tables.content[cur] is None:
            cand = steer.candidates(sid)
            ids, ends, _ent = steer.walk(sid, cand)
            needs = steer.needs(ends)
            good = ids[needs < INF]
            bad = np.setdiff1d(cand, good) if self.mutation != "keywords" else cand[:0]
            forb = np.concatenate([steer.nontext, bad])
            if self.tables.utf8:  # quiet tokens that break UTF-8 here (candidates were walked)
                forb = np.concatenate([forb, np.nonzero(steer.utf8_breaking(key.u))[0]])
            if eos_ok:
                forb = np.setdiff1d(forb, eos)
            mk = Mask(size, forbidden=forb)
            mk.max_need = max(int(needs[needs < INF].max()) if good.size else 0, eos_need)
            mk.quiet = True  # the bound for quiet tokens is added lazily by Steering.max_need
            return mk
        if mode == END and not eos_ok:
            forced = self._forced_token(sid)
            if forced is not None:
                mk = Mask(size, allowed=np.asarray([forced[0]]))
                mk.max_need = forced[1]
                return mk
        ids, ends, _ent = steer.walk_vocab(sid) if self.walker == "trie" else \
            steer.walk(sid, self.buckets.first_bytes(self._live_bytes(sid)))
        needs = steer.needs(ends)
        ok = needs < INF
        allowed = ids[ok]
        if eos_ok:
            allowed = np.concatenate([allowed, eos])
        mk = Mask(size, allowed=allowed)
        mk.max_need = max(int(needs[ok].max()) if ok.any() else 0, eos_need)
        return mk

    def precompute(self, ends_text: Sequence[bool] = (False,), limit: int = PRECOMPUTE_LIMIT) -> int:
        """Compute now the mask of every machine state a cursor can reach between two tokens
        (:meth:`Machine.reachable`; for monitors whose ``eos_ends_text`` is in ``ends_text``), so
        that no step pays a first visit. Returns how many masks were computed; 0, computing
        nothing, when more than ``limit`` states are reachable (their masks are then computed on
        first visit). Budget-steering masks are still computed when a budget runs low."""
        m = self._memo.machine
        sids = m.reachable(tuple(ends_text), limit)
        if sids is None:
            return 0
        n = 0
        masks = self._memo.masks
        for sid in sids:
            for et in ends_text:
                if (sid, et) not in masks:
                    self.mask(sid, et)
                    n += 1
        self._memo.precomputed = True
        for mk in masks.values():  # their membership lookups too (allows: the first step of a token)
            mk.prepare()
        if n:
            # the objects just made would otherwise trigger a full collection during the first
            # decoding steps (a 40 ms pause measured at 128k tokens): take it now, at build time
            gc.collect()
            self._warm_up()
            m.reserve(2 * len(m.keys) + 256)  # states first met mid-decoding (inside quiet tokens)
        return n

    def _warm_up(self) -> None:
        """Take the first steps now, at build time: every cursor's first step is from the start,
        so a cursor steps over each token the start allows (up to :data:`START_MOVES` of them)
        and learns it as a fast step. Measured at 128k tokens, the first step of the first
        cursor otherwise took 0.06-0.3 ms (code, memory and tables touched for the first time)."""
        start = self._memo.machine.start
        for ets in (False, True):
            mk = self.mask(start, ets)
            for tok in mk.allowed_ids()[:START_MOVES].tolist():
                Monitor(self, eos_ends_text=ets).advance(tok)

    def _live_bytes(self, sid: int) -> np.ndarray:
        """bool[256]: the bytes the machine accepts in ``sid``."""
        m = self._memo.machine
        if not m.ready[sid]:
            m.row(sid)
        return m.T[sid] >= 0

    def _forced_token(self, sid: int) -> tuple[int, int] | None:
        """In END mode with one possible next state: the longest token on a shortest way to its
        prompt string, and the bytes still needed after it."""
        m = self._memo.machine
        if len(m.allowed_next(sid)) != 1:
            return None
        for tok in self.buckets.longest_prefix_of(m.entry_path(sid)):
            s2, _ = self.token_step(sid, tok)
            if s2 >= 0 and m.need(s2) < INF:
                return tok, m.need(s2)
        return None

    def mutated(self, rule: str) -> TokenIndex:
        """A fresh copy with one masking rule disabled (tests only; see :attr:`mutation`)."""
        if rule not in ("keywords", "budget", "steps"):
            raise ValueError(f"unknown mutation {rule!r}")
        return TokenIndex.create(self.compiled, self.tool_names, self.vocab, self.buckets, self.tables,
                                 self.kw_tokens, from_cache=self.from_cache, mutation=rule,
                                 walker=self.walker)

    def with_walker(self, walker: str) -> TokenIndex:
        """A fresh copy (nothing computed yet) whose masks walk the vocabulary the ``walker`` way
        (see :attr:`walker`; tests and benchmarks compare the two)."""
        return TokenIndex.create(self.compiled, self.tool_names, self.vocab, self.buckets, self.tables,
                                 self.kw_tokens, from_cache=self.from_cache, mutation=self.mutation,
                                 walker=walker)

    @property
    def newline(self) -> bool:
        """A text that ends without a newline gets one before the next prompt string."""
        return self.tables.newline

    def variant(self, newline: bool) -> TokenIndex:
        """This index with the newline separator switched on or off (built once, then shared).
        It stays off where it could change what the lexer reads (see :mod:`ltlagent.decode.machine`)."""
        if newline == self.tables.newline:
            return self
        found = self._memo.variants.get(newline)
        if isinstance(found, TokenIndex):
            return found
        tables = build_tables(self.compiled, self.tool_names, frozenset(self.vocab.single_byte_tokens()),
                              newline, self.tables.boundaries, self.tables.utf8)
        hit = TokenIndex.create(self.compiled, self.tool_names, self.vocab, self.buckets, tables,
                                self.kw_tokens, from_cache=self.from_cache, mutation=self.mutation,
                                walker=self.walker)
        if tables.newline != newline:  # not possible for this spec and tokenizer
            hit = self
        elif self._memo.disk_key is not None:  # persisted (and precomputed) like the index it varies
            warm.attach(hit, self._memo.disk_key)
            if self._memo.precomputed and hit.precompute():
                warm.save_masks(hit)
        self._memo.variants[newline] = hit
        return hit

    def allowed_next_states(self, sid: int) -> tuple[str, ...]:
        """Spec states whose prompt string can come next from machine state ``sid``."""
        m = self._memo.machine
        if m.keys[sid].mode == DONE:
            return ()
        return tuple(self.tables.names[k] for k in sorted(m.allowed_next(sid)))


def spec_fingerprint(compiled: CompiledSpec, tool_names: Sequence[str] | None) -> object:
    """What of a spec the token index depends on (for cache keys)."""
    return {"formula": compiled.automaton.formulas.coded,
            "behavior": compiled.automaton.formulas.readable,
            "states": [st.to_dict() for st in compiled.spec.states],
            "tools": list(tool_names) if tool_names is not None else None}


def build_index(compiled: CompiledSpec | Spec | str | Path, tokenizer: object, *,
                tool_names: Sequence[str] | None = None, cache: bool = True,
                eos_token_ids: int | Sequence[int] | None = None, newline: bool = False,
                context_labels: Sequence[str] = (), precompute: bool | None = None,
                utf8: bool = True) -> TokenIndex:
    """Compile ``compiled`` (a :class:`CompiledSpec`; a spec, spec path or bundled name also works)
    for ``tokenizer`` (any Hugging Face tokenizer, a ``tokenizers.Tokenizer``, or a
    :class:`~ltlagent.decode.vocab.Vocab`).

    ``tool_names`` fills states declared ``(:choices :tools)``. With ``cache`` the vocabulary
    reading is read from / written to the on-disk cache (:mod:`ltlagent.decode.cache`), keyed by the spec,
    the vocabulary hash and the ltlagent and Spot versions. ``eos_token_ids`` overrides the
    tokenizer's EOS (a model's generation config may list several). ``newline``: see
    :meth:`TokenIndex.variant`. ``context_labels`` (e.g. :data:`~ltlagent.text.lexer.CONTEXT_LABELS`):
    the example boundary: a line that starts with ``<label>:`` inside any model-written state ends
    that state's text as EOS would (real models run on past the answer into a new example).
    ``utf8``: the model's text must stay valid UTF-8: a token that would leave a byte sequence no
    UTF-8 text can continue (a lone continuation byte, an overlong form, an unfinished character
    before a prompt string or EOS) is forbidden, as grammar engines over characters do; off, any
    bytes are allowed and the model decides. ``precompute``: compute every reachable state's mask
    now (:meth:`TokenIndex.precompute`, for cursors that do not end a text on EOS, as logits
    processors run), so that no decoding step pays a first visit; default: when the disk cache is
    on, where the masks are stored beside the index and loaded by later processes instead of being
    computed again.
    """
    if not isinstance(compiled, CompiledSpec):
        compiled = compile_spec(compiled)
    if compiled.spec.is_event_spec:
        raise UsageError(f"spec {compiled.spec.name!r} declares event states (chat events): "
                         "decoding them needs the tool-call formats of issue 18, not yet built",
                         hint="check logs against it with: ltlagent check-log SPEC LOG")
    tools = tuple(tool_names) if tool_names is not None else None
    vocab: Vocab | None = tokenizer if isinstance(tokenizer, Vocab) else None
    reading = read_tokenizer(tokenizer, eos_token_ids) if vocab is None else None
    key = None
    entry = None
    if cache and disk.cache_enabled():
        if vocab is not None:
            fp = vocab.fingerprint
        else:
            assert reading is not None
            fp = reading.fingerprint()
        key = disk.cache_key(spec_fingerprint(compiled, tools), fp)
        entry = disk.load_entry(key)
    if entry is not None:
        vocab = Vocab(int(entry["size"]), entry["flat"].tobytes(), entry["offsets"], entry["is_text"],
                      tuple(int(i) for i in entry["eos"]), str(entry["kind"]), str(entry["fingerprint"]))
        kw = entry["kw"]
    else:
        if vocab is None:
            assert reading is not None
            vocab = vocab_from_reading(reading)
        kw = tokens_containing(vocab, compiled.lexer.keyword_bytes)
    tables = build_tables(compiled, tools, frozenset(vocab.single_byte_tokens()), newline,
                          boundary_strings(compiled, context_labels), utf8)
    index = TokenIndex.create(compiled, tools, vocab, first_byte_index(vocab), tables, kw,
                              from_cache=entry is not None)
    if index.machine.need(index.start) >= INF:
        raise CompileError(f"the tokenizer cannot write the prompt strings of {compiled.spec.name} "
                           "(some byte of a prompt string is not a token by itself)")
    if key is not None and entry is None:
        disk.save_entry(key, {
            "size": np.asarray(vocab.size), "flat": np.frombuffer(vocab.flat, dtype=np.uint8),
            "offsets": vocab.offsets, "is_text": vocab.is_text,
            "eos": np.asarray(vocab.eos_ids, dtype=np.int64),
            "kind": np.asarray(vocab.kind), "fingerprint": np.asarray(vocab.fingerprint),
            "kw": kw})
    if key is not None:
        warm.attach(index, key)  # masks computed by earlier processes, and those of this one later
    if precompute or (precompute is None and key is not None):
        if index.precompute() and key is not None:
            warm.save_masks(index)
    return index


_UTF8 = codecs.getincrementaldecoder("utf-8")
#: The fast-step row of a cursor that may take none (read-only).
_NO_STEPS: Mapping[int, FastStep] = MappingProxyType({})


class Monitor:
    """Runtime cursor over a :class:`TokenIndex`: one per generated sequence, the only per-sequence
    state there is (runners, logits processors and the vLLM batch all hold monitors).

    ``max_new_tokens``: the number of tokens the model may generate (environment text does not
    count; :meth:`set_remaining` updates it when something else uses up the context); when given,
    the monitor keeps enough room to reach a complete trace. ``max_steps``: the most states the
    trace may visit; when given, the monitor steers onto a shortest way to acceptance once the
    states left only just suffice. ``eos_ends_text``: EOS in a state that is not complete ends that
    state's text (the model then picks the next prompt string) instead of being forbidden; that
    EOS is not text and the caller should not append it to the model input (``advance`` returns an
    ``"end"`` event for it). ``newline``: True/False switches the newline separator before a prompt
    string that follows an ended text on or off (:meth:`TokenIndex.variant`); None keeps the index's.

    Besides the machine state, the monitor keeps the text and its record (:attr:`segments`): each
    visited state with where its prompt and content lie in the text, who wrote it and how its text
    ended. Runners build their steps and verdict from it (the text is lexed once, here).
    """

    def __init__(self, index: TokenIndex, *, max_new_tokens: int | None = None,
                 eos_ends_text: bool = True, max_steps: int | None = None,
                 newline: bool | None = None) -> None:
        self.index = index if newline is None else index.variant(newline)
        self._max_new = max_new_tokens
        self._max_steps = max_steps
        self._ets = bool(eos_ends_text)
        self._fast = self.index._memo.fast[self._ets]
        self._row: Mapping[int, FastStep] = _NO_STEPS
        self._mk: Mask | None = None
        self._halt = False  # dead, waiting for the environment or finished: follow() ignores tokens
        self.reset()

    # budgets and EOS handling are attributes that keep the cached fast-step row and mask in step
    @property
    def max_new_tokens(self) -> int | None:
        """The most tokens the model may generate in this trace (None: no budget)."""
        return self._max_new

    @max_new_tokens.setter
    def max_new_tokens(self, n: int | None) -> None:
        self._max_new = n
        self._sync()

    @property
    def max_steps(self) -> int | None:
        """The most states the trace may visit (None: no limit)."""
        return self._max_steps

    @max_steps.setter
    def max_steps(self, n: int | None) -> None:
        self._max_steps = n
        self._sync()

    @property
    def eos_ends_text(self) -> bool:
        """EOS in a state that is not complete ends that state's text (see the class docstring)."""
        return self._ets

    @eos_ends_text.setter
    def eos_ends_text(self, on: bool) -> None:
        self._ets = bool(on)
        self._fast = self.index._memo.fast[self._ets]
        self._sync()

    def _sync(self) -> None:
        """After a slow step (or a change of budget): the cached base mask of the current state (with
        a budget none: :meth:`_mask` computes and keeps the step's own) and the row of fast steps
        the cursor may take from it (none with a budget, a dead cursor, or UTF-8 bytes held back)."""
        plain = self._max_new is None and self._max_steps is None
        self._mk = self.index._memo.masks.get((self._sid, self._ets)) if plain else None
        self._halt = self._dead or self.index._memo.machine.keys[self._sid].mode >= ENV
        if plain and not self._dead and not self._held and self.index._memo.fast_steps:
            row = self._fast.get(self._sid)
            if row is None:
                row = self._fast[self._sid] = {}
            self._row = row
        else:
            self._row = _NO_STEPS

    def reset(self) -> None:
        """Start a new trace (same index and budget)."""
        self._sid = self.index.start
        self._count = 0  # tokens in the current state's text
        self._ngen = 0  # tokens consumed (generated)
        self._ntok = 0  # tokens consumed, environment token ids included
        self._dead = False
        self._buf = bytearray()
        self._segs: list[Segment] = []
        self._dec = _UTF8("replace")
        self._held = 0  # bytes at the end of the text that the UTF-8 decoder holds back
        self._settled = 0  # bytes of the text reported in "text" events
        self._sync()

    def fork(self) -> Monitor:
        """An independent copy of this cursor (same index, budget and record so far): for a beam
        that branches. Costs a copy of the text; the record's segments are shared (immutable)."""
        new = Monitor.__new__(Monitor)
        new.__dict__.update(self.__dict__)
        new._buf = bytearray(self._buf)
        new._segs = list(self._segs)
        new._dec = _UTF8("replace")
        new._dec.setstate(self._dec.getstate())
        return new

    # -- what may come next
    def _mask(self) -> Mask:
        mk = self._mk  # the base mask while there is no budget; with one, this step's (_sync clears it)
        if mk is not None:
            return mk
        steps = None if self._max_steps is None else self._max_steps - len(self._segs)
        mk = self._mk = self.index.mask(self._sid, self._ets, self.remaining_tokens, steps, self._count)
        return mk

    @property
    def remaining_tokens(self) -> int | None:
        """Tokens the model may still generate (None: no budget)."""
        return None if self.max_new_tokens is None else self.max_new_tokens - self._ngen

    def set_remaining(self, n: int | None) -> None:
        """From now on the model may generate at most ``n`` more tokens (None: no budget). For a
        runner whose context is also used by environment text the monitor does not count."""
        if n is not None and n < 0:
            raise UsageError(f"set_remaining({n}): the budget cannot be negative")
        self.max_new_tokens = None if n is None else self._ngen + int(n)

    def allowed_token_ids(self) -> np.ndarray:
        """Sorted ids of the tokens allowed now (for tests and debugging)."""
        if self.is_finished:
            return np.zeros(0, dtype=np.int64)
        return self._mask().allowed_ids()

    def mask_into(self, logits_row: torch.Tensor) -> None:
        """Set the logits of forbidden tokens to -inf in place (1-D tensor, any width).

        Picks the cheapest method by sparsity: ``index_fill_`` of few forbidden ids, -inf plus a
        copy of few allowed ids, or ``add_`` of a cached 0/-inf bias. Ids beyond the vocabulary are
        always forbidden.
        """
        self.current_mask().apply(logits_row)

    def current_mask(self) -> Mask:
        """The allowed tokens now, as the index's cached :class:`~ltlagent.decode.masks.Mask` (batch
        processors assemble one mask tensor for many cursors); EOS only once the cursor is dead."""
        if self._dead:
            return self.index.final_mask()
        return self._mask()

    def forced_token(self) -> int | None:
        """The single allowed token when the continuation is forced, else None (skip the forward
        pass and feed it directly)."""
        if self.is_finished or self.waiting_for_env:
            return None
        forced = self._mask().forced
        if forced is None and self._done_writing():
            return self.index.eos_token_ids[0]
        return forced

    def _done_writing(self) -> bool:
        """The text ended in a complete state after which no prompt string may come: only EOS makes
        sense (a separator could be written, but nothing after it)."""
        m = self.index.machine
        return (m.mode(self._sid) == END and bool(self.index.eos_token_ids) and m.complete(self._sid)
                and not m.allowed_next(self._sid) and self._mask().allows(self.index.eos_token_ids[0]))

    def allowed_next_states(self) -> tuple[str, ...]:
        """Spec states whose prompt string may come next (equals ``Automaton.allowed(q)`` as long
        as the current content can still be completed)."""
        return self.index.allowed_next_states(self._sid)

    # -- consuming
    def advance(self, token_id: int) -> list[Event]:
        """Consume one generated token; raises ``UsageError`` if it is not allowed (or the trace is
        finished, or waits for the environment)."""
        hit = self._row.get(token_id)
        if hit is not None:  # a fast step (FastStep; the same bookkeeping as in follow, inlined)
            self._sid, data, text, self._mk, self._row, enter = hit
            self._ngen += 1
            self._ntok += 1
            at = self._settled
            self._settled = at + len(data)
            if enter is None:
                self._count += 1
                self._buf += data
                return [Event("text", None, False, None, text, at)]
            self._count = 0
            self._enter(len(self._buf), enter)
            self._buf += data
            return [Event("text", None, False, None, text, at), enter[4]]
        tok = int(token_id)
        mode = self.index._memo.machine.keys[self._sid].mode
        if mode == ENV:
            raise UsageError("the monitor is waiting for environment text: call feed_env() first")
        budget = self.max_new_tokens
        if mode == DONE or self._dead or (budget is not None and self._ngen >= budget) \
                or self._nothing_more():  # is_finished, spelled out: this runs at every token
            raise UsageError("the trace is finished: reset() the monitor to start another")
        if not self._mask().allows(tok):
            idx = self.index
            raise UsageError(f"token {tok} ({idx.vocab.token_bytes(tok)!r}) is not allowed here "
                             f"({idx.machine.describe(self._sid)})")
        if self._row is _NO_STEPS:  # a budget: a step seen before is still known, its mask is not
            evs = self._known_step(tok)
            if evs is not None:
                return evs
        return self._consume(tok, True, True)

    def follow(self, token_id: int, *, masked: bool = False) -> bool:
        """Consume a token chosen outside the monitor (a logits processor's row); never raises.
        True when this token made the cursor wait for the environment (it entered an
        ``:env-input`` state).

        ``masked``: the token was sampled under this cursor's mask (vLLM): a token the mask forbids,
        or any token after the end (finished, waiting for the environment), makes the cursor dead.
        Without it (``transformers``, whose beam search keeps candidates the mask forbids) only a
        token the byte machine refuses makes it dead, and tokens after a stop (EOS consumed,
        waiting for the environment) are padding and ignored. A dead cursor allows EOS only
        (:meth:`current_mask`) and ignores everything after."""
        hit = self._row.get(token_id)
        if hit is not None:  # a fast step: as in advance
            self._sid, data, _text, self._mk, self._row, enter = hit
            self._ngen += 1
            self._ntok += 1
            if enter is None:
                self._count += 1
            else:
                self._count = 0
                self._enter(len(self._buf), enter)
            self._buf += data
            self._settled += len(data)
            return False
        if self._dead:
            return False
        tok = int(token_id)
        mode = self.index._memo.machine.keys[self._sid].mode
        if masked:
            if mode >= ENV or (self._max_new is not None and self._ngen >= self._max_new) \
                    or self._nothing_more() or not self._mask().allows(tok):  # finished, waiting, forbidden
                self._dead = True
                self._sync()
                return False
        elif mode >= ENV:
            return False
        if self._row is _NO_STEPS and self._known_step(tok) is not None:  # with a budget
            return False
        self._consume(tok, False, masked)
        return self.waiting_for_env

    @staticmethod
    def follow_rows(monitors: Sequence[Monitor], tokens: Sequence[int]) -> list[int]:
        """:meth:`follow` (unmasked) ``tokens[i]`` on ``monitors[i]`` for every row of a batch (distinct
        cursors); the rows whose cursor has just entered an ``:env-input`` state. A row whose
        (state, token) pair was seen before costs one dict lookup."""
        paused = []
        for i, (mon, tok) in enumerate(zip(monitors, tokens)):
            hit = mon._row.get(tok)
            if hit is not None:  # a fast step: as in follow (never enters an :env-input state)
                mon._sid, data, _text, mon._mk, mon._row, enter = hit
                mon._ngen += 1
                mon._ntok += 1
                if enter is None:
                    mon._count += 1
                else:
                    mon._count = 0
                    mon._enter(len(mon._buf), enter)
                mon._buf += data
                mon._settled += len(data)
                continue
            if mon._halt:  # stopped: what follows is padding
                continue
            mon.follow(tok)
            if mon.waiting_for_env:
                paused.append(i)
        return paused

    @staticmethod
    def stopped_of(monitors: Sequence[Monitor]) -> list[bool]:
        """:attr:`is_stopped` of every cursor of a batch."""
        return [mon._halt or mon._nothing_more() for mon in monitors]

    @staticmethod
    def masks_of(monitors: Sequence[Monitor]) -> list[Mask]:
        """:meth:`current_mask` of every cursor of a batch."""
        return [mon._mk if mon._mk is not None and not mon._dead else mon.current_mask() for mon in monitors]

    def abandon(self) -> None:
        """Give up on this trace: the cursor is dead from now on (EOS only), e.g. when a caller
        cannot replay the tokens it was asked to continue."""
        self._dead = True
        self._sync()

    def _known_step(self, tok: int) -> list[Event] | None:
        """A fast step for a cursor that has no row of them because of its budget (the step does
        not depend on the budget, the next mask does: it is computed when asked); None when
        ``tok`` is not a known step here (or the cursor holds UTF-8 bytes back, or fast steps are
        off). The caller has made the checks of the slow path."""
        if self._held or self._dead or not self.index._memo.fast_steps or (
                self._max_new is None and self._max_steps is None):
            return None
        row = self._fast.get(self._sid)
        if row is None or tok not in row:
            return None
        self._row = row  # advance's first branch takes it; then what the budget makes stale goes
        try:
            return self.advance(tok)
        finally:
            self._row = _NO_STEPS
            self._mk = None  # the budget's mask of the new state, on demand

    def _consume(self, tok: int, report: bool, checked: bool) -> list[Event]:
        """Step over ``tok`` and record it; the events when ``report``. ``checked``: the cursor's
        mask allowed ``tok`` (else it is checked before the step is learnt as a fast step)."""
        try:
            return self._step(tok, report, checked)
        finally:
            self._sync()

    def _step(self, tok: int, report: bool, checked: bool) -> list[Event]:
        idx = self.index
        s0, held0 = self._sid, self._held
        sid, count, evs, reason = idx.advance(s0, self._count, tok, self._ets)
        if sid < 0:
            self._dead = True
            return []
        self._ngen += 1
        self._ntok += 1
        out: list[Event] = []
        m = idx.machine
        if idx.is_eos(tok):
            cur = self.state
            self._sid, self._count = sid, count
            if m.mode(sid) == DONE:
                self._close(len(self._buf))
                if report:
                    out.append(Event("finished", state=cur))
            else:
                self._text_ended("eos", None)
                if report:
                    out.append(Event("end", state=cur, reason="eos"))
            return out
        tb = idx._memo.token_bytes
        data = tb.get(tok)
        if data is None:
            data = tb[tok] = idx.vocab.token_bytes(tok)
        base = len(self._buf)
        self._buf += data
        delta, at = self._decode(data)
        if (reason is None and len(evs) <= 1 and not held0 and not self._held and delta
                and idx._memo.fast_steps):
            self._learn(s0, tok, sid, data, delta, checked, evs)
        if delta and report:
            out.append(Event("text", text=delta, at=at))
        tables = idx.tables
        label: tuple[str, int] | None = None
        for ev, off in evs:
            if ev.kind == EventKind.BOUNDARY:  # the content ends where the label starts
                b = tables.boundaries[ev.arg]
                at = base + off - len(b) + 1
                self._close(at)
                label = (b[1:].decode("utf-8"), at)
            elif ev.kind == EventKind.ENTER:
                k = ev.arg
                prompt = base + off - tables.kw_len[k]
                self._close(prompt)
                self._segs.append(Segment(k, base + off, prompt, self._ntok - 1, ev.forced))
                if report:
                    out.append(Event("enter", state=tables.names[k], forced=ev.forced))
                    if tables.env[k]:
                        out.append(Event("env", state=tables.names[k]))
        self._sid, self._count = sid, count
        if reason is not None and m.mode(sid) == END:
            boundary = label if reason == "boundary" else None
            self._text_ended(reason, boundary[0] if boundary is not None else None)
            if report:
                if boundary is not None:
                    out.append(Event("end", state=self.state, reason=reason, text=boundary[0],
                                     at=boundary[1]))
                else:
                    out.append(Event("end", state=self.state, reason=reason))
        return out

    def _learn(self, s0: int, tok: int, s2: int, data: bytes, text: str, checked: bool,
               evs: tuple[tuple[ByteEvent, int], ...]) -> None:
        """Keep ``tok`` in ``s0`` (a step with text and at most a state entered, not an
        ``:env-input`` one) as a fast step, when it is one for every cursor without budget: allowed
        by the base mask, no ``:max-tokens`` after it, and its bytes complete UTF-8 text by themselves."""
        idx = self.index
        enter: FastEnter | None = None
        if evs:
            ev, off = evs[0]
            k = ev.arg
            if ev.kind != EventKind.ENTER or idx.tables.env[k]:
                return
            enter = (k, off - idx.tables.kw_len[k], off, ev.forced,
                     Event("enter", state=idx.tables.names[k], forced=ev.forced))
        memo = idx._memo
        m = memo.machine
        if m.keys[s0].mode not in (FREE, END) or (not idx.vocab.eos_ids and m.complete(s0)
                                                  and not m.allowed_next(s0)):
            return  # a cursor there is finished or waits: advance raises
        move = memo.moves.get((s0, tok))
        mt = move[4] if move is not None else None  # after a state entered the count starts at 0
        if move is None or (mt is not None and (enter is None or mt <= 0)) or text.encode("utf-8") != data:
            return
        if not checked and not idx.mask(s0, self._ets).allows(tok):
            return
        fast = self._fast
        row = fast.get(s2)
        if row is None:
            row = fast[s2] = {}
        src = fast.get(s0)
        if src is None:
            src = fast[s0] = {}
        src[tok] = (s2, data, text, memo.masks.get((s2, self._ets)), row, enter)

    def _enter(self, base: int, enter: FastEnter) -> None:
        """The record of a fast step that enters a state (as :meth:`_step` keeps it); ``base``: the
        text's length before the token."""
        k, prompt, start, forced, _ev = enter
        segs = self._segs
        if segs and segs[-1].end is None:
            segs[-1] = segs[-1]._replace(end=base + prompt)
        segs.append(Segment(k, base + start, base + prompt, self._ntok - 1, forced))

    def _decode(self, data: bytes) -> tuple[str, int]:
        """Decode ``data`` just appended: (the text now complete, its byte offset in the text)."""
        at = self._settled
        if not self._held and data.isascii():  # the decoder holds nothing and would hold nothing
            self._settled = len(self._buf)
            return data.decode("ascii"), at
        delta = self._dec.decode(data)
        if self._held or not data.isascii():
            self._held = len(self._dec.getstate()[0])
        self._settled = len(self._buf) - self._held
        return delta, at

    def _close(self, end: int) -> None:
        """The current state's content ends at byte ``end``."""
        if self._segs and self._segs[-1].end is None:
            self._segs[-1] = self._segs[-1]._replace(end=end)

    def _text_ended(self, reason: str, label: str | None) -> None:
        """The current state's text ended without a prompt string (``reason``)."""
        if self._segs:
            self._segs[-1] = self._segs[-1]._replace(ended=reason, label=label)

    def feed_env(self, text_or_token_ids: str | Sequence[int]) -> list[Event]:
        """Append environment text (a string, or token ids of the same tokenizer) for the
        ``:env-input`` state just entered; afterwards the model must write an allowed prompt
        string. Raises ``UsageError`` when not waiting for the environment or when the text
        contains a prompt string."""
        if not self.waiting_for_env:
            raise UsageError("feed_env() called but the monitor is not waiting for environment text")
        ntok = 0
        if isinstance(text_or_token_ids, str):
            data = text_or_token_ids.encode("utf-8")
        else:
            v = self.index.vocab
            bad = [int(t) for t in text_or_token_ids if not (0 <= int(t) < v.size and v.is_text[int(t)])]
            if bad:
                raise UsageError(f"environment token ids {bad[:5]} are special or unknown: not text")
            data = b"".join(v.token_bytes(int(t)) for t in text_or_token_ids)
            ntok = len(text_or_token_ids)
        self._sid = self.index.machine.after_env(self._sid, data)
        self._count = 0
        self._sync()
        self._ntok += ntok
        if self._segs:
            self._segs[-1] = self._segs[-1]._replace(by_env=True)
        self._buf += data
        delta, at = self._decode(data)
        self._sync()
        return [Event("text", state=self.state, text=delta, at=at)] if delta else []

    # -- where we are
    @property
    def state(self) -> str | None:
        """Name of the current spec state, or None before the first prompt string."""
        cur = self.index.machine.keys[self._sid].cur
        return self.index.tables.names[cur] if cur >= 0 else None

    @property
    def trace(self) -> list[str]:
        """Names of the states visited so far, in order."""
        names = self.index.tables.names
        return [names[s.state] for s in self._segs]

    @property
    def segments(self) -> Sequence[Segment]:
        """The record: one :class:`Segment` per visited state, in order (the last one may still
        grow). Read-only."""
        return self._segs

    def segment_tokens(self, i: int) -> int:
        """Tokens consumed in segment ``i``: from the token that completed its prompt string to the
        next segment's (environment token ids included; the first segment also counts the tokens
        written before it)."""
        segs = self._segs
        end = segs[i + 1].tokens_before if i + 1 < len(segs) else self._ntok
        return end - (segs[i].tokens_before if i else 0)

    @property
    def steps(self) -> list[StateText]:
        """Visited states with their contents (the last one possibly still growing; a keyword
        prefix the lexer is still holding back is not shown until it turns out to be text)."""
        names = self.index.tables.names
        m = self.index.machine
        pending = 0 if m.mode(self._sid) == DONE else self.index.tables.lexer.depth[m.keys[self._sid].node]
        out = []
        for seg in self._segs:
            e = seg.end if seg.end is not None else len(self._buf) - pending
            text = bytes(self._buf[seg.start:e]).decode("utf-8", "replace").strip()
            out.append(StateText(names[seg.state], text, seg.by_env, seg.forced))
        return out

    @property
    def text(self) -> str:
        """All text so far: generated tokens and environment text, decoded."""
        return bytes(self._buf).decode("utf-8", "replace")

    @property
    def text_bytes(self) -> bytes:
        return bytes(self._buf)

    @property
    def settled(self) -> int:
        """Bytes of the text already reported in ``"text"`` events (an incomplete UTF-8 sequence
        at the end is held back until it completes)."""
        return self._settled

    @property
    def waiting_for_env(self) -> bool:
        """An ``:env-input`` state was just entered: call :meth:`feed_env` next."""
        return self.index.machine.mode(self._sid) == ENV

    def _nothing_more(self) -> bool:
        """A complete trace that allows nothing more, and a tokenizer without EOS to end it."""
        if self.index.vocab.eos_ids:
            return False
        m = self.index.machine
        return m.complete(self._sid) and not m.allowed_next(self._sid)

    @property
    def is_finished(self) -> bool:
        """EOS was consumed in a complete state, or nothing more can be written (budget spent, a
        complete trace that allows nothing more and a tokenizer without EOS, or a dead cursor)."""
        if self._dead or self.index.machine.mode(self._sid) == DONE:
            return True
        if self.max_new_tokens is not None and self._ngen >= self.max_new_tokens:
            return True
        return self._nothing_more()

    @property
    def is_stopped(self) -> bool:
        """The sequence must stop here, whatever the budget: finished (EOS consumed, or complete
        with nothing more to write and no EOS), waiting for the environment, or dead."""
        return self._dead or self.index.machine.mode(self._sid) in (ENV, DONE) or self._nothing_more()

    @property
    def is_dead(self) -> bool:
        """:meth:`follow` saw a token this cursor cannot account for (or it was abandoned); only
        EOS is allowed now."""
        return self._dead

    @property
    def is_complete(self) -> bool:
        """The trace so far is accepted by the spec (finite specs)."""
        return self.index.machine.complete(self._sid)

    @property
    def verdict(self) -> str:
        """The visited states under the spec's automaton: ``"accepted"`` (a complete finite trace,
        content aside), ``"incomplete"``, or ``"rejected"`` (a dead cursor)."""
        if self._dead:
            return "rejected"
        q = self.index.machine.keys[self._sid].q
        return "accepted" if self._segs and self.index.compiled.automaton.is_complete(q) else "incomplete"

    @property
    def tokens_generated(self) -> int:
        """Tokens consumed by :meth:`advance` since the start or the last reset."""
        return self._ngen

    @property
    def machine_state(self) -> int:
        """The index's machine state id (for processors and tests)."""
        return self._sid
