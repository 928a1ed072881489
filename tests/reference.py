"""An independent reference evaluator of the pattern semantics (docs/design.md §2.1), for differential tests.

Written from the table in docs/design.md §2.1, not from the translator: a pattern denotes a regular
language over states (``S`` one step, ``next`` concatenation, ``until P Q`` = ``P* Q`` with
optional bounds, ``or`` union, ``repeat``/``optional`` bounded repetition) and ``always P`` = P^ω
with non-empty iterations, only in last position. Matching is by sets of positions; for lassos
``u v^ω`` positions are taken modulo the cycle, so every fixpoint is over a finite set.
No Spot, no automata: plain Python sets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ltlagent.spec.syntax import Always, Formula, Next, Or, Pattern, Repeat, Until, Visit

Pos = tuple[int, bool]  # (position, consumed at least one letter since the start of this match)


@dataclass(frozen=True)
class Word:
    """A finite word (``cycle`` empty) or a lasso ``prefix · cycle^ω``."""

    prefix: tuple[str, ...]
    cycle: tuple[str, ...] = ()

    def letter(self, i: int) -> str | None:
        if i < len(self.prefix):
            return self.prefix[i]
        if not self.cycle:
            return None
        return self.cycle[i - len(self.prefix)]

    def succ(self, i: int) -> int:
        j = i + 1
        if self.cycle and j == len(self.prefix) + len(self.cycle):
            return len(self.prefix)
        return j

    @property
    def end(self) -> int:
        return len(self.prefix)


def ends(p: Pattern, w: Word, starts: set[Pos]) -> set[Pos]:
    """Positions where a match of ``p`` starting at one of ``starts`` can end."""
    if isinstance(p, Visit):
        return {(w.succ(i), True) for i, _ in starts if w.letter(i) == p.name} if starts else set()
    if isinstance(p, Next):
        cur = starts
        for q in p.parts:
            cur = ends(q, w, cur)
        return cur
    if isinstance(p, Or):
        out: set[Pos] = set()
        for q in p.parts:
            out |= ends(q, w, starts)
        return out
    if isinstance(p, Until):
        return ends(p.then, w, _power(p.body, w, starts, p.min, p.max))
    if isinstance(p, Repeat):
        return _power(p.body, w, starts, p.min, p.max)
    raise TypeError(f"no finite matches for {p!r}")


def _keep_flag(starts: set[Pos], f: Callable[[set[Pos]], set[Pos]]) -> set[Pos]:
    """Apply ``f`` and or-in the 'consumed' flag of the start (matches compose)."""
    out: set[Pos] = set()
    for i, moved in starts:
        out |= {(j, moved or m) for j, m in f({(i, False)})}
    return out


def _power(body: Pattern, w: Word, starts: set[Pos], lo: int, hi: int | None) -> set[Pos]:
    """Ends of ``body`` repeated between ``lo`` and ``hi`` (None: unbounded) times."""
    result: set[Pos] = set(starts) if lo == 0 else set()
    cur = set(starts)
    k = 0
    seen_after_lo: set[Pos] = set(result)
    memo: dict[frozenset[Pos], set[Pos]] = {}  # one body's ends from one start, found once per call

    def step(s: set[Pos]) -> set[Pos]:
        key = frozenset(s)
        got = memo.get(key)
        if got is None:
            got = memo[key] = ends(body, w, s)
        return got

    while cur and (hi is None or k < hi):
        cur = _keep_flag(cur, step)
        k += 1
        if k >= lo:
            new = cur - seen_after_lo
            result |= cur
            seen_after_lo |= cur
            if hi is None and not new:
                break
    return result


def _split(p: Pattern) -> tuple[list[Pattern], Pattern | None]:
    if isinstance(p, Always):
        return [], p.body
    if isinstance(p, Next):
        last = p.parts[-1]
        probe = last
        while isinstance(probe, Next):
            probe = probe.parts[-1]
        if isinstance(probe, Always):
            pre, body = _split(last)
            return [*p.parts[:-1], *pre], body
    return [p], None


def accepts(p: Pattern, trace: tuple[str, ...] | list[str]) -> bool:
    """A finite (non-empty) trace matches a finite pattern exactly."""
    w = Word(tuple(trace))
    return bool(trace) and any(i == w.end for i, _ in ends(p, w, {(0, False)}))


def accepts_lasso(p: Pattern, prefix: tuple[str, ...], cycle: tuple[str, ...]) -> bool:
    """``prefix · cycle^ω`` matches ``pre · body^ω`` (iterations non-empty)."""
    pre, body = _split(p)
    if body is None:
        return False
    w = Word(tuple(prefix), tuple(cycle))
    starts: set[Pos] = {(0, False)}
    for q in pre:
        starts = ends(q, w, starts)
    nodes = {i for i, _ in starts}
    # graph on cycle-normalised positions: i -> j when a non-empty body match leads from i to j
    edges: dict[int, set[int]] = {}
    todo = list(nodes)
    seen = set(nodes)
    while todo:
        i = todo.pop()
        edges[i] = {j for j, moved in ends(body, w, {(i, False)}) if moved}
        for j in edges[i] - seen:
            seen.add(j)
            todo.append(j)
    # an infinite path exists iff some reachable node lies on a cycle
    return any(_on_cycle(i, edges) for i in seen)


def _on_cycle(start: int, edges: dict[int, set[int]]) -> bool:
    todo = list(edges.get(start, ()))
    seen: set[int] = set()
    while todo:
        i = todo.pop()
        if i == start:
            return True
        if i not in seen:
            seen.add(i)
            todo.extend(edges.get(i, ()))
    return False


def viable(p: Pattern, trace: tuple[str, ...] | list[str]) -> bool:
    """``trace`` is a prefix of some (non-empty finite, or infinite) trace of ``p``."""
    w = Word(tuple(trace))
    return _partial(p, w, {0})


def _partial(p: Pattern, w: Word, starts: set[int]) -> bool:
    """Some match of ``p`` from a start in ``starts`` covers the rest of the finite word
    (ends at or runs past its end). Every pattern here has a non-empty language."""
    n = w.end
    if n in starts:
        return True
    if isinstance(p, Visit):
        return any(i + 1 == n and w.letter(i) == p.name for i in starts)
    if isinstance(p, Next):
        cur = {(i, False) for i in starts}
        for k, q in enumerate(p.parts):
            if _partial(q, w, {i for i, _ in cur}):
                return True
            if k + 1 < len(p.parts):
                cur = ends(q, w, cur)
        return False
    if isinstance(p, Or):
        return any(_partial(q, w, starts) for q in p.parts)
    if isinstance(p, Until | Repeat | Always):
        lo, hi = (p.min, p.max) if isinstance(p, Until | Repeat) else (0, None)
        cur = {(i, False) for i in starts}
        seen: set[int] = set()
        k = 0
        while cur:
            positions = {i for i, _ in cur}
            if n in positions:  # consumed exactly: more iterations or the `then` part can follow
                return True
            if hi is None or k < hi:
                if _partial(p.body, w, positions):
                    return True
            if isinstance(p, Until) and k >= lo and _partial(p.then, w, positions):
                return True
            if hi is not None and k >= hi:
                break
            if hi is None and k >= lo:  # fixpoint, counted only once `then` may follow
                if positions <= seen:
                    break
                seen |= positions
            cur = ends(p.body, w, cur)
            k += 1
        return False
    raise TypeError(p)


# --- constraints on finite traces (LTLf with past operators), docs/design.md §2.1 and §3.5 -----

def holds(f: Formula, trace: tuple[str, ...] | list[str], i: int = 0) -> bool:
    """Does constraint ``f`` hold at step ``i`` of the finite, non-empty ``trace``?

    LTLf, written from the textbook definitions: ``next`` is strong (a next step must exist),
    ``weak-next`` weak; ``until``/``release``/``always``/``eventually`` range over the steps that
    exist. Past: ``previously`` (false at step 0), ``once``, ``historically``, ``since``.
    """
    n = len(trace)
    op, a = f.op, f.args
    if f.is_state:
        return trace[i] == op
    if op in ("true", "false"):
        return op == "true"
    if op == "not":
        return not holds(a[0], trace, i)
    if op == "and":
        return all(holds(g, trace, i) for g in a)
    if op == "or":
        return any(holds(g, trace, i) for g in a)
    if op == "implies":
        return not holds(a[0], trace, i) or holds(a[1], trace, i)
    if op == "iff":
        return holds(a[0], trace, i) == holds(a[1], trace, i)
    if op == "next":
        return i + 1 < n and holds(a[0], trace, i + 1)
    if op == "weak-next":
        return i + 1 >= n or holds(a[0], trace, i + 1)
    if op == "always":
        return all(holds(a[0], trace, j) for j in range(i, n))
    if op == "eventually":
        return any(holds(a[0], trace, j) for j in range(i, n))
    if op == "until":
        return any(holds(a[1], trace, j) and all(holds(a[0], trace, k) for k in range(i, j))
                   for j in range(i, n))
    if op == "release":  # φ R ψ = ¬(¬φ U ¬ψ)
        return not any(not holds(a[1], trace, j) and all(not holds(a[0], trace, k)
                                                          for k in range(i, j))
                       for j in range(i, n))
    if op == "previously":
        return i > 0 and holds(a[0], trace, i - 1)
    if op == "once":
        return any(holds(a[0], trace, j) for j in range(0, i + 1))
    if op == "historically":
        return all(holds(a[0], trace, j) for j in range(0, i + 1))
    if op == "since":
        return any(holds(a[1], trace, j) and all(holds(a[0], trace, k) for k in range(j + 1, i + 1))
                   for j in range(0, i + 1))
    raise ValueError(f"unknown operator {op!r}")
