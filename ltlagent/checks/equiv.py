"""``ltlagent check-equiv``: do two specs accept the same traces? (docs/design.md §8)

States are matched by name. Both specs are recompiled over the union of their state names (a
spec lacking a state simply never uses it), so both automata read the same alphabet with the same
binary code, and Spot can compare them directly:

* finite specs compare as sets of finite traces. Spot is asked about the pinned ω-languages
  (after the end every letter is code 0, as in Spot's own LTLf tests), where equality is exactly
  equality of the finite-trace languages; the counterexample is found by a breadth-first search
  over the product of the two deterministic tables, so it is a shortest one in each direction;
* infinite specs compare as ω-languages. The counterexample is a lasso ``prefix (cycle)^ω``: the
  shortest prefix + cycle among lassos whose cycle returns to the same pair of automaton states,
  with Spot's acceptance condition evaluated on the marks the cycle visits, then minimised
  (primitive cycle, loop start rolled back); Spot checks the verdict and the lasso.

Differences in the state tables (texts, flags, content options) are reported separately: the
behaviours can be equal while the texts differ. ``--implies`` checks containment instead.
Exit 0: equivalent (or contained), 1: not, 2: error.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ltlagent import spotlib
from ltlagent.checks.regions import Letter, Undecided, describe_message, step_alphabet
from ltlagent.errors import CompileError, UsageError
from ltlagent.logic.automaton import Automaton, build_automaton
from ltlagent.spec.syntax import PAST_OPERATORS, Spec

__all__ = ["Counterexample", "StateDifference", "EquivResult", "check_equivalence", "compact",
           "is_first_order"]

_STATE_FIELDS = ("text", "env_input", "choices", "regex", "stop", "max_tokens", "author", "calls",
                 "args", "contains")


@dataclass(frozen=True)
class Counterexample:
    """A trace one side accepts and the other does not; ``cycle`` is set for a lasso."""

    accepted_by: str  # "a" or "b"
    trace: tuple[str, ...]  # the accepting spec's states
    cycle: tuple[str, ...] | None = None
    #: event specs: the conversation (OpenAI-format messages, one step each) and the rejecting
    #: spec's state of each step (None: no state matches it)
    messages: tuple[Mapping[str, object], ...] | None = None
    rejected_states: tuple[str | None, ...] | None = None

    @property
    def length(self) -> int:
        return len(self.trace) + len(self.cycle or ())

    def words(self) -> str:
        if self.cycle is None:
            return " ".join(self.trace) or "(empty trace)"
        return " ".join([*self.trace, "(" + " ".join(self.cycle) + ")^ω"])

    def compact(self) -> str:
        if self.cycle is None:
            return compact(self.trace)
        return " ".join(x for x in (compact(self.trace), "(" + compact(self.cycle) + ")^ω") if x)

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {"accepted_by": self.accepted_by,
                                "rejected_by": "b" if self.accepted_by == "a" else "a"}
        if self.messages is not None:
            d["messages"] = [dict(m) for m in self.messages]
            d["states"] = {self.accepted_by: list(self.trace),
                           d["rejected_by"]: list(self.rejected_states or ())}
        elif self.cycle is None:
            d["trace"] = list(self.trace)
        else:
            d["prefix"], d["cycle"] = list(self.trace), list(self.cycle)
        return d


@dataclass(frozen=True)
class StateDifference:
    """A same-named state whose declaration differs, or a state declared on one side only."""

    state: str
    field: str  # a State field name, or "declared"
    a: object
    b: object

    def message(self, la: str, lb: str) -> str:
        if self.field == "same-text":
            return f"{self.a} in {la} and {self.b} in {lb} have the same text " \
                   f"{self.state!r}: states are matched by name, rename one to compare them"
        if self.field == "never-matched":
            return f"{self.state}: no step is ever in it in {la if self.a else lb} (earlier " \
                   "states take every step it matches)"
        if self.field == "renamed":
            return f"{self.a} in {la} is {self.b} in {lb}: they take the same steps"
        if self.field == "declared":
            side, other = (la, self.a) if self.a is not None else (lb, self.b)
            return f"{self.state}: declared only in {side}" + (
                "" if other == "visited" else " (no trace of it visits the state)")
        return f"{self.state}: {self.field.replace('_', '-')} {_val(self.a)} in {la}, " \
               f"{_val(self.b)} in {lb}"

    def to_dict(self) -> dict[str, object]:
        return {"state": self.state, "field": self.field, "a": _json(self.a), "b": _json(self.b)}


@dataclass(frozen=True)
class EquivResult:
    """The verdict of comparing spec ``a`` with spec ``b``."""

    a: str
    b: str
    implies: bool
    holds: bool
    infinite: tuple[bool, bool]
    counterexamples: tuple[Counterexample, ...]
    state_differences: tuple[StateDifference, ...]
    names: tuple[str, ...]
    seconds: float
    #: event specs: compared as sets of accepted conversations (each step classified, §2.5)
    events: bool = False
    #: event specs: letters (state in a, state in b) that neither a message nor a proof settled;
    #: when non-empty the verdict is "cannot decide" (``holds`` is False)
    undecided: tuple[str, ...] = ()
    #: False when some letters stayed undecided although the verdict did not depend on them (the
    #: counterexamples found are real; "every conversation of B is accepted by A" is not claimed)
    complete: bool = True

    @property
    def decided(self) -> bool:
        """False when the verdict is "cannot decide" (see ``undecided``)."""
        return not self.undecided

    def render(self) -> str:
        a, b = self.a, self.b
        sem = {(False, False): "finite traces", (True, True): "infinite traces"}.get(
            self.infinite, "finite against infinite traces")
        unit = "trace"
        if self.events:
            sem, unit = "each step in the first state that matches it", "conversation"
        out = []
        if self.undecided:
            out.append(f"cannot decide: whether {a} {'implies' if self.implies else 'equals'} {b} "
                       "depends on kinds of step for which no message could be built and which "
                       "could not be ruled out:")
            out += [f"  {u}" for u in self.undecided]
        elif self.holds:
            what = f"every {unit} of {a} is a {unit} of {b}" if self.implies else \
                f"{a} and {b} accept the same {unit}s"
            out.append(f"{'implies' if self.implies else 'equivalent'}: {what} ({sem})")
        else:
            what = f"{a} has {unit}s that {b} rejects" if self.implies else \
                f"{a} and {b} accept different {unit}s"
            out.append(f"{'does not imply' if self.implies else 'not equivalent'}: {what} ({sem})")
            for ce in self.counterexamples:
                yes, no = (a, b) if ce.accepted_by == "a" else (b, a)
                if ce.messages is not None:
                    out += _render_conversation(ce, yes, no)
                    continue
                step = "step" if ce.cycle is None else "letter"
                out.append(f"  accepted by {yes}, rejected by {no} "
                           f"({ce.length} {step}{'s' * (ce.length != 1)}):")
                out.append(f"    {ce.words()}")
                if ce.compact() != ce.words():
                    out.append(f"    = {ce.compact()}")
            if not self.implies and len(self.counterexamples) == 1 and self.complete:
                ce = self.counterexamples[0]
                bigger, smaller = (a, b) if ce.accepted_by == "a" else (b, a)
                out.append(f"  every {unit} of {smaller} is accepted by {bigger}")
        if self.state_differences:
            out.append("state differences (the verdict above is about behaviour only):"
                       if self.events else "state differences (states are matched by name; the "
                       "verdict above is about behaviour only):")
            out += [f"  {d.message(a, b)}" for d in self.state_differences]
        return "\n".join(out)

    def to_dict(self) -> dict[str, object]:
        return {"a": self.a, "b": self.b, "check": "implication" if self.implies else "equivalence",
                "holds": self.holds, "exit": self.exit_code,
                "compared": "conversations" if self.events else "traces",
                "undecided": list(self.undecided),
                "infinite": {"a": self.infinite[0], "b": self.infinite[1]},
                "states": list(self.names),
                "counterexamples": [c.to_dict() for c in self.counterexamples],
                "state_differences": [d.to_dict() for d in self.state_differences],
                "seconds": round(self.seconds, 6)}


    @property
    def exit_code(self) -> int:
        """0: equivalent (or implies), 1: not, 2: cannot decide."""
        return 2 if self.undecided else 0 if self.holds else 1


def _render_conversation(ce: Counterexample, yes: str, no: str) -> list[str]:
    """A distinguishing conversation, one message a line with the state each spec puts it in."""
    msgs = ce.messages or ()
    out = [f"  accepted by {yes}, rejected by {no} ({len(msgs)} message{'s' * (len(msgs) != 1)}):"]
    lines = [describe_message(m) for m in msgs]
    width = min(60, max(len(x) for x in lines)) if lines else 0
    for k, (line, st, other) in enumerate(zip(lines, ce.trace, ce.rejected_states or ())):
        where = f"{st} in both" if st == other else \
            f"{st} in {yes}, {other or 'no state'} in {no}"
        out.append(f"    {k + 1}. {line.ljust(width)}  [{where}]")
    return out


def _val(v: object) -> str:
    if v is None or v == ():
        return "(none)"
    if isinstance(v, tuple):
        return " ".join(repr(x) for x in v)
    return repr(v)


def _json(v: object) -> object:
    return list(v) if isinstance(v, tuple) else v


def compact(seq: Sequence[str]) -> str:
    """A trace with repeated blocks folded: ``(Thought Action)×3 Answer``."""
    out: list[str] = []
    i, n = 0, len(seq)
    while i < n:
        best_len, best_rep = 1, 1
        for size in range(1, min(12, (n - i) // 2) + 1):
            rep = 1
            while tuple(seq[i + rep * size: i + (rep + 1) * size]) == tuple(seq[i: i + size]):
                rep += 1
            if rep >= 2 and size * rep > best_len * best_rep:
                best_len, best_rep = size, rep
        if best_rep >= 2:
            block = " ".join(seq[i: i + best_len])
            out.append(f"{block}×{best_rep}" if best_len == 1 else f"({block})×{best_rep}")
            i += best_len * best_rep
        else:
            out.append(seq[i])
            i += 1
    return " ".join(out)


# -- comparing -------------------------------------------------------------------------------------

def _widen(spec: Spec, names: tuple[str, ...], other: Spec) -> Spec:
    """``spec`` with its states in the order ``names``, plus the other spec's extra states."""
    mine = {s.name: s for s in spec.states}
    theirs = {s.name: s for s in other.states}
    return replace(spec, states=tuple(mine.get(n) or theirs[n] for n in names))


