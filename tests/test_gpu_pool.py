"""The GPU worker pool's scheduling, with "GPUs" that sleep per measurement and log when and where they ran:
never two measurements at once on one GPU, N GPUs measuring N at once, results in candidate order, a lost
worker's candidate re-queued once (and a second loss halting the run), and a whole run on the pool."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from sleeping_gpu_evaluator import (
    SleepingGpuEvaluator, intervals, max_concurrency, overlaps_per_gpu, read_spans,
)

from cuda_llm.measure.evaluator import CachedEvaluator
from cuda_llm.measure.gpu_pool import EvaluationLost, EvaluatorSlot, GpuPool, check_gpus, parse_gpus
from cuda_llm.halts import WORKERS_LOST
from cuda_llm.results import Status
from cuda_llm.tasks import load_task


def src(name: str) -> str:
    return f"// variant: {name}\nextern \"C\" void solve(const float* x, float* y, int rows, int cols) {{}}\n"


@pytest.fixture(scope="module")
def softmax():
    return load_task("softmax")


def make_pool(tmp: Path, n: int, **kw) -> GpuPool:
    slots = [EvaluatorSlot(SleepingGpuEvaluator(str(i), span_log=tmp / "spans.jsonl", marker_dir=tmp, **kw), str(i))
             for i in range(n)]
    return GpuPool(slots, arch="sm_90", device=None)


def run_all(pool: GpuPool, loaded, names: list[str], tmp: Path, events: list | None = None):
    cached = CachedEvaluator(pool.client(on_event=(lambda name, **f: events.append({"event": name, **f}))
                                         if events is not None else None), tmp / "cache")
    jobs = [(src(n), n, tmp / "work" / n) for n in names]
    return list(cached.evaluate_each(loaded, jobs))


def test_n_gpus_run_n_at_once_never_two_on_one(tmp_path, softmax):
    names = [f"c{i}" for i in range(9)]
    with make_pool(tmp_path, 3, sleep_s=0.3) as pool:
        t0 = time.perf_counter()
        got = run_all(pool, softmax, names, tmp_path)
        wall = time.perf_counter() - t0
    ivs = intervals(read_spans(tmp_path / "spans.jsonl"))
    assert sorted(iv[2] for iv in ivs) == sorted(names)          # each measured once
    assert overlaps_per_gpu(ivs) == []
    assert max_concurrency(ivs) == 3                              # three GPUs, three at once
    assert {iv[0] for iv in ivs} == {"0", "1", "2"}
    assert wall < 9 * 0.3 * 0.75, f"9 measurements of 0.3 s on 3 GPUs took {wall:.2f} s"
    assert [g.value.candidate for g in got] == names and all(g.fresh for g in got)


def test_results_come_in_candidate_order_whatever_finishes_first(tmp_path, softmax):
    names = ["slow", "mid", "fast", "quick"]
    sleeps = {"slow": 0.8, "mid": 0.4, "fast": 0.05, "quick": 0.05}
    with make_pool(tmp_path, 4, sleep_of=lambda c: sleeps[c]) as pool:
        got = run_all(pool, softmax, names, tmp_path)
    ends = {iv[2]: iv[4] for iv in intervals(read_spans(tmp_path / "spans.jsonl"))}
    assert ends["fast"] < ends["slow"]                           # finished out of order...
    assert [g.value.candidate for g in got] == names              # ...delivered in order


def test_one_gpu_pool_measures_one_after_another(tmp_path, softmax):
    with make_pool(tmp_path, 1, sleep_s=0.1) as pool:
        assert pool.parallelism == 1
        run_all(pool, softmax, ["a", "b", "c"], tmp_path)
    ivs = intervals(read_spans(tmp_path / "spans.jsonl"))
    assert max_concurrency(ivs) == 1 and len(ivs) == 3


def test_a_lost_worker_requeues_its_candidate_once_on_another_gpu(tmp_path, softmax):
    events: list[dict] = []
    with make_pool(tmp_path, 2, sleep_s=0.1, fail_once=("c2",)) as pool:
        got = run_all(pool, softmax, ["c0", "c1", "c2", "c3"], tmp_path, events)
    assert [g.value.status for g in got] == [Status.ok] * 4
    spans = read_spans(tmp_path / "spans.jsonl")
    lost = [s for s in spans if s["phase"] == "lost"]
    assert [s["candidate"] for s in lost] == ["c2"]
    done = [iv for iv in intervals(spans) if iv[2] == "c2"]
    assert len(done) == 1 and done[0][0] != lost[0]["gpu"]       # measured once, by the other GPU
    jobs = [e for e in events if e["event"] == "gpu_job" and e["candidate"] == "c2"]
    assert [(e["status"], e["attempt"]) for e in jobs] == [("lost", 1), ("done", 2)]
    assert jobs[0]["requeued"] is True and jobs[0]["gpu"] != jobs[1]["gpu"]
    assert "WorkerCrashed" in jobs[0]["error"]


def test_lost_twice_halts_but_keeps_what_finished(tmp_path, softmax):
    with make_pool(tmp_path, 2, sleep_s=0.1, fail_always=("bad",)) as pool:
        with pytest.raises(EvaluationLost) as info:
            run_all(pool, softmax, ["ok0", "bad", "ok1", "ok2"], tmp_path)
        assert pool.live == ["0", "1"]          # one failure each: not retired
    assert info.value.reason == WORKERS_LOST and "lost its worker 2 times" in info.value.what
    stored = sorted(p.stem for p in (tmp_path / "cache" / "eval").glob("*.json"))
    assert len(stored) == 3                                         # ok0, ok1, ok2 kept for the resumed run


def test_a_slot_that_keeps_failing_is_retired_and_the_others_carry_on(tmp_path, softmax):
    names = ("a", "x0", "x1", "b")
    bad = SleepingGpuEvaluator("0", span_log=tmp_path / "spans.jsonl", fail_always=names, sleep_s=0.05)
    good = SleepingGpuEvaluator("1", span_log=tmp_path / "spans.jsonl", sleep_s=0.3)
    with GpuPool([EvaluatorSlot(bad, "0"), EvaluatorSlot(good, "1")], arch="sm_90", device=None) as pool:
        # GPU 0 fails two jobs in a row and is retired; each of them is re-queued to GPU 1, which does them all
        futs = [pool.submit("evaluate", (softmax, src(n), n, tmp_path / n), candidate=n) for n in names]
        results = [f.result(timeout=30) for f in futs]
        assert pool.live == ["1"] and pool.parallelism == 1
    assert [r.candidate for r in results] == ["a", "x0", "x1", "b"]
    assert {iv[0] for iv in intervals(read_spans(tmp_path / "spans.jsonl"))} == {"1"}


def test_no_worker_left_fails_every_waiting_job(tmp_path, softmax):
    ev = SleepingGpuEvaluator("0", fail_always=("a", "b", "c"), sleep_s=0.01)
    with GpuPool([EvaluatorSlot(ev, "0")], arch="sm_90", device=None) as pool:
        futs = [pool.submit("evaluate", (softmax, src(n), n, tmp_path / n), candidate=n) for n in ("a", "b", "c")]
        for f in futs:
            with pytest.raises(EvaluationLost):
                f.result(timeout=30)
        assert pool.live == []
        with pytest.raises(EvaluationLost, match="no GPU worker"):
            pool.run("evaluate", softmax, src("d"), "d", tmp_path / "d", candidate="d")


def test_a_source_given_twice_is_measured_once(tmp_path, softmax):
    with make_pool(tmp_path, 2, sleep_s=0.05) as pool:
        cached = CachedEvaluator(pool.client(), tmp_path / "cache")
        got = list(cached.evaluate_each(softmax, [(src("same"), "r1c0", tmp_path / "a"), (src("same"), "r1c1", tmp_path / "b")]))
    assert [g.value.candidate for g in got] == ["r1c0", "r1c1"] and [g.fresh for g in got] == [True, False]
    assert len(intervals(read_spans(tmp_path / "spans.jsonl"))) == 1


def test_profiles_and_baselines_go_to_whichever_gpu_is_free(tmp_path, softmax):
    with make_pool(tmp_path, 2, sleep_s=0.3, timings={"baseline": 5.0}) as pool:
        client = pool.client()
        futs = [pool.submit("evaluate", (softmax, src("long"), "long", tmp_path / "l"), candidate="long"),
                pool.submit("baseline", (softmax,), candidate="baseline")]
        res = futs[1].result(timeout=30)
        assert res.status == Status.ok and res.timing.median_ms > 4.9
        client.profile(softmax, src("long"), "long", tmp_path / "p", futs[0].result(timeout=30))
    ivs = intervals(read_spans(tmp_path / "spans.jsonl"))
    assert overlaps_per_gpu(ivs) == [] and {iv[0] for iv in ivs} == {"0", "1"}


def test_gpus_flag():
    assert parse_gpus("0,1,3") == [0, 1, 3]
    assert parse_gpus("all") is None and parse_gpus(None) is None
    for bad, words in (("0,x", "not a GPU index"), ("1,1", "named twice"), (",", "not a GPU index")):
        with pytest.raises(ValueError, match=words):
            parse_gpus(bad)
    assert check_gpus(None, 4) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="GPU 4 is not visible; this process sees GPUs 0-3"):
        check_gpus([0, 4], 4)
    with pytest.raises(ValueError, match="sees no GPU"):
        check_gpus([0], 0)


def test_a_pool_of_two_models_is_refused():
    from cuda_llm.measure.gpu_pool import same_kind
    from cuda_llm.results import DeviceInfo

    def dev(name: str) -> DeviceInfo:
        return DeviceInfo(name=name, arch="sm_90", compute_capability=(9, 0), sm_count=132)

    same_kind([("0", dev("H100")), ("1", dev("H100"))])
    with pytest.raises(ValueError, match="not all the same model"):
        same_kind([("0", dev("H100")), ("1", dev("A100"))])


# ----------------------------------------------------------------------------- a whole run on the pool
def test_a_run_on_three_gpus_measures_each_round_side_by_side(tmp_path):
    from fake_gpu_evaluator import coder_answer, critic_answer, plan_answer, softmax_source
    from scripted_chat_model import ScriptedChatModel, detect_role
    from test_graph_loop import candidate_of

    from cuda_llm.graph.run import RunOptions, start_run
    from cuda_llm.graph.state import Limits
    from cuda_llm.runs.trace import read_trace

    kernels = {"r1c0": "v5", "r1c1": "v6", "r1c2": "v3", "r2c0": "v2", "r2c1": "v7", "r2c2": "v4"}
    timings = {"baseline": 10.0, "v5": 5.0, "v6": 6.0, "v3": 3.0, "v2": 2.0, "v7": 7.0, "v4": 4.0}

    def respond(messages):
        role = detect_role(messages)
        if role == "planner":
            return plan_answer(3)
        if role == "critic":
            return critic_answer()
        return coder_answer(softmax_source(kernels.get(candidate_of(messages), "v6")))

    model = ScriptedChatModel(respond=respond)
    spans = tmp_path / "spans.jsonl"
    slots = [EvaluatorSlot(SleepingGpuEvaluator(str(i), timings, span_log=spans, sleep_s=0.4, default_ms=None), str(i))
             for i in range(3)]
    with GpuPool(slots, arch="sm_90", device=None) as pool:
        out = start_run("softmax", None, RunOptions(limits=Limits(n_candidates=3, max_rounds=2, plateau_rounds=5),
                                                     runs_dir=tmp_path / "runs", learn=False),
                        evaluator=pool.client(), model_factory=lambda role: model, handle_signals=False)
    assert out.finished and out.best["id"] == "r2c0"
    trace = read_trace(out.root / "trace.jsonl")
    assert trace[0]["event"] == "run_start" and trace[0]["gpus"] == ["0", "1", "2"]
    jobs = [e for e in trace if e["event"] == "gpu_job"]
    evals = [e for e in jobs if e["kind"] == "evaluate" and e["candidate"] in kernels]
    assert sorted(e["candidate"] for e in evals) == sorted(kernels)
    # from the trace alone: no two jobs overlapped on one GPU, and each round's three ran at once
    ivs = [(e["gpu"], e["kind"], e["candidate"], e["start"], e["end"]) for e in jobs]
    assert overlaps_per_gpu(ivs) == []
    r1 = [iv for iv in ivs if iv[2] in ("r1c0", "r1c1", "r1c2")]
    assert max_concurrency(r1) == 3 and len({iv[0] for iv in r1}) == 3
    # the evaluations are recorded in candidate order, as with one GPU
    order = [e["candidate"] for e in trace if e["event"] == "evaluation" and e["candidate"] in kernels]
    assert order == sorted(kernels)
    assert json.loads((out.root / "config.json").read_text())["options"]["gpus"] is None     # all: saved with the run


def test_the_timeline_shows_which_gpu_ran_a_job():
    from cuda_llm.report.timeline import describe

    ok = describe({"event": "gpu_job", "kind": "evaluate", "candidate": "r1c0", "gpu": "1", "seconds": 2.34,
                   "queued_s": 0.5, "status": "done"})
    assert ok == "GPU 1: evaluate r1c0 2.3 s (queued 0.5 s)"
    lost = describe({"event": "gpu_job", "kind": "evaluate", "candidate": "r1c1", "gpu": "0", "seconds": 1.0,
                     "queued_s": 0.0, "status": "lost", "error": "RayActorError: died", "requeued": True})
    assert "LOST (RayActorError: died; re-queued)" in lost


def test_every_result_names_the_gpu_that_measured_it(tmp_path, softmax):
    """Each evaluation (and both halves of a final check) carries its GPU's label, as the trace's gpu_job does."""
    events: list = []
    with make_pool(tmp_path, 2, timings={"baseline": 10.0}, default_ms=1.0) as pool:
        got = run_all(pool, softmax, [f"c{i}" for i in range(4)], tmp_path, events)
        cand, base = pool.client().final_check(softmax, src("c0"), "c0", tmp_path / "final")
    by_job = {e["candidate"]: e["gpu"] for e in events if e["event"] == "gpu_job"}
    assert [g.value.gpu for g in got] == [by_job[f"c{i}"] for i in range(4)]
    assert {g.value.gpu for g in got} == {"0", "1"}
    assert cand.gpu in ("0", "1") and base.gpu == cand.gpu


def test_timings_of_two_gpus_go_to_a_head_to_head_unless_far_apart():
    from cuda_llm.graph.selection import CROSS_GPU_SPREAD, worth_a_head_to_head

    best = (1.00, 1.02)
    assert worth_a_head_to_head((1.01, 1.03), best)                  # 1% slower on another GPU: on one GPU, please
    assert worth_a_head_to_head((1.02 * (1 + CROSS_GPU_SPREAD) - 1e-6, 1.2), best)
    assert not worth_a_head_to_head((1.02 * (1 + CROSS_GPU_SPREAD), 1.2), best)   # slower than GPUs differ
    assert not worth_a_head_to_head((1.0, 1.0), None)
