"""Planner, coder and critic driven by the scripted chat model: what their prompts carry, how answers are
parsed and retried, and the tokens each role spends."""

from __future__ import annotations

import json

import pytest

from cuda_llm.agents.coder import CoderContext, RepairInfo, build_coder_messages, extract_cuda, write_kernel
from cuda_llm.agents.context import (
    CritiqueBrief, DiagnosisBrief, FeatureBrief, HistoryItem, ParentKernel, TaskBrief, make_diff,
)
from cuda_llm.agents.critic import CriticContext, critique, critique_from_diagnosis
from cuda_llm.agents.errors import CodeExtractionError, LLMAnswerError
from cuda_llm.agents.planner import OfferedFeature, PlannerContext, plan_round
from cuda_llm.agents.structured import forget_methods
from cuda_llm.agents.usage import TokenUsage
from cuda_llm.tasks import load_task
from cuda_llm.results import DeviceInfo, KernelResources

from scripted_chat_model import ScriptedChatModel, endpoint_down

SOFTMAX = load_task("softmax").task
TASK = TaskBrief.from_task(load_task("softmax"))   # the loaded task: make_inputs says how x is drawn
H100 = DeviceInfo(name="NVIDIA H100 80GB HBM3", arch="sm_90", compute_capability=(9, 0), sm_count=132,
                  max_shared_per_block=49152, max_shared_per_block_optin=232448, max_shared_per_sm=233472,
                  registers_per_block=65536, registers_per_sm=65536, l2_bytes=50 * 2**20, memory_bytes=80 * 2**30,
                  peak_bandwidth_gbs=3010.0, peak_fp32_gflops=51200.0)
BEST_SRC = ('#include <cuda_runtime.h>\n__global__ void softmax_rows(const float* x, float* y, int rows, int cols) {}\n'
            'extern "C" void solve(const float* x, float* y, int rows, int cols) {\n'
            '  softmax_rows<<<rows, 256>>>(x, y, rows, cols);\n}\n')
BEST = ParentKernel(candidate="r2c3", source=BEST_SRC, median_ms=0.4321, speedup=3.5, sol_ms=0.1772, pct_of_sol=41.0,
                    resources=[KernelResources(name="softmax_rows", registers=40, shared_bytes=2048, spill_store_bytes=8)],
                    profile="dram__throughput.avg.pct_of_peak_sustained_elapsed = 38.2%",
                    profile_evidence=["warp stall mix = long_scoreboard 61%, barrier 18%"],
                    diagnosis=DiagnosisBrief(bottleneck="memory-bound", summary="memory-bound with scalar loads"),
                    critique=CritiqueBrief(candidate="r2c3", bottleneck="memory-bound", summary="loads are scalar",
                                           evidence=["dram = 38%"], change="load float4 per thread",
                                           expected_gain="1.5x"),
                    features=["coalescing"])
HISTORY = [HistoryItem(candidate=f"r{i // 4}c{i % 4}", round=i // 4, features=["smem_tiling"], status="ok",
                       median_ms=1.0 + i, speedup=1.1, note=f"attempt number {i}") for i in range(20)]
FEATURES = [FeatureBrief(id="vector_loads", name="Vector loads", bottleneck="memory-bound",
                         how="Load float4 when the row is 16-byte aligned; handle the tail scalarly.",
                         exemplar="float4 v = reinterpret_cast<const float4*>(x)[i];"),
            FeatureBrief(id="warp_shuffle", name="Warp shuffles", how="Reduce with __shfl_xor_sync.")]
KERNEL = "Here it is:\n```cuda\n" + BEST_SRC + "```\nIt uses one block per row."


@pytest.fixture(autouse=True)
def _fresh_methods():
    forget_methods()
    yield
    forget_methods()


def assert_task_and_device(text: str) -> None:
    assert SOFTMAX.signature in text
    assert "rows=129, cols=777" in text and "rows=16384, cols=4096" in text  # a test shape, the benchmark
    for held in SOFTMAX.held_out:
        assert f"rows={held['rows']}, cols={held['cols']}" not in text  # held-out shapes never shown
    for fact in ("NVIDIA H100 80GB HBM3", "compute capability 9.0", "132 SMs", "48 KiB per block",
                 "227 KiB per block with cudaFuncSetAttribute", "65536 per block", "L2 cache 50 MiB",
                 "3010 GB/s", "51.2 TFLOP/s"):
        assert fact in text, fact


