"""The decoding monitor (docs/design.md §5, issue 4).

The main property is a differential test: random specs, random seeds, a randomly initialised tiny
model sampling at temperature 1 under the LogitsProcessor. Every trace must be accepted by Spot's
automaton (walked here directly, not through our table), and at every step the set of states the
monitor allows next must equal the set Spot allows. The ablation shows the same model breaks the
specs without the monitor, and the mutation test shows the property catches a disabled rule.
"""

from __future__ import annotations

import random
import re
from functools import cache

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ltlagent.decode.machine import DONE, END, FREE, INF
from ltlagent.decode.monitor import Monitor, StateText, TokenIndex, build_index
from ltlagent.decode.processor import LtlLogitsProcessor
from ltlagent.decode.vocab import vocab_from_bytes
from ltlagent.errors import SpecError, UsageError
from ltlagent.logic.automaton import build_automaton
from ltlagent.logic.compiled import CompiledSpec, compile_spec
from ltlagent.logic.ltl import encode
from ltlagent.spec.syntax import Always, Next, Or, Pattern, Repeat, Spec, State, Until, Visit
from ltlagent.text.lexer import build_lexer

from . import tiny

torch.set_num_threads(1)

PROMPTS = ("Thought:", "Action:", "Action Input:", "Observation:", "Final Thought:", "Answer:", "Plan:", "Q:")
ENV_TEXT = " ok 7\n"


# --- Spot, walked directly ---------------------------------------------------------------------

class SpotWalker:
    """Runs traces on the Spot automaton itself (independent of :class:`Automaton`'s table)."""

    def __init__(self, compiled: CompiledSpec) -> None:
        import spot

        self.spot = spot
        self.aut = compiled.automaton.spot_automaton()
        self.names = compiled.spec.names
        self.infinite = compiled.automaton.infinite
        enc = encode(compiled.spec)
        bdict = self.aut.get_dict()
        self.cubes = [spot.formula_to_bdd(spot.formula(enc.state_cube(n)), bdict, self.aut)
                      for n in self.names]
        self._live: dict[int, bool] = {}

    def step(self, s: int, name: str) -> int:
        c = self.cubes[self.names.index(name)]
        for e in self.aut.out(s):
            if (e.cond & c).id() != 0:
                return int(e.dst)
        return -1

    def live(self, s: int) -> bool:
        hit = self._live.get(s)
        if hit is None:
            if self.infinite:
                a = self.spot.make_twa_graph(self.aut, self.spot.twa_prop_set.all())
                a.set_init_state(s)
                hit = not a.is_empty()
            else:  # an accepting state reachable over letters that are states
                seen, todo = {s}, [s]
                while todo:
                    u = todo.pop()
                    for n in self.names:
                        v = self.step(u, n)
                        if v >= 0 and v not in seen:
                            seen.add(v)
                            todo.append(v)
                hit = any(self.aut.state_is_accepting(u) for u in seen)
            self._live[s] = hit
        return hit

    def run(self, trace: list[str]) -> int:
        s = int(self.aut.get_init_state_number())
        for n in trace:
            s = self.step(s, n)
            if s < 0 or not self.live(s):
                return -1
        return s

    def allowed(self, s: int) -> set[str]:
        return {n for n in self.names if (t := self.step(s, n)) >= 0 and self.live(t)}

    def accepts(self, trace: list[str]) -> bool:
        s = self.run(trace)
        return s >= 0 and bool(trace) and not self.infinite and bool(self.aut.state_is_accepting(s))


# --- random specs ------------------------------------------------------------------------------

@st.composite
def patterns(draw: st.DrawFn, names: tuple[str, ...], depth: int) -> Pattern:
    if depth == 0:
        return Visit(draw(st.sampled_from(names)))
    op = draw(st.sampled_from(("next", "until", "or", "optional", "repeat")))
    a = draw(patterns(names, depth - 1))
    b = draw(patterns(names, draw(st.integers(0, depth - 1))))
    if op == "next":
        return Next((a, b))
    if op == "or":
        return Or((a, b))
    if op == "until":
        hi = draw(st.one_of(st.none(), st.integers(1, 3)))
        return Until(a, b, 0, hi)
    if op == "optional":
        return Repeat(a, 0, 1)
    return Repeat(a, draw(st.integers(0, 1)), draw(st.one_of(st.none(), st.integers(1, 3))))


