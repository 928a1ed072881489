"""Sets of argument values as byte automata: what a first-order policy allows a call to write.

A policy rule bound to an argument (issue 28, docs/design.md §14.1) allows a finite set of values
(``(once (Lookup ?u))``: equal to a value bound earlier), the substrings of earlier texts
(``(once (mentions User ?dest))``), their complements, and boolean combinations of these. Each is
a :class:`ValueLanguage`: a trimmed :class:`~ltlagent.text.bytetable.ByteTable` over the *decoded*
value's UTF-8 bytes (the string itself, or a number's or boolean's JSON text), every accepted text
valid UTF-8. :func:`json_texts` lifts one to the JSON texts the decoder may write for the argument
(quoted strings in the generation language of §5.1, with every escape it allows, and canonical
scalar texts), and :func:`restrict` intersects those with the argument's schema table, so a
forbidden value cannot be written, token by token. Every construction takes a state budget and
raises :class:`ValueBudgetExceeded` beyond it: the decoder then writes the call unconstrained by
value and checks it afterwards.

The substrings come from a generalised suffix automaton (Blumer et al.), linear in the texts'
total length; products are built breadth-first with a numpy row per batch of states. A value
set is described by small frozen terms (:class:`ValueEnum`, :class:`ValueSubstrings`,
:class:`ValueNot`, :class:`ValueAnd`, :class:`ValueOr`) that :func:`value_language` compiles
(cached by value) and that :func:`to_json`/:func:`from_json` carry across processes.
"""

from __future__ import annotations

import collections
import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ltlagent.errors import UsageError
from ltlagent.graph import run_starts
from ltlagent.text.bytetable import ByteTable, distance_to
from ltlagent.text.content import DEAD
from ltlagent.text.jsontype import pattern_language

__all__ = [
    "ValueBudgetExceeded", "ValueLanguage", "ValueEnum", "ValueSubstrings", "ValueNot", "ValueAnd",
    "ValueOr", "ValueTerm", "MAX_VALUE_STATES", "enum_language", "substring_language", "complement",
    "intersection", "union", "difference", "product", "json_texts", "restrict", "value_language",
    "to_json", "from_json", "value_text", "accepts", "clear_caches", "restrict_field",
]

#: Default state budget of one value language, its JSON texts, or their product with a schema.
MAX_VALUE_STATES = 50_000
#: JSON's two-character escapes: the decoded byte → the letter after the backslash.
_SHORT_ESCAPES = {0x22: ord('"'), 0x5C: ord("\\"), 0x2F: ord("/"), 8: ord("b"), 12: ord("f"),
                  10: ord("n"), 13: ord("r"), 9: ord("t")}
#: Texts ``json.dumps`` writes for integers and booleans, and for the floats whose shortest
#: repr is a plain decimal of at most 15 significant digits (DBL_DIG: such a decimal comes back
#: from a double unchanged, so it is its own repr; repr writes decimals without exponent for
#: exponents -4 … 15). Each accepted text ``t`` has ``json.dumps(json.loads(t)) == t``.
_CANONICAL_SCALAR = (
    r"(?:true|false|0|-?[1-9][0-9]*|-?0\.0"
    r"|-?[1-9][0-9]{0,14}\.0"
    + "".join(rf"|-?[1-9][0-9]{{{a}}}\.[0-9]{{0,{13 - a}}}[1-9]" for a in range(14))
    + r"|-?0\.0{0,3}[1-9](?:[0-9]{0,13}[1-9])?)"
)

Op = Literal["and", "or", "minus"]
#: States whose rows a product step computes at once (bounds its temporary arrays to ~50 MB).
_CHUNK = 4096


class ValueBudgetExceeded(UsageError):
    """A value language (or its product with a schema) needs more states than its budget: the
    decoder falls back to checking the call after it is written."""

    def __init__(self, what: str, budget: int) -> None:
        super().__init__(f"{what} needs more than {budget} automaton states",
                         hint="the call is checked after it is written instead")
        self.what = what
        self.budget = budget

    def __reduce__(self) -> tuple[type[ValueBudgetExceeded], tuple[str, int]]:
        return type(self), (self.what, self.budget)  # crosses process boundaries whole


