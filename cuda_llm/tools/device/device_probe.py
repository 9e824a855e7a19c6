"""What the CUDA driver says about a device (by its index among the visible ones, default 0), asked through
libcuda with ctypes, never through pycuda, so that it answers on machines without pycuda or without a driver
(CI, laptops)."""

from __future__ import annotations

import ctypes
import functools
from typing import Any

CC_MAJOR, CC_MINOR = 75, 76          # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR


@functools.lru_cache(maxsize=1)
def _driver() -> Any | None:
    """The initialised driver library, or None where there is none or cuInit fails."""
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        return lib if lib.cuInit(0) == 0 else None
    return None


def _device(lib: Any, index: int = 0) -> ctypes.c_int | None:
    dev = ctypes.c_int(0)
    return dev if lib.cuDeviceGet(ctypes.byref(dev), int(index)) == 0 else None


@functools.lru_cache(maxsize=1)
def cuda_device_count() -> int:
    """Number of CUDA devices the driver sees; 0 when there is no driver or no device."""
    lib = _driver()
    count = ctypes.c_int(0)
    if lib is None or lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


def has_cuda_device() -> bool:
    return cuda_device_count() > 0


def device_identity(index: int = 0) -> tuple[str, str] | None:
    """(name, driver version) of the ``index``-th visible device, or None without a driver or that device."""
    lib = _driver()
    dev = _device(lib, index) if lib is not None else None
    if dev is None:
        return None
    buf = ctypes.create_string_buffer(256)
    lib.cuDeviceGetName(buf, 256, dev)
    ver = ctypes.c_int(0)
    lib.cuDriverGetVersion(ctypes.byref(ver))
    return buf.value.decode(errors="replace"), str(ver.value)


def compute_capability(index: int = 0) -> tuple[int, int] | None:
    """(major, minor) of the ``index``-th visible device, or None without a driver or that device."""
    lib = _driver()
    dev = _device(lib, index) if lib is not None else None
    if dev is None:
        return None
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    if lib.cuDeviceGetAttribute(ctypes.byref(major), CC_MAJOR, dev) != 0:
        return None
    if lib.cuDeviceGetAttribute(ctypes.byref(minor), CC_MINOR, dev) != 0:
        return None
    return major.value, minor.value