@st.composite
def random_specs(draw: st.DrawFn) -> Spec:
    n = draw(st.integers(2, 5))
    texts = draw(st.permutations(PROMPTS))[:n]
    names = tuple(f"S{i}" for i in range(n))
    states = []
    for nm, tx in zip(names, texts):
        kind = draw(st.sampled_from(("plain", "plain", "stop", "stop", "max", "max", "choices", "regex",
                                     "env")))
        states.append(State(nm, tx, env_input=kind == "env",
                            choices=("yes", "no") if kind == "choices" else None,
                            regex="[0-9]+" if kind == "regex" else None,
                            stop=("\n",) if kind == "stop" else (),
                            max_tokens=draw(st.integers(2, 6)) if kind == "max" else None))
    pat = draw(patterns(names, draw(st.integers(1, 3))))
    if draw(st.integers(0, 4)) == 0:
        body = draw(patterns(names, 1))
        pat = Always(body) if draw(st.booleans()) else Next((pat, Always(body)))
    return Spec("random", tuple(states), pat)


def compiled_of(spec: Spec) -> CompiledSpec:
    return CompiledSpec(spec, build_automaton(spec), build_lexer([s.text for s in spec.states]))


# --- driving generate under the processor --------------------------------------------------------

@cache
def model_for(tok_name: str) -> object:
    tok = tiny.TOKENIZERS[tok_name]()
    return tiny.tiny_model("llama" if tok_name == "sentencepiece" else "gpt2", len(tok))


def exact_next(index: TokenIndex, mon: Monitor) -> bool:
    """Whether the monitor's allowed next states must equal the automaton's: always, except while
    the lexer holds a prompt-string prefix that cannot become content (after the text ended, or in
    a constrained content) — then it is committed to the prompt strings that prefix begins."""
    mode, _q, cur, node = index.machine.keys[mon.machine_state][:4]
    return node == 0 or (mode == FREE and index.tables.content[cur] is None)


def check_generation(proc_index: TokenIndex, ref_index: TokenIndex, tok_name: str, seed: int,
                     budget: int | None, rounds: int = 4) -> list[str]:
    """Sample under the processor (continuing after environment states), replay every token
    through a reference monitor and Spot. Returns the trace; raises AssertionError on a violation."""
    tok = tiny.TOKENIZERS[tok_name]()
    model = model_for(tok_name)
    compiled = ref_index.compiled
    walker = SpotWalker(compiled)
    proc = LtlLogitsProcessor(proc_index, max_new_tokens=budget, pad_token_id=tok.pad_token_id)
    mon = Monitor(ref_index, eos_ends_text=False)
    ids = tok.encode("Question: what?\n", add_special_tokens=False)
    start = len(ids)
    torch.manual_seed(seed)
    for r in range(rounds):
        out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                             logits_processor=[proc], stopping_criteria=[proc.stopping], do_sample=True,
                             temperature=1.0, top_k=0, max_new_tokens=budget or 60,
                             pad_token_id=tok.pad_token_id)
        for t in out[0, len(ids):].tolist():
            if mon.is_finished or mon.waiting_for_env:
                break
            s = walker.run(mon.trace)
            assert s >= 0, f"Spot rejects the monitor's trace {mon.trace}"
            nxt = set(mon.allowed_next_states())
            if exact_next(ref_index, mon):
                assert nxt == walker.allowed(s), (mon.trace, nxt, walker.allowed(s))
            else:  # a pending prompt-string prefix may commit to the prompt strings it begins
                assert nxt <= walker.allowed(s), (mon.trace, nxt, walker.allowed(s))
            assert mon.allowed_token_ids().size > 0
            try:
                mon.advance(t)
            except UsageError as e:
                raise AssertionError(f"the processor let through a forbidden token: {e}") from e
            ids.append(t)
        if not mon.waiting_for_env or r == rounds - 1:  # (the last round's input is not fed: no
            break  # round follows to finish the turn it opens, so the budget check is skipped)
        env = tok.encode(ENV_TEXT, add_special_tokens=False)
        mon.feed_env(env)
        ids += env
    # lex the token bytes (tok.decode is lossy on invalid UTF-8 runs of byte-fallback tokens)
    data = b"".join(ref_index.vocab.token_bytes(t) for t in ids[start:])
    text = data.decode("utf-8", "replace")
    lexed = [compiled.spec.states[m.index].name for m in compiled.lexer.finditer(data)]
    assert lexed == mon.trace, (lexed, mon.trace, text)
    verdict = compiled.automaton.run(lexed)
    assert verdict.status != "rejected", (lexed, verdict, text)
    assert walker.run(lexed) >= 0
    if budget is not None and not compiled.automaton.infinite and not mon.waiting_for_env:
        assert verdict.accepted and walker.accepts(lexed), ("incomplete under a budget", lexed, text)
    steps = mon.steps
    for k, step in enumerate(steps):  # content constraints hold
        stt = compiled.spec.state(step.state)
        done = k < len(steps) - 1 or mon.is_finished
        if stt.choices and done:
            assert step.text in stt.choices, (step, text)
        if stt.regex and done:
            assert re.fullmatch(stt.regex, step.text), (step, text)
    return mon.trace


