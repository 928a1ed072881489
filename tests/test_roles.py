"""Which states play the runner's roles (issue 12): declared in the spec (``(:role …)``), given by
the caller, or the paper's names, resolved in one place (:meth:`ltlagent.agent.roles.Roles.resolve`)."""

from __future__ import annotations

import pytest

from ltlagent.agent.roles import Roles
from ltlagent.errors import SpecError, UsageError
from ltlagent.logic.compiled import compile_spec
from ltlagent.spec.syntax import parse_spec

RENAMED = """
(define renamed
  (:states
    (Idea (:text "Idea:"))
    (Tool (:text "Tool:") (:role action))
    (Arg (:text "Arg:") (:role action-input))
    (Result (:text "Result:") (:flags :env-input) (:role observation))
    (Final (:text "Final:") (:role answer)))
  (:behavior (next (until (next Idea Tool Arg Result) Idea) Final)))
"""


def test_defaults_are_the_papers_names() -> None:
    assert Roles.resolve(compile_spec("react").spec) == Roles(
        action="Action", action_input="Action-Input", observation="Observation", answer="Answer")
    assert Roles.resolve(compile_spec("react-tools").spec).action == "Action"  # (:choices :tools)
    assert Roles.resolve(compile_spec("reflexion").spec).evaluator == "Evaluator"
    chat = Roles.resolve(compile_spec("chat-bot").spec)
    assert chat.user == "User" and chat.observation is None and chat.answer is None


def test_the_spec_declares_roles() -> None:
    spec = parse_spec(RENAMED)
    assert [st.role for st in spec.states] == [None, "action", "action-input", "observation", "answer"]
    assert spec.states[1].to_dict()["role"] == "action" and "role" not in spec.states[0].to_dict()
    assert Roles.resolve(spec) == Roles(action="Tool", action_input="Arg", observation="Result",
                                        answer="Final")


def test_the_caller_names_roles_the_spec_does_not_declare() -> None:
    spec = compile_spec("react").spec
    r = Roles.resolve(spec, {"answer": "Final-Thought", "action-input": "Action-Input"})
    assert r.answer == "Final-Thought" and r.action == "Action"
    assert Roles.resolve(spec, Roles(answer="Thought")).answer == "Thought"


def test_a_given_role_naming_a_missing_state_is_an_error() -> None:
    spec = compile_spec("react").spec
    with pytest.raises(UsageError, match="'Finale' is not a state of"):
        Roles.resolve(spec, {"answer": "Finale"})
    with pytest.raises(UsageError, match="unknown role"):
        Roles.resolve(spec, {"answr": "Answer"})
    with pytest.raises(UsageError, match="written by the model"):
        Roles.resolve(spec, {"observation": "Thought"})
    with pytest.raises(UsageError, match="declares 'Final'"):
        Roles.resolve(parse_spec(RENAMED), {"answer": "Idea"})


@pytest.mark.parametrize("option, message", [
    ("(:role answr)", "unknown role 'answr'"),
    ('(:role "answer")', ":role takes one role name"),
    ("(:role)", ":role takes one role name"),
])
def test_the_reader_refuses_a_bad_role(option: str, message: str) -> None:
    text = RENAMED.replace("(:role answer)", option)
    with pytest.raises(SpecError, match=message) as e:
        parse_spec(text)
    assert e.value.loc is not None and e.value.loc.line == 8


def test_the_reader_refuses_a_role_twice_and_an_env_role_on_a_model_state() -> None:
    with pytest.raises(SpecError, match="both declare"):
        parse_spec(RENAMED.replace('(Idea (:text "Idea:"))', '(Idea (:text "Idea:") (:role answer))'))
    with pytest.raises(SpecError, match="the model writes it"):
        parse_spec(RENAMED.replace('(Idea (:text "Idea:"))', '(Idea (:text "Idea:") (:role user))'))


def test_the_agent_uses_the_declared_roles() -> None:
    from ltlagent.agent.environment import ToolEnvironment
    from ltlagent.agent.runner import Agent
    from ltlagent.agent.tools import Calculator

    agent = Agent.from_spec(parse_spec(RENAMED), object(), object(), tools=[Calculator()])
    assert agent.roles.answer == "Final"
    env = agent.handlers["Result"]
    assert isinstance(env, ToolEnvironment) and (env.action_state, env.input_state) == ("Tool", "Arg")
    with pytest.raises(UsageError, match="answer state 'Nope'"):
        Agent.from_spec("react", object(), object(), tools=[Calculator()], answer_state="Nope")
