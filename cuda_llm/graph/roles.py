"""Who plays each role in a run: a chat model from the role's provider, or None for ``rules``.

``llm`` gives the ChatOpenAI model of cuda_llm.agents.llm, ``manual`` a ManualChatModel that answers from
files, ``rules`` no model at all (the planner by the feature bandit, the critic by the rule-based
diagnosis). A ``model_factory`` (tests, users' scripts) replaces all of this; it may return None for a
role to have it played by rules.
"""

from __future__ import annotations

from typing import Any, Callable

from cuda_llm.agents.settings import ROLES
from cuda_llm.agents.llm import make_chat_model
from cuda_llm.graph.manual import ManualChatModel

ModelFactory = Callable[[str], Any]


def settings_factory(settings: Any, rundir: Any) -> ModelFactory:
    """role -> model from each role's provider setting."""
    def make(role: str) -> Any:
        rs = settings.role(role)
        if rs.provider == "rules":
            return None
        if rs.provider == "manual":
            return ManualChatModel(role, rundir)

        return make_chat_model(settings, role)
    return make


def role_models(settings: Any, rundir: Any, factory: ModelFactory | None) -> dict[str, Any]:
    """role -> the raw model (None for rules), from ``factory`` when given, else from the settings."""
    make = factory or settings_factory(settings, rundir)
    return {role: make(role) for role in ROLES}


def providers(settings: Any, models: dict[str, Any]) -> dict[str, str]:
    """role -> "llm" / "manual" / "rules", for the trace and the config."""
    out = {}
    for role in ROLES:
        if models.get(role) is None:
            out[role] = "rules"
        elif settings is not None:
            out[role] = settings.role(role).provider
        else:
            out[role] = "manual" if type(models[role]).__name__ == "ManualChatModel" else "llm"
    return out
