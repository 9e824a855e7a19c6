"""The roofline of one candidate: how close its time is to the floor set by bytes and flops. Pure.

The floor is max(bytes / peak bandwidth, flops / peak rate) with the task's own counts at the benchmark
sizes (the fewest bytes and operations any correct kernel needs) and the device's measured peaks
(DeviceInfo, from device_info.py), not datasheet numbers.

The rate is the one of the units the work runs on. An fp16-input GEMM-shaped task has the fp16 tensor-core
roof (dividing cuBLAS hgemm's flops by the fp32 rate put it at "1070% of speed of light"). An fp32 task is
measured against the fp32 FMA rate, and against the tensor cores only when its kernel uses them
(``tensor_cores=True``; the diagnosis sets it from the profile's tensor pipe): TF32 where the tolerance
allows ~1e-3, else 3xTF32, whose three products per multiply-add run at a third of the TF32 rate.
Tensor peaks come from DeviceInfo when it has measured them; otherwise they are estimated from the
measured fp32 rate and the architecture's datasheet ratio, and the point says so.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from cuda_llm.results import DeviceInfo
from cuda_llm.tasks.model import Task
from cuda_llm.tasks.precision import tensor_kind

ComputeUnit = Literal["fp32", "fp16-tensor", "tf32-tensor", "3xtf32-tensor"]

# Dense tensor-core rate over the fp32 FMA rate, from the datasheets (no sparsity): (tf32, fp16 with fp32
# accumulation). Used only when DeviceInfo carries no measured tensor peak.
TENSOR_RATIO: dict[tuple[int, int], tuple[float, float]] = {
    (8, 0): (8.0, 16.0),     # A100: 19.5 fp32, 156 tf32, 312 fp16 TFLOP/s
    (8, 6): (2.0, 4.0),      # A40 / A10: 37.4, 74.8, 149.7
    (8, 9): (2.0, 4.0),      # L40S: 91.6, 183, 366
    (9, 0): (7.4, 14.8),     # H100 SXM: 67, 495, 989
    (10, 0): (14.0, 28.0),   # B200 (approximate)
    (12, 0): (2.0, 4.0),     # RTX 50 series (approximate)
}
# Attribute names a DeviceInfo may carry its measured tensor peaks under (GFLOP/s, dense).
_PEAK_NAMES = {
    "fp16": ("peak_fp16_tc_gflops", "peak_fp16_tensor_gflops", "peak_tensor_fp16_gflops"),
    "tf32": ("peak_tf32_tc_gflops", "peak_tf32_tensor_gflops", "peak_tensor_tf32_gflops"),
}


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
    compute_unit: ComputeUnit = "fp32"         # whose rate the compute roof is
    peak_compute_gflops: float | None = None   # that rate (fp32 FMA, or tensor cores)
    tensor_unit: ComputeUnit | None = None     # the tensor-core roof the task may use, if any
    tensor_peak_gflops: float | None = None    # its rate
    tensor_peak_source: str | None = None      # "measured" or "estimated: ..." (no measured tensor peak)

    def summary(self) -> str:
        if self.attainable_ms is None:
            return f"{self.median_ms:.4g} ms; no measured peaks, {self.limiter}-bound by the task's nature"
        ai = "n/a" if self.arithmetic_intensity is None else f"{self.arithmetic_intensity:.3g}"
        unit = "" if self.compute_unit == "fp32" else f", {self.compute_unit} roof"
        if self.compute_unit != "fp32" and self.tensor_peak_source and self.tensor_peak_source != "measured":
            unit += f" ({self.tensor_peak_source})"
        return (f"{self.median_ms:.4g} ms vs speed of light {self.attainable_ms:.4g} ms ({self.pct_of_sol:.3g}% of SOL, "
                f"{self.limiter}-limited{unit}; AI {ai} flop/B, {self.achieved_gbs or 0:.4g} GB/s, "
                f"{self.achieved_gflops or 0:.4g} GFLOP/s)")

    def on_tensor_cores(self) -> "RooflinePoint":
        """The same timing against the tensor-core roof the task may use (itself when it has none)."""
        if self.tensor_unit is None or not self.tensor_peak_gflops or self.compute_unit == self.tensor_unit:
            return self
        return roofline_from_counts(
            self.bytes, self.flops, self.median_ms, peak_bandwidth_gbs=self.peak_bandwidth_gbs,
            peak_fp32_gflops=self.peak_fp32_gflops, fallback_limiter=self.limiter, compute_unit=self.tensor_unit,
            peak_compute_gflops=self.tensor_peak_gflops, tensor_unit=self.tensor_unit,
            tensor_peak_gflops=self.tensor_peak_gflops, tensor_peak_source=self.tensor_peak_source)


def _pct(part: float | None, whole: float | None) -> float | None:
    return 100.0 * part / whole if part is not None and whole else None


def roofline_from_counts(bytes_: float, flops: float, median_ms: float, *, peak_bandwidth_gbs: float | None,
                         peak_fp32_gflops: float | None, fallback_limiter: Literal["memory", "compute"] = "memory",
                         compute_unit: ComputeUnit = "fp32", peak_compute_gflops: float | None = None,
                         tensor_unit: ComputeUnit | None = None, tensor_peak_gflops: float | None = None,
                         tensor_peak_source: str | None = None) -> RooflinePoint:
    """The roofline point from raw counts (for callers without a Task). The compute roof is
    ``peak_compute_gflops`` (default: the fp32 rate)."""
    if median_ms <= 0:
        raise ValueError(f"median_ms must be positive, got {median_ms}")
    rate = peak_compute_gflops if peak_compute_gflops is not None else peak_fp32_gflops
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
        tensor_unit=tensor_unit, tensor_peak_gflops=tensor_peak_gflops, tensor_peak_source=tensor_peak_source,
    )


def measured_tensor_peak(device: DeviceInfo, precision: Literal["fp16", "tf32"]) -> float | None:
    """The device's measured dense tensor-core rate (GFLOP/s), when DeviceInfo carries one."""
    for name in _PEAK_NAMES[precision]:
        v = getattr(device, name, None)
        if isinstance(v, (int, float)) and v > 0:
            return float(v)
    return None


