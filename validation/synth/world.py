"""A fictional world (people, organisations, cities, countries) and its knowledge base of pages.

Everything is made up from syllables, so nothing a model answers can come from real data. The world
is a pure function of its seed; people and organisations carry a split tag (``train`` or ``test``)
so that held-out questions are about entities whose pages never appear in a training trace.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Person", "Org", "City", "Country", "World", "make_world", "write_kb"]

_ONSETS = ("b", "br", "c", "d", "dr", "f", "g", "gr", "h", "j", "k", "l", "m", "n", "p", "pr", "qu",
           "r", "s", "st", "t", "tr", "v", "w", "z", "th", "sh", "kl", "vr", "fl")
_VOWELS = ("a", "e", "i", "o", "u", "ae", "ei", "ou", "y")
_CODAS = ("", "", "n", "r", "l", "s", "th", "nd", "rk", "m", "x", "st")
_CITY_SUFFIX = ("mouth", "ford", "ham", "holm", "vik", "burg", "wick", "dale", "port", "stead")
_COUNTRY_SUFFIX = ("ia", "land", "ora", "istan", "mar", "avia")
_ORG_KINDS = (("Guild", "guild"), ("Society", "society"), ("Company", "company"),
              ("Orchestra", "orchestra"), ("Institute", "institute"), ("Club", "club"),
              ("Theatre", "theatre"), ("Museum", "museum"))
_OCCUPATIONS = ("painter", "chemist", "poet", "architect", "sailor", "composer", "engineer",
                "astronomer", "sculptor", "merchant", "botanist", "novelist")
_RIVERS_SUFFIX = ("", "e", "a", "on")


@dataclass(frozen=True)
class Country:
    name: str
    capital: str


@dataclass(frozen=True)
class City:
    name: str
    country: str
    river: str
    population: int


@dataclass(frozen=True)
class Person:
    name: str
    pronoun: str          # "He" or "She"
    occupation: str
    city: str
    born: int
    died: int
    spouse: str
    org: str              # the organisation this person founded
    split: str


@dataclass(frozen=True)
class Org:
    name: str
    kind: str
    city: str
    founder: str
    founded: int
    members: int
    split: str


@dataclass(frozen=True)
class World:
    """All entities of one seed, in generation order (deterministic)."""

    seed: int
    countries: tuple[Country, ...]
    cities: tuple[City, ...]
    people: tuple[Person, ...]
    orgs: tuple[Org, ...]

    def person(self, name: str) -> Person:
        return self._index()[0][name]

    def org(self, name: str) -> Org:
        return self._index()[1][name]

    def city(self, name: str) -> City:
        return self._index()[2][name]

    def _index(self) -> tuple[dict[str, Person], dict[str, Org], dict[str, City]]:
        # built on demand; the dataclass stays frozen and hashable by identity of its tuples
        cache = self.__dict__.get("_cache")
        if cache is None:
            cache = ({p.name: p for p in self.people}, {o.name: o for o in self.orgs},
                     {c.name: c for c in self.cities})
            object.__setattr__(self, "_cache", cache)
        return cache

    def pages(self) -> list[dict[str, str]]:
        """The knowledge base: one page (title, text) per entity, in a fixed order."""
        out: list[dict[str, str]] = []
        for k in self.countries:
            cities = [c.name for c in self.cities if c.country == k.name]
            out.append({"title": k.name, "text": (
                f"{k.name} is a country. Its capital is {k.capital}. "
                f"It has {len(cities)} cities in this record.")})
        for c in self.cities:
            out.append({"title": c.name, "text": (
                f"{c.name} is a city in {c.country}. It lies on the {c.river} river. "
                f"It has a population of {c.population}.")})
        for p in self.people:
            pr = p.pronoun
            out.append({"title": p.name, "text": (
                f"{p.name} was {_article(p.occupation)} {p.occupation}. "
                f"{pr} was born in {p.city} in {p.born}. "
                f"{pr} founded the {p.org}. {pr} married {p.spouse}. "
                f"{pr} worked in {p.city} for many years. {pr} died in {p.died}.")})
        for o in self.orgs:
            out.append({"title": o.name, "text": (
                f"The {o.name} is {_article(o.kind)} {o.kind} in {o.city}. "
                f"It was founded by {o.founder} in {o.founded}. "
                f"It has {o.members} members.")})
        return out


def _article(noun: str) -> str:
    return "an" if noun[0] in "aeiou" else "a"


def _word(rng: random.Random, syllables: int) -> str:
    s = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables - 1))
    s += rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
    return s.capitalize()


_RESERVED = ("thought", "action", "answer", "observation", "question", "claim", "search", "lookup",
             "calculator", "input", "final")


def make_world(seed: int = 0, n_countries: int = 12, n_cities: int = 120, n_people: int = 1200,
               test_fraction: float = 0.25) -> World:
    """Generate a world; the last ``test_fraction`` of people (and the organisations they founded)
    are tagged ``test``."""
    rng = random.Random(f"world:{seed}")
    used: set[str] = set()

    def fresh(make: object) -> str:
        while True:
            name = make()  # type: ignore[operator]
            low = name.lower()
            if name not in used and not any(r in low for r in _RESERVED) and len(name) <= 24:
                used.add(name)
                used.update(name.split())
                return name

    country_names = [fresh(lambda: _word(rng, 1) + rng.choice(_COUNTRY_SUFFIX)) for _ in range(n_countries)]
    cities: list[City] = []
    for i in range(n_cities):
        cname = fresh(lambda: _word(rng, 2).rstrip("aeiouy") + rng.choice(_CITY_SUFFIX))
        river = fresh(lambda: _word(rng, 2) + rng.choice(_RIVERS_SUFFIX))
        cities.append(City(cname, country_names[i % n_countries], river, rng.randrange(2, 900) * 1000))
    countries = tuple(Country(k, next(c.name for c in cities if c.country == k)) for k in country_names)
    people: list[Person] = []
    orgs: list[Org] = []
    n_test = int(n_people * test_fraction)
    for i in range(n_people):
        split = "test" if i >= n_people - n_test else "train"
        pname = fresh(lambda: f"{_word(rng, rng.choice((1, 2)))} {_word(rng, 2)}")
        spouse = fresh(lambda: f"{_word(rng, rng.choice((1, 2)))} {_word(rng, 2)}")
        kind_title, kind = rng.choice(_ORG_KINDS)
        oname = fresh(lambda kt=kind_title: f"{_word(rng, 2)} {kt}")
        born = rng.randrange(1700, 1950)
        died = born + rng.randrange(35, 95)
        founded = born + rng.randrange(20, 34)
        city = rng.choice(cities).name
        people.append(Person(pname, rng.choice(("He", "She")), rng.choice(_OCCUPATIONS), city, born, died,
                             spouse, oname, split))
        orgs.append(Org(oname, kind, rng.choice(cities).name, pname, founded, rng.randrange(12, 980), split))
    return World(seed, countries, tuple(cities), tuple(people), tuple(orgs))


def write_kb(world: World, path: str | Path) -> Path:
    """Write the knowledge base as JSONL (one ``{"title", "text"}`` per line), byte-stable."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", encoding="utf-8", newline="\n") as fh:
        for page in world.pages():
            fh.write(json.dumps(page, ensure_ascii=False, sort_keys=True) + "\n")
    return p