SETTINGS = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


# found unseeded (make test-explore): every round ended at an environment state, the last one's
# input was fed and no round followed, and the trace was judged incomplete under the budget
_FOUR_ROUNDS = Spec("random",
                    (State("S0", "Thought:", regex="[0-9]+"), State("S1", "Action:", env_input=True)),
                    Next((Next((Next((Visit("S0"), Visit("S0"))), Visit("S0"))),
                          Repeat(Next((Visit("S1"), Visit("S0"))), 0, None))))


@SETTINGS
@given(spec=random_specs(), seed=st.integers(0, 2**16),
       tok_name=st.sampled_from(sorted(tiny.TOKENIZERS)), budget=st.sampled_from((None, 30, 60)))
@example(spec=_FOUR_ROUNDS, seed=12, tok_name="byte-level", budget=60)
def test_differential_random_specs_random_model(spec: Spec, seed: int, tok_name: str,
                                                budget: int | None) -> None:
    try:
        compiled = compiled_of(spec)
    except SpecError:
        return  # empty language: nothing to generate
    tok = tiny.TOKENIZERS[tok_name]()
    # two indexes: the reference's memo fills in another order, so caching mistakes show up
    check_generation(build_index(compiled, tok, cache=False), build_index(compiled, tok, cache=False),
                     tok_name, seed, budget)


@pytest.mark.parametrize("spec", ["react", "react-tools", "react-bounded", "reflexion", "chat-bot"])
def test_paper_specs_under_the_processor(spec: str) -> None:
    for k, tok_name in enumerate(sorted(tiny.TOKENIZERS)):
        index = build_index(compile_spec(spec), tiny.TOKENIZERS[tok_name](), tool_names=["Search", "Lookup"],
                            cache=False)
        check_generation(index, index, tok_name, seed=k, budget=50)


def test_ablation_unconstrained_model_breaks_the_spec() -> None:
    """The same random model with and without the monitor: how often is its output a ReAct trace?"""
    tok = tiny.straddle()
    model = model_for("straddle")
    compiled = compile_spec("react")
    ids = torch.tensor([tok.encode("Question: what?\n")])
    n = 30
    rates = {}
    for label, procs in (("unconstrained", []), ("monitored", None)):
        if procs is None:
            proc = LtlLogitsProcessor(build_index(compiled, tok, cache=False), max_new_tokens=60)
            procs, stops = [proc], [proc.stopping]
        else:
            stops = []
        torch.manual_seed(0)
        out = model.generate(ids.repeat(n, 1), do_sample=True, temperature=1.0, top_k=0, max_new_tokens=60,
                             pad_token_id=tok.pad_token_id, logits_processor=procs, stopping_criteria=stops)
        complete = valid = 0
        for row in out:
            data = b"".join(tiny_vocab("straddle").token_bytes(t) for t in row[ids.shape[1]:].tolist())
            trace = [compiled.spec.states[m.index].name for m in compiled.lexer.finditer(data)]
            v = compiled.automaton.run(trace)
            complete += v.accepted
            # valid: complete, or a correct prefix waiting for the environment (Observation)
            valid += v.accepted or (v.status == "incomplete" and trace[-1:] == ["Observation"])
        rates[label] = (complete, valid)
    print(f"\nablation ({n} samples, random model, temperature 1, ReAct, 60 new tokens): "
          f"unconstrained {rates['unconstrained'][0]} complete / {rates['unconstrained'][1]} valid; "
          f"monitored {rates['monitored'][0]} complete / {rates['monitored'][1]} valid")
    assert rates["unconstrained"][1] <= n // 10
    assert rates["monitored"][1] == n


@cache
def tiny_vocab(name: str) -> object:
    from ltlagent.decode.vocab import vocab_from_tokenizer

    return vocab_from_tokenizer(tiny.TOKENIZERS[name]())


def _find_violation(index: TokenIndex, rule: str, tries: int = 30) -> str | None:
    mutated = index.mutated(rule)
    for seed in range(tries):
        try:
            check_generation(mutated, index, "straddle", seed, budget=60 if rule == "budget" else None)
        except AssertionError as e:
            return str(e)
    return None


