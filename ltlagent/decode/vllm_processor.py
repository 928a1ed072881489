"""The decoding monitor inside vLLM (issue #10): a logits processor for vLLM's v1 interface.

A request opts in through its sampling parameters' extra arguments::

    SamplingParams(max_tokens=256, extra_args={"ltlagent": {"spec": "react", "tools": ["Search"]}})

Keys of ``extra_args["ltlagent"]`` (see :class:`RequestOptions`): ``spec`` (a bundled name, a spec
file path, or spec text), ``tools`` (fills ``(:choices :tools)``), ``budget`` (model tokens of the
whole trace, default: what has been replayed plus ``max_tokens``), ``max_steps``, ``newline``, and for
a request that continues a trace after environment text: ``prompt_tokens`` (how many of the prompt's
tokens precede the trace) and ``env`` (``[start, end)`` token ranges of the prompt that the
environment wrote). The value may also be a spec name alone, or the mapping as JSON text
(``vllm serve`` accepts only flat ``vllm_xargs``). A request without ``extra_args["ltlagent"]`` is
left untouched.

Each constrained row of the persistent batch has its own :class:`~ltlagent.decode.monitor.Monitor`; token
indexes are built once per (spec, tools, newline) and shared. The masks of the whole batch are
stacked from per-mask cached boolean rows and applied with one ``masked_fill_``. EOS is allowed
only where the trace is complete; on entering an ``:env-input`` state only EOS is allowed, so the
request ends there and the caller continues with a new request on the same prefix (environment
text appended, ``env`` naming its range).

:class:`MonitorBatch` is the engine-independent core (batch bookkeeping and mask assembly; it needs
only torch); :class:`LtlLogitsProcessor` adapts it to ``vllm.v1.sample.logits_processor``. Use it
offline with ``vllm.LLM(model, logits_processors=[LtlLogitsProcessor])`` or with
``vllm serve MODEL --logits-processors ltlagent.decode.vllm_processor:LtlLogitsProcessor``. vLLM's Model
Runner V2 (the default of vLLM >= 0.32 where Triton runs) loads only processors of its own
interface: :class:`LtlLogitsProcessorV2` (or ``VLLM_USE_V2_MODEL_RUNNER=0`` and the v1 class).

A chat turn of :class:`~ltlagent.agent.chat.ChatAgent` opts in with ``{"turn": {…}}`` instead
(:class:`TurnOptions`): its row is a :class:`~ltlagent.decode.chat.TurnCursor`, masked as the
transformers loop masks it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ltlagent.decode.chat import TurnRule
from ltlagent.errors import LtlAgentError, UsageError
from ltlagent.text import values

if TYPE_CHECKING:
    import numpy as np
    import torch

    from ltlagent.decode.chat import TokenBytes, TurnCursor, TurnIndex
    from ltlagent.decode.masks import Mask
    from ltlagent.decode.monitor import Monitor, TokenIndex

__all__ = ["EXTRA_KEY", "RequestOptions", "TurnOptions", "MonitorBatch", "LtlLogitsProcessor",
           "LtlLogitsProcessorV2"]

#: The key of ``SamplingParams.extra_args`` that holds a request's ltlagent options.
EXTRA_KEY = "ltlagent"


@dataclass(frozen=True)
class RequestOptions:
    """A request's ltlagent options, checked (:meth:`parse` raises ``UsageError``, a ``ValueError``)."""

    spec: str
    tools: tuple[str, ...] | None = None
    budget: int | None = None
    max_steps: int | None = None
    newline: bool = False
    prompt_tokens: int | None = None
    env: tuple[tuple[int, int], ...] = ()

    @classmethod
    def parse(cls, extra_args: Mapping[str, Any] | None) -> RequestOptions | None:
        """The options in ``extra_args`` (None when the request does not opt in)."""
        if not extra_args or EXTRA_KEY not in extra_args:
            return None
        raw = extra_args[EXTRA_KEY]
        if isinstance(raw, str) and raw.lstrip().startswith("{"):  # JSON: vllm serve's vllm_xargs are flat
            try:
                raw = json.loads(raw)
            except ValueError as e:
                raise UsageError(f"extra_args[{EXTRA_KEY!r}] is not valid JSON: {e}") from None
        elif isinstance(raw, str):
            raw = {"spec": raw}
        what = f"extra_args[{EXTRA_KEY!r}]"
        if not isinstance(raw, Mapping):
            raise UsageError(f"{what} must be a spec name or a mapping, got {type(raw).__name__}")
        keys = {"spec", "tools", "budget", "max_steps", "newline", "prompt_tokens", "env"}
        unknown = sorted(set(raw) - keys)
        if unknown:
            raise UsageError(f"{what}: unknown key {unknown[0]!r}")
        spec = raw.get("spec")
        if not isinstance(spec, str) or not spec:
            raise UsageError(f"{what}['spec'] must be a spec name, path or text")
        tools = raw.get("tools")
        if tools is not None and (isinstance(tools, str) or not all(isinstance(t, str) for t in tools)):
            raise UsageError(f"{what}['tools'] must be a list of tool names")
        ints = {}
        for key in ("budget", "max_steps", "prompt_tokens"):
            v = raw.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise UsageError(f"{what}[{key!r}] must be a non-negative integer, got {v!r}")
            ints[key] = v
        env: list[tuple[int, int]] = []
        for r in raw.get("env") or ():
            if (not isinstance(r, Sequence) or len(r) != 2 or not all(isinstance(x, int) for x in r)
                    or not 0 <= r[0] <= r[1] or (env and r[0] < env[-1][1])):
                raise UsageError(f"{what}['env'] must be ordered [start, end) ranges, got {r!r}")
            env.append((int(r[0]), int(r[1])))
        return cls(spec, tuple(tools) if tools is not None else None, ints["budget"], ints["max_steps"],
                   bool(raw.get("newline", False)), ints["prompt_tokens"], tuple(env))


    def check_spec(self) -> None:
        """Raise ``UsageError`` / ``SpecError`` (both ``ValueError`` s) when the spec cannot be read."""
        from ltlagent.spec.syntax import resolve_spec_path

        if "(" in self.spec or "\n" in self.spec:
            _spec_text_ok(self.spec)
        else:
            resolve_spec_path(self.spec)