def state_differences(a: Spec, b: Spec, ta: Automaton, tb: Automaton) -> list[StateDifference]:
    out: list[StateDifference] = []
    sa, sb = {s.name: s for s in a.states}, {s.name: s for s in b.states}
    for name in [*sa, *(n for n in sb if n not in sa)]:
        x, y = sa.get(name), sb.get(name)
        if x is None or y is None:
            t = ta if y is None else tb
            seen = "visited" if name in t.visited_names else "unvisited"
            out.append(StateDifference(name, "declared", seen if y is None else None,
                                       seen if x is None else None))
            continue
        for f in _STATE_FIELDS:
            if getattr(x, f) != getattr(y, f):
                out.append(StateDifference(name, f, getattr(x, f), getattr(y, f)))
    only_b = {s.text: s.name for s in b.states if s.name not in sa and s.text}
    for s in a.states:
        if s.name not in sb and s.text and s.text in only_b:
            out.append(StateDifference(s.text, "same-text", s.name, only_b[s.text]))
    return out


#: Most past subformulas (distinct, over all constraints) a policy may have for check-equiv, which
#: determinises the whole conjunction (§3.5): past that the product can take minutes (design §3.6).
EQUIV_PAST_LIMIT = 12


def past_subformulas(spec: Spec) -> int:
    """The number of distinct past subformulas in a spec's constraints."""
    seen: set[object] = set()
    todo = list(spec.constraints)
    while todo:
        f = todo.pop()
        if f.op in PAST_OPERATORS:
            seen.add(replace(f, name=None))
        todo.extend(f.args)
    return len(seen)


