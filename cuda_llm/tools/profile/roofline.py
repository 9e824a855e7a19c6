"""The roofline of one candidate: how close its time is to the floor set by bytes and flops. Pure.

The floor is the kernel's speed of light, speed_of_light.bound: max(bytes / peak bandwidth, flops / peak
rate) with the task's own counts at the benchmark sizes (the fewest bytes and operations any correct
kernel needs) and the device's measured peaks (DeviceInfo), the compute peak being the one of the units the
build's SASS shows (the tensor-core peak where it has tensor-core instructions, else the fp32 or packed-half
FMA peak). It is the same bound the judge uses and the prompts, the console and the reports show, with the
same sentence (``basis``). ``tensor_unit`` names the tensor-core unit the task may use, as it would run it
(3xTF32 where the tolerance forbids plain TF32): the diagnosis's advice, not a second bound.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from cuda_llm.figures import fmt_ms, fmt_pct
from cuda_llm.results import DeviceInfo, SassSummary
from cuda_llm.tasks.model import Task
from cuda_llm.tools.bounds.compute_peaks import ComputeUnit, may_use
from cuda_llm.tools.bounds.speed_of_light import bound


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
    split: str = ""                            # a split-precision kernel's split ("3xTF32"): speed_of_light.split_of
    pct_of_peak_bandwidth: float | None = None
    pct_of_peak_flops: float | None = None
    compute_unit: ComputeUnit | None = "fp32"  # whose rate the compute roof is (None: no compute term)
    peak_compute_gflops: float | None = None   # that rate (fp32 FMA, packed half, or tensor cores)
    tensor_unit: ComputeUnit | None = None     # the tensor-core unit the task may use, as it would run it
    basis: str | None = None                   # the bound's sentence (speed_of_light.Bound.basis)

    def summary(self) -> str:
        if self.attainable_ms is None:
            return f"{fmt_ms(self.median_ms)} ms; no measured peaks, {self.limiter}-bound by the task's nature"
        ai = "n/a" if self.arithmetic_intensity is None else f"{self.arithmetic_intensity:.3g}"
        unit = f", {self.compute_unit} bound" if self.compute_unit not in ("fp32", None) else ""
        # "the memory roof", not "memory-limited": which of the two bounds is the lower one, a fact of the
        # task and the units, not the kernel's bottleneck (that is the diagnosis's word)
        return (f"{fmt_ms(self.median_ms)} ms vs speed of light {fmt_ms(self.attainable_ms)} ms "
                f"({fmt_pct(self.pct_of_sol)}% of SOL; the bound is the {self.limiter} roof{unit}; AI {ai} flop/B, {self.achieved_gbs or 0:.4g} GB/s, "
                f"{self.achieved_gflops or 0:.4g} GFLOP/s)")


def _pct(part: float | None, whole: float | None) -> float | None:
    return 100.0 * part / whole if part is not None and whole else None


def roofline_from_counts(bytes_: float, flops: float, median_ms: float, *, peak_bandwidth_gbs: float | None,
                         peak_fp32_gflops: float | None, fallback_limiter: Literal["memory", "compute"] = "memory",
                         compute_unit: ComputeUnit | None = "fp32", peak_compute_gflops: float | None = None,
                         tensor_unit: ComputeUnit | None = None, basis: str | None = None) -> RooflinePoint:
    """The roofline point from raw counts (for callers without a Task). The compute roof is
    ``peak_compute_gflops`` (default: the fp32 rate, measured); ``compute_unit`` None: no compute term."""
    if median_ms <= 0:
        raise ValueError(f"median_ms must be positive, got {median_ms}")
    rate = None if compute_unit is None else (peak_fp32_gflops if peak_compute_gflops is None else peak_compute_gflops)
    seconds = median_ms / 1e3
    ai = flops / bytes_ if bytes_ > 0 else None
    memory_ms = bytes_ / (peak_bandwidth_gbs * 1e9) * 1e3 if peak_bandwidth_gbs else None
    compute_ms = flops / (rate * 1e9) * 1e3 if rate else None
    known = [t for t in (memory_ms, compute_ms) if t is not None]
    attainable = max(known) if known else None
    if memory_ms is not None and compute_ms is not None:
        limiter: Literal["memory", "compute"] = "memory" if memory_ms >= compute_ms else "compute"
    elif memory_ms is not None and compute_unit is None:
        limiter = "memory"
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
        tensor_unit=tensor_unit, basis=basis,
    )


def roofline_point(task: Task, sizes: dict, median_ms: float, device: DeviceInfo, *,
                   sass: SassSummary | None = None, library: bool = False) -> RooflinePoint:
    """Arithmetic intensity, attainable time and % of speed of light of one timing at ``sizes``: the
    kernel's one bound (speed_of_light.bound, with ``sass`` the build's machine-code summary, None:
    unknown; ``library`` a vendor-library yardstick)."""
    b = bound(task, sizes, device, sass=sass, library=library)
    return roofline_from_counts(
        task.bytes_at(sizes), task.flops_at(sizes), median_ms,
        peak_bandwidth_gbs=device.peak_bandwidth_gbs, peak_fp32_gflops=device.peak_fp32_gflops,
        fallback_limiter=b.limiter if b is not None else task.bound,
        compute_unit=b.unit if b is not None else "fp32",
        # a split-precision kernel's flops cost ``products`` tensor-core products each: its roof is the
        # tensor-core peak over that many (speed_of_light.split_of)
        peak_compute_gflops=b.peak_gflops / b.products if b is not None and b.peak_gflops else None,
        tensor_unit=may_use(task), basis=b.basis if b is not None else None,
    ).model_copy(update={"split": b.split if b is not None else ""})
