"""Tuning on a GPU: three parametric kernels written for the test (a tiled sgemm with BLOCK_M/N/K, a
reduction with BLOCK and ITEMS_PER_THREAD, a transpose with TILE, PAD and BLOCK_ROWS) are searched
with the real harness, through tools.tune.tuning.search and through the graph's tune stage (a scripted coder
answers the kernel; evaluation, tuning and the final check are real)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu_long

HERE = Path(__file__).resolve().parent
KERNELS = {"sgemm": "sgemm_tiled.cu", "reduce_sum": "reduce_items.cu", "transpose": "transpose_tiled.cu"}


def _source(task: str) -> str:
    return (HERE / "fixtures" / "tune" / KERNELS[task]).read_text()


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path_factory.getbasetemp() / "tune-gpu-cache"))


@pytest.mark.parametrize("task", sorted(KERNELS))
def test_the_search_finds_a_point_no_slower_than_the_written_one(task):
    from cuda_llm.tasks import load_task
    from cuda_llm.tools.compiler.compile import compile_many
    from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate
    from cuda_llm.tools.harness.timing_budget import TimingBudget
    from cuda_llm.tools.tune.tuning import TuneBudget, apply_point, parse_tunables, search

    loaded = load_task(task)
    source = _source(task)
    tunables = parse_tunables(source)
    opts = EvalOptions(budget=TimingBudget(time_budget_s=1.0))
    out = search(source, tunables, compile_batch=lambda s: compile_many(s),
                 measure=lambda src, p: evaluate_candidate(loaded, src, candidate=f"p{p.index}", options=opts),
                 budget=TuneBudget(max_evals=10, max_seconds=400, jobs=8, seed=0))
    print(f"\n{task}: {out.summary()}")
    for p in out.points:
        print(f"  {p.index:2d} {p.params} {p.status} {p.ms}")
    assert out.written is not None and out.written.status == "ok", f"the written point failed: {out.written}"
    assert out.best is not None and out.best.status == "ok"
    assert out.best.ms <= out.written.ms
    # every point that compiled is correct: these kernels are right for every value listed
    assert all(p.status in ("ok", "compile_error") for p in out.points), [p for p in out.points if p.status != "ok"]
    again = evaluate_candidate(loaded, apply_point(source, tunables, out.best.params), options=opts)
    assert again.status.value == "ok" and again.timing.median_ms <= out.written.ms * 1.10


def _scripted(kernel: str) -> Any:
    from fake_gpu_evaluator import coder_answer, critic_answer, plan_answer
    from scripted_chat_model import ScriptedChatModel, detect_role

    def respond(messages: list[Any]) -> str:
        role = detect_role(messages)
        if role == "planner":
            ids = re.findall(r"^- `([a-z0-9_]+)`", messages[-1].content.split("Offered features", 1)[-1], re.M)
            return plan_answer(1, features=tuple(ids[:1]) or ("smem_tiling",))
        if role == "critic":
            return critic_answer()
        return coder_answer(kernel)

    return ScriptedChatModel(respond=respond)


@pytest.mark.parametrize("task", sorted(KERNELS))
def test_the_tune_stage_keeps_the_best_point_of_a_candidate(task, tmp_path):
    from cuda_llm.graph.run import RunOptions, start_run
    from cuda_llm.tools.harness.timing_budget import TimingBudget
    from cuda_llm.graph.state import Limits
    from cuda_llm.tools.tune.tuning import parse_tunables

    model = _scripted(_source(task))
    opts = RunOptions(limits=Limits(n_candidates=1, max_rounds=1, tune_evals=6, tune_seconds=300),
                      runs_dir=tmp_path / "runs", timing_budget=TimingBudget(time_budget_s=1.0), profile=False, learn=False)
    out = start_run(task, None, opts, model_factory=lambda role: model, handle_signals=False)
    assert out.finished, out.error
    table = json.loads((out.root / "tuning" / "r1c0.json").read_text())
    print(f"\n{task}: best {out.best.get('id')} {out.best.get('ms')} ms; tuning: evaluations {table['evaluations']}, "
          f"best {table['best']['params'] if table['best'] else None}")
    assert table["evaluations"] >= 2 and table["written"]["status"] == "ok"
    assert out.best["id"] == "r1c0" and out.final["status"] == "ok"
    best_values = {t.name: t.default for t in parse_tunables((out.root / "best.cu").read_text())}
    tuned = table["best"]["params"]
    if table["best"]["source_hash"] != table["written"]["source_hash"] and table["best"]["ms"] < table["written"]["ms"]:
        assert best_values == tuned and (out.root / "candidates" / "r1c0.tuned.cu").is_file()
    else:
        assert best_values == table["written"]["params"]