def is_first_order(spec: Spec) -> bool:
    """True for a spec with first-order rules (``(:args (KEY ?var))``, ``forall``/``exists``,
    ``(State ?x)``, ``mentions``, design §2.6), which this check does not decide."""
    return spec.is_first_order


def check_equivalence(a: Spec, b: Spec, *, implies: bool = False, label_a: str = "a",
                      label_b: str = "b") -> EquivResult:
    """Compare the behaviours of two specs (both directions, or ``a ⊆ b`` with ``implies``):
    event specs by the conversations they accept, others by their traces of state names."""
    t0 = time.perf_counter()
    if a.is_event_spec or b.is_event_spec:
        return _check_events(a, b, implies, label_a, label_b, t0)
    names = (*a.names, *(n for n in b.names if n not in a.names))
    wa, wb = _widen(a, names, b), _widen(b, names, a)
    ta, tb = build_automaton(wa), build_automaton(wb)
    ces: list[Counterexample] = []
    if ta.infinite != tb.infinite:
        ces.append(_some_word(ta, "a"))
        if not implies:
            ces.append(_some_word(tb, "b"))
    elif not ta.infinite:
        found = _finite_counterexamples(ta, tb, want_b=not implies)
        _spot_agrees(ta, tb, found, implies)
        ces = [c for c in (found.get("a"), found.get("b")) if c is not None]
    else:
        ces = _omega_counterexamples(ta, tb, implies)
    diffs = state_differences(a, b, ta, tb)
    return EquivResult(label_a, label_b, implies, not ces, (ta.infinite, tb.infinite), tuple(ces),
                       tuple(diffs), names, time.perf_counter() - t0)


