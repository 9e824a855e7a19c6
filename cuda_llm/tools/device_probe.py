"""Is there a CUDA device here? Asked through the driver library with ctypes, never through pycuda,
so that it answers on machines without pycuda or without a driver."""

from __future__ import annotations

import ctypes
import functools


@functools.lru_cache(maxsize=1)
def cuda_device_count() -> int:
    """Number of CUDA devices the driver sees; 0 when there is no driver or no device."""
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        if lib.cuInit(0) != 0:
            return 0
        count = ctypes.c_int(0)
        if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return count.value
    return 0


def has_cuda_device() -> bool:
    return cuda_device_count() > 0
