"""Diagnosis benchmark: the verdict of the rule-based diagnosis on every recorded H100 profile of a known
kernel (naive baselines, library yardsticks, kernels tuned by hand, and public kernels the rules were not
written from), with the kernel's one speed-of-light bound (the unit its recorded build's SASS shows), the
estimated time lost per finding and the features suggested for the task. CPU only: reads the recordings of
tests/fixtures/ncu/ (record.py makes them on a GPU). Writes bench-out/diagnosis.md and prints the table.

    python benchmarks/diagnosis_bench.py [--out bench-out] [--fixtures tests/fixtures/ncu]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

def kind_of(entry: dict) -> str:
    """naive, library, tuned (kernels/*.cu) or public (kernels/public/*.cu): record.py's source field."""
    source = str(entry.get("source") or "naive")
    if source == "library":
        return source
    if not source.endswith(".cu"):
        return "naive"          # older recordings name the script that made them
    return "public" if source.startswith("public/") else "tuned"


def main(argv: list[str] | None = None) -> int:
    from cuda_llm.feature_db import applicable, load_catalogue, task_filters
    from cuda_llm.report.formats import md_table, render_table
    from cuda_llm.results import CompileResult, DeviceInfo, SassSummary
    from cuda_llm.tasks import load_task
    from cuda_llm.tools.profile.diagnosis import diagnose
    from cuda_llm.tools.profile.ncu_parse import profile_from_text
    from cuda_llm.tools.profile.roofline import roofline_point

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out")
    ap.add_argument("--fixtures", type=Path, default=ROOT / "tests" / "fixtures" / "ncu")
    a = ap.parse_args(argv)

    summary = json.loads((a.fixtures / "summary.json").read_text())
    pk = summary["peaks"]

    def device_for(entry: dict) -> DeviceInfo:
        """The peaks of the run that recorded the entry (record.py merge keeps them), else the file's."""
        e = entry.get("peaks") or pk
        more = {k: e[k] for k in ("peak_fp16_tc_gflops", "peak_tf32_tc_gflops") if e.get(k)}
        return DeviceInfo(name=e["device"], arch="sm_90", compute_capability=(9, 0), sm_count=e["sm_count"],
                          peak_bandwidth_gbs=e["copy_gbs"], peak_fp32_gflops=e["fma_gflops"], **more)

    catalogue = load_catalogue()
    rows, details = [], []
    for name, entry in summary["baselines"].items():
        csv = a.fixtures / f"{name}.csv"
        if not csv.exists():
            csv = a.fixtures / f"{name}_trimmed.csv"
        if not csv.exists() or "event_median_ms" not in entry:
            continue
        task = load_task(entry["task"]).task
        allowed = {f.id for f in applicable(catalogue, arch="sm_90", **task_filters(task))}
        p = profile_from_text(csv.read_text())
        build = (CompileResult(ok=True, arch="sm_90", source_hash=name, sass=SassSummary(**entry["sass"]))
                 if entry.get("sass") else None)   # the recorded build's SASS (record.py keeps it)
        r = roofline_point(task, entry["sizes"], entry["event_median_ms"], device_for(entry),
                           sass=build.sass if build is not None else None, library=entry.get("source") == "library")
        d = diagnose(p, r, build, allowed_features=allowed)
        losses = ", ".join(f"{x.rule} {x.share_pct:.0f}%" for x in d.losses[:3])
        sol = f"{d.pct_of_sol:.1f}" if d.pct_of_sol is not None else "-"
        rows.append([name, kind_of(entry), task.name, f"{entry['event_median_ms']:.4g}", sol,
                     d.roof or "-", d.bottleneck + (" (at roof)" if d.at_roof else ""),
                     losses, ", ".join(d.suggested_features[:4])])
        details.append(f"## {name}\n\n```\n{d.as_text()}\n```\n")
    headers = ["kernel", "kind", "task", "ms", "% SOL", "bound", "verdict", "largest estimated losses", "try first"]
    measured = sum(1 for e in summary["baselines"].values() if (e.get("peaks") or pk).get("peak_fp16_tc_gflops"))
    head = (f"{len(rows)} recorded kernels on {pk['device']} (copy {pk['copy_gbs']:.0f} GB/s, fp32 "
            f"{pk['fma_gflops'] / 1e3:.1f} TFLOP/s; tensor peaks measured for {measured} of them: a tensor-core "
            f"kernel without one is bounded by its bytes only). % SOL is the kernel's one bound "
            f"(speed_of_light.bound: the unit its SASS shows; '-' = bytes only)")
    print(head)
    print(render_table(headers, rows, align="lllrrllll"))
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "diagnosis.md").write_text(f"# Diagnosis verdicts on recorded profiles\n\n{head}\n\n"
                                        + md_table(headers, rows) + "\n\n" + "\n".join(details))
    return 0


if __name__ == "__main__":
    sys.exit(main())