def test_mutation_forbidden_prompt_strings_are_caught() -> None:
    """Disable the free-text rule (forbidden prompt strings not masked): the differential fails."""
    spec = compiled_of(Spec("mut", (State("A", "Thought:"), State("B", "Action:"), State("C", "Answer:")),
                            Next((Visit("A"), Visit("B"), Visit("A"), Visit("C")))))
    index = build_index(spec, tiny.straddle(), cache=False)
    for seed in range(3):  # and the intact index passes the same runs
        check_generation(index, index, "straddle", seed, budget=None)
    found = _find_violation(index, "keywords")
    print("\nmutation 'keywords' caught:", (found or "")[:160])
    assert found is not None


def test_mutation_budget_steering_is_caught() -> None:
    """Disable budget steering: some traces end incomplete under max_new_tokens."""
    index = build_index(compile_spec("react"), tiny.straddle(), cache=False)
    found = _find_violation(index, "budget")
    print("\nmutation 'budget' caught:", (found or "")[:160])
    assert found is not None


# --- the Monitor API ------------------------------------------------------------------------------

def _drive(mon: Monitor, tok: object, text: str) -> list[object]:
    """Write ``text`` through the monitor: at each step the longest allowed token that continues
    it (where a prompt string is forced, its canonical tokens are the only ones allowed)."""
    events = []
    data = text.encode()
    v = mon.index.vocab
    while data:
        allowed = mon.allowed_token_ids().tolist()
        best = max((t for t in allowed if v.token_bytes(t) and data.startswith(v.token_bytes(t))),
                   key=lambda t: len(v.token_bytes(t)), default=None)
        assert best is not None, (data, mon.index.machine.describe(mon.machine_state))
        events += mon.advance(best)
        data = data[len(v.token_bytes(best)):]
    return events


def test_monitor_walkthrough_react() -> None:
    tok = tiny.straddle()
    index = build_index(compile_spec("react"), tok, cache=False)
    mon = Monitor(index)
    assert mon.state is None and set(mon.allowed_next_states()) == {"Thought", "Final-Thought"}
    ev = _drive(mon, tok, "Thought: I should look. ü\nAction: Search\nAction Input: Paris\nObservation:")
    kinds = [(e.kind, e.state) for e in ev if e.kind != "text"]
    assert kinds == [("enter", "Thought"), ("enter", "Action"), ("enter", "Action-Input"),
                     ("enter", "Observation"), ("env", "Observation")]
    assert mon.waiting_for_env and mon.trace == ["Thought", "Action", "Action-Input", "Observation"]
    assert "".join(e.text for e in ev if e.kind == "text") == mon.text
    with pytest.raises(UsageError):
        mon.advance(tok.encode("x")[0])
    with pytest.raises(UsageError, match="prompt string"):
        mon.feed_env(" Answer: 3")
    mon.feed_env(" 2 results\n")
    assert not mon.waiting_for_env
    assert mon.steps[-1] == StateText("Observation", "2 results", by_env=True)
    # now only Thought or Final Thought may follow: "Action:" cannot be written
    assert set(mon.allowed_next_states()) == {"Thought", "Final-Thought"}
    assert not any(index.vocab.token_bytes(t).startswith(b"Act") for t in mon.allowed_token_ids())
    _drive(mon, tok, "Final Thought: done\nAnswer: 42")
    assert mon.is_complete and mon.state == "Answer"
    assert set(mon.allowed_token_ids().tolist()) >= {tok.eos_token_id}
    ev = mon.advance(tok.eos_token_id)
    assert ev[-1].kind == "finished" and mon.is_finished
    assert [(s.state, s.text) for s in mon.steps] == [
        ("Thought", "I should look. ü"), ("Action", "Search"), ("Action-Input", "Paris"),
        ("Observation", "2 results"), ("Final-Thought", "done"), ("Answer", "42")]
    mon.reset()
    assert mon.trace == [] and mon.text == "" and not mon.is_finished


def test_forbidden_prompt_string_is_masked_in_free_text() -> None:
    tok = tiny.straddle()
    index = build_index(compile_spec("react"), tok, cache=False)
    mon = Monitor(index)
    _drive(mon, tok, "Thought: hmm")
    allowed = set(mon.allowed_token_ids().tolist())
    v = index.vocab
    for t in range(v.size):  # no allowed token may complete a forbidden prompt string
        b = v.token_bytes(t)
        if t in allowed and b:
            probe = Monitor(index)
            _drive(probe, tok, "Thought: hmm")
            probe.advance(t)
            assert index.compiled.automaton.run(probe.trace).status != "rejected", (b, probe.trace)
    # a token that writes a forbidden prompt string whole is masked
    for t in range(v.size):
        if b"Answer:" in v.token_bytes(t) or v.token_bytes(t) == b"\nObservation: ":
            assert t not in allowed


