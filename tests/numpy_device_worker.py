"""A test double of the GPU worker's device: worker_loop.Device on host memory, with "kernels" written in
NumPy (tests/numpy_kernels/*.py). The real worker loop (worker_loop.serve) runs on it in a real child
process, so the whole judge (runner, transport, checker, timing cross-check, exit handling) is tested on a
machine without a GPU. It is never a default: only tests pass its command line to the judge.

    python tests/numpy_device_worker.py [--free-memory BYTES] --request REQ.json --events-fd N

A kernel module defines ``solve(dev, *args)`` (pointers are ints; ``dev.view(ptr, dtype, count)`` gives a
NumPy view of device memory) and may define ``EVENT_SCALE`` (how the device reports event times).
"""

from __future__ import annotations

import argparse
import bisect
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from cuda_llm.tasks import load_task_folder
from cuda_llm.tools.harness import validate, worker_loop
from cuda_llm.tools.harness.worker_loop import DeviceFault
from cuda_llm.tools.harness.worker_protocol import ServeRequest

ALIGN = 256


class NumpyDevice:
    name = "NumPy test device"
    l2_bytes = 1 << 16
    flush_bytes = 2 * l2_bytes

    def __init__(self, free_memory: int = 1 << 34):
        self._bases: list[int] = []
        self._mem: dict[int, np.ndarray] = {}
        self._next = 1 << 20
        self._free = free_memory
        self.resets = 0

    # memory ------------------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> int:
        base = self._next
        self._mem[base] = np.zeros(max(1, nbytes), dtype=np.uint8)
        bisect.insort(self._bases, base)
        self._next += (max(1, nbytes) + ALIGN - 1) // ALIGN * ALIGN + 4096
        return base

    def free(self, ptr: int) -> None:
        if self._mem.pop(ptr, None) is not None:
            self._bases.remove(ptr)

    def _at(self, ptr: int, nbytes: int) -> np.ndarray:
        i = bisect.bisect_right(self._bases, ptr) - 1
        if i < 0:
            raise DeviceFault(f"illegal address {ptr:#x}")
        base = self._bases[i]
        buf = self._mem[base]
        off = ptr - base
        if off + nbytes > buf.size:
            raise DeviceFault(f"illegal address {ptr:#x} (+{nbytes} bytes)")
        return buf[off:off + nbytes]

    def view(self, ptr: int, dtype: Any, count: int) -> np.ndarray:
        dtype = np.dtype(dtype)
        return self._at(ptr, count * dtype.itemsize).view(dtype)

    def memset_d8(self, ptr: int, value: int, count: int) -> None:
        self._at(ptr, count)[:] = value

    def memset_d32(self, ptr: int, value: int, count: int) -> None:
        self._at(ptr, 4 * count).view(np.uint32)[:] = value

    def htod(self, ptr: int, host: np.ndarray) -> None:
        src = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
        self._at(ptr, src.size)[:] = src

    def dtoh(self, host: np.ndarray, ptr: int) -> None:
        dst = host.reshape(-1).view(np.uint8)
        dst[:] = self._at(ptr, dst.size)

    def dtod(self, dst: int, src: int, nbytes: int) -> None:
        self._at(dst, nbytes)[:] = self._at(src, nbytes)

    def sync(self) -> None:
        pass

    def free_memory(self) -> int:
        return self._free

    def staging(self, nbytes: int) -> np.ndarray:
        if getattr(self, "_staging", None) is None or self._staging.size < nbytes:
            self._staging = np.empty(max(1, nbytes), np.uint8)
        return self._staging

    def reset_persisting_l2(self) -> None:
        self.resets += 1

    def launch_error(self) -> str | None:
        return None

    # the harness's comparison of every timed call (device_compare.py's rule, on host memory) -----------------
    def load_compare(self, lib: str | None) -> None:
        self.compares = 0

    def compare(self, got: int, got_dtype: str, want: int, want_dtype: str, count: int, atol: float, rtol: float,
                exact: bool) -> int:
        self.compares += 1
        return validate.count_outside(self.view(got, got_dtype, count), self.view(want, want_dtype, count), atol, rtol,
                                      exact=exact)

    # the candidate -----------------------------------------------------------------------------------
    def load(self, so_path: str, entry: str) -> Any:
        sys.path.insert(0, str(Path(so_path).resolve().parent))      # kernels share helpers
        spec = importlib.util.spec_from_file_location("numpy_kernel", so_path)
        if spec is None or spec.loader is None:
            raise OSError(f"{so_path}: cannot be loaded")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.kernel = module
        return getattr(module, entry)

    def bind(self, fn: Any, args: list[tuple[str, Any]]) -> Callable[[], None]:
        values = [v for _, v in args]
        return lambda: fn(self, *values)

    def timed(self, call: Callable[[], None]) -> tuple[float, float, float]:
        t0 = time.perf_counter()
        call()
        t1 = time.perf_counter()
        ms = (t1 - t0) * 1e3
        return ms * getattr(self.kernel, "EVENT_SCALE", 1.0), ms, 0.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--free-memory", type=int, default=1 << 34)
    ap.add_argument("--request", required=True)
    ap.add_argument("--events-fd", type=int, required=True)
    args = ap.parse_args()
    req = ServeRequest.model_validate_json(Path(args.request).read_text())
    return worker_loop.serve(NumpyDevice(args.free_memory), load_task_folder(Path(req.task_folder)), req.so_path,
                             args.events_fd)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
