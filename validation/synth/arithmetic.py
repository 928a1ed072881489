"""GSM8K-like arithmetic word problems, solved in one to three Calculator calls.

Each template draws numbers so that every intermediate result is a whole number; the gold trace
calls the real Calculator and the generator checks its answers against Python's own arithmetic.
"""

from __future__ import annotations

import operator
import random
from collections.abc import Callable
from fractions import Fraction

from .core import Example, ToolEnv, stable_hash

__all__ = ["make_arithmetic", "TEMPLATES", "is_heldout_question"]

_NAMES = ("Natalia", "Weng", "Betty", "Julie", "James", "Mark", "Albert", "Ken", "Alexis", "Tina",
          "Carla", "Ravi", "Omar", "Lena", "Sofia", "Hugo", "Priya", "Daniel", "Maya", "Tom", "Eva",
          "Noah", "Ivy", "Leo", "Nora", "Sam", "Aiden", "Grace", "Kofi", "Yuki")
_SHE = {"Natalia", "Betty", "Julie", "Alexis", "Tina", "Carla", "Lena", "Sofia", "Priya", "Maya", "Eva",
        "Ivy", "Nora", "Grace", "Yuki"}
_ITEMS = ("clips", "apples", "stickers", "pencils", "cookies", "marbles", "books", "cards", "shells",
          "stamps", "candles", "buttons", "eggs", "flowers", "toys")
_THINGS = ("bike", "lamp", "coat", "radio", "game", "watch")

# A template returns (question, [(thought, expression)], final-thought format, answer checker input).
Plan = tuple[str, list[tuple[str, str]], str]


def _who(rng: random.Random) -> tuple[str, str, str]:
    name = rng.choice(_NAMES)
    return (name, "she", "her") if name in _SHE else (name, "he", "his")


def _t_half(rng: random.Random) -> Plan:
    n, pr, _ = _who(rng)
    it, a = rng.choice(_ITEMS), rng.randrange(5, 60) * 2
    q = (f"{n} sold {a} {it} in April, and then {pr} sold half as many {it} in May. "
         f"How many {it} did {n} sell altogether in April and May?")
    return q, [(f"In May {n} sold half of the {a} {it} sold in April.", f"{a} / 2"),
               (f"Now I add the {it} sold in May to the {a} {it} sold in April.", "{r1} + " + str(a))], \
        f"So {n} sold {{r}} {it} altogether in April and May."


def _t_packs(rng: random.Random) -> Plan:
    n, pr, _ = _who(rng)
    it, a, b, c = rng.choice(_ITEMS), rng.randrange(3, 90), rng.randrange(2, 12), rng.randrange(3, 25)
    q = (f"{n} has {a} {it}. {pr.capitalize()} buys {b} packs with {c} {it} in each pack. "
         f"How many {it} does {n} have now?")
    return q, [(f"I need the number of {it} in {b} packs of {c}.", f"{b} * {c}"),
               (f"Now I add the {it} from the packs to the {a} {it} {n} had.", "{r1} + " + str(a))], \
        f"So {n} has {{r}} {it} now."


def _t_wage(rng: random.Random) -> Plan:
    n, pr, _ = _who(rng)
    a, b, c = rng.randrange(8, 40), rng.randrange(2, 10), rng.randrange(2, 7)
    q = (f"{n} earns {a} dollars an hour. {pr.capitalize()} works {b} hours a day for {c} days. "
         f"How many dollars does {n} earn?")
    return q, [(f"First I find how much {n} earns in one day of {b} hours.", f"{a} * {b}"),
               (f"Now I multiply the daily pay by the {c} days.", "{r1} * " + str(c))], \
        f"So {n} earns {{r}} dollars."


def _t_shop(rng: random.Random) -> Plan:
    it, b, c = rng.choice(_ITEMS), rng.randrange(5, 80), rng.randrange(5, 80)
    a = b + c + rng.randrange(1, 150)
    q = (f"A shop had {a} {it}. It sold {b} {it} in the morning and {c} {it} in the afternoon. "
         f"How many {it} are left?")
    return q, [(f"I need the total number of {it} sold in the morning and the afternoon.", f"{b} + {c}"),
               (f"Now I subtract the {it} sold from the {a} {it} the shop had.", str(a) + " - {r1}")], \
        f"So the shop has {{r}} {it} left."