def test_text_end_forces_the_prompt_string() -> None:
    """react-tools: Thought stops at a newline; then only "Action:" may follow, token by token forced."""
    tok = tiny.straddle()
    index = build_index(compile_spec("react-tools"), tok, cache=False)
    mon = Monitor(index)
    _drive(mon, tok, "Thought: plan it")
    ev = mon.advance(tok.convert_tokens_to_ids("Ċ"))
    assert any(e.kind == "end" and e.reason == "stop" for e in ev)
    seen = b""
    while mon.state == "Thought":
        f = mon.forced_token()
        assert f is not None and mon.allowed_token_ids().tolist() == [f]
        seen += index.vocab.token_bytes(f)
        ev = mon.advance(f)
    assert seen == b"Action:" and any(e.kind == "enter" and e.forced for e in ev)
    # Action's content must be one of the choices: "Lookup" is fine, "Look at" is not
    _drive(mon, tok, " Look")
    allowed = set(mon.allowed_token_ids().tolist())
    assert tok.convert_tokens_to_ids("u") in allowed
    assert tok.convert_tokens_to_ids("x") not in allowed and tok.convert_tokens_to_ids("Ġat") not in allowed


def test_eos_ends_text_and_max_tokens() -> None:
    tok = tiny.straddle()
    spec = compiled_of(Spec("m", (State("A", "Plan:", max_tokens=3), State("B", "Answer:")),
                            Next((Visit("A"), Visit("B")))))
    index = build_index(spec, tok, cache=False)
    mon = Monitor(index)
    _drive(mon, tok, "Plan:")
    x = tok.convert_tokens_to_ids("x")
    ev = mon.advance(x) + mon.advance(x) + mon.advance(x)
    assert [e.reason for e in ev if e.kind == "end"] == ["max-tokens"]
    assert mon.forced_token() is not None  # only Answer can follow: forced
    # EOS in a state that is not complete ends its text (runner mode) or is forbidden (processor)
    m2 = Monitor(index)
    _drive(m2, tok, "Plan: a")
    assert tok.eos_token_id in set(m2.allowed_token_ids().tolist())
    ev = m2.advance(tok.eos_token_id)
    assert ev[0].kind == "end" and ev[0].reason == "eos" and not m2.is_finished
    m3 = Monitor(index, eos_ends_text=False)
    _drive(m3, tok, "Plan: a")
    assert tok.eos_token_id not in set(m3.allowed_token_ids().tolist())


def test_regex_and_choices_contents() -> None:
    tok = tiny.byte_level()
    states = (State("N", "Q:", regex="[0-9]+"), State("Y", "Answer:", choices=("yes", "no")))
    spec = compiled_of(Spec("c", states,
                            Next((Visit("N"), Visit("Y")))))
    index = build_index(spec, tok, cache=False)
    for seed in range(15):
        rnd = random.Random(seed)
        mon = Monitor(index, max_new_tokens=rnd.choice([12, 25]))
        while not mon.is_finished:
            mon.advance(int(rnd.choice(mon.allowed_token_ids())))
        steps = {s.state: s.text for s in mon.steps}
        assert mon.is_complete, mon.text
        assert re.fullmatch("[0-9]+", steps["N"]) and steps["Y"] in ("yes", "no"), mon.text


@pytest.mark.parametrize("tok_name", sorted(tiny.TOKENIZERS))
@pytest.mark.parametrize("spec", ["react", "react-tools", "reflexion", "chain-of-thought"])
def test_budget_always_completes(spec: str, tok_name: str) -> None:
    """Uniformly random allowed tokens with a tight budget: finite specs always end complete."""
    index = build_index(compile_spec(spec), tiny.TOKENIZERS[tok_name](), tool_names=["Search"], cache=False)
    need = index.machine.need(index.start)
    for seed in range(6):
        rnd = random.Random(seed)
        mon = Monitor(index, max_new_tokens=need + rnd.choice([0, 1, 5, 30]))
        while not mon.is_finished:
            if mon.waiting_for_env:
                mon.feed_env(ENV_TEXT)
                continue
            f = mon.forced_token()
            mon.advance(f if f is not None else int(rnd.choice(mon.allowed_token_ids())))
        assert mon.is_complete, (spec, seed, mon.trace, mon.text)
        assert index.compiled.automaton.run(mon.trace).accepted


