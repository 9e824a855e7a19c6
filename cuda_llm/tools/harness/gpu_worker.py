"""The GPU worker: the only module that imports pycuda, and the only process that loads candidate code.

    python -m cuda_llm.tools.harness.gpu_worker serve --request REQ.json --events-fd N     (the judge's worker)
    python -m cuda_llm.tools.harness.gpu_worker run-once --request REQ.json                (for Nsight Compute)
    python -m cuda_llm.tools.harness.gpu_worker device-info --result RES.json

The candidate's .so is loaded with ctypes and called on buffers that pycuda allocated in the primary
context (``pycuda.autoprimaryctx``), which the CUDA runtime inside the .so shares. What the worker does
with them is worker_loop.py; this module is the Device it does it on. The worker computes no verdict
(checker.py, in the parent, does), and it runs with the environment runner.worker_env gives it: no
secrets, one GPU, a fresh working folder.
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

import pycuda.autoprimaryctx  # noqa: F401  (retains and pushes the primary context)
import pycuda.driver as cuda

from cuda_llm.paths import atomic_write
from cuda_llm.tasks import load_task_folder
from cuda_llm.tasks.inputs import make_case_inputs
from cuda_llm.results import DeviceInfo
from cuda_llm.tools.harness import worker_loop
from cuda_llm.tools.harness.worker_loop import Buffers, DeviceFault
from cuda_llm.tools.harness.worker_protocol import (COMPARE_TYPES, EXIT_CUDA_FAULT, EXIT_OK, DeviceInfoResponse,
                                            RunOnceRequest, ServeRequest, dump_json)

CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
FLUSH_MIN_BYTES = 64 << 20
_progress = worker_loop.progress
_CTYPES = {"int32": ctypes.c_int32, "uint32": ctypes.c_uint32, "int64": ctypes.c_int64, "float32": ctypes.c_float}


def _libcuda() -> ctypes.CDLL:
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise RuntimeError("libcuda (the CUDA driver library) cannot be loaded")


def _loaded_cudart() -> ctypes.CDLL | None:
    """The shared CUDA runtime the candidate's .so loaded (the compiler links with ``-cudart shared``):
    its cudaGetLastError reports the candidate's launch errors. A .so built with the static runtime keeps
    that error state private; a launch that failed then shows only as unwritten (poisoned) outputs."""
    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
        try:
            lib = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
        except OSError:
            continue
        lib.cudaGetErrorString.restype = ctypes.c_char_p
        return lib
    return None


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A driver error after the candidate ran means it broke the context: a fault, not the harness's."""
    def wrapper(*a: Any, **k: Any) -> Any:
        try:
            return fn(*a, **k)
        except cuda.Error as exc:
            raise DeviceFault(str(exc)) from exc
    return wrapper


