"""Profiling benchmark: what Nsight Compute costs per candidate, the measured peaks, and the diagnosis of
each baseline with the metrics behind it. Writes bench-out/profile.md and bench-out/profile.json.

    python benchmarks/profile_bench.py [--out bench-out] [--tasks gelu,nbody,...] [--fixtures DIR]

Needs a CUDA device, ncu and pycuda. Each baseline is timed by the harness (baseline_result, cached per
device), compiled, profiled once in the GPU worker at the benchmark shape, placed on the roofline and
diagnosed. --fixtures also copies each raw CSV page and a summary.json in the layout of
tests/fixtures/ncu/ (to refresh the parser's fixtures from a real run).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_TASKS = ["gelu", "softmax", "nbody", "sgemm", "cross_entropy", "prefix_sum"]


def bench_one(name: str, out: Path, device) -> dict:
    from cuda_llm.tasks import load_task
    from cuda_llm.tools.compiler.compile import compile_source
    from cuda_llm.tools.profile.diagnosis import diagnose
    from cuda_llm.tools.harness.evaluate import EvalOptions, baseline_result
    from cuda_llm.tools.harness.timing_budget import TimingBudget
    from cuda_llm.tools.profile.ncu import profile_candidate
    from cuda_llm.tools.profile.roofline import roofline_point

    loaded = load_task(name)
    entry: dict = {"task": name, "sizes": loaded.task.benchmark}
    t = time.perf_counter()
    ev = baseline_result(loaded, "naive", EvalOptions(budget=TimingBudget(time_budget_s=2.0)))
    entry["eval_seconds"] = time.perf_counter() - t
    if ev is None or not ev.status.passed or ev.timing is None:
        entry["error"] = f"baseline did not pass: {ev.status.value if ev else 'missing'} {ev.message if ev else ''}"
        return entry
    entry["event_median_ms"] = ev.timing.median_ms
    comp = compile_source(loaded.task.baseline_path.read_text())
    prof = profile_candidate(loaded, comp.so_path or "", out_dir=out / "profiles" / name)
    entry.update(profile_seconds=prof.seconds, available=prof.available, reason=prof.reason,
                 ncu_duration_ms=prof.duration_ms, n_kernels=prof.n_kernels, csv_path=prof.csv_path,
                 kernels=[k.model_dump(exclude={"raw"}) for k in prof.kernels])
    roof = roofline_point(loaded.task, ev.timing.sizes, ev.timing.median_ms, device, sass=comp.sass)
    diag = diagnose(prof, roof, comp)
    entry["roofline"] = roof.model_dump()
    entry["diagnosis"] = diag.model_dump()
    return entry


def key_metrics(e: dict) -> str:
    """The longest kernel's headline metrics on one line ("-" for each one Nsight Compute did not give)."""
    from cuda_llm.report.formats import fmt_fixed

    if not e.get("kernels"):
        return "-"
    k = max(e["kernels"], key=lambda k: k.get("duration_ns") or 0)
    pct = partial(fmt_fixed, digits=0, unit="%")
    spr = (k["global_load_sectors"] / k["global_load_requests"]
           if k.get("global_load_sectors") is not None and k.get("global_load_requests") else None)
    stall = k["stalls"][0] if k.get("stalls") else None
    return (f"SM {pct(k['sm_throughput_pct'])}, mem {pct(k['memory_throughput_pct'])}, "
            f"DRAM {pct(k['dram_throughput_pct'])}, "
            f"occ {pct(k['achieved_occupancy_pct'])}/{pct(k['theoretical_occupancy_pct'])}, "
            f"L1 hit {pct(k['l1_hit_rate_pct'])}, L2 hit {pct(k['l2_hit_rate_pct'])}, "
            f"regs {fmt_fixed(k['registers_per_thread'], 0)}, sectors/ld {fmt_fixed(spr, 1)}"
            + (f", top stall {stall['reason']} {pct(stall['share_pct'])}" if stall else ""))