def _brute_force_allowed(index: TokenIndex, sid: int, ends_text: bool,
                         remaining: int | None = None, steps_left: int | None = None) -> set[int]:
    m = index.machine
    needs, costs = {}, {}
    for t in range(index.vocab.size):
        evs: list[tuple[int, int]] = []
        if index.is_eos(t):
            s2, _ = m.eos(sid, ends_text)
        elif index.vocab.is_text[t]:
            s2, evs = m.feed(sid, index.vocab.token_bytes(t))
        else:
            continue
        if s2 >= 0 and m.need(s2) < INF:
            needs[t] = m.need(s2)
            costs[t] = sum(1 for ev, _ in evs if ev > 0) + m.need_steps(s2)
    if steps_left is not None and needs:  # steps first: the fewest states entered still fit
        thr = max(steps_left, min(costs.values()))
        needs = {t: n for t, n in needs.items() if costs[t] <= thr}
    if remaining is None or not needs:
        return set(needs)
    thr = max(remaining - 1, min(needs.values()))
    return {t for t, n in needs.items() if n <= thr}


@pytest.mark.parametrize("newline", [False, True])
@pytest.mark.parametrize("tok_name", sorted(tiny.TOKENIZERS))
def test_masks_equal_brute_force(tok_name: str, newline: bool) -> None:
    """The vectorised masks (free-text candidates, trie walks) equal feeding every token one by one."""
    tok = tiny.TOKENIZERS[tok_name]()
    index = build_index(compile_spec("react-tools"), tok, cache=False, newline=newline)
    assert index.newline == newline
    rnd = random.Random(1)
    checked = 0
    for _seed in range(4):
        mon = Monitor(index)
        for _ in range(40):
            if mon.is_finished:
                break
            if mon.waiting_for_env:
                mon.feed_env(ENV_TEXT)
                continue
            sid = mon.machine_state
            mask = index.mask(sid, True)
            brute = _brute_force_allowed(index, sid, True)
            got = set(mask.allowed_ids().tolist())
            if m_forced := (mask.forced is not None and index.machine.mode(sid) == END):
                assert got <= brute and m_forced
            else:
                assert got == brute, (index.machine.describe(sid), sorted(got ^ brute)[:10])
            need = index.machine.need(sid)
            for rem in (need, need + 2):  # budget steering: exactly the tokens after which the rest fits
                steer = index.mask(sid, True, rem)
                if steer.forced is None or index.machine.mode(sid) != END:
                    assert set(steer.allowed_ids().tolist()) == _brute_force_allowed(index, sid, True, rem), (
                        index.machine.describe(sid), rem)
            steps = index.machine.need_steps(sid)
            for left, rem in ((steps, None), (steps + 1, None), (steps, need + 1)):  # step-limit steering
                steer = index.mask(sid, True, rem, left)
                if steer.forced is None or index.machine.mode(sid) != END:
                    want = _brute_force_allowed(index, sid, True, rem, left)
                    assert set(steer.allowed_ids().tolist()) == want, (index.machine.describe(sid), left, rem)
            checked += 1
            mon.advance(int(rnd.choice(mask.allowed_ids())))
    assert checked > 50


def test_allowed_next_matches_automaton_on_paper_specs() -> None:
    tok = tiny.sentencepiece()
    for name in ("react", "reflexion", "react-constrained"):
        c = compile_spec(name)
        index = build_index(c, tok, cache=False)
        aut = c.automaton
        rnd = random.Random(0)
        mon = Monitor(index, max_new_tokens=80)
        while not mon.is_finished:
            if mon.waiting_for_env:
                mon.feed_env(ENV_TEXT)
                continue
            q = aut.initial
            for s in mon.trace:
                q = aut.step(q, s)
            if exact_next(index, mon):
                assert set(mon.allowed_next_states()) == set(aut.allowed(q))
            else:
                assert set(mon.allowed_next_states()) <= set(aut.allowed(q))
            mon.advance(int(rnd.choice(mon.allowed_token_ids())))


def test_wide_logits_and_mask_methods() -> None:
    """Every application method gives the same row; ids past the vocabulary are always -inf."""
    tok = tiny.byte_level()
    index = build_index(compile_spec("react"), tok, cache=False)
    mon = Monitor(index)
    width = index.vocab_size + 13
    states = []
    for text in ("", "Thought: a", "Thought: a\nAct"):
        mon.reset()
        _drive(mon, tok, text) if text else None
        states.append(mon.machine_state)
    from ltlagent.decode import masks as M

    for sid in states:
        mask = index.mask(sid, True)
        want = torch.full((width,), float("-inf"))
        ids = torch.as_tensor(mask.allowed_ids())
        row0 = torch.randn(width)
        want[ids] = row0[ids]
        for limits in ((0, 0), (10**6, 0), (0, 10**6)):  # bias, copy of allowed, index_fill of forbidden
            old = (M.SPARSE_LIMIT, M.ALLOWED_LIMIT)
            M.SPARSE_LIMIT, M.ALLOWED_LIMIT = limits[1], limits[0]
            try:
                fresh = M.Mask(mask.size, allowed=mask.allowed_ids())
                row = row0.clone()
                fresh.apply(row)
            finally:
                M.SPARSE_LIMIT, M.ALLOWED_LIMIT = old
            assert torch.equal(row, want), limits
        row = row0.clone()
        mon.reset()
        assert row[index.vocab_size:].isfinite().all()