def _t_change(rng: random.Random) -> Plan:
    n, pr, _ = _who(rng)
    it, a, b = rng.choice(_ITEMS), rng.randrange(2, 9), rng.randrange(2, 12)
    c = rng.choice((50, 100, 200)) if a * b < 50 else (100 if a * b < 100 else 200)
    q = (f"{n} buys {a} {it} for {b} dollars each and pays with a {c} dollar bill. "
         f"How much change does {pr} get?")
    return q, [(f"I need the cost of {a} {it} at {b} dollars each.", f"{a} * {b}"),
               (f"Now I subtract the cost from the {c} dollars {n} paid.", str(c) + " - {r1}")], \
        f"So {n} gets {{r}} dollars in change."


def _t_twice(rng: random.Random) -> Plan:
    n, pr, _ = _who(rng)
    a = rng.randrange(6, 120)
    q = (f"{n} read {a} pages on Monday and twice as many pages on Tuesday. "
         f"How many pages did {pr} read in the two days?")
    return q, [(f"On Tuesday {n} read twice the {a} pages of Monday.", f"{a} * 2"),
               ("Now I add the pages of Tuesday to the pages of Monday.", "{r1} + " + str(a))], \
        f"So {n} read {{r}} pages in the two days."


def _t_share(rng: random.Random) -> Plan:
    n, _, _ = _who(rng)
    it, b = rng.choice(_ITEMS), rng.randrange(2, 12)
    a = b * rng.randrange(2, 40)
    q = f"{n} has {a} {it} and shares them equally among {b} friends. How many {it} does each friend get?"
    return q, [(f"I need to divide the {a} {it} among the {b} friends.", f"{a} / {b}")], \
        f"So each friend gets {{r}} {it}."


def _t_chairs(rng: random.Random) -> Plan:
    a, b = rng.randrange(3, 30), rng.randrange(4, 25)
    c = rng.randrange(1, a * b)
    q = f"There are {a} rows with {b} chairs in each row. {c} chairs are taken. How many chairs are free?"
    return q, [(f"First I find the number of chairs in {a} rows of {b}.", f"{a} * {b}"),
               (f"Now I subtract the {c} chairs that are taken.", "{r1} - " + str(c))], \
        "So {r} chairs are free."


def _t_boxes(rng: random.Random) -> Plan:
    n, pr, _ = _who(rng)
    it = rng.choice(_ITEMS)
    a, b, c, d = rng.randrange(2, 10), rng.randrange(3, 20), rng.randrange(2, 10), rng.randrange(3, 20)
    q = (f"{n} buys {a} boxes with {b} {it} each and {c} bags with {d} {it} each. "
         f"How many {it} does {pr} buy in all?")
    return q, [(f"First I find the number of {it} in the {a} boxes.", f"{a} * {b}"),
               (f"Next I find the number of {it} in the {c} bags.", f"{c} * {d}"),
               (f"Now I add the {it} from the boxes and the bags.", "{r1} + {r2}")], \
        f"So {n} buys {{r}} {it} in all."


def _t_percent(rng: random.Random) -> Plan:
    n, pr, _ = _who(rng)
    p = rng.choice((10, 20, 25, 30, 40, 50, 60, 75))
    a = rng.randrange(1, 40) * 20
    thing = rng.choice(_THINGS)
    q = (f"{n} had {a} dollars and spent {p} percent of it on a {thing}. "
         f"How many dollars does {pr} have left?")
    return q, [(f"I need {p} percent of {a} dollars.", f"{a} * {p} / 100"),
               (f"Now I subtract the money spent from the {a} dollars.", str(a) + " - {r1}")], \
        f"So {n} has {{r}} dollars left."


def _t_weeks(rng: random.Random) -> Plan:
    n, pr, _ = _who(rng)
    a, b = rng.randrange(2, 15), rng.randrange(2, 9)
    q = f"{n} walks {a} kilometers every day. How many kilometers does {pr} walk in {b} weeks?"
    return q, [(f"First I find the number of days in {b} weeks.", f"{b} * 7"),
               (f"Now I multiply the days by the {a} kilometers a day.", "{r1} * " + str(a))], \
        f"So {n} walks {{r}} kilometers in {b} weeks."


