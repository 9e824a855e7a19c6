"""`cuda-llm tune TASK KERNEL.cu`: search a kernel's declared tunable constants, with no LLM at all.

The kernel declares what may change (``// cuda-llm: tune BLOCK 128 256 512`` before ``#define BLOCK 256``
or ``constexpr int BLOCK = 256;``); every point is the kernel with those values written in, compiled in
parallel and judged by the harness exactly as ``cuda-llm eval`` judges a kernel (every correctness case,
then timing), on a GPU pool of this machine's GPUs (``--gpus``): one point per GPU at a time, as many at once
as there are GPUs. The fastest passing point is written out. Exit codes: 0 a point passed (and was written);
1 no point passed; 2 bad usage, unusable directives, no CUDA device (the points are still compiled), or GPU
workers that failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from cuda_llm.commands import one_line_errors
from cuda_llm.commands.flags import check_gpus_arg, parse_count, parse_duration, parse_gpus_arg, timing_budget
from cuda_llm.tools.harness.eval_options import EvalOptions

HELP = "tune a kernel's declared constants (// cuda-llm: tune NAME values), no LLM needed"
DESCRIPTION = """Search the tunable constants that KERNEL.cu declares and write the fastest correct point.

Declare a tunable on the line before its definition:

    // cuda-llm: tune BLOCK_M 64 128 256
    #define BLOCK_M 128
    // cuda-llm: tune ITEMS 2 4 8
    constexpr int ITEMS = 4;

Points are compiled in parallel (--jobs), then each is tested on every correctness shape and timed like
`cuda-llm eval`, within --max-evals timed points and --time-budget seconds. With several GPUs (--gpus,
default all) as many points are measured at once as there are GPUs, never two on one GPU; the points tried
are the same as with one GPU for the same --seed (when --jobs is at least the number of GPUs). The search
is Optuna's: every point in random order when the space fits in --max-evals, else TPE. Points that do not compile
(use static_assert to rule out combinations) are listed and cost no evaluation. The values as written
are measured first, so the result is never slower than the kernel given.

Without a CUDA device every point is still compiled and listed; the command then exits with 2.

Examples:
  cuda-llm tune sgemm gemm_tiled.cu
  cuda-llm tune reduce_sum reduce.cu --max-evals 40 --time-budget 300 --out reduce.best.cu
  cuda-llm tune transpose transpose.cu --json > points.json
  cuda-llm tune sgemm gemm_tiled.cu --gpus 0,1,2,3"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("task", help="task name (see `cuda-llm tasks`) or a task folder")
    p.add_argument("kernel", type=Path, help="the CUDA source with `// cuda-llm: tune NAME v1 v2 ...` directives")
    p.add_argument("--out", type=Path, default=None,
                   help="where the best point's source goes (default: KERNEL with .tuned.cu beside it)")
    p.add_argument("--max-evals", type=parse_count("points"), default=24, metavar="N",
                   help="timed points at most (default 24)")
    p.add_argument("--time-budget", type=parse_duration, default=600.0, metavar="DURATION",
                   help="wall-clock time for the whole search, compiles included, e.g. 600 or 10m (default 10m)")
    p.add_argument("--eval-time-budget", dest="eval_time", type=parse_duration, default=3.0, metavar="DURATION",
                   help="timing repetitions per point, e.g. 3s (default 3s)")
    p.add_argument("--timeout", type=parse_duration, default=120.0, metavar="DURATION",
                   help="time before a hanging point is killed (default 120s)")
    p.add_argument("--jobs", type=parse_count("jobs"), default=None, metavar="N",
                   help="points compiled in parallel (default: the number of CPUs)")
    p.add_argument("--gpus", type=parse_gpus_arg, default=None, metavar="0,1,2,3",
                   help="the GPUs that measure points, one point each at a time (indices among the visible GPUs; "
                        "default: all)")
    p.add_argument("--sampler", choices=["auto", "grid", "tpe", "random"], default="auto",
                   help="auto: every point when they fit in --max-evals, else TPE (default)")
    p.add_argument("--seed", type=int, default=0, help="the sampler's seed (default 0)")
    p.add_argument("--arch", help="GPU architecture for nvcc, e.g. sm_90 (default: the local GPU, else sm_90)")
    p.add_argument("--no-held-out", action="store_true", help="skip the held-out shapes (faster, weaker)")
    p.add_argument("--json", action="store_true", help="print every point and the best as JSON")
    p.add_argument("--tasks-dir", type=Path, action="append", default=[], help="extra folder of tasks")


