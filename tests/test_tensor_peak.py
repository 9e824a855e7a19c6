"""The tensor-core peak kernels: which instruction measures the peak on which architecture, and that the
kernels compile to the tensor instructions they are meant to time (real nvcc; the timing itself runs on
the GPU, tests/test_hopper_gpu.py)."""

from __future__ import annotations

import pytest

from cuda_llm.tools.harness import tensor_peak


def test_the_measuring_instruction_per_architecture():
    hopper = tensor_peak.plan_for("sm_90")
    assert hopper.method == "wgmma" and hopper.build_arch == "sm_90a" and tensor_peak.plan_for("sm_90a") == hopper
    # two warpgroups x four m64n256k16 (fp16) or m64n256k8 (tf32) per iteration
    assert hopper.flops_per_iter == {"fp16": 2 * 4 * 2 * 64 * 256 * 16, "tf32": 2 * 4 * 2 * 64 * 256 * 8}
    for arch in ("sm_80", "sm_86", "sm_89"):
        plan = tensor_peak.plan_for(arch)
        assert plan.method == "mma.sync" and plan.build_arch == arch
    for arch in ("sm_75", "sm_100", "sm_120"):     # no peak kernel: the peaks stay None
        assert tensor_peak.plan_for(arch) is None and tensor_peak.peak_source(arch) is None
        assert tensor_peak.measure_tensor_peaks(arch, 100) == tensor_peak.TensorPeaks(None, None, None)


def test_gflops_of_a_launch():
    plan = tensor_peak.plan_for("sm_90")
    # 132 blocks x 1000 iterations of 2^24 * 2 flops in 10 ms
    assert tensor_peak.gflops(plan, "fp16", 132, 1000, 10.0) == pytest.approx(132 * 1000 * plan.flops_per_iter["fp16"] / 1e-2 / 1e9)


@pytest.fixture(scope="module")
def peak_builds(nvcc_path, tmp_path_factory):
    """The peak kernels as the device-info command builds them (compile_source, the plan's target)."""
    from concurrent.futures import ThreadPoolExecutor

    from cuda_llm.tools.compiler.compile import compile_source

    root = tmp_path_factory.mktemp("peaks")

    def build(arch):
        plan = tensor_peak.plan_for(arch)
        return compile_source(tensor_peak.peak_source(arch), arch=plan.build_arch, cache_root=root, filename="tensor_peak")

    with ThreadPoolExecutor(2) as pool:
        hopper, ampere = pool.map(build, ("sm_90", "sm_80"))
    return {"sm_90a": hopper, "sm_80": ampere}


def test_peak_kernels_compile_to_the_tensor_instructions(peak_builds):
    hopper, ampere = peak_builds["sm_90a"], peak_builds["sm_80"]
    for r in (hopper, ampere):
        assert r.ok, r.errors
        assert {k.name.split("(")[0] for k in r.kernels} == {"peak_fp16", "peak_tf32"}
        assert not any(k.spills for k in r.kernels), r.kernels
    assert hopper.arch == "sm_90a" and ampere.arch == "sm_80"
    assert all(k.registers <= 255 and k.shared_bytes == 40960 for k in hopper.kernels)
    if hopper.sass is None:
        pytest.skip("cuobjdump not found (pip install -e '.[dev]' installs it)")
    assert hopper.sass.opcodes.get("HGMMA") and set(hopper.sass.tensor) == {"fp16", "tf32"}
    assert ampere.sass.opcodes.get("HMMA") and set(ampere.sass.tensor) == {"fp16", "tf32"}
    assert not hopper.sass.opcodes.get("HMMA"), "the Hopper peak must not fall back to mma.sync"
