"""What the model sees: the planner, coder, critic, compile-fix and repair prompts of a scripted run of
softmax (a compile error fixed in the coder's conversation, a wrong answer repaired although a sibling
passed, Nsight Compute profiles, measured peaks) carry every piece of evidence issue 12 lists, and never a
held-out size. The LLM is scripted; compiles (nvcc), the roofline and the diagnosis are real.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from cuda_llm.figures import fmt_ms

from fake_gpu_evaluator import FakeGpuEvaluator, coder_answer, critic_answer, fake_profile, softmax_source
from scripted_chat_model import ScriptedChatModel, detect_role

from cuda_llm.feature_db.catalogue import get_feature
from cuda_llm.graph.run import RunOptions, start_run
from cuda_llm.graph.state import Limits
from cuda_llm.results import DeviceInfo
from cuda_llm.tasks import load_task

pytestmark = pytest.mark.slow     # whole graph runs / every suite build: `pytest -m "not slow"` leaves them out

H100 = DeviceInfo(name="NVIDIA H100 80GB HBM3", arch="sm_90", compute_capability=(9, 0), sm_count=132,
                  max_shared_per_block=49152, max_shared_per_block_optin=232448, max_shared_per_sm=233472,
                  registers_per_block=65536, registers_per_sm=65536, l2_bytes=50 * 2**20, memory_bytes=80 * 2**30,
                  peak_bandwidth_gbs=3000.0, peak_fp32_gflops=60000.0)
LONG_IDEA = ("one warp per row: each lane keeps its share of the row in registers as float4 (cols / 128 of them), "
             "reduces the maximum and the sum with __shfl_xor_sync in one pass (online softmax), then writes y with "
             "float4 stores; rows whose length is not a multiple of 4 take a scalar tail; 8 warps per block, a "
             "grid-stride loop over rows so that the 16384 rows fill 132 SMs in about 4 waves")
PLANS = {1: [(["warp_shuffle"], "warp-level reductions of the row, one warp per row"),
             (["tma_bulk_copy"], "idea for r1c1: stage the row in shared memory with a bulk copy")],
         2: [(["vector_loads", "tma_bulk_copy"], LONG_IDEA),
             (["warp_shuffle", "vector_loads"], "float4 loads and shuffles")]}
TIMINGS = {"baseline": 10.0, "v5": 5.0, "v6": 6.0, "v3": 3.0, "v7": 7.0, "wa": "wrong_answer"}
HELD_OUT = [f"rows={s['rows']}, cols={s['cols']}" for s in load_task("softmax").task.held_out]


def respond(messages: list[Any]) -> str:
    role = detect_role(messages)
    text = "\n".join(str(m.content) for m in messages)
    if role == "planner":
        round_ = int(re.search(r"Round (\d+)\.", text).group(1))
        return json.dumps({"rationale": "split", "candidates": [{"features": f, "idea": i} for f, i in PLANS[round_]]})
    if role == "critic":
        return critic_answer(("vector_loads",))
    cid = re.search(r"Write candidate `([^`]+)`", text).group(1)
    turn = sum(m.type == "ai" for m in messages)
    kernels = {"r1c0": softmax_source("v5", broken=turn == 0), "r1c1": softmax_source("wa"),
               "r1c1f1": softmax_source("v6"), "r2c0": softmax_source("v3"), "r2c1": softmax_source("v7")}
    return coder_answer(kernels[cid])


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Any, ScriptedChatModel]:
    import os

    work = tmp_path_factory.mktemp("prompt-content")
    cache = tmp_path_factory.getbasetemp() / "graph-compile-cache"
    cache.mkdir(exist_ok=True)
    old = os.environ.get("CUDA_LLM_CACHE")
    os.environ["CUDA_LLM_CACHE"] = str(cache)
    try:
        model = ScriptedChatModel(respond=respond)
        ev = FakeGpuEvaluator(TIMINGS, device=H100, profiles={"baseline": fake_profile(), "v5": fake_profile(dram_pct=58)})
        # both candidates planned (no free slot): the prompts of planned candidates are what is checked here
        opts = RunOptions(limits=Limits(n_candidates=2, max_rounds=2, plateau_rounds=5, compile_fix_turns=1, max_repairs=1,
                                        free_slots=0),
                          runs_dir=work / "runs", stats_path=work / "stats.sqlite")
        # one earlier measured try of cache_hints (the scripted kernels use none): the offer shows its statistics
        from cuda_llm.feature_db.stats import StatsStore

        StatsStore(work / "stats.sqlite").record(arch=ev.arch, category=load_task("softmax").task.family,
                                                 features=["cache_hints"], compiled=True, passed=True,
                                                 speedup_over_parent=1.5, reward=0.4, key="earlier-run/r1c0")
        out = start_run("softmax", None, opts, evaluator=ev, model_factory=lambda role: model, handle_signals=False)
    finally:
        if old is None:
            os.environ.pop("CUDA_LLM_CACHE", None)
        else:
            os.environ["CUDA_LLM_CACHE"] = old
    assert out.finished and out.best["id"] == "r2c0", out
    return out, model


def coder_call(model: ScriptedChatModel, cid: str, turn: int = 0) -> str:
    calls = [c for c in model.calls_for("coder") if f"Write candidate `{cid}`" in c.text]
    return calls[turn].text


def planner_call(model: ScriptedChatModel, round_: int) -> str:
    return next(c.text for c in model.calls_for("planner") if f"Round {round_}." in c.text)


def critic_call(model: ScriptedChatModel, cid: str) -> str:
    return next(c.text for c in model.calls_for("critic") if f"Candidate `{cid}` (parent" in c.text)


def assert_device_and_rules(text: str) -> None:
    for fact in ("132 SMs", "at most 2048 resident threads", "32 resident blocks", "4 warp schedulers",
                 "1024 B of shared memory per block is reserved", "measured peak bandwidth 3000 GB/s"):
        assert fact in text, fact


def test_no_prompt_shows_a_held_out_size(run):
    out, model = run
    assert len(model.calls) >= 10
    for c in model.calls:
        for held in HELD_OUT:
            assert held not in c.text, (c.role, held)
        assert "first bad element" not in c.text    # the wrong answer failed on a held-out shape: its kind only


def test_the_coder_sees_the_whole_evidence_of_its_parent(run):
    out, model = run
    text = coder_call(model, "r2c0")
    assert_device_and_rules(text)
    # the toolchain and the exact build command, the harness's rules
    assert "CUDA 13.0" in text and "PTX ISA 9.0" in text and "-arch=sm_90" in text and "-shared" in text
    assert "host work inside it included" in text and "256-byte aligned" in text
    assert "// cuda-llm: tune NAME v1 v2 v3" in text                    # it may leave constants to the tuner
    assert "x: Normal values around a per-row offset" in text and "reference.py" not in text
    # the parent r1c0: speed of light at the benchmark shape, its % of it, ptxas resources
    assert "Parent kernel `r1c0`" in text
    m = re.search(r"Speed of light at the benchmark sizes: ([0-9.]+) ms; this kernel runs at ([0-9.]+)% of it", text)
    assert m and float(m.group(1)) == pytest.approx(8 * 16384 * 4096 / 3000e9 * 1e3, rel=1e-3)
    assert float(m.group(2)) == pytest.approx(100 * float(m.group(1)) / 5.04, abs=0.06)   # v5: 5.04 ms
    # one bound, said how: tensor-core kernels against the tensor-core bound, and welcome within the tolerance
    assert "Tensor-core kernels are measured against the tensor-core bound, not the fp32 one, and are welcome" in text
    assert re.search(r"- softmax_rows\(.*\): \d+ registers", text)
    # the diagnosis evidence: stall mix, sectors per request, DRAM bytes against the minimum, occupancy, waves
    for item in ("warp stall mix = long_scoreboard 61%, barrier 18%", "global loads = 32.0 sectors of 32 B per warp request",
                 "DRAM bytes = 1100 MB vs the task's minimum 536.9 MB (2.05x)",
                 "occupancy = 31.5% achieved, 50.0% theoretical, limited by registers", "waves per SM = 0.24",
                 "Rule-based diagnosis:"):
        assert item in text, item
    # the critic's whole review of the parent
    for item in ("Review of `r1c0` by the critic: memory-bound", "one thread per row leaves bandwidth unused",
                 "- dram 40%", "Recommended change: one warp per row, float4 loads", "Expected gain: 1.5x"):
        assert item in text, item
    # the planner's whole idea, the features' how-to and whole exemplars
    assert LONG_IDEA in text
    tma = get_feature("tma_bulk_copy").exemplar.strip()
    assert len(tma) > 1200 and tma in text
    assert get_feature("vector_loads").how.strip()[:80] in text
    assert "Left out" not in text


def test_round_one_starts_from_a_profiled_and_reviewed_baseline(run):
    out, model = run
    text = coder_call(model, "r1c1")
    assert "Parent kernel `baseline`" in text and "warp stall mix = long_scoreboard 61%" in text
    assert "Review of `baseline` by the critic" in text and "Speed of light at the benchmark sizes" in text
    assert "Review of `baseline` by the critic" in planner_call(model, 1)


def test_a_compile_error_goes_back_once_in_the_same_conversation(run):
    out, model = run
    calls = [c for c in model.calls_for("coder") if "Write candidate `r1c0`" in c.text]
    assert len(calls) == 2
    fix = calls[1].messages[-1].content
    assert "does not build" in fix and "undefined_symbol" in fix and "last compile check" in fix
    assert calls[1].messages[-2].type == "ai"          # the broken answer is in the conversation


def test_the_repair_prompt(run):
    out, model = run
    text = coder_call(model, "r1c1f1")
    assert "Candidate `r1c1` failed" in text and "wrong_answer" in text and "a held-out shape" in text
    assert text.count("first failing case") == 1                                  # the error, once
    assert "idea for r1c1: stage the row in shared memory" in text                 # the planner's idea
    assert get_feature("tma_bulk_copy").exemplar.strip() in text                   # the feature's exemplar, whole
    assert "A working reference: the parent `baseline`" in text
    assert load_task("softmax").task.baseline_path.read_text().strip()[:200] in text   # the naive source


def test_the_critic_sees_the_source_its_own_parent_the_roofline_and_the_history(run):
    out, model = run
    text = critic_call(model, "r1c0")
    assert "(identical to the parent)" not in text and "Change from its parent `baseline`" in text
    assert "+// variant: v5" in text                                                # a diff against the naive kernel
    assert softmax_source("v5").strip() in text                                     # the whole source judged
    assert "pct_of_sol = " in text and "limiter = memory" in text and "attainable_ms = " in text
    assert "warp stall mix" in text and "DRAM bytes" in text
    assert "- warp_shuffle:" in text and "- tensor_cores_mma:" not in text         # the catalogue, for this task
    r2 = critic_call(model, "r2c0")
    assert "r1c1" in r2 and "wrong_answer" in r2 and "r1c1f1" in r2                # what was tried, how it ended
    assert "Change from its parent `r1c0`" in r2


def test_the_planner_may_pick_any_feature_and_sees_the_recommendations(run):
    out, model = run
    text = planner_call(model, 2)
    features = text.split("Offered features", 1)[1]
    assert re.search(r"`vector_loads` \(128-bit.*recommended now by the critic", features)
    assert features.index("`vector_loads`") < features.index("`persistent_kernel`")   # recommended first
    assert re.search(r"`cache_hints`.*expected to close [+-][0-9]+% of the headroom to speed of light \(posterior mean, "
                     r"failures counted\); tried 1, passed 1",
                     features)
    assert "`warp_shuffle`" not in features          # assigned to the parent r1c0 in round 1: not offered to it again
    assert "`persistent_kernel`" in features and "untried" in features               # more than a top 10
    # every feature that can help the parent (feature_db/offers.py), more than a top 10; a one-kernel softmax
    # is offered no dependent launch, graph or fusion
    assert len(re.findall(r"^- `", features, re.M)) > 10
    for fid in ("programmatic_dependent_launch", "cuda_graphs", "kernel_fusion", "stream_ordered_alloc"):
        assert f"`{fid}`" not in features
    assert "score" not in features                                                   # no random draw shown
    assert "Recommended change: one warp per row" in text and "Speed of light" in text


def test_the_parent_line_carries_the_bounds_sentence():
    """Wherever a % of speed of light is shown, the one sentence that says which unit the bound assumes."""
    from cuda_llm.agents.context import DiagnosisBrief, ParentKernel
    from cuda_llm.results import DeviceInfo, SassSummary
    from cuda_llm.tasks import load_task
    from cuda_llm.tools.bounds.speed_of_light import bound

    sgemm = load_task("sgemm").task
    h100 = DeviceInfo(name="H100", arch="sm_90", compute_capability=(9, 0), sm_count=132, peak_bandwidth_gbs=3000.0,
                      peak_fp32_gflops=60000.0, peak_tf32_tc_gflops=400000.0)
    b = bound(sgemm, sgemm.benchmark, h100, sass=SassSummary(tensor={"tf32": 8}))
    head = ParentKernel(candidate="r2c1", source="", median_ms=2.38, sol_ms=b.ms, pct_of_sol=b.pct(2.38),
                        sol_basis=b.basis).render_head()
    line = next(x for x in head.splitlines() if x.startswith("Speed of light"))
    assert f"{fmt_ms(b.ms)} ms; this kernel runs at {b.pct(2.38):.1f}% of it. Speed of light" in line
    assert "tf32 tensor-core peak 400 TFLOP/s" in line and "measured against the tensor-core bound" in line
    assert line.count("%") == 1                                          # one % of one bound
    diag = DiagnosisBrief(bottleneck="compute-bound", evidence=["roofline: ...", b.basis])
    evidence = ParentKernel(candidate="r2c1", source="", sol_ms=b.ms, sol_basis=b.basis, diagnosis=diag).render_evidence()
    assert b.basis not in evidence and "roofline: ..." in evidence       # the sentence once per prompt


def test_the_parent_source_and_the_build_line_are_shown_once_and_the_harness_facts_are_said(run):
    """The parent's source whole and once (no second copy as an inspiration, no cut); the nvcc line once;
    on which stream solve() runs and what runs before it; whether scratch memory may persist across calls."""
    out, model = run
    text = coder_call(model, "r2c0")
    parent = softmax_source("v5").strip()
    assert text.count(parent) == 1 and "cut" not in text.split("Source of `r1c0`", 1)[1].split("```", 2)[1]
    assert len(re.findall(r"nvcc -gencode=\S+ -O3 -shared", text)) == 1
    assert "legacy default stream (stream 0)" in text and "synchronizes the whole device" in text
    assert "programmatic dependent launch can only overlap kernels that solve() itself launches" in text
    assert "persists between calls" in text and "cudaMalloc/cudaFree inside every call is timed" in text


def test_the_critic_reads_the_roofline_with_its_sentence_on_a_line_of_its_own():
    from cuda_llm.graph.evidence import roofline_text

    text = roofline_text({"median_ms": 2.38, "pct_of_sol": 14.4, "compute_unit": "tf32-tensor",
                          "basis": "Speed of light 0.3435 ms: ...; the kernel's SASS has tf32 tensor-core instructions."})
    head, basis = text.split("\n")
    assert "pct_of_sol = 14.4" in head and "basis" not in head and basis.startswith("Speed of light 0.3435 ms")
