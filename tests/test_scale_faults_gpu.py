"""Faults of a night on several GPUs, on the GPU machine (gpu_long; the `scale` step of benchmarks/run_gpu.sh):
a GPU's worker killed with SIGKILL in the middle of a timed evaluation (its candidate is measured again on
another GPU, every other candidate once, the pool goes on with the GPUs left), and a run asked for a GPU that
is not there (one clear line, nothing started), the batch process killed with SIGKILL mid-round and resumed
(no evaluation that finished is run again), and a batch through a local Ray cluster (one actor per GPU).
Each prints one `pool-gpu-...:` line for the note.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu_long

ROOT = Path(__file__).resolve().parents[1]


def _gpus() -> int:
    from cuda_llm.tools.device.device_probe import cuda_device_count, has_cuda_device

    return cuda_device_count() if has_cuda_device() else 0


def test_a_worker_killed_mid_evaluation_is_measured_again_elsewhere(tmp_path):
    n = _gpus()
    if n < 2:
        pytest.skip("needs two GPUs or more")
    from cuda_llm.measure.gpu_pool import local_pool
    from cuda_llm.tasks import load_task
    from cuda_llm.tools.harness.eval_options import EvalOptions
    from cuda_llm.tools.harness.timing_budget import TimingBudget

    loaded = load_task("softmax")
    naive = loaded.task.baseline_path.read_text()          # real kernels, each copy distinct (not cached)
    cands = [(f"t{i:02d}", naive + f"\n// copy {i}\n") for i in range(4 * n)]
    events: list[dict] = []
    pool = local_pool(list(range(n)), options=EvalOptions(budget=TimingBudget(time_budget_s=3.0)), profile=False)
    try:
        client = pool.client(on_event=lambda name, **f: events.append({"event": name, **f}))
        results: dict[str, object] = {}

        def one(cid: str, src: str) -> None:
            results[cid] = client.evaluate(loaded, src, cid, tmp_path / cid)

        threads = [threading.Thread(target=one, args=c) for c in cands]
        for t in threads:
            t.start()
        victim = pool.slots[1]
        deadline = time.time() + 120
        while time.time() < deadline and not any(e.get("gpu") == victim.label for e in events):
            time.sleep(0.2)          # GPU 1 finished one job: its next is under way now
        time.sleep(1.0)
        os.kill(victim.pid, signal.SIGKILL)
        for t in threads:
            t.join(timeout=600)
    finally:
        pool.close()
    jobs = [e for e in events if e.get("event") == "gpu_job"]
    lost = [e for e in jobs if e.get("status") == "lost"]
    done = [e for e in jobs if e.get("status") == "done"]
    print(f"pool-gpu-fault: {len(cands)} candidates on {n} GPUs, GPU {victim.label} killed; lost {len(lost)}, "
          f"done {len(done)}")
    assert len(results) == len(cands) and all(r.status.passed for r in results.values())
    assert lost and all(e["gpu"] == victim.label for e in lost)
    again = {e["candidate"] for e in lost}
    for cid, _ in cands:        # every candidate measured to the end exactly once; the lost one on another GPU
        finished = [e for e in done if e["candidate"] == cid]
        assert len(finished) == 1, (cid, finished)
        if cid in again:
            assert finished[0]["gpu"] != victim.label


def test_a_gpu_that_is_not_there_is_one_line_and_nothing_starts(tmp_path):
    n = _gpus()
    if n < 1:
        pytest.skip("needs a GPU")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "cuda_llm.cli", "batch", "softmax", "--gpus", f"0,{n}",
                           "--runs-dir", str(tmp_path / "runs"), "--no-profile", "--coder", "manual", "--planner",
                           "rules", "--critic", "rules"], env=env, text=True,
                          capture_output=True, timeout=300)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    print(f"pool-gpu-missing: exit {proc.returncode}: {lines}")
    assert proc.returncode == 2
    assert len(lines) == 1 and f"GPU {n} is not visible" in lines[0]
    assert not (tmp_path / "runs" / "batches").exists() or not any((tmp_path / "runs" / "batches").iterdir())


def _cli(tmp_path: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "cuda_llm.cli", "batch", *args, "--runs-dir", str(tmp_path / "runs"), "--quiet"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


MANUAL = ["--coder", "manual", "--planner", "rules", "--critic", "rules", "--rounds", "1", "--candidates", "2",
          "--plateau-rounds", "1", "--eval-time", "1", "--no-profile"]


def _answer_with_naive(runs: Path) -> int:
    """Every pending coder prompt answered with the task's naive kernel (a distinct source per candidate)."""
    import json

    from cuda_llm.graph.manual import pending_prompts
    from cuda_llm.tasks import load_task

    n = 0
    for run in sorted(p for p in runs.iterdir() if (p / "config.json").is_file()):
        task = json.loads((run / "config.json").read_text())["task"]
        naive = Path(load_task(task).task.baseline_path).read_text()
        for w in pending_prompts(run):
            w.answer.parent.mkdir(parents=True, exist_ok=True)
            w.answer.write_text(f"```cuda\n// {w.name}\n{naive}```\n")
            n += 1
    return n


