"""Tensor-core peaks (fp16 and tf32 MMA, fp32 accumulate), measured once per device like the fp32 peak.

The speed-of-light bound divides a tensor-core candidate's flops by these peaks, so they must be at least
what the best kernel on the device reaches: a peak below cuBLAS would mark honest GEMMs ``suspect``.
Hence the instruction matters:

- On Hopper (sm_90) the peak is measured with ``wgmma.mma_async`` (warpgroup MMA, built for sm_90a),
  m64n256 tiles from 128-byte-swizzled shared memory, two warpgroups per SM keeping one batch in flight:
  the way cuBLAS and CUTLASS drive the tensor cores. ``mma.sync`` on an H100 issues from single warps
  and reaches well under the wgmma rate (cuBLAS hgemm runs at ~650-750 TFLOP/s there), so a peak taken
  with it would call honest wgmma kernels impossible.
- On Ampere and Ada (sm_80..sm_89) ``mma.sync`` *is* the fastest path (m16n8k16 fp16, m16n8k8 tf32),
  with many independent accumulators per warp so that the pipes stay full.
- Elsewhere (before sm_80; Blackwell's tcgen05 tensor cores) nothing is measured and the peaks stay
  None: the bound then keeps only its bytes term for tensor-core candidates, never a false ``suspect``.

The inputs are pseudo-random (not zeros), so the tensor cores draw real power and the clocks are those
a real GEMM sees. The kernel source is generated here (long inline-PTX operand lists), compiled with the
candidates' own build (compile_source, cached), and called through ctypes by the GPU worker's
``device-info`` command; its host function times the launches with CUDA events.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from cuda_llm.tools.compiler.compile import compile_source

KINDS = ("fp16", "tf32")


@dataclass(frozen=True)
class PeakPlan:
    """How the peak is measured on one architecture."""

    method: str             # "wgmma" or "mma.sync"
    build_arch: str         # what the peak kernel is compiled for
    threads: int            # per block
    blocks_per_sm: int
    flops_per_iter: dict[str, int]   # per block and loop iteration, by kind


def plan_for(arch: str) -> PeakPlan | None:
    """The measurement for ``sm_XY`` (a trailing ``a``/``f`` is ignored), or None where none applies."""
    digits = "".join(ch for ch in arch.split("_")[-1] if ch.isdigit())
    cc = int(digits) if digits else 0
    if cc == 90:
        # 2 warpgroups x 4 wgmma per iteration; m64n256k16 (fp16) and m64n256k8 (tf32).
        return PeakPlan("wgmma", "sm_90a", 256, 1,
                        {"fp16": 2 * 4 * 2 * 64 * 256 * 16, "tf32": 2 * 4 * 2 * 64 * 256 * 8})
    if 80 <= cc < 90:
        # 8 warps x 8 independent mma per iteration; m16n8k16 (fp16) and m16n8k8 (tf32).
        return PeakPlan("mma.sync", f"sm_{cc}", 256, 4,
                        {"fp16": 8 * 8 * 2 * 16 * 8 * 16, "tf32": 8 * 8 * 2 * 16 * 8 * 8})
    return None


# ------------------------------------------------------------------------------------------ sources
_COMMON = r"""
#include <cuda_runtime.h>
#include <cstdint>

// Pseudo-random bits, so that the tensor cores work on data that toggles like a real GEMM's.
__device__ __forceinline__ uint32_t mix(uint32_t x) {
    x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16;
    return x;
}
// fp16 in [-1, 1): sign, exponent 14 (0.5..1) or smaller, random mantissa; two per word.
__device__ __forceinline__ uint32_t two_halves(uint32_t h) {
    uint32_t lo = (h & 0x83FFu) | 0x3800u, hi = ((h >> 16) & 0x83FFu) | 0x3400u;
    return lo | (hi << 16);
}
// fp32 in [-1, 1) with a random mantissa (the tensor cores read its tf32 part).
__device__ __forceinline__ uint32_t one_float(uint32_t h) { return (h & 0x807FFFFFu) | 0x3F000000u; }
"""

_HOPPER = r"""
// 128-byte swizzled, K-major operand tiles: rows of 128 bytes, 8-row groups 1024 bytes apart.
__device__ __forceinline__ uint64_t smem_desc(const void* p) {
    uint64_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    return ((addr & 0x3FFFF) >> 4) | (uint64_t(16 >> 4) << 16) | (uint64_t(1024 >> 4) << 32) | (1ull << 62);
}