def assert_bounded_history(text: str) -> None:
    assert "attempt number 19" in text and "attempt number 7" not in text
    assert "older attempts not shown" in text


# -- planner
def planner_ctx(**kw) -> PlannerContext:
    offered = [OfferedFeature(id="vector_loads", name="Vector loads", category="memory", expected_share=0.0,
                              recommended_by=["the critic"]),
               OfferedFeature(id="warp_shuffle", name="Warp shuffles", category="reduction", expected_share=0.31,
                              tries=5, passed=4, mean_speedup=1.40, reason="proven"),
               OfferedFeature(id="smem_tiling")]
    return PlannerContext(task=TASK, device=H100, n_candidates=3, round_index=4, offered=offered, best=BEST,
                          critique=CritiqueBrief(candidate="r2c3", bottleneck="memory-bound",
                                                 summary="memory-bound: try vector_loads"), history=HISTORY, **kw)


def test_planner_prompt_carries_the_evidence():
    same = {"features": ["vector_loads"], "idea": "float4"}
    model = ScriptedChatModel(replies=[json.dumps({"rationale": "r", "candidates": [same] * 3})], tokens=(900, 120))
    plan, answer = plan_round(model, planner_ctx())
    call = model.calls[0]
    assert call.role == "planner" and call.structured
    text = call.text
    assert_task_and_device(text)
    assert_bounded_history(text)
    assert "r2c3" in text and "0.4321 ms" in text and "3.50x the naive baseline" in text
    assert "0.1772 ms" in text and "41.0% of it" in text                                # speed of light and % of it
    assert "40 registers" in text and "SPILLS" in text and "dram__throughput" in text  # resources and profile
    assert "expected to close +31% of the headroom to speed of light (posterior mean" in text
    assert "tried 5, passed 4, mean 1.40x" in text
    assert "recommended now by the critic" in text and "memory-bound: try vector_loads" in text
    assert "Round 4." in text and "exactly 3 candidate plans" in text
    # the planner gives every candidate its own feature set, whatever the model answered
    sets = [frozenset(c.features) for c in plan.candidates]
    assert len(plan.candidates) == 3 and len(set(sets)) == 3 and all(sets)
    assert plan.adjustments and answer.usage == TokenUsage(input_tokens=900, output_tokens=120, calls=1)


def test_planner_drops_unknown_features_and_pads_through_text_fallback():
    reply = json.dumps({"rationale": "explore", "candidates": [
        {"features": ["tensor_cores_mma", "vector_loads"], "idea": "a"}]})
    model = ScriptedChatModel(replies=["Sure.\n```json\n" + reply + "\n```"], structured_output="rejected")
    plan, answer = plan_round(model, planner_ctx())
    assert answer.method == "fallback" and [c.structured for c in model.calls] == [True, False]
    assert plan.candidates[0].features == ["vector_loads"]
    assert all("tensor_cores_mma" not in c.features for c in plan.candidates)
    assert len({frozenset(c.features) for c in plan.candidates}) == 3
    assert any("not offered" in a for a in plan.adjustments) and any("padded" in a for a in plan.adjustments)


def test_planner_garbage_is_an_answer_error_with_usage():
    model = ScriptedChatModel(replies=["I would rather not."] * 3, tokens=(100, 10))
    with pytest.raises(LLMAnswerError) as exc:
        plan_round(model, planner_ctx(), retries=2)
    assert "PlanAnswer" in str(exc.value) and "I would rather not." in str(exc.value)
    assert exc.value.usage.calls == 3 and exc.value.usage.input_tokens == 300


# -- coder
def coder_ctx(**kw) -> CoderContext:
    return CoderContext(task=TASK, device=H100, candidate="r5c2", features=FEATURES, idea="float4 loads, shuffles",
                        parent=BEST, history=HISTORY, **kw)