def _t_give(rng: random.Random) -> Plan:
    n, pr, _ = _who(rng)
    it, b, c = rng.choice(_ITEMS), rng.randrange(2, 12), rng.randrange(2, 9)
    a = b * c + rng.randrange(1, 120)
    q = (f"{n} had {a} {it}. {pr.capitalize()} gave {b} {it} to each of {c} friends. "
         f"How many {it} does {n} have left?")
    return q, [(f"I need the number of {it} given to {c} friends, {b} each.", f"{b} * {c}"),
               (f"Now I subtract them from the {a} {it} {n} had.", str(a) + " - {r1}")], \
        f"So {n} has {{r}} {it} left."


def _t_save(rng: random.Random) -> Plan:
    n, pr, _ = _who(rng)
    a, b = rng.randrange(5, 60), rng.randrange(3, 12)
    c = rng.randrange(1, a * b)
    d = rng.randrange(5, 90)
    thing = rng.choice(_THINGS)
    q = (f"{n} saves {a} dollars a week for {b} weeks and then spends {c} dollars on a {thing}. "
         f"Then {pr} earns {d} dollars more. How many dollars does {n} have?")
    return q, [(f"First I find the savings of {b} weeks at {a} dollars a week.", f"{a} * {b}"),
               (f"Next I subtract the {c} dollars spent on the {thing}.", "{r1} - " + str(c)),
               (f"Now I add the {d} dollars {pr} earns.", "{r2} + " + str(d))], \
        f"So {n} has {{r}} dollars."


TEMPLATES: tuple[Callable[[random.Random], Plan], ...] = (
    _t_half, _t_packs, _t_wage, _t_shop, _t_change, _t_twice, _t_share, _t_chairs, _t_boxes,
    _t_percent, _t_weeks, _t_give, _t_save)


def is_heldout_question(question: str) -> bool:
    """The train/held-out split of arithmetic questions: a fixed quarter by hash of the text."""
    return stable_hash("arith-split:" + question) % 4 == 0


def _left_to_right(expr: str) -> Fraction:
    """Our templates' expressions (``a op b [op c]`` with ``*`` and ``/`` only when chained), evaluated
    exactly, to cross-check the Calculator."""
    ops = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
    parts = expr.split()
    acc = Fraction(parts[0])
    for op, num in zip(parts[1::2], parts[2::2], strict=True):
        acc = ops[op](acc, Fraction(num))
    return acc


def _solve(env: ToolEnv, plan: Plan, uid: str, split: str, kind: str) -> Example:
    question, calls, final = plan
    steps: list[tuple[str, str]] = []
    results: dict[str, str] = {}
    value = ""
    for i, (thought, expr) in enumerate(calls, 1):
        expr = expr.format(**results)
        value = env.call("Calculator", expr)
        expected = _left_to_right(expr)
        if expected.denominator != 1 or value != str(expected.numerator):
            raise RuntimeError(f"calculator answered {value!r} for {expr!r}, expected {expected!r}")
        results[f"r{i}"] = value
        steps += [("Thought", thought), ("Action", "Calculator"), ("Action-Input", expr),
                  ("Observation", value)]
    steps += [("Final-Thought", final.format(r=value)), ("Answer", value)]
    return Example("arithmetic", uid, question, value, tuple(steps), split, kind)


def make_arithmetic(env: ToolEnv, split: str, n: int, seed: int) -> list[Example]:
    """``n`` distinct problems of one split (``train`` or ``test``), deterministic in ``seed``."""
    rng = random.Random(f"arithmetic:{seed}:{split}")
    out: list[Example] = []
    seen: set[str] = set()
    while len(out) < n:
        tpl = TEMPLATES[rng.randrange(len(TEMPLATES))]
        plan = tpl(rng)
        q = plan[0]
        if q in seen or is_heldout_question(q) != (split == "test"):
            continue
        seen.add(q)
        out.append(_solve(env, plan, f"arith-{split}-{seed}-{len(out)}", split, tpl.__name__[3:]))
    return out
