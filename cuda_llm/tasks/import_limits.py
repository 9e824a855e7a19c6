"""How much an import may cost, and how its failures read: pure, no torch.

KernelBench's current files use inputs of 1-9 GB, so the import never runs a module at the file's own
sizes before it knows the cost: shapes come from the meta device, the checks run at small sizes, and the
full-size forwards (only a tolerance check) run when the estimate is under ``--max-memory`` (default: half
the memory available when the import starts) and a time limit. An allocation failure anywhere is named as
such: it is a fact about the importing machine, never about the module, so it never changes the task.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from pydantic import BaseModel

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "M": 1 << 20, "MB": 1 << 20, "G": 1 << 30, "GB": 1 << 30,
          "T": 1 << 40, "TB": 1 << 40}
_ALLOC_WORDS = ("not enough memory", "defaultcpuallocator", "out of memory", "cannot allocate memory",
                "std::bad_alloc", "failed to allocate")
# words of an error that says an op has no kernel for a dtype (the float64 fallback is for these only)
_DTYPE_WORDS = re.compile(r"dtype|scalar type|not implemented for '(Double|Float|Half|BFloat16|Long|Int|Bool)'|"
                          r"\bDouble\b|\bdouble\b|expected .*(Float|Half|Double)|same dtype|type mismatch", re.I)

# the rates a full-size estimate assumes (float64, PyTorch's own kernels); conservative for 2-16 cores
CPU_FLOPS, CPU_BYTES_S = 4e9, 2e9
GPU_FLOPS, GPU_BYTES_S = 2e12, 5e11
# peak memory of the full-size check (a float32 and a float64 forward), in multiples of the float32
# tensors (inputs, weights, outputs), as measured on KernelBench's level 1 (peak RSS over tensors): up to
# 6.5x without a convolution, up to 12.6x with one (PyTorch's CPU convolutions unfold their input)
PEAK_FACTOR = 8.0
CONV_PEAK_FACTOR = 16.0


class ImportLimits(BaseModel):
    """What the import may spend on the full-size check."""

    max_memory: int                       # bytes
    max_seconds: float = 120.0            # the full-size check's estimated time
    device: str = "cpu"                   # where the full-size check runs: "cuda" where a GPU is visible


def parse_memory(text: str) -> int:
    """``8G``, ``512M``, ``16GB``, ``1.5G`` or a byte count -> bytes."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", text or "")
    unit = (m.group(2).upper() if m else "")
    if not m or unit not in _UNITS or float(m.group(1)) <= 0:
        raise ValueError(f"--max-memory {text!r}: write a size such as 8G, 512M or 16GB")
    return int(float(m.group(1)) * _UNITS[unit])


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo (Linux), else physical memory, else None."""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def default_max_memory() -> int:
    """Half the memory available now: the import shares the machine (and the cores) with other work."""
    avail = available_memory()
    return max(1 << 30, avail // 2) if avail else 4 << 30


def human_bytes(n: float) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def is_allocation_failure(exc: BaseException) -> bool:
    """MemoryError, torch.OutOfMemoryError, or a RuntimeError of an allocator ("DefaultCPUAllocator: not
    enough memory", "CUDA out of memory")."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    return isinstance(exc, RuntimeError) and any(w in str(exc).lower() for w in _ALLOC_WORDS)


def is_dtype_error(exc: BaseException) -> bool:
    """An op without a kernel for a dtype, or two dtypes that do not mix (a hard-coded float32)."""
    return not is_allocation_failure(exc) and isinstance(exc, (RuntimeError, TypeError, NotImplementedError)) \
        and bool(_DTYPE_WORDS.search(str(exc)))


def clip(text: str, limit: int = 240) -> str:
    """One line, at most ``limit`` characters, cut at a word boundary (never mid-word) with an ellipsis."""
    line = " ".join(str(text).split())
    if len(line) <= limit:
        return line
    cut = line[:limit].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + " ..."


def error_line(exc: BaseException, limit: int = 240) -> str:
    return clip(f"{type(exc).__name__}: {exc}", limit)


@dataclass
class Estimate:
    """The full-size check's cost: peak memory and seconds, on the device it would run on."""

    tensor_bytes: int
    peak_bytes: int
    seconds: float
    device: str

    def describe(self) -> str:
        return (f"tensors {human_bytes(self.tensor_bytes)}; a float32 and a float64 forward need about "
                f"{human_bytes(self.peak_bytes)} and {self.seconds:.0f} s on the {self.device.upper()}")


def estimate(tensor_bytes: int, flops: float, device: str, convolution: bool = False) -> Estimate:
    """Peak memory and time of one float32 and one float64 forward at the file's sizes (see the rates above)."""
    flops_s, bytes_s = (GPU_FLOPS, GPU_BYTES_S) if device == "cuda" else (CPU_FLOPS, CPU_BYTES_S)
    factor = CONV_PEAK_FACTOR if convolution else PEAK_FACTOR
    seconds = 2 * (flops / flops_s + factor * tensor_bytes / bytes_s)
    return Estimate(tensor_bytes=int(tensor_bytes), peak_bytes=int(factor * tensor_bytes), seconds=seconds,
                    device=device)
