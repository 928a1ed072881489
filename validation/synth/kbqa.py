"""HotpotQA-like questions and Fever-like claims over the fictional knowledge base.

Questions need one to three Search/Lookup calls (bridge entities, comparisons, a fact only Lookup
reaches); claims are SUPPORTS / REFUTES / NOT ENOUGH INFO. Held-out items are about held-out people
and organisations only, whose pages no training trace ever shows.
"""

from __future__ import annotations

import random

from .core import Example, ToolEnv
from .world import Person, World

__all__ = ["make_kbqa", "make_fever"]

Call = tuple[str, str, str]   # (thought, action, action input)


def _pl(p: Person) -> str:
    return p.pronoun.lower()


def _run(env: ToolEnv, task: str, uid: str, split: str, kind: str, question: str, calls: list[Call],
         final: str, answer: str, must_see: tuple[str, ...]) -> Example:
    """Execute the calls with the real tools; check the observations contain the facts used."""
    env.reset()
    steps: list[tuple[str, str]] = []
    seen = ""
    for thought, action, arg in calls:
        obs = env.call(action, arg)
        seen += obs + "\n"
        steps += [("Thought", thought), ("Action", action), ("Action-Input", arg), ("Observation", obs)]
    for fact in must_see:
        if fact not in seen:
            raise RuntimeError(f"{uid}: the tools never showed {fact!r}:\n{seen}")
    steps += [("Final-Thought", final), ("Answer", answer)]
    return Example(task, uid, question, answer, tuple(steps), split, kind)


def _kbqa_item(env: ToolEnv, w: World, rng: random.Random, people: list[Person], uid: str, split: str
               ) -> Example:
    p = rng.choice(people)
    o = w.org(p.org)
    city = w.city(p.city)
    kind = rng.choice(("founder_born_year", "founder_born_city", "person_country", "person_died",
                       "compare_born", "org_founder", "org_country", "founder_country", "founder_spouse"))
    s_org = (f"I need to search the {o.name} and find its founder.", "Search", o.name)
    s_p = (f"The {o.name} was founded by {p.name}. I need to search {p.name} and find where {_pl(p)} "
           "was born." if kind in ("founder_born_city", "founder_country") else
           f"The {o.name} was founded by {p.name}. I need to search {p.name} and find the year {_pl(p)} "
           "was born." if kind == "founder_born_year" else
           f"The {o.name} was founded by {p.name}. I need to search {p.name} and find who {_pl(p)} married.",
           "Search", p.name)
    if kind == "founder_born_year":
        return _run(env, "kbqa", uid, split, kind, f"In what year was the founder of the {o.name} born?",
                    [s_org, s_p], f"{p.name} was born in {p.born}, so the answer is {p.born}.", str(p.born),
                    (p.name, str(p.born)))
    if kind == "founder_born_city":
        return _run(env, "kbqa", uid, split, kind, f"In which city was the founder of the {o.name} born?",
                    [s_org, s_p], f"{p.name} was born in {p.city}, so the answer is {p.city}.", p.city,
                    (p.name, f"born in {p.city}"))
    if kind == "founder_spouse":
        return _run(env, "kbqa", uid, split, kind, f"Who did the founder of the {o.name} marry?",
                    [s_org, s_p], f"{p.name} married {p.spouse}, so the answer is {p.spouse}.", p.spouse,
                    (p.name, f"married {p.spouse}"))
    if kind == "founder_country":
        return _run(env, "kbqa", uid, split, kind, f"In which country was the founder of the {o.name} born?",
                    [s_org, s_p, (f"{p.name} was born in {p.city}. I need to search {p.city} and find its "
                                  "country.", "Search", p.city)],
                    f"{p.city} is a city in {city.country}, so the answer is {city.country}.", city.country,
                    (p.name, p.city, f"in {city.country}"))
    if kind == "person_country":
        return _run(env, "kbqa", uid, split, kind, f"In which country was {p.name} born?",
                    [(f"I need to search {p.name} and find where {_pl(p)} was born.", "Search", p.name),
                     (f"{p.name} was born in {p.city}. I need to search {p.city} and find its country.",
                      "Search", p.city)],
                    f"{p.city} is a city in {city.country}, so the answer is {city.country}.", city.country,
                    (p.city, f"in {city.country}"))
    if kind == "person_died":
        return _run(env, "kbqa", uid, split, kind, f"In what year did {p.name} die?",
                    [(f"I need to search {p.name} and find the year {_pl(p)} died.", "Search", p.name),
                     (f"The page does not say when {p.name} died. I need to look up died.",
                      "Lookup", "died")],
                    f"{p.name} died in {p.died}, so the answer is {p.died}.", str(p.died),
                    (f"died in {p.died}",))
    if kind == "compare_born":
        q = rng.choice([x for x in people if x.born != p.born and x.name != p.name])
        first = p if p.born < q.born else q
        return _run(env, "kbqa", uid, split, kind, f"Who was born first, {p.name} or {q.name}?",
                    [(f"I need to search {p.name} and find the year {_pl(p)} was born.", "Search", p.name),
                     (f"{p.name} was born in {p.born}. I need to search {q.name} and find the year {_pl(q)} "
                      "was born.", "Search", q.name)],
                    f"{p.name} was born in {p.born} and {q.name} was born in {q.born}, so {first.name} was "
                    "born first.", first.name, (f"in {p.born}", f"in {q.born}"))
    if kind == "org_founder":
        return _run(env, "kbqa", uid, split, kind, f"Who founded the {o.name}?", [s_org],
                    f"The {o.name} was founded by {p.name}, so the answer is {p.name}.", p.name,
                    (f"founded by {p.name}",))
    ocity = w.city(o.city)
    return _run(env, "kbqa", uid, split, "org_country", f"In which country is the {o.name}?",
                [(f"I need to search the {o.name} and find where it is.", "Search", o.name),
                 (f"The {o.name} is in {o.city}. I need to search {o.city} and find its country.",
                  "Search", o.city)],
                f"{o.city} is a city in {ocity.country}, so the answer is {ocity.country}.", ocity.country,
                (f"in {o.city}", f"in {ocity.country}"))