def _err(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)


def _progress(msg: str) -> None:
    print(f"[tune] {msg}", file=sys.stderr, flush=True)


def default_out(kernel: Path) -> Path:
    name = kernel.name[:-3] if kernel.name.endswith(".cu") else kernel.name
    return kernel.with_name(f"{name}.tuned.cu")


def run(args: argparse.Namespace) -> int:
    from cuda_llm.commands.task_kernel import ArgumentProblem, load_task_argument, read_kernel_argument
    from cuda_llm.tools.tune.tuning import TuneBudget, TuneSpaceError, parse_tunables, space_size

    kernel: Path = args.kernel
    try:
        loaded = load_task_argument(args.task, args.tasks_dir)
        source = read_kernel_argument(kernel, loaded)
    except ArgumentProblem as exc:
        _err(str(exc))
        return 2
    bad_gpus = check_gpus_arg(args.gpus, preflight=False)    # without a device the points are only compiled
    if bad_gpus:
        _err(bad_gpus)
        return 2
    try:
        tunables = parse_tunables(source)
    except TuneSpaceError as exc:
        _err(f"{kernel}: {exc}")
        return 2
    if not tunables:
        _err(f"{kernel} declares no tunable constants. Put `// cuda-llm: tune NAME v1 v2 ...` on the line "
             f"before `#define NAME v` or `constexpr int NAME = v;` (see `cuda-llm tune --help`)")
        return 2

    from cuda_llm.tools.compiler.compile import CompileSetupError, compile_many, resolve_arch
    from cuda_llm.tools.device.device_probe import has_cuda_device

    try:
        arch = resolve_arch(args.arch)
    except (ValueError, CompileSetupError) as exc:
        _err(str(exc))
        return 2
    jobs = args.jobs or os.cpu_count() or 1
    out_path = args.out or default_out(kernel)
    budget = TuneBudget(max_evals=args.max_evals, max_seconds=args.time_budget, jobs=jobs, seed=args.seed,
                        sampler=args.sampler)
    names = ", ".join(f"{t.name} ({len(t.values)})" for t in tunables)
    _progress(f"{loaded.name}: {kernel}: {names}: {space_size(tunables)} points, for {arch}")
    try:
        if not has_cuda_device():
            return _compile_only(source, tunables, arch, jobs, args.json)
        try:
            pool = point_pool(args, arch)
        except (ValueError, RuntimeError) as exc:    # GPUs of two models, a device that cannot be measured
            _err(str(exc))
            return 2
        from cuda_llm.measure.gpu_pool import EvaluationLost

        with pool:
            try:
                outcome = _search(loaded, source, tunables, budget, pool, arch, compile_many)
            except EvaluationLost as exc:      # the harness's workers failed, twice (never a bad kernel)
                _err(f"measuring stopped: {exc.what}; check the GPUs (`nvidia-smi`, `cuda-llm doctor`)")
                return 2
    except CompileSetupError as exc:
        _err(str(exc))
        return 2
    if outcome.best is not None:
        from cuda_llm.tools.tune.tuning import apply_point

        out_path.write_text(apply_point(source, tunables, outcome.best.params))
    if args.json:
        payload = outcome.model_dump(mode="json")
        payload["out"] = str(out_path) if outcome.best is not None else None
        print(json.dumps(payload, indent=2))
    else:
        print(render_points(outcome))
        print()
        if outcome.best is not None:
            print(f"{outcome.summary()}\nwritten to {out_path}")
        else:
            print(f"no point passed; {outcome.summary()}")
    return 0 if outcome.best is not None else 1


