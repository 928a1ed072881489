"""Which spec states play the agent runner's roles (docs/design.md §6), decided in one place.

The runner needs to know which state names the tool (ReAct's Action), which holds its input
(Action Input), which the tools write (Observation), which an evaluator or the user writes
(Reflexion's Evaluator, the chat-bot's User), and which holds the answer. :meth:`Roles.resolve`
decides, per role: the state that declares it in the spec (``(:role answer)``), else the one the
caller names (``Agent.from_spec(..., roles=…)``), else the paper's state name (:data:`DEFAULTS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from ltlagent.errors import UsageError
from ltlagent.spec.syntax import ENV_ROLES, ROLES, Spec

__all__ = ["Roles", "DEFAULTS"]

#: The states that play each role when neither the spec nor the caller says (the paper's names;
#: the first one present wins). ``action`` also defaults to the state whose choices are the tools.
DEFAULTS: dict[str, tuple[str, ...]] = {
    "action": ("Action",),
    "action_input": ("Action-Input", "Action_Input", "ActionInput", "Input"),
    "observation": ("Observation",),
    "evaluator": ("Evaluator", "Evaluation"),
    "user": ("User",),
    "answer": ("Answer",),
}


@dataclass(frozen=True)
class Roles:
    """The state playing each role (None: no state does)."""

    action: str | None = None  # names the tool to call
    action_input: str | None = None  # the tool's input
    observation: str | None = None  # written by calling the tool (:env-input)
    evaluator: str | None = None  # written by ``evaluator(answer)`` (:env-input)
    user: str | None = None  # written by ``user_input(bot_text)`` (:env-input)
    answer: str | None = None  # the run's answer

    @staticmethod
    def field_of(role: str) -> str:
        """The attribute of a role as the spec language spells it (``action-input`` → ``action_input``)."""
        return role.replace("-", "_")

    @classmethod
    def resolve(cls, spec: Spec, given: Roles | Mapping[str, str | None] | None = None) -> Roles:
        """The roles of ``spec``'s states: declared in the spec, else ``given`` (a :class:`Roles` or
        a mapping from role to state name; None or a missing role: not given), else
        :data:`DEFAULTS`. Raises ``UsageError`` for a given role that names no state of the spec,
        an environment role given to a state the model writes, an unknown role, or a role the
        spec declares for another state."""
        asked = cls._given(given)
        declared = {cls.field_of(st.role): st.name for st in spec.states if st.role is not None}
        env_roles = {cls.field_of(r) for r in ENV_ROLES}
        out: dict[str, str | None] = {}
        for f in fields(cls):
            role = f.name
            name = asked.get(role)
            if name is not None:
                st = next((s for s in spec.states if s.name == name), None)
                if st is None:
                    raise UsageError(f"{role} state {name!r} is not a state of {spec.name}",
                                     hint=f"its states are {', '.join(spec.names)}")
                if role in env_roles and not st.env_input:
                    raise UsageError(f"{role} state {name!r} of {spec.name} is written by the model; "
                                     "that role needs an :env-input state")
                if role in declared and declared[role] != name:
                    raise UsageError(f"{spec.name} declares {declared[role]!r} as its {role} state, "
                                     f"not {name!r}")
            if role in declared:
                out[role] = declared[role]
            elif name is not None:
                out[role] = name
            else:
                out[role] = cls._default(spec, role, role in env_roles)
        return cls(**out)

    @classmethod
    def _given(cls, given: Roles | Mapping[str, str | None] | None) -> dict[str, str | None]:
        if given is None:
            return {}
        if isinstance(given, Roles):
            return {f.name: getattr(given, f.name) for f in fields(cls)}
        known = {f.name for f in fields(cls)}
        out: dict[str, str | None] = {}
        for key, name in given.items():
            role = cls.field_of(key)
            if role not in known:
                raise UsageError(f"unknown role {key!r}", hint=f"the roles are {', '.join(ROLES)}")
            out[role] = name
        return out

    @staticmethod
    def _default(spec: Spec, role: str, env: bool) -> str | None:
        """The paper's state for ``role``, if ``spec`` has it (an environment role: as an
        :env-input state)."""
        if role == "action":
            tools = next((st.name for st in spec.states if st.tool_choices), None)
            if tools is not None:
                return tools
        for name in DEFAULTS[role]:
            st = next((s for s in spec.states if s.name == name), None)
            if st is not None and (st.env_input or not env):
                return name
        return None
