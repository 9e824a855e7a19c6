"""Tuning on a GPU pool, on the CPU: the points of one kernel measured by two or three test GPUs at once
(each a ParametricTimingEvaluator behind a pool slot that sleeps per point and logs where and when it ran),
in tools/tune/tuning.search, in the graph's tune stage and in `cuda-llm tune --gpus`. Never two points at once
on one GPU, every GPU used, and the same points, the same best as one GPU measuring them one by one."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from parametric_timing_evaluator import ParametricTimingEvaluator, params_of
from sleeping_gpu_evaluator import (
    intervals,
    max_concurrency,
    overlaps_per_gpu,
    read_spans,
)
from test_tuning import GEMM_LIKE, bowl, fits

from cuda_llm.measure.gpu_pool import EvaluatorSlot, GpuPool
from cuda_llm.results import Status
from cuda_llm.tools.tune.tuning import TuneBudget, parse_tunables, search


def log_span(path: Path, phase: str, gpu: str, kind: str, candidate: str) -> None:
    """One line in sleeping_gpu_evaluator's span format (so its intervals/overlap helpers read it)."""
    with open(path, "a") as f:
        f.write(json.dumps({"phase": phase, "gpu": gpu, "kind": kind, "candidate": candidate, "task": "",
                            "t": time.time(), "pid": os.getpid()}) + "\n")