@functools.lru_cache(maxsize=64)
def _spec_text_ok(text: str) -> bool:
    """Parse a spec given as text (raises on errors, which are not cached): every turn of an
    episode is a request carrying the same text, and parsing it took 0.5 ms a request."""
    from ltlagent.spec.syntax import parse_spec

    parse_spec(text)
    return True


@dataclass(frozen=True)
class TurnOptions:
    """One chat turn's options, ``extra_args["ltlagent"] = {"turn": {…}}``: the turn rule, every
    tool's argument schema, the call format, argument regexes and the EOS ids (docs/design.md §14);
    ``after_call``/``end`` for a request that goes on after a call of a turn of several calls. The
    request's tokens are masked by the :class:`~ltlagent.decode.chat.TurnIndex` of the rule."""

    key: str  # the options as canonical JSON: turn indexes are shared by equal keys
    rule: TurnRule
    schemas: Mapping[str, Mapping[str, object]]
    format: str
    fields: Mapping[str, Mapping[str, str]] | None
    eos: tuple[int, ...]

    @staticmethod
    def encode(rule: TurnRule, schemas: Mapping[str, Mapping[str, object]], format: str,
               fields: Mapping[str, Mapping[str, str]] | None, eos: Sequence[int]) -> dict[str, Any]:
        """The JSON-able ``extra_args`` value of a turn (what :meth:`parse` reads back)."""
        return {"turn": {"text": rule.text, "first": sorted(rule.tools_first),
                         "after": sorted(rule.tools_after_text),
                         "narrow": [[[t, [list(p) for p in pairs]] for t, pairs in phase]
                                    for phase in rule.narrow],
                         "values": [[[t, [[k, values.to_json(v)] for k, v in pairs]] for t, pairs in phase]
                                    for phase in rule.values],
                         "schemas": {k: dict(v) for k, v in schemas.items()}, "format": format,
                         "fields": {k: dict(v) for k, v in fields.items()} if fields else None,
                         "eos": [int(e) for e in eos], "after_call": rule.after_call, "end": rule.end}}

    @classmethod
    def parse(cls, extra_args: Mapping[str, Any] | None) -> TurnOptions | None:
        """The turn options in ``extra_args`` (None when the request is not a chat turn)."""
        raw = extra_args.get(EXTRA_KEY) if extra_args else None
        if isinstance(raw, str) and raw.lstrip().startswith("{") and '"turn"' in raw:
            try:
                raw = json.loads(raw)
            except ValueError as e:
                raise UsageError(f"extra_args[{EXTRA_KEY!r}] is not valid JSON: {e}") from None
        if not isinstance(raw, Mapping) or "turn" not in raw:
            return None
        what = f"extra_args[{EXTRA_KEY!r}]['turn']"
        if len(raw) != 1 or not isinstance(raw["turn"], Mapping):
            raise UsageError(f"{what} must be the only key, a mapping")
        t = raw["turn"]
        unknown = sorted(set(t) - {"text", "first", "after", "narrow", "values", "schemas", "format",
                                   "fields", "eos", "after_call", "end"})
        if unknown:
            raise UsageError(f"{what}: unknown key {unknown[0]!r}")
        from ltlagent.text.toolcall import FORMATS

        schemas, fmt = t.get("schemas"), t.get("format", "hermes")
        if not isinstance(schemas, Mapping) or not all(isinstance(v, Mapping) for v in schemas.values()):
            raise UsageError(f"{what}['schemas'] must map tool names to JSON schemas")
        if fmt not in FORMATS:
            raise UsageError(f"{what}['format'] must be one of {', '.join(FORMATS)}, got {fmt!r}")
        names = []
        for key in ("first", "after"):
            v = t.get(key) or []
            if isinstance(v, str) or not all(isinstance(x, str) and x in schemas for x in v):
                raise UsageError(f"{what}[{key!r}] must list tools of 'schemas', got {v!r}")
            names.append(frozenset(v))
        eos = t.get("eos") or []
        if not all(isinstance(e, int) and not isinstance(e, bool) and e >= 0 for e in eos):
            raise UsageError(f"{what}['eos'] must list token ids, got {eos!r}")
        try:
            narrow = tuple(tuple((str(tool), tuple((str(f), str(r)) for f, r in pairs))
                                 for tool, pairs in phase) for phase in t.get("narrow") or ((), ()))
        except (TypeError, ValueError):
            raise UsageError(f"{what}['narrow'] must be [[tool, [[field, regex], …]], …] per phase"
                             ) from None
        try:
            vals = tuple(tuple((str(tool), tuple((str(k), values.from_json(v)) for k, v in pairs))
                               for tool, pairs in phase) for phase in t.get("values") or ((), ()))
        except (TypeError, ValueError):
            raise UsageError(f"{what}['values'] must be [[tool, [[key, term], …]], …] per phase"
                             ) from None
        fields = t.get("fields")
        if fields is not None and not isinstance(fields, Mapping):
            raise UsageError(f"{what}['fields'] must map tools to {{field: regex}}")
        after_call, end = t.get("after_call", False), t.get("end", True)
        if not isinstance(after_call, bool) or not isinstance(end, bool):
            raise UsageError(f"{what}['after_call'] and ['end'] must be booleans")
        rule = TurnRule(bool(t.get("text", True)), names[0], names[1], narrow, vals,
                        after_call=after_call, end=end)
        key = json.dumps(t, sort_keys=True)
        return cls(key, rule, schemas, str(fmt), fields, tuple(int(e) for e in eos))

    def build(self, tokens: TokenBytes) -> TurnIndex:
        """The turn's index over ``tokens`` (a ``UsageError`` where a schema is refused)."""
        from ltlagent.decode.chat import TurnIndex, TurnLanguage

        try:
            lang = TurnLanguage.build(self.rule, self.schemas, self.format, self.fields)
        except LtlAgentError:
            raise
        except ValueError as e:
            raise UsageError(f"extra_args[{EXTRA_KEY!r}]['turn']: {e}") from None
        return TurnIndex(lang, tokens)


