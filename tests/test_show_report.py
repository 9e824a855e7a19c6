"""`cuda-llm show` and `cuda-llm report --html/--json` on a real run directory: a graph run on the CPU with
the scripted chat model and the GPU double (real nvcc, invented timings). Its figures are scripted."""

from __future__ import annotations

import json
import re

import pytest

from cuda_llm.figures import fmt_ms

from fake_gpu_evaluator import FakeGpuEvaluator, coder_answer, critic_answer, plan_answer, softmax_source
from scripted_chat_model import ScriptedChatModel, detect_role

from cuda_llm.cli import main
from cuda_llm.graph.run import RunOptions, start_run
from cuda_llm.graph.state import Limits

pytestmark = pytest.mark.slow     # whole graph runs / every suite build: `pytest -m "not slow"` leaves them out

KERNELS = {"r1c0": "v5", "r1c1": "vbad", "r2c0": "v2", "r2c1": "v6"}
REPAIRED = "v6"   # a repair of r1c1 (its feature set is new to the run, so it is repaired though r1c0 passed)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    import os
    import re

    tmp = tmp_path_factory.mktemp("show")
    old = os.environ.get("CUDA_LLM_CACHE")
    os.environ["CUDA_LLM_CACHE"] = str(tmp / "cache")

    def respond(messages):
        role = detect_role(messages)
        if role == "planner":
            return plan_answer(2)
        if role == "critic":
            return critic_answer()
        cid = re.search(r"(?:Write candidate|Candidate) `([^`]+)`", "\n".join(str(m.content) for m in messages)).group(1)
        return coder_answer(softmax_source(KERNELS.get(cid, REPAIRED)))

    model = ScriptedChatModel(respond=respond)
    ev = FakeGpuEvaluator({"baseline": 10.0, "v5": 5.0, "vbad": "wrong_answer", "v2": 2.0, "v6": 6.0})
    out = start_run("softmax", None, RunOptions(limits=Limits(n_candidates=2, max_rounds=2, plateau_rounds=5),
                                                runs_dir=tmp / "runs", learn=False),
                    evaluator=ev, model_factory=lambda role: model, handle_signals=False)
    yield out
    if old is None:
        os.environ.pop("CUDA_LLM_CACHE", None)
    else:
        os.environ["CUDA_LLM_CACHE"] = old


def show(out, cid: str, capsys, *extra: str) -> tuple[int, str, str]:
    rc = main(["show", out.run_id, cid, "--runs-dir", str(out.root.parent), *extra])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_prompt_and_answer_files_are_named_by_role_and_candidate(finished):
    prompts = sorted(p.name for p in (finished.root / "prompts").glob("*.md"))
    answers = sorted(p.name for p in (finished.root / "answers").glob("*.md"))
    assert {"planner-r1.md", "planner-r2.md", "coder-r1c0.md", "coder-r2c1.md", "critic-r1c0.md"} <= set(prompts)
    assert prompts == answers


def test_show_a_failed_candidate_whole_with_held_out_cases_redacted(finished, capsys):
    rc, text, _ = show(finished, "r1c1", capsys)
    assert rc == 0
    for section in ("== prompt (coder-r1c1)", "== answer (coder-r1c1)", "== source", "== diff against baseline",
                    "== per-case results (held-out shapes redacted)", "== what failed"):
        assert section in text, section
    assert "variant: vbad" in text and "+// variant: vbad" in text
    assert "held-out shapes: a held-out shape" in text
    # the held-out failure's values and sizes, as whole numbers (a compile time of 40.758 ms is no leak)
    for secret in (r"0\.75", r"0\.25", r"\[0, 3\]", r"rows=5", r"rows=301"):
        assert not re.search(rf"(?<![\d.]){secret}(?![\d])", text), secret


def test_show_a_passing_candidate_has_timing_and_the_critic(finished, capsys):
    rc, text, _ = show(finished, "r2c0", capsys)
    assert rc == 0 and "== timing" in text and re.search(r"\d+ samples, [\d.]+ to [\d.]+ ms", text)
    assert "== critic" in text and "memory-bound" in text
    assert "diff against r1c0" in text