class PycudaDevice:
    """worker_loop.Device on the primary context; every copy and memset on the legacy default stream."""

    def __init__(self) -> None:
        self.dev = cuda.Context.get_device()
        self.name = self.dev.name()
        self.l2_bytes = int(self.dev.get_attribute(cuda.device_attribute.L2_CACHE_SIZE))
        self.flush_bytes = max(2 * self.l2_bytes, FLUSH_MIN_BYTES)   # at least twice the L2: nothing survives
        self._allocs: dict[int, Any] = {}
        self._start, self._stop = cuda.Event(), cuda.Event()
        self._lib = _libcuda()
        self._reset = getattr(self._lib, "cuCtxResetPersistingL2Cache", None)
        self._staging: np.ndarray | None = None

    @_guarded
    def alloc(self, nbytes: int) -> int:
        a = cuda.mem_alloc(max(1, int(nbytes)))
        self._allocs[int(a)] = a
        return int(a)

    def free(self, ptr: int) -> None:
        a = self._allocs.pop(ptr, None)
        if a is not None:
            try:
                a.free()
            except cuda.Error:
                pass   # the context died with a fault; the process exits soon

    @_guarded
    def memset_d8(self, ptr: int, value: int, count: int) -> None:
        cuda.memset_d8(ptr, value, count)

    @_guarded
    def memset_d32(self, ptr: int, value: int, count: int) -> None:
        cuda.memset_d32_async(ptr, value, count)

    @_guarded
    def htod(self, ptr: int, host: np.ndarray) -> None:
        cuda.memcpy_htod(ptr, host)

    @_guarded
    def dtoh(self, host: np.ndarray, ptr: int) -> None:
        cuda.memcpy_dtoh(host, ptr)

    @_guarded
    def dtod(self, dst: int, src: int, nbytes: int) -> None:
        cuda.memcpy_dtod_async(dst, src, nbytes)

    @_guarded
    def sync(self) -> None:
        cuda.Context.synchronize()

    @_guarded
    def free_memory(self) -> int:
        return int(cuda.mem_get_info()[0])

    def staging(self, nbytes: int) -> np.ndarray:
        """A page-locked host buffer, grown as needed and reused: device-to-host copies run at full speed
        into it (pageable memory goes through the driver's bounce buffer)."""
        if self._staging is None or self._staging.size < nbytes:
            self._staging = None
            try:
                self._staging = cuda.pagelocked_empty(max(1, nbytes), np.uint8)
            except cuda.Error:
                self._staging = np.empty(max(1, nbytes), np.uint8)
        return self._staging

    def reset_persisting_l2(self) -> None:
        """Persisting-L2 limit 0 and every persisting line back to normal, before every timed call: a
        candidate that raised the limit or set an access-policy window keeps nothing in L2 across calls."""
        self._lib.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(0))
        if self._reset is not None:
            self._reset()

    def launch_error(self) -> str | None:
        lib = _loaded_cudart()
        if lib is None:
            return None
        code = lib.cudaGetLastError()
        if code == 0:
            return None
        return f"cudaGetLastError after solve(): {lib.cudaGetErrorString(code).decode(errors='replace')} (error {code})"

    def load(self, so_path: str, entry: str) -> Any:
        lib = ctypes.CDLL(str(Path(so_path).resolve()))
        fn = getattr(lib, entry)
        fn.restype = None
        return fn

    def bind(self, fn: Any, args: list[tuple[str, Any]]) -> Callable[[], None]:
        cargs = [ctypes.c_void_p(v) if kind == "ptr" else _CTYPES[kind](v) for kind, v in args]

        def call() -> None:
            try:
                fn(*cargs)
            except OSError as exc:   # ctypes turns a host-side access violation into OSError on some systems
                raise DeviceFault(f"solve() crashed on the host: {exc}") from exc
        return call

    def load_compare(self, lib: str | None) -> None:
        """device_compare.py's build, loaded once (its kernels run on the legacy default stream)."""
        if lib is None:
            raise RuntimeError("the GPU worker needs the comparison library to check every timed call")
        fn = ctypes.CDLL(str(Path(lib).resolve())).cuda_llm_count_bad
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong,
                       ctypes.c_double, ctypes.c_double, ctypes.c_int]
        fn.restype = ctypes.c_longlong
        self._compare = fn

    def compare(self, got: int, got_dtype: str, want: int, want_dtype: str, count: int, atol: float, rtol: float,
                exact: bool) -> int:
        return int(self._compare(got, COMPARE_TYPES[got_dtype], want, COMPARE_TYPES[want_dtype], count, atol, rtol,
                                 int(exact)))

    def timed(self, call: Callable[[], None]) -> tuple[float, float, float]:
        """(event ms, host ms of call + whole-device sync, ms the device stayed busy after the stop event)."""
        start, stop = self._start, self._stop
        try:
            cuda.Context.synchronize()              # the host clock starts with an idle device
            t0 = time.perf_counter()
            start.record()
            call()
            stop.record()
            stop.synchronize()
            t1 = time.perf_counter()
            cuda.Context.synchronize()              # whole device: work on other streams too
            t2 = time.perf_counter()
            return stop.time_since(start), (t2 - t0) * 1e3, (t2 - t1) * 1e3
        except cuda.Error as exc:
            raise DeviceFault(str(exc)) from exc


# ------------------------------------------------------------------------------------- subcommands
def _device() -> Any:
    return cuda.Context.get_device()