__global__ void __launch_bounds__(256, 1) peak_fp16(float* out, int iters, uint32_t seed) {
    __shared__ alignas(1024) uint32_t A[64 * 32];     // 64 rows x 128 bytes
    __shared__ alignas(1024) uint32_t B[256 * 32];    // 256 rows x 128 bytes
    for (int i = threadIdx.x; i < 64 * 32; i += blockDim.x) A[i] = two_halves(mix(seed + i));
    for (int i = threadIdx.x; i < 256 * 32; i += blockDim.x) B[i] = two_halves(mix(seed * 7 + i));
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // generic stores -> wgmma's async proxy
    __syncthreads();
    float d[128];
    #pragma unroll
    for (int j = 0; j < 128; ++j) d[j] = 0.f;
    for (int it = 0; it < iters; ++it) {
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        #pragma unroll
        for (int k = 0; k < 4; ++k) {
            uint64_t da = smem_desc(reinterpret_cast<const char*>(A) + 32 * k);
            uint64_t db = smem_desc(reinterpret_cast<const char*>(B) + 32 * k);
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {" WGMMA_D128 "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
                : WGMMA_OUT128 : "l"(da), "l"(db), "r"(1));
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    float s = 0.f;
    #pragma unroll
    for (int j = 0; j < 128; ++j) s += d[j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

__global__ void __launch_bounds__(256, 1) peak_tf32(float* out, int iters, uint32_t seed) {
    __shared__ alignas(1024) uint32_t A[64 * 32];
    __shared__ alignas(1024) uint32_t B[256 * 32];
    for (int i = threadIdx.x; i < 64 * 32; i += blockDim.x) A[i] = one_float(mix(seed + i));
    for (int i = threadIdx.x; i < 256 * 32; i += blockDim.x) B[i] = one_float(mix(seed * 7 + i));
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    float d[128];
    #pragma unroll
    for (int j = 0; j < 128; ++j) d[j] = 0.f;
    for (int it = 0; it < iters; ++it) {
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        #pragma unroll
        for (int k = 0; k < 4; ++k) {
            uint64_t da = smem_desc(reinterpret_cast<const char*>(A) + 32 * k);
            uint64_t db = smem_desc(reinterpret_cast<const char*>(B) + 32 * k);
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {" WGMMA_D128 "}, %128, %129, p, 1, 1;\n}\n"
                : WGMMA_OUT128 : "l"(da), "l"(db), "r"(1));
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    float s = 0.f;
    #pragma unroll
    for (int j = 0; j < 128; ++j) s += d[j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""

_AMPERE = r"""
// 8 independent accumulators per warp keep the tensor pipe busy; operands stay in registers.
__global__ void __launch_bounds__(256) peak_fp16(float* out, int iters, uint32_t seed) {
    uint32_t h = mix(seed + blockIdx.x * blockDim.x + threadIdx.x);
    uint32_t a0 = two_halves(h), a1 = two_halves(mix(h + 1)), a2 = two_halves(mix(h + 2)), a3 = two_halves(mix(h + 3));
    uint32_t b0 = two_halves(mix(h + 4)), b1 = two_halves(mix(h + 5));
    float d[8][4];
    #pragma unroll
    for (int j = 0; j < 8; ++j) d[j][0] = d[j][1] = d[j][2] = d[j][3] = 0.f;
    for (int it = 0; it < iters; ++it) {
        #pragma unroll
        for (int j = 0; j < 8; ++j)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    float s = 0.f;
    #pragma unroll
    for (int j = 0; j < 8; ++j) s += d[j][0] + d[j][1] + d[j][2] + d[j][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

__global__ void __launch_bounds__(256) peak_tf32(float* out, int iters, uint32_t seed) {
    uint32_t h = mix(seed + blockIdx.x * blockDim.x + threadIdx.x);
    uint32_t a0 = one_float(h), a1 = one_float(mix(h + 1)), a2 = one_float(mix(h + 2)), a3 = one_float(mix(h + 3));
    uint32_t b0 = one_float(mix(h + 4)), b1 = one_float(mix(h + 5));
    float d[8][4];
    #pragma unroll
    for (int j = 0; j < 8; ++j) d[j][0] = d[j][1] = d[j][2] = d[j][3] = 0.f;
    for (int it = 0; it < iters; ++it) {
        #pragma unroll
        for (int j = 0; j < 8; ++j)
            asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    float s = 0.f;
    #pragma unroll
    for (int j = 0; j < 8; ++j) s += d[j][0] + d[j][1] + d[j][2] + d[j][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""

_HOST = r"""
// Best time in ms of `reps` launches of one peak kernel (kind 0: fp16, 1: tf32) over `blocks` blocks.
extern "C" int tensor_peak_ms(int kind, int blocks, int threads, int iters, int reps, float* best_ms) {
    float* out = nullptr;
    if (cudaMalloc(&out, sizeof(float) * (size_t)blocks * threads) != cudaSuccess) return 1;
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    float best = 1e30f;
    for (int r = 0; r < reps + 1; ++r) {          // the first launch warms up and is not counted
        cudaEventRecord(start);
        if (kind == 0) peak_fp16<<<blocks, threads>>>(out, iters, 12345u + r);
        else peak_tf32<<<blocks, threads>>>(out, iters, 12345u + r);
        cudaEventRecord(stop);
        cudaEventSynchronize(stop);
        float ms = 0.f;
        cudaEventElapsedTime(&ms, start, stop);
        if (r > 0 && ms < best) best = ms;
    }
    int err = (int)cudaGetLastError();
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaFree(out);
    *best_ms = best;
    return err;
}
"""


def _wgmma_operand_macros() -> str:
    """``WGMMA_D128`` ("%0, %1, ... %127") and ``WGMMA_OUT128`` ("+f"(d[0]) ...): 128 accumulators."""
    regs = ", ".join(f"%{i}" for i in range(128))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(128))
    return f'#define WGMMA_D128 "{regs}"\n#define WGMMA_OUT128 {outs}\n'


def peak_source(arch: str) -> str | None:
    """The CUDA source of the peak kernels for ``arch``, or None where no tensor peak is measured."""
    plan = plan_for(arch)
    if plan is None:
        return None
    body = _wgmma_operand_macros() + _HOPPER if plan.method == "wgmma" else _AMPERE
    return _COMMON + body + _HOST


def gflops(plan: PeakPlan, kind: str, blocks: int, iters: int, ms: float) -> float:
    """Achieved GFLOP/s of one timed launch."""
    return plan.flops_per_iter[kind] * blocks * iters / (ms * 1e-3) / 1e9


# ------------------------------------------------------------------------------------------ measure
@dataclass(frozen=True)
class TensorPeaks:
    fp16_gflops: float | None
    tf32_gflops: float | None
    method: str | None


def measure_tensor_peaks(arch: str, sm_count: int, *, target_ms: float = 20.0, reps: int = 5) -> TensorPeaks:
    """Compile and run the peak kernels on the current device (the caller holds the CUDA context).

    Each kind is first timed briefly to size a launch of about ``target_ms``; the best of ``reps`` such
    launches gives the peak. Returns None peaks (and says so in ``method``) where nothing applies.
    """
    plan = plan_for(arch)
    source = peak_source(arch)
    if plan is None or source is None:
        return TensorPeaks(None, None, None)
    comp = compile_source(source, arch=plan.build_arch, filename="tensor_peak.cu")
    if not comp.ok or not comp.so_path:
        raise RuntimeError(f"the tensor-peak kernels did not compile for {plan.build_arch}:\n{comp.errors}")
    lib = ctypes.CDLL(comp.so_path)
    fn = lib.tensor_peak_ms
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
    fn.restype = ctypes.c_int
    blocks = sm_count * plan.blocks_per_sm
    found: dict[str, float] = {}
    for idx, kind in enumerate(KINDS):
        ms = ctypes.c_float(0.0)
        probe_iters = 256
        if fn(idx, blocks, plan.threads, probe_iters, 1, ctypes.byref(ms)) != 0:
            raise RuntimeError(f"the {kind} tensor-peak kernel failed on the device")
        iters = max(probe_iters, int(probe_iters * target_ms / max(ms.value, 1e-3)))
        if fn(idx, blocks, plan.threads, iters, reps, ctypes.byref(ms)) != 0:
            raise RuntimeError(f"the {kind} tensor-peak kernel failed on the device")
        found[kind] = gflops(plan, kind, blocks, iters, ms.value)
    return TensorPeaks(found["fp16"], found["tf32"], f"{plan.method} {plan.build_arch}")