def _some_word(t: Automaton, side: str) -> Counterexample:
    """A shortest trace (finite spec) or a short lasso (infinite spec) the automaton accepts."""
    if not t.infinite:
        return Counterexample(side, t.shortest_completion(t.initial))
    res = _omega_search(_OmegaTable.of(t), None, "a")
    if res is None:  # build_automaton rejects specs that admit no trace
        raise CompileError("an infinite spec without an accepted lasso")
    return replace(res, accepted_by=side)


def _finite_counterexamples(ta: Automaton, tb: Automaton, want_b: bool = True
                            ) -> dict[str, Counterexample]:
    """Shortest traces accepted by exactly one side: BFS over the product of the two tables."""
    n = len(ta.names)
    da, db = ta.live_delta, tb.live_delta
    acc_a, acc_b = ta.accepting, tb.accepting
    start = (ta.initial, tb.initial)
    parent: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {start: None}
    todo = deque([start])
    found: dict[str, tuple[int, int]] = {}
    wanted = {"a", "b"} if want_b else {"a"}
    while todo and not wanted <= found.keys():
        p = todo.popleft()
        qa, qb = p
        ya, yb = qa in acc_a, qb in acc_b
        if ya != yb:
            found.setdefault("a" if ya else "b", p)
        for i in range(n):
            ra = da[qa][i] if qa >= 0 else -1
            rb = db[qb][i] if qb >= 0 else -1
            if (ra >= 0 or rb >= 0) and (ra, rb) not in parent:
                parent[(ra, rb)] = (p, i)
                todo.append((ra, rb))
    out = {}
    for side in sorted(wanted & found.keys()):
        word: list[str] = []
        node = parent[found[side]]
        while node is not None:
            word.append(ta.names[node[1]])
            node = parent[node[0]]
        out[side] = Counterexample(side, tuple(reversed(word)))
    return out


def _spot_agrees(ta: Automaton, tb: Automaton, found: dict[str, Counterexample],
                 implies: bool) -> None:
    """Ask Spot (pinned ω-languages of the finite specs) and check that the search agrees."""
    fa, fb = ta.pinned_spot_automaton(), tb.pinned_spot_automaton()
    a_in_b = spotlib.contains(fb, fa)
    b_in_a = True if implies else spotlib.contains(fa, fb)
    if a_in_b != ("a" not in found) or b_in_a != ("b" not in found):
        raise CompileError(f"product search and Spot disagree on {ta.formulas.readable} vs "
                           f"{tb.formulas.readable}")
    for side, ce in found.items():
        if (ta.run(ce.trace).accepted, tb.run(ce.trace).accepted) != (side == "a", side == "b"):
            raise CompileError(f"counterexample {ce.words()} does not separate the specs")