def test_show_json_and_unknown_candidate(finished, capsys):
    rc, text, _ = show(finished, "r1c0", capsys, "--json")
    data = json.loads(text)
    assert rc == 0 and data["status"] == "ok" and data["exchanges"][0]["name"] == "coder-r1c0"
    rc, _, err = show(finished, "r9c9", capsys)
    assert rc == 2 and "r9c9" in err and "r1c0" in err and "baseline" in err


def test_report_json_for_scripts(finished, capsys):
    rc = main(["report", finished.run_id, "--runs-dir", str(finished.root.parent), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["scripted"] is True and data["state"].startswith("finished")
    assert data["summary"]["best_candidate"] == "r2c0"
    assert [c["id"] for c in data["candidates"]] == ["baseline", "r1c0", "r1c1", "r1c1f1", "r1c1f2",
                                                    "r2c0", "r2c1"]   # r1c1 repaired twice (its features are new)
    assert "source" not in data["candidates"][1] and data["candidates"][1]["exchanges"] == ["coder-r1c0", "critic-r1c0"]


def test_report_html_is_self_contained(finished, capsys):
    rc = main(["report", finished.run_id, "--runs-dir", str(finished.root.parent), "--html"])
    out = capsys.readouterr().out
    path = finished.root / "report.html"
    assert rc == 0 and f"html:        {path}" in out
    page = path.read_text()
    import re

    tags = re.findall(r"<(?:script|link|img)\b([^>]*)>", page)
    assert tags and not [t for t in tags if "src=" in t or "href=" in t]     # nothing fetched from the network
    assert "plotly.js (basic - minified) v" in page and 'id="latency-plot"' in page
    assert path.stat().st_size < 2_000_000                                     # the basic bundle, not all of plotly.js
    assert "wrong_answer (not timed)" in page                                 # r1c1 has no time and is still plotted
    assert page.count('<li data-candidate=') == 7 and 'id="scripted"' in page
    assert "variant: v2" in page and "## human" in page                       # code and prompts on click


def test_report_on_a_running_run_does_not_suggest_resume(finished, capsys):
    from cuda_llm.graph.run import _RunLock

    with _RunLock(finished.root):
        rc = main(["report", finished.run_id, "--runs-dir", str(finished.root.parent)])
    out = capsys.readouterr().out
    assert rc == 0 and "state:       running" in out
    assert "cuda-llm resume" not in out and "cuda-llm trace" in out


def test_the_library_yardstick_reaches_the_report(tmp_path):
    """The setup's library median (tasks with library.cu) is kept once it passed, and the report compares with it."""
    from fake_gpu_evaluator import FakeGpuEvaluator

    from cuda_llm.measure.evaluator import CachedEvaluator
    from cuda_llm.report.markdown import render_report
    from cuda_llm.report.summary import build_summary
    from cuda_llm.runs.rundir import RunDir
    from cuda_llm.tasks import load_task

    class WithLibrary(FakeGpuEvaluator):
        def library(self, loaded):
            return self._measure(loaded, "// variant: lib\n" + loaded.task.library_path.read_text(), "library",
                                 "library", {})

    loaded = load_task("gemv")
    inner = WithLibrary({"lib": 0.5}, compile=False)
    cached = CachedEvaluator(inner, tmp_path / "cache")
    assert cached.library(loaded).median_ms == pytest.approx(0.5, rel=0.02)
    assert cached.library(loaded).median_ms == pytest.approx(0.5, rel=0.02) and len(inner.calls) == 1   # kept
    assert CachedEvaluator(FakeGpuEvaluator({}), tmp_path / "c2").library(loaded) is None    # no such measurement
    rd = RunDir.create(tmp_path / "runs", "gemv")
    summary = build_summary(rd, {"task": "gemv", "baseline": {"ms": 2.0, "library_ms": 0.5}, "best": {"id": "r1c0", "ms": 1.0}})
    assert summary.library_ms == 0.5
    assert "Library baseline**: 0.5000 ms (best is 0.50x the library's speed)" in render_report(summary)


def test_the_report_shows_the_best_kernels_one_bound_and_its_sentence():
    """A tensor-core best over an FFMA baseline: the headline, the candidate's timing and the plot show the
    best's tensor-core bound with its sentence, never the baseline's fp32 line (scripted figures)."""
    from cuda_llm.report.candidate_view import CandidateView
    from cuda_llm.report.html import ReportData, _candidate_body, bound_shown, latency_figure, render_html
    from cuda_llm.report.markdown import RunSummary, render_report
    from cuda_llm.results import DeviceInfo, SassSummary
    from cuda_llm.tasks import load_task
    from cuda_llm.tools.bounds.speed_of_light import bound

    sgemm = load_task("sgemm").task
    h100 = DeviceInfo(name="H100", arch="sm_90", compute_capability=(9, 0), sm_count=132, peak_bandwidth_gbs=3000.0,
                      peak_fp32_gflops=60000.0, peak_tf32_tc_gflops=400000.0)
    ffma = bound(sgemm, sgemm.benchmark, h100, sass=SassSummary(opcodes={"FFMA": 64}))
    tc = bound(sgemm, sgemm.benchmark, h100, sass=SassSummary(tensor={"tf32": 8}))
    summary = RunSummary(task="sgemm", run_id="r", baseline_ms=80.0, best_candidate="r2c0", best_ms=2.38,
                         best_pct_of_sol=tc.pct(2.38), best_sol_ms=tc.ms, best_sol_basis=tc.basis)
    views = [CandidateView(id="baseline", status="ok", median_ms=80.0,
                           timing={"median_ms": 80.0, "sol_ms": ffma.ms, "pct_of_sol": ffma.pct(80.0), "sol_basis": ffma.basis}),
             CandidateView(id="r2c0", round=2, status="ok", median_ms=2.38,
                           timing={"median_ms": 2.38, "sol_ms": tc.ms, "pct_of_sol": tc.pct(2.38), "sol_basis": tc.basis})]
    sol_ms, basis = bound_shown(views, summary)
    assert sol_ms == pytest.approx(tc.ms) and basis == tc.basis          # the best's bound, not the baseline's
    assert bound_shown(views, summary.model_copy(update={"best_candidate": None}))[0] == pytest.approx(ffma.ms)
    data = ReportData(summary=summary, sol_ms=sol_ms, sol_basis=basis, candidates=views)
    md = render_report(summary)
    assert f"{tc.pct(2.38):.1f}% of the bound" in md and "tf32 tensor-core peak 400 TFLOP/s" in md
    assert "measured against the tensor-core bound" in md
    fig = latency_figure(data)
    sol_line = next(t for t in fig.data if t.name.startswith("speed of light"))
    assert sol_line.y[0] == pytest.approx(tc.ms) and fmt_ms(tc.ms) in fig.layout.title.text   # the why: under the plot
    assert "tf32 tensor-core peak" in _candidate_body(views[1]) and "fp32 FMA peak" in _candidate_body(views[0])
    assert "tf32 tensor-core peak" in render_html(data)



def test_an_unfinished_run_shows_its_best_kernels_bound(tmp_path):
    """Before the final check, the headline's speed of light is the best candidate's own evaluation's bound
    (scripted figures), not '-'."""
    from cuda_llm.report.markdown import render_report
    from cuda_llm.report.summary import build_summary
    from cuda_llm.results import EvalResult, Status, TimingResult
    from cuda_llm.runs.rundir import RunDir

    rd = RunDir.create(tmp_path / "runs", "hgemm")
    timing = TimingResult(sizes={"M": 4096}, median_ms=0.2194, min_ms=0.21, mean_ms=0.22, iqr_ms=0.001, rse=0.01,
                          samples_ms=[0.2194], repetitions=1, stop_reason="rse", sol_ms=0.1477,
                          pct_of_sol=67.3, sol_basis="Speed of light 0.1477 ms: the fp16 tensor-core peak.")
    rd.write_result("r1c1", EvalResult(task="hgemm", candidate="r1c1", source_hash="h", status=Status.ok, timing=timing))
    values = {"task": "hgemm", "baseline": {"ms": 30.0}, "best": {"id": "r1c1", "ms": 0.2194}}
    md = render_report(build_summary(rd, values))
    assert "67.3% of the bound (0.1477 ms). Speed of light 0.1477 ms: the fp16 tensor-core peak." in md
    assert build_summary(rd, {**values, "best": {"id": "baseline", "ms": 30.0}}).best_pct_of_sol is None