class _Row:
    """One constrained request: its cursor (None: its spec could not be built) and the live list of
    its output tokens."""

    __slots__ = ("monitor", "output", "seen")

    def __init__(self, monitor: Monitor | None, output: list[int]) -> None:
        self.monitor = monitor
        self.output = output  # vLLM's running list (a reference: it grows as tokens are sampled)
        self.seen = 0


class _TurnRow:
    """One chat-turn request: its turn cursor (None: its options could not be built), vLLM's live
    list of its output tokens, and its token budget."""

    __slots__ = ("cursor", "max_tokens", "output", "seen")

    def __init__(self, cursor: TurnCursor | None, output: list[int], max_tokens: int | None) -> None:
        self.cursor = cursor
        self.output = output
        self.seen = 0
        self.max_tokens = max_tokens

    def forbidden(self, width: int, eos: np.ndarray) -> np.ndarray:
        """The row's forbidden tokens (True) over ``width`` logits, after catching up with its
        sampled tokens: what :meth:`TurnCursor.allowed` allows with the tokens left as budget, as
        the transformers loop of :class:`~ltlagent.agent.chat.ChatAgent` asks; EOS only where
        nothing is allowed."""
        import numpy as np

        cur = self.cursor
        out = np.ones(width, dtype=bool)
        if cur is not None:
            while self.seen < len(self.output) and self.output[self.seen] >= 0 and not cur.is_dead:
                cur.advance(self.output[self.seen])
                self.seen += 1
            if not cur.is_dead and not cur.ended:
                left = (self.max_tokens - self.seen) if self.max_tokens is not None else 0
                allowed = cur.allowed(budget=left)
                k = min(len(allowed), width)
                out[:k] = ~allowed[:k]
                if not out.all():
                    return out
        out[eos[eos < width]] = False
        return out