def tensor_peak(device: DeviceInfo, kind: str) -> tuple[float | None, str | None]:
    """(rate in GFLOP/s, where it comes from) of a tensor-core path ('fp16', 'tf32', '3xtf32')."""
    precision: Literal["fp16", "tf32"] = "fp16" if kind == "fp16" else "tf32"
    rate = measured_tensor_peak(device, precision)
    source = "measured"
    if rate is None:
        ratio = TENSOR_RATIO.get(tuple(device.compute_capability))  # type: ignore[arg-type]
        if ratio is None or not device.peak_fp32_gflops:
            return None, None
        rate = device.peak_fp32_gflops * ratio[0 if precision == "tf32" else 1]
        source = f"estimated: fp32 rate x {ratio[0 if precision == 'tf32' else 1]:g} (datasheet ratio, sm_" \
                 f"{device.compute_capability[0]}{device.compute_capability[1]})"
    if kind == "3xtf32":
        rate /= 3.0
    return rate, source


def roofline_point(task: Task, sizes: dict, median_ms: float, device: DeviceInfo, *,
                   tensor_cores: bool | None = None) -> RooflinePoint:
    """Arithmetic intensity, attainable time and % of speed of light of one timing at ``sizes``.

    ``tensor_cores``: whether the kernel runs on tensor cores (None: unknown). fp16 GEMM-shaped tasks get
    the tensor roof unless it is False; fp32 tasks get it only when it is True.
    """
    kind = tensor_kind(task)
    unit: ComputeUnit | None = f"{kind}-tensor" if kind else None   # type: ignore[assignment]
    rate, source = tensor_peak(device, kind) if kind else (None, None)
    point = roofline_from_counts(
        task.bytes_at(sizes), task.flops_at(sizes), median_ms,
        peak_bandwidth_gbs=device.peak_bandwidth_gbs, peak_fp32_gflops=device.peak_fp32_gflops,
        fallback_limiter=task.bound, tensor_unit=unit if rate else None, tensor_peak_gflops=rate,
        tensor_peak_source=source,
    )
    use_tensor = tensor_cores if tensor_cores is not None else kind == "fp16"
    return point.on_tensor_cores() if use_tensor else point