def test_coder_prompt_carries_best_kernel_features_and_history():
    msgs = build_coder_messages(coder_ctx())
    text = "\n".join(m.content for m in msgs)
    assert_task_and_device(text)
    assert_bounded_history(text)
    assert "softmax_rows<<<rows, 256>>>" in text and "0.4321 ms" in text and "40 registers" in text
    assert "dram__throughput" in text and "memory-bound with scalar loads" in text
    assert "long_scoreboard 61%" in text and "Recommended change: load float4 per thread" in text
    assert "`vector_loads` (Vector loads): Load float4 when the row is 16-byte aligned" in text
    assert "reinterpret_cast<const float4*>" in text  # the exemplar
    assert "float4 loads, shuffles" in text and "r5c2" in text
    assert "never cudaMalloc/cudaMemcpy the inputs" in msgs[0].content  # harness rules in the system prompt
    assert "host work inside it included" in msgs[0].content and "256-byte aligned" in msgs[0].content
    assert "normal values (sd 2) around its own offset" in text and "reference.py" not in text   # input distribution
    assert "2048 resident threads" in text and "4 warp schedulers" in text and "1024 B of shared memory" in text
    assert "Left out" not in text                                                   # everything fits the budget


def test_coder_repair_prompt_carries_errors_and_failed_source():
    ctx = coder_ctx(repair=RepairInfo(failed_candidate="r5c1", failed_source="__global__ void broken(",
                                      errors="kernel.cu(3): error: expected a )"))
    text = "\n".join(m.content for m in build_coder_messages(ctx))
    assert "Candidate `r5c1` failed" in text and "expected a )" in text and "__global__ void broken(" in text
    assert "vector_loads, warp_shuffle" in text and "Write candidate `r5c2`" in text
    assert "reinterpret_cast<const float4*>" in text and "float4 loads, shuffles" in text   # exemplar and idea
    assert "A working reference: the parent `r2c3`" in text and "softmax_rows<<<rows, 256>>>" in text
    assert text.count("expected a )") == 1                                         # the error, once


@pytest.mark.parametrize("answer,source_start", [
    (KERNEL, "#include <cuda_runtime.h>"),
    (BEST_SRC, "#include <cuda_runtime.h>"),  # no fence: a bare source file
    ("<think>maybe python?</think>\n```cu\n" + BEST_SRC + "```", "#include"),
    ("```cuda\n__device__ float helper();\n```\nand the file:\n```cuda\n" + BEST_SRC + "```", "#include"),
])
def test_code_extraction(answer, source_start):
    src = extract_cuda(answer, "solve")
    assert src.startswith(source_start) and 'extern "C" void solve' in src and "```" not in src


@pytest.mark.parametrize("answer,reason", [
    ("", "the answer was empty"),
    ("```python\nimport numpy as np\ndef solve(x):\n    return x\n```", "python, not CUDA"),
    ("I think you should use shared memory.", "no ```cuda fenced code block"),
    ("```cuda\n" + BEST_SRC, "not closed"),
    ("```cuda\nvoid solve(const float* x, float* y, int rows, int cols) {}\n```", 'not declared extern "C"'),
    ("```cuda\n__global__ void k() {}\n```", "no code block defines the entry point"),
])
def test_unusable_code_is_retried_with_the_reason(answer, reason):
    with pytest.raises(CodeExtractionError, match=reason.replace("(", r"\(")):
        extract_cuda(answer, "solve")
    model = ScriptedChatModel(replies=[answer, KERNEL], tokens=(50, 20))
    got = write_kernel(model, coder_ctx(), retries=2)
    assert got.attempts == 2 and got.source.startswith("#include <cuda_runtime.h>")
    retry = model.calls[1].user
    assert reason in retry and SOFTMAX.signature in retry  # what was wrong, and what is wanted
    assert got.usage == TokenUsage(input_tokens=100, output_tokens=40, calls=2)


def test_coder_gives_up_after_retries_with_the_last_reason():
    model = ScriptedChatModel(replies=["no code today"] * 3)
    with pytest.raises(LLMAnswerError, match="3 attempt.*no ```cuda fenced code block") as exc:
        write_kernel(model, coder_ctx(), retries=2)
    assert exc.value.usage.calls == 3 and len(model.calls) == 3