def test_cache_roundtrip(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from ltlagent.decode import cache

    monkeypatch.setenv("LTLAGENT_CACHE_DIR", str(tmp_path))
    tok = tiny.byte_level()
    a = build_index(compile_spec("react"), tok)
    b = build_index(compile_spec("react"), tok)
    assert not a.from_cache and b.from_cache
    assert b.vocab.fingerprint == a.vocab.fingerprint and b.vocab.flat == a.vocab.flat
    assert np.array_equal(b.kw_tokens, a.kw_tokens)
    c = build_index(compile_spec("react-tools"), tok)  # another spec: another entry
    assert not c.from_cache
    assert cache.clear_cache() == 4  # two index entries, and the masks precomputed for each
    cache.disable_cache()
    assert not build_index(compile_spec("react"), tok).from_cache
    assert not list((tmp_path / "index").glob("*.npz"))  # type: ignore[operator]
    cache.enable_cache(tmp_path)  # type: ignore[arg-type]
    assert cache.cache_enabled()


def test_unwritable_prompt_string_is_a_clear_error() -> None:
    v = vocab_from_bytes([b"a", b"b", None], eos_ids=[2])
    with pytest.raises(Exception, match="cannot write the prompt strings"):
        build_index(compile_spec("react"), v, cache=False)


def test_tools_choices_need_tool_names() -> None:
    spec = compiled_of(Spec("t", (State("A", "Action:", choices=(":tools",)), State("B", "Answer:")),
                            Next((Visit("A"), Visit("B")))))
    with pytest.raises(UsageError, match="tool_names"):
        build_index(spec, tiny.byte_level(), cache=False)
    index = build_index(spec, tiny.byte_level(), tool_names=["Calc", "Web"], cache=False)
    mon = Monitor(index, max_new_tokens=30)
    rnd = random.Random(0)
    while not mon.is_finished:
        mon.advance(int(rnd.choice(mon.allowed_token_ids())))
    assert mon.steps[0].text in ("Calc", "Web")


def test_modes_are_consistent() -> None:
    """Sanity of the machine's mode constants (used by the processor)."""
    assert len({FREE, END, DONE}) == 3


# --- step limit, budget updates, newline separator --------------------------------------------------

def _random_run(mon: Monitor, seed: int, env: str = ENV_TEXT) -> Monitor:
    """Uniformly random allowed tokens until the monitor finishes."""
    rnd = random.Random(seed)
    while not mon.is_finished:
        if mon.waiting_for_env:
            mon.feed_env(env)
            continue
        f = mon.forced_token()
        mon.advance(f if f is not None else int(rnd.choice(mon.allowed_token_ids())))
    return mon


@pytest.mark.parametrize("spec", ["react", "reflexion", "react-tools"])
def test_step_limit_always_completes(spec: str) -> None:
    """max_steps at or above the shortest accepted trace: random tokens always end accepted within
    it; with the step steering switched off, some run does not."""
    index = build_index(compile_spec(spec), tiny.straddle(), tool_names=["Search"], cache=False)
    aut = index.compiled.automaton
    shortest = aut.distance_to_accept[aut.initial]
    broken = 0
    for seed in range(12):
        n = shortest + seed % 3
        for idx, newline in ((index, False), (index, True)):
            mon = _random_run(Monitor(idx, max_steps=n, max_new_tokens=400, newline=newline), seed)
            assert mon.is_complete and len(mon.trace) <= n, (spec, seed, n, mon.trace)
            assert aut.run(mon.trace).accepted
        mon = _random_run(Monitor(index.mutated("steps"), max_steps=n, max_new_tokens=400), seed)
        broken += not (mon.is_complete and len(mon.trace) <= n)
    assert broken > 0  # the steering is what keeps the runs within the limit


def test_set_remaining_steers_by_the_new_budget() -> None:
    tok = tiny.straddle()
    index = build_index(compile_spec("react"), tok, cache=False)
    mon = Monitor(index, max_new_tokens=1000)
    _drive(mon, tok, "Thought: a")
    wide = mon.allowed_token_ids().size
    assert mon.remaining_tokens == 1000 - mon.tokens_generated
    need = index.machine.need(mon.machine_state)
    mon.set_remaining(need)
    assert mon.remaining_tokens == need and mon.allowed_token_ids().size < wide
    _random_run(mon, 0)
    assert mon.is_complete and mon.tokens_generated <= 1000
    with pytest.raises(UsageError):
        mon.set_remaining(-1)
    mon.reset()
    mon.set_remaining(None)
    assert mon.remaining_tokens is None


def test_newline_before_forced_prompt_string() -> None:
    tok = tiny.straddle()
    spec = compiled_of(Spec("m", (State("A", "Plan:", max_tokens=3), State("B", "Answer:")),
                            Next((Visit("A"), Visit("B")))))
    index = build_index(spec, tok, cache=False)
    x = tok.convert_tokens_to_ids("x")
    for newline, want in ((False, "Plan:xxxAnswer:"), (True, "Plan:xxx\nAnswer:")):
        mon = Monitor(index, newline=newline)
        _drive(mon, tok, "Plan:")
        for _ in range(3):
            mon.advance(x)
        while mon.state == "A":
            f = mon.forced_token()
            assert f is not None
            mon.advance(f)
        assert mon.text == want and mon.steps[0].text == "xxx"
    # a text that already ends in a newline gets no second one; EOS ends a text like :max-tokens
    mon = Monitor(index, newline=True)
    _drive(mon, tok, "Plan:\n")
    mon.advance(tok.eos_token_id)
    while mon.state == "A":
        mon.advance(mon.forced_token())  # type: ignore[arg-type]
    assert mon.text == "Plan:\nAnswer:"
    # environment text without a closing newline gets one too
    react = build_index(compile_spec("react"), tok, cache=False)
    mon = Monitor(react, newline=True)
    _drive(mon, tok, "Thought: a\nAction: Search\nAction Input: b\nObservation:")
    mon.feed_env(" found")
    assert set(mon.allowed_next_states()) == {"Thought", "Final-Thought"}
    assert all(react.vocab.token_bytes(t).startswith(b"\n") for t in mon.allowed_token_ids())
    # the budget counts the separator: a tight budget still ends complete
    for seed in range(10):
        mon = _random_run(Monitor(index, max_new_tokens=index.machine.need(index.start) + seed % 3,
                                  newline=True), seed)
        assert mon.is_complete and "\nAnswer:" in mon.text, mon.text


def test_newline_falls_back_where_it_could_change_the_lexing() -> None:
    tok = tiny.straddle()
    odd = compiled_of(Spec("odd", (State("A", "Plan:"), State("B", "\nAnswer:")),
                           Next((Visit("A"), Visit("B")))))
    assert not build_index(odd, tok, cache=False).variant(True).newline  # a prompt string holds "\n"
    no_nl = vocab_from_bytes([bytes([b]) for b in range(256) if b != 0x0A] + [None], eos_ids=[255])
    assert not build_index(compile_spec("react"), no_nl, cache=False, newline=True).newline
    index = build_index(compile_spec("react"), tok, cache=False)
    assert index.variant(True).newline and index.variant(True) is index.variant(True)
    assert index.variant(True).variant(False) is not None and index.variant(False) is index


SMALL = settings(SETTINGS, max_examples=30)


@SMALL
@given(spec=random_specs(), seed=st.integers(0, 2**16),
       tok_name=st.sampled_from(sorted(tiny.TOKENIZERS)), budget=st.sampled_from((None, 30, 60)))
@example(spec=Spec("random", (State("S0", "Observation:"), State("S1", "Thought:", env_input=True)),
                   Next((Next((Until(Visit("S1"), Visit("S1"), 0, None), Visit("S0"))), Visit("S0")))),
         seed=0, tok_name="sentencepiece", budget=60)  # (found unseeded, as _FOUR_ROUNDS)
def test_differential_with_newline_separator(spec: Spec, seed: int, tok_name: str,
                                             budget: int | None) -> None:
    """The differential property with the newline separator on: every trace accepted, the allowed
    next states equal Spot's, budgets still end complete."""
    try:
        compiled = compiled_of(spec)
    except SpecError:
        return
    tok = tiny.TOKENIZERS[tok_name]()
    index = build_index(compiled, tok, cache=False, newline=True)
    check_generation(index, build_index(compiled, tok, cache=False, newline=True), tok_name, seed, budget)
