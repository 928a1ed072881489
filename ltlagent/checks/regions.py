"""The kinds of chat step two event specs can tell apart, each with a message that is one
(docs/design.md §8).

A chat step is in the first declared state whose options all match it (§2.5), so what a spec does
with a step depends only on its *class* (author and kind; for a call, the tool: each tool a
``(:call …)`` names, and one tool none names) and on which of the class's matchers hold (each
distinct ``(:contains R)`` regex, each distinct ``(:args (K (:regex R)))`` test). For every truth
assignment of those matchers each spec picks its first state whose matchers all hold (or none),
which gives a *letter*: the pair (state in A, state in B). :func:`step_alphabet` lists the letters
that some message really produces, each with such a message (a *witness*), built as follows and
then read back as a chat step and checked against every matcher with Python's ``re``:

* an argument's value: the shortest string, printable ASCII first, that the product of the
  content DFAs (:mod:`ltlagent.text.content`) of the key's regexes accepts and rejects as the
  assignment says; an absent key makes every test on it false;
* a message's text: the matching regexes' sample strings joined, or, when every regex of the
  class has an exact DFA (no ``(?i)``, ``\\b``, lookaround or ``\\d``-like classes), the product of
  their search DFAs; a call's text is its arguments as JSON, with a ``note`` argument carrying the
  samples when a ``(:contains …)`` must match.

An assignment for which no witness is found is *proved empty* only when the DFAs decide it (an
argument's regexes, or a text's exact regexes); otherwise its letter is *undecided* and the caller
must not claim more than the witnessed letters allow. Only well-formed messages are considered (a
call's arguments a JSON object): a call whose arguments are not JSON is malformed in ``check-log``.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ltlagent.chat.events import Event, message_events
from ltlagent.errors import UsageError
from ltlagent.spec.shadow import exact_regex, regex_key
from ltlagent.spec.syntax import AUTHORS, State
from ltlagent.text.content import ContentDFA, pattern_dfa

__all__ = ["Letter", "Undecided", "Alphabet", "step_alphabet", "describe_message",
           "MAX_MATCHERS"]

#: Most distinct matchers in one class of steps: every truth assignment of them is tried.
MAX_MATCHERS = 14
#: Most product states one DFA search visits before it gives up (undecided).
_SEARCH_BUDGET = 10_000
#: Bytes in the order a witness tries them: printable ASCII first, so witnesses read well.
_BYTES = (*range(32, 127), *range(0, 32), *range(127, 256))

_Pred = tuple[str, str, str]  # ("contains", "", regex) or ("args", key, regex)
_EMPTY = "empty"  # a witness search's answer when the assignment is proved unsatisfiable


@dataclass(frozen=True)
class Letter:
    """Steps that spec A puts in its state ``a`` and spec B in ``b`` (indices into each spec's
    states; -1: no state matches), with one such step as an OpenAI-format message."""

    a: int
    b: int
    message: Mapping[str, object]


@dataclass(frozen=True)
class Undecided:
    """A letter that may exist, for which neither a witness nor a proof of emptiness was found."""

    a: int
    b: int
    steps: str  # the class of steps, in words ("user messages", "calls to 'book'")
    why: str


@dataclass(frozen=True)
class Alphabet:
    """The letters some message produces, and those that could not be decided."""

    letters: tuple[Letter, ...]
    undecided: tuple[Undecided, ...]


@dataclass(frozen=True)
class _Class:
    """Steps of one author and kind (and tool, for calls)."""

    author: str
    tool: str | None  # None: text steps

    def applies(self, st: State) -> bool:
        """Whether ``st`` can match steps of this class (its other options decide which)."""
        if self.tool is None:
            return st.calls is None and st.author in (None, self.author)
        return st.calls is not None and (not st.calls or self.tool in st.calls)

    def words(self) -> str:
        """The class in words, for reports."""
        return f"{self.author} messages" if self.tool is None else f"calls to {self.tool!r}"


def _preds(st: State, same: dict[object, str]) -> frozenset[_Pred]:
    """The matchers a step must pass to be in ``st`` (beyond its class); a regex written
    differently from one seen before with the same parse tree (``same``) is that one."""
    def one(rx: str) -> str:
        return same.setdefault(regex_key(rx), rx)

    out: set[_Pred] = {("args", k, one(r)) for k, r in st.args}
    if st.contains is not None:
        out.add(("contains", "", one(st.contains)))
    return frozenset(out)


def _holds(p: _Pred, ev: Event) -> bool:
    """Whether matcher ``p`` holds at step ``ev``, read off docs/design.md §2.5."""
    what, key, rx = p
    if what == "contains":
        return re.search(rx, ev.text) is not None
    if ev.arguments is None or key not in ev.arguments:
        return False
    v = ev.arguments[key]
    return re.fullmatch(rx, v if isinstance(v, str) else json.dumps(v, ensure_ascii=False),
                        re.ASCII) is not None


def step_alphabet(a: Sequence[State], b: Sequence[State]) -> Alphabet:
    """The letters (state in ``a``, state in ``b``) that chat steps produce, with witnesses."""
    tools = sorted({t for st in (*a, *b) for t in (st.calls or ())})
    other = "other_tool"
    while other in tools:
        other += "_"
    classes = [_Class(w, None) for w in AUTHORS] + [_Class("assistant", t) for t in
                                                    (*tools, other)]
    keys = {k for st in (*a, *b) for k, _ in st.args}
    note = "note"
    while note in keys:
        note += "_"
    letters: dict[tuple[int, int], Letter] = {}
    undecided: dict[tuple[int, int], Undecided] = {}
    for cls in classes:
        _class_letters(cls, a, b, note, letters, undecided)
    return Alphabet(tuple(letters.values()),
                    tuple(u for k, u in undecided.items() if k not in letters))


def _class_letters(cls: _Class, a: Sequence[State], b: Sequence[State], note: str,
                   letters: dict[tuple[int, int], Letter],
                   undecided: dict[tuple[int, int], Undecided]) -> None:
    """Add the letters of one class of steps (and those left undecided)."""
    same: dict[object, str] = {}
    side_a = [(i, _preds(st, same)) for i, st in enumerate(a) if cls.applies(st)]
    side_b = [(i, _preds(st, same)) for i, st in enumerate(b) if cls.applies(st)]
    preds = sorted({p for _, ps in (*side_a, *side_b) for p in ps})
    if len(preds) > MAX_MATCHERS:
        raise UsageError(f"cannot decide: the states of the two specs test {len(preds)} different "
                         f"matchers on {cls.words()}, more than the {MAX_MATCHERS} whose every "
                         "combination this check tries")

    def first(side: list[tuple[int, frozenset[_Pred]]], true: frozenset[_Pred]) -> int:
        return next((i for i, ps in side if ps <= true), -1)

    solver = _Solver(cls, preds, note)
    masks = sorted(range(1 << len(preds)), key=lambda m: (bin(m).count("1"), m))
    for mask in masks:
        true = frozenset(p for k, p in enumerate(preds) if mask >> k & 1)
        pair = (first(side_a, true), first(side_b, true))
        if pair in letters:
            continue
        found, why = solver.witness(true)
        if found is not None:  # read back as a step: the letter it really is
            ev = message_events(found, 0)[0]
            real = frozenset(p for p in preds if _holds(p, ev))
            got = (first(side_a, real), first(side_b, real))
            letters.setdefault(got, Letter(*got, found))
            if got == pair:
                continue
        if why != _EMPTY:
            undecided.setdefault(pair, Undecided(*pair, cls.words(),
                                                 why or "no message was found for it"))


class _Solver:
    """Builds a message of one class for a given set of true matchers (the others false)."""

    def __init__(self, cls: _Class, preds: list[_Pred], note: str) -> None:
        self.cls, self.preds, self.note = cls, preds, note
        self.dfas: dict[tuple[str, bool], ContentDFA | None] = {}
        self.solved: dict[tuple[tuple[str, ...], tuple[str, ...], bool], tuple[str] | str] = {}

    def witness(self, true: frozenset[_Pred]) -> tuple[dict[str, object] | None, str]:
        """``(message, "")`` with a message whose step makes exactly ``true`` hold; ``(None,
        _EMPTY)`` when no step can; else ``(a message that was tried or None, why no witness
        was found)`` (the caller still learns where the tried message lands)."""
        args: dict[str, str] = {}
        for key in sorted({k for w, k, _ in self.preds if w == "args"}):
            on_key = [p for p in self.preds if p[0] == "args" and p[1] == key]
            pos = [p[2] for p in on_key if p in true]
            if not pos:
                continue  # an absent key fails every test on it
            value = self.solve(pos, [p[2] for p in on_key if p not in true], search=False)
            if not isinstance(value, tuple):
                return None, value
            args[key] = value[0]
        contains = [p[2] for p in self.preds if p[0] == "contains"]
        pos = [p[2] for p in self.preds if p[0] == "contains" and p in true]
        tried: dict[str, object] | None = None
        for msg in self.candidates(self.texts(pos), args):
            ev = message_events(msg, 0)[0]
            if all(_holds(p, ev) == (p in true) for p in self.preds):
                return msg, ""
            tried = tried or msg
        if self.cls.tool is None and all(_exact_search(r) for r in contains):
            found = self.solve(pos, [r for r in contains if r not in pos], search=True)
            if isinstance(found, tuple):
                return {"role": self.cls.author, "content": found[0]}, ""
            return (None if found == _EMPTY else tried), found
        return tried, "no message was found for it, and its :contains regexes are beyond " \
            "exact analysis"

    def texts(self, pos: list[str]) -> list[str]:
        """Candidate texts (for a call, candidate ``note`` values) in which each of ``pos``
        finds a match."""
        if not pos:  # a call's arguments alone, then with a note
            return ["hello", ""] if self.cls.tool is None else ["", "hello"]
        samples = [_samples(r) for r in pos]
        if any(not s for s in samples):
            return []
        out = []
        for k in range(max(len(s) for s in samples)):
            picked = [s[min(k, len(s) - 1)] for s in samples]
            out += [" ".join(picked), "".join(picked), "\n".join(picked)]
        return out

    def candidates(self, texts: list[str], args: dict[str, str]) -> list[dict[str, object]]:
        """Messages of this class built from ``texts``: the text itself, or for a call the
        arguments with the text as a ``note`` (after or before them, spaced or compact)."""
        if self.cls.tool is None:
            return [{"role": self.cls.author, "content": t} for t in texts]
        out: list[dict[str, object]] = []
        for t in texts:
            for obj in ({**args, self.note: t} if t else dict(args), {self.note: t, **args}):
                for seps in ((", ", ": "), (",", ":")):
                    out.append({"role": "assistant", "content": None, "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {
                            "name": self.cls.tool, "arguments": json.dumps(obj, separators=seps)}}]})
        return out

    def dfa(self, rx: str, search: bool) -> ContentDFA | None:
        """The content DFA of ``rx`` (built once), None where the DFAs do not cover it."""
        if (rx, search) not in self.dfas:
            try:
                self.dfas[rx, search] = pattern_dfa(rx, search=search)
            except UsageError:
                self.dfas[rx, search] = None
        return self.dfas[rx, search]

    def solve(self, pos: list[str], neg: list[str], search: bool) -> tuple[str] | str:
        """The shortest UTF-8 text accepted by every DFA of ``pos`` and by none of ``neg``
        (``(text,)``); ``_EMPTY`` when proved impossible; else why not (a sentence). Memoised:
        the assignments of one class repeat each key's combination many times."""
        key = (tuple(pos), tuple(neg), search)
        if key not in self.solved:
            self.solved[key] = self._solve(pos, neg, search)
        return self.solved[key]

    def _solve(self, pos: list[str], neg: list[str], search: bool) -> tuple[str] | str:
        dfas = [self.dfa(r, search) for r in (*pos, *neg)]
        if any(d is None for d in dfas):
            return "no message was found for it, and a regex is beyond the content DFAs that " \
                "would rule it out"
        yes = [d for d in dfas[:len(pos)] if d is not None] or \
            [pattern_dfa("(?s).*")]  # some accepting DFA keeps the text valid UTF-8
        no = [d for d in dfas[len(pos):] if d is not None]
        found = _product_search(yes, no)
        if found is None:
            return "its regexes need a longer search than this check makes"
        if found == _EMPTY:
            # a DFA never accepts more than Python does, and may accept less (non-ASCII in classes
            # with \\d, \\w, \\s): no text is a proof when the regexes that must hold are exact
            # (a text's regexes are checked exact before the search)
            ok = search or all(exact_regex(r) for r in pos)
            return _EMPTY if ok else "its regexes are beyond exact analysis"
        return (found,)


