"""The speed-of-light bound: no correct kernel can run faster than its bytes over peak bandwidth or its
flops over the peak rate of the units it computes with. Pure; the peaks come from DeviceInfo (measured on
the device, cached), the units from the candidate's compiled machine code (sass.py, once per build).

One bound per kernel, computed here and nowhere else: the judge's ``suspect`` check, the roofline and the
diagnosis, the prompts, the console, the reports and the plot all show this bound and its sentence
(``Bound.basis``), so a kernel is never "12% of one bound and 37% of another". Its compute peak is
compute_peaks.bound_peak, the fastest plausible unit:

- the fp32 FMA peak for code on CUDA cores (twice that where the SASS does packed-half arithmetic, HFMA2);
- where the SASS has tensor-core instructions, the measured tensor-core peak of their input type (fp16/bf16,
  tf32; fp8 and int8 at twice the fp16 rate, the hardware ratio from sm_80 to sm_90): a tensor-core kernel
  is measured against the tensor-core bound, an FFMA kernel against the fp32 one;
- split precision: an fp32 task whose tolerance plain TF32 cannot meet, computed on tf32, fp16 or bf16 tensor
  cores, must split each operand into a high and a low part and add several products per multiply-add
  (3xTF32: hi*hi + hi*lo + lo*hi; 3xFP16 the same on fp16; 2xFP16 where one operand is already exactly
  fp16). ``split_of`` recognizes the split from the machine code's tensor-core types and the task, and
  the bound counts that many products; the single-product bound is stated beside it (``single_ms``), so
  a kernel near its real bound reads so, not "24% of SOL";
- the fastest measured peak the data type can run on where the units are unknown (no cuobjdump): looser,
  never a false suspect;
- for a yardstick that calls a vendor library (its kernels are not in the object), the units the task is
  written for (half-precision GEMM-shaped or ``tensor-cores`` tasks: the tensor peak of their input type).

Where a needed peak was not measured (tensor peaks on architectures without a peak kernel), the compute
term is dropped rather than guessed. Integer tasks (sort, histogram) have bytes only.

A time below the bound means the measurement cannot be trusted (work skipped, replayed or hidden from the
timer).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from cuda_llm.figures import fmt_ms
from cuda_llm.results import DeviceInfo, SassSummary
from cuda_llm.tasks.model import Task
from cuda_llm.tasks.precision import allows_plain_tf32
from cuda_llm.tools.bounds.compute_peaks import ComputeUnit, arithmetic_type, bound_peak, written_for

__all__ = ["SOL_NOTE", "SUSPECT_MARGIN", "Bound", "Split", "split_of", "arithmetic_type", "below_sol", "bound", "compute_peak_gflops", "pct_of_sol",
           "sol_ms", "unit_label"]

# A result is suspect only below this fraction of the bound: a read-mostly stream runs ~5-10% faster than
# the device-to-device copy that measures the bandwidth peak, and clocks vary between runs.
SUSPECT_MARGIN = 0.8

# Under a table with a "% SOL" column: each row's % is of its own kernel's one bound.
SOL_NOTE = ("% SOL: of each kernel's one speed-of-light bound, its bytes over the measured bandwidth or its flops "
            "over the peak of the units its SASS uses (the tensor-core peak where it has tensor-core instructions, "
            "else the fp32 or packed-half FMA peak; a split-precision kernel, 3xTF32 or 3xFP16, counted at its products "
            "per multiply-add), whichever is larger.")

UNIT_LABELS: dict[str, str] = {"fp32": "fp32 FMA", "fp16x2": "packed-half FMA (HFMA2)"}


def unit_label(unit: str | None) -> str:
    """'fp32 FMA', 'tf32 tensor-core', ...: the unit a bound assumes, in words."""
    if unit is None:
        return "no compute"
    return UNIT_LABELS.get(unit, unit.replace("-tensor", " tensor-core"))


SPLIT_FAMILIES = frozenset({"matmul", "convolution", "attention"})


class Split(BaseModel):
    """A split-precision kernel: how many tensor-core products one multiply-add of the task costs."""

    name: str                                   # "3xTF32", "3xFP16", "2xFP16", "3xBF16"
    products: int
    why: str


def split_of(task: Task, sass: SassSummary | None) -> Split | None:
    """The split a kernel must be doing, recognized from its SASS's tensor-core input types and the task: fp32
    data whose tolerance plain TF32 products cannot meet (tasks/precision.allows_plain_tf32), computed on
    tf32, fp16 or bf16 tensor cores, keeps fp32 accuracy only by adding several products per multiply-add.
    None: no split (CUDA-core code, a task whose tolerance allows one product, other tensor types, a task whose
    outputs are not the products themselves). Only matrix products, convolutions and attention are counted:
    there every output is a sum of products that must be fp32-accurate, while a nearest-centroid search may
    screen candidates with one product and verify the few in fp32, and its bound must not call that
    honest kernel ``suspect``. Pure."""
    if sass is None or not sass.uses_tensor_cores or arithmetic_type(task) != "fp32" or allows_plain_tf32(task):
        return None
    if str(task.family) not in SPLIT_FAMILIES and "gemm" not in {str(t) for t in task.tags}:
        return None
    kinds = {k for k, n in sass.tensor.items() if n}
    if not kinds or kinds - {"tf32", "fp16", "bf16"}:
        return None
    halves = [p for p in task.inputs if str(getattr(p, "dtype", "")) in ("float16", "half")]
    floats = [p for p in task.inputs if str(getattr(p, "dtype", "")) == "float32"]
    base = "the task's tolerance needs fp32 accuracy, which one {k} product per multiply-add cannot give"
    if "fp16" in kinds:
        if halves and len(floats) == 1:
            return Split(name="2xFP16", products=2, why=base.format(k="fp16") + ": one operand is exactly fp16, "
                         "the other splits into a high and a low half, two products per multiply-add")
        return Split(name="3xFP16", products=3, why=base.format(k="fp16") + ": each operand splits into a high "
                     "and a low half, three products per multiply-add (hi*hi + hi*lo + lo*hi)")
    if "tf32" in kinds:
        return Split(name="3xTF32", products=3, why=base.format(k="tf32") + ": each operand splits into a high "
                     "and a low tf32 part, three products per multiply-add (hi*hi + hi*lo + lo*hi)")
    return Split(name="3xBF16", products=3, why=base.format(k="bf16") + ": a bf16 split needs three parts; "
                 "at least three products per multiply-add are counted")


class Bound(BaseModel):
    """The speed of light of one kernel at one shape and the sentence that says what it assumes."""

    ms: float                                   # max(memory_ms, compute_ms)
    memory_ms: float                            # the task's minimum bytes over the measured bandwidth
    compute_ms: float | None = None             # its flops over the peak of ``unit``; None: no compute term
    limiter: Literal["memory", "compute"]
    unit: ComputeUnit | None = None             # the compute peak's unit
    peak_gflops: float | None = None
    peak_bandwidth_gbs: float
    basis: str                                  # one sentence: which unit it assumes and why
    products: int = 1                           # tensor-core products per multiply-add (a split: 2 or 3)
    split: str = ""                             # the split's name ("3xTF32"), "" for none
    single_ms: float | None = None              # a split's bound at one product per multiply-add, beside it

    def pct(self, median_ms: float) -> float | None:
        return pct_of_sol(self.ms, median_ms)


def _why_unit(task: Task, sass: SassSummary | None, library: bool, unit: ComputeUnit | None) -> str:
    """Why the bound counts the flops at ``unit``'s peak."""
    if sass is None and library:
        return "a vendor library does the work, so the units the task is written for are assumed"
    if sass is None:
        return ("the build's machine code was not read, so the fastest unit the data type can run on is "
                "assumed (never a false suspect)")
    if sass.uses_tensor_cores:
        kinds = ", ".join(sorted(k for k, n in sass.tensor.items() if n))
        why = (f"the kernel's SASS has {kinds} tensor-core instructions, so it is measured against the "
               f"tensor-core bound")
        split = split_of(task, sass)
        if split is not None:
            why += (f"; {split.why}: a {split.name} split, so the bound counts {split.products} products per "
                    f"multiply-add at the tensor-core peak")
        return why
    if sass.packed_half:
        return "the kernel's SASS has packed-half arithmetic (HFMA2) and no tensor-core instructions"
    return "the kernel's SASS has no tensor-core instructions, so its flops run on the CUDA cores"


