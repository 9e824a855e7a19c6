"""The judge keeps up with a strong model, on the GPU (tests/adversarial/scale/): a float32 task is correct only
if the kernel is right at the magnitudes its inputs declare, and every timed call's output is checked.

- Kernels right only for the test draw (an fp16 split without scaling, a softmax shifted by the row's first
  element, a sum kept in fp16) fail on the held-out cases scaled to the ends of the range, and the message
  names the scale; their counterparts that scale their own inputs, a 3xTF32 GEMM and a sum made with float
  atomics (different rounding on every call) pass.
- Memos that replay the previous call's output on every 2nd, 10th or 100th call are caught 20 of 20 over
  schedule seeds.
- A kernel that never returns costs at most 5 s of evaluation; one 10x slower than the naive kernel is
  timed, not killed.
Each evaluation runs on its own GPU where there are several (a thread per GPU)."""

from __future__ import annotations

import re
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from queue import Queue

import pytest

from adversarial_kernels import ADV, expected, header
from cuda_llm.results import Status
from cuda_llm.tasks import load_task
from cuda_llm.tools.device.device_probe import has_cuda_device
from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate
from cuda_llm.tools.harness.timing_budget import TimingBudget

pytestmark = [pytest.mark.gpu_long,
              pytest.mark.skipif(not has_cuda_device(), reason="needs a CUDA device")]

SCALE = ADV / "scale"
RANGE_KERNELS = sorted(p for p in SCALE.glob("*.cu") if "replay" not in p.stem)
REPLAYS = sorted(SCALE.glob("*replay_every_*.cu"))
QUICK = TimingBudget(time_budget_s=1.0, min_time_s=0.1, max_reps=60)
SEEDS = 20


def _gpus() -> list[int]:
    """The GPUs this process sees (CUDA_VISIBLE_DEVICES where it is set), by index."""
    from cuda_llm.tools.device import device_probe
    from cuda_llm.tools.harness.runner import visible_devices
    seen = visible_devices()
    return list(range(len(seen) if seen is not None else max(1, device_probe.cuda_device_count() or 1)))


def _on_gpus(jobs: list, run) -> list:
    """``run(job, gpu)`` for every job, one thread per GPU, each evaluation pinned to its GPU."""
    free: Queue[int] = Queue()
    gpus = _gpus()
    for g in gpus:
        free.put(g)

    def one(job):
        g = free.get()
        try:
            return run(job, g)
        finally:
            free.put(g)
    with ThreadPoolExecutor(max_workers=len(gpus)) as pool:
        return list(pool.map(one, jobs))


@pytest.fixture(scope="module")
def gelu_1m(tmp_path_factory) -> Path:
    """gelu with a benchmark of 1M elements: hundreds of timed calls in a second."""
    folder = tmp_path_factory.mktemp("tasks") / "gelu"
    shutil.copytree(load_task("gelu").task.folder, folder)
    toml = (folder / "task.toml").read_text()
    (folder / "task.toml").write_text(re.sub(r"\[benchmark\]\s*\nn = \d+", "[benchmark]\nn = 1048576", toml))
    return folder


@pytest.mark.parametrize("path", RANGE_KERNELS, ids=lambda p: p.stem)
def test_range_kernels_are_judged_at_the_dtype_s_range(path: Path, tmp_path: Path) -> None:
    head = header(path)
    res = evaluate_candidate(load_task(head["task"]), path.read_text(), candidate=path.stem, work_dir=tmp_path,
                             options=EvalOptions(budget=QUICK, seed=5))
    print(f"{path.stem}: {res.status.value}: {res.message}")
    assert res.status in expected(path), res.message
    if Status.wrong_answer in expected(path):
        assert "a held-out shape with inputs scaled by 2^" in res.message, res.message
    else:
        assert res.timing is not None and res.timing.every_call_checked, res.timing