def _product_search(yes: list[ContentDFA], no: list[ContentDFA]) -> str | None:
    """Shortest text every ``yes`` DFA accepts and no ``no`` DFA does: the text, ``_EMPTY`` when
    there is none, None when the search budget ran out."""
    start = (*(0 for _ in yes), *(0 for _ in no))
    parent: dict[tuple[int, ...], tuple[tuple[int, ...], int] | None] = {start: None}
    todo = deque([start])
    n = len(yes)
    while todo:
        s = todo.popleft()
        if all(q in d.accepting for q, d in zip(s[:n], yes)) and \
                not any(q >= 0 and q in d.accepting for q, d in zip(s[n:], no)):
            out = bytearray()
            node = parent[s]
            while node is not None:
                out.append(node[1])
                node = parent[node[0]]
            try:
                return bytes(reversed(out)).decode("utf-8")
            except UnicodeDecodeError:  # pragma: no cover - the yes DFAs accept UTF-8 only
                return None
        for c in _BYTES:
            nxt = []
            for q, d in zip(s[:n], yes):
                r = d.step(q, c)
                if r < 0:
                    break
                nxt.append(r)
            else:
                t = (*nxt, *(d.step(q, c) for q, d in zip(s[n:], no)))
                if t not in parent:
                    if len(parent) > _SEARCH_BUDGET:
                        return None
                    parent[t] = (s, c)
                    todo.append(t)
    return _EMPTY


