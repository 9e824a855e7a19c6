"""The GPU pool on real GPUs: real softmax kernels measured through the pool with ``--gpus 0`` (the one H100 is
enough), a pool over every visible GPU, a batch of two tasks with a scripted model on every GPU, and the pool
in a process whose CUDA_VISIBLE_DEVICES names a GPU other than 0 (skipped where there is only one GPU).
Lines starting ``pool-gpu:`` are what benchmarks/run_gpu.sh's summary shows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_gpu_evaluator import softmax_source
from cuda_llm.tools.harness.eval_options import EvalOptions
from cuda_llm.tools.harness.timing_budget import TimingBudget

pytestmark = pytest.mark.gpu_long
HERE = Path(__file__).resolve().parent


def _jobs(work: Path, names: list[str], threads=(128, 256)) -> list[tuple[str, str, Path]]:
    return [(softmax_source(n, threads=threads[i % len(threads)]), n, work / n) for i, n in enumerate(names)]


def _no_overlap(events: list[dict]) -> None:
    by: dict[str, list] = {}
    for e in events:
        if e["event"] == "gpu_job" and e["status"] == "done":
            by.setdefault(e["gpu"], []).append((e["start"], e["end"], e["candidate"]))
    for gpu, spans in by.items():
        spans.sort()
        for a, b in zip(spans, spans[1:]):
            assert b[0] >= a[1], f"two jobs overlapped on GPU {gpu}: {a} and {b}"


def test_pool_with_gpus_0_measures_real_kernels(tmp_path):
    from cuda_llm.measure.evaluator import CachedEvaluator
    from cuda_llm.measure.gpu_pool import local_pool
    from cuda_llm.tasks import load_task
    from cuda_llm.tools.harness.runner import pinned_device

    loaded = load_task("softmax")
    events: list[dict] = []
    pool = local_pool([0], options=EvalOptions(budget=TimingBudget(time_budget_s=1.0)), profile=False)
    try:
        assert pool.labels == [pinned_device(0)] and pool.device is not None
        cached = CachedEvaluator(pool.client(on_event=lambda n, **f: events.append({"event": n, **f})), tmp_path / "c")
        got = [g.value for g in cached.evaluate_each(loaded, _jobs(tmp_path, ["p0", "p1", "p2"]))]
        base = pool.client().baseline(loaded)
    finally:
        pool.close()
    assert [r.candidate for r in got] == ["p0", "p1", "p2"]
    assert all(r.status.value == "ok" and r.timing is not None for r in got), [r.message for r in got]
    assert base.status.passed and base.timing is not None
    _no_overlap(events)
    print(f"pool-gpu: --gpus 0 on {pool.device.name}: {len(got)} kernels, medians "
          f"{', '.join(f'{r.timing.median_ms:.4f}' for r in got)} ms, all on GPU {pool.labels[0]}")


def test_pool_with_its_gpu_in_a_process_of_its_own(tmp_path):
    """The slot a pool over several GPUs gives each GPU (measure/process_slots.py), here on GPU 0 alone: the real
    evaluator in a child process measures real kernels, a baseline and a profile-less run as in this process."""
    from cuda_llm.measure.evaluator import CachedEvaluator
    from cuda_llm.measure.gpu_pool import local_pool
    from cuda_llm.tasks import load_task

    loaded = load_task("softmax")
    pool = local_pool([0], options=EvalOptions(budget=TimingBudget(time_budget_s=1.0)), profile=False, processes=True)
    try:
        pid = pool.slots[0].pid
        assert pid is not None and pid != os.getpid() and pool.device is not None
        cached = CachedEvaluator(pool.client(), tmp_path / "c")
        got = [g.value for g in cached.evaluate_each(loaded, _jobs(tmp_path, ["s0", "s1"]))]
        base = pool.client().baseline(loaded)
    finally:
        pool.close()
    assert all(r.status.value == "ok" and r.timing is not None for r in got), [r.message for r in got]
    assert base.status.passed and (tmp_path / "s0" / "eval_result.json").is_file()    # the caller's work folder
    print(f"pool-gpu: GPU 0 in its own process (pid {pid}): {len(got)} kernels, medians "
          f"{', '.join(f'{r.timing.median_ms:.4f}' for r in got)} ms, baseline {base.timing.median_ms:.4f} ms")


def test_pool_over_every_gpu(tmp_path):
    from cuda_llm.measure.evaluator import CachedEvaluator
    from cuda_llm.measure.gpu_pool import local_pool
    from cuda_llm.tasks import load_task
    from cuda_llm.tools.device.device_probe import cuda_device_count

    n = cuda_device_count()
    loaded = load_task("softmax")
    events: list[dict] = []
    pool = local_pool(None, options=EvalOptions(budget=TimingBudget(time_budget_s=1.0)), profile=False)
    try:
        assert len(pool.labels) == n
        cached = CachedEvaluator(pool.client(on_event=lambda n_, **f: events.append({"event": n_, **f})), tmp_path / "c")
        names = [f"q{i}" for i in range(2 * n)]
        got = [g.value for g in cached.evaluate_each(loaded, _jobs(tmp_path, names))]
    finally:
        pool.close()
    assert all(r.status.value == "ok" for r in got), [r.message for r in got]
    _no_overlap(events)
    used = {e["gpu"] for e in events if e["event"] == "gpu_job"}
    assert len(used) == n if n > 1 else used == set(pool.labels)
    # the same kernel (two thread counts) timed on different GPUs agrees within a few percent
    for t in (0, 1):
        ms = [r.timing.median_ms for i, r in enumerate(got) if i % 2 == t]
        assert max(ms) / min(ms) < 1.05, ms
    print(f"pool-gpu: {n} GPU(s): {len(got)} kernels on GPUs {sorted(used)}")


def test_batch_of_two_tasks_on_every_gpu(tmp_path):
    """`cuda-llm batch` with a scripted model, real kernels (each task's naive kernel, marked per candidate) and the
    real pool over every GPU: the table, and no two timed evaluations on one GPU from the traces. POOL_BATCH_TASKS
    names other tasks (e.g. four for a machine with several GPUs)."""
    tasks = os.environ.get("POOL_BATCH_TASKS", "softmax,gelu")
    script = f"""
import sys, re, json
sys.path.insert(0, {str(HERE)!r})
from pathlib import Path
from fake_gpu_evaluator import coder_answer, critic_answer, plan_answer
from scripted_chat_model import ScriptedChatModel, detect_role
from test_graph_loop import candidate_of
from cuda_llm.tasks import load_task
from cuda_llm.commands import batch_cmd
from cuda_llm import cli

def respond(messages):
    role = detect_role(messages)
    if role == "planner":
        return plan_answer(2)
    if role == "critic":
        return critic_answer()
    text = "\\n".join(str(m.content) for m in messages)
    name = re.search(r"Task `([\\w.-]+)`", text).group(1)
    src = Path(load_task(name).task.baseline_path).read_text()
    return coder_answer("// scripted " + candidate_of(messages) + "\\n" + src)

model = ScriptedChatModel(respond=respond)
batch_cmd.model_factory_override = lambda role: model
sys.exit(cli.main(["batch", {tasks!r}, "--runs-dir", {str(tmp_path / "runs")!r}, "--rounds", "1",
                   "--candidates", "2", "--time-budget", "20m", "--eval-time", "1", "--no-profile", "--no-learn",
                   "--model", "scripted-model", "--base-url", "http://127.0.0.1:9/v1", "--quiet"]))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=540,
                          env=dict(os.environ, OPENAI_API_KEY="unused"))
    print(proc.stdout[-3000:])
    assert proc.returncode == 0, proc.stderr[-3000:]
    names = tuple(tasks.split(","))
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith(names)]
    assert len(rows) == len(names) and all("finished" in r for r in rows), proc.stdout[-2000:]
    jobs = []
    for trace in (tmp_path / "runs").glob("*/trace.jsonl"):
        jobs += [json.loads(ln) for ln in trace.read_text().splitlines() if '"gpu_job"' in ln]
    _no_overlap(jobs)
    print(f"pool-gpu: batch of {len(names)} tasks: {len(jobs)} GPU jobs on GPUs {sorted({j['gpu'] for j in jobs})}, no overlap")


