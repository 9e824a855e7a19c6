"""Which compute peak bounds a kernel: the units it runs on and the rate of each on a device. Pure.

The kernel's speed of light (speed_of_light.bound: the judge's ``suspect`` check, the roofline, the
diagnosis, the prompts and the reports, one bound computed one way) takes its compute peak from
``bound_peak``, the *fastest plausible* unit: the tensor-core peak of the input type of the tensor-core
instructions the build's SASS has (tf32 instructions at the full tf32 rate: a 3xTF32 split reaches a third
of it), else the fp32 FMA peak (twice that for packed-half arithmetic); units unknown from the build mean
the fastest the data type can run on; only peaks measured on the device (or derived from them by a fixed
hardware ratio) are used, and where a unit the kernel uses has no such peak the compute term is dropped
rather than guessed, so an honest kernel is never called ``suspect``.

Units come from the task's arithmetic type (fp16 when an input is half precision, else fp32), the
build's machine code (sass.py SassSummary: tensor-core instructions by input type, packed-half
arithmetic) and the task's tolerance (precision.py: plain TF32 needs ~1e-3), which ``as_run`` and
``may_use`` read for the advice (the tensor-core unit a GEMM-shaped task may move to, as it would run it).
"""

from __future__ import annotations

from typing import Literal, NamedTuple, get_args

from cuda_llm.results import DeviceInfo, SassSummary
from cuda_llm.tasks.model import Task
from cuda_llm.tasks.precision import TENSOR_FAMILIES, allows_plain_tf32

ComputeUnit = Literal["fp32", "fp16x2", "fp16-tensor", "bf16-tensor", "tf32-tensor", "3xtf32-tensor",
                      "fp8-tensor", "int8-tensor", "int4-tensor", "fp4-tensor", "int1-tensor", "fp64-tensor"]
UNITS: tuple[str, ...] = get_args(ComputeUnit)

# Tensor-core types without a peak kernel of their own, as multiples of the fp16 tensor rate (sm_80-sm_90).
# fp64 (DMMA) at the fp16 rate is an upper limit: right for a bound (never above the real rate).
RATE_VS_FP16 = {"fp16": 1.0, "bf16": 1.0, "fp8": 2.0, "int8": 2.0, "int4": 4.0, "fp4": 4.0, "int1": 8.0, "fp64": 1.0}

MEASURED = "measured"


class Peak(NamedTuple):
    """The rate of one unit on one device and where the figure comes from."""

    unit: ComputeUnit
    gflops: float
    source: str          # "measured", or "derived: ..." (a hardware ratio of a measured peak)


# ------------------------------------------------------------------------------------------ units
def arithmetic_type(task: Task) -> Literal["fp16", "fp32"] | None:
    """The floating-point type a task computes in (``fp16`` when an input is half precision, else
    ``fp32``), or None when it has no floating-point input or counts no flops (integer work)."""
    floats = [p for p in task.params if p.kind == "pointer" and p.dtype.is_float]
    if not floats:
        return None
    inputs = [p for p in floats if getattr(p, "role", "input") != "output"] or floats
    if any(p.dtype.value in ("float16", "bfloat16") for p in inputs):
        return "fp16"
    return "fp32"


def tensor_unit(kind: str) -> ComputeUnit:
    """The unit of a tensor-core input type as sass.tensor_kind names it (``fp16``, ``tf32``, ``fp8``...)."""
    unit = f"{kind}-tensor"
    if unit not in UNITS:
        raise ValueError(f"unknown tensor-core input type {kind!r}; known: "
                         f"{', '.join(u[:-7] for u in UNITS if u.endswith('-tensor'))}")
    return unit  # type: ignore[return-value]


def sass_units(sass: SassSummary) -> list[ComputeUnit]:
    """The units a build's machine code uses: CUDA cores always, packed half where it does half2
    arithmetic, and each tensor-core input type it has instructions for."""
    units: list[ComputeUnit] = ["fp32"]
    if sass.packed_half:
        units.append("fp16x2")
    units += [tensor_unit(kind) for kind, count in sorted(sass.tensor.items()) if count]
    return units


def as_run(unit: ComputeUnit, task: Task) -> ComputeUnit:
    """The unit as the kernel actually runs it: tf32 tensor instructions in a task whose tolerance
    forbids plain TF32 must be 3xTF32 (split precision, three products per multiply-add)."""
    return "3xtf32-tensor" if unit == "tf32-tensor" and not allows_plain_tf32(task) else unit


