"""The search in whole graph runs (scripted LLM, real nvcc for the coders' sources, measurements set by
the test): parents and inspirations from the program database, refinement turns, the tune stage, and
the stop rules that know speed of light."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fake_gpu_evaluator import FakeGpuEvaluator, softmax_source
from parametric_timing_evaluator import ParametricTimingEvaluator, params_of
from scripted_chat_model import ScriptedChatModel
from test_graph_loop import TIMINGS, candidate_of, scripted, trace

from cuda_llm.graph.program_db import ProgramDB
from cuda_llm.graph.run import RunOptions, start_run
from cuda_llm.graph.state import Limits

pytestmark = pytest.mark.slow     # whole graph runs / every suite build: `pytest -m "not slow"` leaves them out


@pytest.fixture(autouse=True)
def _shared_compile_cache(tmp_path_factory, monkeypatch):
    from test_graph_loop import shared_cache

    monkeypatch.setenv("CUDA_LLM_CACHE", str(shared_cache(tmp_path_factory)))


def shfl_source(name: str) -> str:
    """A softmax candidate that also uses a warp shuffle (a feature niche of its own)."""
    return softmax_source(name).replace(
        "for (int c = 0; c < cols; ++c) s += expf(xr[c] - m);",
        "for (int c = 0; c < cols; ++c) s += expf(xr[c] - m);\n    s += __shfl_xor_sync(0xffffffffu, 0.0f, 16);")


def _run(tmp_path: Path, model: Any, ev: Any, **limits: Any):
    opts = RunOptions(limits=Limits(**limits), runs_dir=tmp_path / "runs", learn=False)
    return start_run("softmax", None, opts, evaluator=ev, model_factory=lambda role: model, handle_signals=False)


def _coder_calls(model: ScriptedChatModel) -> dict[str, Any]:
    return {candidate_of(c.messages): c for c in model.calls_for("coder")}


def test_a_stepping_stone_is_a_parent_and_another_niche_inspires(tmp_path):
    # round 1: v3 (3.0 ms, plain) becomes the best; v305 (3.05 ms, 1.7% slower) uses warp_shuffle
    kernels = {"r1c0": softmax_source("v3"), "r1c1": shfl_source("v305"), "*": softmax_source("v6")}
    model = scripted(kernels, n=2)
    ev = FakeGpuEvaluator({**TIMINGS, "v305": 3.05})
    out = _run(tmp_path, model, ev, n_candidates=2, max_rounds=2, plateau_rounds=5)
    assert out.finished and out.best["id"] == "r1c0"
    parents = [e for e in trace(out) if e["event"] == "decision" and e.get("kind") == "parents"]
    r2 = parents[1]["candidates"]
    assert r2["r2c0"]["parent"] == "r1c0" and r2["r2c0"]["kind"] == "best"
    assert r2["r2c1"]["parent"] == "r1c1" and r2["r2c1"]["kind"] == "stepping stone"
    assert "warp_shuffle" in r2["r2c1"]["why"]
    assert r2["r2c0"]["inspirations"] == ["r1c1"]               # another niche that scored well
    calls = _coder_calls(model)
    stone_prompt = calls["r2c1"].user
    assert "Parent kernel `r1c1` (the kernel to improve on: a stepping stone, not the best" in stone_prompt
    parent_part, _, inspiration_part = stone_prompt.partition("Inspiration `")
    assert "variant: v305" in parent_part and "variant: v3\n" not in parent_part
    assert "variant: v3\n" in inspiration_part                  # the best is another niche: it inspires
    best_prompt = calls["r2c0"].user
    assert "Parent kernel `r1c0` (the kernel to improve on: the current best)" in best_prompt
    assert "Inspiration `r1c1` (a different approach that scored well" in best_prompt and "variant: v305" in best_prompt
    cands = {e["candidate"]: e for e in trace(out) if e["event"] == "candidate"}
    assert cands["r2c1"]["parent"] == "r1c1"
    evals = {e["candidate"]: e for e in trace(out) if e["event"] == "evaluation" and not e.get("purpose")}
    assert evals["r2c1"]["speedup_over_parent"] == pytest.approx(3.05 * 1.008 / (6.0 * 1.008), rel=1e-3)
    # every passing candidate and the naive kernel are in the archive, with their niches
    db = ProgramDB(out.root / "programs.sqlite")
    progs = {p.id: p for p in db.all()}
    assert {"baseline", "r1c0", "r1c1", "r2c0", "r2c1"} <= set(progs)
    # the stone's niche differs from the best's by the warp shuffle (both share what the detectors see in any softmax)
    assert "warp_shuffle" in set(progs["r1c1"].detected) - set(progs["r1c0"].detected)
    assert progs["r1c1"].niche != progs["r1c0"].niche


def test_a_coder_refines_its_own_candidate_in_the_same_conversation(tmp_path):
    kernels = {"r1c0": softmax_source("v5"), "r1c0t1": softmax_source("v2"),
               "r1c1": softmax_source("v6", broken=True), "*": softmax_source("v6")}
    model = scripted(kernels, n=2)
    ev = FakeGpuEvaluator(TIMINGS)
    out = _run(tmp_path, model, ev, n_candidates=2, max_rounds=1, refine_turns=1, max_repairs=0,
               compile_fix_turns=0)   # r1c1 stays broken: no fix turns, so the calls are 2 first answers + 1 turn
    assert out.finished and out.best["id"] == "r1c0t1"          # the refined kernel won
    calls = _coder_calls(model)
    turn = calls["r1c0t1"]
    assert turn.user.startswith("Your candidate `r1c0` compiled, passed every test")
    assert "Write candidate `r1c0t1` (refinement turn 1 of 1)" in turn.user
    assert "5.04" in turn.user                                   # its own median (5 ms x 1.008)
    assert "Profile:" in turn.user and "not available" in turn.user
    # the same conversation: the first prompt and the coder's first answer come before the feedback
    texts = [m.content for m in turn.messages]
    assert "Write candidate `r1c0`" in texts[1] and "variant: v5" in texts[2] and len(texts) == 4
    assert "r1c1t1" not in calls                                 # a failed candidate gets no refinement turn
    cands = {e["candidate"]: e for e in trace(out) if e["event"] == "candidate"}
    assert cands["r1c0t1"]["parent"] == "r1c0" and cands["r1c0t1"]["turn"] == 1
    measured = [c["candidate"] for c in ev.calls if c["kind"] == "evaluate"]
    assert measured.count("r1c0") == 1, "the refinement's measurement must be reused by the evaluate stage"
    assert out.tokens["coder"]["calls"] == 3


def test_refinement_stays_within_the_token_budget(tmp_path):
    model = scripted({"*": softmax_source("v5")}, n=1)
    out = _run(tmp_path, model, FakeGpuEvaluator(TIMINGS), n_candidates=1, max_rounds=1, refine_turns=3,
               token_budget=5000)
    skipped = [e for e in trace(out) if e["event"] == "decision" and e.get("kind") == "refine_skipped"]
    assert skipped and out.tokens["coder"]["calls"] < 4


TUNABLE = """// cuda-llm: tune THREADS 32 64 128 256 512
#define THREADS 128
#include <cuda_runtime.h>
#include <math.h>
__global__ void softmax_rows(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + (size_t)row * cols;
    float m = -INFINITY, s = 0.0f;
    for (int c = 0; c < cols; ++c) m = fmaxf(m, xr[c]);
    for (int c = 0; c < cols; ++c) s += expf(xr[c] - m);
    for (int c = 0; c < cols; ++c) y[(size_t)row * cols + c] = expf(xr[c] - m) / s;
}
extern "C" void solve(const float* x, float* y, int rows, int cols) {
    softmax_rows<<<(rows + THREADS - 1) / THREADS, THREADS>>>(x, y, rows, cols);
}
"""


def test_the_tune_stage_makes_a_candidate_its_best_point(tmp_path):
    # 2 ms at THREADS=64, slower away from it; THREADS=512 "does not compile" (a static_assert would)
    ev = ParametricTimingEvaluator(lambda p: 2.0 + abs(p["THREADS"] - 64) / 64, valid=lambda p: p["THREADS"] != 512)
    model = scripted({"*": TUNABLE}, n=1)
    out = _run(tmp_path, model, ev, n_candidates=1, max_rounds=1, tune_evals=10)
    assert out.finished and out.best["id"] == "r1c0"
    best_src = (out.root / "best.cu").read_text()
    assert params_of(best_src) == {"THREADS": 64}
    assert (out.root / "candidates" / "r1c0.tuned.cu").read_text() == best_src
    assert params_of((out.root / "candidates" / "r1c0.cu").read_text()) == {"THREADS": 128}   # the coder's own
    assert out.final["ms"] == pytest.approx(2.0)
    table = json.loads((out.root / "tuning" / "r1c0.json").read_text())
    assert table["evaluations"] == 4 and table["invalid"] == 1 and table["stop_reason"] == "space"
    tune = next(e for e in trace(out) if e["event"] == "tune")
    assert tune["best"] == {"THREADS": "64"} and tune["invalid_points"] == [{"THREADS": "512"}]
    res = json.loads((out.root / "candidates" / "r1c0.json").read_text())
    assert res["timing"]["median_ms"] == pytest.approx(2.0)
    untuned = json.loads((out.root / "candidates" / "r1c0-untuned.json").read_text())
    assert untuned["timing"]["median_ms"] == pytest.approx(3.0)
    # measured once each: the baseline, the written point (its evaluation reused by the tuner) and three
    # other points; then a re-run of the tuned best, whose win over the baseline is decisive (graph/selection.py:
    # no head-to-head re-times the baseline), and the final check of the best and of the baseline
    assert len(set(ev.measured)) == 5 and len(ev.measured) == 8
    assert ProgramDB(out.root / "programs.sqlite").get("r1c0").tuned == "THREADS=64"


def test_only_candidates_within_1_3x_of_the_best_are_tuned():
    from cuda_llm.graph.tune_stage import reference_ms, worth_tuning

    assert reference_ms(2.0, [2.5, 1.8]) == 1.8 and reference_ms(None, [3.0]) == 3.0 and reference_ms(None, []) is None
    assert worth_tuning(2.6, 2.0) and not worth_tuning(2.61, 2.0)          # 1.3x is the edge
    assert not worth_tuning(20.0, 2.0)                                      # a 10x slower design: no sweep
    assert worth_tuning(5.0, None) and worth_tuning(None, 2.0)              # nothing to compare with: tuned


def test_a_candidate_far_slower_than_the_best_is_not_tuned(tmp_path):
    # the naive kernel (the best so far) takes 1 ms; the candidate as written 3 ms: 3x, no point is measured
    ev = ParametricTimingEvaluator(lambda p: 2.0 + abs(p["THREADS"] - 64) / 64, baseline_ms=1.0)
    model = scripted({"*": TUNABLE}, n=1)
    out = _run(tmp_path, model, ev, n_candidates=1, max_rounds=1, tune_evals=10)
    assert out.finished and not (out.root / "tuning" / "r1c0.json").exists()
    skipped = next(e for e in trace(out) if e["event"] == "tune")
    assert skipped["skipped"] == "not tuned: 3.00x the best 1.000 ms (tuned only within 1.3x)"
    assert len(set(ev.measured)) == 2          # the baseline and the candidate as written: no tuning point


def test_the_run_stops_at_speed_of_light(tmp_path):
    # speed of light is 1.0 ms: the naive kernel is at 10%, round 1's 1.04 ms kernel at 96%
    ev = ParametricTimingEvaluator(lambda p: 1.04 if p["THREADS"] == 64 else 3.0, sol_ms=1.0)
    model = scripted({"*": TUNABLE.replace("#define THREADS 128", "#define THREADS 64")}, n=1)
    out = _run(tmp_path, model, ev, n_candidates=1, max_rounds=5)
    assert out.finished and out.stop_reason == "speed_of_light" and out.rounds == 1
    assert out.best["pct_sol"] == pytest.approx(100 / 1.04)


def test_a_naive_kernel_already_at_speed_of_light_is_not_searched(tmp_path):
    ev = ParametricTimingEvaluator(lambda p: 1.0, baseline_ms=1.02, sol_ms=1.0)
    model = ScriptedChatModel(replies=[])
    out = _run(tmp_path, model, ev, n_candidates=1, max_rounds=5)
    assert out.finished and out.stop_reason == "speed_of_light" and out.rounds == 0
    assert model.calls == [] and out.final["status"] == "ok"


def test_a_round_where_everything_failed_does_not_count_toward_the_plateau(tmp_path):
    kernels = {"r1c0": softmax_source("v5"), "r2c0": softmax_source("v6", broken=True),
               "r3c0": softmax_source("v6", broken=True), "*": softmax_source("v6")}
    model = scripted(kernels, n=1)
    out = _run(tmp_path, model, FakeGpuEvaluator(TIMINGS), n_candidates=1, max_rounds=4, plateau_rounds=2,
               max_repairs=0, sol_target=None, max_failed_rounds=3)
    ends = {e["round"]: e for e in trace(out) if e["event"] == "round_end"}
    assert [ends[r]["plateau_count"] for r in (1, 2, 3, 4)] == [0, 0, 0, 1]
    assert out.stop_reason == "max_rounds"
    out2 = _run(tmp_path / "b", scripted({"r1c0": softmax_source("v5"), "*": softmax_source("v6", broken=True)}, n=1),
                FakeGpuEvaluator(TIMINGS), n_candidates=1, max_rounds=8, plateau_rounds=2, max_repairs=0,
                max_failed_rounds=2)
    assert out2.stop_reason == "failing" and out2.rounds == 3


def test_tuning_that_finds_nothing_better_keeps_the_candidate_as_written(tmp_path):
    # every point takes the same time (the fake evaluator times by the variant marker): nothing to gain;
    # this evaluator has no compile of its own, so the points are compiled by nvcc in parallel
    model = scripted({"*": "// variant: v5\n" + TUNABLE}, n=1)
    ev = FakeGpuEvaluator(TIMINGS)
    out = _run(tmp_path, model, ev, n_candidates=1, max_rounds=1, tune_evals=3)
    table = json.loads((out.root / "tuning" / "r1c0.json").read_text())
    assert table["evaluations"] == 3 and table["stop_reason"] == "evals" and table["invalid"] == 0
    assert out.best["id"] == "r1c0" and params_of((out.root / "best.cu").read_text()) == {"THREADS": 128}
    assert not (out.root / "candidates" / "r1c0.tuned.cu").exists()
    cands = json.loads(next((out.root / "rounds" / "r1").glob("candidates.json")).read_text())
    assert cands[0]["tuned"] == "as written: THREADS=128"
