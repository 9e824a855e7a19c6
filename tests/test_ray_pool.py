"""The GPU pool over Ray, on a local Ray cluster that declares two GPUs (no GPU needed): one actor per GPU,
each running the test evaluator on "its" GPU; a round measured side by side; an actor whose process dies in
the middle of a candidate has that candidate re-queued on the other actor, measured once and delivered once;
a task that is not built in travels to the actors as files. Skipped only where ray is not installed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from sleeping_gpu_evaluator import SleepingFactory

ray = pytest.importorskip("ray")

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def cluster():
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE), str(HERE.parent), old or ""])   # the actors import the double
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


def src(name: str) -> str:
    return f"// variant: {name}\nextern \"C\" void solve(const float* x, float* y, int rows, int cols) {{}}\n"


def test_one_actor_per_gpu_side_by_side_and_a_lost_actor_requeues(cluster, tmp_path):
    from sleeping_gpu_evaluator import intervals, max_concurrency, overlaps_per_gpu, read_spans

    from cuda_llm.measure.evaluator import CachedEvaluator
    from cuda_llm.measure.ray_slots import ray_pool
    from cuda_llm.tasks import load_task

    softmax = load_task("softmax")
    events: list[dict] = []
    pool = ray_pool(None, factory=SleepingFactory(tmp_path, sleep_s=0.5, fail_once=("c3",), die=True))
    try:
        assert pool.parallelism == 2 and len(set(pool.labels)) == 2
        cached = CachedEvaluator(pool.client(on_event=lambda name, **f: events.append({"event": name, **f})),
                                 tmp_path / "cache")
        names = [f"c{i}" for i in range(6)]
        got = list(cached.evaluate_each(softmax, [(src(n), n, tmp_path / n) for n in names]))
        base = pool.client().baseline(softmax)
    finally:
        pool.close()
    assert [g.value.candidate for g in got] == names and all(g.value.status.passed for g in got)
    assert base.timing.median_ms > 9.9
    spans = read_spans(tmp_path / "spans.jsonl")
    ivs = [iv for iv in intervals(spans) if iv[1] != "baseline"]
    assert sorted(iv[2] for iv in ivs) == sorted(names)            # each measured to the end once
    assert overlaps_per_gpu(ivs) == [] and max_concurrency(ivs) == 2
    assert {iv[0] for iv in ivs} == {"0", "1"}                       # Ray's CUDA_VISIBLE_DEVICES, one GPU each
    lost = [s for s in spans if s["phase"] == "lost"]
    assert [s["candidate"] for s in lost] == ["c3"]
    c3 = [e for e in events if e["event"] == "gpu_job" and e["candidate"] == "c3"]
    assert [e["status"] for e in c3] == ["lost", "done"] and c3[0]["requeued"]
    assert "Actor" in c3[0]["error"] or "actor" in c3[0]["error"]


def test_a_task_folder_travels_to_the_actors(cluster, tmp_path):
    from cuda_llm.measure.ray_slots import ray_pool, task_payload
    from cuda_llm.tasks import load_task
    from cuda_llm.tasks.loader import SUITE_DIR

    folder = tmp_path / "mine" / "gelu"
    shutil.copytree(SUITE_DIR / "gelu", folder)
    mine = load_task(str(folder))
    payload = task_payload(mine)
    assert not payload.suite and "task.toml" in payload.files and "reference.py" in payload.files
    assert task_payload(load_task("gelu")).suite
    pool = ray_pool(None, factory=SleepingFactory(tmp_path, sleep_s=0.05), actors=1)
    try:
        res = pool.client().evaluate(mine, src("g1"), "g1", tmp_path / "g1")
    finally:
        pool.close()
    assert res.status.passed and res.task == "gelu"