def cmd_serve(req: ServeRequest, events_fd: int) -> int:
    loaded = load_task_folder(Path(req.task_folder))
    return worker_loop.serve(PycudaDevice(), loaded, req.so_path, events_fd)


def cmd_run_once(req: RunOnceRequest) -> int:
    dev = PycudaDevice()
    loaded = load_task_folder(Path(req.task_folder))
    fn = dev.load(req.so_path, loaded.task.entry)
    inputs = make_case_inputs(loaded, dict(req.sizes), np.random.default_rng(req.seed))
    buf = Buffers(dev, loaded, dict(req.sizes))
    for name, arr in inputs.items():
        buf.upload(name, arr)
    call = dev.bind(fn, buf.args)
    buf.poison()
    call()                          # module load and first-touch outside the profiled range
    dev.sync()
    if dev._lib.cuProfilerStart() != 0:
        _progress("cuProfilerStart failed")
    for _ in range(req.repeat):
        call()
        dev.sync()
    dev._lib.cuProfilerStop()
    buf.free()
    return 0


_FMA_SRC = r"""
extern "C" __global__ void fma_peak(float* out, int iters, float a, float b) {
    float x[8];
    #pragma unroll
    for (int j = 0; j < 8; ++j) x[j] = threadIdx.x * 0.001f + j;
    for (int i = 0; i < iters; ++i) {
        #pragma unroll
        for (int j = 0; j < 8; ++j) x[j] = fmaf(x[j], a, b);
    }
    float s = 0.f;
    #pragma unroll
    for (int j = 0; j < 8; ++j) s += x[j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""


def _attr(dev: Any, name: str) -> int:
    a = getattr(cuda.device_attribute, name, None)
    if a is None:
        return 0
    try:
        return int(dev.get_attribute(a))
    except cuda.Error:
        return 0


def measure_bandwidth_gbs(nbytes: int = 1 << 30, reps: int = 10) -> float:
    """Device-to-device copy; bytes read plus bytes written over the best time."""
    src, dst = cuda.mem_alloc(nbytes), cuda.mem_alloc(nbytes)
    cuda.memset_d32(src, 1, nbytes // 4)
    start, stop = cuda.Event(), cuda.Event()
    best = float("inf")
    for i in range(reps + 2):
        start.record()
        cuda.memcpy_dtod_async(dst, src, nbytes)
        stop.record()
        stop.synchronize()
        if i >= 2:
            best = min(best, stop.time_since(start))
    src.free()
    dst.free()
    return 2 * nbytes / (best / 1e3) / 1e9


def measure_fp32_gflops(sm_count: int, arch: str) -> float | None:
    try:
        from pycuda.compiler import SourceModule
        mod = SourceModule(_FMA_SRC, arch=arch, no_extern_c=True, options=["-O3"])
    except Exception as exc:  # no nvcc at run time: the flops term of speed of light is then skipped
        _progress(f"fp32 peak not measured: {exc}")
        return None
    kern = mod.get_function("fma_peak")
    threads, blocks, iters = 256, sm_count * 16, 8192
    out = cuda.mem_alloc(threads * blocks * 4)
    start, stop = cuda.Event(), cuda.Event()
    best = float("inf")
    for i in range(6):
        start.record()
        kern(out, np.int32(iters), np.float32(0.9999), np.float32(1e-4), block=(threads, 1, 1), grid=(blocks, 1))
        stop.record()
        stop.synchronize()
        if i >= 1:
            best = min(best, stop.time_since(start))
    out.free()
    flops = 2.0 * 8 * iters * threads * blocks
    return flops / (best / 1e3) / 1e9


def _driver_text(cuda_version: int) -> str:
    """``580.159.04 (CUDA 13.0)``: the kernel driver (from /proc) and the CUDA version it supports."""
    cuda_txt = f"CUDA {cuda_version // 1000}.{(cuda_version % 1000) // 10}"
    try:
        words = Path("/proc/driver/nvidia/version").read_text().split()
    except OSError:
        return cuda_txt
    nv = next((w for w in words if w.count(".") >= 1 and w.replace(".", "").isdigit()), None)
    return f"{nv} ({cuda_txt})" if nv else cuda_txt


def cmd_device_info() -> DeviceInfoResponse:
    t0 = time.perf_counter()
    dev = _device()
    major, minor = dev.compute_capability()
    arch = f"sm_{major}{minor}"
    sm = _attr(dev, "MULTIPROCESSOR_COUNT")
    drv = cuda.get_driver_version()
    info = DeviceInfo(
        name=dev.name(), arch=arch, compute_capability=(major, minor), sm_count=sm,
        max_threads_per_block=_attr(dev, "MAX_THREADS_PER_BLOCK"),
        max_shared_per_block=_attr(dev, "MAX_SHARED_MEMORY_PER_BLOCK"),
        max_shared_per_block_optin=_attr(dev, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        max_shared_per_sm=_attr(dev, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        registers_per_block=_attr(dev, "MAX_REGISTERS_PER_BLOCK"),
        registers_per_sm=_attr(dev, "MAX_REGISTERS_PER_MULTIPROCESSOR"),
        l2_bytes=_attr(dev, "L2_CACHE_SIZE"), memory_bytes=int(dev.total_memory()),
        clock_khz=_attr(dev, "CLOCK_RATE"), memory_clock_khz=_attr(dev, "MEMORY_CLOCK_RATE"),
        memory_bus_bits=_attr(dev, "GLOBAL_MEMORY_BUS_WIDTH"),
        driver_version=_driver_text(drv),
    )
    info.peak_bandwidth_gbs = measure_bandwidth_gbs()
    info.peak_fp32_gflops = measure_fp32_gflops(sm, arch)
    measure_tensor_peaks_into(info)
    return DeviceInfoResponse(info=info, seconds=time.perf_counter() - t0)


def measure_tensor_peaks_into(info: DeviceInfo) -> None:
    """Tensor-core peaks (tensor_peak.py: wgmma on sm_90, mma.sync on sm_80-sm_89). A failure leaves them
    None, which keeps only the bytes term for tensor-core candidates, never a false suspect."""
    # local: every candidate's worker child loads this module; device facts (nvcc) load only for --device-info
    from cuda_llm.tools.harness.device_info import MEASUREMENT_VERSION
    from cuda_llm.tools.harness.tensor_peak import measure_tensor_peaks

    try:
        peaks = measure_tensor_peaks(info.arch, info.sm_count)
    except Exception as exc:  # no nvcc at run time, or a kernel failure: say so and go on
        _progress(f"tensor-core peaks not measured: {exc}")
        peaks = None
    if peaks is not None:
        info.peak_fp16_tc_gflops, info.peak_tf32_tc_gflops = peaks.fp16_gflops, peaks.tf32_gflops
        info.tensor_peak_method = peaks.method
    info.measurement_version = MEASUREMENT_VERSION


def _write(path: str, model: Any) -> None:
    atomic_write(Path(path), dump_json(model))


def main(argv: list[str] | None = None) -> int:
    faulthandler.enable(file=sys.stderr)      # a crash in the candidate's host code leaves a trace
    ap = argparse.ArgumentParser(prog="python -m cuda_llm.tools.harness.gpu_worker")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run-once")
    p.add_argument("--request", required=True)
    p = sub.add_parser("serve")
    p.add_argument("--request", required=True)
    p.add_argument("--events-fd", type=int, required=True)
    p = sub.add_parser("device-info")
    p.add_argument("--result", required=True)
    args = ap.parse_args(argv)
    if args.cmd == "run-once":
        return cmd_run_once(RunOnceRequest.model_validate_json(Path(args.request).read_text()))
    if args.cmd == "serve":
        return cmd_serve(ServeRequest.model_validate_json(Path(args.request).read_text()), args.events_fd)
    _write(args.result, cmd_device_info())
    return 0


if __name__ == "__main__":
    try:
        code = main()
    except DeviceFault as exc:              # run-once: the candidate faulted
        _progress(f"CUDA error: {exc}")
        code = EXIT_CUDA_FAULT
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if code is not None else EXIT_OK)   # no pycuda teardown: after a fault the context cannot be destroyed cleanly