def _exact_search(rx: str) -> bool:
    """Whether ``pattern_dfa(rx, search=True)`` finds exactly where Python's ``re.search`` does:
    no character category (``re.search`` without ``re.ASCII`` reads ``\\d``, ``\\w``, ``\\s`` as
    Unicode classes; the DFAs as ASCII ones)."""
    return exact_regex(rx) and not re.search(r"\\[dDwWsS]", rx)


def _samples(rx: str) -> list[str]:
    """A few texts in which ``re.search(rx, …)`` finds a match (none when none is found)."""
    out: list[str] = []
    try:
        import re._parser as P

        tree = P.parse(rx, 0)
    except re.error:  # an unreadable regex has no samples
        return out
    for variant in range(3):
        text = _generate(list(tree), variant)
        if text is None:
            continue
        # anchors, \\b and lookarounds were read as empty: a word or a space around may fix them
        fixed = next((t for t in (text, f"{text}a", f"a{text}", f" {text} ", f"a{text}a")
                      if re.search(rx, t) is not None), None)
        if fixed is None:
            continue
        # other spellings that still match (under (?i)), so a case-sensitive regex can miss them
        for t in (fixed, fixed.upper(), fixed.swapcase()):
            if t not in out and re.search(rx, t) is not None:
                out.append(t)
    return out


