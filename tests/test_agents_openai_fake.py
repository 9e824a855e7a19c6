"""The real ChatOpenAI client (via make_chat_model) against a local fake OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel

from cuda_llm.agents.coder import CoderContext, write_kernel
from cuda_llm.agents.context import TaskBrief
from cuda_llm.agents.critic import CriticContext, DiagnosisBrief, critique, critique_from_diagnosis
from cuda_llm.agents.context import FeatureBrief
from cuda_llm.agents.errors import LLMAnswerError, LLMCallError
from cuda_llm.agents.llm import make_chat_model
from cuda_llm.agents.settings import load_settings
from cuda_llm.agents.structured import forget_methods, invoke_structured, known_method
from cuda_llm.agents.usage import usage_of
from cuda_llm.tasks import load_task

from fake_openai_server import FakeOpenAIServer, Reply


class Answer(BaseModel):
    verdict: str
    score: int


MSGS = [SystemMessage(content="You grade kernels."), HumanMessage(content="Grade it.")]
GOOD = json.dumps({"verdict": "fast", "score": 7})


@pytest.fixture(autouse=True)
def _fresh_methods():
    forget_methods()
    yield
    forget_methods()


@pytest.fixture(autouse=True)
def _tiny_backoff(monkeypatch):
    """The client's exponential backoff (0.5 s doubling) shrunk so that retry tests stay fast; errors from
    the fake server also carry retry-after-ms: 1."""
    import openai._base_client as base_client

    monkeypatch.setattr(base_client, "INITIAL_RETRY_DELAY", 0.01)


def chat(server: FakeOpenAIServer, role: str = "planner", max_retries: int = 2):
    settings = load_settings({"model": "fake-model", "base_url": server.base_url, "max_retries": max_retries,
                              "timeout_s": 10}, env={})
    return make_chat_model(settings, role)


def test_retries_on_500_then_succeeds_and_counts_tokens():
    with FakeOpenAIServer(script=[Reply(status=500), Reply(status=503), Reply(content="hello", prompt_tokens=21,
                                                                              completion_tokens=4)]) as srv:
        ai = chat(srv).invoke(MSGS)
    assert ai.content == "hello"
    assert srv.statuses == [500, 503, 200]  # the client itself retried twice
    u = usage_of(ai)
    assert (u.input_tokens, u.output_tokens, u.calls) == (21, 4, 1)


def test_retries_exhausted_gives_call_error_naming_endpoint():
    with FakeOpenAIServer(script=[Reply(status=500)] * 3) as srv:
        model = chat(srv, max_retries=1)
        with pytest.raises(LLMCallError) as exc:
            invoke_structured(model, MSGS, Answer)
    assert srv.statuses == [500, 500]
    assert "fake-model" in str(exc.value) and srv.base_url in str(exc.value)


def test_rate_limit_429_is_retried():
    with FakeOpenAIServer(script=[Reply(status=429, error="rate limited"), Reply(content="ok")]) as srv:
        assert chat(srv).invoke(MSGS).content == "ok"
    assert srv.statuses == [429, 200]


def test_structured_json_schema_when_supported():
    with FakeOpenAIServer(script=[Reply(content=GOOD, prompt_tokens=30, completion_tokens=9)]) as srv:
        ans = invoke_structured(chat(srv), MSGS, Answer)
    assert ans.value == Answer(verdict="fast", score=7)
    assert ans.method == "json_schema" and ans.attempts == 1
    assert srv.requests[0].response_format == "json_schema"
    assert srv.requests[0].body["response_format"]["json_schema"]["schema"]["required"] == ["verdict", "score"]
    assert (ans.usage.input_tokens, ans.usage.output_tokens) == (30, 9)


def test_falls_back_when_json_schema_rejected_and_remembers():
    prose = "Sure! Here is my grading:\n```json\n" + GOOD + "\n```\nHope that helps."
    with FakeOpenAIServer(reject_json_schema=True, script=[Reply(content=prose), Reply(content=GOOD)]) as srv:
        model = chat(srv)
        ans = invoke_structured(model, MSGS, Answer)
        assert ans.value.score == 7 and ans.method == "fallback" and ans.attempts == 1
        assert srv.statuses == [400, 200]
        # the fallback request describes the schema in the prompt and sends no response_format
        fallback_req = srv.requests[1]
        assert fallback_req.response_format is None
        assert '"verdict"' in fallback_req.body["messages"][0]["content"]
        assert known_method(model) == "fallback"
        # second call: no re-discovery, straight to the fallback
        ans2 = invoke_structured(chat(srv), MSGS, Answer)
        assert ans2.method == "fallback"
        assert srv.statuses == [400, 200, 200]


def test_invalid_json_gets_correction_then_succeeds():
    bad = json.dumps({"verdict": "fast", "score": "lots"})
    with FakeOpenAIServer(script=[Reply(content=bad), Reply(content=GOOD)]) as srv:
        ans = invoke_structured(chat(srv), MSGS, Answer, retries=2)
    assert ans.value.score == 7 and ans.attempts == 2
    last = srv.requests[1].body["messages"][-1]["content"]
    assert "score" in last and "could not be used" in last  # told exactly what was wrong


def test_garbage_answer_reported_clearly():
    garbage = "I am a teapot. " * 30
    with FakeOpenAIServer(script=[Reply(content=garbage)] * 3) as srv:
        with pytest.raises(LLMAnswerError) as exc:
            invoke_structured(chat(srv), MSGS, Answer, retries=2)
    msg = str(exc.value)
    assert "Answer" in msg and "3 attempt" in msg and "no JSON object" in msg
    assert "I am a teapot." in msg and len(msg) < 800  # a snippet, not the whole answer
    assert exc.value.usage.calls == 3 and exc.value.usage.input_tokens == 33
    assert len(srv.requests) == 3


def test_garbage_http_body_is_a_call_error():
    with FakeOpenAIServer(script=[Reply(status=200, body=b"<html>proxy error</html>")]) as srv:
        with pytest.raises(LLMCallError) as exc:
            invoke_structured(chat(srv, max_retries=0), MSGS, Answer)
    msg = str(exc.value)
    assert srv.base_url in msg and "not an OpenAI chat completion" in msg and "/v1" in msg


def test_endpoint_down_names_url_and_what_to_check():
    srv = FakeOpenAIServer().start()
    model = chat(srv, max_retries=1)
    srv.stop()  # nothing listens on that port any more
    with pytest.raises(LLMCallError) as exc:
        invoke_structured(model, MSGS, Answer)
    msg = str(exc.value)
    assert srv.base_url in msg and "'fake-model'" in msg and "after 1 retry" in msg
    assert "running and reachable" in msg and "OPENAI_BASE_URL" in msg


def test_timeout_is_a_call_error_saying_how_to_raise_it():
    with FakeOpenAIServer(script=[Reply(content=GOOD, delay_s=2.0)]) as srv:
        settings = load_settings({"model": "slow-model", "base_url": srv.base_url, "max_retries": 0,
                                  "timeout_s": 0.2}, env={})
        with pytest.raises(LLMCallError) as exc:
            invoke_structured(make_chat_model(settings, "critic"), MSGS, Answer)
    assert "timed out" in str(exc.value) and "raise timeout_s" in str(exc.value)


def test_make_chat_model_takes_role_settings():
    settings = load_settings({"model": "m", "coder_model": "big-coder", "base_url": "http://h:1/v1", "timeout_s": 42,
                              "max_retries": 3, "temperature": 0.2}, env={})
    coder, critic = make_chat_model(settings, "coder"), make_chat_model(settings, "critic")
    assert (coder.model_name, critic.model_name) == ("big-coder", "m")
    assert (coder.request_timeout, coder.max_retries, coder.temperature) == (42, 3, 0.2)
    assert coder.openai_api_base == "http://h:1/v1"


def test_coder_through_real_client_retries_non_cuda_answer():
    task = TaskBrief.from_task(load_task("gelu").task)
    kernel = '```cuda\n#include <cuda_runtime.h>\n__global__ void k(const float* x, float* y, int n){}\n' \
             'extern "C" void solve(const float* x, float* y, int n) { k<<<1,1>>>(x, y, n); }\n```'
    with FakeOpenAIServer(script=[Reply(content="```python\nimport torch\ndef solve(x): pass\n```"),
                                  Reply(content=kernel, completion_tokens=50)]) as srv:
        ans = write_kernel(chat(srv, "coder"), CoderContext(task=task), retries=2)
    assert 'extern "C" void solve' in ans.source and ans.attempts == 2
    assert "python, not CUDA" in srv.requests[1].body["messages"][-1]["content"]
    assert ans.usage.output_tokens == 57


def test_critic_falls_back_on_failing_server():
    task = TaskBrief.from_task(load_task("gelu").task)
    diag = DiagnosisBrief(bottleneck="memory-bound", evidence=["dram_throughput = 41%"],
                          suggested_features=["vector_loads", "not_a_feature"], summary="loads are scalar")
    cat = [FeatureBrief(id="vector_loads", name="Vector loads"), FeatureBrief(id="smem_tiling")]
    ctx = CriticContext(task=task, candidate="c1", diagnosis=diag, catalogue=cat)
    fallback = critique_from_diagnosis(diag, [f.id for f in cat])
    with FakeOpenAIServer(script=[Reply(status=500)] * 2) as srv:
        crit, used_fallback, usage = critique(chat(srv, "critic", max_retries=1), ctx, fallback)
    assert used_fallback and crit == fallback and crit.next_features == ["vector_loads"]
    good = json.dumps({"bottleneck": "memory-bound", "evidence": ["dram = 41%"], "next_features":
                       ["tensor_cores_mma", "smem_tiling", "vector_loads"], "change": "float4 loads",
                       "expected_gain": "1.5x", "summary": "s"})
    with FakeOpenAIServer(script=[Reply(content=good)]) as srv:
        crit, used_fallback, usage = critique(chat(srv, "critic"), ctx, fallback)
    assert not used_fallback and crit.next_features == ["smem_tiling", "vector_loads"] and usage.calls == 1
    # the rule-based diagnosis is in the prompt
    assert "dram_throughput = 41%" in srv.requests[0].body["messages"][1]["content"]