@dataclass(frozen=True)
class _OmegaTable:
    """A deterministic ω-automaton as a table with the acceptance marks of each transition."""

    names: tuple[str, ...]
    initial: int
    delta: tuple[tuple[tuple[int, int], ...], ...]  # (successor or -1, marks as a bit mask)
    accepting: frozenset[int]  # the mark sets whose infinite recurrence satisfies acceptance

    @classmethod
    def of(cls, t: Automaton) -> _OmegaTable:
        """The live part of ``t``'s Spot automaton, with the marks of each edge."""
        live = t.live
        rows = tuple(
            tuple(next(((dst, marks) for dst, marks in hits if dst in live), (-1, 0))
                  if q in live else (-1, 0) for hits in row)
            for q, row in enumerate(t.letter_edges))
        return cls(t.names, t.initial, rows, t.accepting_marks)

    def step(self, q: int, i: int) -> tuple[int, int]:
        return self.delta[q][i] if q >= 0 else (-1, 0)


def _omega_search(xa: _OmegaTable, xb: _OmegaTable | None, side: str) -> Counterexample | None:
    """A short lasso accepted by one side (``side``) and not the other (``None``: nothing)."""
    yes, no = (xa, xb) if side == "a" else (xb, xa)
    assert yes is not None
    n = len(yes.names)

    def succ(p: tuple[int, int], i: int) -> tuple[tuple[int, int], int, int]:
        (ry, my), (rn, mn) = yes.step(p[0], i), (no.step(p[1], i) if no else (-1, 0))
        return (ry, rn), my, mn

    start = (yes.initial, no.initial if no else -1)
    dist: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {start: None}
    order = [start]
    for p in order:  # BFS over the product (grows while iterating)
        for i in range(n):
            r, _, _ = succ(p, i)
            if r[0] >= 0 and r not in dist:
                dist[r] = (p, i)
                order.append(r)
    depth = {start: 0}
    for p in order[1:]:
        came = dist[p]
        assert came is not None  # only the start has no parent
        depth[p] = depth[came[0]] + 1
    best: tuple[int, tuple[int, int], list[int]] | None = None
    for p in order:
        if best is not None and depth[p] >= best[0]:
            break
        limit = None if best is None else best[0] - depth[p]
        cyc = _cycle(p, succ, n, yes.accepting, no.accepting if no else frozenset(), no is not None,
                     limit)
        if cyc is not None and (best is None or depth[p] + len(cyc) < best[0]):
            best = (depth[p] + len(cyc), p, cyc)
    if best is None:
        return None
    prefix: list[int] = []
    node = dist[best[1]]
    while node is not None:
        prefix.append(node[1])
        node = dist[node[0]]
    pre, cyc = _minimise(list(reversed(prefix)), best[2])
    return Counterexample(side, tuple(yes.names[i] for i in pre), tuple(yes.names[i] for i in cyc))


_Succ = Callable[[tuple[int, int], int], tuple[tuple[int, int], int, int]]


def _cycle(p: tuple[int, int], succ: _Succ, n: int, good_y: frozenset[int],
           good_n: frozenset[int], has_no: bool, limit: int | None) -> list[int] | None:
    """Shortest cycle p → p whose marks make the yes side accept and the no side reject."""
    start = (p, 0, 0)
    parent: dict[tuple[tuple[int, int], int, int], tuple[tuple[tuple[int, int], int, int], int]] = {}
    frontier = [start]
    steps = 0
    while frontier and (limit is None or steps < limit):
        steps += 1
        nxt = []
        for node in frontier:
            q, my, mn = node
            for i in range(n):
                r, ay, an = succ(q, i)
                if r[0] < 0:
                    continue
                key = (r, my | ay, mn | an)
                if r == p and key[1] in good_y and not (has_no and r[1] >= 0 and key[2] in good_n):
                    word = [i]
                    cur = node
                    while cur != start:
                        cur, j = parent[cur]
                        word.append(j)
                    return list(reversed(word))
                if key not in parent and key != start:
                    parent[key] = (node, i)
                    nxt.append(key)
        frontier = nxt
    return None