def _generate(items: list[Any], variant: int) -> str | None:
    """One text the parsed regex ``items`` matches, choosing by ``variant`` among branches and
    repetition counts (anchors and lookarounds are read as empty: the caller checks)."""
    import re._constants as C

    def one(op: Any, av: Any) -> str | None:
        if op is C.LITERAL:
            return chr(av)
        if op is C.NOT_LITERAL:
            return "a" if av != ord("a") else "b"
        if op is C.ANY:
            return "a"
        if op is C.IN:
            return _class_char(av)
        if op is C.BRANCH:
            alts = av[1]
            return _generate(list(alts[variant % len(alts)]), variant)
        if op is C.SUBPATTERN:
            return _generate(list(av[3]), variant)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, body = av
            times = lo if variant == 0 else min(max(lo, 1), hi)
            part = _generate(list(body), variant)
            return None if part is None else part * times
        if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            return ""
        return None  # backreferences and the like: no sample

    out = []
    for op, av in items:
        s = one(op, av)
        if s is None:
            return None
        out.append(s)
    return "".join(out)


def _class_char(items: list[Any]) -> str | None:
    """A character in the class ``items`` (of a parsed regex), tried from a fixed list."""
    import re._constants as C

    ranges: list[tuple[int, int]] = []
    cats: list[re.Pattern[str]] = []
    negate = False
    names = {C.CATEGORY_DIGIT: r"\d", C.CATEGORY_NOT_DIGIT: r"\D", C.CATEGORY_SPACE: r"\s",
             C.CATEGORY_NOT_SPACE: r"\S", C.CATEGORY_WORD: r"\w", C.CATEGORY_NOT_WORD: r"\W"}
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            ranges.append((av, av))
        elif op is C.RANGE:
            ranges.append(av)
        elif op is C.CATEGORY and av in names:
            cats.append(re.compile(names[av]))
        else:
            return None

    def inside(c: str) -> bool:
        return any(lo <= ord(c) <= hi for lo, hi in ranges) or \
            any(r.fullmatch(c) is not None for r in cats)

    literal = [chr(lo) for lo, hi in ranges if lo == hi]
    for c in [*literal, *"aA0 x_-.,:;!?/Zz9\t\n", *(chr(k) for k in range(33, 127))]:
        if inside(c) != negate:
            return c
    return None


def describe_message(message: Mapping[str, object]) -> str:
    """A message in one short line: ``user: "yes"``, ``assistant calls book({"room": "x"})``."""
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        fn = calls[0]["function"]
        return f"{message['role']} calls {fn['name']}({fn['arguments']})"
    return f"{message['role']}: {json.dumps(message.get('content'), ensure_ascii=False)}"
