"""The GPU pool's slots in processes of their own (measure/process_slots.py), with the sleeping test evaluator in
each child (no GPU needed): each GPU measures in its own process, side by side; a child that dies in the middle
of a job, or whose evaluator raises, loses that job to the pool's re-queue and is started again; a task folder
is loaded where it is; an evaluator that cannot be built is refused at start with its own error; a child ends
when the pool closes and when the process that drives it is gone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sleeping_gpu_evaluator import SleepingFactory, intervals, max_concurrency, overlaps_per_gpu, read_spans

from cuda_llm.measure.evaluator import CachedEvaluator
from cuda_llm.measure.gpu_pool import GpuPool
from cuda_llm.measure.process_slots import ProcessSlot, start_slots
from cuda_llm.measure.slot_server import task_payload
from cuda_llm.tasks import load_task

HERE = Path(__file__).resolve().parent


def src(name: str) -> str:
    return f"// variant: {name}\nextern \"C\" void solve(const float* x, float* y, int rows, int cols) {{}}\n"


def pool_of(tmp_path: Path, gpus: list[str], **kw) -> tuple[GpuPool, list[ProcessSlot]]:
    slots = [ProcessSlot(SleepingFactory(tmp_path, gpu=g, **kw), g) for g in gpus]
    start_slots(slots)
    return GpuPool(slots, arch="sm_90", device=None), slots


def evaluate_all(pool: GpuPool, names: list[str], tmp_path: Path, events: list[dict]) -> list:
    cached = CachedEvaluator(pool.client(on_event=lambda name, **f: events.append({"event": name, **f})),
                             tmp_path / "cache")
    return [g.value for g in cached.evaluate_each(load_task("softmax"), [(src(n), n, tmp_path / n) for n in names])]


def gone(pid: int, within_s: float = 10.0) -> bool:
    """True once no process ``pid`` is left (reaped, or a zombie nobody waits for)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ", 1)[1].startswith("Z"):
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_each_gpu_measures_in_a_process_of_its_own_side_by_side(tmp_path):
    events: list[dict] = []
    pool, slots = pool_of(tmp_path, ["0", "1"], sleep_s=0.4)
    try:
        names = [f"c{i}" for i in range(6)]
        got = evaluate_all(pool, names, tmp_path, events)
        pids = {s.pid for s in slots}
    finally:
        pool.close()
    assert [r.candidate for r in got] == names and all(r.status.passed for r in got)
    assert all(r.timing is not None and r.timing.median_ms == pytest.approx(1.0, rel=0.05) for r in got)
    ivs = intervals(read_spans(tmp_path / "spans.jsonl"))
    assert sorted(iv[2] for iv in ivs) == names                       # each measured once, to the end
    assert overlaps_per_gpu(ivs) == [] and max_concurrency(ivs) == 2
    span_pids = {s["pid"] for s in read_spans(tmp_path / "spans.jsonl")}
    assert span_pids == pids and os.getpid() not in span_pids and len(pids) == 2   # one process per GPU, not ours
    done = [e for e in events if e["event"] == "gpu_job" and e["status"] == "done"]
    assert sorted(e["candidate"] for e in done) == names and {e["gpu"] for e in done} == {"0", "1"}
    assert all(gone(p) for p in pids)                                 # closing the pool ends the children


def test_a_child_that_dies_mid_job_loses_only_that_job_and_is_started_again(tmp_path):
    events: list[dict] = []
    pool, (slot,) = pool_of(tmp_path, ["0"], sleep_s=0.05, fail_once=("c2",), die=True)
    first_pid = slot.pid
    try:
        got = evaluate_all(pool, [f"c{i}" for i in range(4)], tmp_path, events)
    finally:
        pool.close()
    assert all(r.status.passed for r in got) and slot.starts == 2 and gone(first_pid)
    c2 = [e for e in events if e["event"] == "gpu_job" and e["candidate"] == "c2"]
    assert [e["status"] for e in c2] == ["lost", "done"] and c2[0]["requeued"]
    assert "was lost during evaluate" in c2[0]["error"] and "exit code 17" in c2[0]["error"]
    ends = [s["candidate"] for s in read_spans(tmp_path / "spans.jsonl") if s["phase"] == "end"]
    assert sorted(ends) == ["c0", "c1", "c2", "c3"]                    # nothing measured twice


