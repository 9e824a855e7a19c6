"""LLM plumbing through the real ChatOpenAI client and the fake OpenAI server: cut-off answers asked again
with a larger budget, reasoning text kept beside the answer, reasoning_effort and extra_body passed through,
per-role settings kept on resume, and replies that are not chat completions (HTML, empty, cut, no choices)
turned into endpoint errors that stop a run resumably."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from cuda_llm.agents.coder import CoderContext, write_kernel
from cuda_llm.agents.context import TaskBrief
from cuda_llm.agents.errors import LLMCallError
from cuda_llm.agents.llm import make_chat_model, next_budget
from cuda_llm.agents.settings import LLMSettings, load_settings
from cuda_llm.agents.structured import forget_methods, invoke_model, invoke_structured
from cuda_llm.tasks import load_task

from fake_openai_server import FakeOpenAIServer, Reply

MSGS = [SystemMessage(content="You write kernels."), HumanMessage(content="Write it.")]
KERNEL = ('```cuda\n#include <cuda_runtime.h>\n__global__ void k(const float* x, float* y, int n){}\n'
          'extern "C" void solve(const float* x, float* y, int n) { k<<<1,1>>>(x, y, n); }\n```')


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    import openai._base_client as base_client

    monkeypatch.setattr(base_client, "INITIAL_RETRY_DELAY", 0.01)
    forget_methods()
    yield
    forget_methods()


def chat(server: FakeOpenAIServer, role: str = "coder", **cli):
    settings = load_settings({"model": "fake-model", "base_url": server.base_url, "max_retries": 0, "timeout_s": 10,
                              **cli}, env={})
    return make_chat_model(settings, role)


def test_next_budget_doubles_up_to_the_limit():
    assert next_budget(100, 100, 1000) == 200
    assert next_budget(None, 3000, 65536) == 8192            # the server's default cut it: at least 8192
    assert next_budget(None, 6000, 65536) == 12000
    assert next_budget(600, 600, 1000) == 1000
    assert next_budget(1000, 1000, 1000) is None              # nothing larger fits


def test_a_cut_off_kernel_is_asked_again_with_twice_the_budget():
    cut = KERNEL[:60]                                          # an unclosed ``` block
    with FakeOpenAIServer(script=[Reply(content=cut, finish_reason="length", completion_tokens=100),
                                  Reply(content=KERNEL, completion_tokens=150)]) as srv:
        ans = write_kernel(chat(srv, max_tokens=100), CoderContext(task=TaskBrief.from_task(load_task("gelu"))))
    assert 'extern "C" void solve' in ans.source and ans.attempts == 1    # no "not closed" correction was needed
    budgets = [r.body.get("max_completion_tokens") for r in srv.requests]
    assert budgets == [100, 200]
    assert ans.usage.output_tokens == 250 and ans.usage.input_tokens == 22   # both tries are paid for


def test_cut_off_retries_stop_at_the_limit_and_say_so():
    with FakeOpenAIServer(script=[Reply(content="a", finish_reason="length")] * 3) as srv:
        ai = invoke_model(make_chat_model(_settings(srv, max_tokens=100, limit=150), "coder"), MSGS)
    assert [r.body.get("max_completion_tokens") for r in srv.requests] == [100, 150]
    assert ai.response_metadata["finish_reason"] == "length" and ai.response_metadata["cutoff_retries"] == 1
    assert ai.response_metadata["max_tokens_used"] == 150


def _settings(srv: FakeOpenAIServer, *, max_tokens: int, limit: int) -> LLMSettings:
    s = load_settings({"model": "m", "base_url": srv.base_url, "max_retries": 0, "max_tokens": max_tokens}, env={})
    s.coder.max_tokens_limit = limit
    return s


def test_reasoning_effort_extra_body_and_temperature_go_in_the_request():
    with FakeOpenAIServer(script=[Reply(content="ok")] * 2) as srv:
        model = chat(srv, reasoning_effort="high", extra_body='{"top_k": 20, "chat_template_kwargs": {"x": 1}}',
                     coder_temperature=0.3)
        invoke_model(model, MSGS)
        invoke_model(model, MSGS, temperature=0.9)               # a candidate's own temperature
    first, second = srv.requests[0].body, srv.requests[1].body
    assert first["reasoning_effort"] == "high" and first["top_k"] == 20 and first["chat_template_kwargs"] == {"x": 1}
    assert first["temperature"] == 0.3 and second["temperature"] == 0.9


def test_reasoning_text_is_kept_and_written_beside_the_answer(tmp_path):
    from cuda_llm.runs.llm_cache import CachedChatModel
    from cuda_llm.runs.rundir import RunDir

    rundir = RunDir.create(tmp_path / "runs", "gelu")
    events: list[dict] = []
    with FakeOpenAIServer(script=[Reply(content="the answer", reasoning_content="first I think about tiles")]) as srv:
        model = CachedChatModel(chat(srv), "coder", tmp_path / "cache", on_call=events.append, rundir=rundir)
        ai = model.invoke(MSGS)
        again = model.invoke(MSGS)                                # from the cache: the reasoning is kept too
    assert ai.content == "the answer" and ai.additional_kwargs["reasoning_content"] == "first I think about tiles"
    assert again.additional_kwargs["reasoning_content"] == "first I think about tiles" and len(srv.requests) == 1
    written = list((rundir.root / "answers").glob("coder-*.reasoning.md"))
    assert len(written) == 1 and "first I think about tiles" in written[0].read_text()
    assert events[0]["reasoning_chars"] == len("first I think about tiles")


@pytest.mark.parametrize("body,ctype", [
    (b"<html><body>Please sign in</body></html>", "text/html"),
    (b"<html>proxy error</html>", "application/json"),
    (b"", "application/json"),
    (b'{"id": "x", "choices": [{"index": 0, "mess', "application/json"),
    (b'{"id": "x", "object": "chat.completion"}', "application/json"),
])
def test_a_reply_that_is_not_a_chat_completion_is_an_endpoint_error(body, ctype):
    with FakeOpenAIServer(script=[Reply(body=body, content_type=ctype)] * 2) as srv:
        with pytest.raises(LLMCallError) as exc:
            invoke_model(chat(srv), MSGS)
        with pytest.raises(LLMCallError):
            invoke_structured(chat(srv, "planner"), MSGS, TaskBrief)
    msg = str(exc.value)
    assert srv.base_url in msg and "not an OpenAI chat completion" in msg and "retr" not in msg.split("What to do")[0]


def test_settings_survive_a_resume_role_by_role():
    s = load_settings({"model": "m", "base_url": "http://h:1/v1", "coder_model": "big", "critic_temperature": 0.1,
                       "coder_temperatures": "0.2,0.8", "planner_max_tokens": 4000, "coder_reasoning_effort": "high",
                       "critic_extra_body": '{"top_k": 5}', "timeout_s": 77, "critic_provider": "rules"},
                      env={"OPENAI_API_KEY": "sk-x"})
    saved = json.loads(json.dumps(s.redacted()))
    assert "sk-x" not in json.dumps(saved)
    back = LLMSettings.from_saved(saved, env={"OPENAI_API_KEY": "sk-y"})
    for role in ("planner", "coder", "critic"):
        a, b = s.role(role).model_dump(exclude={"api_key"}), back.role(role).model_dump(exclude={"api_key"})
        assert a == b, role
    assert back.coder.api_key == "sk-y" and back.critic.provider == "rules"
    assert (back.planner.temperature, back.critic.temperature, back.coder.temperatures) == (None, 0.1, [0.2, 0.8])
    assert back.coder.timeout_s == back.critic.timeout_s == 77 and back.planner.max_tokens == 4000
    moved = LLMSettings.from_saved(saved, env={}, overrides={"coder": {"provider": "manual"}})
    assert moved.coder.provider == "manual" and moved.endpoint_roles() == ["planner"]


# ------------------------------------------------------------------ in a run
def _run_settings(url: str, **cli) -> LLMSettings:
    return load_settings({"model": "fake-model", "base_url": url, "max_retries": 0, "timeout_s": 10, **cli}, env={})


@pytest.fixture
def compile_cache(tmp_path_factory, monkeypatch):
    """One compile cache for the run tests of the session (the folder the graph tests use too)."""
    path = tmp_path_factory.getbasetemp() / "graph-compile-cache"
    path.mkdir(exist_ok=True)
    monkeypatch.setenv("CUDA_LLM_CACHE", str(path))


def test_an_html_reply_stops_the_run_resumably_and_resume_goes_on(tmp_path, compile_cache):
    from fake_gpu_evaluator import FakeGpuEvaluator, coder_answer, critic_answer, softmax_source

    from cuda_llm.graph.run import RunOptions, resume_run, start_run
    from cuda_llm.graph.state import Limits

    ev = FakeGpuEvaluator({"baseline": 10.0, "v5": 5.0})
    opts = RunOptions(limits=Limits(n_candidates=1, max_rounds=1, compile_fix_turns=0), runs_dir=tmp_path / "runs",
                      learn=False)
    page = Reply(body=b"<html><body>Sign in to the proxy</body></html>", content_type="text/html")
    with FakeOpenAIServer(script=[page] * 4) as srv:   # the critic of the baseline falls back; the planner stops
        out = start_run("softmax", _run_settings(srv.base_url), opts, evaluator=ev, handle_signals=False)
    assert not out.finished and out.error and "not an OpenAI chat completion" in out.error
    plan = json.dumps({"rationale": "r", "candidates": [{"features": ["warp_shuffle"], "idea": "a warp per row"}]})
    script = [Reply(content=plan), Reply(content=coder_answer(softmax_source("v5"))), Reply(content=critic_answer())]
    with FakeOpenAIServer(script=script) as srv:
        back = resume_run(out.run_id, tmp_path / "runs", settings=_run_settings(srv.base_url), evaluator=ev,
                          handle_signals=False)
    assert back.finished and back.best["id"] == "r1c0"


def test_each_candidate_of_a_round_gets_its_temperature(tmp_path, compile_cache):
    from fake_gpu_evaluator import FakeGpuEvaluator, coder_answer, critic_answer, plan_answer, softmax_source
    from scripted_chat_model import ScriptedChatModel, detect_role

    from cuda_llm.graph.run import RunOptions, start_run
    from cuda_llm.graph.state import Limits


    def respond(messages):
        role = detect_role(messages)
        if role == "planner":
            return plan_answer(3)
        if role == "critic":
            return critic_answer()
        return coder_answer(softmax_source("v5"))

    model = ScriptedChatModel(respond=respond)
    settings = _run_settings("http://127.0.0.1:9/v1", coder_temperatures="0.2,0.6")
    opts = RunOptions(limits=Limits(n_candidates=3, max_rounds=1, compile_fix_turns=0), runs_dir=tmp_path / "runs",
                      learn=False)
    start_run("softmax", settings, opts, evaluator=FakeGpuEvaluator({"baseline": 10.0, "v5": 5.0}),
              model_factory=lambda role: model, handle_signals=False)
    temps = {}
    for c in model.calls_for("coder"):
        cid = next(x for x in ("r1c0", "r1c1", "r1c2") if f"Write candidate `{x}`" in c.text)
        temps[cid] = c.kwargs.get("temperature")
    assert temps == {"r1c0": 0.2, "r1c1": 0.6, "r1c2": 0.2}
    assert all("temperature" not in c.kwargs for c in model.calls_for("planner") + model.calls_for("critic"))