@dataclass(frozen=True, eq=False)
class ValueLanguage:
    """A set of values as a trimmed byte DFA over their UTF-8 texts (decoded: a string value as
    is, any other value as its JSON text); ``finite`` lists the values when the set is finite
    and known (an enum), so that :func:`json_texts` can write any canonical JSON text of them."""

    table: ByteTable
    source: str = ""
    finite: frozenset[str] | None = None

    @property
    def num_states(self) -> int:
        return self.table.num_states

    @property
    def empty(self) -> bool:
        return self.table.empty

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, str):
            return False
        data = _encode(value)
        return data is not None and accepts(self.table, data)


def accepts(table: ByteTable, data: bytes) -> bool:
    """Whether ``table`` accepts ``data`` from its start."""
    s = 0
    for b in data:
        s = int(table.trans[s, b])
        if s < 0:
            return False
    return bool(table.accepting[s])


def value_text(value: object) -> str:
    """What a policy compares for an argument value: a string as is, any other value as its JSON
    text (``json.dumps(v, ensure_ascii=False)``, as :mod:`ltlagent.logic.policy` reads it)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _encode(value: str) -> bytes | None:
    """The UTF-8 of ``value``; None when it holds a lone surrogate (no UTF-8 text is that value,
    and no JSON text the decoder writes decodes to it)."""
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        return None


def _check(n: int, budget: int, what: str) -> None:
    if n > budget:
        raise ValueBudgetExceeded(what, budget)


# --- enum: a trie ------------------------------------------------------------------------------

def enum_language(values: Iterable[str], *, budget: int = MAX_VALUE_STATES) -> ValueLanguage:
    """The values equal to one of ``values`` (a trie over their UTF-8 bytes; a value with a lone
    surrogate cannot be written and is left out)."""
    kept = sorted({v for v in values if _encode(v) is not None})
    src: list[int] = []
    byt: list[int] = []
    dst: list[int] = []
    children: dict[tuple[int, int], int] = {}
    finals: list[int] = []
    n = 1
    for v in kept:
        s = 0
        for b in v.encode("utf-8"):
            t = children.get((s, b))
            if t is None:
                t = children[(s, b)] = n
                n += 1
                _check(n, budget, "the allowed values")
                src.append(s)
                byt.append(b)
                dst.append(t)
            s = t
        finals.append(s)
    trans = np.full((n, 256), DEAD, dtype=np.int32)
    trans[np.asarray(src, dtype=np.int64), np.asarray(byt, dtype=np.int64)] = dst
    acc = np.zeros(n, dtype=bool)
    acc[finals] = True
    shown = ", ".join(repr(v) for v in kept[:3]) + (", …" if len(kept) > 3 else "")
    return ValueLanguage(ByteTable.build(trans, acc, f"one of {shown}", reachable=True),
                         f"one of {len(kept)} values ({shown})", frozenset(kept))


# --- substrings: a generalised suffix automaton -----------------------------------------------

class _SuffixAutomaton:
    """A generalised suffix automaton under construction (Blumer et al.; one texts after
    another, each from the root): ``nxt[s]`` the transitions, ``link[s]`` the suffix link,
    ``length[s]`` the longest string of ``s``, ``boundary[s]`` whether the end positions of ``s``
    lie between UTF-8 characters."""

    def __init__(self, budget: int) -> None:
        self.nxt: list[dict[int, int]] = [{}]
        self.link: list[int] = [-1]
        self.length: list[int] = [0]
        self.boundary: list[bool] = [False]
        self.budget = budget

    def new(self, length: int, link: int, nxt: dict[int, int], boundary: bool) -> int:
        self.nxt.append(nxt)
        self.link.append(link)
        self.length.append(length)
        self.boundary.append(boundary)
        _check(len(self.nxt), self.budget, "the substrings of the texts")
        return len(self.nxt) - 1

    def clone(self, q: int, length: int) -> int:
        return self.new(length, self.link[q], dict(self.nxt[q]), self.boundary[q])

    def extend(self, last: int, c: int, boundary: bool) -> int:
        """The state after ``last`` + byte ``c`` (the text so far, ending at a character boundary
        or not), states added as the online construction needs."""
        nxt, link, length = self.nxt, self.link, self.length
        q = nxt[last].get(c)
        if q is not None:  # the text so far already occurs (an earlier text)
            if length[last] + 1 == length[q]:
                return q
            cl = self.clone(q, length[last] + 1)
            link[q] = cl
            p = last
            while p != -1 and nxt[p].get(c) == q:
                nxt[p][c] = cl
                p = link[p]
            return cl
        cur = self.new(length[last] + 1, 0, {}, boundary)
        p = last
        while p != -1 and c not in nxt[p]:
            nxt[p][c] = cur
            p = link[p]
        if p != -1:
            q = nxt[p][c]
            if length[p] + 1 == length[q]:
                link[cur] = q
            else:
                cl = self.clone(q, length[p] + 1)
                while p != -1 and nxt[p].get(c) == q:
                    nxt[p][c] = cl
                    p = link[p]
                link[q] = link[cur] = cl
        return cur

    def add(self, data: bytes) -> None:
        last = 0
        for i, c in enumerate(data):
            after = i + 1 == len(data) or not 0x80 <= data[i + 1] < 0xC0
            last = self.extend(last, c, after)


def _pieces(text: str) -> list[bytes]:
    """The UTF-8 of ``text`` cut at lone surrogates (no substring holding one can be written)."""
    out: list[bytes] = []
    start = 0
    for i, ch in enumerate(text):
        if 0xD800 <= ord(ch) <= 0xDFFF:
            out.append(text[start:i].encode("utf-8"))
            start = i + 1
    out.append(text[start:].encode("utf-8"))
    return [p for p in out if p]


def substring_language(texts: Iterable[str], *, budget: int = MAX_VALUE_STATES) -> ValueLanguage:
    """The strings that occur in one of ``texts`` (character substrings; the empty string too when
    there is a text, as Python's ``in`` has it), in time and states linear in the texts' total
    UTF-8 length. A substring of valid UTF-8 that is itself
    valid UTF-8 starts and ends between characters: the root's edges on continuation bytes are
    left out, and a state accepts where its end positions lie between characters (the same for
    all of them, in a state reachable without a continuation byte first)."""
    texts = tuple(texts)
    sam = _SuffixAutomaton(budget)
    for t in texts:
        for piece in _pieces(t):
            sam.add(piece)
    n = len(sam.nxt)
    src = np.repeat(np.arange(n, dtype=np.int64), [len(d) for d in sam.nxt])
    byt = np.fromiter((c for d in sam.nxt for c in d), dtype=np.int64, count=src.size)
    dst = np.fromiter((s for d in sam.nxt for s in d.values()), dtype=np.int64, count=src.size)
    trans = np.full((n, 256), DEAD, dtype=np.int32)
    trans[src, byt] = dst
    trans[0, 0x80:0xC0] = DEAD  # no substring begins inside a character
    acc = np.asarray(sam.boundary, dtype=bool)
    acc[0] = bool(texts)  # "" in t, for any text t
    what = f"a substring of {len(texts)} text{'s' if len(texts) != 1 else ''}"
    return ValueLanguage(ByteTable.build(trans, acc, what), what)


# --- products --------------------------------------------------------------------------------

def product(a: ByteTable, b: ByteTable, op: Op = "and", *, budget: int = MAX_VALUE_STATES,
            what: str = "the product") -> ByteTable:
    """The trimmed DFA of ``a`` and ``b`` together: accepting where both accept (``and``), either
    (``or``), or ``a`` but not ``b`` (``minus``); a missing edge of one side is its sink, kept
    where the operation can still accept. Breadth-first, one numpy step per batch of new
    states; :class:`ValueBudgetExceeded` beyond ``budget`` states."""
    na, nb = a.num_states, b.num_states
    acc_a = np.append(a.accepting, False)
    acc_b = np.append(b.accepting, False)
    width = nb + 1
    ids: dict[int, int] = {0: 0}
    ps: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
    qs: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
    rows: list[np.ndarray] = []
    todo = collections.deque([(ps[0], qs[0])])  # states in the order of their ids
    while todo:
        front_p, front_q = todo.popleft()
        if front_p.size > _CHUNK:
            todo.appendleft((front_p[_CHUNK:], front_q[_CHUNK:]))
            front_p, front_q = front_p[:_CHUNK], front_q[:_CHUNK]
        ra, rb = _rows(a.trans, front_p), _rows(b.trans, front_q)
        if op == "and":
            ok = (ra != na) & (rb != nb)
        elif op == "or":
            ok = (ra != na) | (rb != nb)
        else:
            ok = ra != na
        keys = ra * width + rb
        # one key per run of equal successors in a row (a row has a few runs, not 256 edges)
        first = run_starts(keys)
        run_keys, run_ok = keys[first], ok[first]
        uniq, inv = np.unique(run_keys[run_ok], return_inverse=True)
        got = np.empty(uniq.size, dtype=np.int32)
        new: list[int] = []
        for i, k in enumerate(uniq.tolist()):
            j = ids.get(k)
            if j is None:
                j = ids[k] = len(ids)
                new.append(k)
            got[i] = j
        _check(len(ids), budget, what)
        run_val = np.full(run_keys.size, DEAD, dtype=np.int32)
        run_val[run_ok] = got[inv.ravel()]
        rows.append(run_val[np.cumsum(first.ravel()) - 1].reshape(keys.shape))
        if new:
            arr = np.asarray(new, dtype=np.int64)
            ps.append(arr // width)
            qs.append(arr % width)
            todo.append((ps[-1], qs[-1]))
    p_all, q_all = np.concatenate(ps), np.concatenate(qs)
    if op == "and":
        acc = acc_a[p_all] & acc_b[q_all]
    elif op == "or":
        acc = acc_a[p_all] | acc_b[q_all]
    else:
        acc = acc_a[p_all] & ~acc_b[q_all]
    trans = np.concatenate(rows)
    if (distance_to(trans, acc) >= 0).all():  # every state live (a complement's are): as it is
        return ByteTable(trans, acc, what)
    return ByteTable.build(trans, acc, what, reachable=True)


def _rows(trans: np.ndarray, states: np.ndarray) -> np.ndarray:
    """The rows of ``states`` (int64), a missing edge and the sink (``n``) going to the sink."""
    n = trans.shape[0]
    out = np.full((states.size, 256), n, dtype=np.int64)
    real = states < n
    got = trans[states[real]]
    out[real] = np.where(got >= 0, got, n)
    return out


def _join(tables: Sequence[ByteTable], what: str) -> ByteTable:
    """The union of trimmed DFAs whose first bytes differ (a JSON string begins with ``"``, a
    number with a digit or ``-``, ``true`` with ``t``…): a fresh start whose row is theirs side by
    side, each table's states copied after it by one numpy operation (no product). A start that
    no edge enters becomes the fresh start itself, so every state stays reachable and live (no
    trimming pass)."""
    parts = [t for t in tables if not t.empty]
    if not parts:
        return ByteTable(np.full((1, 256), DEAD, dtype=np.int32), np.zeros(1, dtype=bool), what)
    entered = [bool((t.trans == 0).any()) for t in parts]
    n = 1 + sum(t.num_states - (not e) for t, e in zip(parts, entered))
    trans = np.full((n, 256), DEAD, dtype=np.int32)
    acc = np.zeros(n, dtype=bool)
    at = 1
    for t, e in zip(parts, entered):
        # state q of t goes to at + q, or to at + q - 1 when its start (then never entered) merges
        shift = at if e else at - 1
        block = np.where(t.trans >= 0, t.trans + shift, DEAD)
        first = t.trans[0] >= 0
        if (first & (trans[0] >= 0)).any():
            raise ValueError("_join needs tables whose first bytes differ")
        trans[0, first] = block[0, first]
        acc[0] |= bool(t.accepting[0])
        lo = 0 if e else 1
        trans[shift + lo:shift + t.num_states] = block[lo:]
        acc[shift + lo:shift + t.num_states] = t.accepting[lo:]
        at = shift + t.num_states
    return ByteTable(trans, acc, what)


@functools.lru_cache(maxsize=1)
def _utf8_table() -> ByteTable:
    """Every valid UTF-8 text (the empty one included)."""
    return _table_of_pattern("(?s:.*)")


@functools.lru_cache(maxsize=1)
def _scalar_table() -> ByteTable:
    """The canonical JSON texts of integers, simple floats and booleans."""
    return _table_of_pattern(_CANONICAL_SCALAR)


def _table_of_pattern(rx: str) -> ByteTable:
    d = pattern_language(rx, search=False, ecma=False)
    trans = np.array(d.trans, dtype=np.int32)
    trans[~np.isin(trans, np.fromiter(d.live, dtype=np.int32, count=len(d.live)))] = DEAD
    acc = np.zeros(d.num_states, dtype=bool)
    acc[sorted(d.accepting)] = True
    return ByteTable.build(trans, acc, rx)


def _combine(a: ValueLanguage, b: ValueLanguage, op: Op, budget: int, what: str) -> ValueLanguage:
    if a.finite is not None and (op != "or" or b.finite is not None):
        # a finite set stays one (an enum again, whatever b's automaton is)
        if op == "or":
            vals = a.finite | (b.finite or frozenset())
        else:
            vals = frozenset(v for v in a.finite if (v in b) == (op == "and"))
        lang = enum_language(vals, budget=budget)
        return ValueLanguage(lang.table, what, lang.finite)
    if op == "and" and b.finite is not None:
        return _combine(b, a, op, budget, what)
    return ValueLanguage(product(a.table, b.table, op, budget=budget, what=what), what)


def intersection(a: ValueLanguage, b: ValueLanguage, *, budget: int = MAX_VALUE_STATES) -> ValueLanguage:
    """The values in both."""
    return _combine(a, b, "and", budget, f"({a.source}) and ({b.source})")


def union(a: ValueLanguage, b: ValueLanguage, *, budget: int = MAX_VALUE_STATES) -> ValueLanguage:
    """The values in either."""
    return _combine(a, b, "or", budget, f"({a.source}) or ({b.source})")


def difference(a: ValueLanguage, b: ValueLanguage, *, budget: int = MAX_VALUE_STATES) -> ValueLanguage:
    """The values in ``a`` and not in ``b``."""
    return _combine(a, b, "minus", budget, f"({a.source}) but not ({b.source})")


def complement(a: ValueLanguage, *, budget: int = MAX_VALUE_STATES) -> ValueLanguage:
    """Every value not in ``a`` (any valid UTF-8 text, the empty one included)."""
    what = f"not ({a.source})"
    return ValueLanguage(product(_utf8_table(), a.table, "minus", budget=budget, what=what), what)


# --- JSON texts --------------------------------------------------------------------------------

def _quoted(lang: ByteTable, budget: int) -> ByteTable:
    """The JSON strings (quotes included) whose decoded text ``lang`` accepts, spelled as the
    generation language of §5.1 allows: raw UTF-8 but ``"``, ``\\`` and controls; ``\\" \\\\ \\/
    \\b \\f \\n \\r \\t``; ``\\u00XX`` (either case) for the controls only. States: 0 before the
    opening quote, then ``lang``'s states, then the escape steps. An escape step is made only where
    the escape can go on, and once per distinct row of successors: the steps of a complement's
    states, which all lead to its catch-all state, are one state, not one per value state."""
    d = lang.trans
    n = lang.num_states
    to_main = np.where(d >= 0, d + 1, DEAD).astype(np.int32)  # lang's states at 1 … n
    at = [1 + n]
    made: list[np.ndarray] = []  # per step kind: the successor rows of its distinct states

    def steps(sig: np.ndarray) -> np.ndarray:
        """One state per distinct row of ``sig`` (successors, DEAD where none) that has a live
        entry; each value state's step (DEAD where its row has none)."""
        need = (sig >= 0).any(axis=1)
        idx = np.full(n, DEAD, dtype=np.int32)
        if need.any():
            rows, inv = np.unique(sig[need], axis=0, return_inverse=True)
            idx[need] = at[0] + inv.ravel()
            at[0] += rows.shape[0]
        else:
            rows = np.zeros((0, sig.shape[1]), dtype=np.int32)
        made.append(rows)
        return idx

    u000 = steps(to_main[:, 0x00:0x10])  # \u000X: the X-th control
    u001 = steps(to_main[:, 0x10:0x20])  # \u001X
    u00 = steps(np.stack([u000, u001], axis=1))  # '0' or '1' next
    u0 = steps(u00[:, None])
    u = steps(u0[:, None])
    shorts = list(_SHORT_ESCAPES)
    esc = steps(np.concatenate([to_main[:, shorts], u[:, None]], axis=1))
    final = at[0]
    total = final + 1
    _check(total, budget, "the JSON strings of the allowed values")
    trans = np.full((total, 256), DEAD, dtype=np.int32)
    trans[0, 0x22] = 1
    raw = to_main.copy()
    raw[:, :0x20] = DEAD
    raw[:, 0x22] = np.where(lang.accepting, final, DEAD)
    raw[:, 0x5C] = esc
    trans[1:1 + n] = raw
    lo = 1 + n
    for k, rows in enumerate(made):
        here = np.arange(lo, lo + rows.shape[0])
        lo += rows.shape[0]
        if k < 2:  # \u000X, \u001X: a hex digit, in either case
            for h in range(16):
                for ch in dict.fromkeys(f"{h:x}{h:X}"):
                    trans[here, ord(ch)] = rows[:, h]
        elif k == 2:
            trans[here, 0x30], trans[here, 0x31] = rows[:, 0], rows[:, 1]
        elif k < 5:
            trans[here, 0x30] = rows[:, 0]
        else:
            for j, dec in enumerate(shorts):
                trans[here, _SHORT_ESCAPES[dec]] = rows[:, j]
            trans[here, ord("u")] = rows[:, len(shorts)]
    acc = np.zeros(total, dtype=bool)
    acc[final] = True
    if lang.empty:
        return ByteTable.build(trans, acc, "JSON strings")
    # trimmed as it is: lang's states are live, and a step is made only where it leads to one
    return ByteTable(trans, acc, "JSON strings")


def json_texts(lang: ValueLanguage, *, strings: bool = True, scalars: bool = True,
               null: bool = False, budget: int = MAX_VALUE_STATES) -> ByteTable:
    """The JSON texts of an argument whose value is in ``lang``: with ``strings``, the JSON strings
    (every spelling of §5.1's generation language) that decode to a value in it; with
    ``scalars``, the non-string texts ``json.dumps`` writes for a value in it: of a finite set,
    each value that is such a text; otherwise integers, booleans and floats of at most 15
    significant digits without exponent (every accepted text ``t`` has
    ``json.dumps(json.loads(t)) in lang``). ``null`` binds no value (issue 27: the rule then does
    not apply), so it is written only when ``null`` is set, whatever ``lang`` holds."""
    parts: list[ByteTable] = []
    if strings:
        parts.append(_quoted(lang.table, budget))
    if scalars:
        if lang.finite is not None:
            parts.append(enum_language([v for v in lang.finite if _canonical_scalar(v)],
                                       budget=budget).table)
        else:
            parts.append(product(lang.table, _scalar_table(), "and", budget=budget,
                                 what="the scalar texts of the allowed values"))
    if null:
        parts.append(enum_language(["null"]).table)
    what = f"JSON texts of {lang.source}"
    _check(1 + sum(p.num_states for p in parts), budget, what)
    return _join(parts, what)


def _canonical_scalar(v: str) -> bool:
    """Whether ``v`` is the JSON text ``json.dumps`` writes for a value that is not a string."""
    def refuse(name: str) -> object:
        raise ValueError(name)

    try:
        x = json.loads(v, parse_constant=refuse)
    except ValueError:
        return False
    return x is not None and not isinstance(x, str) and json.dumps(x, ensure_ascii=False) == v


def restrict(field: ByteTable, allowed: ByteTable, *, budget: int = MAX_VALUE_STATES) -> ByteTable:
    """The texts of an argument's schema table ``field`` that are also in ``allowed`` (from
    :func:`json_texts`): the block the decoder writes in its place."""
    got = product(field, allowed, "and", budget=budget,
                  what=f"({field.source}) restricted to ({allowed.source})")
    return ByteTable(got.trans, got.accepting, got.source)


def restrict_field(field: ByteTable, term: ValueTerm, *, budget: int = MAX_VALUE_STATES) -> ByteTable:
    """The block of an argument bound by a rule: the texts of its schema table ``field`` whose value
    ``term`` allows, and ``null`` where the schema allows it (null binds nothing, so no rule about
    the value applies to it). :class:`ValueBudgetExceeded` when any step needs more than
    ``budget`` states: the caller then keeps ``field`` and checks the call after it is written."""
    texts = json_texts(value_language(term, budget=budget), null=accepts(field, b"null"), budget=budget)
    return restrict(field, texts, budget=budget)


# --- terms ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ValueEnum:
    """Equal to one of ``values`` (values bound earlier)."""

    values: tuple[str, ...]


@dataclass(frozen=True)
class ValueSubstrings:
    """A substring of one of ``texts`` (earlier steps' texts; ``in``, so ``""`` too)."""

    texts: tuple[str, ...]


@dataclass(frozen=True)
class ValueNot:
    term: ValueTerm


@dataclass(frozen=True)
class ValueAnd:
    terms: tuple[ValueTerm, ...]


@dataclass(frozen=True)
class ValueOr:
    terms: tuple[ValueTerm, ...]


ValueTerm = ValueEnum | ValueSubstrings | ValueNot | ValueAnd | ValueOr


def value_language(term: ValueTerm, *, budget: int = MAX_VALUE_STATES) -> ValueLanguage:
    """The language of a term, built once per (term, budget): a conjunction starts from its
    smallest finite part, a negation inside a conjunction becomes a difference (no complement
    is built for ``a and not b``)."""
    return _compiled(term, budget)


@functools.lru_cache(maxsize=16)  # a 10 kB text's substrings are ~15 MB of table
def _compiled(term: ValueTerm, budget: int) -> ValueLanguage:
    if isinstance(term, ValueEnum):
        return enum_language(term.values, budget=budget)
    if isinstance(term, ValueSubstrings):
        return substring_language(term.texts, budget=budget)
    if isinstance(term, ValueNot):
        return complement(_compiled(term.term, budget), budget=budget)
    if isinstance(term, ValueOr):
        if not term.terms:
            return enum_language((), budget=budget)
        langs = [_compiled(t, budget) for t in term.terms]
        out = langs[0]
        for x in langs[1:]:
            out = union(out, x, budget=budget)
        return out
    pos = [t for t in term.terms if not isinstance(t, ValueNot)]
    neg = [t.term for t in term.terms if isinstance(t, ValueNot)]
    if not pos:
        if not neg:
            return complement(enum_language((), budget=budget), budget=budget)
        return complement(_compiled(ValueOr(tuple(neg)), budget), budget=budget)
    langs = sorted((_compiled(t, budget) for t in pos),
                   key=lambda x: (x.finite is None, x.num_states))
    out = langs[0]
    for x in langs[1:]:
        out = intersection(out, x, budget=budget)
    for t in neg:
        out = difference(out, _compiled(t, budget), budget=budget)
    return out


def clear_caches() -> None:
    """Forget the value languages built so far."""
    _compiled.cache_clear()


def to_json(term: ValueTerm) -> dict[str, object]:
    """A term as plain JSON (to travel with a turn's options to a served model)."""
    if isinstance(term, ValueEnum):
        return {"enum": list(term.values)}
    if isinstance(term, ValueSubstrings):
        return {"substrings": list(term.texts)}
    if isinstance(term, ValueNot):
        return {"not": to_json(term.term)}
    return {"and" if isinstance(term, ValueAnd) else "or": [to_json(t) for t in term.terms]}


def from_json(data: Mapping[str, object]) -> ValueTerm:
    """The term :func:`to_json` wrote; a :class:`UsageError` for anything else."""
    if not isinstance(data, Mapping) or len(data) != 1:
        raise UsageError(f"a value term is an object with one key, got {data!r}")
    ((key, arg),) = data.items()
    if key in ("enum", "substrings"):
        if not isinstance(arg, list) or not all(isinstance(x, str) for x in arg):
            raise UsageError(f"value term {key!r} takes a list of strings, got {arg!r}")
        return ValueEnum(tuple(arg)) if key == "enum" else ValueSubstrings(tuple(arg))
    if key == "not" and isinstance(arg, Mapping):
        return ValueNot(from_json(arg))
    if key in ("and", "or") and isinstance(arg, Sequence) and not isinstance(arg, str):
        if not all(isinstance(x, Mapping) for x in arg):
            raise UsageError(f"value term {key!r} takes a list of terms, got {arg!r}")
        terms = tuple(from_json(x) for x in arg if isinstance(x, Mapping))
        return ValueAnd(terms) if key == "and" else ValueOr(terms)
    raise UsageError(f"unknown value term {data!r}",
                     hint="one of enum, substrings (lists of strings), not, and, or")