class TimedGpu:
    """One test GPU in front of a shared ParametricTimingEvaluator: each measurement takes ``sleep_s`` and is
    logged to ``spans``; anything else (build, the toolchain) is the shared evaluator's."""

    def __init__(self, ev: ParametricTimingEvaluator, gpu: str, spans: Path, sleep_s: float = 0.05):
        self.ev, self.gpu, self.spans, self.sleep_s = ev, gpu, spans, sleep_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ev, name)

    def _timed(self, kind: str, candidate: str, fn: Any, *args: Any) -> Any:
        log_span(self.spans, "start", self.gpu, kind, candidate)
        time.sleep(self.sleep_s)
        out = fn(*args)
        log_span(self.spans, "end", self.gpu, kind, candidate)
        return out

    def evaluate(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> Any:
        return self._timed("evaluate", candidate_id, self.ev.evaluate, loaded, source, candidate_id, work_dir)

    def baseline(self, loaded: Any) -> Any:
        return self._timed("baseline", "baseline", self.ev.baseline, loaded)

    def final_check(self, loaded: Any, source: str, candidate_id: str, work_dir: Path) -> Any:
        return self._timed("final_check", candidate_id, self.ev.final_check, loaded, source, candidate_id, work_dir)


def timed_pool(ev: ParametricTimingEvaluator, spans: Path, n: int, sleep_s: float = 0.05) -> GpuPool:
    slots = [EvaluatorSlot(TimedGpu(ev, str(i), spans, sleep_s), str(i)) for i in range(n)]
    return GpuPool(slots, arch="sm_90", device=None)




@pytest.fixture(scope="module")
def softmax():
    from cuda_llm.tasks import load_task

    return load_task("softmax")


def pool_search(pool: GpuPool, loaded: Any, ev: ParametricTimingEvaluator, budget: TuneBudget, events: list | None = None):
    def measure(src: str, point: Any) -> Any:
        name = f"point{point.index}"
        on_event = (lambda e, **f: events.append(f)) if events is not None else None
        return pool.run("evaluate", loaded, src, name, None, candidate=name, on_event=on_event)

    return search(GEMM_LIKE, parse_tunables(GEMM_LIKE), compile_batch=ev.compile_batch, measure=measure,
                  budget=budget, workers=pool.parallelism)


def serial_search(budget: TuneBudget):
    ev = ParametricTimingEvaluator(bowl, valid=fits)
    return search(GEMM_LIKE, parse_tunables(GEMM_LIKE), compile_batch=ev.compile_batch, measure=ev.measure,
                  budget=budget), ev


def same_search(a: Any, b: Any) -> None:
    """The same points tried in the same order, with the same verdicts and the same best."""
    assert [(p.index, p.params, p.status, p.ms) for p in a.points] == [(p.index, p.params, p.status, p.ms) for p in b.points]
    assert a.best == b.best and a.evaluations == b.evaluations and a.invalid == b.invalid
    assert a.stop_reason == b.stop_reason


@pytest.mark.parametrize("gpus", [2, 3])
def test_an_exhaustive_sweep_spreads_over_the_gpus_and_finds_the_serial_best(tmp_path, softmax, gpus):
    budget = TuneBudget(max_evals=64, jobs=8)
    serial, _ = serial_search(budget)
    ev = ParametricTimingEvaluator(bowl, valid=fits)
    spans = tmp_path / "spans.jsonl"
    events: list[dict] = []
    with timed_pool(ev, spans, gpus) as pool:
        t0 = time.perf_counter()
        out = pool_search(pool, softmax, ev, budget, events)
        wall = time.perf_counter() - t0
    assert out.sampler == "grid" and out.stop_reason == "space"
    same_search(out, serial)
    assert out.best.params == {"BM": "64", "BN": "16", "UNROLL": "4"}
    ivs = intervals(read_spans(spans))
    assert len(ivs) == out.evaluations == len(ev.measured) == len(set(ev.measured))   # each point timed once
    assert overlaps_per_gpu(ivs) == []                                                 # never two on one GPU
    assert {iv[0] for iv in ivs} == {str(i) for i in range(gpus)}                       # every GPU measured
    assert max_concurrency(ivs) == gpus                                                 # all of them at once
    assert wall < out.evaluations * 0.05 * 0.8, f"{out.evaluations} points of 0.05 s on {gpus} GPUs took {wall:.2f} s"
    # the pool says which GPU measured each point, as it does for a run's candidates
    done = {e["candidate"]: e["gpu"] for e in events if e["status"] == "done"}
    assert sorted(done) == sorted(f"point{p.index}" for p in out.points if p.status == "ok")


def test_tpe_tries_the_same_points_on_three_gpus_as_on_one_and_never_exceeds_its_budget(tmp_path, softmax):
    budget = TuneBudget(max_evals=20, jobs=4, seed=7)
    serial, serial_ev = serial_search(budget)
    for gpus in (1, 3):
        ev = ParametricTimingEvaluator(bowl, valid=fits)
        spans = tmp_path / f"spans{gpus}.jsonl"
        with timed_pool(ev, spans, gpus, sleep_s=0.02) as pool:
            out = pool_search(pool, softmax, ev, budget)
        assert out.sampler == "tpe" and out.stop_reason == "evals"
        same_search(out, serial)
        assert ev.measured == serial_ev.measured if gpus == 1 else sorted(ev.measured) == sorted(serial_ev.measured)
        ivs = intervals(read_spans(spans))
        assert len(ivs) == 20 and overlaps_per_gpu(ivs) == []       # the budget, not one point more in flight
        assert max_concurrency(ivs) == gpus


def test_a_batch_holds_a_point_per_gpu_even_with_fewer_compile_jobs(tmp_path, softmax):
    ev = ParametricTimingEvaluator(bowl, valid=fits)
    spans = tmp_path / "spans.jsonl"
    with timed_pool(ev, spans, 3) as pool:
        out = pool_search(pool, softmax, ev, TuneBudget(max_evals=12, jobs=1, seed=1))
    assert out.evaluations == 12 and max_concurrency(intervals(read_spans(spans))) == 3


def half_fit(p: dict[str, int]) -> bool:
    """Half the space compiles (BN 8 or 16; the written point among them)."""
    return p["BN"] <= 16


def search_with(valid: Any, budget: TuneBudget, workers: int) -> tuple[Any, ParametricTimingEvaluator]:
    ev = ParametricTimingEvaluator(bowl, valid=valid)
    return search(GEMM_LIKE, parse_tunables(GEMM_LIKE), compile_batch=ev.compile_batch, measure=ev.measure,
                  budget=budget, workers=workers), ev


def test_points_that_do_not_compile_are_replaced_so_every_gpu_measures_and_the_search_is_unchanged():
    budget = TuneBudget(max_evals=16, jobs=3, seed=5, sampler="grid")   # the written point, five batches of 3
    serial, serial_ev = search_with(half_fit, budget, workers=1)
    ev = ParametricTimingEvaluator(bowl, valid=half_fit)
    batch = threading.Barrier(3, timeout=5)   # each point after the written one waits for three measuring at once
    compiles: list[int] = []                  # the size of each compile_batch call

    def measure(src: str, point: Any) -> Any:
        if point.index > 0:
            batch.wait()
        return ev.measure(src, point)

    def compile_batch(sources: list[str]) -> list[Any]:
        compiles.append(len(sources))
        return ev.compile_batch(sources)

    out = search(GEMM_LIKE, parse_tunables(GEMM_LIKE), compile_batch=compile_batch, measure=measure,
                 budget=budget, workers=3)
    assert out.stop_reason == "evals" and out.evaluations == 16 == len(ev.measured)
    assert out.invalid > 0 and len(compiles) > 1 + 5, "no batch had a point to replace"
    invalid = [p for p in out.points if p.status == "compile_error"]
    assert len(invalid) == out.invalid and all("static assertion" in p.note and p.ms is None for p in invalid)
    assert all(not half_fit({k: int(v) for k, v in p.params.items()}) for p in invalid)
    same_search(out, serial)
    assert sorted(ev.measured) == sorted(serial_ev.measured) and out.best == serial.best


def test_tpe_replacing_points_that_do_not_compile_tries_the_same_points_on_three_gpus_as_on_one():
    budget = TuneBudget(max_evals=16, jobs=3, seed=5)
    serial, serial_ev = search_with(half_fit, budget, workers=1)
    out, ev = search_with(half_fit, budget, workers=3)
    assert out.sampler == "tpe" and serial.invalid > 0
    same_search(out, serial)
    assert sorted(ev.measured) == sorted(serial_ev.measured) and sorted(ev.compiled) == sorted(serial_ev.compiled)


def test_no_device_stops_new_points_while_those_measuring_finish():
    ev = ParametricTimingEvaluator(bowl, valid=fits)
    calls = []
    lock = threading.Lock()

    def measure(src: str, point: Any) -> Any:
        with lock:
            calls.append(point.index)
        time.sleep(0.02)
        res = ev.measure(src, point)
        return res if point.index == 0 else res.model_copy(update={"status": Status.no_device, "timing": None})

    out = search(GEMM_LIKE, parse_tunables(GEMM_LIKE), compile_batch=ev.compile_batch, measure=measure,
                 budget=TuneBudget(max_evals=64, jobs=8), workers=3)
    assert out.stop_reason == "no_device"
    assert 2 <= len(calls) <= 4                       # the written point, then at most one batch's three at once
    assert out.evaluations == len(calls) and [p.index for p in out.points] == sorted(p.index for p in out.points)
    assert {p.index for p in out.points if p.status != "compile_error"} == set(calls)


def test_workers_must_be_positive():
    ev = ParametricTimingEvaluator(bowl)
    with pytest.raises(ValueError, match="workers must be at least 1"):
        search(GEMM_LIKE, parse_tunables(GEMM_LIKE), compile_batch=ev.compile_batch, measure=ev.measure, workers=0)


# ------------------------------------------------------------------------------------- the tune stage
def _tune_run(tmp_path: Path, evaluator: Any):
    from test_graph_loop import scripted
    from test_graph_search import TUNABLE

    from cuda_llm.graph.run import RunOptions, start_run
    from cuda_llm.graph.state import Limits

    model = scripted({"*": TUNABLE}, n=1)
    opts = RunOptions(limits=Limits(n_candidates=1, max_rounds=1, tune_evals=10), runs_dir=tmp_path / "runs",
                      learn=False)
    return start_run("softmax", None, opts, evaluator=evaluator, model_factory=lambda role: model, handle_signals=False)


def test_the_tune_stage_measures_points_side_by_side_and_keeps_the_serial_best(tmp_path, tmp_path_factory, monkeypatch):
    from test_graph_loop import shared_cache, trace

    monkeypatch.setenv("CUDA_LLM_CACHE", str(shared_cache(tmp_path_factory)))

    def time_of(p: dict[str, int]) -> float:      # 2 ms at THREADS=64, every point compiles
        return 2.0 + abs(p["THREADS"] - 64) / 64

    serial = _tune_run(tmp_path / "serial", ParametricTimingEvaluator(time_of))
    ev = ParametricTimingEvaluator(time_of)
    spans = tmp_path / "spans.jsonl"
    with timed_pool(ev, spans, 3, sleep_s=0.2) as pool:
        out = _tune_run(tmp_path / "pool", pool.client())
    assert out.finished and out.best["id"] == serial.best["id"] == "r1c0"
    assert params_of((out.root / "best.cu").read_text()) == params_of((serial.root / "best.cu").read_text()) == {"THREADS": 64}
    assert out.final["ms"] == pytest.approx(serial.final["ms"])
    tables = [json.loads((o.root / "tuning" / "r1c0.json").read_text()) for o in (out, serial)]
    assert [(p["params"], p["status"], p["ms"]) for p in tables[0]["points"]] == \
        [(p["params"], p["status"], p["ms"]) for p in tables[1]["points"]]
    assert tables[0]["evaluations"] == 5 and tables[0]["invalid"] == 0
    # the trace records which GPU measured each point: the written one was measured already (as the candidate),
    # of the four others a batch of three ran at once, one per GPU (the batch holds a point per GPU), then one
    jobs = [e for e in trace(out) if e["event"] == "gpu_job" and e["candidate"].startswith("r1c0-p")]
    assert len(jobs) == 4 and len({e["candidate"] for e in jobs}) == 4
    ivs = [(e["gpu"], e["kind"], e["candidate"], e["start"], e["end"]) for e in trace(out) if e["event"] == "gpu_job"]
    assert overlaps_per_gpu(ivs) == []
    points = [iv for iv in ivs if iv[2].startswith("r1c0-p")]
    assert len({iv[0] for iv in points}) == 3 and max_concurrency(points) == 3


# ------------------------------------------------------------------------------------- cuda-llm tune
def test_cuda_llm_tune_measures_on_every_gpu_given(tmp_path, capsys, monkeypatch):
    from test_tune_cmd import REDUCE, _with_test_evaluator

    from cuda_llm.cli import main

    monkeypatch.setenv("CUDA_LLM_CACHE", str(tmp_path / "cache"))

    def time_of(p: dict[str, int]) -> float:
        return 0.5 + abs(p["BLOCK"] - 512) / 1000 + abs(p["ITEMS_PER_THREAD"] - 8) / 20

    def valid(p: dict[str, int]) -> bool:
        return p["BLOCK"] * p["ITEMS_PER_THREAD"] < 16384

    spans = tmp_path / "spans.jsonl"
    kernel = tmp_path / "reduce.cu"
    kernel.write_text(REDUCE)
    results = {}
    for gpus, flag in ((1, "0"), (3, "0,1,2"), (3, "all")):
        ev = ParametricTimingEvaluator(time_of, valid=valid)

        def judge(loaded: Any, source: str, candidate: str, options: Any, ev: Any = ev, flag: str = flag) -> Any:
            log_span(spans, "start", str(options.gpu), "evaluate", f"{flag}:{candidate}")
            time.sleep(0.05)
            res = ev.result(source, candidate)
            log_span(spans, "end", str(options.gpu), "evaluate", f"{flag}:{candidate}")
            return res

        _with_test_evaluator(monkeypatch, ev, gpus=gpus, judge=judge)
        out = tmp_path / f"best-{flag}.cu"
        assert main(["tune", "reduce_sum", str(kernel), "--max-evals", "20", "--jobs", "4", "--seed", "3",
                     "--gpus", flag, "--json", "--out", str(out)]) == 0
        results[flag] = json.loads(capsys.readouterr().out)
        assert params_of(out.read_text()) == {"BLOCK": 512, "ITEMS_PER_THREAD": 8}
        ivs = [iv for iv in intervals(read_spans(spans)) if iv[2].startswith(f"{flag}:")]
        assert overlaps_per_gpu(ivs) == [] and len(ivs) == results[flag]["evaluations"]
        assert {iv[0] for iv in ivs} == {str(g) for g in range(gpus)} and max_concurrency(ivs) == gpus
    one = results["0"]
    for flag in ("0,1,2", "all"):
        assert [p["params"] for p in results[flag]["points"]] == [p["params"] for p in one["points"]]
        assert results[flag]["best"] == one["best"]


def test_cuda_llm_tune_refuses_a_gpu_it_does_not_see(tmp_path, capsys, monkeypatch):
    from test_tune_cmd import REDUCE, _with_test_evaluator

    from cuda_llm.cli import main

    ev = ParametricTimingEvaluator(lambda p: 1.0)
    _with_test_evaluator(monkeypatch, ev, gpus=2)
    kernel = tmp_path / "reduce.cu"
    kernel.write_text(REDUCE)
    assert main(["tune", "reduce_sum", str(kernel), "--gpus", "0,2"]) == 2
    assert "--gpus: GPU 2 is not visible; this process sees GPUs 0-1" in capsys.readouterr().err
    assert ev.measured == [] and not (tmp_path / "reduce.tuned.cu").exists()
