"""The roofline of one candidate: how close its time is to the floor set by bytes and flops. Pure.

The floor is max(bytes / peak bandwidth, flops / peak rate) with the task's own counts at the benchmark
sizes (the fewest bytes and operations any correct kernel needs) and the device's measured peaks
(DeviceInfo, from device_info.py), not datasheet numbers.

The rate is the one of the units the work runs on, chosen by compute_peaks.roofline_peaks (the module
that also gives the judge's speed-of-light bound its peak, and says where the two differ): the units the
build's SASS uses as the kernel runs them (tf32 tensor instructions in a task that forbids plain TF32 are
3xTF32, a third of the tf32 rate; HFMA2 arithmetic twice the fp32 rate), or, where the build is unknown,
the units the task is written for (an fp16-input GEMM-shaped task has the fp16 tensor-core roof: dividing
cuBLAS hgemm's flops by the fp32 rate put it at "1070% of speed of light"), switched to the tensor-core
roof when the profile shows the tensor pipes busy (``on_tensor_cores``). Tensor peaks come from DeviceInfo
when it has measured them; otherwise they are estimated from the measured fp32 rate and the
architecture's datasheet ratio, and the point says so.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from cuda_llm.results import DeviceInfo, SassSummary
from cuda_llm.tasks.model import Task
from cuda_llm.tools.compute_peaks import ComputeUnit, roofline_peaks


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
    compute_unit: ComputeUnit = "fp32"         # whose rate the compute roof is (compute_peaks.ComputeUnit)
    peak_compute_gflops: float | None = None   # that rate (fp32 FMA, packed half, or tensor cores)
    peak_compute_source: str | None = None     # "measured", "derived: ..." or "estimated: ..." (compute_peaks.Peak)
    tensor_unit: ComputeUnit | None = None     # the tensor-core roof the kernel uses or may use, if any
    tensor_peak_gflops: float | None = None    # its rate
    tensor_peak_source: str | None = None      # "measured", "derived: ..." or "estimated: ..." (no measured tensor peak)

    def summary(self) -> str:
        if self.attainable_ms is None:
            return f"{self.median_ms:.4g} ms; no measured peaks, {self.limiter}-bound by the task's nature"
        ai = "n/a" if self.arithmetic_intensity is None else f"{self.arithmetic_intensity:.3g}"
        unit = "" if self.compute_unit == "fp32" else f", {self.compute_unit} roof"
        if self.compute_unit != "fp32" and (self.peak_compute_source or "").startswith("estimated"):
            unit += f" ({self.peak_compute_source})"
        return (f"{self.median_ms:.4g} ms vs speed of light {self.attainable_ms:.4g} ms ({self.pct_of_sol:.3g}% of SOL, "
                f"{self.limiter}-limited{unit}; AI {ai} flop/B, {self.achieved_gbs or 0:.4g} GB/s, "
                f"{self.achieved_gflops or 0:.4g} GFLOP/s)")

    def on_tensor_cores(self) -> "RooflinePoint":
        """The same timing against the tensor-core roof the kernel uses or may use (itself when it has none)."""
        if self.tensor_unit is None or not self.tensor_peak_gflops or self.compute_unit == self.tensor_unit:
            return self
        return roofline_from_counts(
            self.bytes, self.flops, self.median_ms, peak_bandwidth_gbs=self.peak_bandwidth_gbs,
            peak_fp32_gflops=self.peak_fp32_gflops, fallback_limiter=self.limiter, compute_unit=self.tensor_unit,
            peak_compute_gflops=self.tensor_peak_gflops, peak_compute_source=self.tensor_peak_source,
            tensor_unit=self.tensor_unit, tensor_peak_gflops=self.tensor_peak_gflops,
            tensor_peak_source=self.tensor_peak_source)


def _pct(part: float | None, whole: float | None) -> float | None:
    return 100.0 * part / whole if part is not None and whole else None


def roofline_from_counts(bytes_: float, flops: float, median_ms: float, *, peak_bandwidth_gbs: float | None,
                         peak_fp32_gflops: float | None, fallback_limiter: Literal["memory", "compute"] = "memory",
                         compute_unit: ComputeUnit = "fp32", peak_compute_gflops: float | None = None,
                         peak_compute_source: str | None = None, tensor_unit: ComputeUnit | None = None,
                         tensor_peak_gflops: float | None = None, tensor_peak_source: str | None = None) -> RooflinePoint:
    """The roofline point from raw counts (for callers without a Task). The compute roof is
    ``peak_compute_gflops`` (default: the fp32 rate, measured)."""
    if median_ms <= 0:
        raise ValueError(f"median_ms must be positive, got {median_ms}")
    if peak_compute_gflops is None:
        rate, peak_compute_source = peak_fp32_gflops, "measured" if peak_fp32_gflops else None
    else:
        rate = peak_compute_gflops
    seconds = median_ms / 1e3
    ai = flops / bytes_ if bytes_ > 0 else None
    memory_ms = bytes_ / (peak_bandwidth_gbs * 1e9) * 1e3 if peak_bandwidth_gbs else None
    compute_ms = flops / (rate * 1e9) * 1e3 if rate else None
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
        ridge_intensity=(rate / peak_bandwidth_gbs) if peak_bandwidth_gbs and rate else None,
        memory_ms=memory_ms, compute_ms=compute_ms, attainable_ms=attainable,
        pct_of_sol=_pct(attainable, median_ms), limiter=limiter,
        pct_of_peak_bandwidth=_pct(achieved_gbs, peak_bandwidth_gbs),
        pct_of_peak_flops=_pct(achieved_gflops, rate), compute_unit=compute_unit, peak_compute_gflops=rate,
        peak_compute_source=peak_compute_source,
        tensor_unit=tensor_unit, tensor_peak_gflops=tensor_peak_gflops, tensor_peak_source=tensor_peak_source,
    )


def roofline_point(task: Task, sizes: dict, median_ms: float, device: DeviceInfo, *,
                   sass: SassSummary | None = None, tensor_cores: bool | None = None) -> RooflinePoint:
    """Arithmetic intensity, attainable time and % of speed of light of one timing at ``sizes``.

    ``sass``: the build's machine-code summary (CompileResult.sass; None: unknown), which says the units.
    ``tensor_cores``: without it, whether the kernel runs on tensor cores (None: unknown, then fp16
    GEMM-shaped tasks get the tensor roof and fp32 ones the fp32 roof). compute_peaks.roofline_peaks decides.
    """
    roof, tensor = roofline_peaks(task, device, sass, tensor_cores=tensor_cores)
    return roofline_from_counts(
        task.bytes_at(sizes), task.flops_at(sizes), median_ms,
        peak_bandwidth_gbs=device.peak_bandwidth_gbs, peak_fp32_gflops=device.peak_fp32_gflops,
        fallback_limiter=task.bound,
        compute_unit=roof.unit if roof is not None else "fp32",
        peak_compute_gflops=roof.gflops if roof is not None else None,
        peak_compute_source=roof.source if roof is not None else None,
        tensor_unit=tensor.unit if tensor is not None else None,
        tensor_peak_gflops=tensor.gflops if tensor is not None else None,
        tensor_peak_source=tensor.source if tensor is not None else None,
    )
