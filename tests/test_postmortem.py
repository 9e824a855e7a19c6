"""Post-mortems: a regression (1.5x slower than its parent or more) or a failure at the benchmark shape only
is explained in one short paragraph built from its diagnosis, stored with the candidate, and shown next to
its history line in later prompts. Nvcc is real; timings and the profile are a test double's (fake)."""

from __future__ import annotations

import json
from pathlib import Path

from fake_gpu_evaluator import FakeGpuEvaluator, fake_profile, softmax_source
from test_graph_loop import _shared_compile_cache, scripted, trace  # noqa: F401 - its compile cache, autouse

from cuda_llm.agents.context import HistoryItem
from cuda_llm.graph import postmortem as pm
from cuda_llm.graph.run import RunOptions, start_run
from cuda_llm.graph.state import Candidate, Limits
from cuda_llm.results import CaseResult, EvalResult, Status, ValidationResult

RECORDED = Path(__file__).parent / "fixtures" / "postmortem" / "sgemm_naive_diagnosis.json"


def test_the_cause_of_a_regression_from_a_recorded_diagnosis():
    diag = json.loads(RECORDED.read_text())
    text = pm.cause_text(pm.SLOWER, parent="r1c0", ratio=5.1, diagnosis=diag)
    assert text.startswith("5.1x slower than its parent r1c0; latency-bound: warps wait on global memory")
    assert "estimated time lost: 68% to memory-latency, 1% to dependencies" in text
    assert "warp stalls: long_scoreboard 98%" in text
    assert len(text) <= pm.MAX_CAUSE_CHARS and text.endswith(".")
    assert pm.cause_text(pm.SLOWER, parent="r1c0", ratio=2.0, diagnosis=diag, limit=80).endswith("...")
    # no profile: what is known is said, nothing invented
    assert pm.cause_text(pm.SLOWER, parent="baseline", ratio=1.6, diagnosis={"bottleneck": "unknown"}) == \
        "1.6x slower than its parent baseline."
    fail = pm.cause_text(pm.BENCHMARK_FAILURE, parent="r1c0", failure="wrong_answer at the benchmark shape on call 3")
    assert fail == ("passed the correctness cases, then failed at the benchmark shape: wrong_answer at the benchmark "
                    "shape on call 3.")


def test_which_candidates_get_a_post_mortem():
    def cand(status: str, ms: float | None, parent_ms: float | None) -> Candidate:
        return Candidate(id="r2c0", round=2, slot=0, parent="r1c0", parent_ms=parent_ms, status=status, ms=ms)

    assert pm.outcome_of(cand("ok", 2.2, 2.0), None) == pm.SLOWER            # 1.1x: the edge
    assert pm.outcome_of(cand("ok", 2.1, 2.0), None) is None
    assert pm.outcome_of(cand("ok", 9.0, None), None) is None                  # no parent time to compare with
    cases = [CaseResult(sizes={"n": 1}, passed=True)]
    at_bench = EvalResult(task="t", candidate="r2c0", source_hash="h", status=Status.wrong_answer,
                          validation=ValidationResult(passed=True, cases=cases))
    early = at_bench.model_copy(update={"validation": ValidationResult(passed=False, cases=cases)})
    assert pm.outcome_of(cand("wrong_answer", None, 2.0), at_bench) == pm.BENCHMARK_FAILURE
    assert pm.outcome_of(cand("wrong_answer", None, 2.0), early) == pm.FAILED  # wrong everywhere: a failure
    assert pm.outcome_of(cand("compile_error", None, 2.0), None) == pm.FAILED
    assert pm.outcome_of(cand("no_code", None, 2.0), None) is None            # nothing was written