def bound(task: Task, sizes: dict[str, int], device: DeviceInfo | None, *, sass: SassSummary | None = None,
          library: bool = False) -> Bound | None:
    """The speed of light at ``sizes`` with its sentence; None without a measured bandwidth.

    ``sass`` is the build's machine-code summary (CompileResult.sass); None means unknown. ``library``
    marks a yardstick whose work happens in a vendor library (see the module doc)."""
    if device is None or not device.peak_bandwidth_gbs:
        return None
    nbytes, flops = task.bytes_at(sizes), task.flops_at(sizes)
    memory_ms = nbytes / (device.peak_bandwidth_gbs * 1e9) * 1e3
    peak = bound_peak(task, device, sass, library=library) if flops > 0 else None
    split = split_of(task, sass) if peak is not None and peak.unit and "tensor" in str(peak.unit) else None
    products = split.products if split is not None else 1
    single_ms = flops / (peak.gflops * 1e9) * 1e3 if peak is not None else None
    compute_ms = single_ms * products if single_ms is not None else None
    limiter: Literal["memory", "compute"] = "compute" if compute_ms is not None and compute_ms > memory_ms else "memory"
    ms = max(memory_ms, compute_ms or 0.0)
    mem = f"the task's minimum {nbytes / 1e6:.4g} MB over the measured bandwidth {device.peak_bandwidth_gbs:.0f} GB/s"
    if peak is not None:
        comp = (f"its {flops / 1e9:.4g} GFLOP" + (f" x {products} products ({split.name})" if split else "")
                + f" at the {unit_label(peak.unit)} peak {peak.gflops / 1e3:.4g} TFLOP/s")
        head = (f"{comp} ({fmt_ms(compute_ms)} ms) is larger than {mem} ({fmt_ms(memory_ms)} ms)" if limiter == "compute"
                else f"{mem} ({fmt_ms(memory_ms)} ms) is larger than {comp} ({fmt_ms(compute_ms)} ms)")
        why = _why_unit(task, sass, library, peak.unit)
    else:
        head = f"{mem} ({fmt_ms(memory_ms)} ms)"
        if flops <= 0 or arithmetic_type(task) is None:
            why = "the task counts no floating-point work, so only bytes bound it"
        else:
            missing = written_for(task) if sass is None and library else None
            why = ("no measured peak for the units it may use" + (f" ({unit_label(missing)})" if missing else "")
                   + ", so the bound counts bytes only")
    basis = f"Speed of light {fmt_ms(ms)} ms: {head}; {why}."
    if split is not None and single_ms is not None:
        basis += (f" At one product per multiply-add (no split) the bound would be "
                  f"{fmt_ms(max(memory_ms, single_ms))} ms.")
    return Bound(ms=ms, memory_ms=memory_ms, compute_ms=compute_ms, limiter=limiter,
                 unit=peak.unit if peak is not None else None, peak_gflops=peak.gflops if peak is not None else None,
                 peak_bandwidth_gbs=device.peak_bandwidth_gbs, basis=basis, products=products,
                 split=split.name if split else "", single_ms=max(memory_ms, single_ms) if split and single_ms else None)


def compute_peak_gflops(task: Task, device: DeviceInfo, sass: SassSummary | None, *,
                        library: bool = False) -> float | None:
    """The peak rate the candidate's flops are divided by, or None when there is no compute term."""
    peak = bound_peak(task, device, sass, library=library)
    return peak.gflops if peak is not None else None


def sol_ms(task: Task, sizes: dict[str, int], device: DeviceInfo | None, *, sass: SassSummary | None = None,
           library: bool = False) -> float | None:
    """max(bytes / peak bandwidth, flops / peak rate of the units used) in ms; None without measured peaks."""
    b = bound(task, sizes, device, sass=sass, library=library)
    return b.ms if b is not None else None


def pct_of_sol(sol: float | None, median_ms: float) -> float | None:
    return 100.0 * sol / median_ms if sol is not None and median_ms > 0 else None


def below_sol(median_ms: float, sol: float | None, margin: float = SUSPECT_MARGIN) -> bool:
    return sol is not None and median_ms < margin * sol
