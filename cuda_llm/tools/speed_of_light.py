"""The speed-of-light bound: no correct kernel can run faster than its bytes over peak bandwidth or its
flops over the peak rate of the units it computes with. Pure; the peaks come from DeviceInfo (measured on
the device, cached), the units from the candidate's compiled machine code (sass.py, once per build).

A time below the bound means the measurement cannot be trusted (work skipped, replayed or hidden from the
timer). Every task with floating-point inputs and a flop count has a compute term; which peak it divides
by is compute_peaks.bound_peak, the fastest plausible unit (the roofline asks the same module for the
unit the kernel actually runs on):

- the fp32 peak for code on CUDA cores (twice that where the SASS does packed-half arithmetic, HFMA2);
- where the SASS has tensor-core instructions, the measured tensor peak of their input type (fp16/bf16,
  tf32; fp8 and int8 at twice the fp16 rate, which is the hardware ratio from sm_80 to sm_90): an fp32
  task whose candidate uses tf32 MMA (3xTF32) gets the full tf32 peak, an hgemm on HGMMA the fp16 peak;
- the highest measured peak the data type can run on where the units are unknown (no cuobjdump): looser,
  never a false suspect;
- for a yardstick that calls a vendor library (its kernels are not in the object), the units the task is
  written for (half-precision GEMM-shaped or ``tensor-cores`` tasks: the tensor peak of their input type).

Where a needed peak was not measured (tensor peaks on architectures without a peak kernel), the compute
term is dropped rather than guessed. Integer tasks (sort, histogram) have bytes only.
"""

from __future__ import annotations

from cuda_llm.results import DeviceInfo, SassSummary
from cuda_llm.tasks.model import Task
from cuda_llm.tools.compute_peaks import arithmetic_type, bound_peak

__all__ = ["SUSPECT_MARGIN", "arithmetic_type", "below_sol", "compute_peak_gflops", "pct_of_sol", "sol_ms"]

# A result is suspect only below this fraction of the bound: a read-mostly stream runs ~5-10% faster than
# the device-to-device copy that measures the bandwidth peak, and clocks vary between runs.
SUSPECT_MARGIN = 0.8


def compute_peak_gflops(task: Task, device: DeviceInfo, sass: SassSummary | None, *,
                        library: bool = False) -> float | None:
    """The peak rate the candidate's flops are divided by, or None when there is no compute term."""
    peak = bound_peak(task, device, sass, library=library)
    return peak.gflops if peak is not None else None


def sol_ms(task: Task, sizes: dict[str, int], device: DeviceInfo | None, *, sass: SassSummary | None = None,
           library: bool = False) -> float | None:
    """max(bytes / peak bandwidth, flops / peak rate of the units used) in ms; None without measured peaks.

    ``sass`` is the build's machine-code summary (CompileResult.sass); None means unknown. ``library``
    marks a yardstick whose work happens in a vendor library (see the module doc)."""
    if device is None or not device.peak_bandwidth_gbs:
        return None
    terms = [task.bytes_at(sizes) / (device.peak_bandwidth_gbs * 1e9) * 1e3]
    peak = compute_peak_gflops(task, device, sass, library=library)
    flops = task.flops_at(sizes)
    if peak and flops > 0:
        terms.append(flops / (peak * 1e9) * 1e3)
    return max(terms)


def pct_of_sol(sol: float | None, median_ms: float) -> float | None:
    return 100.0 * sol / median_ms if sol is not None and median_ms > 0 else None


def below_sol(median_ms: float, sol: float | None, margin: float = SUSPECT_MARGIN) -> bool:
    return sol is not None and median_ms < margin * sol
