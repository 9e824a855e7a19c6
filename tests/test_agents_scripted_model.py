"""The scripted chat model behaves like ChatOpenAI where the agents rely on it (it drives the graph tests)."""

from __future__ import annotations

import threading

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from pydantic import BaseModel

from cuda_llm.agents.errors import LLMCallError
from cuda_llm.agents.prompts import render
from cuda_llm.agents.structured import forget_methods, invoke_structured
from cuda_llm.agents.usage import usage_of

from scripted_chat_model import ScriptedChatModel, ScriptExhausted, detect_role, endpoint_down


class Pick(BaseModel):
    choice: int


MSGS = [SystemMessage(content="You pick."), HumanMessage(content="Pick one.")]


@pytest.fixture(autouse=True)
def _fresh_methods():
    forget_methods()
    yield
    forget_methods()


def test_replies_in_order_recorded_with_usage():
    m = ScriptedChatModel(replies=["first", AIMessage(content="second", usage_metadata={
        "input_tokens": 5, "output_tokens": 6, "total_tokens": 11})], tokens=(3, 2))
    a, b = m.invoke(MSGS), m.invoke(MSGS + [HumanMessage(content="again")])
    assert (a.content, b.content) == ("first", "second")
    assert (usage_of(a).input_tokens, usage_of(a).output_tokens) == (3, 2)
    assert (usage_of(b).input_tokens, usage_of(b).output_tokens) == (5, 6)
    assert [c.user for c in m.calls] == ["Pick one.", "again"] and m.remaining == 0
    with pytest.raises(ScriptExhausted, match="all 2 scripted replies used"):
        m.invoke(MSGS)


def test_by_role_routes_on_system_prompt():
    m = ScriptedChatModel.by_role(planner=["p1"], coder=["c1", "c2"], critic=["k1"])
    sys = {"planner": render("planner_system", n_candidates=2, max_features=3),
           "coder": render("coder_system", rules="r", signature="void solve()"),
           "critic": render("critic_system")}
    got = {r: m.invoke([SystemMessage(content=s), HumanMessage(content="go")]).content for r, s in sys.items()}
    assert got == {"planner": "p1", "coder": "c1", "critic": "k1"}
    assert [c.role for c in m.calls] == ["planner", "coder", "critic"]
    assert detect_role(MSGS) is None
    with pytest.raises(ScriptExhausted, match="planner"):
        m.invoke([SystemMessage(content=sys["planner"]), HumanMessage(content="go")])


@pytest.mark.parametrize("mode,structured_calls", [("json_schema", [True]), ("rejected", [True, False]),
                                                    ("unsupported", [False])])
def test_structured_modes(mode, structured_calls):
    m = ScriptedChatModel(replies=['{"choice": 2}'], structured_output=mode)
    ans = invoke_structured(m, MSGS, Pick)
    assert ans.value.choice == 2 and ans.attempts == 1
    assert ans.method == ("json_schema" if mode == "json_schema" else "fallback")
    assert [c.structured for c in m.calls] == structured_calls
    if mode != "json_schema":  # the fallback describes the schema in the system prompt
        assert '"choice"' in m.calls[-1].system


def test_exceptions_and_callables_as_replies():
    m = ScriptedChatModel(replies=[endpoint_down("http://10.0.0.1:8000/v1"),
                                   lambda msgs: f"saw {len(msgs)} messages"])
    with pytest.raises(LLMCallError, match="10.0.0.1:8000"):
        invoke_structured(m, MSGS, Pick)
    assert m.invoke(MSGS).content == "saw 2 messages"


def test_parallel_calls_each_get_one_reply():
    m = ScriptedChatModel(replies=[str(i) for i in range(16)])
    out: list[str] = []
    threads = [threading.Thread(target=lambda: out.append(m.invoke(MSGS).content)) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(out, key=int) == [str(i) for i in range(16)] and len(m.calls) == 16
