"""What ``ltlagent show`` prints about a compiled spec: its states, formulas, automaton and
warnings, as data (:func:`describe`) or text (:func:`render_text`)."""

from __future__ import annotations

from ltlagent.logic.compiled import CompiledSpec
from ltlagent.logic.ltl import constraint_ltl
from ltlagent.logic.policy import Policy
from ltlagent.logic.rules import DirectRule, TableRule
from ltlagent.spec.syntax import State

__all__ = ["describe", "render_text", "warnings", "event_summary", "describe_policy",
           "render_policy_text", "too_large_for_spot", "SHOW_PAST_LIMIT", "SHOW_BUDGET"]


def event_summary(st: State) -> str:
    """What an event state matches, in words close to the spec's options."""
    parts = []
    if st.calls is not None:
        parts.append("call " + (" | ".join(st.calls) if st.calls else "<any tool>"))
    elif st.author is not None:
        parts.append(f"from {st.author}")
    for k, r in st.args:
        parts.append(f"arg {k} /{r}/")
    for k, v in st.binds:
        parts.append(f"arg {k} binds {v}")
    if st.contains is not None:
        parts.append(f"contains /{st.contains}/")
    return ", ".join(parts)


def _flags(st: State) -> str:
    parts = []
    if st.env_input:
        parts.append(":env-input")
    if st.choices is not None:
        parts.append("choices " + ("<tools>" if st.tool_choices else " | ".join(st.choices)))
    if st.regex is not None:
        parts.append(f"regex /{st.regex}/")
    if st.stop:
        parts.append("stop " + " ".join(repr(s) for s in st.stop))
    if st.max_tokens is not None:
        parts.append(f"max-tokens {st.max_tokens}")
    return ", ".join(parts)


def warnings(c: CompiledSpec) -> list[str]:
    """Graph questions on the compiled automaton: declared states that no trace can visit, and
    automaton states that are reachable but can no longer reach acceptance."""
    a = c.automaton
    out = [f"state {s.name!r} is declared but no trace of this spec visits it"
           for s in c.spec.states if s.name not in a.visited_names]
    dead = sorted(a.doomed)
    if dead and not a.infinite:
        out.append(f"automaton states {', '.join(map(str, dead))} cannot reach acceptance: "
                   "the monitor never lets a trace enter them")
    return out


def describe(c: CompiledSpec) -> dict[str, object]:
    """Everything ``show`` prints, as JSON-ready data."""
    a = c.automaton
    return {
        "name": c.spec.name,
        "source": c.spec.source,
        "states": [s.to_dict() for s in c.spec.states],
        "infinite": a.infinite,
        "formula": a.formulas.readable,
        "constraints": list(a.formulas.constraints_readable),
        "constraint_names": list(c.spec.constraint_names),
        "behavior_declared": c.spec.behavior_declared,
        "spot_formula": a.formulas.coded,
        "codes": {n: i + 1 for i, n in enumerate(c.names)},
        "automaton": a.summary(),
        "transitions": [{"from": q, "state": c.names[i], "to": a.delta[q][i]}
                        for q in range(a.num_states) for i in a.allowed_index[q]],
        "warnings": warnings(c),
    }


def render_text(c: CompiledSpec) -> str:
    """The text ``ltlagent show`` prints."""
    a = c.automaton
    width = max(len(n) for n in c.names)
    out = [f"spec {c.spec.name}  ({c.spec.source})", "", "states:"]
    for i, s in enumerate(c.spec.states):
        fl = _flags(s)
        if s.is_event:
            out.append(f"  {s.name:<{width}}  code {i + 1:<3} event {event_summary(s)}")
            continue
        out.append(f"  {s.name:<{width}}  code {i + 1:<3} text {s.text!r}" + (f"  [{fl}]" if fl
                                                                                 else ""))
    out += ["", "behaviour (" + ("infinite traces" if a.infinite else "finite traces") + "):",
            f"  {a.formulas.readable}"]
    if not c.spec.behavior_declared:
        out[-1] = "  (no :behavior: any sequence of the states; the constraints decide)"
    for name, cons in zip(c.spec.constraint_names, a.formulas.constraints_readable):
        out.append(f"  constraint {name}: {cons}")
    out += ["", "formula given to Spot (the constraints; ltlagent compiles the behaviour):",
            f"  {a.formulas.coded or '(none)'}", ""]
    summary = a.summary()
    out.append(f"automaton: {summary['states']} states ({summary['live_states']} live), "
               f"initial {a.initial}, "
               + ("Büchi-style acceptance (infinite traces)" if a.infinite else
                  f"accepting {', '.join(map(str, sorted(a.accepting)))}")
               + f"; translated in {a.translate_seconds * 1000:.1f} ms")
    out.append(f"  allowed first: {', '.join(a.allowed(a.initial))}")
    for q in range(a.num_states):
        if q not in a.live:
            continue
        moves = ", ".join(f"{c.names[i]} → {a.delta[q][i]}" for i in a.allowed_index[q])
        tag = " (accepting)" if a.is_complete(q) else ""
        out.append(f"  {q}{tag}: {moves or '(nothing further)'}")
    for w in warnings(c):
        out.append(f"warning: {w}")
    return "\n".join(out) + "\n"