def _minimise(prefix: list[int], cycle: list[int]) -> tuple[list[int], list[int]]:
    """The same ω-word with a primitive cycle and the shortest prefix."""
    for size in range(1, len(cycle) + 1):
        if len(cycle) % size == 0 and cycle == cycle[:size] * (len(cycle) // size):
            cycle = cycle[:size]
            break
    while prefix and prefix[-1] == cycle[-1]:
        prefix = prefix[:-1]
        cycle = [cycle[-1], *cycle[:-1]]
    return prefix, cycle


def _omega_counterexamples(ta: Automaton, tb: Automaton, implies: bool) -> list[Counterexample]:
    sa, sb = ta.spot_automaton(), tb.spot_automaton()
    a_in_b = spotlib.contains(sb, sa)
    b_in_a = True if implies else spotlib.contains(sa, sb)
    xa, xb = _OmegaTable.of(ta), _OmegaTable.of(tb)
    out = []
    for side, holds, yes, no in (("a", a_in_b, ta, tb), ("b", b_in_a, tb, ta)):
        if holds:
            continue
        ce = _omega_search(xa, xb, side) or _spot_lasso(yes, no, side)
        if not (yes.accepts_lasso(list(ce.trace), list(ce.cycle or ()))
                and not no.accepts_lasso(list(ce.trace), list(ce.cycle or ()))):
            raise CompileError(f"lasso {ce.words()} does not separate the specs")
        out.append(ce)
    return out


def _spot_lasso(yes: Automaton, no: Automaton, side: str) -> Counterexample:
    """Spot's word accepted by ``yes`` and not ``no``, as state names (each letter: the first
    state whose code it admits)."""
    pre, cyc = spotlib.difference_word(yes.spot_automaton(), no.spot_automaton(), yes.state_cubes)
    if -1 in pre or -1 in cyc:
        raise CompileError("Spot returned a letter that is no state")
    return Counterexample(side, tuple(yes.names[i] for i in pre), tuple(yes.names[i] for i in cyc))


# -- event specs: conversations ---------------------------------------------------------------------

def _check_events(a: Spec, b: Spec, implies: bool, label_a: str, label_b: str,
                  t0: float) -> EquivResult:
    """Compare two event specs by the conversations they accept (as ``check-log`` says ok): a
    breadth-first search over the product of their tables, read through the letters of
    :func:`ltlagent.checks.regions.step_alphabet`, so each step is classified as each spec would."""
    for spec, label in ((a, label_a), (b, label_b)):
        if not spec.is_event_spec:
            raise UsageError(f"{label} declares prompt-string states and the other spec event "
                             "states: one describes text, the other chat logs, so they cannot be "
                             "compared")
        if is_first_order(spec):
            raise UsageError(f"{label} has first-order rules (variables bound by (:args …), "
                             "forall/exists, mentions): check-equiv compares propositional "
                             "policies only", hint="docs/design.md §8")
        past = past_subformulas(spec)
        if past > EQUIV_PAST_LIMIT:
            raise UsageError(f"{label} has {past} past subformulas, more than the "
                             f"{EQUIV_PAST_LIMIT} check-equiv compares: its product automaton "
                             "grows exponentially with them (design §3.6)",
                             hint="compare the rules that differ in smaller specs; check-log, "
                                  "the guard and the decoder monitor the rules one by one")
    ta, tb = build_automaton(a), build_automaton(b)
    alphabet = step_alphabet(a.states, b.states)
    letters = [(x.a, x.b) for x in alphabet.letters]
    found = _conversation_search(ta, tb, letters, want_b=not implies)
    undecided: tuple[str, ...] = ()
    if alphabet.undecided and not found:  # the witnessed letters alone show no difference
        more = [*letters, *((u.a, u.b) for u in alphabet.undecided)]
        if _conversation_search(ta, tb, more, want_b=not implies):
            undecided = tuple(
                f"{u.steps} that {label_a} would put in {_name(a, u.a) or 'no state'} and "
                f"{label_b} in {_name(b, u.b) or 'no state'}: {u.why}" for u in alphabet.undecided)
    ces = []
    for side, word in sorted(found.items()):
        steps = [alphabet.letters[k] for k in word]
        sa = tuple(_name(a, x.a) for x in steps)
        sb = tuple(_name(b, x.b) for x in steps)
        yes, no = (sa, sb) if side == "a" else (sb, sa)
        ces.append(Counterexample(side, tuple(n or "?" for n in yes), None,
                                  tuple(x.message for x in steps), no))
    diffs = _event_differences(a, b, alphabet.letters, alphabet.undecided) if not undecided \
        else []
    return EquivResult(label_a, label_b, implies, not ces and not undecided,
                       (ta.infinite, tb.infinite), tuple(ces), tuple(diffs),
                       (*a.names, *(n for n in b.names if n not in a.names)),
                       time.perf_counter() - t0, events=True, undecided=undecided,
                       complete=not alphabet.undecided)


def _name(spec: Spec, i: int) -> str | None:
    """The name of state ``i`` of ``spec`` (None for -1: no state)."""
    return spec.states[i].name if i >= 0 else None


def _conversation_search(ta: Automaton, tb: Automaton, letters: Sequence[tuple[int, int]],
                         want_b: bool) -> dict[str, list[int]]:
    """Shortest non-empty words over ``letters`` (indices into it) that one side accepts as a
    conversation and the other does not: ``check-log``'s ok (a finite spec ends in an accepting
    state; an infinite one is still live, since a log is finite)."""
    tables = []
    for t in (ta, tb):
        ok = frozenset(range(t.num_states)) if t.infinite else t.accepting
        tables.append((t.live_delta, ok))
    (da, acc_a), (db, acc_b) = tables
    Node = tuple[int, int, bool]
    start: Node = (ta.initial, tb.initial, False)
    parent: dict[Node, tuple[Node, int] | None] = {start: None}
    todo = deque([start])
    wanted = {"a", "b"} if want_b else {"a"}
    found: dict[str, Node] = {}
    while todo and not wanted <= found.keys():
        p = todo.popleft()
        qa, qb, some = p
        ya, yb = qa in acc_a, qb in acc_b
        if some and ya != yb:
            found.setdefault("a" if ya else "b", p)
        for k, (ia, ib) in enumerate(letters):
            ra = da[qa][ia] if qa >= 0 and ia >= 0 else -1
            rb = db[qb][ib] if qb >= 0 and ib >= 0 else -1
            nxt = (ra, rb, True)
            if (ra >= 0 or rb >= 0) and nxt not in parent:
                parent[nxt] = (p, k)
                todo.append(nxt)
    out: dict[str, list[int]] = {}
    for side in sorted(wanted & found.keys()):
        word: list[int] = []
        node = parent[found[side]]
        while node is not None:
            word.append(node[1])
            node = parent[node[0]]
        out[side] = word[::-1]
    return out


def _event_differences(a: Spec, b: Spec, letters: Sequence[Letter],
                       undecided: Sequence[Undecided]) -> list[StateDifference]:
    """What the letters say about the states: a state no step is ever in, and a state of one
    spec that matches exactly the steps of a differently named state of the other (claimed only
    where no undecided letter could change it)."""
    pairs = [(x.a, x.b) for x in letters]
    maybe = [(u.a, u.b) for u in undecided]
    out: list[StateDifference] = []
    for side, spec, mine in (("a", a, 0), ("b", b, 1)):
        used = {p[mine] for p in (*pairs, *maybe)}
        for i, st in enumerate(spec.states):
            if i not in used:
                out.append(StateDifference(st.name, "never-matched", side == "a", side == "b"))
    for i, st in enumerate(a.states):
        partners = {y for x, y in (*pairs, *maybe) if x == i}
        if len(partners) != 1:
            continue
        (j,) = partners
        if j >= 0 and b.states[j].name != st.name and \
                {x for x, y in (*pairs, *maybe) if y == j} == {i}:
            out.append(StateDifference(st.name, "renamed", st.name, b.states[j].name))
    return out
