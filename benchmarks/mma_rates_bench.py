"""mma.sync vs wgmma tensor-core rates per input type, and the L2-to-SM read bandwidth, on the GPU: the
figures of cuda_llm/tools/bounds/tensor_rates.toml that the critic and the prompts read. GPU only.

The tensor kernels are the project's own peak kernels (tools/harness/tensor_peak.py): its Hopper wgmma kernels
(m64n256, two warpgroups per SM) and its Ampere mma.sync kernels (8 independent m16n8k16 / m16n8k8 accumulators
per warp), both built for sm_90a and run on the same device, so the two forms are compared alike. The L2 kernel
has every SM read a buffer that fits the L2 (after one warm pass) with 16-byte loads, many times.

    python benchmarks/mma_rates_bench.py [--write]      # --write rewrites the [sm_90] table with the figures
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

L2_SOURCE = r"""
#include <cuda_runtime.h>
__global__ void l2_read(const int4* __restrict__ buf, size_t n, int reps, int* out) {
    int4 acc = make_int4(0, 0, 0, 0);
    for (int r = 0; r < reps; ++r)
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
            int4 v = __ldcg(buf + ((i + r * 4099) % n));
            acc.x ^= v.x; acc.y ^= v.y; acc.z ^= v.z; acc.w ^= v.w;
        }
    if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x7fffffff) out[0] = 1;
}
extern "C" int l2_read_ms(size_t bytes, int blocks, int reps, float* ms) {
    int4* buf; int* out;
    if (cudaMalloc(&buf, bytes) != cudaSuccess || cudaMalloc(&out, 4) != cudaSuccess) return 1;
    cudaMemset(buf, 1, bytes);
    size_t n = bytes / sizeof(int4);
    l2_read<<<blocks, 512>>>(buf, n, 1, out);          // warm: the buffer now sits in L2
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    float best = 1e30f;
    for (int t = 0; t < 5; ++t) {
        cudaEventRecord(a); l2_read<<<blocks, 512>>>(buf, n, reps, out); cudaEventRecord(b);
        cudaEventSynchronize(b); float m; cudaEventElapsedTime(&m, a, b); if (m < best) best = m;
    }
    *ms = best; int err = (int)cudaGetLastError(); cudaFree(buf); cudaFree(out); return err;
}
"""


def tensor_rates(sm_count: int) -> dict[str, dict[str, float]]:
    from cuda_llm.tools.compiler.compile import compile_source
    from cuda_llm.tools.harness import tensor_peak as tp

    out: dict[str, dict[str, float]] = {}
    hopper, ampere = tp.plan_for("sm_90"), tp.plan_for("sm_80")
    forms = {"wgmma": (tp._COMMON + tp._wgmma_operand_macros() + tp._HOPPER + tp._HOST, hopper),
             "mma_sync": (tp._COMMON + tp._AMPERE + tp._HOST, ampere)}
    for form, (source, plan) in forms.items():
        comp = compile_source(source, arch="sm_90a", filename=f"{form}_rate.cu")
        if not comp.ok or not comp.so_path:
            raise SystemExit(f"{form}: the rate kernels did not compile: {comp.errors}")
        fn = ctypes.CDLL(comp.so_path).tensor_peak_ms
        fn.argtypes = [ctypes.c_int] * 5 + [ctypes.POINTER(ctypes.c_float)]
        blocks = sm_count * plan.blocks_per_sm
        out[form] = {}
        for idx, kind in enumerate(tp.KINDS):
            ms = ctypes.c_float(0.0)
            if fn(idx, blocks, plan.threads, 256, 1, ctypes.byref(ms)) != 0:
                raise SystemExit(f"{form} {kind}: the kernel failed")
            iters = max(256, int(256 * 20.0 / max(ms.value, 1e-3)))
            if fn(idx, blocks, plan.threads, iters, 5, ctypes.byref(ms)) != 0:
                raise SystemExit(f"{form} {kind}: the kernel failed")
            out[form][kind] = tp.gflops(plan, kind, blocks, iters, ms.value) / 1e3
    return out


def l2_rate(sm_count: int, l2_bytes: int) -> float:
    from cuda_llm.tools.compiler.compile import compile_source

    comp = compile_source(L2_SOURCE, arch="sm_90a", filename="l2_rate.cu")
    if not comp.ok or not comp.so_path:
        raise SystemExit(f"l2: did not compile: {comp.errors}")
    fn = ctypes.CDLL(comp.so_path).l2_read_ms
    fn.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
    size = (l2_bytes // 2) // 16 * 16
    reps = 50
    ms = ctypes.c_float(0.0)
    if fn(size, sm_count * 4, reps, ctypes.byref(ms)) != 0:
        raise SystemExit("l2: the kernel failed")
    return size * reps / (ms.value * 1e-3) / 1e9


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="rewrite the [sm_90] table of tensor_rates.toml")
    a = ap.parse_args(argv)
    import pycuda.autoinit  # noqa: F401 - a context for the ctypes calls
    import pycuda.driver as drv

    dev = drv.Context.get_device()
    sm = dev.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
    l2 = dev.get_attribute(drv.device_attribute.L2_CACHE_SIZE)
    rates = tensor_rates(sm)
    l2_gbs = l2_rate(sm, l2)
    name = dev.name()
    for form, r in rates.items():
        print(f"{form:9s} fp16 {r['fp16']:7.1f} TFLOP/s   tf32 {r['tf32']:7.1f} TFLOP/s")
    print(f"mma.sync / wgmma: fp16 {rates['mma_sync']['fp16'] / rates['wgmma']['fp16']:.2f}, "
          f"tf32 {rates['mma_sync']['tf32'] / rates['wgmma']['tf32']:.2f}")
    print(f"L2-to-SM read bandwidth: {l2_gbs:.0f} GB/s ({l2 / 2**20:.0f} MiB L2, half of it read by {sm * 4} blocks)")
    if a.write:
        day = datetime.date.today().isoformat()
        src = f"measured by benchmarks/mma_rates_bench.py on {name}, {day}"
        path = ROOT / "cuda_llm" / "tools" / "bounds" / "tensor_rates.toml"
        head = path.read_text().split("\n[sm_90]\n")[0] + "\n"       # the table's own header line, not the comment's
        path.write_text(head + f'[sm_90]\ndevice = "{name}"\n\n'
                        + "".join(f'[sm_90.{form}]\nfp16 = {r["fp16"]:.1f}\ntf32 = {r["tf32"]:.1f}\nmeasured = true\n'
                                  f'source = "{src} (the project\'s tensor-peak kernels, {form})"\n\n'
                                  for form, r in rates.items())
                        + f'[sm_90.l2]\nto_sm_gbs = {l2_gbs:.0f}\nmeasured = true\nsource = "{src}"\n')
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
