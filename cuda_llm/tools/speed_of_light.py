"""The speed-of-light bound: no correct kernel can run faster than its bytes over peak bandwidth or its
flops over the peak rate of the units it computes with. Pure; the peaks come from DeviceInfo (measured on
the device, cached), the units from the candidate's compiled machine code (sass.py, once per build).

A time below the bound means the measurement cannot be trusted (work skipped, replayed or hidden from the
timer). Every task with floating-point inputs and a flop count has a compute term:

- the fp32 peak for code on CUDA cores (twice that where the SASS does packed-half arithmetic, HFMA2);
- where the SASS has tensor-core instructions, the measured tensor peak of their input type (fp16/bf16,
  tf32; fp8 and int8 at twice the fp16 rate, which is the hardware ratio from sm_80 to sm_90): an fp32
  task whose candidate uses tf32 MMA (3xTF32) gets the tf32 peak, an hgemm on HGMMA the fp16 peak;
- the highest measured peak where the units are unknown (no cuobjdump): looser, never a false suspect;
- for a yardstick that calls a vendor library (its kernels are not in the object), the units the task is
  written for (``tensor-cores`` tasks: the tensor peak of their input type).

Where a needed peak was not measured (tensor peaks on architectures without a peak kernel), the compute
term is dropped rather than guessed. Integer tasks (sort, histogram) have bytes only.
"""

from __future__ import annotations

from cuda_llm.results import DeviceInfo, SassSummary
from cuda_llm.tasks.model import Task

# A result is suspect only below this fraction of the bound: a read-mostly stream runs ~5-10% faster than
# the device-to-device copy that measures the bandwidth peak, and clocks vary between runs.
SUSPECT_MARGIN = 0.8

# Tensor-core types without a peak kernel of their own, as multiples of the fp16 tensor rate (sm_80-sm_90).
_RATE_VS_FP16 = {"fp16": 1.0, "bf16": 1.0, "fp8": 2.0, "int8": 2.0, "int4": 4.0, "fp4": 4.0, "int1": 8.0, "fp64": 1.0}


def arithmetic_type(task: Task) -> str | None:
    """The floating-point type a task computes in (``fp16`` when an input is half precision, else
    ``fp32``), or None when it has no floating-point input or counts no flops (integer work)."""
    floats = [p for p in task.params if p.kind == "pointer" and p.dtype.is_float]
    if not floats:
        return None
    inputs = [p for p in floats if getattr(p, "role", "input") != "output"] or floats
    if any(p.dtype.value in ("float16", "bfloat16") for p in inputs):
        return "fp16"
    return "fp32"


def tensor_peak(device: DeviceInfo, kind: str) -> float | None:
    """The measured (or, for fp8/int8, derived) tensor-core peak for one input type, GFLOP/s."""
    if kind == "tf32":
        return device.peak_tf32_tc_gflops
    if device.peak_fp16_tc_gflops is None or kind not in _RATE_VS_FP16:
        return None
    return device.peak_fp16_tc_gflops * _RATE_VS_FP16[kind]


def compute_peak_gflops(task: Task, device: DeviceInfo, sass: SassSummary | None, *,
                        library: bool = False) -> float | None:
    """The peak rate the candidate's flops are divided by, or None when there is no compute term."""
    kind = arithmetic_type(task)
    if kind is None or not device.peak_fp32_gflops:
        return None
    fp32 = device.peak_fp32_gflops
    if sass is None and library:
        if "tensor-cores" in task.tags:
            return tensor_peak(device, "fp16" if kind == "fp16" else "tf32")
        return fp32
    if sass is None:            # units unknown: the fastest units this data type can run on
        if kind == "fp32":      # fp32 data on tensor cores is tf32 (or 3xTF32), never fp16
            return max(p for p in (fp32, device.peak_tf32_tc_gflops) if p)
        return max(p for p in (fp32, 2 * fp32, device.peak_fp16_tc_gflops) if p)
    peaks = [fp32]
    if sass.packed_half:
        peaks.append(2 * fp32)
    for t, count in sass.tensor.items():
        if count:
            p = tensor_peak(device, t)
            if p is None:
                return None     # tensor cores whose peak is unknown: no honest compute term
            peaks.append(p)
    return max(peaks)


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