@pytest.mark.parametrize("path", REPLAYS, ids=lambda p: p.stem)
def test_a_memo_replaying_one_call_in_p_is_caught_on_every_schedule(path: Path, gelu_1m: Path,
                                                                     tmp_path: Path) -> None:
    period = int(path.stem.rsplit("_", 1)[-1])
    budget = TimingBudget(time_budget_s=5.0, min_time_s=0.0, min_reps=max(20, 5 * period), max_reps=max(40, 5 * period))
    loaded = load_task(gelu_1m)

    def run(seed: int, gpu: int):
        res = evaluate_candidate(loaded, path.read_text(), candidate=f"{path.stem}-{seed}", work_dir=tmp_path / str(seed),
                                 options=EvalOptions(budget=budget, seed=seed, gpu=gpu))
        return seed, res.status, res.message
    results = _on_gpus(list(range(SEEDS)), run)
    caught = [s for s, status, _ in results if status == Status.wrong_answer]
    for s, status, msg in results:
        print(f"seed {s}: {status.value}: {msg}")
    print(f"{path.stem}: caught {len(caught)} of {SEEDS}")
    assert len(caught) == SEEDS, [r for r in results if r[1] != Status.wrong_answer]
    assert all("timed call" in m or "after" in m for _, _, m in results), results


def test_an_honest_kernel_with_call_to_call_rounding_is_never_flagged(tmp_path: Path) -> None:
    path = SCALE / "reduce_sum_atomic.cu"
    loaded = load_task("reduce_sum")
    budget = TimingBudget(time_budget_s=1.0, min_time_s=0.0, min_reps=50, max_reps=80)

    def run(seed: int, gpu: int):
        res = evaluate_candidate(loaded, path.read_text(), candidate=f"atomic-{seed}", work_dir=tmp_path / str(seed),
                                 options=EvalOptions(budget=budget, seed=seed, gpu=gpu))
        return res.status, res.message, res.timing.every_call_checked if res.timing else None
    results = _on_gpus(list(range(8)), run)
    assert all(status == Status.ok and checked for status, _, checked in results), results


HANG = r"""
#include <cuda_runtime.h>
__global__ void spin(volatile int* flag) { while (*flag == 0) { } }
__global__ void gelu(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))); }
}
extern "C" void solve(const float* x, float* y, int n) {
    static int* flag = 0;
    if (!flag) { cudaMalloc(&flag, sizeof(int)); cudaMemset(flag, 0, sizeof(int)); }
    if (n > 100000) spin<<<1, 1>>>(flag);           // at the benchmark shape: never returns
    gelu<<<(n + 255) / 256, 256>>>(x, y, n);
}
"""

SLOW_10X = r"""
#include <cuda_runtime.h>
// The naive kernel's work done ten times over (each pass rewrites the same output).
__global__ void gelu(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))); }
}
extern "C" void solve(const float* x, float* y, int n) {
    for (int r = 0; r < 10; ++r) gelu<<<(n + 255) / 256, 256>>>(x, y, n);
}
"""


def test_a_hang_costs_seconds_and_a_slow_kernel_is_timed(tmp_path: Path) -> None:
    from cuda_llm.tools.compiler.compile import compile_source, resolve_arch
    from cuda_llm.tools.harness.evaluate import baseline_result

    loaded = load_task("gelu")
    naive = baseline_result(loaded, "naive", EvalOptions(budget=QUICK, seed=3))   # the call limit comes from it
    assert naive is not None and naive.timing is not None
    for src in (HANG, SLOW_10X):
        assert compile_source(src, arch=resolve_arch(None)).ok            # built before the clock starts
    t0 = time.perf_counter()
    hang = evaluate_candidate(loaded, HANG, candidate="hang", work_dir=tmp_path / "hang",
                              options=EvalOptions(budget=QUICK, seed=3))
    wall = time.perf_counter() - t0
    print(f"hang: {wall:.2f} s in all: {hang.status.value}: {hang.message}")
    assert hang.status == Status.timeout, hang.message
    assert wall <= 5.0, wall
    slow = evaluate_candidate(loaded, SLOW_10X, candidate="slow", work_dir=tmp_path / "slow",
                              options=EvalOptions(budget=QUICK, seed=3))
    print(f"10x slower: {slow.status.value}: {slow.message}")
    assert slow.status == Status.ok and slow.timing is not None, slow.message
    assert slow.timing.median_ms > 5 * naive.timing.median_ms