def written_for(task: Task) -> ComputeUnit | None:
    """The tensor-core unit a task is written for, or None: half-precision GEMM-shaped work (or a
    ``tensor-cores`` task) on fp16 tensor cores; an fp32 ``tensor-cores`` task on tf32 ones. What a vendor
    library does with the task."""
    kind = arithmetic_type(task)
    tagged = "tensor-cores" in task.tags
    if kind == "fp16" and (tagged or task.family in TENSOR_FAMILIES):
        return "fp16-tensor"
    if kind == "fp32" and tagged:
        return "tf32-tensor"
    return None


def may_use(task: Task) -> ComputeUnit | None:
    """The tensor-core unit a correct kernel of a GEMM-shaped task may run on, as it would run it (fp32
    data: TF32 where the tolerance allows ~1e-3, else 3xTF32), or None."""
    kind = arithmetic_type(task)
    if kind is None or (task.family not in TENSOR_FAMILIES and "tensor-cores" not in task.tags):
        return None
    return as_run("fp16-tensor" if kind == "fp16" else "tf32-tensor", task)


# ------------------------------------------------------------------------------------------ peaks
def _derived(unit: ComputeUnit, base: Peak, factor: float, why: str) -> Peak:
    if factor == 1.0:
        return Peak(unit, base.gflops, base.source)
    how = f"{base.unit} rate x {factor:.4g} ({why})"
    source = f"derived: {how}" if base.source == MEASURED else f"{base.source}, {how}"
    return Peak(unit, base.gflops * factor, source)


def _base(device: DeviceInfo, which: Literal["tf32", "fp16"]) -> Peak | None:
    measured = device.peak_tf32_tc_gflops if which == "tf32" else device.peak_fp16_tc_gflops
    return Peak(f"{which}-tensor", float(measured), MEASURED) if measured else None  # type: ignore[arg-type]


def unit_peak(device: DeviceInfo, unit: ComputeUnit) -> Peak | None:
    """The rate of ``unit`` on ``device``: measured, or derived from a measured peak by a fixed hardware
    ratio (packed half at twice fp32, 3xTF32 at a third of tf32, fp8/int8 at twice fp16, fp64 tensor work
    at the fp16 rate, an upper limit). None: not measured on this device."""
    if unit not in UNITS:
        raise ValueError(f"unknown compute unit {unit!r}; known: {', '.join(UNITS)}")
    fp32 = Peak("fp32", float(device.peak_fp32_gflops), MEASURED) if device.peak_fp32_gflops else None
    if unit == "fp32":
        return fp32
    if unit == "fp16x2":
        return _derived(unit, fp32, 2.0, "packed half") if fp32 else None
    if unit in ("tf32-tensor", "3xtf32-tensor"):
        base = _base(device, "tf32")
        if base is None or unit == "tf32-tensor":
            return base
        return _derived(unit, base, 1 / 3, "three tf32 products per multiply-add")
    kind = unit.removesuffix("-tensor")
    base = _base(device, "fp16")
    if base is None:
        return None
    return _derived(unit, base, RATE_VS_FP16[kind], f"{kind} vs fp16")


def _fastest(peaks: list[Peak | None]) -> Peak | None:
    known = [p for p in peaks if p is not None]
    return max(known, key=lambda p: p.gflops) if known else None


# ------------------------------------------------------------------------------------------ the bound
def bound_peak(task: Task, device: DeviceInfo, sass: SassSummary | None, *, library: bool = False) -> Peak | None:
    """The speed-of-light bound's compute peak: the fastest plausible unit, measured peaks only (the module
    doc says why). None: no compute term (integer work, no fp32 peak, or a unit used without a peak).

    ``sass`` None means the units are unknown: the fastest measured unit the data type can run on (fp32
    data on tensor cores is tf32 at best, never fp16; when one of those units has no measured peak, no
    compute term, as for a build known to use such a unit); with ``library`` (a yardstick whose kernels live in a vendor
    library) the units the task is written for instead."""
    kind = arithmetic_type(task)
    if kind is None or not device.peak_fp32_gflops:
        return None
    if sass is None and library:
        unit = written_for(task)
        return unit_peak(device, unit or "fp32")
    if sass is None:
        plausible: list[ComputeUnit] = (["fp32", "tf32-tensor"] if kind == "fp32"
                                        else ["fp32", "fp16x2", "fp16-tensor"])
        peaks = [unit_peak(device, u) for u in plausible]
        if any(p is None for p in peaks):
            return None         # the kernel may run on a unit nobody measured: no honest compute term
        return _fastest(peaks)
    peaks = [unit_peak(device, u) for u in sass_units(sass)]
    if any(p is None for p in peaks):
        return None             # units whose peak is unknown: no honest compute term
    return _fastest(peaks)
