"""A Nsight Compute profile as a table a person reads: one row per metric, one column per kernel, every value
with its unit. `cuda-llm profile`, `cuda-llm show` and the HTML report print the same rows."""

from __future__ import annotations

from typing import Any

from cuda_llm.tools.profile.profile_models import ProfileResult
from cuda_llm.tools.profile.ncu_parse import short_name
from cuda_llm.tools.profile.roofline import RooflinePoint


def fmt(v: float | None, unit: str = "", digits: int = 4) -> str:
    """A metric with its unit, '-' when Nsight Compute did not report it."""
    if v is None:
        return "-"
    return f"{v:.{digits}g}{unit}"


def metrics_rows(profile: ProfileResult) -> tuple[list[str], list[list[str]]]:
    """The metrics table: one row per metric, one column per kernel (kernels in launch order)."""
    kernels = profile.kernels
    headers = ["metric", *[short_name(k.name) + (f" x{k.launches}" if k.launches > 1 else "") for k in kernels]]

    def row(label, fn):
        return [label, *[fn(k) for k in kernels]]

    def stall(i):
        def f(k):
            if len(k.stalls) <= i:
                return "-"
            s = k.stalls[i]
            return f"{s.reason} {s.share_pct:.0f}%"
        return f

    rows = [
        row("duration", lambda k: fmt(k.duration_ns / 1e3 if k.duration_ns is not None else None, " us")),
        row("SM throughput", lambda k: fmt(k.sm_throughput_pct, "%", 3)),
        row("memory throughput", lambda k: fmt(k.memory_throughput_pct, "%", 3)),
        row("DRAM throughput", lambda k: fmt(k.dram_throughput_pct, "%", 3)),
        row("DRAM bytes", lambda k: fmt(k.dram_bytes / 1e6 if k.dram_bytes is not None else None, " MB")),
        row("L1 / L2 hit rate", lambda k: f"{fmt(k.l1_hit_rate_pct, '%', 3)} / {fmt(k.l2_hit_rate_pct, '%', 3)}"),
        row("L1 / L2 throughput", lambda k: f"{fmt(k.l1_throughput_pct, '%', 3)} / {fmt(k.l2_throughput_pct, '%', 3)}"),
        row("sectors/request ld/st", lambda k: f"{fmt(k.load_sectors_per_request, '', 3)} / "
                                               f"{fmt(k.store_sectors_per_request, '', 3)}"),
        row("occupancy achieved/theor.", lambda k: f"{fmt(k.achieved_occupancy_pct, '%', 3)} / "
                                                   f"{fmt(k.theoretical_occupancy_pct, '%', 3)}"),
        row("occupancy limiter", lambda k: k.occupancy_limiter or "none"),
        row("grid x block", lambda k: f"{k.grid_size or '-'} x {k.block_size or '-'}"),
        row("waves per SM", lambda k: fmt(k.waves_per_sm, "", 3)),
        row("registers/thread", lambda k: fmt(k.registers_per_thread, "", 3)),
        row("shared memory/block", lambda k: fmt(k.shared_bytes_per_block, " B", 6)),
        row("local (spill) traffic", lambda k: fmt(k.local_bytes, " B", 4)),
        row("bank conflicts", lambda k: "-" if k.bank_conflicts is None else
            f"{k.bank_conflicts:.0f}" + (f" ({k.bank_conflict_pct:.0f}%)" if k.bank_conflict_pct is not None else "")),
        row("threads per instruction", lambda k: fmt(k.threads_per_inst, " / 32", 3)),
        row("top stall", stall(0)),
        row("2nd stall", stall(1)),
        row("3rd stall", stall(2)),
    ]
    return headers, rows


def profile_tables(record: dict[str, Any]) -> tuple[str, list[str], list[list[str]]]:
    """(headline, headers, rows) of a stored profile (profiles/<id>.json's "profile" part): the headline says
    how many kernels and how long one call took, or why there is no profile (then no rows)."""
    prof = ProfileResult.model_validate(record)
    if not prof.available:
        return f"no Nsight Compute profile: {prof.reason or 'not recorded'}", [], []
    headers, rows = metrics_rows(prof)
    return f"Nsight Compute: {prof.n_kernels} kernel(s), {fmt(prof.duration_ms, ' ms')} per call", headers, rows


def roofline_line(record: dict[str, Any] | None) -> str:
    """The roofline point in one line ('' without one)."""
    if not record:
        return ""

    try:
        return RooflinePoint.model_validate(record).summary()
    except ValueError:
        return ""