def render(results: dict) -> str:
    dev = results["device"]
    lines = ["# Profiling benchmark", "",
             f"Device: {dev['name']} ({dev['arch']}, {dev['sm_count']} SMs), ncu {results.get('ncu_version')}.",
             f"Measured peaks: copy bandwidth {dev['peak_bandwidth_gbs']:.0f} GB/s (read + written), "
             f"fp32 FMA {dev['peak_fp32_gflops']:.0f} GFLOP/s.", "",
             "| baseline | kernels | harness ms | ncu ms | profiling s | % of SOL | bottleneck | first features |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, e in results["baselines"].items():
        if "error" in e:
            lines.append(f"| {name} | - | - | - | - | - | {e['error']} | - |")
            continue
        d, r = e["diagnosis"], e["roofline"]
        kernels = ", ".join(f"{k['name'].split('(')[0]}" + (f" x{k['launches']}" if k["launches"] > 1 else "")
                            for k in e["kernels"]) or "-"
        lines.append(f"| {name} | {kernels} | {e['event_median_ms']:.4g} | "
                     f"{e['ncu_duration_ms']:.4g} | {e['profile_seconds']:.1f} | "
                     f"{(r['pct_of_sol'] or 0):.3g} | {d['bottleneck']} | {', '.join(d['suggested_features'][:3])} |"
                     if e.get("ncu_duration_ms") else
                     f"| {name} | - | {e['event_median_ms']:.4g} | - | {e['profile_seconds']:.1f} | "
                     f"{(r['pct_of_sol'] or 0):.3g} | {d['bottleneck']} | {e.get('reason')} |")
    lines += ["", "## Diagnoses", ""]
    for name, e in results["baselines"].items():
        if "diagnosis" not in e:
            continue
        d = e["diagnosis"]
        lines += [f"### {name}: {d['bottleneck']}", "", f"Metrics (longest kernel): {key_metrics(e)}.", "",
                  d["summary"], ""] + [f"- {ev}" for ev in d["evidence"]] + \
                 [f"- try: {', '.join(d['suggested_features'])}", ""]
    secs = [e["profile_seconds"] for e in results["baselines"].values() if "profile_seconds" in e]
    if secs:
        lines.append(f"Profiling seconds per candidate: median {sorted(secs)[len(secs) // 2]:.1f} s, "
                     f"max {max(secs):.1f} s over {len(secs)} baselines.")
    return "\n".join(lines) + "\n"


def write_fixtures(results: dict, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    dev = results["device"]
    summary = {"peaks": {"device": dev["name"], "sm_count": dev["sm_count"], "copy_gbs": dev["peak_bandwidth_gbs"],
                         "fma_gflops": dev["peak_fp32_gflops"], "source": "device_info"},
               "baselines": {}}
    for name, e in results["baselines"].items():
        if e.get("csv_path") and Path(e["csv_path"]).exists():
            shutil.copy(e["csv_path"], folder / f"{name}.csv")
            summary["baselines"][name] = {k: e.get(k) for k in ("task", "sizes", "event_median_ms", "ncu_duration_ms",
                                                                 "profile_seconds", "n_kernels")}
    (folder / "summary.json").write_text(json.dumps(summary, indent=1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out")
    ap.add_argument("--tasks", default=",".join(DEFAULT_TASKS))
    ap.add_argument("--fixtures", type=Path, help="also write raw CSV pages and summary.json here")
    a = ap.parse_args(argv)

    from cuda_llm.tools.harness.device_info import get_device_info
    from cuda_llm.tools.profile.ncu import find_ncu, ncu_version

    ncu = find_ncu()
    t = time.perf_counter()
    device = get_device_info()
    if device is None or ncu is None:
        print("profile_bench needs a CUDA device and ncu: " + ("no device" if device is None else "no ncu"),
              file=sys.stderr)
        return 1
    a.out.mkdir(parents=True, exist_ok=True)
    results = {"device": device.model_dump(mode="json"), "device_info_seconds": time.perf_counter() - t,
               "ncu_version": ncu_version(ncu), "baselines": {}}
    for name in [x for x in a.tasks.split(",") if x]:
        t = time.perf_counter()
        try:
            results["baselines"][name] = bench_one(name, a.out, device)
        except Exception as exc:  # one broken baseline must not hide the others' figures
            results["baselines"][name] = {"task": name, "error": f"{type(exc).__name__}: {exc}"}
        results["baselines"][name]["total_seconds"] = time.perf_counter() - t
        e = results["baselines"][name]
        print(f"{name}: {e.get('diagnosis', {}).get('bottleneck', e.get('error'))}, "
              f"profiled in {e.get('profile_seconds', 0):.1f} s", flush=True)
        (a.out / "profile.json").write_text(json.dumps(results, indent=1, default=str))
    (a.out / "profile.md").write_text(render(results))
    if a.fixtures:
        write_fixtures(results, a.fixtures)
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