class MonitorBatch:
    """Per-row monitors of a persistent batch, and the batch mask (no vLLM needed).

    ``tokenizer``: what :func:`~ltlagent.decode.monitor.build_index` accepts. ``cache``: the on-disk index
    cache. Rows are keyed by their batch index; :meth:`update` applies vLLM's batch updates
    (removed, then added, then moved), :meth:`apply` masks a ``(batch, vocab)`` logits tensor.
    """

    def __init__(self, tokenizer: object, *, cache: bool = True) -> None:
        self.tokenizer = tokenizer
        self.cache = cache
        self.rows: dict[int, _Row | _TurnRow] = {}
        self._indexes: dict[tuple[str, tuple[str, ...] | None, bool], TokenIndex] = {}
        self._free: dict[tuple[int, str], torch.Tensor] = {}  # all-allowed rows, per width and device
        self._eos: Mask | None = None
        self._turns: dict[str, TurnIndex] = {}
        self._token_bytes: dict[tuple[int, ...], TokenBytes] = {}

    # -- indexes
    def index_for(self, opts: RequestOptions) -> TokenIndex:
        """The token index of ``opts``' spec and tools (built once, then shared by all rows)."""
        key = (opts.spec, opts.tools, opts.newline)
        hit = self._indexes.get(key)
        if hit is None:
            from ltlagent.decode.monitor import build_index
            from ltlagent.logic.compiled import compile_spec
            from ltlagent.spec.syntax import parse_spec

            text = "(" in opts.spec or "\n" in opts.spec  # spec text, else a bundled name or a path
            spec = parse_spec(opts.spec) if text else opts.spec
            base = build_index(compile_spec(spec), self.tokenizer, tool_names=opts.tools, cache=self.cache)
            hit = self._indexes[key] = base.variant(opts.newline)
        return hit

    def turn_index_for(self, opts: TurnOptions) -> TurnIndex:
        """The turn index of ``opts`` (built once per distinct options, sharing the vocabulary's
        token bytes between rules)."""
        hit = self._turns.get(opts.key)
        if hit is None:
            tokens = self._token_bytes.get(opts.eos)
            if tokens is None:
                from ltlagent.decode.chat import TokenBytes
                from ltlagent.decode.vocab import vocab_from_tokenizer

                vocab = vocab_from_tokenizer(self.tokenizer, list(opts.eos) or None)
                tokens = self._token_bytes[opts.eos] = TokenBytes.of(vocab)
            hit = self._turns[opts.key] = opts.build(tokens)
        return hit

    # -- batch bookkeeping
    def add(self, i: int, extra_args: Mapping[str, Any] | None, prompt_ids: Sequence[int] | None,
            output_ids: list[int], max_tokens: int | None = None) -> bool:
        """Row ``i`` now holds a new request; returns whether it is constrained. A row continuing a
        trace replays the prompt's trace tokens (``prompt_tokens`` on, environment ranges fed as such).
        A chat turn (:class:`TurnOptions`) gets a turn cursor instead of a monitor."""
        turn = TurnOptions.parse(extra_args)
        if turn is not None:
            from ltlagent.decode.chat import TurnCursor

            try:
                cursor: TurnCursor | None = TurnCursor(self.turn_index_for(turn))
            except LtlAgentError:  # end the request rather than the engine
                cursor = None
            self.rows[i] = _TurnRow(cursor, output_ids, max_tokens)
            return True
        opts = RequestOptions.parse(extra_args)
        if opts is None:
            self.rows.pop(i, None)
            return False
        from ltlagent.decode.monitor import Monitor

        try:
            index = self.index_for(opts)
        except LtlAgentError:  # validate_params let it through (e.g. a spec that does not compile):
            self.rows[i] = _Row(None, output_ids)  # end the request rather than the engine
            return True
        mon = Monitor(index, max_new_tokens=opts.budget, max_steps=opts.max_steps, eos_ends_text=False)
        if opts.prompt_tokens is not None and not self._replay(mon, list(prompt_ids or ()), opts):
            mon.abandon()
        if opts.budget is None:
            mon.set_remaining(max_tokens)
        self.rows[i] = _Row(mon, output_ids)
        return True

    @staticmethod
    def _replay(mon: Monitor, ids: list[int], opts: RequestOptions) -> bool:
        """Feed the trace part of the prompt; False when it is not a trace the monitor allows."""
        pos = int(opts.prompt_tokens or 0)
        try:
            for start, end in opts.env:
                if start < pos or end > len(ids):
                    return False
                for tok in ids[pos:start]:
                    mon.advance(tok)
                mon.feed_env(ids[start:end])
                pos = end
            for tok in ids[pos:]:
                mon.advance(tok)
        except UsageError:
            return False
        return True

    def remove(self, i: int) -> None:
        self.rows.pop(i, None)

    def move(self, a: int, b: int, swap: bool) -> None:
        """``swap``: rows ``a`` and ``b`` trade places; else row ``a`` moves to ``b`` (``a`` empties)."""
        ra = self.rows.pop(a, None)
        rb = self.rows.pop(b, None)
        if ra is not None:
            self.rows[b] = ra
        if swap and rb is not None:
            self.rows[a] = rb

    def update(self, batch_update: Any) -> None:
        """Apply a vLLM ``BatchUpdate`` (or None: nothing changed), in vLLM's order: removed, added,
        moved. Added entries are ``(index, params, prompt_ids, output_ids)``; moved entries
        ``(a, b, directionality)`` with directionality ``SWAP`` or ``UNIDIRECTIONAL``."""
        if batch_update is None:
            return
        for i in batch_update.removed:
            self.remove(i)
        for i, params, prompt_ids, output_ids in batch_update.added:
            self.add(i, getattr(params, "extra_args", None), prompt_ids, output_ids,
                     getattr(params, "max_tokens", None))
        for a, b, direction in batch_update.moved:
            self.move(a, b, getattr(direction, "name", str(direction)) == "SWAP")

    # -- masks
    def _eos_mask(self) -> Mask:
        """EOS only, from the tokenizer alone (for a row whose spec could not be built)."""
        if self._eos is None:
            import numpy as np

            from ltlagent.decode.masks import Mask
            from ltlagent.decode.vocab import read_tokenizer

            reading = read_tokenizer(self.tokenizer, None)
            self._eos = Mask(len(reading.tokens), allowed=np.asarray(reading.eos, dtype=np.int64))
        return self._eos

    def _turn_eos(self, row: _TurnRow) -> np.ndarray:
        """A turn row's EOS ids (its vocabulary's, else the tokenizer's)."""
        if row.cursor is not None:
            return row.cursor.index.tokens.eos
        import numpy as np

        return np.asarray(self._eos_mask().allowed_ids(), dtype=np.int64)

    def _catch_up(self, row: _Row) -> None:
        """Advance the row's monitor over the tokens sampled since the last step (a token it cannot
        account for, e.g. after an EOS the engine ignored, leaves it dead: EOS only)."""
        out, mon = row.output, row.monitor
        assert mon is not None
        while row.seen < len(out):
            tok = out[row.seen]
            if tok < 0:  # a placeholder for a token not sampled yet
                break
            mon.follow(tok, masked=True)
            row.seen += 1

    def mask_of(self, i: int) -> Mask:
        """Row ``i``'s current mask (after catching up with its sampled tokens); a monitor row."""
        row = self.rows[i]
        if isinstance(row, _TurnRow):
            raise UsageError(f"row {i} is a chat turn: its mask is a boolean row (apply)")
        mon = row.monitor
        if mon is None:
            return self._eos_mask()
        self._catch_up(row)
        if mon.is_finished or mon.waiting_for_env:
            return mon.index.final_mask()
        return mon.current_mask()

    def _forbidden(self, mask: Mask | None, width: int, device: object) -> torch.Tensor:
        """The cached boolean row (True: forbidden) of ``mask`` (None: all allowed)."""
        import torch

        if mask is not None:
            return mask.forbidden_row(device, width)  # cached by the mask
        key = (width, str(device))
        row = self._free.get(key)
        if row is None:
            row = self._free[key] = torch.zeros(width, dtype=torch.bool, device=cast("torch.device", device))
        return row

    def apply(self, logits: torch.Tensor, keys: Sequence[int] | None = None) -> torch.Tensor:
        """Set the forbidden logits of every constrained row to -inf, in place (one ``masked_fill_``).
        ``keys[r]``: the row key of logits row ``r`` (default: ``r``; Model Runner V2 keys rows by
        request slot)."""
        if logits.dim() != 2:
            raise ValueError(f"expected logits of shape (batch, vocab), got {tuple(logits.shape)}")
        n, width = logits.shape
        order = list(range(n)) if keys is None else [int(k) for k in keys]
        if len(order) != n:
            raise ValueError(f"expected {n} row keys, got {len(order)}")
        if not any(k in self.rows for k in order):
            return logits
        from ltlagent.decode.masks import numpy_view

        arr = numpy_view(logits)
        if arr is not None:  # CPU logits: each row masked through numpy on the tensor's memory
            self._apply_numpy(arr, order)
            return logits
        import torch

        free = self._forbidden(None, width, logits.device)
        rows: dict[int, torch.Tensor] = {}
        for i in order:
            row = self.rows.get(i)
            if row is None or i in rows:
                continue
            if isinstance(row, _TurnRow):
                rows[i] = torch.from_numpy(row.forbidden(width, self._turn_eos(row))).to(logits.device)
            else:
                rows[i] = self._forbidden(self.mask_of(i), width, logits.device)
        forb = torch.stack([rows.get(i, free) for i in order])
        logits.masked_fill_(forb, float("-inf"))
        return logits

    def _apply_numpy(self, arr: np.ndarray, order: Sequence[int]) -> None:
        """:meth:`apply` on CPU logits seen as numpy (a few µs a row, where stacking boolean rows
        and one torch ``masked_fill_`` cost about 0.25 ms at 64 rows of 3072 logits)."""
        import numpy as np

        width = arr.shape[1]
        done: dict[int, np.ndarray | Mask] = {}
        for r, i in enumerate(order):
            row = self.rows.get(i)
            if row is None:
                continue
            how = done.get(i)
            if how is None:
                how = done[i] = (row.forbidden(width, self._turn_eos(row)) if isinstance(row, _TurnRow)
                                 else self.mask_of(i))
            if isinstance(how, np.ndarray):
                np.copyto(arr[r], -np.inf, where=how)
            else:
                how.apply_numpy(arr[r])


