"""Scripted LLM answers for the benchmarks: NOT a language model. A langchain_core chat model that answers
each role from a script (the planner with the features it was offered, the coder with a kernel chosen by
candidate id, the critic with a fixed critique), so a benchmark (benchmarks/loop_bench.py) measures the loop
and the GPU, not an LLM. Its model name is "scripted-benchmark", which every report built from it shows as
scripted.

It lives beside the benchmarks, not in the package: a double is never part of what the product can pick.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any, Callable

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, PrivateAttr

ROLES = ("planner", "coder", "critic")
_CANDIDATE = re.compile(r"(?:Write candidate|Candidate) `([^`]+)`")
_VARIANT = re.compile(r"//\s*variant:\s*([\w.-]+)")


def _text(m: BaseMessage) -> str:
    c = m.content
    return c if isinstance(c, str) else "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in c)


def role_of(messages: list[BaseMessage]) -> str | None:
    """planner / coder / critic, from the opening of the system prompt's template."""
    from cuda_llm.agents.prompts import template

    system = " ".join(next((_text(m) for m in messages if isinstance(m, SystemMessage)), "").split())
    for role in ROLES:
        head = " ".join(template(f"{role}_system").strip().split("{", 1)[0].split())[:60]
        if system.startswith(head):
            return role
    return None


def candidate_of(messages: list[BaseMessage]) -> str:
    m = _CANDIDATE.search("\n".join(_text(x) for x in messages))
    return m.group(1) if m else "*"


def offered_ids(messages: list[BaseMessage]) -> tuple[str, ...]:
    part = _text(messages[-1]).split("Offered features", 1)[-1]
    return tuple(re.findall(r"^- `([a-z0-9_]+)`", part, re.M)) or ("coalesced_access",)


def variant_of(source: str) -> str | None:
    m = _VARIANT.search(source)
    return m.group(1) if m else None


def plan_answer(n: int, features: tuple[str, ...]) -> str:
    cands = [{"features": [features[i % len(features)]], "idea": f"scripted idea {i}"} for i in range(n)]
    return json.dumps({"rationale": "scripted plan", "candidates": cands})


def critic_answer(features: tuple[str, ...]) -> str:
    return json.dumps({"bottleneck": "memory-bound", "evidence": ["scripted"], "next_features": list(features),
                       "expected_gain": "unknown", "summary": "scripted critique (no LLM)"})


def coder_answer(source: str) -> str:
    return f"Scripted kernel.\n\n```cuda\n{source}```\n"


class ScriptedBenchModel(BaseChatModel):
    """Answers from ``respond(role, messages) -> str``; usage is characters / 4 so token accounting runs."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    respond: Callable[[str | None, list[BaseMessage]], str]
    model_name: str = "scripted-benchmark"
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "scripted-benchmark"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
        text = self.respond(role_of(messages), list(messages))
        n_in = max(1, sum(len(_text(m)) for m in messages) // 4)
        msg = AIMessage(content=text, usage_metadata={"input_tokens": n_in, "output_tokens": max(1, len(text) // 4),
                                                      "total_tokens": n_in + max(1, len(text) // 4)},
                        response_metadata={"model_name": self.model_name})
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def with_structured_output(self, schema: Any, **kw: Any) -> Any:
        raise NotImplementedError("scripted: answers are plain text JSON")   # the agents parse the text themselves