def test_an_evaluator_that_raises_in_its_process_fails_the_job_with_its_traceback(tmp_path):
    events: list[dict] = []
    pool, (slot,) = pool_of(tmp_path, ["0"], sleep_s=0.05, fail_once=("c1",))
    try:
        got = evaluate_all(pool, ["c0", "c1", "c2"], tmp_path, events)
    finally:
        pool.close()
    assert all(r.status.passed for r in got) and slot.starts == 1      # the process itself carried on
    c1 = [e for e in events if e["event"] == "gpu_job" and e["candidate"] == "c1"]
    assert [e["status"] for e in c1] == ["lost", "done"]
    assert "raised during evaluate" in c1[0]["error"] and "WorkerCrashed" in c1[0]["error"]


def test_a_task_folder_is_loaded_where_it_is(tmp_path):
    folder = tmp_path / "mine" / "gelu"
    shutil.copytree(load_task("gelu").task.folder, folder)
    mine = load_task(str(folder))
    payload = task_payload(mine, by_files=False)
    assert payload.folder == str(folder.resolve()) and not payload.files and not payload.suite
    pool, _ = pool_of(tmp_path, ["0"], sleep_s=0.0)
    try:
        res = pool.client().evaluate(mine, src("g1"), "g1", tmp_path / "g1")
    finally:
        pool.close()
    assert res.status.passed and res.task == "gelu"
    assert [s["task"] for s in read_spans(tmp_path / "spans.jsonl") if s["phase"] == "end"] == ["gelu"]


class BrokenFactory:
    """An evaluator that cannot be built (no such GPU, no pycuda...)."""

    def __call__(self):
        raise RuntimeError("measuring the device failed: no pycuda here")


def test_an_evaluator_that_cannot_be_built_is_refused_at_start_with_its_error(tmp_path):
    good, bad = ProcessSlot(SleepingFactory(tmp_path, gpu="0"), "0"), ProcessSlot(BrokenFactory(), "1")
    with pytest.raises(RuntimeError, match="(?s)GPU 1.s evaluator could not be built in its process:\nRuntimeError: measuring the device failed: no pycuda here"):
        start_slots([good, bad])
    assert good.pid is not None and gone(good.pid) and gone(bad.pid)   # the good one is not left behind either


def test_a_child_ends_when_the_process_driving_it_is_killed(tmp_path):
    script = textwrap.dedent(f"""
        import os, sys
        sys.path[:0] = [{str(HERE)!r}]
        from sleeping_gpu_evaluator import SleepingFactory
        from cuda_llm.measure.process_slots import ProcessSlot, start_slots
        slot = ProcessSlot(SleepingFactory({str(tmp_path)!r}, gpu="0"), "0")
        start_slots([slot])
        print(slot.pid, flush=True)
        os._exit(9)            # as kill -9 would: no close, no clean-up
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 9, out.stderr
    child = int(out.stdout.strip())
    assert gone(child, within_s=20.0)


def test_the_throughput_bench_counts_the_slot_processes_cpu_as_the_judges(tmp_path):
    from cuda_llm.measure import throughput as tb

    pool, _ = pool_of(tmp_path, ["0", "1"], sleep_s=0.3, busy=True)
    try:
        c0 = time.process_time()
        got = tb.measure(tb.pool_path("pool-N", pool), load_task("softmax"), [(f"c{i}", src(f"c{i}")) for i in range(4)],
                         tmp_path / "work")
        ours = time.process_time() - c0
    finally:
        pool.close()
    assert got["passed"] == 4 and got["judge_cpu_s"] >= 0.25           # 0.3 s of CPU per candidate, in the children
    assert ours < 0.25 * 4                                             # not in this process