def _load_tokenizer(vllm_config: Any) -> object:
    from transformers import AutoTokenizer

    mc = vllm_config.model_config
    name = getattr(mc, "tokenizer", None) or mc.model
    remote = bool(getattr(mc, "trust_remote_code", False))
    return AutoTokenizer.from_pretrained(name, trust_remote_code=remote)


try:  # the vLLM adapters exist where vLLM is installed
    from vllm.v1.sample.logits_processor import LogitsProcessor as _VllmLogitsProcessor
except ImportError:  # pragma: no cover - depends on the install
    _VllmLogitsProcessor = object  # type: ignore[assignment,misc]
try:  # Model Runner V2's interface (vLLM >= 0.32)
    from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as _VllmV2LogitsProcessor
except ImportError:  # pragma: no cover - depends on the install
    _VllmV2LogitsProcessor = object  # type: ignore[assignment,misc]


def _validate(sampling_params: Any) -> None:
    """Reject malformed ltlagent options and unknown or invalid specs (a ``ValueError``)."""
    extra = getattr(sampling_params, "extra_args", None)
    if TurnOptions.parse(extra) is not None:
        return
    opts = RequestOptions.parse(extra)
    if opts is not None:
        opts.check_spec()


class LtlLogitsProcessor(_VllmLogitsProcessor):  # type: ignore[misc,valid-type]
    """vLLM v1 logits processor: the spec's monitor for every request that opts in (module docstring)."""

    def __init__(self, vllm_config: Any, device: Any, is_pin_memory: bool) -> None:
        self.batch = MonitorBatch(_load_tokenizer(vllm_config))

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """Reject malformed ltlagent options and unknown or invalid specs when the request arrives
        (a ``ValueError``: HTTP 400 when served)."""
        _validate(sampling_params)

    def is_argmax_invariant(self) -> bool:
        return False  # it changes which token greedy decoding picks

    def update_state(self, batch_update: Any) -> None:
        self.batch.update(batch_update)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        return self.batch.apply(logits)


