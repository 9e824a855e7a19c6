"""The harness on a real GPU: every adversarial kernel gets its expected status (the memo kernels too), every
naive baseline passes its task, timing is sane, a hang or a fault leaves the next evaluation working, and a
candidate that gets past the static checks and rewrites the worker's Python state, or ends the process,
cannot change the verdict.

Budget (the whole `pytest -m gpu` must fit 5 minutes on an H100): one evaluation per kernel, timing only
where the trick needs it (`// needs: timing`), short timing budgets, and the naive baselines untimed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cuda_llm.tools.harness.judge import validation_cases

from cuda_llm.tasks import list_task_names, load_task
from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate
from cuda_llm.tools.harness.timing_budget import TimingBudget
from cuda_llm.results import Status
from adversarial_kernels import ADV, RUNTIME, build_without_checks, expected, header
from test_suite_first8 import FIRST8

pytestmark = pytest.mark.gpu



ON_GPU = sorted(p for p in ADV.glob("*.cu")
                if not expected(p) <= {Status.static_error, Status.compile_error})


def _naive_still_works() -> None:
    loaded = load_task("gelu")
    res = evaluate_candidate(loaded, loaded.task.baseline_path.read_text(), candidate="after",
                             options=EvalOptions(timing=False, seed=5))
    assert res.status == Status.ok, res.message


QUICK_TIMING = dict(budget=TimingBudget(time_budget_s=1.0, min_time_s=0.1, max_reps=60), seed=3)


@pytest.mark.parametrize("path", ON_GPU, ids=lambda p: p.stem)
def test_adversarial_kernel_is_caught(path: Path, tmp_path: Path) -> None:
    h = header(path)
    loaded = load_task(h["task"])
    want = expected(path)
    timeout = 4.0 if Status.timeout in want else 120.0      # the limit counts only while the judge waits
    res = evaluate_candidate(loaded, path.read_text(), candidate=path.name, work_dir=tmp_path,
                             options=EvalOptions(**QUICK_TIMING, timeout_s=timeout, timing=h.get("needs") == "timing"))
    print(f"{path.name}: {res.status.value}: {res.message}")
    report = tmp_path / "eval_result.json"
    if report.exists():                # where the time of this test goes (the GPU tier has a 5-minute budget)
        print(f"{path.name}: {res.seconds:.2f} s, costs {json.loads(report.read_text()).get('costs')}")
    assert res.status in want, f"{path.name}: got {res.status.value}: {res.message}"
    assert not (res.status == Status.ok), "an adversarial kernel must never pass"
    if h.get("reason"):
        assert h["reason"] in res.message, res.message
    if h.get("held_out") == "true" and res.validation is not None:
        bad = res.validation.first_failure()
        assert bad is not None and bad.held_out, "only a held-out shape should expose this kernel"
        assert str(bad.sizes) not in res.message, "held-out sizes must not leak into messages"
    if res.status in (Status.timeout, Status.runtime_error):
        _naive_still_works()


@pytest.mark.parametrize("name", [n for n in list_task_names() if n not in FIRST8])
def test_naive_baseline_passes_its_task(name: str) -> None:
    """Every shape, untimed. The first eight tasks' naive kernels are judged whole, timing included, in
    tests/test_suite_first8.py (every shape checked there too)."""
    loaded = load_task(name)
    res = evaluate_candidate(loaded, loaded.task.baseline_path.read_text(), candidate="naive",
                             options=EvalOptions(timing=False, seed=11))
    assert res.status == Status.ok, f"{name}: {res.message}"
    assert res.validation is not None and res.validation.n_passed == len(validation_cases(loaded, True))


def test_timing_is_sane_repeatable_and_converges() -> None:
    from cuda_llm.tools.harness.device_info import get_device_info

    dev = get_device_info()
    assert dev is not None and dev.peak_bandwidth_gbs and dev.peak_bandwidth_gbs > 100
    assert dev.l2_bytes > 0 and dev.sm_count > 0
    loaded = load_task("gelu")
    src = loaded.task.baseline_path.read_text()
    medians = []
    for seed in (1, 2):
        res = evaluate_candidate(loaded, src, candidate="naive", options=EvalOptions(budget=TimingBudget(time_budget_s=2.0), seed=seed))
        assert res.status == Status.ok, res.message
        t = res.timing
        assert t is not None and t.repetitions >= 10 and len(t.samples_ms) == t.repetitions
        assert t.sizes == loaded.task.benchmark
        assert t.min_ms <= t.median_ms <= max(t.samples_ms)
        assert t.host_median_ms is not None and t.host_median_ms >= 0.9 * t.median_ms
        assert t.sol_ms is not None and t.median_ms >= 0.8 * t.sol_ms
        assert 1.0 < t.pct_of_sol <= 125.0
        assert t.rse <= 0.02, f"rse {t.rse:.3%} after {t.repetitions} reps ({t.stop_reason})"
        assert res.revalidation is not None and res.revalidation.passed
        medians.append(t.median_ms)
    assert abs(medians[0] - medians[1]) / min(medians) < 0.10, medians


def test_run_once_for_the_profiler(tmp_path: Path) -> None:
    from cuda_llm.tools.compiler.compile import compile_source
    from cuda_llm.tools.harness.runner import run_worker

    loaded = load_task("gelu")
    comp = compile_source(loaded.task.baseline_path.read_text())
    assert comp.ok
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"so_path": comp.so_path, "task_folder": str(loaded.task.folder),
                               "sizes": {"n": 100000}, "seed": 0, "repeat": 3}))
    out = run_worker(["run-once", "--request", str(req)], timeout_s=60)
    assert out.rc == 0, out.stderr


def test_l2_flush_keeps_a_cache_sized_benchmark_at_dram_speed(tmp_path: Path) -> None:
    """gelu at a benchmark shape that fits in L2 (16 MiB in + 16 MiB out on a 50 MiB L2): without the flush
    before every call, x would be read from L2 and the effective bandwidth would exceed DRAM's. With it, the
    naive kernel stays at or below the measured copy bandwidth (the speed-of-light bound)."""
    import shutil

    from cuda_llm.tools.harness.device_info import get_device_info

    dev = get_device_info()
    assert dev is not None and dev.l2_bytes > 0 and dev.peak_bandwidth_gbs, dev
    n = 1 << 22
    assert 8 * n < dev.l2_bytes, "the shape must fit in L2 for this test to mean anything"
    src_folder = load_task("gelu").task.folder
    folder = tmp_path / "gelu"
    shutil.copytree(src_folder, folder)
    toml = (folder / "task.toml").read_text()
    bench = re.search(r"\[benchmark\]\s*\nn = \d+", toml)
    assert bench is not None
    (folder / "task.toml").write_text(toml.replace(bench.group(0), f"[benchmark]\nn = {n}"))
    loaded = load_task(folder)
    assert loaded.task.benchmark == {"n": n}
    res = evaluate_candidate(loaded, loaded.task.baseline_path.read_text(), candidate="naive",
                             options=EvalOptions(budget=TimingBudget(time_budget_s=2.0), seed=6, held_out=False))
    assert res.status == Status.ok, res.message       # suspect would mean: faster than DRAM allows
    t = res.timing
    assert t is not None and t.sizes == {"n": n} and t.median_ms > 0 and t.sol_ms and t.pct_of_sol
    gbs = 8 * n / (t.median_ms * 1e-3) / 1e9
    print(f"\ngelu n={n}: median {t.median_ms * 1e3:.1f} us, {gbs:.0f} GB/s effective, "
          f"peak copy {dev.peak_bandwidth_gbs:.0f} GB/s, {t.pct_of_sol:.0f}% of speed of light")
    assert gbs <= 1.15 * dev.peak_bandwidth_gbs, "timed calls were served from L2: the flush is not effective"
    assert t.min_ms >= 0.8 * t.sol_ms


def test_eval_command_on_the_gpu(capsys) -> None:
    from cuda_llm.cli import main

    naive = load_task("gelu").task.baseline_path
    rc = main(["eval", "gelu", str(naive), "--eval-time", "1", "--seed", "9"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "status           ok" in out or re.search(r"status\s+ok", out), out
    m = re.search(r"speedup vs naive\s+([0-9.]+)x", out)
    assert m is not None and 0.8 < float(m.group(1)) < 1.25, out    # the naive kernel against itself
    assert re.search(r"speed of light\s+[0-9.]+%", out), out
    rc = main(["eval", "gelu", str(ADV / "off_by_one.cu"), "--eval-time", "1", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1 and data["status"] == "wrong_answer"


# ------------------------------------------------------------------------------ the judge's runtime
@pytest.mark.parametrize("name", ["sgemm", "hgemm"])
def test_an_honest_gemm_passes_the_varied_timing_loop(name: str, tmp_path: Path) -> None:
    """The naive GEMMs through the whole loop (three input sets in the same buffers, kept outputs, the
    parent's clock): ok, not suspect. The memo kernels for the same tasks are adversarial kernels above."""
    from cuda_llm.tools.harness.worker_protocol import EvaluateResponse

    loaded = load_task(name)
    res = evaluate_candidate(loaded, loaded.task.baseline_path.read_text(), candidate="naive",
                             options=EvalOptions(budget=TimingBudget(time_budget_s=1.0, min_time_s=0.1), seed=12), work_dir=tmp_path)
    assert res.status == Status.ok, res.message
    resp = EvaluateResponse.model_validate_json((tmp_path / "eval_result.json").read_text())
    assert resp.clock is not None and resp.clock.issues == [] and resp.clock.calls == res.timing.repetitions
    print(f"\n{name}: {res.timing.median_ms:.3f} ms, parent clock per call {resp.clock.parent_solve_ms:.3f} ms, "
          f"costs {resp.costs}")


@pytest.mark.parametrize("path", RUNTIME, ids=lambda p: p.stem)
def test_runtime_only_candidates_get_their_verdict(path: Path, tmp_path: Path) -> None:
    """Built without the static and symbol checks on purpose (they refuse dlsym and exit before any GPU
    work): tampering with the worker's Python state cannot change the verdict, forged event times are
    caught by the parent's clock, and an exit is a runtime_error that says so."""
    from cuda_llm.tools.harness.evaluate import run_compiled

    h = header(path)
    loaded = load_task(h["task"])
    so = build_without_checks(path, tmp_path)
    res = run_compiled(loaded, str(so), source=path.read_text(), candidate=path.name,
                       options=EvalOptions(**QUICK_TIMING), work_dir=tmp_path / "work")
    print(f"{path.name}: {res.status.value}: {res.message}")
    assert res.status in expected(path), res.message
    assert h["reason"] in res.message, res.message
    if res.status == Status.runtime_error:   # exit(3) runs the CUDA teardown, which may abort: either is named
        assert "ended the worker process" in res.message and ("exit code 3" in res.message or "SIGABRT" in res.message)
        _naive_still_works()


def test_the_worker_is_pinned_to_the_gpu_it_was_given(tmp_path: Path) -> None:
    from cuda_llm.tools.device.device_probe import cuda_device_count

    loaded = load_task("gelu")
    last = cuda_device_count() - 1
    res = evaluate_candidate(loaded, loaded.task.baseline_path.read_text(), candidate="naive",
                             options=EvalOptions(timing=False, seed=5, gpu=last), work_dir=tmp_path)
    assert res.status == Status.ok, res.message
    with pytest.raises(ValueError, match="not visible"):
        evaluate_candidate(loaded, loaded.task.baseline_path.read_text(), options=EvalOptions(gpu=last + 1))


HANGS_IN_THE_TIMED_LOOP = """\
#include <cuda_runtime.h>

__global__ void gelu_kernel(const float* x, float* y, int n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}

__global__ void spin(float* y) {
    volatile float* p = y;
    for (;;) {
        p[0] = p[0] + 1.0f;
    }
}

int calls_at_the_largest_size = 0;
int largest_size = 0;

extern "C" void solve(const float* x, float* y, int n) {
    if (n <= 0) return;
    if (n > largest_size) { largest_size = n; calls_at_the_largest_size = 0; }
    if (n == largest_size && ++calls_at_the_largest_size == 6) { spin<<<1, 1>>>(y); return; }
    gelu_kernel<<<(n - 1) / 256 + 1, 256>>>(x, y, n);
}
"""


def test_a_hanging_kernel_is_killed_at_the_limit_of_one_call(tmp_path: Path) -> None:
    """A kernel correct on every case that never ends on a later call at the benchmark shape (in the timed
    loop) is killed at max(1 s, 20x the naive kernel's time there), not at the evaluation's 120 s, and the
    message names that limit; the next evaluation works."""
    import time

    from cuda_llm.tools.harness.timing_budget import call_limit_s
    from cuda_llm.tools.harness.evaluate import baseline_result

    loaded = load_task("gelu")
    naive = baseline_result(loaded, "naive", EvalOptions(**QUICK_TIMING))     # cached per device, as a run's setup
    assert naive is not None and naive.status == Status.ok and naive.timing is not None, naive
    limit = call_limit_s(naive.timing.median_ms)
    from cuda_llm.tools.compiler.compile import compile_source, resolve_arch

    assert compile_source(HANGS_IN_THE_TIMED_LOOP, arch=resolve_arch(None)).ok     # built before the clock starts
    t0 = time.perf_counter()
    res = evaluate_candidate(loaded, HANGS_IN_THE_TIMED_LOOP, candidate="hangs_in_loop", work_dir=tmp_path,
                             options=EvalOptions(**QUICK_TIMING, timeout_s=120.0))
    wall = time.perf_counter() - t0
    print(f"limit {limit:.3g} s (naive {naive.timing.median_ms:.4g} ms); {wall:.1f} s: {res.status.value}: {res.message}")
    assert res.status == Status.timeout, res.message
    assert f"the limit for one call, {limit:.3g} s, max(1 s, 20x the naive kernel's" in res.message
    assert "during the timed calls" in res.message
    assert wall < limit + 30, wall          # start-up, compile and validation, then the limit: far below 120 s
    _naive_still_works()