# -- critic
def critic_ctx() -> CriticContext:
    diag = DiagnosisBrief(bottleneck="memory-bound", evidence=["dram_throughput = 38%", "l1tex hit rate = 2%"],
                          suggested_features=["vector_loads", "not_in_catalogue"], summary="scalar loads, low bandwidth")
    return CriticContext(task=TASK, device=H100, candidate="r2c3", parent="r1c0", features=["coalescing"],
                         median_ms=0.4321, speedup=3.5,
                         roofline="arithmetic_intensity = 0.25; attainable_ms = 0.18; pct_of_sol = 41; limiter = memory",
                         metrics="sm__throughput = 12%", resources=BEST.resources, compile_warnings=["unused variable"],
                         source=BEST_SRC, diff=make_diff("old line\n", "new line\n"), diagnosis=diag,
                         catalogue=FEATURES, history=HISTORY)


def fallback() -> object:
    return critique_from_diagnosis(critic_ctx().diagnosis, [f.id for f in FEATURES])


def test_critic_prompt_and_answer():
    good = {"bottleneck": "memory-bound", "evidence": ["dram_throughput = 38%"], "change": "float4 loads",
            "next_features": ["warp_shuffle", "made_up", "vector_loads"], "expected_gain": "1.3x", "summary": "s"}
    model = ScriptedChatModel(replies=[json.dumps(good)], tokens=(400, 60))
    crit, used_fallback, usage = critique(model, critic_ctx(), fallback())
    assert not used_fallback and crit.next_features == ["warp_shuffle", "vector_loads"]
    assert usage == TokenUsage(input_tokens=400, output_tokens=60, calls=1)
    text = model.calls[0].text
    assert model.calls[0].role == "critic"
    for part in ("0.4321 ms", "3.50x the naive baseline", "pct_of_sol = 41; limiter = memory", "sm__throughput = 12%",
                 "40 registers", "unused variable", "-old line", "+new line", "dram_throughput = 38%",
                 "scalar loads, low bandwidth", "vector_loads: Vector loads — memory-bound", "132 SMs",
                 "softmax_rows<<<rows, 256>>>", "parent `r1c0`", "attempt number 19"):
        assert part in text, part


@pytest.mark.parametrize("replies", [["not json at all"] * 3, [endpoint_down()]])
def test_critic_falls_back_to_the_rule_based_diagnosis(replies):
    model = ScriptedChatModel(replies=replies, tokens=(30, 3))
    crit, used_fallback, usage = critique(model, critic_ctx(), fallback())
    assert used_fallback and crit == fallback()
    assert crit.bottleneck == "memory-bound" and crit.next_features == ["vector_loads"]  # catalogue ids only
    assert usage.calls == (3 if len(replies) == 3 else 0)


# -- tokens per role
def test_token_usage_counted_per_role():
    plan = json.dumps({"rationale": "r", "candidates": [{"features": ["vector_loads"], "idea": "a"},
                                                        {"features": ["warp_shuffle"], "idea": "b"},
                                                        {"features": ["smem_tiling"], "idea": "c"}]})
    crit = json.dumps({"bottleneck": "memory-bound", "evidence": [], "next_features": [], "change": "c",
                       "expected_gain": "?", "summary": "s"})
    model = ScriptedChatModel.by_role(planner=[plan], coder=["no code", KERNEL, KERNEL], critic=[crit])
    spent: dict[str, TokenUsage] = {}
    _, ans = plan_round(model, planner_ctx())
    spent["planner"] = ans.usage
    spent["coder"] = TokenUsage()
    for cid in ("r5c1", "r5c2"):
        spent["coder"] += write_kernel(model, coder_ctx().model_copy(update={"candidate": cid})).usage
    spent["critic"] = critique(model, critic_ctx(), fallback())[2]
    for role in ("planner", "coder", "critic"):
        calls = model.calls_for(role)
        expected = sum((TokenUsage(input_tokens=c.usage["input_tokens"], output_tokens=c.usage["output_tokens"],
                                   calls=1) for c in calls), TokenUsage())
        assert spent[role] == expected and expected.input_tokens > 0, role
    assert [spent[r].calls for r in ("planner", "coder", "critic")] == [1, 3, 1]