def _gpu_jobs(runs: Path) -> list[dict]:
    import json

    out = []
    for t in runs.glob("*/trace.jsonl"):
        for line in t.read_text().splitlines():
            if '"gpu_job"' in line:
                out.append({**json.loads(line), "run": t.parent.name})
    return out


def test_the_batch_killed_mid_round_resumes_repeating_nothing_finished(tmp_path):
    if _gpus() < 2:
        pytest.skip("needs two GPUs or more")
    tasks = "softmax,gelu,layernorm"
    first = subprocess.run(_cli(tmp_path, tasks, *MANUAL), env=_env(), text=True, capture_output=True, timeout=400)
    assert first.returncode == 3, first.stderr[-2000:]          # every run waits on its coder prompts
    assert _answer_with_naive(tmp_path / "runs") == 6
    proc = subprocess.Popen(_cli(tmp_path, "--resume", "latest"), env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while time.time() < deadline and not any(j["kind"] == "evaluate" and j["status"] == "done"
                                             for j in _gpu_jobs(tmp_path / "runs")):
        time.sleep(0.2)
    proc.kill()                                                  # SIGKILL, in the middle of the round
    proc.wait()
    done_before = {(j["run"], j["kind"], j["candidate"]) for j in _gpu_jobs(tmp_path / "runs") if j["status"] == "done"}
    last = subprocess.run(_cli(tmp_path, "--resume", "latest"), env=_env(), text=True, capture_output=True,
                          timeout=500)
    assert last.returncode == 0, last.stderr[-2000:]
    jobs = [j for j in _gpu_jobs(tmp_path / "runs") if j["status"] == "done"]
    keys = [(j["run"], j["kind"], j["candidate"]) for j in jobs]
    twice = sorted({k for k in keys if keys.count(k) > 1 and k[1] == "evaluate"})
    print(f"pool-gpu-resume: {len(done_before)} jobs done before the kill, {len(keys)} in all; evaluated twice: {twice}")
    assert done_before and not twice


def test_a_batch_through_a_local_ray_cluster_one_actor_per_gpu(tmp_path):
    pytest.importorskip("ray")
    n = _gpus()
    if n < 2:
        pytest.skip("needs two GPUs or more")
    import json

    proc = subprocess.run(_cli(tmp_path, "softmax,gelu", *MANUAL, "--ray", "local"), env=_env(), text=True,
                          capture_output=True, timeout=500)
    assert proc.returncode == 3, proc.stderr[-2000:]
    state = json.loads(next((tmp_path / "runs" / "batches").glob("*/batch.json")).read_text())
    print(f"pool-gpu-ray: {len(state['gpus'])} actors {state['gpus']}; tasks {[t['status'] for t in state['tasks']]}")
    assert len(state["gpus"]) == n and all(t["status"] == "waiting" for t in state["tasks"])
    gpus = {j["gpu"] for j in _gpu_jobs(tmp_path / "runs")}
    assert gpus <= set(state["gpus"]) and gpus
