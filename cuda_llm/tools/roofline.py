"""The roofline of one candidate: how close its time is to the floor set by bytes and flops. Pure.

The floor is max(bytes / peak bandwidth, flops / peak rate) with the task's own counts at the benchmark
sizes (the fewest bytes and operations any correct kernel needs) and the device's measured peaks
(DeviceInfo, from device_info.py), not datasheet numbers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from cuda_llm.tasks.model import Task
from cuda_llm.results import DeviceInfo


class RooflinePoint(BaseModel):
    bytes: float
    flops: float
    median_ms: float
    arithmetic_intensity: float | None         # flops per byte (None when the task moves no bytes)
    achieved_gbs: float | None                 # bytes / median time
    achieved_gflops: float | None
    peak_bandwidth_gbs: float | None
    peak_fp32_gflops: float | None
    ridge_intensity: float | None              # flops/byte where the two roofs meet
    memory_ms: float | None                    # bytes / peak bandwidth
    compute_ms: float | None                   # flops / peak rate
    attainable_ms: float | None                # speed of light: the larger of the two
    pct_of_sol: float | None                   # 100 * attainable / median (100 = at the roof)
    limiter: Literal["memory", "compute"]      # which roof is lower at this intensity
    pct_of_peak_bandwidth: float | None = None
    pct_of_peak_flops: float | None = None

    def summary(self) -> str:
        if self.attainable_ms is None:
            return f"{self.median_ms:.4g} ms; no measured peaks, {self.limiter}-bound by the task's nature"
        ai = "n/a" if self.arithmetic_intensity is None else f"{self.arithmetic_intensity:.3g}"
        return (f"{self.median_ms:.4g} ms vs speed of light {self.attainable_ms:.4g} ms ({self.pct_of_sol:.3g}% of SOL, "
                f"{self.limiter}-limited; AI {ai} flop/B, {self.achieved_gbs or 0:.4g} GB/s, "
                f"{self.achieved_gflops or 0:.4g} GFLOP/s)")


def _pct(part: float | None, whole: float | None) -> float | None:
    return 100.0 * part / whole if part is not None and whole else None


def roofline_from_counts(bytes_: float, flops: float, median_ms: float, *, peak_bandwidth_gbs: float | None,
                         peak_fp32_gflops: float | None, fallback_limiter: Literal["memory", "compute"] = "memory") -> RooflinePoint:
    """The roofline point from raw counts (for callers without a Task)."""
    if median_ms <= 0:
        raise ValueError(f"median_ms must be positive, got {median_ms}")
    seconds = median_ms / 1e3
    ai = flops / bytes_ if bytes_ > 0 else None
    memory_ms = bytes_ / (peak_bandwidth_gbs * 1e9) * 1e3 if peak_bandwidth_gbs else None
    compute_ms = flops / (peak_fp32_gflops * 1e9) * 1e3 if peak_fp32_gflops else None
    known = [t for t in (memory_ms, compute_ms) if t is not None]
    attainable = max(known) if known else None
    if memory_ms is not None and compute_ms is not None:
        limiter: Literal["memory", "compute"] = "memory" if memory_ms >= compute_ms else "compute"
    else:
        limiter = fallback_limiter
    achieved_gbs = bytes_ / seconds / 1e9 if bytes_ > 0 else None
    achieved_gflops = flops / seconds / 1e9 if flops > 0 else None
    return RooflinePoint(
        bytes=bytes_, flops=flops, median_ms=median_ms, arithmetic_intensity=ai,
        achieved_gbs=achieved_gbs, achieved_gflops=achieved_gflops,
        peak_bandwidth_gbs=peak_bandwidth_gbs, peak_fp32_gflops=peak_fp32_gflops,
        ridge_intensity=(peak_fp32_gflops / peak_bandwidth_gbs) if peak_bandwidth_gbs and peak_fp32_gflops else None,
        memory_ms=memory_ms, compute_ms=compute_ms, attainable_ms=attainable,
        pct_of_sol=_pct(attainable, median_ms), limiter=limiter,
        pct_of_peak_bandwidth=_pct(achieved_gbs, peak_bandwidth_gbs),
        pct_of_peak_flops=_pct(achieved_gflops, peak_fp32_gflops),
    )


def roofline_point(task: Task, sizes: dict, median_ms: float, device: DeviceInfo) -> RooflinePoint:
    """Arithmetic intensity, attainable time and % of speed of light of one timing at ``sizes``."""
    return roofline_from_counts(
        task.bytes_at(sizes), task.flops_at(sizes), median_ms,
        peak_bandwidth_gbs=device.peak_bandwidth_gbs, peak_fp32_gflops=device.peak_fp32_gflops,
        fallback_limiter=task.bound,
    )
