"""`cuda-llm profile TASK KERNEL.cu`: compile, time, profile with Nsight Compute, roofline and diagnosis."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from pydantic import BaseModel, Field

from cuda_llm.commands import one_line_errors
from cuda_llm.paths import cache_dir
from cuda_llm.report.formats import render_table
from cuda_llm.tools.harness.device_info import get_device_info

HELP = "profile one kernel with Nsight Compute and say what limits it"
DESCRIPTION = """Compile KERNEL.cu for TASK (a suite name or a task folder), test and time it with the harness,
profile one solve() call at the benchmark shape with Nsight Compute (ncu), place it on the roofline of
this GPU (measured peaks) and name the bottleneck with the metric values as evidence and the features
from the catalogue to try next.

The ncu report (.ncu-rep), its raw CSV page and profile.json go to --out (default: the cache
directory, profiles/<task>-<source hash>/). Open the report in Nsight Compute's GUI for the details.
Without ncu, or without permission for the GPU counters (ERR_NVGPUCTRPERM), the command still prints
the timing, the compile report and a roofline-only diagnosis, and says why there is no profile.
Exit code 0 for a profile of a passing kernel; 1 when the kernel is refused, fails, or no profile could
be made (no GPU, no ncu, no counter permission); 2 for bad arguments.
$CUDA_LLM_NCU names the ncu to use ("none" switches profiling off)."""


class ProfileReport(BaseModel):
    """Everything the command found out about one kernel (written as profile.json)."""

    task: str
    kernel_file: str
    sizes: dict[str, int]
    out_dir: str
    compile: dict = Field(default_factory=dict)
    status: str | None = None           # the harness's verdict (ok, wrong_answer...), None when not evaluated
    status_message: str = ""
    median_ms: float | None = None
    timing_source: str | None = None    # "harness" (event timing) or "ncu" (summed kernel durations)
    device: dict | None = None
    profile: dict = Field(default_factory=dict)
    roofline: dict | None = None
    diagnosis: dict = Field(default_factory=dict)
    seconds: dict[str, float] = Field(default_factory=dict)


def add_arguments(p: argparse.ArgumentParser) -> None:
    one_line_errors(p)
    p.add_argument("task", help="task name from the suite (see `cuda-llm tasks`) or a task folder")
    p.add_argument("kernel", type=Path, help="CUDA source defining the task's entry point")
    p.add_argument("--out", type=Path, help="folder for the report (default: <cache>/profiles/<task>-<hash>)")
    p.add_argument("--json", action="store_true", help="print the whole report as JSON")
    p.add_argument("--arch", help="GPU architecture, e.g. sm_90 (default: the local GPU)")
    p.add_argument("--size", action="append", default=[], metavar="NAME=VALUE",
                   help="override one benchmark size, e.g. --size n=1048576 (repeatable)")
    p.add_argument("--no-time", action="store_true", help="skip the harness's test and timing (roofline from ncu time)")
    p.add_argument("--source-counters", action="store_true",
                   help="also collect ncu's SourceCounters section (branch uniformity; about 2x slower)")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds before ncu is stopped (default 180)")


def _parse_sizes(items: list[str], benchmark: dict[str, int]) -> dict[str, int]:
    sizes = dict(benchmark)
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name.strip() not in benchmark:
            raise ValueError(f"--size {item!r}: write NAME=VALUE with NAME one of {sorted(benchmark)}")
        try:
            sizes[name.strip()] = int(value)
        except ValueError:
            raise ValueError(f"--size {item!r}: {value!r} is not an integer") from None
    return sizes


def render(report: ProfileReport, profile, diagnosis) -> str:
    from cuda_llm.report.profile_table import fmt as _fmt   # on use: the profile models cost ~6 ms of `--help`
    from cuda_llm.report.profile_table import metrics_rows

    out = [f"task {report.task}, kernel {report.kernel_file}, sizes " +
           ", ".join(f"{k}={v}" for k, v in report.sizes.items())]
    if report.compile.get("kernels"):
        out.append("compile: " + "; ".join(
            f"{k['name']}: {k['registers']} regs, {k['shared_bytes']} B smem"
            + (f", SPILLS {k['spill_store_bytes']}+{k['spill_load_bytes']} B" if k['spill_store_bytes'] or k['spill_load_bytes'] else "")
            for k in report.compile["kernels"]))
    if report.status is not None:
        out.append(f"harness: {report.status}" + (f" - {report.status_message}" if report.status != "ok" else ""))
    if report.median_ms is not None:
        out.append(f"time: {report.median_ms:.4g} ms ({report.timing_source})")
    if profile.available:
        out.append(f"\nNsight Compute ({profile.n_kernels} kernel(s), {_fmt(profile.duration_ms, ' ms')} per solve, "
                   f"profiled in {profile.seconds:.1f} s):")
        headers, rows = metrics_rows(profile)
        out.append(render_table(headers, rows, align="l" * len(headers)))
    else:
        out.append(f"\nno Nsight Compute profile: {profile.reason}")
    if report.roofline is not None:
        # imported on use, as in run()
        from cuda_llm.tools.profile.roofline import RooflinePoint

        point = RooflinePoint.model_validate(report.roofline)
        out.append("\nroofline: " + point.summary() + (f"\n{point.basis}" if point.basis else ""))
    shown = diagnosis.model_copy(update={"evidence": [e for e in diagnosis.evidence
                                                      if not e.startswith("no Nsight Compute profile")]})
    out.append("\ndiagnosis:\n" + shown.as_text())
    if profile.report_path:
        out.append(f"\nreport: {profile.report_path}")
    out.append(f"files: {report.out_dir}")
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    # the tasks, compiler and profiler (NumPy): imported on use, off the `--help` start-up
    from cuda_llm.commands.task_kernel import ArgumentProblem, load_task_argument, read_kernel_argument
    from cuda_llm.tools.compiler.compile import CompileSetupError, compile_source
    from cuda_llm.tools.profile.diagnosis import diagnose
    from cuda_llm.tools.profile.ncu import profile_candidate
    from cuda_llm.tools.profile.profile_models import ProfileOptions
    from cuda_llm.tools.profile.roofline import roofline_point

    try:
        loaded = load_task_argument(args.task)
        source = read_kernel_argument(args.kernel, loaded, refuse_empty=True)
        sizes = _parse_sizes(args.size, loaded.task.benchmark)
    except (ArgumentProblem, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    task = loaded.task
    # imported on use, as above
    from cuda_llm.tools.compiler.static_check import check_source

    issues = check_source(source, task)
    if issues:   # the harness would refuse it: say so once, before any compile line
        lines = "\n".join(f"  [{i.rule}] {i.message}" + (f" (line {i.line})" if i.line else "") for i in issues[:8])
        print(f"refused before compiling:\n{lines}", file=sys.stderr)
        return 1
    # this command prints why there is no profile itself: keep the runner's one-time warning quiet
    logging.getLogger("cuda_llm.tools.profile.ncu").setLevel(logging.ERROR)
    seconds: dict[str, float] = {}

    t = time.perf_counter()
    try:
        comp = compile_source(source, arch=args.arch)
    except (CompileSetupError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    seconds["compile"] = time.perf_counter() - t
    if not comp.ok:
        print(f"compilation failed ({comp.arch}):\n{comp.errors}", file=sys.stderr)
        return 1
    out_dir = args.out or cache_dir() / "profiles" / f"{task.name}-{comp.source_hash}"
    out_dir.mkdir(parents=True, exist_ok=True)
    report = ProfileReport(task=task.name, kernel_file=str(args.kernel), sizes=sizes, out_dir=str(out_dir),
                           compile=comp.model_dump(mode="json", include={"arch", "source_hash", "so_path", "kernels",
                                                                         "warnings", "cached"}))

    if not args.no_time:
        t = time.perf_counter()
        try:
            # the judge: imported on use, as above
            from cuda_llm.tools.harness.evaluate import EvalOptions, evaluate_candidate
        except ImportError:            # the harness is an optional part of a minimal install
            evaluate_candidate = None
        if evaluate_candidate is not None:
            ev = evaluate_candidate(loaded, source, candidate=args.kernel.name,
                                    options=EvalOptions(arch=args.arch), work_dir=out_dir / "eval")
            report.status, report.status_message = ev.status.value, ev.message
            if ev.timing is not None and ev.timing.sizes == sizes:
                report.median_ms, report.timing_source = ev.timing.median_ms, "harness"
        seconds["evaluate"] = time.perf_counter() - t

    t = time.perf_counter()
    profile = profile_candidate(loaded, comp.so_path or "", sizes=sizes, out_dir=out_dir,
                                options=ProfileOptions(timeout_s=args.timeout, source_counters=args.source_counters))
    seconds["profile"] = time.perf_counter() - t
    if report.median_ms is None and profile.available and profile.duration_ms:
        report.median_ms, report.timing_source = profile.duration_ms, "ncu"

    device = None
    try:
        device = get_device_info()
    except Exception as exc:  # peaks refine the diagnosis; without them it is judged from the profile alone
        print(f"note: no device peaks ({type(exc).__name__}: {exc})", file=sys.stderr)
    roof = None
    if report.median_ms and device is not None:
        roof = roofline_point(task, sizes, report.median_ms, device, sass=comp.sass)
        report.roofline = roof.model_dump(mode="json")
        report.device = device.model_dump(mode="json")
    diag = diagnose(profile, roof, comp)
    report.profile = profile.model_dump(mode="json")
    report.diagnosis = diag.model_dump(mode="json")
    report.seconds = seconds
    (out_dir / "profile.json").write_text(report.model_dump_json(indent=1))
    if args.json:
        print(report.model_dump_json(indent=1))
    else:
        print(render(report, profile, diag))
    # 0 only for a profile of a kernel that passed (or was not tested): a refusal, a failing kernel or no profile
    # at all (no GPU, no ncu, no permission) is a failure a script must see
    failed = report.status is not None and report.status not in ("ok", "suspect")
    return 0 if profile.available and not failed else 1