def test_profiling_only_from_one_and_a_half_and_the_plan_and_the_changes_are_told():
    from cuda_llm.results import CompileResult, KernelResources, SassSummary
    from cuda_llm.tools.compiler.build_summary import BuildView, build_diff

    built = EvalResult(task="t", candidate="r2c0", source_hash="h", status=Status.ok,
                       compile=CompileResult(ok=True, arch="sm_90a", source_hash="h", so_path="/x.so"))
    assert not pm.worth_profiling(pm.SLOWER, built, 1.3) and pm.worth_profiling(pm.SLOWER, built, 1.6)
    answer = ("Plan: a persistent scan with a TMA ring: each CTA takes tiles by ticket. Then look-back. More.\n"
              "```cuda\nint x;\n```")
    assert pm.plan_sentence(answer) == "a persistent scan with a TMA ring: each CTA takes tiles by ticket. Then look-back."
    parent = BuildView(kernels=[KernelResources(name="scan(float*)", registers=32, shared_bytes=4096)],
                       sass=SassSummary(ops={"FADD": 40, "BAR.SYNC": 4, "LDG.E": 8}),
                       source="scan<<<blocks, 256>>>(x);")
    child = BuildView(kernels=[KernelResources(name="scan_ring(float*)", registers=96, shared_bytes=65536)],
                      sass=SassSummary(ops={"FADD": 40, "SYNCS.ARRIVE.TRANS64": 12, "UTMALDG.1D": 2, "LDG.E": 2}),
                      source="scan_ring<<<sms, 384>>>(x);")
    diff = build_diff(parent, child)
    assert diff[0] == "kernels: 1 -> 1; new: scan_ring; gone: scan"
    assert "launches: scan<<<blocks, 256>>> -> scan_ring<<<sms, 384>>>" in diff
    assert "registers per thread (max): 32 -> 96" in diff and "static shared memory (max): 4.0 KiB -> 64.0 KiB" in diff
    assert "new instructions: UTMALDG 2, SYNCS 12" in diff and "instructions gone: BAR 4" in diff
    text = pm.postmortem_text(plan="a TMA ring", changes=diff, cause="1.3x slower than its parent r1c0", parent="r1c0")
    assert text.startswith('the plan: "a TMA ring" | against r1c0: kernels: 1 -> 1') and "cause: 1.3x slower" in text


def test_history_line_carries_the_cause():
    item = HistoryItem(candidate="r1c1", round=1, features=["persistent_kernel"], status="ok", median_ms=6.932,
                       speedup=0.2, parent="baseline", cause="5.1x slower than its parent baseline; latency-bound.")
    assert item.render() == ("- r1 r1c1 from baseline [persistent_kernel]: ok 6.9320 ms (0.20x)\n"
                             "  post-mortem: 5.1x slower than its parent baseline; latency-bound.")


def test_a_regression_is_profiled_stored_and_explained_in_the_next_prompt(tmp_path):
    # r1c1 takes 16 ms, 1.6x its parent (the 10 ms naive kernel); the round's fastest is r1c0 (5 ms)
    kernels = [softmax_source(v) for v in ("v5", "v16", "v2", "v3")]
    model = scripted(kernels, n=2)
    ev = FakeGpuEvaluator({"baseline": 10.0, "v5": 5.0, "v16": 16.0, "v2": 2.0, "v3": 3.0},
                          profiles={"v16": fake_profile(), "v5": fake_profile(dram_pct=58)})
    opts = RunOptions(limits=Limits(n_candidates=2, max_rounds=2, plateau_rounds=5, free_slots=0),
                      runs_dir=tmp_path / "runs", stats_path=tmp_path / "stats.sqlite")   # r1c1 planned, with features
    out = start_run("softmax", None, opts, evaluator=ev, model_factory=lambda role: model, handle_signals=False)
    assert out.finished
    got = pm.load_all(out.root)
    assert [p.candidate for p in got] == ["r1c1"]
    p = got[0]
    assert p.parent == "baseline" and p.outcome == pm.SLOWER and p.profiled and p.features
    assert abs(p.ratio - 16.0 / 10.0) < 0.02 and p.bottleneck == "occupancy-bound"
    assert p.cause.startswith("1.6x slower than its parent baseline; occupancy-bound: the grid does not fill the GPU")
    assert (out.root / "profiles" / "r1c1.json").exists()                     # profiled like the fastest
    events = [e for e in trace(out) if e["event"] == "postmortem"]
    assert [e["candidate"] for e in events] == ["r1c1"]
    # round 2's coders see the cause under r1c1's history line
    coder = next(c.text for c in model.calls_for("coder") if "Write candidate `r2c0`" in c.text)
    line = next(x for x in coder.splitlines() if x.startswith("- r1 r1c1"))
    after = coder.split(line, 1)[1].lstrip("\n")
    assert after.startswith("  post-mortem: "), after[:200]
    assert "cause: 1.6x slower than its parent baseline; occupancy-bound" in after.splitlines()[0], after[:400]