def _quote(name: str) -> str:
    return '"' + name + '"'


def describe_policy(p: Policy) -> dict[str, object]:
    """What ``show`` prints for a policy with first-order rules (design §2.6): its states and
    rules and how each is monitored; such a policy has no single automaton to print."""
    spec = p.spec
    rules: list[dict[str, object]] = []
    for name, c in zip(spec.constraint_names, spec.constraints):
        rule = next((r for r in (*p.blame, *p.value_rules) if r.name == name), None)
        how = "values" if rule in p.value_rules else \
            "direct" if isinstance(rule, DirectRule) else "automaton"
        entry: dict[str, object] = {"name": name, "formula": constraint_ltl(c, _quote),
                                    "monitored": how}
        if isinstance(rule, DirectRule):
            entry["past_subformulas"] = len(rule.outputs)
            entry["skeleton_states"] = len(rule.dfa.edges)
        elif isinstance(rule, TableRule):
            entry["automaton_states"] = rule.automaton.num_states
        rules.append(entry)
    return {"name": spec.name, "source": spec.source,
            "states": [s.to_dict() for s in spec.states],
            "behavior_declared": spec.behavior_declared, "first_order": spec.is_first_order,
            "rules": rules}


#: ``show`` prints a policy's product automaton (built by Spot, §3.5) only up to this many
#: past subformulas in all its rules; past it, the rules and the size of the lazily explored
#: product (at most :data:`SHOW_BUDGET` states).
SHOW_PAST_LIMIT = 8
SHOW_BUDGET = 5_000


def too_large_for_spot(p: Policy) -> bool:
    """Whether a propositional policy's whole product is too large to have Spot build it."""
    past = sum(len(r.outputs) for r in p.blame if isinstance(r, DirectRule))
    return past > SHOW_PAST_LIMIT


def render_policy_text(p: Policy) -> str:
    """The text ``show`` prints for a policy described by its rules (first-order, or too large
    for one automaton)."""
    d = describe_policy(p)
    spec = p.spec
    width = max(len(n) for n in spec.names)
    out = [f"spec {spec.name}  ({spec.source})", "", "states:"]
    for i, s in enumerate(spec.states):
        out.append(f"  {s.name:<{width}}  code {i + 1:<3} event {event_summary(s)}")
    out += ["", "rules (each monitored on its own, composed on the fly, design §3.6):"]
    words = {"values": "per value", "direct": "direct (past operators step by step)",
             "automaton": "its own automaton"}
    rules = d["rules"]
    assert isinstance(rules, list)
    for r in rules:
        out.append(f"  {r['name']}: {r['formula']}")
        out.append(f"    monitored {words[str(r['monitored'])]}")
    out.append("")
    if spec.is_first_order:
        out.append("no automaton: values make the state space unbounded (check-log, the guard "
                   "and Policy monitor the rules directly)")
    else:
        n = p.composite.explore(SHOW_BUDGET)
        size = f"{n} reachable states" if n is not None else \
            f"more than {SHOW_BUDGET} reachable states (not explored further)"
        out.append(f"product of the rules, explored lazily: {size}; not printed (more than "
                   f"{SHOW_PAST_LIMIT} past subformulas: Spot would determinise the whole "
                   "conjunction, design §3.6)")
    return "\n".join(out) + "\n"
