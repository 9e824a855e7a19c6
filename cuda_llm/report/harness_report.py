"""The harness benchmark's report: its table of per-task figures and harness.md.

Rows are benchmarks/harness_bench.py's dicts (figures in cuda_llm/tools/harness/harness_stats.py); the table goes
through the one text-table formatter (formats.render_table), so the console and the file read alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cuda_llm.report.formats import fmt_fixed, render_table
from cuda_llm.tools.harness.harness_stats import HarnessSummary
from cuda_llm.tools.bounds.speed_of_light import SOL_NOTE

HEADERS = ["task", "status", "naive ms", "library ms", "naive/lib", "% SOL", "lib % SOL", "RSE %", "spread %",
           "compile s", "valid. s", "timing s", "check s", "transp. s", "sets s", "start s", "eval s", "ncu ms",
           "event-ncu %"]


def harness_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """One line per task; the status reads naive/library where the task has a library baseline."""
    body = []
    for r in rows:
        status = r.get("status")
        if r.get("library_status"):
            status = f"{status}/{r['library_status']}"
        body.append([r["task"], status, r.get("median_ms"), r.get("library_ms"), r.get("naive_over_library"),
                     r.get("pct_of_sol"), r.get("library_pct_of_sol"),
                     100 * r["rse"] if r.get("rse") is not None else None, r.get("spread_pct"), r.get("compile_s"),
                     r.get("validation_s"), r.get("timing_s"), r.get("check_s"), r.get("transport_s"), r.get("sets_s"),
                     r.get("worker_start_s"), r.get("eval_s"), r.get("ncu_ms"), r.get("event_vs_ncu_pct")])
    return render_table(HEADERS, body)


def harness_markdown(rows: Sequence[Mapping[str, Any]], summary: HarnessSummary, repeats: int) -> str:
    """harness.md: the device's measured peaks, the table, the summary figures and every failed baseline."""
    dev = summary.device
    md = [f"# Harness benchmark on {dev.name}", "",
          f"Measured peaks: device-to-device copy {dev.peak_bandwidth_gbs or 0:.0f} GB/s (read + write), "
          f"fp32 FMA {(dev.peak_fp32_gflops or 0) / 1e3:.1f} TFLOP/s; L2 {dev.l2_bytes >> 20} MiB.", "",
          "```", harness_table(rows), "```", "", SOL_NOTE, "",
          f"Median evaluation (compile excluded, warm data): {fmt_fixed(summary.median_eval_s)} s "
          f"(the 8 first tasks: {fmt_fixed(summary.median_eval_s_first8)} s); "
          f"largest spread of the median over {repeats} timings (kernels >= 20 us): "
          f"{fmt_fixed(summary.max_spread_pct_ge_20us, 2)} %; "
          f"largest |event - ncu| (kernels >= 50 us): {fmt_fixed(summary.max_event_vs_ncu_pct_ge_50us)} %."]
    n_ok = sum(r.get("status") == "ok" for r in rows)
    libs = [r for r in rows if r.get("library_status")]
    md += ["", f"Naive baselines ok: {n_ok}/{len(rows)}; library baselines ok: "
               f"{sum(r['library_status'] == 'ok' for r in libs)}/{len(libs)}."]
    for r in rows:
        if r.get("status") not in ("ok",):
            md.append(f"- {r['task']} naive: {r.get('status')}: {r.get('message', '')}")
        if r.get("library_status") not in (None, "ok"):
            md.append(f"- {r['task']} library: {r['library_status']}: {r.get('library_message', '')}")
    return "\n".join(md) + "\n"