def test_pool_where_cuda_visible_devices_names_another_gpu(tmp_path):
    from cuda_llm.tools.device.device_probe import cuda_device_count

    if cuda_device_count() < 2:
        pytest.skip("needs two GPUs: CUDA_VISIBLE_DEVICES must name a GPU other than 0")
    script = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
from pathlib import Path
from fake_gpu_evaluator import softmax_source
from cuda_llm.measure.gpu_pool import local_pool
from cuda_llm.tasks import load_task
from cuda_llm.tools.harness.eval_options import EvalOptions
from cuda_llm.tools.harness.runner import lock_path
from cuda_llm.tools.harness.timing_budget import TimingBudget
pool = local_pool(None, options=EvalOptions(budget=TimingBudget(time_budget_s=1.0)), profile=False)
events = []
res = pool.client(on_event=lambda n, **f: events.append(f)).evaluate(load_task("softmax"), softmax_source("v"), "v",
                                                                       Path({str(tmp_path)!r}) / "v")
pool.close()
print("LABELS", pool.labels, "STATUS", res.status.value, "GPU", events[-1]["gpu"], "LOCK", lock_path(pool.labels[0]).name)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, CUDA_VISIBLE_DEVICES="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("LABELS"))
    assert "LABELS ['1'] STATUS ok GPU 1 LOCK gpu1.lock" == line, line
    print(f"pool-gpu: CUDA_VISIBLE_DEVICES=1: {line}")


def test_gpus_flag_naming_an_absent_gpu_is_refused(tmp_path):
    from cuda_llm.tools.device.device_probe import cuda_device_count

    n = cuda_device_count()
    proc = subprocess.run([sys.executable, "-m", "cuda_llm.cli", "optimize", "softmax", "--gpus", f"0,{n}",
                           "--runs-dir", str(tmp_path / "runs"), "--coder", "manual", "--planner", "rules",
                           "--critic", "rules"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and f"GPU {n} is not visible" in proc.stderr, proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
