"""Throughput benchmark: candidates evaluated per GPU-hour, today's path against the GPU pool.

Scripted candidates, not an LLM: real softmax kernels (the loop benchmark's variants, each copy a distinct
source), all compiled before the clock starts (in a run the coders compile them while they write), then
evaluated (validated on every shape, timed at the benchmark shape) by each path:

- today: the plain evaluator (one GpuEvaluator), one candidate after another, as a run measured before the pool;
- pool-1: the GPU pool with one GPU (``--gpus 0``): its cost against today's path (target: at most 5%);
- pool-N: the pool over every GPU of the machine, each GPU's evaluator in a process of its own (the default):
  the rate per GPU against pool-1 (target: at least 0.9 x N the one-GPU rate in total);
- pool-N-threads: the same with every GPU's evaluator in this process's threads (what the pool did first), to
  show what the processes buy;
- ray: the pool through Ray actors on this machine (a local Ray cluster, one actor per GPU), where ray is
  installed; otherwise the row says "not installed".

today and pool-1 measure the same GPU one candidate after another, so they are compared candidate by candidate:
each candidate goes through both, back to back, the order alternating, for ``--rounds`` passes. The GPU's drift
(clocks, heat) then falls on both alike, and the cost comes with a 95% interval from the spread of the paired
differences; the pool's own work per job (its queue and thread hand-off) is measured apart, as each call's wall
time less the time the GPU's worker spent on it. pool-N and ray hand over every candidate at once, as a round
does, pass by pass (``--passes``), taking turns with each other (and with pool-1 when today's path is not
measured), each warmed up first. Each path gets its own fresh run cache (per round), so every evaluation is measured. The table
(throughput.md) also says, per kernel, how far the medians of the paths lie apart (the same kernels timed on
other GPUs and by other paths should agree within 2%).

    python benchmarks/throughput_bench.py --out bench-out                 # ~3 min on one H100
    python benchmarks/throughput_bench.py --out bench-out --candidates 24 --rounds 3 --modes today,pool-1
    python benchmarks/throughput_bench.py --out bench-out --candidates 24 --passes 2 --modes pool-1,pool-N
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from typing import Any
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = ("block-256", "naive-256", "block-32", "block-256-extra")
MODES = ("today", "pool-1", "pool-N", "pool-N-threads", "ray")
# plus pool-K / ray-K (K GPUs: 0..K-1), e.g. --modes pool-1,pool-2,pool-4,ray-1,ray-4 for the 1/2/4-GPU table
COUNTED = re.compile(r"(pool|ray)-(\d+)$")
# the mixed queue (--mix): besides the softmax variants, a slow kernel (the row read 16 times over), a kernel
# that never returns (the judge's timeout ends it) and one that does not compile, as a night's queue has
SLOW = """// variant: slow
#include <cuda_runtime.h>
#include <math.h>
__global__ void softmax_rows(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + (size_t)row * cols;
    float m = -INFINITY, s = 0.0f;
    for (int rep = 0; rep < 16; ++rep) { m = -INFINITY; for (int c = 0; c < cols; ++c) m = fmaxf(m, xr[c]); }
    for (int c = 0; c < cols; ++c) s += expf(xr[c] - m);
    for (int c = 0; c < cols; ++c) y[(size_t)row * cols + c] = expf(xr[c] - m) / s;
}
extern "C" void solve(const float* x, float* y, int rows, int cols) {
    softmax_rows<<<(rows + 127) / 128, 128>>>(x, y, rows, cols);
}
"""
HANG = """// variant: hang
#include <cuda_runtime.h>
__global__ void spin(float* y) { volatile float* p = y; for (;;) { p[0] = p[0] + 1.0f; } }
extern "C" void solve(const float* x, float* y, int rows, int cols) { spin<<<1, 1>>>(y); }
"""
BROKEN = """// variant: compile-error
#include <cuda_runtime.h>
extern "C" void solve(const float* x, float* y, int rows, int cols) { this does not compile; }
"""


def sources(n: int) -> list[tuple[str, str]]:
    """(candidate id, source): n real softmax kernels, cycling over the variants, each copy distinct."""
    from scripted_answers import kernel          # the loop benchmark's kernels

    text = {v: kernel(v) for v in VARIANTS}
    return [(f"t{i:02d}-{VARIANTS[i % len(VARIANTS)]}", text[VARIANTS[i % len(VARIANTS)]] + f"\n// copy {i}\n")
            for i in range(n)]


def mixed_sources(n: int) -> list[tuple[str, str]]:
    """n candidates: the softmax variants and a slow one, with one hang and one compile error among them (at a
    quarter and at half of the queue), each copy distinct."""
    base = sources(max(0, n - 2))
    extra = {"slow": SLOW}
    out = []
    for i, (cid, src) in enumerate(base):
        out.append((f"t{i:02d}-slow", SLOW + f"\n// copy {i}\n") if i % 5 == 4 and "slow" in extra else (cid, src))
    out.insert(len(out) // 4, ("x00-hang", HANG))
    out.insert(len(out) // 2, ("x01-compile-error", BROKEN))
    return out


def precompile(cands: list[tuple[str, str]], arch: str) -> None:
    from cuda_llm.tools.compiler.compile import compile_source

    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as ex:
        for (cid, _), comp in zip(cands, ex.map(lambda s: compile_source(s, arch=arch), [s for _, s in cands])):
            if not comp.ok and "compile-error" not in cid:
                raise SystemExit(f"a benchmark kernel does not compile: {comp.errors[:500]}")


def measure_ray_counted(modes: list[str], n_visible: int, options: Any, loaded: Any, cands: list, work: Path,
                        passes: int, log: Any, rows: list[dict], table_so_far: Any) -> None:
    """ray-K modes, each K actors on one local Ray cluster of max(K) GPUs, measured one after another (warm-up,
    passes, actors killed) so that each holds its GPUs alone; each row is added to ``rows`` and the table
    rewritten as it comes; the cluster is shut down at the end."""
    try:
        import ray

        from cuda_llm.measure.ray_slots import ray_pool
    except ImportError:
        rows += [{"mode": m, "status": "not installed (pip install -e '.[ray]')"} for m in modes]
        return
    from cuda_llm.measure.throughput import measure, measure_interleaved, pool_path

    want = [m for m in modes if int(COUNTED.match(m).group(2)) <= n_visible]
    rows += [{"mode": m, "status": f"not measured: {n_visible} GPU(s) here"} for m in modes if m not in want]
    if not want:
        return
    ray.init(num_gpus=max(int(COUNTED.match(m).group(2)) for m in want), log_to_driver=False,
             include_dashboard=False)
    try:
        for mode in want:
            pool = ray_pool("local", options=options, profile=False, actors=int(COUNTED.match(mode).group(2)),
                            start_timeout_s=120.0)
            try:
                path = pool_path(mode, pool)
                measure(path, loaded, cands[:path.gpus], work / f"warm-up-{mode}")
                path.calls.clear()
                path.events.clear()
                log(f"==== {mode}, {passes} pass(es), alone on the cluster")
                for r in measure_interleaved([path], loaded, cands, work, passes, progress=log):
                    rows.append(r)
                    log(json.dumps({k: v for k, v in r.items() if k not in ("medians", "statuses", "walls")}))
                    table_so_far()
            finally:
                pool.close()
    finally:
        ray.shutdown()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("bench-out"))
    p.add_argument("--candidates", type=int, default=12)
    p.add_argument("--rounds", type=int, default=1,
                   help="passes of today's path against pool-1, candidate by candidate (more: a tighter interval)")
    p.add_argument("--passes", type=int, default=1,
                   help="passes of each many-GPU path (pool-N, pool-N-threads, ray; pool-1 too when today is not "
                        "measured) over the candidates, taking turns")
    p.add_argument("--eval-time", type=float, default=2.0, help="timing budget per candidate (s)")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    p.add_argument("--task", default="softmax")
    p.add_argument("--mix", action="store_true",
                   help="a mixed queue: slow kernels, a hang and a compile error among the candidates")
    p.add_argument("--hang-timeout", type=float, default=20.0,
                   help="with --mix: the judge's timeout per evaluation (s), what a hang costs")
    args = p.parse_args(argv)
    from cuda_llm.measure.evaluator import GpuEvaluator
    from cuda_llm.measure.gpu_pool import local_pool
    from cuda_llm.measure.throughput import (MeasuredPath, measure, measure_interleaved, measure_paired, own_cost_ms,
                                           pair_cost, pool_path)
    from cuda_llm.report.throughput_report import write_table
    from cuda_llm.tasks import load_task
    from cuda_llm.tools.device.device_probe import cuda_device_count, has_cuda_device
    from cuda_llm.tools.harness.eval_options import EvalOptions
    from cuda_llm.tools.harness.timing_budget import TimingBudget

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES and not COUNTED.match(m)]
    if unknown:
        p.error(f"unknown mode {unknown[0]!r}; one of {', '.join(MODES)}")
    args.out.mkdir(parents=True, exist_ok=True)
    if not has_cuda_device():
        print("throughput_bench: no CUDA device here; run it on a GPU machine", file=sys.stderr)
        return 2
    n_visible = cuda_device_count()
    loaded = load_task(args.task)
    options = EvalOptions(budget=TimingBudget(time_budget_s=args.eval_time))     # every path measures with it
    if args.mix:
        options = options.model_copy(update={"timeout_s": args.hang_timeout})
    first = GpuEvaluator(options=options, profile=False, gpu=0)
    device = first.device.name if first.device else "?"
    cands = mixed_sources(args.candidates) if args.mix else sources(args.candidates)
    t0 = time.perf_counter()
    precompile(cands, first.arch)
    print(f"compiled {len(cands)} kernels in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    rows: list[dict] = []
    paired: dict | None = None
    log = lambda text: print(text, file=sys.stderr, flush=True)     # noqa: E731
    with tempfile.TemporaryDirectory(prefix="throughput-") as tmp:
        work = Path(tmp)
        # pool-1 is paired with today's path candidate by candidate; without today it takes turns with the
        # many-GPU paths pass by pass, so the N-GPU rate is compared with a one-GPU rate measured alongside
        paired_one = "pool-1" in modes and "today" in modes
        one = local_pool([0], options=options, profile=False) if paired_one else None
        try:
            single = [MeasuredPath("today", first, 1)] if "today" in modes else []
            if one is not None:
                single.append(pool_path("pool-1", one))
            for path in single:        # device facts, benchmark data, first loads: neither path starts cold
                measure(path, loaded, cands[:1], work / "warm-up")
                path.calls.clear()
                path.events.clear()
            if single:
                log("==== " + " against ".join(p.name for p in single) + f", {args.rounds} round(s)")
                rows += measure_paired(single, loaded, cands, work, args.rounds, progress=log)
            if len(single) == 2:
                base, pool1 = rows[-2], rows[-1]
                cost, half = pair_cost(base["walls"], pool1["walls"])
                paired = {"cost": round(cost, 5), "half": round(half, 5), "pairs": len(base["walls"]),
                          "rounds": args.rounds, "own_ms": [round(x, 3) for x in own_cost_ms(single[1])],
                          "base_walls": base["walls"]}
        finally:
            if one is not None:
                one.close()
        def table_so_far() -> None:       # a deadline that stops the bench still leaves the rows measured
            write_table(args.out, rows, device, n_visible, cands, args.eval_time, paired, VARIANTS)

        table_so_far()
        # Ray's counted modes (ray-1, ray-2, ...) run one after another on one local cluster: their actors each
        # hold a GPU, so ray-1 + ray-2 + ray-4 side by side would ask for 7 GPUs of 4 and wait forever
        ray_counted = [m for m in modes if (c := COUNTED.match(m)) and c.group(1) == "ray"]
        many: list[MeasuredPath] = []
        pools = []
        try:
            for mode in [m for m in modes if m in ("pool-N", "pool-N-threads", "ray")
                         or (COUNTED.match(m) and m not in ray_counted and not (m == "pool-1" and paired_one))]:
                counted = COUNTED.match(mode)
                if counted and int(counted.group(2)) > n_visible:
                    rows.append({"mode": mode, "status": f"not measured: {n_visible} GPU(s) here"})
                    continue
                if counted:
                    pool = local_pool(list(range(int(counted.group(2)))), options=options, profile=False)
                elif mode == "pool-1":
                    pool = local_pool([0], options=options, profile=False)
                elif mode.startswith("pool-N"):
                    if n_visible < 2:
                        rows.append({"mode": mode, "status": "not measured: one GPU"})
                        continue
                    pool = local_pool(None, options=options, profile=False,
                                      processes=mode == "pool-N")
                else:
                    try:
                        from cuda_llm.measure.ray_slots import ray_pool
                    except ImportError:
                        rows.append({"mode": mode, "status": "not installed (pip install -e '.[ray]')"})
                        continue
                    pool = ray_pool("local", options=options, profile=False,
                                    init={"num_gpus": n_visible})
                pools.append(pool)
                many.append(pool_path(mode, pool))
            for path in many:         # each slot's first load of the task and its benchmark data, before the clock
                measure(path, loaded, cands[:path.gpus], work / f"warm-up-{path.name}")
                path.calls.clear()
                path.events.clear()
            if many:
                log("==== " + ", ".join(p.name for p in many) + f", {args.passes} pass(es) each, taking turns")
                for r in measure_interleaved(many, loaded, cands, work, args.passes, progress=log):
                    rows.append(r)
                    log(json.dumps({k: v for k, v in r.items() if k not in ("medians", "statuses", "walls")}))
                    table_so_far()
        finally:
            for pool in pools:
                pool.close()
        if ray_counted:
            measure_ray_counted(ray_counted, n_visible, options, loaded, cands, work, args.passes, log, rows,
                                table_so_far)
    print(write_table(args.out, rows, device, n_visible, cands, args.eval_time, paired, VARIANTS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