_NEI = (("won the {x} Prize", "won", "whether {n} won a prize"),
        ("played the {x}", "played", "whether {n} played an instrument"),
        ("had {k} children", "children", "how many children {n} had"),
        ("wrote a book about {x}", "book", "whether {n} wrote a book"))
_NEI_X = ("Golden", "Silver", "Harbour", "Northern", "violin", "cello", "flute", "harp", "rivers", "stars",
          "ships", "birds")


def _fever_item(env: ToolEnv, w: World, rng: random.Random, people: list[Person], uid: str, split: str
                ) -> Example:
    p = rng.choice(people)
    o = w.org(p.org)
    label = rng.choice(("SUPPORTS", "REFUTES", "NOT ENOUGH INFO"))
    task = "fever"
    if label == "NOT ENOUGH INFO":
        tpl, key, what = rng.choice(_NEI)
        claim = f"{p.name} " + tpl.format(x=rng.choice(_NEI_X), k=rng.randrange(2, 9)) + "."
        return _run(env, task, uid, split, "nei", claim,
                    [(f"I need to search {p.name} and find {what.format(n=p.name)}.", "Search", p.name),
                     (f"The page does not say {what.format(n=p.name)}. I need to look up {key}.",
                      "Lookup", key)],
                    f"Nothing says {what.format(n=p.name)}, so there is not enough information.", label,
                    ("No more results.",))
    true = label == "SUPPORTS"
    kind = rng.choice(("born_city", "born_year", "founded", "org_city", "died"))
    search_p = (f"I need to search {p.name} and find ", "Search", p.name)
    if kind == "born_city":
        c = p.city if true else rng.choice([c.name for c in w.cities if c.name != p.city])
        calls = [(search_p[0] + f"where {_pl(p)} was born.", "Search", p.name)]
        fact, claim = f"born in {p.city}", f"{p.name} was born in {c}."
        final = f"{p.name} was born in {p.city}" + ("" if true else f", not in {c}")
    elif kind == "born_year":
        y = p.born if true else p.born + rng.choice((-1, 1)) * rng.randrange(1, 30)
        calls = [(search_p[0] + f"the year {_pl(p)} was born.", "Search", p.name)]
        fact, claim = f"in {p.born}", f"{p.name} was born in {y}."
        final = f"{p.name} was born in {p.born}" + ("" if true else f", not in {y}")
    elif kind == "died":
        y = p.died if true else p.died + rng.choice((-1, 1)) * rng.randrange(1, 30)
        calls = [(search_p[0] + f"the year {_pl(p)} died.", "Search", p.name),
                 (f"The page does not say when {p.name} died. I need to look up died.", "Lookup", "died")]
        fact, claim = f"died in {p.died}", f"{p.name} died in {y}."
        final = f"{p.name} died in {p.died}" + ("" if true else f", not in {y}")
    elif kind == "founded":
        other = o.name if true else rng.choice([x.org for x in people if x.org != o.name])
        calls = [(search_p[0] + f"what {_pl(p)} founded.", "Search", p.name)]
        fact, claim = f"founded the {o.name}", f"{p.name} founded the {other}."
        final = f"{p.name} founded the {o.name}" + ("" if true else f", not the {other}")
    else:
        c = o.city if true else rng.choice([c.name for c in w.cities if c.name != o.city])
        calls = [(f"I need to search the {o.name} and find where it is.", "Search", o.name)]
        fact, claim = f"in {o.city}", f"The {o.name} is in {c}."
        final = f"The {o.name} is in {o.city}" + ("" if true else f", not in {c}")
    final += ", so the claim is supported." if true else ", so the claim is refuted."
    return _run(env, task, uid, split, kind, claim, calls, final, label, (fact,))


def _make(item: object, task: str, env: ToolEnv, w: World, split: str, n: int, seed: int) -> list[Example]:
    rng = random.Random(f"{task}:{seed}:{split}")
    people = [p for p in w.people if p.split == split]
    out: list[Example] = []
    seen: set[str] = set()
    while len(out) < n:
        ex = item(env, w, rng, people, f"{task}-{split}-{seed}-{len(out)}", split)  # type: ignore[operator]
        if ex.question in seen:
            continue
        seen.add(ex.question)
        out.append(ex)
    return out


def make_kbqa(env: ToolEnv, w: World, split: str, n: int, seed: int) -> list[Example]:
    """``n`` distinct HotpotQA-like questions about people of ``split``."""
    return _make(_kbqa_item, "kbqa", env, w, split, n, seed)


def make_fever(env: ToolEnv, w: World, split: str, n: int, seed: int) -> list[Example]:
    """``n`` distinct Fever-like claims about people of ``split``, labels roughly balanced."""
    return _make(_fever_item, "fever", env, w, split, n, seed)