class LtlLogitsProcessorV2(_VllmV2LogitsProcessor):  # type: ignore[misc,valid-type]
    """The same processor for vLLM's Model Runner V2 (``vllm.v1.worker.gpu.sample.logits_processor``,
    vLLM >= 0.32): rows are keyed by request slot; a request's prompt and sampled tokens are read
    from the runner's per-slot token buffer (``req_states.all_token_ids`` up to ``total_len``).
    Not with speculative decoding (a request's draft rows would share one mask)."""

    def __init__(self, vllm_config: Any, req_states: Any) -> None:
        self.batch = MonitorBatch(_load_tokenizer(vllm_config))
        self.states = req_states
        self.new: dict[int, Any] = {}  # slot → sampling params, its prompt not read yet
        self.outputs: dict[int, tuple[int, list[int]]] = {}  # slot → (prompt length, output)

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """As :meth:`LtlLogitsProcessor.validate_params`."""
        _validate(sampling_params)

    def add_request(self, req_idx: int, sampling_params: Any) -> bool:
        """A request enters slot ``req_idx``: whether it opts in (its row is built at the next
        :meth:`apply`, once its tokens are in the runner's buffer)."""
        self.batch.remove(req_idx)
        self.new.pop(req_idx, None)
        self.outputs.pop(req_idx, None)
        extra = getattr(sampling_params, "extra_args", None)
        if TurnOptions.parse(extra) is None and RequestOptions.parse(extra) is None:
            return False
        self.new[req_idx] = sampling_params
        return True

    def _sync(self, slot: int) -> None:
        """Build slot's row on its first step; append the tokens sampled since the last one."""
        st = self.states
        params = self.new.pop(slot, None)
        if params is not None:
            plen = int(st.prompt_len.np[slot])
            prompt = [int(t) for t in st.all_token_ids.gpu[slot, :plen].tolist()]
            out: list[int] = []
            self.outputs[slot] = (plen, out)
            self.batch.add(slot, getattr(params, "extra_args", None), prompt, out,
                           getattr(params, "max_tokens", None))
        hit = self.outputs.get(slot)
        if hit is not None:
            plen, out = hit
            total = int(st.total_len.gpu[slot])
            if plen + len(out) < total:
                out += [int(t) for t in st.all_token_ids.gpu[slot, plen + len(out):total].tolist()]

    def apply(self, logits: torch.Tensor, ctx: Any) -> torch.Tensor:
        slots = [int(s) for s in ctx.expanded_idx_mapping.tolist()]
        for slot in dict.fromkeys(slots):
            self._sync(slot)
        return self.batch.apply(logits, slots)