def point_pool(args: argparse.Namespace, arch: str) -> Any:
    """The GPUs that measure points (--gpus, default all): one harness worker pinned to each, judging a point
    as `cuda-llm eval` does, with this command's timing budget, timeout, input seed and held-out shapes."""
    from cuda_llm.measure.gpu_pool import local_pool

    options = EvalOptions(arch=arch, budget=timing_budget(args), timeout_s=args.timeout, seed=args.seed,
                          held_out=not args.no_held_out)
    return local_pool(args.gpus, options=options, profile=False)


def _search(loaded: Any, source: str, tunables: Any, budget: Any, pool: Any, arch: str, compile_many: Any) -> Any:
    from cuda_llm.tools.tune.tuning import point_text, search

    where: dict[str, str] = {}           # point -> the GPU that measured it (the pool's job events)
    several = len(pool.labels) > 1

    def compile_batch(sources: list[str]) -> list[Any]:
        return compile_many(sources, jobs=budget.jobs, arch=arch)

    def on_job(event: str, **fields: Any) -> None:
        if fields.get("status") == "done":
            where[str(fields.get("candidate"))] = str(fields.get("gpu"))

    def measure(src: str, point: Any) -> Any:
        name = f"point{point.index}"
        return pool.run("evaluate", loaded, src, name, None, candidate=name, on_event=on_job)

    def on_point(p: Any) -> None:
        ms = f"{p.ms:.4g} ms" if p.ms is not None else p.status
        gpu = where.get(f"point{p.index}")
        _progress(f"#{p.index} {point_text(p.params)}: {ms}" + (f" (GPU {gpu})" if several and gpu else ""))

    return search(source, tunables, compile_batch=compile_batch, measure=measure, budget=budget, on_point=on_point,
                  workers=pool.parallelism)


def _compile_only(source: str, tunables: Any, arch: str, jobs: int, as_json: bool) -> int:
    """No device: compile every point (up to a few hundred) and say which would be timed."""
    from cuda_llm.tools.compiler.compile import compile_many, source_hash
    from cuda_llm.tools.harness.evaluate import NO_DEVICE_MESSAGE
    from cuda_llm.tools.tune.tuning import TuneOutcome, TunePoint, all_points, apply_point, space_size

    points = all_points(tunables, limit=256)
    sources = [apply_point(source, tunables, p) for p in points]
    results = compile_many(sources, jobs=jobs, arch=arch)
    outcome = TuneOutcome(tunables=list(tunables), space_size=space_size(tunables), sampler="compile only",
                          stop_reason="no_device")
    for i, (p, src, comp) in enumerate(zip(points, sources, results)):
        errors = " ".join((comp.errors or "").split())[:200]
        outcome.points.append(TunePoint(index=i, params=p, source_hash=source_hash(src),
                                        status="no_device" if comp.ok else "compile_error", note=errors))
        outcome.invalid += 0 if comp.ok else 1
    if as_json:
        print(json.dumps(outcome.model_dump(mode="json"), indent=2))
    else:
        print(render_points(outcome))
        more = f" (the first {len(points)} of {outcome.space_size})" if outcome.space_size > len(points) else ""
        print(f"\n{len(points) - outcome.invalid} of {len(points)} points compiled{more}; {NO_DEVICE_MESSAGE}")
    return 2


def render_points(outcome: Any) -> str:
    """The table of points, in the order they were tried; the best marked with '*'."""
    from cuda_llm.report.formats import fmt_ms, render_table

    names = [t.name for t in outcome.tunables]
    best = outcome.best.index if outcome.best is not None else None
    rows = []
    for p in outcome.points:
        mark = "*" if p.index == best else ""
        pct = f"{p.pct_of_sol:.0f}" if p.pct_of_sol is not None else "-"
        rows.append([f"{p.index}{mark}", *[p.params.get(n, "") for n in names], p.status, fmt_ms(p.ms), pct, p.note[:70]])
    from cuda_llm.tools.bounds.speed_of_light import SOL_NOTE

    return render_table(["#", *names, "status", "ms", "% SOL", "note"], rows,
                        align="r" + "r" * len(names) + "lrrl") + f"\n{SOL_NOTE}"
