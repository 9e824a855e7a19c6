"""Faults of a night on several GPUs, on the GPU machine (gpu_long; the `scale` step of benchmarks/run_gpu.sh):
a GPU's worker killed with SIGKILL in the middle of a timed evaluation (its candidate is measured again on
another GPU, every other candidate once, the pool goes on with the GPUs left), and a run asked for a GPU that
is not there (one clear line, nothing started). The batch process killed and resumed is tests/test_batch.py's
kill test (the pool is the same code with test GPUs).
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
sys.path.insert(0, str(ROOT / "benchmarks"))


def _gpus() -> int:
    from cuda_llm.tools.device.device_probe import cuda_device_count, has_cuda_device

    return cuda_device_count() if has_cuda_device() else 0


def test_a_worker_killed_mid_evaluation_is_measured_again_elsewhere(tmp_path):
    n = _gpus()
    if n < 2:
        pytest.skip("needs two GPUs or more")
    import throughput_bench

    from cuda_llm.measure.gpu_pool import local_pool
    from cuda_llm.tasks import load_task
    from cuda_llm.tools.harness.eval_options import EvalOptions
    from cuda_llm.tools.harness.timing_budget import TimingBudget

    loaded = load_task("softmax")
    cands = throughput_bench.sources(4 * n)
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
