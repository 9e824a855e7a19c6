"""The speed-of-light bound: no correct kernel can run faster than its bytes over peak bandwidth or its
flops over peak rate. Pure; the peaks come from DeviceInfo (measured on the device, cached).

A time below the bound means the measurement cannot be trusted (work skipped or hidden from the timer).
The flops term applies only where the task's arithmetic is fp32 on CUDA cores: tensor cores (fp16 tasks,
or a candidate that uses mma/wmma/tf32) and integer work have other ceilings, so there only bytes count.
"""

from __future__ import annotations

import re

from cuda_llm.tasks.model import Task
from cuda_llm.results import DeviceInfo

# A result is suspect only below this fraction of the bound: a read-mostly stream runs ~5-10% faster than
# the device-to-device copy that measures the bandwidth peak, and clocks vary between runs.
SUSPECT_MARGIN = 0.8

_TENSOR = re.compile(r"\b(wmma|mma\.sync|wgmma|mma_sync|tf32|__nv_bfloat16|nvcuda)\b|\bmma\b")


def uses_tensor_cores(source: str) -> bool:
    return bool(_TENSOR.search(source))


def flops_term_applies(task: Task, *, tensor_cores: bool = False) -> bool:
    if tensor_cores or "tensor-cores" in task.tags:
        return False
    if any(p.kind == "pointer" and not p.dtype.is_float for p in task.params):
        return False
    return all(p.dtype.value == "float32" for p in task.params if p.kind == "pointer")


def sol_ms(task: Task, sizes: dict[str, int], device: DeviceInfo | None, *, tensor_cores: bool = False) -> float | None:
    """max(bytes / peak bandwidth, flops / peak fp32 rate) in ms; None without measured peaks."""
    if device is None or not device.peak_bandwidth_gbs:
        return None
    terms = [task.bytes_at(sizes) / (device.peak_bandwidth_gbs * 1e9) * 1e3]
    if device.peak_fp32_gflops and flops_term_applies(task, tensor_cores=tensor_cores):
        terms.append(task.flops_at(sizes) / (device.peak_fp32_gflops * 1e9) * 1e3)
    return max(terms)


def pct_of_sol(sol: float | None, median_ms: float) -> float | None:
    return 100.0 * sol / median_ms if sol is not None and median_ms > 0 else None


def below_sol(median_ms: float, sol: float | None, margin: float = SUSPECT_MARGIN) -> bool:
    return sol is not None and median_ms < margin * sol
